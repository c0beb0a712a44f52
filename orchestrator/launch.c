/* orchestrator/launch: see launch.h. */
#include "orchestrator/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/netns.h"

uint64_t launch_proc_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name may contain spaces and parentheses: skip to the last ')'. Field 3
	 * (state) follows; start time is field 22. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &st) != 1)
		return 0;
	return st;
}

static void child_fail(int fd, const char *what)
{
	int e = errno;

	dprintf(2, "launch: %s: %s\n", what, strerror(e));
	if (fd >= 0 && write(fd, &e, sizeof e) < 0)
		_exit(127);
	_exit(127);
}

/* Wait (50 ms slices) until errp_rd is readable: the child exec'd or failed. False when it did
 * not within LAUNCH_EXEC_WAIT_MS or the caller's interruption count reached its mark: the child
 * is then killed and reaped. */
static bool exec_awaited(const struct launch_spec *spec, pid_t pid, int errp_rd)
{
	struct pollfd pfd = { .fd = errp_rd, .events = POLLIN };
	int at = spec->interrupt_at > 0 ? spec->interrupt_at : 1;

	for (int waited = 0; waited < LAUNCH_EXEC_WAIT_MS; waited += 50) {
		if (spec->interrupted && *spec->interrupted >= at)
			break;
		if (poll(&pfd, 1, 50) > 0)
			return true;
	}
	if (!(spec->interrupted && *spec->interrupted >= at))
		log_error("launch %s: no exec within %d ms (stopped?): killed", spec->name, LAUNCH_EXEC_WAIT_MS);
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return false;
}

pid_t launch_spawn(const struct launch_spec *spec)
{
	int go[2] = { -1, -1 }, errp[2] = { -1, -1 };
	pid_t ppid = getpid(), pid;
	int child_errno = 0;
	ssize_t n;
	char c = 1;

	/* go is a socket pair, not a pipe: releasing a child that already failed must not raise
	 * SIGPIPE in the orchestrator (send with MSG_NOSIGNAL). */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		int e = errno;
		log_error("launch %s: pipe: %s", spec->name, strerror(e));
		if (go[0] >= 0) {
			close(go[0]);
			close(go[1]);
		}
		return -e;
	}
	pid = fork();
	if (pid < 0) {
		int e = errno;
		log_error("launch %s: fork: %s", spec->name, strerror(e));
		close(go[0]), close(go[1]), close(errp[0]), close(errp[1]);
		return -e;
	}
	if (pid == 0) {
		/* Child: only async-signal-safe work until exec. */
		close(go[1]);
		close(errp[0]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != ppid)
			_exit(127);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		setpgid(0, 0); /* a terminal's Ctrl-C goes to the orchestrator alone */
		if (spec->netns && netns_join(spec->netns) < 0)
			child_fail(errp[1], spec->netns);
		if (spec->log_path) {
			int lfd = open(spec->log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (lfd < 0)
				child_fail(errp[1], spec->log_path);
			if (dup2(lfd, 1) < 0 || dup2(lfd, 2) < 0)
				child_fail(errp[1], "dup2");
			close(lfd);
		}
		{
			int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (nfd >= 0) {
				dup2(nfd, 0);
				close(nfd);
			}
		}
		if (spec->cwd && chdir(spec->cwd) < 0)
			child_fail(errp[1], spec->cwd);
		/* Wait until the parent has recorded us. EOF without a byte means: give up. */
		while ((n = read(go[0], &c, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			_exit(127);
		execv(spec->argv[0], (char *const *)spec->argv);
		child_fail(errp[1], spec->argv[0]);
	}
	close(go[0]);
	close(errp[1]);
	if (spec->record) {
		uint64_t st = 0;

		/* /proc/PID/stat exists from fork on; the start time never changes afterwards. */
		for (int i = 0; i < 100 && !(st = launch_proc_start_time(pid)); i++)
			usleep(1000);
		if (spec->record(spec->record_arg, pid, st, spec->name) != 0) {
			close(go[1]);
			close(errp[0]);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return -EIO;
		}
	}
	if (spec->place && spec->place(spec->record_arg, pid, spec->name) != 0) {
		close(go[1]);
		close(errp[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -EIO;
	}
	if (send(go[1], &c, 1, MSG_NOSIGNAL) != 1 && errno != EPIPE)
		log_warn("launch %s: could not release the child: %s", spec->name, strerror(errno));
	close(go[1]);
	/* exec closes errp[1] (CLOEXEC): EOF means success; an int means the errno of a failure.
	 * Awaited boundedly: a child stopped before its exec would hold the caller for good. */
	if (!exec_awaited(spec, pid, errp[0])) {
		close(errp[0]);
		return spec->interrupted && *spec->interrupted >= (spec->interrupt_at > 0 ? spec->interrupt_at : 1)
			       ? -ECANCELED
			       : -ETIMEDOUT;
	}
	while ((n = read(errp[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR)
		;
	close(errp[0]);
	if (n == (ssize_t)sizeof child_errno) {
		log_error("launch %s: %s", spec->name, strerror(child_errno));
		waitpid(pid, NULL, 0);
		return -child_errno;
	}
	return pid;
}

int launch_reap(void (*on_exit)(void *arg, pid_t pid, int status), void *arg)
{
	int count = 0, status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		count++;
		if (on_exit)
			on_exit(arg, pid, status);
	}
	return count;
}

void launch_log_tail(const char *path, int n, char *buf, size_t buflen)
{
	char chunk[8192];
	ssize_t len;
	int fd, lines = 0;
	off_t size;
	char *p;

	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)sizeof chunk - 1)
		lseek(fd, size - (off_t)sizeof chunk + 1, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	len = read(fd, chunk, sizeof chunk - 1);
	close(fd);
	if (len <= 0)
		return;
	chunk[len] = '\0';
	if (len > 0 && chunk[len - 1] == '\n')
		chunk[--len] = '\0';
	for (p = chunk + len; p > chunk; p--) {
		if (p[-1] == '\n' && ++lines == n)
			break;
	}
	snprintf(buf, buflen, "%s", p);
}
