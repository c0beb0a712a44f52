/* collectors/meta: see meta.h.
 *
 * Recursive descent over the JSON grammar (RFC 8259) with a depth limit; strings are decoded
 * for the escapes the orchestrator can produce (\" \\ \/ \b \f \n \r \t, \uXXXX kept only for
 * ASCII). */
#include "collectors/meta.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32

struct parser {
	const char *s;
	size_t len, pos;
	char *err;
	size_t errlen;
	bool failed;
};

/* strlcpy-like copy: truncates, always terminates. */
static void copy(char *dst, size_t dstlen, const char *src)
{
	size_t n = strnlen(src, dstlen - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void fail(struct parser *p, const char *what)
{
	if (!p->failed)
		snprintf(p->err, p->errlen, "offset %zu: %s", p->pos, what);
	p->failed = true;
}

static void ws(struct parser *p)
{
	while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos])
		p->pos++;
}

static bool peek(struct parser *p, char c)
{
	ws(p);
	return p->pos < p->len && p->s[p->pos] == c;
}

static bool eat(struct parser *p, char c)
{
	if (!peek(p, c)) {
		char msg[32];

		snprintf(msg, sizeof msg, "expected '%c'", c);
		fail(p, msg);
		return false;
	}
	p->pos++;
	return true;
}

/* Parse a string into out (truncated to outlen; out may be NULL to skip). */
static bool string(struct parser *p, char *out, size_t outlen)
{
	size_t n = 0;

	if (!eat(p, '"'))
		return false;
	while (p->pos < p->len) {
		char c = p->s[p->pos++];

		if (c == '"') {
			if (out && outlen)
				out[n < outlen ? n : outlen - 1] = '\0';
			return true;
		}
		if ((unsigned char)c < 0x20) {
			fail(p, "control character in string");
			return false;
		}
		if (c == '\\') {
			if (p->pos >= p->len)
				break;
			c = p->s[p->pos++];
			switch (c) {
			case '"': case '\\': case '/': break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u': {
				unsigned v = 0;

				for (int i = 0; i < 4; i++) {
					if (p->pos >= p->len || !isxdigit((unsigned char)p->s[p->pos])) {
						fail(p, "bad \\u escape");
						return false;
					}
					char h = p->s[p->pos++];
					v = v * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0'
							       : tolower((unsigned char)h) - 'a' + 10);
				}
				c = v < 0x80 ? (char)v : '?';
				break;
			}
			default:
				fail(p, "bad escape");
				return false;
			}
		}
		if (out && n + 1 < outlen)
			out[n] = c;
		n++;
	}
	fail(p, "unterminated string");
	return false;
}

/* A number; its text is copied into out when non-NULL. */
static bool number(struct parser *p, char *out, size_t outlen, double *val)
{
	size_t start;
	char buf[64];
	char *end;

	ws(p);
	start = p->pos;
	while (p->pos < p->len && strchr("+-0123456789.eE", p->s[p->pos]) && p->s[p->pos])
		p->pos++;
	if (p->pos == start || p->pos - start >= sizeof buf) {
		fail(p, "bad number");
		return false;
	}
	memcpy(buf, p->s + start, p->pos - start);
	buf[p->pos - start] = '\0';
	double v = strtod(buf, &end);
	if (*end != '\0' || !isfinite(v)) {
		fail(p, "bad number");
		return false;
	}
	if (val)
		*val = v;
	if (out)
		copy(out, outlen, buf);
	return true;
}

static bool literal(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	ws(p);
	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) {
		fail(p, "unexpected token");
		return false;
	}
	p->pos += n;
	return true;
}

/* Parse any value. When text is non-NULL and the value is a scalar, its text goes there. */
static bool value(struct parser *p, int depth, char *text, size_t textlen, double *num);

static bool skip_container(struct parser *p, int depth, char open)
{
	char close = open == '{' ? '}' : ']';

	if (depth > MAX_DEPTH) {
		fail(p, "nested too deep");
		return false;
	}
	if (!eat(p, open))
		return false;
	if (peek(p, close)) {
		p->pos++;
		return true;
	}
	for (;;) {
		if (open == '{') {
			if (!string(p, NULL, 0) || !eat(p, ':'))
				return false;
		}
		if (!value(p, depth + 1, NULL, 0, NULL))
			return false;
		if (peek(p, ',')) {
			p->pos++;
			continue;
		}
		return eat(p, close);
	}
}

static bool value(struct parser *p, int depth, char *text, size_t textlen, double *num)
{
	ws(p);
	if (p->pos >= p->len) {
		fail(p, "unexpected end");
		return false;
	}
	switch (p->s[p->pos]) {
	case '{': case '[':
		if (text && textlen)
			text[0] = '\0';
		return skip_container(p, depth, p->s[p->pos]);
	case '"':
		return string(p, text, textlen);
	case 't':
		if (text)
			snprintf(text, textlen, "true");
		return literal(p, "true");
	case 'f':
		if (text)
			snprintf(text, textlen, "false");
		return literal(p, "false");
	case 'n':
		if (text && textlen)
			text[0] = '\0';
		return literal(p, "null");
	default:
		return number(p, text, textlen, num);
	}
}

