"""Who gets which group label: EAGLE's assignment (Algorithm 2) and the Baseline, on Spark.

* ``eagle``: for each group j and each label k of j, the member argmax_i <e_k, x_i> gets k; ties
  (scores within 1e-9 relative of the maximum, ``kernel.TIE_RTOL``) go to the smallest sample_id. With ``multiplicity`` a label of list-merge count c goes to the top-c
  distinct members (score descending, then sample_id). Rows of X are normalised as in ``embed``.
* ``baseline``: every member gets all of its group's labels (the paper's Baseline, Y1 Y2); its
  assignments carry score 1.
* ``eagle`` with ``weighting=soft``: between the two. The top-c members get the label with weight
  1, every other member with a weight exp(-d / temperature) that falls with its score's distance d
  below the c-th best (:func:`soft_weights`); the assignments and Y_filter carry the weights
  (``weight``, ``label_weights``) and the classifiers train on the expected loss
  (:func:`eagle_spark.classifiers.linear.expected_loss_problem`). With ``posterior`` the weights
  are instead each member's posterior of holding the label given that c members of the group hold
  it (:func:`posterior_weights`; a pair's weights sum to c).

Output: a dataset whose ``Y`` is Y_filter (sample_id, sorted label_ids; samples of X that received
no label have an empty list), whose ``X`` is a byte copy of the input's, plus ``assignments/``
(group_id, label_id, sample_id, score). When the input has the true Y, the manifest reports
assignment precision (share of assigned (sample, label) pairs that are true) and recall (share of
the true pairs of the grouped samples that are recovered).

Execution: ``embed`` already ran Algorithm 2 in its pass and wrote each pair's top-``count``
members (``top_members``, the same choices this stage would make from the stored embeddings), so
``eagle`` reads that table (rank 0, or rank < count with ``multiplicity``) when the embeddings were
made from this very dataset (same path and manifest ``created_at``). Otherwise, e.g. for an
embeddings folder of another dataset or one written before ``top_members`` existed, it recomputes:
one task per part file of ``label_emb`` (part files are label-disjoint), Spark reads only (label_id,
file name) to route the (group, label, count) pairs, and the task reads its file's embeddings with
pyarrow; candidates' features come from the executor cache (:mod:`eagle_spark.grlr.context`).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from typing import Any, Optional, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError, SettingsError, check_finite
from eagle_spark.grlr.context import (
    Context,
    choose_x_access,
    context_of_members,
    joined_members,
    load_context,
)
from eagle_spark.grlr.embedding import batches_of
from eagle_spark.grlr.kernel import PairBatch, score_with_embeddings, select_top
from eagle_spark.io.fs import FileSystem, local_path
from eagle_spark.io.parts import filesystem_for
from eagle_spark.io.tables import (
    has_table,
    new_manifest,
    read_manifest,
    read_table,
    table_path,
    write_manifest,
    write_table,
)
from eagle_spark.rows import first_row
from eagle_spark.settings import AssignSettings

log = logging.getLogger(__name__)

_FILE = "_file"
_OUT = pa.schema(
    [
        pa.field(S.GROUP_ID, pa.int64(), nullable=False),
        pa.field(S.LABEL_ID, pa.int32(), nullable=False),
        pa.field(S.SAMPLE_ID, pa.int64(), nullable=False),
        pa.field(S.SCORE, pa.float32(), nullable=False),
    ]
)
_OUT_WEIGHTED = _OUT.append(pa.field(S.WEIGHT, pa.float32(), nullable=False))


def _out_schema(params: AssignSettings) -> pa.Schema:
    """The assignments the tasks yield: with ``soft`` weighting each row has its weight."""
    return _OUT_WEIGHTED if params.weighting == "soft" else _OUT


SCORE_RTOL = 1e-6
"""Soft weights: scores of one pair closer than this share of its largest |score| are equal (the
float32 embeddings give members that tie exactly in real arithmetic scores that differ in the 7th
digit; without it a near-zero score range would spread their weights)."""
MIN_WEIGHT = 1e-3
"""Soft weights below this are 0: the member is not written and stays a plain negative of the
label (it bounds the rows a soft assignment adds; exp(-d / T) < 1e-3 is d > 6.9 T)."""


def soft_weights(
    scores: np.ndarray,
    ptr: np.ndarray,
    take: np.ndarray,
    temperature: float,
    keep: float = 0.0,
) -> np.ndarray:
    """Weighted assignment: each candidate's weight for its pair's label.

    For a (group, label) pair p with candidates ptr[p]:ptr[p+1] (the group's members), the top
    take[p] members by score (:func:`eagle_spark.grlr.kernel.select_top`: Algorithm 2's top-c, ties
    to the smallest sample_id) get weight 1; another member i gets exp(-d_i / temperature) with
    d_i = (s_c - s_i) / (s_max - s_min) >= 0, s_c the score of the c-th best member and s_max /
    s_min the pair's extreme scores (so d is in [0, 1] whatever the scale of the label's scores),
    set to 0 below :data:`MIN_WEIGHT`. A member tied with the c-th best (within
    :data:`SCORE_RTOL`) gets 1 as well, and so does every member of a pair whose scores all tie. As the
    temperature goes to 0 this is the hard top-c assignment, as it grows every member's weight goes
    to 1: the Baseline. With `keep` > 0 at most ceil(keep x c) members of a pair keep a weight,
    those of the largest weights (ties to the earlier candidate): the rest, what the weights say
    is least likely, stay negatives, so the positives are at most `keep` x the hard assignment's.

    Args:
        scores: (n_candidates,) float, <e_k, x_i> of each pair's candidates, pair after pair.
        ptr: (n_pairs + 1,) int, candidate offsets of the pairs.
        take: (n_pairs,) int >= 1, c of each pair (the list-merge count, or 1).
        temperature: > 0.
        keep: 0 (no cap) or >= 1, the cap on a pair's weighted members as a multiple of c.
    Returns:
        (n_candidates,) float64 weights in {0} U [MIN_WEIGHT, 1].
    Source: this project (beyond the paper's Algorithm 2, section 3.3, which is the hard end).
    """
    sizes = np.diff(ptr)
    weights = np.zeros(len(scores), dtype=np.float64)
    if len(scores) == 0:
        return weights
    chosen = select_top(scores, ptr, take)
    weights[chosen] = 1.0
    pair_of = np.repeat(np.arange(len(sizes)), sizes)
    starts = ptr[:-1][sizes > 0]
    s_max = np.maximum.reduceat(scores, starts)
    s_min = np.minimum.reduceat(scores, starts)
    s_c = np.full(len(sizes), np.inf)
    np.minimum.at(s_c, pair_of[chosen], scores[chosen])
    spread, tol = np.zeros(len(sizes)), np.zeros(len(sizes))
    spread[sizes > 0] = s_max - s_min
    tol[sizes > 0] = SCORE_RTOL * np.maximum(np.abs(s_max), np.abs(s_min))
    gap = s_c[pair_of] - scores
    gap = np.where(gap > tol[pair_of], gap, 0.0)  # rounding-level differences are ties
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(spread[pair_of] > tol[pair_of], gap / spread[pair_of], 0.0)
    soft = np.exp(-d / temperature)
    weights = np.maximum(weights, np.where(soft >= MIN_WEIGHT, soft, 0.0))
    return _keep_heaviest(weights, ptr, take, keep)


def _keep_heaviest(weights: np.ndarray, ptr: np.ndarray, take: np.ndarray, keep: float):
    """`weights` with at most ceil(keep x c) members of each pair left, the heaviest (ties to the
    earlier candidate); keep 0: `weights` as they are."""
    if keep <= 0 or len(weights) == 0:
        return weights
    sizes = np.diff(ptr)
    pair_of = np.repeat(np.arange(len(sizes)), sizes)
    cap = np.ceil(keep * np.asarray(take, dtype=np.float64) - 1e-9).astype(np.int64)
    order = np.lexsort((np.arange(len(weights)), -weights, pair_of))  # by pair, heaviest first
    rank = np.empty(len(weights), dtype=np.int64)
    rank[order] = np.arange(len(weights)) - np.repeat(ptr[:-1], sizes)
    weights[rank >= cap[pair_of]] = 0.0
    return weights


def posterior_weights(
    scores: np.ndarray,
    ptr: np.ndarray,
    take: np.ndarray,
    temperature: Optional[float],
    keep: float = 0.0,
) -> np.ndarray:
    """Posterior assignment: each candidate's probability of holding its pair's label given that
    take[p] of the pair's members hold it (:func:`eagle_spark.assignment.posterior.inclusion_probabilities`,
    the E-step of multiple-instance EM), set to 0 below :data:`MIN_WEIGHT`, at most
    ceil(keep x c) members kept as in :func:`soft_weights`.

    The members' log-odds are the scores themselves when `temperature` is None (a logistic-loss
    classifier's w_k . x_i, the refinement rounds of ``assign.posterior``), else the scores'
    distance below the pair's best as a share of its score range, over `temperature` (the
    embedding's <e_k, x_i>, which has no probabilistic scale: the first round). A pair's weights
    sum to min(c, size) before the floor and the cap; all-tied scores give every member c / size.

    Args:
        scores: (n_candidates,) float, pair after pair; ptr: (n_pairs + 1,) offsets;
        take: (n_pairs,) int >= 1, c of each pair; temperature: > 0, or None;
        keep: 0 (no cap) or >= 1.
    Returns:
        (n_candidates,) float64 weights in {0} U [MIN_WEIGHT, 1].
    Source: this project (section 3.3's Algorithm 2 takes this posterior's mode).
    """
    from eagle_spark.assignment.posterior import inclusion_probabilities

    scores = np.asarray(scores, dtype=np.float64)
    if temperature is None:
        eta = scores
    else:
        sizes = np.diff(ptr)
        pair_of = np.repeat(np.arange(len(sizes)), sizes)
        starts = ptr[:-1][sizes > 0]
        s_max, s_min = np.zeros(len(sizes)), np.zeros(len(sizes))
        if len(scores):
            s_max[sizes > 0] = np.maximum.reduceat(scores, starts)
            s_min[sizes > 0] = np.minimum.reduceat(scores, starts)
        spread = s_max - s_min
        tol = SCORE_RTOL * np.maximum(np.abs(s_max), np.abs(s_min))
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where((spread > tol)[pair_of], (s_max[pair_of] - scores) / spread[pair_of], 0.0)
        eta = -d / temperature
    weights = inclusion_probabilities(eta, ptr, take)
    weights[weights < MIN_WEIGHT] = 0.0
    return _keep_heaviest(weights, ptr, take, keep)


def _assign_task(
    dataset: str, n_features: int, normalize: bool, params: AssignSettings, log_odds: bool
):
    """applyInArrow function (cached path): the pairs whose labels' embeddings sit in one part file
    -> assignments, the candidates' rows from the executor cache."""

    def run(key: tuple, pairs: pa.Table) -> pa.Table:
        if pairs.num_rows == 0:
            return _out_schema(params).empty_table()
        ctx = load_context(dataset, n_features, normalize)
        return _assign_file(ctx, key, pairs, params, log_odds)

    return run


