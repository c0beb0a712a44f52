/* orchestrator/cleanup: the real undo steps behind journal replay, and the dead-run scan.
 *
 * Design notes:
 * - Liveness is pid + start time, never a process name: a recycled pid has another start time.
 * - iptables rules are removed by running iptables inside the rule's namespace (fork, setns,
 *   exec); -C first so a rule already gone is not an error and the exit codes stay meaningful.
 * - Namespace-local records (sysctl, link, iptables in NS) whose namespace is gone are done:
 *   the kernel dropped them with it. */
#include "orchestrator/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "lib/sysctl.h"

static bool host_ns(const char *ns)
{
	return !strcmp(ns, "-");
}

/* State char and start time of pid; false when there is no such process. */
static bool proc_stat(pid_t pid, char *state, uint64_t *start)
{
	char path[64], buf[1024], *p;
	unsigned long long st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may contain spaces and ')' */
	if (!p || p[1] != ' ' || !p[2])
		return false;
	*state = p[2];
	p++;
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &st) != 1)
		return false;
	*start = st;
	return true;
}

bool cleanup_proc_alive(pid_t pid, uint64_t start_time)
{
	char state;
	uint64_t st;

	return pid > 0 && proc_stat(pid, &state, &st) && st == start_time && state != 'Z' &&
	       state != 'X';
}

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int undo_proc(const struct journal_record *r)
{
	pid_t pid = (pid_t)strtol(r->fields[0], NULL, 10);
	uint64_t st = strtoull(r->fields[1], NULL, 10);

	if (!cleanup_proc_alive(pid, st))
		return 0;
	kill(pid, SIGTERM);
	for (int i = 0; i < 300; i++) { /* 3 s to exit cleanly */
		if (!cleanup_proc_alive(pid, st))
			return 0;
		sleep_ms(10);
	}
	log_warn("cleanup: %s (pid %d) ignored SIGTERM, killing", r->fields[2], (int)pid);
	kill(pid, SIGKILL);
	for (int i = 0; i < 200; i++) {
		if (!cleanup_proc_alive(pid, st))
			return 0;
		sleep_ms(10);
	}
	log_error("cleanup: %s (pid %d) survives SIGKILL", r->fields[2], (int)pid);
	return -EBUSY;
}

/* Run argv (iptables) inside namespace nsfd (-1: here) with output discarded; returns the
 * exit status, or -errno when it could not run. */
static int run_in_ns(int nsfd, char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (!WIFEXITED(status))
		return -EINTR;
	return WEXITSTATUS(status);
}

static int undo_iptables(const struct journal_record *r)
{
	const char *ns = r->fields[0];
	char *argv[JOURNAL_MAX_FIELDS + 8];
	int nsfd = -1, rc, n = 0;

	if (!host_ns(ns)) {
		nsfd = netns_open(ns);
		if (nsfd == -ENOENT)
			return 0; /* the rule went with its namespace */
		if (nsfd < 0)
			return nsfd;
	}
	argv[n++] = (char *)"iptables";
	argv[n++] = (char *)"-w";
	argv[n++] = (char *)"5";
	argv[n++] = (char *)"-t";
	argv[n++] = r->fields[1];
	argv[n++] = (char *)"-C";
	argv[n++] = r->fields[2];
	for (int i = 3; i < r->nfields; i++)
		argv[n++] = r->fields[i];
	argv[n] = NULL;
	rc = run_in_ns(nsfd, argv);
	if (rc == 0) {
		argv[5] = (char *)"-D";
		rc = run_in_ns(nsfd, argv);
		if (rc != 0) {
			log_error("cleanup: iptables -t %s -D %s ... in %s: exit %d", r->fields[1],
				  r->fields[2], ns, rc);
			rc = rc < 0 ? rc : -EIO;
		}
	} else if (rc == 1) {
		rc = 0; /* no such rule (or chain): gone */
	} else {
		log_error("cleanup: iptables -t %s -C %s ... in %s: exit %d", r->fields[1],
			  r->fields[2], ns, rc);
		rc = rc < 0 ? rc : -EIO;
	}
	if (nsfd >= 0)
		close(nsfd);
	return rc;
}

static int enter_ns(const char *ns, int *saved)
{
	*saved = -1;
	if (host_ns(ns))
		return 0;
	return netns_enter(ns, saved);
}

