"""Training the label tree's matcher and ranker classifiers: one unit per internal node, dealt
into Spark tasks, each trained from the executor-side X / Y. See :mod:`eagle_spark.classifiers.tree`."""

from __future__ import annotations

import logging
import os
import posixpath
from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.classic import default_parallelism, is_local
from eagle_spark.classifiers.base import (
    label_weights_in,
    load_label_weights,
    load_unassigned,
    training_set,
    unassigned_groups,
    write_metadata,
)
from eagle_spark.classifiers.joined import training_access
from eagle_spark.classifiers.labels import labels_present, write_label_map
from eagle_spark.classifiers.tree.indexer import index_trees, joined_pifa
from eagle_spark.classifiers.tree.structure import (
    TREE,
    TREE_ARROW,
    Tree,
    deal,
    positives_of,
)
from eagle_spark.classifiers.tree.units import (
    HEAVY_AUTO_SHARE,
    UNIT_BYTES_PER_NONZERO,
    BinTrainer,
    bin_label_tables,
    heavy_limit,
    memory_available,
    task_slots,
)
from eagle_spark.evaluation.metrics import label_counts
from eagle_spark.executor_state import forget
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate
from eagle_spark.io.parts import PartWriter, load_xy
from eagle_spark.io.tables import read_table
from eagle_spark.progress import job_step, step
from eagle_spark.settings import TreeSettings
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
    `limit`: the heavy-unit bound in bytes the driver resolved (:func:`~eagle_spark.classifiers.tree.units.heavy_limit`; None: none).
    `weighted`: Y has label weights (:func:`eagle_spark.classifiers.base.load_label_weights`).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        forget("reps")  # the indexer's label representations are not needed any more
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        U = load_unassigned(dataset, groups, ids, Y) if groups is not None else None
        W = load_label_weights(dataset, n_labels) if weighted else None
        trainer = BinTrainer(out, n_labels, params, trees, units_by_bin, limit)
        for batch in batches:
            for b in np.asarray(batch.column(0), dtype=np.int64):
                trainer.train(int(b), X, Y, U, W=W)
        yield pa.RecordBatch.from_pydict(
            {"trained": [trainer.trained]},
            schema=pa.schema([pa.field("trained", pa.int64(), False)]),
        )

    return run


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
    trainer = BinTrainer(out, n_labels, params, trees, units_by_bin, limit, slots)
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
            the expected loss (:func:`~eagle_spark.classifiers.tree.units.train_unit`); the tree is indexed on Y as it is.
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
    given = params
    chosen: dict[str, Any] = {"ranker_C": params.C}
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
