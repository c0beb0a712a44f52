/* Unit tests for orchestrator/journal (no privileges): field escaping against a naive
 * reference, parsing (header, torn last line, malformed input), the writer's round trip, and
 * reverse replay against a model world, including idempotent re-runs after a partial one; and
 * orchestrator/cleanup's record checks on hostile journals (cleanup_check, pure but /proc). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orchestrator/cleanup.h"
#include "orchestrator/journal.h"
#include "orchestrator/launch.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

/* Naive reference escaper: every byte <= 0x20, 0x7f or '%' becomes %xx. */
static void ref_escape(const char *in, char *out)
{
	for (; *in; in++) {
		unsigned char c = (unsigned char)*in;

		if (c <= 0x20 || c == 0x7f || c == '%')
			out += sprintf(out, "%%%02x", c);
		else
			*out++ = (char)c;
	}
	*out = '\0';
}

Test(journal, escape_matches_reference_and_round_trips)
{
	char in[64], esc[256], ref[256], back[64];

	srand(7);
	for (int iter = 0; iter < 5000; iter++) {
		int n = rand() % 40;

		for (int i = 0; i < n; i++)
			in[i] = (char)(1 + rand() % 255);
		in[n] = '\0';
		cr_assert_geq(journal_escape(in, esc, sizeof esc), 0);
		ref_escape(in, ref);
		cr_assert_str_eq(esc, ref);
		cr_assert_null(strchr(esc, ' '));
		cr_assert_eq(journal_unescape(esc, strlen(esc), back, sizeof back), n);
		cr_assert_str_eq(back, in);
	}
	cr_assert_eq(journal_escape("abcdef", esc, 4), -ENOSPC);
	cr_assert_eq(journal_unescape("%2", 2, back, sizeof back), -EINVAL);
	cr_assert_eq(journal_unescape("%zz", 3, back, sizeof back), -EINVAL);
	cr_assert_eq(journal_unescape("%00", 3, back, sizeof back), -EINVAL);
	cr_assert_eq(journal_unescape("a b", 3, back, sizeof back), -EINVAL);
}

static const char good[] =
	"stalenet-journal 1 4242 99 /tmp/run%20x sn1a2b-\n"
	"sysctl - net.ipv4.neigh.default.gc_thresh3 1024 16000\n"
	"netns sn1a2b-sw\n"
	"netns sn1a2b-n0\n"
	"iptables sn1a2b-n0 mangle PREROUTING -i eth0 -j NFQUEUE --queue-num 3 -m comment --comment a%20b\n"
	"proc 1234 5678 linkd\n"
	"netns sn1a2b-x\n"
	"iptables sn1a2b-sw mangle PREROUTING -i sn1a2b-p1 -j NFQUEUE --queue-num 4\n";

Test(journal, parses_header_and_records)
{
	struct journal_parsed *p = NULL;
	char err[128];

	cr_assert_eq(journal_parse(good, strlen(good), &p, err, sizeof err), 0, "%s", err);
	cr_assert_eq(p->pid, 4242);
	cr_assert_eq(p->start_time, 99);
	cr_assert_str_eq(p->run_dir, "/tmp/run x");
	cr_assert_str_eq(p->prefix, "sn1a2b-");
	cr_assert_not(p->ended);
	cr_assert_eq(p->n, 7);
	cr_assert_eq(p->recs[0].kind, JOURNAL_SYSCTL);
	cr_assert_eq(p->recs[0].nfields, 4);
	cr_assert_eq(p->recs[3].kind, JOURNAL_IPTABLES);
	cr_assert_eq(p->recs[3].nfields, 13);
	cr_assert_str_eq(p->recs[3].fields[12], "a b");
	cr_assert_eq(p->recs[3].line, 5);
	cr_assert_eq(p->recs[4].kind, JOURNAL_PROC);
	cr_assert_eq(p->recs[6].kind, JOURNAL_IPTABLES);
	journal_parsed_free(&p);
	cr_assert_null(p);
}

Test(journal, torn_last_line_is_ignored_and_end_marks)
{
	struct journal_parsed *p = NULL;
	char err[128], buf[1024];

	snprintf(buf, sizeof buf, "%snetns sn1a2b-n1", good); /* no newline: torn */
	cr_assert_eq(journal_parse(buf, strlen(buf), &p, err, sizeof err), 0, "%s", err);
	cr_assert_eq(p->n, 7);
	journal_parsed_free(&p);
	snprintf(buf, sizeof buf, "%send\n", good);
	cr_assert_eq(journal_parse(buf, strlen(buf), &p, err, sizeof err), 0);
	cr_assert(p->ended);
	journal_parsed_free(&p);
	/* A record after "end" reopens the run. */
	snprintf(buf, sizeof buf, "%send\nnetns sn1a2b-n9\n", good);
	cr_assert_eq(journal_parse(buf, strlen(buf), &p, err, sizeof err), 0);
	cr_assert_not(p->ended);
	cr_assert_eq(p->n, 8);
	journal_parsed_free(&p);
}

