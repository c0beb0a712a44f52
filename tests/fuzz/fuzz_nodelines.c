/* libFuzzer target: the lines a node process sends that a privileged process reads (lib/ctl's
 * status message, node/probe's loss count question and answer) and the recorded event lines
 * core_ps replays (node/core_ps), read from raw bytes, one line per newline. Must never crash,
 * hang or leak; whatever parses holds only values in range and, written again as the sender
 * writes it, parses to the same values and reads back the same text. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ctl.h"
#include "node/core_ps.h"
#include "node/probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const char *line)
{
	char buf[256];
	struct ctl_status st, st2;
	struct core_ps_event ev, ev2;
	uint32_t idx, idx2;
	int64_t n, n2;

	if (!ctl_parse_status(line, &st)) {
		if (st.step < 0 || st.state < CTL_INIT || st.state > CTL_DONE)
			abort();
		snprintf(buf, sizeof buf, "status %" PRId64 " %s %d", st.step, ctl_state_name(st.state), st.waiting ? 1 : 0);
		if (strcmp(buf, line) || ctl_parse_status(buf, &st2) || st2.step != st.step || st2.state != st.state ||
		    st2.waiting != st.waiting)
			abort();        /* only the exact written form is taken */
	}
	if (!probe_parse_count(line, &idx)) {
		if (idx >= PROBE_MAX_NODES)
			abort();
		snprintf(buf, sizeof buf, "count %" PRIu32, idx);
		if (probe_parse_count(buf, &idx2) || idx2 != idx || strncmp(buf, line, strlen(buf)))
			abort();
	}
	if (!probe_parse_answer(line, &n)) {
		if (n < 0)
			abort();
		snprintf(buf, sizeof buf, "%" PRId64 "\n", n);
		if (probe_parse_answer(buf, &n2) || n2 != n)
			abort();
	}
	if (!core_ps_event_parse(line, &ev)) {
		if (ev.kind < CORE_PS_EV_HELLO || ev.kind > CORE_PS_EV_TICK)
			abort();
		core_ps_event_format(&ev, buf, sizeof buf);
		if (core_ps_event_parse(buf, &ev2) || memcmp(&ev, &ev2, sizeof ev) || strncmp(buf, line, strlen(buf)))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *line, *save = NULL;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	one(text);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		one(line);
	free(text);
	return 0;
}
