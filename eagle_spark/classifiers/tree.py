"""Parabel-like label tree on Spark: indexer (balanced 2-means over label representations),
matcher/ranker classifiers trained in parallel tasks, and beam-search prediction.

Tree: node 0 is the root; internal nodes are split by balanced spherical 2-means
(:func:`eagle_spark.kmeans.balanced_2means`) of their labels' representations until a node holds at
most ``max_leaf`` labels (a leaf). Label representations are PIFA (the L2-normalised sum of the
normalised feature rows of each label's positive samples, Y^T X) or given ones (e.g. the GRLR label
embeddings, ``label_repr``). Scored elements are the non-root nodes (matcher: "go into this child")
and the labels of each leaf (ranker); each has one binary linear classifier
(:func:`eagle_spark.classifiers.linear.train_binary`) trained on the samples that are positive under
its parent (have a label in the parent's subtree): PECOS's matcher-aware negatives M = Y C.

Distribution: the tree (O(n_nodes) rows) is built on the driver from the label representations;
training units (one per internal node: its children; one per leaf: its labels) are independent,
dealt into ``tasks`` bins by their number of positive samples, and each task trains its units from
the executor-side X/Y cache, labels in batches inside the task. Never one Spark job per label.

Prediction: beam search per batch of rows; a child's probability is exp(-max(0, 1 - s)^2) for the
squared hinge (Parabel) or the sigmoid for the logistic loss, a path's the product along the path;
the ``beam_size`` best nodes are kept per level; label scores are the leaf path probability times the
label's probability; the top-k labels are returned.

References:
    Prabhu, Kag, Harsola, Agrawal, Varma, Parabel, WWW 2018; Yu et al., PECOS (XR-Linear).
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession

from eagle_spark import schemas as S
from eagle_spark.classifiers.base import (WEIGHTS, WEIGHTS_ARROW, load_xy, read_metadata,
                                          write_metadata)
from eagle_spark.classifiers.linear import train_binary
from eagle_spark.classifiers.ova import PRED_SCHEMA, _PRED, _weights_batch
from eagle_spark.errors import BadInputError
from eagle_spark.evaluation.metrics import label_counts
from eagle_spark.io.fs import atomic_output
from eagle_spark.io.parts import PartWriter, PartWriters, filesystem_for, folder_version, read_sparse_rows
from eagle_spark.io.tables import read_manifest, read_table
from eagle_spark.kmeans import balanced_2means
from eagle_spark.sparse import csr_from_arrow, l2_normalize_rows

log = logging.getLogger(__name__)

TREE = "data/tree"
"""Tree tables ``data/tree_<t>``, one per tree; in a tree model's ``data/weights_<t>`` the
``label_id`` column holds the scored element id (cluster node id, or n_clusters + label)."""
TREE_ARROW = pa.schema([
    pa.field("node_id", pa.int32(), nullable=False),   # scored element id (nodes, then labels)
    pa.field("parent_id", pa.int32(), nullable=False),  # -1 for the root
    pa.field("level", pa.int32(), nullable=False),
    pa.field(S.LABEL_ID, pa.int32(), nullable=False),   # -1 for cluster nodes
])


class Tree:
    """The label tree as arrays. Element ids: clusters 0..n_clusters-1 (0 = root), then label l has
    element id n_clusters + l.

    Attributes:
        parent: (n_elements,) parent element (-1 for the root).
        level: (n_elements,) depth (root 0).
        n_clusters: cluster nodes (root included).
        n_labels: labels.
    """

    def __init__(self, parent: np.ndarray, level: np.ndarray, n_clusters: int, n_labels: int) -> None:
        self.parent, self.level = parent.astype(np.int64), level.astype(np.int64)
        self.n_clusters, self.n_labels = n_clusters, n_labels
        order = np.argsort(self.parent, kind="stable")
        counts = np.bincount(self.parent[self.parent >= 0], minlength=len(parent))
        self.child_ptr = np.r_[0, np.cumsum(counts)]
        self.children = order[self.parent[order] >= 0]

    def children_of(self, node: int) -> np.ndarray:
        return self.children[self.child_ptr[node]:self.child_ptr[node + 1]]

    def is_leaf_cluster(self, node: int) -> bool:
        kids = self.children_of(node)
        return len(kids) > 0 and bool((kids >= self.n_clusters).all())

    def labels_under(self) -> list[np.ndarray]:
        """Per cluster node: the labels of its subtree."""
        out: list[list[int]] = [[] for _ in range(self.n_clusters)]
        for label in range(self.n_labels):
            node = int(self.parent[self.n_clusters + label])
            while node >= 0:
                out[node].append(label)
                node = int(self.parent[node])
        return [np.array(sorted(x), dtype=np.int64) for x in out]


def build_tree(reps: sp.csr_matrix, max_leaf: int, seed: int, max_iter: int = 20) -> Tree:
    """Balanced hierarchical 2-means of label representations into a tree of <= max_leaf per leaf.

    Args:
        reps: (n_labels, d) label representations (rows normalised here).
        max_leaf: maximum labels per leaf (>= 2).
        seed: seed of the 2-means initialisations (node-specific seeds derive from it).
    Returns:
        The Tree.
    Raises:
        ValueError: max_leaf < 2.
    """
    if max_leaf < 2:
        raise ValueError(f"max_leaf must be >= 2, got {max_leaf}")
    reps = l2_normalize_rows(reps, np.float64)
    n_labels = reps.shape[0]
    parents, levels = [-1], [0]
    label_parent = np.zeros(n_labels, dtype=np.int64)
    stack = [(0, np.arange(n_labels))]
    while stack:
        node, labels = stack.pop()
        if len(labels) <= max_leaf:
            label_parent[labels] = node
            continue
        right = balanced_2means(reps[labels], seed=[seed, node], max_iter=max_iter)
        for half in (labels[~right], labels[right]):
            child = len(parents)
            parents.append(node)
            levels.append(levels[node] + 1)
            stack.append((child, half))
    n_clusters = len(parents)
    parent = np.r_[np.array(parents), label_parent]
    level = np.r_[np.array(levels), np.array(levels)[label_parent] + 1]
    return Tree(parent, level, n_clusters, n_labels)


def pifa(X: sp.csr_matrix, Y: sp.csc_matrix) -> sp.csr_matrix:
    """PIFA label representations: rows of Y^T X_normalised (then normalised by build_tree)."""
    return sp.csr_matrix(Y.T.astype(np.float64) @ l2_normalize_rows(X, np.float64))


def _train_units_task(dataset: str, out: str, n_features: int, n_labels: int, params: Any,
                      trees: list, units_by_bin: dict):
    """mapInArrow: bin ids -> weights part files of every tree (one classifier per scored element).

    `trees` holds (parent array, n_clusters) per tree; a unit is (tree index, cluster node).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        built = [Tree(parent, np.zeros(len(parent)), n_clusters, n_labels) for parent, n_clusters in trees]
        under = [t.labels_under() for t in built]
        Ycsr = Y.tocsr()
        trained = 0
        schemas = {f"weights_{t}": WEIGHTS_ARROW for t in range(len(trees))}
        with PartWriters(out, schemas) as writers:
            for batch in batches:
                for b in np.asarray(batch.column(0), dtype=np.int64):
                    writers.name(f"part-{int(b):05d}.parquet")
                    for t, node in units_by_bin.get(int(b), []):
                        rows = _unit(built[t], under[t], X, Y, Ycsr, node, params)
                        trained += len(rows)
                        if rows:
                            writers.write(f"weights_{t}", _weights_batch(rows))
        yield pa.RecordBatch.from_pydict({"trained": [trained]},
                                         schema=pa.schema([pa.field("trained", pa.int64(), False)]))

    return run


