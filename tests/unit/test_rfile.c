/* lib/rfile and the run-directory readers built on it (table_load, kv_load, meta_load_dir):
 * a FIFO, a symlink to a character device and a directory are refused at once with a message
 * saying what they are; a symlink to a regular file is read; every cap holds, both from the
 * file's size and from the bytes actually read (a /proc file says it is empty). The tests that
 * would hang on a reader that blocks carry a timeout. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/meta.h"
#include "collectors/table.h"
#include "lib/kv.h"
#include "lib/rfile.h"
#include "tests/support/files.h"

static char dir[] = "/tmp/stalenet-rfile-XXXXXX";

static void setup(void)
{
	strcpy(dir, "/tmp/stalenet-rfile-XXXXXX");
	cr_assert_not_null(support_mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[200];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

static const char *at(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dir, name);
	return buf;
}

static void put(const char *name, const char *text)
{
	char path[300];
	FILE *f = fopen(at(name, path, sizeof path), "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* A sparse file of size bytes (no disk space used): the size check refuses it unread. */
static void sparse(const char *name, off_t size)
{
	char path[300];
	int fd = open(at(name, path, sizeof path), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, size), 0);
	close(fd);
}

TestSuite(rfile, .init = setup, .fini = teardown, .timeout = 20);

Test(rfile, regular_file_and_symlink_to_one)
{
	char path[300], link[300], err[256] = "", *buf = NULL;
	size_t len = 0;
	int fd, fl;

	put("a.csv", "x,y\n1,2\n");
	cr_assert_eq(rfile_read(at("a.csv", path, sizeof path), 100, &buf, &len, err, sizeof err), 0, "%s", err);
	cr_expect_eq(len, 8);
	cr_expect_str_eq(buf, "x,y\n1,2\n");
	free(buf);
	cr_assert_eq(symlink(path, at("l.csv", link, sizeof link)), 0);
	cr_assert_eq(rfile_read(link, 100, &buf, &len, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(buf, "x,y\n1,2\n");
	free(buf);
	/* the descriptor is close-on-exec and blocking again */
	fd = rfile_open(link, err, sizeof err);
	cr_assert_geq(fd, 0, "%s", err);
	fl = fcntl(fd, F_GETFL);
	cr_expect_eq(fl & O_NONBLOCK, 0);
	cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	cr_expect_eq(rfile_read(at("none", path, sizeof path), 100, &buf, &len, err, sizeof err), -ENOENT);
	cr_expect_null(buf);
}

Test(rfile, fifo_device_and_directory_are_refused)
{
	static const struct {
		const char *name, *what;
		int rc;
	} cases[] = {
		{ "fifo", "a FIFO", -EINVAL },
		{ "zero", "a character device", -EINVAL },
		{ "sub", "a directory", -EISDIR },
	};
	char path[300], err[256], *buf = NULL;
	size_t len = 0;

	cr_assert_eq(mkfifo(at("fifo", path, sizeof path), 0644), 0);
	cr_assert_eq(symlink("/dev/zero", at("zero", path, sizeof path)), 0);
	cr_assert_eq(mkdir(at("sub", path, sizeof path), 0755), 0);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		err[0] = '\0';
		at(cases[i].name, path, sizeof path);
		cr_expect_eq(rfile_read(path, 100, &buf, &len, err, sizeof err), cases[i].rc, "%s", path);
		cr_expect_null(buf);
		cr_expect(strstr(err, path) && strstr(err, "not a regular file") && strstr(err, cases[i].what),
			  "%s", err);
		cr_expect_eq(rfile_open(path, err, sizeof err), cases[i].rc);
	}
}

Test(rfile, caps_from_size_and_from_bytes_read)
{
	char path[300], err[256], *buf = NULL;
	size_t len = 0;

	put("ten", "0123456789");
	cr_expect_eq(rfile_read(at("ten", path, sizeof path), 10, &buf, &len, err, sizeof err), 0, "%s", err);
	cr_expect_eq(len, 10);
	free(buf);
	buf = NULL;
	cr_expect_eq(rfile_read(path, 9, &buf, &len, err, sizeof err), -EFBIG);
	cr_expect(strstr(err, "larger than 9 bytes"), "%s", err);
	cr_expect_null(buf);
	/* fstat says 0 bytes; the read itself must stop */
	cr_expect_eq(rfile_read("/proc/self/maps", 16, &buf, &len, err, sizeof err), -EFBIG, "%s", err);
	cr_expect_null(buf);
}

/* The readers of a run directory, each on a FIFO (would block in open), a link to /dev/zero
 * (would read forever) and a file one byte over its cap (sparse: refused unread). */
Test(rfile, run_directory_readers)
{
	char path[300], err[512];
	struct run_meta m;
	bool missing = true;

	cr_assert_eq(mkfifo(at("fifo", path, sizeof path), 0644), 0);
	cr_assert_eq(symlink("/dev/zero", at("zero", path, sizeof path)), 0);
	for (int k = 0; k < 2; k++) {
		at(k ? "zero" : "fifo", path, sizeof path);
		err[0] = '\0';
		cr_expect_null(table_load(path, &missing, err, sizeof err));
		cr_expect(!missing);
		cr_expect(strstr(err, "not a regular file"), "table_load: %s", err);
		err[0] = '\0';
		cr_expect_null(kv_load(path, err, sizeof err));
		cr_expect(strstr(err, "not a regular file"), "kv_load: %s", err);
	}
	sparse("big.csv", (off_t)TABLE_MAX_BYTES + 1);
	cr_expect_null(table_load(at("big.csv", path, sizeof path), NULL, err, sizeof err));
	cr_expect(strstr(err, "larger than"), "%s", err);
	sparse("big.conf", (off_t)KV_MAX_BYTES + 1);
	cr_expect_null(kv_load(at("big.conf", path, sizeof path), err, sizeof err));
	cr_expect(strstr(err, "larger than"), "%s", err);

	/* meta.json: a FIFO, then too large; scenario.yaml (read for a target) a FIFO */
	cr_assert_eq(mkfifo(at("meta.json", path, sizeof path), 0644), 0);
	cr_expect_eq(meta_load_dir(dir, &m, err, sizeof err), -EINVAL);
	cr_expect(strstr(err, "meta.json: not a regular file (a FIFO)"), "%s", err);
	unlink(path);
	sparse("meta.json", META_MAX_BYTES + 1);
	cr_expect_eq(meta_load_dir(dir, &m, err, sizeof err), -EFBIG);
	cr_expect(strstr(err, "larger than"), "%s", err);
	put("meta.json", "{\"run_id\": \"r\"}");
	cr_expect_eq(meta_load_dir(dir, &m, err, sizeof err), 0, "%s", err);
	cr_expect(!m.has_target);
	put("scenario.yaml", "name: x\ntarget: 0.5\n");
	cr_expect_eq(meta_load_dir(dir, &m, err, sizeof err), 0, "%s", err);
	cr_expect(m.has_target && m.target == 0.5);
	unlink(at("scenario.yaml", path, sizeof path));
	cr_assert_eq(mkfifo(path, 0644), 0);
	cr_expect_eq(meta_load_dir(dir, &m, err, sizeof err), -EINVAL);
	cr_expect(strstr(err, "scenario.yaml: not a regular file (a FIFO)"), "%s", err);
}
