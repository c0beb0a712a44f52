/* orchestrator/agentfile: one whole file carried on the agent's line protocol
 * (orchestrator/agent.h), byte for byte, whatever it holds.
 *
 * A host's run files mostly travel as text rows ("file REL", "l LINE"), appended on the
 * orchestrator's side. That cannot carry a binary file (a node's saved parameters, a SQLite
 * store: NUL bytes, no newlines, any length) nor a file the node rewrote rather than appended
 * to. Those travel whole, as a frame of lines:
 *   "whole REL"       the frame begins: REL's content follows, replacing the copy
 *   "b DATA"          DATA: base64 (RFC 4648, padded) of 1..AGENTFILE_CHUNK bytes
 *   "end SIZE"        the frame ends: SIZE (decimal) bytes were sent in all
 * The receiver trusts none of it: DATA must be canonical base64 of at most AGENTFILE_CHUNK
 * bytes, the running total may not pass its bound, SIZE must be exactly the bytes received,
 * and any other line before "end" means the frame was cut short. A refused frame leaves the
 * receiver's copy as it was (the caller writes a temporary file and renames it only on
 * success: orchestrator/hostfiles). No I/O but the file descriptors handed in. */
#ifndef STALENET_AGENTFILE_H
#define STALENET_AGENTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENTFILE_CHUNK 3000                    /* bytes per "b" line: 4000 base64 characters */
#define AGENTFILE_MAX   (UINT64_C(1) << 30)     /* the largest file carried (1 GiB) */

/* Base64 of src[0..n) into dst (4 * ceil(n / 3) characters and a NUL). Returns the length. */
size_t agentfile_b64_encode(const uint8_t *src, size_t n, char *dst);

/* Canonical base64 src[0..len) into dst (cap bytes). Returns the bytes decoded, or -EPROTO
 * (length not a multiple of 4, a character outside the alphabet, padding other than at the
 * end, non-zero bits under the padding) or -E2BIG (more than cap). Pure. */
int agentfile_b64_decode(const char *src, size_t len, uint8_t *dst, size_t cap);

/* Write the frame of REL to out_fd: the first len bytes of in_fd (read from offset 0 with
 * pread; fewer when the file ends sooner, and "end" says how many were sent). *sent gets
 * that count. Returns 0 or -errno of the I/O (out_fd then holds part of a frame, which the
 * receiver refuses). */
int agentfile_send(int out_fd, const char *rel, int in_fd, uint64_t len, uint64_t *sent);

/* The receiving end of one frame: the bytes go to fd as they arrive. */
struct agentfile_rx {
	int fd;                 /* where the bytes go (the caller's, not closed here) */
	uint64_t got;           /* bytes received so far */
	uint64_t max;           /* the bound: more than this is refused */
};

/* Whether line belongs to a frame once it has begun ("b ..." or "end ..."): any other line
 * while a frame is open means the frame was cut short. */
bool agentfile_frame_line(const char *line);

/* One line of an open frame (agentfile_frame_line true). Returns 1 when more is expected
 * (DATA written to rx->fd), 0 when "end SIZE" closed it with SIZE == rx->got, -EPROTO (bad
 * DATA, bad SIZE, not a frame line), -EFBIG (past rx->max), -EBADMSG (SIZE is not what came)
 * or -errno of the write. After an error the frame is over: the caller discards the copy. */
int agentfile_rx_line(struct agentfile_rx *rx, const char *line);

#endif
