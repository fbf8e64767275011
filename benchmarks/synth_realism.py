"""Does synthetic data behave like real data once labels are aggregated? Twins made by
``synth --like`` of bibtex and delicious, run through ``experiment table2`` (Oracle, Baseline,
EAGLE-0, EAGLE = the library's default; the label tree of conf/local.yaml; test sets), against the
real sets' rows of the Table 2 report (``table2_targets.json``): Baseline / Oracle, EAGLE-0 /
Oracle and EAGLE / Oracle at P@1 and P@5 for R-4, R-10 and C-8, side by side.

    python benchmarks/synth_realism.py                       # both twins (needs ../shared/data)
    python benchmarks/synth_realism.py --sources bibtex      # one; the report keeps the others
    python benchmarks/synth_realism.py --markdown            # the report's table

The twin is fitted only on the real training set's statistics (``eagle_spark.twin``: counts,
frequency curves, label co-occurrence, the Oracle's P@1 and P@5 on a validation split); its
Baseline and EAGLE columns are the test of the model. Targets: each ratio within 0.05 of the real
set's at R-4 and R-10, within 0.10 at C-8.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import REPORTS, data_settings, write_report  # noqa: E402
from table2 import result_rows  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
METHODS = ("baseline", "eagle0", "eagle")
TOLERANCE = {"R-4": 0.05, "R-10": 0.05, "C-8": 0.10}


def ratios(rows: list[dict[str, Any]], dataset: str) -> dict[str, dict[str, Any]]:
    """{grouping: {"<method> / Oracle P@k": ratio}} of one data set's Table 2 rows."""
    out: dict[str, dict[str, Any]] = {}
    for g in dict.fromkeys(r["grouping"] for r in rows if r["dataset"] == dataset):
        cell = {r["method"]: r for r in rows if r["dataset"] == dataset and r["grouping"] == g}
        if "oracle" not in cell:
            continue
        o = cell["oracle"]
        out[g] = {
            f"{m} / Oracle P@{k}": round(cell[m][f"P@{k}"] / o[f"P@{k}"], 3)
            for m in METHODS
            if m in cell
            for k in (1, 5)
        }
        out[g]["Oracle P@1"] = o["P@1"]
    return out


def compare(real: dict[str, Any], twin: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (grouping, ratio): real, twin, difference, whether within the tolerance."""
    out = []
    for g, vals in twin.items():
        for key, v in vals.items():
            r = real.get(g, {}).get(key)
            if r is None or key == "Oracle P@1":
                continue
            d = round(v - r, 3)
            out.append(
                {
                    "grouping": g,
                    "ratio": key,
                    "real": r,
                    "twin": v,
                    "difference": d,
                    "within": abs(d) <= TOLERANCE.get(g, 0.10),
                }
            )
    return out


def markdown(report: dict[str, Any]) -> str:
    """The report's comparison as a Markdown table per source."""
    lines = []
    for source, s in report["sources"].items():
        lines += [
            f"**{source}** (Oracle P@1 real {s['oracle_p1']['real']:.2f}, twin "
            f"{s['oracle_p1']['twin']:.2f})",
            "",
            "| grouping | ratio | real | twin | twin - real |",
            "|---|---|---|---|---|",
        ]
        for c in s["comparison"]:
            mark = "" if c["within"] else " (outside)"
            lines.append(
                f"| {c['grouping']} | {c['ratio']} | {c['real']:.3f} | {c['twin']:.3f} | "
                f"{c['difference']:+.3f}{mark} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", nargs="+", default=["bibtex", "delicious"])
    parser.add_argument("--groupings", nargs="+", default=["R-4", "R-10", "C"])
    parser.add_argument("--work", default="/tmp/eagle_synth_realism")
    parser.add_argument("--report", default="synth_realism")
    parser.add_argument("--markdown", action="store_true", help="print the report's table")
    args = parser.parse_args()
    path = REPORTS / f"{args.report}.json"
    if args.markdown:
        print(markdown(json.loads(path.read_text())))
        return

    from eagle_spark.experiments.xmc import table2
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    real_rows = json.loads((REPORTS / "table2_targets.json").read_text())["rows"]
    base = Settings.load(str(ROOT / "conf" / "local.yaml"))
    spark = build_spark(base.spark)
    kept = json.loads(path.read_text()) if path.exists() else {"sources": {}}
    sources = {k: v for k, v in kept["sources"].items() if k not in args.sources}
    for source in args.sources:
        name = f"like:{source}"
        t0 = time.monotonic()
        settings = data_settings(spark, base, name, args.work, test=True)
        fit_s = round(time.monotonic() - t0, 1)
        out = f"{args.work}/{source}_table2"
        rows: list[dict[str, Any]] = []
        for g in args.groupings:
            rows += result_rows(name, table2(spark, settings, [g], out, methods=list(METHODS)), out)
        twin, real = ratios(rows, name), ratios(real_rows, source)
        pair = json.loads(
            pathlib.Path(f"{args.work}/twin_{source}_data/_manifest.json").read_text()
        )
        sources[source] = {
            "oracle_p1": {
                "real": real[next(iter(real))]["Oracle P@1"],
                "twin": twin[next(iter(twin))]["Oracle P@1"],
            },
            "fitted": {
                k: pair["parameters"]["model"][k]
                for k in ("cohesion", "signal", "shared", "topic_size", "draws_per_nnz")
            },
            "fit": pair["fit"],
            "twin_rows": rows,
            "comparison": compare(real, twin),
            "wall_s": {"twin": fit_s, "table2": round(time.monotonic() - t0 - fit_s, 1)},
        }
        flat = [
            {"source": s, **{k: c[k] for k in ("grouping", "ratio", "real", "twin", "within")}}
            for s, v in sources.items()
            for c in v["comparison"]
        ]
        write_report(
            args.report,
            flat,
            {
                "real": "table2_targets.json (the real sets' test-set rows)",
                "generator": "eagle_spark.twin (synth --like)",
                "tolerance": TOLERANCE,
                "sources": sources,
            },
        )


if __name__ == "__main__":
    main()
