"""What one stray label id costs a fit: ``OneVsRestXMC.fit`` (and ``LabelTreeClassifier.fit``) on
a 45-label frame, as it is and with one sample's labels replaced by one far id (10^5, 10^7,
2^31 - 2, so n_labels reaches 2^31 - 1), each a whole ``fit`` from a frame of vectors (the work
dataset, the present-label count, the compact copy, the training, the commit).

    python benchmarks/labels_present.py            # median of 3 fits per row

The frame: the first 1,500 samples of the embedded delicious training file, label l as l mod 45.
Writes benchmarks/reports/labels_present.json and prints a table (seconds, ratio to the fit
without a stray id, labels trained).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
STRAYS = (None, 10**5, 10**7, 2**31 - 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fits per row (median reported)")
    parser.add_argument("--samples", type=int, default=1500)
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from eagle_spark.io.ingest import ingest
    from eagle_spark.ml import Dataset, LabelTreeClassifier, OneVsRestXMC
    from eagle_spark.session import build_spark
    from eagle_spark.settings import IngestSettings, Settings

    base = Settings.load(str(ROOT / "conf" / "local.yaml"))
    spark = build_spark(base.spark)
    work = pathlib.Path(tempfile.mkdtemp(prefix="eagle_labels_present_"))
    sys.path.insert(0, str(ROOT))
    from tests.conftest import delicious_slice

    source = str(work / "train")
    ingest(spark, delicious_slice(work, "train", args.samples), source, IngestSettings())
    frame = Dataset.load(spark, source).samples().where(F.size("labels") > 0).cache()
    frame.count()
    rows = []
    for estimator in ("OneVsRestXMC", "LabelTreeClassifier"):
        base_s = None
        for stray in STRAYS:
            labels = F.transform("labels", lambda x: x % 45)
            if stray is not None:
                labels = F.when(F.col("sample_id") == 0, F.array(F.lit(stray))).otherwise(labels)
            given = frame.withColumn("labels", labels.cast("array<int>")).drop("sample_id")
            seconds, meta = [], {}
            for _ in range(args.runs):
                fit = (
                    OneVsRestXMC(numTasks=2)
                    if estimator == "OneVsRestXMC"
                    else LabelTreeClassifier(numTrees=1, numTasks=2)
                )
                t0 = time.perf_counter()
                model = fit.fit(given)
                seconds.append(time.perf_counter() - t0)
                meta = model.metadata
            median = statistics.median(seconds)
            base_s = median if stray is None else base_s
            rows.append(
                {
                    "estimator": estimator,
                    "stray id": stray,
                    "n_labels": meta["n_labels"],
                    "labels trained": meta.get("n_labels_trained", meta["n_labels"]),
                    "fit s": round(median, 2),
                    "x without": round(median / base_s, 2),
                }
            )
            print(rows[-1], flush=True)
    spark.stop()
    write_report(
        "labels_present",
        rows,
        {
            "command": "python benchmarks/labels_present.py",
            "data": f"delicious train, first {args.samples} samples, label l as l mod 45",
            "runs": args.runs,
        },
    )


if __name__ == "__main__":
    main()
