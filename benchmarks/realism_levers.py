"""Which parts of the realistic generator decide how much aggregation costs the Baseline?

Each realistic preset (``synth --preset``; ``eagle_spark/data/presets.json``) is built from
published statistics, with ``signal`` and ``shared`` fitted to the paper's Table 1 Oracle P@1 and
P@5 / P@1, and the rest (topic size, cohesion, the head label's share) set by priors. This
benchmark moves one of those parts at a time away from the preset's value, fits ``signal`` again
so that the Oracle's P@1 stays the paper's (the other fitted values kept), and measures, with the
in-driver ridge one-vs-all (``eagle_spark.twin.ridge_oracle_precision``, the proxy the presets are
fitted with) on the preset scaled to 8,000 training and 2,000 test rows:

* the Oracle's P@5 / P@1 (what ``shared`` is fitted to; the paper's beside it);
* the Baseline over the Oracle at P@1 and P@5 under random groups of 4 and 10 (R-4, R-10: every
  member trains on all its group's labels), the paper's Table 2 over Table 1 beside it.

Nothing here is fitted to a Baseline figure: the rows show how far each unidentified part moves
the Baseline, which says what a fully labelled statistic would have to pin down. Cluster groups
(C-8 / C-16) need the project's clustering and are left out.

    python benchmarks/realism_levers.py                          # wiki325k, eurlex4k, wiki10-31k
    python benchmarks/realism_levers.py --presets wiki325k       # one (5 to 30 min on 2 cores)
    python benchmarks/realism_levers.py --markdown               # the report's table

Report: ``benchmarks/reports/realism_levers.json`` (one row per preset and setting).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import write_report  # noqa: E402
from synth_realism import PAPER  # noqa: E402

from eagle_spark import twin  # noqa: E402
from eagle_spark.synth import PRESETS, preset_model  # noqa: E402

N_FIT, N_VAL = 8_000, 2_000
GROUPS = {"R-4": 4, "R-10": 10}
LEVERS: dict[str, tuple[Any, ...]] = {
    # the preset's own value is added to each list
    "shared": (0.0, 0.25, 0.5, 0.75),
    "topic_size": (4, 16, 32),
    "cohesion": (0.3, 0.6),
    "head": (0.1, 0.5),
}


def random_groups(n: int, size: int, seed: int = 0) -> sp.csr_matrix:
    """Y1 of random groups of `size` (the last one smaller): n x groups, one 1 per row."""
    order = np.random.default_rng(seed).permutation(n)
    group = np.empty(n, dtype=np.int64)
    group[order] = np.arange(n) // size
    return sp.csr_matrix((np.ones(n), (np.arange(n), group)))


def baseline_labels(Y: sp.csr_matrix, Y1: sp.csr_matrix) -> sp.csr_matrix:
    """Every member gets every label of its group: Y1 (Y1^T Y), binarised."""
    Yb = sp.csr_matrix(Y1 @ (Y1.T @ Y))
    Yb.data[:] = 1.0
    return Yb


def with_head(model: twin.TwinModel, head: float, labels_per_sample: float) -> twin.TwinModel:
    """The model with its label curve rebuilt as :func:`eagle_spark.twin.published_model` builds
    it, but with the most frequent label in a share `head` of the samples
    (:func:`eagle_spark.twin.label_power_law`); on the full-size model, so that scaling it maps
    the curve as it maps the preset's."""
    r = np.arange(1, model.n_labels + 1, dtype=np.float64)
    a, k0 = twin.label_power_law(
        model.n_labels, model.n_train * labels_per_sample, model.n_train, head=head
    )
    return dataclasses.replace(model, label_curve=twin.frequency_curve((r + k0) ** -a))


def measure(model: twin.TwinModel, target_p1: float, seed: int = 0) -> dict[str, Any]:
    """Fit ``signal`` (bisection, Oracle P@1 within 0.7 point of `target_p1`, at most 8 steps)
    and return the Oracle's P@1 / P@5 and the Baseline's ratios at R-4 and R-10."""
    fit_ids = np.arange(N_FIT, dtype=np.int64)
    val_ids = np.arange(N_VAL, dtype=np.int64)

    def data(signal: float) -> tuple[sp.csr_matrix, ...]:
        m = twin.calibrate_draws(dataclasses.replace(model, signal=round(signal, 4)), seed=seed)
        g = twin.TwinGenerator(m, seed)
        return (*g.matrices(0, fit_ids), *g.matrices(1, val_ids))

    lo, hi, best = 0.0, 1.0, None
    for _ in range(8):
        mid = (lo + hi) / 2
        X, Y, Xv, Yv = data(mid)
        p = twin.ridge_oracle_precision(X, Y, Xv, Yv)
        if best is None or abs(p[1] - target_p1) < abs(best[1][1] - target_p1):
            best = (mid, p, (X, Y, Xv, Yv))
        if abs(p[1] - target_p1) <= 0.7:
            break
        lo, hi = (mid, hi) if p[1] < target_p1 else (lo, mid)
    if best is None:  # the loop runs at least once
        raise RuntimeError("measure: no bisection step ran")
    signal, oracle, (X, Y, Xv, Yv) = best
    row: dict[str, Any] = {
        "signal": round(signal, 4),
        "oracle P@1": round(oracle[1], 2),
        "oracle P@5/P@1": round(oracle[5] / oracle[1], 3),
    }
    for name, size in GROUPS.items():
        b = twin.ridge_oracle_precision(X, baseline_labels(Y, random_groups(N_FIT, size)), Xv, Yv)
        row[f"{name} base/oracle P@1"] = round(b[1] / oracle[1], 3)
        row[f"{name} base/oracle P@5"] = round(b[5] / oracle[5], 3)
    return row


