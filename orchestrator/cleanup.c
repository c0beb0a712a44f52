/* orchestrator/cleanup: trust checks, the real undo steps behind journal replay, the dead-run
 * scan (policy in cleanup.h).
 *
 * Design notes:
 * - Refuse first, act after: a journal is opened through a chain of O_NOFOLLOW directory fds
 *   (so no component can be swapped for a symlink between the check and the read), checked
 *   whole (file, directories, header, every record), and only then replayed.
 * - Liveness is pid + start time, never a process name: a recycled pid has another start time.
 *   Killing goes through a pidfd taken before the last check, so the signal reaches exactly the
 *   process that was checked, and exit is awaited by polling that pidfd (bounded).
 * - iptables rules are removed by running iptables inside the rule's namespace (netns_exec);
 *   -C first so a rule already gone is not an error and the exit codes stay meaningful.
 * - Namespace-local records (rules in NS) whose namespace is gone are done: the kernel dropped
 *   them with it.
 * - The run's sockets, the link emulator's (REGISTRY/linkd-PREFIX.sock) and the control plane's
 *   (ctl_endpoint_for the journal's run directory and prefix), are removed after a replay once
 *   nobody listens on them.
 * - A cgroup is removed by path only (orchestrator/cgroup): tasks left in it are moved to the
 *   hierarchy's root, never signalled; the run's processes are the `proc` records' business. */
#include "orchestrator/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/ctl.h"
#include "lib/log.h"
#include "lib/netns.h"
#include "lib/sysctl.h"
#include "orchestrator/cgroup.h"
#include "orchestrator/hostshare.h"

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -EPERM)

static char program_dir[PATH_MAX];
/* cleanup_set_interrupt: the caller's interruption count and the count from which the replay
 * stops waiting for processes */
static const volatile sig_atomic_t *interrupt_count;
static int interrupt_at;

/* The host sysctls the testbed changes (orchestrator/testbed.c raise_neigh, allow_cc). */
static const char CC_LIST_KEY[] = "net.ipv4.tcp_allowed_congestion_control";
static const char *const sysctl_allowed[] = {
	"net.ipv4.neigh.default.gc_thresh1", "net.ipv4.neigh.default.gc_thresh2",
	"net.ipv4.neigh.default.gc_thresh3", CC_LIST_KEY,
};
static const char *const programs[] = { "stalenet", "stalenet-node", "stalenet-linkd" };

void cleanup_set_program_dir(const char *dir)
{
	snprintf(program_dir, sizeof program_dir, "%s", dir ? dir : "");
}

void cleanup_set_interrupt(const volatile sig_atomic_t *count, int at)
{
	interrupt_count = count;
	interrupt_at = at > 0 ? at : 1;
}

/* The user asked to stop at once: a process still there is killed, not waited for. */
static bool cut_short(void)
{
	return interrupt_count && *interrupt_count >= interrupt_at;
}

/* readlink that also drops the " (deleted)" the kernel appends once the file was replaced
 * (a rebuild while the run was alive). */
static int read_exe(const char *link, char *buf, size_t len)
{
	static const char del[] = " (deleted)";
	ssize_t n = readlink(link, buf, len - 1);
	size_t l;

	if (n <= 0)
		return -errno;
	buf[n] = '\0';
	l = (size_t)n;
	if (l > sizeof del - 1 && !strcmp(buf + l - (sizeof del - 1), del))
		buf[l - (sizeof del - 1)] = '\0';
	return 0;
}

static const char *programs_dir(void)
{
	if (!program_dir[0]) {
		char self[PATH_MAX], *slash;

		if (read_exe("/proc/self/exe", self, sizeof self) == 0 && (slash = strrchr(self, '/'))) {
			*slash = '\0';
			snprintf(program_dir, sizeof program_dir, "%s", self[0] ? self : "/");
		}
	}
	return program_dir;
}

/* ---- processes --------------------------------------------------------------------------- */

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

/* Is pid running a stalenet program of the run (run_dir, prefix)? Fills what with the
 * executable for messages. */
