"""Export a dataset's X and Y back to the XC-repository text format (for PECOS, omikuji, napkinXC).

The file is written by Spark (one task, lines in ``sample_id`` order; gzip when the name ends in
``.gz``) to a hidden sibling and renamed into place. Values are printed by Spark's float-to-string
cast (shortest form that round-trips float32, e.g. ``0.084556`` or ``1.0E-4``), which
:func:`eagle_spark.io.xc.parse_lines` reads back exactly.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate
from eagle_spark.io.tables import has_table, read_manifest, read_table

log = logging.getLogger(__name__)


def export_xc(
    spark: SparkSession, dataset: str, output_file: str, overwrite: bool = False
) -> dict[str, Any]:
    """Write `dataset` (X, and Y when present) as one XC text file.

    Args:
        spark: the active session.
        dataset: dataset folder with a manifest and table X (Y optional: no labels then).
        output_file: the text file to write; ``.gz`` suffix means gzip.
        overwrite: replace an existing file.
    Returns:
        Summary: ``{"output", "n_samples", "n_features", "n_labels"}``.
    Raises:
        BadInputError: missing dataset, manifest or X, or a table with the wrong schema.
        OutputExistsError: the file exists and `overwrite` is false.
    """
    check_separate(output_file, [dataset])
    manifest = read_manifest(spark, dataset)
    X = read_table(spark, dataset, S.X)
    if has_table(spark, dataset, S.Y):
        rows = X.join(read_table(spark, dataset, S.Y), S.SAMPLE_ID, "left")
    else:
        rows = X.withColumn(S.LABEL_IDS, F.lit(None).cast("array<int>"))
    labels = F.coalesce(
        F.concat_ws(",", F.transform(S.LABEL_IDS, lambda x: x.cast("string"))), F.lit("")
    )
    pairs = F.transform(
        F.arrays_zip(S.FEAT_IDX, S.FEAT_VAL),
        lambda z: F.concat(z[S.FEAT_IDX].cast("string"), F.lit(":"), z[S.FEAT_VAL].cast("string")),
    )
    body = rows.select(
        F.col(S.SAMPLE_ID).alias("_key"),
        F.concat_ws(" ", labels, F.concat_ws(" ", pairs)).alias("value"),
    )
    n_samples = body.count()
    n_features, n_labels = int(manifest["n_features"]), int(manifest["n_labels"])
    header = spark.createDataFrame(
        [(-1, f"{n_samples} {n_features} {n_labels}")], "_key long, value string"
    )
    compression = "gzip" if output_file.endswith(".gz") else "none"
    fs = FileSystem(spark)
    with atomic_output(spark, output_file, overwrite) as tmp:
        parts = f"{tmp}.parts"
        try:
            (
                header.unionByName(body)
                .coalesce(1)
                .sortWithinPartitions("_key")
                .select("value")
                .write.option("compression", compression)
                .text(parts)
            )
            part = [name for name in fs.list(parts) if name.startswith("part-")][0]
            fs.delete(f"{parts}/.{part}.crc")  # else Hadoop's local FS moves it beside the output
            fs.rename(f"{parts}/{part}", tmp)
        finally:
            fs.delete(parts)
    log.info("exported %s to %s: %d samples", dataset, output_file, n_samples)
    return {
        "output": output_file,
        "n_samples": n_samples,
        "n_features": n_features,
        "n_labels": n_labels,
    }
