#!/bin/sh
# The fleet tables of docs/fleet.md, from the runs' fleet_summary.csv and summary.csv.
#
#   scripts/fleet-table.sh table DIR       one row per run of a fleet sweep (strategy x model)
#   scripts/fleet-table.sh breakeven DIR   bytes per version by strategy and fleet.sync
#   scripts/fleet-table.sh all [OUT]       run the sweeps (root; about 45 minutes) into OUT
#                                          (default runs/fleet-tables) and print every table
#
# Columns are looked up by name, so a sweep with other keys still works. Needs awk.
set -eu

die() { echo "fleet-table: $*" >&2; exit 2; }

# Print a fleet sweep's table (markdown).
table() {
	dir=$1
	[ -f "$dir/fleet_summary.csv" ] || die "$dir/fleet_summary.csv: none (stalenet summary $dir makes it)"
	echo "| model | strategy | made | unacked | stored | KiB sent | KiB stored | KiB sent/version | KiB stored/version | MiB/device-hour | lag mean s | lag max s | verified | rebuild mean ms | rebuild max ms | accuracy |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	awk -F, -v SUM="$dir/summary.csv" '
	function col(name) { if (!(name in C)) { print "fleet-table: no column " name > "/dev/stderr"; exit 2 } return C[name] }
	BEGIN {
		while ((getline line < SUM) > 0) {
			n = split(line, f, ",")
			if (!hs) { for (i = 1; i <= n; i++) S[f[i]] = i; hs = 1; continue }
			acc[f[S["run_id"]]] = f[S["final_accuracy"]]
		}
	}
	NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
	{
		model = ("model.kind" in C) ? $C["model.kind"] : "-"
		strat = ("fleet.strategy" in C) ? $C["fleet.strategy"] : "-"
		v = $col("versions"); made = $col("versions_made")
		printf "| %s | %s | %d | %d | %d | %.0f | %.0f | %.1f | %.1f | %.1f | %s | %s | %s/%s | %.1f | %.1f | %s |\n",
		       model, strat, made, made - v, v, $col("bytes_tx") / 1024, $col("bytes_stored") / 1024,
		       v ? $col("bytes_tx") / 1024 / v : 0, $col("stored_per_version") / 1024,
		       $col("bytes_per_device_hour") / 1048576, $col("registry_lag_mean_s"),
		       $col("registry_lag_max_s"), $col("recover_versions") - $col("recover_failed"),
		       $col("recover_versions"), $col("recover_s_mean") * 1000, $col("recover_s_max") * 1000,
		       acc[$col("run_id")]
	}' "$dir/fleet_summary.csv" | sort -t'|' -k2,2r -k3,3
}

# Bytes sent per stored version by strategy (rows) and sync (columns), with the samples a
# version covers (sync steps x batch).
breakeven() {
	dir=$1
	[ -f "$dir/fleet_summary.csv" ] || die "$dir/fleet_summary.csv: none"
	batch=$(sed -n 's/.*batch: *\([0-9][0-9]*\).*/\1/p' "$(ls -d "$dir"/*/scenario.yaml | head -1)" | head -1)
	awk -F, -v B="${batch:-32}" '
	NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
	{
		s = $C["fleet.strategy"]; y = $C["fleet.sync"]; sub(/ steps/, "", y); y += 0
		if (!(y in Y)) { Y[y] = 1; ny++; ys[ny] = y }
		if (!(s in SS)) { SS[s] = 1; ns++; ss[ns] = s }
		v = $C["versions"]
		bpv[s, y] = v ? $C["bytes_tx"] / v : -1
	}
	END {
		for (i = 1; i <= ny; i++) for (j = i + 1; j <= ny; j++) if (ys[j] < ys[i]) { t = ys[i]; ys[i] = ys[j]; ys[j] = t }
		printf "| strategy |"; for (i = 1; i <= ny; i++) printf " %d steps (%d samples) |", ys[i], ys[i] * B; print ""
		printf "| --- |"; for (i = 1; i <= ny; i++) printf " ---: |"; print ""
		for (j = 1; j <= ns; j++) {
			printf "| %s |", ss[j]
			for (i = 1; i <= ny; i++) printf " %.0f |", bpv[ss[j], ys[i]]
			print ""
		}
	}' "$dir/fleet_summary.csv"
}

all() {
	out=${1:-runs/fleet-tables}
	bin=$(dirname "$0")/../build/stalenet
	for s in lan cellular intermittent breakeven newdata; do
		cat /proc/loadavg
		"$bin" run "scenarios/fleet-$s.yaml" --out "$out/$s" --quiet
	done
	for s in lan cellular intermittent; do echo "## $s"; table "$out/$s"; done
	for s in breakeven newdata; do echo "## $s (bytes per version)"; breakeven "$out/$s"; done
}

[ $# -ge 1 ] || die "usage: fleet-table.sh table DIR | breakeven DIR | all [OUT]"
cmd=$1; shift
case $cmd in
table|breakeven) [ $# -eq 1 ] || die "usage: fleet-table.sh $cmd DIR"; "$cmd" "$1" ;;
all) all "$@" ;;
*) die "unknown command $cmd" ;;
esac
