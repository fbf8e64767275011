"""How ``assign.weighting=auto``'s choice depends on the proxy's training set: the choice made
with the proxy trained on groups not held out of at most N group labels (Y2's (group, label)
pairs), for several N, on the aggregated data and GRLR embeddings of a run folder
(``pipeline --compare`` leaves both as ``data/aggregated`` and ``embeddings/<method>``;
``--dataset`` and ``--embeddings`` name them elsewhere, e.g. in ``assignment_cost.py``'s work
folder).

    python benchmarks/selection_proxy_size.py --run /tmp/eagle_main_job/run \\
        --caps 25000 50000 100000 0 --report selection_proxy_size_delicious
    python benchmarks/selection_proxy_size.py --dataset /tmp/eagle_assignment_cost/aggregated \\
        --embeddings /tmp/eagle_assignment_cost/auto/embeddings/eagle \\
        --caps 25000 50000 100000 300000 0 --set spark.driver_memory=8g \\
        --report selection_proxy_size_wiki325k_0.1_r10

N = 0 is no cap (every group not held out). Each choice is made as ``assign`` makes it
(:func:`eagle_spark.assignment.selection.choose_assignment` with the run's ``assign`` settings, its
candidates and held-out share), from a fresh split: nothing is kept between caps. For each cap
the report keeps the groups the proxy trained on, their labels and Baseline positives, every
candidate's group-level score, the choice, the margin of the winner over the runner-up, and the
seconds of the whole choice. The test set is never read. Writes
``benchmarks/reports/<report>.json`` (one report per run folder: ``--report``).
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a pipeline run folder (data/, embeddings/)")
    parser.add_argument("--dataset", help="the aggregated dataset (instead of --run's)")
    parser.add_argument("--embeddings", help="its label embeddings (instead of --run's)")
    parser.add_argument("--method", default="eagle0", help="whose embeddings: eagle0 or eagle")
    parser.add_argument(
        "--caps", nargs="+", type=int, required=True, help="group labels; 0: no cap"
    )
    parser.add_argument("--conf", default=str(ROOT / "conf" / "local.yaml"))
    parser.add_argument("--set", action="append", default=[], help="section.key=value")
    parser.add_argument("--report", required=True, help="report name under benchmarks/reports")
    parser.add_argument("--work", default="/tmp/eagle_selection_proxy_size")
    args = parser.parse_args()
    if not args.run and not (args.dataset and args.embeddings):
        parser.error("give --run, or --dataset and --embeddings")

    from eagle_spark.assignment.selection import choose_assignment, selection_score
    from eagle_spark.io.tables import read_manifest
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    settings = Settings.load(args.conf, args.set)
    spark = build_spark(settings.spark)
    run = pathlib.Path(args.run or ".")
    dataset = args.dataset or str(run / "data" / "aggregated")
    embeddings = args.embeddings or str(run / "embeddings" / args.method)
    manifest = read_manifest(spark, dataset)
    if settings.assign.weighting != "auto":
        raise SystemExit(f"{args.conf}: assign.weighting is not auto")
    rows = []
    for cap in args.caps:
        scratch = pathlib.Path(args.work) / f"cap-{cap}"
        shutil.rmtree(scratch, ignore_errors=True)
        start = time.perf_counter()
        found = choose_assignment(
            spark, dataset, settings.assign, embeddings, str(scratch), cap or 10**12
        )
        seconds = time.perf_counter() - start
        rec = found.record
        scores = {c: selection_score(r) for c, r in rec["candidates"].items()}
        ranked = sorted(scores.values(), reverse=True)
        rows.append(
            {
                "cap": cap or "none",
                "proxy groups": rec["proxy_groups"],
                "proxy pairs": rec["proxy_pairs"],
                "proxy positives": rec["proxy_positives"],
                "held-out groups": rec["held_out_groups"],
                **{f"score {c}": round(s, 2) for c, s in scores.items()},
                "chosen": rec["chosen"],
                "margin": round(ranked[0] - ranked[1], 2) if len(ranked) > 1 else None,
                "seconds": round(seconds, 1),
            }
        )
        shutil.rmtree(scratch, ignore_errors=True)
        print(rows[-1], flush=True)
    write_report(
        args.report,
        rows,
        {
            "run": args.run,
            "embeddings": embeddings,
            "dataset": manifest.get("source", {}),
            "n_groups": manifest.get("n_groups"),
            "method": args.method,
            "settings": list(args.set),
            "candidates": list(settings.assign.candidates),
        },
    )
    spark.stop()


if __name__ == "__main__":
    main()
