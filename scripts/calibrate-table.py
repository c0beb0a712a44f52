#!/usr/bin/env python3
"""Helper of scripts/calibrate-compare.sh (reads run directories, runs nothing).

  calibrate-table.py zip EMULATED_DIR
      the --set arguments, one a line, that make `stalenet simulate` plan the emulated sweep's
      runs in the emulated order (same run index, so the same seed), run i with the profile of
      emulated run i: a zip of the emulated sweep keys with simulation.profile, repeat 1.
  calibrate-table.py table OUT... [--target ACC]... [--only BARRIER,...] [--smooth K] [--interp]
      the side-by-side table (markdown) of OUT/emulated, OUT/simulated and OUT/calibrated, and
      which of the calibration bounds hold, per sweep point (runs with equal sweep values but
      the simulation-only keys are its repeats: the numbers are means over them). The
      simulations of other simulation.seed values, OUT/simulated.seedN and
      OUT/calibrated.seedN, count as more runs of the same points (averaged with the others:
      the simulator's own noise is not counted as model error). --smooth K: time to target on
      the mean of the last K evaluations (an accuracy that jumps between model versions
      crosses a target first at whichever version the evaluation grid hits). --interp: the
      crossing interpolated linearly between the last evaluation below the target and the
      first at or above it (instead of the time of that first one). Several OUTs (comparisons
      of one scenario under other seeds): their runs are pooled as repeats of the same points;
      --only keeps the points of the consistency.barrier values named (e.g. leave out one
      measured under another rule).
  calibrate-table.py between OUT_A OUT_B --target ACC... [--only BARRIER,...] [--smooth K] [--interp]
      the testbed against itself: OUT_B/emulated held to the same bounds against OUT_A/emulated
      (two emulated campaigns of the same scenario under other seeds), point by point; how far
      apart two sets of emulated repeats lie is the floor under any simulation's agreement.
  calibrate-table.py workers OUT [--point P]...
      every worker's final step in each emulated run (of the points named, all without
      --point) beside the same worker in the uncalibrated and calibrated simulations of the
      same plan index (simulation.seed 0), and per run the spreads and the mean and largest
      per-worker difference.
"""
import csv
import json
import os
import statistics
import sys

KINDS = [("emulated", "emulated"), ("simulated", "simulated, uncalibrated"),
         ("calibrated", "simulated, calibrated")]


def runs_of(sweep_dir):
    out = []
    for name in sorted(os.listdir(sweep_dir)):
        meta = os.path.join(sweep_dir, name, "meta.json")
        if name.startswith(".") or not os.path.isfile(meta):
            continue
        with open(meta) as f:
            m = json.load(f)
        m["_dir"] = os.path.join(sweep_dir, name)
        out.append(m)
    return out


def point(m):
    """The sweep values that name the experiment (simulation-only keys left out)."""
    sw = m.get("sweep") or {}
    return tuple((k, str(v)) for k, v in sw.items() if not k.startswith("simulation."))


def zip_args(emulated):
    runs = sorted(runs_of(emulated), key=lambda m: m["run_index"])
    if not runs:
        sys.exit("%s: no runs" % emulated)
    if [m["run_index"] for m in runs] != list(range(len(runs))):
        sys.exit("%s: the sweep is incomplete (run indices %s)" %
                 (emulated, [m["run_index"] for m in runs]))
    for m in runs:
        if m.get("status") != "complete":
            sys.exit("%s: %s" % (m["_dir"], m.get("status") or "no status"))
    keys = [k for k, _ in point(runs[0])]
    args = ["--set", "sweep.repeat=1"]
    for k in keys:
        vals = [dict(point(m))[k] for m in runs]
        args += ["--set", "sweep.%s=[%s]" % (k, ", ".join(json.dumps(v) for v in vals))]
    profiles = [os.path.abspath(os.path.join(m["_dir"], "profile.conf")) for m in runs]
    for p in profiles:
        if not os.path.isfile(p):
            sys.exit("%s: missing (run stalenet calibrate first)" % p)
    args += ["--set", "sweep.simulation.profile=[%s]" % ", ".join(json.dumps(p) for p in profiles)]
    args += ["--set", "sweep.zip=[[%s]]" % ", ".join(keys + ["simulation.profile"])]
    print("\n".join(args))


def summary_rows(sweep_dir):
    """summary.csv rows by seed (each run of a plan has its own; a long run id is cut short
    in summary.csv, so the id does not name a row)."""
    with open(os.path.join(sweep_dir, "summary.csv")) as f:
        return {r["seed"]: r for r in csv.DictReader(f)}


SMOOTH = 1
INTERP = False


