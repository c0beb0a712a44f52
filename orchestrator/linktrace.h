/* orchestrator/linktrace: a time-varying link replayed from a file (`network.trace`).
 *
 * A Mahimahi-like trace for the whole topology: CSV rows `t_s,delay,loss,rate` (a header line
 * naming those columns is allowed; `#` comments and blank lines are skipped). From t_s on
 * (seconds after the run's start), every node's link, both directions, has that delay, loss and
 * rate; other knobs (jitter, distribution, ...) keep their planned values. Cells use the
 * scenario's units (`20ms`, `1%` or `0.01`, `10mbit`); an empty cell keeps the previous value;
 * `0` means off. Rows must be in non-decreasing time order. */
#ifndef STALENET_LINKTRACE_H
#define STALENET_LINKTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"

struct linktrace_row {
	uint64_t at_us;
	bool has_delay, has_loss, has_rate;
	uint32_t delay_us;
	uint32_t loss_ppm;
	uint64_t rate_bps;
};

struct linktrace {
	struct linktrace_row *rows;
	size_t n;
};

/* Load path. Returns NULL with "PATH:LINE: error: ..." in err on failure (unreadable file,
 * wrong column count, bad unit, time going backwards, delay over 60 s). */
struct linktrace *linktrace_load(const char *path, char *err, size_t errlen);
void linktrace_destroy(struct linktrace **self);

/* Apply a row's values onto link parameters (marking them set). */
void linktrace_apply(const struct linktrace_row *row, struct link_params *p);

#endif
