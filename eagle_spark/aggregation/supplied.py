"""Read and validate user-supplied aggregated labels: Y1 (sample -> group) and Y2 (group -> labels).

Tables come as Parquet (a file or a folder) or CSV with a header row (``.csv`` file or a folder of
them): Y1 columns ``sample_id, group_id``; Y2 columns ``group_id, label_id`` and optionally
``count`` (multiplicity, default 1). Ids refer to an ingested X.

Checks, in this order (each one sees the rows the previous ones kept):

====  =====  ===============================================================
 #    table  rejected rows
====  =====  ===============================================================
 1    Y1     missing, non-numeric or negative sample_id / group_id
 2    Y1     duplicate (sample_id, group_id) rows (all copies after the first)
 3    Y1     sample_id not in X
 4    Y2     missing, non-numeric or negative group_id / label_id; count < 1
 5    Y2     label_id >= n_labels
 6    Y2     duplicate (group_id, label_id) rows (the copy with the largest count is kept)
 7    Y2     groups without members in Y1
 8    Y1     members of groups absent from Y2 (groups with no labels)
====  =====  ===============================================================

With ``on_bad_row=fail`` the first failing check raises :class:`BadInputError` naming the table
path, the smallest offending id and how many rows fail; with ``skip`` the rows are dropped and
counted per check in the manifest (``rejected``). A CSV cell that is not a whole number is reported
with its file, line number and the line's text (``Y1 table t.csv:7: sample_id 'abc' is not a
non-negative whole number: line 'abc,3'``).

The same checks define a valid aggregated dataset for ``pipeline --no-aggregate``
(:mod:`eagle_spark.aggregation.check`).
"""

from __future__ import annotations

import csv
import io
import logging
from typing import Any, Callable, Optional

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError
from eagle_spark.io.fs import FileSystem
from eagle_spark.rows import first_row

log = logging.getLogger(__name__)


def read_user_table(
    spark: SparkSession, path: str, columns: list[str], optional: tuple = ()
) -> DataFrame:
    """Read a Parquet or CSV table and cast its id columns to long with ``try_cast`` (bad -> null).

    Args:
        spark: the active session.
        path: Parquet file/folder, or CSV file/folder (``.csv`` suffix or CSV files inside).
        columns: required columns.
        optional: columns that may be absent.
    Returns:
        DataFrame with the required (and present optional) columns as long.
    Raises:
        BadInputError: the path is missing, unreadable, or lacks a required column.
    """
    fs = FileSystem(spark)
    if not fs.exists(path):
        raise BadInputError(f"table {path} does not exist")
    is_csv = path.endswith(".csv") or (
        fs.is_dir(path) and any(n.endswith(".csv") for n in fs.list(path))
    )
    try:
        df = spark.read.option("header", True).csv(path) if is_csv else spark.read.parquet(path)
        present = df.columns
    except Exception as err:  # Spark's AnalysisException for unreadable files
        raise BadInputError(
            f"table {path} cannot be read as {'CSV' if is_csv else 'Parquet'}: "
            f"{str(err).splitlines()[0]}"
        ) from err
    missing = [c for c in columns if c not in present]
    if missing:
        raise BadInputError(f"table {path} lacks column {missing[0]!r} (has {', '.join(present)})")
    keep = columns + [c for c in optional if c in present]
    raw = (
        (
            [F.col(f"`{c}`").cast("string").alias(f"{_RAW}{c}") for c in keep]
            + [F.col("_metadata.file_path").alias(_FILE)]
        )
        if is_csv
        else []
    )
    return df.select(*[F.expr(f"try_cast(`{c}` as bigint)").alias(c) for c in keep], *raw)


_RAW = "_raw_"
_FILE = "_file"


def _csv_line(
    spark: SparkSession, file_path: str, row: dict[str, Any]
) -> Optional[tuple[int, str]]:
    """(1-based line number, text) of the first data line of CSV file `file_path` whose cells equal
    the raw cells of `row`; None when not found. Runs on the driver, on the failure path only."""
    fs = FileSystem(spark)
    try:
        text = fs.read_bytes(file_path).decode("utf-8", "replace")
    except OSError:
        return None
    lines = text.splitlines()
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return None
    want = {k[len(_RAW) :]: v for k, v in row.items() if k.startswith(_RAW)}
    for number, cells in enumerate(reader, start=2):
        by_name = dict(zip(header, cells, strict=False))  # short rows: missing cells
        if all((by_name.get(c) if by_name.get(c) != "" else None) == v for c, v in want.items()):
            return number, lines[number - 1] if number - 1 < len(lines) else ",".join(cells)
    return None