static bool sweep_object(struct parser *p, struct run_meta *m)
{
	if (!eat(p, '{'))
		return false;
	if (peek(p, '}')) {
		p->pos++;
		return true;
	}
	for (;;) {
		char key[META_KEY_LEN], val[META_VAL_LEN];

		if (!string(p, key, sizeof key) || !eat(p, ':'))
			return false;
		if (!value(p, 2, val, sizeof val, NULL))
			return false;
		if (m->nsweep >= META_MAX_SWEEP) {
			fail(p, "too many sweep keys");
			return false;
		}
		copy(m->sweep_key[m->nsweep], META_KEY_LEN, key);
		copy(m->sweep_val[m->nsweep], META_VAL_LEN, val);
		m->nsweep++;
		if (peek(p, ',')) {
			p->pos++;
			continue;
		}
		return eat(p, '}');
	}
}

int meta_parse(const char *json, size_t len, struct run_meta *out, char *err, size_t errlen)
{
	struct parser p = { .s = json, .len = len, .err = err, .errlen = errlen };
	bool have_id = false;

	memset(out, 0, sizeof *out);
	if (!eat(&p, '{'))
		return -EINVAL;
	if (peek(&p, '}')) {
		p.pos++;
	} else {
		for (;;) {
			char key[64], text[128];
			double num = NAN;

			if (!string(&p, key, sizeof key) || !eat(&p, ':'))
				return -EINVAL;
			if (strcmp(key, "sweep") == 0 && peek(&p, '{')) {
				if (!sweep_object(&p, out))
					return -EINVAL;
			} else {
				if (!value(&p, 1, text, sizeof text, &num))
					return -EINVAL;
				if (strcmp(key, "run_id") == 0) {
					copy(out->run_id, sizeof out->run_id, text);
					have_id = text[0] != '\0';
				} else if (strcmp(key, "backend") == 0) {
					copy(out->backend, sizeof out->backend, text);
				} else if (strcmp(key, "status") == 0) {
					copy(out->status, sizeof out->status, text);
				} else if (strcmp(key, "seed") == 0) {
					out->seed = strtoull(text, NULL, 10);
				} else if (strcmp(key, "repeat") == 0) {
					out->repeat = (int)strtol(text, NULL, 10);
				} else if (strcmp(key, "target") == 0 && isfinite(num)) {
					out->has_target = true;
					out->target = num;
				}
			}
			if (peek(&p, ',')) {
				p.pos++;
				continue;
			}
			if (!eat(&p, '}'))
				return -EINVAL;
			break;
		}
	}
	ws(&p);
	if (p.pos != len) {
		fail(&p, "trailing data");
		return -EINVAL;
	}
	if (!have_id) {
		snprintf(err, errlen, "no \"run_id\"");
		return -EINVAL;
	}
	return 0;
}

static void scenario_target(const char *run_dir, struct run_meta *out)
{
	char path[4096], line[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/scenario.yaml", run_dir);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		char *end;
		double v;

		if (strncmp(line, "target:", 7) != 0)
			continue;
		v = strtod(line + 7, &end);
		if (end != line + 7 && isfinite(v)) {
			out->has_target = true;
			out->target = v;
		}
		break;
	}
	fclose(f);
}

int meta_load_dir(const char *run_dir, struct run_meta *out, char *err, size_t errlen)
{
	char path[4096], msg[256];
	char *buf = NULL;
	FILE *f = NULL;
	size_t n;
	int rc = 0;

	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	f = fopen(path, "re");
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	buf = malloc(1 << 20);
	if (!buf) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	n = fread(buf, 1, (1 << 20) - 1, f);
	if (ferror(f) || !feof(f)) {
		rc = -EIO;
		snprintf(err, errlen, "%s: read error or larger than 1 MiB", path);
		goto out;
	}
	rc = meta_parse(buf, n, out, msg, sizeof msg);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, msg);
		goto out;
	}
	if (!out->has_target)
		scenario_target(run_dir, out);
out:
	if (f)
		fclose(f);
	free(buf);
	return rc;
}

const char *meta_sweep_value(const struct run_meta *m, const char *key)
{
	for (size_t i = 0; i < m->nsweep; i++)
		if (strcmp(m->sweep_key[i], key) == 0)
			return m->sweep_val[i];
	return NULL;
}

const char *meta_sweep_label(const struct run_meta *m, char *buf, size_t buflen)
{
	size_t used = 0;

	if (buflen)
		buf[0] = '\0';
	for (size_t i = 0; i < m->nsweep && used < buflen; i++) {
		int n = snprintf(buf + used, buflen - used, "%s%s=%s", i ? ", " : "",
				 m->sweep_key[i], m->sweep_val[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return buf;
}
