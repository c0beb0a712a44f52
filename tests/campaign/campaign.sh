#!/usr/bin/env bash
# tests/campaign/campaign.sh: the reliability campaign (docs/reliability.md).
#
#   campaign.sh [--build DIR] [--kills N] [--nodes 0|1] [--fullfs 0|1] [--soak SECONDS]
#               [--soak-workers N]
#
# Cases, one output line each, then "N passed, N failed" (exit 1 if any failed):
#   kill-orchestrator  kill -9 of `stalenet run` at a random instant of a small run's life, then
#                      `stalenet cleanup`; nothing of the run may remain on the host, and a
#                      foreign namespace, veth and iptables rules present throughout stay as they were
#   kill-node-*        kill -9 of a random worker mid-training under on_node_failure stop/continue
#   kill-linkd         kill -9 of stalenet-linkd mid-training: the run stops as failed
#                      (both: exit code and status as documented, every CSV parses, every line
#                      written before the kill intact, nothing left behind)
#   full-fs            the output directory on a small tmpfs: a clear ENOSPC error naming the
#                      file, a non-zero exit, nothing left behind
#   soak               many workers for SECONDS: orchestrator and linkd resident memory grow
#                      < 1% after the first minute (the orchestrator's beside the once-only
#                      growth of its control queues, 32 kB a node) and < 1% over the second
#                      half, their open file descriptors stay constant
#
# Kill instants are uniform over [0, duration of a measured full run], drawn from a seeded RNG
# (the seed is printed; CAMPAIGN_SEED=N reproduces a campaign).
#
# Other runs may share the host, so every leftover check is scoped to the run's own prefix
# (from its journal header, meta.json or its registry entry) plus the foreign objects the
# campaign made; nothing else on the host is asserted or touched. Each case holds the host
# lock the netns suites take (/run/stalenet-test-testbed.lock), so host-wide sysctls compared
# before and after are not changed under it by a test.
#
# Needs root; without it the campaign is skipped (exit 0), unless STALENET_TESTS_MUST_RUN=1.
# CAMPAIGN_KEEP=1 keeps the temporary directory (run dirs, stderr of every run).
set -uo pipefail

BUILD=build
KILLS=100
NODES=1
FULLFS=1
SOAK=0
SOAK_WORKERS=200
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--kills) KILLS=$2; shift 2 ;;
	--nodes) NODES=$2; shift 2 ;;
	--fullfs) FULLFS=$2; shift 2 ;;
	--soak) SOAK=$2; shift 2 ;;
	--soak-workers) SOAK_WORKERS=$2; shift 2 ;;
	*) echo "campaign: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(cd "$BUILD" 2>/dev/null && pwd)/stalenet
LOCK=/run/stalenet-test-testbed.lock
HOST_KEYS="net.ipv4.tcp_allowed_congestion_control net.ipv4.neigh.default.gc_thresh1
net.ipv4.neigh.default.gc_thresh2 net.ipv4.neigh.default.gc_thresh3"

skip_or_fail() {
	if [ "${STALENET_TESTS_MUST_RUN:-}" = 1 ]; then
		echo "campaign: cannot run: $1 (STALENET_TESTS_MUST_RUN=1)"
		exit 1
	fi
	echo "campaign: skipped ($1)"
	exit 0
}

[ "$(id -u)" = 0 ] || skip_or_fail "needs root"
[ -x "$BIN" ] || skip_or_fail "$BUILD/stalenet not built"
probe_ns=sncmp-probe-$$
ip netns add "$probe_ns" 2>/dev/null || skip_or_fail "cannot create a network namespace"
ip netns del "$probe_ns"

SEED=${CAMPAIGN_SEED:-$(( $(date +%s%N) % 2147483647 ))}
RANDOM=$SEED
TMP=$(mktemp -d /tmp/stalenet-campaign-XXXXXX)
chmod 755 "$TMP"
PASSED=0
FAILED=0
echo "campaign: seed $SEED (CAMPAIGN_SEED=$SEED reproduces), temporary directory $TMP"

