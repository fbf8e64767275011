"""DataFrames <-> dataset folders: how the Python API hands pyspark.ml frames to the Spark stages.

The stages (``embed``, ``assign``, ``train_tree``, ``train_ova``, ``predict``) read dataset folders
on storage every executor reaches (executor-side Parquet reads of X, the memory-mapped executor
state). A frame given to an estimator is therefore either

* **backed**: it came from :meth:`eagle_spark.ml.Dataset.samples` or from a ``transform`` of this
  API and still is that very object; it carries a :class:`Source` (the folder and which of its
  columns are which tables), and the stage reads the folder as it is: nothing is copied; or
* **in memory**: anything else. It is written once as a temporary dataset (:func:`materialise`):
  its rows with an internal sample id, X from the features column, Y from the labels column, Y1
  and Y2 from the group columns. This costs one write of the frame and one of each table.

Results come back as columns joined to the caller's rows by that sample id (:func:`attach`), so a
``transform`` keeps every input row and column and adds its own.

Temporary folders live under the *work folder*: the Spark setting ``spark.eagle_spark.workDir``
when set (on a cluster it must be storage every executor reaches, e.g. a shared file system or
an object-store URI pyarrow supports), else a folder under the driver's temporary directory,
deleted when the Python process exits. A fitted model's data stays there until the model is saved.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from typing import Callable, Iterable, Mapping, Optional

from pyspark.ml.linalg import VectorUDT
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eagle_spark import schemas as S
from eagle_spark.aggregation.groups import dense_rank
from eagle_spark.io.convert import from_ml_vectors
from eagle_spark.io.tables import new_manifest, read_parquet, write_manifest, write_table
from eagle_spark.io.work import WORK_DIR_CONF, work_folder

ROWS = "rows"
"""Folder of a materialised dataset holding the caller's rows with :data:`KEY` (a name Spark does
not take for hidden: it skips a path component starting with ``_`` or ``.``)."""

log = logging.getLogger(__name__)

KEY = "_eagle_sample"
"""The internal sample id column of a materialised frame's rows (never in a returned frame)."""

_sources: dict[int, tuple[weakref.ref, "Source"]] = {}
"""id(frame) -> (a weak reference to the frame, its Source): the frames this API made."""


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a frame's data sits as a dataset folder.

    Attributes:
        path: dataset folder (X, and Y / Y1 / Y2 for the roles it backs).
        columns: role -> the frame's column holding it; a role is ``features`` (X), ``group``
            (Y1), ``group_labels`` (Y2 through the group), ``labels`` (Y) or ``label_weights``
            (Y's label weights, weighted assignment).
        keyed: a frame with the caller's columns plus `key` (the dataset's sample_id), used to join
            results back to the rows.
        key: the sample id column of `keyed`.
        n_features: the dataset's n_features.
        n_labels: the dataset's n_labels.
    """

    path: str
    columns: Mapping[str, str]
    keyed: DataFrame
    key: str
    n_features: int
    n_labels: int


def source_of(df: DataFrame) -> Optional[Source]:
    """The :class:`Source` a frame carries (None for a frame the API did not make)."""
    entry = _sources.get(id(df))
    return entry[1] if entry is not None and entry[0]() is df else None


def _forget(registry: dict, key: int) -> Callable[[weakref.ref], None]:
    """The weak reference's callback: drop `key` from `registry` (which it holds itself, since
    at interpreter exit the module's names are already cleared when the last frames go)."""

    def forget(_: weakref.ref) -> None:
        registry.pop(key, None)

    return forget


def tag(df: DataFrame, source: Source) -> DataFrame:
    """Mark `df` as backed by `source`; returns `df`.

    The mark is kept beside the frame (keyed by the object, dropped when the frame is garbage
    collected), not as an attribute of it: a Spark Connect DataFrame reads unknown attributes as
    column references.
    """
    key = id(df)
    _sources[key] = (weakref.ref(df, _forget(_sources, key)), source)
    return df


def _is_integral_array(dt: T.DataType) -> bool:
    return isinstance(dt, T.ArrayType) and isinstance(
        dt.elementType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    )


