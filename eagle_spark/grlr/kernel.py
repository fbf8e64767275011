"""Vectorised GRLR and assignment kernels for a batch of labels, run inside Spark tasks.

A batch holds several labels; label k has pairs (k, j) for its groups j in M_k, and pair (k, j)
has the candidate rows N_j (members of group j, in sample_id order). All candidate rows of the
batch are stacked into one CSR matrix A whose columns are remapped so that each label owns a
disjoint block of columns: its support (the features its candidates use). A label embedding is
then a slice of one dense vector ``e`` over all columns, and one GRLR step for every label of the
batch is two sparse mat-vecs (``A @ e`` for the scores, ``A.T @ a`` for the selected sums) plus
segment operations. Everything is float64.

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
        of each stored entry of A, int64, or int32 on the one-label path when A has < 2^31 columns). Sorting is done by two counting sorts (scipy's CSR/CSC
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
    row_ptr = A.indptr.astype(np.int64)
    label_nnz_ptr = row_ptr[np.searchsorted(cand_label, np.arange(n_labels + 1))]
    by_label = sp.csr_matrix(
        (np.arange(nnz, dtype=np.int64), A.indices, label_nnz_ptr), shape=(n_labels, A.shape[1])
    )
    ordered = by_label.tocsc().tocsr()  # stable bucket sorts: by feature, then by label
    feature = ordered.indices
    label = np.repeat(np.arange(n_labels, dtype=np.int64), np.diff(ordered.indptr))
    new = np.empty(nnz, dtype=bool)
    new[0] = True
    np.not_equal(feature[1:], feature[:-1], out=new[1:])
    new[1:] |= label[1:] != label[:-1]
    column = np.cumsum(new) - 1
    inverse = np.empty(nnz, dtype=np.int64)
    inverse[ordered.data] = column
    return (label[new], feature[new].astype(np.int32)), inverse


class LabelBlock:
    """The stacked, column-remapped candidate matrix of a batch (see the module docstring).

    Args:
        X: (n_rows, n_features) CSR, float64, rows already normalised as wanted.
        batch: the pairs and their candidates.
    """

    def __init__(self, X: sp.csr_matrix, batch: PairBatch) -> None:
        self.batch = batch
        A = X[batch.cand_rows]
        cand_label = np.repeat(batch.pair_label, np.diff(batch.pair_ptr)).astype(np.int64)
        columns, inverse = _label_columns(A, cand_label, batch.n_labels)
        # int32 indices whenever they fit: scipy's transpose below is ~4x slower on int64 ones
        index = np.int32 if max(A.nnz, len(columns[0])) < np.iinfo(np.int32).max else np.int64
        self.A = sp.csr_matrix(
            (A.data, inverse.astype(index, copy=False), A.indptr.astype(index, copy=False)),
            shape=(A.shape[0], len(columns[0])),
        )
        self.AT = self.A.T.tocsr()
        self.col_label, self.col_feature = columns
        self.label_ptr = np.searchsorted(self.col_label, np.arange(batch.n_labels + 1))
        self._sizes = np.diff(self.label_ptr)
        self._nonempty = np.flatnonzero(self._sizes > 0)
        self._starts = self.label_ptr[self._nonempty]

    def project(self, v: np.ndarray) -> np.ndarray:
        """Proj on every label's block: v_k / ||v_k||, and Proj(0) = 0 (a new array)."""
        norms = np.zeros(self.batch.n_labels)
        if len(v):
            norms[self._nonempty] = np.add.reduceat(np.square(v), self._starts)
        np.sqrt(norms, out=norms)
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        out = np.repeat(scale, self._sizes)
        out *= v
        return out

    def scores(self, e: np.ndarray) -> np.ndarray:
        """<e_k, x_i> for every candidate row of every pair."""
        return self.A @ e

    def grlr(self, iterations: int, lr: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Algorithm 1 for every label of the batch.

        Returns:
            (e, stats): e over the block columns (label k owns columns label_ptr[k]:label_ptr[k+1]);
            stats per iteration t = 0..T: ``sum_max`` (sum over pairs of max_i <e^t, x_i>) and, for
            t >= 1, ``changed`` (pairs whose first-maximum candidate under e^t differs from the
            one under e^(t-1)); arrays of length T + 1 (changed[0] = 0).
        """
        ptr = self.batch.pair_ptr
        e = self.project(self.AT @ np.ones(self.A.shape[0]))  # e0 = Proj(sum of candidates)
        seg_max, is_max, first = segment_first_max(self.scores(e), ptr)
        sum_max = np.zeros(iterations + 1)
        changed = np.zeros(iterations + 1, dtype=np.int64)
        sum_max[0] = seg_max.sum()
        for t in range(1, iterations + 1):
            g = self.project(self.AT @ is_max.astype(np.float64))  # g = Proj(sum of selected)
            e = self.project(e + lr * g)
            seg_max, is_max, new_first = segment_first_max(self.scores(e), ptr)
            sum_max[t] = seg_max.sum()
            changed[t] = int((new_first != first).sum())
            first = new_first
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
    seg_max, is_max, first = segment_first_max(scores, ptr) if n_pairs else (None, None, ptr[:0])
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
