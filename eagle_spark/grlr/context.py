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

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from eagle_spark import schemas as S
from eagle_spark.executor_state import shared_arrays, sparse_arrays, sparse_from
from eagle_spark.io.parts import filesystem_for, folder_version, read_x
from eagle_spark.sparse import l2_normalize_rows


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

    def rows_of_groups(self, groups: np.ndarray, rows: bool = True) -> tuple[np.ndarray, np.ndarray]:
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


_contexts: dict[tuple, Context] = {}


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
    if key in _contexts:
        return _contexts[key]

    def build() -> dict[str, np.ndarray]:
        sample_ids, X = read_x(dataset, n_features)
        X = l2_normalize_rows(X, np.float64) if normalize else sp.csr_matrix(X, dtype=np.float64)
        fs, root = filesystem_for(dataset)
        y1 = pq.read_table(f"{root}/{S.Y1}", filesystem=fs, columns=[S.SAMPLE_ID, S.GROUP_ID])
        groups = np.asarray(y1.column(S.GROUP_ID), dtype=np.int64)
        members = np.asarray(y1.column(S.SAMPLE_ID), dtype=np.int64)
        rows = np.searchsorted(sample_ids, members)
        rows_c = np.minimum(rows, len(sample_ids) - 1)
        bad = (rows >= len(sample_ids)) | (sample_ids[rows_c] != members)
        if bad.any():
            raise ValueError(f"sample_id {int(members[bad][0])} of Y1 is not in X")
        order = np.lexsort((rows, groups))
        groups, rows = groups[order], rows[order]
        group_ids, starts = np.unique(groups, return_index=True)
        return {"sample_ids": sample_ids, **sparse_arrays(X, "X"), "group_ids": group_ids,
                "group_ptr": np.append(starts, len(groups)).astype(np.int64), "member_rows": rows}

    a = shared_arrays("grlr", key, build)
    context = Context(a["sample_ids"], sparse_from(a, "X"), a["group_ids"], a["group_ptr"],
                      a["member_rows"])
    _contexts.clear()
    _contexts[key] = context
    return context
