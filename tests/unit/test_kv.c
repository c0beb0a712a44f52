/* Unit tests for lib/kv: set/get/override, typed getters, save/load round trip, bad lines. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/kv.h"
#include "tests/support/files.h"

Test(kv, set_get_override)
{
	struct kv *kv = kv_new();
	int64_t i;
	double d;
	bool b;

	cr_assert_eq(kv_set(kv, "train.batch", "64"), 0);
	cr_assert_eq(kv_set(kv, "train.lr", "0.05"), 0);
	cr_assert_eq(kv_set(kv, "train.batch", "32"), 0);
	cr_assert_eq(kv_count(kv), 2);
	cr_assert_eq(kv_get_i64(kv, "train.batch", 0, &i), 0);
	cr_assert_eq(i, 32);
	cr_assert_eq(kv_get_double(kv, "train.lr", 0, &d), 0);
	cr_assert_float_eq(d, 0.05, 1e-12);
	cr_assert_eq(kv_get_i64(kv, "absent", 7, &i), 0);
	cr_assert_eq(i, 7);
	cr_assert_eq(kv_get_i64(kv, "train.lr", 0, &i), -EINVAL);
	cr_assert_eq(kv_set(kv, "bad key", "x"), -EINVAL);
	cr_assert_eq(kv_set(kv, "k", "a\nb"), -EINVAL);
	cr_assert_eq(kv_set(kv, "flag", "yes"), 0);
	cr_assert_eq(kv_get_bool(kv, "flag", false, &b), 0);
	cr_assert(b);
	{
		uint64_t u;

		cr_assert_eq(kv_set(kv, "run.seed", "13679457532755275413"), 0);
		cr_assert_eq(kv_get_u64(kv, "run.seed", 0, &u), 0);
		cr_assert_eq(u, 13679457532755275413ULL);
		cr_assert_eq(kv_get_i64(kv, "run.seed", 0, &i), -EINVAL); /* beyond int64 */
		cr_assert_eq(kv_set(kv, "neg", "-1"), 0);
		cr_assert_eq(kv_get_u64(kv, "neg", 0, &u), -EINVAL);
	}
	kv_destroy(&kv);
	cr_assert_null(kv);
	kv_destroy(&kv);
}

Test(kv, save_load_roundtrip)
{
	char path[] = "/tmp/stalenet-kv-XXXXXX";
	char err[256];
	int fd = support_mkstemp(path);
	struct kv *a = kv_new(), *b;

	cr_assert_geq(fd, 0);
	close(fd);
	kv_set(a, "node.name", "worker3");
	kv_setf(a, "run.origin_ns", "%lld", 123456789012345LL);
	cr_assert_eq(kv_save(a, path), 0);
	b = kv_load(path, err, sizeof err);
	cr_assert_not_null(b, "%s", err);
	cr_assert_str_eq(kv_get(b, "node.name"), "worker3");
	cr_assert_str_eq(kv_get(b, "run.origin_ns"), "123456789012345");
	kv_destroy(&a);
	kv_destroy(&b);
	unlink(path);
}

Test(kv, bad_line_names_line)
{
	char path[] = "/tmp/stalenet-kv-XXXXXX";
	char err[256];
	int fd = support_mkstemp(path);
	FILE *f = fdopen(fd, "w");

	fputs("# comment\n\na = 1\nno equals here\n", f);
	fclose(f);
	cr_assert_null(kv_load(path, err, sizeof err));
	cr_assert(strstr(err, ":4: expected") != NULL, "%s", err);
	unlink(path);
	cr_assert_null(kv_load("/nonexistent/x.conf", err, sizeof err));
	cr_assert(strstr(err, "No such file") != NULL, "%s", err);
}

/* kv_parse reads a buffer that need not end in a NUL or a newline, names lines in errors, and
 * refuses a NUL byte. */
Test(kv, parse_buffer)
{
	const char text[] = "# c\r\n a.b = 1 \r\nlist = 128,64\nx = y = z\nlast = end!";
	char err[256];
	struct kv *kv;

	/* the '!' past len must not be read */
	kv = kv_parse(text, sizeof text - 2, "mem.conf", err, sizeof err);
	cr_assert_not_null(kv, "%s", err);
	cr_assert_eq(kv_count(kv), 4);
	cr_assert_str_eq(kv_get(kv, "a.b"), "1");
	cr_assert_str_eq(kv_get(kv, "list"), "128,64");
	cr_assert_str_eq(kv_get(kv, "x"), "y = z");
	cr_assert_str_eq(kv_get(kv, "last"), "end");
	kv_destroy(&kv);
	kv = kv_parse("", 0, "empty.conf", err, sizeof err);
	cr_assert_not_null(kv);
	cr_assert_eq(kv_count(kv), 0);
	kv_destroy(&kv);
	cr_assert_null(kv_parse("a = 1\nb c = 2\n", 14, "mem.conf", err, sizeof err));
	cr_assert(strstr(err, "mem.conf:2: invalid key") != NULL, "%s", err);
	cr_assert_null(kv_parse("a = 1\n= 2\n", 10, "mem.conf", err, sizeof err));
	cr_assert(strstr(err, "mem.conf:2:") != NULL, "%s", err);
	cr_assert_null(kv_parse("a = 1\0\n", 7, "mem.conf", err, sizeof err));
	cr_assert(strstr(err, "NUL") != NULL, "%s", err);
}
