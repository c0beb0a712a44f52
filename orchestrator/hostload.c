/* orchestrator/hostload: see hostload.h.
 *
 * Per pid the previous reading and its time are kept; a sample adds, over the pids seen both
 * times, the growth of run_delay and of the wall clock. run_delay is kept by the scheduler
 * whether or not schedstats are enabled (it backs delay accounting), so no sysctl is needed.
 * /proc/stat counts in USER_HZ ticks: a one-second sample of a 2-core host has some 200
 * ticks, enough for the busy share to two digits. */
#include "orchestrator/hostload.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct prev {
	pid_t pid;
	uint64_t wait_ns;
	int64_t t_ns;
};

struct hostload {
	struct prev *prev;
	size_t nprev, cap;
	bool have_cpu;
	struct hostload_cpu cpu;
	/* run-wide */
	double wait_ns, wall_ns, wait_max;
	double cpu_sum, cpu_max;
	size_t cpu_samples, wait_samples;
};

/* Parse an unsigned decimal at *p (leading blanks skipped); advances *p. */
static int parse_u64(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*out = v;
	return 0;
}

int hostload_parse_schedstat(const char *text, struct hostload_sched *out)
{
	const char *p = text;
	struct hostload_sched s;

	if (parse_u64(&p, &s.run_ns) < 0 || parse_u64(&p, &s.wait_ns) < 0 || parse_u64(&p, &s.slices) < 0)
		return -EINVAL;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '\n' && *p != '\0')
		return -EINVAL;
	*out = s;
	return 0;
}

int hostload_parse_stat(const char *text, struct hostload_cpu *out)
{
	/* user nice system idle iowait irq softirq steal [guest guest_nice]: older kernels
	 * have fewer fields; at least the first four are required. */
	uint64_t v[10] = { 0 }, total = 0;
	const char *p = text;
	size_t n = 0;

	if (strncmp(p, "cpu ", 4) != 0)
		return -EINVAL;
	p += 4;
	while (n < 10 && parse_u64(&p, &v[n]) == 0)
		n++;
	while (*p == ' ' || *p == '\t')
		p++;
	if (n < 4 || (*p != '\n' && *p != '\0'))
		return -EINVAL;
	for (size_t i = 0; i < 8 && i < n; i++) {
		if (total > UINT64_MAX - v[i])
			return -EINVAL;
		total += v[i];
	}
	out->total = total;
	out->busy = total - v[3] - v[4];
	return 0;
}

double hostload_cpu_frac(const struct hostload_cpu *prev, const struct hostload_cpu *cur)
{
	double dt, db;

	if (cur->total <= prev->total || cur->busy < prev->busy)
		return NAN;
	dt = (double)(cur->total - prev->total);
	db = (double)(cur->busy - prev->busy);
	return db > dt ? 1.0 : db / dt;
}

struct hostload *hostload_new(void)
{
	return calloc(1, sizeof(struct hostload));
}

void hostload_destroy(struct hostload **self)
{
	if (!self || !*self)
		return;
	free((*self)->prev);
	free(*self);
	*self = NULL;
}