def _assign_task_joined(n_features: int, normalize: bool, params: AssignSettings, log_odds: bool):
    """cogroup applyInArrow function (joined path): one part file's pairs and their groups' member
    rows -> assignments."""

    def run(key: tuple, pairs: pa.Table, members: pa.Table) -> pa.Table:
        if pairs.num_rows == 0:
            return _out_schema(params).empty_table()
        ctx = context_of_members(members, n_features, normalize)
        return _assign_file(ctx, key, pairs, params, log_odds)

    return run


def _assign_file(
    ctx: Context, key: tuple, pairs: pa.Table, params: AssignSettings, log_odds: bool
) -> pa.Table:
    """Algorithm 2 for the pairs of the labels stored in part file key[0] of ``label_emb``
    (`log_odds`: the embeddings are a logistic-loss classifier's, see :func:`posterior_weights`)."""
    pairs = pairs.sort_by([(S.LABEL_ID, "ascending"), (S.GROUP_ID, "ascending")])
    labels = np.asarray(pairs.column(S.LABEL_ID), dtype=np.int64)
    groups = np.asarray(pairs.column(S.GROUP_ID), dtype=np.int64)
    counts = np.asarray(pairs.column(S.COUNT), dtype=np.int64)
    fs, path = filesystem_for(urllib.parse.unquote(key[0].as_py()))
    embs = pq.read_table(path, filesystem=fs, columns=[S.LABEL_ID, S.EMB_IDX, S.EMB_VAL])
    embs = embs.sort_by(S.LABEL_ID)
    emb_labels = np.asarray(embs.column(S.LABEL_ID), dtype=np.int64)
    emb_idx_col = embs.column(S.EMB_IDX).combine_chunks()
    emb_off = np.asarray(emb_idx_col.offsets, dtype=np.int64)
    emb_idx_all = np.asarray(emb_idx_col.values, dtype=np.int64)
    emb_val_all = np.asarray(embs.column(S.EMB_VAL).combine_chunks().values, dtype=np.float64)
    sizes = ctx.group_sizes(groups)
    out = []
    for lo, hi in batches_of(labels, groups, sizes, params.batch_rows):
        batch_labels, local = np.unique(labels[lo:hi], return_inverse=True)
        ptr, rows = ctx.rows_of_groups(groups[lo:hi])
        at = np.searchsorted(emb_labels, batch_labels)
        lengths = emb_off[at + 1] - emb_off[at]
        emb_ptr = np.r_[0, np.cumsum(lengths)]
        take = np.repeat(emb_off[at] - emb_ptr[:-1], lengths) + np.arange(emb_ptr[-1])
        scores = score_with_embeddings(
            ctx.X,
            PairBatch(local, ptr, rows, len(batch_labels)),
            emb_ptr,
            emb_idx_all[take],
            emb_val_all[take],
        )
        check_finite(
            scores,
            lambda i: (
                f"assign: label {int(labels[lo + np.searchsorted(ptr, i, side='right') - 1])}: a score "
                "<e_k, x_i> is not finite; check the embeddings"
            ),
        )
        want = counts[lo:hi] if params.multiplicity else np.ones(hi - lo, dtype=np.int64)
        columns = []
        if params.weighting == "soft" and params.posterior:
            weights = posterior_weights(
                scores, ptr, want, None if log_odds else params.temperature, params.soft_keep
            )
            chosen = np.flatnonzero(weights > 0)
            columns = [pa.array(weights[chosen].astype(np.float32))]
        elif params.weighting == "soft":
            weights = soft_weights(scores, ptr, want, params.temperature, params.soft_keep)
            chosen = np.flatnonzero(weights > 0)
            columns = [pa.array(weights[chosen].astype(np.float32))]
        else:
            chosen = select_top(scores, ptr, want)
        pair_of = np.repeat(np.arange(hi - lo), np.diff(ptr))[chosen]
        out.append(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(groups[lo:hi][pair_of]),
                    pa.array(labels[lo:hi][pair_of].astype(np.int32)),
                    pa.array(ctx.sample_ids[rows[chosen]]),
                    pa.array(scores[chosen].astype(np.float32)),
                    *columns,
                ],
                schema=_out_schema(params),
            )
        )
    return pa.Table.from_batches(out, schema=_out_schema(params))


