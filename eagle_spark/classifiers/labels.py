"""Training on the labels that occur: a training set whose label ids reach far beyond the labels
its Y holds is trained in a compact label space, so that the work and memory of a fit follow the
labels present, not the largest id.

Every trainer sizes its arrays by ``n_labels`` (Y as a CSC matrix of n_labels columns, one
one-vs-all problem per label, a tree with a node per label, per-label counts in every task), so a
single stray id of 10^7 in a 45-label set would train and store 10^7 labels. When ``n_labels``
exceeds twice the labels present plus :data:`SPARSE_SLACK`, :func:`labels_present` logs a
WARNING with the number of empty labels and writes, in a scratch folder of the model's output, a
copy of the training set whose labels are renumbered 0 .. m-1 in the order of their ids (X copied
byte for byte, Y renumbered, and likewise the groups' Y2 and the label representations a fit
reads). The model is trained on that copy and keeps the renumbering as ``data/label_map``
(label_index, label_id); :func:`model_label_ids` gives predictions their ids back. A training set
with few empty labels (a label missing from a training split) is trained as it is, and the model
keeps a classifier for each of them as before.

Source: this project (robustness, beyond the paper).
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.executor_state import shared_state
from eagle_spark.io.fs import FileSystem
from eagle_spark.io.integrity import record
from eagle_spark.io.parts import filesystem_for, folder_version
from eagle_spark.io.tables import (
    new_manifest,
    read_manifest,
    read_parquet,
    read_table,
    write_manifest,
    write_table,
)
from eagle_spark.rows import first_row

log = logging.getLogger(__name__)

SPARSE_SLACK = 1000
"""Empty labels tolerated beyond as many as there are labels present before a fit is compacted
(``n_labels > 2 x present + SPARSE_SLACK``): below that the empty labels cost at most about as
much as the present ones."""

LABEL_MAP = "data/label_map"
"""A compacted model's renumbering, relative to its folder: row i is (label_index i, label_id)."""

LABEL_INDEX = "label_index"
LABEL_MAP_ARROW = pa.schema(
    [
        pa.field(LABEL_INDEX, pa.int32(), nullable=False),
        pa.field(S.LABEL_ID, pa.int32(), nullable=False),
    ]
)


@dataclass(frozen=True)
class LabelSpace:
    """What a fit trains on (:func:`labels_present`).

    Attributes:
        dataset, groups, label_repr: the training set, the groups (Y1, Y2) and the label
            representations (``label_emb``) to read: the caller's, or their compact copies.
        n_labels: the labels of that training set (m when compacted).
        label_ids: (m,) int64, the original id of each compact label in increasing order; None
            when the fit runs on the caller's labels as they are.
    """

    dataset: str
    groups: Optional[str]
    label_repr: Optional[str]
    n_labels: int
    label_ids: Optional[np.ndarray] = None

    def metadata(self, n_labels: int) -> dict[str, Any]:
        """The model metadata's keys for this space: {} as it is, else ``label_map`` (the
        folder's :data:`LABEL_MAP`), ``n_labels_trained`` (m) and ``n_labels_empty``."""
        if self.label_ids is None:
            return {}
        return {
            "label_map": LABEL_MAP,
            "n_labels_trained": self.n_labels,
            "n_labels_empty": n_labels - self.n_labels,
        }


def trained_labels(meta: Mapping[str, Any]) -> int:
    """The labels a model's arrays are sized by: ``n_labels_trained`` of a compacted model, else
    ``n_labels``."""
    return int(meta.get("n_labels_trained", meta["n_labels"]))


def _present(spark: SparkSession, dataset: str) -> tuple[int, int]:
    """(labels present, approximately (HyperLogLog++, ~2% error), largest id; -1 without any) of a
    training set's Y, in one aggregation without a shuffle of the labels."""
    row = first_row(
        read_table(spark, dataset, S.Y)
        .select(F.explode(S.LABEL_IDS).alias(S.LABEL_ID))
        .agg(F.approx_count_distinct(S.LABEL_ID).alias("n"), F.max(S.LABEL_ID).alias("top")),
        "_present",
    )
    return int(row["n"] or 0), -1 if row["top"] is None else int(row["top"])


