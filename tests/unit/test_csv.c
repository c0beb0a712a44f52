/* Unit tests for collectors/csv and collectors/table: header once, append on reopen, long
 * rows; RFC 4180 quoting by csv_quote and its reading by table_parse, against a naive
 * reference model (random fields written and read back); a row cut short by a full disk (a
 * file size limit) is truncated off and no later row follows it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "collectors/table.h"
#include "orchestrator/supervise.h"
#include "tests/support/files.h"

Test(csv, header_once_and_append)
{
	char path[] = "/tmp/stalenet-csv-XXXXXX";
	int fd = support_mkstemp(path);
	struct csv_writer *w;
	char *text;

	close(fd);
	w = csv_writer_open(path, "t_s,node,step");
	cr_assert_not_null(w);
	cr_assert_eq(csv_writer_row(w, "%.3f,%s,%d", 0.5, "worker0", 1), 0);
	csv_writer_close(&w);
	cr_assert_null(w);
	w = csv_writer_open(path, "t_s,node,step");
	cr_assert_eq(csv_writer_row(w, "%.3f,%s,%d", 1.25, "worker0", 2), 0);
	cr_assert_eq(csv_writer_rows(w), 1);
	csv_writer_close(&w);
	text = support_slurp(path, NULL);
	cr_assert_str_eq(text, "t_s,node,step\n0.500,worker0,1\n1.250,worker0,2\n");
	free(text);
	unlink(path);
}

Test(csv, long_row)
{
	char path[] = "/tmp/stalenet-csv-XXXXXX";
	int fd = support_mkstemp(path);
	struct csv_writer *w;
	char big[5000];
	char *text;

	close(fd);
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	w = csv_writer_open(path, "a");
	cr_assert_eq(csv_writer_row(w, "%s", big), 0);
	csv_writer_close(&w);
	text = support_slurp(path, NULL);
	cr_assert_eq(strlen(text), 2 + sizeof big);
	free(text);
	unlink(path);
}

Test(csv, quote_only_what_needs_it)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "", "" },
		{ "worker0", "worker0" },
		{ "0.125", "0.125" },
		{ "[128, 64]", "\"[128, 64]\"" },
		{ "say \"hi\"", "\"say \"\"hi\"\"\"" },
		{ "\"", "\"\"\"\"" },
		{ "two\nlines", "\"two\nlines\"" },
		{ "cr\r", "\"cr\r\"" },
		{ "a;b c", "a;b c" },
	};
	char buf[64];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n = csv_quote(cases[i].in, buf, sizeof buf);

		cr_assert_str_eq(buf, cases[i].out, "case %zu", i);
		cr_assert_eq(n, strlen(cases[i].out), "case %zu length", i);
		cr_assert_eq(csv_needs_quote(cases[i].in), strcmp(cases[i].in, cases[i].out) != 0);
	}
	/* truncation: the length of the whole field, a terminated prefix in buf */
	cr_assert_eq(csv_quote("a,b", buf, 3), 5);
	cr_assert_str_eq(buf, "\"a");
	cr_assert_eq(csv_quote("a,b", NULL, 0), 5);
}

Test(table, rfc4180_fields_and_lines)
{
	const char text[] = "name,\"label, with comma\",n\r\n"
			    "w0,\"[128, 64]\",1\r\n"
			    "w1,\"said \"\"no\"\"\",2\n"
			    "w2,\"line one\nline two\n\",3\n"
			    "w3,,4\n"
			    "\"\",plain,5";
	char err[256];
	struct table *t = table_parse(text, strlen(text), "mem.csv", err, sizeof err);

	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(table_cols(t), 3);
	cr_assert_eq(table_rows(t), 5);
	cr_assert_str_eq(table_colname(t, 1), "label, with comma");
	cr_assert_eq(table_col(t, "label, with comma"), 1);
	cr_assert_str_eq(table_get(t, 0, 1), "[128, 64]");
	cr_assert_str_eq(table_get(t, 1, 1), "said \"no\"");
	cr_assert_str_eq(table_get(t, 2, 1), "line one\nline two\n");
	cr_assert_str_eq(table_get(t, 3, 1), "");
	cr_assert_str_eq(table_get(t, 4, 0), "");
	cr_assert_str_eq(table_get(t, 4, 2), "5");
	cr_assert_str_eq(table_get(t, 0, 2), "1", "the CR of a CRLF is not the field's");
	/* the line where each record starts: w2's record spans lines 4-6 */
	cr_assert_eq(table_line(t, 0), 2);
	cr_assert_eq(table_line(t, 1), 3);
	cr_assert_eq(table_line(t, 2), 4);
	cr_assert_eq(table_line(t, 3), 7);
	cr_assert_eq(table_line(t, 4), 8);
	table_destroy(&t);
	cr_assert_null(t);
}

