"""The ``predict`` stage: batch top-k prediction of a saved model over a dataset, as a Spark job."""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from eagle_spark import schemas as S
from eagle_spark.classic import default_parallelism, num_partitions
from eagle_spark.errors import BadInputError
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate, restore_interrupted
from eagle_spark.io.tables import (
    manifest_token,
    new_manifest,
    read_manifest,
    read_parquet,
    read_table,
    write_manifest,
)
from eagle_spark.settings import PREDICT_MIN_TASK_ROWS, PredictSettings

log = logging.getLogger(__name__)

PREDICTIONS = S.PREDICTIONS

MODEL_CLASSES = ("OVAModel", "TreeModel")


def model_class(spark: SparkSession, model_path: str) -> str:
    """The ``class`` recorded in ``<model_path>/metadata.json``.

    Raises:
        BadInputError: the folder or its metadata is missing, is not JSON, or names a class that
            predict does not take.
    """
    fs = FileSystem(spark)
    meta = f"{model_path}/metadata.json"
    restore_interrupted(fs, model_path)
    if not fs.exists(meta):
        raise BadInputError(f"model {model_path} does not exist or has no metadata.json")
    try:
        cls = json.loads(fs.read_bytes(meta).decode()).get("class")
    except (ValueError, AttributeError) as err:
        raise BadInputError(f"{meta} is not valid JSON: {err}") from err
    if cls not in MODEL_CLASSES:
        raise BadInputError(
            f"model {model_path} is a {cls!r}; predict takes an OVAModel or a TreeModel"
        )
    return cls


def split_for_prediction(
    spark: SparkSession, X: DataFrame, n_samples: int, tasks: int
) -> DataFrame:
    """X as the partitions prediction runs on (``predict.tasks``, :class:`PredictSettings`).

    Prediction costs the same per row, so one task per Parquet split leaves cores idle when a
    dataset has a few large files (3 splits on 2 cores: one core idle for a third of the run). With
    ``tasks=0`` X is range-partitioned by sample_id into ``2 x spark.default.parallelism`` tasks
    when it is read as fewer partitions and each task gets at least
    :data:`eagle_spark.settings.PREDICT_MIN_TASK_ROWS` rows; ``tasks > 0`` always gives that many.
    Rows are sorted by sample_id within each partition, so the output does not depend on the order
    in which the shuffle delivered them.

    Args:
        X: the dataset's X table (sample_id, feat_idx, feat_val).
        n_samples: rows of X (the dataset's manifest).
        tasks: ``predict.tasks``.
    Returns:
        X, repartitioned or as read (logged either way).
    """
    parts = num_partitions(X)  # None under Spark Connect: range-partitioned unless small
    want = tasks or 2 * default_parallelism(spark)
    if tasks == 0 and ((parts or 0) >= want or n_samples < want * PREDICT_MIN_TASK_ROWS):
        log.info("predict: %s tasks as X is read (%d rows)", parts or "as many", n_samples)
        return X
    log.info(
        "predict: X (%d rows, %s partitions) range-partitioned by sample_id into %d tasks",
        n_samples,
        parts,
        want,
    )
    return X.repartitionByRange(want, S.SAMPLE_ID).sortWithinPartitions(S.SAMPLE_ID)


def predict(
    spark: SparkSession,
    model_path: str,
    dataset: str,
    output_path: str,
    params: PredictSettings,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Score every sample of a dataset's X and write its top-k labels (paper section 6 protocol).

    Args:
        spark: the active session.
        model_path: model folder written by ``train`` (one-vs-all or label tree).
        dataset: dataset with X (n_samples x n_features, the model's feature space).
        output_path: folder to write: ``predictions/`` (sample_id, label_ids array<int>, scores
            array<float>, best first, top_k entries) and ``_manifest.json``; committed atomically.
        params: the ``predict`` settings (top_k, beam_size, batch_rows, tasks).
        overwrite: replace an existing output.
    Returns:
        The manifest written (n_samples, top_k, source).
    Raises:
        BadInputError: the dataset or model is missing or of another version/class, or X has
            feature ids beyond the model's n_features.
        OutputExistsError: the output exists and `overwrite` is false.
    """
    from eagle_spark.classifiers.ova import predict_ova
    from eagle_spark.classifiers.tree import predict_tree

    check_separate(output_path, [model_path, dataset])
    manifest = read_manifest(spark, dataset)
    token = manifest_token(spark, dataset)  # evaluate checks its --input against it
    X = read_table(spark, dataset, S.X)
    X = split_for_prediction(spark, X, int(manifest.get("n_samples") or X.count()), params.tasks)
    cls = model_class(spark, model_path)
    n_features = int(manifest["n_features"])
    if cls == "TreeModel":
        preds = predict_tree(spark, model_path, X, n_features, params.top_k, params.beam_size)
    else:
        preds = predict_ova(spark, model_path, X, n_features, params.top_k, params.batch_rows)
    with atomic_output(spark, output_path, overwrite) as tmp:
        preds.write.parquet(f"{tmp}/{PREDICTIONS}")
        n = read_parquet(spark, f"{tmp}/{PREDICTIONS}").count()
        out = new_manifest(
            "predict",
            n_samples=n,
            top_k=params.top_k,
            source={"model": model_path, "dataset": dataset, "dataset_token": token},
            parameters=params.to_dict(),
            tables=[PREDICTIONS],
        )
        write_manifest(spark, tmp, out)
    log.info("predicted top-%d for %d samples -> %s", params.top_k, n, output_path)
    return out


__all__ = ["PREDICTIONS", "model_class", "predict", "split_for_prediction"]