def eagle_assignments(
    spark: SparkSession,
    dataset: str,
    embeddings: str,
    params: AssignSettings,
    n_features: int,
    normalize: bool,
    pairs: Optional[DataFrame] = None,
    log_odds: bool = False,
) -> DataFrame:
    """DataFrame[group_id, label_id, sample_id, score] of Algorithm 2 (see the module docstring),
    with a ``weight`` column and every member of weight >= :data:`MIN_WEIGHT` under ``soft``
    weighting (:func:`soft_weights`, or :func:`posterior_weights` with ``posterior``).

    `pairs`: the rows of Y2 (group_id, label_id, count) to assign, None: all of Y2 (the
    cross-fitted refinement assigns one fold's groups at a time). `log_odds`: the embeddings
    are a logistic-loss classifier's weights, so a score is a log-odds (the posterior weighting
    uses it without a temperature).

    The embeddings never go through Spark's row format: a label's embedding lives in one part file
    of ``label_emb`` (part files are label-disjoint), only (label_id, file) is read by Spark, and the
    task for a file reads that file's embeddings with pyarrow.

    Raises:
        BadInputError: the embeddings folder lacks ``label_emb``, or a label of Y2 has no embedding
            or sits in several part files.
    """
    if not has_table(spark, embeddings, S.LABEL_EMB):
        raise BadInputError(f"{embeddings} has no {S.LABEL_EMB} table (run embed first)")
    Y2 = read_table(spark, dataset, S.Y2) if pairs is None else pairs
    where = read_table(spark, embeddings, S.LABEL_EMB).select(
        S.LABEL_ID, F.input_file_name().alias(_FILE)
    )
    duplicated = first_row(
        where.groupBy(S.LABEL_ID).count().where("count > 1").agg(F.min(S.LABEL_ID)),
        "labels with several embeddings",
    )[0]
    if duplicated is not None:
        raise BadInputError(f"{embeddings}: label {duplicated} has several embeddings")
    pairs = Y2.join(where, S.LABEL_ID, "left")
    missing = first_row(
        pairs.where(F.col(_FILE).isNull()).agg(F.min(S.LABEL_ID)), "labels without an embedding"
    )[0]
    if missing is not None:
        raise BadInputError(f"label {missing} of Y2 has no embedding in {embeddings}")
    X = read_table(spark, dataset, S.X)
    x_access, why = choose_x_access(
        spark, X, read_table(spark, dataset, S.Y1), params.x_access, params.cache_budget, "assign"
    )
    log.info("assign: %s path (%s)", x_access, why)
    if x_access == "cached":
        return pairs.groupBy(_FILE).applyInArrow(
            _assign_task(dataset, n_features, normalize, params, log_odds),
            from_arrow_schema(_out_schema(params)),
        )
    members = joined_members(
        X, read_table(spark, dataset, S.Y1), pairs.select(_FILE, S.GROUP_ID).distinct(), [_FILE]
    )
    return (
        pairs.groupBy(_FILE)
        .cogroup(members.groupBy(_FILE))
        .applyInArrow(
            _assign_task_joined(n_features, normalize, params, log_odds),
            from_arrow_schema(_out_schema(params)),
        )
    )


