"""Ingest an XC-repository or multi-label libsvm text file into a dataset (X and Y tables).

Two passes, both on the executors:

1. a JVM-only count of lines per file split (``_metadata.file_block_start``), collected to the
   driver (one row per split), which gives every split its first line number;
2. ``spark.read.text`` hands each split's lines to a ``mapInArrow`` task that parses every Arrow batch
   with :func:`eagle_spark.io.xc.parse_lines` and writes its rows straight into Parquet part files
   of ``X/``, ``Y/`` (and ``_rejected/``) with pyarrow (:class:`eagle_spark.io.parts.PartWriter`),
   yielding one summary row (counts, statistics, first bad line) per task.

A ``.gz`` file is one split (gzip does not split); plain text splits at
``spark.sql.files.maxPartitionBytes``. Part files are named after the split, so a retried task
rewrites the same files; the whole dataset is committed atomically (:func:`atomic_output`).

``sample_id`` is the 0-based index of the sample line (line number - 2 with a header, - 1 without),
so ids match the source file; with ``on_bad_line=skip`` the rejected lines leave gaps.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S
from eagle_spark.classic import num_partitions
from eagle_spark.errors import BadInputError
from eagle_spark.io import xc
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate
from eagle_spark.io.parts import PartWriter, PartWriters
from eagle_spark.io.tables import new_manifest, write_manifest
from eagle_spark.settings import IngestSettings

log = logging.getLogger(__name__)

_BLOCK = "_block"

X_ARROW, Y_ARROW, REJECTED_ARROW = S.X_ARROW, S.Y_ARROW, S.REJECTED_ARROW
_SUMMARY = pa.schema(
    [
        pa.field("lines", pa.int64(), nullable=False),
        pa.field("good", pa.int64(), nullable=False),
        pa.field("bad", pa.int64(), nullable=False),
        pa.field("nnz", pa.int64(), nullable=False),
        pa.field("positives", pa.int64(), nullable=False),
        pa.field("no_label", pa.int64(), nullable=False),
        pa.field("no_feature", pa.int64(), nullable=False),
        pa.field("max_feat", pa.int64(), nullable=False),
        pa.field("max_label", pa.int64(), nullable=False),
        pa.field("first_bad_line", pa.int64(), nullable=True),
        pa.field("first_bad_reason", pa.string(), nullable=True),
    ]
)


def _ingest_task(out: str, limits: xc.Limits, has_header: bool, first_line_of: dict[int, int]):
    """mapInArrow function: (value, _block) batches of one task -> part files + one summary row.

    `first_line_of` maps a split's byte offset to the 1-based line number of its first line.
    """
    first_sample_line = 2 if has_header else 1

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen: dict[int, int] = {}  # rows seen so far per split (a task may hold several splits)
        writers = PartWriters(out, {S.X: X_ARROW, S.Y: Y_ARROW, S.REJECTED: REJECTED_ARROW})
        acc = dict(
            lines=0,
            good=0,
            bad=0,
            nnz=0,
            positives=0,
            no_label=0,
            no_feature=0,
            max_feat=-1,
            max_label=-1,
        )
        first_bad: tuple[int, str] | None = None
        with writers:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                lines = batch.column(0)
                blocks = np.asarray(batch.column(1), dtype=np.int64)
                line_no = np.empty(len(blocks), dtype=np.int64)
                for b in np.unique(blocks):
                    where = np.flatnonzero(blocks == b)
                    start = seen.get(int(b), 0)
                    line_no[where] = first_line_of[int(b)] + start + np.arange(len(where))
                    seen[int(b)] = start + len(where)
                writers.name(f"part-{int(blocks[0]):015d}.parquet")
                is_header = (line_no == 1) if has_header else np.zeros(len(line_no), bool)
                if is_header.any():
                    lines = pc.if_else(pa.array(is_header), pa.scalar(None, pa.string()), lines)
                parsed = xc.parse_lines(lines, limits)
                reason = parsed.column(3)
                bad = np.asarray(pc.is_valid(reason), dtype=bool)
                good = ~bad & ~is_header
                sample_id = pa.array(line_no - first_sample_line)
                acc["lines"] += int((~is_header).sum())
                if bad.any():
                    bad_idx = pa.array(np.flatnonzero(bad))
                    rejected = pa.RecordBatch.from_arrays(
                        [
                            pa.array(line_no).take(bad_idx),
                            pc.cast(lines, pa.string()).take(bad_idx),
                            reason.take(bad_idx),
                        ],
                        schema=REJECTED_ARROW,
                    )
                    writers.write(S.REJECTED, rejected)
                    acc["bad"] += len(bad_idx)
                    if first_bad is None:
                        first_bad = (
                            int(rejected.column(0)[0].as_py()),
                            rejected.column(2)[0].as_py(),
                        )
                keep = pa.array(good)
                feat_idx = parsed.column(0).filter(keep)
                label_ids = parsed.column(2).filter(keep)
                ids = sample_id.filter(keep)
                writers.write(
                    S.X,
                    pa.RecordBatch.from_arrays(
                        [ids, feat_idx, parsed.column(1).filter(keep)], schema=X_ARROW
                    ),
                )
                writers.write(S.Y, pa.RecordBatch.from_arrays([ids, label_ids], schema=Y_ARROW))
                n_feat = np.asarray(pc.list_value_length(feat_idx), dtype=np.int64)
                n_lab = np.asarray(pc.list_value_length(label_ids), dtype=np.int64)
                acc["good"] += len(ids)
                acc["nnz"] += int(n_feat.sum())
                acc["positives"] += int(n_lab.sum())
                acc["no_label"] += int((n_lab == 0).sum())
                acc["no_feature"] += int((n_feat == 0).sum())
                if n_feat.sum():
                    acc["max_feat"] = max(
                        acc["max_feat"], int(pc.max(pc.list_flatten(feat_idx)).as_py())
                    )
                if n_lab.sum():
                    acc["max_label"] = max(
                        acc["max_label"], int(pc.max(pc.list_flatten(label_ids)).as_py())
                    )
        summary: dict[str, list[Any]] = {k: [v] for k, v in acc.items()}
        summary["first_bad_line"] = [first_bad[0] if first_bad else None]
        summary["first_bad_reason"] = [first_bad[1] if first_bad else None]
        yield pa.RecordBatch.from_pydict(summary, schema=_SUMMARY)

    return run


def _check_count(path: str, header: tuple[int, int, int] | None, n_lines: int) -> None:
    if header is not None and header[0] != n_lines:
        raise BadInputError(
            f"{path}:1: header says {header[0]} samples but the file has {n_lines} sample lines"
        )


def _read_header(spark: SparkSession, path: str) -> tuple[int, int, int]:
    first = spark.read.text(path).head(1)
    try:
        return xc.parse_header(first[0][0] if first else None)
    except ValueError as err:
        raise BadInputError(f"{path}:1: {err}") from None


def ingest(
    spark: SparkSession,
    input_path: str,
    output_path: str,
    params: IngestSettings,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Ingest one XC / libsvm file into the dataset folder `output_path` (tables X and Y).

    Args:
        spark: the active session.
        input_path: the text file (``.gz`` or plain), any path Spark reads; executors write the
            part files with pyarrow, so `output_path` must be local or a URI pyarrow.fs reaches.
        output_path: dataset folder to create; committed atomically.
        params: the ``ingest`` settings section (format, one_based, on_bad_line, libsvm counts).
        overwrite: replace an existing output.
    Returns:
        The manifest written (n_samples, n_features, n_labels, statistics, rejected counts).
    Raises:
        BadInputError: missing input, malformed header, a sample count that disagrees with the
            header, or a bad line with ``on_bad_line=fail`` (message ``<file>:<line>: <problem>``);
            nothing is written at `output_path` then.
        OutputExistsError: `output_path` exists and `overwrite` is false.
    """
    check_separate(output_path, [input_path])
    fs = FileSystem(spark)
    if not fs.exists(input_path):
        raise BadInputError(f"input file {input_path} does not exist")
    if fs.is_dir(input_path):
        raise BadInputError(f"input {input_path} is a folder; ingest takes one text file")
    has_header = params.format == "xc"
    header = _read_header(spark, input_path) if has_header else None
    limits = xc.Limits(
        n_features=header[1] if header else params.n_features,
        n_labels=header[2] if header else params.n_labels,
        one_based=params.one_based,
    )
    raw = spark.read.text(input_path).select(
        "value", F.col("_metadata.file_block_start").alias(_BLOCK)
    )
    if num_partitions(raw) == 1:  # unknown under Spark Connect: the counting pass, always right
        # One partition holds one split here (Spark cuts splits at its partition size), so the one
        # task sees every line in order from offset 0: no counting pass needed (always for .gz).
        first_line_of = {0: 1}
    else:
        counts = sorted((int(r[0]), int(r[1])) for r in raw.groupBy(_BLOCK).count().collect())
        first_line_of, total = {}, 0
        for block, count in counts:
            first_line_of[block] = total + 1
            total += count
    with atomic_output(spark, output_path, overwrite) as tmp:
        task = _ingest_task(tmp, limits, has_header, first_line_of)
        rows = raw.mapInArrow(task, from_arrow_schema(_SUMMARY)).collect()  # one row per task
        n_lines = sum(r["lines"] for r in rows)
        n_bad = sum(r["bad"] for r in rows)
        if n_bad and params.on_bad_line == "fail":  # a bad line says more than a wrong count
            line, reason = min(
                (r["first_bad_line"], r["first_bad_reason"])
                for r in rows
                if r["first_bad_line"] is not None
            )
            more = f" ({n_bad - 1} more bad lines)" if n_bad > 1 else ""
            raise BadInputError(f"{input_path}:{line}: {reason}{more}")
        _check_count(input_path, header, n_lines)
        n = sum(r["good"] for r in rows)
        for table, schema in ((S.X, X_ARROW), (S.Y, Y_ARROW)):
            if not fs.exists(posixpath.join(tmp, table)):  # no sample at all: an empty table
                PartWriter(posixpath.join(tmp, table), "part-empty.parquet", schema).close(
                    allow_empty=True
                )
        if header is not None:
            n_features, n_labels = header[1], header[2]
        else:
            max_feat = max((r["max_feat"] for r in rows), default=-1)
            max_label = max((r["max_label"] for r in rows), default=-1)
            n_features = params.n_features if params.n_features is not None else max_feat + 1
            n_labels = params.n_labels if params.n_labels is not None else max_label + 1
        nnz = sum(r["nnz"] for r in rows)
        n_pos = sum(r["positives"] for r in rows)
        manifest = new_manifest(
            "ingest",
            n_samples=n,
            n_features=int(n_features),
            n_labels=int(n_labels),
            source={"path": input_path, "format": params.format, "lines": n_lines},
            parameters=params.to_dict(),
            rejected={"lines": int(n_bad)},
            tables=[S.X, S.Y],
            stats={
                "nnz": nnz,
                "nnz_per_sample": nnz / n if n else 0.0,
                "n_positives": n_pos,
                "labels_per_sample": n_pos / n if n else 0.0,
                "samples_without_labels": sum(r["no_label"] for r in rows),
                "samples_without_features": sum(r["no_feature"] for r in rows),
            },
        )
        write_manifest(spark, tmp, manifest)
    log.info("ingested %s: %d samples, %d rejected lines", input_path, n, n_bad)
    return manifest
