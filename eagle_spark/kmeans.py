"""Balanced spherical 2-means on the rows of a (sparse or dense) matrix, single node.

Used inside Spark tasks: one node of a hierarchical clustering of samples (``aggregate --grouping
cluster``) or of labels (the label tree). The split is the one of Parabel / PECOS: rows are
L2-normalised, two centroids start at two distinct random rows, every row is scored by
``<x, c0 - c1>`` and the ceil(m/2) highest-scoring rows go to child 0, the rest to child 1;
centroids become the normalised sums of their halves; repeat until the halves stop changing or
`max_iter` is reached. The halves' sums are summed once, then updated by the rows that changed
sides (after the first rounds few do), so a round costs one pass over the rows for the scores
plus one over the moved rows. Ties keep input order (stable sort), so the result depends only on the
input order and `seed`.

References:
    Prabhu et al., Parabel, WWW 2018, section 3.2 (balanced spherical 2-means);
    Yu et al., PECOS (hierarchical k-means indexer).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import scipy.sparse as sp


def _normalize(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def balanced_2means(
    rows: sp.csr_matrix | np.ndarray, seed: int | list[int], max_iter: int = 20
) -> np.ndarray:
    """Split the rows of `rows` into two halves of sizes ceil(m/2) and floor(m/2).

    Args:
        rows: (m, d) matrix whose rows are already L2-normalised (sparse CSR or dense).
        seed: seed (or seed sequence) of the two initial rows.
        max_iter: maximum number of reassignment rounds (>= 1).
    Returns:
        bool array of length m: True for rows of child 1, False for child 0.
    Raises:
        ValueError: `max_iter` < 1.
    """
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    m = rows.shape[0]
    right = np.zeros(m, dtype=bool)
    if m < 2:
        return right
    rng = np.random.default_rng(seed)
    i0, i1 = rng.choice(m, size=2, replace=False)
    dense = not sp.issparse(rows)
    pick = (
        (lambda i: np.asarray(rows[i], dtype=np.float64).ravel())
        if dense
        else (lambda i: cast(sp.csr_matrix, rows).getrow(i).toarray().ravel().astype(np.float64))
    )
    c0, c1 = pick(i0), pick(i1)
    n_left = (m + 1) // 2
    previous: np.ndarray | None = None
    sums: Any = None  # the halves' sums, from the first round on
    for _ in range(max_iter):
        score = np.asarray(rows @ (c0 - c1)).ravel()
        order = np.argsort(-score, kind="stable")
        right = np.ones(m, dtype=bool)
        right[order[:n_left]] = False
        if previous is not None and np.array_equal(previous, right):
            break
        sums = (
            _half_sums(rows, right)
            if previous is None
            else _moved_sums(rows, previous, right, sums)
        )
        previous = right
        c0, c1 = _normalize(sums[:, 0]), _normalize(sums[:, 1])
    return right


def _half_sums(rows: sp.csr_matrix | np.ndarray, right: np.ndarray) -> np.ndarray:
    """(d, 2) float64: the sums of the rows of child 0 and of child 1. Sparse: one pass over `rows`
    with a 0/1 weight per row and child (no copy of the selected rows; zero weights add exact
    zeros, so the sums are bit-identical to summing each half's rows)."""
    if sp.issparse(rows):
        weights = np.zeros((rows.shape[0], 2), dtype=rows.dtype)
        weights[~right, 0] = 1
        weights[right, 1] = 1
        return np.asarray(rows.T @ weights, dtype=np.float64)
    return np.stack(
        [
            np.asarray(rows[~right].sum(axis=0), dtype=np.float64).ravel(),
            np.asarray(rows[right].sum(axis=0), dtype=np.float64).ravel(),
        ],
        axis=1,
    )


def _moved_sums(
    rows: sp.csr_matrix | np.ndarray, before: np.ndarray, after: np.ndarray, sums: np.ndarray
) -> np.ndarray:
    """(d, 2) float64: `sums` (the halves' sums under the split `before`) updated to the split
    `after` by adding and subtracting the rows that changed sides; O(nonzeros of those rows).
    Summed again from all rows (:func:`_half_sums`) when more than half of them moved."""
    moved = np.flatnonzero(before != after)
    if 2 * len(moved) > len(after):
        return _half_sums(rows, after)
    sign = np.where(after[moved], 1.0, -1.0)  # +1: into child 1, -1: back into child 0
    delta = np.asarray(rows[moved].T @ sign, dtype=np.float64).ravel()
    out = sums.copy()
    out[:, 1] += delta
    out[:, 0] -= delta
    return out
