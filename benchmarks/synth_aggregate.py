"""Benchmark: synth --preset wiki325k at scales 0.1 and 1.0, then aggregate random groups of 10.

    python benchmarks/synth_aggregate.py [--scales 0.1 1.0] [--workdir /tmp/eagle-bench-synth]

Targets on the 2-core machine: scale 1.0 generates in <= 10 minutes and aggregates in <= 5
minutes, within 16 GB (peak RSS summed over the driver, the JVM and the Python workers).
Also reports the generated statistics against the preset's (WikiLSHTC-325K) shape.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import PeakRSS, folder_bytes, generator, write_report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--workdir", default="/tmp/eagle-bench-synth")
    ap.add_argument(
        "--difficulty",
        type=float,
        default=None,
        help="the planted generator at this difficulty in [0, 1] (default: the realistic preset)",
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the generated data (for grlr_scale.py)"
    )
    args = ap.parse_args()

    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.session import build_spark
    from eagle_spark.settings import AggregateSettings, Settings
    from eagle_spark.synth import PRESETS, synth

    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    settings = Settings.load(overrides=["spark.driver_memory=12g"])
    spark = build_spark(settings.spark)
    rows, stats = [], {}
    for scale in args.scales:
        out = work / f"wiki325k_{scale}"
        with PeakRSS() as rss:
            t0 = time.monotonic()
            pair = synth(
                spark,
                str(out),
                "wiki325k",
                scale=scale,
                seed=0,
                overwrite=True,
                difficulty=args.difficulty,
            )
            gen_s = time.monotonic() - t0
        rows.append(
            {
                "step": "synth",
                "scale": scale,
                "seconds": round(gen_s, 1),
                "peak_rss_GB": round(rss.peak_bytes / 2**30, 2),
                "output_MB": round(folder_bytes(out) / 1e6, 1),
                "samples": pair["splits"]["train"]["n_samples"]
                + pair["splits"]["test"]["n_samples"],
                "target_s": 600 if scale == 1.0 else None,
            }
        )
        stats[str(scale)] = pair["splits"]
        agg_out = work / f"wiki325k_{scale}_R10"
        with PeakRSS() as rss:
            t0 = time.monotonic()
            manifest = aggregate(
                spark,
                str(out / "train"),
                str(agg_out),
                AggregateSettings(grouping="random", group_size=10, seed=0),
                overwrite=True,
            )
            agg_s = time.monotonic() - t0
        rows.append(
            {
                "step": "aggregate R-10",
                "scale": scale,
                "seconds": round(agg_s, 1),
                "peak_rss_GB": round(rss.peak_bytes / 2**30, 2),
                "output_MB": round(folder_bytes(agg_out) / 1e6, 1),
                "samples": manifest["n_samples"],
                "target_s": 300 if scale == 1.0 else None,
            }
        )
        stats[f"{scale}_groups"] = {
            k: manifest[k]
            for k in ("n_groups", "group_size_mean", "group_size_max", "n_positive_pairs")
        }
    spark.stop()
    target = PRESETS["wiki325k"]
    write_report(
        "synth_aggregate",
        rows,
        {
            "synth_difficulty": args.difficulty,
            "generator": generator(args.difficulty),
            "target_shape": target.__dict__ | {"samples_per_label": 17.46},
            "generated": stats,
            "memory_target_GB": 16,
        },
    )
    for scale in args.scales:
        tr = stats[str(scale)]["train"]
        print(
            f"scale {scale}: train {tr['n_samples']:,} samples, {tr['nnz_per_sample']:.2f} nnz/sample "
            f"(42), {tr['labels_per_sample']:.3f} labels/sample (3.19), "
            f"{tr['samples_per_label']:.2f} samples/label (17.46), max label freq "
            f"{tr['max_samples_per_label']:,}"
        )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