# --- small utilities -------------------------------------------------------------------------

now() { echo "$EPOCHREALTIME"; }
# awk arithmetic on decimal strings: calc 'a - b' a=... b=...
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
# U = a uniform real in [0, $1) from the seeded RNG (30 bits). Not in a $(...) subshell: the
# generator's state would not advance in this shell.
uniform() {
	local r=$(( RANDOM * 32768 + RANDOM ))
	U=$(awk -v r="$r" -v m="$1" 'BEGIN { printf "%.3f", r / 1073741824 * m }')
}
hex() { printf '%04x%02x' $(( RANDOM )) $(( RANDOM % 256 )); }

# Sleep until the instant "$1 + $2" (EPOCHREALTIME units), returning at once if it is past.
sleep_until() {
	local left
	left=$(awk -v a="$1" -v b="$2" -v n="$(now)" 'BEGIN { d = a + b - n; printf "%.3f", (d > 0 ? d : 0) }')
	sleep "$left"
}

# Wait up to $2 s for pid $1 (a child of this shell: not from a $(...) subshell) to exit;
# RC = its exit code (128+signal when killed), or "timeout".
wait_exit() {
	local pid=$1 limit=$2 t0
	# Braces: the shell's "Killed" job notice goes to /dev/null, not the campaign's output.
	{
		t0=$(now)
		while kill -0 "$pid"; do
			if awk -v a="$t0" -v n="$(now)" -v l="$limit" 'BEGIN { exit !(n - a > l) }'; then
				RC=timeout
				return
			fi
			sleep 0.05
		done
		wait "$pid"
		RC=$?
	} 2>/dev/null
}

# Poll "$@" (a command) for about $POLL_S seconds until it succeeds; returns its last status.
POLL_S=10
poll() {
	local i
	for ((i = 0; i < POLL_S * 4; i++)); do
		"$@" && return 0
		sleep 0.25
	done
	"$@"
}

# The host lock: one descriptor for the whole campaign, locked per case. Runs are started with
# it closed ({LOCK_FD}>&-): a process of a run that outlived its case must not hold the lock.
exec {LOCK_FD}>"$LOCK"
# Take the host lock, then note the host-wide sysctls this case must leave as they are.
lock_host() {
	flock -w 600 "$LOCK_FD"
	SYSCTLS_BEFORE=$(sysctls)
}
# Release it, and give a test waiting for it the chance to take it before the next case does
# (flock is not fair).
unlock_host() {
	flock -u "$LOCK_FD"
	sleep 0.5
}

sysctls() {
	local k
	for k in $HOST_KEYS; do printf '%s=%s\n' "$k" "$(sysctl -n "$k" 2>/dev/null)"; done
}

# --- the run's own state ----------------------------------------------------------------------

