/* lib/timerlat: timer lateness of this host (see the header).
 *
 * Every sample is one clock_nanosleep to an absolute deadline; lateness = wake-up time minus the
 * deadline. The samples go into a lib/latehist (quantiles rounded up to 1 us below 64 us, to
 * 1/16 of the value above). The load threads spin at nice 0 under the normal scheduler, like
 * the nodes of a run, one per online CPU (explicitly not inheriting the measuring thread's
 * real-time policy, or they would never yield), and stop through an atomic flag. */
#include "lib/timerlat.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/latehist.h"

#define TIMERLAT_BUDGET_NS 100000 /* the precise mode's error budget: 0.1 ms */
#define MAX_LOADERS 256

static atomic_int loaders_stop;

static void *loader(void *arg)
{
	volatile uint64_t spins = 0;

	(void)arg;
	while (!atomic_load_explicit(&loaders_stop, memory_order_relaxed))
		spins++;
	return NULL;
}

static void fill(struct timerlat_dist *d, const struct latehist *h)
{
	d->n = (int)h->n;
	d->p50_ns = latehist_quantile_ns(h, 0.5);
	d->p99_ns = latehist_quantile_ns(h, 0.99);
	d->max_ns = latehist_max_ns(h);
}

/* n sleeps of sleep_ns each, the first after idling idle_ns when idle_ns > 0 (then every one). */
static void sample(struct latehist *h, int n, int64_t sleep_ns, int64_t idle_ns)
{
	for (int i = 0; i < n; i++) {
		if (idle_ns > 0)
			clock_sleep_ns(idle_ns);
		int64_t t = clock_now_ns() + sleep_ns;

		clock_sleep_until_ns(t);
		latehist_add(h, clock_now_ns() - t);
	}
}

struct job {
	const struct timerlat_opts *o;
	struct timerlat_result *r;
	int rc;
};

static void *measure(void *arg)
{
	struct job *j = arg;
	const struct timerlat_opts *o = j->o;
	struct latehist h;
	pthread_t th[MAX_LOADERS];
	int started = 0;

	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (o->rt_prio > 0) {
		struct sched_param sp = { .sched_priority = o->rt_prio };

		j->r->rt = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
	}
	latehist_reset(&h);
	sample(&h, o->warm_samples, 1000000, 0);
	fill(&j->r->warm, &h);
	latehist_reset(&h);
	sample(&h, o->idle_samples, 10000000, (int64_t)o->idle_ms * 1000000);
	fill(&j->r->idle, &h);
	if (o->load_samples > 0) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		if (ncpu < 1)
			ncpu = 1;
		if (ncpu > MAX_LOADERS)
			ncpu = MAX_LOADERS;
		atomic_store(&loaders_stop, 0);
		/* The loaders must not inherit the real-time policy: they would never let go. */
		pthread_attr_t attr;
		struct sched_param sp0 = { .sched_priority = 0 };

		pthread_attr_init(&attr);
		pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
		pthread_attr_setschedparam(&attr, &sp0);
		for (; started < ncpu; started++) {
			int rc = pthread_create(&th[started], &attr, loader, NULL);

			if (rc != 0) {
				j->rc = -rc;
				break;
			}
		}
		pthread_attr_destroy(&attr);
		j->r->ncpu = started;
		latehist_reset(&h);
		sample(&h, o->load_samples, 1000000, 0);
		fill(&j->r->load, &h);
		atomic_store(&loaders_stop, 1);
		for (int i = 0; i < started; i++)
			pthread_join(th[i], NULL);
	}
	return NULL;
}

int timerlat_measure(const struct timerlat_opts *opts, struct timerlat_result *out)
{
	struct job j = { opts, out, 0 };
	pthread_t t;
	int rc;

	memset(out, 0, sizeof *out);
	/* A thread of its own: the caller's scheduling and timer slack stay as they were. */
	rc = pthread_create(&t, NULL, measure, &j);
	if (rc != 0)
		return -rc;
	pthread_join(t, NULL);
	return j.rc;
}

const char *timerlat_precision_for(const struct timerlat_result *r)
{
	if ((r->idle.n && r->idle.p99_ns > TIMERLAT_BUDGET_NS) || (r->load.n && r->load.p99_ns > TIMERLAT_BUDGET_NS) ||
	    (r->warm.n && r->warm.p99_ns > TIMERLAT_BUDGET_NS))
		return "spin";
	return "timer";
}

static int line(char *buf, size_t len, const char *what, const struct timerlat_dist *d)
{
	if (!d->n)
		return snprintf(buf, len, "%s: not measured\n", what);
	return snprintf(buf, len, "%s: p50 %.3f ms, p99 %.3f ms, max %.3f ms (%d wake-ups)\n", what,
			(double)d->p50_ns / 1e6, (double)d->p99_ns / 1e6, (double)d->max_ns / 1e6, d->n);
}

int timerlat_describe(const struct timerlat_result *r, char *buf, size_t len)
{
	size_t off = 0;
	int64_t worst = r->warm.p99_ns;

#define ADD(expr)                                                         \
	do {                                                              \
		int n_ = (expr);                                          \
		if (n_ > 0)                                               \
			off += (size_t)n_ < len - off ? (size_t)n_ : len - off - 1; \
	} while (0)
	if (!len)
		return 0;
	buf[0] = '\0';
	ADD(line(buf + off, len - off, "timer lateness, busy", &r->warm));
	ADD(line(buf + off, len - off, "timer lateness, after idle", &r->idle));
	ADD(line(buf + off, len - off, "timer lateness, under load", &r->load));
	if (r->idle.p99_ns > worst)
		worst = r->idle.p99_ns;
	if (r->load.p99_ns > worst)
		worst = r->load.p99_ns;
	ADD(snprintf(buf + off, len - off, "measured %s real-time priority, %d CPU(s) loaded\n",
		     r->rt ? "with" : "WITHOUT", r->ncpu));
	if (worst <= TIMERLAT_BUDGET_NS)
		ADD(snprintf(buf + off, len - off,
			     "meaning: timers fire within %.3f ms at p99: emulated delays are exact to 0.1 ms with "
			     "network.precision: timer\n", (double)worst / 1e6));
	else
		ADD(snprintf(buf + off, len - off,
			     "meaning: a delay may come out up to %.3f ms late (p99) with plain timers: use "
			     "network.precision: spin (auto picks it), which wakes early and polls the clock, "
			     "at the cost of CPU while packets are held; kernel netem on this host suffers the same\n",
			     (double)worst / 1e6));
#undef ADD
	return (int)off;
}