def _bad_cell(
    spark: Optional[SparkSession], what: str, row: dict[str, Any], columns: list[str], default: str
) -> str:
    """The message for a row with a missing, non-numeric or negative id: with the CSV line and
    its text when the table is CSV (`row` has raw cells), else `default`."""
    if spark is None or _FILE not in row:
        return default
    least = {S.COUNT: 1}
    bad = next((c for c in columns if row.get(c) is None or row[c] < least.get(c, 0)), columns[0])
    raw = row.get(f"{_RAW}{bad}")
    valid = "a whole number >= 1" if bad == S.COUNT else "a non-negative whole number"
    found = _csv_line(spark, row[_FILE], row)
    where = f"{what} {row[_FILE]}:{found[0]}" if found else f"{what} {row[_FILE]}"
    text = f": line {found[1]!r}" if found else ""
    if raw is None:
        return f"{where}: {bad} is empty{text}"
    return f"{where}: {bad} {raw!r} is not {valid}{text}"


class _Checker:
    """Applies one check: fail on the first offence, or drop and count."""

    def __init__(self, on_bad_row: str) -> None:
        self.on_bad_row = on_bad_row
        self.rejected: dict[str, int] = {}

    def apply(
        self,
        df: DataFrame,
        bad: Column,
        name: str,
        describe: Callable[[dict], str],
        order: list[str],
    ) -> DataFrame:
        flagged = df.withColumn("_bad", F.coalesce(bad, F.lit(True)))
        n_bad = flagged.where("_bad").count()
        if n_bad:
            if self.on_bad_row == "fail":
                first = first_row(
                    flagged.where("_bad").orderBy(*[F.col(c).asc_nulls_first() for c in order]),
                    "apply",
                )
                more = f" ({n_bad} rows fail this check)" if n_bad > 1 else ""
                raise BadInputError(describe(first.asDict()) + more)
            self.rejected[name] = n_bad
            log.warning("dropped %d rows: %s", n_bad, name)
        return flagged.where(~F.col("_bad")).drop("_bad")


def _first_copy(df: DataFrame, keys: list[str], tie: list | None = None) -> Column:
    """True on every copy of a key after the first, ordered by `tie` columns (deterministic)."""
    from pyspark.sql import Window

    return F.row_number().over(Window.partitionBy(*keys).orderBy(*(tie or keys))) > 1


