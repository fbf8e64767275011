"""Group-level metrics: how well a model's predictions for a group's members recover the group's
labels Y2. They need no sample labels, so a user who has only group labels can compare methods on
held-out groups (:mod:`eagle_spark.experiments.select`).

A group's prediction combines its members' top-k predictions label by label (``max``: the
largest member score; ``sum``: the sum of the member scores, a label predicted by several members
ranking higher), ranked by the combined score, ties by label id; it is scored against the group's
distinct labels with the sample-level definitions of :mod:`eagle_spark.evaluation.metrics` (P@k,
nDCG@k, PSP@k: one "row" per group).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.evaluation.metrics import evaluate_pairs
from eagle_spark.settings import GROUP_CRITERIA

COMBINE = ("max", "sum")
"""How the members' scores of a label make the group's score."""


def group_predictions(
    predictions: DataFrame, Y1: DataFrame, k: int, combine: str = "max"
) -> DataFrame:
    """DataFrame[group_id, label_ids array<int>]: each group's top-k labels, best first, from its
    members' predictions.

    Args:
        predictions: DataFrame[sample_id, label_ids, scores] (a predict output; each member's top
            labels, best first).
        Y1: DataFrame[sample_id, group_id] (members without a prediction add nothing).
        k: labels kept per group, >= 1.
        combine: ``max`` or ``sum`` of the member scores of a label.
    Raises:
        ValueError: k < 1 or an unknown `combine`.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if combine not in COMBINE:
        raise ValueError(f"combine must be one of {', '.join(COMBINE)}, got {combine!r}")
    pairs = (
        predictions.select(
            S.SAMPLE_ID,
            F.explode(
                F.arrays_zip(F.col(S.LABEL_IDS).alias("k"), F.col(S.SCORES).alias("s"))
            ).alias("p"),
        )
        .select(S.SAMPLE_ID, F.col("p.k").alias(S.LABEL_ID), F.col("p.s").cast("double").alias("s"))
        .join(Y1.select(S.SAMPLE_ID, S.GROUP_ID), S.SAMPLE_ID)
    )
    agg = F.max("s") if combine == "max" else F.sum("s")
    scored = pairs.groupBy(S.GROUP_ID, S.LABEL_ID).agg(agg.alias("s"))
    rank = F.row_number().over(
        Window.partitionBy(S.GROUP_ID).orderBy(F.desc("s"), F.asc(S.LABEL_ID))
    )
    top = scored.withColumn("_rank", rank).where(F.col("_rank") <= k)
    return (
        top.groupBy(S.GROUP_ID)
        .agg(F.sort_array(F.collect_list(F.struct("_rank", S.LABEL_ID))).alias("_r"))
        .select(S.GROUP_ID, F.col(f"_r.{S.LABEL_ID}").alias(S.LABEL_IDS))
    )


def group_metrics(
    predictions: DataFrame,
    Y1: DataFrame,
    Y2: DataFrame,
    k: int,
    inv_ps: np.ndarray,
    combine: str = "max",
) -> dict[str, Any]:
    """P@k, nDCG@k and PSP@k of the groups' combined predictions against their labels Y2.

    Every group of `Y2` is a row (a group none of whose members was predicted scores 0, as a
    sample without predictions does in :func:`eagle_spark.evaluation.metrics.evaluate_frames`);
    its true labels are its distinct label ids (the multiplicity is not used).

    Args:
        predictions: DataFrame[sample_id, label_ids, scores] of the groups' members.
        Y1: DataFrame[sample_id, group_id].
        Y2: DataFrame[group_id, label_id, count].
        k: K >= 1.
        inv_ps: (n_labels,) inverse propensities for PSP@k (label ids must be below n_labels).
        combine: :data:`COMBINE`.
    Returns:
        {"n_samples": number of groups, "k", "P", "nDCG", "PSP"}: lists of length k, fractions.
    Raises:
        ValueError: as :func:`group_predictions`.
    Source: this project (choosing a method from group labels alone), beyond the paper.
    """
    pred = group_predictions(predictions, Y1, k, combine)
    true = Y2.groupBy(S.GROUP_ID).agg(F.sort_array(F.collect_set(S.LABEL_ID)).alias("_true"))
    rows = true.join(pred.select(S.GROUP_ID, F.col(S.LABEL_IDS).alias("_pred")), S.GROUP_ID, "left")
    return evaluate_pairs(rows, "_true", "_pred", k, inv_ps)


