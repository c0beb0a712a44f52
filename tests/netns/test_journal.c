/* Namespace tests for orchestrator/cleanup on real host state (root): a trusted journal of a
 * dead run is undone completely (namespace, NFQUEUE rule, emulator process, its socket, host
 * sysctl) and twice is idempotent; hostile journals (foreign namespace, kernel.core_pattern,
 * pid 1, a rule of another chain, a symlinked, world-writable or group-writable-parent
 * journal) are refused with one log line and leave every canary as it was; a stop at once
 * asked during a replay kills a process that does not heed SIGTERM instead of waiting 3 s. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/netns.h"
#include "lib/sysctl.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/journal.h"
#include "orchestrator/launch.h"
#include "orchestrator/supervise.h"
#include "tests/support/files.h"
#include "tests/support/fixture.h"
#include "tests/support/wait.h"

static char tmp[64], prefix[16], ns[32], foreign[32], registry[96], logpath[96];

/* The host sysctl two tests change. Suites that compare host-wide sysctls before and after a
 * run (test_run, test_testbed, the campaign) hold the host lock meanwhile, so these tests take
 * it too, and teardown puts the value back even when a test failed half-way. */
#define THRESH_KEY "net.ipv4.neigh.default.gc_thresh1"
static char thresh_orig[32];
static int lock_fd = -1;

static void setup(void)
{
	const char *must = getenv("STALENET_TESTS_MUST_RUN");
	bool strict = must && !strcmp(must, "1");
	char self[512], *slash;
	ssize_t n;

	log_init("test_journal", LOG_WARN);
	snprintf(prefix, sizeof prefix, "sj%d-", (int)getpid() % 100000);
	snprintf(ns, sizeof ns, "%sn0", prefix);
	snprintf(foreign, sizeof foreign, "sjf%d-x", (int)getpid() % 100000);
	/* Before the namespaces too: a suite holding the lock compares the host's namespaces. */
	if (geteuid() == 0)
		lock_fd = support_host_lock();
	if (geteuid() != 0 || netns_add(ns) < 0) {
		if (strict)
			cr_assert_fail("needs root and network namespaces (STALENET_TESTS_MUST_RUN=1)");
		cr_skip_test("needs root and network namespaces");
	}
	cr_assert_eq(netns_add(foreign), 0);
	cr_assert_eq(sysctl_read(THRESH_KEY, thresh_orig, sizeof thresh_orig), 0);
	snprintf(tmp, sizeof tmp, "/tmp/stalenet-tjn-XXXXXX");
	cr_assert_not_null(support_mkdtemp(tmp));
	snprintf(registry, sizeof registry, "%s/registry", tmp);
	cr_assert_eq(mkdir(registry, 0700), 0);
	journal_set_registry_dir(registry);
	/* The programs a run may start live in build/, three levels above this test. */
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	cr_assert_gt(n, 0);
	self[n] = '\0';
	for (int i = 0; i < 3 && (slash = strrchr(self, '/')); i++)
		*slash = '\0';
	cleanup_set_program_dir(self);
	snprintf(logpath, sizeof logpath, "%s/log", tmp);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void teardown(void)
{
	char cur[32];

	if (thresh_orig[0] && sysctl_read(THRESH_KEY, cur, sizeof cur) == 0 && strcmp(cur, thresh_orig))
		sysctl_write(THRESH_KEY, thresh_orig);
	support_host_unlock(&lock_fd);
	netns_delete(ns);
	netns_delete(foreign);
	journal_set_registry_dir(NULL);
	cleanup_set_program_dir(NULL);
	cleanup_set_interrupt(NULL, 0);
	log_set_fd(2);
	if (tmp[0])
		nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(journal_undo, .init = setup, .fini = teardown, .timeout = 60);

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

/* RUN_DIR = tmp/runs/NAME with a journal of a dead orchestrator holding records. */
static void make_run(const char *name, const char *records, char *dir, size_t len)
{
	char path[256], text[4096];

	snprintf(path, sizeof path, "%s/runs", tmp);
	mkdir(path, 0755);
	snprintf(dir, len, "%s/runs/%s", tmp, name);
	cr_assert_eq(mkdir(dir, 0755), 0);
	snprintf(text, sizeof text, "stalenet-journal 1 2147483646 1 %s %s\n%s", dir, prefix, records);
	snprintf(path, sizeof path, "%s/journal", dir);
	write_text(path, text, 0644);
}

static int iptables_in(const char *netns, const char *op, const char *table, const char *chain,
		       const char *const *rule)
{
	const char *argv[32] = { "iptables", "-w", "5", "-t", table, op, chain };
	int n = 7;

	for (int i = 0; rule[i]; i++)
		argv[n++] = rule[i];
	argv[n] = NULL;
	return netns_exec(netns, argv, true);
}

static bool ends_with_end(const char *dir)
{
	char path[256], buf[8192];
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "%s/journal", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	return n >= 4 && !strcmp(buf + n - 4, "end\n");
}

/* Log lines written during cleanup_run, into buf; returns the count. */
static int logged_lines(char *buf, size_t len)
{
	int fd = open(logpath, O_RDONLY | O_CLOEXEC), lines = 0;
	ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	for (char *p = buf; *p; p++)
		lines += *p == '\n';
	return lines;
}

static void capture_log(void)
{
	int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0);
	log_set_fd(fd);
}

/* The condition of start_linkd's wait: the socket accepts, or the daemon is gone. */
struct linkd_start {
	const char *sock;
	pid_t pid;
	bool exited;
};

static bool linkd_accepts(void *arg)
{
	struct linkd_start *ls = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* SOCK_SEQPACKET, the type of the daemon's control socket: a stream socket's connect to
	 * it fails with EPROTOTYPE even once it listens. */
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), ok;

	memcpy(sa.sun_path, ls->sock, strlen(ls->sock) + 1);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	if (fd >= 0)
		close(fd);
	if (!ok && waitpid(ls->pid, NULL, WNOHANG) != 0)
		ls->exited = true;
	return ok || ls->exited;
}

