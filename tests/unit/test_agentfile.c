/* Unit tests for orchestrator/agentfile: base64 against RFC 4648's vectors and a round trip of
 * every length around the chunk size; a whole file through the sender and the receiver arrives
 * byte for byte; a frame cut short, with a lying length, a malformed or oversized line, or
 * past the bound is refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "orchestrator/agentfile.h"
#include "tests/support/files.h"

Test(agentfile, base64_rfc4648_vectors)
{
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const coded[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
	char out[16];
	uint8_t back[16];
	for (size_t i = 0; i < 7; i++) {
		size_t n = agentfile_b64_encode((const uint8_t *)plain[i], strlen(plain[i]), out);
		cr_expect_str_eq(out, coded[i]);
		cr_expect_eq(n, strlen(coded[i]));
		int r = agentfile_b64_decode(coded[i], strlen(coded[i]), back, sizeof back);
		cr_assert_eq(r, (int)strlen(plain[i]), "%s", coded[i]);
		cr_expect_arr_eq(back, plain[i], (size_t)r);
	}
}

Test(agentfile, base64_only_canonical_text_decodes)
{
	static const char *const bad[] = { "Zg=", "Zg", "Z===", "====", "Zh==", "Zm9=", "Zg==Zg==", "Zm9v=g==",
					   "Zm 9", "Zm9v\n", "Zm-_", "Zm9\x80", "=Zm9" };
	uint8_t out[16];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(agentfile_b64_decode(bad[i], strlen(bad[i]), out, sizeof out), -EPROTO, "'%s'", bad[i]);
	cr_expect_eq(agentfile_b64_decode("Zm9vYmFy", 8, out, 5), -E2BIG);
}

Test(agentfile, base64_round_trip_of_every_length)
{
	static uint8_t in[AGENTFILE_CHUNK + 8], back[AGENTFILE_CHUNK + 8];
	static char text[4 * (AGENTFILE_CHUNK + 8) / 3 + 8];
	cr_assert_eq(getrandom(in, sizeof in, 0), (ssize_t)sizeof in);
	for (size_t n = 0; n <= sizeof in; n += n < 16 ? 1 : 997) {
		size_t l = agentfile_b64_encode(in, n, text);
		cr_assert_eq(l, 4 * ((n + 2) / 3));
		cr_assert_eq(agentfile_b64_decode(text, l, back, sizeof back), (int)n);
		cr_assert_arr_eq(back, in, n, "length %zu", n);
	}
}

/* The frame of rel (content len bytes of random data) written by the sender into a file and
 * read back as lines: lines[] point into *buf (the caller frees it). Returns how many. */
static size_t frame_of(const uint8_t *data, size_t len, char **buf, char **lines, size_t max_lines)
{
	char in_path[] = "/tmp/agentfile-in-XXXXXX", out_path[] = "/tmp/agentfile-out-XXXXXX";
	int in = support_mkstemp(in_path), out = support_mkstemp(out_path);
	uint64_t sent = 0;
	cr_assert(in >= 0 && out >= 0);
	unlink(in_path);
	unlink(out_path);
	cr_assert_eq(write(in, data, len), (ssize_t)len);
	cr_assert_eq(agentfile_send(out, "nodes/w0.params", in, len, &sent), 0);
	cr_assert_eq(sent, len);
	off_t size = lseek(out, 0, SEEK_END);
	*buf = malloc((size_t)size + 1);
	cr_assert_eq(pread(out, *buf, (size_t)size, 0), size);
	(*buf)[size] = 0;
	close(in);
	close(out);
	size_t n = 0;
	for (char *save = NULL, *l = strtok_r(*buf, "\n", &save); l && n < max_lines; l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	return n;
}

/* Feed lines[1..n) (after the "whole" line) to a receiver writing to a temporary file; the
 * last return code out, the bytes received into got (len of them at most). */
static int receive(char **lines, size_t n, uint64_t max, uint8_t *got, size_t len, uint64_t *count)
{
	char path[] = "/tmp/agentfile-rx-XXXXXX";
	int fd = support_mkstemp(path), rc = 1;
	cr_assert_geq(fd, 0);
	unlink(path);
	struct agentfile_rx rx = { .fd = fd, .max = max };
	for (size_t i = 1; i < n && rc == 1; i++) {
		cr_assert(agentfile_frame_line(lines[i]), "'%.20s' is no frame line", lines[i]);
		rc = agentfile_rx_line(&rx, lines[i]);
	}
	*count = rx.got;
	ssize_t r = pread(fd, got, len, 0);
	cr_assert_eq((uint64_t)(r < 0 ? 0 : r), rx.got < len ? rx.got : len);
	close(fd);
	return rc;
}

Test(agentfile, a_random_file_arrives_byte_for_byte)
{
	static const size_t sizes[] = { 0, 1, 2, 3, AGENTFILE_CHUNK - 1, AGENTFILE_CHUNK, AGENTFILE_CHUNK + 1, 100003 };
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		size_t len = sizes[s];
		uint8_t *data = malloc(len + 1), *got = malloc(len + 1);
		char *buf, *lines[64];
		uint64_t count = 0;
		cr_assert_eq(getrandom(data, len + 1, 0), (ssize_t)(len + 1));
		size_t n = frame_of(data, len, &buf, lines, 64);
		cr_assert_str_eq(lines[0], "whole nodes/w0.params");
		cr_expect_eq(n, 2 + (len + AGENTFILE_CHUNK - 1) / AGENTFILE_CHUNK, "one line per chunk");
		for (size_t i = 1; i + 1 < n; i++)
			cr_expect_leq(strlen(lines[i]), 2 + 4 * AGENTFILE_CHUNK / 3, "a line fits the protocol's");
		cr_expect_eq(receive(lines, n, AGENTFILE_MAX, got, len, &count), 0, "size %zu", len);
		cr_expect_eq(count, len);
		cr_expect_arr_eq(got, data, len, "size %zu: the bytes differ", len);
		free(buf);
		free(data);
		free(got);
	}
}

