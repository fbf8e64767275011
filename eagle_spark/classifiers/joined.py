"""The classifiers' join path (``tree.x_access`` / ``ova.x_access`` = ``joined``): a training task
receives only the rows of X its units train on, through a Spark join, instead of reading all of X
into the executor cache.

The map-reduce, per training stage with B bins (Spark tasks):

1. *Needs* (``spark.range(B).mapInArrow``): task b reads Y (the executor cache of Y alone,
   :func:`load_y`: ~5 bytes per positive, no X) and emits the (bin, sample_id) pairs of the rows its
   units need: for a tree node the samples positive under it (all samples for the root), for a
   block of one-vs-all labels their positives and drawn negatives (every sample when
   ``negative_fraction`` is 1; none for a label without a positive, whose classifier is constant).
2. *Join*: the pairs joined with X on sample_id, grouped by bin (``groupBy().applyInArrow``): one
   call per bin with its rows, which it turns into a task-private CSR (:func:`local_rows`) in
   sample_id order, so every unit sees the same rows in the same order as with the cache, and
   trains exactly the same weights.

Shuffle bytes: the feature rows times the number of bins needing each (for the tree about the
tree depth x n_trees / the number of units per bin, plus all of X once for the bins with a root;
for one-vs-all with all negatives, all of X per bin). A task's heap holds its bins' rows (~8 bytes
per nonzero) while it trains: the largest bin is the limit (a root's bin holds all of X).

The tree's PIFA label representations (Y^T X, rows of X normalised) are summed the same way
(:func:`eagle_spark.classifiers.tree.indexer.joined_pifa`): label bins, each receiving the rows of the samples having one of its labels,
written as float64 sparse rows the indexer then reads like any ``label_emb`` (same values, same
summation order as :func:`eagle_spark.classifiers.tree.indexer.pifa`).

Source: this project (issue "scale out for real"), after the design's "explode Y2, join with
grouped sample features" for GRLR.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp
from pyspark.sql import DataFrame, SparkSession

from eagle_spark import schemas as S
from eagle_spark.executor_state import shared_state, sparse_arrays, sparse_from
from eagle_spark.io.parts import filesystem_for, folder_version
from eagle_spark.io.tables import read_table
from eagle_spark.settings import OVASettings, TreeSettings
from eagle_spark.sparse import csr_from_arrow, l2_normalize_rows

log = logging.getLogger(__name__)

BIN = "bin"
_PAIRS = pa.schema([pa.field(BIN, pa.int64(), False), pa.field(S.SAMPLE_ID, pa.int64(), False)])


def load_y(dataset: str, n_labels: int) -> tuple[np.ndarray, sp.csc_matrix]:
    """(sample_ids int64 sorted, Y (n_samples, n_labels) CSC bool with sorted indices) of a
    dataset's Y table alone, held once per executor (:mod:`eagle_spark.executor_state`).

    Memory per executor: ~5 bytes per positive + 8 per sample, whatever the number of task slots;
    no X. The rows are the samples of the Y table, which the join path checks against X.
    Raises:
        ValueError: a label id outside [0, n_labels).
    """
    key = (dataset, folder_version(dataset), n_labels)

    def build() -> dict[str, np.ndarray]:
        fs, root = filesystem_for(dataset)
        yt = pq.read_table(
            f"{root}/{S.Y}", filesystem=fs, columns=[S.SAMPLE_ID, S.LABEL_IDS]
        ).sort_by(S.SAMPLE_ID)
        from eagle_spark.io.parts import y_matrix

        ids = np.asarray(yt.column(S.SAMPLE_ID), dtype=np.int64)
        values = np.asarray(yt.column(S.LABEL_IDS).combine_chunks().values)
        if len(values) and (values.min() < 0 or values.max() >= n_labels):
            raise ValueError(f"{dataset}: a label id of Y is outside [0, {n_labels})")
        return {"ids": ids, **sparse_arrays(y_matrix(yt, n_labels, what=f"{dataset}/Y"), "Y")}

    return shared_state("y", key, build, lambda a: (a["ids"], sparse_from(a, "Y", "csc")))


def training_access(
    spark: SparkSession,
    dataset: str,
    params: TreeSettings | OVASettings,
    who: str,
    count_nonzeros: bool = False,
) -> tuple[str, Optional[int]]:
    """Resolve ``<who>.x_access`` for a training set (``cached`` or ``joined``), logged with why.

    ``auto`` counts X's nonzeros and rows (one Spark aggregation) and picks ``cached`` while the
    executor cache of X (8 bytes per nonzero: float32 value, int32 id, + 16 per row) fits
    ``cache_budget`` (see :func:`eagle_spark.grlr.context.choose_x_access` for the budget's
    default). With `count_nonzeros` a ``cached`` setting counts them too (the caller sizes its
    tasks by them: :func:`eagle_spark.tasks.tasks_for_work`).

    Returns:
        (``cached`` or ``joined``, X's nonzeros when counted, else None).
    """
    from eagle_spark.grlr.context import choose_x_access, x_size

    X = read_table(spark, dataset, S.X)
    mode = params.x_access
    size = x_size(X) if mode == "auto" or (count_nonzeros and mode == "cached") else None
    access, why = choose_x_access(
        spark, X, None, mode, params.cache_budget, who, bytes_per_nonzero=8, size=size
    )
    log.info("%s: %s training rows (%s)", who, access, why)
    return access, None if size is None else size[0]


def local_rows(
    table: pa.Table, ids: np.ndarray, Y: sp.csc_matrix, n_features: int, normalize: bool, who: str
) -> tuple[np.ndarray, sp.csr_matrix, sp.csc_matrix]:
    """The rows a join delivered to one bin, as task-private matrices in sample_id order.

    Args:
        table: Arrow table with sample_id, feat_idx, feat_val (one row per needed sample).
        ids, Y: the dataset's sorted sample ids and Y (:func:`load_y`).
        n_features: columns of X. normalize: L2-normalise the rows (as the cached X is).
        who: the stage, for the error message.
    Returns:
        (global row numbers (k,), X_b (k, n_features) CSR float32, Y_b (k, n_labels) CSC with
        sorted indices): row r of X_b / Y_b is row rows[r] of the whole X / Y.
    Raises:
        ValueError: a delivered sample has no row of Y, or a sample appears twice.
    """
    table = table.sort_by(S.SAMPLE_ID)
    sid = np.asarray(table.column(S.SAMPLE_ID), dtype=np.int64)
    if len(sid) > 1 and (np.diff(sid) == 0).any():
        raise ValueError(
            f"{who}: sample_id {int(sid[np.flatnonzero(np.diff(sid) == 0)[0]])} has two rows in X"
        )
    rows = np.searchsorted(ids, sid)
    bad = (rows >= len(ids)) | (ids[np.minimum(rows, len(ids) - 1)] != sid)
    if bad.any():
        raise ValueError(f"{who}: sample_id {int(sid[bad][0])} of X has no row in Y")
    X = csr_from_arrow(table.column(S.FEAT_IDX), table.column(S.FEAT_VAL), n_features)
    X = l2_normalize_rows(X) if normalize else X
    Yb = Y[rows, :].tocsc()
    Yb.sort_indices()
    return rows, X, Yb


def needed_pairs(
    spark: SparkSession,
    dataset: str,
    n_labels: int,
    bins: int,
    rows_of_bin: Callable[[int, np.ndarray, sp.csc_matrix], np.ndarray],
) -> DataFrame:
    """DataFrame[bin, sample_id]: for each bin, the samples whose rows it needs.

    `rows_of_bin(b, ids, Y)` returns the sorted global row numbers bin b needs (a picklable
    function; it runs in a task, on :func:`load_y`'s arrays).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids, Y = load_y(dataset, n_labels)
        for batch in batches:
            for b in np.asarray(batch.column(0), dtype=np.int64):
                rows = rows_of_bin(int(b), ids, Y)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(np.full(len(rows), b, dtype=np.int64)), pa.array(ids[rows])],
                    schema=_PAIRS,
                )

    return spark.range(0, bins, numPartitions=bins).mapInArrow(run, from_arrow_schema(_PAIRS))


