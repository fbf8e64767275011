"""The ``evaluate`` stage: P@k, nDCG@k, PSP@k of a predict output against a dataset's true Y."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.evaluation.metrics import evaluate_frames, inv_propensity, label_counts, table
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate, require_exists
from eagle_spark.io.integrity import check_folder, describe, read_list, table_facts
from eagle_spark.io.tables import (
    manifest_token,
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
            ``n_samples`` (:mod:`eagle_spark.io.integrity`); predictions not made on `dataset`
            or a dataset without samples (:func:`check_pairing`).
        OutputExistsError: the output exists and `overwrite` is false.
    """
    if output_path:
        check_separate(output_path, [predictions, dataset, propensity_from])
    manifest = read_manifest(spark, dataset)
    require_exists(spark, predictions, "predictions")
    made = None
    if FileSystem(spark).exists(
        f"{predictions}/{S.MANIFEST}"
    ):  # predict's output (not another tool's)
        made = read_manifest(spark, predictions, "predictions")
    else:
        check_folder(predictions, "predictions")
    require_exists(spark, f"{predictions}/{S.PREDICTIONS}", "predictions table")
    check_pairing(spark, predictions, made, dataset, manifest)
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


def _listing(folder: str, what: str) -> Mapping[str, Any]:
    """The file list of `folder`, or its files described as they are (another tool's folder)."""
    return read_list(folder, what) or describe(folder, checksums=False)


def _sample_ids(listing: Optional[Mapping[str, Any]], table: str) -> Optional[tuple[int, int]]:
    facts = table_facts(listing, table) if listing else None
    if not facts or S.SAMPLE_ID not in facts["min"]:
        return None
    return int(facts["min"][S.SAMPLE_ID]), int(facts["max"][S.SAMPLE_ID])


def check_pairing(
    spark: SparkSession,
    predictions: str,
    made: Optional[Mapping[str, Any]],
    dataset: str,
    manifest: Mapping[str, Any],
) -> None:
    """Check that the predictions folder `predictions` was made on the dataset `dataset`.

    Args:
        made: the predictions' manifest (None: written by another tool).
        manifest: the dataset's manifest.
    Checked, from manifests and file lists only (no Spark job): the dataset has samples; the
    predictions' recorded dataset (``source.dataset_token``, the SHA-256 of the manifest it was
    made on: :func:`eagle_spark.io.tables.manifest_token`) is this dataset's commit; they have the
    dataset's ``n_samples``; their sample ids lie within the range of the dataset's Y. Predictions
    of another tool get the last check only (and at most ``n_samples`` rows).
    Raises:
        BadInputError: naming both folders and what disagrees.
    """
    n = manifest.get("n_samples")
    if n == 0:
        raise BadInputError(f"dataset {dataset} has no samples (n_samples=0): nothing to evaluate")
    pair = f"predictions {predictions} and dataset {dataset}"
    if made is not None:
        source: dict = made["source"] if isinstance(made.get("source"), dict) else {}
        token = source.get("dataset_token")
        if token is not None and token != manifest_token(spark, dataset):
            raise BadInputError(
                f"{pair} do not belong together: the predictions were made on "
                f"{source.get('dataset')!r}, whose manifest differs from {dataset}'s (another "
                "dataset, or one written again since): predict on this dataset, or evaluate "
                "against the one they were made on"
            )
        if isinstance(n, int) and isinstance(made.get("n_samples"), int) and made["n_samples"] != n:
            raise BadInputError(
                f"{pair} do not belong together: {made['n_samples']} predicted samples, "
                f"the dataset has n_samples={n}"
            )
    pred_list = _listing(predictions, "predictions")
    rows = table_facts(pred_list, S.PREDICTIONS)
    if made is None and rows is not None and isinstance(n, int) and rows["rows"] > n:
        raise BadInputError(
            f"{pair} do not belong together: {rows['rows']} predicted rows, the dataset has "
            f"n_samples={n}"
        )
    got = _sample_ids(pred_list, S.PREDICTIONS)
    want = _sample_ids(_listing(dataset, "dataset"), S.Y)
    if got is not None and want is not None and (got[0] < want[0] or got[1] > want[1]):
        raise BadInputError(
            f"{pair} do not belong together: predicted sample ids {got[0]}..{got[1]}, the "
            f"dataset's Y holds {want[0]}..{want[1]}"
        )


__all__ = ["check_pairing", "evaluate"]
