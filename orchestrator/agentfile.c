/* orchestrator/agentfile: see agentfile.h. Base64 rather than a raw length-prefixed blob: the
 * channel stays a sequence of short printable lines (what agentlink reads, what a terminal or
 * srun's pipes pass untouched), at a third more bytes. Decoding is strict (canonical only), so
 * one content has exactly one encoding and a line that is not one is refused, not guessed at. */
#include "orchestrator/agentfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/fdio.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t agentfile_b64_encode(const uint8_t *src, size_t n, char *dst)
{
	size_t o = 0, i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
		dst[o++] = B64[v >> 18];
		dst[o++] = B64[(v >> 12) & 63];
		dst[o++] = B64[(v >> 6) & 63];
		dst[o++] = B64[v & 63];
	}
	if (n - i) {
		uint32_t v = (uint32_t)src[i] << 16 | (n - i == 2 ? (uint32_t)src[i + 1] << 8 : 0);
		dst[o++] = B64[v >> 18];
		dst[o++] = B64[(v >> 12) & 63];
		dst[o++] = n - i == 2 ? B64[(v >> 6) & 63] : '=';
		dst[o++] = '=';
	}
	dst[o] = 0;
	return o;
}

static int b64_value(char c)
{
	const char *p = c ? strchr(B64, c) : NULL;
	return p ? (int)(p - B64) : -1;
}

int agentfile_b64_decode(const char *src, size_t len, uint8_t *dst, size_t cap)
{
	size_t o = 0;
	if (len % 4)
		return -EPROTO;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad = last ? (src[i + 3] == '=') + (src[i + 2] == '=' && src[i + 3] == '=') : 0;
		int v[4];
		for (int k = 0; k < 4 - pad; k++)
			if ((v[k] = b64_value(src[i + k])) < 0)
				return -EPROTO;
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (pad < 2 ? (uint32_t)v[2] << 6 : 0) |
			     (pad < 1 ? (uint32_t)v[3] : 0);
		/* canonical: the bits the padding hides are zero (else two texts decode alike) */
		if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
			return -EPROTO;
		size_t out = (size_t)(3 - pad);
		if (o + out > cap)
			return -E2BIG;
		dst[o++] = (uint8_t)(w >> 16);
		if (out > 1)
			dst[o++] = (uint8_t)(w >> 8);
		if (out > 2)
			dst[o++] = (uint8_t)w;
	}
	return (int)o;
}

int agentfile_send(int out_fd, const char *rel, int in_fd, uint64_t len, uint64_t *sent)
{
	uint8_t buf[AGENTFILE_CHUNK];
	char line[2 + 4 * (AGENTFILE_CHUNK / 3) + 2];
	uint64_t off = 0;
	int rc, n = snprintf(line, sizeof line, "whole %s\n", rel);

	*sent = 0;
	if (n < 0 || (size_t)n >= sizeof line)
		return -ENAMETOOLONG;
	if ((rc = fdio_write_all(out_fd, line, (size_t)n, NULL)))
		return rc;
	while (off < len) {
		size_t want = len - off < sizeof buf ? (size_t)(len - off) : sizeof buf;
		ssize_t r = pread(in_fd, buf, want, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;          /* the file ended sooner (shrunk meanwhile): "end" says so */
		line[0] = 'b';
		line[1] = ' ';
		size_t l = 2 + agentfile_b64_encode(buf, (size_t)r, line + 2);
		line[l++] = '\n';
		if ((rc = fdio_write_all(out_fd, line, l, NULL)))
			return rc;
		off += (uint64_t)r;
	}
	n = snprintf(line, sizeof line, "end %" PRIu64 "\n", off);
	if ((rc = fdio_write_all(out_fd, line, (size_t)n, NULL)))
		return rc;
	*sent = off;
	return 0;
}

bool agentfile_frame_line(const char *line)
{
	return !strncmp(line, "b ", 2) || !strncmp(line, "end ", 4);
}

int agentfile_rx_line(struct agentfile_rx *rx, const char *line)
{
	uint8_t buf[AGENTFILE_CHUNK];
	if (!strncmp(line, "b ", 2)) {
		size_t len = strlen(line + 2);
		int n = len ? agentfile_b64_decode(line + 2, len, buf, sizeof buf) : -EPROTO;
		if (n == -E2BIG || n == 0)
			return -EPROTO;         /* a chunk is 1..AGENTFILE_CHUNK bytes */
		if (n < 0)
			return n;
		if ((uint64_t)n > rx->max - rx->got)
			return -EFBIG;
		int rc = fdio_write_all(rx->fd, (const char *)buf, (size_t)n, NULL);
		if (rc)
			return rc;
		rx->got += (uint64_t)n;
		return 1;
	}
	if (strncmp(line, "end ", 4))
		return -EPROTO;
	/* SIZE: plain decimal digits, no sign, no leading zero (but "0"), no more than 20 */
	const char *s = line + 4;
	size_t digits = strspn(s, "0123456789");
	if (!digits || s[digits] || digits > 20 || (digits > 1 && s[0] == '0'))
		return -EPROTO;
	uint64_t size = 0;
	for (size_t i = 0; i < digits; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (size > (UINT64_MAX - d) / 10)
			return -EPROTO;
		size = size * 10 + d;
	}
	return size == rx->got ? 0 : -EBADMSG;
}
