"""The main job's comparison and run report as data and as Markdown: the paper's Table 2 layout
(P@k per method, plus assignment precision and recall) and the table of stages. Pure formatting,
no Spark: the pipeline (:mod:`eagle_spark.pipeline`), the experiments and the benchmarks share it.
"""

from __future__ import annotations

from typing import Any, Optional

from eagle_spark.settings import PIPELINE_METHODS

METHODS = PIPELINE_METHODS
"""Every method, in the order of the paper's Table 2: ``eagle_paper`` is Algorithm 2 as printed
(each group label to its best member, hard), ``eagle`` EAGLE with the ``assign`` settings (the
library's default)."""

METHOD_NAMES = {
    "baseline": "Baseline",
    "eagle0": "EAGLE-0",
    "eagle_paper": "EAGLE (paper)",
    "eagle": "EAGLE",
}
"""The methods' names in the tables (the paper's)."""


def comparison_of(results: dict[str, dict[str, Any]], grouping: str, until: str) -> dict[str, Any]:
    """The comparison of a run (``comparison.json``): its grouping (``R-4``, ``C``, ...), the stage
    it ran until, and per method of `results` (method -> its ``metrics``, ``assignment`` quality and
    ``assignment_used``) the method's name and :func:`percent_row`."""
    methods = {
        method: {
            "name": METHOD_NAMES[method],
            **percent_row(res.get("metrics"), res.get("assignment"), res.get("assignment_used")),
        }
        for method, res in results.items()
    }
    return {"grouping": grouping, "until": until, "methods": methods}


def percent_row(
    metrics: Optional[dict[str, Any]],
    quality: Optional[dict[str, Any]],
    used: Optional[str] = None,
) -> dict[str, Any]:
    """One column of the comparison: P / nDCG / PSP @1..k and assignment precision / recall, in
    percent rounded to 2 decimals (None where not known, e.g. no true Y), the assigned (sample,
    label) pairs (the training set's positives; None without the true Y), and `used`: what
    ``assign.weighting=auto`` chose or why it could not
    (:func:`eagle_spark.assignment.assign.choice_of`; None: not chosen)."""
    metrics, quality = metrics or {}, quality or {}
    return {
        "assignment_used": used,
        "P_percent": [round(100 * v, 2) for v in metrics.get("P", [])],
        "nDCG_percent": [round(100 * v, 2) for v in metrics.get("nDCG", [])],
        "PSP_percent": [round(100 * v, 2) for v in metrics.get("PSP", [])],
        "assignment_precision_percent": _percent(quality.get("precision")),
        "assignment_recall_percent": _percent(quality.get("recall")),
        "assignment_pairs": quality.get("assigned_pairs"),
    }


def _percent(fraction: Optional[float]) -> Optional[float]:
    return None if fraction is None else round(100 * fraction, 2)


def comparison_markdown(comparison: dict[str, Any]) -> str:
    """The paper's Table 2 layout: rows grouping x P@1/3/5, columns Baseline / EAGLE-0 / EAGLE,
    plus assignment precision and recall when the true Y was known (every value in percent)."""
    methods = [m for m in METHODS if m in comparison["methods"]]
    cols = [comparison["methods"][m] for m in methods]
    lines = [
        "| grouping | metric | " + " | ".join(c["name"] for c in cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    first = comparison["grouping"]
    for at in (1, 3, 5):
        if all(len(c["P_percent"]) >= at for c in cols) and cols:
            lines.append(
                f"| {first} | P@{at} | "
                + " | ".join(f"{c['P_percent'][at - 1]:.2f}" for c in cols)
                + " |"
            )
            first = ""
    for key, label in (
        ("assignment_precision_percent", "assignment precision"),
        ("assignment_recall_percent", "assignment recall"),
    ):
        if cols and all(c[key] is not None for c in cols):
            lines.append(
                f"| {first} | {label} | " + " | ".join(f"{c[key]:.2f}" for c in cols) + " |"
            )
            first = ""
    if any(c.get("assignment_used") for c in cols):
        lines.append(
            f"| {first} | assignment used | "
            + " | ".join(c.get("assignment_used") or "–" for c in cols)
            + " |"
        )
    return "\n".join(lines)


def report_markdown(report: dict[str, Any]) -> str:
    """The run report as a Markdown table (one row per stage)."""
    lines = [
        f"# eagle_spark pipeline run: {report['output']}",
        "",
        f"grouping {report['grouping']}, methods {', '.join(report['methods'])}, "
        f"total {report['seconds']:.1f} s",
        "",
        "| stage | status | seconds | rows | peak RSS MB | output |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["stages"]:
        mem = "" if r["peak_rss_mb"] is None else f"{r['peak_rss_mb']:.0f}"
        status = r["status"] + (f" from {r['copied_from']}" if r.get("copied_from") else "")
        lines.append(
            f"| {r['stage']} | {status} | {r['seconds']:.1f} | {r['rows']} | {mem} | {r['output']} |"
        )
    used = {m: u for m, u in (report.get("assignment_used") or {}).items() if u}
    if used:
        lines += [
            "",
            "assignment used: " + "; ".join(f"{METHOD_NAMES[m]} {u}" for m, u in used.items()),
        ]
    lines += [
        "",
        "Peak RSS is the driver's process tree (in local mode: driver, JVM and Python workers); "
        "executors of a cluster are not included.",
    ]
    return "\n".join(lines)


__all__ = [
    "METHODS",
    "METHOD_NAMES",
    "comparison_of",
    "comparison_markdown",
    "percent_row",
    "report_markdown",
]