@contextlib.contextmanager
def labels_present(
    spark: SparkSession,
    dataset: str,
    n_labels: int,
    scratch: str,
    who: str,
    groups: Optional[str] = None,
    label_repr: Optional[str] = None,
) -> Iterator[LabelSpace]:
    """The label space a fit of `dataset` trains in, as a context: the dataset as it is, or, when
    ``n_labels > 2 x present + SPARSE_SLACK``, a compact copy in `scratch` (deleted on exit),
    with a WARNING naming the dataset and the number of empty labels.

    Args:
        dataset: the training set (X, Y); `n_labels` its manifest's.
        scratch: a folder that does not exist, on storage every executor reaches (the model's
            atomic output: the copy is gone before the commit).
        who: the trainer, for the log.
        groups: an aggregated dataset (Y1, Y2) the fit reads group labels from, or None.
        label_repr: a folder with ``label_emb`` (label_id, emb_idx, emb_val) the fit clusters, or
            None.
    Yields:
        A :class:`LabelSpace`. Compacting costs one pass over Y (distinct ids), a copy of X's
        files, a join of Y's (and Y2's, label_emb's) labels with the m ids; the driver holds the
        m ids (8 bytes each).
    """
    present, top = _present(spark, dataset)
    if n_labels <= 2 * present + SPARSE_SLACK:
        yield LabelSpace(dataset, groups, label_repr, n_labels)
        return
    fs = FileSystem(spark)
    try:
        ids = _write_map(spark, dataset, scratch)
        log.warning(
            "%s: dataset %s has n_labels %d but only %d labels occur in Y (largest id %d): %d "
            "empty labels are not trained; the model keeps the %d present ones (%s)",
            who,
            dataset,
            n_labels,
            len(ids),
            top,
            n_labels - len(ids),
            len(ids),
            LABEL_MAP,
        )
        compact = posixpath.join(scratch, "dataset")
        _compact_dataset(spark, dataset, compact, scratch, len(ids))
        compact_groups = None
        if groups is not None:
            compact_groups = posixpath.join(scratch, "groups")
            _compact_groups(spark, groups, compact_groups, scratch)
        compact_repr = None
        if label_repr is not None:
            compact_repr = posixpath.join(scratch, "label_repr")
            _compact_repr(spark, label_repr, compact_repr, scratch, len(ids))
        yield LabelSpace(compact, compact_groups, compact_repr, len(ids), ids)
    finally:
        fs.delete(scratch)


def _map_frame(spark: SparkSession, scratch: str) -> DataFrame:
    """The renumbering :func:`_write_map` wrote: DataFrame[label_index int, label_id int]."""
    return read_parquet(spark, posixpath.join(scratch, "label_map"))


def _write_map(spark: SparkSession, dataset: str, scratch: str) -> np.ndarray:
    """Write ``<scratch>/label_map`` (the distinct label ids of Y in increasing order, numbered
    from 0) and return the ids."""
    rows = (
        read_table(spark, dataset, S.Y)
        .select(F.explode(S.LABEL_IDS).alias(S.LABEL_ID))
        .distinct()
        .orderBy(S.LABEL_ID)
        .collect()
    )
    ids = np.asarray([r[S.LABEL_ID] for r in rows], dtype=np.int64)
    _write_ids(spark, posixpath.join(scratch, "label_map", "part-00000.parquet"), ids)
    return ids