static int undo_link(const struct journal_record *r)
{
	struct nl_sock *sk = NULL;
	struct rtnl_link *link = NULL;
	int saved = -1, rc;

	rc = enter_ns(r->fields[0], &saved);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	sk = nl_socket_alloc();
	link = rtnl_link_alloc();
	if (!sk || !link) {
		rc = -ENOMEM;
		goto out;
	}
	rc = nl_connect(sk, NETLINK_ROUTE);
	if (rc < 0) {
		rc = -EIO;
		goto out;
	}
	rtnl_link_set_name(link, r->fields[1]);
	rc = rtnl_link_delete(sk, link);
	if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV)
		rc = 0;
	else if (rc < 0) {
		log_error("cleanup: delete link %s in %s: %s", r->fields[1], r->fields[0],
			  nl_geterror(rc));
		rc = -EIO;
	}
out:
	rtnl_link_put(link);
	nl_socket_free(sk);
	netns_restore(&saved);
	return rc;
}

static int undo_sysctl(const struct journal_record *r)
{
	char cur[512];
	int saved = -1, rc;

	rc = enter_ns(r->fields[0], &saved);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	rc = sysctl_read(r->fields[1], cur, sizeof cur);
	if (rc == -ENOENT) {
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	if (!strcmp(cur, r->fields[2]))
		goto out; /* already restored */
	if (r->nfields == 4 && strcmp(cur, r->fields[3])) {
		/* Someone changed it after us: theirs now, leave it. */
		log_warn("cleanup: %s is %s, not the %s we set; leaving it", r->fields[1], cur,
			 r->fields[3]);
		goto out;
	}
	rc = sysctl_write(r->fields[1], r->fields[2]);
	if (rc < 0)
		log_error("cleanup: restore %s=%s: %s", r->fields[1], r->fields[2], strerror(-rc));
out:
	netns_restore(&saved);
	return rc;
}

static int undo_mount(const struct journal_record *r)
{
	if (umount2(r->fields[0], MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT) {
		log_error("cleanup: umount %s: %s", r->fields[0], strerror(errno));
		return -errno;
	}
	return 0;
}

int cleanup_undo(const struct journal_record *rec)
{
	int rc = -EINVAL;

	switch (rec->kind) {
	case JOURNAL_PROC:
		rc = undo_proc(rec);
		break;
	case JOURNAL_IPTABLES:
		rc = undo_iptables(rec);
		break;
	case JOURNAL_LINK:
		rc = undo_link(rec);
		break;
	case JOURNAL_SYSCTL:
		rc = undo_sysctl(rec);
		break;
	case JOURNAL_MOUNT:
		rc = undo_mount(rec);
		break;
	case JOURNAL_NETNS:
		rc = netns_delete(rec->fields[0]);
		if (rc < 0)
			log_error("cleanup: delete netns %s: %s", rec->fields[0], strerror(-rc));
		break;
	case JOURNAL_KIND_COUNT:
		break;
	}
	return rc;
}

static int ops_undo(void *arg, const struct journal_record *rec)
{
	(void)arg;
	return cleanup_undo(rec);
}

static const struct journal_ops system_ops = { .undo = ops_undo, .arg = NULL };

const struct journal_ops *cleanup_ops(void)
{
	return &system_ops;
}

int cleanup_journal(struct journal *j)
{
	struct journal_parsed *p = NULL;
	char err[256];
	int rc, failed = 0;

	rc = journal_load(journal_path(j), &p, err, sizeof err);
	if (rc < 0) {
		log_error("teardown: %s", err);
		return rc;
	}
	rc = journal_replay(p, cleanup_ops(), &failed);
	journal_parsed_free(&p);
	if (rc < 0) {
		log_error("teardown of %s: %d undo steps failed", journal_path(j), failed);
		return rc;
	}
	return journal_mark_ended(j);
}

/* Append "end" to a journal file that is not ours and drop its registry entry if it points
 * at this file. */
static int mark_file_ended(const char *path, const char *prefix)
{
	char reg[PATH_MAX], target[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, "end\n", 4) != 4 || fdatasync(fd) < 0)
		rc = -EIO;
	close(fd);
	if (snprintf(reg, sizeof reg, "%s/%s", journal_registry_dir(), prefix) >= (int)sizeof reg)
		return rc;
	n = readlink(reg, target, sizeof target - 1);
	if (n > 0) {
		target[n] = '\0';
		if (realpath(target, a) && realpath(path, b) && !strcmp(a, b))
			unlink(reg);
	}
	return rc;
}

int cleanup_journal_file(const char *path, unsigned flags, struct cleanup_report *rep)
{
	struct cleanup_report dummy = { 0 };
	struct journal_parsed *p = NULL;
	char err[256];
	int rc, failed = 0;

	if (!rep)
		rep = &dummy;
	rep->journals++;
	rc = journal_load(path, &p, err, sizeof err);
	if (rc < 0) {
		log_error("cleanup: %s: %s", path, err);
		rep->failed++;
		return rc;
	}
	if (p->ended) {
		rep->ended++;
		goto out;
	}
	if (!(flags & CLEANUP_FORCE) && cleanup_proc_alive(p->pid, p->start_time)) {
		log_info("cleanup: %s: run %s is alive (pid %d), skipped", path, p->prefix, (int)p->pid);
		rep->live++;
		goto out;
	}
	if (flags & CLEANUP_DRY_RUN) {
		log_info("cleanup: %s: would undo %zu records of run %s", path, p->n, p->prefix);
		rep->replayed++;
		goto out;
	}
	log_info("cleanup: %s: undoing %zu records of dead run %s (pid %d)", path, p->n, p->prefix,
		 (int)p->pid);
	rc = journal_replay(p, cleanup_ops(), &failed);
	if (rc < 0) {
		log_error("cleanup: %s: %d undo steps failed; re-run cleanup to retry", path, failed);
		rep->failed++;
		goto out;
	}
	rep->replayed++;
	rc = mark_file_ended(path, p->prefix);
out:
	journal_parsed_free(&p);
	return rc;
}

/* Candidate list, deduplicated by real path. */
struct paths {
	char **v;
	size_t n, cap;
};

static void paths_add(struct paths *ps, const char *path)
{
	char real[PATH_MAX];
	char **nv;

	if (!realpath(path, real))
		return;
	for (size_t i = 0; i < ps->n; i++)
		if (!strcmp(ps->v[i], real))
			return;
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;

		nv = realloc(ps->v, cap * sizeof *nv);
		if (!nv)
			return;
		ps->v = nv;
		ps->cap = cap;
	}
	ps->v[ps->n] = strdup(real);
	if (ps->v[ps->n])
		ps->n++;
}

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void scan_path(struct paths *ps, const char *path)
{
	char sub[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (stat(path, &st) < 0)
		return;
	if (S_ISREG(st.st_mode)) {
		paths_add(ps, path);
		return;
	}
	if (!S_ISDIR(st.st_mode))
		return;
	if (snprintf(sub, sizeof sub, "%s/%s", path, JOURNAL_FILE) < (int)sizeof sub && is_file(sub)) {
		paths_add(ps, sub);
		return;
	}
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof sub, "%s/%s/%s", path, e->d_name, JOURNAL_FILE) <
			    (int)sizeof sub &&
		    is_file(sub))
			paths_add(ps, sub);
	}
	closedir(d);
}

