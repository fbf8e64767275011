"""Prediction with a label-tree ensemble: the model held once per executor, beam search per batch
of rows, every reached label's probability averaged over the trees. See :mod:`eagle_spark.classifiers.tree`."""

from __future__ import annotations

import logging
import posixpath
from typing import Iterator, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession

from eagle_spark import schemas as S
from eagle_spark.classifiers.base import WEIGHTS, read_metadata
from eagle_spark.classifiers.labels import model_label_ids, trained_labels
from eagle_spark.classifiers.ova import PRED_SCHEMA
from eagle_spark.classifiers.tree.scoring import feature_major, node_scores, rows_per_block
from eagle_spark.classifiers.tree.structure import TREE, Tree
from eagle_spark.errors import BadInputError, check_finite_scores
from eagle_spark.executor_state import shared_state, sparse_arrays, sparse_from
from eagle_spark.io.parts import filesystem_for, folder_version, read_sparse_rows
from eagle_spark.sparse import csr_from_arrow, l2_normalize_rows

log = logging.getLogger(__name__)


def load_model(model_path: str, meta: dict) -> list[tuple[Tree, sp.csc_matrix, np.ndarray]]:
    """[(tree, W (n_elements x d) CSC float32, bias (n_elements,))] per tree of a model, held once
    per executor (:mod:`eagle_spark.executor_state`; ~8 bytes per weight, whatever the number of
    task slots).

    W is feature-major (CSC: the nodes having a feature are contiguous) for the prediction kernel
    (:mod:`.scoring`). The weights stay float32 as stored (4 bytes less per weight); products with
    float64 X are computed in float64, so the scores equal those of float64 weights.

    Memory: the builder (one worker per executor) reads, converts and writes one tree at a time,
    so its heap peaks at about two copies of one tree's weights (node-major as read, feature-major
    as held: ~16 bytes per weight of the largest tree), whatever the number of trees; then every
    worker maps the files."""
    # a model retrained at the same path is reread; "csc" names the layout of the files
    key = (model_path, folder_version(model_path), "csc")

    def build() -> Iterator[tuple[str, np.ndarray]]:  # one tree at a time (load_model's Memory)
        fs, root = filesystem_for(model_path)
        for t in range(int(meta["n_trees"])):
            tt = pq.read_table(f"{root}/{TREE}_{t}", filesystem=fs).sort_by("node_id")
            parent = np.asarray(tt.column("parent_id"), dtype=np.int64)
            yield f"parent{t}", parent
            yield f"level{t}", np.asarray(tt.column("level"), dtype=np.int64)
            WT, bias = read_sparse_rows(
                posixpath.join(model_path, f"{WEIGHTS}_{t}"),
                S.LABEL_ID,
                "w_idx",
                "w_val",
                (len(parent), int(meta["n_features"])),
                extra="bias",
                dtype=np.float32,
            )  # as stored; products upcast
            yield f"bias{t}", cast(np.ndarray, bias)  # asked for with extra=
            W = feature_major(WT)
            del WT, tt, parent, bias
            yield from sparse_arrays(W, f"W{t}").items()
            del W

    return shared_state(
        "tree",
        key,
        build,
        lambda a: [
            (
                Tree(
                    a[f"parent{t}"],
                    a[f"level{t}"],
                    int(meta["n_clusters"][t]),
                    trained_labels(meta),
                ),
                sparse_from(a, f"W{t}", "csc"),
                a[f"bias{t}"],
            )
            for t in range(int(meta["n_trees"]))
        ],
    )


