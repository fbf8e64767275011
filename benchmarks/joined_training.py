"""Benchmark: the classifiers' training rows from the executor cache vs through a join (x_access).

    python benchmarks/joined_training.py [--preset wiki325k] [--scale 0.1] [--difficulty D]
        [--models tree] [--modes cached joined] [--workdir /tmp/eagle-bench-joined]

Synthetic data of `--preset` at `--scale` (made once in the workdir). For each model and mode,
``train_tree`` / ``train_ova`` with ``x_access`` set to the mode, in one Spark session (local mode,
the machine's cores): wall seconds, bytes written to shuffle files (from the event log, per job
group), peak PSS of all processes (driver, JVM, Python workers), the model's size, and whether
its weight and tree tables equal the first mode's, row for row. The joined path should give the
same model; the report says what the join costs in time and shuffle.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    PeakRSS,
    event_log_overrides,
    folder_bytes,
    generator,
    shuffle_bytes_by_job_group,
    write_report,
)


def _tables(model: pathlib.Path) -> dict:
    """Every table under the model's data/ folder, rows sorted by their first column."""
    import pyarrow.parquet as pq

    out = {}
    for folder in sorted(p for p in (model / "data").iterdir() if p.is_dir()):
        table = pq.read_table(folder)
        out[folder.name] = table.sort_by(table.column_names[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="wiki325k")
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument(
        "--difficulty", type=float, default=None, help="synth difficulty (default: the preset's)"
    )
    ap.add_argument("--models", nargs="+", choices=["tree", "ova"], default=["tree"])
    ap.add_argument(
        "--modes", nargs="+", choices=["cached", "joined"], default=["cached", "joined"]
    )
    ap.add_argument("--workdir", default="/tmp/eagle-bench-joined")
    ap.add_argument(
        "--name", default=None, help="report name (default joined_training_<preset>_<scale>)"
    )
    args = ap.parse_args()

    from eagle_spark.classifiers.ova import train_ova
    from eagle_spark.classifiers.tree import train_tree
    from eagle_spark.session import build_spark
    from eagle_spark.settings import OVASettings, Settings, TreeSettings
    from eagle_spark.synth import synth

    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    events = work / "spark-events"
    spark = build_spark(
        Settings.load(overrides=["spark.driver_memory=8g", *event_log_overrides(events)]).spark
    )
    app_id = spark.sparkContext.applicationId
    tag = "" if args.difficulty is None else f"_d{args.difficulty:g}"
    data = work / f"{args.preset}_{args.scale}{tag}"
    if not (data / "_manifest.json").exists():
        synth(
            spark,
            str(data),
            args.preset,
            scale=args.scale,
            seed=0,
            overwrite=True,
            difficulty=args.difficulty,
        )
    train = str(data / "train")
    rows = []
    for model in args.models:
        first = None
        for mode in args.modes:
            out = work / f"{model}_{args.scale}_{mode}"
            spark.sparkContext.setJobGroup(f"{model}:{mode}", f"{model} {mode}")
            started = time.monotonic()
            with PeakRSS(interval=1.0, pss=True) as rss:
                if model == "tree":
                    meta = train_tree(
                        spark, train, str(out), TreeSettings(x_access=mode), overwrite=True
                    )
                else:
                    meta = train_ova(
                        spark, train, str(out), OVASettings(x_access=mode), overwrite=True
                    )
            seconds = round(time.monotonic() - started, 1)
            tables = _tables(out)
            first = first or tables
            rows.append(
                {
                    "model": model,
                    "x_access": meta["x_access"],
                    "train_s": seconds,
                    "peak_pss_GB": round(rss.peak_pss_bytes / 2**30, 2),
                    "model_MB": round(folder_bytes(out) / 2**20, 1),
                    "same_as_first": all(tables[k].equals(first[k]) for k in first)
                    and tables.keys() == first.keys(),
                }
            )
    cores = spark.sparkContext.defaultParallelism
    spark.sparkContext.setJobGroup("", "")
    spark.stop()
    shuffle = shuffle_bytes_by_job_group(events, app_id)
    for row in rows:
        row["shuffle_MB"] = round(shuffle.get(f"{row['model']}:{row['x_access']}", 0) / 1e6, 1)
    manifest = json.loads((data / "_manifest.json").read_text())
    difficulty = manifest["parameters"].get(
        "difficulty"
    )  # the planted generator's; None: realistic
    write_report(
        args.name or f"joined_training_{args.preset}_{args.scale}",
        rows,
        {
            "preset": args.preset,
            "scale": args.scale,
            "difficulty": difficulty,
            "generator": generator(difficulty),
            "cores": cores,
            **{k: manifest["shape"][k] for k in ("n_train", "n_features", "n_labels")},
        },
    )


if __name__ == "__main__":
    main()
