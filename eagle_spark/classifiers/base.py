"""Model folders: ``metadata.json`` (class, package version, params, n_features, n_labels,
created_at) plus Parquet data under ``data/`` (Spark ML's metadata/ + data/ layout), and the
executor-side training data (X and Y as CSR / CSC, once per executor) shared by the trainers.
"""

from __future__ import annotations

import datetime as _dt
import json
import posixpath
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp
from pyspark.sql import SparkSession

from eagle_spark import __version__
from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.executor_state import shared_state, sparse_arrays, sparse_from
from eagle_spark.io.fs import FileSystem
from eagle_spark.io.parts import filesystem_for, folder_version, read_x
from eagle_spark.io.tables import read_manifest, read_table
from eagle_spark.sparse import l2_normalize_rows

MODEL_FORMAT_VERSION = 1
METADATA = "metadata.json"
WEIGHTS = "data/weights"

WEIGHTS_ARROW = S.WEIGHTS_ARROW


def training_set(spark: SparkSession, dataset: str) -> tuple[int, int]:
    """(n_features, n_labels) of a training dataset, after checking that it has samples and Y.

    Raises:
        BadInputError: the dataset has no samples (manifest n_samples 0 or an empty X table).
        (read_manifest / read_table raise BadInputError for a missing manifest, X or Y.)
    """
    manifest = read_manifest(spark, dataset)
    if int(manifest.get("n_samples", 0)) == 0 or read_table(spark, dataset, S.X).limit(1).count() == 0:
        raise BadInputError(f"dataset {dataset} has no samples to train on")
    read_table(spark, dataset, S.Y)  # raises when Y is missing
    return int(manifest["n_features"]), int(manifest["n_labels"])


def write_metadata(spark: SparkSession, folder: str, cls: str, params: dict, n_features: int,
                   n_labels: int, **extra: Any) -> dict:
    """Write ``<folder>/metadata.json``; returns it."""
    meta = {"class": cls, "format_version": MODEL_FORMAT_VERSION, "eagle_spark_version": __version__,
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "params": params, "n_features": n_features, "n_labels": n_labels, **extra}
    FileSystem(spark).write_bytes(posixpath.join(folder, METADATA),
                                  (strict_json(meta, indent=2, sort_keys=True) + "\n").encode())
    return meta


def read_metadata(spark: SparkSession, folder: str, cls: str) -> dict:
    """Read and check a model's metadata.

    Raises:
        BadInputError: the folder or metadata is missing, not JSON, of another class, or of another
            model format version.
    """
    fs = FileSystem(spark)
    path = posixpath.join(folder, METADATA)
    if not fs.exists(folder):
        raise BadInputError(f"model {folder} does not exist")
    try:
        meta = json.loads(fs.read_bytes(path).decode())
    except FileNotFoundError:
        raise BadInputError(f"{path} is missing: {folder} is not an eagle_spark model") from None
    except ValueError as err:
        raise BadInputError(f"{path} is not valid JSON: {err}") from err
    if meta.get("format_version") != MODEL_FORMAT_VERSION:
        raise BadInputError(f"model {folder} has format_version {meta.get('format_version')!r}; "
                            f"this eagle_spark reads {MODEL_FORMAT_VERSION}")
    if meta.get("class") != cls:
        raise BadInputError(f"model {folder} is a {meta.get('class')!r}, expected {cls!r}")
    return meta



def load_xy(dataset: str, n_features: int, n_labels: int, normalize: bool) -> tuple[np.ndarray, sp.csr_matrix, sp.csc_matrix]:
    """(sample_ids, X CSR float32 (normalised when asked), Y CSC bool) of a dataset.

    Held once per executor (:mod:`eagle_spark.executor_state`): the first worker reads the tables
    and writes the arrays, every worker maps them read-only. Memory per executor: ~8 bytes per
    nonzero of X (float32 value, int32 id) + ~5 bytes per positive of Y, whatever the number of
    task slots.
    """
    key = (dataset, folder_version(dataset), n_features, n_labels, normalize)  # rewritten -> reread

    def build() -> dict[str, np.ndarray]:
        fs, root = filesystem_for(dataset)
        ids, X = read_x(dataset, n_features)
        yt = pq.read_table(f"{root}/{S.Y}", filesystem=fs).sort_by(S.SAMPLE_ID)
        if not np.array_equal(ids, np.asarray(yt.column(S.SAMPLE_ID), dtype=np.int64)):
            raise ValueError(f"{dataset}: X and Y do not have the same sample_ids")
        X = l2_normalize_rows(X) if normalize else X
        lab = yt.column(S.LABEL_IDS).combine_chunks()
        indptr = np.asarray(lab.offsets, dtype=np.int64)
        indices = np.asarray(lab.values, dtype=np.int64)
        Y = sp.csr_matrix((np.ones(len(indices), dtype=bool), indices, indptr - indptr[0]),
                          shape=(len(ids), n_labels)).tocsc()
        return {"ids": ids, **sparse_arrays(X, "X"), **sparse_arrays(Y, "Y")}

    return shared_state("xy", key, build, lambda a: (a["ids"], sparse_from(a, "X"), sparse_from(a, "Y", "csc")))
