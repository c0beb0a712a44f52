/* A Slurm cluster on hostsim hosts: see slurmsim.h. */
#include "tests/support/slurmsim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/wait.h"

static const char *const programs[] = { "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged",
					"/usr/bin/salloc", "/usr/bin/sbatch", "/usr/bin/srun", "/usr/bin/sinfo",
					"/usr/bin/nsenter", NULL };

const char *slurmsim_missing(void)
{
	static char miss[512];
	size_t pos = 0;
	miss[0] = 0;
	for (const char *const *p = programs; *p; p++)
		if (access(*p, X_OK) && pos < sizeof miss)
			pos += (size_t)snprintf(miss + pos, sizeof miss - pos, "%s%s", pos ? " " : "", *p);
	return miss;
}

static int failf(char *why, size_t len, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int failf(char *why, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return rc;
}

/* The last max bytes of path, as one line (newlines become '|'), into buf. */
static const char *tail_of(const char *path, char *buf, size_t max)
{
	size_t len;
	char *t = support_read_file(path, &len);
	buf[0] = 0;
	if (!t)
		return "(no log)";
	size_t from = len > max - 1 ? len - (max - 1) : 0;
	snprintf(buf, max, "%s", t + from);
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = '|';
	free(t);
	return buf;
}

static int write_conf(struct slurmsim *ss, char *why, size_t whylen)
{
	const struct hostsim *hs = ss->hs;
	char path[400];
	snprintf(ss->conf, sizeof ss->conf, "%s/slurm.conf", hs->dir);
	snprintf(ss->hosts_file, sizeof ss->hosts_file, "%s/etc_hosts", hs->dir);
	snprintf(path, sizeof path, "%s/slurm-state", hs->dir);
	if (mkdir(path, 0700) < 0)
		return failf(why, whylen, -errno, "mkdir %s: %s", path, strerror(errno));
	FILE *f = fopen(ss->conf, "we");
	if (!f)
		return failf(why, whylen, -errno, "write %s: %s", ss->conf, strerror(errno));
	fprintf(f,
		"ClusterName=%s\n"
		"SlurmctldHost=%s(%s)\n"
		"SlurmUser=root\nSlurmdUser=root\n"
		"AuthType=auth/munge\nCredType=cred/munge\n"
		"StateSaveLocation=%s/slurm-state\n"
		"SlurmdSpoolDir=/run/slurmd\n"
		"SlurmctldPidFile=/run/slurmctld.pid\nSlurmdPidFile=/run/slurmd.pid\n"
		"SlurmctldLogFile=%s/slurmctld.log\nSlurmdLogFile=%s/slurmd-%%n.log\n"
		"ProctrackType=proctrack/pgid\nTaskPlugin=task/none\n"
		"SelectType=select/linear\nSwitchType=switch/none\nMpiDefault=none\n"
		"JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
		"JobCompType=jobcomp/none\n"
		"ReturnToService=2\nSlurmdParameters=config_overrides\n"
		"InactiveLimit=0\nMinJobAge=2\nKillWait=5\n",
		hs->prefix, hs->host[0].name, hs->host[0].address, hs->dir, hs->dir, hs->dir);
	for (size_t i = 0; i < hs->n; i++)
		fprintf(f, "NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n", hs->host[i].name, hs->host[i].address,
			ss->cpus);
	fprintf(f, "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
	if (fclose(f))
		return failf(why, whylen, -EIO, "write %s", ss->conf);
	f = fopen(ss->hosts_file, "we");
	if (!f)
		return failf(why, whylen, -errno, "write %s: %s", ss->hosts_file, strerror(errno));
	fprintf(f, "127.0.0.1 localhost\n");
	for (size_t i = 0; i < hs->n; i++)
		fprintf(f, "%s %s\n", hs->host[i].address, hs->host[i].name);
	if (fclose(f))
		return failf(why, whylen, -EIO, "write %s", ss->hosts_file);
	/* munge's key: 1024 random bytes, the same on every host, readable by root only */
	unsigned char key[1024];
	int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof path, "%s/munge.key", hs->dir);
	int kfd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
	bool ok = rfd >= 0 && kfd >= 0 && read(rfd, key, sizeof key) == (ssize_t)sizeof key &&
		  write(kfd, key, sizeof key) == (ssize_t)sizeof key;
	if (rfd >= 0)
		close(rfd);
	if (kfd >= 0 && close(kfd))
		ok = false;
	return ok ? 0 : failf(why, whylen, -EIO, "munge key %s", path);
}

pid_t slurmsim_spawn(const struct slurmsim *ss, size_t i, const char *const *argv, const char *out_path)
{
	char target[32], wd[340];
	const char *av[48];
	size_t a = 0;
	snprintf(target, sizeof target, "%d", (int)ss->hs->host[i].sshd_pid);
	snprintf(wd, sizeof wd, "--wd=%s", ss->hs->dir);
	av[a++] = "/usr/bin/nsenter";
	av[a++] = "-t";
	av[a++] = target;
	av[a++] = "-n";
	av[a++] = "-m";
	av[a++] = "-u";
	av[a++] = "-T";
	av[a++] = wd;
	for (size_t k = 0; argv[k] && a < sizeof av / sizeof av[0] - 1; k++)
		av[a++] = argv[k];
	av[a] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || nfd < 0 || dup2(nfd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(120);
		if (setenv("SLURM_CONF", ss->conf, 1))
			_exit(121);
		execv(av[0], (char *const *)av);
		_exit(122);
	}
	return pid;
}

int slurmsim_run(const struct slurmsim *ss, size_t i, const char *const *argv, const char *out_path, int timeout_ms)
{
	pid_t pid = slurmsim_spawn(ss, i, argv, out_path);
	int st = 0;
	if (pid < 0 || support_wait_pid(pid, &st, timeout_ms))
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct idle_arg {
	const struct slurmsim *ss;
	char out[400];
	int idle;
};

/* Every node idle in sinfo (asked on host 0, each sinfo bounded). */
static bool all_idle(void *arg)
{
	struct idle_arg *a = arg;
	const char *argv[] = { "/usr/bin/sinfo", "-h", "-N", "-o", "%N %t", NULL };
	if (slurmsim_run(a->ss, 0, argv, a->out, 5000) != 0)
		return false;
	size_t len;
	char *t = support_read_file(a->out, &len);
	int n = 0;
	for (char *p = t; p && (p = strstr(p, " idle\n")); p++)
		n++;
	free(t);
	a->idle = n;
	return (size_t)n == a->ss->hs->n;
}

int slurmsim_start(struct slurmsim *ss, const struct hostsim *hs, int cpus, int timeout_ms, char *why,
		   size_t whylen)
{
	memset(ss, 0, sizeof *ss);
	ss->hs = hs;
	ss->cpus = cpus;
	int64_t t0 = support_now_ms();
	const char *miss = slurmsim_missing();
	if (*miss)
		return failf(why, whylen, -ENOENT, "missing %s (apt-get install slurm-wlm munge)", miss);
	int rc = write_conf(ss, why, whylen);
	if (rc)
		return rc;
	for (size_t i = 0; i < hs->n; i++) {
		const struct hostsim_host *h = &hs->host[i];
		char ctld[400] = "";
		if (i == 0)
			snprintf(ctld, sizeof ctld, "/usr/sbin/slurmctld -f %s && ", ss->conf);
		/* inside the host: its own /etc/hosts, munged on its own /run, then the Slurm daemons
		 * (each forks into the background and stays in the host's namespaces) */
		if (support_sh("nsenter -t %d -n -m -u -T sh -c '"
			       "mount --bind %s /etc/hosts && mkdir -p /run/munge /run/slurmd && "
			       "/usr/sbin/munged --force -S /run/munge/munge.socket.2 --key-file=%s/munge.key "
			       "--pid-file=/run/munge/munged.pid --log-file=%s/munged-%s.log "
			       "--seed-file=/run/munge/munged.seed && "
			       "%s/usr/sbin/slurmd -f %s' >>%s/daemons.log 2>&1",
			       (int)h->sshd_pid, ss->hosts_file, hs->dir, hs->dir, h->name, ctld, ss->conf, hs->dir)) {
			char t[300], p[400];
			snprintf(p, sizeof p, "%s/daemons.log", hs->dir);
			snprintf(why, whylen, "host %s: munged or slurm daemons did not start: %s", h->name,
				 tail_of(p, t, sizeof t));
			return -EIO;
		}
	}
	struct idle_arg a = { .ss = ss };
	snprintf(a.out, sizeof a.out, "%s/sinfo.out", hs->dir);
	if (!support_wait_until(all_idle, &a, timeout_ms)) {
		char t1[200], t2[300], p[400];
		snprintf(p, sizeof p, "%s/slurmd-%s.log", hs->dir, hs->host[hs->n - 1].name);
		tail_of(p, t2, sizeof t2);
		return failf(why, whylen, -ETIMEDOUT, "%d of %zu nodes idle after %d ms (sinfo: %s; slurmd: %s)", a.idle,
			     hs->n, timeout_ms, tail_of(a.out, t1, sizeof t1), t2);
	}
	ss->start_ms = (int)(support_now_ms() - t0);
	return 0;
}
