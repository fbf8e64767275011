"""Every node's score for a block of rows in one pass over the rows' features: the label tree's
prediction kernel. See :mod:`eagle_spark.classifiers.tree`.

The beam search needs, per row and level, the scores of the children of the row's beam nodes.
Computing them as a sparse product of the rows with the union of those children's weight rows
(the first implementation) copied and transposed every weight of the union at every level; at
synthetic Wiki-325K scale the top levels' weights hold up to 790,000 features per node, so a
batch of rows re-copied gigabytes per level and the transpose dominated prediction.

Here the weights are held feature-major (CSC of W, n_elements x d: the nodes having each feature
are contiguous), and a row's scores for *all* nodes are one scatter-accumulate over the row's
features: for each nonzero (j, x_j) of the row, ``scores[node] += x_j * W[node, j]`` for the nodes
that have feature j. The work is the sum over the row's features of their column counts (~0.5 M
multiply-adds per row and tree at Wiki-325K scale), streamed in memory order; the level-by-level
search then only reads the block. The accumulation order per (row, node) is the row's feature
order, as in scipy's CSR product, so the scores equal scipy's ``X @ W.T`` bit for bit.

scipy has no routine that accumulates into a dense block without building a sparse result (its
CSR product builds a linked list of the output's nonzeros per row; for ~333,000 outputs per row
that is 6x slower), so the loop is compiled with numba.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp

SCORE_BLOCK_BYTES = 64 << 20
"""Memory of one block of dense scores (rows x n_elements float64) inside a prediction task."""

_kernel: Optional[Callable] = None


def _compiled() -> Callable:
    """The numba kernel, compiled on first use in each process (about a second; Spark reuses its
    Python workers, so once per worker)."""
    global _kernel
    if _kernel is None:
        import numba

        @numba.njit(nogil=True)
        def scatter(xptr, xidx, xval, wptr, wnode, wval, out):  # pragma: no cover - compiled
            for i in range(out.shape[0]):
                for a in range(xptr[i], xptr[i + 1]):
                    j = xidx[a]
                    v = xval[a]
                    for e in range(wptr[j], wptr[j + 1]):
                        out[i, wnode[e]] += v * np.float64(wval[e])

        _kernel = scatter
    return _kernel


def feature_major(W: sp.spmatrix) -> sp.csc_matrix:
    """W (n_elements x d) as CSC (no copy when it already is). The order of the nodes within a
    feature's column does not matter: a (row, node) score accumulates in the row's feature order."""
    return W if isinstance(W, sp.csc_matrix) else sp.csc_matrix(W)


def node_scores(X: sp.csr_matrix, W: sp.csc_matrix) -> np.ndarray:
    """Dense scores ``X @ W.T`` of every row for every node.

    Args:
        X: (n, d) CSR float64 rows (the search's normalised rows).
        W: (n_elements, d) CSC weights (any float dtype; products are computed in float64), as
            :func:`feature_major` returns.
    Returns:
        (n, n_elements) float64, equal to ``(X @ W.T).toarray()`` bit for bit (module docstring).
    Raises:
        ValueError: X and W disagree on d, X is not float64 CSR, or an index of X is out of range
            (the compiled loop does not check bounds, so they are checked here).

    Memory: the returned block, n x n_elements x 8 bytes (callers pass blocks of rows sized by
    :data:`SCORE_BLOCK_BYTES`); W is read in place (memory-mapped executor state).
    """
    if X.shape[1] != W.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features, the weights {W.shape[1]}")
    if not isinstance(X, sp.csr_matrix) or X.dtype != np.float64:
        raise ValueError(f"X must be float64 CSR, got {type(X).__name__} {X.dtype}")
    if X.nnz and (int(X.indices.min()) < 0 or int(X.indices.max()) >= X.shape[1]):
        raise ValueError(f"X has a feature index outside 0..{X.shape[1] - 1}")
    out = np.zeros((X.shape[0], W.shape[0]))
    _compiled()(X.indptr, X.indices, X.data, W.indptr, W.indices, W.data, out)
    return out


def rows_per_block(n_elements: int, budget: Optional[int] = None) -> int:
    """Rows whose dense score block (rows x n_elements float64) fits `budget` bytes (default
    :data:`SCORE_BLOCK_BYTES`), at least 1."""
    budget = SCORE_BLOCK_BYTES if budget is None else budget
    return max(1, budget // (8 * max(1, n_elements)))


__all__ = ["SCORE_BLOCK_BYTES", "feature_major", "node_scores", "rows_per_block"]
