"""The layout's Spark types, derived from its Arrow schemas, are the types the layout documents
(written out here by hand, from the module docstring of eagle_spark.schemas)."""

from pyspark.sql import types as T

from eagle_spark import schemas as S

_LONG, _INT, _FLOAT, _STR = T.LongType(), T.IntegerType(), T.FloatType(), T.StringType()


def _struct(*fields):
    return T.StructType([T.StructField(name, kind, nullable) for name, kind, nullable in fields])


def _array(kind):
    return T.ArrayType(kind, containsNull=False)


def test_table_types_are_the_documented_layout():
    want = {
        "X": _struct(
            ("sample_id", _LONG, False),
            ("feat_idx", _array(_INT), False),
            ("feat_val", _array(_FLOAT), False),
        ),
        "Y": _struct(("sample_id", _LONG, False), ("label_ids", _array(_INT), False)),
        "Y1": _struct(("sample_id", _LONG, False), ("group_id", _LONG, False)),
        "Y2": _struct(
            ("group_id", _LONG, False), ("label_id", _INT, False), ("count", _INT, False)
        ),
        "label_emb": _struct(
            ("label_id", _INT, False),
            ("emb_idx", _array(_INT), False),
            ("emb_val", _array(_FLOAT), False),
            ("n_groups", _INT, False),
        ),
        "assignments": _struct(
            ("group_id", _LONG, False),
            ("label_id", _INT, False),
            ("sample_id", _LONG, False),
            ("score", _FLOAT, False),
        ),
        "top_members": _struct(
            ("group_id", _LONG, False),
            ("label_id", _INT, False),
            ("sample_id", _LONG, False),
            ("score", _FLOAT, False),
            ("rank", _INT, False),
        ),
    }
    assert S.TABLE_SCHEMAS == want
    assert S.REJECTED_SCHEMA == _struct(
        ("line", _LONG, False), ("text", _STR, True), ("reason", _STR, False)
    )
    assert S.OPTIONAL_COLUMNS == {
        "Y": [T.StructField("label_weights", _array(_FLOAT), False)],
        "assignments": [T.StructField("weight", _FLOAT, False)],
    }


def test_type_equality_ignores_nullability_only():
    loose = _struct(("sample_id", _LONG, True), ("label_ids", T.ArrayType(_INT, True), True))
    assert S.spark_type_equal(loose, S.Y_SCHEMA)
    assert not S.spark_type_equal(
        _struct(("sample_id", _INT, False), ("label_ids", _array(_INT), False)), S.Y_SCHEMA
    )
    assert not S.spark_type_equal(_struct(("sample_id", _LONG, False)), S.Y_SCHEMA)
