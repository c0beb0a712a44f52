/* orchestrator/slurm: see slurm.h.
 *
 * The compressed host list is Slurm's: items separated by commas outside brackets, each item
 * literal text with bracket groups of comma-separated numbers or ranges lo-hi; a range keeps
 * the width of its low bound ("[08-11]" is 08 09 10 11), several groups in one item expand as
 * their product ("r[1-2]n[1-2]" is r1n1 r1n2 r2n1 r2n2). Anything else (nested or unmatched
 * brackets, an empty item or range, hi < lo, a step, a letter in a range, a duplicate node) is
 * refused with the reason. */
#include "orchestrator/slurm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS 9                    /* a range bound fits an unsigned long with room */

struct ex {
	char (*names)[HOSTS_NAME_MAX];
	size_t max, n;
	char *err;
	size_t errlen;
};

static int failf(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int failf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* The host name alphabet of orchestrator/hosts: [a-z0-9][a-z0-9-]*. */
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

static int add_name(struct ex *x, const char *name)
{
	if (!valid_name(name))
		return failf(x->err, x->errlen, -EINVAL, "node name '%s' is not usable as a host name (expected "
			     "lower-case letters, digits and '-', starting with a letter or digit, at most %d characters)",
			     name, HOSTS_NAME_MAX - 1);
	for (size_t i = 0; i < x->n; i++)
		if (!strcmp(x->names[i], name))
			return failf(x->err, x->errlen, -EINVAL, "node '%s' appears twice", name);
	if (x->n == x->max)
		return failf(x->err, x->errlen, -E2BIG, "more than %zu nodes", x->max);
	memcpy(x->names[x->n++], name, strlen(name) + 1);
	return 0;
}

/* Digits at *p (at most MAX_DIGITS) into *v and their count into *w; 0 or -EINVAL. */
static int number(const char **p, const char *end, unsigned long *v, size_t *w)
{
	const char *s = *p;
	*v = 0;
	while (s < end && *s >= '0' && *s <= '9' && s - *p < MAX_DIGITS + 1)
		*v = *v * 10 + (unsigned long)(*s++ - '0');
	*w = (size_t)(s - *p);
	if (!*w || *w > MAX_DIGITS)
		return -EINVAL;
	*p = s;
	return 0;
}

/* Expand the item text [s, end) after the already expanded prefix name[0..len). */
static int expand_item(struct ex *x, const char *s, const char *end, char *name, size_t len)
{
	while (s < end && *s != '[') {
		if (*s == ']')
			return failf(x->err, x->errlen, -EINVAL, "']' without '['");
		if (len + 1 >= HOSTS_NAME_MAX)
			return failf(x->err, x->errlen, -EINVAL, "a node name is longer than %d characters",
				     HOSTS_NAME_MAX - 1);
		name[len++] = *s++;
	}
	if (s == end) {
		name[len] = 0;
		return add_name(x, name);
	}
	const char *close = s + 1;
	while (close < end && *close != ']' && *close != '[')
		close++;
	if (close == end)
		return failf(x->err, x->errlen, -EINVAL, "'[' without ']'");
	if (*close == '[')
		return failf(x->err, x->errlen, -EINVAL, "'[' inside brackets");
	for (const char *p = s + 1;;) {
		const char *e = p;
		while (e < close && *e != ',')
			e++;
		if (e == p)
			return failf(x->err, x->errlen, -EINVAL, "an empty range in '%.*s'", (int)(close - s + 1), s);
		unsigned long lo, hi;
		size_t w, w2;
		const char *q = p;
		if (number(&q, e, &lo, &w))
			return failf(x->err, x->errlen, -EINVAL, "range '%.*s' is not a number or lo-hi", (int)(e - p), p);
		hi = lo;
		if (q < e && *q == '-') {
			q++;
			if (number(&q, e, &hi, &w2))
				return failf(x->err, x->errlen, -EINVAL, "range '%.*s' is not a number or lo-hi",
					     (int)(e - p), p);
		}
		if (q != e)
			return failf(x->err, x->errlen, -EINVAL, "range '%.*s' is not a number or lo-hi", (int)(e - p), p);
		if (hi < lo)
			return failf(x->err, x->errlen, -EINVAL, "range '%.*s' runs backwards", (int)(e - p), p);
		if (hi - lo >= x->max)
			return failf(x->err, x->errlen, -E2BIG, "range '%.*s' has more than %zu nodes", (int)(e - p),
				     p, x->max);
		for (unsigned long v = lo; v <= hi; v++) {
			char num[16];
			int nl = snprintf(num, sizeof num, "%0*lu", (int)w, v);
			if (len + (size_t)nl >= HOSTS_NAME_MAX)
				return failf(x->err, x->errlen, -EINVAL, "a node name is longer than %d characters",
					     HOSTS_NAME_MAX - 1);
			memcpy(name + len, num, (size_t)nl);
			int rc = expand_item(x, close + 1, end, name, len + (size_t)nl);
			if (rc)
				return rc;
		}
		if (e == close)
			return 0;
		p = e + 1;
	}
}

int slurm_hostlist_expand(const char *list, char (*names)[HOSTS_NAME_MAX], size_t max, size_t *n, char *err,
			  size_t errlen)
{
	struct ex x = { .names = names, .max = max, .err = err, .errlen = errlen };
	char name[HOSTS_NAME_MAX];
	*n = 0;
	if (!list || !*list)
		return failf(err, errlen, -EINVAL, "the node list is empty");
	if (strlen(list) > SLURM_LIST_MAX)
		return failf(err, errlen, -E2BIG, "the node list is longer than %d characters", SLURM_LIST_MAX);
	for (const char *s = list;;) {
		const char *e = s;
		bool in = false;
		while (*e && (in || *e != ',')) {
			if (*e == '[')
				in = true;
			else if (*e == ']')
				in = false;
			e++;
		}
		if (e == s)
			return failf(err, errlen, -EINVAL, "an empty item in the node list '%s'", list);
		int rc = expand_item(&x, s, e, name, 0);
		if (rc) {
			char why[256];
			snprintf(why, sizeof why, "%s", err ? err : "");
			return failf(err, errlen, rc, "node list '%.*s': %s", 200, list, why);
		}
		if (!*e)
			break;
		s = e + 1;
	}
	*n = x.n;
	return 0;
}

int slurm_cpus_expand(const char *s, uint32_t *cpus, size_t n, char *err, size_t errlen)
{
	size_t k = 0;
	const char *p = s;
	if (!s || !*s)
		return failf(err, errlen, -EINVAL, "SLURM_JOB_CPUS_PER_NODE is empty");
	for (;;) {
		unsigned long c, rep = 1;
		size_t w;
		if (number(&p, p + strlen(p), &c, &w) || !c || c > HOSTS_MAX_CORES)
			goto bad;
		if (*p == '(') {
			if (p[1] != 'x')
				goto bad;
			p += 2;
			if (number(&p, p + strlen(p), &rep, &w) || !rep || *p != ')')
				goto bad;
			p++;
		}
		if (rep > n - k)
			return failf(err, errlen, -EINVAL, "SLURM_JOB_CPUS_PER_NODE '%.80s' names more than %zu nodes", s, n);
		for (unsigned long i = 0; i < rep; i++)
			cpus[k++] = (uint32_t)c;
		if (!*p)
			break;
		if (*p++ != ',')
			goto bad;
	}
	if (k != n)
		return failf(err, errlen, -EINVAL, "SLURM_JOB_CPUS_PER_NODE '%.80s' names %zu nodes, the node list %zu",
			     s, k, n);
	return 0;
bad:
	return failf(err, errlen, -EINVAL, "SLURM_JOB_CPUS_PER_NODE '%.80s' is not of the form 4(x3),2", s);
}

struct slurm_env slurm_env_get(void)
{
	struct slurm_env e = { .job_id = getenv("SLURM_JOB_ID"), .nodelist = getenv("SLURM_JOB_NODELIST"),
			       .cpus_per_node = getenv("SLURM_JOB_CPUS_PER_NODE") };
	if (!e.job_id || !*e.job_id)
		e.job_id = getenv("SLURM_JOBID");
	if (!e.nodelist || !*e.nodelist)
		e.nodelist = getenv("SLURM_NODELIST");
	return e;
}

int slurm_in_allocation(const struct slurm_env *env)
{
	return env->job_id && *env->job_id && env->nodelist && *env->nodelist;
}

int slurm_list_complete(const struct hosts *hosts)
{
	for (size_t i = 0; i < hosts->n; i++)
		if (!hosts->list[i].addr || !hosts->list[i].cores)
			return 0;
	return hosts->n > 0;
}

/* The IPv4 address of node name into h (not loopback). */
static int resolve_address(const char *file, struct hosts_host *h, uint32_t line, uint32_t col, char *err,
			   size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *res = NULL;
	int g = getaddrinfo(h->name, NULL, &hints, &res);
	if (g || !res)
		return failf(err, errlen, -EHOSTUNREACH, "%s:%u:%u: error: host '%s': its address cannot be resolved "
			     "from the node name (%s); give it as address", file, line, col, h->name,
			     g ? gai_strerror(g) : "no answer");
	struct in_addr a = ((const struct sockaddr_in *)(const void *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	uint32_t ha = ntohl(a.s_addr);
	inet_ntop(AF_INET, &a, h->address, sizeof h->address);
	if ((ha >> 24) == 127 || ha == 0)
		return failf(err, errlen, -EINVAL, "%s:%u:%u: error: host '%s' resolves to %s, a loopback address "
			     "(the VXLAN underlay needs the node's own); give it as address", file, line, col, h->name,
			     h->address);
	h->addr = ha;
	return 0;
}

int slurm_resolve(struct hosts *hosts, const struct slurm_env *env, char *err, size_t errlen)
{
	char (*names)[HOSTS_NAME_MAX] = NULL;
	uint32_t *cpus = NULL;
	size_t n = 0;
	char why[512];
	int rc = 0;
	bool have_cpus = false;
	const char *file = hosts->file ? hosts->file : "<hosts>";
	uint32_t line = hosts->line ? hosts->line : 1, col = hosts->col ? hosts->col : 1;

	if (!slurm_in_allocation(env))
		return failf(err, errlen, -ENOENT, "%s:%u:%u: error: launcher slurm needs a Slurm allocation, and "
			     "SLURM_JOB_ID or SLURM_JOB_NODELIST is not set (run stalenet under salloc, sbatch or srun, "
			     "or use launcher: ssh)", file, line, col);
	if (!(names = calloc(HOSTS_MAX, sizeof *names)) || !(cpus = calloc(HOSTS_MAX, sizeof *cpus))) {
		rc = failf(err, errlen, -ENOMEM, "%s:%u:%u: error: out of memory", file, line, col);
		goto out;
	}
	if ((rc = slurm_hostlist_expand(env->nodelist, names, HOSTS_MAX, &n, why, sizeof why))) {
		failf(err, errlen, rc, "%s:%u:%u: error: Slurm job %.40s: %s", file, line, col, env->job_id, why);
		goto out;
	}
	if (env->cpus_per_node && *env->cpus_per_node) {
		if ((rc = slurm_cpus_expand(env->cpus_per_node, cpus, n, why, sizeof why))) {
			failf(err, errlen, rc, "%s:%u:%u: error: Slurm job %.40s: %s", file, line, col, env->job_id, why);
			goto out;
		}
		have_cpus = true;
	}
	if (!hosts->n) {
		/* no list: the allocation's nodes are the hosts, in its order */
		if (!have_cpus) {
			rc = failf(err, errlen, -EINVAL, "%s:%u:%u: error: Slurm job %.40s: SLURM_JOB_CPUS_PER_NODE is "
				   "not set, so the hosts' cores are unknown (give a hosts list with cores)", file,
				   line, col, env->job_id);
			goto out;
		}
		if (!(hosts->list = calloc(n, sizeof *hosts->list))) {
			rc = failf(err, errlen, -ENOMEM, "%s:%u:%u: error: out of memory", file, line, col);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			struct hosts_host *h = &hosts->list[i];
			memcpy(h->name, names[i], sizeof h->name);
			h->cores = cpus[i];
			h->line = line;
			h->col = col;
		}
		hosts->n = n;
	}
	for (size_t i = 0; i < hosts->n; i++) {
		struct hosts_host *h = &hosts->list[i];
		size_t k = 0;
		while (k < n && strcmp(names[k], h->name))
			k++;
		if (k == n) {
			rc = failf(err, errlen, -EINVAL, "%s:%u:%u: error: host '%s' is not a node of Slurm job %.40s "
				   "(its nodes: %.200s)", file, h->line, h->col, h->name, env->job_id, env->nodelist);
			goto out;
		}
		if (!h->cores) {
			if (!have_cpus) {
				rc = failf(err, errlen, -EINVAL, "%s:%u:%u: error: host '%s' has no cores and "
					   "SLURM_JOB_CPUS_PER_NODE is not set", file, h->line, h->col, h->name);
				goto out;
			}
			h->cores = cpus[k];
		}
		if (!h->addr && (rc = resolve_address(file, h, h->line, h->col, err, errlen)))
			goto out;
		for (size_t j = 0; j < i; j++)
			if (hosts->list[j].addr == h->addr) {
				rc = failf(err, errlen, -EINVAL, "%s:%u:%u: error: host '%s' has the address %s of host "
					   "'%s'", file, h->line, h->col, h->name, h->address, hosts->list[j].name);
				goto out;
			}
		if (!h->ssh[0])
			snprintf(h->ssh, sizeof h->ssh, "root@%s", h->address);
	}
out:
	free(names);
	free(cpus);
	return rc;
}

static bool path_ok(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) > 1024)
		return false;
	for (; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '/' || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return true;
}

int slurm_agent_argv(struct slurm_argv *self, const char *srun, const char *node, const char *agent_path)
{
	size_t a = 0;
	if (!node || !valid_name(node) || !path_ok(agent_path))
		return -EINVAL;
	snprintf(self->nodelist, sizeof self->nodelist, "--nodelist=%s", node);
	self->argv[a++] = srun && *srun ? srun : "srun";
	self->argv[a++] = "--nodes=1";
	self->argv[a++] = "--ntasks=1";
	self->argv[a++] = "--ntasks-per-node=1";
	self->argv[a++] = self->nodelist;
	self->argv[a++] = "--overlap";
	self->argv[a++] = "--whole";
	self->argv[a++] = "--cpu-bind=none";
	self->argv[a++] = "--input=all";
	self->argv[a++] = "--kill-on-bad-exit=1";
	self->argv[a++] = "--job-name=stalenet-agent";
	self->argv[a++] = "--quiet";
	self->argv[a++] = agent_path;
	self->argv[a++] = "agent";
	self->argv[a] = NULL;
	return 0;
}
