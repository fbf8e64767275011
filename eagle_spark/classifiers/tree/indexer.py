"""The label tree's indexer: balanced 2-means over label representations (PIFA or GRLR
embeddings), single-node (:func:`build_tree`) and on Spark in two stages (:func:`index_trees`).
See :mod:`eagle_spark.classifiers.tree`."""

from __future__ import annotations

import logging
import posixpath
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S
from eagle_spark.classic import default_parallelism
from eagle_spark.classifiers.joined import (
    ProportionalBlocks,
    check_delivered,
    joined_stage,
    load_y,
    local_rows,
)
from eagle_spark.classifiers.tree.structure import (
    LeafWork,
    Tree,
    TreeShape,
    deal,
    is_heavy,
    rows_with,
    split_pays,
    top_levels_for,
    tree_from_leaves,
    tree_shape,
)
from eagle_spark.errors import BadInputError
from eagle_spark.evaluation.metrics import label_counts
from eagle_spark.executor_state import shared_state, sparse_arrays, sparse_from
from eagle_spark.io.parts import PartWriter, folder_version, load_xy, read_sparse_rows
from eagle_spark.io.tables import has_table, read_table
from eagle_spark.kmeans import balanced_2means
from eagle_spark.settings import TreeSettings
from eagle_spark.sparse import compact_columns, l2_normalize_rows, l2_normalize_rows_in_place

log = logging.getLogger(__name__)


def split_nodes(
    reps: sp.csr_matrix,
    labels: np.ndarray,
    node: int,
    shape: TreeShape,
    seed: int,
    max_iter: int = 20,
    stop_level: Optional[int] = None,
    work: Optional[LeafWork] = None,
) -> list[tuple[int, str, np.ndarray]]:
    """Split `node` (holding `labels`) by balanced spherical 2-means down to its leaves, or down to
    the nodes at `stop_level` (the first indexer stage's frontier).

    A leaf of `shape` whose work exceeds the budget of `work` (:func:`is_heavy`) is split further the
    same way; the nodes below it are named by their path from it ("0" = its left child, "01" =
    that child's right child), and :func:`tree_from_leaves` numbers them.

    Args:
        reps: (n_labels, d) L2-normalised label representations (all labels; rows of `labels` used).
        labels: the node's labels, ascending (int64).
        node: the node's id in `shape`.
        seed: the tree's seed; node v is split with seed ``[seed, v]``, the node at path p below
            leaf v with ``[seed, v, 1 + p_1, ..., 1 + p_k]``.
        stop_level: do not split nodes at this depth or deeper (None: split to the leaves).
        work: the ``tree.max_leaf_work`` budget and what checking it needs, and the
            ``tree.max_split_shared`` rule for keeping a heavy leaf's split (:func:`split_pays`)
            (None: the leaves are the shape's, as in Parabel).
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
        below_leaf = left < 0  # a leaf of the shape (or below one): split further while too heavy
        if below_leaf:
            done = not is_heavy(work, lab)
            halves = [(v, path + "0"), (v, path + "1")]
        else:
            done = stop_level is not None and shape.level[v] >= stop_level
            halves = [(int(left), ""), (int(right), "")]
        if done:
            out.append((int(v), path, lab))
            continue
        node_seed = [seed, int(v)] + [1 + int(c) for c in path]  # [seed, v] for nodes of the shape
        # a root holds every label: its rows are `reps` itself, not a copy of it
        rows = reps if len(lab) == reps.shape[0] else reps[lab]
        to_right = balanced_2means(compact_columns(rows)[1], seed=node_seed, max_iter=max_iter)
        if below_leaf and not split_pays(work, lab, to_right):  # halves sharing most samples
            out.append((int(v), path, lab))
            continue
        stack.append((*halves[0], lab[~to_right]))
        stack.append((*halves[1], lab[to_right]))
    return out


def build_tree(
    reps: sp.csr_matrix,
    max_leaf: int,
    seed: int,
    max_iter: int = 20,
    Y: Optional[sp.csc_matrix] = None,
    max_leaf_work: Optional[int] = None,
    max_split_shared: Optional[float] = None,
) -> Tree:
    """Balanced hierarchical 2-means of label representations into a tree of <= max_leaf per leaf,
    on one node (the twin of :func:`index_trees`).

    Args:
        reps: (n_labels, d) label representations (rows normalised here).
        max_leaf: maximum labels per leaf (>= 2).
        seed: seed of the 2-means initialisations (node v uses ``[seed, v]``).
        Y: (n_samples, n_labels) CSC positives, needed with `max_leaf_work`.
        max_leaf_work: leaves whose positives x labels exceed it are split further (None: no).
        max_split_shared: with `max_leaf_work`, such a split is kept only when at most this share
            of the leaf's positive samples is positive under both halves (None: always).
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
        work = LeafWork(
            max_leaf_work, np.asarray(Y.sum(axis=0)).ravel().astype(np.int64), Y, max_split_shared
        )
    leaves = split_nodes(reps, np.arange(reps.shape[0]), 0, shape, seed, max_iter, work=work)
    return tree_from_leaves(shape, leaves, reps.shape[0])


