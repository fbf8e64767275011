"""Parabel-like label tree on Spark: indexer (balanced 2-means over label representations),
matcher/ranker classifiers trained in parallel tasks, and beam-search prediction.

Tree: node 0 is the root; internal nodes are split by balanced spherical 2-means
(:func:`eagle_spark.kmeans.balanced_2means`) of their labels' representations until a node holds at
most ``max_leaf`` labels (a leaf); a leaf whose training work (samples positive under it x its
labels) exceeds ``max_leaf_work`` is split further the same way (:func:`split_nodes`), so that
leaves of head labels do not dominate the training. Label representations are PIFA (the L2-normalised sum of the
normalised feature rows of each label's positive samples, Y^T X) or given ones (e.g. the GRLR label
embeddings, ``label_repr``). Scored elements are the non-root nodes (matcher: "go into this child")
and the labels of each leaf (ranker); each has one binary linear classifier
(:func:`eagle_spark.classifiers.linear.train_binary`) trained on the samples that are positive under
its parent (have a label in the parent's subtree): PECOS's matcher-aware negatives M = Y C.

Distribution: the indexer (:func:`index_trees`) splits the top ``top_levels`` levels of each
tree in a first Spark stage, one task per tree (by default the fewest levels that leave two
sub-trees per core); every node at that depth roots a sub-tree that a task of a second stage
splits to its leaves. The tree's shape down to the max_leaf leaves (node ids, sizes) follows from
n_labels and max_leaf alone (:func:`tree_shape`), nodes below a heavy leaf are named by their path
from it and numbered after the shape's (:func:`tree_from_leaves`), and a node's 2-means seed
depends only on its name, so the result equals the single-node :func:`build_tree` wherever the
split happens. Training units (one per internal node: its children;
one per leaf: its labels) are independent, dealt into ``tasks`` bins by their positive samples
times their classifiers (:func:`deal`), and each task trains its units from the executor-side X/Y cache, labels in batches inside
the task. Never one Spark job per label. A unit's samples and features are restricted to the ones
it uses (:func:`compact_columns`), so its cost does not grow with n_samples or n_features.

Prediction: beam search per batch of rows; a child's probability is exp(-max(0, 1 - s)^2) for the
squared hinge (Parabel) or the sigmoid for the logistic loss, a path's the product along the path;
the ``beam_size`` best nodes are kept per level; label scores are the leaf path probability times the
label's probability; the top-k labels are returned.

References:
    Prabhu, Kag, Harsola, Agrawal, Varma, Parabel, WWW 2018; Yu et al., PECOS (XR-Linear).
"""

from __future__ import annotations

import heapq
import logging
import posixpath
from typing import Any, Iterator, NamedTuple, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S
from eagle_spark.classifiers.base import (WEIGHTS, WEIGHTS_ARROW, load_xy, read_metadata,
                                          training_set, write_metadata)
from eagle_spark.classifiers.linear import check_weights, train_binary
from eagle_spark.classifiers.ova import PRED_SCHEMA, _PRED, _weights_batch
from eagle_spark.errors import BadInputError, check_finite_scores
from eagle_spark.evaluation.metrics import label_counts
from eagle_spark.executor_state import forget, shared_arrays, sparse_arrays, sparse_from
from eagle_spark.io.fs import atomic_output, check_separate
from eagle_spark.io.parts import PartWriter, PartWriters, filesystem_for, folder_version, read_sparse_rows
from eagle_spark.io.tables import has_table, read_table
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
        """Per cluster node: the labels of its subtree, ascending (int64 arrays)."""
        label = np.arange(self.n_labels)
        node = self.parent[self.n_clusters:]
        nodes, labels = [], []
        while len(label):  # walk every label up to the root, one level per round
            nodes.append(node)
            labels.append(label)
            up = self.parent[node]
            label, node = label[up >= 0], up[up >= 0]
        nodes_a, labels_a = np.concatenate(nodes), np.concatenate(labels)
        order = np.lexsort((labels_a, nodes_a))
        bounds = np.searchsorted(nodes_a[order], np.arange(self.n_clusters + 1))
        labels_a = labels_a[order]
        return [labels_a[bounds[i]:bounds[i + 1]] for i in range(self.n_clusters)]


