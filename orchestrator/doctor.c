/* orchestrator/doctor: see doctor.h. */
#include "orchestrator/doctor.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/timerlat.h"
#include "netem/link_shaper.h"
#include "orchestrator/cgroup.h"
#include "node/data.h"

#define DOCTOR_DATA_DIR "/usr/share/datasets/fashion-mnist"

static int read_first_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Can we create a network namespace? Tried in a child so this process is untouched. */
static int netns_works(void)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
	if (waitpid(pid, &st, 0) != pid)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

int doctor_report(FILE *out, const char *data_dir)
{
	char buf[2048], img[1024], lbl[1024];
	int failed = 0, backends;
	bool root = geteuid() == 0;

	fprintf(out, "%-5s root: %s\n", root ? "ok" : "fail",
		root ? "running as root" : "not root: 'stalenet run' needs root (sudo)");
	failed += !root;
	if (netns_works() == 0) {
		fprintf(out, "ok    network namespaces: can create one\n");
	} else {
		fprintf(out, "fail  network namespaces: cannot create one (root? CONFIG_NET_NS?)\n");
		failed++;
	}
	if (root) {
		char *line, *save = NULL;

		backends = link_shaper_doctor(buf, sizeof buf);
		for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			fprintf(out, "%-5s %s\n", strstr(line, ": available") ? "ok" : "warn", line);
		if (backends == 0) {
			fprintf(out, "fail  link emulation: no backend available\n");
			failed++;
		}
	} else {
		fprintf(out, "warn  link emulation: backends are probed only as root\n");
	}
	if (!data_dir)
		data_dir = DOCTOR_DATA_DIR;
	data_paths(data_dir, DATA_TRAIN, img, lbl, sizeof img);
	if (access(img, R_OK) == 0 && access(lbl, R_OK) == 0) {
		fprintf(out, "ok    data set: %s\n", data_dir);
	} else {
		fprintf(out, "fail  data set: %s missing (apt-get install dataset-fashion-mnist, or set data.path)\n",
			img);
		failed++;
	}
	{
		const char *env = getenv("OPENBLAS_NUM_THREADS");
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		fprintf(out, "ok    BLAS: OpenBLAS, %ld CPU(s); nodes use train.blas_threads (default 1)%s%s\n", cpus,
			env ? "; OPENBLAS_NUM_THREADS=" : "", env ? env : "");
	}
	{
		struct cgroup_info ci;

		if (cgroup_detect(NULL, &ci) == 0 && ci.hierarchy != CGROUP_NONE)
			fprintf(out, "%-5s cgroups: %s hierarchy (%s), controllers:%s%s%s%s; swap %s (scenario "
				"resources: cpu needs cpu, cpus cpuset, memory memory)\n",
				(ci.controllers & (CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY)) ==
				(CGROUP_CPU | CGROUP_CPUSET | CGROUP_MEMORY) ? "ok" : "warn",
				cgroup_hierarchy_name(ci.hierarchy), ci.hierarchy == CGROUP_V2 ? "unified" : "per controller",
				(ci.controllers & CGROUP_CPU) ? " cpu" : "", (ci.controllers & CGROUP_CPUSET) ? " cpuset" : "",
				(ci.controllers & CGROUP_MEMORY) ? " memory" : "", ci.controllers ? "" : " none",
				ci.swap_limit ? "limited with memory" : "not accounted (a memory limit is on RAM only)");
		else
			fprintf(out, "warn  cgroups: none under %s (scenario resources cannot be applied)\n",
				CGROUP_DEFAULT_ROOT);
	}
	if (read_first_line("/proc/sys/net/ipv4/neigh/default/gc_thresh3", buf, sizeof buf) == 0) {
		long t3 = strtol(buf, NULL, 10);

		fprintf(out, "%-5s neighbour table: gc_thresh3 = %ld%s\n", "ok", t3,
			t3 < 2048 ? " (runs with more than 500 nodes raise the host thresholds and restore them)" : "");
	}
	if (read_first_line("/proc/sys/net/ipv4/tcp_congestion_control", buf, sizeof buf) == 0) {
		char avail[512] = "";

		read_first_line("/proc/sys/net/ipv4/tcp_available_congestion_control", avail, sizeof avail);
		fprintf(out, "ok    TCP congestion control: host default %s; available: %s (runs set network.cc, default cubic)\n",
			buf, avail);
	}
	{
		/* The host's timers (lib/timerlat), measured as the emulator runs (SCHED_FIFO 10 where
		 * allowed): how late a delayed packet may leave, and the precision mode it needs. */
		struct timerlat_opts to = TIMERLAT_OPTS_DOCTOR;
		struct timerlat_result tr;
		char text[2048], *line, *save = NULL;
		const char *prec;
		int rc = timerlat_measure(&to, &tr);

		if (rc < 0) {
			fprintf(out, "warn  timers: could not measure: %s\n", strerror(-rc));
		} else {
			prec = timerlat_precision_for(&tr);
			timerlat_describe(&tr, text, sizeof text);
			for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
				fprintf(out, "%-5s timers: %s\n", strcmp(prec, "timer") ? "warn" : "ok", line);
			fprintf(out, "%-5s timers: network.precision: auto chooses %s on this host%s\n",
				strcmp(prec, "timer") ? "warn" : "ok", prec,
				tr.rt ? "" : " (measured without real-time priority: run as root for SCHED_FIFO)");
		}
	}
	return failed;
}