Test(table, rejects_malformed_with_line)
{
	static const struct {
		const char *text, *expect;
	} cases[] = {
		{ "", "mem.csv:1: missing header" },
		{ "a,b\n1,\"open\n\n", "mem.csv:2: unterminated quoted field" },
		{ "a,b\n1,2\n\"x\"y,3\n", "mem.csv:3: text after a closing quote" },
		{ "a,b\n1,x\"y\n", "mem.csv:2: quote inside an unquoted field" },
		{ "a,b\n\"1\n2\",2\n1,2,3\n", "mem.csv:4: 3 fields, header has 2" },
		{ "a,b\n1,2\n\n3,4\n", "mem.csv:3: empty line" },
		{ "a\n\"x\"\"\n", "mem.csv:2: unterminated quoted field" },
	};
	char err[256];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct table *t = table_parse(cases[i].text, strlen(cases[i].text), "mem.csv", err,
					      sizeof err);

		cr_assert_null(t, "case %zu parsed", i);
		cr_assert(strstr(err, cases[i].expect), "case %zu: \"%s\" lacks \"%s\"", i, err,
			  cases[i].expect);
	}
	/* a NUL byte cannot be a field's */
	cr_assert_null(table_parse("a\n\0\n", 4, "mem.csv", err, sizeof err));
	cr_assert(strstr(err, "NUL"), "%s", err);
}

/* Reference model: random rows of random fields (drawn from characters that need quoting
 * and ones that do not), written with csv_quote + csv_writer_row, read back with table_load
 * and compared field by field with what was written. */