def _canonical(path: str) -> str:
    local = local_path(path)
    return os.path.realpath(local) if local is not None else path.rstrip("/")


def stored_top_members(
    spark: SparkSession,
    dataset: str,
    embeddings: str,
    multiplicity: bool,
    manifest_in: dict,
    emb_manifest: dict,
) -> Optional[DataFrame]:
    """Algorithm 2's choices written by ``embed`` in its pass, or None when they cannot be used.

    They are used when ``embeddings`` has ``top_members`` and was made from `dataset` as it is now
    (same path and manifest ``created_at``); the choices are then exactly those of
    :func:`eagle_assignments` (same scores from the float32 stored weights, same tie rule).

    Returns:
        DataFrame[group_id, label_id, sample_id, score]: rank 0 of each pair, or every stored rank
        (the top-``count`` members) with `multiplicity`; None when the table is absent or stale.
    """
    source = emb_manifest.get("source", {})
    if (
        S.TOP_MEMBERS not in emb_manifest.get("tables", [])
        or _canonical(str(source.get("dataset"))) != _canonical(dataset)
        or source.get("dataset_created_at") != manifest_in.get("created_at")
    ):
        return None
    top = read_table(spark, embeddings, S.TOP_MEMBERS)
    if not multiplicity:
        top = top.where(F.col(S.RANK) == 0)
    return top.select(S.GROUP_ID, S.LABEL_ID, S.SAMPLE_ID, S.SCORE)