def check_delivered(
    dataset: str,
    n_labels: int,
    bins: int,
    rows_of_bin: Callable[[int, np.ndarray, sp.csc_matrix], np.ndarray],
    b: int,
    got: np.ndarray,
    who: str,
) -> None:
    """Raise ValueError naming a sample of Y that bin `b` needed and the join did not deliver (a
    sample of Y without a row of X)."""
    ids, Y = load_y(dataset, n_labels)
    want = rows_of_bin(b, ids, Y)
    if len(want) != len(got):
        missing = np.setdiff1d(want, got)
        raise ValueError(
            f"{who}: sample_id {int(ids[missing[0]])} of Y has no row in X of {dataset}"
        )


def joined_stage(
    spark: SparkSession,
    dataset: str,
    n_labels: int,
    bins: int,
    rows_of_bin: Callable[[int, np.ndarray, sp.csc_matrix], np.ndarray],
    train_bin: Callable[[int, pa.Table], pa.Table],
    out_schema: str,
) -> list:
    """Run the join path: the pairs of :func:`needed_pairs` joined with X, grouped by bin, and
    ``train_bin(b, rows)`` called once per bin with its rows (sample_id, feat_idx, feat_val) as an
    Arrow table; a bin that needs no row is called with an empty table in a second, small stage
    (its units still train, as with the cache). Returns the collected rows of `out_schema` (a DDL
    string, without the ``bin`` column this adds) the calls return, with their bin."""
    from pyspark.sql import functions as F

    X = read_table(spark, dataset, S.X).select(S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL)
    pairs = needed_pairs(spark, dataset, n_labels, bins, rows_of_bin)
    joined = pairs.join(X, S.SAMPLE_ID).select(
        *[F.col(c).alias(c) for c in (BIN, S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL)]
    )

    def call(b: int, table: pa.Table) -> pa.Table:
        got = train_bin(b, table)
        return got.append_column(BIN, pa.array(np.full(got.num_rows, b, dtype=np.int64)))

    def per_bin(table: pa.Table) -> pa.Table:
        return call(int(table.column(BIN)[0].as_py()), table.drop_columns([BIN]))

    schema = f"{out_schema}, {BIN} long"
    done = joined.groupBy(BIN).applyInArrow(per_bin, schema).collect()
    missing = sorted(set(range(bins)) - {int(r[BIN]) for r in done})
    if missing:
        empty = pa.table(
            {
                S.SAMPLE_ID: pa.array([], pa.int64()),
                S.FEAT_IDX: pa.array([], S.ARROW_INT_LIST),
                S.FEAT_VAL: pa.array([], S.ARROW_FLOAT_LIST),
            }
        )

        def rest(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for b in np.asarray(batch.column(0), dtype=np.int64):
                    yield from call(int(b), empty).to_batches()

        done += (
            spark.createDataFrame([(b,) for b in missing], f"{BIN} long")
            .repartition(len(missing))
            .mapInArrow(rest, schema)
            .collect()
        )
    return done


class ProportionalBlocks:
    """Labels 0..L-1 cut into `blocks` contiguous blocks: block b is [b L // blocks, (b+1) L // blocks)
    (the one-vs-all trainer's cut)."""

    def __init__(self, n_labels: int, blocks: int) -> None:
        self.n_labels, self.blocks = n_labels, blocks

    def labels(self, b: int) -> tuple[int, int]:
        """(lo, hi): the block's label range."""
        return b * self.n_labels // self.blocks, (b + 1) * self.n_labels // self.blocks
