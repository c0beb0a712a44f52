/* Unit tests for collectors/csv: header once, append on reopen, long rows. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/csv.h"
#include "tests/support/files.h"

Test(csv, header_once_and_append)
{
	char path[] = "/tmp/stalenet-csv-XXXXXX";
	int fd = mkstemp(path);
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
	int fd = mkstemp(path);
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
