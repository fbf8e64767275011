"""The ``evaluate`` stage: P@k, nDCG@k, PSP@k of a predict output against a dataset's true Y."""

from __future__ import annotations

import logging
from typing import Any, Optional

from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.errors import strict_json
from eagle_spark.evaluation.metrics import evaluate_frames, inv_propensity, label_counts, table
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate, require_exists
from eagle_spark.io.integrity import check_folder
from eagle_spark.io.tables import (
    new_manifest,
    read_manifest,
    read_parquet,
    read_table,
    write_manifest,
)
from eagle_spark.settings import EvaluateSettings

log = logging.getLogger(__name__)


def evaluate(
    spark: SparkSession,
    predictions: str,
    dataset: str,
    params: EvaluateSettings,
    output_path: Optional[str] = None,
    propensity_from: Optional[str] = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Evaluate predictions at 1..k (definitions of napkinXC, :mod:`eagle_spark.evaluation.metrics`).

    Rows of Y without any true label count with precision 0 (the XC repository's convention: they
    stay in the denominator).

    Args:
        spark: the active session.
        predictions: output folder of ``predict`` (its ``predictions/`` table).
        dataset: dataset with the true Y (its rows are the evaluated rows).
        params: the ``predict`` settings (k, propensity_a, propensity_b).
        output_path: optional folder for ``metrics.json``, ``metrics.md`` and the manifest (atomic).
        propensity_from: dataset whose Y gives the label frequencies of the propensities (Jain,
            Prabhu, Varma 2016); default `dataset`.
        overwrite: replace an existing output.
    Returns:
        {"n_samples", "k", "P", "nDCG", "PSP"}: lists of length k, fractions in [0, 1].
    Raises:
        BadInputError: a missing dataset, Y table or predictions table; a predictions folder whose
            files disagree with its file list or whose row count is not its manifest's
            ``n_samples`` (:mod:`eagle_spark.io.integrity`).
        OutputExistsError: the output exists and `overwrite` is false.
    """
    if output_path:
        check_separate(output_path, [predictions, dataset, propensity_from])
    manifest = read_manifest(spark, dataset)
    require_exists(spark, predictions, "predictions")
    if FileSystem(spark).exists(
        f"{predictions}/{S.MANIFEST}"
    ):  # predict's output (not another tool's)
        read_manifest(spark, predictions, "predictions")
    else:
        check_folder(predictions, "predictions")
    require_exists(spark, f"{predictions}/{S.PREDICTIONS}", "predictions table")
    reference = propensity_from or dataset
    counts, n_ref = label_counts(read_table(spark, reference, S.Y), int(manifest["n_labels"]))
    inv_ps = inv_propensity(counts, max(n_ref, 1), params.propensity_a, params.propensity_b)
    result = evaluate_frames(
        read_table(spark, dataset, S.Y),
        read_parquet(spark, f"{predictions}/{S.PREDICTIONS}"),
        params.k,
        inv_ps,
    )
    log.info("metrics of %s (x100):\n%s", predictions, table(result))
    if output_path:
        with atomic_output(spark, output_path, overwrite) as tmp:
            fs = FileSystem(spark)
            fs.write_bytes(f"{tmp}/metrics.json", (strict_json(result, indent=2) + "\n").encode())
            fs.write_bytes(f"{tmp}/metrics.md", (table(result) + "\n").encode())
            write_manifest(
                spark,
                tmp,
                new_manifest(
                    "evaluate",
                    **result,
                    source={
                        "predictions": predictions,
                        "dataset": dataset,
                        "propensity_from": reference,
                    },
                    parameters=params.to_dict(),
                ),
            )
    return result


__all__ = ["evaluate"]
