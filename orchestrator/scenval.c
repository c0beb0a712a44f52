/* orchestrator/scenval: the state of one conversion of a scenario tree into a struct scenario,
 * and the readers that take typed values out of the tree.
 *
 * Design:
 * - Every reader checks the node's kind, parses the text with orchestrator/units and checks the
 *   range; on failure it writes one "FILE:LINE:COL: error: what (expected ...)" line into the
 *   conversion's err (or "ORIGIN: error: ..." for a value that came from --set) and returns
 *   -EINVAL. Conversion stops at the first error, so the message is the one to show.
 * - A mapping is checked against the keys it accepts; an unknown key is an error with the closest
 *   known key suggested (Levenshtein distance), because a silently ignored typo in an experiment
 *   description is a wrong experiment. */
#include "orchestrator/scenval.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/limits.h"
#include "orchestrator/units.h"

/* --- errors ------------------------------------------------------------------------------ */

static void vreport(struct scenval *cv, const char *origin, uint32_t line, uint32_t col, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));
static void vreport(struct scenval *cv, const char *origin, uint32_t line, uint32_t col, const char *fmt, va_list ap)
{
	if (!cv->err || !cv->errlen)
		return;
	int n = origin ? snprintf(cv->err, cv->errlen, "%s: error: ", origin) :
		snprintf(cv->err, cv->errlen, "%s:%u:%u: error: ", cv->file, line ? line : 1, col ? col : 1);
	if (n < 0 || (size_t)n >= cv->errlen)
		return;
	vsnprintf(cv->err + n, cv->errlen - (size_t)n, fmt, ap);
}