def baseline_assignments(spark: SparkSession, dataset: str) -> DataFrame:
    """Every member gets all its group's labels (Y1 Y2), score 1."""
    Y1, Y2 = read_table(spark, dataset, S.Y1), read_table(spark, dataset, S.Y2)
    return Y1.join(Y2, S.GROUP_ID).select(
        S.GROUP_ID, S.LABEL_ID, S.SAMPLE_ID, F.lit(1.0).cast("float").alias(S.SCORE)
    )


def y_filter(X: DataFrame, assignments: DataFrame) -> DataFrame:
    """Y_filter: DataFrame[sample_id, label_ids sorted unique]; samples without labels get [].

    When `assignments` has a ``weight`` column (weighted assignment) Y_filter also has
    ``label_weights`` (array<float>, one per label id in the same order: the largest weight the
    sample got for the label).
    """
    if S.WEIGHT not in assignments.columns:
        labels = assignments.groupBy(S.SAMPLE_ID).agg(
            F.sort_array(F.collect_set(S.LABEL_ID)).alias(S.LABEL_IDS)
        )
        return (
            X.select(S.SAMPLE_ID)
            .join(labels, S.SAMPLE_ID, "left")
            .select(
                S.SAMPLE_ID,
                F.coalesce(S.LABEL_IDS, F.array().cast("array<int>")).alias(S.LABEL_IDS),
            )
        )
    pairs = weighted_pairs(assignments)
    # the pairs are distinct, so sorting the (label_id, weight) structs sorts by label id; sort_array
    # and the struct-field arrays `_lw.<field>` need no lambda (classifiers.base.outside_unit_weights
    # says why)
    rows = pairs.groupBy(S.SAMPLE_ID).agg(
        F.sort_array(F.collect_list(F.struct(S.LABEL_ID, S.WEIGHT))).alias("_lw")
    )
    return (
        X.select(S.SAMPLE_ID)
        .join(rows, S.SAMPLE_ID, "left")
        .select(
            S.SAMPLE_ID,
            F.coalesce(F.col(f"_lw.{S.LABEL_ID}"), F.array().cast("array<int>")).alias(S.LABEL_IDS),
            F.coalesce(F.col(f"_lw.{S.WEIGHT}"), F.array().cast("array<float>")).alias(
                S.LABEL_WEIGHTS
            ),
        )
    )