def _samples_with(Y: sp.csc_matrix, labels: np.ndarray) -> np.ndarray:
    """Bool mask of samples having any of `labels`."""
    sub = Y[:, labels]
    return np.asarray(sub.sum(axis=1)).ravel() > 0


def _unit(tree: Tree, under: list, X: sp.csr_matrix, Y: sp.csc_matrix, Ycsr: sp.csr_matrix,
          node: int, params: Any) -> list:
    """Train the classifiers of `node`'s children on the samples positive under `node`."""
    active = _samples_with(Y, under[node]) if node != 0 else np.ones(X.shape[0], dtype=bool)
    Xa = X[active]
    rows = []
    for child in tree.children_of(node):
        child = int(child)
        if child >= tree.n_clusters:
            y = Y[:, child - tree.n_clusters].toarray().ravel()[active] > 0
        else:
            y = _samples_with(Y, under[child])[active]
        w_idx, w_val, bias = train_binary(Xa, y, params.loss, params.C, params.threshold, seed=params.seed)
        rows.append((child, w_idx, w_val, bias))
    return rows


def train_tree(spark: SparkSession, dataset: str, model_path: str, params: Any,
               label_repr: Optional[str] = None, overwrite: bool = False) -> dict:
    """Train the label tree and save the model folder (metadata.json, data/tree, data/weights).

    Args:
        dataset: dataset with X and Y, on storage every executor reaches.
        model_path: model folder (atomic).
        params: the ``train`` section (loss, C, threshold, normalize, tasks, max_leaf, seed).
        label_repr: folder with ``label_emb`` (e.g. the output of embed) to cluster instead of PIFA.
    Returns:
        The model metadata (n_clusters, depth, ...).
    Raises:
        BadInputError: no samples, or label_repr lacks label_emb.
    """
    manifest = read_manifest(spark, dataset)
    n_features, n_labels = int(manifest["n_features"]), int(manifest["n_labels"])
    # The indexer runs on the driver: it needs the label representations (n_labels x d, bounded
    # by nnz(Y^T X)), not X itself when label_repr is given.
    if label_repr is not None:
        if read_table(spark, dataset, S.X).limit(1).count() == 0:
            raise BadInputError(f"dataset {dataset} has no samples to train on")
        reps = _read_label_repr(spark, label_repr, n_labels, n_features)
        label_freq, _ = label_counts(read_table(spark, dataset, S.Y), n_labels)
    else:
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        if len(ids) == 0:
            raise BadInputError(f"dataset {dataset} has no samples to train on")
        reps = pifa(X, Y)
        label_freq = np.asarray(Y.sum(axis=0), dtype=np.float64).ravel()  # positives per label
    trees = [build_tree(reps, params.max_leaf, params.seed + t) for t in range(params.n_trees)]
    units, work = [], []
    for t, tree in enumerate(trees):
        under = tree.labels_under()
        for node in range(tree.n_clusters):
            if len(tree.children_of(node)):
                units.append((t, node))
                work.append(label_freq[under[node]].sum())
    bins = max(1, min(params.tasks, len(units)))
    units_by_bin: dict[int, list] = {}
    for rank, i in enumerate(np.argsort(-np.array(work), kind="stable")):
        units_by_bin.setdefault(rank % bins, []).append(units[i])
    with atomic_output(spark, model_path, overwrite) as tmp:
        task = _train_units_task(dataset, posixpath.join(tmp, "data"), n_features, n_labels, params,
                                 [(tr.parent, tr.n_clusters) for tr in trees], units_by_bin)
        spark.range(0, bins, numPartitions=bins).mapInArrow(task, "trained long").collect()
        for t, tree in enumerate(trees):
            writer = PartWriter(posixpath.join(tmp, f"{TREE}_{t}"), "part-00000.parquet", TREE_ARROW)
            n_el = len(tree.parent)
            writer.write(pa.RecordBatch.from_arrays([
                pa.array(np.arange(n_el, dtype=np.int32)), pa.array(tree.parent.astype(np.int32)),
                pa.array(tree.level.astype(np.int32)),
                pa.array(np.where(np.arange(n_el) >= tree.n_clusters, np.arange(n_el) - tree.n_clusters,
                                  -1).astype(np.int32))], schema=TREE_ARROW))
            writer.close()
        meta = write_metadata(spark, tmp, "TreeModel", params.to_dict(), n_features, n_labels,
                              n_trees=len(trees), n_clusters=[tr.n_clusters for tr in trees],
                              depth=int(max(tr.level.max() for tr in trees)),
                              label_repr=label_repr or "pifa", source={"dataset": dataset})
    log.info("tree: %d labels, %d trees, depth %d", n_labels, len(trees), meta["depth"])
    return meta


