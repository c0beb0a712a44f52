/* libFuzzer target: any byte string through the RFC 4180 table reader. Must never crash, hang
 * or leak. What parses is checked against itself: every row has the header's field count,
 * row lines increase, and writing the table back with csv_quote gives text that parses to the
 * same fields. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "collectors/table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The table as CSV text (malloc'ed, *len bytes), every field through csv_quote. */
static char *emit(const struct table *t, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&buf, &cap);

	if (!f)
		return NULL;
	for (size_t r = 0; r <= table_rows(t); r++) {
		for (size_t c = 0; c < table_cols(t); c++) {
			const char *s = r ? table_get(t, r - 1, c) : table_colname(t, c);
			size_t n = csv_quote(s, NULL, 0);
			char *q = malloc(n + 1);

			if (!q)
				abort();
			csv_quote(s, q, n + 1);
			/* an empty single-column record would read as an empty line: quote it */
			fputs(table_cols(t) == 1 && n == 0 ? "\"\"" : q, f);
			fputc(c + 1 < table_cols(t) ? ',' : '\n', f);
			free(q);
		}
	}
	fclose(f);
	*len = cap;
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct table *t = table_parse((const char *)data, size, "fuzz.csv", err, sizeof err);
	struct table *back = NULL;
	char *text = NULL;
	size_t len = 0;

	if (!t)
		return 0;
	for (size_t r = 0; r < table_rows(t); r++) {
		if (table_line(t, r) < 2 || (r > 0 && table_line(t, r) <= table_line(t, r - 1)))
			abort();
		for (size_t c = 0; c < table_cols(t); c++) {
			double v;

			table_double(t, r, c, &v);
		}
	}
	text = emit(t, &len);
	if (!text)
		abort();
	back = table_parse(text, len, "re.csv", err, sizeof err);
	if (!back) {
		fprintf(stderr, "re-emitted table does not parse: %s\n%.*s\n", err, (int)len, text);
		abort();
	}
	if (table_rows(back) != table_rows(t) || table_cols(back) != table_cols(t))
		abort();
	for (size_t r = 0; r <= table_rows(t); r++)
		for (size_t c = 0; c < table_cols(t); c++)
			if (strcmp(r ? table_get(t, r - 1, c) : table_colname(t, c),
				   r ? table_get(back, r - 1, c) : table_colname(back, c)) != 0)
				abort();
	free(text);
	table_destroy(&back);
	table_destroy(&t);
	return 0;
}
