/* lib/log: leveled diagnostics on stderr, one line each: "role[pid] L message".
 *
 * Every program sets its role once (log_init) and logs where a cause is known. Library code
 * logs but never writes stdout: stdout belongs to the commands' own output (plans, tables). */
#ifndef STALENET_LOG_H
#define STALENET_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set the role shown on every line and the most verbose level printed. role is copied.
 * The level can also be raised with STALENET_LOG=debug|info|warn|error in the environment. */
void log_init(const char *role, enum log_level max_level);

/* Redirect lines to fd (default 2). The caller keeps ownership of fd. */
void log_set_fd(int fd);

enum log_level log_get_level(void);

/* Format the line log_msg would write for level into buf (len bytes; newline included, no
 * terminating NUL counted) without writing it, so that a signal handler can write(2) it later.
 * Returns its length, or 0 when the level is not printed (or len cannot hold the prefix). */
int log_format(enum log_level level, char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
