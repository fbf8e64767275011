"""Executor-side X and group memberships, held once per executor and shared by its workers.

GRLR touches, for each label, the members of each of its groups: copying every group's feature
vectors once per (group, label) pair through a shuffle would move ~18 GB at Wiki-325K with g = 10.
Instead X (and Y1) are read straight from the dataset's Parquet files with pyarrow, once per
executor, and kept as memory-mapped arrays (:mod:`eagle_spark.executor_state`) that every Python
worker of the executor maps, so tasks only receive the small (label, group) lists.

Memory per executor (not per worker): about 12 bytes per nonzero of X (float64 values, int32
ids) plus 24 bytes per row of Y1 (Wiki-325K: ~0.9 GB), whatever the number of task slots; the
first worker also holds a private copy while it builds the files. A task keeps only its own
batch's work arrays on top.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from eagle_spark import schemas as S
from eagle_spark.executor_state import shared_state, sparse_arrays, sparse_from
from eagle_spark.io.parts import filesystem_for, folder_version, read_x
from eagle_spark.rows import first_row
from eagle_spark.sparse import l2_normalize_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class Context:
    """X and Y1 of an executor (read-only arrays mapped from its shared state files).

    Attributes:
        sample_ids: (n_rows,) sorted sample ids; row r of X is sample sample_ids[r].
        X: (n_rows, n_features) CSR float64 (L2-normalised rows when asked).
        group_ids: (n_groups,) sorted group ids.
        group_ptr: (n_groups + 1,) offsets into member_rows.
        member_rows: X rows of each group's members, sorted (= sample_id order) within a group.
    """

    sample_ids: np.ndarray
    X: sp.csr_matrix
    group_ids: np.ndarray
    group_ptr: np.ndarray
    member_rows: np.ndarray

    def group_sizes(self, groups: np.ndarray) -> np.ndarray:
        """Member count of each group in `groups` (KeyError for an unknown group)."""
        ptr, _ = self.rows_of_groups(groups, rows=False)
        return np.diff(ptr)

    def rows_of_groups(
        self, groups: np.ndarray, rows: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Members of each group in `groups`: (ptr (len+1,), rows), groups in the given order.

        Raises:
            KeyError: a group id is not in Y1.
        """
        pos = np.searchsorted(self.group_ids, groups)
        pos_c = np.minimum(pos, len(self.group_ids) - 1)
        if len(groups) and (len(self.group_ids) == 0 or (self.group_ids[pos_c] != groups).any()):
            missing = groups[(pos >= len(self.group_ids)) | (self.group_ids[pos_c] != groups)][0]
            raise KeyError(f"group_id {int(missing)} has no members in Y1")
        sizes = self.group_ptr[pos_c + 1] - self.group_ptr[pos_c]
        ptr = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum(sizes, out=ptr[1:])
        if not rows:
            return ptr, np.zeros(0, dtype=np.int64)
        starts = np.repeat(self.group_ptr[pos_c] - ptr[:-1], sizes)
        return ptr, self.member_rows[starts + np.arange(ptr[-1])]


def context_arrays(
    sample_ids: np.ndarray,
    X: sp.csr_matrix,
    groups: np.ndarray,
    members: np.ndarray,
    normalize: bool,
) -> dict[str, np.ndarray]:
    """The arrays of a :class:`Context` from X's rows and Y1's (group, member) rows.

    Args:
        sample_ids: (n_rows,) sorted sample ids of X's rows.
        X: (n_rows, n_features) CSR (float32 as stored).
        groups, members: (n_y1,) Y1's group_id and sample_id columns.
        normalize: L2-normalise the rows.
    Raises:
        ValueError: a member of Y1 is not in `sample_ids`.
    """
    X = l2_normalize_rows(X, np.float64) if normalize else sp.csr_matrix(X, dtype=np.float64)
    rows = np.searchsorted(sample_ids, members)
    rows_c = np.minimum(rows, max(len(sample_ids) - 1, 0))
    bad = (
        (rows >= len(sample_ids)) | (sample_ids[rows_c] != members)
        if len(sample_ids)
        else rows >= 0
    )
    if bad.any():
        raise ValueError(f"sample_id {int(members[bad][0])} of Y1 is not in X")
    order = np.lexsort((rows, groups))
    groups, rows = groups[order], rows[order]
    group_ids, starts = np.unique(groups, return_index=True)
    return {
        "sample_ids": sample_ids,
        **sparse_arrays(X, "X"),
        "group_ids": group_ids,
        "group_ptr": np.append(starts, len(groups)).astype(np.int64),
        "member_rows": rows,
    }


