"""Distributed one-vs-all: one binary linear classifier per label, labels in blocks per Spark task.

Training: labels 0..L-1 are cut into ``tasks`` contiguous blocks; each task (``spark.range`` +
``mapInArrow``) maps X and Y from the executor state (:func:`eagle_spark.io.parts.load_xy`,
once per executor; or, with ``x_access=joined``, receives its block's rows through a join,
:mod:`eagle_spark.classifiers.joined`), trains its labels one after the other with
:func:`eagle_spark.classifiers.linear.train_binary` (all samples as negatives, or a seeded sample
of them with ``negative_fraction`` < 1) and writes the pruned weights straight to a Parquet part
file. Never one Spark job per label.

Prediction: ``mapInArrow`` over the rows of X; each task loads the weights once (a d x L CSC
matrix), scores a batch with one sparse product and keeps the top-k per row.

Practical size: training costs L liblinear runs over all n samples (n x L work: Delicious 983
labels in seconds, EurLex-4K in minutes; ``negative_fraction`` < 1 shrinks it, as the refinement's
scorer does on large data); prediction holds a batch x L dense score block, so ``batch_rows`` x L
floats must fit in a worker. Beyond ~50k labels use the label tree.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Iterator, Optional, cast

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S
from eagle_spark.classic import default_parallelism
from eagle_spark.classifiers.base import (
    WEIGHTS,
    WEIGHTS_ARROW,
    label_weights_in,
    load_label_weights,
    load_unassigned,
    read_metadata,
    training_set,
    unassigned_groups,
    write_metadata,
)
from eagle_spark.classifiers.joined import ProportionalBlocks, training_access
from eagle_spark.classifiers.labels import (
    LabelSpace,
    labels_present,
    model_label_ids,
    trained_labels,
    write_label_map,
)
from eagle_spark.classifiers.linear import check_weights, expected_loss_rows, train_binary
from eagle_spark.errors import BadInputError, check_finite_scores
from eagle_spark.executor_state import shared_state, sparse_arrays, sparse_from
from eagle_spark.io.fs import atomic_output, check_separate
from eagle_spark.io.parts import PartWriters, folder_version, load_xy, read_sparse_rows
from eagle_spark.settings import OVASettings
from eagle_spark.sparse import compact_columns, csr_from_arrow, l2_normalize_rows
from eagle_spark.tasks import tasks_for_work

log = logging.getLogger(__name__)

_SUMMARY = pa.schema(
    [
        pa.field("labels", pa.int64(), nullable=False),
        pa.field("no_positive", pa.int64(), nullable=False),
        pa.field("weights", pa.int64(), nullable=False),
    ]
)


def _train_task(
    dataset: str,
    out: str,
    n_features: int,
    n_labels: int,
    params: OVASettings,
    blocks: int,
    groups: Optional[str],
    weighted: bool,
    within: bool = False,
):
    """mapInArrow: block ids -> weights part files, from the executor cache of X and Y (and of the
    label weights when `weighted`) (``x_access=cached``); `within`: as :func:`_train_block`."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        U = load_unassigned(dataset, groups, ids, Y) if groups is not None else None
        W = load_label_weights(dataset, n_labels) if weighted else None
        done = np.zeros(3, dtype=np.int64)
        for batch in batches:
            for block in np.asarray(batch.column(0), dtype=np.int64):
                done += _train_block(
                    out, int(block), X, Y, U, None, len(ids), params, n_labels, blocks, W, within
                )
        yield pa.RecordBatch.from_pydict(
            {"labels": [int(done[0])], "no_positive": [int(done[1])], "weights": [int(done[2])]},
            schema=_SUMMARY,
        )

    return run


def drawn_negatives(seed: int, label: int, n: int, fraction: float) -> np.ndarray:
    """The rows 0..n-1 drawn as label `label`'s negatives: each row independently with
    probability `fraction` (a Bernoulli process), drawn as its geometric gaps from
    ``numpy.random.default_rng([seed, label])`` in chunks of ``max(16, 1.25 x n x fraction)``
    gaps, so the work is the number drawn, not n.

    Args:
        seed: ``ova.seed``; label: the label's index in the trained label space.
        n: the rows of the whole training set; fraction: ``ova.negative_fraction`` in [0, 1].
    Returns:
        (m,) int64, sorted and distinct; all rows at `fraction` 1, none at 0.
    Source: this project (negative sampling of one-vs-all, as Parabel / DiSMEC subsample).
    """
    if fraction >= 1.0:
        return np.arange(n, dtype=np.int64)
    if fraction <= 0.0 or n == 0:
        return np.zeros(0, np.int64)
    rng = np.random.default_rng([seed, label])
    chunk = max(16, int(1.25 * n * fraction))
    parts, last = [], -1
    while last < n:
        rows = last + np.cumsum(rng.geometric(fraction, chunk))
        parts.append(rows[rows < n])
        last = int(rows[-1])
    return np.concatenate(parts)