def _read_label_repr(spark: SparkSession, folder: str, n_labels: int, n_features: int) -> sp.csr_matrix:
    path = posixpath.join(folder, S.LABEL_EMB)
    from eagle_spark.io.fs import FileSystem

    if not FileSystem(spark).exists(path):
        raise BadInputError(f"label representations {folder} have no {S.LABEL_EMB} table")
    reps, _ = read_sparse_rows(path, S.LABEL_ID, S.EMB_IDX, S.EMB_VAL, (n_labels, n_features))
    return reps


_model_cache: dict[tuple, list] = {}


def _load_model(model_path: str, meta: dict) -> list[tuple[Tree, sp.csr_matrix, np.ndarray]]:
    """[(tree, W^T (n_elements x d) CSR, bias)] per tree of a model, cached per worker."""
    key = (model_path, folder_version(model_path))  # a model retrained at the same path is reread
    if key not in _model_cache:
        fs, root = filesystem_for(model_path)
        out = []
        for t in range(int(meta["n_trees"])):
            tt = pq.read_table(f"{root}/{TREE}_{t}", filesystem=fs).sort_by("node_id")
            parent = np.asarray(tt.column("parent_id"), dtype=np.int64)
            level = np.asarray(tt.column("level"), dtype=np.int64)
            tree = Tree(parent, level, int(meta["n_clusters"][t]), int(meta["n_labels"]))
            WT, bias = read_sparse_rows(posixpath.join(model_path, f"{WEIGHTS}_{t}"), S.LABEL_ID,
                                        "w_idx", "w_val", (len(parent), int(meta["n_features"])),
                                        extra="bias")
            out.append((tree, WT, bias))
        _model_cache.clear()
        _model_cache[key] = out
    return _model_cache[key]