def check_columns(df: DataFrame, columns: Mapping[str, str], where: str) -> None:
    """Check that `df` has every column a stage needs, of the right type, before any job runs.

    Args:
        df: the caller's frame.
        columns: role -> column name. ``features``: a Spark ML vector column, or, when the frame
            has no column of that name, ``feat_idx`` (array of whole numbers) and ``feat_val``
            (array of numbers) side by side; ``group``: any atomic column (null: the row is in no
            group); ``group_labels`` and ``labels``: arrays of whole numbers (label ids >= 0).
        where: the caller (``GRLR.fit``, ...), for the messages.
    Raises:
        ValueError: a column is missing (the message lists the frame's columns).
        TypeError: a column has the wrong type (the message names it, its type and what it needs).
    """
    have = df.schema
    names = df.columns
    for role, col in columns.items():
        if role == "features" and col not in names and S.FEAT_IDX in names and S.FEAT_VAL in names:
            idx, val = have[S.FEAT_IDX].dataType, have[S.FEAT_VAL].dataType
            if not _is_integral_array(idx) or not (
                isinstance(val, T.ArrayType) and isinstance(val.elementType, T.NumericType)
            ):
                raise TypeError(
                    f"{where}: columns {S.FEAT_IDX!r} / {S.FEAT_VAL!r} must be arrays of whole "
                    f"numbers / numbers, got {idx.simpleString()} / {val.simpleString()}"
                )
            continue
        if col not in names:
            extra = f" (or {S.FEAT_IDX!r} and {S.FEAT_VAL!r} arrays)" if role == "features" else ""
            raise ValueError(
                f"{where}: the frame has no {role} column {col!r}{extra}; it has {', '.join(names)}"
            )
        dt = have[col].dataType
        if role == "features" and not isinstance(dt, VectorUDT):
            raise TypeError(
                f"{where}: column {col!r} (features) must be a Spark ML vector "
                f"(SparseVector), got {dt.simpleString()}"
            )
        if role == "label_weights" and not (
            isinstance(dt, T.ArrayType) and isinstance(dt.elementType, T.NumericType)
        ):
            raise TypeError(
                f"{where}: column {col!r} (label_weights) must be an array of numbers "
                f"(array<float>), got {dt.simpleString()}"
            )
        if role in ("group_labels", "labels") and not _is_integral_array(dt):
            raise TypeError(
                f"{where}: column {col!r} ({role}) must be an array of label ids "
                f"(array<int>), got {dt.simpleString()}"
            )
        if role == "group" and isinstance(dt, (T.ArrayType, T.MapType, T.StructType, VectorUDT)):
            raise TypeError(
                f"{where}: column {col!r} (group) must be an atomic value such as a "
                f"long or a string, got {dt.simpleString()}"
            )


def source_for(
    df: DataFrame,
    columns: Mapping[str, str],
    where: str,
    n_features: Optional[int] = None,
    n_labels: Optional[int] = None,
) -> Source:
    """The dataset folder a stage reads for `df`: its own when it is backed and covers `columns`,
    else a temporary dataset written from it (:func:`materialise`).

    Args:
        df: the caller's frame.
        columns: role -> column name the stage needs.
        where: the caller, for messages.
        n_features: the feature space when the frame's features are arrays (default: largest id + 1;
            a vector column gives its own size).
        n_labels: the label space (default: largest label id + 1 in the frame).
    Returns:
        The :class:`Source`.
    Raises:
        ValueError, TypeError: as :func:`check_columns` and :func:`materialise`.
    """
    check_columns(df, columns, where)
    src = source_of(df)
    if (
        src is not None
        and all(src.columns.get(role) == col for role, col in columns.items())
        and ("label_weights" in src.columns) == ("label_weights" in columns)
    ):
        return src
    return materialise(
        df, columns, work_folder(df.sparkSession, "dataset"), where, n_features, n_labels
    )


def _label_ids(col: str) -> F.Column:
    return F.coalesce(F.col(col), F.array()).cast(T.ArrayType(T.IntegerType()))