def crossing(series, target, interp):
    """series: [(t, accuracy)]. The time of the first point at or above target, or None; with
    interp, the time where the straight line from the point before it reaches target (the
    first point itself when it is the series' first)."""
    prev = None
    for t, a in series:
        if a >= target:
            if not interp or prev is None or a == prev[1]:
                return t
            return prev[0] + (target - prev[1]) / (a - prev[1]) * (t - prev[0])
        prev = (t, a)
    return None


def time_to(run_dir, target):
    """Time to target (s) of a run, or None: on the evaluations, or with SMOOTH > 1 on the mean
    of the last SMOOTH evaluations (from the SMOOTH-th on); interpolated with INTERP."""
    window, series = [], []
    with open(os.path.join(run_dir, "eval.csv")) as f:
        for r in csv.DictReader(f):
            window = (window + [float(r["test_accuracy"])])[-SMOOTH:]
            if len(window) == SMOOTH:
                series.append((float(r["t_s"]), sum(window) / SMOOTH))
    return crossing(series, target, INTERP)


def num(r, k):
    try:
        return float(r[k])
    except (KeyError, ValueError):
        return float("nan")


def collect(sweep_dir, targets):
    """{point: [per-run dict]} ({} when the sweep was not run)"""
    if not os.path.isfile(os.path.join(sweep_dir, "summary.csv")):
        return {}
    rows = summary_rows(sweep_dir)
    out = {}
    for m in runs_of(sweep_dir):
        r = rows.get(str(m.get("seed")))
        if r is None:
            continue
        d = {k: num(r, k) for k in ("steps_min", "steps_median", "steps_max", "wait_fraction",
                                    "staleness_mean", "staleness_p99", "final_accuracy")}
        d["spread"] = d["steps_max"] - d["steps_min"]
        d["ttt"] = [time_to(m["_dir"], t) for t in targets]
        d["seed"] = m.get("seed")
        d["index"] = m.get("run_index")
        out.setdefault(point(m), []).append(d)
    return out


def mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.mean(xs) if xs else None


def fmt(x, digits=1):
    if x is None:
        return "-"
    return ("%." + str(digits) + "f") % x


def ttt_text(runs, k):
    """The mean time to target k over the runs, and per run of the emulated sweep in brackets
    (the simulations of one run under several simulation.seed values averaged first)."""
    ts = [r["ttt"][k] for r in runs]
    reached = [t for t in ts if t is not None]
    if not reached:
        return "not reached", None
    m = statistics.mean(reached)
    txt = "%.1f s" % m
    per = {}
    for r in runs:
        per.setdefault(r["index"], []).append(r["ttt"][k])
    if len(per) > 1:
        txt += " (%s)" % ", ".join(
            "%.0f" % statistics.mean([t for t in v if t is not None])
            if any(t is not None for t in v) else "-" for v in per.values())
    if len(reached) < len(ts):
        txt += ", %d of %d reached" % (len(reached), len(ts))
    return txt, (m if len(reached) == len(ts) else None)


def point_means(rs, ntargets):
    """The means over runs rs of one point: the table's figures and the times to target (None
    for a target some run did not reach)."""
    mm = {k: mean([r[k] for r in rs]) for k in rs[0] if k not in ("ttt", "seed", "index")}
    mm["texts"], mm["ttt"] = [], []
    for k in range(ntargets):
        txt, tt = ttt_text(rs, k)
        mm["texts"].append(txt)
        mm["ttt"].append(tt)
    return mm


def verdict_cells(e, c, ntargets):
    """The bounds' cells of c (means of a point) against e: median final step within 10%,
    spread within 2 steps or 10%, wait fraction within 0.05, each time to target within 15%."""
    dm = (c["steps_median"] - e["steps_median"]) / e["steps_median"]
    ds = c["spread"] - e["spread"]
    dw = c["wait_fraction"] - e["wait_fraction"]
    cells = ["%+.1f%% %s" % (100 * dm, "met" if abs(dm) <= 0.10 else "NOT met"),
             "%+.1f steps %s" % (ds, "met" if abs(ds) <= max(2, 0.10 * e["spread"]) else "NOT met"),
             "%+.3f %s" % (dw, "met" if abs(dw) <= 0.05 else "NOT met")]
    for k in range(ntargets):
        if e["ttt"][k] is None or c["ttt"][k] is None:
            cells.append("not reached in every run")
        else:
            dt = (c["ttt"][k] - e["ttt"][k]) / e["ttt"][k]
            cells.append("%+.1f%% %s" % (100 * dt, "met" if abs(dt) <= 0.15 else "NOT met"))
    return cells


