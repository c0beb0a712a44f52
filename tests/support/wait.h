/* Bounded waits for tests. A test never sleeps a guessed time for something to happen: it
 * polls the condition up to a deadline (support_wait_until) or waits for a readiness signal
 * (a pipe, a file, a bound port), so it is as fast as the machine allows and still ends,
 * with a failure, when the thing never happens. Plain C, no Criterion: usable in children. */
#ifndef STALENET_TESTS_SUPPORT_WAIT_H
#define STALENET_TESTS_SUPPORT_WAIT_H

#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t support_now_ms(void);

/* Sleep ms milliseconds, resuming after signals. For pacing and polling only. */
void support_sleep_ms(int ms);

/* Call cond(arg) until it returns true or timeout_ms have passed: 1 ms between calls at
 * first, doubling up to 64 ms, and a last call at the deadline. True when cond held. */
bool support_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms);

/* Wait up to timeout_ms for path to exist. True when it does. */
bool support_wait_file(const char *path, int timeout_ms);

/* True when a socket of this network namespace is bound to 127.0.0.1, 0.0.0.0 or [::] on
 * port (type SOCK_DGRAM: any UDP socket; SOCK_STREAM: a listening TCP socket), read from
 * /proc/net. The readiness signal of a server started in a child. */
bool support_port_bound(int type, int port);

/* Wait up to timeout_ms for support_port_bound(type, port). True when bound. */
bool support_wait_port(int type, int port, int timeout_ms);

#endif