static bool proc_of_run(pid_t pid, const char *run_dir, const char *prefix, char *what, size_t wlen)
{
	char link[64], exe[PATH_MAX], args[8192], *slash;
	size_t dlen = strlen(run_dir);
	bool prog = false, tied = false;
	ssize_t n;
	int fd;

	snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
	if (read_exe(link, exe, sizeof exe) < 0) {
		snprintf(what, wlen, "?");
		return false;
	}
	snprintf(what, wlen, "%s", exe);
	slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
		prog |= !strcmp(slash + 1, programs[i]);
	if (!prog || strcmp(exe[0] ? exe : "/", programs_dir()))
		return false;
	/* The command line ties it to this run: a node's configuration lives in the run
	 * directory, the emulator's control socket carries the prefix. */
	snprintf(link, sizeof link, "/proc/%d/cmdline", (int)pid);
	fd = open(link, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	do
		n = read(fd, args, sizeof args - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return false;
	args[n] = '\0';
	for (char *a = args + strlen(args) + 1; a < args + n; a += strlen(a) + 1)
		tied |= (!strncmp(a, run_dir, dlen) && a[dlen] == '/') || strstr(a, prefix);
	return tied;
}

/* A journalled process that is still there and not of the run. A process in the middle of its
 * exit has released its executable before it becomes a zombie (/proc/PID/exe unreadable while
 * the state is not yet Z): such a one is watched for up to a second (poll's timeout, no clock
 * read) until it is gone or readable, so that a kill -9 of the orchestrator whose children are
 * dying at that instant does not make the whole journal untrusted. */
static bool foreign_proc(pid_t pid, uint64_t start, const char *run_dir, const char *prefix,
			 char *what, size_t wlen)
{
	for (int tries = 0; tries < 100; tries++) {
		if (!cleanup_proc_alive(pid, start) || proc_of_run(pid, run_dir, prefix, what, wlen))
			return false;
		if (strcmp(what, "?") != 0)
			return true; /* a readable executable, not ours */
		poll(NULL, 0, 10);
	}
	return true;
}

static int open_pidfd(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_kill(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Wait up to ms for the process behind pidfd to exit. */
static bool pidfd_wait(int pidfd, int ms)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	int rc;

	while ((rc = poll(&pfd, 1, ms)) < 0 && errno == EINTR)
		;
	return rc > 0;
}

static int undo_proc(const struct journal_parsed *p, const struct journal_record *r)
{
	pid_t pid = (pid_t)strtol(r->fields[0], NULL, 10);
	uint64_t st = strtoull(r->fields[1], NULL, 10);
	char what[PATH_MAX];
	int pidfd, rc = 0;

	pidfd = open_pidfd(pid);
	if (pidfd < 0)
		return errno == ESRCH ? 0 : -errno;
	/* Checked after the pidfd exists: the fd pins this very process. */
	if (!cleanup_proc_alive(pid, st))
		goto out;
	if (!proc_of_run(pid, p->run_dir, p->prefix, what, sizeof what)) {
		/* no executable: in the middle of its exit (see foreign_proc) */
		if (!strcmp(what, "?") && pidfd_wait(pidfd, 1000))
			goto out;
		log_error("cleanup: pid %d now runs %s, not a program of run %s; left alone", (int)pid,
			  what, p->prefix);
		rc = -EPERM;
		goto out;
	}
	/* SIGTERM and up to 3 s for it (in slices: a stop at once asked meanwhile ends the wait),
	 * or straight SIGKILL when a stop at once was asked already */
	if (!cut_short()) {
		pidfd_kill(pidfd, SIGTERM);
		for (int ms = 0; ms < 3000 && !cut_short(); ms += 50)
			if (pidfd_wait(pidfd, 50))
				goto out;
		if (!cut_short())
			log_warn("cleanup: %s (pid %d) ignored SIGTERM, killing", r->fields[2], (int)pid);
	}
	pidfd_kill(pidfd, SIGKILL);
	if (!pidfd_wait(pidfd, 2000)) {
		log_error("cleanup: %s (pid %d) survives SIGKILL", r->fields[2], (int)pid);
		rc = -EBUSY;
	}
out:
	close(pidfd);
	return rc;
}

/* ---- undo steps ---------------------------------------------------------------------------- */

static int undo_iptables(const struct journal_record *r)
{
	const char *argv[JOURNAL_MAX_FIELDS + 8];
	int rc, n = 0;

	argv[n++] = "iptables";
	argv[n++] = "-w";
	argv[n++] = "5";
	argv[n++] = "-t";
	argv[n++] = r->fields[1];
	argv[n++] = "-C";
	argv[n++] = r->fields[2];
	for (int i = 3; i < r->nfields; i++)
		argv[n++] = r->fields[i];
	argv[n] = NULL;
	rc = netns_exec(r->fields[0], argv, true);
	if (rc == -ENOENT)
		return 0; /* the rule went with its namespace */
	if (rc == 0) {
		argv[5] = "-D";
		rc = netns_exec(r->fields[0], argv, true);
		if (rc != 0) {
			log_error("cleanup: iptables -t %s -D %s ... in %s: %d", r->fields[1], r->fields[2],
				  r->fields[0], rc);
			rc = rc < 0 ? rc : -EIO;
		}
	} else if (rc == 1) {
		rc = 0; /* no such rule (or chain): gone */
	} else {
		log_error("cleanup: iptables -t %s -C %s ... in %s: %d", r->fields[1], r->fields[2],
			  r->fields[0], rc);
		rc = rc < 0 ? rc : -EIO;
	}
	return rc;
}

/* Words of a space-separated list, sorted, into one comparable string. */
static void canon_list(const char *in, char *out, size_t len)
{
	char copy[512], *w[64], *save, *tok;
	int n = 0;
	size_t o = 0;

	snprintf(copy, sizeof copy, "%s", in);
	for (tok = strtok_r(copy, " \t\n", &save); tok && n < 64; tok = strtok_r(NULL, " \t\n", &save))
		w[n++] = tok;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(w[j - 1], w[j]) > 0; j--) {
			char *t = w[j];

			w[j] = w[j - 1];
			w[j - 1] = t;
		}
	out[0] = '\0';
	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? " " : "", w[i]);
}

/* Words of cur = words of old plus exactly one more (what allow_cc does). */
static bool list_plus_one(const char *old, const char *cur)
{
	char o[512], c[600], *save, *tok;
	int n_old = 0, n_cur = 0;

	if (strlen(cur) > 500)
		return false;
	snprintf(c, sizeof c, " %s ", cur);
	snprintf(o, sizeof o, "%s", old);
	for (tok = strtok_r(o, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char pat[520];

		snprintf(pat, sizeof pat, " %s ", tok);
		if (!strstr(c, pat))
			return false;
		n_old++;
	}
	snprintf(c, sizeof c, "%s", cur);
	for (tok = strtok_r(c, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		n_cur++;
	return n_cur == n_old + 1;
}

/* Is cur (the live value) what this record set? The congestion control list is printed in
 * the kernel's order, so it compares as a set. */
static bool still_ours(const struct journal_record *r, const char *cur)
{
	bool list = !strcmp(r->fields[1], CC_LIST_KEY);
	char a[512], b[512];

	if (r->nfields < 4)
		return list && list_plus_one(r->fields[2], cur); /* checked: list key only */
	if (!list)
		return !strcmp(cur, r->fields[3]);
	canon_list(cur, a, sizeof a);
	canon_list(r->fields[3], b, sizeof b);
	return !strcmp(a, b);
}

/* A claim of this version (NS KEY OLD NEW ORIG): released by the rules shared with the runs
 * still alive, unless the run recorded its release already. */
static int undo_claim(const struct journal_parsed *p, const struct journal_record *r)
{
	struct hostshare_claim c;
	char self[PATH_MAX];

	for (size_t i = 0; i < p->n; i++)
		if (p->recs[i].kind == JOURNAL_SYSCTL_RELEASED && p->recs[i].line > r->line &&
		    !strcmp(p->recs[i].fields[1], r->fields[1]))
			return 0;
	if (hostshare_from_record(&c, r->nfields, r->fields) < 0)
		return -EINVAL;
	if (snprintf(self, sizeof self, "%s/%s", p->run_dir, JOURNAL_FILE) >= (int)sizeof self)
		return -ENAMETOOLONG;
	return hostshare_claim_release(NULL, self, &c);
}

/* A record of an older version (OLD [NEW]): OLD back while the value is still NEW. */
static int undo_old_sysctl(const struct journal_record *r)
{
	char cur[512];
	int rc;

	/* Checked: host namespace only. */
	rc = sysctl_read(r->fields[1], cur, sizeof cur);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if (!strcmp(cur, r->fields[2]))
		return 0; /* already restored */
	if (!still_ours(r, cur)) {
		/* Someone changed it after us: theirs now, leave it. */
		log_warn("cleanup: %s is %s, not the value this run set; leaving it", r->fields[1], cur);
		return 0;
	}
	rc = sysctl_write(r->fields[1], r->fields[2]);
	if (rc < 0)
		log_error("cleanup: restore %s=%s: %s", r->fields[1], r->fields[2], strerror(-rc));
	return rc;
}

static int undo_sysctl(const struct journal_parsed *p, const struct journal_record *r)
{
	int fd, rc;

	if (r->nfields == 5)
		return undo_claim(p, r); /* takes the host lock itself */
	/* The same lock as every other read-modify-write of the shared keys. */
	fd = hostshare_lock();
	if (fd < 0)
		return fd;
	rc = undo_old_sysctl(r);
	hostshare_unlock(fd);
	return rc;
}

static int undo_one(const struct journal_parsed *p, const struct journal_record *rec)
{
	int rc = -EINVAL;

	switch (rec->kind) {
	case JOURNAL_PROC:
		rc = undo_proc(p, rec);
		break;
	case JOURNAL_IPTABLES:
		rc = undo_iptables(rec);
		break;
	case JOURNAL_SYSCTL:
		rc = undo_sysctl(p, rec);
		break;
	case JOURNAL_SYSCTL_RELEASED:
		rc = 0; /* a marker: undo_claim reads it */
		break;
	case JOURNAL_NETNS:
		rc = netns_delete(rec->fields[0]);
		if (rc < 0)
			log_error("cleanup: delete netns %s: %s", rec->fields[0], strerror(-rc));
		break;
	case JOURNAL_CGROUP:
		/* checked by cleanup_check: under the cgroup mount, named with the prefix */
		rc = cgroup_remove(rec->fields[0], p->prefix);
		break;
	case JOURNAL_KIND_COUNT:
		break;
	}
	return rc;
}

static int undo(void *arg, const struct journal_record *rec)
{
	int rc = undo_one(arg, rec);

	if (rc < 0)
		log_warn("cleanup: line %d (%s) not undone: %s", rec->line, journal_kind_name(rec->kind),
			 strerror(-rc));
	return rc;
}

/* ---- record checks --------------------------------------------------------------------------- */

static bool all_of(const char *s, const char *set, size_t min, size_t max)
{
	size_t n = strlen(s);

	return n >= min && n <= max && strspn(s, set) == n;
}

#define DIGITS "0123456789"
#define NAMECH "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

static bool good_prefix(const char *s)
{
	return all_of(s, NAMECH, 3, 15);
}

/* A namespace of this run: PREFIX + at least one more name character. */
static bool run_netns(const char *name, const char *prefix)
{
	size_t l = strlen(prefix);

	return !strncmp(name, prefix, l) && all_of(name + l, NAMECH ".", 1, 200);
}

static bool good_ifname(const char *s)
{
	return all_of(s, NAMECH ".", 1, 15);
}

/* Exactly a rule link_shaper adds (rule_argv): in a run namespace, mangle PREROUTING, to an
 * NFQUEUE. Interfaces there (eth0, PREFIXp<i>) exist only in the run's own namespaces. */
static const char *iptables_problem(const struct journal_record *r, const char *prefix)
{
	char *const *f = r->fields;
	int a = 3;

	if (!run_netns(f[0], prefix))
		return "rule outside the run's namespaces";
	if (strcmp(f[1], "mangle") || strcmp(f[2], "PREROUTING"))
		return "rule in a table or chain stalenet never uses";
	if (r->nfields == 3 + 6 && !strcmp(f[a], "-i"))
		a += 2;
	else if (r->nfields == 3 + 8 && !strcmp(f[a], "-m") && !strcmp(f[a + 1], "physdev") &&
		 !strcmp(f[a + 2], "--physdev-in"))
		a += 4;
	else
		return "not an NFQUEUE rule of the link shaper";
	if (!good_ifname(f[a - 1]) || strcmp(f[a], "-j") || strcmp(f[a + 1], "NFQUEUE") ||
	    strcmp(f[a + 2], "--queue-num") || !all_of(f[a + 3], DIGITS, 1, 5) ||
	    strtol(f[a + 3], NULL, 10) > 65535)
		return "not an NFQUEUE rule of the link shaper";
	return NULL;
}

static const char *sysctl_problem(const struct journal_record *r)
{
	bool known = false, list = !strcmp(r->fields[1], CC_LIST_KEY);

	if (strcmp(r->fields[0], "-"))
		return "sysctl outside the host namespace";
	for (size_t i = 0; i < sizeof sysctl_allowed / sizeof sysctl_allowed[0]; i++)
		known |= !strcmp(r->fields[1], sysctl_allowed[i]);
	if (!known)
		return "sysctl stalenet never sets";
	for (int i = 2; i < r->nfields; i++) {
		/* gc_thresh: a number; the allowed list: algorithm names separated by spaces. */
		bool ok = list ? all_of(r->fields[i], "abcdefghijklmnopqrstuvwxyz0123456789_ ", 1, 255) &&
				 r->fields[i][0] != ' '
			       : all_of(r->fields[i], DIGITS, 1, 10);

		if (!ok)
			return "implausible sysctl value";
	}
	if (r->nfields < 4 && !list)
		return "sysctl without the value it set";
	return NULL;
}

int cleanup_check(const struct journal_parsed *p, char *why, size_t whylen)
{
	if (!good_prefix(p->prefix))
		return WHY("line 1: implausible run prefix '%s'", p->prefix);
	if (p->run_dir[0] != '/')
		return WHY("line 1: run directory '%s' is not absolute", p->run_dir);
	for (size_t i = 0; i < p->n; i++) {
		const struct journal_record *r = &p->recs[i];
		const char *bad = NULL;

		switch (r->kind) {
		case JOURNAL_NETNS:
			if (!run_netns(r->fields[0], p->prefix))
				return WHY("line %d: namespace '%s' lacks the run prefix %s", r->line,
					   r->fields[0], p->prefix);
			break;
		case JOURNAL_IPTABLES:
			bad = iptables_problem(r, p->prefix);
			break;
		case JOURNAL_SYSCTL:
			bad = sysctl_problem(r);
			if (bad)
				return WHY("line %d: %s (%s)", r->line, bad, r->fields[1]);
			break;
		case JOURNAL_SYSCTL_RELEASED:
			if (strcmp(r->fields[0], "-"))
				return WHY("line %d: sysctl outside the host namespace", r->line);
			break;
		case JOURNAL_PROC: {
			pid_t pid = (pid_t)strtol(r->fields[0], NULL, 10);
			uint64_t st = strtoull(r->fields[1], NULL, 10);
			char what[PATH_MAX];

			if (pid < 2 || pid == getpid() || st == 0)
				return WHY("line %d: pid %d is never a process of a run", r->line, (int)pid);
			if (foreign_proc(pid, st, p->run_dir, p->prefix, what, sizeof what))
				return WHY("line %d: pid %d runs %s, not a stalenet program of run %s", r->line,
					   (int)pid, what, p->prefix);
			break;
		}
		case JOURNAL_CGROUP:
			if ((bad = cgroup_path_problem(r->fields[0], p->prefix)))
				return WHY("line %d: %s (%s)", r->line, bad, r->fields[0]);
			break;
		case JOURNAL_KIND_COUNT:
			bad = "unknown record";
			break;
		}
		if (bad)
			return WHY("line %d: %s", r->line, bad);
	}
	return 0;
}

/* ---- trusted opening ----------------------------------------------------------------------- */

static bool safe_dir(const struct stat *st, bool may_be_sticky)
{
	if (st->st_uid != 0)
		return false;
	if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
		return true;
	return may_be_sticky && (st->st_mode & S_ISVTX);
}

/* Open dir/base for reading, dir absolute and symlink-free (a realpath), checking the
 * directories from stop (a prefix of dir, or "/") down to dir, then the file. Each component
 * is opened O_NOFOLLOW from its parent's fd, so what is checked is what is read. Returns the
 * fd, or -EPERM / -errno with why filled. */
static int open_trusted(const char *dir, const char *base, const char *stop, char *why,
			size_t whylen)
{
	char path[PATH_MAX];
	size_t stop_len = strcmp(stop, "/") ? strlen(stop) : 0, dir_len, at = 0;
	int dfd = -1, fd = -1, rc;
	struct stat st;

	if (snprintf(path, sizeof path, "%s", strcmp(dir, "/") ? dir : "") >= (int)sizeof path)
		return WHY("path too long");
	dir_len = strlen(path);
	if (dir[0] != '/' || strncmp(path, stop, stop_len) || (path[stop_len] && path[stop_len] != '/'))
		return WHY("%s is not under %s", dir, stop);
	dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	for (;;) {
		/* dfd is path[0, at) ("" = "/"). Checked when at or below stop; only a directory
		 * above the run directory may be a root-owned sticky one (/tmp). */
		char save, *end;

		if (fstat(dfd, &st) < 0) {
			rc = -errno;
			goto out;
		}
		if (at >= stop_len && !safe_dir(&st, at < dir_len)) {
			save = path[at];
			path[at] = '\0';
			snprintf(why, whylen, "directory %s is not owned by root or is writable by group or "
				 "others", at ? path : "/");
			path[at] = save;
			rc = -EPERM;
			goto out;
		}
		if (at >= dir_len)
			break;
		end = strchr(path + at + 1, '/');
		if (!end)
			end = path + dir_len;
		save = *end;
		*end = '\0';
		fd = openat(dfd, path + at + 1, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			rc = errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno;
			snprintf(why, whylen, "%s: %s", path,
				 rc == -EPERM ? "not a plain directory (a symlink?)" : strerror(errno));
			goto out;
		}
		*end = save;
		close(dfd);
		dfd = fd;
		fd = -1;
		at = (size_t)(end - path);
	}
	fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ELOOP ? WHY("the journal is a symlink") : -errno;
		if (rc != -EPERM)
			snprintf(why, whylen, "%s", strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		rc = WHY("the journal is not a regular file with a single link");
	else if (st.st_uid != 0)
		rc = WHY("the journal is not owned by root");
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		rc = WHY("the journal is writable by group or others");
	else
		rc = 0;
out:
	if (dfd >= 0)
		close(dfd);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	return fd;
}

/* A candidate journal: real path, the directory trust is checked up to, and for registry
 * entries the prefix the entry is named after. */
struct cand {
	char *path;     /* dir/base */
	char *dir;      /* real directory */
	const char *base;
	char *stop;
	char *reg_name; /* NULL: not from the registry */
};

/* Load one candidate and check the file, its directories and the header (the records are
 * checked only for a run that will be replayed: a live run's journal may name a child between
 * fork and exec). Returns 0 and *out, or -EPERM / -errno with why. */
static int load_trusted(const struct cand *c, struct journal_parsed **out, char *why, size_t whylen)
{
	char *text = NULL;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	fd = open_trusted(c->dir, c->base, c->stop, why, whylen);
	if (fd < 0)
		return fd;
	rc = journal_read_fd(fd, &text, &len);
	close(fd);
	if (rc < 0) {
		snprintf(why, whylen, "read: %s", strerror(-rc));
		return rc;
	}
	rc = journal_parse(text, len, out, why, whylen);
	free(text);
	if (rc < 0)
		return rc == -EINVAL ? -EPERM : rc;
	if (strcmp((*out)->run_dir, c->dir))
		rc = WHY("line 1: run directory %s is not the journal's own (%s)", (*out)->run_dir, c->dir);
	else if (c->reg_name && strcmp(c->reg_name, (*out)->prefix))
		rc = WHY("line 1: registry entry %s names a journal of run %s", c->reg_name, (*out)->prefix);
	else if (!good_prefix((*out)->prefix))
		rc = WHY("line 1: implausible run prefix '%s'", (*out)->prefix);
	if (rc < 0)
		journal_parsed_free(out);
	return rc;
}

/* ---- replay -------------------------------------------------------------------------------- */

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

static void remove_dead_socket(const char *path)
{
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && dead_socket(path))
		unlink(path);
}

/* The run's sockets, both named after its checked prefix: the emulator's control socket and
 * the orchestrator's control plane (ctl_endpoint_for of the journal's own run directory). */
static void remove_run_sockets(const struct journal_parsed *p)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof path, "%s/linkd-%s.sock", journal_registry_dir(), p->prefix) <
	    (int)sizeof path)
		remove_dead_socket(path);
	if (ctl_endpoint_for(p->run_dir, p->prefix, path, sizeof path) == 0 &&
	    !strncmp(path, "ipc://", 6))
		remove_dead_socket(path + 6);
}

int cleanup_journal(struct journal *j)
{
	struct journal_parsed *p = NULL;
	struct journal_ops ops = { .undo = undo };
	char err[512];
	int rc, failed = 0;

	rc = journal_load(journal_path(j), &p, err, sizeof err);
	if (rc == 0 && (rc = cleanup_check(p, err, sizeof err)) < 0)
		journal_parsed_free(&p);
	if (rc < 0) {
		log_error("teardown: %s: %s", journal_path(j), err);
		return rc;
	}
	ops.arg = p;
	rc = journal_replay(p, &ops, &failed);
	journal_parsed_free(&p);
	if (rc < 0) {
		log_error("teardown of %s: %d undo steps failed", journal_path(j), failed);
		return rc;
	}
	return journal_mark_ended(j);
}

/* Append "end" to a checked journal file that is not ours and drop its registry entry if it
 * points at this file. */
static int mark_file_ended(const char *path, const char *prefix)
{
	char reg[PATH_MAX], target[PATH_MAX];
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
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
		if (!strcmp(target, path))
			unlink(reg);
	}
	return rc;
}