def between(first, second, targets, only=None):
    """The testbed against itself: the emulated sweep of the comparison `second` held to the
    calibration bounds against that of `first` (the same scenario under other seeds), point by
    point: how far two emulated campaigns of the same points lie apart."""
    data = []
    for out_dir in (first, second):
        got = collect(os.path.join(out_dir, "emulated"), targets)
        data.append({p: rs for p, rs in got.items()
                     if not only or dict(p).get("consistency.barrier") in only})
    print("Emulated %s against emulated %s (means over the repeats; the calibration bounds):\n"
          % (second, first))
    print("| point | median final step (within 10%%) | spread (within 2 steps or 10%%) | "
          "wait fraction (within 0.05) | %s |" %
          " | ".join("time to %g (within 15%%)" % t for t in targets))
    print("| --- | --- | --- | --- |%s" % (" --- |" * len(targets)))
    for p, rs in data[0].items():
        if p not in data[1]:
            continue
        e, c = point_means(rs, len(targets)), point_means(data[1][p], len(targets))
        name = ", ".join(v for _, v in p) or "run"
        print("| %s | %s |" % (name, " | ".join(verdict_cells(e, c, len(targets)))))


def table(out_dirs, targets, only=None):
    if not targets:
        emulated = os.path.join(out_dirs[0], "emulated")
        with open(os.path.join(runs_of(emulated)[0]["_dir"], "meta.json")) as f:
            targets = [json.load(f)["target"]]
    data = {kind: {} for kind, _ in KINDS}
    bad = []
    for n, out_dir in enumerate(out_dirs):
        got = {}
        for kind, _ in KINDS:
            got[kind] = collect(os.path.join(out_dir, kind), targets)
            if kind == "emulated":
                continue
            # the same sweep under other simulation.seed values: more runs of the same points
            for extra in sorted(os.listdir(out_dir)):
                if extra.startswith(kind + ".seed") and os.path.isdir(os.path.join(out_dir, extra)):
                    for p, rs in collect(os.path.join(out_dir, extra), targets).items():
                        got[kind].setdefault(p, []).extend(rs)
        # the calibrated runs carry the emulated seeds (same plan index)
        emu_seeds = {r["index"]: r["seed"] for rs in got["emulated"].values() for r in rs}
        bad += sorted({"%s run %d" % (out_dir, r["index"]) for rs in got["calibrated"].values()
                       for r in rs if emu_seeds.get(r["index"]) != r["seed"]})
        # several comparisons pooled: their runs are more repeats of the same points
        for kind, _ in KINDS:
            for p, rs in got[kind].items():
                if only and dict(p).get("consistency.barrier") not in only:
                    continue
                for r in rs:
                    r["index"] = (n, r["index"])
                data[kind].setdefault(p, []).extend(rs)
    what = ("the mean of the last %d evaluations" % SMOOTH) if SMOOTH > 1 else "the test accuracy"
    if INTERP:
        print("Time to target: where %s crosses the accuracy named, interpolated linearly "
              "between the last evaluation below it and the first at or above it; mean over "
              "the runs, each in brackets.\n" % what)
    else:
        print("Time to target: the first evaluation at which %s is at or above the accuracy "
              "named; mean over the runs, each in brackets.\n" % what)
    print("| point | runs | count | steps min / median / max | spread | wait fraction | "
          "staleness mean / p99 | final accuracy | %s |" %
          " | ".join("time to %g" % t for t in targets))
    print("| --- | --- | --- | --- | --- | --- | --- | --- |%s" % (" --- |" * len(targets)))
    verdicts = []
    for p in data["emulated"]:
        name = ", ".join(v for _, v in p) or "run"
        means = {}
        for kind, label in KINDS:
            rs = data[kind].get(p, [])
            if not rs:
                continue
            mm = point_means(rs, len(targets))
            texts = mm["texts"]
            means[kind] = mm
            print("| %s | %s | %d | %s / %s / %s | %s | %.3f | %.2f / %.0f | %.3f | %s |" % (
                name, label, len(rs), fmt(mm["steps_min"]), fmt(mm["steps_median"]),
                fmt(mm["steps_max"]), fmt(mm["spread"]), mm["wait_fraction"],
                mm["staleness_mean"], mm["staleness_p99"], mm["final_accuracy"],
                " | ".join(texts)))
        verdicts.append((name, means))
    print("\nCalibrated against emulated (means over the repeats; the issue's bounds):\n")
    print("| point | median final step (within 10%%) | spread (within 2 steps or 10%%) | "
          "wait fraction (within 0.05) | %s |" %
          " | ".join("time to %g (within 15%%)" % t for t in targets))
    print("| --- | --- | --- | --- |%s" % (" --- |" * len(targets)))
    for name, means in verdicts:
        e, c = means.get("emulated"), means.get("calibrated")
        if e and c:
            print("| %s | %s |" % (name, " | ".join(verdict_cells(e, c, len(targets)))))
    if bad:
        print("\nwarning: calibrated runs do not carry their emulated run's seed: %s" % ", ".join(bad))


