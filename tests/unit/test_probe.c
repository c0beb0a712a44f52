/* Unit tests for node/probe's loss-count lines: the reflector's question and the prober's
 * answer are taken only in the exact form the other side writes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>

#include "node/probe.h"

Test(probe_lines, count_question)
{
	uint32_t idx = 77;
	cr_assert_eq(probe_parse_count("count 0\n", &idx), 0);
	cr_expect_eq(idx, 0);
	cr_assert_eq(probe_parse_count("count 8191", &idx), 0);
	cr_expect_eq(idx, 8191);
	static const char *const bad[] = { "count 8192\n", "count -1\n", "count +1\n", "count  1\n", "count 1 \n",
					   "count 1\n\n", "count 1x\n", "count \n", "count", "count 0x10\n",
					   "count 99999999999999999999\n", "count 4294967297\n", "COUNT 1\n", "count\t1\n", "count 01\n" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		idx = 77;
		cr_expect_eq(probe_parse_count(bad[i], &idx), -EINVAL, "'%s' taken", bad[i]);
		cr_expect_eq(idx, 77);
	}
}

Test(probe_lines, count_answer)
{
	int64_t n = 5;
	cr_assert_eq(probe_parse_answer("0\n", &n), 0);
	cr_expect_eq(n, 0);
	cr_assert_eq(probe_parse_answer("9223372036854775807\n", &n), 0);
	cr_expect_eq(n, INT64_MAX);
	static const char *const bad[] = { "", "\n", "-1\n", "+1\n", " 1\n", "1 \n", "1x\n", "9223372036854775808\n",
					   "18446744073709551616\n", "1\n2\n", "007\n" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(probe_parse_answer(bad[i], &n), -EINVAL, "'%s' taken", bad[i]);
}