static int replay_one(const struct cand *c, unsigned flags, struct cleanup_report *rep)
{
	struct journal_parsed *p = NULL;
	struct journal_ops ops = { .undo = undo };
	char why[2 * PATH_MAX];
	int rc, failed = 0;

	rep->journals++;
	rc = load_trusted(c, &p, why, sizeof why);
	if (rc == -ENODATA) {
		/* Stopped while its journal was being created: nothing of the run exists (its
		 * header precedes every record, and its registry entry follows the header). */
		log_info("cleanup: %s: no header, nothing recorded: nothing to undo", c->path);
		rep->ended++;
		return 0;
	}
	if (rc < 0) {
		if (rc == -EPERM) {
			log_error("cleanup: %s: refused, nothing touched: %s", c->path, why);
			rep->refused++;
		} else {
			log_error("cleanup: %s: %s", c->path, why);
		}
		rep->failed++;
		return rc;
	}
	if (p->ended) {
		rep->ended++;
		goto out;
	}
	if (!(flags & CLEANUP_FORCE) && cleanup_proc_alive(p->pid, p->start_time)) {
		log_info("cleanup: %s: run %s is alive (pid %d), skipped", c->path, p->prefix, (int)p->pid);
		rep->live++;
		goto out;
	}
	rc = cleanup_check(p, why, sizeof why);
	if (rc < 0) {
		log_error("cleanup: %s: refused, nothing touched: %s", c->path, why);
		rep->refused++;
		rep->failed++;
		goto out;
	}
	if (flags & CLEANUP_DRY_RUN) {
		log_info("cleanup: %s: would undo %zu records of run %s", c->path, p->n, p->prefix);
		rep->replayed++;
		goto out;
	}
	log_info("cleanup: %s: undoing %zu records of dead run %s (pid %d)", c->path, p->n, p->prefix,
		 (int)p->pid);
	ops.arg = p;
	rc = journal_replay(p, &ops, &failed);
	if (rc < 0) {
		log_error("cleanup: %s: %d undo steps failed; re-run cleanup to retry", c->path, failed);
		rep->failed++;
		goto out;
	}
	remove_run_sockets(p);
	rep->replayed++;
	rc = mark_file_ended(c->path, p->prefix);
out:
	journal_parsed_free(&p);
	return rc;
}