def validate_supplied(
    X: DataFrame,
    Y1: DataFrame,
    Y2: DataFrame,
    n_labels: int,
    on_bad_row: str,
    y1_path: str,
    y2_path: str,
) -> tuple[DataFrame, DataFrame, dict[str, int]]:
    """Validate user Y1 / Y2 against X (checks in the module docstring).

    Args:
        X: DataFrame[sample_id, ...] of the ingested data.
        Y1: DataFrame[sample_id long, group_id long] (nulls where a value did not parse).
        Y2: DataFrame[group_id long, label_id long, count long (optional)].
        n_labels: labels must be below this.
        on_bad_row: ``fail`` or ``skip``.
        y1_path, y2_path: paths named in messages.
    Returns:
        (Y1, Y2, rejected): cleaned tables in the layout's columns and the per-check drop counts.
    Raises:
        BadInputError: a check failed with ``on_bad_row=fail``.
        ValueError: `on_bad_row` is neither fail nor skip.
    """
    if on_bad_row not in ("fail", "skip"):
        raise ValueError(f"on_bad_row must be fail or skip, got {on_bad_row!r}")
    check = _Checker(on_bad_row)
    y1 = f"Y1 table {y1_path}"
    y2 = f"Y2 table {y2_path}"
    if "count" not in Y2.columns:
        Y2 = Y2.withColumn(S.COUNT, F.lit(1).cast("long"))

    spark = Y1.sparkSession
    Y1 = check.apply(
        Y1,
        F.col(S.SAMPLE_ID).isNull()
        | F.col(S.GROUP_ID).isNull()
        | (F.col(S.SAMPLE_ID) < 0)
        | (F.col(S.GROUP_ID) < 0),
        "Y1: missing or negative id",
        lambda r: _bad_cell(
            spark,
            "Y1 table",
            r,
            [S.SAMPLE_ID, S.GROUP_ID],
            f"{y1}: row (sample_id={r[S.SAMPLE_ID]}, group_id={r[S.GROUP_ID]}) has a "
            "missing, non-numeric or negative id",
        ),
        [S.SAMPLE_ID, S.GROUP_ID],
    )
    Y1 = check.apply(
        Y1,
        _first_copy(Y1, [S.SAMPLE_ID, S.GROUP_ID]),
        "Y1: duplicate row",
        lambda r: f"{y1}: duplicate row (sample_id={r[S.SAMPLE_ID]}, group_id={r[S.GROUP_ID]})",
        [S.SAMPLE_ID, S.GROUP_ID],
    )
    known = X.select(S.SAMPLE_ID, F.lit(True).alias("_in_x"))
    Y1 = check.apply(
        Y1.join(known, S.SAMPLE_ID, "left"),
        F.col("_in_x").isNull(),
        "Y1: sample_id not in X",
        lambda r: f"{y1}: sample_id {r[S.SAMPLE_ID]} is not in X",
        [S.SAMPLE_ID],
    ).drop("_in_x")

    Y2 = check.apply(
        Y2,
        F.col(S.GROUP_ID).isNull()
        | F.col(S.LABEL_ID).isNull()
        | F.col(S.COUNT).isNull()
        | (F.col(S.GROUP_ID) < 0)
        | (F.col(S.LABEL_ID) < 0)
        | (F.col(S.COUNT) < 1),
        "Y2: missing or negative id, or count < 1",
        lambda r: _bad_cell(
            spark,
            "Y2 table",
            r,
            [S.GROUP_ID, S.LABEL_ID, S.COUNT],
            f"{y2}: row (group_id={r[S.GROUP_ID]}, label_id={r[S.LABEL_ID]}, "
            f"count={r[S.COUNT]}) has a missing, non-numeric or negative id or a "
            "count < 1",
        ),
        [S.GROUP_ID, S.LABEL_ID],
    )
    Y2 = check.apply(
        Y2,
        F.col(S.LABEL_ID) >= n_labels,
        "Y2: label_id out of range",
        lambda r: (
            f"{y2}: label_id {r[S.LABEL_ID]} (group_id={r[S.GROUP_ID]}) is out of range "
            f"[0, {n_labels})"
        ),
        [S.LABEL_ID],
    )
    Y2 = check.apply(
        Y2,
        _first_copy(Y2, [S.GROUP_ID, S.LABEL_ID], [F.col(S.COUNT).desc()]),
        "Y2: duplicate row",
        lambda r: f"{y2}: duplicate row (group_id={r[S.GROUP_ID]}, label_id={r[S.LABEL_ID]})",
        [S.GROUP_ID, S.LABEL_ID],
    )
    members = Y1.select(S.GROUP_ID).distinct().withColumn("_has_members", F.lit(True))
    Y2 = check.apply(
        Y2.join(members, S.GROUP_ID, "left"),
        F.col("_has_members").isNull(),
        "Y2: group without members",
        lambda r: f"{y2}: group_id {r[S.GROUP_ID]} has labels but no members in Y1",
        [S.GROUP_ID],
    ).drop("_has_members")
    labelled = Y2.select(S.GROUP_ID).distinct().withColumn("_has_labels", F.lit(True))
    Y1 = check.apply(
        Y1.join(labelled, S.GROUP_ID, "left"),
        F.col("_has_labels").isNull(),
        "Y1: group without labels",
        lambda r: f"{y1}: group_id {r[S.GROUP_ID]} has members but no labels in Y2",
        [S.GROUP_ID],
    ).drop("_has_labels")
    Y1 = Y1.select(S.SAMPLE_ID, S.GROUP_ID)
    Y2 = Y2.select(S.GROUP_ID, F.col(S.LABEL_ID).cast("int"), F.col(S.COUNT).cast("int"))
    return Y1, Y2, check.rejected
