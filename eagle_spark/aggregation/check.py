"""Validate an existing aggregated dataset (X, Y1, Y2; Y optional) before a pipeline uses it.

The ``pipeline`` command accepts a dataset folder someone else wrote. Before any stage runs, every
table is checked against the layout and against its manifest, so that a bad input stops the run
with exit 2 and a message naming the table and the offending id, before anything is written:

* the folder, its ``_manifest.json`` and the X / Y1 / Y2 tables exist and have the layout's schema;
* the manifest agrees with the tables: X has ``n_samples`` rows with unique sample_id in
  [0, n_samples), every feature id is in [0, n_features), every label id of Y is in [0, n_labels);
* every feature value of X is finite;
* Y1 / Y2 pass the checks of :func:`eagle_spark.aggregation.supplied.validate_supplied` with
  ``on_bad_row=fail``: ids present and non-negative, no duplicates, labels in [0, n_labels), no group
  of Y2 without members in Y1, no group of Y1 without labels in Y2 (an empty group).

This is the one definition of a valid aggregated dataset: ``aggregate --y1/--y2`` runs
:func:`check_aggregated` on what it wrote before committing it, so what it writes the pipeline
accepts. The rules for two edge cases (docs/design.md, "Aggregated-label data"):

* a sample of X in no group is allowed: ``n_samples`` counts every row of X; the sample has no
  group labels, takes no part in GRLR or assignment, and has no labels in Y_filter;
* a group member without features (an empty row of X) is allowed: it scores 0 for every label.
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.aggregation.supplied import validate_supplied
from eagle_spark.errors import BadInputError
from eagle_spark.io.tables import has_table, read_table, require_tables, table_path
from eagle_spark.rows import first_row


def _non_finite(column: str):
    """True for a row whose float array `column` holds a NaN or an infinity."""
    return F.exists(column, lambda v: F.isnan(v) | (F.abs(v) == float("inf")))


def check_dataset(
    spark: SparkSession, dataset: str, need: tuple[str, ...] = (S.X,)
) -> dict[str, Any]:
    """Check a dataset's manifest against its X (and Y when present).

    Args:
        spark: the active session.
        dataset: dataset folder.
        need: tables that must exist.
    Returns:
        The manifest.
    Raises:
        BadInputError: a missing folder, manifest or table, a wrong schema, or a manifest that
            disagrees with the tables (the message names the table and the first offending id).
    """
    manifest = require_tables(spark, dataset, need)
    where = f"{dataset}/{S.MANIFEST}"
    try:
        n_samples, n_features, n_labels = (
            int(manifest[k]) for k in ("n_samples", "n_features", "n_labels")
        )
    except (KeyError, TypeError, ValueError) as err:
        raise BadInputError(
            f"{where} lacks a valid n_samples / n_features / n_labels: {err}"
        ) from None
    X = read_table(spark, dataset, S.X)
    xs = first_row(
        X.agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct(S.SAMPLE_ID).alias("ids"),
            F.min(S.SAMPLE_ID).alias("lo"),
            F.max(S.SAMPLE_ID).alias("hi"),
            F.max(F.array_max(S.FEAT_IDX)).alias("f_hi"),
            F.min(F.array_min(S.FEAT_IDX)).alias("f_lo"),
            # Spark orders NaN above every number, so a NaN or +inf value is the largest and a -inf
            # the smallest: two built-in array aggregates find them (a lambda over every value would
            # run uncompiled, ~6x slower on synthetic Wiki-325K)
            F.max(F.array_max(S.FEAT_VAL)).alias("v_hi"),
            F.min(F.array_min(S.FEAT_VAL)).alias("v_lo"),
        ),
        "check_dataset",
    )
    x_path = table_path(dataset, S.X)
    if xs["rows"] != n_samples:
        raise BadInputError(
            f"{where} says n_samples={n_samples} but table {x_path} has {xs['rows']} rows"
        )
    if xs["ids"] != xs["rows"]:
        raise BadInputError(
            f"table {x_path}: sample_id is not unique ({xs['rows'] - xs['ids']} repeats)"
        )
    if n_samples and (xs["lo"] < 0 or xs["hi"] >= n_samples):
        bad = xs["lo"] if xs["lo"] < 0 else xs["hi"]
        raise BadInputError(
            f"table {x_path}: sample_id {bad} is out of range [0, {n_samples}) given by {where}"
        )
    if xs["f_hi"] is not None and (xs["f_hi"] >= n_features or xs["f_lo"] < 0):
        bad_id = xs["f_hi"] if xs["f_hi"] >= n_features else xs["f_lo"]
        row = first_row(
            X.where(F.array_contains(S.FEAT_IDX, int(bad_id)))
            .select(S.SAMPLE_ID)
            .orderBy(S.SAMPLE_ID),
            "check_dataset",
        )
        raise BadInputError(
            f"table {x_path}: sample_id {row[S.SAMPLE_ID]} has feature id {bad_id} out of "
            f"range [0, {n_features}) given by {where}"
        )
    if xs["v_hi"] is not None and (
        math.isnan(xs["v_hi"]) or math.isinf(xs["v_hi"]) or math.isinf(xs["v_lo"])
    ):
        row = first_row(
            X.where(_non_finite(S.FEAT_VAL)).select(S.SAMPLE_ID).orderBy(S.SAMPLE_ID),
            "check_dataset",
        )
        raise BadInputError(
            f"table {x_path}: sample_id {row[S.SAMPLE_ID]} has a NaN or infinite feature value"
        )
    if has_table(spark, dataset, S.Y):
        y_path = table_path(dataset, S.Y)
        bad_y = (
            read_table(spark, dataset, S.Y)
            .select(S.SAMPLE_ID, F.explode(S.LABEL_IDS).alias("l"))
            .where((F.col("l") < 0) | (F.col("l") >= n_labels))
            .orderBy(S.SAMPLE_ID, "l")
            .first()
        )
        if bad_y is not None:
            raise BadInputError(
                f"table {y_path}: sample_id {bad_y[S.SAMPLE_ID]} has label id {bad_y['l']} "
                f"out of range [0, {n_labels}) given by {where}"
            )
    return manifest


def check_aggregated(spark: SparkSession, dataset: str) -> dict[str, Any]:
    """Check an aggregated dataset: :func:`check_dataset` plus Y1 / Y2 (module docstring).

    Args:
        spark: the active session.
        dataset: folder with X, Y1, Y2 (Y optional).
    Returns:
        The manifest.
    Raises:
        BadInputError: the first failing check, naming the table and the offending id.
    """
    manifest = check_dataset(spark, dataset, need=(S.X, S.Y1, S.Y2))
    X = read_table(spark, dataset, S.X)
    Y1 = read_table(spark, dataset, S.Y1)
    y1_path, y2_path = table_path(dataset, S.Y1), table_path(dataset, S.Y2)
    validate_supplied(
        X, Y1, read_table(spark, dataset, S.Y2), int(manifest["n_labels"]), "fail", y1_path, y2_path
    )
    return manifest


__all__ = ["check_aggregated", "check_dataset"]