def multiset_precision(predictions: DataFrame, Y1: DataFrame, Y2: DataFrame, k: int) -> list[float]:
    """Multiset P@1..k: an upper bound of the members' sample-level P@j that needs only Y2's counts.

    With list merge a group's label k has count c_k = the number of its members that have k. If
    n_k of the group's members have k among their top j predictions, at most min(n_k, c_k) of
    those predictions are right, so sum over the group's labels of min(n_k, c_k), summed over the
    groups and divided by j x (members of the groups), bounds P@j of the members from above; it
    is reached when every prediction of k goes to a member that has k. A classifier that predicts
    a group label for more members than have it (as the Baseline's tend to) is capped, unlike the
    union-based :func:`group_metrics`.

    Args:
        predictions: DataFrame[sample_id, label_ids, scores] of the groups' members (best first).
        Y1: DataFrame[sample_id, group_id]: the members; one without a prediction counts with
            nothing right.
        Y2: DataFrame[group_id, label_id, count] with list-merge counts (``aggregate.merge=list``).
        k: K >= 1.
    Returns:
        [P@1, ..., P@k] as fractions in [0, 1] (0 when there are no members).
    Raises:
        ValueError: k < 1.
    Source: this project (choosing from group labels alone), beyond the paper.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    members = Y1.select(S.SAMPLE_ID, S.GROUP_ID)
    n_members = members.count()
    if n_members == 0:
        return [0.0] * k
    ranked = (
        predictions.select(S.SAMPLE_ID, F.posexplode(S.LABEL_IDS).alias("_rank", S.LABEL_ID))
        .where(F.col("_rank") < k)
        .join(members, S.SAMPLE_ID)
    )
    # a prediction at rank r is within the top j for every j > r: count the members per (group,
    # label, j), cap each count by the label's count in Y2, sum per j
    within = (
        ranked.select(
            S.GROUP_ID, S.LABEL_ID, F.explode(F.sequence(F.col("_rank") + 1, F.lit(k))).alias("_j")
        )
        .groupBy(S.GROUP_ID, S.LABEL_ID, "_j")
        .agg(F.count(F.lit(1)).alias("_n"))
    )
    counts = Y2.select(S.GROUP_ID, S.LABEL_ID, F.col(S.COUNT).alias("_c"))
    capped = (
        within.join(counts, [S.GROUP_ID, S.LABEL_ID])
        .groupBy("_j")
        .agg(F.sum(F.least(F.col("_n"), F.col("_c"))).alias("_hits"))
        .collect()
    )
    hits = np.zeros(k)
    for r in capped:
        hits[int(r["_j"]) - 1] = float(r["_hits"])
    return (hits / (n_members * np.arange(1, k + 1))).tolist()


CRITERIA = GROUP_CRITERIA
"""The group-level precisions :func:`group_precisions` gives (declared with the settings that name
them, :data:`eagle_spark.settings.GROUP_CRITERIA`)."""


def group_precisions(
    predictions: DataFrame, Y1: DataFrame, Y2: DataFrame, k: int, n_labels: int
) -> dict[str, list[float]]:
    """P@1..k of every criterion of :data:`CRITERIA` (fractions): :func:`group_metrics` with
    ``max`` and ``sum``, and :func:`multiset_precision`. Arguments as those; `n_labels` the label
    space of the predictions."""
    ones = np.ones(n_labels)
    out = {c: group_metrics(predictions, Y1, Y2, k, ones, c)["P"] for c in COMBINE}
    out["multiset"] = multiset_precision(predictions, Y1, Y2, k)
    return out


__all__ = [
    "COMBINE",
    "CRITERIA",
    "group_metrics",
    "group_precisions",
    "group_predictions",
    "multiset_precision",
]
