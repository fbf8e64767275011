"""Spark errors are recognised by their error condition (getCondition()), not by message text."""

from __future__ import annotations

import pathlib

import pytest

from eagle_spark.errors import innermost_cause, spark_condition
from eagle_spark.io.fs import damaged_file


def _raised(call) -> BaseException:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the test inspects whatever Spark raised
        return exc
    raise AssertionError("the call did not fail")


def test_missing_path_has_condition_path_not_found(spark, tmp_path):
    missing = tmp_path / "nowhere"
    exc = _raised(lambda: spark.read.parquet(str(missing)).count())
    condition, parameters = spark_condition(exc)
    assert condition == "PATH_NOT_FOUND"
    assert str(missing) in parameters["path"]
    assert damaged_file(exc) is None  # missing is not damaged


def test_truncated_parquet_is_found_by_condition_and_named_with_its_java_cause(spark, tmp_path):
    folder = tmp_path / "t"
    spark.range(2000).write.parquet(str(folder))
    part = next(folder.glob("part-*.parquet"))
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    (folder / f".{part.name}.crc").unlink(missing_ok=True)  # let Parquet itself meet the damage
    exc = _raised(lambda: spark.read.schema("id long").parquet(str(folder)).collect())
    condition, parameters = spark_condition(exc)
    assert condition.startswith("FAILED_READ_FILE.")
    path, reason = damaged_file(exc)
    assert path == parameters["path"] and path.endswith(part.name)
    assert reason == innermost_cause(exc)
    assert reason.split(":")[0].startswith(
        ("java.", "org.apache.")
    )  # a Java class, then its message


def test_message_text_alone_is_not_a_spark_condition():
    """A message that merely reads like Spark's is not taken for one (no getCondition behind it)."""
    fake = RuntimeError(
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file /data/x.parquet."
    )
    assert spark_condition(fake) is None
    assert innermost_cause(fake) is None
    assert damaged_file(fake) is None


def test_pyarrow_reads_are_still_named_by_pyarrows_message(tmp_path):
    """pyarrow's errors carry no condition: the file it names is taken from its message."""
    import pyarrow.parquet as pq

    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not a parquet file " * 20)
    with pytest.raises(Exception) as info:
        pq.read_table(str(bad))
    # the executor-side form: pyarrow's message inside a task's traceback text
    wrapped = RuntimeError(
        f"Traceback ...\n{type(info.value).__name__}: Could not open Parquet input source "
        f"'{bad}': {info.value}"
    )
    path, reason = damaged_file(wrapped)
    assert pathlib.Path(path) == bad
    assert "Parquet magic bytes not found" in reason