def context_of_members(members: pa.Table, n_features: int, normalize: bool) -> Context:
    """A task-private Context from rows a join delivered (the joined path, ``embed.x_access``).

    Args:
        members: Arrow table with group_id, sample_id, feat_idx, feat_val: one row per (group,
            member) the task needs (a sample in several groups comes once per group).
        n_features: columns of X.
        normalize: L2-normalise the rows (same arithmetic as the cached path, so the same values).
    Returns:
        A Context over only those samples; it lives in the task's heap (about 12 bytes per nonzero
        of the delivered rows) and is dropped with the task.
    Raises:
        ValueError: a feature id is outside [0, n_features).
    """
    from eagle_spark.sparse import csr_from_arrow

    members = members.sort_by([(S.SAMPLE_ID, "ascending"), (S.GROUP_ID, "ascending")])
    ids = np.asarray(members.column(S.SAMPLE_ID), dtype=np.int64)
    first = np.r_[True, ids[1:] != ids[:-1]] if len(ids) else np.zeros(0, dtype=bool)
    keep = np.flatnonzero(first)
    unique_rows = members.select([S.FEAT_IDX, S.FEAT_VAL]).take(pa.array(keep))
    X = csr_from_arrow(unique_rows.column(S.FEAT_IDX), unique_rows.column(S.FEAT_VAL), n_features)
    a = context_arrays(
        ids[keep], X, np.asarray(members.column(S.GROUP_ID), dtype=np.int64), ids, normalize
    )
    return Context(
        a["sample_ids"], sparse_from(a, "X"), a["group_ids"], a["group_ptr"], a["member_rows"]
    )


def load_context(dataset: str, n_features: int, normalize: bool) -> Context:
    """The executor's Context for `dataset` (built by its first worker, then memory-mapped).

    Args:
        dataset: dataset folder with X/ and Y1/ (a path every executor reaches).
        n_features: columns of X.
        normalize: L2-normalise the rows of X.
    Returns:
        The Context; its arrays are read-only maps shared with the executor's other workers.
    Raises:
        ValueError: a sample of Y1 is not in X.
    """
    key = (dataset, folder_version(dataset), n_features, normalize)  # a rewritten dataset is reread

    def build() -> dict[str, np.ndarray]:
        sample_ids, X = read_x(dataset, n_features)
        fs, root = filesystem_for(dataset)
        y1 = pq.read_table(f"{root}/{S.Y1}", filesystem=fs, columns=[S.SAMPLE_ID, S.GROUP_ID])
        return context_arrays(
            sample_ids,
            X,
            np.asarray(y1.column(S.GROUP_ID), dtype=np.int64),
            np.asarray(y1.column(S.SAMPLE_ID), dtype=np.int64),
            normalize,
        )

    return shared_state(
        "grlr",
        key,
        build,
        lambda a: Context(
            a["sample_ids"], sparse_from(a, "X"), a["group_ids"], a["group_ptr"], a["member_rows"]
        ),
    )


# ---------------------------------------------------------------- the joined path (embed.x_access)
X_ACCESS = ("auto", "cached", "joined")
DEFAULT_CACHE_BUDGET_MIB = 4096
"""The executor cache budget when neither the setting nor a Python worker cap gives one."""


def cache_bytes(n_nonzeros: int, n_rows: int, n_y1: int, bytes_per_nonzero: int = 12) -> int:
    """Estimated executor-side bytes of a cached X: `bytes_per_nonzero` per nonzero (12 for the
    GRLR Context's float64 value + int32 id), 16 per row (id, offset) and 16 per Y1 row (group id,
    member row)."""
    return bytes_per_nonzero * n_nonzeros + 16 * n_rows + 16 * n_y1


def x_size(X: DataFrame) -> tuple[int, int]:
    """(nonzeros, rows) of X, by one Spark aggregation."""
    from pyspark.sql import functions as F

    stats = first_row(X.agg(F.sum(F.size(S.FEAT_IDX)), F.count(F.lit(1))), "x_size")
    return int(stats[0] or 0), int(stats[1])