/* ---- finding journals ------------------------------------------------------------------------ */

struct cands {
	struct cand *v;
	size_t n, cap;
};

/* Add dir/base (dir made real; base is not resolved, so a symlinked journal is seen, and
 * refused, as such). Deduplicated by path. */
static void cands_add(struct cands *cs, const char *dir, const char *base, const char *stop,
		      const char *reg_name)
{
	char real[PATH_MAX], path[PATH_MAX + NAME_MAX + 2];
	struct cand *nv, *c;

	if (!realpath(dir, real) || strchr(base, '/'))
		return;
	snprintf(path, sizeof path, "%s/%s", strcmp(real, "/") ? real : "", base);
	for (size_t i = 0; i < cs->n; i++)
		if (!strcmp(cs->v[i].path, path))
			return;
	if (cs->n == cs->cap) {
		size_t cap = cs->cap ? cs->cap * 2 : 16;

		nv = realloc(cs->v, cap * sizeof *nv);
		if (!nv)
			return;
		cs->v = nv;
		cs->cap = cap;
	}
	c = &cs->v[cs->n];
	*c = (struct cand){ .path = strdup(path), .dir = strdup(real), .stop = strdup(stop),
			    .reg_name = reg_name ? strdup(reg_name) : NULL };
	if (c->path && c->dir && c->stop && (!reg_name || c->reg_name)) {
		c->base = strrchr(c->path, '/') + 1;
		cs->n++;
	} else {
		free(c->path);
		free(c->dir);
		free(c->stop);
		free(c->reg_name);
	}
}

