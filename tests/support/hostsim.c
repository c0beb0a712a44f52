/* Several hosts on one machine: see hostsim.h. */
#include "tests/support/hostsim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/netns.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

#define UNDERLAY "198.18.250"

static int failf(char *why, size_t len, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int failf(char *why, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return rc;
}

/* Inode of the network namespace at path, 0 when unreadable. */
static ino_t ns_ino(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

size_t hostsim_host_pids(const struct hostsim *hs, size_t i, pid_t *pids, size_t max)
{
	char path[128];
	snprintf(path, sizeof path, NETNS_RUN_DIR "/%s", hs->host[i].netns);
	ino_t want = ns_ino(path);
	size_t n = 0;
	DIR *d = want ? opendir("/proc") : NULL;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 1 || pid == getpid())
			continue;
		snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
		if (ns_ino(path) == want)
			pids[n++] = (pid_t)pid;
	}
	closedir(d);
	return n;
}

/* In the forked child: the host's namespaces, then sshd in a grandchild (the first process of
 * the new time namespace: only children enter it). Never returns. */
static _Noreturn void host_child(const struct hostsim *hs, const struct hostsim_host *h, int pidfd_w)
{
	char conf[400], log[400], offs[64];
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (netns_join(h->netns) < 0 || unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWTIME) < 0)
		_exit(20);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") < 0 ||
	    mount("tmpfs", "/root", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=1m") < 0 ||
	    mkdir("/run/sshd", 0755) < 0 || sethostname(h->name, strlen(h->name)) < 0)
		_exit(21);
	/* "monotonic SECS NANOSECS" with 0 <= NANOSECS < 1e9, before any process is inside */
	int64_t s = h->mono_offset_ns / 1000000000, ns = h->mono_offset_ns % 1000000000;
	if (ns < 0) {
		s -= 1;
		ns += 1000000000;
	}
	int fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	int l = snprintf(offs, sizeof offs, "monotonic %lld %lld\n", (long long)s, (long long)ns);
	if (fd < 0 || write(fd, offs, (size_t)l) != l)
		_exit(22);
	close(fd);
	pid_t pid = fork();
	if (pid < 0)
		_exit(23);
	if (pid == 0) {
		snprintf(conf, sizeof conf, "%s/sshd_%s.conf", hs->dir, h->name);
		snprintf(log, sizeof log, "%s/sshd_%s.log", hs->dir, h->name);
		int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (lfd < 0 || nfd < 0 || dup2(nfd, 0) < 0 || dup2(lfd, 1) < 0 || dup2(lfd, 2) < 0)
			_exit(24);
		setsid();
		/* sshd dies with the child that waits for it, which dies with the test */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", conf, (char *)NULL);
		_exit(25);
	}
	if (write(pidfd_w, &pid, sizeof pid) != (ssize_t)sizeof pid)
		_exit(26);
	close(pidfd_w);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	_exit(0);
}

struct listen_arg {
	const char *log;
};

static bool listening(void *arg)
{
	const struct listen_arg *a = arg;
	size_t len;
	char *t = support_read_file(a->log, &len);
	bool ok = t && strstr(t, "Server listening on");
	free(t);
	return ok;
}

