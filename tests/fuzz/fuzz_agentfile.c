/* libFuzzer target: the lines of a whole file a host's agent sends (orchestrator/agentfile),
 * read from raw bytes, one line per newline, fed to a receiver as the orchestrator does once
 * a "whole" line opened a frame. The other host is not trusted: must never crash, hang or
 * leak, never take more than the bound, and a frame it accepts holds exactly the bytes its
 * lines carried: sent again from what was written, it is the same lines and the same bytes.
 * Every "b" line's text that decodes is canonical: encoded again it is the same text. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "orchestrator/agentfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BYTES (64 * 1024)   /* the bound in this harness: small, so passing it is reached */

static uint8_t chunk[AGENTFILE_CHUNK];
static char text[4 * (AGENTFILE_CHUNK / 3 + 1) + 8];

/* The whole of fd from offset 0 into buf (cap bytes). Returns the length. */
static size_t slurp(int fd, uint8_t *buf, size_t cap)
{
	ssize_t r = pread(fd, buf, cap, 0);
	if (r < 0)
		abort();
	return (size_t)r;
}

/* The bytes of an accepted frame sent again and received again: the same bytes. */
static void resend(int fd, const uint8_t *bytes, size_t n)
{
	int in = memfd_create("fz-in", MFD_CLOEXEC), out = memfd_create("fz-out", MFD_CLOEXEC);
	int rx_fd = memfd_create("fz-rx", MFD_CLOEXEC);
	uint64_t sent = 0;
	if (in < 0 || out < 0 || rx_fd < 0)
		abort();
	if (n && write(in, bytes, n) != (ssize_t)n)
		abort();
	if (agentfile_send(out, "nodes/w0.params", in, n, &sent) || sent != n)
		abort();
	off_t len = lseek(out, 0, SEEK_END);
	char *frame = malloc((size_t)len + 1);
	if (!frame || pread(out, frame, (size_t)len, 0) != len)
		abort();
	frame[len] = 0;
	struct agentfile_rx rx = { .fd = rx_fd, .max = MAX_BYTES };
	int rc = 1;
	char *save = NULL, *l = strtok_r(frame, "\n", &save);
	if (!l || strcmp(l, "whole nodes/w0.params"))
		abort();
	while (rc == 1 && (l = strtok_r(NULL, "\n", &save)))
		rc = agentfile_rx_line(&rx, l);
	if (rc != 0 || rx.got != n)
		abort();
	uint8_t *back = malloc(n + 1);
	if (!back || slurp(rx_fd, back, n + 1) != n || memcmp(back, bytes, n))
		abort();
	free(back);
	free(frame);
	close(in);
	close(out);
	close(rx_fd);
	(void)fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	int fd = memfd_create("fz", MFD_CLOEXEC);
	if (!buf || fd < 0)
		abort();
	memcpy(buf, data, size);
	buf[size] = 0;
	struct agentfile_rx rx = { .fd = fd, .max = MAX_BYTES };
	int rc = 1;
	char *save = NULL;
	for (char *l = strtok_r(buf, "\n", &save); l && rc == 1; l = strtok_r(NULL, "\n", &save)) {
		if (!agentfile_frame_line(l))
			break;          /* the orchestrator: the frame was cut short */
		if (!strncmp(l, "b ", 2)) {
			int n = agentfile_b64_decode(l + 2, strlen(l + 2), chunk, sizeof chunk);
			if (n > 0) {
				agentfile_b64_encode(chunk, (size_t)n, text);
				if (strcmp(text, l + 2))
					abort();        /* two texts for one content */
			}
		}
		uint64_t before = rx.got;
		rc = agentfile_rx_line(&rx, l);
		if (rx.got > rx.max || rx.got - before > AGENTFILE_CHUNK || (rc != 1 && rx.got != before && rc != 0))
			abort();
	}
	if (rc == 0) {
		static uint8_t got[MAX_BYTES + 1];
		size_t n = slurp(fd, got, sizeof got);
		if (n != rx.got)
			abort();
		resend(fd, got, n);
	}
	close(fd);
	free(buf);
	return 0;
}
