"""``DIR/report.md``: every experiment result found in an experiment folder (Table 2, each
ablation axis, the regression), its figures embedded next to its numbers. Rebuilt from the JSON
results after each experiment, so experiments run into one folder share one report."""

from __future__ import annotations

import json
import os
import posixpath
from typing import TYPE_CHECKING, Any, Callable, Optional

from eagle_spark.comparison import METHOD_NAMES, METHODS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_AXES = ("group-size", "depth", "noise")


def table2_markdown(result: dict[str, Any]) -> str:
    """Table 2's layout: rows grouping x (P@1, P@3, P@5, PSP@5, assignment precision / recall,
    and what ``assign.weighting=auto`` chose or why it could not), columns Oracle, Baseline,
    EAGLE-0, EAGLE (every value in percent)."""
    methods = [m for m in METHODS if any(m in rows for rows in result["groupings"].values())]
    header = ["Oracle"] + [METHOD_NAMES[m] for m in methods]
    lines = [
        "| grouping | metric | " + " | ".join(header) + " |",
        "|---|---|" + "---|" * len(header),
    ]
    oracle = result["oracle"]
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    for name, rows in result["groupings"].items():
        first = name
        k = len(oracle["P_percent"])
        for key, label, at in [("P_percent", f"P@{a}", a) for a in (1, 3, 5) if a <= k] + [
            ("PSP_percent", f"PSP@{k}", k)
        ]:
            cells = [oracle[key][at - 1]] + [
                rows[m][key][at - 1] if m in rows and len(rows[m][key]) >= at else None
                for m in methods
            ]
            lines.append(f"| {first} | {label} | " + " | ".join(fmt(c) for c in cells) + " |")
            first = ""
        for key, label in (
            ("assignment_precision_percent", "assignment precision"),
            ("assignment_recall_percent", "assignment recall"),
        ):
            cells = [None] + [rows.get(m, {}).get(key) for m in methods]
            lines.append(f"| | {label} | " + " | ".join(fmt(c) for c in cells) + " |")
        used = [rows.get(m, {}).get("assignment_used") for m in methods]
        if any(used):  # what auto chose in this grouping, or why it could not
            lines.append("| | assignment used | – | " + " | ".join(u or "–" for u in used) + " |")
    return "\n".join(lines)


def ablation_markdown(out: dict[str, Any], figure: Optional[str]) -> str:
    """The ablation as Markdown: the figure, then the decrements and the P@k behind them."""
    lines = []
    if figure:
        lines += [f"![{out['axis']}]({figure})", ""]
    lines += [
        "Percentage decrement of P@k over the Oracle (lower is better; 0 = as good as the Oracle).",
        "",
        "| "
        + out["axis"]
        + " | grouping | metric | "
        + " | ".join(METHOD_NAMES[m] for m in out["decrement_percent"])
        + " |",
        "|---|---|---|" + "---|" * len(out["decrement_percent"]),
    ]
    for i, (value, name) in enumerate(zip(out["values"], out["groupings"])):
        for metric in next(iter(out["decrement_percent"].values())):
            lines.append(
                f"| {value:g} | {name} | {metric} | "
                + " | ".join(f"{d[metric][i]:.2f}" for d in out["decrement_percent"].values())
                + " |"
            )
    lines += ["", "P@k in percent:", "", table2_markdown(out["result"])]
    return "\n".join(lines)


def regression_markdown(result: dict[str, Any], figure: Optional[str] = None) -> str:
    """Figure 2's regression result (:func:`eagle_spark.experiments.regression.simulate`) as a
    Markdown report (a table, and the figure when given)."""
    lines = [
        "# Figure 2: Theorem 1's regression simulation",
        "",
        "Rel. RMS = RMS error of the estimator / RMS error of least squares with the "
        "correspondences known (lower is better; 1 = the oracle).",
        "",
    ]
    if figure:
        lines += [f"![Figure 2]({figure})", ""]
    lines += ["| sigma_2 | Baseline | Assignment |", "|---|---|---|"]
    for r in result["rows"]:
        lines.append(
            f"| {r['sigma2']:g} | {r['baseline_rel_rms']:.3f} ± {r['baseline_rel_rms_std']:.3f} "
            f"| {r['assignment_rel_rms']:.3f} ± {r['assignment_rel_rms_std']:.3f} |"
        )
    return "\n".join(lines)


def report_markdown(read: Callable[[str], Optional[str]]) -> str:
    """The report from the results `read(name)` returns (the file's text, None when absent)."""
    parts = [
        "# Experiments",
        "",
        "Reproductions of the paper's Table 2, Figure 3 and Figure 2 (docs/experiments.md says how). "
        "Values in percent unless said otherwise.",
        "",
    ]
    found = False
    table2 = read("table2.json")
    if table2 is not None:
        res = json.loads(table2)
        parts += [
            "## Table 2: Oracle, Baseline, EAGLE-0, EAGLE",
            "",
            f"Classifier: {res['model']}; evaluated on the {res['evaluated_on']}.",
            "",
            table2_markdown(res),
            "",
        ]
        found = True
    for axis in _AXES:
        text = read(f"ablation_{axis}.json")
        if text is not None:
            out = json.loads(text)
            parts += [
                f"## Figure 3: ablation over {axis}",
                "",
                f"Classifier: {out['result']['model']}; evaluated on the {out['result']['evaluated_on']}.",
                "",
                ablation_markdown(out, f"ablation_{axis}.png"),
                "",
            ]
            found = True
    text = read("regression.json")
    if text is not None:
        parts += ["## " + regression_markdown(json.loads(text), "regression.png").lstrip("# "), ""]
        found = True
    if not found:
        parts += ["No results yet."]
    return "\n".join(parts).rstrip() + "\n"


def refresh_local(output: str) -> str:
    """Rebuild ``report.md`` of the local folder `output` (atomic); returns its path."""
    from eagle_spark.experiments.figures import write_text

    def read(name: str) -> Optional[str]:
        path = os.path.join(output, name)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as fh:
            return fh.read()

    path = os.path.join(output, "report.md")
    write_text(path, report_markdown(read))
    return path


def refresh(spark: SparkSession, output: str) -> str:
    """Rebuild ``report.md`` of `output` on any file system Spark reaches (atomic); returns its path."""
    from eagle_spark.io.fs import FileSystem, atomic_output

    fs = FileSystem(spark)

    def read(name: str) -> Optional[str]:
        path = posixpath.join(output, name)
        return fs.read_bytes(path).decode() if fs.exists(path) else None

    path = posixpath.join(output.rstrip("/"), "report.md")
    text = report_markdown(read)
    with atomic_output(spark, path, overwrite=True) as tmp:
        fs.write_bytes(tmp, text.encode())
    return path
