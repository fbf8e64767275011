"""Balanced spherical 2-means (eagle_spark.kmeans) against an independently written dense twin
that sums each half from scratch every round, and a hand-worked split."""

import numpy as np
import pytest
import scipy.sparse as sp

import eagle_spark.kmeans as kmeans
from eagle_spark.kmeans import balanced_2means


def twin_2means(R: np.ndarray, seed, max_iter: int) -> np.ndarray:
    """Dense twin: same initial rows (two distinct rows drawn by default_rng(seed)), halves of
    ceil(m/2) / floor(m/2) by <r, c0 - c1> (stable ties), centroids = normalised sums of the halves."""
    m = R.shape[0]
    i, j = np.random.default_rng(seed).choice(m, size=2, replace=False)
    c0, c1 = R[i].copy(), R[j].copy()
    last = None
    for _ in range(max_iter):
        ranked = np.argsort(-(R @ (c0 - c1)), kind="stable")
        side = np.ones(m, dtype=bool)
        side[ranked[: (m + 1) // 2]] = False
        if last is not None and (last == side).all():
            break
        last = side
        c0, c1 = R[~side].sum(axis=0), R[side].sum(axis=0)
        c0 = c0 / np.linalg.norm(c0) if np.linalg.norm(c0) > 0 else c0
        c1 = c1 / np.linalg.norm(c1) if np.linalg.norm(c1) > 0 else c1
    return side


def random_rows(m: int, d: int, seed: int) -> sp.csr_matrix:
    X = sp.random(m, d, density=0.15, random_state=seed, format="csr", dtype=np.float64)
    X = X + sp.csr_matrix(
        (np.ones(m), (np.arange(m), np.arange(m) % d)), shape=(m, d)
    )  # no empty row
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    return sp.csr_matrix(sp.diags(1 / norms) @ X)


@pytest.mark.parametrize("m,seed", [(2, 0), (3, 1), (57, 2), (200, 3), (401, 4)])
def test_balanced_2means_matches_the_dense_twin(monkeypatch, m, seed):
    moved_calls = []
    real = kmeans._moved_sums
    monkeypatch.setattr(kmeans, "_moved_sums", lambda *a: moved_calls.append(1) or real(*a))
    R = random_rows(m, 30, seed)
    for s in range(5):
        want = twin_2means(R.toarray(), [seed, s], 20)
        got = balanced_2means(R, seed=[seed, s], max_iter=20)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(
            balanced_2means(R.toarray(), seed=[seed, s], max_iter=20), want
        )
        assert got.sum() == m // 2
    if m >= 57:  # rows changed sides after the first round: the incremental sums were used
        assert moved_calls


def test_balanced_2means_hand_worked_split():
    # two directions, three rows near each: the halves are {0, 1, 2} and {3, 4, 5} whatever the start
    R = np.array([[1, 0.1], [1, 0.2], [1, 0], [0.1, 1], [0, 1], [0.2, 1]])
    R = R / np.linalg.norm(R, axis=1, keepdims=True)
    for seed in range(6):
        right = balanced_2means(sp.csr_matrix(R), seed=seed, max_iter=20)
        assert (
            right[:3].all() != right[3:].all()
            and len(set(right[:3])) == 1
            and len(set(right[3:])) == 1
        )