# The prefix of the run whose directory is $1: journal header, meta.json, or a registry entry
# pointing into the directory. Empty when the run died before it had one.
run_prefix() {
	local dir=$1 p="" l
	[ -s "$dir/journal" ] && p=$(head -1 "$dir/journal" | awk '$1 == "stalenet-journal" && NF >= 6 { print $6 }')
	[ -z "$p" ] && [ -s "$dir/meta.json" ] &&
		p=$(sed -n 's/^ *"prefix": "\([^"]*\)".*/\1/p' "$dir/meta.json")
	if [ -z "$p" ] && [ -d /run/stalenet ]; then
		for l in /run/stalenet/*; do
			[ -L "$l" ] || continue
			case "$(readlink "$l")" in "$dir"/*) p=$(basename "$l") ;; esac
		done
	fi
	echo "$p"
}

# Which phase of its life the run killed in directory $1 was in, from what it left. With $2
# = reached: the furthest phase before teardown that a run which ended by itself had reached.
phase_of() {
	local dir=$1
	if [ ! -s "$dir/journal" ] || [ "$(wc -l < "$dir/journal")" -le 1 ]; then
		echo start
	elif [ "${2:-}" != reached ] && grep -q '^end$' "$dir/journal"; then
		echo summary
	elif [ "${2:-}" != reached ] && [ -f "$dir/events.csv" ] && grep -q ',stop,all,' "$dir/events.csv"; then
		echo teardown
	elif ls "$dir"/nodes/*.conf 2>/dev/null | grep -qv -e '-probe\.conf$' -e '/hub\.conf$'; then
		echo training
	elif ls "$dir"/nodes/*-probe.conf >/dev/null 2>&1; then
		echo linkcheck
	elif grep -q '^proc .* linkd$' "$dir/journal"; then
		echo shaping
	else
		echo testbed
	fi
}

# Prints one line per thing of the run (directory $1, prefix $2) still on the host; silent
# when there is none.
leftovers() {
	local dir=$1 p=$2 ns
	pgrep -a -f -- "$dir/" | sed 's/^/process: /'
	if [ -n "$p" ]; then
		pgrep -a -f -- "$p" | grep -v -e "^$$ " | sed 's/^/process: /'
		ls /run/netns 2>/dev/null | grep "^$p" | sed 's/^/namespace: /'
		ip -o link 2>/dev/null | grep -F -- "$p" | sed 's/^/host link: /'
		iptables-save 2>/dev/null | grep -F -- "$p" | sed 's/^/host iptables: /'
		ip netns exec "$FG" iptables-save 2>/dev/null | grep -F -- "$p" | sed 's/^/foreign iptables: /'
		ls /run/stalenet 2>/dev/null | grep -F -- "$p" | sed 's|^|/run/stalenet/|'
		ss -xap 2>/dev/null | grep -F -e "$p" -e "$dir/" | sed 's/^/socket: /'
	fi
	# Host-wide sysctls are shared with any other run: a difference counts only while no
	# other run is alive to explain it.
	if [ "$(sysctls)" != "$SYSCTLS_BEFORE" ] && ! other_runs_alive "$p"; then
		echo "sysctls: before: $(echo $SYSCTLS_BEFORE) after: $(echo $(sysctls))"
	fi
	if [ "$(foreign_state)" != "$FOREIGN_BEFORE" ]; then
		echo "foreign objects changed: before:"
		echo "$FOREIGN_BEFORE"
		echo "after:"
		foreign_state
	fi
}

# True when a run other than prefix $1 is registered and its orchestrator alive (same pid and
# start time as its journal header says).
other_runs_alive() {
	local l pid st
	for l in /run/stalenet/*; do
		[ -L "$l" ] && [ "$(basename "$l")" != "$1" ] || continue
		read -r _ _ pid st _ < "$l" 2>/dev/null || continue
		[ -r "/proc/$pid/stat" ] || continue
		[ "$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f20)" = "$st" ] && return 0
	done
	return 1
}

no_leftovers() { [ -z "$(leftovers "$@")" ]; }

# --- foreign objects: present throughout, must stay untouched ---------------------------------

FG=fgn-$(hex)
FGL=${FG#fgn-}
FG_CHAIN=CAMPFGN-$FGL
make_foreign() {
	ip netns add "$FG" &&
		ip link add "f${FGL}h" type veth peer name "f${FGL}n" netns "$FG" &&
		ip -n "$FG" link add "f${FGL}a" type veth peer name "f${FGL}b" &&
		iptables -t filter -N "$FG_CHAIN" &&
		iptables -t filter -A "$FG_CHAIN" -m comment --comment campaign-foreign -j RETURN &&
		ip netns exec "$FG" iptables -t filter -A INPUT -m comment --comment campaign-foreign -j ACCEPT
}
remove_foreign() {
	iptables -t filter -F "$FG_CHAIN" 2>/dev/null
	iptables -t filter -X "$FG_CHAIN" 2>/dev/null
	ip link del "f${FGL}h" 2>/dev/null
	ip netns del "$FG" 2>/dev/null
}
foreign_state() {
	ls /run/netns 2>/dev/null | grep -x -- "$FG"
	ip -o link show "f${FGL}h" 2>/dev/null | sed 's/ state [A-Z]*//; s/ qlen.*//' | cut -d' ' -f2-3
	ip -n "$FG" -o link 2>/dev/null | awk '{ print $2 }' | sort
	iptables-save -t filter 2>/dev/null | grep -F -- "$FG_CHAIN"
	ip netns exec "$FG" iptables-save -t filter 2>/dev/null | grep -F campaign-foreign
}