static bool has_journal(const char *dir)
{
	char sub[PATH_MAX];
	struct stat st;

	return snprintf(sub, sizeof sub, "%s/%s", dir, JOURNAL_FILE) < (int)sizeof sub &&
	       lstat(sub, &st) == 0;
}

static void scan_path(struct cands *cs, const char *path)
{
	char sub[PATH_MAX], stop[PATH_MAX], *slash;
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (stat(path, &st) < 0 || !realpath(path, stop))
		return;
	if (S_ISREG(st.st_mode)) {
		/* A journal named directly: trust is checked for its directory. */
		snprintf(sub, sizeof sub, "%s", path);
		slash = strrchr(sub, '/');
		if (slash && slash != sub)
			*slash = '\0';
		else
			snprintf(sub, sizeof sub, slash ? "/" : ".");
		if (!realpath(sub, stop))
			return;
		cands_add(cs, stop, strrchr(path, '/') ? strrchr(path, '/') + 1 : path, stop, NULL);
		return;
	}
	if (!S_ISDIR(st.st_mode))
		return;
	if (has_journal(path)) {
		cands_add(cs, path, JOURNAL_FILE, stop, NULL);
		return;
	}
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub &&
		    has_journal(sub))
			cands_add(cs, sub, JOURNAL_FILE, stop, NULL);
	}
	closedir(d);
}