Test(journal, rejects_malformed)
{
	static const char *const bad[] = {
		"hello 1 2 3 4 5\n",
		"stalenet-journal 2 1 1 /x p\n",
		"stalenet-journal 1 0 1 /x p\n",
		"stalenet-journal 1 1 1 /x p\nnetns\n",
		"stalenet-journal 1 1 1 /x p\nnetns a b\n",
		"stalenet-journal 1 1 1 /x p\nbogus a\n",
		"stalenet-journal 1 1 1 /x p\nproc x 1 n\n",
		"stalenet-journal 1 1 1 /x p\nnetns  a\n",
		"stalenet-journal 1 1 1 /x p\nnetns a%zz\n",
		"stalenet-journal 1 1 1 /x p\nsysctl - k\n",
		/* kinds no code writes */
		"stalenet-journal 1 1 1 /x p\nlink - sn1a2b-x\n",
		"stalenet-journal 1 1 1 /x p\nmount /run/x\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct journal_parsed *p = NULL;
		char err[128] = "";

		cr_assert_eq(journal_parse(bad[i], strlen(bad[i]), &p, err, sizeof err), -EINVAL,
			     "case %zu accepted", i);
		cr_assert_null(p);
		cr_assert_not_null(strstr(err, "line"), "case %zu: %s", i, err);
	}
}

/* No whole header line (a run stopped while creating its journal) is told apart from a
 * malformed journal: nothing of that run exists, so cleanup has nothing to undo. */
Test(journal, no_header_is_nodata)
{
	static const char *const empty[] = { "", "stalenet-journal 1 12", "stalenet-journal 1 1 1 /x p" };

	for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
		struct journal_parsed *p = NULL;
		char err[128] = "";

		cr_assert_eq(journal_parse(empty[i], strlen(empty[i]), &p, err, sizeof err), -ENODATA,
			     "case %zu", i);
		cr_assert_null(p);
	}
}

/* A model world: the set of things that exist, keyed "kind:first-field". */
struct world {
	char items[64][96];
	int n;
	int undo_calls;
	int fail_after; /* undo fails (without effect) once this many calls were made; -1 never */
	char order[64][96];
	int n_order;
};

static void key_of(const struct journal_record *r, char *out, size_t len)
{
	snprintf(out, len, "%s:%s", journal_kind_name(r->kind),
		 r->kind == JOURNAL_SYSCTL ? r->fields[1] : r->fields[0]);
}

static int world_undo(void *arg, const struct journal_record *r)
{
	struct world *w = arg;
	char k[96];

	if (w->fail_after >= 0 && w->undo_calls >= w->fail_after)
		return -EIO;
	w->undo_calls++;
	key_of(r, k, sizeof k);
	snprintf(w->order[w->n_order++ % 64], 96, "%s", k);
	for (int i = 0; i < w->n; i++)
		if (!strcmp(w->items[i], k)) {
			memmove(w->items[i], w->items[i + 1], (size_t)(w->n - i - 1) * 96);
			w->n--;
			return 0;
		}
	return 0; /* already gone: fine */
}

Test(journal, replay_reverse_order_and_idempotent)
{
	struct journal_parsed *p = NULL;
	struct world w = { .fail_after = -1 };
	struct journal_ops ops = { .undo = world_undo, .arg = &w };
	char err[128];
	int failed;

	cr_assert_eq(journal_parse(good, strlen(good), &p, err, sizeof err), 0);
	/* Everything recorded exists, except sn1a2b-x (creation never happened). */
	for (size_t i = 0; i < p->n; i++) {
		if (p->recs[i].kind == JOURNAL_NETNS && !strcmp(p->recs[i].fields[0], "sn1a2b-x"))
			continue;
		key_of(&p->recs[i], w.items[w.n++], 96);
	}
	/* A partial teardown: fails after 3 undos. */
	w.fail_after = 3;
	cr_assert_eq(journal_replay(p, &ops, &failed), -EIO);
	cr_assert_eq(failed, 4);
	cr_assert_eq(w.n, 4);
	/* The first undone was the last recorded. */
	cr_assert_str_eq(w.order[0], "iptables:sn1a2b-sw");
	cr_assert_str_eq(w.order[1], "netns:sn1a2b-x");
	cr_assert_str_eq(w.order[2], "proc:1234");
	/* Re-run: completes, nothing left, no errors for what is already gone. */
	w.fail_after = -1;
	w.n_order = 0;
	cr_assert_eq(journal_replay(p, &ops, &failed), 0);
	cr_assert_eq(failed, 0);
	cr_assert_eq(w.n, 0);
	cr_assert_str_eq(w.order[6], "sysctl:net.ipv4.neigh.default.gc_thresh3");
	/* And again: still fine. */
	cr_assert_eq(journal_replay(p, &ops, &failed), 0);
	journal_parsed_free(&p);
}

