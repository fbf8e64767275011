"""The ``embed`` stage: GRLR (Algorithm 1) label embeddings as map-reduce over labels, on Spark.

Exact semantics (tested against a numpy twin written from the paper):

* rows of X are L2-normalised first (cosine similarity; ``normalize=False`` turns it off);
* e0 = Proj(sum over j in M_k, i in N_j of x_i): a sample counts once per group it is in;
* at iteration t every sample attaining its group's maximum of <e^(t-1), x_i> is selected (a_ij = 1
  for all ties; a score within 1e-9 relative of the maximum attains it, ``kernel.TIE_RTOL``, since
  float64 rounding makes equal scores differ in their last bits), g = Proj(sum of the selected
  x_i), e^t = Proj(e^(t-1) + lambda g);
* Proj(v) = v / ||v||, and Proj(0) = 0. A label whose e0 is 0 (the paper's toy example: x and -x in
  every group) keeps e = 0: every score is 0, all members tie, g = Proj(sum) = 0. Its embedding is
  stored empty (no nonzero weight), deterministically; assignment then gives each of its group
  labels to the group's smallest sample_id;
* T = 0 returns e0 (EAGLE-0).

Execution (``docs/design.md``): Y2 is exploded into (label, group) pairs; each label's work is the
number of candidate rows sum_j |N_j|. Labels are dealt round-robin, heaviest first, into
``tasks`` bins, fewer when the work is small (``min_task_work``,
:func:`eagle_spark.tasks.tasks_for_work`); one ``groupBy(bin).applyInArrow`` task runs all T
iterations for its bin's labels, in vectorised batches
(:class:`eagle_spark.grlr.kernel.LabelBlock`), reading X and Y1 from an executor-side cache
(:mod:`eagle_spark.grlr.context`) instead of shuffling feature vectors.
Labels heavier than ``split_rows`` are split into chunks of groups processed by parallel tasks;
the driver combines the chunks' partial sums each iteration (T + 3 small jobs for all of them).

Algorithm 2 runs in the same pass: the task that finishes a label's T iterations holds its
candidates and embedding, so it also writes each pair's top-``count`` members (``top_members``),
which ``assign`` then reads instead of re-reading the embeddings and X (paper section 4.2).
"""

from __future__ import annotations

import io
import logging
import math
import posixpath
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S
from eagle_spark.aggregation.groups import dense_rank
from eagle_spark.classic import default_parallelism
from eagle_spark.errors import BadInputError, check_finite
from eagle_spark.grlr.context import (
    Context,
    choose_x_access,
    context_of_members,
    joined_members,
    load_context,
    x_size,
)
from eagle_spark.grlr.kernel import LabelBlock, PairBatch, segment_first_max, select_top_ranked
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate
from eagle_spark.io.parts import PartWriter, PartWriters
from eagle_spark.io.tables import new_manifest, read_table, require_tables, write_manifest
from eagle_spark.progress import step
from eagle_spark.rows import first_row
from eagle_spark.settings import EmbedSettings
from eagle_spark.tasks import tasks_for_work

log = logging.getLogger(__name__)

_BIN = "_bin"
_ROWS = "_rows"


def label_work(Y1: DataFrame, Y2: DataFrame) -> tuple[DataFrame, dict[str, int]]:
    """Per label: n_groups and _rows = sum of its groups' sizes (candidate rows), and the totals.

    Returns:
        (DataFrame[label_id, n_groups, _rows, _orphan (null)], cached: the caller unpersists it;
        {"rows": candidate rows of all labels, "labels": labels, "pairs": (group, label) pairs}):
        the totals and the check below come from the one job that fills the cache.
    Raises:
        BadInputError: a group of Y2 has no member in Y1 (names the smallest such group).
    """
    sizes = Y1.groupBy(S.GROUP_ID).agg(F.count(F.lit(1)).alias("_size"))
    pairs = Y2.select(S.GROUP_ID, S.LABEL_ID).join(sizes, S.GROUP_ID, "left")
    work = (
        pairs.groupBy(S.LABEL_ID)
        .agg(
            F.count(F.lit(1)).alias(S.N_GROUPS),
            F.sum("_size").alias(_ROWS),
            F.min(F.when(F.col("_size").isNull(), F.col(S.GROUP_ID))).alias("_orphan"),
        )
        .cache()
    )
    total = first_row(
        work.agg(F.sum(_ROWS), F.count(F.lit(1)), F.sum(S.N_GROUPS), F.min("_orphan")), "label_work"
    )
    if total[3] is not None:
        work.unpersist()
        raise BadInputError(f"Y2 has group_id {total[3]} without members in Y1")
    totals = {"rows": int(total[0] or 0), "labels": int(total[1]), "pairs": int(total[2] or 0)}
    return work, totals


