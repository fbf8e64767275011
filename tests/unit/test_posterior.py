"""The posterior weighting's E-step (``assign.posterior``) against hand-worked groups and a
subset-enumeration twin."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from eagle_spark.assignment.members import MIN_WEIGHT, posterior_weights
from eagle_spark.assignment.posterior import inclusion_probabilities


def _enumerated(eta, c):
    """P(i in T | |T| = c) with P(T) proportional to prod_{i in T} exp(eta_i), by listing every
    c-subset of the members (plain Python)."""
    m = len(eta)
    if c >= m:
        return [1.0] * m
    total, q = 0.0, [0.0] * m
    for subset in itertools.combinations(range(m), c):
        p = float(np.exp(sum(eta[i] for i in subset)))
        total += p
        for i in subset:
            q[i] += p
    return [v / total for v in q]


def test_e_step_of_a_three_member_group_by_hand():
    """Odds 1, 2, 4. One member holds the label: 1/7, 2/7, 4/7. Two: the pairs {1,2}, {1,3},
    {2,3} weigh 2, 4, 8 (of 14), so member 1 is in 6/14 = 3/7, member 2 in 10/14 = 5/7,
    member 3 in 12/14 = 6/7; they sum to 2. Three: every member."""
    eta = np.log([1.0, 2.0, 4.0])
    ptr = np.array([0, 3])
    for c, want in ((1, [1 / 7, 2 / 7, 4 / 7]), (2, [3 / 7, 5 / 7, 6 / 7]), (3, [1, 1, 1])):
        got = inclusion_probabilities(eta, ptr, np.array([c]))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert got.sum() == pytest.approx(c)
    # several pairs at once, one of them a single member
    both = inclusion_probabilities(
        np.r_[eta, 5.0, eta], np.array([0, 3, 4, 7]), np.array([2, 1, 1])
    )
    np.testing.assert_allclose(both, [3 / 7, 5 / 7, 6 / 7, 1.0, 1 / 7, 2 / 7, 4 / 7], rtol=1e-12)


def test_inclusion_probabilities_equal_the_enumeration():
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 9, size=300)
    ptr = np.r_[0, np.cumsum(sizes)]
    eta = rng.normal(0.0, 3.0, ptr[-1])
    c = rng.integers(1, 7, size=300)
    got = inclusion_probabilities(eta, ptr, c)
    for p in range(300):
        members = slice(ptr[p], ptr[p + 1])
        np.testing.assert_allclose(got[members], _enumerated(eta[members], int(c[p])), atol=1e-12)
    # a common shift of a pair's log-odds (a classifier's bias) changes nothing
    shifted = inclusion_probabilities(eta + np.repeat(rng.normal(0, 50, 300), sizes), ptr, c)
    np.testing.assert_allclose(shifted, got, atol=1e-9)


def test_extreme_log_odds_stay_finite():
    """Log-odds 800 apart: exp overflows in plain arithmetic; the members far below get ~0."""
    eta = np.array([0.0, -800.0, -900.0, -1000.0, 0.0])
    got = inclusion_probabilities(eta, np.array([0, 5]), np.array([3]))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, [1.0, 1.0, 0.0, 0.0, 1.0], atol=1e-40)
    with pytest.raises(ValueError, match="not finite"):
        inclusion_probabilities(np.array([0.0, np.inf]), np.array([0, 2]), np.array([1]))
    with pytest.raises(ValueError, match="c must be"):
        inclusion_probabilities(np.array([0.0, 1.0]), np.array([0, 2]), np.array([0]))


def test_posterior_weights_by_hand():
    """Scores 3, 2, 1 (range 2, so distances 0, 0.5, 1 below the best): at T = 0.5 the log-odds
    are 0, -1, -2; as log-odds themselves (no temperature) 3, 2, 1 - the same softmax, shifted."""
    scores, ptr, c = np.array([3.0, 2.0, 1.0]), np.array([0, 3]), np.array([1])
    softmax = np.exp([0.0, -1.0, -2.0]) / np.exp([0.0, -1.0, -2.0]).sum()
    np.testing.assert_allclose(posterior_weights(scores, ptr, c, 0.5), softmax, rtol=1e-12)
    np.testing.assert_allclose(posterior_weights(scores, ptr, c, None), softmax, rtol=1e-12)
    # keep = 1: only the top member keeps its weight (not 1: the posterior's)
    np.testing.assert_allclose(
        posterior_weights(scores, ptr, c, 0.5, keep=1.0), [softmax[0], 0, 0], rtol=1e-12
    )
    # below the floor: 0; all-tied scores: c / size each
    far = posterior_weights(np.array([0.0, -20.0]), np.array([0, 2]), c, None)
    assert far[1] == 0.0 and far[0] == pytest.approx(1.0) and np.exp(-20) < MIN_WEIGHT
    tied = posterior_weights(np.full(4, 0.7), np.array([0, 4]), np.array([2]), 0.3)
    np.testing.assert_allclose(tied, [0.5] * 4)
