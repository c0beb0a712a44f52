/* orchestrator/units: exact parsing and formatting of times, probabilities, rates and counts.
 *
 * Everything goes through units_parse_decimal, which keeps the number as an integer mantissa and
 * a power-of-ten scale; the conversion to the target unit is one 128-bit multiply and a rounded
 * divide. That is what makes "0.0001%" exactly 1 ppm and the round trips exact. */
#include "orchestrator/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

typedef unsigned __int128 u128;

struct unit {
	const char *name;
	uint64_t mult;
};

static const struct unit time_units[] = {
	{ "us", 1 }, { "usec", 1 }, { "usecs", 1 },
	{ "ms", 1000 }, { "msec", 1000 }, { "msecs", 1000 },
	{ "s", 1000000 }, { "sec", 1000000 }, { "secs", 1000000 },
	{ "m", 60000000 }, { "min", 60000000 }, { "mins", 60000000 },
};

static const struct unit rate_units[] = {
	{ "bit", 1 }, { "kbit", 1000 }, { "mbit", 1000000 }, { "gbit", 1000000000 },
	{ "tbit", 1000000000000ull },
	{ "kibit", 1024 }, { "mibit", 1024ull * 1024 }, { "gibit", 1024ull * 1024 * 1024 },
	{ "tibit", 1024ull * 1024 * 1024 * 1024 },
	{ "bps", 8 }, { "kbps", 8000 }, { "mbps", 8000000 }, { "gbps", 8000000000ull },
	{ "tbps", 8000000000000ull },
	{ "kibps", 8 * 1024 }, { "mibps", 8ull * 1024 * 1024 }, { "gibps", 8ull * 1024 * 1024 * 1024 },
	{ "tibps", 8ull * 1024 * 1024 * 1024 * 1024 },
};

static const struct unit count_units[] = {
	{ "", 1 }, { "k", 1000 }, { "m", 1000000 }, { "g", 1000000000 },
};

static u128 pow10_u128(unsigned n)
{
	u128 r = 1;
	while (n--)
		r *= 10;
	return r;
}

int units_parse_decimal(const char *s, uint64_t *mant, unsigned *scale)
{
	const char *p = s;
	u128 m = 0;
	unsigned sc = 0, int_digits = 0, frac_digits = 0;
	int seen_dot = 0;

	for (;; p++) {
		if (*p == '.' && !seen_dot) {
			seen_dot = 1;
			continue;
		}
		if (*p < '0' || *p > '9')
			break;
		if (seen_dot)
			frac_digits++;
		else
			int_digits++;
		m = m * 10 + (unsigned)(*p - '0');
		if (m > UINT64_MAX)
			return -ERANGE; /* the mantissa must fit 64 bits */
		if (seen_dot && ++sc > 30)
			return -ERANGE;
	}
	/* digits on both sides of a dot: "1." and ".5" are not numbers here */
	if (!int_digits || (seen_dot && !frac_digits))
		return -EINVAL;
	*mant = (uint64_t)m;
	*scale = sc;
	return (int)(p - s);
}

/* value = mant * mult / 10^scale rounded to nearest; -ERANGE above max. */
static int scale_value(uint64_t mant, unsigned scale, uint64_t mult, uint64_t max, uint64_t *out)
{
	u128 den = pow10_u128(scale);
	u128 v = ((u128)mant * mult + den / 2) / den;
	if (v > max)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

static const struct unit *find_unit(const struct unit *u, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(u[i].name, name))
			return &u[i];
	return NULL;
}

/* Number then unit (one optional space between). */
static int parse_with_unit(const char *s, const struct unit *units, size_t n_units, bool unit_required,
			   uint64_t max, uint64_t *out, const char **why, const char *what)
{
	uint64_t mant;
	unsigned sc;
	const char *dummy;
	if (!why)
		why = &dummy;
	if (!s || !*s) {
		*why = "empty value";
		return -EINVAL;
	}
	int n = units_parse_decimal(s, &mant, &sc);
	if (n == -ERANGE) {
		*why = "too many digits";
		return -ERANGE;
	}
	if (n < 0) {
		*why = what;
		return -EINVAL;
	}
	const char *u = s + n;
	if (*u == ' ')
		u++;
	const struct unit *unit;
	if (!*u) {
		if (unit_required && mant != 0) {
			*why = "missing unit";
			return -EINVAL;
		}
		unit = NULL;
	} else {
		unit = find_unit(units, n_units, u);
		if (!unit) {
			*why = "unknown unit";
			return -EINVAL;
		}
	}
	int rc = scale_value(mant, sc, unit ? unit->mult : 1, max, out);
	if (rc) {
		*why = "value too large";
		return rc;
	}
	if (*out == 0 && mant != 0) {
		*why = "value below the resolution of the unit";
		return -ERANGE;
	}
	return 0;
}

