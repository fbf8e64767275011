"""Benchmark: eagle_spark's tree and one-vs-all vs omikuji (Parabel mode) and napkinXC (PLT) on
bibtex and delicious (clean Y, ../shared/data/xc), side by side.

    python benchmarks/classifiers.py [--datasets bibtex delicious]

Reports P@1/3/5 and PSP@5 (propensities from the training set, A=0.55, B=1.5; the same metric
code for every model), train and predict seconds, model MB and peak RSS of all processes.
"Spark start excluded": besides the session, the first Spark jobs of a session pay one-off costs
(JVM code generation, Python workers importing scikit-learn). Before timing, each model is trained
once on the first dataset's *test* split (untimed, reported as warmup_s), so the timed run still
reads its own training data cold (executor caches are keyed by dataset). --no-warmup times cold. Needs the bench extra: pip install -e ".[bench]".
Targets: tree P@1 >= omikuji's - 0.5 on both and >= 67.0 on delicious; tree train time <= 3x
omikuji's.
"""

from __future__ import annotations

import argparse
import gzip
import pathlib
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import PeakRSS, folder_bytes, write_report  # noqa: E402

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "xc"


def read_xc(path: pathlib.Path):
    """(X csr, label lists, n_features, n_labels) of an XC text file, single node (for the peers)."""
    import scipy.sparse as sp

    with gzip.open(path, "rt") as fh:
        n, d, L = map(int, fh.readline().split())
        rows, cols, vals, labels = [], [], [], []
        for i, line in enumerate(fh):
            parts = line.split()
            lab = []
            if parts and ":" not in parts[0]:
                lab = [int(x) for x in parts[0].split(",")]
                parts = parts[1:]
            labels.append(lab)
            for tok in parts:
                f, v = tok.split(":")
                rows.append(i)
                cols.append(int(f))
                vals.append(float(v))
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, d)), labels, d, L


def metrics(true, pred, inv_ps):
    from eagle_spark.evaluation.metrics import metrics_from_lists

    m = metrics_from_lists(true, pred, 5, inv_ps)
    return {"P@1": 100 * m["P"][0], "P@3": 100 * m["P"][2], "P@5": 100 * m["P"][4], "PSP@5": 100 * m["PSP"][4]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["bibtex", "delicious"])
    ap.add_argument("--workdir", default="/tmp/eagle-bench-classifiers")
    ap.add_argument("--no-warmup", action="store_true", help="time the first training of the session")
    args = ap.parse_args()

    from eagle_spark.classifiers.ova import predict_ova, train_ova
    from eagle_spark.classifiers.tree import predict_tree, train_tree
    from eagle_spark.evaluation.metrics import inv_propensity
    from eagle_spark.io.ingest import ingest
    from eagle_spark.io.tables import read_table
    from eagle_spark.params import IngestParams, OVAParams, Settings, TreeParams
    from eagle_spark.session import build_spark

    work = pathlib.Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = build_spark(Settings().spark)
    rows, warmup = [], {}
    for name in args.datasets:
        train_file, test_file = DATA / name / "train.txt.gz", DATA / name / "test.txt.gz"
        Xtr, Ytr, d, L = read_xc(train_file)
        Xte, Yte, _, _ = read_xc(test_file)
        counts = np.bincount([l for t in Ytr for l in t], minlength=L)
        inv_ps = inv_propensity(counts, len(Ytr))
        for split, f in (("train", train_file), ("test", test_file)):
            ingest(spark, str(f), str(work / f"{name}_{split}"), IngestParams())
        X_test_df = read_table(spark, str(work / f"{name}_test"), "X")
        if not args.no_warmup and not warmup:
            for model in ("tree", "ova"):
                t0 = time.monotonic()
                (train_tree if model == "tree" else train_ova)(
                    spark, str(work / f"{name}_test"), str(work / f"warmup_{model}"), TreeParams() if model == "tree" else OVAParams())
                warmup[model] = round(time.monotonic() - t0, 1)
            print({"warmup_s": warmup}, flush=True)

        for model in ("tree", "ova"):
            out = work / f"{name}_{model}"
            params = TreeParams() if model == "tree" else OVAParams()
            with PeakRSS() as rss:
                t0 = time.monotonic()
                (train_tree if model == "tree" else train_ova)(spark, str(work / f"{name}_train"), str(out), params)
                train_s = time.monotonic() - t0
            t0 = time.monotonic()
            if model == "tree":
                preds = predict_tree(spark, str(out), X_test_df, d, 5, 10).collect()
            else:
                preds = predict_ova(spark, str(out), X_test_df, d, 5).collect()
            predict_s = time.monotonic() - t0
            by_id = {r.sample_id: r.label_ids for r in preds}
            rows.append({"dataset": name, "model": f"eagle_spark {model}",
                         **{k: round(v, 2) for k, v in metrics(Yte, [by_id.get(i, []) for i in range(len(Yte))], inv_ps).items()},
                         "train_s": round(train_s, 1), "predict_s": round(predict_s, 1),
                         "model_MB": round(folder_bytes(out) / 1e6, 2), "peak_rss_GB": round(rss.peak_bytes / 2**30, 2)})
            print(rows[-1], flush=True)

        import omikuji

        plain = work / f"{name}_train.txt"
        with gzip.open(train_file, "rb") as fi, open(plain, "wb") as fo:
            shutil.copyfileobj(fi, fo)
        with PeakRSS() as rss:
            t0 = time.monotonic()
            om = omikuji.Model.train_on_data(str(plain), omikuji.Model.default_hyper_param())
            train_s = time.monotonic() - t0
        t0 = time.monotonic()
        pred = []
        for i in range(Xte.shape[0]):
            row = Xte.getrow(i)
            pred.append([l for l, _ in om.predict(list(zip(row.indices.tolist(), row.data.tolist())), top_k=5)])
        predict_s = time.monotonic() - t0
        om.save(str(work / f"{name}_omikuji"))
        rows.append({"dataset": name, "model": "omikuji (Parabel, 3 trees)",
                     **{k: round(v, 2) for k, v in metrics(Yte, pred, inv_ps).items()},
                     "train_s": round(train_s, 1), "predict_s": round(predict_s, 1),
                     "model_MB": round(folder_bytes(work / f"{name}_omikuji") / 1e6, 2),
                     "peak_rss_GB": round(rss.peak_bytes / 2**30, 2)})
        print(rows[-1], flush=True)

        from napkinxc.models import PLT

        with PeakRSS() as rss:
            t0 = time.monotonic()
            plt = PLT(str(work / f"{name}_napkinxc"))
            plt.fit(Xtr, Ytr)
            train_s = time.monotonic() - t0
        t0 = time.monotonic()
        pred = plt.predict(Xte, top_k=5)
        predict_s = time.monotonic() - t0
        rows.append({"dataset": name, "model": "napkinXC PLT",
                     **{k: round(v, 2) for k, v in metrics(Yte, pred, inv_ps).items()},
                     "train_s": round(train_s, 1), "predict_s": round(predict_s, 1),
                     "model_MB": round(folder_bytes(work / f"{name}_napkinxc") / 1e6, 2),
                     "peak_rss_GB": round(rss.peak_bytes / 2**30, 2)})
        print(rows[-1], flush=True)
    spark.stop()
    write_report("classifiers", rows, {"warmup_s": warmup, "warmup": "one untimed training per model on the first dataset's test split"})


if __name__ == "__main__":
    main()
