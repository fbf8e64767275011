"""P@k, nDCG@k and PSP@k of a frame of predictions, on Spark (the metrics of
:mod:`eagle_spark.evaluation.metrics`, napkinXC's definitions)."""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eagle_spark import schemas as S
from eagle_spark.evaluation.metrics import evaluate_pairs, inv_propensity, label_counts


def _label_array(df: DataFrame, col: str, role: str) -> None:
    if col not in df.columns:
        raise ValueError(
            f"evaluate: the frame has no {role} column {col!r}; it has {', '.join(df.columns)}"
        )
    dt = df.schema[col].dataType
    if not (
        isinstance(dt, T.ArrayType)
        and isinstance(dt.elementType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))
    ):
        raise TypeError(
            f"evaluate: column {col!r} ({role}) must be an array of label ids (array<int>), "
            f"got {dt.simpleString()}"
        )


def evaluate(
    predictions: DataFrame,
    labelsCol: str = "labels",
    predictionCol: str = "prediction",
    k: int = 5,
    propensityFrom: Optional[DataFrame] = None,
    propensityLabelsCol: Optional[str] = None,
    numLabels: Optional[int] = None,
    propensityA: float = 0.55,
    propensityB: float = 1.5,
) -> dict[str, float]:
    """Evaluate ranked predictions against true labels, row by row, at 1..k.

    A row without any true label counts with precision 0 (the XC repository's convention); a row
    with fewer than k predictions counts the missing ones as misses.

    Args:
        predictions: one row per evaluated sample with `labelsCol` (true label ids, array<int>) and
            `predictionCol` (predicted label ids, best first, array<int>), e.g. the output of
            ``LabelTreeModel.transform`` on a frame with true labels.
        labelsCol, predictionCol: the two columns.
        k: evaluate at 1..k (k >= 1).
        propensityFrom: frame whose labels give the label frequencies of PSP's propensities (Jain,
            Prabhu, Varma, KDD 2016), usually the training set; default `predictions` itself.
        propensityLabelsCol: its labels column (default `labelsCol`).
        numLabels: the label space (default: largest label id seen + 1).
        propensityA, propensityB: A and B of the propensity model (0.55, 1.5).
    Returns:
        ``{"P@1": ..., "P@k": ..., "nDCG@1": ..., "PSP@k": ...}``: fractions in [0, 1], plus
        ``"n_samples"``.
    Raises:
        ValueError: k < 1, a missing column, or no rows. TypeError: a column is not array<int>.

    Examples:
        >>> frame = spark.createDataFrame([([0, 1], [0, 2]), ([2], [1, 2])], ["labels", "prediction"])
        >>> m = evaluate(frame, k=2)
        >>> m["P@1"], m["P@2"], m["n_samples"]
        (0.5, 0.5, 2)
    """
    if k < 1:
        raise ValueError(f"evaluate: k must be >= 1, got {k}")
    _label_array(predictions, labelsCol, "labels")
    _label_array(predictions, predictionCol, "prediction")
    reference = propensityFrom if propensityFrom is not None else predictions
    ref_col = propensityLabelsCol or labelsCol
    _label_array(reference, ref_col, "labels")
    if numLabels is None:
        highs = list(
            predictions.agg(
                F.max(F.array_max(labelsCol)), F.max(F.array_max(predictionCol))
            ).collect()[0]
        )
        if reference is not predictions or ref_col not in (labelsCol, predictionCol):
            highs.append(reference.agg(F.max(F.array_max(ref_col))).collect()[0][0])
        numLabels = max((h for h in highs if h is not None), default=-1) + 1
    counts, n_ref = label_counts(
        reference.select(F.col(ref_col).cast("array<int>").alias(S.LABEL_IDS)), numLabels
    )
    if n_ref == 0:
        raise ValueError("evaluate: the propensity frame has no rows")
    inv_ps = inv_propensity(counts, n_ref, propensityA, propensityB)
    rows = predictions.select(
        F.col(labelsCol).cast("array<int>").alias("_true"),
        F.col(predictionCol).cast("array<int>").alias("_pred"),
    )
    result = evaluate_pairs(rows, "_true", "_pred", k, inv_ps)
    if result["n_samples"] == 0:
        raise ValueError("evaluate: the predictions frame has no rows")
    out: dict[str, float] = {}
    for name in ("P", "nDCG", "PSP"):
        for i, value in enumerate(result[name], start=1):
            out[f"{name}@{i}"] = float(value)
    out["n_samples"] = result["n_samples"]
    return out


__all__ = ["evaluate"]
