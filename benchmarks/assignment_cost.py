"""What learning from group labels costs: EAGLE's fit (embed + assign + train, as a user waits for
them in the pipeline) with each assignment setting, against the hard top-c assignment.

    python benchmarks/assignment_cost.py                                   # delicious (embedded), R-4
    python benchmarks/assignment_cost.py --data synth:wiki325k:0.1 --group-size 10 --report assignment_cost_wiki325k_0.1
    python benchmarks/assignment_cost.py --refigure --work DIR --report NAME  # event-log figures again

For each setting (``hard``; ``soft`` at T = 0.3, the same refined once, at the default
``soft_keep`` and unpruned, cross-fitted in 3 folds for up to 3 rounds (tolerance 0.01); the
posterior weighting refined once; ``auto`` choosing between the Baseline and the in-sample
refined round, the same unpruned, between the Baseline and one round cross-fitted in 3 folds
(``auto r1x3``) or 2 (``auto r1x2``, the library's default), two rounds in 2 folds (``auto
r2x2``), and between the Baseline and the cross-fitted refinement) one pipeline
run (``pipeline.methods=[eagle]``, until train, conf/local.yaml) in a folder of its own, so every stage runs: the
aggregated data are made once and shared (``pipeline.dataset`` with ``aggregate=false``). The
report has each stage's wall seconds (the pipeline's own stage timings), the fit's total, its
ratio to ``hard``'s, the whole command's wall time, under ``auto`` the candidate chosen, and from
Spark's event log the assign stage's Spark jobs, the task core-seconds of the assign and train
stages and of the fit, and under ``auto`` those of each step of the choice (the work the tasks
did: when they exceed the wall time, the 2 cores were busy and the time is work, not waiting).
The ``auto`` settings after the first reuse the held-out split and the Baseline's score that the
first made in the same driver process, so their choosing is a lower bound of a run alone; with
``--alone`` each makes its own (the report's ``each auto setting alone``). Writes
benchmarks/reports/<report>.json after each setting (``complete`` false until the event-log
figures are in) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import shutil
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    CROSS_FITTED_CANDIDATES,
    IN_SAMPLE_CANDIDATES,
    REPORTS,
    STEP_SEPARATOR,
    TWO_FOLD_CANDIDATES,
    TWO_ROUND_CANDIDATES,
    jobs_by_description,
    only_app_id,
    print_table,
    read_events,
    stage_jobs,
    stage_steps,
    write_report,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
AUTO_R1X3 = {"weighting": "auto", "candidates": CROSS_FITTED_CANDIDATES}
AUTO_R3X3 = {
    "weighting": "auto",
    "candidates": ("baseline", "soft-0.3+r3x3"),
    "refine_tolerance": 0.01,
}
NEGATIVES = (1.0, 3.0, 10.0, 30.0)
"""``assign.refine_negatives`` of the ``neg=R`` settings."""
SETTINGS = {  # setting -> changes to the assign section (soft: the default soft_keep unless named)
    "hard": {"weighting": "hard"},
    "soft T=0.3": {"weighting": "soft", "temperature": 0.3},
    "soft T=0.3+r1": {"weighting": "soft", "temperature": 0.3, "refine_rounds": 1},
    "soft T=0.3+r1 unpruned": {
        "weighting": "soft",
        "temperature": 0.3,
        "refine_rounds": 1,
        "soft_keep": 0.0,
    },
    "soft T=0.3+r3x3": {
        "weighting": "soft",
        "temperature": 0.3,
        "refine_rounds": 3,
        "refine_folds": 3,
        "refine_tolerance": 0.01,
    },
    "post T=0.3+r1": {
        "weighting": "soft",
        "posterior": True,
        "temperature": 0.3,
        "refine_rounds": 1,
    },
    # auto: the Baseline against the in-sample refined candidate (not the library's default)
    "auto": {"weighting": "auto", "candidates": IN_SAMPLE_CANDIDATES},
    "auto unpruned": {"weighting": "auto", "candidates": IN_SAMPLE_CANDIDATES, "soft_keep": 0.0},
    "auto @t0": {
        "weighting": "auto",
        "candidates": (*IN_SAMPLE_CANDIDATES, "soft-0.3+r1@t0"),
    },
    "auto r1x3": AUTO_R1X3,
    "auto r1x2": {"weighting": "auto", "candidates": TWO_FOLD_CANDIDATES},
    "auto r2x2": {"weighting": "auto", "candidates": TWO_ROUND_CANDIDATES},
    **{f"auto r1x3 neg={r:g}": {**AUTO_R1X3, "refine_negatives": r} for r in NEGATIVES},
    **{f"auto r3x3 neg={r:g}": {**AUTO_R3X3, "refine_negatives": r} for r in NEGATIVES},
    "auto cross-fitted": AUTO_R3X3,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default="delicious",
        help="delicious (the embedded training set) or synth:<preset>:<scale>",
    )
    parser.add_argument(
        "--group-size", type=int, default=4, help="random groups of this size (default 4)"
    )
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument(
        "--report", default="assignment_cost_delicious", help="report name under benchmarks/reports"
    )
    parser.add_argument("--work", default="/tmp/eagle_assignment_cost")
    parser.add_argument(
        "--driver-memory",
        default=None,
        help="spark.driver_memory of the run (default conf/local.yaml's); 8g from scale 0.3",
    )
    parser.add_argument(
        "--alone",
        action="store_true",
        help="each auto setting makes its own held-out split and scores the Baseline itself, as "
        "a run alone does (the kept splits are forgotten before it)",
    )
    parser.add_argument(
        "--refigure",
        action="store_true",
        help="recompute the report's event-log figures from --work's event log (a finished "
        "run of the report's settings, in its order) and exit",
    )
    args = parser.parse_args()
    if args.refigure:
        events = pathlib.Path(args.work) / "events"
        app_id = only_app_id(events)
        path = REPORTS / f"{args.report}.json"
        report = json.loads(path.read_text())
        rows = report.pop("rows")
        windows = setting_windows(events, app_id, [r["setting"] for r in rows])
        event_figures(rows, events, app_id, windows)
        keep = {k: v for k, v in report.items() if k not in ("benchmark", "when", "machine")}
        write_report(args.report, rows, keep)
        return

    from eagle_spark.assignment.selection import forget_kept_splits
    from eagle_spark.data import embedded_path
    from eagle_spark.ml import Dataset
    from eagle_spark.pipeline import run_pipeline
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    work = pathlib.Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    base = Settings.load(str(ROOT / "conf" / "local.yaml"))
    events = work / "events"
    events.mkdir(parents=True)
    base = base.replace(
        "spark",
        driver_memory=args.driver_memory or base.spark.driver_memory,
        extra={
            **base.spark.extra,
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
        },
    )
    spark = build_spark(base.spark)
    if args.data == "delicious":
        train = Dataset.ingest(spark, embedded_path("delicious", "train"), str(work / "train"))
    elif args.data.startswith("synth:"):
        _, preset, scale = args.data.split(":")
        train, _ = Dataset.synth(spark, str(work / "synth"), preset=preset, scale=float(scale))
    else:
        sys.exit(f"--data {args.data!r}: delicious or synth:<preset>:<scale>")
    agg = train.aggregate(str(work / "aggregated"), groupSize=args.group_size, seed=0)
    rows = []
    windows: dict[str, tuple[float, float]] = {}
    extra = {
        "data": args.data
        + (" (realistic preset, seed 0)" if args.data.startswith("synth:") else ""),
        "grouping": f"R-{args.group_size}",
        "classifier": "tree (conf/local.yaml)",
        "driver memory": base.spark.driver_memory,
        "each auto setting alone": args.alone,
    }
    for name in args.settings:
        settings = base.replace("assign", **SETTINGS[name]).replace(
            "pipeline",
            output=str(work / name.replace(" ", "_").replace("=", "").replace("@", "")),
            dataset=agg.path,
            aggregate=False,
            methods=("eagle",),
            until="train",
        )
        if args.alone:
            forget_kept_splits(spark)
        t0, started = time.monotonic(), time.time()
        result = run_pipeline(spark, settings)
        wall = time.monotonic() - t0
        windows[name] = (started, time.time())
        stages = {r["stage"]: r["seconds"] for r in result["stages"]}
        fit = sum(stages.get(s, 0.0) for s in ("embed_eagle", "assign_eagle", "train_eagle"))
        chosen = None
        if name.startswith("auto"):
            manifest = Dataset.load(
                spark, str(pathlib.Path(settings.pipeline.output) / "assigned" / "eagle")
            ).manifest
            chosen = (manifest.get("selection") or {}).get("chosen")
        rows.append(
            {
                "setting": name,
                "embed s": stages.get("embed_eagle"),
                "assign s": stages.get("assign_eagle"),
                "train s": stages.get("train_eagle"),
                "fit s": round(fit, 1),
                "command s": round(wall, 1),
                "chosen": chosen,
            }
        )
        # a long run keeps what is done: the settings so far, their figures from the event log
        # once the application ends
        write_report(args.report, rows, {**extra, "complete": False}, table=False)
    app_id = spark.conf.get("spark.app.id")
    spark.stop()  # the event log is complete once the application ends
    event_figures(rows, events, app_id, windows)
    write_report(args.report, rows, {**extra, "complete": True}, table=False)
    print_table(rows)


def event_figures(
    rows: list[dict[str, Any]],
    events: pathlib.Path,
    app_id: str,
    windows: dict[str, tuple[float, float]],
) -> None:
    """Add to each row (a setting, run inside `windows[setting]`, epoch seconds) its ratio to
    hard's fit and, from the event log, the assign stage's Spark jobs, the assign, train and fit
    task core-seconds and, under ``auto``, the core-seconds of each step of the choice (``select
    <candidate>: assign``, ``...: proxy training``, ...)."""
    hard = next((r["fit s"] for r in rows if r["setting"] == "hard"), None)
    for r in rows:
        r["fit / hard"] = round(r["fit s"] / hard, 2) if hard else None
        jobs = jobs_by_description(events, app_id, windows[r["setting"]])
        # A stage's jobs carry its name or a step inside it (``assign_eagle / round 1: ...``).
        fit_stages = [stage_jobs(jobs, s) for s in ("embed_eagle", "assign_eagle", "train_eagle")]
        r["assign jobs"] = fit_stages[1]["spark jobs"]
        r["assign task s"] = fit_stages[1]["task s"]
        r["train task s"] = fit_stages[2]["task s"]
        r["fit task s"] = round(sum(j["task s"] for j in fit_stages), 1)
        if r["setting"].startswith("auto"):
            steps = stage_steps(jobs, "assign_eagle")
            r["choice steps task s"] = {
                k: v["task s"] for k, v in steps.items() if STEP_SEPARATOR not in k
            }
            r["innermost steps task s"] = innermost_steps(steps)


def innermost_steps(steps: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The task core-seconds of each step of `steps` (:func:`stage_steps`) without the steps
    inside it (a step's figures include them), summed by name over candidates, rounds and folds
    (``select soft-0.3+r1x3: assign / round 1: cross-fitted in 3 folds / fold 2: one-vs-all
    scorer`` counts as ``one-vs-all scorer``): where the refinement's work goes. The values sum
    to the steps' total."""
    paths = [k for k in steps if k != "(stage itself)"]
    out: dict[str, float] = {}
    for path in paths:
        depth = path.count(STEP_SEPARATOR)
        inside = sum(
            steps[other]["task s"]
            for other in paths
            if other.startswith(path + STEP_SEPARATOR) and other.count(STEP_SEPARATOR) == depth + 1
        )
        name = re.sub(r"^(fold|round) \d+: ", "", path.split(STEP_SEPARATOR)[-1])
        name = re.sub(r"^select \S+: ", "select: ", name)
        out[name] = out.get(name, 0.0) + steps[path]["task s"] - inside
    return {k: round(v, 2) for k, v in sorted(out.items()) if round(v, 2) > 0}


def setting_windows(events: pathlib.Path, app_id: str, settings: list[str]) -> dict:
    """The (start, end) epoch seconds of each setting of a finished run whose settings ran in the
    order `settings`, from its event log: a setting's jobs start with its ``embed_eagle`` stage
    after the previous setting's ``train_eagle``. Raises ValueError when the log holds another
    number of settings."""
    starts, last = [], ""
    for event in read_events(events, app_id):
        if event.get("Event") != "SparkListenerJobStart":
            continue
        name = (event.get("Properties") or {}).get("spark.job.description") or ""
        stage = name.split(STEP_SEPARATOR)[0]
        if stage == "embed_eagle" and last != "embed_eagle":
            starts.append(event["Submission Time"] / 1e3)
        if stage:
            last = stage
    if len(starts) != len(settings):
        raise ValueError(f"{len(starts)} settings in the event log, the report has {len(settings)}")
    ends = [*starts[1:], float("inf")]
    return {s: (a - 1e-3, b - 1e-3) for s, a, b in zip(settings, starts, ends)}


if __name__ == "__main__":
    main()
