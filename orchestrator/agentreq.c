/* orchestrator/agentreq: see agentreq.h. The fields are walked left to right with a cursor; a
 * field is a maximal run of printable non-space bytes, and exactly one space separates two, so
 * "a  b", " a", "a " (but for the empty token list of shape) and tabs are all refused. Numbers are
 * read digit by digit with an overflow check rather than strtoull, which would take a sign,
 * leading blanks or "0x". */
#include "orchestrator/agentreq.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "orchestrator/cgroup.h"
#include "orchestrator/overlay.h"
#include "orchestrator/testbed.h"

_Static_assert(sizeof ((struct agentreq_build *)0)->prefix == TESTBED_PREFIX_MAX, "a prefix as testbed takes it");

/* The next field at *p (1..len-1 printable bytes, ended by a space or the end) into out; *p
 * moves to the byte after it. */
static int field(const char **p, char *out, size_t len)
{
	const char *s = *p;
	size_t n = 0;

	while (s[n] > ' ' && s[n] <= '~')
		n++;
	if (!n || n >= len || (s[n] && s[n] != ' '))
		return -EINVAL;
	memcpy(out, s, n);
	out[n] = 0;
	*p = s + n;
	return 0;
}

/* Exactly one space before another field. */
static int space(const char **p)
{
	if ((*p)[0] != ' ' || (*p)[1] == ' ' || !(*p)[1])
		return -EINVAL;
	(*p)++;
	return 0;
}

/* s, all of it, a decimal number of at most 20 digits without a leading zero, no larger than
 * max. */