cleanup_campaign() {
	exec {LOCK_FD}>&-
	remove_foreign
	if mountpoint -q "$TMP/fullfs" 2>/dev/null; then umount "$TMP/fullfs"; fi
	if [ "${CAMPAIGN_KEEP:-}" = 1 ]; then
		echo "campaign: kept $TMP"
	else
		rm -rf "$TMP"
	fi
}
trap cleanup_campaign EXIT
trap 'exit 130' INT TERM HUP

if ! make_foreign; then
	echo "campaign: cannot create the foreign namespace and rules"
	exit 1
fi
FOREIGN_BEFORE=$(foreign_state)
SYSCTLS_BEFORE=$(sysctls)   # again in each case, under the host lock

report() { # $1 case text, $2 "" for pass or the reason
	if [ -z "$2" ]; then
		echo "$1: pass"
		PASSED=$((PASSED + 1))
	else
		echo "$1: FAIL"
		echo "$2" | sed 's/^/    /'
		FAILED=$((FAILED + 1))
	fi
}

# --- scenarios --------------------------------------------------------------------------------

# $1 file, $2 stop time, $3 workers, $4 on_node_failure, $5 linkcheck, $6 extra lines
write_scenario() {
	cat > "$1" <<EOF
name: campaign
seed: 7
stop: {time: $2}
data: {set: fashion-mnist, partition: {scheme: iid}}
model: {kind: softmax}
train: {batch: 32, lr: 0.05}
topology: {kind: parameter-server}
consistency: {barrier: asp}
workers: $3
eval: {every: 1s}
linkcheck: $5
on_node_failure: $4
network:
  default: {delay: 2ms, jitter: 1ms}
${6:-}
EOF
}

start_run() { # $1 scenario, $2 out dir; sets RUN_PID, RUN_T0
	RUN_T0=$(now)
	"$BIN" run "$1" --out "$2" --quiet --backend nfq > "$2.stdout" 2> "$2.stderr" {LOCK_FD}>&- &
	RUN_PID=$!
}

# --- 1. kill -9 of the orchestrator at random instants ----------------------------------------

kill_orchestrator_cases() {
	local scen=$TMP/small.yaml out rc dur i t phase why p left crc
	write_scenario "$scen" 3s 2 stop "{probes: 20}"
	# One full run first: its duration spreads the kill instants over the whole life.
	lock_host
	out=$TMP/ref
	start_run "$scen" "$out"
	wait_exit "$RUN_PID" 120; rc=$RC
	dur=$(fsub "$(now)" "$RUN_T0")
	why=""
	[ "$rc" = 0 ] || why="exit $rc; stderr: $(tail -5 "$out.stderr")"
	[ -z "$why" ] && ! poll no_leftovers "$out" "$(run_prefix "$out")" &&
		why=$(leftovers "$out" "$(run_prefix "$out")")
	unlock_host
	report "reference run: $dur s, exit $rc" "$why"
	[ "$rc" = 0 ] || return
	for ((i = 1; i <= KILLS; i++)); do
		uniform "$dur"
		t=$U
		out=$TMP/kill$i
		why=""
		lock_host
		start_run "$scen" "$out"
		sleep_until "$RUN_T0" "$t"
		{
			if kill -9 "$RUN_PID"; then
				phase=$(phase_of "$out")
			else
				phase=exited
			fi
		} 2>/dev/null
		wait_exit "$RUN_PID" 30; rc=$RC
		# A run that was over before its instant says the reference lasted longer than runs
		# do now (it may have met a busier host): the instants shrink towards the real life.
		[ "$phase" = exited ] && dur=$(awk -v d="$dur" 'BEGIN { printf "%.3f", d * 0.9 }')
		p=$(run_prefix "$out")
		"$BIN" cleanup "$out" > "$out.cleanup" 2>&1 {LOCK_FD}>&-
		crc=$?
		[ "$crc" = 0 ] || why="stalenet cleanup exit $crc: $(tail -5 "$out.cleanup")"
		if ! poll no_leftovers "$out" "$p"; then
			left=$(leftovers "$out" "$p")
			why="${why:+$why
}left behind (prefix ${p:-none}): $left"
		fi
		if [ -n "$p" ] && [ -s "$out/journal" ] && [ "$(tail -1 "$out/journal")" != end ]; then
			why="${why:+$why
}journal does not end with 'end'"
		fi
		unlock_host
		report "kill-orchestrator $i/$KILLS at $t s ($phase)" "$why"
	done
}

