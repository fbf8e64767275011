"""Converters between the X table layout and pyspark.ml ``SparseVector`` columns, for Spark ML users.

The layout stores a sparse row as two arrays (``feat_idx`` int, sorted and unique; ``feat_val``
float); Spark ML estimators want one ``VectorUDT`` column. These run as Python UDFs (one row at a
time): convenient at Spark ML scale, not on the hot paths of eagle_spark, which read the arrays.
"""

from __future__ import annotations

from pyspark.ml.linalg import SparseVector, VectorUDT
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError


def to_ml_vectors(X: DataFrame, n_features: int, output_col: str = "features") -> DataFrame:
    """Add a ``SparseVector`` column built from ``feat_idx``/``feat_val``.

    Args:
        X: DataFrame[sample_id, feat_idx, feat_val], shape (n_samples, n_features).
        n_features: vector size; every feat_idx must be below it.
        output_col: name of the new column.
    Returns:
        `X` with `output_col` (VectorUDT, sparse, float64 values) added.
    Raises:
        BadInputError: `output_col` already exists or `n_features` < 0.
        Spark's PythonException at run time when an index is >= n_features.
    """
    if output_col in X.columns:
        raise BadInputError(f"column {output_col!r} already exists; choose another output_col")
    if n_features < 0:
        raise BadInputError(f"n_features must be >= 0, got {n_features}")

    @F.udf(returnType=VectorUDT(), useArrow=False)
    def _vector(idx, val):  # no type hints: Spark would read them as a pandas UDF
        return SparseVector(n_features, idx, val)

    return X.withColumn(output_col, _vector(F.col(S.FEAT_IDX), F.col(S.FEAT_VAL)))


_PAIR = T.StructType(
    [
        T.StructField(S.FEAT_IDX, T.ArrayType(T.IntegerType(), False), False),
        T.StructField(S.FEAT_VAL, T.ArrayType(T.FloatType(), False), False),
        T.StructField("size", T.IntegerType(), False),
    ]
)


def from_ml_vectors(
    df: DataFrame, input_col: str = "features", size_col: str | None = None
) -> DataFrame:
    """Replace a Spark ML vector column by ``feat_idx``/``feat_val`` arrays (the X layout).

    Dense vectors keep their non-zero entries; values become float32.

    Args:
        df: frame with a VectorUDT column `input_col` (and usually ``sample_id``).
        input_col: the vector column.
        size_col: when given, also add this int column holding each vector's size (its feature
            space, n_features).
    Returns:
        `df` without `input_col`, with ``feat_idx`` array<int> and ``feat_val`` array<float>
        (and `size_col`). A null vector gives null arrays.
    Raises:
        BadInputError: `input_col` is missing or is not a vector column.
    """
    if input_col not in df.columns:
        raise BadInputError(f"column {input_col!r} not found (has {', '.join(df.columns)})")
    if not isinstance(df.schema[input_col].dataType, VectorUDT):
        raise BadInputError(f"column {input_col!r} is not a Spark ML vector column")

    @F.udf(returnType=_PAIR, useArrow=False)
    def _arrays(vector):  # no type hints: Spark would read them as a pandas UDF
        if vector is None:
            return None
        if isinstance(vector, SparseVector):
            return (
                [int(i) for i in vector.indices],
                [float(v) for v in vector.values],
                int(vector.size),
            )
        nz = [(i, float(v)) for i, v in enumerate(vector.toArray()) if v != 0.0]
        return [i for i, _ in nz], [v for _, v in nz], int(vector.size)

    pair = _arrays(F.col(input_col))
    out = (
        df.withColumn("_pair", pair)
        .withColumn(S.FEAT_IDX, F.col(f"_pair.{S.FEAT_IDX}"))
        .withColumn(S.FEAT_VAL, F.col(f"_pair.{S.FEAT_VAL}"))
    )
    if size_col is not None:
        out = out.withColumn(size_col, F.col("_pair.size"))
    return out.drop("_pair", input_col)
