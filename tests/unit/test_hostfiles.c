/* Unit tests for orchestrator/hostfiles: a host's agent may write exactly its nodes' files into
 * the run directory; hostile names are refused, and a symlink, hard link or fifo planted where a
 * file goes is never written through (nor blocks); a file sent whole replaces the copy all at
 * once or not at all. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/hostfiles.h"
#include "tests/support/files.h"

static const char *const names[] = { "worker0", "server", "hub" };
#define N (sizeof names / sizeof names[0])

Test(hostfiles, the_files_nodes_write_are_allowed)
{
	static const char *const ok[] = { "eval.csv", "partition.csv", "linkcheck.csv", "fleet.csv", "fleet_repair.csv",
					  "ensemble.csv", "nodes/worker0.csv", "nodes/server.csv", "nodes/hub.conf", "nodes/worker0.conf",
					  "logs/worker0.log", "logs/hub.log", "logs/linkd.log" };
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		cr_expect(hostfiles_allowed(ok[i], names, N), "%s refused", ok[i]);
}

Test(hostfiles, hostile_names_are_refused)
{
	static const char *const bad[] = {
		"", "/", ".", "..", "../x", "/etc/passwd", "/tmp/eval.csv", "summary.csv", "meta.json", "journal",
		"events.csv", "progress.csv", "links.csv", "scenario.yaml", "workers.csv", "fleet_summary.csv",
		"recover.csv", "complete", "nodes/../meta.json", "nodes/../summary.csv", "logs/../events.csv",
		"nodes/./worker0.csv", "nodes//worker0.csv", "./eval.csv", "eval.csv/", "eval.csv ", " eval.csv",
		"EVAL.CSV", "nodes/worker1.csv", /* another host's node */
		"nodes/worker0.csv/x", "nodes/worker0.params", "nodes/worker0.peers.sqlite", "fleet.sqlite",
		"nodes/.csv", "nodes/worker0", "nodes/worker0.csv.bak", "nodes/xworker0.csv", "nodes/worker.csv",
		"logs/worker0.csv", "nodes/worker0.log", "logs/linkd.log/", "nodes/linkd.csv", "nodes",
		"nodes/", "logs/", "nodes/hub.conf\n", "nodes/worker0.csv\x01", "meta.json/../eval.csv",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect(!hostfiles_allowed(bad[i], names, N), "'%s' allowed", bad[i]);
	cr_expect(!hostfiles_allowed(NULL, names, N));
	/* a host without nodes writes only the shared files */
	cr_expect(!hostfiles_allowed("nodes/worker0.csv", NULL, 0));
	cr_expect(hostfiles_allowed("eval.csv", NULL, 0));
	/* overlong: a name longer than any node's */
	char lname[100], rel[120] = "nodes/";
	memset(lname, 'a', sizeof lname - 1);
	lname[sizeof lname - 1] = 0;
	strcat(rel, lname);
	strcat(rel, ".csv");
	const char *lnames[] = { lname };
	cr_expect(!hostfiles_allowed(rel, lnames, 1));
}

static char dir[64];
static int dirfd_ = -1;

static void setup(void)
{
	char p[128];
	support_tmpdir(dir, sizeof dir, "hostfiles");
	snprintf(p, sizeof p, "%s/nodes", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dirfd_, 0);
}

static void teardown(void)
{
	if (dirfd_ >= 0)
		close(dirfd_);
	if (support_rm_rf(dir) < 0)
		cr_log_warn("could not remove %s", dir);
}

