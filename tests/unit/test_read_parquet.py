"""read_parquet reads a Parquet folder with the schema Spark would infer, taken from one footer on
the driver (no inference job): the reference is Spark's own inference on the same folder."""

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def _same_as_spark(spark, path):
    from eagle_spark.io.tables import parquet_schema, read_parquet

    inferred = spark.read.parquet(path)
    got = read_parquet(spark, path)
    assert got.schema == inferred.schema
    assert sorted(map(tuple, got.collect())) == sorted(map(tuple, inferred.collect()))
    return parquet_schema(path)


def test_spark_written_tables_take_the_schema_spark_stored(spark, tmp_path):
    """Every type Spark writes, nested ones included, comes back exactly as Spark infers it."""
    path = str(tmp_path / "t")
    spark.createDataFrame(
        [
            (1, 2, [1, 2], [0.5], "a", True, 1.5, dt.date(2026, 1, 2), (3, "x"), {"k": 1}),
            (9, None, [], [], None, False, None, None, None, None),
        ],
        "a long, b int, c array<int>, d array<float>, e string, f boolean, g double, h date, "
        "i struct<p: int, q: string>, j map<string, int>",
    ).coalesce(1).write.parquet(path)
    schema = _same_as_spark(spark, path)
    assert schema is not None and [f.name for f in schema] == list("abcdefghij")


def test_pyarrow_written_tables_of_plain_types_need_no_inference(spark, tmp_path):
    """The layout's pyarrow part files (non-null list elements, int32 / int64 / float / double /
    bool / string) read with the footer's schema; files Spark skips (``_``, ``.``) are skipped."""
    folder = tmp_path / "t"
    folder.mkdir()
    table = pa.table(
        {
            "label_id": pa.array([3, 1], pa.int32()),
            "emb_idx": pa.array([[1, 5], [2]], pa.list_(pa.field("element", pa.int32(), False))),
            "emb_val": pa.array([[0.5, 0.25], [1.0]], pa.list_(pa.float32())),
            "n": pa.array([7, 8], pa.int64()),
            "w": pa.array([0.1, None], pa.float64()),
            "ok": pa.array([True, False]),
            "name": pa.array(["x", "y"]),
        }
    )
    pq.write_table(table.slice(0, 1), folder / "part-00000.parquet")
    pq.write_table(table.slice(1, 1), folder / "part-00001.parquet")
    (folder / "_files.json").write_text("{}")
    (folder / ".part-00002.parquet.inprogress-1").write_bytes(b"not parquet")
    assert _same_as_spark(spark, str(folder)) is not None


@pytest.mark.parametrize(
    "column",
    [
        pa.array([1, 2], pa.uint32()),
        pa.array([dt.datetime(2026, 1, 1), None], pa.timestamp("us")),
        pa.array(["a", "a"]).dictionary_encode(),
        pa.array([1, 2], pa.int16()),
    ],
    ids=["uint32", "timestamp", "dictionary", "int16"],
)
def test_other_types_are_left_to_spark(spark, tmp_path, column):
    """A type whose Spark mapping is not certain here: no schema is given, Spark infers it."""
    folder = tmp_path / "t"
    folder.mkdir()
    pq.write_table(
        pa.table({"id": pa.array([1, 2], pa.int64()), "c": column}), folder / "p.parquet"
    )
    assert _same_as_spark(spark, str(folder)) is None


def test_folders_spark_must_resolve_itself(spark, tmp_path):
    """Sub-folders (partitions), no data file, a missing path: no schema from the footer."""
    from eagle_spark.io.tables import parquet_schema

    parted = tmp_path / "parted"
    spark.createDataFrame([(1, 2)], "a long, b int").write.partitionBy("b").parquet(str(parted))
    assert parquet_schema(str(parted)) is None
    assert _same_as_spark(spark, str(parted)) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "_SUCCESS").write_text("")
    assert parquet_schema(str(empty)) is None
    assert parquet_schema(str(tmp_path / "missing")) is None


def test_table_rows_sums_the_footers_of_the_files_spark_reads(spark, tmp_path):
    """table_rows counts what Spark counts (a Spark-written table, and pyarrow parts beside
    ``_`` / ``.`` files it skips); a missing table, a partitioned one (sub-folders) or a file that
    is not Parquet is a BadInputError naming it."""
    from eagle_spark.errors import BadInputError
    from eagle_spark.io.tables import table_rows

    spark.range(0, 1234, numPartitions=3).write.parquet(str(tmp_path / "d" / "spark_made"))
    assert table_rows(str(tmp_path / "d"), "spark_made") == 1234
    folder = tmp_path / "d" / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"a": [1, 2, 3]}), folder / "part-00000.parquet")
    pq.write_table(pa.table({"a": pa.array([], pa.int64())}), folder / "part-00001.parquet")
    pq.write_table(pa.table({"a": [4, 5]}), folder / "part-00002.parquet")
    (folder / "_files.json").write_text("{}")
    (folder / ".part-00003.parquet.inprogress-1").write_bytes(b"not parquet")
    assert table_rows(str(tmp_path / "d"), "parts") == 5 == spark.read.parquet(str(folder)).count()
    with pytest.raises(BadInputError, match="missing cannot be listed"):
        table_rows(str(tmp_path / "d"), "missing")
    spark.range(4).selectExpr("id", "id % 2 AS p").write.partitionBy("p").parquet(
        str(tmp_path / "d" / "partitioned")
    )
    with pytest.raises(BadInputError, match="partitioned has sub-folders"):
        table_rows(str(tmp_path / "d"), "partitioned")
    (folder / "part-00004.parquet").write_bytes(b"PAR1 cut short")
    with pytest.raises(BadInputError, match="part-00004.parquet: not a readable Parquet file"):
        table_rows(str(tmp_path / "d"), "parts")
