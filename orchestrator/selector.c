/* orchestrator/selector: node selectors (exact names, numeric ranges, globs, role keywords).
 *
 * Matching never expands a glob: globs are tested against each node with fnmatch. Ranges are
 * expanded element by element (bounded by SELECTOR_MAX_RANGE) and each element is looked up in a
 * sorted copy of the names, because an element that names no node must be reported. */
#include "orchestrator/selector.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TERM_MAX 128

struct entry {
	const char *name;
	size_t i;
};

struct ctx {
	const char *const *names;
	const enum scenario_role *roles;
	size_t n;
	uint8_t *match;
	struct entry *sorted;   /* names sorted; NULL in check-only mode */
	size_t matched;
	char *why;
	size_t whylen;
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	if (c->why && c->whylen) {
		va_start(ap, fmt);
		vsnprintf(c->why, c->whylen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static void mark(struct ctx *c, size_t i)
{
	if (!c->match[i]) {
		c->match[i] = 2; /* 2 = matched by this selector; normalised to 1 at the end */
		c->matched++;
	} else if (c->match[i] == 1) {
		c->match[i] = 3; /* matched before and by this selector */
		c->matched++;
	}
}

static bool name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '-' || ch == '.';
}

static int lookup(struct ctx *c, const char *name)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(c->sorted[mid].name, name);
		if (!r)
			return (int)c->sorted[mid].i;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int exact(struct ctx *c, const char *name)
{
	if (!c->sorted)
		return 0;
	int i = lookup(c, name);
	if (i < 0)
		return fail(c, "unknown node '%s'", name);
	mark(c, (size_t)i);
	return 0;
}

static int parse_uint(const char **p, unsigned long *out)
{
	if (**p < '0' || **p > '9')
		return -EINVAL;
	unsigned long v = 0;
	while (**p >= '0' && **p <= '9') {
		v = v * 10 + (unsigned long)(**p - '0');
		if (v > 100000000)
			return -ERANGE;
		(*p)++;
	}
	*out = v;
	return 0;
}

/* prefix[ranges]suffix */
static int range_term(struct ctx *c, const char *t)
{
	const char *lb = strchr(t, '['), *rb = strchr(t, ']');
	if (!lb || !rb || rb < lb || strchr(rb + 1, '[') || strchr(rb + 1, ']') || strchr(lb + 1, '[') != NULL)
		return fail(c, "malformed range in '%s' (expected e.g. worker[0-3,7])", t);
	for (const char *q = t; q < lb; q++)
		if (!name_char(*q))
			return fail(c, "invalid character '%c' in '%s'", *q, t);
	for (const char *q = rb + 1; *q; q++)
		if (!name_char(*q))
			return fail(c, "invalid character '%c' in '%s'", *q, t);
	size_t total = 0;
	const char *p = lb + 1;
	for (;;) {
		unsigned long a, b;
		while (*p == ' ')
			p++;
		if (parse_uint(&p, &a))
			return fail(c, "malformed range in '%s' (expected numbers like [0-3,7])", t);
		b = a;
		if (*p == '-') {
			p++;
			if (parse_uint(&p, &b))
				return fail(c, "malformed range in '%s' (expected numbers like [0-3,7])", t);
			if (b < a)
				return fail(c, "empty range %lu-%lu in '%s' (expected low-high)", a, b, t);
		}
		total += b - a + 1;
		if (total > SELECTOR_MAX_RANGE)
			return fail(c, "range in '%s' expands to more than %d names (limit SELECTOR_MAX_RANGE)",
				    t, SELECTOR_MAX_RANGE);
		for (unsigned long k = a; k <= b && c->sorted; k++) {
			char name[TERM_MAX + 16];
			snprintf(name, sizeof name, "%.*s%lu%s", (int)(lb - t), t, k, rb + 1);
			int rc = exact(c, name);
			if (rc)
				return rc;
		}
		while (*p == ' ')
			p++;
		if (*p == ',') {
			p++;
			continue;
		}
		if (p != rb)
			return fail(c, "malformed range in '%s' (expected numbers like [0-3,7])", t);
		break;
	}
	return 0;
}

static int term(struct ctx *c, const char *t)
{
	if (!*t)
		return fail(c, "empty selector term (expected a node name, pattern, all, servers or workers)");
	if (!strcmp(t, "all") || !strcmp(t, "servers") || !strcmp(t, "workers")) {
		bool srv = !strcmp(t, "servers"), all = !strcmp(t, "all"), any = false;
		for (size_t i = 0; c->sorted && i < c->n; i++)
			/* A fleet's registry is its server; its devices are its workers. */
			if (all || (c->roles[i] == SCENARIO_ROLE_SERVER ||
				    c->roles[i] == SCENARIO_ROLE_REGISTRY) == srv) {
				mark(c, i);
				any = true;
			}
		if (c->sorted && !any)
			return fail(c, "'%s' matches no node (this scenario has no %s)", t, all ? "nodes" : t);
		return 0;
	}
	if (strchr(t, '[') || strchr(t, ']'))
		return range_term(c, t);
	if (strchr(t, '*') || strchr(t, '?')) {
		for (const char *q = t; *q; q++)
			if (!name_char(*q) && *q != '*' && *q != '?')
				return fail(c, "invalid character '%c' in '%s'", *q, t);
		if (!c->sorted)
			return 0;
		bool any = false;
		for (size_t i = 0; i < c->n; i++)
			if (!fnmatch(t, c->names[i], 0)) {
				mark(c, i);
				any = true;
			}
		if (!any)
			return fail(c, "'%s' matches no node", t);
		return 0;
	}
	for (const char *q = t; *q; q++)
		if (!name_char(*q))
			return fail(c, "invalid character '%c' in '%s'", *q, t);
	return exact(c, t);
}

static int run(struct ctx *c, const char *sel)
{
	if (!sel || !*sel)
		return fail(c, "empty selector (expected a node name, pattern, all, servers or workers)");
	const char *p = sel;
	for (;;) {
		char t[TERM_MAX];
		size_t len = 0;
		int depth = 0;
		while (*p == ' ')
			p++;
		while (*p && (depth || *p != ',')) {
			if (*p == '[')
				depth++;
			else if (*p == ']')
				depth--;
			if (len + 1 >= sizeof t)
				return fail(c, "selector term longer than %d characters", TERM_MAX - 1);
			t[len++] = *p++;
		}
		while (len && t[len - 1] == ' ')
			len--;
		t[len] = 0;
		int rc = term(c, t);
		if (rc)
			return rc;
		if (!*p)
			break;
		p++; /* ',' */
	}
	return 0;
}

int selector_match(const char *sel, const char *const *names, const enum scenario_role *roles,
		   size_t n, uint8_t *match, char *why, size_t whylen)
{
	struct ctx c = { .names = names, .roles = roles, .n = n, .match = match, .why = why,
			 .whylen = whylen };
	int rc;
	/* one extra element so that an empty node list still gets a non-NULL index */
	c.sorted = malloc((n + 1) * sizeof *c.sorted);
	if (!c.sorted)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		c.sorted[i] = (struct entry){ names[i], i };
	qsort(c.sorted, n, sizeof *c.sorted, cmp_entry);
	/* marks of this call are 2 (new) or 3 (already set); restore 1 for everything at the end */
	rc = run(&c, sel);
	for (size_t i = 0; i < n; i++) {
		if (match[i] == 3)
			match[i] = 1;
		else if (match[i] == 2)
			match[i] = rc ? 0 : 1; /* on error leave the caller's array as it was */
	}
	free(c.sorted);
	return rc ? rc : (int)c.matched;
}