def pifa(X: sp.csr_matrix, Y: sp.csc_matrix) -> sp.csr_matrix:
    """PIFA label representations: rows of Y^T X_normalised (then normalised by build_tree)."""
    return sp.csr_matrix(Y.T.astype(np.float64) @ l2_normalize_rows(X, np.float64))


def label_reps(
    dataset: str, n_features: int, n_labels: int, normalize: bool, label_repr: Optional[str] = None
) -> sp.csr_matrix:
    """The L2-normalised label representations the indexer clusters, held once per executor
    (:mod:`eagle_spark.executor_state`): PIFA of the dataset (:func:`pifa`), or the ``label_emb``
    rows of `label_repr`. Memory per executor: 12 bytes per nonzero (float64 value, int32 id);
    the building worker holds them once more (normalised in place,
    :func:`eagle_spark.sparse.l2_normalize_rows_in_place`) plus X and Y as float64 for PIFA's
    product: at synthetic Wiki-325K 1.0 with the Baseline's labels (12.6 a sample) the
    representations are the largest thing a worker builds.

    Returns:
        (n_labels, d) float64 CSR (read-only arrays), d = n_features for PIFA.
    """
    source = label_repr if label_repr is not None else dataset
    key = (source, folder_version(source), n_features, n_labels, normalize)

    def build() -> dict[str, np.ndarray]:
        if label_repr is not None:
            reps, _ = read_sparse_rows(
                posixpath.join(label_repr, S.LABEL_EMB),
                S.LABEL_ID,
                S.EMB_IDX,
                S.EMB_VAL,
                (n_labels, n_features),
            )
        else:
            _, X, Y = load_xy(dataset, n_features, n_labels, normalize)
            reps = pifa(X, Y)
        reps = sp.csr_matrix(reps, dtype=np.float64)  # a copy only of float32 label_emb values
        if not reps.data.flags.writeable:  # values read from Parquet without a copy
            reps.data = np.array(reps.data)
        return sparse_arrays(l2_normalize_rows_in_place(reps), "R")

    return shared_state("reps", key, build, lambda a: sparse_from(a, "R"))


_SPLIT = pa.schema(
    [
        pa.field("tree", pa.int32(), False),
        pa.field("node", pa.int32(), False),
        pa.field("path", pa.string(), False),
        pa.field(S.LABEL_IDS, pa.list_(pa.field("element", pa.int32(), False)), False),
        pa.field("work", pa.float64(), False),
    ]
)


def _split_stage(
    spark: SparkSession,
    dataset: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    label_repr: Optional[str],
    shape: TreeShape,
    units_by_bin: dict,
    stop_level: Optional[int],
    label_freq: Optional[np.ndarray],
    y_only: bool = False,
) -> list[tuple[int, int, str, np.ndarray, float]]:
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
            if label_freq is None:
                raise ValueError("the indexer's heavy-leaf check (max_leaf_work) needs label_freq")
            work = LeafWork(
                max_work,
                label_freq,
                (lambda: load_y(dataset, n_labels)[1])
                if y_only
                else (lambda: load_xy(dataset, n_features, n_labels, normalize)[2]),
                params.max_split_shared,
            )
        for batch in batches:
            for b in np.asarray(batch.column(0), dtype=np.int64):
                for t, node, labels in units_by_bin.get(int(b), []):
                    found = split_nodes(
                        reps,
                        labels.astype(np.int64),
                        node,
                        shape,
                        seed + t,
                        stop_level=stop_level,
                        work=work,
                    )
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array(np.full(len(found), t, dtype=np.int32)),
                            pa.array(np.array([v for v, _, _ in found], dtype=np.int32)),
                            pa.array([path for _, path, _ in found], type=pa.string()),
                            pa.array(
                                [lab.astype(np.int32) for _, _, lab in found],
                                type=_SPLIT.field(S.LABEL_IDS).type,
                            ),
                            pa.array(
                                np.array(
                                    [row_work[lab].sum() for _, _, lab in found], dtype=np.float64
                                )
                            ),
                        ],
                        schema=_SPLIT,
                    )

    bins = len(units_by_bin)
    got = (
        spark.range(0, bins, numPartitions=bins)
        .mapInArrow(run, from_arrow_schema(_SPLIT))
        .collect()
    )
    return [
        (
            row["tree"],
            row["node"],
            row["path"],
            np.array(row[S.LABEL_IDS], dtype=np.int64),
            row["work"],
        )
        for row in got
    ]


