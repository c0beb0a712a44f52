/* Fuzz stalenet-linkd's control lines (netem/linkd_ctl) from raw bytes, NUL-terminated. Whatever
 * parses must format to a line that parses back to the same request (formatted identically);
 * whatever fails must leave an "err " reply. Stats lines must round-trip too. The raw bytes are
 * also read as a stats reply (no NUL needed): one that parses is rebuilt from its lines and must
 * parse again to the same lines; cutting it into messages must give whole pieces within the limit.
 * The bytes are also read as a bare link parameter list (lib/link_params, the text in linkd's
 * requests, the agent's shape lines and the nodes' linkcheck keys): one that parses must be in
 * the canonical form, each of its tokens with a value other than 0 written back verbatim by
 * link_params_format and nothing else, so no sign, blank, leading zero or repeated key passes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/link_params.h"
#include "netem/linkd_ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The lines of a parsed reply, formatted again; or, with check set, compared with them. */
struct rebuild {
	char *buf;
	size_t len, cap;
	size_t n;
	const struct rebuild *check;
	size_t at;              /* check: byte offset reached in check->buf */
};

static int rebuild_line(void *ctx, const char *name, const struct linkd_counters *c)
{
	struct rebuild *r = ctx;
	char line[LINKD_CTL_STATS_LINE_MAX];
	int n = linkd_ctl_stats_line(name, c, line, sizeof line);

	if (n < 0 || (size_t)n >= sizeof line)
		abort();
	if (r->check) {
		if (r->at + (size_t)n > r->check->len || memcmp(r->check->buf + r->at, line, (size_t)n))
			abort();
		r->at += (size_t)n;
	} else {
		if (r->len + (size_t)n + 5 > r->cap)
			abort();
		memcpy(r->buf + r->len, line, (size_t)n);
		r->len += (size_t)n;
	}
	r->n++;
	return 0;
}

static void fuzz_stats_reply(const uint8_t *data, size_t size)
{
	char *raw = malloc(size ? size : 1); /* exact size, no NUL: ASan sees any over-read */
	struct rebuild a = { 0 }, b = { 0 };
	int n;

	if (!raw)
		return;
	memcpy(raw, data, size);
	for (size_t off = 0; off < size;) {
		size_t m = linkd_ctl_msg_cut(raw + off, size - off, 64);

		if (m == 0 || m > 64)
			abort();
		(void)linkd_ctl_reply_done(raw + off, m, off == 0);
		off += m;
	}
	a.cap = 3 + (size / 2 + 1) * LINKD_CTL_STATS_LINE_MAX + 8;
	a.buf = malloc(a.cap);
	if (a.buf) {
		memcpy(a.buf, "ok\n", 3);
		a.len = 3;
		n = linkd_ctl_parse_stats_reply(raw, size, rebuild_line, &a);
		if (n >= 0) {
			if ((size_t)n != a.n)
				abort();
			memcpy(a.buf + a.len, "end\n", 4);
			a.len += 4;
			b.check = &a;
			b.at = 3;
			if (linkd_ctl_parse_stats_reply(a.buf, a.len, rebuild_line, &b) != n || b.at != a.len - 4)
				abort();
		}
	}
	free(a.buf);
	free(raw);
}

static void fuzz_params_line(const char *in)
{
	struct link_params p, p2;
	char out[1024], tok[1024];
	size_t n_in = 0, n_out = 0;
	int n;

	if (link_params_parse_line(&p, in) < 0)
		return;
	n = link_params_format(&p, out, sizeof out);
	if (n < 0 || (size_t)n >= sizeof out || link_params_parse_line(&p2, out) < 0 || memcmp(&p, &p2, sizeof p))
		abort();
	for (const char *s = out; *s; n_out++) {
		s += strcspn(s, " ");
		s += *s == ' ';
	}
	for (const char *s = in; *s;) {
		size_t len = strcspn(s, " ");
		if (len == 0 || len >= sizeof tok)
			abort();        /* parse_line took an empty or a huge token */
		memcpy(tok, s, len);
		tok[len] = '\0';
		s += len;
		s += *s == ' ';
		const char *eq = strchr(tok, '=');
		if (!eq)
			abort();
		if (!strcmp(eq + 1, "0"))
			continue;
		n_in++;
		/* the same token, delimited, somewhere in what the writer wrote */
		const char *at = out;
		bool found = false;
		while (!found && (at = strstr(at, tok))) {
			found = (at == out || at[-1] == ' ') && (at[len] == ' ' || at[len] == '\0');
			at++;
		}
		if (!found)
			abort();
	}
	if (n_in != n_out)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct linkd_ctl_req r, r2;
	struct linkd_counters c;
	char reply[128], line[8192], line2[8192], name[LINKD_CTL_NAME_MAX];
	char *in = malloc(size + 1); /* exact size: ASan sees any over-read */
	int n, n2;

	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	reply[0] = '\0';
	if (linkd_ctl_parse(in, &r, reply, sizeof reply) == 0) {
		n = linkd_ctl_format(&r, line, sizeof line);
		if (n < 0 || (size_t)n >= sizeof line)
			abort();
		if (linkd_ctl_parse(line, &r2, reply, sizeof reply) != 0)
			abort();
		n2 = linkd_ctl_format(&r2, line2, sizeof line2);
		if (n2 != n || strcmp(line, line2) != 0 || r2.op != r.op || r2.queue != r.queue ||
		    strcmp(r2.name, r.name) || strcmp(r2.netns, r.netns) || strcmp(r2.ifname, r.ifname))
			abort();
	} else if (strncmp(reply, "err ", 4) != 0) {
		abort();
	}
	if (linkd_ctl_parse_stats_line(in, name, sizeof name, &c) == 0) {
		struct linkd_counters c2;
		char name2[LINKD_CTL_NAME_MAX];

		n = linkd_ctl_stats_line(name, &c, line, sizeof line);
		if (n < 0 || (size_t)n >= sizeof line)
			abort();
		if (linkd_ctl_parse_stats_line(line, name2, sizeof name2, &c2) != 0 || strcmp(name, name2) ||
		    memcmp(&c, &c2, sizeof c) != 0)
			abort();
	}
	fuzz_params_line(in);
	free(in);
	fuzz_stats_reply(data, size);
	return 0;
}
