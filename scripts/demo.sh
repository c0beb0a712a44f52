#!/usr/bin/env bash
# The quick start behind `make demo`: build, run scenarios/quickstart.yaml (four workers and a
# parameter server on 20 ms +- 5 ms links with 1% loss, one straggler; BSP against pSSP), draw
# the figures and print a summary table. About two minutes on two cores.
#
#   bash scripts/demo.sh [BUILD_DIR]        (BUILD_DIR defaults to build)
#
# Runs need root (namespaces, links, NFQUEUE). Without root the script re-executes itself under
# sudo when sudo exists, else it says what to run and stops. Results stay in runs/quickstart-*/.
set -euo pipefail

BUILD=${1:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		echo "demo: runs need root; re-running under sudo"
		exec sudo -- bash "$ROOT/scripts/demo.sh" "$BUILD"
	fi
	echo "demo: runs need root (network namespaces, links, NFQUEUE) and sudo is not installed." >&2
	echo "demo: as root, run:  make demo   (or: bash scripts/demo.sh $BUILD)" >&2
	exit 3
fi

echo "== build"
make --no-print-directory -j"$(nproc)" BUILD="$BUILD" all

STALENET="$BUILD/stalenet"
OUT="runs/quickstart-$(date -u +%Y%m%dT%H%M%SZ)"

echo "== plan"
"$STALENET" check scenarios/quickstart.yaml

echo "== run (results in $OUT)"
"$STALENET" run scenarios/quickstart.yaml --out "$OUT"

echo "== plot"
"$STALENET" plot "$OUT"

echo
echo "== summary ($OUT/summary.csv)"
# Columns are found by name, so the table survives new summary columns.
awk -F, '
NR == 1 {
	for (i = 1; i <= NF; i++) col[$i] = i
	need = "consistency.barrier final_accuracy time_to_target_s total_steps wait_fraction staleness_mean runq_wait_mean host_saturated"
	n = split(need, k, " ")
	for (i = 1; i <= n; i++)
		if (!(k[i] in col)) { printf "summary.csv lacks column %s\n", k[i] > "/dev/stderr"; exit 1 }
	printf "%-8s %10s %16s %7s %10s %14s %22s\n", "scheme", "final acc", "time to target", "steps", "wait frac", "mean staleness", "host (runq wait)"
	next
}
{
	ttt = $col["time_to_target_s"] == "" ? "not reached" : sprintf("%.1f s", $col["time_to_target_s"])
	host = $col["host_saturated"] == "1" ? "SATURATED" : $col["host_saturated"] == "0" ? "faithful" : "?"
	printf "%-8s %10.4f %16s %7d %10.3f %14s %13s (%4.1f%%)\n", $col["consistency.barrier"], $col["final_accuracy"], ttt,
	       $col["total_steps"], $col["wait_fraction"], $col["staleness_mean"], host, 100 * $col["runq_wait_mean"]
}' "$OUT/summary.csv"

echo
echo "== figures"
for f in "$OUT"/plots/*.svg; do
	echo "  $f (and .png)"
done
echo
echo "Per-run traces: $OUT/<run id>/ (docs/traces.md). Scenario language: docs/scenario.md."
