"""The paper's own experiments on the real data at hand, as ``eagle-spark experiment`` runs them:
Table 2 (Oracle, Baseline, EAGLE-0, EAGLE under R-4, R-10 and C-8 with the paper's hard top-c
assignment), Figure 3's three ablations (group size, cluster depth, heterogeneity within a group)
on bibtex and delicious, and Figure 2's regression simulation.

    python benchmarks/paper_experiments.py                       # bibtex, delicious, regression
    python benchmarks/paper_experiments.py --datasets bibtex --no-regression
    python benchmarks/paper_experiments.py --markdown table2     # a block of docs/experiments.md

Settings: conf/local.yaml (the label tree) with ``assign.weighting=hard`` (each group label to its
top-c members, the paper's Algorithm 2 with the label's count; the library's default ``auto`` is
measured by ``table2.py``), every other setting the library's default; test sets. Reports:
``paper_experiments_<data set>.json`` (Table 2's rows, each ablation's decrement of P@1/3/5 over
the Oracle, each experiment's wall seconds; one experiment folder per data set, so a grouping
made once, such as R-4 or C-8, is reused by the later experiments and their seconds leave it out)
and ``paper_regression.json``; the figures go to ``docs/figures/`` (``<data
set>_ablation_<axis>.png``, ``regression.png``). Needs ../shared/data for bibtex and delicious.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import REPORTS, data_settings, write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"
AT = (1, 3, 5)
METHODS = ("baseline", "eagle0", "eagle")
GROUPINGS = ("R-4", "R-10", "C-8")
# Figure 3's axes as the paper draws them (noise: clusters of depth NOISE_DEPTH, each value a sigma)
AXES: dict[str, tuple[float, ...]] = {
    "group-size": (2, 4, 8, 16),
    "depth": (6, 8, 10, 12),
    "noise": (0, 0.05, 0.1, 0.2, 0.5, 1, 2),
}
NOISE_DEPTH = 10


def table2_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Report rows of one ``experiment table2`` result: the Oracle once, then a row per grouping
    and method (P@1/3/5 and PSP@5 in percent, assignment precision / recall in percent)."""

    def row(grouping: str, method: str, res: dict[str, Any]) -> dict[str, Any]:
        return {
            "grouping": grouping,
            "method": method,
            **{f"P@{k}": res["P_percent"][k - 1] for k in AT},
            "PSP@5": res["PSP_percent"][4],
            "assignment precision": res.get("assignment_precision_percent"),
            "assignment recall": res.get("assignment_recall_percent"),
        }

    rows = [row("", "oracle", result["oracle"])]
    for g, methods in result["groupings"].items():
        rows += [row(g, m, methods[m]) for m in METHODS if m in methods]
    return rows


def ablation_entry(out: dict[str, Any]) -> dict[str, Any]:
    """The report's entry of one ``experiment ablation`` result: the axis' values and groupings,
    the Oracle's P@1/3/5 and each method's decrement over it (percent of the Oracle)."""
    return {
        "values": out["values"],
        "groupings": out["groupings"],
        "oracle P@k": out["oracle_P_percent"][: max(AT)],
        "decrement": out["decrement_percent"],
    }


def run_dataset(spark: Any, base: Any, name: str, work: str) -> None:
    """Table 2 and the three ablations on data set `name` (one experiment folder under `work`);
    the report is rewritten after each experiment."""
    from eagle_spark.experiments.xmc import ablation, table2

    settings = data_settings(spark, base, name, work, test=True)
    out = f"{work}/{name}"
    extra: dict[str, Any] = {
        "dataset": name,
        "evaluated_on": "test set",
        "classifier": "tree (conf/local.yaml)",
        "assign": settings.assign.to_dict(),
        "wall_s": {},
        "ablations": {},
    }
    t0 = time.monotonic()
    result = table2(spark, settings, list(GROUPINGS), out, methods=METHODS)
    extra["wall_s"]["table2"] = round(time.monotonic() - t0, 1)
    rows = table2_rows(result)
    write_report(f"paper_experiments_{name}", rows, extra, table=False)
    for axis, values in AXES.items():
        axis_settings = (
            settings.replace("aggregate", depth=NOISE_DEPTH) if axis == "noise" else settings
        )
        t0 = time.monotonic()
        res = ablation(spark, axis_settings, axis, list(values), out, methods=METHODS)
        extra["wall_s"][axis] = round(time.monotonic() - t0, 1)
        extra["ablations"][axis] = ablation_entry(res)
        shutil.copyfile(f"{out}/ablation_{axis}.png", FIGURES / f"{name}_ablation_{axis}.png")
        write_report(f"paper_experiments_{name}", rows, extra, table=False)
    write_report(f"paper_experiments_{name}", rows, extra)


