/* lib/clock: see clock.h. */
#include "lib/clock.h"

#include <errno.h>
#include <time.h>

static int64_t origin_ns = -1;

int64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t clock_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t clock_wall_offset_ns(void)
{
	int64_t best_off = 0, best_gap = INT64_MAX;

	for (int i = 0; i < 4; i++) {
		int64_t m1 = clock_now_ns(), w = clock_wall_ns(), m2 = clock_now_ns();

		if (m2 - m1 < best_gap) {
			best_gap = m2 - m1;
			best_off = w - (m1 + (m2 - m1) / 2);
		}
		if (best_gap <= 2000)
			break; /* no preemption between them: within 1 us */
	}
	return best_off;
}

void clock_set_origin_ns(int64_t o)
{
	origin_ns = o;
}

int64_t clock_origin_ns(void)
{
	if (origin_ns < 0)
		origin_ns = clock_now_ns();
	return origin_ns;
}

double clock_run_s(void)
{
	return (double)(clock_now_ns() - clock_origin_ns()) / 1e9;
}

void clock_sleep_until_ns(int64_t t_ns)
{
	struct timespec ts = { .tv_sec = t_ns / 1000000000LL, .tv_nsec = t_ns % 1000000000LL };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void clock_sleep_ns(int64_t ns)
{
	if (ns > 0)
		clock_sleep_until_ns(clock_now_ns() + ns);
}
