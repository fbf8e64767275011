"""The MIML bags and label embeddings on Spark: MNIST images written as a dataset, bags drawn by
the ``aggregate`` job (random groups of g, list merge: Y2's count is how many of the bag's images
show the digit), and GRLR (``embed``) run on the bags as the paper re-organises them.

GRLR on bags with repeated labels (paper appendix, list merge): M_k, the groups labelled k, is a
list in which a bag appears once per image of digit k, so e0 = Proj(sum over j in M_k of the bag's
images) weighs a bag by its count of k. With g = 50 nearly every bag holds every digit and the
counts are the only signal: a set M_k makes every label's e0 the same vector. The pipeline's
``embed`` counts a group once per label, so :func:`multiset_dataset` writes the list as groups:
bag j with count c of digit k becomes c groups (same members, label k). Memory: Y1 of that dataset
has n_images x g rows (3 M for MNIST at g = 50); X is hard-linked, not copied.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from eagle_spark import schemas as S
from eagle_spark.io.tables import new_manifest
from eagle_spark.miml.data import Bags

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _x_table(x: np.ndarray) -> pa.Table:
    n, d = x.shape
    offsets = pa.array(np.arange(0, n * d + 1, d, dtype=np.int32))
    return pa.table(
        {
            S.SAMPLE_ID: pa.array(np.arange(n, dtype=np.int64)),
            S.FEAT_IDX: pa.ListArray.from_arrays(
                offsets, pa.array(np.tile(np.arange(d, dtype=np.int32), n))
            ),
            S.FEAT_VAL: pa.ListArray.from_arrays(offsets, pa.array(x.ravel().astype(np.float32))),
        }
    )


def _manifest(path: str, **fields: Any) -> None:
    with open(os.path.join(path, S.MANIFEST), "w", encoding="utf-8") as fh:
        json.dump(new_manifest("miml", **fields), fh, indent=2, sort_keys=True)


def write_images_dataset(
    x: np.ndarray, y: Optional[np.ndarray], path: str, n_labels: int = 10
) -> str:
    """Write images as a dataset folder (X: every pixel a feature, dense; Y: the digit) at the
    local `path` (replaced when it exists; the folder is renamed into place whole).

    Args:
        x: (n, d) float32 pixels (centred). y: (n,) labels in [0, n_labels), or None: no Y table
            (what :func:`multiset_dataset` needs is X).
    Returns:
        `path`.
    """
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for table in (S.X, S.Y) if y is not None else (S.X,):
        os.makedirs(os.path.join(tmp, table))
    n = len(x)
    parts = 8  # a few files: Spark reads them as several tasks
    for k in range(parts):
        lo, hi = k * n // parts, (k + 1) * n // parts
        t = _x_table(x[lo:hi])
        t = t.set_column(0, S.SAMPLE_ID, pa.array(np.arange(lo, hi, dtype=np.int64)))
        pq.write_table(t, os.path.join(tmp, S.X, f"part-{k:05d}.parquet"))
    if y is not None:
        labels = pa.ListArray.from_arrays(
            pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(y.astype(np.int32))
        )
        pq.write_table(
            pa.table({S.SAMPLE_ID: pa.array(np.arange(n, dtype=np.int64)), S.LABEL_IDS: labels}),
            os.path.join(tmp, S.Y, "part-00000.parquet"),
        )
    _manifest(tmp, n_samples=int(n), n_features=int(x.shape[1]), n_labels=int(n_labels))
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    return path


def spark_bags(spark: SparkSession, images: str, out: str, group_size: int, seed: int) -> Bags:
    """Bags of `group_size` random images drawn by the ``aggregate`` job (random grouping, list
    merge) from the images dataset `images`, written to `out`, read back as :class:`Bags`.

    Raises:
        ValueError: the images do not fill whole bags (the job would leave a smaller last bag).
    """
    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.io.tables import read_manifest
    from eagle_spark.settings import AggregateSettings

    manifest = read_manifest(spark, images)
    n, n_labels = int(manifest["n_samples"]), int(manifest["n_labels"])
    if n % group_size:
        raise ValueError(
            f"miml: {n} images do not fill bags of {group_size} (use a multiple of it)"
        )
    aggregate(
        spark,
        images,
        out,
        AggregateSettings(grouping="random", group_size=group_size, seed=seed, merge="list"),
        overwrite=True,
    )
    y1 = pq.read_table(os.path.join(out, S.Y1)).sort_by(
        [(S.GROUP_ID, "ascending"), (S.SAMPLE_ID, "ascending")]
    )
    y2 = pq.read_table(os.path.join(out, S.Y2))
    groups = np.asarray(y1.column(S.GROUP_ID), dtype=np.int64)
    ids, first = np.unique(groups, return_index=True)
    members = np.asarray(y1.column(S.SAMPLE_ID), dtype=np.int64).reshape(len(ids), group_size)
    row = np.searchsorted(ids, np.asarray(y2.column(S.GROUP_ID), dtype=np.int64))
    counts = np.zeros((len(ids), n_labels), dtype=np.int64)
    np.add.at(
        counts,
        (row, np.asarray(y2.column(S.LABEL_ID), dtype=np.int64)),
        np.asarray(y2.column(S.COUNT), dtype=np.int64),
    )
    return Bags(members, counts)


def multiset_dataset(images: str, bags: Bags, path: str) -> str:
    """The aggregated dataset GRLR reads for `bags` (module docstring): one group per (bag, digit,
    copy), members the bag's images, label the digit; X hard-linked from `images` (copied where
    links are not possible). Written at the local `path` (replaced), renamed into place whole.

    Returns:
        `path`.
    """
    n_bags, g = bags.members.shape
    bag, label = np.nonzero(bags.counts)
    copies = bags.counts[bag, label]
    group_bag = np.repeat(bag, copies)  # group id = its position here
    group_label = np.repeat(label, copies).astype(np.int32)
    n_groups = len(group_bag)
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, S.X))
    for name in sorted(os.listdir(os.path.join(images, S.X))):
        src, dst = os.path.join(images, S.X, name), os.path.join(tmp, S.X, name)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
    for table, data in (
        (
            S.Y1,
            {
                S.SAMPLE_ID: bags.members[group_bag].ravel(),
                S.GROUP_ID: np.repeat(np.arange(n_groups, dtype=np.int64), g),
            },
        ),
        (
            S.Y2,
            {
                S.GROUP_ID: np.arange(n_groups, dtype=np.int64),
                S.LABEL_ID: group_label,
                S.COUNT: np.ones(n_groups, dtype=np.int32),
            },
        ),
    ):
        os.makedirs(os.path.join(tmp, table))
        pq.write_table(pa.table(data), os.path.join(tmp, table, "part-00000.parquet"))
    with open(os.path.join(images, S.MANIFEST), encoding="utf-8") as fh:
        manifest = json.load(fh)
    _manifest(
        tmp,
        n_samples=manifest["n_samples"],
        n_features=manifest["n_features"],
        n_labels=manifest["n_labels"],
        n_groups=int(n_groups),
        n_bags=int(n_bags),
    )
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    return path


GRLR_BYTES_PER_NONZERO = 85
"""Peak memory of the GRLR kernel's label block per candidate nonzero, bytes: a g = 50 digit's
306,000 dense rows x 784 pixels (240 M nonzeros) took 10.6 GB of anonymous memory when the
out-of-memory killer stopped two such tasks at once, and one such task alone peaked at ~20 GB
resident (1-second samples of its RSS)."""


def embed_tasks(bags: Bags, n_features: int, budget_bytes: int = 4 << 30, tasks: int = 16) -> int:
    """Spark tasks for the bags' GRLR: `tasks`, or 1 when one digit's label block (its candidate
    rows x n_features dense nonzeros x :data:`GRLR_BYTES_PER_NONZERO`) exceeds `budget_bytes`,
    so that two such blocks never run at once on one machine (one g = 50 block needs up to ~20 GB)."""
    rows = int((bags.counts.sum(axis=0) * bags.group_size).max())
    return 1 if rows * n_features * GRLR_BYTES_PER_NONZERO > budget_bytes else tasks


def centre_embeddings(emb: np.ndarray) -> np.ndarray:
    """Label embeddings without their shared component: each row minus the mean of the rows, then
    L2-normalised (a row that becomes 0 stays 0, and its mask is uniform).

    With large bags every bag holds every label, so the count-weighted GRLR embeddings are one
    common sum plus small label differences (mean cosine between MNIST's ten at g = 50: 0.94;
    centred: -0.10), and a mask built from them picks the same instances for every label.

    Args:
        emb: (n_labels, d) embeddings.
    Returns:
        (n_labels, d) float32.
    Raises:
        ValueError: fewer than 2 labels (centring one label leaves nothing).
    """
    if emb.ndim != 2 or emb.shape[0] < 2:
        raise ValueError(f"centring needs (n_labels >= 2, d) embeddings, got shape {emb.shape}")
    c = np.asarray(emb, dtype=np.float64)
    c = c - c.mean(axis=0)
    norms = np.linalg.norm(c, axis=1, keepdims=True)
    return np.divide(c, norms, out=np.zeros_like(c), where=norms > 0).astype(np.float32)
