"""A cost model of the main job, from its runs at several scales, to full scale and to a cluster.

    python benchmarks/cost_model.py --fit main_job_synth_wiki325k_0.1 main_job_synth_wiki325k_0.2 \
        [--check main_job_synth_wiki325k_0.3] \
        [--speedup main_job_synth_wiki325k_0.05_one_at_a_time_local1 \
                   main_job_synth_wiki325k_0.05_one_at_a_time] \
        [--predict 1.0] [--cores 32 128] [--report cost_model]

Each ``--fit`` report is one ``benchmarks/main_job.py --data synth:PRESET:SCALE`` run. On the
presets every count of the data (samples, nonzeros of X, positives of Y, labels) is proportional to
the scale (``eagle-spark synth --scale``), so a stage's work is proportional to scale^b for some b:
1 for a pass over the rows, 2 for a one-vs-all (labels x samples), between for a tree. Per stage
that ran in every fitted run (a stage copied from another, when ``auto`` chose the Baseline, is
not fitted), the model is ``seconds = a x scale^b``, fitted by least squares on the logarithms
(two runs: the line through both). ``--check`` compares the prediction with a measured run, per
stage and in total (the relative error). Stages run side by side in the main job, so the total is
the sum of the stages' seconds against the sum of the measured ones.

``--speedup LOCAL1 LOCAL2``: two runs of one scale with ``spark.master=local[1]`` and the default
(the machine's cores, ``machine.cpus`` of the report), both one method at a time
(``pipeline.methods_at_once=1``, checked), so that a stage's wall seconds are its own and not
also its wait for cores another method's stage holds. Per stage, from the stages' wall seconds
(``median s``), the speed-up S = w1 / w2 gives the parallel share p by Amdahl's law (w(c) = w1
((1 - p) + p / c), so p = (1 - 1 / S) / (1 - 1 / cpus), clipped to [0, 1]), and the local[1]
run gives the stage's wall seconds per task second on one core (r = w1 / task s: the driver's
own work on top of the tasks'). A stage's time on c cores at the predicted scale is then w1 x
((1 - p) + p / c) with w1 = r x its predicted task seconds; the same with c = the machine's cores
is this machine's wall prediction. The whole command on c cores lies between the shared stages
plus the longest method's chain (the methods side by side, each as if it had the c cores) and the
stages summed (one method at a time) (:func:`whole_bounds`); with ``--check``, the measured whole
command on the machine's cores is set beside that interval. The whole command's speed-up
(``whole command`` rows) is reported beside it. This ignores what a cluster adds (network
shuffle, executors' start-up, skew) and what it removes (memory per executor): stated in the
report as a bound of that model, not a measurement.

The report ``benchmarks/reports/<--report>.json`` holds the fitted (a, b) per stage, the check's
rows and the predictions; ``benchmarks/figures.py`` puts its table in ``docs/design.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import re
import sys

import numpy as np

from eagle_spark.comparison import METHODS

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import REPORTS, write_report  # noqa: E402

SCALE = re.compile(r"synth:[a-z0-9-]+:([0-9.]+)")
LOCAL = re.compile(r"spark\.master=local\[(\d+)\]")
ONE_AT_A_TIME = "pipeline.methods_at_once=1"


MEASURE = "task s"
"""What is fitted: a stage's Spark task seconds (core-seconds of work). The main job runs its
methods side by side, so a stage's wall seconds include waiting for cores another method holds
(``--measure "median s"`` fits those instead)."""


def load(name: str, measure: str = MEASURE) -> dict:
    """Report `name` with its ``scale`` (from its data description) and its stages' seconds.

    Raises:
        SystemExit: the report is missing, stopped, or not of a synthetic preset.
    """
    path = REPORTS / f"{name}.json"
    if not path.exists():
        sys.exit(f"no report {path}")
    report = json.loads(path.read_text())
    found = SCALE.match(report.get("data", ""))
    if not found:
        sys.exit(f"{name}: not a run on a synthetic preset (data {report.get('data')!r})")
    if report.get("complete") is False:
        sys.exit(f"{name}: a stopped run cannot be fitted")
    ran = [r for r in report["rows"] if r["stage"] != "whole command" and r.get("status") == "ran"]
    whole = next(r for r in report["rows"] if r["stage"] == "whole command")
    master = LOCAL.search(report.get("command", ""))
    return {
        "name": name,
        "scale": float(found.group(1)),
        "stages": {r["stage"]: r[measure] for r in ran if r.get(measure)},
        "task": {r["stage"]: r[MEASURE] for r in ran if r.get(MEASURE)},
        "whole s": whole["median s"],
        "cpus": report["machine"]["cpus"],
        "cpus_used": int(master.group(1)) if master else report["machine"]["cpus"],
        "one_at_a_time": ONE_AT_A_TIME in report.get("command", ""),
    }


def fit(runs: list[dict]) -> dict[str, dict]:
    """{stage: {"a": seconds at scale 1, "b": exponent}} for each stage that ran in every run."""
    if len({r["scale"] for r in runs}) < 2:
        sys.exit("--fit needs runs at two scales at least")
    common = set.intersection(*(set(r["stages"]) for r in runs))
    out = {}
    for stage in sorted(common, key=list(runs[0]["stages"]).index):
        x = np.log([r["scale"] for r in runs])
        y = np.log([r["stages"][stage] for r in runs])
        b, log_a = np.polyfit(x, y, 1)
        out[stage] = {"a": round(float(math.exp(log_a)), 2), "b": round(float(b), 3)}
    return out


def predict(model: dict[str, dict], scale: float) -> dict[str, float]:
    """Seconds per stage at `scale` on the fitted runs' machine."""
    return {s: m["a"] * scale ** m["b"] for s, m in model.items()}