def write_filtered(
    spark: SparkSession, X: DataFrame, x_from: Optional[str], assignments: DataFrame, path: str
) -> None:
    """Write the tables a classifier trains on into folder `path`: Y = :func:`y_filter` of
    `assignments` (with ``label_weights`` when weighted) and X, a byte copy of dataset `x_from`'s
    (whose rows `X` are), or with `x_from` None the rows of `X` written anew (a subset: the
    cross-fitted refinement's folds). No manifest: the caller writes its own."""
    write_table(y_filter(X, assignments).sortWithinPartitions(S.SAMPLE_ID), path, S.Y)
    if x_from is None:
        write_table(X.sortWithinPartitions(S.SAMPLE_ID), path, S.X)
    else:
        FileSystem(spark).copy(table_path(x_from, S.X), table_path(path, S.X))


def write_training_set(
    spark: SparkSession,
    X: DataFrame,
    x_from: str,
    assignments: DataFrame,
    path: str,
    kind: str,
    sizes: dict[str, int],
    source: Optional[dict[str, Any]] = None,
) -> None:
    """Write a dataset a classifier trains on: :func:`write_filtered`'s X and Y, and a manifest.

    Args:
        kind: the manifest's ``kind``. sizes: its n_samples, n_features and n_labels.
        source: the manifest's ``source`` (left out when None).
    """
    write_filtered(spark, X, x_from, assignments, path)
    extra = {"source": source} if source is not None else {}
    write_manifest(spark, path, new_manifest(kind, **sizes, **extra, tables=[S.X, S.Y]))


