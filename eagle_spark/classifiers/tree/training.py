"""Training the label tree's matcher and ranker classifiers: one unit per internal node, dealt
into Spark tasks, each trained from the executor-side X / Y. See :mod:`eagle_spark.classifiers.tree`."""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.classifiers.base import (WEIGHTS_ARROW, load_unassigned, load_xy, training_set,
                                          unassigned_groups, write_metadata)
from eagle_spark.classifiers.linear import check_weights, train_binary
from eagle_spark.classifiers.ova import weights_batch
from eagle_spark.evaluation.metrics import label_counts
from eagle_spark.executor_state import forget
from eagle_spark.io.fs import atomic_output, check_separate
from eagle_spark.io.parts import PartWriter, PartWriters
from eagle_spark.io.tables import read_table
from eagle_spark.progress import step
from eagle_spark.classifiers.tree.indexer import index_trees
from eagle_spark.classifiers.tree.structure import TREE, TREE_ARROW, Tree, deal, compact_columns, rows_with

log = logging.getLogger(__name__)


def _train_units_task(dataset: str, out: str, n_features: int, n_labels: int, params: Any,
                      trees: list, units_by_bin: dict, groups: Optional[str] = None):
    """mapInArrow: bin ids -> weights part files of every tree (one classifier per scored element).

    `trees` holds (parent array, n_clusters) per tree; a unit is (tree index, cluster node).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        forget("reps")  # the indexer's label representations are not needed any more
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        U = load_unassigned(dataset, groups, ids, Y) if groups is not None else None
        built = [Tree(parent, np.zeros(len(parent)), n_clusters, n_labels) for parent, n_clusters in trees]
        under = [t.labels_under() for t in built]
        trained = 0
        schemas = {f"weights_{t}": WEIGHTS_ARROW for t in range(len(trees))}
        with PartWriters(out, schemas) as writers:
            for batch in batches:
                for b in np.asarray(batch.column(0), dtype=np.int64):
                    writers.name(f"part-{int(b):05d}.parquet")
                    for t, node in units_by_bin.get(int(b), []):
                        rows = train_unit(built[t], under[t], X, Y, node, params, U)
                        check_weights(rows, f"train (tree {t}): node")
                        trained += len(rows)
                        if rows:
                            writers.write(f"weights_{t}", weights_batch(rows))
        yield pa.RecordBatch.from_pydict({"trained": [trained]},
                                         schema=pa.schema([pa.field("trained", pa.int64(), False)]))

    return run


def train_unit(tree: Tree, under: list, X: sp.csr_matrix, Y: sp.csc_matrix, node: int,
               params: Any, U: Optional[sp.csc_matrix] = None) -> list:
    """Train the classifiers of `node`'s children on the samples positive under `node`.

    The active samples' features are renumbered to the columns they use before training (the
    weights of unused features are 0 anyway), so a classifier costs O(its data), not O(n_features)
    (otherwise each one would touch dense vectors of 1.6M features at Wiki-325K scale).

    Args:
        U: (n_samples, n_labels) CSC, the unassigned group labels of each sample
            (:func:`eagle_spark.classifiers.base.load_unassigned`); when given, the ranker of label
            k (a child that is a label) does not train on the active samples with U[i, k], unless
            they are positives. None: every active sample is used.
    Returns:
        [(child, weight indices, weight values, bias)], one per child.
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
        Xc = Xa
        if U is not None and child >= tree.n_clusters:
            lab = labels[0]
            unknown = np.isin(active, U.indices[U.indptr[lab]:U.indptr[lab + 1]]) & ~y
            if unknown.any():
                Xc, y = Xa[~unknown], y[~unknown]
        w_idx, w_val, bias = train_binary(Xc, y, params.loss, params.C, params.threshold, tol=params.tol,
                                          seed=params.seed)
        rows.append((child, cols[w_idx].astype(np.int32), w_val, bias))
    return rows


def train_tree(spark: SparkSession, dataset: str, model_path: str, params: Any,
               label_repr: Optional[str] = None, overwrite: bool = False) -> dict:
    """Train the label tree and save the model folder (metadata.json, data/tree, data/weights).

    Args:
        dataset: dataset with X and Y, on storage every executor reaches.
        model_path: model folder (atomic).
        params: the ``tree`` section (loss, C, threshold, normalize, tasks, max_leaf, n_trees,
            top_levels, seed, unassigned: with ``ignore`` the ranker of label k leaves out the
            members of groups labelled k that EAGLE did not assign k).
        label_repr: folder with ``label_emb`` (e.g. the output of embed) to cluster instead of PIFA.
    Returns:
        The model metadata (n_clusters, depth, ...).
    Raises:
        BadInputError: no samples or no Y (:func:`training_set`), or label_repr lacks label_emb.
    """
    check_separate(model_path, [dataset, label_repr])
    n_features, n_labels = training_set(spark, dataset)  # X stays off the driver: tasks index and train
    groups = unassigned_groups(spark, dataset, params.unassigned, "tree")
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
    step("%d trees indexed; training %d units (nodes with children) in %d tasks", len(trees), len(units), bins)
    units_by_bin = {b: [units[i] for i in idx] for b, idx in enumerate(deal(np.array(work), bins))}
    with atomic_output(spark, model_path, overwrite) as tmp:
        task = _train_units_task(dataset, posixpath.join(tmp, "data"), n_features, n_labels, params,
                                 [(tr.parent, tr.n_clusters) for tr in trees], units_by_bin, groups)
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