def final_steps(run_dir):
    """{worker: final step} of one run: workers.csv when the run has one (simulations), else the
    last row of every nodes/<worker>.csv."""
    out = {}
    wcsv = os.path.join(run_dir, "workers.csv")
    if os.path.isfile(wcsv):
        with open(wcsv) as f:
            for r in csv.DictReader(f):
                out[r["node"]] = int(float(r["final_step"]))
        return out
    nodes = os.path.join(run_dir, "nodes")
    for name in sorted(os.listdir(nodes)):
        if not name.endswith(".csv") or name.startswith(("server", ".")):
            continue
        last = None
        with open(os.path.join(nodes, name)) as f:
            for r in csv.DictReader(f):
                last = r
        if last is not None and last.get("step") not in (None, ""):
            out[name[:-4]] = int(float(last["step"]))
    return out


def worker_key(name):
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)


def workers(out_dir, names):
    runs = {kind: {m["run_index"]: m for m in runs_of(os.path.join(out_dir, kind))}
            for kind, _ in KINDS}
    print("Final step per worker: each emulated run beside the simulated runs of the same plan "
          "index (same seed); diff = calibrated - emulated.\n")
    summary = []
    for idx in sorted(runs["emulated"]):
        em = runs["emulated"][idx]
        name = ", ".join(v for _, v in point(em)) or "run"
        if names and name not in names:
            continue
        steps = {kind: final_steps(runs[kind][idx]["_dir"]) if idx in runs[kind] else {}
                 for kind, _ in KINDS}
        e, u, c = steps["emulated"], steps["simulated"], steps["calibrated"]
        print("%s, repeat %s (run %d, seed %s):\n" % (name, em.get("repeat"), idx, em.get("seed")))
        print("| worker | emulated | simulated, uncalibrated | simulated, calibrated | diff |")
        print("| --- | --- | --- | --- | --- |")
        diffs = []
        for w in sorted(e, key=worker_key):
            d = c[w] - e[w] if w in c else None
            if d is not None:
                diffs.append(d)
            print("| %s | %d | %s | %s | %s |" % (w, e[w], u.get(w, "-"), c.get(w, "-"),
                                                  "%+d" % d if d is not None else "-"))
        print()
        summary.append((name, em.get("repeat"), e, u, c, diffs))
    print("| point | repeat | spread emulated | uncalibrated | calibrated | "
          "mean abs diff per worker | largest abs diff |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, rep, e, u, c, diffs in summary:
        def spread(x):
            return "%d" % (max(x.values()) - min(x.values())) if x else "-"
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            name, rep, spread(e), spread(u), spread(c),
            "%.2f" % statistics.mean(abs(d) for d in diffs) if diffs else "-",
            "%d" % max(abs(d) for d in diffs) if diffs else "-"))


def table_args(args):
    """(targets, dirs, only) of table's and between's arguments"""
    targets, dirs, only, i = [], [], None, 0
    while i < len(args):
        if args[i] in ("--target", "--only") and i + 1 < len(args):
            if args[i] == "--target":
                targets.append(float(args[i + 1]))
            else:
                only = args[i + 1].split(",")
            i += 2
        elif args[i].startswith("--"):
            sys.exit(__doc__)
        else:
            dirs.append(args[i])
            i += 1
    return targets, dirs, only


def main():
    global SMOOTH, INTERP
    args = sys.argv[1:]
    while args and args[-1] == "--interp" or len(args) >= 2 and args[-2] == "--smooth":
        if args[-1] == "--interp":
            INTERP = True
            args = args[:-1]
            continue
        SMOOTH = int(args[-1])
        if SMOOTH < 1:
            sys.exit(__doc__)
        args = args[:-2]
    if len(args) == 2 and args[0] == "zip":
        zip_args(args[1])
    elif len(args) >= 2 and args[0] == "workers" and len(args) % 2 == 0:
        names = []
        for i in range(2, len(args), 2):
            if args[i] != "--point":
                sys.exit(__doc__)
            names.append(args[i + 1])
        workers(args[1], names)
    elif len(args) >= 2 and args[0] == "table":
        targets, dirs, only = table_args(args[1:])
        if not dirs:
            sys.exit(__doc__)
        table(dirs, targets, only)
    elif len(args) >= 3 and args[0] == "between":
        targets, dirs, only = table_args(args[1:])
        if len(dirs) != 2 or not targets:
            sys.exit(__doc__)
        between(dirs[0], dirs[1], targets, only)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
