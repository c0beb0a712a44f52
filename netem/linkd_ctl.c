/* netem/linkd_ctl: see linkd_ctl.h. Tokens are copied into a bounded buffer first, so a request of
 * any length or content is handled without reading past it; every field is checked for length
 * before it is copied. */
#include "netem/linkd_ctl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINKD_CTL_LINE_MAX 4096
#define BLANKS " \t\r\n"

/* Copy value into dst (size dstlen); false when it does not fit. */
static bool copy_field(char *dst, size_t dstlen, const char *value)
{
	size_t n = strlen(value);

	if (n >= dstlen)
		return false;
	memcpy(dst, value, n + 1);
	return true;
}

static int fail(char *reply, size_t replylen, const char *what, const char *tok)
{
	/* The token is the client's text: quote at most a bounded part of it. */
	snprintf(reply, replylen, "err %s%s%.64s", what, tok ? " " : "", tok ? tok : "");
	return -EINVAL;
}

static int parse_queue(const char *s, uint16_t *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1]))
		return -EINVAL;         /* digits only, no sign, space or leading zero */
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

int linkd_ctl_parse(const char *line, struct linkd_ctl_req *req, char *reply, size_t replylen)
{
	char buf[LINKD_CTL_LINE_MAX], *save = NULL, *t;
	bool has_name = false, has_queue = false, has_netns = false, has_ifname = false;
	uint32_t seen = 0;              /* link_params keys given so far */
	const char *why;
	int rc;
	size_t n = strlen(line);

	memset(req, 0, sizeof *req);
	if (n >= sizeof buf)
		return fail(reply, replylen, "request too long", NULL);
	memcpy(buf, line, n + 1);
	t = strtok_r(buf, BLANKS, &save);
	if (!t)
		return fail(reply, replylen, "empty request", NULL);
	if (!strcmp(t, "ping"))
		req->op = LINKD_CTL_PING;
	else if (!strcmp(t, "set"))
		req->op = LINKD_CTL_SET;
	else if (!strcmp(t, "del"))
		req->op = LINKD_CTL_DEL;
	else if (!strcmp(t, "stats"))
		req->op = LINKD_CTL_STATS;
	else
		return fail(reply, replylen, "unknown request", t);
	while ((t = strtok_r(NULL, BLANKS, &save))) {
		if (req->op == LINKD_CTL_PING)
			return fail(reply, replylen, "bad token", t);
		if (!strncmp(t, "name=", 5)) {
			if (has_name)
				return fail(reply, replylen, "name= given twice", NULL);
			if (!t[5] || !copy_field(req->name, sizeof req->name, t + 5))
				return fail(reply, replylen, "bad name", NULL);
			has_name = true;
		} else if (req->op != LINKD_CTL_SET) {
			return fail(reply, replylen, "bad token", t);
		} else if (!strncmp(t, "netns=", 6)) {
			if (has_netns)
				return fail(reply, replylen, "netns= given twice", NULL);
			has_netns = true;
			if (!copy_field(req->netns, sizeof req->netns, t + 6))
				return fail(reply, replylen, "netns too long", NULL);
		} else if (!strncmp(t, "ifname=", 7)) {
			if (has_ifname)
				return fail(reply, replylen, "ifname= given twice", NULL);
			has_ifname = true;
			if (!copy_field(req->ifname, sizeof req->ifname, t + 7))
				return fail(reply, replylen, "ifname too long", NULL);
		} else if (!strncmp(t, "queue=", 6)) {
			if (has_queue)
				return fail(reply, replylen, "queue= given twice", NULL);
			if (parse_queue(t + 6, &req->queue) < 0)
				return fail(reply, replylen, "bad queue", t);
			has_queue = true;
		} else if ((rc = link_params_parse_token(&req->params, t, &seen)) < 0) {
			return fail(reply, replylen, rc == -EEXIST ? "token given twice" : "bad token", t);
		}
	}
	if (req->op == LINKD_CTL_DEL && !has_name)
		return fail(reply, replylen, "del needs name=", NULL);
	if (req->op != LINKD_CTL_SET)
		return 0;
	if (!has_name || !has_queue)
		return fail(reply, replylen, "set needs name= and queue=", NULL);
	why = link_params_validate(&req->params);
	if (why)
		return fail(reply, replylen, why, NULL);
	return 0;
}