def paper_row(preset: str) -> dict[str, Any]:
    """The paper's figures in the same columns (None where it has none)."""
    p = PAPER[preset]
    o1, o5 = p["oracle"]
    row: dict[str, Any] = {"oracle P@1": o1, "oracle P@5/P@1": round(o5 / o1, 3)}
    for name in GROUPS:
        b = p.get(name, {}).get("baseline")
        row[f"{name} base/oracle P@1"] = None if b is None else round(b[0] / o1, 3)
        row[f"{name} base/oracle P@5"] = None if b is None else round(b[1] / o5, 3)
    return row


COLUMNS = (
    "oracle P@5/P@1",
    "R-4 base/oracle P@1",
    "R-4 base/oracle P@5",
    "R-10 base/oracle P@1",
    "R-10 base/oracle P@5",
)


def markdown(report: dict[str, Any]) -> str:
    """The report as one Markdown table per preset (the paper's row first)."""
    lines: list[str] = []
    for preset in dict.fromkeys(r["preset"] for r in report["rows"]):
        lines += [
            f"**{preset}** (ridge Oracle P@1 held at the paper's; Baseline / Oracle under random "
            "groups)",
            "",
            "| setting | Oracle P@5 / P@1 | R-4 P@1 | R-4 P@5 | R-10 P@1 | R-10 P@5 |",
            "|---|---|---|---|---|---|",
        ]
        for r in report["rows"]:
            if r["preset"] == preset:
                cells = ["-" if r.get(c) is None else f"{r[c]:.3f}" for c in COLUMNS]
                lines.append(f"| {r['setting']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    choices = [p for p in ("wiki325k", "eurlex4k", "wiki10-31k", "amazoncat13k") if p in PRESETS]
    ap.add_argument("--presets", nargs="+", default=choices[:3], choices=choices)
    ap.add_argument("--report", default="realism_levers")
    ap.add_argument("--markdown", action="store_true", help="print the report's table and stop")
    args = ap.parse_args()
    if args.markdown:
        path = pathlib.Path(__file__).resolve().parent / "reports" / f"{args.report}.json"
        print(markdown(json.loads(path.read_text())))
        return
    rows: list[dict[str, Any]] = []
    for preset in args.presets:
        full = preset_model(preset)
        model = twin.calibrate_draws(full.scaled(N_FIT / full.n_train))
        target = PAPER[preset]["oracle"][0]
        own = {
            "shared": model.shared,
            "topic_size": model.topic_size,
            "cohesion": model.cohesion,
            "head": twin.PRIOR_HEAD,
        }
        rows.append({"preset": preset, "setting": "paper (Tables 1-2)", **paper_row(preset)})
        preset_row: dict[str, Any] = {}  # the preset's own settings, measured once for all levers
        for lever, values in LEVERS.items():
            for value in sorted({*values, own[lever]}):
                t0 = time.perf_counter()
                if value == own[lever] and preset_row:
                    row = preset_row
                elif lever == "head":  # the curve is the full preset's, scaled as the preset's
                    moved = with_head(full, value, PRESETS[preset].labels_per_sample)
                    moved = moved.scaled(N_FIT / full.n_train)
                    row = measure(moved, target)
                else:
                    row = measure(dataclasses.replace(model, **{lever: value}), target)
                if value == own[lever]:
                    preset_row = row
                tag = " (preset)" if value == own[lever] else ""
                rows.append(
                    {
                        "preset": preset,
                        "setting": f"{lever} = {value}{tag}",
                        **row,
                        "seconds": round(time.perf_counter() - t0, 1),
                    }
                )
                print(rows[-1], flush=True)
    write_report(
        args.report,
        rows,
        {
            "proxy": "ridge one-vs-all (eagle_spark.twin.ridge_oracle_precision)",
            "rows_fit_val": [N_FIT, N_VAL],
            "groups": "random, numpy seed 0",
        },
    )


if __name__ == "__main__":
    main()
