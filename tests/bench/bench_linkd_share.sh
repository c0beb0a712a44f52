#!/usr/bin/env bash
# Bench: CPU share of the userspace link emulator (stalenet-linkd, nfq backend) during a real
# run: 10 workers and a parameter server, MLP 784-256-10 (814 KB per push and per model reply),
# ASP, every link 5 ms +- 1 ms with 0.1% loss, BENCH_SECONDS (default 20) of training.
# linkd's CPU time (utime + stime from /proc) is read when training starts and at the end of
# the run; the packets it handled come from links.csv. BENCH_PRECISION=timer|spin pins
# network.precision (default auto: the host's measured timers choose, and spin polls through the
# margin before every release, so compare versions at the same precision). Needs root; skips
# otherwise.
# Honest accounting: work moved out of the emulator's verdict calls into kernel threads (e.g.
# threaded NAPI on the veths, see docs/precision.md) is not work saved. The bench also reads the
# CPU of the napi kthreads that appeared with the run (named napi/<dev>-<id>; present before the run = not ours)
# and of ksoftirqd, and the whole host's busy time over the same window (/proc/stat; other load
# on the host is in it: compare it only between back-to-back runs).
set -euo pipefail
BUILD=${1:-build}
SECS=${BENCH_SECONDS:-20}
PREC=${BENCH_PRECISION:-auto}
case "$PREC" in auto|timer|spin) ;; *) echo "bench_linkd_share: BENCH_PRECISION must be auto, timer or spin"; exit 1;; esac
if [ "$(id -u)" != 0 ]; then echo "bench_linkd_share: skipped (needs root)"; exit 0; fi
dir=$(mktemp -d /tmp/stalenet-bench-share-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/s.yaml" <<YAML
name: bench-linkd-share
seed: 9
stop: {time: ${SECS}s}
linkcheck: off
data: {set: fashion-mnist, partition: {scheme: iid}}
model: {kind: mlp, hidden: [256]}
train: {batch: 64, lr: 0.05}
topology: {kind: parameter-server}
consistency: {barrier: asp}
workers: 10
eval: {every: 5s}
network:
  precision: ${PREC}
  default: {delay: 5ms, jitter: 1ms, loss: 0.1%}
YAML
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# kernel threads whose name starts with $1, as "pid pid ... "
kthreads() { ps -eo pid=,comm= | awk -v p="$1" 'index($2, p) == 1 { printf "%s ", $1 }'; }
# utime + stime summed over pids $@ (one awk for all; a pid gone adds nothing)
sumcpu() { [ $# -gt 0 ] || { echo 0; return; }; (cd /proc && awk '{ s += $14 + $15 } END { print s + 0 }' $(printf '%s/stat ' "$@") 2>/dev/null) || echo 0; }
# busy jiffies of the whole host (all CPUs; idle and iowait left out)
hostbusy() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6 }' /proc/stat; }
napi_pre=" $(kthreads napi/)"
"$BUILD/stalenet" run "$dir/s.yaml" --out "$dir/out" --backend nfq --quiet > "$dir/log" 2>&1 &
run=$!
# Training has started once progress.csv has rows; linkd is the run's child stalenet-linkd (other
# runs on the host have their own: never measure those).
for _ in $(seq 1 600); do
	[ -s "$dir/out/progress.csv" ] && [ "$(wc -l < "$dir/out/progress.csv")" -gt 1 ] && break
	sleep 0.1
done
pid=$(pgrep -P "$run" -f "stalenet-linkd" | head -1 || true)
[ -n "$pid" ] || { echo "bench_linkd_share: no stalenet-linkd found"; kill "$run" 2>/dev/null; exit 1; }
# The run's napi kthreads: those that came with it (they go with its veths at the end, so their
# CPU is sampled while they live, like linkd's).
knew=()
for k in $(kthreads napi/); do case "$napi_pre" in *" $k "*) ;; *) knew+=("$k");; esac; done
ksoft=($(kthreads ksoftirqd/))
n0=$(sumcpu "${knew[@]}"); s0=$(sumcpu "${ksoft[@]}")
# "t_s median_step" of progress.csv's latest row (the training's pace, to see that a cheaper
# emulator did not slow it)
progress() { awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "median_step") m = i; next }
	m && $1 != "" { t = $1; v = $m } END { print (t == "" ? 0 : t), (v == "" ? 0 : v) }' "$dir/out/progress.csv"; }
