"""A positives budget for the soft assignment (``assign.soft_budget``).

A soft assignment gives every member of a group a weight for each of the group's labels, so it
trains on the Baseline's rows: at Wiki-325K's shape, where a label rarely belongs to two members
of one group, that is about the group size times the hard assignment's positives, and the
classifiers' cost grows with them (the paper's point (1) is that assignment cuts them).
:func:`within_budget` keeps the pairs the weights call most likely: every pair of weight 1 (the
top-c members, and members tied with them) and then the heaviest of the others under one weight
threshold for the whole assignment, so that the positives are at most ``soft_budget`` times the
hard assignment's, :func:`hard_positives`. Where the soft assignment is already within the budget
(labels shared by the members, small groups) nothing is dropped.

Memory and cost: two aggregations on Spark (the group sizes joined to Y2; the counts of light
pairs and one approximate percentile of their weights, ``percentile_approx`` with accuracy
:data:`ACCURACY`, whose sketch is O(ACCURACY) per task) and one filter; the assignment is read
from the Parquet folder it was materialised into, so it is not computed twice.
"""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.io.tables import read_table

log = logging.getLogger(__name__)

ACCURACY = 10_000
"""``percentile_approx``'s accuracy: beyond ACCURACY light pairs the threshold's rank among them
is within 1 / ACCURACY of their count of the asked one, and :func:`within_budget` asks 1 /
ACCURACY higher, so the budget holds (and at most 2 / ACCURACY of them more than needed are
dropped); up to ACCURACY the quantile is exact and exactly k are kept (distinct weights)."""


def _pairs_with_sizes(spark: SparkSession, dataset: str) -> DataFrame:
    """Y2's (group, label) pairs of `dataset` with their group's size ``_n`` (members in Y1)."""
    sizes = read_table(spark, dataset, S.Y1).groupBy(S.GROUP_ID).agg(F.count("*").alias("_n"))
    return read_table(spark, dataset, S.Y2).join(sizes, S.GROUP_ID)


def _sum(frame: DataFrame, column: Column) -> int:
    row = frame.agg(F.sum(column).alias("_s")).first()
    return int(row["_s"] or 0) if row is not None else 0


def hard_positives(spark: SparkSession, dataset: str, multiplicity: bool) -> int:
    """The positives of the hard assignment (Algorithm 2's top-c) of `dataset`'s groups: the sum
    over Y2's (group, label) pairs of min(c, the group's size), c the pair's list-merge count with
    `multiplicity`, else 1.

    Args:
        dataset: an aggregated dataset (Y1, Y2).
        multiplicity: ``assign.multiplicity``.
    Returns:
        The count (0 for a dataset without groups).
    """
    want = F.col(S.COUNT) if multiplicity else F.lit(1)
    return _sum(_pairs_with_sizes(spark, dataset), F.least(want.cast("long"), F.col("_n")))


class GroupLabels(NamedTuple):
    """What :func:`group_labels` counts."""

    pairs: int
    """Y2's (group, label) pairs: the group labels a classifier can learn from"""
    baseline_positives: int
    """the Baseline's positives (every member gets every label of its group): the sum over the
    pairs of the group's size; the most any assignment of the groups gives (a soft weighting's
    before pruning)"""


def group_labels(spark: SparkSession, dataset: str) -> GroupLabels:
    """Count `dataset`'s group labels and the Baseline's positives (one aggregation over Y2
    joined with the group sizes of Y1).

    Args:
        dataset: an aggregated dataset (Y1, Y2).
    Returns:
        A :class:`GroupLabels` (zeros for a dataset without groups).
    Source: the paper's section 3.3 (the Baseline's positives against the assignment's).
    """
    row = (
        _pairs_with_sizes(spark, dataset)
        .agg(F.count("*").alias("_p"), F.sum(F.col("_n").cast("long")).alias("_b"))
        .first()
    )
    if row is None:
        return GroupLabels(0, 0)
    return GroupLabels(int(row["_p"] or 0), int(row["_b"] or 0))


def within_budget(
    assignments: DataFrame, budget: float, n_hard: int
) -> tuple[DataFrame, dict[str, Any]]:
    """Prune a weighted assignment to at most ``floor(budget x n_hard)`` pairs.

    Every pair of weight 1 is kept (whatever the budget: they are the hard assignment, and
    members tied with it); of the lighter pairs, the k = floor(budget x n_hard) - (pairs of weight
    1) heaviest are kept, those of weight above one threshold t (the (1 - k / n_light) quantile of
    the light pairs' weights, :data:`ACCURACY` says how exact); the others become plain
    negatives, as a weight below :data:`eagle_spark.assignment.members.MIN_WEIGHT` does. Pairs
    tied at t go together.

    Args:
        assignments: DataFrame[group_id, label_id, sample_id, score, weight], one row per
            (group, label, member) pair, weights in (0, 1]; read from storage (it is scanned
            twice: once for the counts and the threshold, once by whoever reads the result).
        budget: ``assign.soft_budget``, >= 1.
        n_hard: :func:`hard_positives` of the assignment's dataset.
    Returns:
        (the kept pairs, lazily filtered; a record: ``budget``, ``hard_positives``,
        ``weight_one`` and ``light`` (the pairs before pruning), ``threshold`` (the light pairs
        kept have a larger weight; 0 when nothing was dropped, 1 when every light pair was)).
    Raises:
        ValueError: `budget` < 1, or `assignments` has no ``weight`` column.
    Source: this project (the paper's point (1), section 3.3: assignment cuts the positives).
    """
    if not budget >= 1:
        raise ValueError(f"within_budget: budget must be >= 1, got {budget}")
    if S.WEIGHT not in assignments.columns:
        raise ValueError("within_budget: the assignments have no weight column (not soft)")
    one = F.col(S.WEIGHT) >= 1.0
    counts = assignments.agg(
        F.sum(F.when(one, 1).otherwise(0)).alias("_one"),
        F.sum(F.when(one, 0).otherwise(1)).alias("_light"),
    ).first()
    n_one = int(counts["_one"] or 0) if counts is not None else 0
    n_light = int(counts["_light"] or 0) if counts is not None else 0
    k = math.floor(budget * n_hard) - n_one
    record: dict[str, Any] = {
        "budget": budget,
        "hard_positives": n_hard,
        "weight_one": n_one,
        "light": n_light,
    }
    if k >= n_light:
        log.info("soft budget %.3g: %d light pairs within %d, none dropped", budget, n_light, k)
        return assignments, record | {"threshold": 0.0}
    if k <= 0:
        threshold = 1.0
    else:
        # within ACCURACY values the sketch holds them all and the quantile is exact
        q = min(1.0, 1.0 - k / n_light + (1.0 / ACCURACY if n_light > ACCURACY else 0.0))
        row = (
            assignments.where(~one)
            .agg(F.percentile_approx(S.WEIGHT, q, ACCURACY).alias("_t"))
            .first()
        )
        threshold = float(row["_t"]) if row is not None and row["_t"] is not None else 1.0
    log.info(
        "soft budget %.3g: %d pairs of weight 1, %d light ones, at most %d kept (weight > %.4g)",
        budget,
        n_one,
        n_light,
        max(k, 0),
        threshold,
    )
    return assignments.where(one | (F.col(S.WEIGHT) > threshold)), record | {"threshold": threshold}