# --- 2. kill -9 of a node or of stalenet-linkd mid-training -----------------------------------

# Lines 1..n (whole lines) of every CSV in snapshot dir $1 are still in run dir $2; every CSV of
# $2 parses (header field count, final newline). Prints what is wrong.
check_traces() {
	local snap=$1 dir=$2 f rel n
	while IFS= read -r f; do
		rel=${f#"$dir"/}
		[ -s "$f" ] || continue
		if [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" != '\n' ]; then
			echo "$rel: the last line has no newline (a partial line)"
		fi
		awk -f "$HERE/csvcheck.awk" "$f" | sed "s|^$dir/||"
	done < <(find "$dir" -name '*.csv' -type f | sort)
	[ -d "$snap" ] || return 0
	while IFS= read -r f; do
		rel=${f#"$snap"/}
		# Whole lines of the copy taken before the kill.
		n=$(awk '{ n += length($0) + 1 } END { print n + 0 }' "$f")
		if [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" != '\n' ]; then
			n=$(($(wc -c < "$f") - $(tail -n 1 "$f" | wc -c)))
		fi
		[ "$n" -gt 0 ] || continue
		if [ ! -f "$dir/$rel" ]; then
			echo "$rel: gone after the kill"
		elif ! cmp -s -n "$n" "$f" "$dir/$rel"; then
			echo "$rel: lines written before the kill changed"
		fi
	done < <(find "$snap" -name '*.csv' -type f | sort)
}

# Wait up to $3 s until progress.csv of run dir $1 has $2 rows while pid $RUN_PID lives.
wait_training() {
	local dir=$1 rows=$2 limit=$3 i
	for ((i = 0; i < limit * 10; i++)); do
		kill -0 "$RUN_PID" 2>/dev/null || return 1
		[ -f "$dir/progress.csv" ] && [ "$(wc -l < "$dir/progress.csv")" -gt "$rows" ] && return 0
		sleep 0.1
	done
	return 1
}

# $1 case name, $2 victim: worker or linkd, $3 on_node_failure
kill_mid_run_case() {
	local name=$1 victim=$2 policy=$3 scen=$TMP/$1.yaml out=$TMP/$1 why="" pid p w rc st want_rc want_st ev
	write_scenario "$scen" 8s 3 "$policy" "{probes: 10}"
	lock_host
	start_run "$scen" "$out"
	if ! wait_training "$out" 10 60; then
		why="training did not start: $(tail -5 "$out.stderr")"
	fi
	p=$(run_prefix "$out")
	if [ -z "$why" ]; then
		uniform 2
		sleep "$U"
		if [ "$victim" = linkd ]; then
			pid=$(pgrep -f -- "linkd-$p.sock" | head -1)
			w=linkd
		else
			w=worker$((RANDOM % 3))
			pid=$(pgrep -f -- "$out/nodes/$w.conf" | head -1)
		fi
		rm -rf "$out.snap" && cp -r "$out" "$out.snap"
		if [ -z "$pid" ] || ! kill -9 "$pid"; then
			why="no live $w to kill"
		fi
	fi
	wait_exit "$RUN_PID" 60; rc=$RC
	if [ "$rc" = timeout ]; then
		why="${why:+$why; }still running 60 s later"
		kill -INT "$RUN_PID"
		wait_exit "$RUN_PID" 30; rc=$RC
	fi
	if [ -z "$why" ]; then
		st=$(sed -n 's/^ *"status": "\([^"]*\)".*/\1/p' "$out/meta.json" 2>/dev/null)
		if [ "$victim" = linkd ]; then
			want_rc=1 want_st=failed ev=",linkd_failed,linkd,"
		elif [ "$policy" = stop ]; then
			want_rc=1 want_st=failed ev=",node_failed,$w,"
		else
			want_rc=0 want_st=complete ev=",node_failed,$w,"
		fi
		[ "$rc" = "$want_rc" ] || why="exit $rc, want $want_rc; stderr: $(tail -3 "$out.stderr")"
		[ "$st" = "$want_st" ] || why="${why:+$why
}status '$st', want '$want_st'"
		grep -q -- "$ev" "$out/events.csv" 2>/dev/null || why="${why:+$why
}no '$ev' row in events.csv"
		if [ "$policy" = continue ] && [ "$victim" != linkd ]; then
			# The run went on: training rows after the kill (progress.csv grows to stop.time).
			local t_last
			t_last=$(tail -1 "$out/progress.csv" | cut -d, -f1)
			awk -v t="$t_last" 'BEGIN { exit !(t >= 7.5) }' ||
				why="${why:+$why
}progress.csv ends at $t_last s, before stop.time 8 s"
		fi
		local bad
		bad=$(check_traces "$out.snap" "$out")
		[ -z "$bad" ] || why="${why:+$why
}$bad"
	fi
	if ! poll no_leftovers "$out" "$p"; then
		why="${why:+$why
}left behind: $(leftovers "$out" "$p")"
	fi
	unlock_host
	report "$name (${w:-?}, on_node_failure $policy, exit $rc)" "$why"
}