def run_regression(work: str) -> None:
    """Figure 2's simulation (numpy only) into ``paper_regression.json`` and the PNG."""
    from eagle_spark.experiments.regression import run

    t0 = time.monotonic()
    result = run(None, f"{work}/regression")
    seconds = round(time.monotonic() - t0, 2)
    shutil.copyfile(f"{work}/regression/regression.png", FIGURES / "regression.png")
    write_report(
        "paper_regression",
        result["rows"],
        {"setting": result["setting"], "seed": result["seed"], "wall_s": seconds},
    )


# ---------------------------------------------------------------- Markdown from the reports


def _load(name: str) -> dict[str, Any]:
    return json.loads((REPORTS / f"{name}.json").read_text())


NAMES = {"oracle": "Oracle", "baseline": "Baseline", "eagle0": "EAGLE-0", "eagle": "EAGLE"}


def table2_markdown(datasets: tuple[str, ...] = ("delicious", "bibtex")) -> list[str]:
    """Per data set the paper's Table 2 layout (grouping x P@1/3/5 and assignment precision, a
    column per method, the best method of a row in bold) and EAGLE minus the Baseline, the mean
    over the groupings."""
    out: list[str] = []
    for ds in datasets:
        rep = _load(f"paper_experiments_{ds}")
        rows = rep["rows"]
        oracle = next(r for r in rows if r["method"] == "oracle")
        out += [
            f"**{ds}** (report `paper_experiments_{ds}.json`; Table 2 took "
            f"{rep['wall_s']['table2'] / 60:.1f} min)",
            "",
            "| grouping | metric | Oracle | " + " | ".join(NAMES[m] for m in METHODS) + " |",
            "|---|---|---|---|---|---|",
        ]
        diffs: dict[str, list[float]] = {f"P@{k}": [] for k in AT}
        for g in GROUPINGS:
            cell = {r["method"]: r for r in rows if r["grouping"] == g}
            first = g
            for key in (*(f"P@{k}" for k in AT), "assignment precision"):
                vals = [cell[m][key] for m in METHODS]
                best = max(vals) if key != "assignment precision" else None
                shown = [f"**{v:.2f}**" if v == best else f"{v:.2f}" for v in vals]
                ora = f"{oracle[key]:.2f}" if key != "assignment precision" else "–"
                out.append(f"| {first} | {key} | {ora} | " + " | ".join(shown) + " |")
                first = ""
            for k in AT:
                diffs[f"P@{k}"].append(cell["eagle"][f"P@{k}"] - cell["baseline"][f"P@{k}"])
        mean = " / ".join(f"{sum(v) / len(v):+.2f}" for v in diffs.values())
        out += ["", f"EAGLE − Baseline, mean over the groupings (P@1 / P@3 / P@5): {mean}", ""]
    return out[:-1]