def partition_keys(spark: SparkSession, n: int) -> list[int]:
    """Int keys k_0..k_(n-1) such that ``repartition(n, col)`` puts the rows whose col is k_p
    in partition p: one key per partition, so n bins fill n tasks one each.

    Dealing bin ids 0..n-1 straight into ``repartition(n, bin)`` hashes two bins into the same
    partition now and then (10 of 16 tasks held work at Wiki-325K: the stage ran as long as its
    double tasks). Spark partitions by pmod(hash(col), n) with the Murmur3 hash of ``F.hash``, so
    the keys are found with one small query (``tests/unit/test_grlr.py`` checks the placement
    with ``spark_partition_id``).

    Raises:
        RuntimeError: no key for some partition among the first 64 n + 1024 integers (Spark would
            have to partition differently from ``F.hash``).
    """
    key = F.col("id").cast("int")
    rows = (
        spark.range(64 * n + 1024)
        .select(key.alias("k"), F.pmod(F.hash(key), F.lit(n)).alias("p"))
        .groupBy("p")
        .agg(F.min("k").alias("k"))
        .collect()
    )
    keys = {int(r["p"]): int(r["k"]) for r in rows}
    if len(keys) < n:
        raise RuntimeError(f"embed: no bin key for partitions {sorted(set(range(n)) - set(keys))}")
    return [keys[p] for p in range(n)]


def assign_bins(work: DataFrame, keys: list[int]) -> DataFrame:
    """label_id -> bin: labels sorted by work (heaviest first) dealt round-robin into len(keys)
    bins, bin b named keys[b] (:func:`partition_keys`: each bin a partition of its own)."""
    ranked = dense_rank(work.withColumn("_neg", -F.col(_ROWS)), ["_neg", S.LABEL_ID], "_rank")
    bin_ = F.array(*[F.lit(k) for k in keys])[(F.col("_rank") % len(keys)).cast("int")]
    return ranked.select(S.LABEL_ID, bin_.alias(_BIN), S.N_GROUPS, _ROWS)


_SUMMARY = pa.schema(
    [
        pa.field(_BIN, pa.int32(), nullable=False),
        pa.field("labels", pa.int64(), nullable=False),
        pa.field("pairs", pa.int64(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("entries", pa.int64(), nullable=False),
        pa.field(
            "sum_max", pa.list_(pa.field("element", pa.float64(), nullable=False)), nullable=False
        ),
        pa.field(
            "changed", pa.list_(pa.field("element", pa.int64(), nullable=False)), nullable=False
        ),
    ]
)


def batches_of(labels: np.ndarray, groups: np.ndarray, sizes: np.ndarray, batch_rows: int):
    """Split label-sorted pairs into batches of whole labels with about `batch_rows` rows."""
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], len(labels)]
    label_rows = np.add.reduceat(sizes, starts) if len(starts) else np.zeros(0)
    lo, acc = 0, 0
    for i in range(len(starts)):
        acc += int(label_rows[i])
        if acc >= batch_rows or i == len(starts) - 1:
            yield starts[lo], ends[i]
            lo, acc = i + 1, 0


def _embed_task(dataset: str, out: str, n_features: int, params: EmbedSettings):
    """applyInArrow function (cached path): one bin's (label, group, count) pairs -> part files +
    summary, the candidates' rows from the executor cache (:func:`load_context`)."""

    def run(key: tuple, table: pa.Table) -> pa.Table:
        return _embed_bin(
            load_context(dataset, n_features, params.normalize), key, table, out, params
        )

    return run


def _embed_task_joined(out: str, n_features: int, params: EmbedSettings):
    """cogroup applyInArrow function (joined path): one bin's pairs and the member rows of its
    groups (:func:`joined_members`) -> part files + summary; the task holds only its bin's rows."""

    def run(key: tuple, table: pa.Table, members: pa.Table) -> pa.Table:
        return _embed_bin(
            context_of_members(members, n_features, params.normalize), key, table, out, params
        )

    return run


