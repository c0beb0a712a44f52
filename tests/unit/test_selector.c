/* Selectors against a naive model: random range lists are generated from a known set of
 * indices, so the expected match is the set itself. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/selector.h"

#define NW 40
#define NS 3

static char names_buf[NW + NS][32];
static const char *names[NW + NS];
static enum scenario_role roles[NW + NS];

static void setup(void)
{
	for (int i = 0; i < NS; i++) {
		snprintf(names_buf[i], sizeof names_buf[i], "server%d", i);
		roles[i] = SCENARIO_ROLE_SERVER;
	}
	for (int i = 0; i < NW; i++) {
		snprintf(names_buf[NS + i], sizeof names_buf[i], "worker%d", i);
		roles[NS + i] = SCENARIO_ROLE_WORKER;
	}
	for (int i = 0; i < NW + NS; i++)
		names[i] = names_buf[i];
}

static int match(const char *sel, uint8_t *m, char *why)
{
	memset(m, 0, NW + NS);
	return selector_match(sel, names, roles, NW + NS, m, why, 256);
}

static int count(const uint8_t *m)
{
	int c = 0;
	for (int i = 0; i < NW + NS; i++)
		c += m[i] != 0;
	return c;
}

TestSuite(selector, .init = setup);

Test(selector, keywords_and_exact)
{
	uint8_t m[NW + NS];
	char why[256];
	cr_expect_eq(match("all", m, why), NW + NS);
	cr_expect_eq(match("servers", m, why), NS);
	for (int i = 0; i < NS; i++)
		cr_expect(m[i]);
	cr_expect_eq(match("workers", m, why), NW);
	cr_expect_eq(m[0], 0);
	cr_expect_eq(match("worker7", m, why), 1);
	cr_expect(m[NS + 7]);
	cr_expect_eq(match("worker7, server1", m, why), 2);
	cr_expect(m[1] && m[NS + 7]);
	cr_expect_eq(match("worker[0-3,7]", m, why), 5);
	cr_expect(m[NS + 0] && m[NS + 3] && m[NS + 7] && !m[NS + 4]);
	cr_expect_eq(match("worker1*", m, why), 11); /* worker1, worker10..19 */
	cr_expect_eq(match("worker?", m, why), 10);
	cr_expect_eq(match("worker[1-2],worker2", m, why), 2, "a node matched twice counts once");
}

Test(selector, errors)
{
	uint8_t m[NW + NS];
	char why[256];
	const struct { const char *sel, *msg; } bad[] = {
		{ "worker40", "unknown node 'worker40'" },
		{ "worker[38-41]", "unknown node 'worker40'" },
		{ "peer*", "matches no node" },
		{ "worker[3-1]", "empty range" },
		{ "worker[0-5000]", "SELECTOR_MAX_RANGE" },
		{ "worker[a-b]", "malformed range" },
		{ "worker[1", "malformed range" },
		{ "]worker1", "malformed range" },
		{ "worker]1[", "malformed range" },
		{ "", "empty selector" },
		{ "worker1,,worker2", "empty selector term" },
		{ "wor ker", "invalid character" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		why[0] = 0;
		cr_expect_eq(match(bad[i].sel, m, why), -EINVAL, "'%s' should fail", bad[i].sel);
		cr_expect(strstr(why, bad[i].msg) != NULL, "'%s': expected '%s' in '%s'", bad[i].sel, bad[i].msg, why);
		cr_expect_eq(count(m), 0, "'%s': a failed selector marks nothing", bad[i].sel);
	}
}

/* Reference model: a random subset of worker indices written as a range list. */
Test(selector, random_ranges_vs_reference)
{
	uint64_t s = 12345;
	for (int iter = 0; iter < 2000; iter++) {
		bool want[NW] = { 0 };
		char sel[512];
		size_t pos = (size_t)snprintf(sel, sizeof sel, "worker[");
		int parts = 0;
		for (int i = 0; i < NW;) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			int run = (int)((s >> 33) % 5), gap = (int)((s >> 40) % 4);
			i += gap;
			if (i >= NW)
				break;
			int end = i + run < NW ? i + run : NW - 1;
			for (int k = i; k <= end; k++)
				want[k] = true;
			pos += (size_t)snprintf(sel + pos, sizeof sel - pos, "%s%d", parts++ ? "," : "", i);
			if (end > i)
				pos += (size_t)snprintf(sel + pos, sizeof sel - pos, "-%d", end);
			i = end + 2;
		}
		if (!parts)
			continue;
		snprintf(sel + pos, sizeof sel - pos, "]");
		uint8_t m[NW + NS];
		char why[256];
		int n = match(sel, m, why);
		int expect = 0;
		for (int k = 0; k < NW; k++) {
			expect += want[k];
			cr_assert_eq(!!m[NS + k], want[k], "%s: worker%d", sel, k);
		}
		cr_assert_eq(n, expect, "%s", sel);
		for (int k = 0; k < NS; k++)
			cr_assert_eq(m[k], 0);
	}
}

/* The caller's earlier marks stay; the count is of this selector's nodes only. */
Test(selector, accumulates)
{
	uint8_t m[NW + NS] = { 0 };
	char why[256];
	cr_expect_eq(selector_match("worker1", names, roles, NW + NS, m, why, sizeof why), 1);
	cr_expect_eq(selector_match("worker2", names, roles, NW + NS, m, why, sizeof why), 1);
	cr_expect(m[NS + 1] == 1 && m[NS + 2] == 1);
	cr_expect_eq(selector_match("worker[1-3]", names, roles, NW + NS, m, why, sizeof why), 3);
	cr_expect_eq(count(m), 3);
	cr_expect_eq(selector_match("worker99", names, roles, NW + NS, m, why, sizeof why), -EINVAL);
	cr_expect_eq(count(m), 3, "an error leaves earlier marks alone");
}