def _find(ordered: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where each of `values` would sit in the sorted array `ordered`, whether it is there)."""
    at = np.searchsorted(ordered, values)
    hit = at < len(ordered)
    hit[hit] = ordered[at[hit]] == values[hit]
    return at, hit


def _local(rows: Optional[np.ndarray], drawn: np.ndarray) -> np.ndarray:
    """`drawn` global rows as positions in the rows at hand (`rows` sorted; None: all), those not
    at hand left out."""
    if rows is None:
        return drawn
    at, hit = _find(rows, drawn)
    return at[hit]


def _column(M: sp.csc_matrix, label: int) -> np.ndarray:
    """The rows of column `label` of a CSC matrix, sorted."""
    return np.sort(M.indices[M.indptr[label] : M.indptr[label + 1]])


def _train_block(
    out: str,
    block: int,
    X: sp.csr_matrix,
    Y: sp.csc_matrix,
    U: Optional[sp.csc_matrix],
    rows: Optional[np.ndarray],
    n_all: int,
    params: OVASettings,
    n_labels: int,
    blocks: int,
    W: Optional[sp.csc_matrix] = None,
    within: bool = False,
) -> np.ndarray:
    """Train the labels of `block` and write their weights to ``part-<block>.parquet``.

    X, Y, U, W: the rows at hand in sample_id order: all of them (`rows` None) or the global rows
    `rows` (sorted) of the whole data (the join path; they hold every row the block's labels train
    on, :func:`_rows_of_block`). W: the label weights of Y's entries (weighted assignment; None:
    all 1): a label's problem is then the expected loss
    (:func:`eagle_spark.classifiers.linear.expected_loss_problem`). The
    negatives drawn with ``negative_fraction`` < 1 are :func:`drawn_negatives` over the `n_all`
    samples of the whole data, so both give the same training sets in the same order. `within`:
    U holds the members of a label's groups that Y does not assign it; they stay among its
    negatives whatever is drawn (``unassigned`` plays no part). A label without a positive is the
    constant classifier (no weights, bias -1, as :func:`train_binary` gives it) without a fit.

    Work per label: with ``negative_fraction`` < 1, its positives, drawn negatives and group
    members (no pass over all the rows), fitted on the columns they use
    (:func:`eagle_spark.sparse.compact_columns`; the same weights, without liblinear's dense
    O(n_features) vector per fit); at 1, every row at hand.
    Returns [labels, labels without a positive, weights].
    """
    lo, hi = ProportionalBlocks(n_labels, blocks).labels(block)
    trained, no_pos, n_w = [], 0, 0
    n = X.shape[0]
    for label in range(lo, hi):
        positives = _column(Y, label)
        if len(positives) == 0:
            no_pos += 1
            trained.append((label, np.zeros(0, np.int32), np.zeros(0, np.float32), -1.0))
            continue
        members = _column(U, label) if U is not None else np.zeros(0, np.int64)
        if params.negative_fraction < 1.0:
            drawn = _local(
                rows, drawn_negatives(params.seed, label, n_all, params.negative_fraction)
            )
            # within: the label's unassigned group members are always negatives
            keep = np.unique(
                np.concatenate((positives, drawn, members) if within else (positives, drawn))
            )
        else:
            keep = np.arange(n)
        if not within and len(members):  # unassigned members: not negatives
            keep = np.setdiff1d(keep, members, assume_unique=True)
        yl = np.zeros(len(keep), dtype=bool)
        yl[np.searchsorted(keep, positives)] = True
        wl = None
        if W is not None:
            span = slice(W.indptr[label], W.indptr[label + 1])
            at, hit = _find(keep, W.indices[span])
            wl = np.zeros(len(keep))
            wl[at[hit]] = W.data[span][hit]
        soft, yl, sw = expected_loss_rows(yl, wl)  # soft positives' rows again, as negatives
        cols = None  # a subset of the rows: its used columns only (liblinear's w is dense)
        if len(keep) < n:
            cols, Xl = compact_columns(X[np.concatenate((keep, keep[soft]))], np.float64)
        else:
            Xl = X[np.concatenate((keep, soft))] if len(soft) else X
        w_idx, w_val, bias = train_binary(
            Xl,
            yl,
            params.loss,
            params.C,
            params.threshold,
            tol=params.tol,
            max_iter=params.max_iter,
            seed=params.seed,
            sample_weight=sw,
        )
        if cols is not None:
            w_idx = cols[w_idx].astype(np.int32)
        n_w += len(w_idx)
        trained.append((label, w_idx, w_val, bias))
    check_weights(trained, "train (one-vs-all): label")
    with PartWriters(out, {"weights": WEIGHTS_ARROW}, dictionary=False) as writers:
        writers.name(f"part-{block:05d}.parquet")
        if trained:
            writers.write("weights", weights_batch(trained))
    return np.array([hi - lo, no_pos, n_w], dtype=np.int64)


def _rows_of_block(
    params: OVASettings,
    n_labels: int,
    blocks: int,
    dataset: Optional[str] = None,
    within: Optional[str] = None,
) -> Any:
    """The join path's needs of one-vs-all: block b needs every row when ``negative_fraction`` is
    1, else its labels' positives and :func:`drawn_negatives`, and with `within` (the groups'
    dataset, :func:`train_ova`) the members of its labels' groups in `dataset` (a label without a
    positive needs no row: its classifier is constant)."""

    def rows_of_bin(b: int, ids: np.ndarray, Y: sp.csc_matrix) -> np.ndarray:
        lo, hi = ProportionalBlocks(n_labels, blocks).labels(b)
        if params.negative_fraction >= 1.0:
            return np.arange(len(ids))
        need = np.zeros(len(ids), dtype=bool)
        U = load_unassigned(dataset, within, ids, Y) if within and dataset else None
        for label in range(lo, hi):
            if Y.indptr[label + 1] == Y.indptr[label]:
                continue
            if U is not None:
                need[U.indices[U.indptr[label] : U.indptr[label + 1]]] = True
            need[drawn_negatives(params.seed, label, len(ids), params.negative_fraction)] = True
            need[Y.indices[Y.indptr[label] : Y.indptr[label + 1]]] = True
        return np.flatnonzero(need)

    return rows_of_bin


def _train_joined(
    spark: SparkSession,
    dataset: str,
    out: str,
    n_features: int,
    n_labels: int,
    params: OVASettings,
    blocks: int,
    groups: Optional[str],
    weighted: bool,
    within: bool = False,
) -> list:
    """The join path of training (``x_access=joined``): a block's rows arrive through a join
    (:mod:`eagle_spark.classifiers.joined`). A task holds its block's rows (~8 bytes per nonzero;
    all of X when every sample is a negative) and the executor's cache of Y."""
    from eagle_spark.classifiers.joined import check_delivered, joined_stage, load_y, local_rows

    rows_of_bin = _rows_of_block(params, n_labels, blocks, dataset, groups if within else None)

    def train_bin(b: int, table: pa.Table) -> pa.Table:
        ids, Y = load_y(dataset, n_labels)
        rows, Xb, Yb = local_rows(table, ids, Y, n_features, params.normalize, "train (one-vs-all)")
        check_delivered(dataset, n_labels, blocks, rows_of_bin, b, rows, "train (one-vs-all)")
        U = None
        if groups is not None:
            U = load_unassigned(dataset, groups, ids, Y)[rows, :].tocsc()
            U.sort_indices()
        W = None
        if weighted:
            W = load_label_weights(dataset, n_labels)[rows, :].tocsc()
            W.sort_indices()
        done = _train_block(out, b, Xb, Yb, U, rows, len(ids), params, n_labels, blocks, W, within)
        return pa.table(
            {"labels": [int(done[0])], "no_positive": [int(done[1])], "weights": [int(done[2])]},
            schema=_SUMMARY,
        )

    return joined_stage(
        spark,
        dataset,
        n_labels,
        blocks,
        rows_of_bin,
        train_bin,
        "labels long, no_positive long, weights long",
    )