Test(agentfile, a_file_that_ends_sooner_says_so)
{
	char in_path[] = "/tmp/agentfile-in-XXXXXX", out_path[] = "/tmp/agentfile-out-XXXXXX";
	int in = support_mkstemp(in_path), out = support_mkstemp(out_path);
	uint64_t sent = 99;
	char text[256];
	cr_assert(in >= 0 && out >= 0);
	unlink(in_path);
	unlink(out_path);
	cr_assert_eq(write(in, "abc", 3), 3);
	/* asked for 10 bytes (the size when it was looked at), 3 there now */
	cr_assert_eq(agentfile_send(out, "nodes/w0.x", in, 10, &sent), 0);
	cr_expect_eq(sent, 3);
	ssize_t r = pread(out, text, sizeof text - 1, 0);
	cr_assert_gt(r, 0);
	text[r] = 0;
	cr_expect_str_eq(text, "whole nodes/w0.x\nb YWJj\nend 3\n");
	close(in);
	close(out);
}

Test(agentfile, a_frame_cut_short_or_lying_is_refused)
{
	static uint8_t data[3 * AGENTFILE_CHUNK + 7], got[sizeof data];
	char *buf, *lines[16], lie[32];
	uint64_t count;
	cr_assert_eq(getrandom(data, sizeof data, 0), (ssize_t)sizeof data);
	size_t n = frame_of(data, sizeof data, &buf, lines, 16);
	cr_assert_eq(n, 6);
	/* a chunk left out: "end" names more than came */
	char *cut[] = { lines[0], lines[1], lines[2], lines[4], lines[5] };
	cr_expect_eq(receive(cut, 5, AGENTFILE_MAX, got, sizeof got, &count), -EBADMSG);
	/* lying lengths, either way */
	snprintf(lie, sizeof lie, "end %zu", sizeof data - 1);
	char *shorter[] = { lines[0], lines[1], lines[2], lines[3], lines[4], lie };
	cr_expect_eq(receive(shorter, 6, AGENTFILE_MAX, got, sizeof got, &count), -EBADMSG);
	snprintf(lie, sizeof lie, "end %zu", sizeof data + 1);
	cr_expect_eq(receive(shorter, 6, AGENTFILE_MAX, got, sizeof got, &count), -EBADMSG);
	/* past the bound: refused at the chunk that passes it, before "end" */
	cr_expect_eq(receive(lines, n, sizeof data - 1, got, sizeof got, &count), -EFBIG);
	cr_expect_eq(count, 3 * AGENTFILE_CHUNK, "the chunk past the bound not written");
	free(buf);
	/* a frame that never ends is not complete: the caller sees another line (not a frame
	 * line) and drops it */
	cr_expect(!agentfile_frame_line("file nodes/w0.csv"));
	cr_expect(!agentfile_frame_line("fetched"));
	cr_expect(!agentfile_frame_line("ev w0 exit 0"));
	cr_expect(!agentfile_frame_line("whole nodes/w0.params"));
	cr_expect(!agentfile_frame_line("bYWJj"));
}

Test(agentfile, malformed_lines_are_refused)
{
	static char big[2 + 4 * (AGENTFILE_CHUNK / 3 + 1) + 1];
	static uint8_t raw[AGENTFILE_CHUNK + 3];
	static const char *const bad[] = { "b ", "b YWJ", "b YW=j", "b YWJj ", "b  YWJj", "end", "end ", "end -1",
					   "end +0", "end 00", "end 0x0", "end 1 ", "end 99999999999999999999",
					   "end 18446744073709551616", "endx 0", "x" };
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct agentfile_rx rx = { .fd = fd, .max = AGENTFILE_MAX };
		int r = agentfile_rx_line(&rx, bad[i]);
		cr_expect(r == -EPROTO, "'%s': %d", bad[i], r);
	}
	/* a chunk of more than AGENTFILE_CHUNK bytes, even well encoded */
	memset(raw, 7, sizeof raw);
	big[0] = 'b';
	big[1] = ' ';
	agentfile_b64_encode(raw, sizeof raw, big + 2);
	struct agentfile_rx rx = { .fd = fd, .max = AGENTFILE_MAX };
	cr_expect_eq(agentfile_rx_line(&rx, big), -EPROTO);
	cr_expect_eq(rx.got, 0);
	/* "end 0" closes an empty file */
	cr_expect_eq(agentfile_rx_line(&rx, "end 0"), 0);
	close(fd);
}