def ensemble_search(
    models: list, X: sp.csr_matrix, beam: int, k: int, loss: str
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k labels of every row of X by the mean over the trees of the label probabilities
    (Parabel's ensemble, as omikuji): every label a tree's beam reaches adds its probability / n_trees,
    a label a tree's beam does not reach adds 0 there.

    Args:
        models: [(tree, W, bias)] as :func:`load_model` returns.
        X: (n, d) CSR float64 rows.
        beam, k, loss: as :func:`beam_search`.
    Returns:
        (labels (n, k) int64, scores (n, k) float64) as :func:`beam_search`.

    Memory: one block of node scores (:func:`beam_search`) and the reached labels of all trees,
    up to n x n_trees x beam x max_leaf (row, label, probability) triples (~24 bytes each).
    """
    found = [beam_candidates(tree, W, bias, X, beam, loss) for tree, W, bias in models]
    rows = np.concatenate([r for r, _, _ in found])
    labels = np.concatenate([lab for _, lab, _ in found])
    probs: np.ndarray = np.concatenate([p for _, _, p in found]) / len(models)
    if len(models) > 1 and len(rows):  # a label reached by several trees: sum its shares
        width = int(labels.max()) + 1
        keys, inverse = np.unique(rows * width + labels, return_inverse=True)
        probs = np.bincount(inverse, weights=probs)
        rows, labels = keys // width, keys % width
    return _top_k(X.shape[0], rows, labels, probs, k)


def _top_k(
    n: int, rows: np.ndarray, labels: np.ndarray, scores: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """(labels (n, k), scores (n, k)) of the k best (row, label, score) triples of each row, best
    first, ties by smaller label; padded with label -1 and score 0."""
    out_labels = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.zeros((n, k))
    if len(rows):
        order, rank = _rank_within(rows, scores, labels)
        keep = rank < k
        out_labels[rows[order][keep], rank[keep]] = labels[order][keep]
        out_scores[rows[order][keep], rank[keep]] = scores[order][keep]
    return out_labels, out_scores


def path_probability(scores: np.ndarray, loss: str) -> np.ndarray:
    """A classifier score as the probability of its edge (Parabel): exp(-max(0, 1 - s)^2) for the
    squared hinge, the sigmoid for the logistic loss; same shape as `scores`, values in (0, 1]."""
    if loss == "logistic":
        return 1.0 / (1.0 + np.exp(-scores))
    return np.exp(-np.square(np.maximum(0.0, 1.0 - scores)))


def _rank_within(
    rows: np.ndarray, keys_desc: np.ndarray, tie: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Order by (row, key descending, tie ascending); returns (order, rank of each within its row)."""
    order = np.lexsort((tie, -keys_desc, rows))
    r = rows[order]
    starts = np.r_[0, np.flatnonzero(r[1:] != r[:-1]) + 1]
    rank = np.arange(len(r)) - np.repeat(starts, np.diff(np.r_[starts, len(r)]))
    return order, rank


def beam_search(
    tree: Tree, W: sp.spmatrix, bias: np.ndarray, X: sp.csr_matrix, beam: int, k: int, loss: str
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k labels of every row of X by beam search in one tree (see the package docstring).

    Args:
        tree: the tree's structure.
        W: (n_elements, d) weights; CSC (feature-major, as :func:`load_model` holds them) is read in
            place, another format is converted first.
        bias: (n_elements,) biases.
        X: (n, d) CSR float64 rows.
        beam, k: nodes kept per level, labels returned per row.
        loss: the loss the classifiers were trained with (:func:`path_probability`).
    Returns:
        (labels (n, k) int64, scores (n, k) float64), best first (ties: smaller label id); rows
        with fewer than k reachable labels are padded with label -1 and score 0.

    Memory: as :func:`beam_candidates`.
    """
    return _top_k(X.shape[0], *beam_candidates(tree, W, bias, X, beam, loss), k)


def beam_candidates(
    tree: Tree, W: sp.spmatrix, bias: np.ndarray, X: sp.csr_matrix, beam: int, loss: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every label the beam search reaches for each row of X, with its probability (the product of
    the edge probabilities on its path, :func:`path_probability`), vectorised over the rows: a
    block of rows gets every node's score in one pass (:func:`.scoring.node_scores`), then each
    level keeps the `beam` best (row, child of a beam node) pairs of each row; the labels of the
    leaves it enters are the candidates.

    Args: as :func:`beam_search`.
    Returns:
        (rows, labels, probabilities): 1-D arrays of equal length, int64 / int64 / float64, one
        entry per (row, reached label); rows index X.

    Memory: one block of scores, at most :data:`.scoring.SCORE_BLOCK_BYTES` (64 MB) whatever n, and
    the candidates, at most n x beam x (labels per leaf) triples.
    """
    W = feature_major(W)
    step = rows_per_block(W.shape[0])
    found = []
    for lo in range(0, X.shape[0], step):
        rows, labels, probs = _search_block(
            tree, node_scores(X[lo : lo + step], W), bias, beam, loss
        )
        found.append((rows + lo, labels, probs))
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    rows, labels, probs = (np.concatenate(parts) for parts in zip(*found))
    return rows, labels, probs


def _search_block(
    tree: Tree, S: np.ndarray, bias: np.ndarray, beam: int, loss: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`beam_candidates` over a block of rows whose node scores (without bias) are S (n, n_elements)."""
    n = S.shape[0]
    b_row, b_node, b_prob = np.arange(n), np.zeros(n, dtype=np.int64), np.ones(n)
    f_row, f_label, f_prob = (
        [np.zeros(0, dtype=np.int64)],
        [np.zeros(0, dtype=np.int64)],
        [np.zeros(0)],
    )
    while len(b_row):
        counts = tree.child_ptr[b_node + 1] - tree.child_ptr[b_node]
        total = int(counts.sum())
        if total == 0:
            break
        starts = np.repeat(tree.child_ptr[b_node] - np.r_[0, np.cumsum(counts)[:-1]], counts)
        kids = tree.children[starts + np.arange(total)]
        rows = np.repeat(b_row, counts)
        s = S[rows, kids] + bias[kids]
        prob = np.repeat(b_prob, counts) * path_probability(s, loss)
        is_label = kids >= tree.n_clusters
        f_row.append(rows[is_label])
        f_label.append(kids[is_label] - tree.n_clusters)
        f_prob.append(prob[is_label])
        rows, kids, prob = rows[~is_label], kids[~is_label], prob[~is_label]
        order, rank = _rank_within(rows, prob, kids)
        keep = order[rank < beam]
        b_row, b_node, b_prob = rows[keep], kids[keep], prob[keep]
    return np.concatenate(f_row), np.concatenate(f_label), np.concatenate(f_prob)


def predict_tree(
    spark: SparkSession,
    model_path: str,
    X: DataFrame,
    n_features: int,
    k: int,
    beam: int,
    batch_rows: int = 256,
) -> DataFrame:
    """Top-k predictions of a tree model by beam search, as a Spark job (mapInArrow).

    Raises:
        BadInputError: the model folder is missing or not a tree, or the data has more features.
    """
    meta = read_metadata(spark, model_path, "TreeModel")
    if n_features > meta["n_features"]:
        raise BadInputError(
            f"the data has {n_features} features, beyond the model's n_features="
            f"{meta['n_features']}"
        )
    normalize, loss = meta["params"]["normalize"], meta["params"]["loss"]
    m_features = meta["n_features"]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        models = load_model(model_path, meta)
        label_ids = model_label_ids(model_path, meta)  # a compacted model's ids, else None
        for batch in batches:
            for lo in range(0, batch.num_rows, batch_rows):
                part = batch.slice(lo, batch_rows)
                Xb = csr_from_arrow(part.column(1), part.column(2), m_features)
                Xb = (
                    l2_normalize_rows(Xb, np.float64)
                    if normalize
                    else sp.csr_matrix(Xb, dtype=np.float64)
                )
                labels, scores = ensemble_search(models, Xb, beam, k, loss)
                check_finite_scores(scores, part.column(0), "predict")
                lengths = (labels >= 0).sum(axis=1)
                offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
                keep = labels >= 0
                if label_ids is not None:
                    labels = np.where(keep, label_ids[np.maximum(labels, 0)], -1)
                yield pa.RecordBatch.from_arrays(
                    [
                        part.column(0),
                        pa.ListArray.from_arrays(
                            offsets, pa.array(labels[keep].astype(np.int32)), type=S.ARROW_INT_LIST
                        ),
                        pa.ListArray.from_arrays(
                            offsets,
                            pa.array(scores[keep].astype(np.float32)),
                            type=S.ARROW_FLOAT_LIST,
                        ),
                    ],
                    schema=S.PREDICTIONS_ARROW,
                )

    return X.select(S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL).mapInArrow(run, PRED_SCHEMA)
