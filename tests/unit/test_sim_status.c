/* sim/sim_status: the first failure's code and message stay; a push that succeeds records
 * nothing and lands on the queue. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "sim/sim_heap.h"
#include "sim/sim_status.h"

Test(sim_status, first_failure_wins)
{
	char err[32] = "";
	struct sim_status st = { .err = err, .errlen = sizeof err };

	cr_assert_eq(sim_status_fail(&st, -EIO, "write %s failed", "eval.csv"), -EIO);
	cr_assert_eq(st.rc, -EIO);
	cr_assert_str_eq(err, "write eval.csv failed");
	cr_assert_eq(sim_status_fail(&st, -ENOMEM, "out of memory"), -EIO, "a later failure returns the first code");
	cr_assert_eq(st.rc, -EIO);
	cr_assert_str_eq(err, "write eval.csv failed");
}

Test(sim_status, message_truncated_to_buffer)
{
	char err[8];
	struct sim_status st = { .err = err, .errlen = sizeof err };

	memset(err, 'x', sizeof err);
	sim_status_fail(&st, -EINVAL, "consistency core refused %u", 12345u);
	cr_assert_eq(st.rc, -EINVAL);
	cr_assert_str_eq(err, "consist");
}

Test(sim_status, push_lands_on_queue)
{
	char err[16] = "";
	struct sim_status st = { .err = err, .errlen = sizeof err };
	struct sim_heap *h = sim_heap_new(1);
	struct sim_event e;

	cr_assert_not_null(h);
	sim_status_push(&st, h, 300, 7, 4, 2);
	sim_status_push(&st, h, 100, 9, 5, 0);
	cr_assert_eq(st.rc, 0);
	cr_assert_str_eq(err, "");
	cr_assert_eq(sim_heap_len(h), 2);
	cr_assert_eq(sim_heap_pop(h, &e), 1);
	cr_assert_eq(e.t_ns, 100);
	cr_assert_eq(e.who, 9);
	cr_assert_eq(e.kind, 5);
	cr_assert_eq(e.gen, 0);
	cr_assert_eq(sim_heap_pop(h, &e), 1);
	cr_assert_eq(e.t_ns, 300);
	cr_assert_eq(e.who, 7);
	cr_assert_eq(e.kind, 4);
	cr_assert_eq(e.gen, 2);
	sim_heap_destroy(&h);
}