def ablation_markdown(axis: str, datasets: tuple[str, ...] = ("delicious", "bibtex")) -> list[str]:
    """Per data set and value of `axis`, the decrement of P@1 and P@5 over the Oracle (percent)
    of the Baseline, EAGLE-0 and EAGLE."""
    out = [
        "| data | grouping | "
        + " | ".join(f"{NAMES[m]} P@1 | {NAMES[m]} P@5" for m in METHODS)
        + " |",
        "|---|---|" + "---|" * (2 * len(METHODS)),
    ]
    minutes = []
    for ds in datasets:
        rep = _load(f"paper_experiments_{ds}")
        entry = rep["ablations"][axis]
        for i, g in enumerate(entry["groupings"]):
            vals = " | ".join(
                f"{entry['decrement'][m]['P@1'][i]:.1f} | {entry['decrement'][m]['P@5'][i]:.1f}"
                for m in METHODS
            )
            out.append(f"| {ds} | {g} | {vals} |")
        minutes.append(f"{ds} {rep['wall_s'][axis] / 60:.1f} min")
    out += [
        "",
        f"Reports `paper_experiments_<data>.json`; wall time {', '.join(minutes)} (groupings "
        "made by an earlier experiment in the same folder reused).",
    ]
    return out


def regression_markdown() -> list[str]:
    """Figure 2's table: relative RMS error of the two estimators at each sigma_2 (mean over
    seeds)."""
    rep = _load("paper_regression")
    rows = rep["rows"]
    out = [
        "| σ_2 | " + " | ".join(f"{r['sigma2']:g}" for r in rows) + " |",
        "|---|" + "---|" * len(rows),
        "| Baseline | " + " | ".join(f"{r['baseline_rel_rms']:.2f}" for r in rows) + " |",
        "| Assignment | " + " | ".join(f"{r['assignment_rel_rms']:.2f}" for r in rows) + " |",
        "",
        f"Report `paper_regression.json` ({rep['wall_s']:.1f} s).",
    ]
    return out


def miml_markdown() -> list[str]:
    """Table 3: top-1 test accuracy (percent, mean ± standard deviation over the network seeds)
    of Deep-MIML, EAGLE-0 and EAGLE at g = 4 and g = 50, beside the paper's, from the reports
    ``miml_mnist_g4.json`` and ``miml_mnist_g50.json``; then each report's tuned learning rate,
    epochs, seconds and per-seed accuracies."""
    reps = {g: _load(f"miml_mnist_g{g}") for g in (4, 50)}
    names = {"deep-miml": "Deep-MIML", "eagle0": "EAGLE-0", "eagle": "EAGLE"}
    out = [
        "| method | g = 4 here | g = 4 paper | g = 50 here | g = 50 paper |",
        "|---|---|---|---|---|",
    ]
    for m, label in names.items():
        cells = []
        for g in (4, 50):
            res = reps[g]["methods"][m]
            cells += [f"{res['mean']:.2f} ± {res['std']:.2f}", f"{res['paper']:.2f}"]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    for g, rep in reps.items():
        seeds = "; ".join(
            f"{names[m]} " + " / ".join(f"{a:.2f}" for a in res["accuracy"])
            for m, res in rep["methods"].items()
        )
        out.append(
            f"- g = {g} (`miml_mnist_g{g}.json`): tuned lr {rep['tuned']['lr']:g}, "
            f"{rep['tuned']['epochs']} epochs, {rep['seconds']['total']:.1f} s in all; "
            f"per seed: {seeds}."
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["bibtex", "delicious"])
    parser.add_argument("--no-regression", action="store_true")
    parser.add_argument("--work", default="/tmp/eagle_paper_experiments")
    parser.add_argument(
        "--markdown",
        choices=("table2", "group-size", "depth", "noise", "regression", "miml"),
        help="print one block of docs/experiments.md from the reports and exit",
    )
    args = parser.parse_args()
    if args.markdown:
        lines = {
            "table2": table2_markdown,
            "regression": regression_markdown,
            "miml": miml_markdown,
        }.get(args.markdown, lambda: ablation_markdown(args.markdown))()
        print("\n".join(lines))
        return
    if not args.no_regression:
        run_regression(args.work)
    if not args.datasets:
        return
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    base = Settings.load(str(ROOT / "conf" / "local.yaml"), ["assign.weighting=hard"])
    spark = build_spark(base.spark)
    for name in args.datasets:
        run_dataset(spark, base, name, args.work)
    spark.stop()


if __name__ == "__main__":
    main()