Test(journal, writer_round_trip_batches_and_registry)
{
	char dir[] = "/tmp/stalenet-tj-XXXXXX", reg[256], err[256], target[512];
	struct journal *j;
	struct journal_parsed *p = NULL;
	const char *rule[] = { "-i", "eth0", "-m", "comment", "--comment", "two words", "-j", "ACCEPT" };
	ssize_t n;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(reg, sizeof reg, "%s/registry", dir);
	journal_set_registry_dir(reg);
	j = journal_create(dir, "snt01-", err, sizeof err);
	cr_assert_not_null(j, "%s", err);
	/* A second run with the same prefix or in the same dir is refused. */
	cr_assert_null(journal_create(dir, "snt02-", err, sizeof err));
	cr_assert_eq(journal_netns(j, "snt01-sw"), 0);
	cr_assert_eq(journal_batch_begin(j), 0);
	cr_assert_eq(journal_batch_begin(j), -EBUSY);
	for (int i = 0; i < 10; i++) {
		char name[32];

		snprintf(name, sizeof name, "snt01-n%d", i);
		cr_assert_eq(journal_netns(j, name), 0);
	}
	cr_assert_eq(journal_batch_commit(j), 0);
	cr_assert_eq(journal_netns(j, ""), -EINVAL);
	cr_assert_eq(journal_iptables(j, "snt01-n0", "filter", "INPUT", 8, rule), 0);
	cr_assert_eq(journal_proc(j, 77, 1234567, "stalenet node"), 0);
	cr_assert_eq(journal_sysctl(j, NULL, "net.ipv4.tcp_allowed_congestion_control", "reno bbr", NULL), 0);
	strcat(reg, "/snt01-");
	n = readlink(reg, target, sizeof target - 1);
	cr_assert_gt(n, 0);
	target[n] = '\0';
	cr_assert_str_eq(target, journal_path(j));
	cr_assert_eq(journal_load(journal_path(j), &p, err, sizeof err), 0, "%s", err);
	cr_assert_eq(p->pid, getpid());
	cr_assert_gt(p->start_time, 0);
	cr_assert_eq(p->n, 14);
	cr_assert_str_eq(p->recs[10].fields[0], "snt01-n9");
	cr_assert_eq(p->recs[11].nfields, 11);
	cr_assert_str_eq(p->recs[11].fields[8], "two words");
	cr_assert_str_eq(p->recs[12].fields[2], "stalenet node");
	cr_assert_str_eq(p->recs[13].fields[2], "reno bbr");
	cr_assert_eq(p->recs[13].nfields, 3);
	journal_parsed_free(&p);
	cr_assert_eq(journal_mark_ended(j), 0);
	cr_assert_eq(access(reg, F_OK), -1, "registry entry removed");
	cr_assert_eq(journal_load(journal_path(j), &p, err, sizeof err), 0);
	cr_assert(p->ended);
	journal_parsed_free(&p);
	journal_destroy(&j);
	cr_assert_null(j);
	journal_set_registry_dir(NULL);
}

/* ---- cleanup_check: what a journal may name -------------------------------------------------- */

#define HDR "stalenet-journal 1 2147483646 1 /tmp/r sn1a2b-\n"

/* Parse text and run the record checks; why gets the reason. */
static int check(const char *text, char *why, size_t len)
{
	struct journal_parsed *p = NULL;
	char err[256];
	int rc;

	cr_assert_eq(journal_parse(text, strlen(text), &p, err, sizeof err), 0, "%s: %s", text, err);
	why[0] = '\0';
	rc = cleanup_check(p, why, len);
	journal_parsed_free(&p);
	return rc;
}

