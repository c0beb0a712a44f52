/* lib/fdio: a write larger than a pipe holds goes out whole while a reader drains the other
 * end (short writes resumed, bytes in order), and a write to a pipe whose reader is gone says
 * -EPIPE with the count of what went out before. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fdio.h"

#define BIG (1u << 20)  /* 16 times a default pipe */

struct drain {
	int fd;
	unsigned char *got;
	size_t n;
};

static void *drain_run(void *arg)
{
	struct drain *d = arg;
	for (;;) {
		ssize_t r = read(d->fd, d->got + d->n, BIG + 1 - d->n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return NULL;
		d->n += (size_t)r;
	}
}

Test(fdio, whole_buffer_through_a_small_pipe, .timeout = 30)
{
	int p[2];
	unsigned char *buf = malloc(BIG);
	struct drain d = { .got = malloc(BIG + 1) };
	pthread_t t;
	size_t done = 0;

	cr_assert(buf && d.got);
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 24);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	d.fd = p[0];
	cr_assert_eq(pthread_create(&t, NULL, drain_run, &d), 0);
	cr_expect_eq(fdio_write_all(p[1], buf, BIG, &done), 0);
	cr_expect_eq(done, BIG);
	close(p[1]);
	pthread_join(t, NULL);
	close(p[0]);
	cr_expect_eq(d.n, BIG, "the reader got %zu bytes", d.n);
	cr_expect_eq(memcmp(d.got, buf, BIG), 0, "the bytes in order");
	free(buf);
	free(d.got);
}

Test(fdio, reader_gone_is_epipe_with_the_count)
{
	int p[2];
	char byte = 'x';
	size_t done = 99;

	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	cr_expect_eq(fdio_write_all(p[1], &byte, 1, &done), -EPIPE);
	cr_expect_eq(done, 0);
	cr_expect_eq(fdio_write_all(p[1], &byte, 0, NULL), 0, "nothing to write is no write");
	close(p[1]);
}
