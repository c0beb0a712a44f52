/* Unit tests for orchestrator/hostshare. The pure rules: every interleaving of 2 and 3 runs
 * claiming and releasing the shared host sysctls (some killed and cleaned up later) leaves
 * the value exactly as found, and while a run lives its need is met; values changed by hand
 * are left alone; hostile journal fields are refused. The registry scan: only claims still
 * held count. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/hostshare.h"
#include "orchestrator/journal.h"
#include "tests/support/files.h"

#define RUNS_MAX 3
#define GC_KEY "net.ipv4.neigh.default.gc_thresh3"

enum { IDLE, LIVE, DEAD, GONE };

struct sim {
	const char *key;
	char cur[HOSTSHARE_VALUE_MAX];
	int n;
	const char *need[RUNS_MAX];
	bool crash[RUNS_MAX];
	int state[RUNS_MAX];
	struct hostshare_claim claim[RUNS_MAX];
};

static bool has_token(const char *list, const char *t)
{
	char copy[HOSTSHARE_VALUE_MAX], *save, *tok;

	snprintf(copy, sizeof copy, "%s", list);
	for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		if (!strcmp(tok, t))
			return true;
	return false;
}

/* Claims of the other runs in the given states. */
static size_t others(const struct sim *s, int me, bool dead_too, struct hostshare_claim *out)
{
	size_t n = 0;

	for (int i = 0; i < s->n; i++)
		if (i != me && (s->state[i] == LIVE || (dead_too && s->state[i] == DEAD)))
			out[n++] = s->claim[i];
	return n;
}

static void release(struct sim *s, int r)
{
	struct hostshare_claim live[RUNS_MAX];
	size_t n = others(s, r, false, live);
	char out[HOSTSHARE_VALUE_MAX];
	int rc = hostshare_release(&s->claim[r], s->cur, live, n, out, sizeof out);

	cr_assert_geq(rc, 0);
	if (rc == 1)
		snprintf(s->cur, sizeof s->cur, "%s", out);
}

static void step(struct sim *s, int r)
{
	if (s->state[r] == IDLE) {
		struct hostshare_claim o[RUNS_MAX];
		size_t n = others(s, r, true, o);
		int rc;

		memset(&s->claim[r], 0, sizeof s->claim[r]);
		snprintf(s->claim[r].key, sizeof s->claim[r].key, "%s", s->key);
		rc = hostshare_take(&s->claim[r], s->cur, s->need[r], o, n);
		cr_assert_geq(rc, 0);
		if (rc == 1)
			snprintf(s->cur, sizeof s->cur, "%s", s->claim[r].new_value);
		s->state[r] = LIVE;
	} else if (s->state[r] == LIVE) {
		if (s->crash[r]) {
			s->state[r] = DEAD; /* killed: its journal stays registered */
		} else {
			release(s, r);
			s->state[r] = GONE;
		}
	} else if (s->state[r] == DEAD) {
		release(s, r); /* `stalenet cleanup` replays the dead run's claim */
		s->state[r] = GONE;
	}
}

static void check_needs(const struct sim *s)
{
	for (int i = 0; i < s->n; i++) {
		if (s->state[i] != LIVE)
			continue;
		if (hostshare_is_list(s->key))
			cr_assert(has_token(s->cur, s->need[i]), "run %d needs %s, host has '%s'", i,
				  s->need[i], s->cur);
		else
			cr_assert_geq(atol(s->cur), atol(s->need[i]), "run %d needs %s, host has %s", i,
				      s->need[i], s->cur);
	}
}

static long n_checked;

/* Every order of the events left (each run: start, stop, cleanup when killed). */
static void explore(struct sim *s, const char *orig)
{
	bool any = false;

	for (int r = 0; r < s->n; r++) {
		struct sim next;

		if (s->state[r] == GONE)
			continue;
		any = true;
		next = *s;
		step(&next, r);
		check_needs(&next);
		explore(&next, orig);
	}
	if (!any) {
		cr_assert_str_eq(s->cur, orig, "host left as %s, found as %s", s->cur, orig);
		n_checked++;
	}
}

static void all_modes(const char *key, const char *orig, int n, const char *const *needs)
{
	for (int mask = 0; mask < (1 << n); mask++) {
		struct sim s = { .key = key, .n = n };

		snprintf(s.cur, sizeof s.cur, "%s", orig);
		for (int i = 0; i < n; i++) {
			s.need[i] = needs[i];
			s.crash[i] = mask & (1 << i);
		}
		explore(&s, orig);
	}
}

