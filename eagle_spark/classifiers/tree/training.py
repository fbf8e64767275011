"""Training the label tree's matcher and ranker classifiers: one unit per internal node, dealt
into Spark tasks, each trained from the executor-side X / Y. See :mod:`eagle_spark.classifiers.tree`."""

from __future__ import annotations

import logging
import os
import posixpath
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.classic import default_parallelism, is_local
from eagle_spark.classifiers.base import (
    WEIGHTS_ARROW,
    label_weights_in,
    load_label_weights,
    load_unassigned,
    load_xy,
    training_set,
    unassigned_groups,
    write_metadata,
)
from eagle_spark.classifiers.joined import training_access
from eagle_spark.classifiers.labels import labels_present, write_label_map
from eagle_spark.classifiers.linear import check_weights, expected_loss_problem, train_binary
from eagle_spark.classifiers.ova import weights_batch
from eagle_spark.classifiers.tree.indexer import index_trees
from eagle_spark.classifiers.tree.structure import (
    TREE,
    TREE_ARROW,
    Tree,
    compact_columns,
    deal,
    positives_of,
    rows_with,
)
from eagle_spark.evaluation.metrics import label_counts
from eagle_spark.executor_state import executor_lock, forget
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate
from eagle_spark.io.parts import PartWriter, PartWriters
from eagle_spark.io.tables import read_table
from eagle_spark.progress import job_step, step
from eagle_spark.settings import TreeSettings, memory_mib
from eagle_spark.tasks import tasks_for_work

log = logging.getLogger(__name__)


