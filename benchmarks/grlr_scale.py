"""Benchmark: GRLR + assignment on synthetic Wiki-325K (random groups of 10, T = 20).

    python benchmarks/grlr_scale.py [--scales 0.1 1.0] [--workdir /tmp/eagle-bench-synth]

For each scale: synth (reused when benchmarks/synth_aggregate.py --keep left it in the workdir),
aggregate R-10, then embed T=20 (EAGLE) and T=0 (EAGLE-0), assign eagle / eagle-0 / baseline.
Reports wall time, peak RSS of all processes, (group, label, sample, feature) entries processed per
second, assignment precision and recall; at scale 0.1 also the wall time of a single-node scipy
twin (per-label loop, same semantics) for the ratio Spark / twin.
Targets (2 cores, local mode): scale 0.1 in <= 3 minutes; scale 1.0 in <= 30 minutes within 20 GB.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import PeakRSS, folder_bytes, write_report  # noqa: E402


def scipy_twin(dataset: str, n_features: int, T: int = 20, lam: float = 0.1) -> tuple[float, dict]:
    """Single-node GRLR: a plain loop over labels with scipy (independent of eagle_spark.grlr)."""
    import pyarrow.parquet as pq

    t0 = time.monotonic()
    xt = pq.read_table(f"{dataset}/X").sort_by("sample_id")
    ids = np.asarray(xt.column("sample_id"))
    idx, val = xt.column("feat_idx").combine_chunks(), xt.column("feat_val").combine_chunks()
    X = sp.csr_matrix((np.asarray(val.values, dtype=np.float64), np.asarray(idx.values),
                       np.asarray(idx.offsets)), shape=(len(ids), n_features))
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(np.divide(1, norms, out=np.zeros_like(norms), where=norms > 0)) @ X
    y1 = pq.read_table(f"{dataset}/Y1").to_pandas()
    y1["row"] = np.searchsorted(ids, y1["sample_id"].to_numpy())
    members = y1.sort_values(["group_id", "row"]).groupby("group_id")["row"].apply(np.asarray).to_dict()
    y2 = pq.read_table(f"{dataset}/Y2").to_pandas().sort_values(["label_id", "group_id"])
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--workdir", default="/tmp/eagle-bench-synth")
    ap.add_argument("--skip-twin", action="store_true")
    args = ap.parse_args()

    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.assignment.assign import assign
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.params import AggregateParams, AssignParams, EmbedParams, Settings
    from eagle_spark.session import build_spark
    from eagle_spark.synth import synth

    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    spark = build_spark(Settings.load(overrides=["spark.driver_memory=6g"]).spark)
    rows, extra = [], {}
    for scale in args.scales:
        data, agg = work / f"wiki325k_{scale}", work / f"wiki325k_{scale}_R10"
        if not (agg / "_manifest.json").exists():
            if not (data / "_manifest.json").exists():
                synth(spark, str(data), "wiki325k", scale=scale, seed=0, overwrite=True)
            aggregate(spark, str(data / "train"), str(agg), AggregateParams(group_size=10, seed=0),
                      overwrite=True)
        steps = [
            ("embed T=20", lambda agg=agg, scale=scale: embed(spark, str(agg), str(work / f"emb20_{scale}"),
                                         EmbedParams(iterations=20), overwrite=True)),
            ("assign eagle", lambda agg=agg, scale=scale: assign(spark, str(agg), str(work / f"asg20_{scale}"), AssignParams(),
                                            str(work / f"emb20_{scale}"), overwrite=True)),
            ("embed T=0", lambda agg=agg, scale=scale: embed(spark, str(agg), str(work / f"emb0_{scale}"),
                                        EmbedParams(iterations=0), overwrite=True)),
            ("assign eagle-0", lambda agg=agg, scale=scale: assign(spark, str(agg), str(work / f"asg0_{scale}"), AssignParams(),
                                              str(work / f"emb0_{scale}"), overwrite=True)),
            ("assign baseline", lambda agg=agg, scale=scale: assign(spark, str(agg), str(work / f"asgb_{scale}"),
                                               AssignParams(method="baseline"), overwrite=True)),
        ]
        total = 0.0
        for name, step in steps:
            with PeakRSS() as rss:
                t0 = time.monotonic()
                m = step()
                seconds = time.monotonic() - t0
            total += seconds
            row = {"scale": scale, "step": name, "seconds": round(seconds, 1),
                   "peak_rss_GB": round(rss.peak_bytes / 2**30, 2)}
            if "entries_processed" in m:
                row["entries_per_s"] = round(m["entries_processed"] / seconds)
                row["pairs"] = m["n_pairs"]
                if name == "embed T=20":
                    row["emb_MB"] = round(folder_bytes(work / f"emb20_{scale}") / 1e6, 1)
            if m.get("quality"):
                row["precision"] = round(m["quality"]["precision"], 4)
                row["recall"] = round(m["quality"]["recall"], 4)
            rows.append(row)
            print(row, flush=True)
        rows.append({"scale": scale, "step": "total (embed x2 + assign x3)", "seconds": round(total, 1),
                     "target_s": 180 if scale == 0.1 else 1800})
        if scale == 0.1 and not args.skip_twin:
            n_features = int(__import__("json").loads((agg / "_manifest.json").read_text())["n_features"])
            twin_s, twin_emb = scipy_twin(str(agg), n_features)
            import pyarrow.parquet as pq
            got = pq.read_table(work / f"emb20_{scale}" / "label_emb").to_pydict()
            worst = 0.0
            for k, ix, vx in zip(got["label_id"], got["emb_idx"], got["emb_val"]):
                cols, e = twin_emb[k]
                dense = dict(zip(cols.tolist(), e.tolist()))
                mine = dict(zip(ix, vx))
                worst = max(worst, max(abs(dense.get(c, 0.0) - mine.get(c, 0.0)) for c in set(dense) | set(mine)))
            spark_s = next(r["seconds"] for r in rows if r["scale"] == scale and r["step"] == "embed T=20")
            extra["twin"] = {"scale": scale, "twin_seconds": round(twin_s, 1), "spark_embed_seconds": spark_s,
                             "ratio_spark_over_twin": round(spark_s / twin_s, 2),
                             "max_abs_embedding_difference": worst}
            print(extra["twin"], flush=True)
    spark.stop()
    write_report("grlr_scale_" + "_".join(str(s) for s in args.scales), rows, extra)


if __name__ == "__main__":
    main()