int linkd_ctl_format(const struct linkd_ctl_req *req, char *buf, size_t len)
{
	char params[1024];
	int pn;

	switch (req->op) {
	case LINKD_CTL_PING:
		return snprintf(buf, len, "ping");
	case LINKD_CTL_DEL:
		return snprintf(buf, len, "del name=%s", req->name);
	case LINKD_CTL_STATS:
		return req->name[0] ? snprintf(buf, len, "stats name=%s", req->name) : snprintf(buf, len, "stats");
	case LINKD_CTL_SET:
		pn = link_params_format(&req->params, params, sizeof params);
		if (pn < 0 || (size_t)pn >= sizeof params)
			return -EINVAL;
		return snprintf(buf, len, "set name=%s netns=%s ifname=%s queue=%u%s%s", req->name,
				req->netns, req->ifname, (unsigned)req->queue, pn ? " " : "", params);
	}
	return -EINVAL;
}

int linkd_ctl_stats_line(const char *name, const struct linkd_counters *c, char *buf, size_t len)
{
	return snprintf(buf, len, "%s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			" %" PRIu64 " %" PRId64 " %" PRIu64 " %" PRIu64 "\n",
			name, c->packets, c->bytes, c->dropped, c->held, c->dup, c->corrupt, c->reordered,
			c->late_n, c->late_mean_us, c->late_p99_us, c->late_max_us);
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1]))
		return -EINVAL;         /* digits only, no sign, space or leading zero */
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

static int parse_i64(const char *s, int64_t *out)
{
	char *end;

	if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
		return -EINVAL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	*out = v;
	return errno || *end ? -EINVAL : 0;
}

int linkd_ctl_parse_stats_line(const char *line, char *name, size_t namelen, struct linkd_counters *c)
{
	char buf[LINKD_CTL_STATS_LINE_MAX + 22], *save = NULL, *t;
	uint64_t *v[] = { &c->packets, &c->bytes, &c->dropped, &c->held, &c->dup, &c->corrupt, &c->reordered,
			  &c->late_n, NULL, &c->late_p99_us, &c->late_max_us };
	size_t n = strlen(line);

	if (n >= sizeof buf)
		return -EINVAL;
	memcpy(buf, line, n + 1);
	t = strtok_r(buf, " \n", &save);
	if (!t || !copy_field(name, namelen, t))
		return -EINVAL;
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		t = strtok_r(NULL, " \n", &save);
		if (!t || (v[i] ? parse_u64(t, v[i]) : parse_i64(t, &c->late_mean_us)) < 0)
			return -EINVAL;
	}
	return strtok_r(NULL, " \n", &save) ? -EINVAL : 0;
}

int linkd_ctl_parse_stats_reply(const char *text, size_t len, linkd_ctl_stats_fn fn, void *ctx)
{
	char line[LINKD_CTL_STATS_LINE_MAX], name[LINKD_CTL_NAME_MAX];
	struct linkd_counters c;
	size_t off = 3;
	int n = 0, rc;

	if (len >= 3 && !memcmp(text, "err", 3))
		return -EIO;
	if (len < 3 || memcmp(text, "ok\n", 3))
		return -EINVAL;
	for (;;) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t ll;

		if (!nl)
			return -EINVAL; /* unterminated: the "end" line never came */
		ll = (size_t)(nl - (text + off));
		if (ll == 3 && !memcmp(text + off, "end", 3))
			return off + 4 == len ? n : -EINVAL;
		if (ll >= sizeof line || memchr(text + off, '\0', ll))
			return -EINVAL;
		memcpy(line, text + off, ll);
		line[ll] = '\0';
		if (linkd_ctl_parse_stats_line(line, name, sizeof name, &c) < 0)
			return -EINVAL;
		if (n == INT_MAX)
			return -EOVERFLOW;
		rc = fn ? fn(ctx, name, &c) : 0;
		if (rc < 0)
			return rc;
		n++;
		off += ll + 1;
	}
}

size_t linkd_ctl_msg_cut(const char *text, size_t len, size_t max)
{
	size_t cut = 0;

	if (len <= max)
		return len;
	for (size_t i = 0; i < max; i++)
		if (text[i] == '\n')
			cut = i + 1;
	return cut ? cut : max;
}

bool linkd_ctl_reply_done(const char *msg, size_t len, bool first)
{
	if (first && (len < 3 || memcmp(msg, "ok\n", 3)))
		return true;
	return len >= 4 && !memcmp(msg + len - 4, "end\n", 4) && (len == 4 || msg[len - 5] == '\n');
}
