"""How well group labels alone choose the assignment: ``experiment select`` on the training sets,
each candidate scored on held-out groups by every group-level criterion and, with the held-out
members' true labels, at the sample level.

    python benchmarks/selection.py                                    # bibtex, delicious (../shared/data)
    python benchmarks/selection.py --datasets synth:eurlex4k:0.5 --report selection_synth

The report keeps every candidate's scores (``candidate_scores``: each criterion's P@1/3/5 and the
sample P@k, percent) and, for each data set, grouping and criterion (``max``, ``sum``, ``multiset``) and each candidate set
(all candidates, and ``assign.candidates``' default: what ``auto`` chooses from), the candidate the
criterion ranks first and whether its sample P@5 is within 0.5 of the best candidate's (the
agreement the issue asks for). The test sets are never read. The experiment folders are resumable
(``--work``). Writes benchmarks/reports/<report>.json and prints the agreement per criterion.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import data_settings, print_table, synth_generator, write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["bibtex", "delicious"],
        help="names under ../shared/data/xc, or synth:<preset>:<scale>",
    )
    parser.add_argument("--groupings", nargs="+", default=["R-4", "R-10", "C"])
    parser.add_argument(
        "--report", default="selection", help="report name under benchmarks/reports"
    )
    parser.add_argument("--work", default="/tmp/eagle_selection")
    args = parser.parse_args()

    from eagle_spark.assignment.selection import CRITERION, selection_score
    from eagle_spark.evaluation.group import CRITERIA
    from eagle_spark.experiments.select import AGREEMENT_P5, CANDIDATES, select
    from eagle_spark.session import build_spark
    from eagle_spark.settings import AssignSettings, Settings

    base = Settings.load(str(ROOT / "conf" / "local.yaml"))
    spark = build_spark(base.spark)
    auto_set = tuple(AssignSettings().candidates)
    rows, agree, scores = [], {}, []
    for name in args.datasets:
        settings = data_settings(spark, base, name, args.work)
        out = select(
            spark, settings, args.groupings, f"{args.work}/{name.replace(':', '_')}", CANDIDATES
        )
        for g, res in out["groupings"].items():
            cands = res["candidates"]
            scores.extend(
                {"dataset": name, "grouping": g, "candidate": c, **row} for c, row in cands.items()
            )
            for cset_name, cset in (("all", CANDIDATES), ("auto", auto_set)):
                best = max(cset, key=lambda c: cands[c]["sample P@5"])
                for crit in CRITERIA:
                    chosen = max(
                        cset, key=lambda c: (selection_score(cands[c], crit), -cset.index(c))
                    )
                    ok = cands[chosen]["sample P@5"] >= cands[best]["sample P@5"] - AGREEMENT_P5
                    agree.setdefault((cset_name, crit), []).append(ok)
                    rows.append(
                        {
                            "dataset": name,
                            "grouping": g,
                            "candidates": cset_name,
                            "criterion": crit,
                            "chosen": chosen,
                            "sample best": best,
                            "sample P@5 chosen": cands[chosen]["sample P@5"],
                            "sample P@5 best": cands[best]["sample P@5"],
                            "agrees": ok,
                        }
                    )
    summary = [
        {
            "candidates": c,
            "criterion": k,
            "agreement %": round(100 * sum(v) / len(v), 1),
            "cells": len(v),
        }
        for (c, k), v in agree.items()
    ]
    write_report(
        args.report,
        rows,
        {
            "datasets": args.datasets,
            "generator": {name: synth_generator(name) for name in args.datasets},
            "groupings": args.groupings,
            "held_out": 0.2,
            "auto_candidates": list(auto_set),
            "auto_criterion": CRITERION,
            "summary": summary,
            "candidate_scores": scores,
            "classifier": "tree (conf/local.yaml)",
        },
    )
    print_table(rows)
    print()
    print_table(summary)
    spark.stop()


if __name__ == "__main__":
    main()
