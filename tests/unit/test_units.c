/* Units: exact parsing of each unit, and parse(format(x)) == x over wide value ranges. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "orchestrator/units.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t xorshift(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

Test(units, time_each_unit)
{
	static const struct { const char *s; uint64_t us; } t[] = {
		{ "0", 0 }, { "100us", 100 }, { "20ms", 20000 }, { "1.5s", 1500000 }, { "2m", 120000000 },
		{ "0.5ms", 500 }, { "3 s", 3000000 }, { "1usec", 1 }, { "7msec", 7000 }, { "2sec", 2000000 },
		{ "1min", 60000000 }, { "0.0015s", 1500 }, { "60s", 60000000 },
	};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
		uint64_t us = 1;
		cr_expect_eq(units_parse_time_us(t[i].s, &us, NULL), 0, "%s", t[i].s);
		cr_expect_eq(us, t[i].us, "%s -> %llu", t[i].s, (unsigned long long)us);
	}
}

Test(units, time_errors)
{
	const char *bad[] = { "10", "", "ms", "1.", ".5", "-1s", "1 parsec", "1e3ms", "1..2s", "99999999999999999999999s" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		uint64_t us;
		const char *why = NULL;
		cr_expect_neq(units_parse_time_us(bad[i], &us, &why), 0, "'%s' should fail", bad[i]);
		cr_expect_not_null(why, "'%s' has a reason", bad[i]);
	}
}

Test(units, prob_each_form)
{
	static const struct { const char *s; uint32_t ppm; } t[] = {
		{ "0", 0 }, { "1%", 10000 }, { "0.0001%", 1 }, { "12.3456%", 123456 }, { "100%", 1000000 },
		{ "0.5", 500000 }, { "1", 1000000 }, { "0.000001", 1 }, { "0.05", 50000 }, { "5 %", 50000 },
		{ "0.00005%", 1 } /* rounded to nearest */,
	};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
		uint32_t ppm = 7;
		cr_expect_eq(units_parse_prob_ppm(t[i].s, &ppm, NULL), 0, "%s", t[i].s);
		cr_expect_eq(ppm, t[i].ppm, "%s -> %u", t[i].s, ppm);
	}
	uint32_t ppm;
	cr_expect_eq(units_parse_prob_ppm("100.0001%", &ppm, NULL), -ERANGE);
	cr_expect_eq(units_parse_prob_ppm("1.01", &ppm, NULL), -ERANGE);
	cr_expect_eq(units_parse_prob_ppm("0.0000001", &ppm, NULL), -ERANGE);
	cr_expect_eq(units_parse_prob_ppm("5%%", &ppm, NULL), -EINVAL);
	cr_expect_eq(units_parse_prob_ppm("half", &ppm, NULL), -EINVAL);
}

Test(units, rate_each_unit)
{
	static const struct { const char *s; uint64_t bps; } t[] = {
		{ "0", 0 }, { "12bit", 12 }, { "10kbit", 10000 }, { "100mbit", 100000000 }, { "1gbit", 1000000000 },
		{ "2tbit", 2000000000000ull }, { "1kibit", 1024 }, { "1mibit", 1048576 }, { "1gibit", 1073741824 },
		{ "1bps", 8 }, { "1kbps", 8000 }, { "1mbps", 8000000 }, { "1gbps", 8000000000ull },
		{ "1kibps", 8192 }, { "1.5mbit", 1500000 }, { "100Mbit", 100000000 }, { "0.5kbps", 4000 },
	};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
		uint64_t bps = 1;
		cr_expect_eq(units_parse_rate_bps(t[i].s, &bps, NULL), 0, "%s", t[i].s);
		cr_expect_eq(bps, t[i].bps, "%s -> %llu", t[i].s, (unsigned long long)bps);
	}
	uint64_t bps;
	cr_expect_neq(units_parse_rate_bps("100", &bps, NULL), 0);
	cr_expect_neq(units_parse_rate_bps("100mbits", &bps, NULL), 0);
	cr_expect_eq(units_parse_rate_bps("99999999999tbit", &bps, NULL), -ERANGE);
}

Test(units, count_suffixes)
{
	static const struct { const char *s; uint64_t v; } t[] = {
		{ "0", 0 }, { "64", 64 }, { "10k", 10000 }, { "2m", 2000000 }, { "1g", 1000000000 },
		{ "1.5k", 1500 }, { "18446744073709551615", UINT64_MAX },
	};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
		uint64_t v = 1;
		cr_expect_eq(units_parse_count(t[i].s, &v, NULL), 0, "%s", t[i].s);
		cr_expect_eq(v, t[i].v, "%s", t[i].s);
	}
	uint64_t v;
	cr_expect_eq(units_parse_count("1.2345k", &v, NULL), -EINVAL);
	cr_expect_eq(units_parse_count("2.5", &v, NULL), -EINVAL);
	cr_expect_eq(units_parse_count("18446744073709551616", &v, NULL), -ERANGE);
	cr_expect_neq(units_parse_count("12x", &v, NULL), 0);
}

/* Every ppm value from 0 to 100%: format then parse gives it back. */
Test(units, prob_round_trip_exhaustive)
{
	char buf[32];
	for (uint32_t ppm = 0; ppm <= 1000000; ppm++) {
		uint32_t back = UINT32_MAX;
		units_format_prob(ppm, buf, sizeof buf);
		if (units_parse_prob_ppm(buf, &back, NULL) || back != ppm) {
			cr_assert_fail("ppm %u formatted '%s' parsed back as %u", ppm, buf, back);
		}
	}
}

Test(units, time_rate_round_trip)
{
	char buf[64];
	for (int i = 0; i < 200000; i++) {
		uint64_t r = xorshift();
		/* spread magnitudes: shift by a random amount so small and round values are common */
		uint64_t v = r >> (r % 64);
		if (i % 3 == 0)
			v = (v % 100000) * 1000;        /* exact milli/kilo multiples */
		uint64_t back;
		units_format_time(v, buf, sizeof buf);
		cr_assert(!units_parse_time_us(buf, &back, NULL) && back == v, "time %llu -> '%s'", (unsigned long long)v, buf);
		units_format_rate(v, buf, sizeof buf);
		cr_assert(!units_parse_rate_bps(buf, &back, NULL) && back == v, "rate %llu -> '%s'", (unsigned long long)v, buf);
	}
}

/* Formatting picks the largest exact unit. */
Test(units, format_choices)
{
	char buf[32];
	units_format_time(20000, buf, sizeof buf);
	cr_expect_str_eq(buf, "20ms");
	units_format_time(1500, buf, sizeof buf);
	cr_expect_str_eq(buf, "1500us");
	units_format_time(120000000, buf, sizeof buf);
	cr_expect_str_eq(buf, "120s");
	units_format_rate(100000000, buf, sizeof buf);
	cr_expect_str_eq(buf, "100mbit");
	units_format_rate(1500000, buf, sizeof buf);
	cr_expect_str_eq(buf, "1500kbit");
	units_format_prob(123456, buf, sizeof buf);
	cr_expect_str_eq(buf, "12.3456%");
	units_format_prob(10000, buf, sizeof buf);
	cr_expect_str_eq(buf, "1%");
}
