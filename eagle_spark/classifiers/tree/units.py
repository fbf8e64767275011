"""The label tree's training units: one unit trains the classifiers of one internal node's
children (the matcher's nodes and the rankers' leaves alike) on the samples positive under it, and
a bin of units runs in one Spark task (:class:`BinTrainer`), whether its rows come from the
executor-side X / Y or through a join. :mod:`eagle_spark.classifiers.tree.training` deals units
into bins and runs them; :mod:`eagle_spark.classifiers.tree.ranker_cost` trains single units to
score the rankers' cost on held-out rows. See :mod:`eagle_spark.classifiers.tree`."""

from __future__ import annotations

import logging
from typing import Optional

import numpy as np
import scipy.sparse as sp
from pyspark.sql import SparkSession

from eagle_spark.classic import default_parallelism, is_local
from eagle_spark.classifiers.base import (
    WEIGHTS_ARROW,
    load_label_weights,
    load_unassigned,
)
from eagle_spark.classifiers.linear import check_weights, expected_loss_problem, train_binary
from eagle_spark.classifiers.ova import weights_batch
from eagle_spark.classifiers.tree.structure import (
    Tree,
    rows_with,
)
from eagle_spark.executor_state import executor_lock
from eagle_spark.io.parts import PartWriters
from eagle_spark.settings import TreeSettings, memory_mib
from eagle_spark.sparse import compact_columns

log = logging.getLogger(__name__)


class BinTrainer:
    """Trains the units of a bin on given rows and writes their weights to the bin's part files
    (``part-<bin>.parquet`` of every tree's weights table): the same code for the cached rows and
    for the rows a join delivered.

    `limit`: the heavy-unit bound in bytes (None: no bound). `slots`: when given, the bound is
    resolved in the task instead, from ``params.heavy_unit_memory`` with the memory available on
    the task's machine (:func:`heavy_limit`; the joined path, where no sizing stage ran)."""

    def __init__(
        self,
        out: str,
        n_labels: int,
        params: TreeSettings,
        trees: list,
        units_by_bin: dict,
        limit: Optional[float] = None,
        slots: Optional[int] = None,
    ) -> None:
        self.out, self.params, self.units_by_bin = out, params, units_by_bin
        self.trees, self.n_labels = trees, n_labels
        self.limit, self.slots = limit, slots
        self.trained = 0
        self._built: Optional[tuple[list, list]] = None

    def __getstate__(self) -> dict:  # ship the parent arrays only; the tasks rebuild the rest
        return {**self.__dict__, "_built": None}

    def _trees(self) -> tuple[list, list]:
        """(trees, labels_under() of each), built on first use in the task."""
        if self._built is None:
            built = [
                Tree(parent, np.zeros(len(parent)), n_clusters, self.n_labels)
                for parent, n_clusters in self.trees
            ]
            self._built = (built, [t.labels_under() for t in built])
        return self._built

    def train(
        self,
        b: int,
        X: sp.csr_matrix,
        Y: sp.csc_matrix,
        U: Optional[sp.csc_matrix],
        n_samples: Optional[int] = None,
        W: Optional[sp.csc_matrix] = None,
    ) -> int:
        """Train bin `b`'s units on X / Y (rows in sample_id order, all the units' samples among
        them) and write their weights; returns the classifiers trained. `n_samples`: samples in
        the training set when X holds only some (a join's bin), for ``matcher_C_scale``. `W`: the
        label weights of Y's entries, rows as X's (None: all 1; :func:`train_unit`).

        Heavy units (``params.heavy_unit_memory``) take the executor's heavy-unit lock: one trains
        at a time per executor. A heavy unit whose lock is taken waits until the bin's other units
        are trained, so the task keeps its core busy meanwhile. The weights do not depend on the
        order (each unit is trained alone); only their order in the part file does.

        Memory: the task holds the mapped X / Y (shared), one unit's rows in float64 plus
        liblinear's copy of them (~40 bytes per nonzero) and the row ids of its waiting heavy
        units (8 bytes per row each).
        """
        built, under = self._trees()
        schemas = {f"weights_{t}": WEIGHTS_ARROW for t in range(len(built))}
        if self.slots is not None:  # resolved here, once per task
            self.limit = heavy_limit(self.params, memory_available(), self.slots)
            self.slots = None
        limit = self.limit
        before = self.trained
        with PartWriters(self.out, schemas, dictionary=False) as writers:
            writers.name(f"part-{b:05d}.parquet")
            waiting = []
            for t, node in self.units_by_bin.get(b, []):
                active = unit_rows(under[t], X, Y, node)
                if limit is not None and unit_memory(X, active) > limit:
                    with executor_lock(HEAVY_UNIT_LOCK, wait=False) as held:
                        if held:
                            self._train_one(
                                writers, built, under, t, node, X, Y, U, active, n_samples, W
                            )
                            continue
                    waiting.append((t, node, active))
                    continue
                self._train_one(writers, built, under, t, node, X, Y, U, active, n_samples, W)
            if waiting:
                log.debug(
                    "bin %d: %d heavy units waited for the executor's heavy-unit lock",
                    b,
                    len(waiting),
                )
            for t, node, active in waiting:
                with executor_lock(HEAVY_UNIT_LOCK):
                    self._train_one(writers, built, under, t, node, X, Y, U, active, n_samples, W)
        return self.trained - before

    def _train_one(
        self,
        writers: PartWriters,
        built: list,
        under: list,
        t: int,
        node: int,
        X: sp.csr_matrix,
        Y: sp.csc_matrix,
        U: Optional[sp.csc_matrix],
        active: np.ndarray,
        n_samples: Optional[int],
        W: Optional[sp.csc_matrix] = None,
    ) -> None:
        rows = train_unit(
            built[t], under[t], X, Y, node, self.params, U, active=active, n_samples=n_samples, W=W
        )
        check_weights(rows, f"train (tree {t}): node")
        self.trained += len(rows)
        if rows:
            writers.write(f"weights_{t}", weights_batch(rows))

    def rows_of_bin(self, b: int, ids: np.ndarray, Y: sp.csc_matrix) -> np.ndarray:
        """Global rows bin `b`'s units train on: every row when it holds a root, else the samples
        positive under its nodes."""
        units = self.units_by_bin.get(b, [])
        if any(node == 0 for _, node in units):
            return np.arange(len(ids))
        under = self._trees()[1]
        labels = [under[t][node] for t, node in units]
        if not labels:
            return np.zeros(0, dtype=np.int64)
        return rows_with(Y, np.unique(np.concatenate(labels)).astype(np.int64))