int units_parse_time_us(const char *s, uint64_t *us, const char **why)
{
	return parse_with_unit(s, time_units, sizeof time_units / sizeof *time_units, true, UINT64_MAX,
			       us, why, "not a time");
}

int units_parse_rate_bps(const char *s, uint64_t *bps, const char **why)
{
	return parse_with_unit(s, rate_units, sizeof rate_units / sizeof *rate_units, true, UINT64_MAX,
			       bps, why, "not a rate");
}

int units_parse_count(const char *s, uint64_t *count, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	uint64_t mant;
	unsigned sc;
	int n = units_parse_decimal(s ? s : "", &mant, &sc);
	if (n > 0) {
		/* a count must be whole: check before rounding hides a fraction */
		const struct unit *u = find_unit(count_units, 4, s + n);
		if (u) {
			u128 den = pow10_u128(sc);
			if (((u128)mant * u->mult) % den) {
				*why = "not a whole number";
				return -EINVAL;
			}
		}
	}
	return parse_with_unit(s, count_units, 4, false, UINT64_MAX, count, why, "not a number");
}

int units_parse_prob_ppm(const char *s, uint32_t *ppm, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	uint64_t mant, v;
	unsigned sc;
	if (!s || !*s) {
		*why = "empty value";
		return -EINVAL;
	}
	int n = units_parse_decimal(s, &mant, &sc);
	if (n < 0) {
		*why = n == -ERANGE ? "too many digits" : "not a probability";
		return n;
	}
	const char *u = s + n;
	if (*u == ' ')
		u++;
	uint64_t mult;
	if (!strcmp(u, "%"))
		mult = 10000;
	else if (!*u)
		mult = 1000000;
	else {
		*why = "not a probability";
		return -EINVAL;
	}
	if (scale_value(mant, sc, mult, UINT64_MAX, &v) || v > 1000000) {
		*why = "above 1 (100%)";
		return -ERANGE;
	}
	if (v == 0 && mant != 0) {
		*why = "below the resolution of 1 ppm (0.0001%)";
		return -ERANGE;
	}
	*ppm = (uint32_t)v;
	return 0;
}

int units_format_time(uint64_t us, char *buf, size_t len)
{
	if (us == 0)
		return snprintf(buf, len, "0");
	if (us % 1000000 == 0)
		return snprintf(buf, len, "%llus", (unsigned long long)(us / 1000000));
	if (us % 1000 == 0)
		return snprintf(buf, len, "%llums", (unsigned long long)(us / 1000));
	return snprintf(buf, len, "%lluus", (unsigned long long)us);
}

int units_format_prob(uint32_t ppm, char *buf, size_t len)
{
	char frac[8];
	unsigned f = ppm % 10000;
	if (!f)
		return snprintf(buf, len, "%u%%", ppm / 10000);
	snprintf(frac, sizeof frac, "%04u", f);
	for (int i = 3; i > 0 && frac[i] == '0'; i--)
		frac[i] = 0;
	return snprintf(buf, len, "%u.%s%%", ppm / 10000, frac);
}

int units_format_rate(uint64_t bps, char *buf, size_t len)
{
	static const struct unit dec[] = {
		{ "tbit", 1000000000000ull }, { "gbit", 1000000000 }, { "mbit", 1000000 },
		{ "kbit", 1000 }, { "bit", 1 },
	};
	if (bps == 0)
		return snprintf(buf, len, "0");
	for (size_t i = 0; i < sizeof dec / sizeof *dec; i++)
		if (bps % dec[i].mult == 0)
			return snprintf(buf, len, "%llu%s", (unsigned long long)(bps / dec[i].mult), dec[i].name);
	return -EINVAL; /* unreachable: "bit" divides everything */
}