def _row_named(rows: DataFrame, key: int) -> str:
    """How a message names the frame's row of internal id `key`: its position in the frame's
    order and, when the frame has a ``sample_id`` column, that value (one small job)."""
    said = f"row {key} of the frame (0-based, in its order)"
    if S.SAMPLE_ID in rows.columns:
        found = rows.where(F.col(KEY) == key).select(S.SAMPLE_ID).first()
        if found is not None:
            said = f"the sample with sample_id {found[0]!r} ({said})"
    return said


def materialise(
    df: DataFrame,
    columns: Mapping[str, str],
    path: str,
    where: str,
    n_features: Optional[int] = None,
    n_labels: Optional[int] = None,
) -> Source:
    """Write a frame as a dataset folder (X; Y, Y1, Y2 for the roles given) and return its source.

    The frame's rows are written once with an internal sample id (0 .. n-1 in the order of
    ``monotonically_increasing_id``, made contiguous by a sort), so everything after reads that copy
    and is deterministic. Groups get ids 0 .. n_groups-1 in the order of their values; a group's
    labels (Y2) are the ``group_labels`` of its members, which must be equal for every member
    (repeated ids are the label's multiplicity, the paper's list merge).

    Args:
        df: the caller's frame.
        columns: role -> column (see :func:`check_columns`; call it first).
        path: the dataset folder to write (must not exist).
        where: the caller, for messages.
        n_features: feature space for array features (default largest id + 1); a vector column's
            size must not exceed it.
        n_labels: label space (default largest label id + 1).
    Returns:
        The :class:`Source` of the written folder, keyed by the internal id.
    Raises:
        ValueError: a feature value that is NaN or infinite (naming the sample), a feature id
            beyond `n_features` or negative, a negative label id or one beyond
            `n_labels`, a label column without any label id (every array empty or null: checked by
            the first job on the labels, before any training), members of one group with different
            ``group_labels`` (names the group), or no rows.
    """
    spark = df.sparkSession
    feat = columns.get("features")
    mid = "_eagle_mid"
    ranked = dense_rank(df.withColumn(mid, F.monotonically_increasing_id()), [mid], KEY).drop(mid)
    ranked.write.parquet(f"{path}/{ROWS}")
    rows = read_parquet(spark, f"{path}/{ROWS}")
    stats: dict = {"n_samples": rows.count()}
    if stats["n_samples"] == 0:
        raise ValueError(f"{where}: the frame has no rows")
    manifest_fields: dict = {}
    if feat is not None:
        if feat in rows.columns:
            x = from_ml_vectors(rows.select(F.col(KEY).alias(S.SAMPLE_ID), feat), feat, "_size")
        else:
            x = rows.select(
                F.col(KEY).alias(S.SAMPLE_ID),
                S.FEAT_IDX,
                S.FEAT_VAL,
                F.lit(None).cast("int").alias("_size"),
            )
        x = x.select(
            S.SAMPLE_ID,
            F.coalesce(S.FEAT_IDX, F.array()).cast(T.ArrayType(T.IntegerType())).alias(S.FEAT_IDX),
            F.coalesce(S.FEAT_VAL, F.array()).cast(T.ArrayType(T.FloatType())).alias(S.FEAT_VAL),
            "_size",
        )
        non_finite = F.exists(S.FEAT_VAL, lambda v: F.isnan(v) | (F.abs(v) == F.lit(float("inf"))))
        agg = x.agg(
            F.max("_size"),
            F.max(F.array_max(S.FEAT_IDX)),
            F.min(F.array_min(S.FEAT_IDX)),
            F.min(F.when(non_finite, F.col(S.SAMPLE_ID))),  # the first non-finite row
        ).collect()[0]
        size, hi, lo = agg[0], agg[1], agg[2]
        if agg[3] is not None:
            raise ValueError(
                f"{where}: features column {feat!r} holds a NaN or infinite value (or one beyond "
                f"float32's range) in {_row_named(rows, int(agg[3]))}; features must be finite"
            )
        if lo is not None and lo < 0:
            raise ValueError(f"{where}: features column {feat!r} holds a negative feature id {lo}")
        width = (
            n_features if n_features is not None else (size if size is not None else (hi or -1) + 1)
        )
        if hi is not None and hi >= width:
            raise ValueError(
                f"{where}: features column {feat!r} holds feature id {hi}, beyond the "
                f"feature space of {width} (numFeatures)"
            )
        write_table(x.drop("_size"), path, S.X)
        stats["n_features"] = int(width)
    label_cols = [columns[r] for r in ("labels", "group_labels") if r in columns]
    if label_cols:
        hi_lo = (
            rows.select(*[F.explode(_label_ids(c)).alias(c) for c in label_cols[:1]])
            .agg(F.max(label_cols[0]), F.min(label_cols[0]))
            .collect()[0]
        )
        his, los = [hi_lo[0]], [hi_lo[1]]
        for c in label_cols[1:]:
            r = rows.select(F.explode(_label_ids(c)).alias(c)).agg(F.max(c), F.min(c)).collect()[0]
            his.append(r[0])
            los.append(r[1])
        lo = min((v for v in los if v is not None), default=0)
        hi = max((v for v in his if v is not None), default=-1)
        if lo < 0:
            raise ValueError(
                f"{where}: label column {', '.join(map(repr, label_cols))} holds a negative "
                f"label id {lo}"
            )
        if hi < 0:
            raise ValueError(
                f"{where}: label column {', '.join(map(repr, label_cols))} holds no label "
                "id in any row (every array is empty or null): there is nothing to learn"
            )
        width = n_labels if n_labels is not None else hi + 1
        if hi >= width:
            raise ValueError(
                f"{where}: label id {hi} is beyond the label space of {width} (numLabels)"
            )
        stats["n_labels"] = int(width)
    if "labels" in columns and "label_weights" in columns:
        write_table(
            _weighted_labels(rows, columns["labels"], columns["label_weights"], where), path, S.Y
        )
    elif "labels" in columns:
        write_table(
            rows.select(
                F.col(KEY).alias(S.SAMPLE_ID),
                F.sort_array(F.array_distinct(_label_ids(columns["labels"]))).alias(S.LABEL_IDS),
            ),
            path,
            S.Y,
        )
    if "group" in columns:
        group = "_eagle_group"  # the caller's group column, renamed (it may be called group_id)
        members = rows.where(F.col(columns["group"]).isNotNull()).withColumn(
            group, F.col(columns["group"])
        )
        groups = dense_rank(members.select(group).distinct(), [group], S.GROUP_ID)
        write_table(
            members.select(F.col(KEY).alias(S.SAMPLE_ID), group)
            .join(groups, group)
            .select(S.SAMPLE_ID, S.GROUP_ID),
            path,
            S.Y1,
        )
        manifest_fields["n_groups"] = groups.count()
        if "group_labels" in columns:
            gl = columns["group_labels"]
            per_group = (
                members.select(group, F.sort_array(_label_ids(gl)).alias("_gl"))
                .groupBy(group)
                .agg(F.countDistinct("_gl").alias("_variants"), F.first("_gl").alias("_gl"))
            )
            bad = per_group.where(F.col("_variants") > 1).select(group).orderBy(group).first()
            if bad is not None:
                raise ValueError(
                    f"{where}: the members of group {bad[0]!r} (column {columns['group']!r}) "
                    f"have different {gl!r}: a group's labels must be the same on every member"
                )
            y2 = (
                per_group.join(groups, group)
                .select(S.GROUP_ID, F.explode("_gl").alias(S.LABEL_ID))
                .groupBy(S.GROUP_ID, S.LABEL_ID)
                .agg(F.count(F.lit(1)).cast("int").alias(S.COUNT))
            )
            write_table(y2, path, S.Y2)
    write_manifest(
        spark,
        path,
        new_manifest(
            "frame",
            **stats,
            **manifest_fields,
            source={"frame": where},
            tables=[
                t
                for t, role in (
                    (S.X, "features"),
                    (S.Y, "labels"),
                    (S.Y1, "group"),
                    (S.Y2, "group_labels"),
                )
                if role in columns
            ],
        ),
    )
    return Source(
        path=path,
        columns=dict(columns),
        keyed=rows,
        key=KEY,
        n_features=int(stats.get("n_features", n_features or 0)),
        n_labels=int(stats.get("n_labels", n_labels or 0)),
    )