def bin_label_tables(
    dataset: str,
    n_labels: int,
    groups: Optional[str],
    weighted: bool,
    ids: np.ndarray,
    Y: sp.csc_matrix,
    rows: np.ndarray,
) -> tuple[Optional[sp.csc_matrix], Optional[sp.csc_matrix]]:
    """(U, W) of a join bin: the unassigned group labels (with `groups`) and the label weights
    (when `weighted`) of the dataset's rows `rows` (the global rows
    :func:`eagle_spark.classifiers.joined.local_rows` returns), as CSC with sorted indices, or
    None each. They come from the executor cache (:func:`load_unassigned`,
    :func:`load_label_weights`); the bin's copies hold ~12 bytes per entry of its rows."""
    U = W = None
    if groups is not None:
        U = load_unassigned(dataset, groups, ids, Y)[rows, :].tocsc()
        U.sort_indices()
    if weighted:
        W = load_label_weights(dataset, n_labels)[rows, :].tocsc()
        W.sort_indices()
    return U, W


HEAVY_UNIT_LOCK = "tree-heavy-unit"
"""Name of the executor lock a heavy training unit holds (:func:`executor_lock`)."""


UNIT_BYTES_PER_NONZERO = 40
"""Estimated working memory of a training unit per nonzero of its rows, bytes: the rows' float64
copy (12: value and int32 column) and liblinear's (16 per feature node), plus the float32 slice
they are made from (8) while the copy is built. Measured peak RSS increase per nonzero on the
largest units of synthetic Wiki-325K at scale 0.1: 36.1-40.0."""


def unit_rows(under: list, X: sp.csr_matrix, Y: sp.csc_matrix, node: int) -> np.ndarray:
    """Ascending rows of X a unit trains on: every row for the root (node 0), else the samples
    positive for any label under `node` (``under``: labels_under() of the tree)."""
    return np.arange(X.shape[0]) if node == 0 else rows_with(Y, under[node])


HEAVY_AUTO_SHARE = 0.5
"""Share of the memory available on an executor's machine that ``heavy_unit_memory: auto``
lets the running units' estimated working memory take, one slot's part each; the rest is for what
the estimate leaves out (each worker's ~0.2 GB of imports, the part files being written, the
JVM's growth) and for the page cache holding the executor state."""


def memory_available() -> int:
    """Bytes this machine can give new work now (psutil's ``virtual_memory().available``: on Linux
    the kernel's ``MemAvailable``, free memory plus what it can reclaim, the page cache mostly)."""
    import psutil

    return int(psutil.virtual_memory().available)