def _embed_bin(
    ctx: Context, key: tuple, table: pa.Table, out: str, params: EmbedSettings
) -> pa.Table:
    """GRLR for one bin's pairs, in batches; writes the bin's ``label_emb`` part and its
    ``top_members`` part (Algorithm 2 in the same pass, from the candidates and embeddings the task
    already holds) and returns the bin's summary row."""
    table = table.sort_by([(S.LABEL_ID, "ascending"), (S.GROUP_ID, "ascending")])
    labels = np.asarray(table.column(S.LABEL_ID), dtype=np.int64)
    groups = np.asarray(table.column(S.GROUP_ID), dtype=np.int64)
    counts = np.asarray(table.column(S.COUNT), dtype=np.int64)
    sizes = ctx.group_sizes(groups)
    T = params.iterations
    sum_max = np.zeros(T + 1)
    changed = np.zeros(T + 1, dtype=np.int64)
    entries = 0
    with PartWriters(
        out, {S.LABEL_EMB: S.LABEL_EMB_ARROW, S.TOP_MEMBERS: S.TOP_MEMBERS_ARROW}, dictionary=False
    ) as writers:
        writers.name(f"part-{int(key[0].as_py()):05d}.parquet")
        for lo, hi in batches_of(labels, groups, sizes, params.batch_rows):
            batch_labels, local = np.unique(labels[lo:hi], return_inverse=True)
            ptr, rows = ctx.rows_of_groups(groups[lo:hi])
            block = LabelBlock(ctx.X, PairBatch(local, ptr, rows, len(batch_labels)))
            e, stats = block.grlr(T, params.lr)

            def where(i, b=block, ls=batch_labels):
                return int(ls[np.searchsorted(b.label_ptr, i, side="right") - 1])

            check_finite(
                e,
                lambda i: (
                    f"embed: label {where(i)}: the embedding is not finite "
                    f"(NaN or infinite) after {T} GRLR iterations with "
                    f"embed.lr={params.lr}"
                ),
            )
            sum_max += stats["sum_max"]
            changed += stats["changed"]
            entries += block.A.nnz * (2 * T + 2)
            n_groups = np.bincount(local, minlength=len(batch_labels))
            writers.write(
                S.LABEL_EMB,
                _emb_batch(batch_labels, block.embeddings(e, params.prune_below), n_groups),
            )
            scores = block.scores(stored_precision(e))
            writers.write(
                S.TOP_MEMBERS,
                top_members_batch(
                    groups[lo:hi], labels[lo:hi], ctx.sample_ids[rows], scores, ptr, counts[lo:hi]
                ),
            )
    return pa.Table.from_pydict(
        {
            _BIN: [int(key[0].as_py())],
            "labels": [len(np.unique(labels))],
            "pairs": [len(labels)],
            "rows": [int(sizes.sum())],
            "entries": [entries],
            "sum_max": [sum_max.tolist()],
            "changed": [changed.tolist()],
        },
        schema=_SUMMARY,
    )


def stored_precision(e: np.ndarray) -> np.ndarray:
    """`e` rounded to the float32 weights ``label_emb`` stores, as float64.

    Algorithm 2 in the embed pass scores with these, so that its choices equal those of ``assign``
    re-reading the stored (unpruned) embeddings.
    """
    return e.astype(np.float32).astype(np.float64)


def top_members_batch(
    groups: np.ndarray,
    labels: np.ndarray,
    cand_sample_ids: np.ndarray,
    scores: np.ndarray,
    ptr: np.ndarray,
    counts: np.ndarray,
) -> pa.RecordBatch:
    """Algorithm 2 for a batch of pairs: each pair's top-``count`` members as a ``top_members`` batch.

    Args:
        groups, labels, counts: (n_pairs,) the pairs' group, label and list-merge count.
        cand_sample_ids: (n_candidates,) sample id of each candidate (members in sample_id order).
        scores: (n_candidates,) <e_k, x_i> per candidate.
        ptr: (n_pairs + 1,) candidate offsets of each pair.
    Raises:
        NumericalError: a score is not finite (names the label).
    """
    check_finite(
        scores,
        lambda i: (
            f"assign: label {int(labels[np.searchsorted(ptr, i, side='right') - 1])}: a score "
            "<e_k, x_i> is not finite; check the embeddings"
        ),
    )
    chosen, pair_of, rank = select_top_ranked(scores, ptr, counts)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(groups[pair_of].astype(np.int64)),
            pa.array(labels[pair_of].astype(np.int32)),
            pa.array(cand_sample_ids[chosen].astype(np.int64)),
            pa.array(scores[chosen].astype(np.float32)),
            pa.array(rank.astype(np.int32)),
        ],
        schema=S.TOP_MEMBERS_ARROW,
    )


