"""Benchmark: ingest of a 1M-line synthetic XC file (target >= 100,000 lines/s on 2 cores).

    python benchmarks/ingest.py [--lines 1000000] [--workdir /tmp/eagle-bench-ingest]

Writes a Wiki-325K-shaped file (about 42 nonzeros and 3 labels per line) as plain text (splittable)
and as gzip (one task), ingests each with default local settings and reports wall time (Spark
session start excluded), lines/s, peak RSS of all processes and output bytes.
"""

from __future__ import annotations

import argparse
import gzip
import pathlib
import shutil
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import PeakRSS, folder_bytes, write_report  # noqa: E402


def make_file(
    path: pathlib.Path,
    n_lines: int,
    n_features: int = 1_617_899,
    n_labels: int = 325_056,
    nnz: int = 42,
    seed: int = 0,
) -> None:
    """Write an XC text file of `n_lines` random sparse rows (vectorised with pyarrow)."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        fh.write(f"{n_lines} {n_features} {n_labels}\n")
        chunk = 50_000
        for start in range(0, n_lines, chunk):
            n = min(chunk, n_lines - start)
            ids = np.sort(rng.choice(n_features, size=(n, nnz)), axis=1)
            ids = ids + np.arange(nnz)  # strictly increasing per row (unique)
            ids = np.minimum(ids, n_features - 1 - (nnz - 1 - np.arange(nnz)))
            ids = np.maximum.accumulate(ids + 0, axis=1)
            vals = rng.integers(1, 10_000, size=(n, nnz))
            labs = np.sort(rng.choice(n_labels, size=(n, 3), replace=True), axis=1)
            labs[:, 1] = np.maximum(labs[:, 1], labs[:, 0] + 1)
            labs[:, 2] = np.maximum(labs[:, 2], labs[:, 1] + 1)
            labs = np.minimum(labs, n_labels - 1)
            tok = pc.binary_join_element_wise(
                pc.cast(pa.array(ids.ravel()), pa.string()),
                pc.binary_join_element_wise("0", pc.cast(pa.array(vals.ravel()), pa.string()), "."),
                ":",
            )
            feat = pc.binary_join(
                pa.ListArray.from_arrays(
                    pa.array(np.arange(0, n * nnz + 1, nnz, dtype=np.int32)), tok
                ),
                " ",
            )
            lab = pc.binary_join(
                pa.ListArray.from_arrays(
                    pa.array(np.arange(0, n * 3 + 1, 3, dtype=np.int32)),
                    pc.cast(pa.array(labs.ravel()), pa.string()),
                ),
                ",",
            )
            lines = pc.binary_join_element_wise(lab, feat, " ")
            fh.write("\n".join(lines.to_pylist()))
            fh.write("\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--workdir", default="/tmp/eagle-bench-ingest")
    ap.add_argument("--skip-gzip", action="store_true")
    args = ap.parse_args()

    from eagle_spark.io.ingest import ingest
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    work = pathlib.Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    src = work / "synthetic.txt"
    t0 = time.monotonic()
    make_file(src, args.lines)
    print(f"generated {src} ({src.stat().st_size / 1e6:.0f} MB) in {time.monotonic() - t0:.0f} s")
    inputs = [("plain", src)]
    if not args.skip_gzip:
        gz = work / "synthetic.txt.gz"
        with open(src, "rb") as fi, gzip.open(gz, "wb", compresslevel=1) as fo:
            shutil.copyfileobj(fi, fo, 1 << 20)
        inputs.append(("gzip", gz))

    settings = Settings()
    spark = build_spark(settings.spark)
    warm = work / "warmup.txt"
    make_file(warm, 20_000, seed=1)
    t0 = time.monotonic()
    ingest(spark, str(warm), str(work / "ds_warmup"), settings.ingest, overwrite=True)
    print(
        f"warm-up ingest of 20,000 lines (JVM JIT, Python workers): {time.monotonic() - t0:.1f} s"
    )
    rows = []
    for kind, path in inputs:
        out = work / f"ds_{kind}"
        with PeakRSS() as rss:
            start = time.monotonic()
            manifest = ingest(spark, str(path), str(out), settings.ingest, overwrite=True)
            seconds = time.monotonic() - start
        rows.append(
            {
                "input": kind,
                "lines": manifest["n_samples"],
                "input_MB": round(path.stat().st_size / 1e6, 1),
                "seconds": round(seconds, 2),
                "lines_per_s": round(manifest["n_samples"] / seconds),
                "peak_rss_GB": round(rss.peak_bytes / 2**30, 2),
                "output_MB": round(folder_bytes(out) / 1e6, 1),
                "target_lines_per_s": 100_000,
            }
        )
    spark.stop()
    write_report("ingest", rows, {"master": settings.spark.master})
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