/* True when path is a unix socket nobody listens on any more (connect is refused). */
static bool dead_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	if (strlen(path) >= sizeof sa.sun_path)
		return false;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	while ((rc = connect(fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR)
		;
	rc = rc < 0 && errno == ECONNREFUSED;
	close(fd);
	return rc;
}

static void scan_registry(struct paths *ps)
{
	const char *dir = journal_registry_dir();
	char link[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(link, sizeof link, "%s/%s", dir, e->d_name) >= (int)sizeof link)
			continue;
		if (is_file(link)) {
			paths_add(ps, link);
		} else if (!lstat(link, &st) && S_ISSOCK(st.st_mode)) {
			/* The control socket of a run's link emulator (linkd-PREFIX.sock) shares this
			 * directory. A live run still talks to its emulator through it (timeline
			 * changes, counters): remove it only once nobody listens, as after a kill -9. */
			if (dead_socket(link))
				unlink(link);
		} else {
			/* Dangling: the run directory is gone, so is any way to know what it made. */
			log_warn("cleanup: registry entry %s points nowhere; removed", link);
			unlink(link);
		}
	}
	closedir(d);
}

int cleanup_run(const char *path, unsigned flags, struct cleanup_report *rep)
{
	struct paths ps = { 0 };
	int first = 0;

	scan_path(&ps, path ? path : CLEANUP_DEFAULT_ROOT);
	if (!(flags & CLEANUP_NO_REGISTRY))
		scan_registry(&ps);
	for (size_t i = 0; i < ps.n; i++) {
		int rc = cleanup_journal_file(ps.v[i], flags, rep);

		if (rc < 0 && first == 0)
			first = rc;
		free(ps.v[i]);
	}
	free(ps.v);
	return first;
}