Test(journal, check_accepts_what_stalenet_writes)
{
	char why[512];
	const char *ok = HDR
		"sysctl - net.ipv4.neigh.default.gc_thresh3 1024 16000\n"
		"sysctl - net.ipv4.tcp_allowed_congestion_control reno%20cubic reno%20cubic%20bbr\n"
		"sysctl - net.ipv4.tcp_allowed_congestion_control reno%20cubic\n"
		"netns sn1a2b-sw\n"
		"netns sn1a2b-n0\n"
		"iptables sn1a2b-n0 mangle PREROUTING -i eth0 -j NFQUEUE --queue-num 3\n"
		"iptables sn1a2b-sw mangle PREROUTING -m physdev --physdev-in sn1a2b-p0 -j NFQUEUE --queue-num 65535\n"
		"proc 2147483640 5678 linkd\n"
		"sysctl - net.ipv4.neigh.default.gc_thresh2 512 1024 256\n"
		"sysctl - net.ipv4.tcp_allowed_congestion_control reno reno%20bbr reno\n"
		"sysctl-released - net.ipv4.tcp_allowed_congestion_control\n"
		"end\n";

	cr_assert_eq(check(ok, why, sizeof why), 0, "%s", why);
}

/* Claims (5 fields) and their release markers are written and read back; the marker is not
 * written once the journal ended ("end" must stay the last record). */
Test(journal, claims_and_releases_round_trip)
{
	char dir[] = "/tmp/snt-jclaim-XXXXXX", reg[128], err[256];
	struct journal_parsed *p = NULL;
	struct journal *j;

	cr_assert_not_null(support_mkdtemp(dir));
	snprintf(reg, sizeof reg, "%s/reg", dir);
	journal_set_registry_dir(reg);
	j = journal_create(dir, "sn1a2b-", err, sizeof err);
	cr_assert_not_null(j, "%s", err);
	cr_assert_eq(journal_sysctl_claim(j, "net.ipv4.tcp_allowed_congestion_control", "reno",
					  "reno cubic", "reno"), 0);
	cr_assert_eq(journal_sysctl_released(j, "net.ipv4.tcp_allowed_congestion_control"), 0);
	cr_assert_eq(journal_mark_ended(j), 0);
	cr_assert_eq(journal_sysctl_released(j, "net.ipv4.neigh.default.gc_thresh1"), 0);
	cr_assert_eq(journal_load(journal_path(j), &p, err, sizeof err), 0, "%s", err);
	cr_assert(p->ended);
	cr_assert_eq(p->n, 2);
	cr_assert_eq(p->recs[0].kind, JOURNAL_SYSCTL);
	cr_assert_eq(p->recs[0].nfields, 5);
	cr_assert_str_eq(p->recs[0].fields[3], "reno cubic");
	cr_assert_str_eq(p->recs[0].fields[4], "reno");
	cr_assert_eq(p->recs[1].kind, JOURNAL_SYSCTL_RELEASED);
	cr_assert_str_eq(journal_kind_name(JOURNAL_SYSCTL_RELEASED), "sysctl-released");
	journal_parsed_free(&p);
	journal_destroy(&j);
	journal_set_registry_dir(NULL);
	{
		char path[160];

		snprintf(path, sizeof path, "%s/journal", dir);
		unlink(path);
		rmdir(reg);
		rmdir(dir);
	}
}