int hostload_feed(struct hostload *self, const struct hostload_obs *obs, size_t n,
		  const struct hostload_cpu *cpu, int64_t now_ns, struct hostload_point *out)
{
	struct hostload_point pt = { NAN, NAN };
	double wait = 0, wall = 0;
	bool any = false;
	struct prev *next;

	if (n > self->cap) {
		next = realloc(self->prev, n * sizeof *next);
		if (!next)
			return -ENOMEM;
		self->prev = next;
		self->cap = n;
	}
	/* The new table is built in place of the old: each obs looks up its pid among the old
	 * entries first (n is a few dozen; a linear scan is cheaper than any index). */
	next = n ? malloc(n * sizeof *next) : NULL;
	if (n && !next)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct prev *old = NULL;

		for (size_t k = 0; k < self->nprev; k++)
			if (self->prev[k].pid == obs[i].pid) {
				old = &self->prev[k];
				break;
			}
		if (old && obs[i].sched.wait_ns >= old->wait_ns && now_ns > old->t_ns) {
			double dw = (double)(obs[i].sched.wait_ns - old->wait_ns);
			double dt = (double)(now_ns - old->t_ns);

			/* The readings are a few microseconds apart from now_ns: a thread cannot
			 * wait longer than the time that passed. */
			wait += dw < dt ? dw : dt;
			wall += dt;
			any = true;
		}
		next[i] = (struct prev){ .pid = obs[i].pid, .wait_ns = obs[i].sched.wait_ns, .t_ns = now_ns };
	}
	if (n)
		memcpy(self->prev, next, n * sizeof *next);
	free(next);
	self->nprev = n;
	if (any && wall > 0) {
		pt.runq_wait_frac = wait / wall;
		self->wait_ns += wait;
		self->wall_ns += wall;
		if (self->wait_samples == 0 || pt.runq_wait_frac > self->wait_max)
			self->wait_max = pt.runq_wait_frac;
		self->wait_samples++;
	}
	if (cpu) {
		if (self->have_cpu)
			pt.host_cpu_frac = hostload_cpu_frac(&self->cpu, cpu);
		self->cpu = *cpu;
		self->have_cpu = true;
		if (!isnan(pt.host_cpu_frac)) {
			self->cpu_sum += pt.host_cpu_frac;
			if (self->cpu_samples == 0 || pt.host_cpu_frac > self->cpu_max)
				self->cpu_max = pt.host_cpu_frac;
			self->cpu_samples++;
		}
	}
	if (out)
		*out = pt;
	return 0;
}

/* Read a small /proc file into buf (NUL-terminated). Returns 0 or -errno. */
static int read_small(const char *path, char *buf, size_t len)
{
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	do
		got = read(fd, buf, len - 1);
	while (got < 0 && errno == EINTR);
	close(fd);
	if (got < 0)
		return -errno;
	buf[got] = '\0';
	return 0;
}

int hostload_sample(struct hostload *self, const pid_t *pids, size_t n, int64_t now_ns,
		    struct hostload_point *out)
{
	struct hostload_obs *obs = n ? calloc(n, sizeof *obs) : NULL;
	struct hostload_cpu cpu;
	bool have_cpu = false;
	char path[64], buf[512];
	size_t m = 0;
	int rc;

	if (n && !obs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pids[i]);
		if (read_small(path, buf, sizeof buf) < 0 || hostload_parse_schedstat(buf, &obs[m].sched) < 0)
			continue; /* gone (or a kernel without schedstat): not counted */
		obs[m++].pid = pids[i];
	}
	/* The aggregate line is the first of /proc/stat; 512 bytes hold it. */
	if (read_small("/proc/stat", buf, sizeof buf) == 0) {
		char *nl = strchr(buf, '\n');

		if (nl)
			nl[1] = '\0';
		have_cpu = hostload_parse_stat(buf, &cpu) == 0;
	}
	rc = hostload_feed(self, obs, m, have_cpu ? &cpu : NULL, now_ns, out);
	free(obs);
	return rc;
}

void hostload_get_summary(const struct hostload *self, struct hostload_summary *out)
{
	out->runq_wait_mean = self->wall_ns > 0 ? self->wait_ns / self->wall_ns : NAN;
	out->runq_wait_max = self->wait_samples ? self->wait_max : NAN;
	out->host_cpu_mean = self->cpu_samples ? self->cpu_sum / (double)self->cpu_samples : NAN;
	out->host_cpu_max = self->cpu_samples ? self->cpu_max : NAN;
	out->saturated = !isnan(out->runq_wait_mean) && out->runq_wait_mean > HOSTLOAD_SATURATED_FRAC;
	out->samples = self->wait_samples > self->cpu_samples ? self->wait_samples : self->cpu_samples;
}