Test(hostshare, cc_list_every_interleaving_restores_the_original)
{
	static const char *const names[] = { "reno", "cubic", "bbr", "htcp" };

	n_checked = 0;
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++) {
			const char *two[] = { names[a], names[b] };

			all_modes(HOSTSHARE_CC_KEY, "reno cubic", 2, two);
			for (int c = 0; c < 4; c++) {
				const char *three[] = { names[a], names[b], names[c] };

				all_modes(HOSTSHARE_CC_KEY, "reno", 3, three);
			}
		}
	cr_assert_gt(n_checked, 100000);
}

Test(hostshare, gc_thresh_every_interleaving_restores_the_original)
{
	static const char *const wants[] = { "64", "128", "512", "2048" };

	n_checked = 0;
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++)
			for (int c = 0; c < 4; c++) {
				const char *three[] = { wants[a], wants[b], wants[c] };

				all_modes(GC_KEY, "128", 3, three);
				all_modes(GC_KEY, "128", 2, three);
			}
	cr_assert_gt(n_checked, 100000);
}

/* The interleaving of the bug report: A adds cubic, B adds reno, A leaves, B leaves. */
Test(hostshare, overlapping_runs_do_not_drop_or_resurrect_names)
{
	struct hostshare_claim a = { .key = HOSTSHARE_CC_KEY }, b = { .key = HOSTSHARE_CC_KEY };
	char cur[HOSTSHARE_VALUE_MAX] = "bbr", out[HOSTSHARE_VALUE_MAX];

	cr_assert_eq(hostshare_take(&a, cur, "cubic", NULL, 0), 1);
	cr_assert_str_eq(a.new_value, "bbr cubic");
	cr_assert_str_eq(a.orig, "bbr");
	snprintf(cur, sizeof cur, "%s", a.new_value);
	cr_assert_eq(hostshare_take(&b, cur, "reno", &a, 1), 1);
	cr_assert_str_eq(b.orig, "bbr");
	snprintf(cur, sizeof cur, "cubic reno bbr"); /* the kernel's own order */
	cr_assert_eq(hostshare_release(&a, cur, &b, 1, out, sizeof out), 1);
	cr_assert_str_eq(out, "reno bbr"); /* cubic gone, reno kept for B */
	cr_assert_eq(hostshare_release(&b, out, NULL, 0, cur, sizeof cur), 1);
	cr_assert_str_eq(cur, "bbr");
}

Test(hostshare, hand_changed_values_are_left_alone)
{
	struct hostshare_claim a = { .key = GC_KEY }, l = { .key = HOSTSHARE_CC_KEY };
	char out[HOSTSHARE_VALUE_MAX];

	cr_assert_eq(hostshare_take(&a, "1024", "4096", NULL, 0), 1);
	cr_assert_eq(hostshare_release(&a, "8000", NULL, 0, out, sizeof out), 0);
	cr_assert_eq(hostshare_release(&a, "4096", NULL, 0, out, sizeof out), 1);
	cr_assert_str_eq(out, "1024");
	/* list: only our name goes, whatever else was added meanwhile stays */
	cr_assert_eq(hostshare_take(&l, "reno", "bbr", NULL, 0), 1);
	cr_assert_eq(hostshare_release(&l, "reno bbr vegas", NULL, 0, out, sizeof out), 1);
	cr_assert_str_eq(out, "reno vegas");
	cr_assert_eq(hostshare_release(&l, "reno vegas", NULL, 0, out, sizeof out), 0);
}

Test(hostshare, hostile_records_refused)
{
	struct hostshare_claim c;
	char *bad1[] = { "-", GC_KEY, "1;x", "2", "1" };
	char *bad2[] = { "-", HOSTSHARE_CC_KEY, "reno", "reno\nx", "reno" };
	char *bad3[] = { "sn1-n0", GC_KEY, "1", "2", "1" };
	char *good[] = { "-", HOSTSHARE_CC_KEY, "reno", "reno bbr", "reno" };
	char *old[] = { "-", GC_KEY, "1024", "16000" };

	cr_assert_eq(hostshare_from_record(&c, 5, bad1), -EINVAL);
	cr_assert_eq(hostshare_from_record(&c, 5, bad2), -EINVAL);
	cr_assert_eq(hostshare_from_record(&c, 5, bad3), -EINVAL);
	cr_assert_eq(hostshare_from_record(&c, 5, good), 0);
	cr_assert_str_eq(c.new_value, "reno bbr");
	cr_assert_eq(hostshare_from_record(&c, 4, old), 0);
	cr_assert_str_eq(c.orig, "");
	cr_assert_eq(hostshare_take(&c, "reno", "bad name", NULL, 0), -EINVAL);
}