static int write_configs(struct hostsim *hs, char *why, size_t whylen)
{
	char path[400], hostpub[400];
	if (support_sh("ssh-keygen -q -t ed25519 -N '' -C stalenet-test -f %s/id >/dev/null 2>&1 && "
		       "ssh-keygen -q -t ed25519 -N '' -C stalenet-test -f %s/wrong_id >/dev/null 2>&1 && "
		       "ssh-keygen -q -t ed25519 -N '' -C stalenet-test -f %s/hostkey >/dev/null 2>&1 && "
		       "cp %s/id.pub %s/authorized_keys", hs->dir, hs->dir, hs->dir, hs->dir, hs->dir))
		return failf(why, whylen, -EIO, "ssh-keygen in %s failed", hs->dir);
	snprintf(hs->identity, sizeof hs->identity, "%s/id", hs->dir);
	snprintf(hs->wrong_identity, sizeof hs->wrong_identity, "%s/wrong_id", hs->dir);
	snprintf(hs->known_hosts, sizeof hs->known_hosts, "%s/known_hosts", hs->dir);
	snprintf(hostpub, sizeof hostpub, "%s/hostkey.pub", hs->dir);
	size_t len;
	char *pub = support_read_file(hostpub, &len);
	if (!pub)
		return failf(why, whylen, -EIO, "read %s", hostpub);
	char *nl = strchr(pub, '\n');
	if (nl)
		*nl = 0;
	FILE *kh = fopen(hs->known_hosts, "we");
	for (size_t i = 0; kh && i < hs->n; i++)
		fprintf(kh, "%s %s\n", hs->host[i].address, pub);
	free(pub);
	if (!kh || fclose(kh))
		return failf(why, whylen, -EIO, "write %s", hs->known_hosts);
	for (size_t i = 0; i < hs->n; i++) {
		snprintf(path, sizeof path, "%s/sshd_%s.conf", hs->dir, hs->host[i].name);
		FILE *f = fopen(path, "we");
		if (!f)
			return failf(why, whylen, -errno, "write %s: %s", path, strerror(errno));
		fprintf(f, "ListenAddress %s:22\nHostKey %s/hostkey\nAuthorizedKeysFile %s/authorized_keys\n"
			   "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
			   "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n"
			   "PrintMotd no\nLogLevel INFO\nMaxStartups 64\n",
			hs->host[i].address, hs->dir, hs->dir);
		if (fclose(f))
			return failf(why, whylen, -EIO, "write %s", path);
	}
	return 0;
}

int hostsim_start(struct hostsim *hs, const char *tag, size_t n, const int64_t *offsets_ns, char *why,
		  size_t whylen)
{
	int rc;
	memset(hs, 0, sizeof *hs);
	if (n == 0 || n > HOSTSIM_MAX)
		return failf(why, whylen, -EINVAL, "%s hosts", n ? "too many" : "no");
	if (access("/usr/sbin/sshd", X_OK) || access("/usr/bin/ssh-keygen", X_OK))
		return failf(why, whylen, -ENOENT, "/usr/sbin/sshd or ssh-keygen missing (apt-get install openssh-server)");
	snprintf(hs->prefix, sizeof hs->prefix, "hs%s%d", tag, (int)getpid() % 100000);
	if (!support_tmpdir(hs->dir, sizeof hs->dir, "hostsim"))
		return failf(why, whylen, -EIO, "cannot make a temporary directory");
	hs->n = n;
	snprintf(hs->underlay_ns, sizeof hs->underlay_ns, "%s-ul", hs->prefix);
	snprintf(hs->ctl_ns, sizeof hs->ctl_ns, "%s-ctl", hs->prefix);
	for (size_t i = 0; i < n; i++) {
		struct hostsim_host *h = &hs->host[i];
		snprintf(h->name, sizeof h->name, "h%zu", i);
		snprintf(h->netns, sizeof h->netns, "%s-h%zu", hs->prefix, i);   /* PREFIX-NAME */
		snprintf(h->address, sizeof h->address, UNDERLAY ".%zu", i + 1);
		h->mono_offset_ns = offsets_ns ? offsets_ns[i] : 0;
		h->init_pid = h->sshd_pid = -1;
	}
	if ((rc = write_configs(hs, why, whylen)))
		goto fail;
	if ((rc = netns_add(hs->underlay_ns)) || (rc = netns_add(hs->ctl_ns))) {
		failf(why, whylen, rc, "netns_add %s: %s", hs->underlay_ns, strerror(-rc));
		goto fail;
	}
	if (support_sh("ip -n %s link add br0 type bridge && ip -n %s link set br0 up && "
		       "ip -n %s link set lo up && ip -n %s link add ctl type veth peer name eth0 netns %s && "
		       "ip -n %s link set ctl master br0 up && ip -n %s addr add " UNDERLAY ".254/24 dev eth0 && "
		       "ip -n %s link set eth0 up && ip -n %s link set lo up",
		       hs->underlay_ns, hs->underlay_ns, hs->underlay_ns, hs->underlay_ns, hs->ctl_ns,
		       hs->underlay_ns, hs->ctl_ns, hs->ctl_ns, hs->ctl_ns)) {
		rc = failf(why, whylen, -EIO, "underlay %s: ip failed", hs->underlay_ns);
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		struct hostsim_host *h = &hs->host[i];
		if ((rc = netns_add(h->netns))) {
			failf(why, whylen, rc, "netns_add %s: %s", h->netns, strerror(-rc));
			goto fail;
		}
		if (support_sh("ip -n %s link add %s type veth peer name eth0 netns %s && "
			       "ip -n %s link set %s master br0 up && ip -n %s addr add %s/24 dev eth0 && "
			       "ip -n %s link set eth0 up && ip -n %s link set lo up",
			       hs->underlay_ns, h->name, h->netns, hs->underlay_ns, h->name, h->netns, h->address,
			       h->netns, h->netns)) {
			rc = failf(why, whylen, -EIO, "host %s: ip failed", h->netns);
			goto fail;
		}
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0) {
			rc = failf(why, whylen, -errno, "pipe: %s", strerror(errno));
			goto fail;
		}
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			host_child(hs, h, p[1]);
		}
		close(p[1]);
		if (pid < 0) {
			close(p[0]);
			rc = failf(why, whylen, -errno, "fork: %s", strerror(errno));
			goto fail;
		}
		h->init_pid = pid;
		pid_t sshd = -1;
		ssize_t r = read(p[0], &sshd, sizeof sshd);
		close(p[0]);
		if (r != (ssize_t)sizeof sshd) {
			int st = 0;
			support_wait_pid(pid, &st, 5000);
			h->init_pid = -1;
			snprintf(why, whylen, "host %s: namespaces or sshd did not start (exit %d)", h->name,
				 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
			rc = -EIO;
			goto fail;
		}
		h->sshd_pid = sshd;
	}
	for (size_t i = 0; i < n; i++) {
		char log[400];
		snprintf(log, sizeof log, "%s/sshd_%s.log", hs->dir, hs->host[i].name);
		struct listen_arg a = { log };
		if (!support_wait_until(listening, &a, 10000)) {
			size_t len;
			char *t = support_read_file(log, &len);
			snprintf(why, whylen, "host %s: sshd not listening after 10 s: %.300s", hs->host[i].name,
				 t ? t : "(no log)");
			free(t);
			rc = -ETIMEDOUT;
			goto fail;
		}
	}
	return 0;
