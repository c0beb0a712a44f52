/* libFuzzer target: any byte string through the node configuration reader (kv_parse). Must
 * never crash, hang or leak. What parses must write back (kv_write) to text that parses to
 * the same entries, and the typed getters must accept or refuse every value without harm. */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kv.h"
#include "lib/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct kv *kv = kv_parse((const char *)data, size, "fuzz.conf", err, sizeof err);
	struct kv *back = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (!kv)
		return 0;
	static int quiet = -1;

	if (quiet < 0) { /* the getters log refusals; keep the run quiet */
		quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (quiet >= 0)
			log_set_fd(quiet);
	}
	for (size_t i = 0; i < kv_count(kv); i++) {
		const char *k, *v;
		int64_t i64;
		uint64_t u64;
		double d;
		bool b;

		kv_entry(kv, i, &k, &v);
		kv_get_i64(kv, k, 0, &i64);
		kv_get_u64(kv, k, 0, &u64);
		kv_get_double(kv, k, 0, &d);
		kv_get_bool(kv, k, false, &b);
	}
	f = open_memstream(&text, &len);
	if (!f)
		abort();
	if (kv_write(kv, f) < 0)
		abort();
	fclose(f);
	back = kv_parse(text, len, "re.conf", err, sizeof err);
	if (!back) {
		fprintf(stderr, "written configuration does not parse: %s\n%.*s\n", err, (int)len, text);
		abort();
	}
	for (size_t i = 0; i < kv_count(kv); i++) {
		const char *k, *v, *w;

		kv_entry(kv, i, &k, &v);
		w = kv_get(back, k);
		if (!w || strcmp(v, w) != 0)
			abort();
	}
	free(text);
	kv_destroy(&back);
	kv_destroy(&kv);
	return 0;
}