static void append(const char *rel, const char *text)
{
	int fd = hostfiles_open(dirfd_, rel, O_WRONLY | O_APPEND | O_CREAT, 0644);
	cr_assert_geq(fd, 0, "%s: %s", rel, strerror(-fd));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

Test(hostfiles, open_creates_and_appends, .init = setup, .fini = teardown)
{
	char p[128];
	append("nodes/worker0.csv", "a\n");
	append("nodes/worker0.csv", "b\n");
	append("eval.csv", "c\n");
	snprintf(p, sizeof p, "%s/nodes/worker0.csv", dir);
	size_t len;
	char *t = support_slurp(p, &len);
	cr_assert_str_eq(t, "a\nb\n");
	free(t);
	cr_assert_eq(hostfiles_open(dirfd_, "logs/x.log", O_RDONLY, 0), -ENOENT);   /* no logs/ here */
	cr_assert_eq(hostfiles_open(dirfd_, "nodes/nothing.csv", O_RDONLY, 0), -ENOENT);
	cr_assert_eq(hostfiles_open(dirfd_, "nodes/a/b", O_RDONLY, 0), -EINVAL);
}

Test(hostfiles, planted_symlinks_hard_links_and_fifos_are_refused, .init = setup, .fini = teardown)
{
	char p[160], target[160], canary[160];
	snprintf(canary, sizeof canary, "%s/canary", dir);
	support_canary_plant(canary);
	/* a symlink where the file goes */
	snprintf(p, sizeof p, "%s/eval.csv", dir);
	cr_assert_eq(symlink(canary, p), 0);
	cr_expect_eq(hostfiles_open(dirfd_, "eval.csv", O_WRONLY | O_APPEND | O_CREAT, 0644), -ELOOP);
	/* the subdirectory replaced by a symlink to elsewhere */
	snprintf(target, sizeof target, "%s/elsewhere", dir);
	cr_assert_eq(mkdir(target, 0755), 0);
	snprintf(p, sizeof p, "%s/logs", dir);
	cr_assert_eq(symlink(target, p), 0);
	cr_expect_eq(hostfiles_open(dirfd_, "logs/linkd.log", O_WRONLY | O_APPEND | O_CREAT, 0644), -ENOTDIR);
	snprintf(p, sizeof p, "%s/elsewhere/linkd.log", dir);
	cr_expect_neq(access(p, F_OK), 0, "written through the planted directory symlink");
	/* a hard link to a file elsewhere */
	snprintf(p, sizeof p, "%s/partition.csv", dir);
	cr_assert_eq(link(canary, p), 0);
	cr_expect_eq(hostfiles_open(dirfd_, "partition.csv", O_WRONLY | O_APPEND | O_CREAT, 0644), -EPERM);
	/* a fifo: refused at once, for reading and for writing (no reader would block the open) */
	snprintf(p, sizeof p, "%s/nodes/worker0.csv", dir);
	cr_assert_eq(mkfifo(p, 0644), 0);
	cr_expect_eq(hostfiles_open(dirfd_, "nodes/worker0.csv", O_RDONLY, 0), -EPERM);
	int r = hostfiles_open(dirfd_, "nodes/worker0.csv", O_WRONLY | O_APPEND | O_CREAT, 0644);
	cr_expect(r == -ENXIO || r == -EPERM, "fifo opened for writing: %d", r);   /* ENXIO: no reader */
	support_canary_intact(canary);
}

Test(hostfiles, files_sent_whole_are_the_nodes_own)
{
	static const char *const ok[] = { "nodes/worker0.params", "nodes/worker0.peers.sqlite",
					  "nodes/worker0.peers.sqlite-wal", "nodes/worker0.peers.sqlite-shm",
					  "nodes/server.fleet", "nodes/hub.x", "nodes/worker0.a-b.c9", "fleet.sqlite",
					  "fleet.sqlite-wal", "fleet.sqlite-shm" };
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		cr_expect(hostfiles_whole_allowed(ok[i], names, N, true), "%s refused", ok[i]);
	/* the registry's store from the registry's host only */
	cr_expect(!hostfiles_whole_allowed("fleet.sqlite", names, N, false));
	cr_expect(!hostfiles_whole_allowed("fleet.sqlite-wal", names, N, false));
	cr_expect(hostfiles_whole_allowed("nodes/worker0.params", names, N, false));
	static const char *const bad[] = {
		"", "nodes/", "nodes/worker0", "nodes/worker0.", "nodes/worker0.csv", "nodes/worker0.conf",
		"nodes/worker1.params", /* another host's node */ "nodes/xworker0.params", "nodes/worker.params",
		"nodes/worker0..params", "nodes/worker0.params.", "nodes/worker0.-params", "nodes/worker0.params-",
		"nodes/worker0.a..b", "nodes/worker0.a.-b", "nodes/worker0.Params", "nodes/worker0.pa rams",
		"nodes/worker0.params/x", "nodes/worker0/x.params", "nodes/../worker0.params", "nodes/.worker0.params",
		"nodes/worker0.params\n", "nodes/worker0.abcdefghijklmnopqrstuvwxy", "logs/worker0.params",
		"worker0.params", "fleet.sqlite-journal", "fleet.db", "summary.csv", "meta.json", "eval.csv",
		"../fleet.sqlite", "/fleet.sqlite", "nodes/fleet.sqlite", "logs/fleet.sqlite",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect(!hostfiles_whole_allowed(bad[i], names, N, true), "'%s' allowed", bad[i]);
	cr_expect(!hostfiles_whole_allowed(NULL, names, N, true));
	cr_expect(!hostfiles_whole_allowed("nodes/worker0.params", NULL, 0, true), "a host without nodes");
	cr_expect(hostfiles_whole_allowed("nodes/worker0.abcdefghijklmnopqrstuvwx", names, N, true), "24 characters");
}

static char *slurp_rel(const char *rel)
{
	char p[160];
	size_t len;
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	return support_read_file(p, &len);
}

/* Entries of dir/sub, "." and ".." not counted. */
static int entries(const char *sub)
{
	char p[160];
	snprintf(p, sizeof p, "%s/%s", dir, sub);
	DIR *d = opendir(p);
	struct dirent *e;
	int n = 0;
	cr_assert(d, "%s", p);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

Test(hostfiles, a_replacement_is_all_or_nothing, .init = setup, .fini = teardown)
{
	struct hostfiles_replace r;
	append("nodes/worker0.conf", "old=1\nmore=2\n");
	/* committed: the new content under the name, no temporary left */
	cr_assert_eq(hostfiles_replace_begin(dirfd_, "nodes/worker0.conf", &r), 0);
	cr_expect_eq(r.tmp[0], '.');
	cr_assert_eq(write(r.fd, "new=1\n", 6), 6);
	char *t = slurp_rel("nodes/worker0.conf");
	cr_expect_str_eq(t, "old=1\nmore=2\n", "the old copy stays until the end");
	free(t);
	cr_assert_eq(hostfiles_replace_end(&r, true), 0);
	cr_expect_eq(r.fd, -1);
	cr_expect_eq(r.parentfd, -1);
	t = slurp_rel("nodes/worker0.conf");
	cr_expect_str_eq(t, "new=1\n");
	free(t);
	cr_expect_eq(entries("nodes"), 1, "a temporary file left behind");
	/* abandoned: the copy as it was, nothing left */
	cr_assert_eq(hostfiles_replace_begin(dirfd_, "nodes/worker0.conf", &r), 0);
	cr_assert_eq(write(r.fd, "half", 4), 4);
	cr_assert_eq(hostfiles_replace_end(&r, false), 0);
	t = slurp_rel("nodes/worker0.conf");
	cr_expect_str_eq(t, "new=1\n");
	free(t);
	cr_expect_eq(entries("nodes"), 1);
	cr_expect_eq(hostfiles_replace_end(&r, true), 0, "an idle replacement ends quietly");
	/* a top-level file, new */
	cr_assert_eq(hostfiles_replace_begin(dirfd_, "fleet.sqlite", &r), 0);
	cr_assert_eq(write(r.fd, "\0\1\2", 3), 3);
	cr_assert_eq(hostfiles_replace_end(&r, true), 0);
	char p[160];
	struct stat sb;
	snprintf(p, sizeof p, "%s/fleet.sqlite", dir);
	cr_assert_eq(stat(p, &sb), 0);
	cr_expect_eq(sb.st_size, 3);
	cr_expect_eq(sb.st_mode & 07777, 0644);
}

Test(hostfiles, a_replacement_never_writes_through_a_planted_link, .init = setup, .fini = teardown)
{
	struct hostfiles_replace r;
	char p[160], target[160], canary[160];
	snprintf(canary, sizeof canary, "%s/canary", dir);
	support_canary_plant(canary);
	/* a symlink where the file goes: replaced by the file, its target untouched */
	snprintf(p, sizeof p, "%s/nodes/worker0.params", dir);
	cr_assert_eq(symlink(canary, p), 0);
	cr_assert_eq(hostfiles_replace_begin(dirfd_, "nodes/worker0.params", &r), 0);
	cr_assert_eq(write(r.fd, "xyz", 3), 3);
	cr_assert_eq(hostfiles_replace_end(&r, true), 0);
	struct stat sb;
	cr_assert_eq(lstat(p, &sb), 0);
	cr_expect(S_ISREG(sb.st_mode), "the symlink itself replaced");
	/* a hard link: the name replaced, the other link's file untouched */
	snprintf(p, sizeof p, "%s/fleet.sqlite", dir);
	cr_assert_eq(link(canary, p), 0);
	cr_assert_eq(hostfiles_replace_begin(dirfd_, "fleet.sqlite", &r), 0);
	cr_assert_eq(write(r.fd, "xyz", 3), 3);
	cr_assert_eq(hostfiles_replace_end(&r, true), 0);
	/* the subdirectory a symlink to elsewhere: refused before anything is created */
	snprintf(target, sizeof target, "%s/elsewhere", dir);
	cr_assert_eq(mkdir(target, 0755), 0);
	snprintf(p, sizeof p, "%s/logs", dir);
	cr_assert_eq(symlink(target, p), 0);
	cr_expect_eq(hostfiles_replace_begin(dirfd_, "logs/linkd.log", &r), -ENOTDIR);
	cr_expect_eq(r.fd, -1);
	cr_expect_eq(entries("elsewhere"), 0, "created through the planted directory symlink");
	/* a directory where the file goes: the rename fails, nothing is left */
	snprintf(p, sizeof p, "%s/nodes/worker0.fleet", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	cr_assert_eq(hostfiles_replace_begin(dirfd_, "nodes/worker0.fleet", &r), 0);
	cr_expect_lt(hostfiles_replace_end(&r, true), 0);
	cr_expect_eq(entries("nodes"), 2, "worker0.params and the directory only");
	support_canary_intact(canary);
}
