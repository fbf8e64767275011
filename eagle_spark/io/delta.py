"""Delta Lake output: publish a finished Parquet table as a new version of a Delta table.

Two writers, one layout (a ``_delta_log/`` transaction log beside Parquet data files):

* with Delta's JVM jars on Spark's classpath (a cluster started with
  ``--packages io.delta:delta-spark_2.13:<version>``), Spark writes the table itself
  (``format("delta")``, delta-spark);
* otherwise the ``deltalake`` package (delta-rs) writes it from the Parquet files, streamed as Arrow
  record batches. This is the path on machines where Maven cannot be reached (Delta's jars come
  only from Maven repositories).

Either way a version is committed by one atomic write of its log entry, after all of its data files
exist: a writer killed midway leaves the previous version complete and readable (the orphan data
files it wrote are not referenced by any version). Every publish is an ``overwrite``: version N+1
holds exactly the new rows, and earlier versions stay readable by time travel
(``DeltaTable(path, version=N)``) until vacuumed. Spark with Delta, delta-rs, Polars
(``read_delta``) and DuckDB (``delta_scan`` or ``DeltaTable.to_pyarrow_dataset()``) read them.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
from pyspark.sql import DataFrame, SparkSession

from eagle_spark import classic
from eagle_spark.errors import BadInputError
from eagle_spark.io.parts import filesystem_for

log = logging.getLogger(__name__)

DELTA_LOG = "_delta_log"


def is_delta(path: str) -> bool:
    """Whether `path` holds a Delta table (has a ``_delta_log`` folder)."""
    fs, inner = filesystem_for(path)
    return fs.get_file_info(posixpath.join(inner, DELTA_LOG)).type == pa.fs.FileType.Directory


def delta_jars_available(spark: SparkSession) -> bool:
    """Whether Delta's JVM classes (delta-spark) are on the session's classpath."""
    try:
        classic.jvm(spark).java.lang.Class.forName("io.delta.tables.DeltaTable")
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def _parquet_batches(folder: str) -> pa.RecordBatchReader:
    """The rows of a Parquet table folder as a stream (hidden ``_``/``.`` files skipped)."""
    fs, inner = filesystem_for(folder)
    dataset = pads.dataset(inner, format="parquet", filesystem=fs)
    return pa.RecordBatchReader.from_batches(dataset.schema, dataset.to_batches(batch_size=65536))


def publish_delta(
    spark: SparkSession | None, parquet_folder: str, table: str, writer: str = "auto"
) -> dict[str, Any]:
    """Write the rows of a Parquet table as a new version of the Delta table at `table`.

    Args:
        spark: the active session (may be None with ``writer="deltalake"``).
        parquet_folder: finished Parquet table folder (e.g. ``<assign output>/assignments``).
        table: Delta table path (created at version 0 when absent; local path or URI).
        writer: ``auto`` (delta-spark when its jars are loaded, else deltalake), ``spark`` or
            ``deltalake``.
    Returns:
        {"table", "version", "rows", "writer"}.
    Raises:
        BadInputError: `parquet_folder` does not exist, or ``writer="spark"`` without the jars.
        ValueError: an unknown `writer`.
    """
    if writer not in ("auto", "spark", "deltalake"):
        raise ValueError(f"writer must be auto, spark or deltalake, got {writer!r}")
    fs, inner = filesystem_for(parquet_folder)
    if fs.get_file_info(inner).type != pa.fs.FileType.Directory:
        raise BadInputError(f"table {parquet_folder} does not exist")
    jars = spark is not None and delta_jars_available(spark)
    if writer == "spark" and not jars:
        raise BadInputError(
            "writer=spark needs a session with Delta's jars on the classpath "
            "(--packages io.delta:delta-spark_2.13:<version>)"
        )
    use_spark = spark is not None and jars and writer in ("spark", "auto")
    from deltalake import DeltaTable, write_deltalake

    if use_spark and spark is not None:
        spark.read.parquet(parquet_folder).write.format("delta").mode("overwrite").save(table)
    else:
        write_deltalake(table, _parquet_batches(parquet_folder), mode="overwrite")
    dt = DeltaTable(table)
    rows = sum(int(a) for a in dt.get_add_actions(flatten=True).column("num_records").to_pylist())
    out = {
        "table": table,
        "version": int(dt.version()),
        "rows": rows,
        "writer": "delta-spark" if use_spark else "deltalake",
    }
    log.info("delta %s: version %d, %d rows (%s)", table, out["version"], rows, out["writer"])
    return out


def read_delta(spark: SparkSession, table: str, version: int | None = None) -> DataFrame:
    """Read a Delta table in Spark: its live files of `version` (default the latest).

    Without Delta's jars Spark cannot read the log, and a plain ``read.parquet`` of the folder would
    also read files removed by later versions (measured: it returns wrong rows); this reads exactly
    the version's files.

    Raises:
        BadInputError: `table` is not a Delta table.
    """
    if not is_delta(table):
        raise BadInputError(f"{table} is not a Delta table (no {DELTA_LOG}/)")
    if delta_jars_available(spark):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(table)
    from deltalake import DeltaTable

    return spark.read.parquet(*DeltaTable(table, version=version).file_uris())


__all__ = ["delta_jars_available", "is_delta", "publish_delta", "read_delta"]
