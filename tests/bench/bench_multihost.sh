#!/usr/bin/env bash
# Runs across hosts, measured on test hosts made on this machine (tests/support/hostsim: network
# namespaces with their own sshd, mount, UTS and time namespaces):
#   - setup and teardown time against the number of hosts (1..4, 4 nodes each);
#   - base round trip and TCP throughput across the VXLAN path against a path inside one host;
#   - the cross-host clock error (injected offsets against the estimates and their bounds);
#   - the same scenarios (parameter server, p2p) on this host and spread over 3 test hosts:
#     steps, wait fraction, accuracy from each run's summary.csv;
#   - the largest run tried: 4 hosts x 8 nodes.
# Figures are printed with the load average; nothing is asserted on time. Needs root and
# openssh-server (skipped otherwise). Usage: bench_multihost.sh [BUILD_DIR]   (docs/multihost.md)
set -u
BUILD=${1:-build}
SECONDS_PER_RUN=${STALENET_BENCH_MH_SECONDS:-20}

if [ "$(id -u)" != 0 ] || [ ! -x /usr/sbin/sshd ]; then
	echo "bench_multihost: needs root and /usr/sbin/sshd (openssh-server): skipped"
	exit 0
fi
make --no-print-directory BUILD="$BUILD" all "$BUILD/tests/multihost/hostsim_cli" \
	"$BUILD/tests/multihost/test_overlay" "$BUILD/tests/multihost/test_hosts_clock" >/dev/null || exit 1
STALENET=$(realpath "$BUILD/stalenet")
HOSTSIM=$(realpath "$BUILD/tests/multihost/hostsim_cli")
SCEN=$(realpath scenarios)
WORK=$(mktemp -d /tmp/stalenet-bench-mh.XXXXXX)
SIM_PID=

stop_hosts() {
	if [ -n "$SIM_PID" ]; then
		exec 9>&-      # its standard input ends: it removes its hosts
		wait "$SIM_PID"
		SIM_PID=
	fi
}
cleanup() {
	stop_hosts
	rm -rf "$WORK"
}
trap cleanup EXIT

# N test hosts under $WORK/hN; their hosts.yaml (cores C each) and env; returns once they are up.
start_hosts() {
	local n=$1 cores=$2 dir=$WORK/h$1 line=
	mkdir -p "$dir"
	mkfifo "$dir/in" "$dir/out"
	"$HOSTSIM" "$n" "$dir" <"$dir/in" >"$dir/out" &
	SIM_PID=$!
	exec 9>"$dir/in"
	if ! read -r -t 120 line <"$dir/out" || [ "$line" != ready ]; then
		echo "bench_multihost: the test hosts did not come up"
		exit 1
	fi
	sed -i "s/cores: 64/cores: $cores/" "$dir/hosts.yaml"
	# shellcheck disable=SC1091
	. "$dir/env"
	HOSTS_FILE=$dir/hosts.yaml
}

# stalenet run across the test hosts (from their control namespace); extra arguments passed on.
run_hosts() {
	ip netns exec "$CTL_NS" "$STALENET" run "$@" --hosts "$HOSTS_FILE" --identity "$IDENTITY" \
		--known-hosts "$KNOWN_HOSTS" --quiet
}

# One summary.csv row's columns by name: summary DIR COL...
summary() {
	local f=$1/summary.csv
	shift
	[ -f "$f" ] || { echo "(no summary)"; return; }
	awk -F, -v cols="$*" 'NR == 1 { for (i = 1; i <= NF; i++) ix[$i] = i; next }
		{ n = split(cols, c, " "); s = ""; for (k = 1; k <= n; k++) s = s (k > 1 ? " | " : "") $(ix[c[k]]); print s }' "$f"
}

echo "load average at the start: $(cat /proc/loadavg)"

echo "== setup and teardown against the number of hosts (4 nodes per host)"
STALENET_SCALE_HOSTS=1,2,3,4 "$BUILD/tests/multihost/test_overlay" --filter 'multihost_scale/*' 2>&1 | grep '^scale:'

echo "== base round trip and throughput: across hosts (VXLAN) against inside one host (veth, bridge)"
"$BUILD/tests/multihost/test_overlay" --filter 'multihost_overlay/full_size_frames_cross_hosts' 2>&1 |
	grep -E '^(UDP round trip|TCP )'

echo "== cross-host clock error (injected CLOCK_MONOTONIC offsets against the estimates)"
"$BUILD/tests/multihost/test_hosts_clock" --filter 'multihost_clock/offsets_recovered_within_bound' 2>&1 | grep '^host '

echo "== the same scenario on this host and on 3 test hosts (stop after ${SECONDS_PER_RUN} s)"
start_hosts 3 3
echo "scenario | where | total_steps | steps_median | wait_fraction | final_accuracy | best_accuracy | status"
for s in ps-bsp p2p-bsp; do
	"$STALENET" run "$SCEN/$s.yaml" --set "stop.time=${SECONDS_PER_RUN}s" --out "$WORK/one-$s" --quiet \
		>"$WORK/one-$s.log" 2>&1
	echo "$s | 1 host | $(summary "$WORK/one-$s" total_steps steps_median wait_fraction final_accuracy best_accuracy status)"
	run_hosts "$SCEN/$s.yaml" --set "stop.time=${SECONDS_PER_RUN}s" --out "$WORK/mh-$s" >"$WORK/mh-$s.log" 2>&1
	echo "$s | 3 hosts | $(summary "$WORK/mh-$s" total_steps steps_median wait_fraction final_accuracy best_accuracy status)"
	grep -E '^host h[0-9]: built|delay compensation' "$WORK/mh-$s.log" | sed 's/^/    /'
done
echo "load average: $(cat /proc/loadavg)"
stop_hosts

echo "== the largest run tried: 4 hosts x 8 nodes (a parameter server and 31 workers, 10 s)"
start_hosts 4 8
cat >"$WORK/large.yaml" <<EOF
name: mh-large
stop: {time: 10s}
workers: 31
linkcheck: off
network: {cc: reno}
EOF
t0=$(date +%s.%N)
run_hosts "$WORK/large.yaml" --out "$WORK/large" >"$WORK/large.log" 2>&1
rc=$?
t1=$(date +%s.%N)
echo "exit $rc in $(echo "$t1 - $t0" | bc) s: $(summary "$WORK/large" total_steps steps_min steps_median wait_fraction status)"
grep -E '^host h[0-9]: built' "$WORK/large.log" | sed 's/^/    /'
echo "load average: $(cat /proc/loadavg)"
stop_hosts