def index_trees(
    spark: SparkSession,
    dataset: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    label_repr: Optional[str] = None,
    label_freq: Optional[np.ndarray] = None,
    y_only: bool = False,
) -> list[Tree]:
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
        levels = top_levels_for(params.n_trees, default_parallelism(spark))
    everything = np.arange(n_labels, dtype=np.int32)
    if levels > 0 and shape.kids[0][0] >= 0:
        tops = {t: [(t, 0, everything)] for t in range(params.n_trees)}
        found = _split_stage(
            spark,
            dataset,
            n_features,
            n_labels,
            params,
            label_repr,
            shape,
            tops,
            stop_level=levels,
            label_freq=label_freq,
            y_only=y_only,
        )
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
            spark,
            dataset,
            n_features,
            n_labels,
            params,
            label_repr,
            shape,
            {b: [units[i] for i in idx] for b, idx in enumerate(dealt)},
            stop_level=None,
            label_freq=label_freq,
            y_only=y_only,
        ):
            leaves[t].append((node, path, labels))
    return [tree_from_leaves(shape, leaves[t], n_labels) for t in range(params.n_trees)]


PIFA_ARROW = pa.schema(
    [
        pa.field(S.LABEL_ID, pa.int32(), False),
        pa.field(S.EMB_IDX, pa.list_(pa.field("element", pa.int32(), False)), False),
        pa.field(S.EMB_VAL, pa.list_(pa.field("element", pa.float64(), False)), False),
    ]
)
"""PIFA rows as the join path writes them: float64 values, so the indexer clusters the same numbers."""


def joined_pifa(
    spark: SparkSession,
    dataset: str,
    out: str,
    n_features: int,
    n_labels: int,
    normalize: bool,
    bins: int,
) -> str:
    """PIFA label representations by the join path, written as ``<out>/label_emb`` (float64).

    Labels are cut into `bins` contiguous blocks; the task of a block receives the rows of the
    samples having one of its labels and computes those labels' rows of Y^T X_normalised with the
    same scipy product as :func:`pifa` (rows in sample_id
    order, so the same sums in the same order). The indexer reads `out` as its ``label_repr``.

    Returns:
        `out`.
    """
    bins = max(1, min(bins, n_labels))
    blocks = ProportionalBlocks(n_labels, bins)

    def rows_of_bin(b: int, ids: np.ndarray, Y: sp.csc_matrix) -> np.ndarray:
        return rows_with(Y, np.arange(*blocks.labels(b), dtype=np.int64))

    def pifa_bin(b: int, table: pa.Table) -> pa.Table:
        ids, Y = load_y(dataset, n_labels)
        rows, X, Yb = local_rows(table, ids, Y, n_features, normalize, "tree (PIFA)")
        check_delivered(dataset, n_labels, bins, rows_of_bin, b, rows, "tree (PIFA)")
        lo, hi = blocks.labels(b)
        R = sp.csr_matrix(Yb[:, lo:hi].T.astype(np.float64) @ l2_normalize_rows(X, np.float64))
        writer = PartWriter(posixpath.join(out, S.LABEL_EMB), f"part-{b:05d}.parquet", PIFA_ARROW)
        try:
            offsets = pa.array(R.indptr.astype(np.int32))
            writer.write(
                pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.arange(lo, hi, dtype=np.int32)),
                        pa.ListArray.from_arrays(
                            offsets,
                            pa.array(R.indices.astype(np.int32)),
                            type=PIFA_ARROW.field(S.EMB_IDX).type,
                        ),
                        pa.ListArray.from_arrays(
                            offsets,
                            pa.array(R.data.astype(np.float64)),
                            type=PIFA_ARROW.field(S.EMB_VAL).type,
                        ),
                    ],
                    schema=PIFA_ARROW,
                )
            )
        except BaseException:
            writer.abort()
            raise
        writer.close()
        return pa.table({"labels": pa.array([hi - lo], pa.int64())})

    joined_stage(spark, dataset, n_labels, bins, rows_of_bin, pifa_bin, "labels long")
    return out
