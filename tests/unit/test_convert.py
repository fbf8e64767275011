"""Spark ML SparseVector converters."""

import pytest
from pyspark.ml.linalg import DenseVector, SparseVector, VectorUDT
from pyspark.sql import types as T

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError
from eagle_spark.io.convert import from_ml_vectors, to_ml_vectors


def test_round_trip(spark):
    X = spark.createDataFrame([(0, [1, 3], [0.5, 2.0]), (1, [], [])], S.X_SCHEMA)
    vec = to_ml_vectors(X, n_features=4)
    rows = {r.sample_id: r.features for r in vec.collect()}
    assert rows[0] == SparseVector(4, [1, 3], [0.5, 2.0])
    assert rows[1] == SparseVector(4, [], [])
    back = from_ml_vectors(vec.drop("feat_idx", "feat_val"))
    assert sorted((r.sample_id, r.feat_idx, r.feat_val) for r in back.collect()) == [
        (0, [1, 3], [0.5, 2.0]),
        (1, [], []),
    ]


def test_dense_vectors_and_errors(spark):
    schema = T.StructType(
        [T.StructField("sample_id", T.LongType()), T.StructField("v", VectorUDT())]
    )
    df = spark.createDataFrame([(0, DenseVector([0.0, 1.5, 0.0, 2.0]))], schema)
    row = from_ml_vectors(df, "v").first()
    assert (row.feat_idx, row.feat_val) == ([1, 3], [1.5, 2.0])
    with pytest.raises(BadInputError, match="not found"):
        from_ml_vectors(df, "nope")
    with pytest.raises(BadInputError, match="not a Spark ML vector"):
        from_ml_vectors(df, "sample_id")
    X = spark.createDataFrame([(0, [1], [0.5])], S.X_SCHEMA)
    with pytest.raises(BadInputError, match="already exists"):
        to_ml_vectors(X, 4, output_col="feat_idx")
