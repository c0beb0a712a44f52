/* lib/clock: the realtime-to-monotonic offset from a tight pair of reads. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/clock.h"

/* The offset equals realtime less monotonic read back to back (the two reads 1 us apart at most
 * when nothing preempts them; 5 ms of room for a loaded host), and stays put from call to call
 * (the clocks advance together; NTP slews by microseconds a second at most). */
Test(clock, wall_offset_is_realtime_less_monotonic)
{
	int64_t off = clock_wall_offset_ns();
	int64_t plain = clock_wall_ns() - clock_now_ns();

	cr_assert_lt(llabs(off - plain), 5000000LL, "offset %lld, plain reads %lld", (long long)off, (long long)plain);
	cr_assert_gt(off, 0, "realtime is after the epoch, monotonic since boot");
	for (int i = 0; i < 1000; i++) {
		int64_t again = clock_wall_offset_ns();

		cr_assert_lt(llabs(again - off), 1000000LL, "the offset moved by %lld ns", (long long)(again - off));
	}
}