def weights_batch(rows: list) -> pa.RecordBatch:
    """A record batch of the weights table from rows (label or node id, weight indices, weight
    values, bias)."""
    lengths = [len(r[1]) for r in rows]
    offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.int32()),
            pa.ListArray.from_arrays(
                offsets,
                pa.array(np.concatenate([r[1] for r in rows]).astype(np.int32)),
                type=S.ARROW_INT_LIST,
            ),
            pa.ListArray.from_arrays(
                offsets,
                pa.array(np.concatenate([r[2] for r in rows]).astype(np.float32)),
                type=S.ARROW_FLOAT_LIST,
            ),
            pa.array([r[3] for r in rows], pa.float32()),
        ],
        schema=WEIGHTS_ARROW,
    )


def train_ova(
    spark: SparkSession,
    dataset: str,
    model_path: str,
    params: OVASettings,
    overwrite: bool = False,
    within_groups: Optional[str] = None,
) -> dict:
    """Train one-vs-all on a dataset's X and Y and save the model folder.

    Args:
        spark: the active session.
        dataset: dataset with X and Y (e.g. the Y_filter dataset of ``assign``), on storage every
            executor reaches.
        model_path: model folder to write (atomic): metadata.json + data/weights (label_id, w_idx,
            w_val, bias).
        params: the ``ova`` settings section (loss, C, threshold, normalize, tasks,
            negative_fraction, seed, unassigned: with ``ignore`` a member of a group labelled k
            that EAGLE did not assign k is left out of k's problem; x_access / cache_budget: the
            blocks' rows from the executor cache or through a join, same model either way). When
            Y has ``label_weights`` (weighted assignment) every label trains on the expected loss
            (:func:`eagle_spark.classifiers.linear.expected_loss_problem`).
        overwrite: replace an existing model.
        within_groups: an aggregated dataset (Y1, Y2) whose groups hold `dataset`'s samples: the
            members of a label's groups that Y does not assign it are always among its negatives,
            however few other negatives ``negative_fraction`` draws (``unassigned`` is not used):
            the refinement's scorer (:mod:`eagle_spark.assignment.refine`), which must rank a
            group's members, draws the rest on large data. Not used (nor recorded) when
            ``negative_fraction`` is 1.
    Returns:
        The model metadata (with n_labels_without_positives, n_weights and x_access).
    Raises:
        BadInputError: the dataset has no samples or no Y; ``unassigned=ignore`` on an assignment
            whose source groups are gone; label weights that do not match Y's labels.
        Spark's PythonException (from a ValueError) on the joined path: a sample of Y has no row in
            X (named by sample_id); nothing is written.
    """
    check_separate(model_path, [dataset])
    n_features, n_labels = training_set(spark, dataset)
    if within_groups is not None and params.negative_fraction >= 1.0:
        within_groups = None  # every sample is a negative already: no need to build U
    groups = (
        within_groups
        if within_groups is not None
        else unassigned_groups(spark, dataset, params.unassigned, "ova")
    )
    within = within_groups is not None
    weighted = label_weights_in(spark, dataset)
    with (
        atomic_output(spark, model_path, overwrite) as tmp,
        labels_present(
            spark, dataset, n_labels, posixpath.join(tmp, "_labels"), "ova", groups
        ) as space,
    ):
        counts = _train_into(spark, space, tmp, n_features, params, weighted, within)
        counts["n_labels_without_positives"] += n_labels - space.n_labels  # the empty ones
        meta = write_metadata(
            spark,
            tmp,
            "OVAModel",
            params.to_dict(),
            n_features,
            n_labels,
            **counts,
            **space.metadata(n_labels),
            source={"dataset": dataset},
            label_weights=weighted,
            within_groups=within_groups,
        )
        write_label_map(spark, tmp, space)
    log.info("ova: %d labels, %d weights", n_labels, meta["n_weights"])
    return meta


