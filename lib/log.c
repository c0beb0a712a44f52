/* lib/log: see log.h. A line is formatted into one buffer and written with a single write(2),
 * so lines from the many node processes sharing a log file never interleave mid-line. */
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "lib/fdio.h"

static char log_role[32] = "stalenet";
static enum log_level log_max = LOG_INFO;
static int log_fd = 2;

void log_init(const char *role, enum log_level max_level)
{
	const char *env = getenv("STALENET_LOG");

	snprintf(log_role, sizeof log_role, "%s", role ? role : "stalenet");
	log_max = max_level;
	if (env) {
		if (!strcasecmp(env, "debug"))
			log_max = LOG_DEBUG;
		else if (!strcasecmp(env, "info"))
			log_max = LOG_INFO;
		else if (!strcasecmp(env, "warn"))
			log_max = LOG_WARN;
		else if (!strcasecmp(env, "error"))
			log_max = LOG_ERROR;
	}
}

void log_set_fd(int fd)
{
	log_fd = fd;
}

enum log_level log_get_level(void)
{
	return log_max;
}

/* The line into buf: "role[pid] L message\n". Returns its length (at most len). */
static int format_line(enum log_level level, char *buf, size_t len, const char *fmt, va_list ap)
{
	static const char letters[] = "EWID";
	int n = snprintf(buf, len, "%s[%ld] %c ", log_role, (long)getpid(), letters[level]);

	if (n < 0 || (size_t)n >= len)
		return 0;
	n += vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	if (n > (int)len - 2)
		n = (int)len - 2;
	buf[n++] = '\n';
	return n;
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	int saved = errno;
	int n;

	if (level > log_max)
		return;
	n = format_line(level, line, sizeof line, fmt, ap);
	if (n > 0)
		fdio_write_all(log_fd, line, (size_t)n, NULL);     /* nowhere to report a failed log write */
	errno = saved;
}

int log_format(enum log_level level, char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (level > log_max || len < 2)
		return 0;
	va_start(ap, fmt);
	n = format_line(level, buf, len, fmt, ap);
	va_end(ap);
	return n;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