def pairs_of(assignments: DataFrame) -> DataFrame:
    """The distinct (sample_id, label_id) pairs of an assignment, with their largest ``weight``
    when it is weighted (:func:`weighted_pairs`)."""
    if S.WEIGHT in assignments.columns:
        return weighted_pairs(assignments)
    return assignments.select(S.SAMPLE_ID, S.LABEL_ID).distinct()


def weighted_pairs(assignments: DataFrame) -> DataFrame:
    """DataFrame[sample_id, label_id, weight]: the distinct assigned pairs, each with its largest
    weight (1 when `assignments` has no ``weight`` column: hard assignment, the Baseline)."""
    if S.WEIGHT not in assignments.columns:
        return (
            assignments.select(S.SAMPLE_ID, S.LABEL_ID)
            .distinct()
            .withColumn(S.WEIGHT, F.lit(1.0).cast("float"))
        )
    return assignments.groupBy(S.SAMPLE_ID, S.LABEL_ID).agg(F.max(S.WEIGHT).alias(S.WEIGHT))


def true_pairs(Y_true: DataFrame, Y1: DataFrame) -> DataFrame:
    """DataFrame[sample_id, label_id]: the true (sample, label) pairs of the grouped samples (the
    universe of an assignment's recall), one row per label of a sample's ``label_ids`` (which holds
    each label once).

    Args:
        Y_true: DataFrame[sample_id, label_ids] (true labels).
        Y1: DataFrame[sample_id, group_id].
    """
    return Y_true.join(Y1.select(S.SAMPLE_ID), S.SAMPLE_ID, "left_semi").select(
        S.SAMPLE_ID, F.explode(S.LABEL_IDS).alias(S.LABEL_ID)
    )


def quality_of(
    n_assigned: int, hits: int, n_true: int, w_all: float, w_hits: float, weighted: bool
) -> dict[str, float]:
    """:func:`assignment_quality`'s figures from its sums: `n_assigned` distinct assigned pairs,
    `hits` of them true, `n_true` true pairs, `w_all` / `w_hits` the weights of all / the true
    assigned pairs (1 each when not `weighted`)."""
    out = {
        "precision": w_hits / w_all if w_all else 0.0,
        "recall": w_hits / n_true if n_true else 0.0,
        "assigned_pairs": n_assigned,
        "true_pairs": n_true,
        "correct_pairs": hits,
    }
    if weighted:
        out |= {"assigned_weight": w_all, "correct_weight": w_hits}
    return out