int scenval_fail(struct scenval *cv, const struct yamltree_node *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(cv, at ? at->origin : NULL, at ? at->line : 1, at ? at->col : 1, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int scenval_fail_key(struct scenval *cv, const struct yamltree_entry *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(cv, e->value->origin, e->line, e->col, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return 1000;
	size_t row[65];
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* allowed is NULL-terminated. where names the mapping ("network.default") for the message. */
int scenval_check_keys(struct scenval *cv, const struct yamltree_node *map, const char *const *allowed,
		       const char *where)
{
	for (size_t i = 0; i < map->n; i++) {
		const struct yamltree_entry *e = &map->items[i];
		const char *best = NULL;
		size_t bestd = (size_t)-1;
		bool ok = false;
		for (const char *const *k = allowed; *k; k++) {
			if (!strcmp(*k, e->key)) {
				ok = true;
				break;
			}
			size_t d = edit_distance(*k, e->key);
			if (d < bestd) {
				bestd = d;
				best = *k;
			}
		}
		if (ok)
			continue;
		size_t len = strlen(e->key);
		if (best && bestd <= (len > 6 ? len / 3 : 2))
			return scenval_fail_key(cv, e, "unknown key '%s' in %s (did you mean '%s'?)", e->key, where,
						best);
		char list[512];
		size_t pos = 0;
		list[0] = 0;
		for (const char *const *k = allowed; *k && pos < sizeof list; k++)
			pos += (size_t)snprintf(list + pos, sizeof list - pos, "%s%s", k == allowed ? "" : ", ", *k);
		return scenval_fail_key(cv, e, "unknown key '%s' in %s (expected one of: %s)", e->key, where, list);
	}
	return 0;
}

/* --- scalar readers ---------------------------------------------------------------------- */

int scenval_want_kind(struct scenval *cv, const struct yamltree_node *n, enum yamltree_kind kind, const char *what)
{
	if (n->kind != kind)
		return scenval_fail(cv, n, "%s is %s (expected %s)", what, yamltree_kind_name(n->kind),
				    yamltree_kind_name(kind));
	return 0;
}

const char *scenval_scalar(struct scenval *cv, const struct yamltree_node *n, const char *what)
{
	if (n->kind != YAMLTREE_SCALAR) {
		scenval_fail(cv, n, "%s is %s (expected a single value)", what, yamltree_kind_name(n->kind));
		return NULL;
	}
	if (yamltree_is_null(n)) {
		scenval_fail(cv, n, "%s is empty (expected a value)", what);
		return NULL;
	}
	return n->scalar;
}

int scenval_count(struct scenval *cv, const struct yamltree_node *n, uint64_t min, uint64_t max,
		  const char *what, uint64_t *out)
{
	const char *s = scenval_scalar(cv, n, what), *why = NULL;
	uint64_t v;
	if (!s)
		return -EINVAL;
	if (s[0] == '-')
		return scenval_fail(cv, n, "%s '%s' is negative (expected a whole number >= %llu)", what, s,
				    (unsigned long long)min);
	if (units_parse_count(s, &v, &why))
		return scenval_fail(cv, n, "%s '%s': %s (expected a whole number, optionally with k, m or g)",
				    what, s, why);
	if (v < min || v > max)
		return scenval_fail(cv, n, "%s %llu out of range (limit: %llu..%llu)", what, (unsigned long long)v,
				    (unsigned long long)min, (unsigned long long)max);
	*out = v;
	return 0;
}

int scenval_u32(struct scenval *cv, const struct yamltree_node *n, uint32_t min, uint32_t max,
		const char *what, uint32_t *out)
{
	uint64_t v;
	int rc = scenval_count(cv, n, min, max, what, &v);
	if (!rc)
		*out = (uint32_t)v;
	return rc;
}

/* A real number; min/max inclusive unless the *_open flag says otherwise. */
int scenval_real(struct scenval *cv, const struct yamltree_node *n, double min, bool min_open, double max,
		 bool max_open, const char *what, double *out)
{
	const char *s = scenval_scalar(cv, n, what);
	if (!s)
		return -EINVAL;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || strchr(s, 'x') || strchr(s, 'X') ||
	    strchr(s, 'n') || strchr(s, 'N') || strchr(s, 'i') || strchr(s, 'I'))
		return scenval_fail(cv, n, "%s '%s' is not a number (expected e.g. 0.05)", what, s);
	if ((min_open ? v <= min : v < min) || (max_open ? v >= max : v > max))
		return scenval_fail(cv, n, "%s %s out of range (limit: %s%g..%g%s)", what, s, min_open ? "(" : "",
				    min, max, max_open ? ")" : "");
	*out = v;
	return 0;
}

/* A fraction in [0, 1], written as 0.85 or 85%. */
int scenval_fraction(struct scenval *cv, const struct yamltree_node *n, const char *what, double *out)
{
	const char *s = scenval_scalar(cv, n, what), *why = NULL;
	uint32_t ppm;
	if (!s)
		return -EINVAL;
	if (units_parse_prob_ppm(s, &ppm, &why))
		return scenval_fail(cv, n, "%s '%s': %s (expected a fraction 0..1 or a percentage)", what, s, why);
	*out = ppm / 1e6;
	return 0;
}

int scenval_prob(struct scenval *cv, const struct yamltree_node *n, const char *what, uint32_t *ppm)
{
	const char *s = scenval_scalar(cv, n, what), *why = NULL;
	if (!s)
		return -EINVAL;
	if (units_parse_prob_ppm(s, ppm, &why))
		return scenval_fail(cv, n, "%s '%s': %s (expected a probability 0..1 or 0%%..100%%)", what, s, why);
	return 0;
}

int scenval_time(struct scenval *cv, const struct yamltree_node *n, uint64_t max_us, const char *what,
		 uint64_t *us)
{
	const char *s = scenval_scalar(cv, n, what), *why = NULL;
	char lim[32];
	if (!s)
		return -EINVAL;
	if (units_parse_time_us(s, us, &why))
		return scenval_fail(cv, n, "%s '%s': %s (expected a time like 20ms, 1.5s, 2m; units us ms s m)",
				    what, s, why);
	if (*us > max_us) {
		units_format_time(max_us, lim, sizeof lim);
		return scenval_fail(cv, n, "%s %s exceeds the limit of %s", what, s, lim);
	}
	return 0;
}

int scenval_rate(struct scenval *cv, const struct yamltree_node *n, const char *what, uint64_t *bps)
{
	const char *s = scenval_scalar(cv, n, what), *why = NULL;
	if (!s)
		return -EINVAL;
	if (units_parse_rate_bps(s, bps, &why))
		return scenval_fail(cv, n, "%s '%s': %s (expected a rate like 100mbit, 10kbit, 1gbit; or "
				    "kbps/mbps in bytes per second)", what, s, why);
	if (*bps > LIMITS_MAX_RATE_BPS)
		return scenval_fail(cv, n, "%s %s exceeds the largest rate a link can shape (limit %llu bit/s, "
				    "LIMITS_MAX_RATE_BPS)", what, s, LIMITS_MAX_RATE_BPS);
	return 0;
}

int scenval_enum(struct scenval *cv, const struct yamltree_node *n, const char *const *names, const char *what,
		 int *out)
{
	const char *s = scenval_scalar(cv, n, what);
	if (!s)
		return -EINVAL;
	char list[256];
	size_t pos = 0;
	for (int i = 0; names[i]; i++) {
		if (!strcmp(names[i], s)) {
			*out = i;
			return 0;
		}
		pos += (size_t)snprintf(list + pos, pos < sizeof list ? sizeof list - pos : 0, "%s%s",
					i ? "|" : "", names[i]);
		if (pos >= sizeof list)
			pos = sizeof list - 1;
	}
	return scenval_fail(cv, n, "%s '%s' is not one of the choices (expected %s)", what, s, list);
}

int scenval_bool(struct scenval *cv, const struct yamltree_node *n, const char *what, bool *out)
{
	static const char *const t[] = { "true", "yes", "on", "True", "Yes", "On", "TRUE", "YES", "ON", NULL };
	static const char *const f[] = { "false", "no", "off", "False", "No", "Off", "FALSE", "NO", "OFF", NULL };
	const char *s = scenval_scalar(cv, n, what);
	if (!s)
		return -EINVAL;
	for (int i = 0; t[i]; i++)
		if (!strcmp(s, t[i]) || !strcmp(s, f[i])) {
			*out = !strcmp(s, t[i]);
			return 0;
		}
	return scenval_fail(cv, n, "%s '%s' is not a boolean (expected true or false)", what, s);
}

int scenval_string(struct scenval *cv, const struct yamltree_node *n, const char *what, char **out)
{
	const char *s = scenval_scalar(cv, n, what);
	if (!s)
		return -EINVAL;
	if (strlen(s) > 4096)
		return scenval_fail(cv, n, "%s is longer than 4096 characters", what);
	char *d = strdup(s);
	if (!d)
		return scenval_fail(cv, n, "out of memory");
	free(*out);
	*out = d;
	return 0;
}

int scenval_path(struct scenval *cv, const struct yamltree_node *n, const char *what, char **out)
{
	int rc = scenval_string(cv, n, what, out);
	if (rc || (*out)[0] == '/' || !cv->basedir)
		return rc;
	char *full;
	if (asprintf(&full, "%s/%s", cv->basedir, *out) < 0)
		return scenval_fail(cv, n, "out of memory");
	free(*out);
	*out = full;
	return 0;
}