Test(table, random_roundtrip_against_model)
{
	static const char alphabet[] = "ab,\"\n\r 1.;[]";
	enum { ROWS = 200, COLS = 4, MAXLEN = 12 };
	char path[] = "/tmp/stalenet-table-XXXXXX";
	static char model[ROWS][COLS][MAXLEN + 1];
	char err[256], line[COLS * (2 * MAXLEN + 3)];
	struct csv_writer *w;
	struct table *t;
	bool missing = true;
	unsigned seed = 12345;
	int fd = support_mkstemp(path);

	close(fd);
	w = csv_writer_open(path, "c0,\"c,1\",c2,c3");
	cr_assert_not_null(w);
	for (int r = 0; r < ROWS; r++) {
		size_t used = 0;

		for (int c = 0; c < COLS; c++) {
			int len = (int)(rand_r(&seed) % (MAXLEN + 1));

			for (int k = 0; k < len; k++)
				model[r][c][k] = alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
			model[r][c][len] = '\0';
			used += csv_quote(model[r][c], line + used, sizeof line - used);
			line[used++] = c + 1 < COLS ? ',' : '\0';
		}
		cr_assert_eq(csv_writer_row(w, "%s", line), 0);
	}
	csv_writer_close(&w);
	t = table_load(path, &missing, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_not(missing);
	cr_assert_eq(table_rows(t), ROWS);
	cr_assert_str_eq(table_colname(t, 1), "c,1");
	for (int r = 0; r < ROWS; r++)
		for (int c = 0; c < COLS; c++)
			cr_assert_str_eq(table_get(t, (size_t)r, (size_t)c), model[r][c],
					 "row %d col %d", r, c);
	/* lines: each record starts one past the previous one's line breaks */
	size_t expect_line = 2;
	for (int r = 0; r < ROWS; r++) {
		cr_assert_eq(table_line(t, (size_t)r), expect_line, "row %d", r);
		for (int c = 0; c < COLS; c++)
			for (const char *p = model[r][c]; *p; p++)
				expect_line += *p == '\n';
		expect_line++;
	}
	table_destroy(&t);
	unlink(path);
	t = table_load(path, &missing, err, sizeof err);
	cr_assert_null(t);
	cr_assert(missing);
}

/* events.csv details are free text: they come back whole through the reader. */
Test(events, detail_quoted_and_read_back)
{
	char dir[] = "/tmp/stalenet-events-XXXXXX", path[600], err[256];
	const char *detail = "exit status 1, log tail: \"bad, thing\"\nsecond line";
	struct table *t;

	cr_assert_not_null(support_mkdtemp(dir));
	supervise_event(dir, "node_failed", "worker1", detail);
	supervise_event(dir, "stop", "all", "a node failed");
	snprintf(path, sizeof path, "%s/events.csv", dir);
	t = table_load(path, NULL, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(table_rows(t), 2);
	cr_assert_str_eq(table_get(t, 0, (size_t)table_col(t, "detail")), detail);
	cr_assert_str_eq(table_get(t, 0, (size_t)table_col(t, "target")), "worker1");
	cr_assert_str_eq(table_get(t, 1, (size_t)table_col(t, "detail")), "a node failed");
	cr_assert_eq(table_line(t, 1), 4, "the first event spans lines 2-3");
	table_destroy(&t);
	unlink(path);
	rmdir(dir);
}

/* Child of full_disk_cuts_partial_row: under a file size limit of header + 2.5 rows (SIGXFSZ
 * ignored, so write(2) returns a short count and then EFBIG, as on a full disk), write rows
 * until one fails. Exit status: 0 = the third row failed with -ENOSPC and later rows kept
 * failing; 1..5 = which expectation broke. */
static int fill_until_full(const char *path, size_t limit)
{
	struct rlimit rl = { .rlim_cur = limit, .rlim_max = limit };
	struct csv_writer *w;
	int rc = 0;

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
		return 1;
	w = csv_writer_open(path, "t_s,node,step");
	if (!w)
		return 2;
	for (int i = 0; i < 2; i++)
		if (csv_writer_row(w, "%.3f,%s,%d", 1.0 + i, "worker0", i) != 0)
			return 3;
	if (csv_writer_row(w, "%.3f,%s,%d", 3.0, "worker0", 2) != -ENOSPC)
		return 4;
	/* After the cut the file has room again: a later row must still not be appended. */
	for (int i = 0; i < 3; i++)
		if (csv_writer_row(w, "%d", i) != -ENOSPC)
			rc = 5;
	csv_writer_close(&w);
	return rc;
}

Test(csv, full_disk_cuts_partial_row, .timeout = 20)
{
	char path[] = "/tmp/stalenet-csv-XXXXXX";
	int fd = support_mkstemp(path), status;
	const char *whole = "t_s,node,step\n1.000,worker0,0\n2.000,worker0,1\n";
	size_t limit = strlen(whole) + 8; /* the third row ("3.000,worker0,2\n") fits 8 of 16 bytes */
	pid_t pid;
	char *text;

	cr_assert_geq(fd, 0);
	close(fd);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(fill_until_full(path, limit));
	while (waitpid(pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR);
	cr_assert(WIFEXITED(status), "child died of signal %d", WTERMSIG(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "expectation %d failed", WEXITSTATUS(status));
	text = support_slurp(path, NULL);
	cr_assert_not_null(text);
	cr_assert_str_eq(text, whole);
	free(text);
	unlink(path);
}

Test(csv, buf_builds_text_and_quotes_fields)
{
	struct csv_buf b = { 0 };
	char *longf = malloc(2001), *want = malloc(2100);

	cr_assert(longf && want);
	memset(longf, 'a', 2000);
	longf[1000] = '"';
	longf[2000] = '\0';
	csv_buf_field(&b, "x,y");
	csv_buf_put(&b, ",");
	csv_buf_field(&b, "plain");
	csv_buf_put(&b, "\n");
	cr_assert_eq(b.rc, 0);
	cr_assert_str_eq(b.p, "\"x,y\",plain\n");
	cr_assert_eq(b.len, strlen("\"x,y\",plain\n"));
	/* a field longer than the stack buffer, with a quote to double */
	csv_buf_field(&b, longf);
	snprintf(want, 2100, "\"x,y\",plain\n\"%.1000s\"\"%s\"", longf, longf + 1001);
	cr_assert_eq(b.rc, 0);
	cr_assert_str_eq(b.p, want);
	cr_assert_eq(b.len, strlen(want));
	cr_assert_geq(b.cap, b.len + 1);
	free(b.p);
	free(longf);
	free(want);
}

Test(csv, buf_ignores_puts_after_a_failure)
{
	struct csv_buf b = { .rc = -ENOMEM };

	csv_buf_put(&b, "abc");
	csv_buf_field(&b, "d,e");
	cr_assert_eq(b.rc, -ENOMEM);
	cr_assert_null(b.p);
	cr_assert_eq(b.len, 0);
}