def _train_units_task(
    dataset: str,
    out: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    trees: list,
    units_by_bin: dict,
    groups: Optional[str] = None,
    limit: Optional[float] = None,
    weighted: bool = False,
):
    """mapInArrow: bin ids -> weights part files of every tree (one classifier per scored element),
    from the executor cache of X and Y (``x_access=cached``).

    `trees` holds (parent array, n_clusters) per tree; a unit is (tree index, cluster node).
    `limit`: the heavy-unit bound in bytes the driver resolved (:func:`heavy_limit`; None: none).
    `weighted`: Y has label weights (:func:`eagle_spark.classifiers.base.load_label_weights`).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        forget("reps")  # the indexer's label representations are not needed any more
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        U = load_unassigned(dataset, groups, ids, Y) if groups is not None else None
        W = load_label_weights(dataset, n_labels) if weighted else None
        trainer = _BinTrainer(out, n_labels, params, trees, units_by_bin, limit)
        for batch in batches:
            for b in np.asarray(batch.column(0), dtype=np.int64):
                trainer.train(int(b), X, Y, U, W=W)
        yield pa.RecordBatch.from_pydict(
            {"trained": [trainer.trained]},
            schema=pa.schema([pa.field("trained", pa.int64(), False)]),
        )

    return run


class _BinTrainer:
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


def _train_joined(
    spark: SparkSession,
    dataset: str,
    out: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    trees: list,
    units_by_bin: dict,
    groups: Optional[str],
    limit: Optional[float],
    weighted: bool = False,
) -> None:
    """The join path of training (``x_access=joined``): each bin's rows arrive through a join
    (:mod:`eagle_spark.classifiers.joined`); a task holds its bin's rows (~8 bytes per nonzero)
    and the executor's cache of Y (and U with ``unassigned=ignore``), never all of X unless its
    bin holds a root. `limit`: the heavy-unit bound in bytes (None: none); with
    ``heavy_unit_memory: auto`` each task resolves it on its own machine instead (no sizing stage
    runs on this path)."""
    from eagle_spark.classifiers.joined import check_delivered, joined_stage, load_y, local_rows

    slots = task_slots(spark) if params.heavy_unit_memory == "auto" else None
    trainer = _BinTrainer(out, n_labels, params, trees, units_by_bin, limit, slots)
    bins = max(units_by_bin) + 1 if units_by_bin else 1

    def train_bin(b: int, table: pa.Table) -> pa.Table:
        forget("reps")
        ids, Y = load_y(dataset, n_labels)
        rows, Xb, Yb = local_rows(table, ids, Y, n_features, params.normalize, "train (tree)")
        check_delivered(dataset, n_labels, bins, trainer.rows_of_bin, b, rows, "train (tree)")
        U, W = bin_label_tables(dataset, n_labels, groups, weighted, ids, Y, rows)
        return pa.table(
            {"trained": pa.array([trainer.train(b, Xb, Yb, U, len(ids), W)], pa.int64())}
        )

    joined_stage(spark, dataset, n_labels, bins, trainer.rows_of_bin, train_bin, "trained long")


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
    task_cpus = max(1, int(spark.conf.get("spark.task.cpus", "1")))
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


def nonzeros_under(under: list, nodes: list, Y: sp.csc_matrix, row_nnz: np.ndarray) -> np.ndarray:
    """Nonzeros of X in each unit's rows: ``rows_nonzeros(X, unit_rows(under, X, Y, v))`` for v in
    `nodes`, without sorting. Each distinct row among a node's positives counts once, at the
    position a scatter into a scratch array left in it (whichever of its positions that is), so a
    node costs O(the positives of its labels) and the scratch is one (n_samples,) int64 array.

    Args:
        under: labels_under() of the tree. nodes: cluster node ids (0: every row).
        Y: (n_samples, n_labels) CSC. row_nnz: (n_samples,) nonzeros of each row of X.
    Returns:
        (len(nodes),) int64.
    """
    last = np.empty(Y.shape[0], dtype=np.int64)  # every entry read below is written first
    out = np.empty(len(nodes), dtype=np.int64)
    for i, v in enumerate(nodes):
        if v == 0:
            out[i] = int(row_nnz.sum())
            continue
        rows = positives_of(Y, under[v])
        at = np.arange(len(rows))
        last[rows] = at
        out[i] = int(row_nnz[rows[last[rows] == at]].sum())
    return out


def unit_memory(X: sp.csr_matrix, active: np.ndarray) -> int:
    """Estimated working memory, bytes, of training a unit on rows `active` of CSR X
    (:data:`UNIT_BYTES_PER_NONZERO` per nonzero of those rows); O(len(active))."""
    return UNIT_BYTES_PER_NONZERO * rows_nonzeros(X, active)


def _unit_sizes_task(
    dataset: str, n_features: int, n_labels: int, normalize: bool, trees: list, nodes_by_tree: dict
):
    """mapInArrow: tree ids -> (tree, node, nonzeros of the unit's rows, bytes available on the
    task's machine, its CPUs) of every unit of those trees, from the executor cache of X and Y
    (the one training maps next). A task holds one tree's labels_under() and one unit's row ids at
    a time: O(n_labels x depth + n_samples) (:func:`nonzeros_under`)."""
    schema = pa.schema(
        [
            pa.field("tree", pa.int32(), False),
            pa.field("node", pa.int32(), False),
            pa.field("nonzeros", pa.int64(), False),
            pa.field("available", pa.int64(), False),
            pa.field("cpus", pa.int32(), False),
        ]
    )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _, X, Y = load_xy(dataset, n_features, n_labels, normalize)
        row_nnz = np.diff(X.indptr)
        for batch in batches:
            for t in np.asarray(batch.column(0), dtype=np.int64):
                parent, n_clusters = trees[t]
                under = Tree(parent, np.zeros(len(parent)), n_clusters, n_labels).labels_under()
                nodes = nodes_by_tree.get(int(t), [])
                sizes = nonzeros_under(under, nodes, Y, row_nnz)
                n = len(nodes)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.full(n, t, np.int32)),
                        pa.array(np.asarray(nodes, np.int32)),
                        pa.array(np.asarray(sizes, np.int64)),
                        pa.array(np.full(n, memory_available(), np.int64)),
                        pa.array(np.full(n, os.cpu_count() or 1, np.int32)),
                    ],
                    schema=schema,
                )

    return run, schema


def unit_nonzeros(
    spark: SparkSession,
    dataset: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    trees: list,
    units: list,
) -> tuple[np.ndarray, int, int]:
    """Nonzeros of X in each unit's rows (:func:`nonzeros_under`), one Spark task per
    tree on the executor cache of X and Y (cached training rows only), and what the executors'
    machines have for ``heavy_unit_memory: auto``.

    Args:
        trees: (parent array, n_clusters) per tree. units: [(tree, node)].
    Returns:
        ((len(units),) int64 aligned with `units`; the fewest bytes available
        (:func:`memory_available`) and the fewest CPUs a task saw, 0 when no unit was sized).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    nodes_by_tree: dict[int, list] = {}
    for t, node in units:
        nodes_by_tree.setdefault(t, []).append(node)
    run, schema = _unit_sizes_task(
        dataset, n_features, n_labels, params.normalize, trees, nodes_by_tree
    )
    n = max(nodes_by_tree) + 1 if nodes_by_tree else 1  # task t: tree t
    got = spark.range(0, n, numPartitions=n).mapInArrow(run, from_arrow_schema(schema)).collect()
    size = {(r["tree"], r["node"]): r["nonzeros"] for r in got}
    available = min((r["available"] for r in got), default=0)
    cpus = min((r["cpus"] for r in got), default=0)
    return np.array([size[u] for u in units], dtype=np.int64), int(available), int(cpus)


def place_units(work: np.ndarray, heavy: np.ndarray, bins: int, heavy_bins: int) -> list[list[int]]:
    """Indices of the units dealt into `bins` task bins, the heavy ones kept apart.

    With ``heavy_bins`` > 0 (the executors, when known) and heavy units present, the heavy units
    are dealt into bins 0 .. heavy_bins-1 only and the light ones into the others: Spark starts the
    first bins first, so each executor trains its heavy units one after another in one task (the
    lock then never makes a core wait) while its other cores train light units. With
    ``heavy_bins`` 0, or no heavy or no light unit, every unit is dealt over all the bins
    (:func:`deal`) and the executor lock orders the heavy ones. Each group is dealt by
    :func:`deal` (heaviest first), so a bin lists its heaviest units first.

    Args:
        work: (n_units,) estimated cost of each unit. heavy: (n_units,) bool.
        bins: the number of task bins (>= 1). heavy_bins: bins reserved for heavy units (>= 0).
    Returns:
        `bins` lists of unit indices.
    """
    work, heavy = np.asarray(work, dtype=np.float64), np.asarray(heavy, dtype=bool)
    split = min(heavy_bins, bins - 1)
    if split < 1 or not heavy.any() or heavy.all():
        return deal(work, bins)
    out = []
    for idx, n in ((np.flatnonzero(heavy), split), (np.flatnonzero(~heavy), bins - split)):
        out.extend([[int(idx[i]) for i in part] for part in deal(work[idx], n)])
    return out


def executors_known(spark: SparkSession) -> int:
    """Executors of the session for :func:`place_units`: 1 with a local master, else
    ``spark.executor.instances`` when set, else 0 (unknown)."""
    if is_local(spark):
        return 1
    n = spark.conf.get("spark.executor.instances", None)
    return int(n) if n else 0


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


def train_tree(
    spark: SparkSession,
    dataset: str,
    model_path: str,
    params: TreeSettings,
    label_repr: Optional[str] = None,
    overwrite: bool = False,
) -> dict:
    """Train the label tree and save the model folder (metadata.json, data/tree, data/weights).

    Its Spark jobs are named by step under the caller's job description (``job_step``: training
    set, indexer, rankers' cost, unit sizes, units), so Spark's UI and event log tell them apart.

    Args:
        dataset: dataset with X and Y, on storage every executor reaches.
        model_path: model folder (atomic).
        params: the ``tree`` section (loss, C, threshold, normalize, tasks, max_leaf, n_trees,
            top_levels, seed, unassigned: with ``ignore`` the ranker of label k leaves out the
            members of groups labelled k that EAGLE did not assign k; x_access / cache_budget:
            the units' rows from the executor cache or through a join, same model either way).
            When Y has ``label_weights`` (weighted assignment) the matchers and rankers train on
            the expected loss (:func:`train_unit`); the tree is indexed on Y as it is.
        label_repr: folder with ``label_emb`` (e.g. the output of embed) to cluster instead of PIFA.
    Returns:
        The model metadata (n_clusters, depth, x_access, ranker_C: the rankers' cost, with
        ``ranker_C_choice`` held_out also ranker_C_held_out: the figures it was chosen by,
        :mod:`eagle_spark.classifiers.tree.ranker_cost`, ...).
    Raises:
        BadInputError: no samples or no Y (:func:`training_set`), label_repr lacks label_emb, or
            label weights that do not match Y's labels.
        Spark's PythonException (from a ValueError) on the joined path: a sample of Y has no row in
            X (named by sample_id); nothing is written.
    """
    check_separate(model_path, [dataset, label_repr])
    with job_step(spark, "training set"):  # X stays off the driver: tasks index and train
        n_features, n_labels = training_set(spark, dataset)
        groups = unassigned_groups(spark, dataset, params.unassigned, "tree")
        weighted = label_weights_in(spark, dataset)
    with atomic_output(spark, model_path, overwrite) as tmp:
        with labels_present(
            spark, dataset, n_labels, posixpath.join(tmp, "_labels"), "tree", groups, label_repr
        ) as space:
            with job_step(spark, "training set"):
                access, _ = training_access(spark, space.dataset, params, "tree")
                label_freq, _ = label_counts(read_table(spark, space.dataset, S.Y), space.n_labels)
            meta = _train_tree_into(
                spark,
                space.dataset,
                tmp,
                params,
                space.label_repr,
                n_features,
                space.n_labels,
                space.groups,
                access,
                label_freq,
                weighted,
                recorded={
                    "n_labels": n_labels,
                    "source": {"dataset": dataset},
                    "label_repr": label_repr or "pifa",
                    **space.metadata(n_labels),
                },
            )
            write_label_map(spark, tmp, space)
    log.info(
        "tree: %d labels, %d trees, depth %d", n_labels, len(meta["n_clusters"]), meta["depth"]
    )
    return meta


def _train_tree_into(
    spark: SparkSession,
    dataset: str,
    tmp: str,
    params: TreeSettings,
    label_repr: Optional[str],
    n_features: int,
    n_labels: int,
    groups: Optional[str],
    access: str,
    label_freq: np.ndarray,
    weighted: bool = False,
    recorded: Optional[dict] = None,
) -> dict:
    """Index, train and write the model into the atomic output's temporary folder `tmp`;
    `recorded` overrides the metadata's n_labels, source and label_repr (the caller's, when the fit
    ran on a compact copy, :mod:`eagle_spark.classifiers.labels`) and adds its keys."""
    with job_step(spark, "indexer"):
        pifa_tmp = None
        if (
            access == "joined" and label_repr is None
        ):  # PIFA by a join, in a scratch folder of the output
            from eagle_spark.classifiers.joined import joined_pifa

            pifa_tmp = joined_pifa(
                spark,
                dataset,
                posixpath.join(tmp, "_pifa"),
                n_features,
                n_labels,
                params.normalize,
                params.tasks,
            )
        trees = index_trees(
            spark,
            dataset,
            n_features,
            n_labels,
            params,
            pifa_tmp or label_repr,
            label_freq,
            y_only=access == "joined",
        )
    if pifa_tmp is not None:
        FileSystem(spark).delete(pifa_tmp)
    given, chosen = params, {"ranker_C": params.C}
    if params.ranker_C_choice == "held_out":
        from eagle_spark.classifiers.tree.ranker_cost import choose_ranker_cost, with_ranker_cost

        with job_step(spark, "rankers' cost"):
            cost, report = choose_ranker_cost(
                spark,
                dataset,
                n_features,
                n_labels,
                params,
                trees,
                label_freq,
                groups,
                weighted,
                access,
            )
        step(
            "rankers' cost %g (held-out hits at 1/3/5 per cost: %s; %d leaves, %d held-out samples)",
            cost,
            report["held_out_hits"],
            report["leaves"],
            report.get("held_out", 0),
        )
        chosen.update(ranker_C=cost, ranker_C_held_out=report)
        params = with_ranker_cost(params, cost)
    units, rows_work, children = [], [], []
    for t, tree in enumerate(trees):
        under = tree.labels_under()
        for node in range(tree.n_clusters):
            if len(tree.children_of(node)):
                units.append((t, node))
                rows_work.append(label_freq[under[node]].sum())
                children.append(len(tree.children_of(node)))
    task_trees = [(tr.parent, tr.n_clusters) for tr in trees]
    heavy = np.zeros(len(units), dtype=bool)
    auto, how = params.heavy_unit_memory == "auto", ""
    if access == "cached":  # the units' sizes from the executor cache: a better work estimate
        with job_step(spark, "unit sizes"):
            nonzeros, available, cpus = unit_nonzeros(
                spark, dataset, n_features, n_labels, params, task_trees, units
            )
        work = nonzeros * np.asarray(children, dtype=np.float64)  # ~ liblinear's work per pass
        slots = task_slots(spark, cpus)
        limit = heavy_limit(params, available, slots)
        if limit is not None:
            heavy = UNIT_BYTES_PER_NONZERO * nonzeros > limit
        if auto:
            how = f" (auto: {HEAVY_AUTO_SHARE:g} x {available / 2**30:.1f} GiB available / {slots} slots)"
    else:  # joined: positives under the node stand for its rows; auto is resolved by each task
        work = np.asarray(rows_work, dtype=np.float64) * np.asarray(children)
        limit = None if auto else heavy_limit(params)
    bins = tasks_for_work(  # joined: a bin's rows are its task's memory, so `tasks` bins
        params.tasks,
        params.min_task_work if access == "cached" else 0.0,
        len(units),
        float(work.sum()),
        default_parallelism(spark),
    )
    bound = (
        "resolved by each task"
        if auto and access == "joined"
        else "none"
        if limit is None
        else f"{limit / 2**20:,.0f} MiB{how}"
    )
    step(
        "%d trees indexed; training %d units (nodes with children, %d heavy; heavy-unit bound %s) in %d tasks",
        len(trees),
        len(units),
        int(heavy.sum()),
        bound,
        bins,
    )
    units_by_bin = {
        b: [units[i] for i in idx]
        for b, idx in enumerate(place_units(work, heavy, bins, executors_known(spark)))
    }
    with job_step(spark, "units"):
        out = posixpath.join(tmp, "data")
        unit_args = (n_features, n_labels, params, task_trees, units_by_bin, groups, limit)
        if access == "joined":
            _train_joined(spark, dataset, out, *unit_args, weighted)
        else:
            task = _train_units_task(dataset, out, *unit_args, weighted)
            spark.range(0, bins, numPartitions=bins).mapInArrow(task, "trained long").collect()
    for t, tree in enumerate(trees):
        writer = PartWriter(posixpath.join(tmp, f"{TREE}_{t}"), "part-00000.parquet", TREE_ARROW)
        n_el = len(tree.parent)
        writer.write(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(np.arange(n_el, dtype=np.int32)),
                    pa.array(tree.parent.astype(np.int32)),
                    pa.array(tree.level.astype(np.int32)),
                    pa.array(
                        np.where(
                            np.arange(n_el) >= tree.n_clusters,
                            np.arange(n_el) - tree.n_clusters,
                            -1,
                        ).astype(np.int32)
                    ),
                ],
                schema=TREE_ARROW,
            )
        )
        writer.close()
    extra = {
        "label_repr": label_repr or "pifa",
        "source": {"dataset": dataset},
        **(recorded or {}),
    }
    return write_metadata(
        spark,
        tmp,
        "TreeModel",
        given.to_dict(),
        n_features,
        int(extra.pop("n_labels", n_labels)),
        n_trees=len(trees),
        n_clusters=[tr.n_clusters for tr in trees],
        depth=int(max(tr.level.max() for tr in trees)),
        x_access=access,
        label_weights=weighted,
        **extra,
        **chosen,
    )
