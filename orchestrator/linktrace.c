/* orchestrator/linktrace: see linktrace.h. */
#include "orchestrator/linktrace.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/units.h"

#define LINKTRACE_MAX_DELAY_US (60u * 1000000u)

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

void linktrace_destroy(struct linktrace **self)
{
	if (!self || !*self)
		return;
	free((*self)->rows);
	free(*self);
	*self = NULL;
}

/* Parse one row's four cells into r. Returns NULL or a reason. */
static const char *parse_row(char *line, struct linktrace_row *r, char *why_buf, size_t why_len)
{
	char *cells[4], *save = NULL, *tok;
	const char *why = NULL;
	uint64_t v;
	int n = 0;

	/* strtok would merge empty cells: split by hand. */
	for (tok = line; n < 4; n++) {
		cells[n] = tok;
		tok = strchr(tok, ',');
		if (!tok)
			break;
		*tok++ = '\0';
	}
	(void)save;
	if (n != 3 || tok) {
		snprintf(why_buf, why_len, "expected 4 columns t_s,delay,loss,rate");
		return why_buf;
	}
	for (int i = 0; i < 4; i++)
		cells[i] = trim(cells[i]);
	memset(r, 0, sizeof *r);
	{
		char *end;
		double t = strtod(cells[0], &end);

		if (end == cells[0] || *end || t < 0 || t > 1e7) {
			snprintf(why_buf, why_len, "t_s '%s' is not a time in seconds >= 0", cells[0]);
			return why_buf;
		}
		r->at_us = (uint64_t)(t * 1e6 + 0.5);
	}
	if (*cells[1]) {
		if (units_parse_time_us(cells[1], &v, &why) < 0 || v > LINKTRACE_MAX_DELAY_US) {
			snprintf(why_buf, why_len, "delay '%s': %s", cells[1], why ? why : "above 60s");
			return why_buf;
		}
		r->has_delay = true;
		r->delay_us = (uint32_t)v;
	}
	if (*cells[2]) {
		if (units_parse_prob_ppm(cells[2], &r->loss_ppm, &why) < 0) {
			snprintf(why_buf, why_len, "loss '%s': %s", cells[2], why ? why : "not a probability");
			return why_buf;
		}
		r->has_loss = true;
	}
	if (*cells[3]) {
		if (!strcmp(cells[3], "0"))
			r->rate_bps = 0;
		else if (units_parse_rate_bps(cells[3], &r->rate_bps, &why) < 0) {
			snprintf(why_buf, why_len, "rate '%s': %s", cells[3], why ? why : "not a rate");
			return why_buf;
		}
		r->has_rate = true;
	}
	return NULL;
}

struct linktrace *linktrace_load(const char *path, char *err, size_t errlen)
{
	struct linktrace *t = calloc(1, sizeof *t);
	FILE *f = NULL;
	char *line = NULL;
	size_t cap = 0, rcap = 0;
	unsigned lineno = 0;

	if (!t) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "%s: error: %s", path, strerror(errno));
		goto fail;
	}
	while (getline(&line, &cap, f) >= 0) {
		char why[160], *s = trim(line);
		struct linktrace_row r;
		const char *bad;

		lineno++;
		if (!*s || *s == '#')
			continue;
		if (lineno == 1 && !strncmp(s, "t_s", 3))
			continue; /* header */
		bad = parse_row(s, &r, why, sizeof why);
		if (bad) {
			snprintf(err, errlen, "%s:%u: error: %s", path, lineno, bad);
			goto fail;
		}
		if (t->n && r.at_us < t->rows[t->n - 1].at_us) {
			snprintf(err, errlen, "%s:%u: error: time goes backwards (rows must be in time order)", path,
				 lineno);
			goto fail;
		}
		if (t->n == rcap) {
			size_t nc = rcap ? 2 * rcap : 64;
			struct linktrace_row *nr = realloc(t->rows, nc * sizeof *nr);

			if (!nr) {
				snprintf(err, errlen, "%s: out of memory", path);
				goto fail;
			}
			t->rows = nr;
			rcap = nc;
		}
		t->rows[t->n++] = r;
	}
	if (t->n == 0) {
		snprintf(err, errlen, "%s: error: no rows (expected t_s,delay,loss,rate)", path);
		goto fail;
	}
	free(line);
	fclose(f);
	return t;
fail:
	free(line);
	if (f)
		fclose(f);
	linktrace_destroy(&t);
	return NULL;
}

void linktrace_apply(const struct linktrace_row *row, struct link_params *p)
{
	if (row->has_delay) {
		p->delay_us = row->delay_us;
		p->set |= LINK_F_DELAY;
	}
	if (row->has_loss) {
		p->loss_model = LINK_LOSS_RANDOM;
		p->loss_ppm = row->loss_ppm;
		p->set |= LINK_F_LOSS;
	}
	if (row->has_rate) {
		p->rate_bps = row->rate_bps;
		p->set |= LINK_F_RATE;
	}
}
