"""Vectorised GRLR and assignment kernels for a batch of labels, run inside Spark tasks.

A batch holds several labels; label k has pairs (k, j) for its groups j in M_k, and pair (k, j)
has the candidate rows N_j (members of group j, in sample_id order). All candidate rows of the
batch are stacked into one CSR matrix A whose columns are remapped so that each label owns a
disjoint block of columns: its support (the features its candidates use). A label embedding is
then a slice of one dense vector ``e`` over all columns, and one GRLR step for every label of the
batch is one sparse mat-vec (``A @ e`` for the scores), the sum of the selected rows (``A^T a``
read from those rows only: about one candidate per group) and segment operations over rows and
columns, with no transpose of A. Everything is float64.

References:
    Shen, Yu, Sanghavi, Dhillon, Extreme Multi-label Classification from Aggregated Labels,
    ICML 2020, section 4, Algorithm 1 (GRLR) and Algorithm 2 (EAGLE).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass
class PairBatch:
    """Pairs (label, group) of a batch and their candidate rows.

    Attributes:
        pair_label: (n_pairs,) local label index 0..n_labels-1, non-decreasing.
        pair_ptr: (n_pairs + 1,) offsets into `cand_rows`; every pair has >= 1 candidate.
        cand_rows: candidate rows of X (members of the pair's group, in sample_id order).
        n_labels: labels in the batch.
    """

    pair_label: np.ndarray
    pair_ptr: np.ndarray
    cand_rows: np.ndarray
    n_labels: int

    @property
    def n_pairs(self) -> int:
        return len(self.pair_label)


TIE_RTOL = 1e-9
"""Scores within this relative distance of their group's maximum attain it (float64 rounding makes
mathematically equal scores differ in the last bits, depending on the summation order)."""


def segment_first_max(
    values: np.ndarray, ptr: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per segment [ptr[p], ptr[p+1]): (max, is_max mask, index of the first maximum).

    A value attains the maximum when it is within TIE_RTOL x |max| of it.
    """
    starts = ptr[:-1]
    seg_max = np.maximum.reduceat(values, starts)
    rep = np.repeat(seg_max, np.diff(ptr))
    is_max = values >= rep - TIE_RTOL * np.abs(rep)
    index = np.where(is_max, np.arange(len(values)), len(values))
    first = np.minimum.reduceat(index, starts)
    return seg_max, is_max, first


def _label_columns(
    A: sp.csr_matrix, cand_label: np.ndarray, n_labels: int
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """The distinct (label, feature) pairs of a batch's stacked rows, in (label, feature) order.

    Args:
        A: (n_candidates, n_features) CSR, the candidate rows; rows are grouped by label.
        cand_label: (n_candidates,) local label of each row, non-decreasing.
        n_labels: labels of the batch.
    Returns:
        ((col_label int64, col_feature int32) of each distinct pair, inverse (A.nnz,): the pair
        of each stored entry of A, int32 while A's entries and columns are < 2^31, else int64).
        Sorting is done by two counting sorts (scipy's CSR/CSC
        transposes, linear in nnz + n_features) instead of a comparison sort of the keys; a batch
        of one label (a heavy label, e.g. a digit of the centred MNIST bags: 306,000 rows x 784
        nonzeros) needs no sort: its columns are the used features in order, found by marking
        them (two passes over A's column indices, ~40x less time than the transposes there).
    """
    nnz = A.nnz
    if nnz == 0:
        return (np.zeros(0, np.int64), np.zeros(0, np.int32)), np.zeros(0, np.int64)
    if n_labels == 1:
        used = np.zeros(A.shape[1], dtype=bool)
        used[A.indices] = True
        feature = np.flatnonzero(used)
        # int32 when it fits, as LabelBlock keeps it: no int64 copy of the nnz-long inverse
        column = np.full(
            A.shape[1], -1, dtype=np.int32 if A.shape[1] < np.iinfo(np.int32).max else np.int64
        )
        column[feature] = np.arange(len(feature))
        return (np.zeros(len(feature), np.int64), feature.astype(np.int32)), column[A.indices]
    # int32 offsets and positions while they fit: scipy then keeps int32 indices, and its
    # transposes of int64 ones are ~4x slower
    index = np.int32 if max(nnz, A.shape[1]) < np.iinfo(np.int32).max else np.int64
    label_nnz_ptr = A.indptr[np.searchsorted(cand_label, np.arange(n_labels + 1))].astype(index)
    by_label = sp.csr_matrix(
        (np.arange(nnz, dtype=index), A.indices.astype(index, copy=False), label_nnz_ptr),
        shape=(n_labels, A.shape[1]),
    )
    ordered = by_label.tocsc().tocsr()  # stable bucket sorts: by feature, then by label
    feature = ordered.indices
    new = np.empty(nnz, dtype=bool)  # the first entry of each distinct (label, feature)
    new[0] = True
    np.not_equal(feature[1:], feature[:-1], out=new[1:])
    new[ordered.indptr[:-1][np.diff(ordered.indptr) > 0]] = True  # a label's first entry
    seen = np.zeros(nnz + 1, dtype=index)  # distinct pairs before each entry
    np.cumsum(new, out=seen[1:])
    inverse = np.empty(nnz, dtype=index)
    inverse[ordered.data] = seen[1:] - 1
    per_label = seen[ordered.indptr[1:]] - seen[ordered.indptr[:-1]]
    col_label = np.repeat(np.arange(n_labels, dtype=np.int64), per_label)
    return (col_label, feature[new].astype(np.int32, copy=False)), inverse


_RESCALE_ABOVE = 1e100
"""GRLR keeps e = w / ||w|| with w unnormalised (:meth:`LabelBlock.grlr`); w is rescaled to unit
blocks when some ||w_k|| passes this, far inside float64's range (at lambda = 0.1 after more than
2,000 iterations)."""


def _inverse(norms: np.ndarray) -> np.ndarray:
    """1 / norms, and 0 where a norm is 0 (a zero block stays zero)."""
    return np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)


