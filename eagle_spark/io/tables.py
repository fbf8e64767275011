"""Read and write the tables and the manifest of a dataset folder (layout in :mod:`eagle_spark.schemas`).

Readers check that a table exists and has the layout's schema, and raise :class:`BadInputError`
naming the folder and the column otherwise; writers select the layout's columns in order and cast
them to its types, so every dataset on disk has exactly the documented schema.
"""

from __future__ import annotations

import datetime as _dt
import json
import posixpath
from typing import Any, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.io.fs import FileSystem, resolve, restore_interrupted
from eagle_spark.io.integrity import MARK, check_counts, check_folder


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
    from eagle_spark._version import __version__

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


def used_parameters(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a stage's output was made with: for an ``assign`` output of
    ``weighting=auto``, what it chose (``used``), else what was asked (``parameters``); {} when
    the manifest has neither."""
    return dict(manifest.get("used") or manifest.get("parameters") or {})


def manifest_token(spark: SparkSession, folder: str) -> str:
    """What identifies one commit of `folder`: the SHA-256 (hex) of its ``_manifest.json`` bytes.

    A copy of the folder keeps it; writing the folder again (even from the same inputs) changes
    it, as the manifest records when it was written.

    Raises:
        BadInputError: the folder has no manifest.
    """
    import hashlib

    path = posixpath.join(folder, S.MANIFEST)
    try:
        return hashlib.sha256(FileSystem(spark).read_bytes(path)).hexdigest()
    except FileNotFoundError:
        raise BadInputError(f"{path} is missing: {folder} is not an eagle_spark dataset") from None


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
    manifest.pop(MARK, None)  # the integrity layer's mark, not a fact of the data
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
    """`dt` with nullable array elements, struct fields and map values, as Spark reads files (and
    Spark will not cast to a non-nullable element type)."""
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_nullable(dt.elementType), True)
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True) for f in dt])
    if isinstance(dt, T.MapType):
        return T.MapType(_nullable(dt.keyType), _nullable(dt.valueType), True)
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


_SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
"""Footer key under which Spark's Parquet writer stores the DataFrame's schema (JSON)."""

_PLAIN_SPARK_TYPES = {
    pa.bool_(): T.BooleanType(),
    pa.int32(): T.IntegerType(),
    pa.int64(): T.LongType(),
    pa.float32(): T.FloatType(),
    pa.float64(): T.DoubleType(),
    pa.string(): T.StringType(),
}
"""Arrow types of a pyarrow-written footer whose Spark type is certain (Spark's Parquet reader
maps INT32, INT64, FLOAT, DOUBLE, BOOLEAN and UTF8 strings so); anything else is left to Spark."""


def _spark_type(arrow: pa.DataType) -> Optional[T.DataType]:
    if pa.types.is_list(arrow):
        element = _spark_type(arrow.value_type)
        return None if element is None else T.ArrayType(element, True)
    return _PLAIN_SPARK_TYPES.get(arrow)


def parquet_schema(path: str) -> Optional[T.StructType]:
    """The schema Spark infers for the Parquet folder `path`, read from one footer with pyarrow on
    the driver, so that reading needs no Spark job (Spark's inference runs one per read, ~0.1 s
    each and about a third of the jobs of the README's main job).

    Like Spark with ``spark.sql.parquet.mergeSchema`` off, one data file's footer stands for the
    folder: the first by name among those Spark reads (not ``_``- or ``.``-prefixed). Its schema is
    the one Spark's writer stored in the footer when there is one, else the footer's Arrow schema
    when every column is a boolean, int32, int64, float, double or string, or a list of those.

    Returns:
        A StructType with every field nullable (as Spark reads files), or None when Spark must
        infer: `path` is a file, has sub-folders or no data file, its footer cannot be read here,
        or it has another type.
    """
    fs, root = resolve(path)
    try:
        visible = _visible(fs, root)
    except (OSError, ValueError):
        return None
    files = sorted(e.path for e in visible if e.type == pafs.FileType.File)
    if not files or len(files) != len(visible):
        return None
    try:
        with fs.open_input_file(files[0]) as handle:
            schema = pq.read_schema(handle)
    except (OSError, pa.ArrowException):
        return None
    stored = (schema.metadata or {}).get(_SPARK_SCHEMA_KEY)
    if stored is not None:
        try:
            spark_schema = _nullable(T.StructType.fromJson(json.loads(stored)))
        except (ValueError, KeyError, TypeError, AttributeError):  # a type this pyspark lacks
            return None
        return spark_schema if isinstance(spark_schema, T.StructType) else None
    fields = []
    for field in schema:
        kind = _spark_type(field.type)
        if kind is None:
            return None
        fields.append(T.StructField(field.name, kind, True))
    return T.StructType(fields)


def _visible(fs: pafs.FileSystem, root: str) -> list[pafs.FileInfo]:
    """The entries of folder `root` that Spark reads (not ``_``- or ``.``-prefixed).

    Raises:
        OSError, ValueError: the folder cannot be listed.
    """
    entries = fs.get_file_info(pafs.FileSelector(root))
    return [e for e in entries if not posixpath.basename(e.path).startswith(("_", "."))]


def table_rows(dataset: str, name: str) -> int:
    """Rows of table `name` of `dataset`, summed from the footers of the Parquet files Spark reads
    (:func:`_visible`), so counting reads no data and runs no Spark job.

    Raises:
        BadInputError: the table is missing, has sub-folders (a layout counted by Spark only), or
            a file's footer cannot be read (the message names the table or the file).
    """
    path = table_path(dataset, name)
    fs, root = resolve(path)
    try:
        visible = _visible(fs, root)
    except (OSError, ValueError) as err:
        raise BadInputError(f"table {path} cannot be listed: {err}") from err
    if any(e.type != pafs.FileType.File for e in visible):
        raise BadInputError(f"table {path} has sub-folders: its rows cannot be read from footers")
    rows = 0
    for entry in visible:
        try:
            with fs.open_input_file(entry.path) as handle:
                rows += pq.read_metadata(handle).num_rows
        except (OSError, pa.ArrowException) as err:
            raise BadInputError(f"{entry.path}: not a readable Parquet file ({err})") from err
    return rows


def read_parquet(spark: SparkSession, path: str) -> DataFrame:
    """``spark.read.parquet(path)`` with the schema of :func:`parquet_schema` when it can tell it
    (no schema-inference job), else as Spark infers it: the same DataFrame either way."""
    schema = parquet_schema(path)
    return (spark.read if schema is None else spark.read.schema(schema)).parquet(path)


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
    df = read_parquet(spark, path)
    schema = S.TABLE_SCHEMAS.get(name)
    return (
        conform(df, schema, f"table {path}", S.OPTIONAL_COLUMNS.get(name, ()))
        if schema is not None
        else df
    )
