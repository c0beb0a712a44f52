/* libFuzzer target: any byte string through the meta.json reader (jansson plus the unsigned
 * seed pass and the schema checks). Must never crash, hang or leak; what parses must give a
 * non-empty run id and sweep keys within bounds, and its label must fit. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run_meta m;
	char err[256], label[512];

	if (meta_parse((const char *)data, size, &m, err, sizeof err) < 0) {
		if (err[0] == '\0')
			abort(); /* a failure always says why */
		return 0;
	}
	if (m.run_id[0] == '\0' || m.nsweep > META_MAX_SWEEP)
		abort();
	for (size_t i = 0; i < m.nsweep; i++)
		if (meta_sweep_value(&m, m.sweep_key[i]) == NULL)
			abort();
	meta_sweep_label(&m, label, sizeof label);
	if (strlen(label) >= sizeof label)
		abort();
	return 0;
}