def _train_into(
    spark: SparkSession,
    space: LabelSpace,
    tmp: str,
    n_features: int,
    params: OVASettings,
    weighted: bool,
    within: bool,
) -> dict:
    """Train every label of `space` into ``<tmp>/data``; returns the metadata's counts
    (n_labels_without_positives, n_weights, x_access)."""
    dataset, groups, n_labels = space.dataset, space.groups, space.n_labels
    access, x_nonzeros = training_access(
        spark, dataset, params, "ova", count_nonzeros=params.min_task_work > 0
    )
    blocks = tasks_for_work(  # a label's problem: every row, or its positives and drawn negatives
        params.tasks,
        params.min_task_work if x_nonzeros is not None and access == "cached" else 0.0,
        n_labels,  # joined: `tasks` blocks (a block's rows are its task's memory)
        n_labels * (x_nonzeros or 0) * params.negative_fraction,
        default_parallelism(spark),
    )
    args = (dataset, posixpath.join(tmp, "data"), n_features, n_labels, params, blocks, groups)
    if access == "joined":
        rows = _train_joined(spark, *args, weighted, within)
    else:
        rows = (
            spark.range(0, blocks, numPartitions=blocks)
            .mapInArrow(_train_task(*args, weighted, within), from_arrow_schema(_SUMMARY))
            .collect()
        )
    return {
        "n_labels_without_positives": sum(r["no_positive"] for r in rows),
        "n_weights": sum(r["weights"] for r in rows),
        "x_access": access,
    }


