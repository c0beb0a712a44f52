/* sim/sim_status: the sticky outcome of one simulated run (see sim_status.h). */
#include "sim/sim_status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "sim/sim_heap.h"

int sim_status_fail(struct sim_status *st, int rc, const char *fmt, ...)
{
	va_list ap;

	if (st->rc)
		return st->rc;
	va_start(ap, fmt);
	vsnprintf(st->err, st->errlen, fmt, ap);
	va_end(ap);
	st->rc = rc;
	return rc;
}

void sim_status_push(struct sim_status *st, struct sim_heap *h, int64_t t_ns, uint32_t who, uint16_t kind,
		     uint16_t gen)
{
	if (sim_heap_push(h, t_ns, who, kind, gen) < 0)
		sim_status_fail(st, -ENOMEM, "out of memory (event queue)");
}