def task_slots(spark: SparkSession, cpus: Optional[int] = None) -> int:
    """Task slots of one executor (>= 1), for ``heavy_unit_memory: auto``.

    Local mode: ``defaultParallelism`` (local[N]: N). A cluster: ``spark.executor.cores`` /
    ``spark.task.cpus`` when the cores are set, else the smaller of `cpus` (an executor's CPU count,
    as a task saw it; a standalone executor takes all its worker's cores) and defaultParallelism.
    Several executors on one machine are not seen as one: set ``heavy_unit_memory`` then.
    """
    parallel = default_parallelism(spark)
    if is_local(spark):
        return parallel
    task_cpus = max(1, int(spark.conf.get("spark.task.cpus", "1") or 1))
    cores = spark.conf.get("spark.executor.cores", None)
    if cores:
        return max(1, int(cores) // task_cpus)
    return max(1, min(parallel, (cpus or parallel) // task_cpus))


def heavy_limit(
    params: TreeSettings, available: Optional[int] = None, slots: int = 1
) -> Optional[float]:
    """The heavy-unit bound in bytes, or None for no bound.

    ``params.heavy_unit_memory``: a Spark size (that many bytes), null (None), or ``auto``:
    :data:`HEAVY_AUTO_SHARE` x `available` / `slots` (bytes available on the executor's machine,
    :func:`memory_available`, shared by its task slots); auto with `available` unknown (None or 0)
    gives no bound.

    Raises:
        SettingsError: a malformed size (the settings reject it first).
    """
    size = params.heavy_unit_memory
    if size is None:
        return None
    if size == "auto":
        return HEAVY_AUTO_SHARE * available / max(1, slots) if available else None
    return memory_mib(size, "tree.heavy_unit_memory") * 2**20


def rows_nonzeros(X: sp.csr_matrix, active: np.ndarray) -> int:
    """Nonzeros of rows `active` of CSR X; O(len(active))."""
    return int((X.indptr[active + 1] - X.indptr[active]).sum())


def unit_memory(X: sp.csr_matrix, active: np.ndarray) -> int:
    """Estimated working memory, bytes, of training a unit on rows `active` of CSR X
    (:data:`UNIT_BYTES_PER_NONZERO` per nonzero of those rows); O(len(active))."""
    return UNIT_BYTES_PER_NONZERO * rows_nonzeros(X, active)


def train_unit(
    tree: Tree,
    under: list,
    X: sp.csr_matrix,
    Y: sp.csc_matrix,
    node: int,
    params: TreeSettings,
    U: Optional[sp.csc_matrix] = None,
    active: Optional[np.ndarray] = None,
    n_samples: Optional[int] = None,
    W: Optional[sp.csc_matrix] = None,
) -> list:
    """Train the classifiers of `node`'s children on the samples positive under `node`.

    The active samples' features are renumbered to the columns they use before training (the
    weights of unused features are 0 anyway), so a classifier costs O(its data), not O(n_features)
    (otherwise each one would touch dense vectors of 1.6M features at Wiki-325K scale).

    Args:
        U: (n_samples, n_labels) CSC, the unassigned group labels of each sample
            (:func:`eagle_spark.classifiers.base.load_unassigned`); when given, the ranker of label
            k (a child that is a label) does not train on the active samples with U[i, k], unless
            they are positives. None: every active sample is used.
        active: :func:`unit_rows` of the unit when the caller has them (None: computed here).
        n_samples: samples in the training set, for ``params.matcher_C_scale`` (None: X's rows,
            right when X holds every sample; a join's bin holds fewer).
        W: (n_samples, n_labels) CSC float32, the weight of each entry of Y (weighted assignment,
            :func:`eagle_spark.classifiers.base.load_label_weights`; None: 1). A child's positive
            then weighs the largest weight of its labels under the child, and every classifier
            trains on the expected loss (:func:`eagle_spark.classifiers.linear.expected_loss_problem`).
    Returns:
        [(child, weight indices, weight values, bias)], one per child.
    """
    root = node == 0
    n_samples = X.shape[0] if n_samples is None else n_samples
    if active is None:
        active = unit_rows(under, X, Y, node)
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
            unknown = np.isin(active, U.indices[U.indptr[lab] : U.indptr[lab + 1]]) & ~y
            if unknown.any():
                Xc, y = Xa[~unknown], y[~unknown]
        C, max_iter = params.C, params.max_iter  # a ranker's (child is a label)
        if child < tree.n_clusters:  # the matcher's
            C = params.C if params.matcher_C is None else params.matcher_C
            if params.matcher_C_scale == "samples" and len(
                active
            ):  # (no samples: nothing to weigh)
                C *= n_samples / len(active)
            max_iter = (
                params.max_iter if params.matcher_max_iter is None else params.matcher_max_iter
            )
        sw = None
        if W is not None:
            sw = positive_weights(W, active, np.asarray(labels, dtype=np.int64))
            sw = sw if Xc is Xa else sw[~unknown]
        Xc, y, sw = expected_loss_problem(Xc, y, sw)
        w_idx, w_val, bias = train_binary(
            Xc,
            y,
            params.loss,
            C,
            params.threshold,
            tol=params.tol,
            max_iter=max_iter,
            seed=params.seed,
            sample_weight=sw,
        )
        rows.append((child, cols[w_idx].astype(np.int32), w_val, bias))
    return rows


def positive_weights(W: sp.csc_matrix, active: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(len(active),) float64: for each active row (ascending global rows) the largest weight W
    holds for any of `labels` (0 where it holds none, i.e. the row is not a positive of the child).
    Reads only the entries of `labels`' columns: O(their nonzeros), whatever the number of rows."""
    out = np.zeros(len(active))
    starts, ends = W.indptr[labels], W.indptr[labels + 1]
    lengths = ends - starts
    if lengths.sum() == 0 or len(active) == 0:
        return out
    take = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
    rows, vals = W.indices[take], W.data[take].astype(np.float64)
    at = np.searchsorted(active, rows)
    hit = (at < len(active)) & (active[np.minimum(at, len(active) - 1)] == rows)
    np.maximum.at(out, at[hit], vals[hit])
    return out
