"""The tree's prediction kernel (every node's score of a block of rows in one scatter pass) against
scipy's product, by hand and on random data, and the beam search over blocks of rows."""

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_spark.classifiers.tree import beam_search, ensemble_search, path_probability, scoring
from eagle_spark.classifiers.tree.scoring import feature_major, node_scores, rows_per_block
from eagle_spark.classifiers.tree.structure import Tree


def test_node_scores_hand_worked():
    # rows x = (1, 0, 2) and (0, 3, 0); nodes w0 = (1, 1, 1), w1 = (0, 2, -1), w2 = 0
    X = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0]]))
    W = sp.csc_matrix(np.array([[1, 1, 1], [0, 2, -1], [0, 0, 0]], dtype=np.float32))
    assert node_scores(X, W).tolist() == [[3.0, -2.0, 0.0], [3.0, 6.0, 0.0]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_node_scores_equal_scipy_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    X = sp.random(40, 300, density=0.05, format="lil", random_state=rng, dtype=np.float64)
    X[5] = 0  # an empty row
    X = X.tocsr()
    W = sp.random(120, 300, density=0.1, format="lil", random_state=rng, dtype=np.float32)
    W[:, 7] = 0  # a feature no node has
    W = W.tocsr()
    W.data -= 0.5
    got = node_scores(X, feature_major(W))
    want = (X @ W.T).toarray()  # scipy upcasts the float32 weights, accumulates in X's order
    assert got.dtype == np.float64 and got.shape == (40, 120)
    assert np.array_equal(got, want)
    assert not got[5].any()


def test_node_scores_errors():
    W = sp.csc_matrix(np.ones((2, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="X has 4 features, the weights 3"):
        node_scores(sp.csr_matrix(np.ones((1, 4))), W)
    with pytest.raises(ValueError, match="must be float64 CSR"):
        node_scores(sp.csr_matrix(np.ones((1, 3), dtype=np.float32)), W)
    with pytest.raises(ValueError, match="must be float64 CSR"):
        node_scores(sp.csc_matrix(np.ones((1, 3))), W)
    bad = sp.csr_matrix(
        (np.ones(1), np.array([5], dtype=np.int32), np.array([0, 1], dtype=np.int32)), shape=(1, 3)
    )
    with pytest.raises(ValueError, match="feature index outside 0..2"):
        node_scores(bad, W)


def test_rows_per_block():
    assert rows_per_block(1000, 8000 * 3) == 3
    assert rows_per_block(10**9, 1) == 1
    assert rows_per_block(333_443) == (64 << 20) // (8 * 333_443)  # 25 rows at Wiki-325K's tree


def _random_tree(rng, d=60):
    # root 0 -> clusters 1, 2; cluster 1 -> clusters 3, 4; labels: 3 -> 0..3, 4 -> 4..6, 2 -> 7..10
    n_clusters, n_labels = 5, 11
    parent = np.r_[-1, 0, 0, 1, 1, [3] * 4, [4] * 3, [2] * 4]
    level = np.zeros(len(parent), dtype=np.int64)
    for node in range(1, len(parent)):
        level[node] = level[parent[node]] + 1
    W = sp.random(len(parent), d, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    W.data = (W.data - 0.5) * 4
    bias = rng.normal(size=len(parent))
    return Tree(parent, level, n_clusters, n_labels), W, bias


def _path_probabilities(tree, W, bias, x):
    """Twin: every label's path probability by walking up from the label (dense numpy)."""
    s = W.toarray().astype(np.float64) @ x + bias
    p = np.exp(-np.square(np.maximum(0.0, 1.0 - s)))
    out = np.ones(tree.n_labels)
    for label in range(tree.n_labels):
        node = tree.n_clusters + label
        while tree.parent[node] >= 0:
            out[label] *= p[node]
            node = tree.parent[node]
    return out


def test_beam_search_by_blocks_of_rows(monkeypatch):
    rng = np.random.default_rng(3)
    tree, W, bias = _random_tree(rng)
    X = sp.random(17, 60, density=0.2, format="csr", random_state=rng, dtype=np.float64)
    whole = beam_search(tree, W, bias, X, beam=2, k=4, loss="squared_hinge")
    monkeypatch.setattr(scoring, "SCORE_BLOCK_BYTES", 8 * len(bias) * 3)  # blocks of 3 rows
    by_blocks = beam_search(tree, feature_major(W), bias, X, beam=2, k=4, loss="squared_hinge")
    assert np.array_equal(whole[0], by_blocks[0]) and np.array_equal(whole[1], by_blocks[1])
    wide_labels, wide_scores = beam_search(tree, W, bias, X, beam=100, k=11, loss="squared_hinge")
    for i in range(X.shape[0]):
        full = _path_probabilities(tree, W, bias, X[i].toarray().ravel())
        order = np.lexsort((np.arange(11), -full))
        assert wide_labels[i].tolist() == order.tolist()
        np.testing.assert_allclose(wide_scores[i], full[order], rtol=1e-12)
    assert path_probability(np.array([1.0]), "squared_hinge")[0] == 1.0


def _flat_tree(probs):
    """A tree whose root's children are the labels, each reached with probability probs[l] (W = 0,
    bias = 1 - sqrt(-ln p), so exp(-max(0, 1 - s)^2) = p)."""
    n = len(probs)
    tree = Tree(np.r_[-1, np.zeros(n, dtype=np.int64)], np.r_[0, np.ones(n, dtype=np.int64)], 1, n)
    bias = np.r_[0.0, 1 - np.sqrt(-np.log(np.asarray(probs)))]
    return tree, sp.csr_matrix((n + 1, 4), dtype=np.float32), bias


def test_ensemble_counts_every_reached_label_hand_worked():
    # tree A: labels 0, 1, 2 at 0.9, 0.8, 0.7; tree B at 0.1, 0.2, 0.95. Means: 0.5, 0.5, 0.825, so
    # label 2 is best (an ensemble keeping only each tree's 2 best would average 0.45, 0.5, 0.475
    # and pick label 1), then labels 0 and 1 tie at 0.5 (smaller id first)
    models = [_flat_tree([0.9, 0.8, 0.7]), _flat_tree([0.1, 0.2, 0.95])]
    X = sp.csr_matrix(np.ones((1, 4)))
    labels, scores = ensemble_search(models, X, beam=10, k=1, loss="squared_hinge")
    assert labels.tolist() == [[2]] and scores[0, 0] == pytest.approx(0.825, rel=1e-12)
    labels, scores = ensemble_search(models, X, beam=10, k=3, loss="squared_hinge")
    assert labels.tolist() == [[2, 0, 1]]
    np.testing.assert_allclose(scores, [[0.825, 0.5, 0.5]], rtol=1e-12)
    labels, scores = ensemble_search(models, X, beam=10, k=5, loss="squared_hinge")
    assert labels.tolist() == [[2, 0, 1, -1, -1]] and scores[0, 3:].tolist() == [0.0, 0.0]


def _loop_beam(tree, W, bias, x, beam):
    """Twin: one row's beam search as a plain loop over the beam's nodes; {label: probability}."""
    s = W.toarray().astype(np.float64) @ x + bias
    p = np.exp(-np.square(np.maximum(0.0, 1.0 - s)))
    frontier, found = [(0, 1.0)], {}
    while frontier:
        nodes = []
        for node, prob in frontier:
            for child in np.flatnonzero(tree.parent == node):
                if child >= tree.n_clusters:
                    found[int(child) - tree.n_clusters] = prob * p[child]
                else:
                    nodes.append((int(child), prob * p[child]))
        frontier = sorted(nodes, key=lambda e: (-e[1], e[0]))[:beam]
    return found


def test_ensemble_equals_a_loop_twin_with_narrow_beams():
    rng = np.random.default_rng(7)
    models = [_random_tree(rng) for _ in range(3)]
    X = sp.random(25, 60, density=0.2, format="csr", random_state=rng, dtype=np.float64)
    labels, scores = ensemble_search(models, X, beam=1, k=6, loss="squared_hinge")
    for i in range(X.shape[0]):
        total = np.zeros(11)
        for tree, W, bias in models:
            for label, prob in _loop_beam(tree, W, bias, X[i].toarray().ravel(), 1).items():
                total[label] += prob / 3
        reached = np.flatnonzero(total > 0)
        order = reached[np.lexsort((reached, -total[reached]))][:6]
        assert labels[i][labels[i] >= 0].tolist() == order.tolist()
        np.testing.assert_allclose(scores[i][: len(order)], total[order], rtol=1e-12)
