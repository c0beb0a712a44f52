#!/usr/bin/env bash
# An emulated sweep beside its simulations, from scratch: run the scenario on the testbed (root),
# calibrate every run, simulate the same sweep uncalibrated and calibrated (`train: real`), draw
# the three over each other and print the side-by-side table of docs/simulation.md.
#
#   sudo bash scripts/calibrate-compare.sh SCENARIO OUT [--target ACC]... [--set key=value]...
#       [--sim-set key=value]... [--sim-seeds K] [--workers POINT]...
#   bash scripts/calibrate-compare.sh scenarios/straggler.yaml runs/cmp --target 0.72 \
#       --set stop.time=150s --set sweep.repeat=3
#
# OUT/emulated is run only when it does not hold a complete sweep yet (a rerun of the script
# reuses it; delete it to measure again). --set values apply to every run (emulated and
# simulated), so the three sweeps plan the same runs with the same seeds; --sim-set values
# apply to the simulations only (e.g. consistency.draw=crossing for an emulated sweep measured
# under that rule before the default changed). The simulations use
# `simulation.step_cost` 1 ms and `server_cost` 20 us unless --set says otherwise (fixed costs:
# reruns are byte-identical). The calibrated sweep gives run i of the emulated sweep its own
# profile (OUT/emulated/RUN/profile.conf) and the same seed: a zip of the emulated sweep's keys
# with `simulation.profile`, listed in the emulated plan's order. --target (default: the
# scenario's `target`; repeat it for more) is the accuracy whose first crossing in eval.csv is the
# time to target. --sim-seeds K (default 4) simulates both sweeps K times, under
# simulation.seed 0 (the run's seed) to K - 1: the draws the simulator makes on its own (links,
# a profile's times) differ, the ones it shares with the emulated run (model, minibatches,
# straggler delays) do not, and the tables average over the K so that the simulator's own
# noise does not count as a difference from the testbed.
#
# Output: OUT/emulated, OUT/simulated, OUT/calibrated (simulation.seed 0) and
# OUT/simulated.seedN, OUT/calibrated.seedN (N = 1 .. K - 1) (run directories),
# OUT/compare/*.svg and *.png (accuracy_time, steps_cdf; seed 0), OUT/table.md (also printed):
# the table three times, the time to target as the first evaluation at the target, as the
# crossing interpolated between the evaluations around it, and interpolated on the mean of the
# last 3 evaluations.
# With --workers POINT (a sweep point as the table names it, e.g. asp; repeatable) also every
# worker's final step in each emulated run of that point beside the same worker simulated
# (OUT/workers.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${STALENET:-$ROOT/build/stalenet}

usage() {
	echo "usage: $0 SCENARIO OUT [--target ACC]... [--set key=value]... [--sim-set key=value]... [--sim-seeds K] [--workers POINT]..." >&2
	exit 2
}
[ $# -ge 2 ] || usage
SCENARIO=$1
OUT=$2
shift 2
TARGETS=()
SETS=()
WORKERS=()
SIMSETS=()
SEEDS=4
while [ $# -gt 0 ]; do
	case $1 in
	--target) [ $# -ge 2 ] || usage; TARGETS+=(--target "$2"); shift 2 ;;
	--set) [ $# -ge 2 ] || usage; SETS+=(--set "$2"); shift 2 ;;
	--workers) [ $# -ge 2 ] || usage; WORKERS+=(--point "$2"); shift 2 ;;
	--sim-set) [ $# -ge 2 ] || usage; SIMSETS+=(--set "$2"); shift 2 ;;
	--sim-seeds) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]?$ ]] || usage; SEEDS=$2; shift 2 ;;
	*) usage ;;
	esac
done
[ -x "$BIN" ] || { echo "$0: $BIN not built (make all)" >&2; exit 2; }
[ -r "$SCENARIO" ] || { echo "$0: cannot read $SCENARIO" >&2; exit 2; }
mkdir -p "$OUT"

# 1. the emulated sweep (resumed: complete runs are kept)
echo "== emulated: $SCENARIO ($(cat /proc/loadavg))" >&2
"$BIN" run "$SCENARIO" --out "$OUT/emulated" "${SETS[@]}" --quiet

# 2. a profile per emulated run
for meta in "$OUT"/emulated/*/meta.json; do
	"$BIN" calibrate "$(dirname "$meta")" >&2
done

SIM=(--set simulation.train=real --set simulation.step_cost=1ms --set simulation.server_cost=20us)
mapfile -t ZIP < <(python3 "$ROOT/scripts/calibrate-table.py" zip "$OUT/emulated")
for ((k = 0; k < SEEDS; k++)); do
	sfx=.seed$k
	[ "$k" -gt 0 ] || sfx=
	# 3. the same sweep simulated from the scenario alone
	echo "== simulated, uncalibrated (simulation.seed $k)" >&2
	"$BIN" simulate "$SCENARIO" --out "$OUT/simulated$sfx" "${SIM[@]}" "${SETS[@]}" "${SIMSETS[@]}" \
		--set simulation.seed=$k --quiet
	# 4. the same runs, each from its emulated run's profile and with its seed
	echo "== simulated, calibrated (simulation.seed $k)" >&2
	"$BIN" simulate "$SCENARIO" --out "$OUT/calibrated$sfx" "${SIM[@]}" "${SETS[@]}" "${SIMSETS[@]}" \
		"${ZIP[@]}" --set simulation.seed=$k --quiet
done

# 5. figures and the table
"$BIN" plot "$OUT/emulated" "$OUT/simulated" "$OUT/calibrated" --out "$OUT/compare" \
	--label emulated --label "simulated, uncalibrated" --label "simulated, calibrated" >&2
{
	python3 "$ROOT/scripts/calibrate-table.py" table "$OUT" "${TARGETS[@]}"
	echo
	python3 "$ROOT/scripts/calibrate-table.py" table "$OUT" "${TARGETS[@]}" --interp
	echo
	python3 "$ROOT/scripts/calibrate-table.py" table "$OUT" "${TARGETS[@]}" --smooth 3 --interp
} | tee "$OUT/table.md"
if [ ${#WORKERS[@]} -gt 0 ]; then
	echo
	python3 "$ROOT/scripts/calibrate-table.py" workers "$OUT" "${WORKERS[@]}" | tee "$OUT/workers.md"
fi
