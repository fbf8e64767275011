"""Splitting an aggregated dataset by group: the parts a held-out score trains and is scored on.

A group is held out by a seeded hash of its id (:func:`held_bucket`) or by a list of ids (the
folds of :func:`eagle_spark.assignment.selection.group_folds`); of the groups not held out a
second hash keeps a share (:func:`kept_bucket`). :func:`split_groups` writes both parts, each an
aggregated dataset of its own (X, Y1, Y2, no Y), in one pass (:func:`group_parts`).
:meth:`eagle_spark.ml.Dataset.split` is the API's door to it; the automatic assignment
(:mod:`eagle_spark.assignment.selection`) calls it directly.
"""

from __future__ import annotations

import contextlib
from typing import Optional, Sequence

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.aggregation.groups import dense_rank
from eagle_spark.io.fs import FileSystem, absolute, atomic_output, check_separate
from eagle_spark.io.tables import (
    has_table,
    new_manifest,
    read_manifest,
    read_parquet,
    read_table,
    write_manifest,
    write_table,
)


def require_groups(spark: SparkSession, dataset: str) -> None:
    """Raises ValueError unless the dataset folder is aggregated (has Y1 and Y2)."""
    if not (has_table(spark, dataset, S.Y1) and has_table(spark, dataset, S.Y2)):
        raise ValueError(
            f"Dataset.split: by='group' needs an aggregated dataset (Y1, Y2); {dataset} has none"
        )


def split_groups(
    spark: SparkSession,
    dataset: str,
    kept_path: str,
    held_path: str,
    share: float,
    seed: int = 0,
    overwrite: bool = False,
    id_map: Optional[str] = None,
    kept_share: float = 1.0,
    held_groups: Optional[Sequence[int]] = None,
) -> tuple[str, str]:
    """Cut the aggregated dataset folder `dataset` in two by group, without the true labels Y:
    the groups whose hash bucket falls below `share` (or the ids `held_groups`) to `held_path`,
    a share `kept_share` of the others (all with 1) to `kept_path`; each part is an aggregated
    dataset of its own with its members' X, Y1 and Y2, ids renumbered from 0 (:func:`group_parts`).

    Args:
        dataset: the folder (X, Y1, Y2).
        kept_path, held_path: the two folders to write (each atomic).
        share: held-out share in (0, 1) (unused with `held_groups`).
        seed: seed of the hashes (xxhash64 of seed and id).
        overwrite: replace existing folders.
        id_map: a folder for the kept part's renumbering (Parquet; :func:`group_parts`).
        kept_share: in (0, 1]: the share of the groups not held out in the kept part.
        held_groups: the group ids to hold out instead of the share's hash (only with `kept_share`
            1).
    Returns:
        (kept part's folder, held-out part's folder).
    Raises:
        ValueError: a share outside its range, `held_groups` empty or with `kept_share` below 1,
            a dataset without Y1 / Y2; OutputExistsError (a ValueError) as
            :func:`eagle_spark.io.fs.atomic_output`.
    """
    if held_groups is not None:
        if kept_share != 1.0:
            raise ValueError(
                "Dataset.split: heldGroups needs by='group', labels=False and keptShare 1"
            )
        if len(held_groups) == 0:
            raise ValueError("Dataset.split: heldGroups is empty")
    held = (
        held_bucket(share, seed, S.GROUP_ID)
        if held_groups is None
        else F.col(S.GROUP_ID).isin([int(g) for g in held_groups])
    )
    require_groups(spark, dataset)
    parts = group_parts(
        spark,
        dataset,
        {False: absolute(kept_path), True: absolute(held_path)},
        held,
        overwrite,
        None if id_map is None else (False, absolute(id_map)),
        kept_bucket(kept_share, seed),
    )
    return parts[False], parts[True]