/* The emulator of a run, started the way run.c does (its --ctl names the prefix): a real
 * stalenet program for the process checks. */
static pid_t start_linkd(const char *run_prefix, char *sock, size_t len, uint64_t *st)
{
	char bin[600];
	pid_t pid;

	snprintf(sock, len, "%s/linkd-%s.sock", registry, run_prefix);
	{
		char self[512], *slash;
		ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

		self[n] = '\0';
		for (int i = 0; i < 3 && (slash = strrchr(self, '/')); i++)
			*slash = '\0';
		snprintf(bin, sizeof bin, "%s/stalenet-linkd", self);
	}
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		dup2(devnull, 1);
		dup2(devnull, 2);
		execl(bin, bin, "--ctl", sock, (char *)NULL);
		_exit(127);
	}
	/* Ready once its socket accepts. Bounded by a deadline, not by a count of 1 ms pauses: on
	 * a loaded host each pause lasts longer and a start that takes seconds is normal, and a
	 * start that never comes must fail here, not later as a puzzling undo failure. (The count
	 * used to end the wait silently; with a stream socket it never saw the daemon ready.) */
	{
		struct linkd_start ls = { .sock = sock, .pid = pid };

		cr_assert_lt(strlen(sock), sizeof ((struct sockaddr_un *)0)->sun_path);
		cr_assert(support_wait_until(linkd_accepts, &ls, 30000) && !ls.exited,
			  "stalenet-linkd %s in 30 s", ls.exited ? "exited" : "did not accept");
	}
	*st = launch_proc_start_time(pid);
	cr_assert_gt(*st, 0);
	return pid;
}

