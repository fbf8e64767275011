"""Group-level metrics (choosing from group labels alone) on hand-worked groups."""

import numpy as np
import pytest

from eagle_spark.evaluation.group import group_metrics, group_predictions


@pytest.fixture
def frames(spark):
    """Group 0 (members 10, 11) has labels 1, 2, 5; group 1 (member 20) has 3; group 2 (member
    30, never predicted) has 4."""
    preds = spark.createDataFrame(
        [(10, [1, 7], [0.9, 0.5]), (11, [7, 2], [0.8, 0.3]), (20, [4, 3], [0.6, 0.55])],
        "sample_id long, label_ids array<int>, scores array<float>",
    )
    Y1 = spark.createDataFrame(
        [(10, 0), (11, 0), (20, 1), (30, 2)], "sample_id long, group_id long"
    )
    Y2 = spark.createDataFrame(
        [(0, 1, 1), (0, 2, 2), (0, 5, 1), (1, 3, 1), (2, 4, 1)],
        "group_id long, label_id int, count int",
    )
    return preds, Y1, Y2


def test_group_predictions_combine_members_by_hand(frames):
    preds, Y1, _ = frames
    by_max = {r.group_id: r.label_ids for r in group_predictions(preds, Y1, 3, "max").collect()}
    # group 0: label 1 max 0.9, label 7 max(0.5, 0.8) = 0.8, label 2 0.3
    assert by_max == {0: [1, 7, 2], 1: [4, 3]}
    by_sum = {r.group_id: r.label_ids for r in group_predictions(preds, Y1, 2, "sum").collect()}
    # label 7: 0.5 + 0.8 = 1.3 now ranks first; k = 2 keeps two
    assert by_sum == {0: [7, 1], 1: [4, 3]}


def test_group_metrics_by_hand(frames):
    """max: group 0 ranks 1, 7, 2 (hits at 1 and 3), group 1 ranks 4, 3 (hit at 2), group 2 has
    no prediction: P@1 = (1 + 0 + 0) / 3, P@2 = (1/2 + 1/2 + 0) / 3, P@3 = (2/3 + 1/3 + 0) / 3.
    sum: group 0 ranks 7, 1, 2: P@1 = 0, P@2 = (1/2 + 1/2) / 3, P@3 = (2/3 + 1/3) / 3."""
    preds, Y1, Y2 = frames
    ones = np.ones(8)
    got = group_metrics(preds, Y1, Y2, 3, ones, "max")
    assert got["n_samples"] == 3
    np.testing.assert_allclose(got["P"], [1 / 3, 1 / 3, 1 / 3])
    got = group_metrics(preds, Y1, Y2, 3, ones, "sum")
    np.testing.assert_allclose(got["P"], [0.0, 1 / 3, 1 / 3])
    with pytest.raises(ValueError, match="combine"):
        group_metrics(preds, Y1, Y2, 3, ones, "mean")
    with pytest.raises(ValueError, match="k must be"):
        group_predictions(preds, Y1, 0)


def test_multiset_precision_by_hand(spark):
    """Group 0: members 1, 2, 3, labels 7 (count 2) and 8 (count 1); group 1: member 4, label 9.
    Top-1 predictions 7, 7, 7 and 9: label 7 is predicted by 3 members but held by 2, so 2 + 1 = 3
    of the 4 predictions can be right: P@1 = 3 / 4. Top-2 adds 8, 5, 8 and 6: 8 predicted twice,
    held once: (2 + 1 + 1) / (4 x 2) = 1 / 2."""
    from eagle_spark.evaluation.group import multiset_precision

    preds = spark.createDataFrame(
        [
            (1, [7, 8], [0.9, 0.1]),
            (2, [7, 5], [0.8, 0.2]),
            (3, [7, 8], [0.7, 0.3]),
            (4, [9, 6], [0.5, 0.4]),
        ],
        "sample_id long, label_ids array<int>, scores array<float>",
    )
    Y1 = spark.createDataFrame([(1, 0), (2, 0), (3, 0), (4, 1)], "sample_id long, group_id long")
    Y2 = spark.createDataFrame(
        [(0, 7, 2), (0, 8, 1), (1, 9, 1)], "group_id long, label_id int, count int"
    )
    np.testing.assert_allclose(multiset_precision(preds, Y1, Y2, 2), [3 / 4, 1 / 2])
    # a member without predictions stays in the denominator
    Y1b = spark.createDataFrame(
        [(1, 0), (2, 0), (3, 0), (4, 1), (5, 1)], "sample_id long, group_id long"
    )
    np.testing.assert_allclose(multiset_precision(preds, Y1b, Y2, 1), [3 / 5])
