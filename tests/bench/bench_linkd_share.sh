#!/usr/bin/env bash
# Bench: CPU share of the userspace link emulator (stalenet-linkd, nfq backend) during a real
# run: 10 workers and a parameter server, MLP 784-256-10 (814 KB per push and per model reply),
# ASP, every link 5 ms +- 1 ms with 0.1% loss, BENCH_SECONDS (default 20) of training.
# linkd's CPU time (utime + stime from /proc) is read when training starts and at the end of
# the run; the packets it handled come from links.csv. BENCH_PRECISION=timer|spin pins
# network.precision (default auto: the host's measured timers choose, and spin polls through the
# margin before every release, so compare versions at the same precision). Needs root; skips
# otherwise.
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
"$BUILD/stalenet" run "$dir/s.yaml" --out "$dir/out" --backend nfq --quiet > "$dir/log" 2>&1 &
run=$!
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Training has started once progress.csv has rows; linkd is the run's child stalenet-linkd (other
# runs on the host have their own: never measure those).
for _ in $(seq 1 600); do
	[ -s "$dir/out/progress.csv" ] && [ "$(wc -l < "$dir/out/progress.csv")" -gt 1 ] && break
	sleep 0.1
done
pid=$(pgrep -P "$run" -f "stalenet-linkd" | head -1 || true)
[ -n "$pid" ] || { echo "bench_linkd_share: no stalenet-linkd found"; kill "$run" 2>/dev/null; exit 1; }
c0=$(cpu "$pid"); t0=$(date +%s.%N)
last=$c0
while kill -0 "$pid" 2>/dev/null; do
	c=$(cpu "$pid"); [ "$c" -gt 0 ] && last=$c
	t1=$(date +%s.%N)
	sleep 0.2
done
wait "$run" || { echo "bench_linkd_share: run failed"; tail -20 "$dir/log"; exit 1; }
# links.csv: packets are what the emulator was handed (a segmentation-offload packet passed whole
# counts once), bytes their true length: the bytes show the load is the same across versions.
pkts=$(awk -F, 'NR > 1 { last[$2 "," $3] = $4 } END { for (k in last) s += last[k]; print s + 0 }' "$dir/out/links.csv")
bytes=$(awk -F, 'NR > 1 { last[$2 "," $3] = $5 } END { for (k in last) s += last[k]; printf "%.0f", s + 0 }' "$dir/out/links.csv")
prec=$(sed -n 's/.*"precision": *"\([a-z]*\)".*/\1/p' "$dir/out/meta.json" | head -1)
echo "bench_linkd_share: precision ${prec:-?} (network.precision: $PREC), load $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v c0="$c0" -v c1="$last" -v t0="$t0" -v t1="$t1" -v hz="$tick" -v p="$pkts" -v b="$bytes" -v s="$SECS" 'BEGIN {
	cpu = (c1 - c0) / hz; wall = t1 - t0
	printf "bench_linkd_share: 10 workers + server, MLP 784-256-10, ASP, 5 ms +- 1 ms, 0.1%% loss, %d s of training\n", s
	printf "  stalenet-linkd: %.2f s CPU over %.1f s = %.1f%% of one core (%.1f%% of the 2-core machine); %d packets through its queues (%.0f pkts/s, %.1f MB/s)\n",
	       cpu, wall, 100 * cpu / wall, 50 * cpu / wall, p, p / wall, b / wall / 1e6
	if (p > 0) printf "  %.2f us of emulator CPU a packet\n", 1e6 * cpu / p
	if (b > 0) printf "  %.2f s of emulator CPU per GB carried (comparable when the training moves more or less)\n", cpu / (b / 1e9)
}'
