"""P@k, nDCG@k, PSP@k: a hand-worked 3-sample example, napkinXC's definitions, and Spark == lists."""

import math

import numpy as np
import pytest

from eagle_spark import schemas as S
from eagle_spark.evaluation.metrics import (
    evaluate_frames,
    inv_propensity,
    label_counts,
    metrics_from_lists,
    table,
)

TRUE = [[1, 2], [0], []]  # the third sample has no label: counts, contributes 0
PRED = [[2, 0, 1], [1, 2, 0], [0, 1, 2]]
INV_PS = np.array([2.0, 3.0, 4.0])

# Worked by hand (see the comments):
EXPECTED = {
    # s0 hits at ranks 1 and 3, s1 at rank 3
    "P": [1 / 3, (1 / 2) / 3, (2 / 3 + 1 / 3) / 3],
    # nDCG@2: s0 1 / (1 + 1/log2 3); nDCG@3: s0 1.5 / (1 + 1/log2 3), s1 0.5 / 1
    "nDCG": [1 / 3, (1 / (1 + 1 / math.log2(3))) / 3, (1.5 / (1 + 1 / math.log2(3)) + 0.5) / 3],
    # PSP@1 = 4 / (4 + 2); @2 = (4/2) / (7/2 + 2/2); @3 = (7/3 + 2/3) / (7/3 + 2/3)
    "PSP": [4 / 6, 2 / 4.5, 1.0],
}


def test_hand_worked_example():
    got = metrics_from_lists(TRUE, PRED, 3, INV_PS)
    for name in EXPECTED:
        np.testing.assert_allclose(got[name], EXPECTED[name], rtol=1e-12)


def test_spark_equals_lists(spark):
    Y = spark.createDataFrame([(i, t) for i, t in enumerate(TRUE)], S.Y_SCHEMA)
    P = spark.createDataFrame(
        [(i, p) for i, p in enumerate(PRED[:2])], "sample_id long, label_ids array<int>"
    )
    got = evaluate_frames(Y, P, 3, INV_PS)  # sample 2 has no prediction: an empty ranking
    expected = metrics_from_lists(TRUE, [PRED[0], PRED[1], []], 3, INV_PS)
    assert got["n_samples"] == 3
    for name in ("P", "nDCG", "PSP"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-12)
    assert "| P | 33.33 |" in table(got)


def test_napkinxc_definitions():
    napkin = pytest.importorskip("napkinxc.metrics", reason="napkinxc (test extra) not installed")
    rng = np.random.default_rng(0)
    true = [list(rng.choice(30, size=rng.integers(0, 5), replace=False)) for _ in range(200)]
    pred = [list(rng.choice(30, size=5, replace=False)) for _ in range(200)]
    counts = np.bincount([l for t in true for l in t], minlength=30)
    inv_ps = inv_propensity(counts, len(true))
    from scipy.sparse import csr_matrix

    Ytrue = csr_matrix(
        (
            np.ones(sum(map(len, true))),
            [l for t in true for l in t],
            np.r_[0, np.cumsum([len(t) for t in true])],
        ),
        shape=(200, 30),
    )
    np.testing.assert_allclose(inv_ps, napkin.Jain_et_al_inverse_propensity(Ytrue), rtol=1e-12)
    ours = metrics_from_lists(true, pred, 5, inv_ps)
    np.testing.assert_allclose(ours["P"], napkin.precision_at_k(true, pred, k=5), rtol=1e-12)
    np.testing.assert_allclose(ours["nDCG"], napkin.ndcg_at_k(true, pred, k=5), rtol=1e-12)
    np.testing.assert_allclose(
        ours["PSP"], napkin.psprecision_at_k(true, pred, inv_ps, k=5), rtol=1e-12
    )


def test_bad_arguments(spark):
    with pytest.raises(ValueError, match="n must be >= 1"):
        inv_propensity(np.ones(3), 0)
    Y = spark.createDataFrame([(0, [1])], S.Y_SCHEMA)
    with pytest.raises(ValueError, match="k must be >= 1"):
        evaluate_frames(Y, Y, 0, INV_PS)


def test_label_counts_hand_worked(spark):
    # label 0 in rows 0 and 3, label 2 in rows 0, 1, 3; row 2 has none; id 5 is beyond n_labels 3
    rows = [(0, [0, 2]), (1, [2]), (2, []), (3, [2, 0, 5])]
    for parts in (1, 3):  # one task, or partial counts from several summed on the driver
        Y = spark.createDataFrame(rows, S.Y_SCHEMA).repartition(parts)
        counts, n = label_counts(Y, 3)
        assert counts.tolist() == [2.0, 0.0, 3.0] and n == 4
    counts, n = label_counts(spark.createDataFrame([], S.Y_SCHEMA), 2)
    assert counts.tolist() == [0.0, 0.0] and n == 0
