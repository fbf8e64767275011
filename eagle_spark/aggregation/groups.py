"""Build aggregated-label data: groups of samples (Y1) and their merged labels (Y2 = Y1^T Y).

Two ways to group the samples of a clean XMC data set, as in the paper's experiments (section 6,
Table 2 and Figure 3):

* **random** (``R-g``): shuffle the samples with a seed and cut the order into consecutive groups
  of `g`; when ``n_samples`` is not a multiple of `g` the last group holds the remaining
  ``n_samples mod g`` samples (no sample is dropped).
* **cluster** (``C``): hierarchical balanced spherical 2-means (:mod:`eagle_spark.kmeans`) on the
  L2-normalised rows of X, to depth D, one Spark job per level (``groupBy(node).applyInArrow``: the
  members of one tree node are split inside one task; X never goes to the driver). Up to 2^D
  groups, balanced (sizes differ by at most one at each split). ``noise`` adds Gaussian noise of
  standard deviation sigma to the features used for clustering only (the paper's heterogeneity
  knob, Figure 3 right); the noise of a sample is fixed (seeded by seed and sample_id), and it makes
  the clustered rows dense, so it costs O(n_features) memory per member of a node.

All randomness is a function of (seed, sample_id), so reruns and task retries give identical
groups.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from eagle_spark import schemas as S
from eagle_spark.kmeans import balanced_2means
from eagle_spark.sparse import csr_from_arrow, l2_normalize_rows

log = logging.getLogger(__name__)

_LOCAL_BITS = 33  # monotonically_increasing_id = partition << 33 | row index in partition


def dense_rank(df: DataFrame, order_cols: list[str], name: str = "rank") -> DataFrame:
    """Add column `name` = 0-based position of each row in the total order of `order_cols`.

    The order must be total (unique keys). Runs as a range-partitioned sort plus one collect of
    per-partition row counts (one row per partition), not a single-partition window.

    Args:
        df: any frame.
        order_cols: columns giving a total order.
        name: output column (long).
    Returns:
        `df` with `name` added; the caller's frame is persisted once to count and is released.
    """
    sorted_df = df.orderBy(*order_cols).withColumn("_mid", F.monotonically_increasing_id())
    sorted_df = sorted_df.persist(StorageLevel.MEMORY_AND_DISK)
    pid = F.shiftright(F.col("_mid"), _LOCAL_BITS)
    counts = sorted(
        (int(r[0]), int(r[1])) for r in sorted_df.groupBy(pid.alias("p")).count().collect()
    )
    offsets, total = [], 0
    for p, count in counts:
        offsets.extend([F.lit(p), F.lit(total)])
        total += count
    offset = F.element_at(F.create_map(*offsets), pid) if offsets else F.lit(0)
    local = F.col("_mid").bitwiseAND(F.lit((1 << _LOCAL_BITS) - 1))
    return sorted_df.withColumn(name, (offset + local).cast("long")).drop("_mid")


def random_groups(sample_ids: DataFrame, group_size: int, seed: int) -> DataFrame:
    """Random groups of `group_size` (the paper's R-g aggregation).

    Args:
        sample_ids: DataFrame[sample_id long], unique ids (usually X's).
        group_size: g >= 1.
        seed: shuffling seed.
    Returns:
        Y1: DataFrame[sample_id long, group_id long]; group_id = position in the seeded shuffle
        div g, so groups 0 .. ceil(n/g)-1 hold g samples except possibly the last (n mod g).
    Raises:
        ValueError: group_size < 1.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    keyed = sample_ids.select(S.SAMPLE_ID, F.xxhash64(F.lit(seed), S.SAMPLE_ID).alias("_key"))
    ranked = dense_rank(keyed, ["_key", S.SAMPLE_ID], "_rank")
    return ranked.select(
        S.SAMPLE_ID, (F.col("_rank") / F.lit(group_size)).cast("long").alias(S.GROUP_ID)
    )


def _noisy_rows(sample_ids: np.ndarray, rows, noise: float, seed: int) -> np.ndarray:
    """Dense rows + fixed per-sample Gaussian noise (seeded by (seed, sample_id)), L2-normalised."""
    dense = rows.toarray().astype(np.float64)
    for i, sid in enumerate(sample_ids):
        dense[i] += noise * np.random.default_rng([seed, int(sid), 7919]).standard_normal(
            dense.shape[1]
        )
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    return np.divide(dense, norms, out=np.zeros_like(dense), where=norms > 0)


def _split_level(n_features: int, level: int, seed: int, noise: float, max_iter: int):
    """applyInArrow function: the members of one node -> (sample_id, child node)."""

    def split(key: tuple, table: pa.Table) -> pa.Table:
        node = int(key[0].as_py())
        table = table.sort_by(S.SAMPLE_ID)  # deterministic order whatever the shuffle gave
        ids = np.asarray(table.column(S.SAMPLE_ID), dtype=np.int64)
        rows = csr_from_arrow(table.column(S.FEAT_IDX), table.column(S.FEAT_VAL), n_features)
        rows = _noisy_rows(ids, rows, noise, seed) if noise > 0 else l2_normalize_rows(rows)
        right = balanced_2means(rows, seed=[seed, level, node], max_iter=max_iter)
        child = 2 * node + right.astype(np.int64)
        return pa.table({S.SAMPLE_ID: pa.array(ids), "node": pa.array(child)})

    return split


def cluster_groups(
    X: DataFrame, n_features: int, depth: int, seed: int, noise: float = 0.0, max_iter: int = 20
) -> DataFrame:
    """Hierarchical balanced spherical 2-means groups (the paper's C aggregation).

    Args:
        X: DataFrame[sample_id, feat_idx, feat_val], shape (n_samples, n_features).
        n_features: number of features.
        depth: D >= 0 levels of splitting (up to 2^D groups; D = 0 gives one group).
        seed: seed of the initial centroids and of the noise.
        noise: sigma >= 0 of the Gaussian noise added to the clustered features (0: none).
        max_iter: 2-means rounds per node.
    Returns:
        Y1: DataFrame[sample_id long, group_id long] with contiguous group ids 0..n_groups-1
        numbered in tree order (left to right).
    Raises:
        ValueError: depth < 0, depth > 24, or noise < 0.
    """
    if not 0 <= depth <= 24:
        raise ValueError(f"depth must be in [0, 24], got {depth}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    features = X.select(S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL)
    assign = features.select(S.SAMPLE_ID, F.lit(0).cast("long").alias("node"))
    previous = None
    for level in range(depth):
        members = features.join(assign, S.SAMPLE_ID)
        assign = (
            members.groupBy("node")
            .applyInArrow(
                _split_level(n_features, level, seed, noise, max_iter), "sample_id long, node long"
            )
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        n_nodes = assign.select("node").distinct().count()  # one job per level; cuts the lineage
        log.info("cluster grouping: level %d/%d done, %d nodes", level + 1, depth, n_nodes)
        if previous is not None:
            previous.unpersist()
        previous = assign
    nodes = assign.select("node").distinct()
    numbered = nodes.withColumn(S.GROUP_ID, F.row_number().over(Window.orderBy("node")) - 1)
    return assign.join(F.broadcast(numbered), "node").select(
        S.SAMPLE_ID, F.col(S.GROUP_ID).cast("long")
    )


def merge_labels(Y1: DataFrame, Y: DataFrame, merge: str) -> DataFrame:
    """Y2 = Y1^T Y: the labels of each group's members.

    Args:
        Y1: DataFrame[sample_id, group_id].
        Y: DataFrame[sample_id, label_ids].
        merge: ``list`` (count = how many members have the label) or ``set`` (count = 1).
    Returns:
        Y2: DataFrame[group_id long, label_id int, count int], one row per (group, label) with
        count >= 1; groups whose members have no label have no row.
    Raises:
        ValueError: merge is not list or set.
    """
    if merge not in ("list", "set"):
        raise ValueError(f"merge must be list or set, got {merge!r}")
    positives = Y.select(S.SAMPLE_ID, F.explode(S.LABEL_IDS).alias(S.LABEL_ID))
    counted = Y1.join(positives, S.SAMPLE_ID).groupBy(S.GROUP_ID, S.LABEL_ID).count()
    count = F.col("count") if merge == "list" else F.lit(1)
    return counted.select(S.GROUP_ID, S.LABEL_ID, count.cast("int").alias(S.COUNT))


def group_size_stats(Y1: DataFrame) -> dict:
    """n_groups, mean/min/max group size and the histogram {size: n_groups} (bounded by max size)."""
    sizes = Y1.groupBy(S.GROUP_ID).count()
    hist = {
        int(r["count"]): int(r["n"])
        for r in sizes.groupBy("count").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    n_groups = sum(hist.values())
    members = sum(size * n for size, n in hist.items())
    return {
        "n_groups": n_groups,
        "group_size_mean": members / n_groups if n_groups else 0.0,
        "group_size_min": min(hist) if hist else 0,
        "group_size_max": max(hist) if hist else 0,
        "group_size_histogram": {str(k): hist[k] for k in sorted(hist)},
    }
