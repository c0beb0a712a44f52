/* orchestrator/hosts: see hosts.h.
 *
 * The checks are strict on purpose: a host name becomes part of namespace and journal names and
 * of messages, an ssh destination is one argument of the ssh client (never a shell word on this
 * side; on the remote side only our own fixed command line is run, data travels on the channel),
 * and an address is the VXLAN underlay endpoint, so it must be a unicast IPv4 address. */
#include "orchestrator/hosts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orchestrator/yamltree.h"

struct hv {
	const char *file;
	char *err;
	size_t errlen;
};

static int fail(struct hv *hv, const struct yamltree_node *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct hv *hv, const struct yamltree_node *at, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (!hv->err || !hv->errlen)
		return -EINVAL;
	if (at && at->origin)
		n = snprintf(hv->err, hv->errlen, "%s: error: ", at->origin);
	else
		n = snprintf(hv->err, hv->errlen, "%s:%u:%u: error: ", hv->file,
			     at && at->line ? at->line : 1, at && at->col ? at->col : 1);
	if (n < 0 || (size_t)n >= hv->errlen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(hv->err + n, hv->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int fail_key(struct hv *hv, const struct yamltree_entry *e, const char *where, const char *choices)
{
	struct yamltree_node at = { .line = e->line, .col = e->col, .origin = e->value->origin };
	return fail(hv, &at, "unknown key '%s' in %s (expected one of:%s)", e->key, where, choices);
}

static int check_keys(struct hv *hv, const struct yamltree_node *m, const char *const *allowed, const char *where)
{
	for (size_t i = 0; i < m->n; i++) {
		bool ok = false;
		for (const char *const *k = allowed; *k && !ok; k++)
			ok = !strcmp(*k, m->items[i].key);
		if (!ok) {
			char list[128];
			size_t pos = 0;
			list[0] = 0;
			for (const char *const *k = allowed; *k && pos < sizeof list; k++)
				pos += (size_t)snprintf(list + pos, sizeof list - pos, " %s", *k);
			return fail_key(hv, &m->items[i], where, list);
		}
	}
	return 0;
}

static const char *scalar(struct hv *hv, const struct yamltree_node *n, const char *what)
{
	if (n->kind != YAMLTREE_SCALAR) {
		fail(hv, n, "%s is %s (expected a single value)", what, yamltree_kind_name(n->kind));
		return NULL;
	}
	if (yamltree_is_null(n)) {
		fail(hv, n, "%s is empty (expected a value)", what);
		return NULL;
	}
	return n->scalar;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* Host names: [a-z0-9][a-z0-9-]*, at most HOSTS_NAME_MAX - 1 characters. */
static bool valid_name(const char *s)
{
	size_t n = strlen(s);
	if (!n || n >= HOSTS_NAME_MAX || !is_lower_alnum(s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* [user@]host: user [a-z_][a-z0-9_-]*, host letters, digits, '.', '-' not leading. Nothing
 * else, so no ssh option ("-oProxyCommand=...") and no shell syntax can come from the file. */
static bool valid_ssh(const char *s)
{
	size_t n = strlen(s);
	if (!n || n >= HOSTS_SSH_MAX)
		return false;
	const char *at = strchr(s, '@');
	const char *host = s;
	if (at) {
		if (at == s || strchr(at + 1, '@'))
			return false;
		if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
			return false;
		for (const char *p = s; p < at; p++)
			if (!is_lower_alnum(*p) && *p != '_' && *p != '-')
				return false;
		host = at + 1;
	}
	if (!*host || *host == '-' || *host == '.')
		return false;
	for (const char *p = host; *p; p++)
		if (!is_lower_alnum(*p) && !(*p >= 'A' && *p <= 'Z') && *p != '.' && *p != '-')
			return false;
	return true;
}

/* A unicast IPv4 address in dotted form (no 0.0.0.0, loopback is allowed for tests of one
 * machine, no multicast or broadcast). */
static int parse_address(struct hv *hv, const struct yamltree_node *v, struct hosts_host *h)
{
	const char *s = scalar(hv, v, "address");
	struct in_addr a;
	if (!s)
		return -EINVAL;
	if (strlen(s) >= sizeof h->address || inet_pton(AF_INET, s, &a) != 1)
		return fail(hv, v, "address '%s' is not an IPv4 address (expected dotted form, e.g. 10.0.0.2)", s);
	uint32_t ha = ntohl(a.s_addr);
	if (ha == 0 || ha == 0xffffffffu || (ha >> 28) == 0xe)
		return fail(hv, v, "address '%s' is not a unicast address (the VXLAN underlay needs one)", s);
	snprintf(h->address, sizeof h->address, "%s", s);
	h->addr = ha;
	return 0;
}

static int parse_cores(struct hv *hv, const struct yamltree_node *v, uint32_t *out)
{
	const char *s = scalar(hv, v, "cores");
	char *end;
	if (!s)
		return -EINVAL;
	errno = 0;
	unsigned long c = s[0] >= '0' && s[0] <= '9' ? strtoul(s, &end, 10) : 0;
	if (s[0] < '0' || s[0] > '9' || *end || errno || c < 1 || c > HOSTS_MAX_CORES)
		return fail(hv, v, "cores '%s' is not a whole number in 1..%u", s, HOSTS_MAX_CORES);
	*out = (uint32_t)c;
	return 0;
}

static int parse_host(struct hv *hv, const struct yamltree_node *m, struct hosts_host *h, bool slurm)
{
	static const char *const keys[] = { "name", "address", "ssh", "cores", NULL };
	const struct yamltree_node *v;
	const char *s;
	int rc;

	if (m->kind != YAMLTREE_MAP)
		return fail(hv, m, "a hosts.list entry is %s (expected a mapping {name, address, ssh, cores})",
			    yamltree_kind_name(m->kind));
	if ((rc = check_keys(hv, m, keys, "a hosts.list entry")))
		return rc;
	h->line = m->line;
	h->col = m->col;
	if (!(v = yamltree_get(m, "name")))
		return fail(hv, m, "hosts.list entry without a name");
	if (!(s = scalar(hv, v, "name")))
		return -EINVAL;
	if (!valid_name(s))
		return fail(hv, v, "host name '%s' is not valid (expected lower-case letters, digits and '-', "
			    "starting with a letter or digit, at most %d characters)", s, HOSTS_NAME_MAX - 1);
	snprintf(h->name, sizeof h->name, "%s", s);
	/* with slurm, a missing address is resolved from the node name, missing cores come from
	 * the allocation (orchestrator/slurm) */
	if (!(v = yamltree_get(m, "address")) && !slurm)
		return fail(hv, m, "host '%s' has no address (expected its IPv4 underlay address)", h->name);
	if (v && (rc = parse_address(hv, v, h)))
		return rc;
	if ((v = yamltree_get(m, "ssh"))) {
		if (!(s = scalar(hv, v, "ssh")))
			return -EINVAL;
		if (!valid_ssh(s))
			return fail(hv, v, "ssh '%s' is not a destination (expected [user@]host: user of "
				    "a-z 0-9 _ -, host of letters, digits, '.', '-', not starting with '-')", s);
		snprintf(h->ssh, sizeof h->ssh, "%s", s);
	} else if (h->addr) {
		snprintf(h->ssh, sizeof h->ssh, "root@%s", h->address);
	}
	if (!(v = yamltree_get(m, "cores")) && slurm)
		return 0;
	if (!v)
		return fail(hv, m, "host '%s' has no cores (expected how many nodes it may hold)", h->name);
	return parse_cores(hv, v, &h->cores);
}

static int parse_map(struct hv *hv, const struct yamltree_node *m, struct hosts *self)
{
	if (!m->n)
		return fail(hv, m, "placement map is empty (expected auto or {NODES: HOST, ...})");
	if (!(self->map = calloc(m->n, sizeof *self->map)))
		return fail(hv, m, "out of memory");
	for (size_t i = 0; i < m->n; i++) {
		const struct yamltree_entry *e = &m->items[i];
		struct hosts_map_entry *me = &self->map[self->n_map];
		const char *s = scalar(hv, e->value, "placement host");
		if (!s)
			return -EINVAL;
		int h = hosts_find(self, s);
		if (h < 0)
			return fail(hv, e->value, "placement names host '%s', which is not in hosts.list", s);
		if (!(me->nodes = strdup(e->key)) ||
		    (e->value->origin && !(me->origin = strdup(e->value->origin)))) {
			free(me->nodes);
			return fail(hv, m, "out of memory");
		}
		me->host = (uint32_t)h;
		me->line = e->line;
		me->col = e->col;
		self->n_map++;
	}
	return 0;
}

static int convert(struct hv *hv, const struct yamltree_node *m, struct hosts *self)
{
	static const char *const keys[] = { "launcher", "list", "placement", NULL };
	const struct yamltree_node *v;
	int rc;

	if (m->kind != YAMLTREE_MAP)
		return fail(hv, m, "hosts is %s (expected a mapping {launcher, list, placement})",
			    yamltree_kind_name(m->kind));
	if ((rc = check_keys(hv, m, keys, "hosts")))
		return rc;
	self->line = m->line;
	self->col = m->col;
	if ((v = yamltree_get(m, "launcher"))) {
		const char *s = scalar(hv, v, "launcher");
		if (!s)
			return -EINVAL;
		if (!strcmp(s, "ssh"))
			self->launcher = HOSTS_LAUNCHER_SSH;
		else if (!strcmp(s, "slurm"))
			self->launcher = HOSTS_LAUNCHER_SLURM;
		else
			return fail(hv, v, "launcher '%s' is not one of the choices (expected ssh|slurm)", s);
	}
	if (!(v = yamltree_get(m, "list")) && self->launcher == HOSTS_LAUNCHER_SLURM)
		goto placement;         /* the allocation's nodes (orchestrator/slurm) */
	if (!v)
		return fail(hv, m, "hosts has no list (expected list: [{name, address, ssh, cores}, ...])");
	if (v->kind != YAMLTREE_SEQ || !v->n)
		return fail(hv, v, "hosts.list is %s (expected a non-empty list of hosts)",
			    v->kind == YAMLTREE_SEQ ? "empty" : yamltree_kind_name(v->kind));
	if (v->n > HOSTS_MAX)
		return fail(hv, v, "hosts.list has %zu hosts (limit %d, HOSTS_MAX)", v->n, HOSTS_MAX);
	if (!(self->list = calloc(v->n, sizeof *self->list)))
		return fail(hv, v, "out of memory");
	for (size_t i = 0; i < v->n; i++) {
		struct hosts_host *h = &self->list[i];
		if ((rc = parse_host(hv, v->items[i].value, h, self->launcher == HOSTS_LAUNCHER_SLURM)))
			return rc;
		for (size_t k = 0; k < i; k++) {
			const struct hosts_host *o = &self->list[k];
			struct yamltree_node at = { .line = h->line, .col = h->col,
						    .origin = v->items[i].value->origin };
			if (!strcmp(o->name, h->name))
				return fail(hv, &at, "duplicate host name '%s' (first at line %u)", h->name, o->line);
			if (h->addr && o->addr == h->addr)
				return fail(hv, &at, "host '%s' has the address %s of host '%s' (line %u)",
					    h->name, h->address, o->name, o->line);
		}
		self->n++;
	}
placement:
	if ((v = yamltree_get(m, "placement"))) {
		if (v->kind == YAMLTREE_MAP && !self->n)
			return fail(hv, v, "a placement map needs hosts.list (without a list the hosts are the "
				    "Slurm allocation's nodes: use placement auto)");
		if (v->kind == YAMLTREE_MAP)
			return parse_map(hv, v, self);
		const char *s = scalar(hv, v, "placement");
		if (!s)
			return -EINVAL;
		if (strcmp(s, "auto"))
			return fail(hv, v, "placement '%s' is not valid (expected auto or a map {NODES: HOST})", s);
	}
	return 0;
}

struct hosts *hosts_from_tree(const struct yamltree_node *m, const char *file, char *err, size_t errlen)
{
	struct hv hv = { .file = file ? file : "<hosts>", .err = err, .errlen = errlen };
	struct hosts *self = calloc(1, sizeof *self);
	if (!self || !(self->file = strdup(hv.file))) {
		free(self);
		fail(&hv, NULL, "out of memory");
		return NULL;
	}
	if (convert(&hv, m, self))
		hosts_destroy(&self);
	return self;
}

struct hosts *hosts_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	struct yamltree_node *root = yamltree_parse(buf, len, name, true, err, errlen);
	struct hosts *self;

	if (!root)
		return NULL;
	const struct yamltree_node *m = yamltree_get(root, "hosts");
	if (!m || root->n != 1)
		m = root;
	self = hosts_from_tree(m, name, err, errlen);
	yamltree_free(root);
	return self;
}

struct hosts *hosts_load(const char *path, char *err, size_t errlen)
{
	struct hosts *self = NULL;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = fopen(path, "rbe");

	if (!f) {
		snprintf(err, errlen, "%s:1:1: error: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (!(buf = malloc(HOSTS_FILE_MAX + 1))) {
		snprintf(err, errlen, "%s:1:1: error: out of memory", path);
		goto out;
	}
	n = fread(buf, 1, HOSTS_FILE_MAX + 1, f);
	if (ferror(f)) {
		snprintf(err, errlen, "%s:1:1: error: read: %s", path, strerror(errno));
		goto out;
	}
	if (n > HOSTS_FILE_MAX) {
		snprintf(err, errlen, "%s:1:1: error: file is larger than %u bytes", path, HOSTS_FILE_MAX);
		goto out;
	}
	self = hosts_parse(buf, n, path, err, errlen);
out:
	free(buf);
	fclose(f);
	return self;
}

int hosts_find(const struct hosts *self, const char *name)
{
	for (size_t i = 0; i < self->n; i++)
		if (!strcmp(self->list[i].name, name))
			return (int)i;
	return -1;
}

uint64_t hosts_total_cores(const struct hosts *self)
{
	uint64_t t = 0;
	for (size_t i = 0; i < self->n; i++)
		t += self->list[i].cores;
	return t;
}

const char *hosts_launcher_name(enum hosts_launcher l)
{
	return l == HOSTS_LAUNCHER_SLURM ? "slurm" : "ssh";
}

void hosts_destroy(struct hosts **self)
{
	if (!self || !*self)
		return;
	struct hosts *h = *self;
	for (size_t i = 0; i < h->n_map; i++) {
		free(h->map[i].nodes);
		free(h->map[i].origin);
	}
	free(h->map);
	free(h->list);
	free(h->file);
	free(h);
	*self = NULL;
}