static int number(const char *s, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	size_t n = 0;

	for (; s[n]; n++) {
		unsigned d = (unsigned char)s[n] - '0';
		if (d > 9 || n >= 20 || x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	if (!n || x > max || (s[0] == '0' && n > 1))
		return -EINVAL;
	*v = x;
	return 0;
}

/* A dotted-quad IPv4 address, all of s (inet_pton's strict form: no leading zeros, no short
 * forms). */
static int ipv4(const char *s, uint32_t *be)
{
	struct in_addr a;

	if (strlen(s) > 15 || inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*be = a.s_addr;
	return 0;
}

bool agentreq_valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n >= AGENTREQ_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

static bool valid_prefix(const char *p)
{
	size_t n = strlen(p);

	if (n < 2 || n > TESTBED_PREFIX_MAX - 1 || p[n - 1] != '-')
		return false;
	for (size_t i = 0; i + 1 < n; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9')))
			return false;
	return true;
}

/* The next item of the comma list at *p into out (1..len-1 bytes, no empty item); *p moves past
 * it and its comma. 1 = an item, 0 = the list ended, -EINVAL. */
static int item(const char **p, char *out, size_t len)
{
	const char *s = *p;
	size_t n = strcspn(s, ",");

	if (!*s)
		return 0;
	if (!n || n >= len || (s[n] == ',' && !s[n + 1]))
		return -EINVAL;
	memcpy(out, s, n);
	out[n] = 0;
	*p = s + n + (s[n] == ',');
	return 1;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int agentreq_parse_build(const char *args, struct agentreq_build *b, char *err, size_t errlen)
{
#define USAGE "build: expected PREFIX VNI LOCAL NODES REMOTES CC MTU [PIN]"
	char f[7][4096], pin[24];
	bool has_pin = false;
	const char *p = args;
	uint64_t v;

	memset(b, 0, sizeof *b);
	for (int k = 0; k < 7; k++)
		if ((k && space(&p)) || field(&p, f[k], sizeof f[k]))
			return fail(err, errlen, USAGE);
	if (*p) {
		if (space(&p) || field(&p, pin, sizeof pin) || *p)
			return fail(err, errlen, USAGE " (and nothing after)");
		has_pin = true;
	}
#undef USAGE
	if (!valid_prefix(f[0]))
		return fail(err, errlen, "build: bad prefix '%.16s'", f[0]);
	memcpy(b->prefix, f[0], strlen(f[0]) + 1);    /* fits: valid_prefix */
	if (number(f[1], (1u << 24) - 1, &v) || !v)
		return fail(err, errlen, "build: bad VNI '%.16s' (1..16777215)", f[1]);
	b->vni = (uint32_t)v;
	if (ipv4(f[2], &b->local_be))
		return fail(err, errlen, "build: bad local address '%.16s'", f[2]);
	/* NODES: NAME:INDEX, each name and each index once */
	const char *q = f[3];
	char it[64];
	int r;
	while ((r = item(&q, it, sizeof it)) == 1) {
		char *colon = strchr(it, ':');
		if (b->n_nodes == AGENTREQ_MAX_NODES)
			return fail(err, errlen, "build: more than %d nodes", AGENTREQ_MAX_NODES);
		if (!colon || number(colon + 1, 65535, &v))
			return fail(err, errlen, "build: bad node '%.40s' (expected NAME:INDEX, INDEX 0..65535)", it);
		*colon = 0;
		if (!agentreq_valid_name(it))
			return fail(err, errlen, "build: bad node name '%.40s'", it);
		for (size_t i = 0; i < b->n_nodes; i++) {
			if (!strcmp(b->names[i], it))
				return fail(err, errlen, "build: node %s named twice", it);
			if (b->index[i] == v)
				return fail(err, errlen, "build: node %s: its index is another node's", it);
		}
		memcpy(b->names[b->n_nodes], it, strlen(it) + 1);     /* fits: agentreq_valid_name */
		b->index[b->n_nodes++] = (uint32_t)v;
	}
	if (r < 0 || !b->n_nodes)
		return fail(err, errlen, "build: bad node list '%.60s'", f[3]);
	/* REMOTES: "-" or distinct unicast addresses, none this host's own */
	q = strcmp(f[4], "-") ? f[4] : "";
	while ((r = item(&q, it, sizeof it)) == 1) {
		uint32_t a;
		if (b->n_remotes == AGENTREQ_MAX_REMOTES)
			return fail(err, errlen, "build: more than %d remotes", AGENTREQ_MAX_REMOTES);
		if (ipv4(it, &a))
			return fail(err, errlen, "build: bad remote address '%.40s'", it);
		uint32_t h = ntohl(a);
		if (a == b->local_be || !h || h == 0xffffffffu || (h >> 28) == 0xe)
			return fail(err, errlen, "build: remote %s is this host, unspecified, broadcast or multicast", it);
		for (size_t i = 0; i < b->n_remotes; i++)
			if (b->remotes_be[i] == a)
				return fail(err, errlen, "build: remote %s named twice", it);
		b->remotes_be[b->n_remotes++] = a;
	}
	if (r < 0)
		return fail(err, errlen, "build: bad remote list '%.60s'", f[4]);
	size_t ccl = strlen(f[5]);
	bool cc_ok = ccl >= 1 && ccl < sizeof b->cc;
	for (const char *c = f[5]; *c && cc_ok; c++)
		cc_ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
	if (!cc_ok)
		return fail(err, errlen, "build: bad congestion control '%.16s'", f[5]);
	memcpy(b->cc, f[5], ccl + 1);
	if (number(f[6], 65535, &v) || (v && v < OVERLAY_MIN_MTU))
		return fail(err, errlen, "build: bad MTU '%.16s' (0 or 576..65535)", f[6]);
	b->mtu = (uint32_t)v;
	if (has_pin) {
		if (number(pin, 65536, &v))
			return fail(err, errlen, "build: bad PIN '%.16s' (0..65536)", pin);
		b->pin = (uint32_t)v;
	}
	return 0;
}

int agentreq_parse_probe(const char *args, struct agentreq_probe *pr, char *err, size_t errlen)
{
	char cnt[24];
	const char *p = args;
	uint64_t v;

	memset(pr, 0, sizeof *pr);
	if (field(&p, pr->addr, sizeof pr->addr) || ipv4(pr->addr, &pr->addr_be) || space(&p) ||
	    field(&p, cnt, sizeof cnt) || *p || number(cnt, AGENTREQ_MAX_PROBES, &v) || !v)
		return fail(err, errlen, "probe: expected ADDR COUNT (1..1000)");
	pr->count = (uint32_t)v;
	return 0;
}

/* A node name field at *p into out. */
static int name_field(const char **p, char *out)
{
	return field(p, out, AGENTREQ_NAME_MAX) || !agentreq_valid_name(out) ? -EINVAL : 0;
}

/* s has no control characters (DEL included). */
static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return false;
	return true;
}

int agentreq_parse_conf(const char *args, struct agentreq_conf *c, char *err, size_t errlen)
{
	const char *p = args;

	memset(c, 0, sizeof *c);
	if (name_field(&p, c->name) || space(&p) || field(&p, c->key, sizeof c->key) || *p != ' ')
		return fail(err, errlen, "conf: expected NAME KEY VALUE");
	bool key_ok = c->key[0] >= 'a' && c->key[0] <= 'z';
	for (const char *k = c->key; *k && key_ok; k++)
		key_ok = (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '.' || *k == '_';
	if (!key_ok)
		return fail(err, errlen, "conf: bad key '%.40s'", c->key);
	c->value = p + 1;
	if (!printable(c->value))
		return fail(err, errlen, "conf: %s: control character in the value", c->key);
	return 0;
}

/* The link_params tokens, all of s (single spaces between them), each key once. */
static int tokens(const char *what, const char *s, struct link_params *lp, char *err, size_t errlen)
{
	char t[64];
	uint32_t seen = 0;

	*lp = (struct link_params){ 0 };
	while (*s) {
		if (field(&s, t, sizeof t) || (*s && space(&s))) {
			snprintf(err, errlen, "%s: bad link parameter list", what);
			return -EINVAL;
		}
		int rc = link_params_parse_token(lp, t, &seen);
		if (rc == -EEXIST) {
			snprintf(err, errlen, "%s: link parameter '%.40s' given twice", what, t);
			return -EINVAL;
		}
		if (rc < 0) {
			snprintf(err, errlen, "%s: bad link parameter '%.40s'", what, t);
			return -EINVAL;
		}
	}
	const char *bad = link_params_validate(lp);
	if (bad) {
		snprintf(err, errlen, "%s: %s", what, bad);
		return -EINVAL;
	}
	return 0;
}

/* "NAME up|down" at *p. */
static int name_dir(const char **p, struct agentreq_shape *s)
{
	char dir[8];

	if (name_field(p, s->name) || space(p) || field(p, dir, sizeof dir) || (strcmp(dir, "up") && strcmp(dir, "down")))
		return -EINVAL;
	s->down = dir[0] == 'd';
	return 0;
}

int agentreq_parse_shape(const char *what, const char *args, struct agentreq_shape *s, char *err, size_t errlen)
{
	const char *p = args;

	memset(s, 0, sizeof *s);
	if (name_dir(&p, s)) {
		snprintf(err, errlen, "%s: expected NAME up|down TOKEN...", what);
		return -EINVAL;
	}
	/* "NAME DIR", "NAME DIR " (no token) or "NAME DIR TOKEN..." */
	if (*p == ' ')
		p++;
	if (*p == ' ') {
		snprintf(err, errlen, "%s: bad link parameter list", what);
		return -EINVAL;
	}
	return tokens(what, p, &s->lp, err, errlen);
}

int agentreq_parse_peers(const char *args, struct agentreq_peers *pp, char *err, size_t errlen)
{
	char list[4096], und[24], it[24];
	const char *p = args, *q;
	uint64_t v;
	int r;

	memset(pp, 0, sizeof *pp);
	if (name_dir(&p, &pp->s) || space(&p) || field(&p, pp->tag, sizeof pp->tag) || space(&p) ||
	    field(&p, list, sizeof list) || space(&p) || field(&p, und, sizeof und))
		return fail(err, errlen, "shapepeers: expected NAME up|down TAG ADDRS UNDERLAY_US TOKEN...");
	for (const char *t = pp->tag; *t; t++)
		if (!((*t >= 'a' && *t <= 'z') || (*t >= '0' && *t <= '9')))
			return fail(err, errlen, "shapepeers: bad tag '%.16s'", pp->tag);
	q = list;
	while ((r = item(&q, it, sizeof it)) == 1) {
		uint32_t a;
		if (pp->n_peers == AGENTREQ_MAX_PEERS)
			return fail(err, errlen, "shapepeers: more than %d peer addresses", AGENTREQ_MAX_PEERS);
		if (ipv4(it, &a) || (ntohl(a) & 0xfffe0000u) != TESTBED_DEFAULT_SUBNET)
			return fail(err, errlen, "shapepeers: bad peer address '%.16s' (inside 198.18.0.0/15)", it);
		for (size_t i = 0; i < pp->n_peers; i++)
			if (pp->peers_be[i] == a)
				return fail(err, errlen, "shapepeers: peer %s named twice", it);
		pp->peers_be[pp->n_peers++] = a;
	}
	if (r < 0 || !pp->n_peers)
		return fail(err, errlen, "shapepeers: bad peer list");
	if (number(und, AGENTREQ_MAX_UNDERLAY_US, &v))
		return fail(err, errlen, "shapepeers: bad underlay delay '%.20s' (0..60000000 us)", und);
	pp->underlay_us = (uint32_t)v;
	if (*p == ' ')
		p++;
	if (*p == ' ')
		return fail(err, errlen, "shapepeers: bad link parameter list");
	int rc = tokens("shapepeers", p, &pp->s.lp, err, errlen);
	if (rc)
		return rc;
	if (pp->s.lp.delay_us < pp->underlay_us) {
		snprintf(err, errlen, "shapepeers: %s %s: delay %u us is less than the underlay's %u us", pp->s.name,
			 pp->s.down ? "down" : "up", pp->s.lp.delay_us, pp->underlay_us);
		return -ERANGE;
	}
	return 0;
}

/* A number of cores: digits, optionally '.' and digits, at most CGROUP_MAX_CPUS. */
static int cores(const char *s, double *out)
{
	const char *dot = strchr(s, '.');
	char ip[16];
	uint64_t i = 0, f = 0;
	size_t il = dot ? (size_t)(dot - s) : strlen(s), fl = dot ? strlen(dot + 1) : 0;

	if (!il || il >= sizeof ip || (dot && (!fl || fl > 9)))
		return -EINVAL;
	memcpy(ip, s, il);
	ip[il] = 0;
	if (number(ip, CGROUP_MAX_CPUS, &i))
		return -EINVAL;
	for (size_t k = 0; k < fl; k++) {       /* the decimals: zeros lead as they may ("0.0500") */
		if (dot[1 + k] < '0' || dot[1 + k] > '9')
			return -EINVAL;
		f = f * 10 + (uint64_t)(dot[1 + k] - '0');
	}
	double x = (double)i;
	double scale = 1;
	for (size_t k = 0; k < fl; k++)
		scale *= 10;
	x += (double)f / scale;
	if (x > CGROUP_MAX_CPUS)
		return -EINVAL;
	*out = x;
	return 0;
}

int agentreq_parse_limit(const char *args, struct agentreq_limit *l, char *err, size_t errlen)
{
	char need[8], cpu[32], mem[24];
	const char *p = args;
	uint64_t v, mask[CGROUP_CPU_WORDS];

	memset(l, 0, sizeof *l);
	if (name_field(&p, l->name) || space(&p) || field(&p, need, sizeof need) || space(&p) ||
	    field(&p, cpu, sizeof cpu) || space(&p) || field(&p, l->cpus, sizeof l->cpus) || space(&p) ||
	    field(&p, mem, sizeof mem) || *p)
		return fail(err, errlen, "limit: expected NAME NEED CPU CPUS MEMORY");
	if (number(need, CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY, &v) || !v)
		return fail(err, errlen, "limit: bad NEED '%.8s'", need);
	l->need = (unsigned)v;
	if (cores(cpu, &l->cpu))
		return fail(err, errlen, "limit: bad CPU '%.32s' (cores, 0..1024)", cpu);
	if (strcmp(l->cpus, "-") && cgroup_parse_cpus(l->cpus, mask) <= 0)
		return fail(err, errlen, "limit: bad CPU list '%.60s'", l->cpus);
	if (number(mem, INT64_MAX, &l->memory_bytes))
		return fail(err, errlen, "limit: bad MEMORY '%.24s' (bytes)", mem);
	return 0;
}

int agentreq_parse_send(const char *args, struct agentreq_send *s, char *err, size_t errlen)
{
	const char *p = args;

	memset(s, 0, sizeof *s);
	if (name_field(&p, s->name) || *p != ' ' || !p[1] || !printable(p + 1))
		return fail(err, errlen, "send: expected NAME MSG");
	s->msg = p + 1;
	return 0;
}
