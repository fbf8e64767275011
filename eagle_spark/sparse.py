"""Sparse-row helpers shared by the executors' code: Arrow list columns <-> scipy CSR, row norms,
rows restricted to the columns they use.

A batch of X rows arrives in a task as two Arrow list columns (``feat_idx`` int32, ``feat_val``
float32) whose offsets are exactly a CSR ``indptr``; :func:`csr_from_arrow` wraps them without
copying the values.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import scipy.sparse as sp


def list_parts(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64 starting at 0, values as a numpy view) of an Arrow list column: a CSR
    indptr and its indices or data (chunks are combined first, which copies)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    offsets = np.asarray(column.offsets, dtype=np.int64)
    values = column.values
    start, stop = int(offsets[0]), int(offsets[-1])
    return offsets - start, np.asarray(values.slice(start, stop - start))


def csr_from_arrow(
    feat_idx: pa.Array | pa.ChunkedArray,
    feat_val: pa.Array | pa.ChunkedArray,
    n_features: int,
    dtype: type = np.float32,
    names: tuple[str, str] = ("feat_idx", "feat_val"),
) -> sp.csr_matrix:
    """Build a CSR matrix from two list columns (the X layout's, or any index / value lists).

    Args:
        feat_idx: list<int32> column, one row per sample, sorted unique ids in [0, n_features).
        feat_val: list<float32> column with the same offsets.
        n_features: number of columns.
        dtype: dtype of the values (float32, as X is stored, by default).
        names: the two columns' names, for the error messages.
    Returns:
        scipy CSR of shape (len(feat_idx), n_features) and `dtype`.
    Raises:
        ValueError: the two columns have different list lengths, or an id is outside
            [0, n_features).
    """
    indptr, indices = list_parts(feat_idx)
    indptr_v, data = list_parts(feat_val)
    if len(indptr) != len(indptr_v) or not np.array_equal(indptr, indptr_v):
        raise ValueError(f"{names[0]} and {names[1]} have different list lengths")
    if len(indices):
        low, high = int(indices.min()), int(indices.max())
        if low < 0 or high >= n_features:
            raise ValueError(
                f"{names[0]} index {low if low < 0 else high} is outside [0, {n_features})"
            )
    return sp.csr_matrix(
        (data.astype(dtype, copy=False), indices, indptr), shape=(len(indptr) - 1, n_features)
    )


def l2_normalize_rows(matrix: sp.csr_matrix, dtype=np.float32) -> sp.csr_matrix:
    """Rows scaled to unit L2 norm (all-zero rows stay zero): a CSR copy of `dtype`, computed in it
    (:func:`l2_normalize_rows_in_place` on the copy)."""
    return l2_normalize_rows_in_place(sp.csr_matrix(matrix, dtype=dtype, copy=True))


NORMALIZE_BLOCK = 1 << 24
"""Values per block of rows in :func:`l2_normalize_rows_in_place`: its temporaries are about
three times this many float64 values (400 MB), whatever the matrix's size."""


def l2_normalize_rows_in_place(
    matrix: sp.csr_matrix, block_nonzeros: int = NORMALIZE_BLOCK
) -> sp.csr_matrix:
    """`matrix` with its rows scaled to unit L2 norm in place (all-zero rows stay zero), computed
    in its dtype.

    Each row's squares are summed in stored order by scipy's CSR row sums (the arithmetic of
    ``matrix.multiply(matrix).sum(axis=1)`` without building that product), and the row is scaled
    by 1 / its norm. Rows go in blocks of about `block_nonzeros` values, so the temporaries (the
    squares, the per-value scales) stay bounded however large the matrix is: the label
    representations of a tree hold hundreds of millions of values at Wiki-325K scale. Every row
    is computed alone, so the block size never changes a value.

    Args:
        matrix: CSR of a float dtype; its ``data`` is overwritten.
        block_nonzeros: values per block of rows (a row longer than that is a block of its own).
    Returns:
        `matrix` itself.
    Raises:
        ValueError: `matrix` is not a float CSR matrix, or `block_nonzeros` is below 1.
    """
    if not sp.isspmatrix_csr(matrix) or not np.issubdtype(matrix.dtype, np.floating):
        raise ValueError(f"l2_normalize_rows_in_place needs a float CSR matrix, got {matrix!r}")
    if block_nonzeros < 1:
        raise ValueError(f"block_nonzeros must be >= 1, got {block_nonzeros}")
    data, indices, indptr = matrix.data, matrix.indices, matrix.indptr
    n_rows, start = matrix.shape[0], 0
    while start < n_rows:
        reach = np.searchsorted(indptr, indptr[start] + block_nonzeros, side="right") - 1
        stop = min(n_rows, max(start + 1, int(reach)))
        lo, hi = int(indptr[start]), int(indptr[stop])
        ptr = indptr[start : stop + 1] - lo
        squares = sp.csr_matrix(
            (np.square(data[lo:hi]), indices[lo:hi], ptr), shape=(stop - start, matrix.shape[1])
        )
        norms = np.sqrt(np.asarray(squares.sum(axis=1)).ravel())
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        data[lo:hi] *= np.repeat(scale, np.diff(ptr)).astype(data.dtype)
        start = stop
    return matrix


def compact_columns(
    M: sp.csr_matrix, dtype: Optional[type] = None
) -> tuple[np.ndarray, sp.csr_matrix]:
    """(cols, M restricted to its used columns renumbered 0..len(cols)-1): what a label tree
    node's 2-means, a tree unit's classifiers or a one-vs-all label's fit on a subset of the rows
    need, so their dense vectors have O(used) entries, not O(n_features). A linear classifier
    fitted on it has the weights of one fitted on M (a column without an entry gets weight 0),
    at ``cols``.

    Args:
        M: (n, d) CSR; `dtype`: the values' dtype in the result (None: M's).
    Returns:
        (cols: ascending ids of the columns M uses, (n, len(cols)) CSR with int32 column ids).

    Memory: the new column ids (4 bytes per entry) and O(n_features) (a flag and a new id per
    column); none when every column is used and M's ids are int32 (they are kept: the root of a
    label tree, whose representations at Wiki-325K scale hold hundreds of millions of entries).
    The values are M's, not copied unless `dtype` differs.
    """
    used_idx = M.indices[M.indptr[0] : M.indptr[-1]]
    if len(used_idx) * 8 < M.shape[1]:  # few entries: sorting them is cheaper than a dense pass
        cols, local = np.unique(used_idx, return_inverse=True)
    else:
        used = np.zeros(M.shape[1], dtype=bool)
        used[used_idx] = True
        cols = np.flatnonzero(used)
        if len(cols) == M.shape[1] and used_idx.dtype == np.int32:  # ids unchanged
            local = used_idx
        else:  # each used column's new id, set at the used columns only (no prefix sum)
            renumber = np.empty(M.shape[1], dtype=np.int32)
            renumber[cols] = np.arange(len(cols), dtype=np.int32)
            local = renumber[used_idx]
    data = M.data[M.indptr[0] : M.indptr[-1]]
    return cols, sp.csr_matrix(
        (
            data.astype(dtype or data.dtype, copy=False),
            local.reshape(-1).astype(np.int32, copy=False),
            M.indptr - M.indptr[0],
        ),
        shape=(M.shape[0], len(cols)),
    )