def _weighted_labels(rows: DataFrame, labels: str, weights: str, where: str) -> DataFrame:
    """Y with label weights from a frame's labels and label weights columns: each row's labels
    sorted, its weights in their order.

    Raises:
        ValueError: a row whose weights are not one per label, a weight outside (0, 1] (or NaN), or
            a label repeated within a row (its weight would be ambiguous), naming the columns.
    """
    from eagle_spark.classifiers.base import outside_unit_weights

    lab = _label_ids(labels)
    wts = F.coalesce(F.col(weights), F.array()).cast(T.ArrayType(T.DoubleType()))
    bad = (
        rows.where(
            (F.size(lab) != F.size(wts))
            | outside_unit_weights(wts)
            | (F.size(F.array_distinct(lab)) != F.size(lab))
        )
        .select(labels, weights)
        .first()
    )
    if bad is not None:
        raise ValueError(
            f"{where}: columns {labels!r} / {weights!r} (labelWeightsCol) must hold one weight in "
            f"(0, 1] per distinct label; a row has {list(bad[0] or [])} / {list(bad[1] or [])}"
        )
    # (label, weight) structs sorted by label (distinct within a row), without a lambda
    # (outside_unit_weights says why)
    pairs = F.sort_array(F.arrays_zip(lab.alias("k"), wts.alias("w")))
    return rows.select(F.col(KEY).alias(S.SAMPLE_ID), pairs.alias("_kw")).select(
        S.SAMPLE_ID,
        F.col("_kw.k").alias(S.LABEL_IDS),
        F.col("_kw.w").cast(T.ArrayType(T.FloatType())).alias(S.LABEL_WEIGHTS),
    )