# --- 3. the output directory on a full file system --------------------------------------------

# $1 size in kB; $2 "training" when the file system must fill up mid-training (the size was
# chosen so), else empty (smaller sizes fail earlier: the phase is only printed).
full_fs_case() {
	local size=$1 want_phase=${2:-} scen=$TMP/fullfs.yaml mnt=$TMP/fullfs out rc why="" p phase bad
	write_scenario "$scen" 20s 2 stop "{probes: 10}"
	mkdir -p "$mnt"
	if ! mount -t tmpfs -o "size=${size}k,mode=755" campaign-fullfs "$mnt"; then
		report "full-fs ${size} kB" "cannot mount a tmpfs on $mnt"
		return
	fi
	lock_host
	out=$mnt/out
	RUN_T0=$(now)
	"$BIN" run "$scen" --out "$out" --quiet --backend nfq > "$TMP/fullfs.stdout" 2> "$TMP/fullfs-$size.stderr" \
		{LOCK_FD}>&- &
	RUN_PID=$!
	wait_exit "$RUN_PID" 90; rc=$RC
	p=$(run_prefix "$out")
	if [ "$rc" = timeout ]; then
		why="still running 90 s later"
		kill -INT "$RUN_PID"
		wait_exit "$RUN_PID" 30; rc=$RC
	elif [ "$rc" = 0 ]; then
		why="exit 0 on a ${size} kB file system"
	fi
	# The first error names the file and the cause.
	grep -m1 ' E ' "$TMP/fullfs-$size.stderr" | grep -q -F -e "$mnt/" ||
		why="${why:+$why
}the first error does not name a file under $mnt: $(grep -m1 ' E ' "$TMP/fullfs-$size.stderr")"
	grep -m1 ' E ' "$TMP/fullfs-$size.stderr" | grep -q "No space left on device" ||
		why="${why:+$why
}the first error does not say 'No space left on device': $(tail -3 "$TMP/fullfs-$size.stderr")"
	if ! poll no_leftovers "$out" "$p"; then
		why="${why:+$why
}left behind (prefix ${p:-none}): $(leftovers "$out" "$p")"
	fi
	phase=$(phase_of "$out" reached)
	[ -z "$want_phase" ] || [ "$phase" = "$want_phase" ] || why="${why:+$why
}the file system filled up in $phase, not in $want_phase: the case wants another size"
	# Every trace still parses: a row the full disk cut short is taken back by collectors/csv.
	bad=$(check_traces /dev/null "$out" 2>/dev/null | head -3)
	[ -z "$bad" ] || why="${why:+$why
}$bad"
	unlock_host
	report "full-fs ${size} kB (failed in $phase, exit $rc: $(grep -m1 ' E ' "$TMP/fullfs-$size.stderr" | sed 's/^[^ ]* E //'))" "$why"
	umount "$mnt"
}