def group_parts(
    spark: SparkSession,
    dataset: str,
    paths: dict[bool, str],
    in_held: Column,
    overwrite: bool,
    id_map: Optional[tuple[bool, str]] = None,
    in_kept: Optional[Column] = None,
) -> dict[bool, str]:
    """The parts of a split by group of the aggregated dataset folder `dataset`, without Y:
    ``paths[False]`` gets the groups where `in_held` (a condition on ``group_id``) is false and
    `in_kept` (None: always) holds, ``paths[True]`` those where `in_held` holds (either may be
    left out), each with its members' X, Y1 and Y2, written table by table in one pass over both
    parts.

    A part holds the dataset ``from_samples`` writes from the same rows of ``samples()``: one
    sample per (member, group) row of Y1 (a sample in two of the part's groups is two samples
    of it), numbered 0 .. n-1 in the order of (sample_id, group_id), and the groups 0 .. m-1 in
    the order of their ids; the round trip through a frame of vectors and its checks is left
    out, since a folder this library wrote has passed them. Y1 and the groups are numbered in
    one ranking for both parts (part by part, by a per-part offset), so the whole split costs
    one count, two rankings and one write per table and part. With `id_map` (part, folder) that
    part's renumbering is written to the folder: one row per (member, group) of the part,
    ``sample_id`` and ``group_id`` of `dataset`, ``part_sample_id`` and ``part_group_id`` of the
    part.

    Returns:
        {part: the written folder}.
    Raises:
        OutputExistsError (a ValueError): a part's folder exists and `overwrite` is false.
    """
    manifest = read_manifest(spark, dataset)
    for path in paths.values():
        check_separate(path, [dataset])
    y1 = (
        read_table(spark, dataset, S.Y1)
        .where(F.col(S.GROUP_ID).isNotNull())
        .withColumn("_held", in_held)
    )
    if in_kept is not None:  # the groups in neither part are left out before any count
        y1 = y1.where(F.col("_held") | in_kept)
    if len(paths) == 1:
        y1 = y1.where(F.col("_held") == F.lit(next(iter(paths))))
    found = {
        bool(r["_held"]): (int(r["rows"]), int(r["groups"]))
        for r in y1.groupBy("_held")
        .agg(F.count(F.lit(1)).alias("rows"), F.countDistinct(S.GROUP_ID).alias("groups"))
        .collect()
    }
    counts = {part: found.get(part, (0, 0)) for part in paths}
    # one ranking of both parts (False first): a held-out row's number in its part is its rank
    # less the kept part's size
    before = found.get(False, (0, 0)) if True in paths else (0, 0)
    rows = dense_rank(
        y1.select("_held", S.SAMPLE_ID, S.GROUP_ID), ["_held", S.SAMPLE_ID, S.GROUP_ID], "_r"
    )
    groups = dense_rank(y1.select("_held", S.GROUP_ID).distinct(), ["_held", S.GROUP_ID], "_g")
    shift = [F.when(F.col("_held"), F.lit(before[i])).otherwise(F.lit(0)) for i in (0, 1)]
    with contextlib.ExitStack() as stack:
        tmp = {
            part: stack.enter_context(atomic_output(spark, path, overwrite))
            for part, path in paths.items()
        }
        ids_path = f"{next(iter(tmp.values()))}/part_ids"
        rows.join(groups, ["_held", S.GROUP_ID]).select(
            "_held",
            S.SAMPLE_ID,
            S.GROUP_ID,
            (F.col("_r") - shift[0]).alias("_sample"),
            (F.col("_g") - shift[1]).alias("_group"),
        ).write.parquet(ids_path)
        all_ids = read_parquet(spark, ids_path)
        X = read_table(spark, dataset, S.X)
        Y2 = read_table(spark, dataset, S.Y2)
        for part, out in tmp.items():
            ids = all_ids.where(F.col("_held") == F.lit(part))
            write_table(
                X.join(ids.select(S.SAMPLE_ID, "_sample"), S.SAMPLE_ID).select(
                    F.col("_sample").alias(S.SAMPLE_ID),
                    # the non-null arrays of from_samples' X (written from vectors)
                    F.coalesce(S.FEAT_IDX, F.array()).cast("array<int>").alias(S.FEAT_IDX),
                    F.coalesce(S.FEAT_VAL, F.array()).cast("array<float>").alias(S.FEAT_VAL),
                ),
                out,
                S.X,
            )
            write_table(
                ids.select(F.col("_sample").alias(S.SAMPLE_ID), F.col("_group").alias(S.GROUP_ID)),
                out,
                S.Y1,
            )
            write_table(
                Y2.join(ids.select(S.GROUP_ID, "_group").distinct(), S.GROUP_ID).select(
                    F.col("_group").alias(S.GROUP_ID),
                    S.LABEL_ID,
                    F.coalesce(S.COUNT, F.lit(0)).alias(S.COUNT),  # non-null, as from_samples'
                ),
                out,
                S.Y2,
            )
            write_manifest(
                spark,
                out,
                new_manifest(
                    "frame",
                    n_samples=counts[part][0],
                    n_features=int(manifest["n_features"]),
                    n_labels=int(manifest["n_labels"]),
                    n_groups=counts[part][1],
                    source={"frame": "Dataset.from_samples"},
                    tables=[S.X, S.Y1, S.Y2],
                ),
            )
        if id_map is not None:
            all_ids.where(F.col("_held") == F.lit(id_map[0])).select(
                S.SAMPLE_ID,
                S.GROUP_ID,
                F.col("_sample").alias("part_sample_id"),
                F.col("_group").alias("part_group_id"),
            ).write.parquet(id_map[1])
        FileSystem(spark).delete(ids_path)
    return dict(paths)


def held_bucket(share: float, seed: int, column: str) -> Column:
    """Whether a row is held out by a split of share `share` and seed `seed` on `column`: the
    bucket of xxhash64(seed, id) mod 10,000 falls below share x 10,000.

    Raises:
        ValueError: `share` outside (0, 1).
    """
    if not 0.0 < share < 1.0:
        raise ValueError(f"Dataset.split: share must be in (0, 1), got {share}")
    bucket = F.pmod(F.xxhash64(F.lit(seed), F.col(column)), F.lit(10_000))
    return bucket < F.lit(int(round(share * 10_000)))


def kept_bucket(share: float, seed: int) -> Optional[Column]:
    """Whether a group not held out is in the kept part of a split with ``keptShare`` `share`
    (:func:`split_groups`): the bucket of xxhash64(seed, group_id, 1) mod 10,000 falls below
    share x 10,000, a hash other than the held-out one's (:func:`held_bucket`). None when
    `share` is 1 (every such group is kept).

    Raises:
        ValueError: `share` outside (0, 1].
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"Dataset.split: keptShare must be in (0, 1], got {share}")
    if share == 1.0:
        return None
    bucket = F.pmod(F.xxhash64(F.lit(seed), F.col(S.GROUP_ID), F.lit(1)), F.lit(10_000))
    return bucket < F.lit(max(1, int(round(share * 10_000))))


__all__ = [
    "group_parts",
    "held_bucket",
    "kept_bucket",
    "require_groups",
    "split_groups",
]
