"""The README's main job on a classic session and on Spark Connect, in one run: whole commands,
`eagle-spark pipeline --conf conf/local.yaml --compare`, the Connect one with `--remote local[2]`
(a Connect server in the command's process), alternating, each from an empty run folder.

    python benchmarks/connect.py              # 1 run each -> benchmarks/reports/connect_main_job.json
    python benchmarks/connect.py --runs 3

The report has per session kind the whole command's wall seconds (median over the runs), peak RSS
(all processes), the ratio to the classic median, and whether every method's P@1..5, nDCG and PSP
equal the classic run's. Compare timings only within one report.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import main_job, write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SESSIONS = {"classic": [], "connect": ["--remote", "local[2]"]}


def run_once(work: pathlib.Path, extra: list[str]) -> dict:
    """One whole command into `work`: wall seconds, peak RSS, its comparison table."""
    shutil.rmtree(work, ignore_errors=True)
    wall, peak, done, _ = main_job(work, *extra)
    if done.returncode != 0:
        sys.exit(f"the main job {extra} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    methods = json.loads((work / "comparison.json").read_text())["methods"]
    return {
        "wall_s": round(wall, 1),
        "peak_rss_GB": round(peak / 2**30, 2),
        "table": {
            m: {k: v[k] for k in ("P_percent", "nDCG_percent", "PSP_percent")}
            for m, v in methods.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs per session kind (default 1)")
    parser.add_argument("--report", default="connect_main_job")
    parser.add_argument("--work", default="/tmp/eagle_connect_bench")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    found: dict[str, list[dict]] = {name: [] for name in SESSIONS}
    for i in range(args.runs):
        for name, extra in SESSIONS.items():
            found[name].append(run_once(pathlib.Path(args.work) / name, extra))
            print(f"run {i + 1}/{args.runs} {name}: {found[name][-1]['wall_s']} s", flush=True)
    classic = statistics.median(r["wall_s"] for r in found["classic"])
    reference = found["classic"][0]["table"]
    rows = [
        {
            "session": name,
            "median s": round(statistics.median(r["wall_s"] for r in runs), 1),
            "runs s": [r["wall_s"] for r in runs],
            "peak RSS GB": max(r["peak_rss_GB"] for r in runs),
            "/ classic": round(statistics.median(r["wall_s"] for r in runs) / classic, 2),
            "same table": all(r["table"] == reference for r in runs),
        }
        for name, runs in found.items()
    ]
    write_report(
        args.report,
        rows,
        {
            "command": "eagle-spark pipeline --conf conf/local.yaml --compare [--remote local[2]]",
            "data": "delicious (embedded), R-4",
            "runs": args.runs,
            "eagle P@1/3/5": [reference["eagle"]["P_percent"][k] for k in (0, 2, 4)],
        },
    )


if __name__ == "__main__":
    main()
