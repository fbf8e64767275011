"""Read and write the tables and the manifest of a dataset folder (layout in :mod:`eagle_spark.schemas`).

Readers check that a table exists and has the layout's schema, and raise :class:`BadInputError`
naming the folder and the column otherwise; writers select the layout's columns in order and cast
them to its types, so every dataset on disk has exactly the documented schema.
"""

from __future__ import annotations

import datetime as _dt
import json
import posixpath
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.io.fs import FileSystem, restore_interrupted
from eagle_spark.io.integrity import check_counts, check_folder


def table_path(dataset: str, name: str) -> str:
    """Path of table `name` (``X``, ``Y``, ``Y1``, ``Y2``, ...) inside `dataset`."""
    return posixpath.join(dataset.rstrip("/"), name)


def new_manifest(kind: str, **fields: Any) -> dict[str, Any]:
    """A manifest dict with the common keys filled in.

    Args:
        kind: what wrote it (``ingest``, ``aggregate``, ...).
        fields: further keys (n_samples, n_features, n_labels, source, parameters, ...).
    Returns:
        ``{"format_version", "kind", "created_at" (UTC ISO-8601), "eagle_spark_version", **fields}``.
    """
    from eagle_spark import __version__

    return {
        "format_version": S.FORMAT_VERSION,
        "kind": kind,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "eagle_spark_version": __version__,
        **fields,
    }


def write_manifest(spark: SparkSession, folder: str, manifest: Mapping[str, Any]) -> None:
    """Write ``<folder>/_manifest.json`` (pretty JSON, sorted keys)."""
    text = strict_json(manifest, indent=2, sort_keys=True) + "\n"
    FileSystem(spark).write_bytes(posixpath.join(folder, S.MANIFEST), text.encode("utf-8"))


def read_manifest(spark: SparkSession, folder: str, what: str = "dataset") -> dict[str, Any]:
    """Read ``<folder>/_manifest.json``, after checking the folder's files against its file list.

    Args:
        what: how messages name the folder (``dataset``, ``predictions``, ...).

    Raises:
        BadInputError: the folder or its manifest is missing, is not JSON, or has another
            ``format_version``; a file is missing, altered or added
            (:func:`eagle_spark.io.integrity.check_folder`); the manifest's sizes disagree with
            the tables (:func:`eagle_spark.io.integrity.check_counts`).
    """
    fs = FileSystem(spark)
    restore_interrupted(fs, folder)
    if not fs.exists(folder):
        raise BadInputError(f"{what} {folder} does not exist")
    path = posixpath.join(folder, S.MANIFEST)
    try:
        manifest = json.loads(fs.read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        raise BadInputError(f"{path} is missing: {folder} is not an eagle_spark dataset") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInputError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(manifest, dict):
        raise BadInputError(f"{path} must hold a JSON object")
    version = manifest.get("format_version")
    if version != S.FORMAT_VERSION:
        raise BadInputError(
            f"{path} has format_version {version!r}; this eagle_spark reads {S.FORMAT_VERSION}"
        )
    listing = check_folder(folder, what)
    if listing is not None:
        check_counts(folder, manifest, listing, what)
    return manifest


def conform(
    df: DataFrame, schema: T.StructType, what: str, optional: Sequence[T.StructField] = ()
) -> DataFrame:
    """Select `schema`'s columns in order, then the `optional` ones `df` has, cast to their types.

    Raises:
        BadInputError: a column is missing or has a type that does not cast safely.
    """
    missing = [f.name for f in schema.fields if f.name not in df.columns]
    if missing:
        raise BadInputError(f"{what} lacks column {missing[0]!r} (has {', '.join(df.columns)})")
    cols = []
    for f in list(schema.fields) + [f for f in optional if f.name in df.columns]:
        actual = df.schema[f.name].dataType
        if not S.spark_type_equal(actual, f.dataType) and not _safe_cast(actual, f.dataType):
            raise BadInputError(
                f"{what}: column {f.name!r} has type {actual.simpleString()}, "
                f"expected {f.dataType.simpleString()}"
            )
        if S.spark_type_equal(actual, f.dataType):
            cols.append(F.col(f.name))
        else:
            cols.append(F.col(f.name).cast(_nullable(f.dataType)).alias(f.name))
    return df.select(*cols)


def _nullable(dt: T.DataType) -> T.DataType:
    """`dt` with nullable array elements (Spark will not cast to a non-nullable element type)."""
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_nullable(dt.elementType), True)
    return dt


def _safe_cast(actual: T.DataType, expected: T.DataType) -> bool:
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    if isinstance(expected, T.ArrayType):
        return isinstance(actual, T.ArrayType) and _safe_cast(
            actual.elementType, expected.elementType
        )
    if isinstance(expected, (T.LongType, T.IntegerType)):
        return isinstance(actual, integral)
    if isinstance(expected, T.FloatType):
        return isinstance(actual, integral + (T.FloatType, T.DoubleType))
    return S.spark_type_equal(actual, expected)


def write_table(df: DataFrame, dataset: str, name: str, mode: str = "error") -> None:
    """Write `df` as Parquet table `name` of `dataset`, conformed to the layout's schema.

    Args:
        df: frame with at least the table's columns.
        dataset: dataset folder (usually the temporary folder of an atomic commit).
        name: ``X``, ``Y``, ``Y1``, ``Y2`` (layout tables) or another name (written as is).
        mode: Spark save mode.
    """
    schema = S.TABLE_SCHEMAS.get(name)
    out = (
        conform(df, schema, f"table {name}", S.OPTIONAL_COLUMNS.get(name, ()))
        if schema is not None
        else df
    )
    out.write.mode(mode).parquet(table_path(dataset, name))


def has_table(spark: SparkSession, dataset: str, name: str) -> bool:
    """Whether `dataset` has table `name`."""
    return FileSystem(spark).exists(table_path(dataset, name))


def require_tables(
    spark: SparkSession, dataset: str, names: tuple[str, ...], hint: str = ""
) -> dict[str, Any]:
    """Read `dataset`'s manifest and check that it has the tables `names`.

    Args:
        hint: appended to the error message (e.g. ``" (aggregate it first)"``).
    Returns:
        The manifest.
    Raises:
        BadInputError: the folder or manifest is missing or bad, or a table is missing.
    """
    manifest = read_manifest(spark, dataset)
    for name in names:
        if not has_table(spark, dataset, name):
            raise BadInputError(f"dataset {dataset} has no {name} table{hint}")
    return manifest


def read_table(spark: SparkSession, dataset: str, name: str) -> DataFrame:
    """Read table `name` of `dataset`, checked against the layout's schema.

    Returns:
        DataFrame with exactly the layout's columns and types (for layout tables).
    Raises:
        BadInputError: the table is missing or has a wrong schema (message names the table path).
    """
    path = table_path(dataset, name)
    if not FileSystem(spark).exists(path):
        raise BadInputError(f"table {path} does not exist")
    df = spark.read.parquet(path)
    schema = S.TABLE_SCHEMAS.get(name)
    return (
        conform(df, schema, f"table {path}", S.OPTIONAL_COLUMNS.get(name, ()))
        if schema is not None
        else df
    )
