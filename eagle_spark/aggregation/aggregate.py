"""The ``aggregate`` stage: a clean dataset -> an aggregated-label dataset (X, Y, Y1, Y2).

X and the true Y are **copied** byte for byte (Hadoop ``FileUtil.copy``) into the output, so an
aggregated dataset is self-contained: it stays valid when the source moves or is deleted, at the
price of its disk space (Y is kept for evaluation only; no stage trains on it).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.aggregation.groups import (
    cluster_groups,
    group_size_stats,
    merge_labels,
    random_groups,
)
from eagle_spark.aggregation.supplied import read_user_table, validate_supplied
from eagle_spark.errors import BadInputError
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate
from eagle_spark.io.tables import (
    has_table,
    new_manifest,
    read_manifest,
    read_table,
    table_path,
    write_manifest,
    write_table,
)
from eagle_spark.rows import first_row
from eagle_spark.settings import AggregateSettings

log = logging.getLogger(__name__)


def _write_sorted(df: DataFrame, out: str, name: str, keys: list[str], partitions: int) -> None:
    """Write a layout table with deterministic content: hash-partitioned and sorted by `keys`."""
    write_table(df.repartition(partitions, *keys).sortWithinPartitions(*keys), out, name)


def aggregate(
    spark: SparkSession,
    input_path: str,
    output_path: str,
    params: AggregateSettings,
    overwrite: bool = False,
    y1_path: Optional[str] = None,
    y2_path: Optional[str] = None,
) -> dict[str, Any]:
    """Build (or take from the user) Y1 and Y2 for a dataset and write the aggregated dataset.

    Args:
        spark: the active session.
        input_path: dataset with X (and Y, required unless `y1_path`/`y2_path` are given).
        output_path: dataset folder to write (atomic).
        params: the ``aggregate`` settings section.
        overwrite: replace an existing output.
        y1_path, y2_path: user-supplied Y1 and Y2 tables (Parquet or CSV); both or neither.
    Samples of X in no group stay in X (``n_samples`` counts every row of X, ``n_grouped_samples``
    those in a group); see :mod:`eagle_spark.aggregation.check` for the rules.

    Returns:
        The manifest written: n_samples, n_grouped_samples, n_features, n_labels, n_groups, group sizes (mean, min,
        max, histogram), n_positive_pairs (Y2 rows), parameters, rejected row counts.
    Raises:
        BadInputError: missing input tables, only one of y1/y2, or bad user rows with
            ``on_bad_row=fail`` (message names the table and the id).
        OutputExistsError: the output exists and `overwrite` is false.
    """
    check_separate(output_path, [input_path, y1_path, y2_path])
    if (y1_path is None) != (y2_path is None):
        raise BadInputError("give both --y1 and --y2 (user-supplied aggregation) or neither")
    manifest_in = read_manifest(spark, input_path)
    X = read_table(spark, input_path, S.X)
    has_y = has_table(spark, input_path, S.Y)
    n_labels = int(manifest_in["n_labels"])
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    rejected: dict[str, int] = {}
    with atomic_output(spark, output_path, overwrite) as tmp:
        if y1_path is not None and y2_path is not None:  # both or neither (checked above)
            Y1_raw = read_user_table(spark, y1_path, [S.SAMPLE_ID, S.GROUP_ID])
            Y2_raw = read_user_table(spark, y2_path, [S.GROUP_ID, S.LABEL_ID], optional=(S.COUNT,))
            Y1, Y2, rejected = validate_supplied(
                X, Y1_raw, Y2_raw, n_labels, params.on_bad_row, y1_path, y2_path
            )
            grouping = {
                "grouping": "supplied",
                "y1": y1_path,
                "y2": y2_path,
                "on_bad_row": params.on_bad_row,
            }
        else:
            if not has_y:
                raise BadInputError(f"dataset {input_path} has no Y table to aggregate")
            if params.grouping == "random":
                Y1 = random_groups(X.select(S.SAMPLE_ID), params.group_size, params.seed)
                grouping = {
                    k: getattr(params, k) for k in ("grouping", "group_size", "seed", "merge")
                }
            else:
                Y1 = cluster_groups(
                    X,
                    int(manifest_in["n_features"]),
                    params.depth,
                    params.seed,
                    params.noise,
                    params.kmeans_iterations,
                )
                grouping = {
                    k: getattr(params, k)
                    for k in ("grouping", "depth", "noise", "seed", "merge", "kmeans_iterations")
                }
            Y2 = merge_labels(Y1, read_table(spark, input_path, S.Y), params.merge)
        _write_sorted(Y1, tmp, S.Y1, [S.SAMPLE_ID, S.GROUP_ID], partitions)
        _write_sorted(Y2, tmp, S.Y2, [S.GROUP_ID, S.LABEL_ID], partitions)
        fs = FileSystem(spark)
        tables = [S.X, S.Y1, S.Y2]
        fs.copy(table_path(input_path, S.X), table_path(tmp, S.X))
        if has_y:
            fs.copy(table_path(input_path, S.Y), table_path(tmp, S.Y))
            tables.insert(1, S.Y)
        Y1_written = read_table(spark, tmp, S.Y1)
        Y2_written = read_table(spark, tmp, S.Y2)
        y2_stats = first_row(
            Y2_written.agg(F.count(F.lit(1)).alias("rows"), F.sum(S.COUNT).alias("total")),
            "aggregate",
        )
        manifest = new_manifest(
            "aggregate",
            n_samples=int(manifest_in["n_samples"]),  # every row of X (samples in no group too)
            n_grouped_samples=int(Y1_written.select(S.SAMPLE_ID).distinct().count()),
            n_features=int(manifest_in["n_features"]),
            n_labels=n_labels,
            **group_size_stats(Y1_written),
            n_positive_pairs=int(y2_stats["rows"]),
            n_positive_pairs_with_multiplicity=int(y2_stats["total"] or 0),
            source={"dataset": input_path, "X": "copied", "Y": "copied" if has_y else "absent"},
            parameters=grouping,
            rejected=rejected,
            tables=tables,
        )
        write_manifest(spark, tmp, manifest)
        if y1_path is not None:  # the pipeline's definition of a valid aggregated dataset
            from eagle_spark.aggregation.check import check_aggregated

            try:
                check_aggregated(spark, tmp)
            except (
                BadInputError
            ) as err:  # validate_supplied let through what check_aggregated refuses
                raise RuntimeError(
                    f"aggregate wrote a dataset its own check refuses: {err}"
                ) from err
    log.info("aggregated %s -> %s: %d groups", input_path, output_path, manifest["n_groups"])
    return manifest


__all__ = ["aggregate"]
