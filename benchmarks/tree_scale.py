"""Benchmark: the label tree on synthetic Wiki-325K (clean Y): train, predict, evaluate.

    python benchmarks/tree_scale.py [--scales 0.1 1.0] [--workdir /tmp/eagle-bench-synth]
        [--test-rows 60000] [--n-trees 3]

For each scale: synth (reused when present in the workdir, e.g. left by synth_aggregate.py
--keep), train the tree ensemble on train/, predict top-5 with beam 10 for the first
`--test-rows` test samples (all when 0), evaluate P@1/3/5 and PSP@5 (Wikipedia propensities
A = 0.5, B = 0.4, label frequencies of the train set). Reports seconds, peak RSS of all processes,
model MB, and the Spark stages of the run (wall and task seconds, from the event log written to
<workdir>/spark-events). Target (issue 5, 2 cores, local mode): scale 1.0 trains within 60 minutes and 20 GB.
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
    print_table,
    stage_times,
    write_report,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.1])
    ap.add_argument("--workdir", default="/tmp/eagle-bench-synth")
    ap.add_argument("--test-rows", type=int, default=60000)
    ap.add_argument("--n-trees", type=int, default=3)
    ap.add_argument(
        "--difficulty",
        type=float,
        default=None,
        help="the planted generator at this difficulty in [0, 1] (default: the realistic preset)",
    )
    ap.add_argument("--tol", type=float, default=None, help="tree.tol (default: TreeSettings')")
    ap.add_argument(
        "--max-leaf-work",
        default=None,
        help="tree.max_leaf_work, or 'none' for Parabel's leaves (default: TreeSettings')",
    )
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from eagle_spark.classifiers.predict import predict
    from eagle_spark.classifiers.tree import train_tree
    from eagle_spark.evaluation.evaluate import evaluate
    from eagle_spark.io.tables import new_manifest, read_manifest, write_manifest
    from eagle_spark.session import build_spark
    from eagle_spark.settings import EvaluateSettings, PredictSettings, Settings, TreeSettings
    from eagle_spark.synth import synth

    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    events = work / "spark-events"
    overrides = ["spark.driver_memory=8g", *event_log_overrides(events)]
    spark = build_spark(Settings.load(overrides=overrides).spark)
    app_id = spark.sparkContext.applicationId
    rows = []
    for scale in args.scales:
        tag = "" if args.difficulty is None else f"_d{args.difficulty:g}"
        data = work / f"wiki325k_{scale}{tag}"
        if not (data / "_manifest.json").exists():
            synth(
                spark,
                str(data),
                "wiki325k",
                scale=scale,
                seed=0,
                overwrite=True,
                difficulty=args.difficulty,
            )
        train, test = str(data / "train"), str(data / "test")
        if args.test_rows:  # a prefix of the test set, as its own dataset
            sub = work / f"wiki325k_{scale}{tag}_test{args.test_rows}"
            if not (sub / "_manifest.json").exists():
                for name in ("X", "Y"):
                    (
                        spark.read.parquet(f"{test}/{name}")
                        .where(F.col("sample_id") < args.test_rows)
                        .write.mode("overwrite")
                        .parquet(str(sub / name))
                    )
                m = read_manifest(spark, test)
                write_manifest(
                    spark,
                    str(sub),
                    new_manifest(
                        "subset",
                        n_samples=min(args.test_rows, int(m["n_samples"])),
                        n_features=m["n_features"],
                        n_labels=m["n_labels"],
                        source={"dataset": test},
                    ),
                )
            test = str(sub)
        model, preds = work / f"tree_{scale}", work / f"tree_pred_{scale}"
        given = {} if args.tol is None else {"tol": args.tol}
        if args.max_leaf_work is not None:
            given["max_leaf_work"] = (
                None if args.max_leaf_work == "none" else int(args.max_leaf_work)
            )
        params = TreeSettings(n_trees=args.n_trees, **given)
        pp, ep = PredictSettings(), EvaluateSettings(propensity_a=0.5, propensity_b=0.4)
        row = {
            "scale": scale,
            "n_trees": args.n_trees,
            "tol": params.tol,
            "max_leaf_work": params.max_leaf_work,
        }
        with PeakRSS() as rss:
            t0 = time.monotonic()
            meta = train_tree(spark, train, str(model), params, overwrite=True)
            row["train_s"] = round(time.monotonic() - t0, 1)
        row["train_peak_rss_GB"] = round(rss.peak_bytes / 2**30, 2)
        row["model_MB"] = round(folder_bytes(model) / 1e6, 1)
        row["n_labels"], row["depth"] = meta["n_labels"], meta["depth"]
        row["n_clusters"] = meta["n_clusters"]
        print(row, flush=True)
        with PeakRSS() as rss:
            t0 = time.monotonic()
            out = predict(spark, str(model), test, str(preds), pp, overwrite=True)
            row["predict_s"] = round(time.monotonic() - t0, 1)
            row["test_samples"] = out["n_samples"]
            result = evaluate(spark, str(preds), test, ep, propensity_from=train)
        row["predict_peak_rss_GB"] = round(rss.peak_bytes / 2**30, 2)
        for at in (1, 3, 5):
            row[f"P@{at}"] = round(100 * result["P"][at - 1], 2)
        row["PSP@5"] = round(100 * result["PSP"][4], 2)
        row["train_target_s"] = 3600 if scale == 1.0 else None
        rows.append(row)
        print(json.dumps(row), flush=True)
    spark.stop()
    phases = stage_times(events, app_id)
    print("Spark stages of at least 1 s (from the event log):")
    print_table(phases)
    write_report(
        "tree_scale_" + "_".join(str(s) for s in args.scales),
        rows,
        extra={"stages": phases, "synth_difficulty": args.difficulty},
    )


if __name__ == "__main__":
    main()