def choose_x_access(
    spark: SparkSession,
    X: DataFrame,
    Y1: Optional[DataFrame],
    mode: str,
    budget: str | None,
    stage: str,
    bytes_per_nonzero: int = 12,
    size: tuple[int, int] | None = None,
) -> tuple[str, str]:
    """Resolve ``x_access`` (``auto`` / ``cached`` / ``joined``) for a stage, and say why.

    ``auto`` measures X (nonzeros, rows) and Y1 with one Spark aggregation each and picks
    ``cached`` while :func:`cache_bytes` fits the budget, ``joined`` beyond it. The budget is
    `budget` (a Spark memory string), else half of ``spark.executor.pyspark.memory`` when a Python
    worker cap is set (the mapped cache counts against that address-space cap), else
    :data:`DEFAULT_CACHE_BUDGET_MIB`.

    Args:
        spark: the session. X, Y1: the dataset's DataFrames. mode: the setting.
        budget: the ``cache_budget`` setting or None. stage: ``embed`` / ``assign`` / ``tree`` /
            ``ova`` (for the log). Y1: None when the cache holds no Y1 (the classifiers').
        bytes_per_nonzero: the cache's bytes per nonzero of X (12: GRLR's float64 values; 8: the
            classifiers' float32).
        size: X's (nonzeros, rows) when the caller measured them (:func:`x_size`), else measured
            here under ``auto``.
    Returns:
        (``cached`` or ``joined``, a sentence saying why).
    Raises:
        ValueError: an unknown mode (the settings reject it first).
    """
    from eagle_spark.settings import memory_mib

    if mode not in X_ACCESS:
        raise ValueError(f"{stage}.x_access must be one of {', '.join(X_ACCESS)}, got {mode!r}")
    if mode != "auto":
        return mode, f"{stage}.x_access={mode}"
    if budget:
        budget_mib, origin = memory_mib(budget, f"{stage}.cache_budget"), f"{stage}.cache_budget"
    elif spark.conf.get("spark.executor.pyspark.memory", None):
        cap = str(spark.conf.get("spark.executor.pyspark.memory"))
        budget_mib, origin = (
            memory_mib(cap, "spark.executor.pyspark.memory") / 2,
            f"half of the worker cap {cap}",
        )
    else:
        budget_mib, origin = float(DEFAULT_CACHE_BUDGET_MIB), "the default"
    nonzeros, rows = x_size(X) if size is None else size
    need = cache_bytes(nonzeros, rows, 0 if Y1 is None else Y1.count(), bytes_per_nonzero)
    chosen = "cached" if need <= budget_mib * 2**20 else "joined"
    return chosen, (
        f"{stage}.x_access=auto: the executor cache of X{'' if Y1 is None else ' and Y1'} needs ~{need / 2**20:,.0f} MiB, "
        f"the budget ({origin}) is {budget_mib:,.0f} MiB"
    )


def joined_members(X: DataFrame, Y1: DataFrame, needed: DataFrame, keys: list[str]) -> DataFrame:
    """The design's join: each needed (keys..., group_id) with its members' feature rows.

    Args:
        X: DataFrame[sample_id, feat_idx, feat_val, ...]. Y1: DataFrame[sample_id, group_id].
        needed: DataFrame[keys..., group_id], distinct rows (which task needs which group).
        keys: the task key columns (e.g. the label bin).
    Returns:
        DataFrame[keys..., group_id, sample_id, feat_idx, feat_val]: a group's rows go once to every
        task that needs the group (shuffle bytes ~ sum over tasks of their groups' feature rows).
    """
    from pyspark.sql import functions as F

    members = Y1.select(S.SAMPLE_ID, S.GROUP_ID).join(
        X.select(S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL), S.SAMPLE_ID
    )
    # aliases give the columns new ids: `needed` usually derives from the pairs it is cogrouped with
    columns = [*keys, S.GROUP_ID, S.SAMPLE_ID, S.FEAT_IDX, S.FEAT_VAL]
    return needed.join(members, S.GROUP_ID).select(*[F.col(c).alias(c) for c in columns])