Test(journal_undo, dead_run_undone_completely_and_idempotently)
{
	const char *rule[] = { "-i", "eth0", "-j", "NFQUEUE", "--queue-num", "7", NULL };
	static const char key[] = THRESH_KEY;
	char dir[256], recs[2048], sock[200], old[32], set[32], cur[32];
	struct cleanup_report rep = { 0 };
	struct stat st;
	uint64_t start;
	pid_t pid;
	int status;

	if (iptables_in(ns, "-A", "mangle", "PREROUTING", rule) == 127)
		cr_skip_test("no iptables binary");
	pid = start_linkd(prefix, sock, sizeof sock, &start);
	/* A host sysctl changed by one: harmless for anything else running. */
	cr_assert_eq(sysctl_read(key, old, sizeof old), 0);
	snprintf(set, sizeof set, "%ld", strtol(old, NULL, 10) + 1);
	snprintf(recs, sizeof recs,
		 "sysctl - %s %s %s\n"
		 "netns %s\n"
		 "iptables %s mangle PREROUTING -i eth0 -j NFQUEUE --queue-num 7\n"
		 "proc %d %llu linkd\n",
		 key, old, set, ns, ns, (int)pid, (unsigned long long)start);
	cr_assert_eq(sysctl_write(key, set), 0);
	make_run("ok", recs, dir, sizeof dir);

	/* A dry run changes nothing. */
	cr_assert_eq(cleanup_run(dir, CLEANUP_NO_REGISTRY | CLEANUP_DRY_RUN, &rep), 0);
	cr_assert_eq(rep.replayed, 1);
	cr_assert(cleanup_proc_alive(pid, start));
	cr_assert(netns_exists(ns));

	memset(&rep, 0, sizeof rep);
	cr_assert_eq(cleanup_run(dir, CLEANUP_NO_REGISTRY, &rep), 0);
	cr_assert_eq(rep.replayed, 1);
	cr_assert_eq(rep.failed, 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) || WIFSIGNALED(status));
	cr_assert_not(netns_exists(ns), "namespace left");
	cr_assert_neq(lstat(sock, &st), 0, "emulator socket left");
	cr_assert_eq(sysctl_read(key, cur, sizeof cur), 0);
	cr_assert_str_eq(cur, old);
	cr_assert(ends_with_end(dir));
	/* Again: already clean. */
	memset(&rep, 0, sizeof rep);
	cr_assert_eq(cleanup_run(dir, CLEANUP_NO_REGISTRY, &rep), 0);
	cr_assert_eq(rep.ended, 1);
}

/* The interruption count of the test below, raised by a timer's signal as a user's second
 * Ctrl-C would be by the orchestrator's handler. */
static volatile sig_atomic_t replay_interrupts;

static void on_alarm(int sig)
{
	(void)sig;
	replay_interrupts = SUPERVISE_STOP_NOW;
}

/* A stopped emulator does not act on SIGTERM: the replay would wait 3 s for it, then SIGKILL.
 * A second interruption 400 ms into that wait skips straight to SIGKILL: the replay ends well
 * before the 3 s, the process is gone and the rest (namespace, socket) is still undone. */
Test(journal_undo, second_interruption_during_the_replay_kills_at_once)
{
	char dir[256], recs[1024], sock[200];
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { .tv_usec = 400000 } };
	struct cleanup_report rep = { 0 };
	struct stat st;
	uint64_t start;
	int64_t t0, took;
	pid_t pid;
	int status;

	pid = start_linkd(prefix, sock, sizeof sock, &start);
	cr_assert_eq(kill(pid, SIGSTOP), 0);
	snprintf(recs, sizeof recs, "netns %s\nproc %d %llu linkd\n", ns, (int)pid, (unsigned long long)start);
	make_run("cut", recs, dir, sizeof dir);
	replay_interrupts = 0;
	cleanup_set_interrupt(&replay_interrupts, SUPERVISE_STOP_NOW);
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	t0 = support_now_ms();
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	cr_assert_eq(cleanup_run(dir, CLEANUP_NO_REGISTRY, &rep), 0);
	took = support_now_ms() - t0;
	signal(SIGALRM, SIG_DFL);
	fprintf(stderr, "replay with a stopped emulator, stop at once after 400 ms: %lld ms\n", (long long)took);
	cr_assert_eq(replay_interrupts, SUPERVISE_STOP_NOW, "the interruption never came");
	cr_expect_lt(took, 2500, "the replay took %lld ms (the SIGTERM wait not cut)", (long long)took);
	cr_assert_eq(rep.replayed, 1);
	cr_assert_eq(rep.failed, 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
	cr_assert_not(netns_exists(ns), "namespace left");
	cr_assert_neq(lstat(sock, &st), 0, "emulator socket left");
	cr_assert(ends_with_end(dir));
}