def parallel_share(one: dict, many: dict) -> dict[str, dict[str, float]]:
    """Per stage the parallel share ``p`` of Amdahl's law and the one-core wall seconds per task
    second ``r``, from a local[1] run and a run on the machine's cores of one scale (both loaded
    with ``measure="median s"`` and their task seconds under ``"task"``)."""
    if one["scale"] != many["scale"]:
        sys.exit("--speedup: the two runs must be of one scale")
    if one["cpus_used"] != 1:
        sys.exit(f"--speedup: {one['name']} did not run on local[1]")
    for run in (one, many):
        if not run.get("one_at_a_time"):
            sys.exit(
                f"--speedup: {run['name']} ran its methods side by side: a stage's wall seconds "
                f"then include waiting for another method's; run both with --set {ONE_AT_A_TIME}"
            )
    cpus = many["cpus"]
    out = {}
    for stage in set(one["stages"]) & set(many["stages"]):
        speedup = one["stages"][stage] / many["stages"][stage]
        task = one["task"].get(stage)
        out[stage] = {
            "S": speedup,
            "p": min(1.0, max(0.0, (1 - 1 / speedup) / (1 - 1 / cpus))),
            "r": one["stages"][stage] / task if task else 1.0,
        }
    return out


def on_cores(
    work: dict[str, float], share: dict[str, dict[str, float]], cores: int, measure: str = MEASURE
) -> dict[str, float]:
    """Per stage of `work` (predicted seconds of `measure`) that has a measured speed-up
    (:func:`parallel_share`), its wall seconds on `cores` cores: its one-core wall seconds (r x
    task seconds, or wall seconds on the machine's cores x S) x ((1 - p) + p / cores)."""
    on = {}
    for stage, seconds in work.items():
        if stage not in share:
            continue
        f = share[stage]
        wall1 = f["r"] * seconds if measure == MEASURE else seconds * f["S"]
        on[stage] = round(wall1 * ((1 - f["p"]) + f["p"] / cores), 1)
    return on


def method_of(stage: str) -> str:
    """The method of the pipeline (:data:`eagle_spark.comparison.METHODS`) a stage belongs to
    (``train_eagle0`` -> ``eagle0``, ``train_eagle_paper`` -> ``eagle_paper``), "" for a stage the
    methods share (``aggregate``, ``ingest``)."""
    return next((m for m in METHODS if stage.endswith("_" + m)), "")


