"""What the on-disk integrity checks cost the main job: the time spent writing file lists at each
commit (every byte read once for its CRC-32, every Parquet footer read) and checking them on each
read (a listing, sizes, small files' CRC-32, the manifest against the recorded statistics), as a
share of the whole command.

    python benchmarks/integrity_cost.py                  # the README's main job, one run
    python benchmarks/integrity_cost.py --runs 3         # median of three runs

Runs ``eagle-spark pipeline --conf conf/local.yaml --compare`` in this process (a fresh run folder
each time) with the integrity functions wrapped by timers, so the checks' time and the command's
time come from the same run. Writes benchmarks/reports/integrity_cost.json and prints a table.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import sys
import time
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=1, help="runs of the main job (median reported)"
    )
    parser.add_argument("--work", default="/tmp/eagle_integrity_cost")
    args = parser.parse_args()

    from eagle_spark import cli
    from eagle_spark.io import integrity

    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def timed(name, fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - start
                calls[name] += 1

        return wrapper

    # record is looked up at each commit, check_folder / check_counts through the readers' imports
    integrity.record = timed("record (commit)", integrity.record)
    import eagle_spark.classifiers.base as base
    import eagle_spark.io.tables as tables
    import eagle_spark.ml.base as mlbase

    for module in (tables, base, mlbase):
        if hasattr(module, "check_folder"):
            module.check_folder = timed("check_folder (read)", module.check_folder)
    tables.check_counts = timed("check_counts (read)", tables.check_counts)

    rows = []
    for run in range(args.runs):
        spent.clear()
        calls.clear()
        out = pathlib.Path(args.work) / f"run{run}"
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        code = cli.main(
            [
                "pipeline",
                "--conf",
                str(ROOT / "conf" / "local.yaml"),
                "--compare",
                "--output",
                str(out),
                "--log-level",
                "WARNING",
                "--summary",
                str(out / "summary.json"),
            ]
        )
        wall = time.perf_counter() - start
        if code != 0:
            sys.exit(f"the main job exited {code}")
        checks = sum(spent.values())
        rows.append(
            {
                "run": run,
                "command_s": round(wall, 1),
                "checks_s": round(checks, 3),
                "share_%": round(100 * checks / wall, 2),
                **{f"{k} s": round(v, 3) for k, v in sorted(spent.items())},
                **{f"{k} calls": calls[k] for k in sorted(calls)},
            }
        )
    median = statistics.median(r["share_%"] for r in rows)
    write_report(
        "integrity_cost",
        rows,
        {
            "command": "eagle-spark pipeline --conf conf/local.yaml --compare",
            "median_share_%": median,
            "target_share_%": 5.0,
        },
    )
    print(f"median share of the main job: {median:.2f}% (target under 5%)")


if __name__ == "__main__":
    main()
