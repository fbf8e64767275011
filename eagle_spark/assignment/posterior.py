"""Posterior weights: the E-step of multiple-instance EM for a group label.

A (group, label) pair says that c of the group's m members hold the label (c the list-merge
count, 1 without ``assign.multiplicity``), not which. Give member i independent odds
o_i = exp(eta_i) of holding it; conditioned on exactly c members holding it, a set T of c
members has probability prod_{i in T} o_i / e_c(o), e_c the elementary symmetric polynomial of
degree c, and member i holds the label with probability

    q_i = o_i e_{c-1}(o without i) / e_c(o),

the conditional-Bernoulli inclusion probability: q_i in (0, 1], sum_i q_i = c, c = 1 is the
softmax of eta. A common factor of the odds cancels, so a classifier's bias (the same for every
member of the pair) plays no part; with the logistic loss eta_i = w_k . x_i is the classifier's
log-odds and no temperature remains. Source: this project (the posterior the paper's Algorithm 2
takes the mode of; multiple-instance EM as in mi-SVM, Andrews et al. 2003).

Memory: a batch's candidates, plus per bucket of equal-size pairs two (m + 1) x n x (c_max + 1)
float64 tables of log e_j, n bounded so a table stays within :data:`DP_CELLS` cells (32 MiB).
"""

from __future__ import annotations

import numpy as np

DP_CELLS = 1 << 22
"""Cells of one forward (or backward) table of :func:`inclusion_probabilities`' recursion."""


def inclusion_probabilities(eta: np.ndarray, ptr: np.ndarray, c: np.ndarray) -> np.ndarray:
    """q_i = P(member i holds the label | exactly c of the pair's members hold it), members
    independent with log-odds eta_i (module docstring).

    Args:
        eta: (n_candidates,) finite float, log-odds of each pair's candidates, pair after pair.
        ptr: (n_pairs + 1,) int, candidate offsets of the pairs.
        c: (n_pairs,) int >= 1, members holding each pair's label; c >= the pair's size gives
            every member 1.
    Returns:
        (n_candidates,) float64 in [0, 1]; each pair's sum is min(c, size).
    Raises:
        ValueError: eta not finite, or c < 1.
    """
    eta = np.asarray(eta, dtype=np.float64)
    sizes = np.diff(ptr)
    c = np.asarray(c, dtype=np.int64)
    if not np.all(np.isfinite(eta)):
        raise ValueError("inclusion_probabilities: a log-odds is not finite")
    if np.any(c < 1):
        raise ValueError("inclusion_probabilities: c must be >= 1")
    q = np.ones(len(eta), dtype=np.float64)
    if len(eta) == 0:
        return q
    pair_of = np.repeat(np.arange(len(sizes)), sizes)
    starts = ptr[:-1][sizes > 0]
    top = np.full(len(sizes), -np.inf)
    top[sizes > 0] = np.maximum.reduceat(eta, starts)
    odds = np.exp(eta - top[pair_of])  # in (0, 1], the pair's best at 1: no overflow
    one = (c == 1) & (sizes > 1)
    if one.any():  # the softmax
        total = np.zeros(len(sizes))
        np.add.at(total, pair_of, odds)
        at = one[pair_of]
        q[at] = odds[at] / total[pair_of][at]
    for m in np.unique(sizes[(c >= 2) & (c < sizes)]):
        pairs = np.flatnonzero((sizes == m) & (c >= 2) & (c < sizes))
        per_pair = (m + 1) * (int(c[pairs].max()) + 1)
        step = max(1, DP_CELLS // per_pair)
        for lo in range(0, len(pairs), step):
            chosen = pairs[lo : lo + step]
            rows = ptr[chosen][:, None] + np.arange(m)[None, :]
            q[rows] = _conditional_bernoulli(eta[rows], c[chosen])
    return q


def _conditional_bernoulli(log_odds: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Inclusion probabilities of n pairs of m members each, (n, m) log-odds, (n,) c in
    [2, m - 1]: forward and backward elementary symmetric polynomials of the odds, in logs
    (log e_j, -inf for an empty degree), so no degree overflows or underflows."""
    n, m = log_odds.shape
    k = int(c.max())
    rows = np.arange(n)

    def sweep(columns: np.ndarray) -> np.ndarray:
        e = np.full((m + 1, n, k + 1), -np.inf)
        e[:, :, 0] = 0.0
        for t, j in enumerate(columns):
            e[t + 1, :, 1:] = np.logaddexp(e[t, :, 1:], log_odds[:, j, None] + e[t, :, :-1])
        return e

    fwd = sweep(np.arange(m))  # fwd[t]: members 0..t-1
    bwd = sweep(np.arange(m)[::-1])  # bwd[t]: the last t members
    degree = np.arange(k)[None, :]  # a: the degree the members before i contribute
    rest = c[:, None] - 1 - degree  # c - 1 - a from the members after i
    valid = rest >= 0
    log_e_c = fwd[m][rows, c]
    q = np.empty((n, m))
    with np.errstate(invalid="ignore"):  # -inf + -inf terms of invalid degrees
        for i in range(m):
            terms = fwd[i][:, :k] + np.take_along_axis(bwd[m - 1 - i], np.maximum(rest, 0), 1)
            others = np.logaddexp.reduce(np.where(valid, terms, -np.inf), axis=1)
            q[:, i] = np.exp(log_odds[:, i] + others - log_e_c)
    return np.clip(q, 0.0, 1.0)
