"""Model folders: ``metadata.json`` (class, package version, params, n_features, n_labels,
created_at) plus Parquet data under ``data/`` (Spark ML's metadata/ + data/ layout), and the
executor-side training data (X and Y as CSR / CSC, once per executor) shared by the trainers.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import posixpath
from typing import Any, Optional

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp
from pyspark.sql import Column, SparkSession

from eagle_spark import schemas as S
from eagle_spark._version import __version__
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.executor_state import shared_state, sparse_arrays, sparse_from
from eagle_spark.io.fs import FileSystem, restore_interrupted
from eagle_spark.io.integrity import check_folder
from eagle_spark.io.parts import filesystem_for, folder_version, y_matrix
from eagle_spark.io.tables import read_manifest, read_table, used_parameters
from eagle_spark.rows import first_row

log = logging.getLogger(__name__)

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
    if (
        int(manifest.get("n_samples", 0)) == 0
        or read_table(spark, dataset, S.X).limit(1).count() == 0
    ):
        raise BadInputError(f"dataset {dataset} has no samples to train on")
    read_table(spark, dataset, S.Y)  # raises when Y is missing
    return int(manifest["n_features"]), int(manifest["n_labels"])


def write_metadata(
    spark: SparkSession,
    folder: str,
    cls: str,
    params: dict,
    n_features: int,
    n_labels: int,
    **extra: Any,
) -> dict:
    """Write ``<folder>/metadata.json``; returns it."""
    meta = {
        "class": cls,
        "format_version": MODEL_FORMAT_VERSION,
        "eagle_spark_version": __version__,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "params": params,
        "n_features": n_features,
        "n_labels": n_labels,
        **extra,
    }
    FileSystem(spark).write_bytes(
        posixpath.join(folder, METADATA),
        (strict_json(meta, indent=2, sort_keys=True) + "\n").encode(),
    )
    return meta


def read_metadata(spark: SparkSession, folder: str, cls: str) -> dict:
    """Read and check a model's metadata.

    Raises:
        BadInputError: the folder or metadata is missing, not JSON, of another class, or of another
            model format version; a file of the model is missing, altered or added
            (:func:`eagle_spark.io.integrity.check_folder`).
    """
    fs = FileSystem(spark)
    path = posixpath.join(folder, METADATA)
    restore_interrupted(fs, folder)
    if not fs.exists(folder):
        raise BadInputError(f"model {folder} does not exist")
    try:
        meta = json.loads(fs.read_bytes(path).decode())
    except FileNotFoundError:
        raise BadInputError(f"{path} is missing: {folder} is not an eagle_spark model") from None
    except ValueError as err:
        raise BadInputError(f"{path} is not valid JSON: {err}") from err
    if meta.get("format_version") != MODEL_FORMAT_VERSION:
        raise BadInputError(
            f"model {folder} has format_version {meta.get('format_version')!r}; "
            f"this eagle_spark reads {MODEL_FORMAT_VERSION}"
        )
    if meta.get("class") != cls:
        raise BadInputError(f"model {folder} is a {meta.get('class')!r}, expected {cls!r}")
    check_folder(folder, "model")
    return meta


def outside_unit_weights(weights: Column) -> Column:
    """A boolean Column: whether an array of weights holds a null, a NaN or a value outside (0, 1].

    False for an empty array and for a null one (the callers check a null array apart). Built from
    ``sort_array``, ``array_min`` and ``array_max``, which Spark runs compiled: a lambda
    (``F.exists``) is evaluated element by element, and in Spark 4 each element's read of it looks
    up the session's SQL settings, a large share of the JVM's CPU over a training set's weights.
    Spark orders NaN above every number (so a NaN is the array's maximum, > 1) and sorts nulls
    first (so a null is the sorted array's first element).

    Args:
        weights: an ``array<float>`` or ``array<double>`` Column.
    Returns:
        A boolean Column, never null. Source: this project (the weighted assignment's check).
    """
    from pyspark.sql import functions as F

    outside = (F.size(weights) > 0) & (
        F.try_element_at(F.sort_array(weights), F.lit(1)).isNull()
        | (F.array_min(weights) <= 0)
        | (F.array_max(weights) > 1)
    )
    return F.coalesce(outside, F.lit(False))  # size(null) is null under ANSI, -1 without


def label_weights_in(spark: SparkSession, dataset: str) -> bool:
    """Whether the training set's Y carries ``label_weights`` (weighted assignment), after checking
    them on the driver before any training task: one weight per label id, each finite and in
    (0, 1].

    Raises:
        BadInputError: a row whose weights do not match its labels, naming the dataset and the
            sample_id.
    """
    Y = read_table(spark, dataset, S.Y)
    if S.LABEL_WEIGHTS not in Y.columns:
        return False
    from pyspark.sql import functions as F

    bad = first_row(
        Y.where(
            F.col(S.LABEL_WEIGHTS).isNull()
            | (F.size(S.LABEL_WEIGHTS) != F.size(S.LABEL_IDS))
            | outside_unit_weights(F.col(S.LABEL_WEIGHTS))
        ).agg(F.min(S.SAMPLE_ID)),
        "samples with bad label weights",
    )[0]
    if bad is not None:
        raise BadInputError(
            f"dataset {dataset}: table {S.Y}, sample_id {bad}: {S.LABEL_WEIGHTS} must hold one "
            f"weight in (0, 1] per label id of {S.LABEL_IDS}"
        )
    return True


def load_label_weights(dataset: str, n_labels: int) -> sp.csc_matrix:
    """W (n_samples x n_labels, CSC float32): the weight of each label of Y (``label_weights``),
    with exactly the sparsity pattern of :func:`eagle_spark.io.parts.load_xy`'s Y (rows in sample_id order). Call it
    only for a dataset :func:`label_weights_in` found weighted.

    Held once per executor (:mod:`eagle_spark.executor_state`) like X and Y: ~8 bytes per label
    of Y (float32 weight, int32 row), whatever the number of task slots.
    """
    key = (dataset, folder_version(dataset), n_labels)

    def build() -> dict[str, np.ndarray]:
        fs, root = filesystem_for(dataset)
        yt = pq.read_table(
            f"{root}/{S.Y}", filesystem=fs, columns=[S.SAMPLE_ID, S.LABEL_IDS, S.LABEL_WEIGHTS]
        ).sort_by(S.SAMPLE_ID)
        return sparse_arrays(y_matrix(yt, n_labels, S.LABEL_WEIGHTS, f"{dataset}/Y"), "W")

    return shared_state("label_weights", key, build, lambda a: sparse_from(a, "W", "csc"))


def groups_source(spark: SparkSession, dataset: str) -> Optional[str]:
    """The aggregated dataset (X, Y1, Y2) an ``assign`` output was made from, or None when
    `dataset` is not an EAGLE assignment (a clean dataset, a Baseline assignment: no member of a
    group lacks any of its group's labels there).

    Raises:
        BadInputError: the assignment's source dataset is gone or lacks Y1 / Y2.
    """
    manifest = read_manifest(spark, dataset)
    if manifest.get("kind") != "assign" or used_parameters(manifest).get("method") != "eagle":
        return None
    source = (manifest.get("source") or {}).get("dataset")
    fs = FileSystem(spark)
    if not source or not all(fs.exists(posixpath.join(source, t)) for t in (S.Y1, S.Y2)):
        raise BadInputError(
            f"{dataset}: unassigned=ignore needs the groups (Y1, Y2) of the dataset it "
            f"was assigned from, {source!r}, which is gone or has no Y1 / Y2"
        )
    return source


PROVENANCE_KEYS = ("created_at", "parameters", "used", "selection", "quality", "refinement")
"""Manifest keys of a training dataset that say how it was made, not what it holds: left out of
:func:`training_identity` (of the settings used only ``method`` is kept, which
:func:`groups_source` reads)."""


def training_identity(spark: SparkSession, dataset: str) -> Optional[str]:
    """What a classifier's training reads from `dataset`, as a SHA-256 hex digest: two datasets
    with the same identity give the same model under the same settings (the trainers are
    seeded), so a caller may copy one's model instead of training the other's
    (:class:`eagle_spark.pipeline.Pipeline`: ``assign.weighting=auto`` that chooses the Baseline
    writes the Baseline's tables).

    The digest covers, per table, the content of its files in name order (size, CRC-32 and rows
    from the file list of :mod:`eagle_spark.io.integrity`; the names, which carry a write's
    random id, are left out) and the manifest without :data:`PROVENANCE_KEYS`.

    Returns:
        The digest, or None when `dataset` has no manifest or no file list (nothing is shared).
    Raises:
        BadInputError: a file list that is not valid (:func:`eagle_spark.io.integrity.read_list`).
    """
    import hashlib

    from eagle_spark.io.integrity import read_list

    listing = read_list(dataset, "dataset")
    if listing is None or not FileSystem(spark).exists(posixpath.join(dataset, S.MANIFEST)):
        return None
    manifest = read_manifest(spark, dataset)
    kept = {k: v for k, v in manifest.items() if k not in PROVENANCE_KEYS}
    kept["method"] = used_parameters(manifest).get("method")
    tables: dict[str, list] = {}
    for rel in sorted(listing["files"]):
        entry = listing["files"][rel]
        tables.setdefault(posixpath.dirname(rel), []).append(
            [entry["size"], entry.get("crc32"), entry.get("rows")]
        )
    if any(content[1] is None for files in tables.values() for content in files):
        return None  # a list without checksums (described, not recorded): nothing to compare
    blob = json.dumps({"manifest": kept, "tables": tables}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def load_unassigned(dataset: str, groups: str, ids: np.ndarray, Y: sp.csc_matrix) -> sp.csc_matrix:
    """U (n_samples x n_labels, CSC bool): U[i, k] when sample i's group has label k (Y2) but i was
    not assigned k (Y[i, k] false): the pairs ``unassigned=ignore`` leaves out of training.

    Held once per executor (:mod:`eagle_spark.executor_state`) like X and Y. Memory: ~5 bytes per
    (member, group label) pair, i.e. about group size x labels per group per sample, whatever the
    number of task slots; built only when a classifier asks for it.

    Args:
        dataset: the assigned dataset (rows of U follow `ids`, its sorted sample ids).
        groups: the aggregated dataset with Y1 and Y2 (:func:`groups_source`).
        ids: (n_samples,) sorted sample ids of `dataset`'s X.
        Y: (n_samples, n_labels) the assigned labels (Y_filter).
    Source: this project (issue "training that knows what it does not know"), beyond the paper.
    """
    key = (dataset, folder_version(dataset), groups, folder_version(groups))

    def build() -> dict[str, np.ndarray]:
        fs, root = filesystem_for(groups)
        y1 = pq.read_table(f"{root}/{S.Y1}", filesystem=fs, columns=[S.SAMPLE_ID, S.GROUP_ID])
        y2 = pq.read_table(f"{root}/{S.Y2}", filesystem=fs, columns=[S.GROUP_ID, S.LABEL_ID])
        sid = np.asarray(y1.column(S.SAMPLE_ID), dtype=np.int64)
        row = np.searchsorted(ids, sid)
        inside = (row < len(ids)) & (ids[np.minimum(row, len(ids) - 1)] == sid)
        g1 = np.asarray(y1.column(S.GROUP_ID), dtype=np.int64)
        g2 = np.asarray(y2.column(S.GROUP_ID), dtype=np.int64)
        groups_, inv = np.unique(np.r_[g1, g2], return_inverse=True)
        member = sp.csr_matrix(
            (np.ones(int(inside.sum()), dtype=np.float32), (row[inside], inv[: len(g1)][inside])),
            shape=(len(ids), len(groups_)),
        )
        labels = sp.csr_matrix(
            (
                np.ones(len(g2), dtype=np.float32),
                (inv[len(g1) :], np.asarray(y2.column(S.LABEL_ID), dtype=np.int64)),
            ),
            shape=(len(groups_), Y.shape[1]),
        )
        G = (member @ labels).astype(bool).tocsc()
        U = (G > Y.astype(bool)).tocsc()  # in the group's labels, not assigned
        U.sort_indices()
        return sparse_arrays(U, "U")

    return shared_state("unassigned", key, build, lambda a: sparse_from(a, "U", "csc"))


def unassigned_groups(
    spark: SparkSession, dataset: str, unassigned: str, who: str
) -> Optional[str]:
    """The driver's side of ``unassigned``: the groups folder the tasks read U from
    (:func:`load_unassigned`), or None when every sample is trained as usual (``negative``, or
    training data that is not an EAGLE assignment, which is logged)."""
    if unassigned != "ignore":
        return None
    groups = groups_source(spark, dataset)
    if groups is None:
        log.info(
            "%s: unassigned=ignore has no effect on %s (not an EAGLE assignment)", who, dataset
        )
    else:
        log.info(
            "%s: unassigned=ignore: group members not assigned a label of their group are left "
            "out of that label's training set (groups of %s)",
            who,
            groups,
        )
    return groups
