#!/usr/bin/env bash
# `make check` N times in a row (default 3) while busy loops occupy every core (default: one a
# core, as nproc counts them): the tests must hold on a loaded machine, not only on an idle one.
# Prints pass or fail with the duration of each iteration, keeps each iteration's output in
# $LOG_DIR/check-N.log, and exits non-zero when any iteration failed. The busy loops end with
# the script, however it ends (trap).
#
#   bash scripts/check-under-load.sh [ITERATIONS] [BUSY_LOOPS]
#   LOG_DIR=/tmp/x MAKE_ARGS="check-unit" bash scripts/check-under-load.sh 1 1
#
# The netns and e2e suites need root, as for `make check`.
set -uo pipefail

N=${1:-3}
LOOPS=${2:-$(nproc)}
MAKE_ARGS=${MAKE_ARGS:-check}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_DIR=${LOG_DIR:-$ROOT/build/check-under-load}
cd "$ROOT"

case $N$LOOPS in
*[!0-9]*) echo "usage: $0 [ITERATIONS] [BUSY_LOOPS]" >&2; exit 2 ;;
esac
mkdir -p "$LOG_DIR"

busy=()
stop_busy() {
	local p
	for p in "${busy[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${busy[@]}"; do
		wait "$p" 2>/dev/null
	done
	busy=()
}
trap stop_busy EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Build the programs and every test binary first, without the load: the iterations measure the
# tests, not the compiler.
tests=()
for c in tests/unit/test_*.c tests/netns/test_*.c tests/e2e/test_*.c tests/kernel/test_*.c; do
	[ -e "$c" ] && tests+=("build/${c%.c}")
done
if ! make --no-print-directory -j2 all "${tests[@]}" >"$LOG_DIR/build.log" 2>&1; then
	echo "check-under-load: build failed; see $LOG_DIR/build.log"
	exit 1
fi

for ((i = 0; i < LOOPS; i++)); do
	sh -c 'while :; do :; done' &
	busy+=($!)
done
echo "check-under-load: $LOOPS busy loop(s) (pids ${busy[*]}), $N iteration(s) of make $MAKE_ARGS"

failed=0
for ((it = 1; it <= N; it++)); do
	log=$LOG_DIR/check-$it.log
	start=$(date +%s)
	if make --no-print-directory $MAKE_ARGS >"$log" 2>&1; then
		verdict=pass
	else
		verdict=FAIL
		failed=$((failed + 1))
	fi
	echo "check-under-load: iteration $it/$N: $verdict ($(($(date +%s) - start)) s, $log)"
	if [ $verdict = FAIL ]; then
		grep -E '^\[FAIL\]|^== |FAILED|Error' "$log" | grep -B1 -E 'FAIL|Error' | tail -20 | sed 's/^/    /'
	fi
done
stop_busy
echo "check-under-load: $((N - failed))/$N passed"
[ $failed = 0 ]