/* ---- the registry scan -------------------------------------------------------------------- */

static bool alive_unless_pid1(pid_t pid, uint64_t start_time)
{
	(void)start_time;
	return pid != 1;
}

static void hand_journal(const char *base, const char *prefix, const char *records)
{
	char dir[256], path[300], link[300];
	FILE *f;

	snprintf(dir, sizeof dir, "%s/%s", base, prefix);
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(path, sizeof path, "%s/journal", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "stalenet-journal 1 1 1 %s %s\n%s", dir, prefix, records);
	cr_assert_eq(fclose(f), 0);
	snprintf(link, sizeof link, "%s/reg/%s", base, prefix);
	cr_assert_eq(symlink(path, link), 0);
}

/* Only claims of registered runs count: not released, not ended, plausible; the dead one only
 * when asked for all. The run's own journal is left out. */
Test(hostshare, scan_sees_the_claims_that_still_hold)
{
	char base[] = "/tmp/snt-hshare-XXXXXX", reg[128], dir[256], err[256];
	struct hostshare_claim *v = NULL;
	struct journal *mine, *other;
	int n;

	cr_assert_not_null(support_mkdtemp(base));
	snprintf(reg, sizeof reg, "%s/reg", base);
	cr_assert_eq(mkdir(reg, 0700), 0);
	journal_set_registry_dir(reg);
	snprintf(dir, sizeof dir, "%s/mine", base);
	cr_assert_eq(mkdir(dir, 0700), 0);
	mine = journal_create(dir, "snaaaa-", err, sizeof err);
	cr_assert_not_null(mine, "%s", err);
	cr_assert_eq(journal_sysctl_claim(mine, HOSTSHARE_CC_KEY, "reno", "reno htcp", "reno"), 0);
	snprintf(dir, sizeof dir, "%s/other", base);
	cr_assert_eq(mkdir(dir, 0700), 0);
	other = journal_create(dir, "snbbbb-", err, sizeof err);
	cr_assert_not_null(other, "%s", err);
	cr_assert_eq(journal_sysctl_claim(other, HOSTSHARE_CC_KEY, "reno", "reno bbr", "reno"), 0);
	cr_assert_eq(journal_sysctl_claim(other, GC_KEY, "1024", "2048", "1024"), 0);
	cr_assert_eq(journal_sysctl_released(other, GC_KEY), 0);
	hand_journal(base, "sncccc-", "sysctl - " HOSTSHARE_CC_KEY " reno reno%20vegas reno\n");
	hand_journal(base, "sndddd-", "sysctl - " HOSTSHARE_CC_KEY " reno reno%20x;y reno\n");
	hand_journal(base, "uneeee-", "sysctl - " HOSTSHARE_CC_KEY " reno reno%20dctcp reno\nend\n");

	n = hostshare_scan(HOSTSHARE_CC_KEY, journal_path(mine), true, alive_unless_pid1, &v);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(v[0].new_value, "reno bbr");
	free(v);
	n = hostshare_scan(HOSTSHARE_CC_KEY, journal_path(mine), false, NULL, &v);
	cr_assert_eq(n, 2); /* bbr and the dead run's vegas */
	cr_assert(!strcmp(v[0].new_value, "reno vegas") || !strcmp(v[1].new_value, "reno vegas"));
	free(v);
	n = hostshare_scan(GC_KEY, NULL, false, NULL, &v);
	cr_assert_eq(n, 0, "a released claim does not hold");
	free(v);
	n = hostshare_scan(HOSTSHARE_CC_KEY, NULL, true, alive_unless_pid1, &v);
	cr_assert_eq(n, 2, "without self: htcp and bbr");
	free(v);
	journal_destroy(&mine);
	journal_destroy(&other);
	journal_set_registry_dir(NULL);
	support_rm_rf(base);
}
