"""What the training tasks' number costs: the tree and one-vs-all trained on the same training set
with ``min_task_work`` at its default ("rule": as many tasks as the work needs, at least one per
core) and at 0 ("fixed": always ``tasks``, 16 by default), in one Spark session, alternating.

    python benchmarks/training_tasks.py --run /tmp/eagle_main_job/run --report training_tasks

The training sets: the first ``--small`` embedded delicious training samples in random groups of 4
with the Baseline's assignment (built here), and the Baseline and EAGLE assignments of a main-job
run folder (``pipeline --compare`` leaves them under ``assigned/``). Each row: the median seconds
of ``--repeats`` whole fits (``train_tree`` / ``train_ova``: sizing, indexing, training, writing
the model), the tasks that wrote weights (part files of the first weights table: a bin the units
did not fill writes none), and whether both models' weights are equal (they must be).
Writes ``benchmarks/reports/<report>.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import shutil
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _small_set(spark, work: pathlib.Path, n: int) -> str:
    """The first `n` embedded delicious training samples, R-4, assigned by the Baseline."""
    import gzip

    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.assignment.assign import assign
    from eagle_spark.data import embedded_path
    from eagle_spark.io.ingest import ingest
    from eagle_spark.settings import AggregateSettings, AssignSettings, IngestSettings

    with gzip.open(embedded_path("delicious", "train"), "rt") as fh:
        header = next(fh).split()
        lines = [next(fh) for _ in range(n)]
    text = work / "small.txt"
    text.write_text(f"{n} {header[1]} {header[2]}\n" + "".join(lines))
    ingest(spark, str(text), str(work / "small"), IngestSettings())
    aggregate(spark, str(work / "small"), str(work / "small_agg"), AggregateSettings(group_size=4))
    assign(
        spark, str(work / "small_agg"), str(work / "small_base"), AssignSettings(method="baseline")
    )
    return str(work / "small_base")


def _weights(spark, model: str) -> list:
    """Every weights row of a model folder (tree: every tree's), sorted."""
    folders = sorted(
        p for p in pathlib.Path(model, "data").iterdir() if p.name.startswith("weights")
    )
    return sorted(
        (f.name, r.label_id, tuple(r.w_idx), tuple(r.w_val), r.bias)
        for f in folders
        for r in spark.read.parquet(str(f)).collect()
    )


def _tasks(model: str) -> int:
    """Part files of the (first) weights table: one per training task."""
    folder = sorted(
        p for p in pathlib.Path(model, "data").iterdir() if p.name.startswith("weights")
    )[0]
    return len(list(folder.glob("part-*")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a pipeline run folder (assigned/)")
    parser.add_argument("--methods", nargs="+", default=["baseline", "eagle"])
    parser.add_argument("--small", type=int, default=600, help="samples of the small set")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conf", default=str(ROOT / "conf" / "local.yaml"))
    parser.add_argument("--set", action="append", default=[], help="section.key=value")
    parser.add_argument("--report", required=True, help="report name under benchmarks/reports")
    parser.add_argument("--work", default="/tmp/eagle_training_tasks")
    args = parser.parse_args()

    from eagle_spark.classifiers.ova import train_ova
    from eagle_spark.classifiers.tree.training import train_tree
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    settings = Settings.load(args.conf, args.set)
    spark = build_spark(settings.spark)
    work = pathlib.Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sets = {f"delicious first {args.small}, R-4, Baseline": _small_set(spark, work, args.small)}
    for method in args.methods:
        sets[f"delicious R-4, {method} (main job)"] = str(
            pathlib.Path(args.run, "assigned", method)
        )
    trainers = {"tree": (train_tree, settings.tree), "ova": (train_ova, settings.ova)}
    rows = []
    for name, data in sets.items():
        for model, (train, params) in trainers.items():
            configs = {"rule": params, "fixed": dataclasses.replace(params, min_task_work=0.0)}
            seconds: dict[str, list[float]] = {c: [] for c in configs}
            for repeat in range(args.repeats):
                for config, p in configs.items():
                    out = str(work / f"{model}-{config}")
                    start = time.perf_counter()
                    train(spark, data, out, p, overwrite=True)
                    seconds[config].append(time.perf_counter() - start)
            outs = {c: str(work / f"{model}-{c}") for c in configs}
            same = _weights(spark, outs["rule"]) == _weights(spark, outs["fixed"])
            rows.append(
                {
                    "training set": name,
                    "model": model,
                    "tasks (rule)": _tasks(outs["rule"]),
                    "median s (rule)": round(statistics.median(seconds["rule"]), 2),
                    "tasks (fixed)": _tasks(outs["fixed"]),
                    "median s (fixed)": round(statistics.median(seconds["fixed"]), 2),
                    "runs s (rule)": [round(s, 2) for s in seconds["rule"]],
                    "runs s (fixed)": [round(s, 2) for s in seconds["fixed"]],
                    "same weights": same,
                }
            )
            print(rows[-1], flush=True)
    write_report(
        args.report,
        rows,
        {
            "run": args.run,
            "settings": list(args.set),
            "min_task_work": settings.tree.min_task_work,
            "tasks": settings.tree.tasks,
        },
    )
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
