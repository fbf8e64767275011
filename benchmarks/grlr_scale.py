"""Benchmark: GRLR + assignment on synthetic Wiki-325K (random groups of 10, T = 20).

    python benchmarks/grlr_scale.py [--scales 0.1 1.0] [--workdir /tmp/eagle-bench-synth]
                                    [--prune 0.01] [--skip-twin] [--only-eagle]
                                    [--x-access auto|cached|joined] [--tasks 16]

For each scale: synth (reused when benchmarks/synth_aggregate.py --keep left it in the workdir),
aggregate R-10, then embed T=20 (EAGLE, which also writes Algorithm 2's choices in the same pass)
and assign eagle (reading them), then embed T=0 (EAGLE-0), assign eagle-0 and baseline.
Reports wall time, peak RSS and PSS of all processes, bytes written to shuffle files per step
(from Spark's event log, by job group), the path taken (x_access), (group, label, sample, feature) entries
processed per second, assignment precision and recall, and the arithmetic floor: the sparse
mat-vecs GRLR + assignment must do (2T + 2 over every label's candidate matrix), timed with scipy
in one process on a random sample of labels, scaled by nonzeros to all labels and divided by the
cores. With --prune P: embed T=20 with embed.prune_below=P, the stored size, and how many
assignments change when they are recomputed from the pruned embeddings. At scale 0.1 also a
single-node scipy twin (per-label loop, same semantics) for the ratio Spark / twin.
Targets (2 cores, local mode): embed + assign (EAGLE) at scale 1.0 in <= 10 minutes and <= 8 GB
(PSS); scale 0.1 everything in <= 3 minutes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    PeakRSS,
    event_log_overrides,
    folder_bytes,
    generator,
    shuffle_bytes_by_job_group,
    write_report,
)


def scipy_twin(dataset: str, n_features: int, T: int = 20, lam: float = 0.1) -> tuple[float, dict]:
    """Single-node GRLR: a plain loop over labels with scipy (independent of eagle_spark.grlr)."""
    t0 = time.monotonic()
    X, members, y2 = candidate_structure(dataset, n_features)
    y2 = y2.sort_values(["label_id", "group_id"])
    emb = {}
    for label, groups in y2.groupby("label_id")["group_id"]:
        rows = [members[g] for g in groups]
        sizes = np.array([len(r) for r in rows])
        A = X[np.concatenate(rows)]
        cols, inv = np.unique(A.indices, return_inverse=True)
        A = sp.csr_matrix((A.data, inv, A.indptr), shape=(A.shape[0], len(cols)))
        ptr = np.r_[0, np.cumsum(sizes)]

        def proj(v):
            n = np.linalg.norm(v)
            return v / n if n > 0 else v * 0

        e = proj(np.asarray(A.sum(axis=0)).ravel())
        for _ in range(T):
            s = A @ e
            m = np.maximum.reduceat(s, ptr[:-1])
            rep = np.repeat(m, sizes)
            a = (s >= rep - 1e-9 * np.abs(rep)).astype(np.float64)
            e = proj(e + lam * proj(A.T @ a))
        emb[int(label)] = (cols, e)
    return time.monotonic() - t0, emb


def candidate_structure(dataset: str, n_features: int):
    """(X with L2-normalised rows, {group: member rows}, Y2 as a DataFrame) read with pyarrow."""
    import pyarrow.parquet as pq

    xt = pq.read_table(f"{dataset}/X").sort_by("sample_id")
    ids = np.asarray(xt.column("sample_id"))
    idx, val = xt.column("feat_idx").combine_chunks(), xt.column("feat_val").combine_chunks()
    X = sp.csr_matrix(
        (np.asarray(val.values, dtype=np.float64), np.asarray(idx.values), np.asarray(idx.offsets)),
        shape=(len(ids), n_features),
    )
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(np.divide(1, norms, out=np.zeros_like(norms), where=norms > 0)) @ X)
    y1 = pq.read_table(f"{dataset}/Y1").to_pandas()
    y1["row"] = np.searchsorted(ids, y1["sample_id"].to_numpy())
    members = (
        y1.sort_values(["group_id", "row"]).groupby("group_id")["row"].apply(np.asarray).to_dict()
    )
    y2 = pq.read_table(f"{dataset}/Y2").to_pandas()
    return X, members, y2


def arithmetic_floor(
    dataset: str, n_features: int, T: int = 20, n_labels: int = 3000, cores: int = 2, seed: int = 0
) -> dict:
    """Seconds the sparse products of GRLR + assignment need at least, on `cores` cores.

    Every label k has a candidate matrix A_k (the rows of its groups' members, restricted to its own
    columns); GRLR with T iterations and the assignment do 2T + 2 products with it (A_k^T 1 for e0,
    then A_k e and A_k^T a per iteration, and the final A_k e). A random sample of labels is stacked
    block-diagonally (each label its own columns, scipy.sparse.block_diag), the 2T + 2 products are
    timed in one process (best of 3), and the time is scaled by (nonzeros of all labels' matrices /
    nonzeros of the sample) / cores. Building the matrices is not timed: the floor is arithmetic only.
    """
    X, members, y2 = candidate_structure(dataset, n_features)
    row_nnz = np.diff(X.indptr)
    group_nnz = {g: int(row_nnz[r].sum()) for g, r in members.items()}
    total_nnz = int(sum(group_nnz[g] for g in y2["group_id"]))
    rng = np.random.default_rng(seed)
    labels = np.unique(y2["label_id"])
    pick = set(rng.choice(labels, size=min(n_labels, len(labels)), replace=False).tolist())
    blocks = []
    for _, groups in y2[y2["label_id"].isin(pick)].groupby("label_id")["group_id"]:
        A = X[np.concatenate([members[g] for g in sorted(groups)])]
        cols, inv = np.unique(A.indices, return_inverse=True)
        blocks.append(sp.csr_matrix((A.data, inv, A.indptr), shape=(A.shape[0], len(cols))))
    A = sp.block_diag(blocks, format="csr")
    AT = A.T.tocsr()
    ones, e = np.ones(A.shape[0]), np.ones(A.shape[1])
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        AT @ ones
        for _ in range(T):
            AT @ (A @ e > 0).astype(np.float64)
        A @ e
        best = min(best, time.perf_counter() - t0)
    seconds = best * total_nnz / A.nnz / cores
    return {
        "sample_labels": len(blocks),
        "sample_nnz": int(A.nnz),
        "total_candidate_nnz": total_nnz,
        "sample_seconds": round(best, 3),
        "floor_seconds": round(seconds, 1),
        "cores": cores,
        "products": 2 * T + 2,
        "nnz_per_s_per_core": round((2 * T + 2) * A.nnz / best),
    }


def prune_effect(spark, agg: str, exact: str, pruned: str, params) -> dict:
    """Assignments recomputed from pruned stored embeddings vs the exact ones of the embed pass."""
    import json

    from pyspark.sql import functions as F

    from eagle_spark.assignment.members import eagle_assignments
    from eagle_spark.io.tables import read_table

    n_features = int(json.loads((pathlib.Path(agg) / "_manifest.json").read_text())["n_features"])
    again = eagle_assignments(spark, agg, pruned, params, n_features, True)
    exact_df = read_table(spark, exact, "top_members").where(F.col("rank") == 0)
    joined = exact_df.alias("a").join(again.alias("b"), ["group_id", "label_id"])
    changed = joined.where(F.col("a.sample_id") != F.col("b.sample_id")).count()
    return {"pairs": joined.count(), "changed_pairs": changed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--workdir", default="/tmp/eagle-bench-synth")
    ap.add_argument("--skip-twin", action="store_true")
    ap.add_argument("--only-eagle", action="store_true", help="only embed T=20 + assign eagle")
    ap.add_argument("--prune", type=float, default=0.0, help="also embed with embed.prune_below=P")
    ap.add_argument("--floor-labels", type=int, default=3000)
    ap.add_argument(
        "--x-access",
        default="auto",
        choices=["auto", "cached", "joined"],
        help="embed.x_access / assign.x_access for every step",
    )
    ap.add_argument(
        "--difficulty",
        type=float,
        default=None,
        help="the planted generator at this difficulty in [0, 1] (default: the realistic preset)",
    )
    ap.add_argument("--tasks", type=int, default=16, help="embed.tasks (label bins)")
    args = ap.parse_args()

    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.assignment.assign import assign
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.session import build_spark
    from eagle_spark.settings import AggregateSettings, AssignSettings, EmbedSettings, Settings
    from eagle_spark.synth import synth

    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    events = work / "eventlog"
    spark = build_spark(
        Settings.load(overrides=["spark.driver_memory=6g", *event_log_overrides(events)]).spark
    )
    app_id = spark.sparkContext.applicationId
    xa = {"x_access": args.x_access}
    ea = {**xa, "tasks": args.tasks}
    rows, extra = [], {}
    for scale in args.scales:
        tag = "" if args.difficulty is None else f"_d{args.difficulty:g}"
        data, agg = work / f"wiki325k_{scale}{tag}", work / f"wiki325k_{scale}{tag}_R10"
        if not (agg / "_manifest.json").exists():
            if not (data / "_manifest.json").exists():
                synth(
                    spark,
                    str(data),
                    "wiki325k",
                    scale=scale,
                    seed=0,
                    overwrite=True,
                    difficulty=args.difficulty,
                )
            aggregate(
                spark,
                str(data / "train"),
                str(agg),
                AggregateSettings(group_size=10, seed=0),
                overwrite=True,
            )
        steps = [
            (
                "embed T=20",
                lambda agg=agg, scale=scale: embed(
                    spark,
                    str(agg),
                    str(work / f"emb20_{scale}"),
                    EmbedSettings(iterations=20, **ea),
                    overwrite=True,
                ),
            ),
            (
                "assign eagle",
                lambda agg=agg, scale=scale: assign(
                    spark,
                    str(agg),
                    str(work / f"asg20_{scale}"),
                    AssignSettings(multiplicity=False, weighting="hard"),
                    str(work / f"emb20_{scale}"),
                    overwrite=True,
                ),
            ),
        ]
        if not args.only_eagle:
            steps += [
                (
                    "embed T=0",
                    lambda agg=agg, scale=scale: embed(
                        spark,
                        str(agg),
                        str(work / f"emb0_{scale}"),
                        EmbedSettings(iterations=0, **ea),
                        overwrite=True,
                    ),
                ),
                (
                    "assign eagle-0",
                    lambda agg=agg, scale=scale: assign(
                        spark,
                        str(agg),
                        str(work / f"asg0_{scale}"),
                        AssignSettings(multiplicity=False, weighting="hard"),
                        str(work / f"emb0_{scale}"),
                        overwrite=True,
                    ),
                ),
                (
                    "assign baseline",
                    lambda agg=agg, scale=scale: assign(
                        spark,
                        str(agg),
                        str(work / f"asgb_{scale}"),
                        AssignSettings(method="baseline"),
                        overwrite=True,
                    ),
                ),
            ]
        if args.prune:
            steps.append(
                (
                    f"embed T=20 prune_below={args.prune}",
                    lambda agg=agg, scale=scale: embed(
                        spark,
                        str(agg),
                        str(work / f"embp_{scale}"),
                        EmbedSettings(iterations=20, prune_below=args.prune, **ea),
                        overwrite=True,
                    ),
                )
            )
        total = 0.0
        seconds_of = {}
        for name, step in steps:
            spark.sparkContext.setJobGroup(f"{scale}:{name}", name)
            with PeakRSS(interval=1.0, pss=True) as rss:
                t0 = time.monotonic()
                m = step()
                seconds = time.monotonic() - t0
            total += seconds
            seconds_of[name] = seconds
            row = {
                "scale": scale,
                "step": name,
                "seconds": round(seconds, 1),
                "peak_rss_GB": round(rss.peak_bytes / 2**30, 2),
                "peak_pss_GB": round(rss.peak_pss_bytes / 2**30, 2),
            }
            if "entries_processed" in m:
                row["entries_per_s"] = round(m["entries_processed"] / seconds)
                row["pairs"] = m["n_pairs"]
                if name.startswith("embed T=20"):
                    folder = work / (f"emb20_{scale}" if name == "embed T=20" else f"embp_{scale}")
                    row["label_emb_MB"] = round(folder_bytes(folder / "label_emb") / 1e6, 1)
            if m.get("quality"):
                row["precision"] = round(m["quality"]["precision"], 4)
                row["recall"] = round(m["quality"]["recall"], 4)
            if m.get("x_access"):
                row["x_access"] = m["x_access"]
            if m.get("source", {}).get("top_members"):
                row["top_members"] = m["source"]["top_members"]
            rows.append(row)
            print(row, flush=True)
        if args.prune:
            effect = prune_effect(
                spark,
                str(agg),
                str(work / f"emb20_{scale}"),
                str(work / f"embp_{scale}"),
                AssignSettings(multiplicity=False, weighting="hard"),
            )
            rows.append(
                {
                    "scale": scale,
                    "step": f"assign recomputed from prune_below={args.prune}",
                    **effect,
                    "changed_fraction": round(effect["changed_pairs"] / effect["pairs"], 5),
                }
            )
            print(rows[-1], flush=True)
        eagle_s = seconds_of["embed T=20"] + seconds_of["assign eagle"]
        n_features = int(
            __import__("json").loads((agg / "_manifest.json").read_text())["n_features"]
        )
        floor = arithmetic_floor(str(agg), n_features, n_labels=args.floor_labels)
        extra[f"floor_{scale}"] = floor
        print(floor, flush=True)
        rows.append(
            {
                "scale": scale,
                "step": "embed + assign (EAGLE)",
                "seconds": round(eagle_s, 1),
                "target_s": 600 if scale == 1.0 else None,
                "floor_s": floor["floor_seconds"],
                "ratio_to_floor": round(eagle_s / floor["floor_seconds"], 1),
            }
        )
        rows.append({"scale": scale, "step": "total (all steps)", "seconds": round(total, 1)})
        if scale == 0.1 and not args.skip_twin:
            n_features = int(
                __import__("json").loads((agg / "_manifest.json").read_text())["n_features"]
            )
            twin_s, twin_emb = scipy_twin(str(agg), n_features)
            import pyarrow.parquet as pq

            got = pq.read_table(work / f"emb20_{scale}" / "label_emb").to_pydict()
            worst = 0.0
            for k, ix, vx in zip(got["label_id"], got["emb_idx"], got["emb_val"]):
                cols, e = twin_emb[k]
                dense = dict(zip(cols.tolist(), e.tolist()))
                mine = dict(zip(ix, vx))
                worst = max(
                    worst,
                    max(abs(dense.get(c, 0.0) - mine.get(c, 0.0)) for c in set(dense) | set(mine)),
                )
            spark_s = next(
                r["seconds"] for r in rows if r["scale"] == scale and r["step"] == "embed T=20"
            )
            extra["twin"] = {
                "scale": scale,
                "twin_seconds": round(twin_s, 1),
                "spark_embed_seconds": spark_s,
                "ratio_spark_over_twin": round(spark_s / twin_s, 2),
                "max_abs_embedding_difference": worst,
            }
            print(extra["twin"], flush=True)
    spark.stop()
    shuffle = shuffle_bytes_by_job_group(events, app_id)
    for row in rows:
        key = f"{row['scale']}:{row['step']}"
        if key in shuffle:
            row["shuffle_MB"] = round(shuffle[key] / 1e6, 1)
    suffix = ("" if args.x_access == "auto" else f"_{args.x_access}") + (
        "" if args.tasks == 16 else f"_tasks{args.tasks}"
    )
    extra["synth_difficulty"] = args.difficulty
    extra["generator"] = generator(args.difficulty)
    write_report("grlr_scale_" + "_".join(str(s) for s in args.scales) + suffix, rows, extra)


if __name__ == "__main__":
    main()