Test(journal_undo, sysctl_changed_by_someone_else_is_left_alone)
{
	static const char key[] = THRESH_KEY;
	char dir[256], recs[512], old[32], theirs[32], cur[32];
	struct cleanup_report rep = { 0 };
	long v;

	cr_assert_eq(sysctl_read(key, old, sizeof old), 0);
	v = strtol(old, NULL, 10);
	snprintf(theirs, sizeof theirs, "%ld", v + 2);
	snprintf(recs, sizeof recs, "sysctl - %s %s %ld\n", key, old, v + 1);
	make_run("theirs", recs, dir, sizeof dir);
	cr_assert_eq(sysctl_write(key, theirs), 0);
	cr_assert_eq(cleanup_run(dir, CLEANUP_NO_REGISTRY, &rep), 0);
	cr_assert_eq(sysctl_read(key, cur, sizeof cur), 0);
	sysctl_write(key, old);
	cr_assert_str_eq(cur, theirs);
	cr_assert_eq(rep.replayed, 1);
}

enum shape { PLAIN, SYMLINK, WORLD_WRITABLE, GROUP_WRITABLE_PARENT };

/* A journal listing our own namespace, then one hostile record (or a hostile shape): cleanup
 * refuses it with exactly one log line containing reason, and every canary is untouched. */
static void assert_refused(const char *name, const char *hostile, enum shape shape, const char *reason)
{
	const char *accept[] = { "-m", "comment", "--comment", "sj canary", "-j", "ACCEPT", NULL };
	char dir[256], recs[1024], core_before[512], core_after[512], lines[4096], path[300];
	struct cleanup_report rep = { 0 };
	bool have_ipt;

	have_ipt = iptables_in(ns, "-A", "filter", "INPUT", accept) == 0;
	cr_assert_eq(sysctl_read("kernel.core_pattern", core_before, sizeof core_before), 0);
	snprintf(recs, sizeof recs, "netns %s\n%s%s", ns, hostile, *hostile ? "\n" : "");
	make_run(name, recs, dir, sizeof dir);
	snprintf(path, sizeof path, "%s/journal", dir);
	if (shape == SYMLINK) {
		char real[300];

		snprintf(real, sizeof real, "%s/real-journal", dir);
		cr_assert_eq(rename(path, real), 0);
		cr_assert_eq(symlink(real, path), 0);
	} else if (shape == WORLD_WRITABLE) {
		cr_assert_eq(chmod(path, 0666), 0);
	} else if (shape == GROUP_WRITABLE_PARENT) {
		snprintf(path, sizeof path, "%s/runs", tmp);
		cr_assert_eq(chmod(path, 0775), 0);
	}
	capture_log();
	snprintf(path, sizeof path, "%s/runs", tmp);
	cr_assert_eq(cleanup_run(path, CLEANUP_NO_REGISTRY, &rep), -EPERM);
	log_set_fd(2);
	cr_assert_eq(rep.refused, 1);
	cr_assert_eq(rep.replayed, 0);
	cr_assert_eq(logged_lines(lines, sizeof lines), 1, "log:\n%s", lines);
	cr_assert_not_null(strstr(lines, "refused"), "%s", lines);
	cr_assert_not_null(strstr(lines, reason), "want '%s' in: %s", reason, lines);
	/* Nothing touched. */
	cr_assert(netns_exists(ns), "our namespace was deleted from a refused journal");
	cr_assert(netns_exists(foreign), "a foreign namespace was deleted");
	cr_assert_eq(sysctl_read("kernel.core_pattern", core_after, sizeof core_after), 0);
	cr_assert_str_eq(core_after, core_before);
	if (have_ipt) {
		cr_assert_eq(iptables_in(ns, "-C", "filter", "INPUT", accept), 0, "INPUT rule removed");
		iptables_in(ns, "-D", "filter", "INPUT", accept);
	}
	cr_assert(kill(1, 0) == 0);
	if (shape != SYMLINK)
		cr_assert_not(ends_with_end(dir), "a refused journal was marked ended");
}

Test(journal_undo, refuses_a_foreign_namespace)
{
	char rec[64];

	snprintf(rec, sizeof rec, "netns %s", foreign);
	assert_refused("foreign", rec, PLAIN, "lacks the run prefix");
}

Test(journal_undo, refuses_kernel_core_pattern)
{
	assert_refused("core", "sysctl - kernel.core_pattern core core", PLAIN, "line 3: sysctl stalenet never sets");
}