class LabelBlock:
    """The stacked, column-remapped candidate matrix of a batch (see the module docstring).

    Args:
        X: (n_rows, n_features) CSR, float64, rows already normalised as wanted.
        batch: the pairs and their candidates.

    Memory, per running task: A (12 bytes per nonzero of the batch's candidate rows, plus their
    offsets) and, during :meth:`grlr`, four float64 vectors over the block's columns (w, which
    becomes e in place, g, the work vector and :meth:`scale_blocks`' per-column factors; the
    columns are at most A's nonzeros); ``embed.batch_rows`` bounds both, whatever the data's size
    and the executor's cores.
    """

    def __init__(self, X: sp.csr_matrix, batch: PairBatch) -> None:
        self.batch = batch
        A = X[batch.cand_rows]
        cand_label = np.repeat(batch.pair_label, np.diff(batch.pair_ptr)).astype(np.int64)
        columns, inverse = _label_columns(A, cand_label, batch.n_labels)
        # int32 indices whenever they fit (half the bytes a product streams)
        index = np.int32 if max(A.nnz, len(columns[0])) < np.iinfo(np.int32).max else np.int64
        self.A = sp.csr_matrix(
            (A.data, inverse.astype(index, copy=False), A.indptr.astype(index, copy=False)),
            shape=(A.shape[0], len(columns[0])),
        )
        self.col_label, self.col_feature = columns
        self.label_ptr = np.searchsorted(self.col_label, np.arange(batch.n_labels + 1))
        self._sizes = np.diff(self.label_ptr)
        self._nonempty = np.flatnonzero(self._sizes > 0)
        self._starts = self.label_ptr[self._nonempty]
        self._work: np.ndarray | None = None
        self._row_label = cand_label

    def block_norms(self, v: np.ndarray) -> np.ndarray:
        """(n_labels,) ||v_k|| of every label's block of `v` (0 for an empty block).

        The squares go through one work vector of the block's length, allocated once per block
        (a fresh array of tens of MB costs a page-zeroing pass of its own).
        """
        if self._work is None:
            self._work = np.empty(len(v))
        norms = np.zeros(self.batch.n_labels)
        if len(v):
            norms[self._nonempty] = np.add.reduceat(np.square(v, out=self._work), self._starts)
        return np.sqrt(norms, out=norms)

    def scale_blocks(
        self, factor: np.ndarray, v: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """factor[k] * v_k on every label k's block, into `out` (may be `v`; None: a new array)."""
        if self.batch.n_labels == 1:
            return np.multiply(v, factor[0], out=out)
        return np.multiply(np.repeat(factor, self._sizes), v, out=out)

    def scores(self, e: np.ndarray) -> np.ndarray:
        """<e_k, x_i> for every candidate row of every pair."""
        return self.A @ e

    def rows_sum(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Sum of the candidate rows `rows` (sorted indices; None: all) over the block columns.

        Only the chosen rows' entries are read (GRLR's a_ij selects about one candidate per group,
        so ~1/|N_j| of A), scattered into a zeroed vector in row order: the same sums, in the same
        order, as the product A^T a with a 0/1 vector a.
        """
        sub = self.A if rows is None else self.A[rows]
        return sub.T @ np.ones(sub.shape[0])

    def grlr(self, iterations: int, lr: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Algorithm 1 for every label of the batch.

        e_k is kept as w_k / ||w_k|| with w unnormalised and ||w_k|| carried along: one step is
        e + lr Proj(g) = (w + lr ||w|| / ||g|| g) / ||w||, with g the sum of the selected rows, so
        an iteration rescales the columns once (the multiple of g added to w). The new norm follows
        from ||w + c g||^2 = ||w||^2 + 2c <w, g> + c^2 ||g||^2, where <w_k, g_k> is the sum of the
        selected rows' scores <w_k, x_i>, already computed (no pass over the columns; a step that
        nearly cancels w, ||w + c g|| < ||w|| / 10, recomputes the norms from w). Scores
        <e_k, x_i> = <w_k, x_i> / ||w_k||, so each pair's maximum and first maximum are read off
        <w_k, x_i> (the tie rule is relative). w is rescaled to unit blocks when some ||w_k||
        passes :data:`_RESCALE_ABOVE`.

        Returns:
            (e, stats): e over the block columns (label k owns columns label_ptr[k]:label_ptr[k+1]);
            stats per iteration t = 0..T: ``sum_max`` (sum over pairs of max_i <e^t, x_i>) and, for
            t >= 1, ``changed`` (pairs whose first-maximum candidate under e^t differs from the
            one under e^(t-1)); arrays of length T + 1 (changed[0] = 0).
        """
        ptr, pair_label = self.batch.pair_ptr, self.batch.pair_label
        n_labels = self.batch.n_labels
        w = self.rows_sum()  # e0 = Proj(sum of candidates)
        norm = self.block_norms(w)
        raw = self.A @ w  # <w_k, x_i>
        seg_max, is_max, first = segment_first_max(raw, ptr)
        sum_max = np.zeros(iterations + 1)
        changed = np.zeros(iterations + 1, dtype=np.int64)
        sum_max[0] = (seg_max * _inverse(norm)[pair_label]).sum()
        for t in range(1, iterations + 1):
            chosen = np.flatnonzero(is_max)
            g = self.rows_sum(chosen)
            g_norm = self.block_norms(g)
            w_g = np.bincount(self._row_label[chosen], weights=raw[chosen], minlength=n_labels)
            grow = (norm > 0) & (g_norm > 0)  # a label with w = 0 (so e = 0) takes Proj(g)
            cos = np.divide(w_g, norm * g_norm, out=np.zeros(n_labels), where=grow)
            # ||w + c g|| / ||w|| = ||e + lr Proj(g)||: lr Proj(g) has lr cos along e and
            # lr sin across it (hypot: no overflow for any lr)
            ratio = np.hypot(1.0 + lr * cos, lr * np.sqrt(np.maximum(1.0 - cos * cos, 0.0)))
            factor = np.divide(
                np.where(norm > 0, lr * norm, 1.0), g_norm, out=np.zeros(n_labels), where=g_norm > 0
            )
            w += self.scale_blocks(factor, g, out=g)
            if (grow & (ratio < 0.1)).any():  # cancellation: the recurrence would lose digits
                norm = self.block_norms(w)
            else:
                norm = np.where(grow, norm * ratio, np.where(g_norm > 0, 1.0, norm))
            if (norm > _RESCALE_ABOVE).any():  # ||w|| grows up to (1 + lr)x a step
                w = self.scale_blocks(_inverse(norm), w, out=w)
                norm = self.block_norms(w)
            raw = self.A @ w
            seg_max, is_max, new_first = segment_first_max(raw, ptr)
            sum_max[t] = (seg_max * _inverse(norm)[pair_label]).sum()
            changed[t] = int((new_first != first).sum())
            first = new_first
        e = self.scale_blocks(_inverse(norm), w, out=w)
        return e, {"sum_max": sum_max, "changed": changed}

    def embeddings(
        self, e: np.ndarray, prune_below: float = 0.0
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per label k: (feature ids int32 sorted, weights float32) of its embedding.

        Zeros are dropped, and weights with |w| < `prune_below` too (0: exact; the rest keep their
        values, so a pruned embedding's norm is below 1).
        """
        out = []
        for k in range(self.batch.n_labels):
            lo, hi = self.label_ptr[k], self.label_ptr[k + 1]
            values = e[lo:hi]
            keep = (values != 0) & (np.abs(values) >= prune_below)
            out.append((self.col_feature[lo:hi][keep], values[keep].astype(np.float32)))
        return out


def score_with_embeddings(
    X: sp.csr_matrix,
    batch: PairBatch,
    emb_ptr: np.ndarray,
    emb_idx: np.ndarray,
    emb_val: np.ndarray,
) -> np.ndarray:
    """<e_k, x_i> for every candidate of every pair, from stored sparse embeddings.

    Args:
        X: (n_rows, n_features) CSR float64, normalised as during embedding.
        batch: pairs and candidates.
        emb_ptr: (n_labels + 1,) offsets of each local label's embedding in emb_idx / emb_val.
        emb_idx: feature ids, sorted within each label.
        emb_val: weights.
    Returns:
        (n_candidates,) float64 scores.
    """
    n_features = X.shape[1]
    A = X[batch.cand_rows]
    cand_label = np.repeat(batch.pair_label, np.diff(batch.pair_ptr)).astype(np.int64)
    keys = np.repeat(cand_label, np.diff(A.indptr)) * n_features + A.indices
    emb_label = np.repeat(np.arange(len(emb_ptr) - 1, dtype=np.int64), np.diff(emb_ptr))
    emb_keys = emb_label * n_features + emb_idx
    pos = np.searchsorted(emb_keys, keys)
    pos_clipped = np.minimum(pos, max(len(emb_keys) - 1, 0))
    hit = (
        (pos < len(emb_keys)) & (emb_keys[pos_clipped] == keys)
        if len(emb_keys)
        else np.zeros(len(keys), bool)
    )
    weights = np.where(hit, emb_val[pos_clipped] if len(emb_keys) else 0.0, 0.0)
    row_of_nz = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    return np.bincount(row_of_nz, weights=A.data * weights, minlength=A.shape[0])


def select_top(scores: np.ndarray, ptr: np.ndarray, take: np.ndarray) -> np.ndarray:
    """Indices (into `scores`) of the `take[p]` best candidates of each pair p.

    Order: score descending, then candidate position ascending (candidates are in sample_id order,
    so ties go to the smallest sample_id); scores within TIE_RTOL of the pair's maximum count as
    the maximum, so the first is always Algorithm 2's argmax (:func:`segment_first_max`) whatever
    `take` is. ``take = 1`` is the argmax alone.

    Returns:
        Candidate indices, pair by pair, best first.
    """
    n_pairs = len(ptr) - 1
    seg_max, is_max, first = (
        segment_first_max(scores, ptr)
        if n_pairs
        else (scores[:0], np.zeros(0, dtype=bool), ptr[:0])
    )
    if (take == 1).all():
        return first
    snapped = np.where(is_max, np.repeat(seg_max, np.diff(ptr)), scores)
    pair_of = np.repeat(np.arange(n_pairs), np.diff(ptr))
    order = np.lexsort((np.arange(len(scores)), -snapped, pair_of))
    rank = np.arange(len(scores)) - np.repeat(ptr[:-1], np.diff(ptr))
    keep = rank < np.repeat(take, np.diff(ptr))
    return order[keep]


def select_top_ranked(
    scores: np.ndarray, ptr: np.ndarray, take: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`select_top` with each chosen candidate's pair and rank within the pair.

    Returns:
        (chosen candidate indices, their pair indices (non-decreasing), their rank 0..take-1 within
        the pair, 0 = the best), all of the same length min(take, size) summed over pairs.
    """
    chosen = select_top(scores, ptr, take)
    pair_of = np.searchsorted(ptr, chosen, side="right") - 1
    if len(chosen) == 0:
        return chosen, pair_of, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, pair_of[1:] != pair_of[:-1]])
    rank = np.arange(len(chosen)) - np.repeat(starts, np.diff(np.r_[starts, len(chosen)]))
    return chosen, pair_of, rank
