"""What learning from group labels costs: EAGLE's fit (embed + assign + train, as a user waits for
them in the pipeline) with each assignment setting, against the hard top-c assignment.

    python benchmarks/assignment_cost.py                                   # delicious (embedded), R-4
    python benchmarks/assignment_cost.py --data synth:wiki325k:0.1 --group-size 10 --report assignment_cost_wiki325k_0.1

For each setting (``hard``; ``soft`` at T = 0.3, the same refined once, at the default
``soft_keep`` and unpruned, cross-fitted in 3 folds for up to 3 rounds (tolerance 0.01); the
posterior weighting refined once; ``auto`` with the default candidates, unpruned, and choosing
between the Baseline and the cross-fitted refinement) one pipeline run (``pipeline.methods=
[eagle]``, until train, conf/local.yaml) in a folder of its own, so every stage runs: the
aggregated data are made once and shared (``pipeline.dataset`` with ``aggregate=false``). The
report has each stage's wall seconds (the pipeline's own stage timings), the fit's total, its
ratio to ``hard``'s, the whole command's wall time, under ``auto`` the candidate chosen, and from
Spark's event log the assign stage's Spark jobs and the fit's task core-seconds (the work its
stages' tasks did: when they exceed the wall time, the 2 cores were busy and the time is work, not
waiting). Writes benchmarks/reports/<report>.json and prints a table.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import jobs_by_description, print_table, stage_jobs, write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
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
    "auto": {"weighting": "auto"},
    "auto unpruned": {"weighting": "auto", "soft_keep": 0.0},
    "auto @t0": {
        "weighting": "auto",
        "candidates": ("baseline", "soft-0.3+r1", "soft-0.3+r1@t0"),
    },
    "auto cross-fitted": {
        "weighting": "auto",
        "candidates": ("baseline", "soft-0.3+r3x3"),
        "refine_tolerance": 0.01,
    },
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
    args = parser.parse_args()

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
    for name in args.settings:
        settings = base.replace("assign", **SETTINGS[name]).replace(
            "pipeline",
            output=str(work / name.replace(" ", "_").replace("=", "").replace("@", "")),
            dataset=agg.path,
            aggregate=False,
            methods=("eagle",),
            until="train",
        )
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
    app_id = spark.conf.get("spark.app.id")
    spark.stop()  # the event log is complete once the application ends
    hard = next((r["fit s"] for r in rows if r["setting"] == "hard"), None)
    for r in rows:
        r["fit / hard"] = round(r["fit s"] / hard, 2) if hard else None
        jobs = jobs_by_description(events, app_id, windows[r["setting"]])
        # A stage's jobs carry its name or a step inside it (``assign_eagle / round 1: ...``).
        fit_stages = [stage_jobs(jobs, s) for s in ("embed_eagle", "assign_eagle", "train_eagle")]
        r["assign jobs"] = fit_stages[1]["spark jobs"]
        r["assign task s"] = fit_stages[1]["task s"]
        r["fit task s"] = round(sum(j["task s"] for j in fit_stages), 1)
    write_report(
        args.report,
        rows,
        {
            "data": args.data,
            "grouping": f"R-{args.group_size}",
            "classifier": "tree (conf/local.yaml)",
        },
    )
    print_table(rows)


if __name__ == "__main__":
    main()