p0=$(progress)
c0=$(cpu "$pid"); t0=$(date +%s.%N); h0=$(hostbusy)
last=$c0; nlast=$n0; slast=$s0; hlast=$h0
while kill -0 "$pid" 2>/dev/null; do
	c=$(cpu "$pid"); [ "$c" -gt 0 ] && last=$c
	n=$(sumcpu "${knew[@]}"); [ "$n" -ge "$nlast" ] && nlast=$n
	sc=$(sumcpu "${ksoft[@]}"); [ "$sc" -ge "$slast" ] && slast=$sc
	hlast=$(hostbusy)
	t1=$(date +%s.%N)
	sleep 0.2
done
napi=$((nlast - n0)); soft=$((slast - s0))
wait "$run" || { echo "bench_linkd_share: run failed"; tail -20 "$dir/log"; exit 1; }
# links.csv: packets are what the emulator was handed (a segmentation-offload packet passed whole
# counts once), bytes their true length: the bytes show the load is the same across versions.
pkts=$(awk -F, 'NR > 1 { last[$2 "," $3] = $4 } END { for (k in last) s += last[k]; print s + 0 }' "$dir/out/links.csv")
bytes=$(awk -F, 'NR > 1 { last[$2 "," $3] = $5 } END { for (k in last) s += last[k]; printf "%.0f", s + 0 }' "$dir/out/links.csv")
p1=$(progress)
# release lateness over the run's links.csv rows (nfq): mean of the rows' means, worst p99 and
# the rows whose p99 is above 0.5 ms (the live view's warning)
late=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "late_mean_ms") a = i; if ($i == "late_p99_ms") b = i }; next }
	a && $a != "" { n++; m += $a; if ($b + 0 > w) w = $b + 0; if ($b + 0 > 0.5) o++ }
	END { if (n) printf "%.3f %.3f %d %d", m / n, w, o, n; else print "none" }' "$dir/out/links.csv")
prec=$(sed -n 's/.*"precision": *"\([a-z]*\)".*/\1/p' "$dir/out/meta.json" | head -1)
echo "bench_linkd_share: precision ${prec:-?} (network.precision: $PREC), load $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v c0="$c0" -v c1="$last" -v t0="$t0" -v t1="$t1" -v hz="$tick" -v p="$pkts" -v b="$bytes" -v s="$SECS" \
	-v kn="$napi" -v nk="${#knew[@]}" -v ks="$soft" -v hb="$((hlast - h0))" -v p0="$p0" -v p1="$p1" -v late="$late" 'BEGIN {
	cpu = (c1 - c0) / hz; wall = t1 - t0
	printf "bench_linkd_share: 10 workers + server, MLP 784-256-10, ASP, 5 ms +- 1 ms, 0.1%% loss, %d s of training\n", s
	printf "  stalenet-linkd: %.2f s CPU over %.1f s = %.1f%% of one core (%.1f%% of the 2-core machine); %d packets through its queues (%.0f pkts/s, %.1f MB/s)\n",
	       cpu, wall, 100 * cpu / wall, 50 * cpu / wall, p, p / wall, b / wall / 1e6
	if (p > 0) printf "  %.2f us of emulator CPU a packet\n", 1e6 * cpu / p
	if (b > 0) printf "  %.2f s of emulator CPU per GB carried (comparable when the training moves more or less)\n", cpu / (b / 1e9)
	k = kn / hz; q = ks / hz; h = hb / hz
	printf "  napi kthreads of the run (%d): %.2f s CPU = %.1f%% of one core; linkd + them: %.1f%% of one core, %.2f us a packet\n",
	       nk, k, 100 * k / wall, 100 * (cpu + k) / wall, (p > 0 ? 1e6 * (cpu + k) / p : 0)
	printf "  ksoftirqd (host-wide): %.2f s CPU = %.1f%% of one core; whole host busy: %.1f of 2 cores (%.0f%%, other load included)\n",
	       q, 100 * q / wall, h / wall, 50 * h / wall
	if (split(late, l, " ") == 4) printf "  release lateness (links.csv, %d rows): mean %.3f ms, worst p99 %.3f ms, %d rows with p99 > 0.5 ms\n", l[4], l[1], l[2], l[3]
	split(p0, a, " "); split(p1, z, " ")
	if (z[1] > a[1]) printf "  training: median step %d -> %d over %.1f s = %.2f steps/s a worker\n", a[2], z[2], z[1] - a[1], (z[2] - a[2]) / (z[1] - a[1])
}'