def whole_bounds(wall: dict[str, float]) -> tuple[float, float]:
    """Bounds on the whole command's wall seconds from its stages' predicted wall seconds on c
    cores (`wall`, each stage with all c cores). The main job runs the shared stages, then each
    method's stages in order, the methods side by side: at least the shared stages plus the
    longest method's chain (every method with all c cores at once: more than the machine has), at
    most every stage one after the other (one method at a time, ``pipeline.methods_at_once=1``)."""
    chains: dict[str, float] = {}
    for stage, seconds in wall.items():
        chains[method_of(stage)] = chains.get(method_of(stage), 0.0) + seconds
    shared = chains.pop("", 0.0)
    return shared + max(chains.values(), default=0.0), sum(wall.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", nargs="+", required=True, help="main_job reports to fit")
    parser.add_argument("--check", default=None, help="a main_job report to compare with")
    parser.add_argument("--speedup", nargs=2, default=None, metavar=("LOCAL1", "LOCAL_N"))
    parser.add_argument("--predict", type=float, nargs="+", default=[1.0])
    parser.add_argument("--cores", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--report", default="cost_model")
    parser.add_argument("--measure", default=MEASURE, choices=[MEASURE, "median s"])
    args = parser.parse_args()

    runs = [load(n, args.measure) for n in args.fit]
    model = fit(runs)
    extra: dict = {
        "fitted": {r["name"]: r["scale"] for r in runs},
        "model": model,
        "machine_cpus": runs[0]["cpus"],
        "measure": args.measure,
    }
    rows = []
    if args.check:
        check = load(args.check, args.measure)
        guess = predict(model, check["scale"])
        for stage, seconds in guess.items():
            measured = check["stages"].get(stage)
            rows.append(
                {
                    "stage": stage,
                    "b": model[stage]["b"],
                    f"predicted s at {check['scale']:g}": round(seconds, 1),
                    "measured s": measured,
                    "error": None if measured is None else round(seconds / measured - 1, 3),
                }
            )
        both = [s for s in guess if s in check["stages"]]
        total_guess = sum(guess[s] for s in both)
        total_measured = sum(check["stages"][s] for s in both)
        extra["check"] = {
            "report": args.check,
            "scale": check["scale"],
            "total predicted s": round(total_guess, 1),
            "total measured s": round(total_measured, 1),
            "total error": round(total_guess / total_measured - 1, 3),
            "largest stage error": max(abs(r["error"]) for r in rows if r["error"] is not None),
        }
    share = None
    if args.speedup:
        one, many = (load(n, "median s") for n in args.speedup)
        share = parallel_share(one, many)
        extra["speedup"] = {
            "runs": list(args.speedup),
            "scale": one["scale"],
            "whole command s": {
                "local[1]": one["whole s"],
                f"local[{many['cpus']}]": many["whole s"],
            },
            "whole command speed-up": round(one["whole s"] / many["whole s"], 3),
            "per stage": {
                s: {k: round(v, 3) for k, v in f.items()}
                for s, f in sorted(share.items(), key=lambda kv: list(many["stages"]).index(kv[0]))
            },
        }
    if share is not None and args.check:
        cpus = runs[0]["cpus"]
        on = on_cores(predict(model, check["scale"]), share, cpus, args.measure)
        low, high = whole_bounds(on)
        extra["check"]["whole command s"] = {
            "cores": cpus,
            "predicted interval": [round(low, 1), round(high, 1)],
            "measured": check["whole s"],
        }
    predictions = {}
    for scale in args.predict:
        here = predict(model, scale)
        entry: dict = {
            f"this machine {args.measure}": {s: round(v, 1) for s, v in here.items()},
            f"this machine total {args.measure}": round(sum(here.values()), 1),
        }
        if share is not None:
            for cores in [runs[0]["cpus"], *args.cores]:
                on = on_cores(here, share, cores, args.measure)
                entry[f"{cores} cores wall s"] = on
                entry[f"{cores} cores wall sum s"] = round(sum(on.values()), 1)
                low, high = whole_bounds(on)
                entry[f"{cores} cores whole command s"] = [round(low, 1), round(high, 1)]
        predictions[f"{scale:g}"] = entry
    extra["predictions"] = predictions
    if not rows:  # no check: the fitted model as the table
        rows = [{"stage": s, "a (s at scale 1)": m["a"], "b": m["b"]} for s, m in model.items()]
    write_report(args.report, rows, extra)
    for scale, entry in predictions.items():
        print(
            f"scale {scale}: {entry[f'this machine total {args.measure}']:.0f} {args.measure}",
            end="",
        )
        for cores in [runs[0]["cpus"], *args.cores] if share else []:
            print(f"; {cores} cores {entry[f'{cores} cores wall sum s']:.0f} s", end="")
        print()


if __name__ == "__main__":
    main()
