"""What the tasks' number costs: the tree and one-vs-all trained on the same training set, and GRLR
(``embed``) on the same aggregated data, with ``min_task_work`` at its default ("rule": as many
tasks as the work needs, at least one per core) and at 0 ("fixed": always ``tasks``, 16 by
default), in one Spark session, alternating.

    python benchmarks/training_tasks.py --run /tmp/eagle_main_job/run --report training_tasks

The data: the first ``--small`` embedded delicious training samples in random groups of 4 with the
Baseline's assignment (built here), and the Baseline and EAGLE assignments of a main-job run folder
(``pipeline --compare`` leaves them under ``assigned/``); GRLR runs on the small set's and the
run's aggregated data. Each row: the median seconds of ``--repeats`` whole calls (``train_tree`` /
``train_ova``: sizing, indexing, training, writing the model; ``embed``: the label embeddings and
Algorithm 2's choices), the tasks that wrote output (part files of the first weights table, or of
``label_emb``: a bin the units did not fill writes none), and whether both outputs are equal (they
must be). Writes ``benchmarks/reports/<report>.json``.
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


def _small_set(spark, work: pathlib.Path, n: int) -> tuple[str, str]:
    """The first `n` embedded delicious training samples, R-4: (the aggregated dataset, its
    Baseline assignment)."""
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
    agg, base = str(work / "small_agg"), str(work / "small_base")
    ingest(spark, str(text), str(work / "small"), IngestSettings())
    aggregate(spark, str(work / "small"), agg, AggregateSettings(group_size=4))
    assign(spark, agg, base, AssignSettings(method="baseline"))
    return agg, base


def _tables(out: str) -> list[pathlib.Path]:
    """The output tables: a model's weights (the tree: every tree's), or GRLR's label_emb."""
    data = pathlib.Path(out, "data")
    if not data.exists():
        return [pathlib.Path(out, "label_emb")]
    return sorted(p for p in data.iterdir() if p.name.startswith("weights"))


def _rows(spark, out: str) -> list:
    """Every row of the output tables, sorted."""
    return sorted(
        (f.name, *(tuple(v) if isinstance(v, list) else v for v in r))
        for f in _tables(out)
        for r in spark.read.parquet(str(f)).collect()
    )


def _tasks(out: str) -> int:
    """Part files of the first output table: one per task that wrote."""
    return len(list(_tables(out)[0].glob("part-*")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a pipeline run folder (assigned/, data/)")
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
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    settings = Settings.load(args.conf, args.set)
    spark = build_spark(settings.spark)
    work = pathlib.Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    small_agg, small = _small_set(spark, work, args.small)
    run = pathlib.Path(args.run)
    sets = {f"delicious first {args.small}, R-4, Baseline": small}
    for method in args.methods:
        sets[f"delicious R-4, {method} (main job)"] = str(run / "assigned" / method)
    calls = {"tree": (train_tree, settings.tree), "ova": (train_ova, settings.ova)}
    cases = [(name, data, model) for name, data in sets.items() for model in calls]
    calls["embed"] = (embed, settings.embed)
    cases += [
        (f"delicious first {args.small}, R-4", small_agg, "embed"),
        ("delicious R-4 (main job)", str(run / "data" / "aggregated"), "embed"),
    ]
    rows = []
    for name, data, model in cases:
        call, params = calls[model]
        configs = {"rule": params, "fixed": dataclasses.replace(params, min_task_work=0.0)}
        outs = {c: str(work / f"{model}-{c}") for c in configs}
        seconds: dict[str, list[float]] = {c: [] for c in configs}
        for _ in range(args.repeats):
            for config, p in configs.items():
                start = time.perf_counter()
                call(spark, data, outs[config], p, overwrite=True)
                seconds[config].append(time.perf_counter() - start)
        rows.append(
            {
                "data": name,
                "model": model,
                "tasks (rule)": _tasks(outs["rule"]),
                "median s (rule)": round(statistics.median(seconds["rule"]), 2),
                "tasks (fixed)": _tasks(outs["fixed"]),
                "median s (fixed)": round(statistics.median(seconds["fixed"]), 2),
                "runs s (rule)": [round(s, 2) for s in seconds["rule"]],
                "runs s (fixed)": [round(s, 2) for s in seconds["fixed"]],
                "same output": _rows(spark, outs["rule"]) == _rows(spark, outs["fixed"]),
            }
        )
        print(rows[-1], flush=True)
    write_report(
        args.report,
        rows,
        {
            "run": args.run,
            "settings": list(args.set),
            "min_task_work": {m: p.min_task_work for m, (_, p) in calls.items()},
            "tasks": {m: p.tasks for m, (_, p) in calls.items()},
        },
    )
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