def refuse_taken(source: Source, columns: Iterable[str], where: str) -> None:
    """Refuse output columns the caller's frame already has, before any Spark job runs.

    Args:
        source: the source a stage reads (its `keyed` frame has the caller's columns).
        columns: the output column names the stage will add.
        where: the caller, for messages.
    Raises:
        ValueError: naming the first column the frame already has (transform never overwrites a
            column).
    """
    for out in columns:
        if out in source.keyed.columns:
            raise ValueError(
                f"{where}: the frame already has a column {out!r}; set the output column "
                "Param to another name"
            )


def attach(
    source: Source,
    result: DataFrame,
    new: Mapping[str, str],
    where: str,
    backs: Optional[tuple[str, Mapping[str, str]]] = None,
) -> DataFrame:
    """The caller's rows with a stage's result columns added (left join on the sample id).

    Args:
        source: the source the stage read (its `keyed` frame gives the caller's rows).
        result: DataFrame[sample_id, ...] from the stage's output.
        new: result column -> output column name.
        where: the caller, for messages.
        backs: optional (dataset folder, role -> column) the returned frame is backed by, so a
            following estimator reads that folder instead of writing the frame again.
    Returns:
        The caller's columns plus the new ones (the internal key is dropped).
    Raises:
        ValueError: an output column exists already (transform never overwrites a column).
    """
    refuse_taken(source, new.values(), where)
    keyed = source.keyed
    res = result.select(
        F.col(S.SAMPLE_ID).alias(source.key), *[F.col(c).alias(out) for c, out in new.items()]
    )
    joined = keyed.join(res, source.key, "left")
    out_df = joined.drop(KEY) if source.key == KEY else joined
    if backs is not None:
        path, cols = backs
        tag(out_df, dataclasses.replace(source, path=path, columns=dict(cols), keyed=joined))
    return out_df


__all__ = [
    "KEY",
    "ROWS",
    "Source",
    "WORK_DIR_CONF",
    "attach",
    "check_columns",
    "materialise",
    "refuse_taken",
    "source_for",
    "source_of",
    "tag",
    "work_folder",
]