/* Registry entries: root's symlinks to journals in a root-owned, owner-only-writable
 * directory. A dangling one is removed (the run directory is gone, and with it any way to
 * know what it made). Sockets are left for the replay of their run's journal. */
static int scan_registry(struct cands *cs, struct cleanup_report *rep)
{
	const char *dir = journal_registry_dir();
	char link[PATH_MAX], target[PATH_MAX], *slash;
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(dir);
	int rc = 0;

	if (!d)
		return 0;
	if (fstat(dirfd(d), &st) < 0 || !safe_dir(&st, false)) {
		log_error("cleanup: registry %s refused, nothing touched: not owned by root or writable "
			  "by group or others", dir);
		rep->refused++;
		rep->failed++;
		closedir(d);
		return -EPERM;
	}
	while ((e = readdir(d))) {
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(link, sizeof link, "%s/%s", dir, e->d_name) >= (int)sizeof link)
			continue;
		if (lstat(link, &st) < 0 || !S_ISLNK(st.st_mode))
			continue;
		n = readlink(link, target, sizeof target - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (st.st_uid != 0 || target[0] != '/' || !(slash = strrchr(target, '/')) ||
		    strcmp(slash + 1, JOURNAL_FILE)) {
			log_error("cleanup: registry entry %s refused, nothing touched: not root's link to "
				  "a journal", link);
			rep->refused++;
			rep->failed++;
			rc = -EPERM;
			continue;
		}
		if (stat(link, &st) < 0 && errno == ENOENT) {
			log_warn("cleanup: registry entry %s points nowhere; removed", link);
			unlink(link);
			continue;
		}
		*slash = '\0';
		cands_add(cs, target[0] ? target : "/", JOURNAL_FILE, "/", e->d_name);
	}
	closedir(d);
	return rc;
}

int cleanup_run(const char *path, unsigned flags, struct cleanup_report *rep)
{
	struct cleanup_report dummy = { 0 };
	struct cands cs = { 0 };
	int first = 0;

	if (!rep)
		rep = &dummy;
	scan_path(&cs, path ? path : CLEANUP_DEFAULT_ROOT);
	if (!(flags & CLEANUP_NO_REGISTRY))
		first = scan_registry(&cs, rep);
	for (size_t i = 0; i < cs.n; i++) {
		int rc = replay_one(&cs.v[i], flags, rep);

		if (rc < 0 && first == 0)
			first = rc;
		free(cs.v[i].path);
		free(cs.v[i].dir);
		free(cs.v[i].stop);
		free(cs.v[i].reg_name);
	}
	free(cs.v);
	return first;
}