/* Each hostile record is refused with one line naming its line number and the reason. */
Test(journal, check_refuses_hostile_records)
{
	static const struct { const char *rec, *reason; } bad[] = {
		{ "netns other-ns", "lacks the run prefix" },
		{ "netns sn1a2b-", "lacks the run prefix" },
		{ "sysctl - kernel.core_pattern |/bin/sh /tmp/x", "sysctl stalenet never sets" },
		{ "sysctl sn1a2b-n0 net.ipv4.neigh.default.gc_thresh1 1 2", "outside the host namespace" },
		{ "sysctl - net.ipv4.neigh.default.gc_thresh1 1;x 2", "implausible sysctl value" },
		{ "sysctl - net.ipv4.tcp_allowed_congestion_control reno%0acubic", "implausible sysctl value" },
		{ "sysctl - net.ipv4.neigh.default.gc_thresh1 128", "without the value it set" },
		{ "sysctl - net.ipv4.neigh.default.gc_thresh1 128 256 1$(x)", "implausible sysctl value" },
		{ "sysctl-released sn1a2b-n0 net.ipv4.neigh.default.gc_thresh1", "outside the host namespace" },
		{ "proc 1 1 init", "never a process of a run" },
		{ "proc 5 0 x", "never a process of a run" },
		{ "iptables - filter INPUT -j ACCEPT", "outside the run's namespaces" },
		{ "iptables sn1a2b-n0 filter INPUT -j ACCEPT", "table or chain stalenet never uses" },
		{ "iptables sn1a2b-n0 mangle PREROUTING -i eth0 -j ACCEPT", "not an NFQUEUE rule" },
		{ "iptables sn1a2b-n0 mangle PREROUTING -i eth0 -j NFQUEUE --queue-num 70000",
		  "not an NFQUEUE rule" },
		{ "iptables sn1a2b-n0 mangle PREROUTING -s 0/0 -j NFQUEUE --queue-num 1", "not an NFQUEUE rule" },
	};

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char text[512], why[512];

		snprintf(text, sizeof text, HDR "netns sn1a2b-sw\n%s\n", bad[i].rec);
		cr_assert_eq(check(text, why, sizeof why), -EPERM, "accepted: %s", bad[i].rec);
		cr_assert(!strncmp(why, "line 3: ", 8), "%s: '%s'", bad[i].rec, why);
		cr_assert_not_null(strstr(why, bad[i].reason), "%s: '%s'", bad[i].rec, why);
		cr_assert_null(strchr(why, '\n'), "more than one line: %s", why);
	}
	{
		char why[256];

		cr_assert_eq(check("stalenet-journal 1 5 1 /tmp/r s\n", why, sizeof why), -EPERM);
		cr_assert_not_null(strstr(why, "prefix"), "%s", why);
		cr_assert_eq(check("stalenet-journal 1 5 1 tmp/r sn1a2b-\n", why, sizeof why), -EPERM);
	}
}

/* True once process *arg has exec'd sleep. */
static bool runs_sleep(void *arg)
{
	char link[64], exe[256];
	ssize_t n;

	snprintf(link, sizeof link, "/proc/%d/exe", (int)*(pid_t *)arg);
	n = readlink(link, exe, sizeof exe - 1);
	return n > 0 && (exe[n] = '\0', strstr(exe, "sleep") != NULL);
}

/* A live process with the recorded pid and start time that is not a stalenet program of the
 * run (here: sleep) is refused; the same record once the process is gone is fine. */
Test(journal, check_refuses_a_live_process_that_is_not_ours, .timeout = 30)
{
	char text[512], why[512];
	uint64_t st = 0;
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execlp("sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	/* Wait until the child runs sleep (its exe changes at exec). A deadline, not a count of
	 * 1 ms pauses, and a failure when it passes: before the exec the child is this test
	 * binary, and the check below would then not be about sleep at all. */
	cr_assert(support_wait_until(runs_sleep, &pid, 20000), "the child did not exec sleep in 20 s");
	st = launch_proc_start_time(pid);
	cr_assert_gt(st, 0);
	snprintf(text, sizeof text, HDR "proc %d %llu sleep\n", (int)pid, (unsigned long long)st);
	cr_assert_eq(check(text, why, sizeof why), -EPERM);
	cr_assert_not_null(strstr(why, "not a stalenet program"), "%s", why);
	cr_assert(cleanup_proc_alive(pid, st), "checking must not touch the process");
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(check(text, why, sizeof why), 0, "%s", why);
}

/* journal_read_fd reads from the current offset to the end across several buffer growths,
 * byte for byte, and passes a read error up. */
Test(journal, read_fd_reads_to_the_end)
{
	char tmpl[] = "/tmp/snt-jreadfd-XXXXXX", *text = NULL;
	size_t total = 200000, len = 1;
	unsigned char *ref = malloc(total);
	int fd = support_mkstemp(tmpl);

	cr_assert_not_null(ref);
	cr_assert_geq(fd, 0);
	unlink(tmpl);
	for (size_t i = 0; i < total; i++)
		ref[i] = (unsigned char)(i * 7 + i / 251);
	cr_assert_eq(write(fd, ref, total), (ssize_t)total);
	cr_assert_eq(lseek(fd, 10, SEEK_SET), 10);
	cr_assert_eq(journal_read_fd(fd, &text, &len), 0);
	cr_assert_eq(len, total - 10);
	cr_assert_eq(memcmp(text, ref + 10, len), 0);
	free(text);
	cr_assert_eq(journal_read_fd(fd, &text, &len), 0, "at the end: nothing left");
	cr_assert_eq(len, 0);
	free(text);
	close(fd);
	cr_assert_eq(journal_read_fd(fd, &text, &len), -EBADF);
	cr_assert_null(text);
	free(ref);
}