def _write_ids(spark: SparkSession, path: str, ids: np.ndarray) -> None:
    table = pa.table(
        [pa.array(np.arange(len(ids), dtype=np.int32)), pa.array(ids.astype(np.int32))],
        schema=LABEL_MAP_ARROW,
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    FileSystem(spark).write_bytes(path, buf.getvalue())


def write_label_map(spark: SparkSession, model_tmp: str, space: LabelSpace) -> None:
    """Write a compacted fit's renumbering into the model's folder (:data:`LABEL_MAP`); nothing
    for a fit on the labels as they are."""
    if space.label_ids is not None:
        _write_ids(
            spark, posixpath.join(model_tmp, LABEL_MAP, "part-00000.parquet"), space.label_ids
        )


def _compact_dataset(spark: SparkSession, dataset: str, out: str, scratch: str, m: int) -> None:
    """`dataset` with Y's label ids renumbered (a sample keeps its row, its labels in increasing
    order with their weights): X's files copied, the manifest's n_labels m, its file list
    recorded."""
    Y = read_table(spark, dataset, S.Y)
    weighted = S.LABEL_WEIGHTS in Y.columns
    pairs = Y.select(
        S.SAMPLE_ID,
        *([S.LABEL_WEIGHTS] if weighted else []),
        F.posexplode_outer(S.LABEL_IDS).alias("pos", S.LABEL_ID),
    )
    entry = [F.col(LABEL_INDEX)]
    if weighted:
        entry.append(F.element_at(S.LABEL_WEIGHTS, F.col("pos") + 1).alias("w"))
    joined = pairs.join(F.broadcast(_map_frame(spark, scratch)), S.LABEL_ID, "left")
    grouped = joined.groupBy(S.SAMPLE_ID).agg(
        F.sort_array(
            F.collect_list(F.when(F.col(LABEL_INDEX).isNotNull(), F.struct(*entry)))
        ).alias("e")
    )
    columns: list[Any] = [
        S.SAMPLE_ID,
        F.transform("e", lambda e: e[LABEL_INDEX]).alias(S.LABEL_IDS),
    ]
    if weighted:
        columns.append(F.transform("e", lambda e: e["w"]).alias(S.LABEL_WEIGHTS))
    write_table(grouped.select(*columns), out, S.Y)
    FileSystem(spark).copy(posixpath.join(dataset, S.X), posixpath.join(out, S.X))
    manifest = read_manifest(spark, dataset)
    write_manifest(
        spark,
        out,
        new_manifest(
            "labels-present",
            n_samples=manifest["n_samples"],
            n_features=manifest["n_features"],
            n_labels=m,
            source={"dataset": dataset},
            tables=[S.X, S.Y],
        ),
    )
    record(out)


def _compact_groups(spark: SparkSession, groups: str, out: str, scratch: str) -> None:
    """The groups' Y1 (copied) and Y2 with its labels renumbered; a group label no sample of the
    training set holds is left out (no classifier is trained for it)."""
    FileSystem(spark).copy(posixpath.join(groups, S.Y1), posixpath.join(out, S.Y1))
    y2 = read_table(spark, groups, S.Y2).join(F.broadcast(_map_frame(spark, scratch)), S.LABEL_ID)
    write_table(y2.drop(S.LABEL_ID).withColumnRenamed(LABEL_INDEX, S.LABEL_ID), out, S.Y2)
    record(out)


def _compact_repr(spark: SparkSession, label_repr: str, out: str, scratch: str, m: int) -> None:
    """The label representations of the present labels, renumbered (``label_emb``)."""
    emb = read_table(spark, label_repr, S.LABEL_EMB).join(
        F.broadcast(_map_frame(spark, scratch)), S.LABEL_ID
    )
    write_table(emb.drop(S.LABEL_ID).withColumnRenamed(LABEL_INDEX, S.LABEL_ID), out, S.LABEL_EMB)
    manifest = read_manifest(spark, label_repr)
    write_manifest(spark, out, {**manifest, "n_labels": m, "source": {"label_repr": label_repr}})
    record(out)


def model_label_ids(model_path: str, meta: Mapping[str, Any]) -> Optional[np.ndarray]:
    """(m,) int32: the label id of each of a compacted model's labels (:data:`LABEL_MAP`), held
    once per executor (4 bytes per label); None for a model trained on its labels as they are.

    Raises:
        ValueError: the map is not the m labels 0 .. m-1 in order, with increasing ids below the
            model's n_labels (a damaged or foreign file).
    """
    if "label_map" not in meta:
        return None
    m, n_labels = trained_labels(meta), int(meta["n_labels"])
    key = (model_path, folder_version(model_path), "label_map")

    def build() -> dict[str, np.ndarray]:
        fs, root = filesystem_for(model_path)
        table = pq.read_table(f"{root}/{meta['label_map']}", filesystem=fs).sort_by(LABEL_INDEX)
        index = np.asarray(table.column(LABEL_INDEX), dtype=np.int64)
        ids = np.asarray(table.column(S.LABEL_ID), dtype=np.int32)
        if (
            not np.array_equal(index, np.arange(m))
            or (len(ids) and (ids[0] < 0 or ids[-1] >= n_labels))
            or np.any(np.diff(ids) <= 0)
        ):
            raise ValueError(
                f"{model_path}/{meta['label_map']}: not {m} labels numbered 0 .. {m - 1} with "
                f"increasing ids in [0, {n_labels})"
            )
        return {"ids": ids}

    return shared_state("label_map", key, build, lambda a: a["ids"])


__all__ = [
    "LABEL_INDEX",
    "LABEL_MAP",
    "SPARSE_SLACK",
    "LabelSpace",
    "labels_present",
    "model_label_ids",
    "trained_labels",
    "write_label_map",
]