class TreeShape(NamedTuple):
    """The cluster nodes of a label tree before any clustering: balanced 2-means splits a node of m
    labels into children of ceil(m/2) and floor(m/2) labels whatever the representations, so ids,
    parents and sizes follow from n_labels and max_leaf alone. Node ids are the depth-first order
    of :func:`build_tree` (node 0 the root); a node's 2-means seed is ``[seed, node]``, so any part
    of the tree can be split anywhere (driver, either indexer stage) and give the same tree. The
    nodes that ``max_leaf_work`` adds below its leaves depend on the data and are numbered after
    it (:func:`tree_from_leaves`).

    Attributes:
        parent: (n_clusters,) parent node (-1 for the root).
        level: (n_clusters,) depth (root 0).
        size: (n_clusters,) labels in the node's subtree.
        kids: (n_clusters, 2) left (ceil half) and right child, -1 for leaves (size <= max_leaf).
    """

    parent: np.ndarray
    level: np.ndarray
    size: np.ndarray
    kids: np.ndarray


def tree_shape(n_labels: int, max_leaf: int) -> TreeShape:
    """The :class:`TreeShape` of a tree of `n_labels` labels with at most `max_leaf` per leaf.

    Raises:
        ValueError: max_leaf < 2.
    """
    if max_leaf < 2:
        raise ValueError(f"max_leaf must be >= 2, got {max_leaf}")
    parent, level, size, kids = [-1], [0], [n_labels], [[-1, -1]]
    stack = [0]
    while stack:  # the same visiting order as the clustering, so the same ids
        node = stack.pop()
        if size[node] <= max_leaf:
            continue
        for c, half in enumerate(((size[node] + 1) // 2, size[node] // 2)):
            kids[node][c] = len(parent)
            stack.append(len(parent))
            parent.append(node)
            level.append(level[node] + 1)
            size.append(half)
            kids.append([-1, -1])
    return TreeShape(np.array(parent, dtype=np.int64), np.array(level, dtype=np.int64),
                     np.array(size, dtype=np.int64), np.array(kids, dtype=np.int64).reshape(-1, 2))


class LeafWork(NamedTuple):
    """What deciding whether a leaf is too heavy needs (``train.max_leaf_work``).

    Attributes:
        max_work: the budget: samples positive under a leaf x its labels (the row x classifier
            pairs its training unit fits).
        label_freq: (n_labels,) positives per label; their sum over a leaf's labels bounds its
            positive samples, so most leaves are decided without Y.
        Y: (n_samples, n_labels) CSC positives, or a function returning it (called only for a leaf
            the bound does not clear).
    """

    max_work: int
    label_freq: np.ndarray
    Y: Any


def _is_heavy(work: Optional[LeafWork], labels: np.ndarray) -> bool:
    """Whether a leaf of `labels` must be split further: it has at least 4 labels (children of
    >= 2) and its samples positive under it x its labels exceed the budget."""
    if work is None or len(labels) < 4 or work.label_freq[labels].sum() * len(labels) <= work.max_work:
        return False
    Y = work.Y() if callable(work.Y) else work.Y
    return len(rows_with(Y, labels)) * len(labels) > work.max_work


def split_nodes(reps: sp.csr_matrix, labels: np.ndarray, node: int, shape: TreeShape, seed: int,
                max_iter: int = 20, stop_level: Optional[int] = None,
                work: Optional[LeafWork] = None) -> list[tuple[int, str, np.ndarray]]:
    """Split `node` (holding `labels`) by balanced spherical 2-means down to its leaves, or down to
    the nodes at `stop_level` (the first indexer stage's frontier).

    A leaf of `shape` whose work exceeds the budget of `work` (:func:`_is_heavy`) is split further the
    same way; the nodes below it are named by their path from it ("0" = its left child, "01" =
    that child's right child), and :func:`tree_from_leaves` numbers them.

    Args:
        reps: (n_labels, d) L2-normalised label representations (all labels; rows of `labels` used).
        labels: the node's labels, ascending (int64).
        node: the node's id in `shape`.
        seed: the tree's seed; node v is split with seed ``[seed, v]``, the node at path p below
            leaf v with ``[seed, v, 1 + p_1, ..., 1 + p_k]``.
        stop_level: do not split nodes at this depth or deeper (None: split to the leaves).
        work: the ``train.max_leaf_work`` budget and what checking it needs (None: the leaves are
            the shape's, as in Parabel).
    Returns:
        [(node, path, labels)] of the reached leaves and frontier nodes (path "" for nodes of
        `shape`).
    Source: Parabel (Prabhu et al. 2018) section 3.2, hierarchical balanced 2-means; the work
    budget is this project's (docs/design.md).
    """
    out, stack = [], [(node, "", labels)]
    while stack:
        v, path, lab = stack.pop()
        left, right = shape.kids[v]
        if left < 0:  # a leaf of the shape (or below one): split further while too heavy
            done = not _is_heavy(work, lab)
            halves = [(v, path + "0"), (v, path + "1")]
        else:
            done = stop_level is not None and shape.level[v] >= stop_level
            halves = [(int(left), ""), (int(right), "")]
        if done:
            out.append((int(v), path, lab))
            continue
        node_seed = [seed, int(v)] + [1 + int(c) for c in path]  # [seed, v] for nodes of the shape
        to_right = balanced_2means(compact_columns(reps[lab])[1], seed=node_seed, max_iter=max_iter)
        stack.append((*halves[0], lab[~to_right]))
        stack.append((*halves[1], lab[to_right]))
    return out


def tree_from_leaves(shape: TreeShape, leaves: list[tuple[int, str, np.ndarray]], n_labels: int) -> Tree:
    """The Tree whose leaf (node, path) holds `labels` for each (node, path, labels) of `leaves`.

    Nodes below a leaf of `shape` (non-empty paths, :func:`split_nodes`) get the ids after the
    shape's, in the order of (node, path) (depth first), so the ids do not depend on the order
    of `leaves`.

    Raises:
        ValueError: a label is in no leaf, or a leaf is a node of the shape that is not a leaf.
    """
    prefixes = sorted({(int(v), path[:i]) for v, path, _ in leaves for i in range(1, len(path) + 1)})
    ids = {key: len(shape.parent) + i for i, key in enumerate(prefixes)}
    extra_parent = [ids.get((v, p[:-1]), v) for v, p in prefixes]
    extra_level = [int(shape.level[v]) + len(p) for v, p in prefixes]
    label_parent = np.full(n_labels, -1, dtype=np.int64)
    for node, path, labels in leaves:
        if shape.kids[node][0] >= 0:
            raise ValueError(f"node {node} is not a leaf of the tree shape")
        label_parent[labels] = ids[(int(node), path)] if path else node
    if (label_parent < 0).any():
        raise ValueError(f"label {int(np.flatnonzero(label_parent < 0)[0])} is in no leaf")
    cluster_parent = np.r_[shape.parent, np.array(extra_parent, dtype=np.int64)]
    cluster_level = np.r_[shape.level, np.array(extra_level, dtype=np.int64)]
    parent = np.r_[cluster_parent, label_parent]
    level = np.r_[cluster_level, cluster_level[label_parent] + 1]
    return Tree(parent, level, len(cluster_parent), n_labels)


def build_tree(reps: sp.csr_matrix, max_leaf: int, seed: int, max_iter: int = 20,
               Y: Optional[sp.csc_matrix] = None, max_leaf_work: Optional[int] = None) -> Tree:
    """Balanced hierarchical 2-means of label representations into a tree of <= max_leaf per leaf,
    on one node (the twin of :func:`index_trees`).

    Args:
        reps: (n_labels, d) label representations (rows normalised here).
        max_leaf: maximum labels per leaf (>= 2).
        seed: seed of the 2-means initialisations (node v uses ``[seed, v]``).
        Y: (n_samples, n_labels) CSC positives, needed with `max_leaf_work`.
        max_leaf_work: leaves whose positives x labels exceed it are split further (None: no).
    Returns:
        The Tree.
    Raises:
        ValueError: max_leaf < 2, or max_leaf_work without Y.
    """
    shape = tree_shape(reps.shape[0], max_leaf)
    reps = l2_normalize_rows(reps, np.float64)
    work = None
    if max_leaf_work is not None:
        if Y is None:
            raise ValueError("max_leaf_work needs Y")
        work = LeafWork(max_leaf_work, np.asarray(Y.sum(axis=0)).ravel().astype(np.int64), Y)
    leaves = split_nodes(reps, np.arange(reps.shape[0]), 0, shape, seed, max_iter, work=work)
    return tree_from_leaves(shape, leaves, reps.shape[0])


def pifa(X: sp.csr_matrix, Y: sp.csc_matrix) -> sp.csr_matrix:
    """PIFA label representations: rows of Y^T X_normalised (then normalised by build_tree)."""
    return sp.csr_matrix(Y.T.astype(np.float64) @ l2_normalize_rows(X, np.float64))


def _train_units_task(dataset: str, out: str, n_features: int, n_labels: int, params: Any,
                      trees: list, units_by_bin: dict):
    """mapInArrow: bin ids -> weights part files of every tree (one classifier per scored element).

    `trees` holds (parent array, n_clusters) per tree; a unit is (tree index, cluster node).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        forget("reps")  # the indexer's label representations are not needed any more
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        built = [Tree(parent, np.zeros(len(parent)), n_clusters, n_labels) for parent, n_clusters in trees]
        under = [t.labels_under() for t in built]
        trained = 0
        schemas = {f"weights_{t}": WEIGHTS_ARROW for t in range(len(trees))}
        with PartWriters(out, schemas) as writers:
            for batch in batches:
                for b in np.asarray(batch.column(0), dtype=np.int64):
                    writers.name(f"part-{int(b):05d}.parquet")
                    for t, node in units_by_bin.get(int(b), []):
                        rows = _unit(built[t], under[t], X, Y, node, params)
                        check_weights(rows, f"train (tree {t}): node")
                        trained += len(rows)
                        if rows:
                            writers.write(f"weights_{t}", _weights_batch(rows))
        yield pa.RecordBatch.from_pydict({"trained": [trained]},
                                         schema=pa.schema([pa.field("trained", pa.int64(), False)]))

    return run


def compact_columns(M: sp.csr_matrix, dtype: Optional[type] = None) -> tuple[np.ndarray, sp.csr_matrix]:
    """(cols, M restricted to its used columns renumbered 0..len(cols)-1): what a node's 2-means
    or a unit's classifiers need, so their dense vectors have O(used) entries, not O(n_features)."""
    used_idx = M.indices[M.indptr[0]:M.indptr[-1]]
    if len(used_idx) * 8 < M.shape[1]:  # few entries: sorting them is cheaper than a dense pass
        cols, local = np.unique(used_idx, return_inverse=True)
    else:
        used = np.zeros(M.shape[1], dtype=bool)
        used[used_idx] = True
        cols = np.flatnonzero(used)
        local = (np.cumsum(used, dtype=np.int64) - 1)[used_idx]
    data = M.data[M.indptr[0]:M.indptr[-1]]
    return cols, sp.csr_matrix((data.astype(dtype or data.dtype, copy=False),
                                local.reshape(-1).astype(np.int32), M.indptr - M.indptr[0]),
                               shape=(M.shape[0], len(cols)))


def rows_with(Y: sp.csc_matrix, labels: np.ndarray) -> np.ndarray:
    """Ascending ids of the samples (rows of Y) having any of `labels`; O(their nnz), not O(n)."""
    if len(labels) == 1 and Y.has_sorted_indices:  # one column: already ascending and unique
        return Y.indices[Y.indptr[labels[0]]:Y.indptr[labels[0] + 1]]
    starts, ends = Y.indptr[labels], Y.indptr[np.asarray(labels) + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    pos = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(total)
    return np.unique(Y.indices[pos])


def _unit(tree: Tree, under: list, X: sp.csr_matrix, Y: sp.csc_matrix, node: int,
          params: Any) -> list:
    """Train the classifiers of `node`'s children on the samples positive under `node`.

    The active samples' features are renumbered to the columns they use before training (the
    weights of unused features are 0 anyway), so a classifier costs O(its data), not O(n_features)
    (otherwise each one would touch dense vectors of 1.6M features at Wiki-325K scale).
    """
    root = node == 0
    active = np.arange(X.shape[0]) if root else rows_with(Y, under[node])
    Xa = X if root else X[active]
    cols, Xa = compact_columns(Xa, np.float64)  # liblinear works in float64: convert once per unit
    rows = []
    for child in tree.children_of(node):
        child = int(child)
        labels = [child - tree.n_clusters] if child >= tree.n_clusters else under[child]
        y = np.zeros(len(active), dtype=bool)
        y[np.searchsorted(active, rows_with(Y, np.asarray(labels, dtype=np.int64)))] = True
        w_idx, w_val, bias = train_binary(Xa, y, params.loss, params.C, params.threshold, tol=params.tol,
                                          seed=params.seed)
        rows.append((child, cols[w_idx].astype(np.int32), w_val, bias))
    return rows


def label_reps(dataset: str, n_features: int, n_labels: int, normalize: bool,
               label_repr: Optional[str] = None) -> sp.csr_matrix:
    """The L2-normalised label representations the indexer clusters, held once per executor
    (:mod:`eagle_spark.executor_state`): PIFA of the dataset (:func:`pifa`), or the ``label_emb``
    rows of `label_repr`. Memory per executor: 12 bytes per nonzero (float64 value, int32 id).

    Returns:
        (n_labels, d) float64 CSR (read-only arrays), d = n_features for PIFA.
    """
    source = label_repr if label_repr is not None else dataset
    key = (source, folder_version(source), n_features, n_labels, normalize)

    def build() -> dict[str, np.ndarray]:
        if label_repr is not None:
            reps, _ = read_sparse_rows(posixpath.join(label_repr, S.LABEL_EMB), S.LABEL_ID, S.EMB_IDX,
                                       S.EMB_VAL, (n_labels, n_features))
        else:
            _, X, Y = load_xy(dataset, n_features, n_labels, normalize)
            reps = pifa(X, Y)
        return sparse_arrays(l2_normalize_rows(reps, np.float64), "R")

    return sparse_from(shared_arrays("reps", key, build), "R")


def deal(work: np.ndarray, bins: int) -> list[list[int]]:
    """Indices of `work` dealt into `bins` lists: heaviest first, each to the least loaded bin
    (longest-processing-time rule; ties to the lower bin), so the bins' sums are balanced."""
    out: list[list[int]] = [[] for _ in range(bins)]
    heap = [(0.0, b) for b in range(bins)]
    work = np.asarray(work, dtype=np.float64)
    for i in np.argsort(-work, kind="stable"):
        load, b = heapq.heappop(heap)
        out[b].append(int(i))
        heapq.heappush(heap, (load + float(work[i]), b))
    return out


def top_levels_for(n_trees: int, cores: int) -> int:
    """The fewest tree levels to split first so that the sub-trees below them number at least two
    per core: min L with n_trees * 2**L >= 2 * cores (the default of ``train.top_levels``; the
    first stage has one task per tree, so fewer levels keep more of the work in the balanced
    second stage)."""
    levels = 0
    while n_trees * 2 ** levels < 2 * max(1, cores):
        levels += 1
    return levels


_SPLIT = pa.schema([pa.field("tree", pa.int32(), False), pa.field("node", pa.int32(), False),
                     pa.field("path", pa.string(), False),
                     pa.field(S.LABEL_IDS, pa.list_(pa.field("element", pa.int32(), False)), False),
                     pa.field("work", pa.float64(), False)])


def _split_stage(spark: SparkSession, dataset: str, n_features: int, n_labels: int, params: Any,
                 label_repr: Optional[str], shape: TreeShape, units_by_bin: dict,
                 stop_level: Optional[int],
                 label_freq: Optional[np.ndarray]) -> list[tuple[int, int, str, np.ndarray, float]]:
    """One Spark stage of the indexer: task b splits the sub-trees (tree, node, labels) of
    ``units_by_bin[b]`` down to their leaves, or to the nodes at `stop_level`.

    Tasks read the label representations themselves (:func:`label_reps`, cached per worker
    process), so only label ids travel; with ``params.max_leaf_work`` they check heavy leaves on
    the dataset's Y (:func:`load_xy`, the cache training uses next), given `label_freq`.

    Returns:
        [(tree, node, path, labels, work)] of the reached nodes (:func:`split_nodes`); work = the
        nnz of their labels' representations plus one per label (what splitting them further costs).
    """
    seed, normalize, max_work = params.seed, params.normalize, params.max_leaf_work

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reps = label_reps(dataset, n_features, n_labels, normalize, label_repr)
        row_work = np.diff(reps.indptr).astype(np.float64) + 1.0
        work = None
        if max_work is not None:
            work = LeafWork(max_work, label_freq, lambda: load_xy(dataset, n_features, n_labels, normalize)[2])
        for batch in batches:
            for b in np.asarray(batch.column(0), dtype=np.int64):
                for t, node, labels in units_by_bin.get(int(b), []):
                    found = split_nodes(reps, labels.astype(np.int64), node, shape, seed + t,
                                        stop_level=stop_level, work=work)
                    yield pa.RecordBatch.from_arrays([
                        pa.array(np.full(len(found), t, dtype=np.int32)),
                        pa.array(np.array([v for v, _, _ in found], dtype=np.int32)),
                        pa.array([path for _, path, _ in found], type=pa.string()),
                        pa.array([lab.astype(np.int32) for _, _, lab in found],
                                 type=_SPLIT.field(S.LABEL_IDS).type),
                        pa.array(np.array([row_work[lab].sum() for _, _, lab in found], dtype=np.float64))],
                        schema=_SPLIT)

    bins = len(units_by_bin)
    got = spark.range(0, bins, numPartitions=bins).mapInArrow(run, from_arrow_schema(_SPLIT)).collect()
    return [(row["tree"], row["node"], row["path"], np.array(row[S.LABEL_IDS], dtype=np.int64), row["work"])
            for row in got]


def index_trees(spark: SparkSession, dataset: str, n_features: int, n_labels: int, params: Any,
                label_repr: Optional[str] = None, label_freq: Optional[np.ndarray] = None) -> list[Tree]:
    """The distributed indexer: the label trees of an ensemble, equal to :func:`build_tree` with
    seeds ``params.seed + t``.

    Two Spark stages: the first splits the top ``params.top_levels`` levels of every tree, one
    task per tree (default :func:`top_levels_for` the session's cores; skipped when 0); every node
    at that depth roots a sub-tree, and the second stage splits those down to their leaves, dealt
    into ``params.tasks`` tasks by their representations' nnz. Tasks read the representations
    from the dataset (PIFA) or `label_repr` themselves (cached per worker), so only label ids
    travel, the driver never holds the representations, and the tasks' X/Y cache is warm for
    training. With ``params.max_leaf_work``, leaves too heavy to train are split further
    (:func:`split_nodes`); `label_freq` (positives per label) is counted on the Y table when not
    given.

    Returns:
        One Tree per tree of the ensemble.
    Raises:
        BadInputError: `label_repr` has no label_emb table.
    Source: Parabel section 3.2 (balanced 2-means indexer); distribution: this project.
    """
    if label_repr is not None and not has_table(spark, label_repr, S.LABEL_EMB):
        raise BadInputError(f"label representations {label_repr} have no {S.LABEL_EMB} table")
    shape = tree_shape(n_labels, params.max_leaf)
    if params.max_leaf_work is not None and label_freq is None:
        label_freq, _ = label_counts(read_table(spark, dataset, S.Y), n_labels)
    levels = params.top_levels
    if levels is None:
        levels = top_levels_for(params.n_trees, spark.sparkContext.defaultParallelism)
    everything = np.arange(n_labels, dtype=np.int32)
    if levels > 0 and shape.kids[0][0] >= 0:
        tops = {t: [(t, 0, everything)] for t in range(params.n_trees)}
        found = _split_stage(spark, dataset, n_features, n_labels, params, label_repr, shape, tops,
                             stop_level=levels, label_freq=label_freq)
    else:  # whole trees, each the second stage's sub-tree
        found = [(t, 0, "", everything.astype(np.int64), 1.0) for t in range(params.n_trees)]
    leaves: list[list] = [[] for _ in range(params.n_trees)]
    units, work = [], []  # the sub-trees left to the second stage
    for t, node, path, labels, w in found:
        if shape.kids[node][0] < 0:  # a leaf of the shape, or below one (path): final
            leaves[t].append((node, path, labels))
        else:
            units.append((t, node, labels.astype(np.int32)))
            work.append(w)
    if units:
        dealt = deal(np.array(work), max(1, min(params.tasks, len(units))))
        for t, node, path, labels, _ in _split_stage(
                spark, dataset, n_features, n_labels, params, label_repr, shape,
                {b: [units[i] for i in idx] for b, idx in enumerate(dealt)}, stop_level=None,
                label_freq=label_freq):
            leaves[t].append((node, path, labels))
    return [tree_from_leaves(shape, leaves[t], n_labels) for t in range(params.n_trees)]


def train_tree(spark: SparkSession, dataset: str, model_path: str, params: Any,
               label_repr: Optional[str] = None, overwrite: bool = False) -> dict:
    """Train the label tree and save the model folder (metadata.json, data/tree, data/weights).

    Args:
        dataset: dataset with X and Y, on storage every executor reaches.
        model_path: model folder (atomic).
        params: the ``train`` section (loss, C, threshold, normalize, tasks, max_leaf, n_trees,
            top_levels, seed).
        label_repr: folder with ``label_emb`` (e.g. the output of embed) to cluster instead of PIFA.
    Returns:
        The model metadata (n_clusters, depth, ...).
    Raises:
        BadInputError: no samples or no Y (:func:`training_set`), or label_repr lacks label_emb.
    """
    check_separate(model_path, [dataset, label_repr])
    n_features, n_labels = training_set(spark, dataset)  # X stays off the driver: tasks index and train
    label_freq, _ = label_counts(read_table(spark, dataset, S.Y), n_labels)  # positives per label
    trees = index_trees(spark, dataset, n_features, n_labels, params, label_repr, label_freq)
    units, work = [], []
    for t, tree in enumerate(trees):
        under = tree.labels_under()
        for node in range(tree.n_clusters):
            if len(tree.children_of(node)):
                units.append((t, node))  # ~ liblinear passes over the node's positives
                work.append(label_freq[under[node]].sum() * len(tree.children_of(node)))
    bins = max(1, min(params.tasks, len(units)))
    units_by_bin = {b: [units[i] for i in idx] for b, idx in enumerate(deal(np.array(work), bins))}
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


_model_cache: dict[tuple, list] = {}


def _load_model(model_path: str, meta: dict) -> list[tuple[Tree, sp.csr_matrix, np.ndarray]]:
    """[(tree, W^T (n_elements x d) CSR float32, bias)] per tree of a model, held once per executor
    (:mod:`eagle_spark.executor_state`; ~8 bytes per weight, whatever the number of task slots).
    The weights stay float32 as stored (4 bytes less per weight); products with float64 X are
    computed in float64, so the scores equal those of float64 weights."""
    key = (model_path, folder_version(model_path))  # a model retrained at the same path is reread
    if key in _model_cache:
        return _model_cache[key]

    def build() -> dict[str, np.ndarray]:
        fs, root = filesystem_for(model_path)
        arrays: dict[str, np.ndarray] = {}
        for t in range(int(meta["n_trees"])):
            tt = pq.read_table(f"{root}/{TREE}_{t}", filesystem=fs).sort_by("node_id")
            parent = np.asarray(tt.column("parent_id"), dtype=np.int64)
            WT, bias = read_sparse_rows(posixpath.join(model_path, f"{WEIGHTS}_{t}"), S.LABEL_ID,
                                        "w_idx", "w_val", (len(parent), int(meta["n_features"])),
                                        extra="bias", dtype=np.float32)  # as stored; products upcast
            arrays |= {f"parent{t}": parent, f"level{t}": np.asarray(tt.column("level"), dtype=np.int64),
                       f"bias{t}": bias, **sparse_arrays(WT, f"W{t}")}
        return arrays

    a = shared_arrays("tree", key, build)
    out = [(Tree(a[f"parent{t}"], a[f"level{t}"], int(meta["n_clusters"][t]), int(meta["n_labels"])),
            sparse_from(a, f"W{t}"), a[f"bias{t}"]) for t in range(int(meta["n_trees"]))]
    _model_cache.clear()
    _model_cache[key] = out
    return out


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
                check_finite_scores(scores, part.column(0), "predict")
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


__all__ = ["Tree", "TreeShape", "LeafWork", "tree_shape", "split_nodes", "tree_from_leaves", "label_reps", "top_levels_for", "index_trees", "compact_columns", "rows_with", "build_tree", "pifa", "train_tree", "predict_tree", "beam_search",
           "ensemble_search"]
