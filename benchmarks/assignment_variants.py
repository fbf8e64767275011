"""Which way of training on EAGLE's assignments beats the Baseline: the assignment variants of
issue "training that knows what it does not know", on a validation split of the training sets.

    python benchmarks/assignment_variants.py [--datasets bibtex delicious] [--groupings R-4 R-10 C]
    python benchmarks/assignment_variants.py --datasets synth:eurlex4k:0.5 \
        --variants argmax top-c argmax+ignore top-c+ignore --report assignment_variants_synth
    python benchmarks/assignment_variants.py --frontier --report assignment_variants_pruned

For each data set (../shared/data/xc, or a synthetic preset) the training set is split 80 / 20 by a seeded hash of
sample_id (``experiment table2 --validation 0.2``: the test sets are never looked at), and the
label tree (conf/local.yaml) is trained on the Oracle's true labels, the Baseline's group labels
and EAGLE's assignments (T = 20) under four variants:

* ``argmax``: Algorithm 2 as printed (each group label to its best member), unassigned members
  are negatives (the paper);
* ``top-c``: a label of list-merge count c to the top-c members (``assign.multiplicity``);
* ``argmax+ignore`` / ``top-c+ignore``: the same, with ``tree.unassigned=ignore`` (a member of a
  group labelled k that was not assigned k is left out of k's ranker instead of being a negative);
* ``soft T=t``: weighted assignment (``assign.weighting=soft``, ``assign.temperature=t``, top-c
  members weight 1, the others exp(-d / t)), the tree trained on the expected loss;
* ``top-c+r1`` / ``top-c+r2`` / ``soft T=0.3+r1``: the same assignment followed by 1 or 2 rounds
  of refinement with a one-vs-all classifier (``assign.refine_rounds``);
* ``soft T=0.3+r1 keep=K``: the same with ``assign.soft_keep=K`` (at most ceil(K x c) members of
  a group weighted for its label; the soft variants above are unpruned, ``soft_keep=0``);
  ``soft T=0.3+r1 budget=B``: the same with ``assign.soft_budget=B`` (every round's positives at
  most B x the hard assignment's, the lightest pairs of the whole assignment dropped first);
  ``--frontier`` runs top-c and these, and the report gives each variant's assigned weight over
  top-c's (``positives / top-c``, from the assignments' precision and recall: weight = recall x
  true pairs / precision) and its assigned (sample, label) pairs over top-c's (``pairs / top-c``,
  the rows the classifier trains on, what ``soft_budget`` bounds);
* ``soft T=0.3+r1x3`` / ``soft T=0.3+r3x3`` (and ``keep=2``): the refinement cross-fitted in 3
  folds over the groups (``assign.refine_folds``: a group's members scored by a classifier that
  never trained on its labels), 1 round, or up to 3 stopping once a round changes at most 1% of
  its pairs and weights (``assign.refine_tolerance=0.01``);
* ``soft T=0.3+r1x3 keep=2 neg=R`` / ``soft T=0.3+r3x3 keep=2 neg=R``: the same with each
  scorer drawing about R negatives outside a label's groups per positive pair
  (``assign.refine_negatives=R``) instead of every one within the round's budget;
* ``post T=t+r1 keep=2`` (and ``+r1x3``): posterior weights (``assign.posterior``: a member's
  probability of holding the label given that c members of its group do, the first round's odds
  exp(-d / t), the refinement round's from a logistic-loss scorer), pruned as the default;
* ``auto``: the assignment chosen on held-out groups (``assignment/selection.py``) between the
  Baseline and the in-sample refined candidate (``soft-0.3+r1``); ``auto r1x3``: the same choice
  with the refined candidate cross-fitted in 3 folds (``soft-0.3+r1x3``); ``auto r1x2`` in 2
  folds (the library's default); ``auto r2x2``: two such rounds.

EAGLE-0's row uses the first variant's assignment settings.

The variants share one experiment folder per data set, so the aggregation, the embeddings and
the Oracle are computed once (the experiment's stages are resumable). Writes
benchmarks/reports/assignment_variants.json and prints P@1/3/5 per data set, grouping and variant,
and the mean over groupings and data sets of (variant - Baseline).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    CROSS_FITTED_CANDIDATES,
    IN_SAMPLE_CANDIDATES,
    TWO_FOLD_CANDIDATES,
    TWO_ROUND_CANDIDATES,
    generator,
    write_report,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "xc"
VARIANTS = {  # variant -> changes to the assign section, changes to the tree section
    "argmax": ({"multiplicity": False, "weighting": "hard"}, {"unassigned": "negative"}),
    "top-c": ({"multiplicity": True, "weighting": "hard"}, {"unassigned": "negative"}),
    "argmax+ignore": ({"multiplicity": False, "weighting": "hard"}, {"unassigned": "ignore"}),
    "top-c+ignore": ({"multiplicity": True, "weighting": "hard"}, {"unassigned": "ignore"}),
    "soft T=0.1": (
        {"weighting": "soft", "temperature": 0.1, "soft_keep": 0.0, "soft_budget": 0.0},
        {},
    ),
    "soft T=0.3": (
        {"weighting": "soft", "temperature": 0.3, "soft_keep": 0.0, "soft_budget": 0.0},
        {},
    ),
    "soft T=1": (
        {"weighting": "soft", "temperature": 1.0, "soft_keep": 0.0, "soft_budget": 0.0},
        {},
    ),
    "top-c+r1": (
        {"multiplicity": True, "weighting": "hard", "refine_rounds": 1},
        {"unassigned": "negative"},
    ),
    "top-c+r2": (
        {"multiplicity": True, "weighting": "hard", "refine_rounds": 2},
        {"unassigned": "negative"},
    ),
    "soft T=0.3+r1": (
        {
            "weighting": "soft",
            "temperature": 0.3,
            "refine_rounds": 1,
            "soft_keep": 0.0,
            "soft_budget": 0.0,
        },
        {},
    ),
    **{
        f"soft T=0.3+r1 keep={k:g}": (
            {
                "weighting": "soft",
                "temperature": 0.3,
                "refine_rounds": 1,
                "soft_keep": k,
                "soft_budget": 0.0,
            },
            {},
        )
        for k in (1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    },
    **{
        f"soft T=0.3+r1 budget={b:g}": (
            {
                "weighting": "soft",
                "temperature": 0.3,
                "refine_rounds": 1,
                "soft_keep": 0.0,
                "soft_budget": b,
            },
            {},
        )
        for b in (1.5, 2.0, 3.0)
    },
    **{
        f"soft T=0.3+r{n}x3{' keep=2' if keep else ''}{f' neg={r:g}' if r else ''}": (
            {
                "weighting": "soft",
                "temperature": 0.3,
                "refine_rounds": n,
                "refine_folds": 3,
                "refine_tolerance": 0.01,
                "soft_keep": keep,
                "soft_budget": 0.0,
                **({"refine_negatives": r} if r else {}),
            },
            {},
        )
        for n in (1, 3)
        for keep, r in ((0.0, 0.0), (2.0, 0.0), (2.0, 1.0), (2.0, 3.0), (2.0, 10.0), (2.0, 30.0))
    },
    **{
        f"post T={t:g}+r1{x} keep=2": (
            {
                "weighting": "soft",
                "posterior": True,
                "temperature": t,
                "refine_rounds": 1,
                "refine_folds": 3 if x else 0,
                "soft_keep": 2.0,
                "soft_budget": 0.0,
            },
            {},
        )
        for t, x in ((0.1, ""), (0.3, ""), (1.0, ""), (0.3, "x3"))
    },
    # the Baseline against the in-sample refined candidate (not the library's default)
    "auto": ({"weighting": "auto", "candidates": IN_SAMPLE_CANDIDATES}, {}),
    # GRLR's iterations chosen on held-out groups too: the default candidates and the refined
    # soft one on EAGLE-0's embeddings (T = 0)
    "auto @t0": (
        {"weighting": "auto", "candidates": (*IN_SAMPLE_CANDIDATES, "soft-0.3+r1@t0")},
        {},
    ),
    # the refined candidate cross-fitted in 3 folds (one round)
    "auto r1x3": ({"weighting": "auto", "candidates": CROSS_FITTED_CANDIDATES}, {}),
    # the round cross-fitted in 2 folds: each label fitted in at most 2 folds, not 3
    "soft T=0.3+r1x2 keep=2": (
        {
            "weighting": "soft",
            "temperature": 0.3,
            "refine_rounds": 1,
            "refine_folds": 2,
            "soft_keep": 2.0,
            "soft_budget": 0.0,
        },
        {},
    ),
    "auto r1x2": ({"weighting": "auto", "candidates": TWO_FOLD_CANDIDATES}, {}),
    # two rounds, each cross-fitted in 2 folds: EM's second E-step for about one more training
    "auto r2x2": ({"weighting": "auto", "candidates": TWO_ROUND_CANDIDATES}, {}),
}
FRONTIER = (
    "top-c",
    *(v for v in VARIANTS if v == "soft T=0.3+r1" or v.startswith("soft T=0.3+r1 ")),
)
"""``--frontier``: the pruned soft weighting's positives against P@k (hard top-c as the unit)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["bibtex", "delicious"],
        help="names under ../shared/data/xc, or synth:<preset>:<scale> (e.g. synth:eurlex4k:0.5)",
    )
    parser.add_argument(
        "--report", default="assignment_variants", help="report name under benchmarks/reports"
    )
    parser.add_argument("--groupings", nargs="+", default=["R-4", "R-10", "C"])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=list(VARIANTS)[:4],
        choices=list(VARIANTS),
        help="the EAGLE variants to train (default: the first four, argmax, top-c and their "
        "+ignore forms)",
    )
    parser.add_argument(
        "--frontier", action="store_true", help="the pruning frontier's variants (FRONTIER)"
    )
    parser.add_argument("--validation", type=float, default=0.2)
    parser.add_argument("--work", default="/tmp/eagle_assignment_variants")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--difficulty",
        type=float,
        default=None,
        help="the planted generator at this difficulty in [0, 1] (default: the realistic preset)",
    )
    args = parser.parse_args()
    if args.frontier:
        args.variants = list(FRONTIER)

    from eagle_spark.experiments import xmc
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings
    from eagle_spark.synth import synth

    base = Settings.load(str(ROOT / "conf" / "local.yaml"), [f"spark.master={args.master}"])
    spark = build_spark(base.spark)
    rows, started = [], time.monotonic()
    for name in args.datasets:
        if name.startswith("synth:"):  # synth:<preset>:<scale>, generated once into the work folder
            _, preset, scale = name.split(":")
            kind = "realistic" if args.difficulty is None else f"d{args.difficulty}"
            pair = f"{args.work}/{preset}_{scale}_{kind}_data"
            if not pathlib.Path(pair).exists():
                synth(spark, pair, preset, float(scale), seed=0, difficulty=args.difficulty)
            settings = base.replace(
                "pipeline", dataset=f"{pair}/train", test_dataset=f"{pair}/test"
            )
        else:
            folder = DATA / name
            if not folder.exists():
                sys.exit(f"{folder} is missing: this benchmark needs ../shared/data")
            settings = base.replace(
                "pipeline", train=str(folder / "train.txt.gz"), test=str(folder / "test.txt.gz")
            )
        out = f"{args.work}/{name.replace(':', '_')}"  # no ':' in Hadoop paths
        first = True
        for variant in args.variants:
            assign_changes, tree_changes = VARIANTS[variant]
            s = settings.replace("assign", **assign_changes).replace("tree", **tree_changes)
            t0 = time.monotonic()
            methods = ("baseline", "eagle0", "eagle") if first else ("eagle",)
            res = xmc.table2(spark, s, args.groupings, out, methods, args.validation)
            seconds = round(time.monotonic() - t0, 1)
            for g, by_method in res["groupings"].items():
                if first:
                    for m, label in (
                        ("oracle", "Oracle"),
                        ("baseline", "Baseline"),
                        ("eagle0", f"EAGLE-0 {variant}"),
                    ):
                        row = res["oracle"] if m == "oracle" else by_method[m]
                        rows.append(
                            {
                                "dataset": name,
                                "grouping": g,
                                "variant": label,
                                **{f"P@{k}": row["P_percent"][k - 1] for k in (1, 3, 5)},
                                "PSP@5": row["PSP_percent"][4],
                                "seconds": None,
                            }
                        )
                e = by_method["eagle"]
                rows.append(
                    {
                        "dataset": name,
                        "grouping": g,
                        "variant": f"EAGLE {variant}",
                        **{f"P@{k}": e["P_percent"][k - 1] for k in (1, 3, 5)},
                        "PSP@5": e["PSP_percent"][4],
                        "assignment precision": e.get("assignment_precision_percent"),
                        "assignment recall": e.get("assignment_recall_percent"),
                        "assignment pairs": e.get("assignment_pairs"),
                        "seconds": seconds,
                    }
                )
            first = False
    for r in rows:  # positives over hard top-c's: recall / precision, the true pairs cancel
        hard = next(
            (
                x
                for x in rows
                if x["dataset"] == r["dataset"]
                and x["grouping"] == r["grouping"]
                and x["variant"] == "EAGLE top-c"
            ),
            None,
        )
        ok = hard and r.get("assignment precision") and hard.get("assignment precision")
        r["positives / top-c"] = (
            round(
                (r["assignment recall"] / r["assignment precision"])
                / (hard["assignment recall"] / hard["assignment precision"]),
                3,
            )
            if ok and r.get("assignment recall") and hard.get("assignment recall")
            else None
        )
        r["pairs / top-c"] = (  # the positives the classifier trains on: rows, not weight
            round(r["assignment pairs"] / hard["assignment pairs"], 3)
            if hard and r.get("assignment pairs") and hard.get("assignment pairs")
            else None
        )
    summary = []
    for variant in args.variants:
        diffs = {k: [] for k in ("P@1", "P@3", "P@5")}
        for r in rows:
            if r["variant"] != f"EAGLE {variant}":
                continue
            b = next(
                x
                for x in rows
                if x["dataset"] == r["dataset"]
                and x["grouping"] == r["grouping"]
                and x["variant"] == "Baseline"
            )
            for k in diffs:
                diffs[k].append(r[k] - b[k])
        ratios = [
            r["positives / top-c"]
            for r in rows
            if r["variant"] == f"EAGLE {variant}" and r.get("positives / top-c") is not None
        ]
        pairs = [
            r["pairs / top-c"]
            for r in rows
            if r["variant"] == f"EAGLE {variant}" and r.get("pairs / top-c") is not None
        ]
        summary.append(
            {
                "variant": variant,
                **{f"mean {k} - Baseline": round(sum(v) / len(v), 2) for k, v in diffs.items()},
                "max positives / top-c": max(ratios) if ratios else None,
                "max pairs / top-c": max(pairs) if pairs else None,
            }
        )
    write_report(
        args.report,
        rows,
        {
            "datasets": args.datasets,
            "groupings": args.groupings,
            "validation": args.validation,
            "synth_difficulty": args.difficulty,
            "generator": generator(args.difficulty),
            "classifier": "tree (conf/local.yaml)",
            "summary": summary,
            "seconds": round(time.monotonic() - started, 1),
        },
    )
    print()
    from _common import print_table

    print_table(summary)
    spark.stop()


if __name__ == "__main__":
    main()