PRED_SCHEMA = from_arrow_schema(S.PREDICTIONS_ARROW)


def _load_weights(
    model_path: str, n_features: int, n_labels: int
) -> tuple[sp.csc_matrix, np.ndarray]:
    """(W (d x L) CSC float32, bias (L,) float32) of a one-vs-all model, held once per executor
    (:mod:`eagle_spark.executor_state`; ~8 bytes per weight, whatever the number of task slots)."""
    key = (model_path, folder_version(model_path), n_features, n_labels)  # retrained -> reread

    def build() -> dict[str, np.ndarray]:
        WT, bias = read_sparse_rows(
            posixpath.join(model_path, WEIGHTS),
            S.LABEL_ID,
            "w_idx",
            "w_val",
            (n_labels, n_features),
            extra="bias",
        )
        bias = cast(np.ndarray, bias)  # asked for with extra=
        # weights are stored as float32: the round trip through float64 is exact
        return {
            **sparse_arrays(WT.T.tocsc().astype(np.float32), "W"),
            "bias": bias.astype(np.float32),
        }

    return shared_state("ova", key, build, lambda a: (sparse_from(a, "W", "csc"), a["bias"]))


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a dense score block: (label ids, scores) of the k best, best first; ties by id."""
    k = min(k, scores.shape[1])
    part = (
        np.argpartition(-scores, k - 1, axis=1)[:, :k]
        if k < scores.shape[1]
        else np.tile(np.arange(scores.shape[1]), (scores.shape[0], 1))
    )
    vals = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -vals), axis=1)
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(vals, order, axis=1)


def predict_ova(
    spark: SparkSession,
    model_path: str,
    X: DataFrame,
    n_features: int,
    k: int,
    batch_rows: int = 1000,
) -> DataFrame:
    """Top-k predictions of an OVA model for the rows of X.

    Args:
        X: DataFrame[sample_id, feat_idx, feat_val]; feature ids must be < the model's n_features.
        k: predictions per row.
    Returns:
        DataFrame[sample_id, label_ids array<int>, scores array<float>], best first.
    Raises:
        BadInputError: the model folder is missing or not an OVA model, or the data has more
            features than the model.
    """
    meta = read_metadata(spark, model_path, "OVAModel")
    if n_features > meta["n_features"]:
        raise BadInputError(
            f"the data has {n_features} features, beyond the model's n_features="
            f"{meta['n_features']}"
        )
    m_features, n_labels = meta["n_features"], trained_labels(meta)
    normalize = meta["params"]["normalize"]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        W, bias = _load_weights(model_path, m_features, n_labels)
        label_ids = model_label_ids(model_path, meta)  # a compacted model's ids, else None
        for batch in batches:
            for lo in range(0, batch.num_rows, batch_rows):
                part = batch.slice(lo, batch_rows)
                Xb = csr_from_arrow(part.column(1), part.column(2), m_features)
                Xb = l2_normalize_rows(Xb) if normalize else Xb
                scores = np.asarray((Xb @ W).todense()) + bias
                check_finite_scores(scores, part.column(0), "predict")
                labels, vals = top_k(scores, k)
                labels = labels if label_ids is None else label_ids[labels]
                offsets = pa.array(np.arange(0, labels.size + 1, labels.shape[1], dtype=np.int32))
                yield pa.RecordBatch.from_arrays(
                    [
                        part.column(0),
                        pa.ListArray.from_arrays(
                            offsets,
                            pa.array(labels.ravel().astype(np.int32)),
                            type=S.ARROW_INT_LIST,
                        ),
                        pa.ListArray.from_arrays(
                            offsets,
                            pa.array(vals.ravel().astype(np.float32)),
                            type=S.ARROW_FLOAT_LIST,
                        ),
                    ],
                    schema=S.PREDICTIONS_ARROW,
                )

    return X.select(S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL).mapInArrow(run, PRED_SCHEMA)