def ensemble_search(models: list, X: sp.csr_matrix, beam: int, k: int, loss: str,
                    per_tree_k: Optional[int] = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k labels by the mean over trees of the label probabilities; a label outside a tree's
    `per_tree_k` best (default 2k) counts 0 in that tree (Parabel's ensemble)."""
    n = X.shape[0]
    rows, labels, scores = [], [], []
    per_tree_k = per_tree_k or (2 * k if len(models) > 1 else k)
    for tree, WT, bias in models:
        lab, sc = beam_search(tree, WT, bias, X, beam, per_tree_k, loss)
        keep = lab >= 0
        rows.append(np.nonzero(keep)[0])
        labels.append(lab[keep])
        scores.append(sc[keep] / len(models))
    rows_a, labels_a, scores_a = np.concatenate(rows), np.concatenate(labels), np.concatenate(scores)
    key = rows_a * (int(labels_a.max(initial=0)) + 1) + labels_a
    uniq, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse, weights=scores_a)
    width = int(labels_a.max(initial=0)) + 1
    u_rows, u_labels = uniq // width, uniq % width
    out_labels = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.zeros((n, k))
    order, rank = _rank_within(u_rows, total, u_labels)
    keep = rank < k
    out_labels[u_rows[order][keep], rank[keep]] = u_labels[order][keep]
    out_scores[u_rows[order][keep], rank[keep]] = total[order][keep]
    return out_labels, out_scores


def _prob(scores: np.ndarray, loss: str) -> np.ndarray:
    if loss == "logistic":
        return 1.0 / (1.0 + np.exp(-scores))
    return np.exp(-np.square(np.maximum(0.0, 1.0 - scores)))


def _rank_within(rows: np.ndarray, keys_desc: np.ndarray, tie: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order by (row, key descending, tie ascending); returns (order, rank of each within its row)."""
    order = np.lexsort((tie, -keys_desc, rows))
    r = rows[order]
    starts = np.r_[0, np.flatnonzero(r[1:] != r[:-1]) + 1]
    rank = np.arange(len(r)) - np.repeat(starts, np.diff(np.r_[starts, len(r)]))
    return order, rank


def beam_search(tree: Tree, WT: sp.csr_matrix, bias: np.ndarray, X: sp.csr_matrix, beam: int,
                k: int, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Top-k labels of every row of X by beam search (see the module docstring), vectorised over
    the rows: each level scores all (row, child of a beam node) pairs with one sparse product.

    Returns:
        (labels (n, k) int64, scores (n, k) float64), best first (ties: smaller label id); rows
        with fewer than k reachable labels are padded with label -1 and score 0.
    """
    n = X.shape[0]
    b_row, b_node, b_prob = np.arange(n), np.zeros(n, dtype=np.int64), np.ones(n)
    f_row, f_label, f_prob = [], [], []
    while len(b_row):
        counts = tree.child_ptr[b_node + 1] - tree.child_ptr[b_node]
        total = int(counts.sum())
        if total == 0:
            break
        starts = np.repeat(tree.child_ptr[b_node] - np.r_[0, np.cumsum(counts)[:-1]], counts)
        kids = tree.children[starts + np.arange(total)]
        rows = np.repeat(b_row, counts)
        union, pos = np.unique(kids, return_inverse=True)
        if n * len(union) <= 50_000_000:  # one product for the level, then pick the pairs
            block = (X @ WT[union].T).toarray()
            s = block[rows, pos] + bias[kids]
        else:  # very wide levels: one sparse dot product per pair
            s = np.asarray(X[rows].multiply(WT[kids]).sum(axis=1)).ravel() + bias[kids]
        prob = np.repeat(b_prob, counts) * _prob(s, loss)
        is_label = kids >= tree.n_clusters
        f_row.append(rows[is_label])
        f_label.append(kids[is_label] - tree.n_clusters)
        f_prob.append(prob[is_label])
        rows, kids, prob = rows[~is_label], kids[~is_label], prob[~is_label]
        order, rank = _rank_within(rows, prob, kids)
        keep = order[rank < beam]
        b_row, b_node, b_prob = rows[keep], kids[keep], prob[keep]
    out_labels = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.zeros((n, k))
    if f_row:
        rows, labels, probs = np.concatenate(f_row), np.concatenate(f_label), np.concatenate(f_prob)
        order, rank = _rank_within(rows, probs, labels)
        keep = rank < k
        out_labels[rows[order][keep], rank[keep]] = labels[order][keep]
        out_scores[rows[order][keep], rank[keep]] = probs[order][keep]
    return out_labels, out_scores


def predict_tree(spark: SparkSession, model_path: str, X: DataFrame, n_features: int, k: int,
                 beam: int, batch_rows: int = 256) -> DataFrame:
    """Top-k predictions of a tree model by beam search, as a Spark job (mapInArrow).

    Raises:
        BadInputError: the model folder is missing or not a tree, or the data has more features.
    """
    meta = read_metadata(spark, model_path, "TreeModel")
    if n_features > meta["n_features"]:
        raise BadInputError(f"the data has {n_features} features, beyond the model's n_features="
                            f"{meta['n_features']}")
    normalize, loss = meta["params"]["normalize"], meta["params"]["loss"]
    m_features = meta["n_features"]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        models = _load_model(model_path, meta)
        for batch in batches:
            for lo in range(0, batch.num_rows, batch_rows):
                part = batch.slice(lo, batch_rows)
                Xb = csr_from_arrow(part.column(1), part.column(2), m_features)
                Xb = l2_normalize_rows(Xb, np.float64) if normalize else sp.csr_matrix(Xb, dtype=np.float64)
                labels, scores = ensemble_search(models, Xb, beam, k, loss)
                lengths = (labels >= 0).sum(axis=1)
                offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
                keep = labels >= 0
                yield pa.RecordBatch.from_arrays([
                    part.column(0),
                    pa.ListArray.from_arrays(offsets, pa.array(labels[keep].astype(np.int32)),
                                             type=S.ARROW_INT_LIST),
                    pa.ListArray.from_arrays(offsets, pa.array(scores[keep].astype(np.float32)),
                                             type=S.ARROW_FLOAT_LIST)], schema=_PRED)

    return X.select(S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL).mapInArrow(run, PRED_SCHEMA)


__all__ = ["Tree", "build_tree", "pifa", "train_tree", "predict_tree", "beam_search",
           "ensemble_search"]
