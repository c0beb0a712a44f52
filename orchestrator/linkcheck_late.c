/* orchestrator/linkcheck_late: see the header. */
#include "orchestrator/linkcheck_late.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/csv.h"
#include "collectors/schema.h"
#include "collectors/table.h"
#include "lib/link_verdict.h"
#include "lib/safefile.h"

static double worse(double a, double b)
{
	if (isnan(a))
		return b;
	if (isnan(b))
		return a;
	return a > b ? a : b;
}

int linkcheck_late_fill(const char *path, linkcheck_late_fn *lookup, void *arg, int *n_late, char *err,
			size_t errlen)
{
	struct table *t = NULL;
	struct safefile_tmp tmp = { .dirfd = -1 };
	FILE *f = NULL;
	bool missing = false;
	char hdr[512];
	int rc = 0, late = 0, cnode, cdir, clate, cverdict;

	if (n_late)
		*n_late = 0;
	t = table_load(path, &missing, err, errlen);
	if (!t)
		return missing ? -ENOENT : -EINVAL;
	table_header(t, hdr, sizeof hdr);
	if (strcmp(hdr, TRACE_HEADER_LINKCHECK) != 0) {
		snprintf(err, errlen, "%s:1: header is \"%s\", expected \"%s\"", path, hdr, TRACE_HEADER_LINKCHECK);
		rc = -EINVAL;
		goto out;
	}
	cnode = table_col(t, "node");
	cdir = table_col(t, "direction");
	clate = table_col(t, "late_p99_ms");
	cverdict = table_col(t, "verdict");
	f = safefile_replace_begin(&tmp, path, 0644);
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	fprintf(f, "%s\n", TRACE_HEADER_LINKCHECK);
	for (size_t r = 0; r < table_rows(t); r++) {
		const char *node = table_get(t, r, (size_t)cnode), *dir = table_get(t, r, (size_t)cdir);
		const char *verdict = table_get(t, r, (size_t)cverdict);
		char latebuf[32], q[512];
		double l = NAN;

		if (!*table_get(t, r, (size_t)clate)) {
			if (!strcmp(dir, "rtt"))
				l = worse(lookup(arg, node, "up"), lookup(arg, node, "down"));
			else
				l = lookup(arg, node, dir);
		}
		for (size_t c = 0; c < table_cols(t); c++) {
			const char *v = table_get(t, r, c);

			if ((int)c == clate && !isnan(l)) {
				snprintf(latebuf, sizeof latebuf, "%.3f", l);
				v = latebuf;
			} else if ((int)c == cverdict && !isnan(l)) {
				v = link_verdict_with_late(strcmp(verdict, "ok") == 0, l);
			}
			csv_quote(v, q, sizeof q);
			fprintf(f, "%s%s", c ? "," : "", q);
		}
		fputc('\n', f);
		if (!isnan(l) ? l > LINK_VERDICT_LATE_MS : strcmp(verdict, "late") == 0)
			late++;
	}
	if (ferror(f)) {
		rc = -EIO;
		snprintf(err, errlen, "%s: write failed", path);
		safefile_replace_abort(&tmp);
		goto out;
	}
	rc = safefile_replace_commit(&tmp);
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
	else if (n_late)
		*n_late = late;
out:
	table_destroy(&t);
	return rc;
}