def assignment_quality(truth: DataFrame, assigned: DataFrame) -> dict[str, float]:
    """Precision and recall of the assigned (sample, label) pairs against the true Y.

    Weighted assignment counts each pair by its weight: precision = sum of the true pairs'
    weights / sum of all weights, recall = sum of the true pairs' weights / true pairs (with
    weight 1 everywhere: the plain counts).

    Args:
        truth: the true pairs, :func:`true_pairs`.
        assigned: DataFrame[sample_id, label_id] (distinct pairs), with a ``weight`` column for
            weighted assignment (:func:`weighted_pairs`).
    Returns:
        {"precision", "recall", "assigned_pairs", "true_pairs", "correct_pairs"}, and with weights
        "assigned_weight" and "correct_weight" (the sums): :func:`quality_of`.
    """
    # one full join counts the assigned pairs, the hits and the true pairs in a single job
    is_assigned = F.col("_assigned").isNotNull()
    is_true = F.col("_true").isNotNull()
    weight = F.when(
        is_assigned, F.col(S.WEIGHT) if S.WEIGHT in assigned.columns else F.lit(1.0)
    ).cast("double")
    row = first_row(
        assigned.withColumn("_assigned", F.lit(1))
        .join(truth.withColumn("_true", F.lit(1)), [S.SAMPLE_ID, S.LABEL_ID], "full")
        .agg(
            F.count("_assigned").alias("n"),
            F.count(F.when(is_assigned & is_true, 1)).alias("hits"),
            F.count("_true").alias("n_true"),
            F.sum(weight).alias("w"),
            F.sum(F.when(is_true, weight)).alias("w_hits"),
        ),
        "assignment_quality",
    )
    return quality_of(
        int(row["n"]),
        int(row["hits"]),
        int(row["n_true"]),
        float(row["w"] or 0.0),
        float(row["w_hits"] or 0.0),
        S.WEIGHT in assigned.columns,
    )


def first_round_of(
    spark: SparkSession,
    first_round: str,
    dataset: str,
    embeddings: Optional[str],
    params: AssignSettings,
) -> tuple[DataFrame, dict[str, Any]]:
    """(the assignments of the earlier output `first_round`, its manifest's ``source``), after
    checking that it assigned `dataset` with `embeddings` and `params` without refinement."""
    manifest = read_manifest(spark, first_round, what="assign")
    source = manifest.get("source") or {}
    want = params.unrefined().to_dict()
    try:  # made without rounds: its refinement settings played no part
        made: Optional[dict[str, Any]] = (
            cast(AssignSettings, AssignSettings.from_dict(manifest.get("parameters")))
            .unrefined()
            .to_dict()
        )
    except SettingsError:
        made = None
    if (
        _canonical(str(source.get("dataset"))) != _canonical(dataset)
        or _canonical(str(source.get("embeddings"))) != _canonical(str(embeddings))
        or made != want
    ):
        raise BadInputError(
            f"assign: {first_round} was not assigned from {dataset} with {embeddings} and the "
            f"settings {want} (it has {source.get('dataset')}, {source.get('embeddings')}, "
            f"{manifest.get('parameters')}): it cannot be the first round"
        )
    return read_table(spark, first_round, S.ASSIGNMENTS), dict(source)


def assignments_of(
    spark: SparkSession,
    dataset: str,
    params: AssignSettings,
    embeddings: Optional[str],
    manifest_in: dict,
    n_features: int,
) -> tuple[DataFrame, dict[str, Any]]:
    """(the assignments DataFrame, the manifest's ``source``) of ``eagle`` (stored top members or
    recomputed) or ``baseline``."""
    source: dict[str, Any] = {"dataset": dataset}
    if params.method != "eagle":
        return baseline_assignments(spark, dataset), source
    if embeddings is None:
        raise ValueError("assign: method eagle needs the embeddings folder")
    emb_manifest = read_manifest(spark, embeddings)
    normalize = bool(emb_manifest["parameters"]["normalize"])
    source |= {"embeddings": embeddings, "iterations": emb_manifest["parameters"]["iterations"]}
    assignments = None
    if params.weighting == "hard":  # soft needs every member's score: always recomputed
        assignments = stored_top_members(
            spark, dataset, embeddings, params.multiplicity, manifest_in, emb_manifest
        )
    source["top_members"] = "from embed" if assignments is not None else "recomputed"
    if assignments is None:
        if float(emb_manifest["parameters"].get("prune_below", 0.0)) > 0:
            log.warning(
                "assign: %s holds pruned embeddings (prune_below=%s): the assignments "
                "recomputed from them may differ from exact ones",
                embeddings,
                emb_manifest["parameters"]["prune_below"],
            )
        assignments = eagle_assignments(spark, dataset, embeddings, params, n_features, normalize)
    log.info("assign eagle: top members %s", source["top_members"])
    return assignments, source
