#!/usr/bin/env bash
# Bench: many workers, each in its own namespace, softmax under ASP for a fixed time. Prints the
# per-worker private memory (Private_Clean + Private_Dirty from /proc/PID/smaps_rollup, sampled
# mid-run) and the run's summary. Needs root. Size with BENCH_WORKERS (default 200) and
# BENCH_SECONDS (default 60).
set -euo pipefail
BUILD=${1:-build}
N=${BENCH_WORKERS:-200}
SECS=${BENCH_SECONDS:-60}
if [ "$(id -u)" != 0 ]; then echo "bench_scale: skipped (needs root)"; exit 0; fi
dir=$(mktemp -d /tmp/stalenet-bench-scale-XXXXXX)
cat > "$dir/scale.yaml" <<YAML
name: bench-scale
seed: 1
stop: {time: ${SECS}s}
linkcheck: off
model: {kind: softmax}
train: {batch: 32, lr: 0.02}
consistency: {barrier: asp}
workers: $N
eval: {every: 10s}
YAML
start=$(date +%s.%N)
"$BUILD/stalenet" run "$dir/scale.yaml" --out "$dir/run" --quiet > "$dir/run.log" 2>&1 &
pid=$!
# Sample once every worker has trained for a while.
sleep $(( SECS / 2 + 10 ))
mem=$(for p in $(pgrep -f "stalenet-node $dir/run/nodes/worker" || true); do
	awk '/^Private_(Clean|Dirty)/ {s += $2} END {print s}' /proc/$p/smaps_rollup 2>/dev/null
done | sort -n)
wait $pid || { echo "bench_scale: run failed"; tail -20 "$dir/run.log"; exit 1; }
end=$(date +%s.%N)
count=$(echo "$mem" | grep -c . || true)
if [ "$count" -gt 0 ]; then
	med=$(echo "$mem" | awk -v n="$count" 'NR == int((n + 1) / 2) {print $1}')
	max=$(echo "$mem" | tail -1)
	echo "bench_scale: $count/$N worker processes sampled; private memory median ${med} kB, max ${max} kB"
else
	echo "bench_scale: no worker process found to sample"
fi
awk -v n="$N" -v s="$SECS" -v a="$start" -v b="$end" \
	'BEGIN {printf "bench_scale: %d workers, %s s of training, wall %.1f s\n", n, s, b - a}'
cut -d, -f5-14 "$dir/run/summary.csv" | tr , '\t'
rm -rf "$dir"