# --- 4. soak ----------------------------------------------------------------------------------

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# Open descriptors of pid $1: the least of five looks 50 ms apart, so that one opened for a
# moment (linkd's per-request connection, events.csv opened to append a row) is not counted.
fds() {
	local i n min=""
	for ((i = 0; i < 5; i++)); do
		n=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
		[ -z "$min" ] || [ "$n" -lt "$min" ] && min=$n
		sleep 0.05
	done
	echo "$min"
}

soak_case() {
	local secs=$1 n=$2 scen=$TMP/soak.yaml out=$TMP/soak why="" p lpid t0 t rc
	local rss0="" lrss0="" fd0="" lfd0="" rss lrss fd lfd rssmid samples=$TMP/soak.samples
	write_scenario "$scen" "$((secs + 15))s" "$n" continue off \
		"stragglers:
  - {nodes: workers, compute: {delay: {dist: constant, value: 500ms}}}"
	sed -i 's/eval: {every: 1s}/eval: {every: 10s}/' "$scen"
	SYSCTLS_BEFORE=$(sysctls)
	start_run "$scen" "$out"
	if ! wait_training "$out" 1 300; then
		report "soak" "training did not start: $(tail -5 "$out.stderr")"
		wait_exit "$RUN_PID" 1
		return
	fi
	p=$(run_prefix "$out")
	lpid=$(pgrep -f -- "linkd-$p.sock" | head -1)
	t0=$(now)
	echo "t_s orchestrator_rss_kb orchestrator_fds linkd_rss_kb linkd_fds" > "$samples"
	for ((t = 0; t <= secs; t += 5)); do
		sleep_until "$t0" "$t"
		rss=$(rss_kb "$RUN_PID") fd=$(fds "$RUN_PID") lrss=$(rss_kb "$lpid") lfd=$(fds "$lpid")
		echo "$t $rss $fd $lrss $lfd" >> "$samples"
		if [ -z "$rss" ] || [ -z "$lrss" ]; then
			why="orchestrator or linkd gone at $t s"
			break
		fi
		if [ "$t" -ge 60 ] && [ -z "$rss0" ]; then
			rss0=$rss lrss0=$lrss fd0=$fd lfd0=$lfd
		elif [ -n "$rss0" ]; then
			[ "$fd" = "$fd0" ] || why="${why:+$why
}orchestrator fds $fd0 at 60 s, $fd at $t s"
			[ "$lfd" = "$lfd0" ] || why="${why:+$why
}linkd fds $lfd0 at 60 s, $lfd at $t s"
		fi
	done
	if [ -n "$rss0" ] && [ -n "$rss" ] && [ -n "$lrss" ]; then
		# The orchestrator's ZeroMQ control socket keeps one queue per node connection in
		# 16 kB blocks of 256 messages; a queue takes its second block (and then recycles the
		# two) once its node has sent 256 status messages, about 2 to 4 minutes into a soak of
		# 500 ms steps. That one-time growth, at most 2 blocks a node, is allowed on top of the
		# 1%; the second half of the soak, long after it, must grow less than 1% by itself.
		awk -v a="$rss0" -v b="$rss" -v n="$((n + 1))" 'BEGIN { exit !(b <= a * 1.01 + n * 32) }' ||
			why="${why:+$why
}orchestrator RSS $rss0 kB at 60 s, $rss kB at $secs s (> 1% + 32 kB a node)"
		rssmid=$(awk -v h="$((secs / 2))" 'NR > 1 && $1 >= h { print $2; exit }' "$samples")
		awk -v a="$rssmid" -v b="$rss" 'BEGIN { exit !(a != "" && b <= a * 1.01) }' ||
			why="${why:+$why
}orchestrator RSS $rssmid kB at $((secs / 2)) s, $rss kB at $secs s (> 1%)"
		awk -v a="$lrss0" -v b="$lrss" 'BEGIN { exit !(b <= a * 1.01) }' ||
			why="${why:+$why
}linkd RSS $lrss0 kB at 60 s, $lrss kB at $secs s (> 1%)"
	fi
	[ -n "$rss0" ] || why="${why:+$why
}the soak must last at least 60 s"
	wait_exit "$RUN_PID" 120; rc=$RC
	if [ "$rc" = timeout ]; then
		kill -INT "$RUN_PID"
		wait_exit "$RUN_PID" 60; rc=$RC
	fi
	[ "$rc" = 0 ] || why="${why:+$why
}exit $rc: $(tail -3 "$out.stderr")"
	poll no_leftovers "$out" "$p" || why="${why:+$why
}left behind: $(leftovers "$out" "$p")"
	report "soak $n workers $secs s (orchestrator RSS ${rss0:-?} -> ${rssmid:-?} -> ${rss:-?} kB, fds ${fd0:-?} -> ${fd:-?}; linkd RSS ${lrss0:-?} -> ${lrss:-?} kB, fds ${lfd0:-?} -> ${lfd:-?})" "$why"
}