Test(journal_undo, refuses_pid_1)
{
	char st[32], rec[64];

	snprintf(st, sizeof st, "%llu", (unsigned long long)launch_proc_start_time(1));
	snprintf(rec, sizeof rec, "proc 1 %s init", st);
	assert_refused("pid1", rec, PLAIN, "line 3: pid 1 is never a process of a run");
}

Test(journal_undo, refuses_a_rule_of_another_chain)
{
	char rec[160];

	snprintf(rec, sizeof rec, "iptables %s filter INPUT -m comment --comment sj%%20canary -j ACCEPT", ns);
	assert_refused("chain", rec, PLAIN, "table or chain stalenet never uses");
}

Test(journal_undo, refuses_a_symlinked_journal)
{
	assert_refused("symlink", "", SYMLINK, "the journal is a symlink");
}

Test(journal_undo, refuses_a_world_writable_journal)
{
	assert_refused("world", "", WORLD_WRITABLE, "writable by group or others");
}

Test(journal_undo, refuses_a_group_writable_parent_directory)
{
	assert_refused("parent", "", GROUP_WRITABLE_PARENT, "/runs is not owned by root or is writable");
}

/* A registry entry is believed only for the run it is named after. */
Test(journal_undo, registry_entry_must_name_its_own_run)
{
	char dir[256], link[256], lines[2048], target[300];
	struct cleanup_report rep = { 0 };
	char recs[64];

	snprintf(recs, sizeof recs, "netns %s\n", ns);
	make_run("reg", recs, dir, sizeof dir);
	snprintf(link, sizeof link, "%s/sjother-", registry);
	snprintf(target, sizeof target, "%s/journal", dir);
	cr_assert_eq(symlink(target, link), 0);
	capture_log();
	cr_assert_eq(cleanup_run("/nonexistent", 0, &rep), -EPERM);
	log_set_fd(2);
	cr_assert_eq(logged_lines(lines, sizeof lines), 1, "%s", lines);
	cr_assert_not_null(strstr(lines, "names a journal of run"), "%s", lines);
	cr_assert(netns_exists(ns));
}

/* The emulator of another run: a stalenet program, but not one of this journal's run. */
Test(journal_undo, refuses_a_stalenet_program_of_another_run)
{
	char sock[200], rec[96];
	uint64_t start;
	pid_t pid = start_linkd("sjother-", sock, sizeof sock, &start);
	int status;

	snprintf(rec, sizeof rec, "proc %d %llu linkd", (int)pid, (unsigned long long)start);
	assert_refused("other", rec, PLAIN, "not a stalenet program of run");
	cr_assert(cleanup_proc_alive(pid, start), "another run's emulator was killed");
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
}

/* ---- lib/netns: the one way to run code or a command in a namespace ---------------------- */

static ino_t ns_inode(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "%s", path);
	return st.st_ino;
}

static int inside(void *arg)
{
	return ns_inode("/proc/thread-self/ns/net") == *(ino_t *)arg ? 42 : -1;
}

Test(journal_undo, netns_exec_and_call_run_inside_and_come_back)
{
	char path[128], script[256];
	const char *argv[] = { "sh", "-c", script, NULL };
	const char *exit3[] = { "sh", "-c", "exit 3", NULL };
	ino_t here = ns_inode("/proc/thread-self/ns/net"), there;

	snprintf(path, sizeof path, "/run/netns/%s", ns);
	there = ns_inode(path);
	cr_assert_neq(here, there);
	snprintf(script, sizeof script, "[ \"$(stat -L -c %%i /proc/self/ns/net)\" = %llu ]",
		 (unsigned long long)there);
	cr_assert_eq(netns_exec(ns, argv, true), 0, "the command did not run in %s", ns);
	cr_assert_eq(netns_exec(NULL, argv, true), 1, "without a name it runs here");
	cr_assert_eq(netns_exec(ns, exit3, true), 3);
	cr_assert_eq(netns_exec("sj-no-such-ns", exit3, true), -ENOENT);
	cr_assert_eq(netns_call(ns, inside, &there), 42);
	cr_assert_eq(ns_inode("/proc/thread-self/ns/net"), here, "the thread did not come back");
	cr_assert_eq(netns_call("sj-no-such-ns", inside, &there), -ENOENT);
}