fail:
	hostsim_stop(hs);
	return rc;
}

void hostsim_stop(struct hostsim *hs)
{
	for (size_t i = 0; i < hs->n; i++) {
		struct hostsim_host *h = &hs->host[i];
		/* everything in the host: sshd, its connections, agents and what they started */
		for (int round = 0; round < 50; round++) {
			pid_t pids[256];
			size_t k = hostsim_host_pids(hs, i, pids, 256);
			if (!k)
				break;
			for (size_t j = 0; j < k; j++)
				kill(pids[j], SIGKILL);
			if (h->init_pid > 0 && support_wait_pid(h->init_pid, NULL, 100) == 0)
				h->init_pid = -1;
			support_sleep_ms(10);
		}
		if (h->init_pid > 0) {
			support_wait_pid(h->init_pid, NULL, 5000);
			h->init_pid = -1;
		}
		if (h->netns[0])
			netns_delete(h->netns);
	}
	if (hs->ctl_ns[0])
		netns_delete(hs->ctl_ns);
	if (hs->underlay_ns[0])
		netns_delete(hs->underlay_ns);
	if (hs->dir[0])
		support_rm_rf(hs->dir);
	hs->n = 0;
	hs->dir[0] = hs->ctl_ns[0] = hs->underlay_ns[0] = 0;
}

pid_t hostsim_agent_pid(const struct hostsim *hs, size_t i, const char *stalenet)
{
	pid_t pids[256];
	size_t n = hostsim_host_pids(hs, i, pids, 256);

	for (size_t k = 0; k < n; k++) {
		char path[64], cmd[512];
		FILE *f;
		size_t r;

		snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pids[k]);
		f = fopen(path, "re");
		r = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
		if (f)
			fclose(f);
		cmd[r] = 0;
		if (r && !strcmp(cmd, stalenet) && strlen(cmd) + 1 < r && !strcmp(cmd + strlen(cmd) + 1, "agent"))
			return pids[k];
	}
	return 0;
}
