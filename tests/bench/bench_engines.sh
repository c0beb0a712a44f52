#!/usr/bin/env bash
# Bench: the parameter-server engine under each barrier scheme (bsp, ssp, asp, pbsp, pssp) with
# 10 workers, each in its own namespace as `stalenet run` places them, on an unshaped network,
# MLP 784-256-10 (203,530 parameters: the 814 KB payload bench_nspath moves). For every scheme,
# from the traces of the run:
#   updates/s   accepted worker updates (worker rows with a staleness) per second of training
#   versions/s  server model versions per second (BSP: one per round)
#   step ms     median time between two rows of a worker
#   PS GB/s     data-plane bytes (bytes_tx + bytes_rx of all worker rows) per second of training
# next to the raw ZeroMQ push/pull figure of bench_nspath over the same namespace path (one
# stream, one direction), and the ratio. Prints a markdown table. Needs root; skips otherwise.
# Each scheme runs twice: at batch 64 the 11 processes' MLP compute fills the two cores of the
# development machine; at batch 1 a gradient costs ~20 us, so the exchange itself sets the pace
# (the 814 KB update and model are the same). BENCH_SECONDS (default 15) sets each run's length.
set -euo pipefail
BUILD=${1:-build}
SECS=${BENCH_SECONDS:-15}
if [ "$(id -u)" != 0 ]; then echo "bench_engines: skipped (needs root)"; exit 0; fi
for f in "$BUILD/stalenet" "$BUILD/stalenet-node"; do
	[ -x "$f" ] || { echo "bench_engines: $f not built (make all)"; exit 1; }
done
nspath="$BUILD/bench/bench_nspath"
[ -x "$nspath" ] || nspath="$BUILD/tests/bench/bench_nspath"
dir=$(mktemp -d /tmp/stalenet-bench-engines-XXXXXX)
trap 'rm -rf "$dir"' EXIT

# Raw ZeroMQ over ns -> veth -> bridge -> veth -> ns, as bench_nspath measures it.
raw=""
if [ -x "$nspath" ]; then
	"$nspath" 200 > "$dir/nspath.txt" 2>&1 || { echo "bench_engines: bench_nspath failed"; cat "$dir/nspath.txt"; exit 1; }
	raw=$(awk '/raw ZeroMQ/ {print $(NF-1)}' "$dir/nspath.txt")
fi

# One scheme: write the scenario, run it, reduce the traces to one table row.
run_scheme() {
	local b=$1 batch=$2 yaml="$dir/$1-$2.yaml" out="$dir/$1-$2"
	cat > "$yaml" <<YAML
name: bench-engines-$b-$batch
seed: 5
stop: {time: ${SECS}s}
linkcheck: off
data: {set: fashion-mnist, partition: {scheme: iid}}
model: {kind: mlp, hidden: [256]}
train: {batch: $batch, lr: 0.05}
topology: {kind: parameter-server}
consistency: {barrier: $b, staleness: 3, sample: 3}
workers: 10
eval: {every: 5s}
YAML
	if ! "$BUILD/stalenet" run "$yaml" --out "$out" --quiet > "$dir/$b-$batch.log" 2>&1; then
		echo "bench_engines: $b (batch $batch) run failed" >&2
		tail -20 "$dir/$b-$batch.log" >&2
		return 1
	fi
	# Worker rows: t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,..
	local med
	med=$(awk -F, 'FNR == 1 { prev = -1; next } { if (prev >= 0) print $1 - prev; prev = $1 }' \
		"$out"/nodes/worker*.csv | sort -g | awk '{ v[n++] = $1 } END { if (n) print (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2); else print 0 }')
	awk -F, -v b="$b" -v batch="$batch" -v raw="$raw" -v med="$med" -v srv="$out/nodes/server0.csv" '
		FNR == 1 { next }
		{
			t = $1 + 0
			if (n == 0 || t < t0) t0 = t
			if (n == 0 || t > t1) t1 = t
			n++
			if ($6 != "") upd++
			bytes += $9 + $10
			wait += $5; comp += $4
		}
		END {
			while ((getline line < srv) > 0)
				if (split(line, f, ",") >= 6 && f[6] ~ /^[0-9]+$/ && f[6] + 0 > ver) ver = f[6] + 0
			span = t1 - t0
			if (span <= 0 || n == 0) { printf "| %s | %s | no rows |\n", b, batch; exit 1 }
			gbs = bytes / span / 1e9
			ratio = raw + 0 > 0 ? sprintf("%.2f", gbs / raw) : "n/a"
			printf "| %s | %s | %d | %.1f | %.1f | %.2f | %.2f | %.3f | %s | %s |\n", b, batch, upd, upd / span,
			       ver / span, 1000 * med, wait / (wait + comp), gbs, raw == "" ? "n/a" : raw, ratio
		}' "$out"/nodes/worker*.csv
}

rows=""
for batch in 64 1; do
	for b in bsp ssp asp pbsp pssp; do
		rows+=$(run_scheme "$b" "$batch")$'\n'
	done
done
echo "bench_engines: parameter server, 10 workers in 10 namespaces, unshaped, MLP 784-256-10, ${SECS} s per scheme"
echo "(PS GB/s: update + model bytes of all workers over the training time; raw: bench_nspath, one ZeroMQ stream over the same path)"
echo
echo "| scheme | batch | updates | updates/s | versions/s | step ms (median) | wait fraction | PS GB/s | raw ZeroMQ GB/s | PS/raw |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf "%s" "$rows"
