"""The rankers' cost chosen on held-out samples (classifiers.tree.ranker_cost): hand-worked
figures, the choice rule, the leaf sample; the Spark stage against an independent twin is in
test_tree.py, cached == joined in test_joined_training.py."""

import numpy as np
import pytest

from eagle_spark.classifiers.tree.ranker_cost import (
    FACTORS,
    choose,
    held_out_mask,
    ranking_hits,
    sample_leaves,
)
from eagle_spark.classifiers.tree.structure import Tree
from eagle_spark.settings import Settings, TreeSettings


def test_ranking_hits_hand_worked():
    # sample 0: positives {0, 2}; ranked 2, 1, 0, 3 -> top1 1 hit /1, top3 2 hits /2, top5 2 /2
    # sample 1: positive {3}; ranked 0, 1, 3, 2 -> top1 0, top3 1 /1, top5 1 /1
    # sample 2: no positive: adds 0
    scores = np.array([[0.2, 0.5, 0.9, -1.0], [3.0, 2.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    truth = np.array([[1, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=bool)
    np.testing.assert_allclose(ranking_hits(scores, truth), [1.0, 2.0, 2.0])
    # ties rank the lower label first: label 0 of sample 2 would count if it were positive
    truth[2, 0] = True
    np.testing.assert_allclose(ranking_hits(scores, truth), [2.0, 3.0, 3.0])


def test_choose_takes_the_best_mean_then_c_then_the_smaller_cost():
    C = 0.5
    best_low = {
        0: np.array([10, 6, 7, 8.0]),
        1: np.array([10, 6, 6, 8.0]),
        2: np.array([10, 5, 5, 5.0]),
    }
    cost, means = choose(best_low, C)
    assert cost == 0.25 and means[0.25] == [0.6, 0.7, 0.8] and means[1.0] == [0.5, 0.5, 0.5]
    tie = {0: np.array([10, 6, 6, 6.0]), 1: np.array([10, 6, 6, 6.0]), 2: np.array([10, 6, 6, 6.0])}
    assert choose(tie, C)[0] == C  # a tie keeps C itself
    no_c = {0: np.array([10, 6, 6, 6.0]), 2: np.array([10, 6, 6, 6.0])}
    assert choose(no_c, C)[0] == 0.25  # then the smaller cost
    assert choose({0: np.zeros(4)}, C) == (C, {})  # nothing held out: C


def test_sample_leaves_takes_leaves_until_the_positives_reach_the_budget():
    # one tree: root 0 -> clusters 1, 2 (leaf clusters), 3 labels under 1, 2 under 2
    parent = np.array([-1, 0, 0, 1, 1, 1, 2, 2])
    tree = Tree(parent, np.zeros(8), 3, 5)
    freq = np.array([4000, 4000, 4000, 1, 1])
    got = sample_leaves([tree, tree, tree], freq, seed=0)
    # leaves hold 12,000 (cluster 1) or 2 positives (cluster 2): in the seeded order, taken until
    # the positives reach 10,000 with at least 2 taken
    order = np.random.default_rng([0, 1]).permutation(6)
    every = [(t, v) for t in range(3) for v in (1, 2)]
    want, total = [], 0
    for i in order:
        if total >= 10_000 and len(want) >= 2:
            break
        want.append(every[i])
        total += 12_000 if every[i][1] == 1 else 2
    assert [(t, v) for t, v, _ in got] == want and 2 <= len(want) < 6
    assert [p for _, _, p in got] == [12000.0 if v == 1 else 2.0 for _, v in want]
    big = np.array([1, 1, 1, 50_000, 1])  # every cluster-2 leaf is over the budget: 2 leaves
    assert len(sample_leaves([tree, tree, tree], big, seed=0)) == 2
    tiny = np.ones(5, dtype=np.int64)  # the budget is never reached: every leaf
    assert len(sample_leaves([tree, tree, tree], tiny, seed=0)) == 6
    small = [Tree(np.array([-1, 0, 0]), np.zeros(3), 1, 2)]  # the root is the only leaf
    assert [(t, v) for t, v, _ in sample_leaves(small, np.array([3, 4]), seed=0)] == [(0, 0)]


def test_held_out_mask_is_seeded_per_leaf():
    a = held_out_mask(10_000, 0, 1, 7)
    np.testing.assert_array_equal(a, np.random.default_rng([0, 1, 7]).random(10_000) < 0.2)
    assert 0.18 < a.mean() < 0.22
    assert not np.array_equal(a, held_out_mask(10_000, 0, 1, 8))


def test_the_setting_and_its_candidates():
    assert TreeSettings().ranker_C_choice == "held_out" and FACTORS == (0.5, 1.0, 2.0)
    assert Settings.load(overrides=["tree.ranker_C_choice=none"]).tree.ranker_C_choice == "none"
    with pytest.raises(Exception, match="ranker_C_choice"):
        Settings.load(overrides=["tree.ranker_C_choice=best"])