def _emb_batch(
    label_ids: np.ndarray, embs: list[tuple[np.ndarray, np.ndarray]], n_groups: np.ndarray
) -> pa.RecordBatch:
    lengths = np.array([len(i) for i, _ in embs], dtype=np.int64)
    offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
    idx = np.concatenate([i for i, _ in embs]) if embs else np.zeros(0, np.int32)
    val = np.concatenate([v for _, v in embs]) if embs else np.zeros(0, np.float32)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(label_ids.astype(np.int32)),
            pa.ListArray.from_arrays(
                offsets, pa.array(idx.astype(np.int32)), type=S.ARROW_INT_LIST
            ),
            pa.ListArray.from_arrays(
                offsets, pa.array(val.astype(np.float32)), type=S.ARROW_FLOAT_LIST
            ),
            pa.array(n_groups.astype(np.int32)),
        ],
        schema=S.LABEL_EMB_ARROW,
    )


# ---------------------------------------------------------------- heavy labels: split and combine
_CHUNK = "_chunk"
_PARTIAL = pa.schema(
    [
        pa.field(S.LABEL_ID, pa.int64(), nullable=False),
        pa.field(_CHUNK, pa.int64(), nullable=False),
        pa.field(
            "g_idx", pa.list_(pa.field("element", pa.int64(), nullable=False)), nullable=False
        ),
        pa.field(
            "g_val", pa.list_(pa.field("element", pa.float64(), nullable=False)), nullable=False
        ),
        pa.field(
            "first", pa.list_(pa.field("element", pa.int64(), nullable=False)), nullable=False
        ),
        pa.field("sum_max", pa.float64(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("nnz", pa.int64(), nullable=False),
    ]
)


def _chunk_task(
    dataset: str,
    n_features: int,
    normalize: bool,
    e_folder: str,
    mode: str,
    out: str = "",
    joined: bool = False,
):
    """applyInArrow function for one chunk of a heavy label.

    mode ``sum``: partial sum of all candidates (for e0). mode ``step``: scores under the current
    e (the label's file in `e_folder`, :func:`_write_heavy_e`), the partial sum of the selected
    candidates, the first maxima and the sum of maxima. mode ``top``: Algorithm 2 for the chunk's
    pairs under the (stored-precision) e, written as
    a ``top_members`` part file under `out` (a chunk holds whole groups). With `joined`, each row
    of the chunk's table is a (pair, member) with the member's features (the joined path);
    otherwise a row is a pair and the features come from the executor cache.
    """

    def run(key: tuple, table: pa.Table) -> pa.Table:
        label, chunk = int(key[0].as_py()), int(key[1].as_py())
        if joined:
            ctx = context_of_members(table, n_features, normalize)
            table = (
                table.select([S.GROUP_ID, S.COUNT])
                .group_by(S.GROUP_ID)
                .aggregate([(S.COUNT, "max")])
            )
            table = table.rename_columns([S.GROUP_ID, S.COUNT])
        else:
            ctx = load_context(dataset, n_features, normalize)
        table = table.sort_by(S.GROUP_ID)
        groups = np.asarray(table.column(S.GROUP_ID), dtype=np.int64)
        ptr, rows = ctx.rows_of_groups(groups)
        A = ctx.X[rows]
        g, first, sum_max = np.zeros(0), np.zeros(0, np.int64), 0.0
        if mode == "sum":
            g = np.asarray(A.T @ np.ones(A.shape[0])).ravel()
        else:
            idx, val = _read_heavy_e(e_folder, label, n_features)
            e = np.zeros(n_features)
            e[idx] = val
            scores = A @ e
            if mode == "step":
                seg_max, is_max, first_pos = segment_first_max(scores, ptr)
                g = np.asarray(A.T @ is_max.astype(np.float64)).ravel()
                first, sum_max = ctx.sample_ids[rows[first_pos]], float(seg_max.sum())
            else:
                writer = PartWriter(
                    posixpath.join(out, S.TOP_MEMBERS),
                    f"part-heavy-{label:07d}-{chunk:05d}.parquet",
                    S.TOP_MEMBERS_ARROW,
                    dictionary=False,
                )
                try:
                    writer.write(
                        top_members_batch(
                            groups,
                            np.full(len(groups), label),
                            ctx.sample_ids[rows],
                            scores,
                            ptr,
                            np.asarray(table.column(S.COUNT), dtype=np.int64),
                        )
                    )
                except BaseException:
                    writer.abort()
                    raise
                writer.close()
        nz = np.flatnonzero(g)
        return pa.Table.from_pydict(
            {
                S.LABEL_ID: [label],
                _CHUNK: [chunk],
                "g_idx": [nz.tolist()],
                "g_val": [g[nz].tolist()],
                "first": [first.tolist()],
                "sum_max": [sum_max],
                "rows": [int(A.shape[0])],
                "nnz": [int(A.nnz)],
            },
            schema=_PARTIAL,
        )

    return run


def _write_heavy_e(folder: str, e: dict[int, np.ndarray]) -> None:
    """Write each heavy label's current embedding as ``<folder>/<label>.npz`` (its nonzero feature
    ids and values), which the chunk tasks read (:func:`_read_heavy_e`): a file every executor
    reaches instead of a broadcast, on classic sessions and under Spark Connect alike."""
    fs = FileSystem()
    for k, v in e.items():
        nz = np.flatnonzero(v)
        buf = io.BytesIO()
        np.savez(buf, idx=nz.astype(np.int64), val=v[nz].astype(np.float64))
        fs.write_bytes(posixpath.join(folder, f"{k}.npz"), buf.getvalue())


def _read_heavy_e(folder: str, label: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """(feature ids, values) of label `label`'s embedding written by :func:`_write_heavy_e`.

    Raises:
        BadInputError: the file is missing, unreadable or holds ids outside [0, n_features).
    """
    path = posixpath.join(folder, f"{label}.npz")
    try:
        with np.load(io.BytesIO(FileSystem().read_bytes(path)), allow_pickle=False) as z:
            idx, val = z["idx"], z["val"]
    except (OSError, ValueError, KeyError) as err:
        raise BadInputError(f"embed: {path}: the label's embedding cannot be read: {err}") from err
    if len(idx) != len(val) or (len(idx) and (idx.min() < 0 or idx.max() >= n_features)):
        raise BadInputError(f"embed: {path}: feature ids outside [0, {n_features}) or uneven")
    return idx, val


def _proj(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else np.zeros_like(v)


def _embed_heavy(
    spark: SparkSession,
    dataset: str,
    out: str,
    pairs: DataFrame,
    heavy: list,
    n_features: int,
    params: EmbedSettings,
    split_rows: int,
    members: DataFrame | None = None,
) -> dict[str, Any]:
    """GRLR for heavy labels: chunks of groups in parallel tasks, combined on the driver.

    With `members` (the joined path: DataFrame[group_id, sample_id, feat_idx, feat_val]) the
    chunks' member rows are joined once, partitioned by (label, chunk) and cached, so the T + 3
    jobs reuse them without another shuffle.
    """
    n_chunks = {int(r[S.LABEL_ID]): max(2, math.ceil(int(r[_ROWS]) / split_rows)) for r in heavy}
    chunk_of = F.element_at(
        F.create_map(*[x for k, c in n_chunks.items() for x in (F.lit(k), F.lit(c))]),
        F.col(S.LABEL_ID),
    )
    chunked = pairs.where(F.col(S.LABEL_ID).isin(list(n_chunks))).withColumn(
        _CHUNK, F.pmod(F.xxhash64(S.GROUP_ID), chunk_of)
    )
    if members is not None:
        partitions = min(
            sum(n_chunks.values()), int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
        )
        chunked = chunked.join(members, S.GROUP_ID).repartition(partitions, S.LABEL_ID, _CHUNK)
    chunked = chunked.cache()
    T = params.iterations
    stats: dict[str, Any] = {
        "sum_max": np.zeros(T + 1),
        "changed": np.zeros(T + 1, dtype=np.int64),
        "entries": 0,
    }
    n_groups = {int(r[S.LABEL_ID]): int(r[S.N_GROUPS]) for r in heavy}

    rounds = iter(range(T + 3))

    def run(mode: str, e: dict[int, np.ndarray] | None) -> dict[int, list]:
        folder = posixpath.join(out, f".grlr-e-{next(rounds)}")  # hidden: not part of the output
        _write_heavy_e(folder, e or {})
        try:
            rows = (
                chunked.groupBy(S.LABEL_ID, _CHUNK)
                .applyInArrow(
                    _chunk_task(
                        dataset,
                        n_features,
                        params.normalize,
                        folder,
                        mode,
                        out,
                        members is not None,
                    ),
                    from_arrow_schema(_PARTIAL),
                )
                .collect()
            )
        finally:
            FileSystem().delete(folder)
        by_label: dict[int, list] = {}
        for r in sorted(rows, key=lambda r: (r[S.LABEL_ID], r[_CHUNK])):
            by_label.setdefault(int(r[S.LABEL_ID]), []).append(r)
            stats["entries"] += int(r["nnz"])
        return by_label

    def combine(parts: list) -> np.ndarray:
        g = np.zeros(n_features)
        for r in parts:
            g[np.asarray(r["g_idx"], dtype=np.int64)] += np.asarray(r["g_val"])
        return g

    e = {k: _proj(combine(parts)) for k, parts in run("sum", None).items()}
    state = run("step", e)
    first = {
        k: np.concatenate([np.asarray(r["first"]) for r in parts]) for k, parts in state.items()
    }
    stats["sum_max"][0] += sum(r["sum_max"] for parts in state.values() for r in parts)
    for t in range(1, T + 1):
        step("GRLR iteration %d/%d of %d heavy labels", t, T, len(e))
        e = {k: _proj(e[k] + params.lr * _proj(combine(state[k]))) for k in e}
        state = run("step", e)
        new_first = {
            k: np.concatenate([np.asarray(r["first"]) for r in parts]) for k, parts in state.items()
        }
        stats["sum_max"][t] += sum(r["sum_max"] for parts in state.values() for r in parts)
        stats["changed"][t] += sum(int((new_first[k] != first[k]).sum()) for k in first)
        first = new_first
    for k in sorted(e):
        check_finite(
            e[k],
            lambda _: (
                f"embed: label {k}: the embedding is not finite (NaN or "
                f"infinite) after {T} GRLR iterations with embed.lr={params.lr}"
            ),
        )
    run("top", {k: stored_precision(v) for k, v in e.items()})  # writes top_members parts
    chunked.unpersist()
    writer = PartWriter(
        posixpath.join(out, S.LABEL_EMB), "part-heavy.parquet", S.LABEL_EMB_ARROW, dictionary=False
    )
    labels = np.array(sorted(e), dtype=np.int64)
    embs = []
    for k in labels:
        keep = np.flatnonzero((e[k] != 0) & (np.abs(e[k]) >= params.prune_below))
        embs.append((keep.astype(np.int32), e[k][keep].astype(np.float32)))
    writer.write(_emb_batch(labels, embs, np.array([n_groups[k] for k in labels])))
    writer.close()
    stats["labels"] = len(labels)
    return stats


def embed(
    spark: SparkSession,
    dataset: str,
    output_path: str,
    params: EmbedSettings,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Learn one label embedding per label of Y2 with GRLR and write ``<output>/label_emb``.

    Args:
        spark: the active session.
        dataset: aggregated dataset (X, Y1, Y2) on storage every executor reaches.
        output_path: folder to write (atomic): ``label_emb/`` (label_id int, emb_idx array<int>,
            emb_val array<float> with unit L2 norm or empty, n_groups int; weights below
            ``prune_below`` left out), ``top_members/`` (Algorithm 2 in the same pass: for each
            (group, label) pair of Y2 its top-``count`` members, group_id, label_id, sample_id,
            score float, rank int 0 = the argmax; scores use the float32 weights ``label_emb``
            stores before pruning) and ``_manifest.json``.
        params: the ``embed`` settings section.
        overwrite: replace an existing output.
    Returns:
        The manifest: n_labels (embedded), n_pairs, per-iteration statistics (``iterations``: t,
        changed_fraction, mean_max_score), entries processed, parameters.
    Raises:
        BadInputError: the dataset lacks X, Y1 or Y2, or a group of Y2 has no member.
        OutputExistsError: the output exists and `overwrite` is false.
    """
    check_separate(output_path, [dataset])
    manifest_in = require_tables(spark, dataset, (S.X, S.Y1, S.Y2), " (aggregate it first)")
    n_features = int(manifest_in["n_features"])
    Y1, Y2 = read_table(spark, dataset, S.Y1), read_table(spark, dataset, S.Y2)
    work, totals = label_work(Y1, Y2)
    total_rows, n_labels = totals["rows"], totals["labels"]
    split_rows = params.split_rows or max(2 * total_rows // params.tasks, 500_000)
    heavy = work.where(F.col(_ROWS) > split_rows).collect()  # <= 2 * total / split_rows labels
    T = params.iterations
    X = read_table(spark, dataset, S.X)
    # X's size decides auto's path and a cached path's bins (unless fixed); else it is not used
    counted = params.x_access == "auto" or (
        params.x_access == "cached" and params.min_task_work > 0
    )
    nonzeros, rows = x_size(X) if counted else (0, 0)
    x_access, why = choose_x_access(
        spark, X, Y1, params.x_access, params.cache_budget, "embed", size=(nonzeros, rows)
    )
    log.info("embed: %s path (%s)", x_access, why)
    n_bins = tasks_for_work(  # joined: a bin's groups' rows are its task's memory, so `tasks` bins
        params.tasks,
        params.min_task_work if x_access == "cached" else 0.0,
        n_labels,
        total_rows * nonzeros / max(1, rows) * (T + 1),
        default_parallelism(spark),
    )
    with atomic_output(spark, output_path, overwrite) as tmp:
        bins = assign_bins(work.where(F.col(_ROWS) <= split_rows), partition_keys(spark, n_bins))
        pairs = Y2.select(S.GROUP_ID, S.LABEL_ID, S.COUNT)
        light = pairs.join(bins.select(S.LABEL_ID, _BIN), S.LABEL_ID)
        if x_access == "cached":
            # one bin per partition (partition_keys); the explicit count also keeps adaptive
            # execution from coalescing a small pairs shuffle (few labels, e.g. 10 digits)
            # into one task running every bin in turn
            summaries = (
                light.repartition(n_bins, _BIN)
                .groupBy(_BIN)
                .applyInArrow(
                    _embed_task(dataset, tmp, n_features, params), from_arrow_schema(_SUMMARY)
                )
            )
        else:
            members = joined_members(X, Y1, light.select(_BIN, S.GROUP_ID).distinct(), [_BIN])
            summaries = (
                light.groupBy(_BIN)
                .cogroup(members.groupBy(_BIN))
                .applyInArrow(
                    _embed_task_joined(tmp, n_features, params), from_arrow_schema(_SUMMARY)
                )
            )
        done = sorted(summaries.collect(), key=lambda r: r[_BIN])  # one summation order
        sum_max = np.sum([r["sum_max"] for r in done], axis=0) if done else np.zeros(T + 1)
        changed = np.sum([r["changed"] for r in done], axis=0) if done else np.zeros(T + 1)
        entries = sum(r["entries"] for r in done)
        if heavy:
            log.info(
                "embed: %d heavy labels split into chunks (split_rows=%d)", len(heavy), split_rows
            )
            hs = _embed_heavy(
                spark,
                dataset,
                tmp,
                pairs,
                heavy,
                n_features,
                params,
                split_rows,
                None
                if x_access == "cached"
                else joined_members(X, Y1, Y1.select(S.GROUP_ID).distinct(), []),
            )
            sum_max, changed, entries = (
                sum_max + hs["sum_max"],
                changed + hs["changed"],
                entries + hs["entries"],
            )
        n_pairs = totals["pairs"]
        work.unpersist()
        iterations = [
            {
                "t": t,
                "changed_fraction": float(changed[t]) / n_pairs if n_pairs else 0.0,
                "mean_max_score": float(sum_max[t]) / n_pairs if n_pairs else 0.0,
            }
            for t in range(T + 1)
        ]
        manifest = new_manifest(
            "embed",
            n_labels=n_labels,
            n_features=n_features,
            n_pairs=n_pairs,
            n_candidate_rows=total_rows,
            n_heavy_labels=len(heavy),
            entries_processed=int(entries),
            source={"dataset": dataset, "dataset_created_at": manifest_in.get("created_at")},
            x_access=x_access,
            x_access_reason=why,
            parameters=params.to_dict() | {"split_rows": split_rows},
            iterations=iterations,
            tables=[S.LABEL_EMB, S.TOP_MEMBERS],
        )
        write_manifest(spark, tmp, manifest)
    log.info(
        "embed: %d labels, %d pairs; last changed fraction %.4f",
        n_labels,
        n_pairs,
        iterations[-1]["changed_fraction"],
    )
    return manifest


__all__ = ["embed", "label_work", "assign_bins", "partition_keys"]