# --- 0. the trace checker catches what it must ------------------------------------------------

# check_traces on hand-made files: each bad one must be reported, the good ones not.
csvcheck_case() {
	local d=$TMP/csvcheck why="" out
	mkdir -p "$d/run" "$d/snap"
	printf 't_s,a,b\n1,x,y\n2,"p,q",z\n3,"multi\nline",w\n' > "$d/run/good.csv"
	printf 't_s,a,b\n1,x,y\n2,x\n' > "$d/run/fields.csv"
	printf 't_s,a,b\n1,x,y\n2,x,' > "$d/run/partial.csv"
	printf 't_s,a,b\n1,"x,y\n' > "$d/run/quote.csv"
	printf 't_s,a,b\n1,x,y\n2,x,y\n' > "$d/snap/kept.csv"
	printf 't_s,a,b\n1,x,y\n2,X,y\n3,x,y\n' > "$d/run/kept.csv"
	out=$(check_traces "$d/snap" "$d/run")
	echo "$out" | grep -q '^fields.csv:3: 2 fields, the header has 3' || why="fields.csv not reported"
	echo "$out" | grep -q '^partial.csv: the last line has no newline' || why="$why; partial.csv not reported"
	echo "$out" | grep -q '^quote.csv:2: a quoted field never closes' || why="$why; quote.csv not reported"
	echo "$out" | grep -q '^kept.csv: lines written before the kill changed' || why="$why; kept.csv not reported"
	echo "$out" | grep -q '^good.csv' && why="$why; good.csv reported"
	report "csvcheck self-test" "${why#; }${why:+
checker said: $out}"
}

# --- the campaign -----------------------------------------------------------------------------

csvcheck_case

[ "$KILLS" -gt 0 ] && kill_orchestrator_cases
if [ "$NODES" = 1 ]; then
	kill_mid_run_case kill-node-stop worker stop
	kill_mid_run_case kill-node-continue worker continue
	kill_mid_run_case kill-linkd linkd stop
fi
if [ "$FULLFS" = 1 ]; then
	# 96 kB fills up mid-training (the smaller sizes earlier: meta.json, the probes' configurations).
	for size in ${CAMPAIGN_FULLFS_KB:-96}; do
		full_fs_case "$size" "$([ "$size" -ge 96 ] && echo training)"
	done
fi
[ "$SOAK" -gt 0 ] && soak_case "$SOAK" "$SOAK_WORKERS"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
