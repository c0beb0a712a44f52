#!/usr/bin/env bash
# Kernel-backend tests (tests/kernel/*): run directly where this kernel has sch_netem, else inside
# the netem VM (vagrant/netem-vm.sh, cached under BUILD/netem-vm).
set -euo pipefail
inside=0
if [ "${1:-}" = --inside ]; then inside=1; shift; fi
BUILD=${1:-build}
shopt -s nullglob
tests=()
for t in "$BUILD"/tests/kernel/test_*; do [[ -x $t && $t != *.* ]] && tests+=("$t"); done
if [ ${#tests[@]} -eq 0 ]; then echo "check-kernel: no kernel-backend tests built"; exit 0; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

host_has_netem() {
	[ "$(id -u)" = 0 ] || return 1
	unshare -n sh -c 'tc qdisc add dev lo root netem delay 1ms' 2>/dev/null
}

# One test at a time (-j1) wherever they run, as make check runs every suite that measures time:
# the kernel tests measure delays and rates, and two of them side by side on two cores would
# measure each other. (Only the VM path used to pass -j1; a host with sch_netem ran them two at
# a time.)
run_all() {
	local fail=0
	for t in "${tests[@]}"; do echo "== $t"; "$t" -j1 ${CRITERION_FLAGS:-} || fail=1; done
	return $fail
}

if [ $inside = 1 ]; then run_all; exit; fi

if host_has_netem; then
	echo "check-kernel: this kernel has sch_netem: running on the host"
	STALENET_TESTS_MUST_RUN=1 run_all
	exit
fi
if [ "$(id -u)" != 0 ] && [ ! -f "$BUILD/netem-vm/ready" ]; then
	echo "check-kernel: no sch_netem here and no cached VM; run as root once to build $BUILD/netem-vm" >&2
	exit 1
fi
echo "check-kernel: no sch_netem on this kernel: running ${#tests[@]} test binaries in the netem VM"
bash "$here/netem-vm.sh" setup "$BUILD/netem-vm"
# The guest is ~5-8x slower on CPU; criterion runs one test at a time there to keep timing honest.
bash "$here/netem-vm.sh" run "$BUILD/netem-vm" "$root" env STALENET_TIME_SCALE=5 CRITERION_FLAGS="${CRITERION_FLAGS:-}" \
	bash vagrant/check-kernel.sh --inside "$BUILD"
