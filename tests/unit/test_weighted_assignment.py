"""Weighted assignment: the soft weights (hand-worked, both ends of the temperature), the weighted
solver against scikit-learn's public estimators, the expected-loss problem, and the assign stage
and one-vs-all / tree training on Spark against independent numpy / scipy twins."""

import dataclasses
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_spark.assignment.members import MIN_WEIGHT, soft_weights
from eagle_spark.classifiers.linear import expected_loss_problem, expected_loss_rows, train_binary
from eagle_spark.errors import SettingsError
from eagle_spark.settings import AssignSettings

# --- the weights, worked by hand ------------------------------------------------------------------


def test_soft_weights_of_a_three_member_group_by_hand():
    """Scores 0.9 / 0.5 / 0.1, one label of count 1: the range is 0.8, the members lie d = 0,
    0.5 and 1 of it below the best, so at temperature 0.5 the weights are 1, e^-1 and e^-2."""
    scores, ptr = np.array([0.9, 0.5, 0.1]), np.array([0, 3])
    got = soft_weights(scores, ptr, np.array([1]), 0.5)
    np.testing.assert_allclose(got, [1.0, math.exp(-1.0), math.exp(-2.0)])
    # count 2: the two best get 1, the third lies (0.5 - 0.1) / 0.8 = 0.5 below the 2nd best
    got = soft_weights(scores, ptr, np.array([2]), 0.25)
    np.testing.assert_allclose(got, [1.0, 1.0, math.exp(-2.0)])


def test_soft_weights_ends_are_hard_top_c_and_the_baseline():
    """Temperature near 0: exactly Algorithm 2's top-c (weight 1 for the top c, none for the rest);
    large: every member weight 1 (the Baseline)."""
    scores = np.array([0.2, 0.7, 0.7, -0.3, 0.4, 0.1, 0.3])  # pair 0: 4 members, pair 1: 3
    ptr, take = np.array([0, 4, 7]), np.array([1, 2])
    sharp = soft_weights(scores, ptr, take, 1e-4)
    # pair 0: a tie at 0.7 goes to the first member (smallest sample_id) for the argmax; the tied
    # member lies 0 below it and gets 1 too; pair 1: top-2 of (0.4, 0.1, 0.3)
    np.testing.assert_array_equal(sharp, [0, 1, 1, 0, 1, 0, 1])
    flat = soft_weights(scores, ptr, take, 1e6)
    np.testing.assert_allclose(flat, np.ones(7), atol=1e-5)


def test_soft_weights_edge_cases():
    """A single member, a group whose members score alike (no range: all 1), a count above the
    group size, and the floor below which a weight is 0."""
    scores = np.array([0.5, 0.3, 0.3, 1.0, 0.0, 0.9, 0.0])
    ptr, take = np.array([0, 1, 3, 5, 7]), np.array([1, 1, 3, 1])
    got = soft_weights(scores, ptr, take, 0.1)
    assert got[0] == 1.0 and list(got[1:3]) == [1.0, 1.0] and list(got[3:5]) == [1.0, 1.0]
    assert got[5] == 1.0 and got[6] == 0.0  # exp(-1 / 0.1) = 4.5e-5 < MIN_WEIGHT
    assert math.exp(-1 / 0.1) < MIN_WEIGHT
    assert soft_weights(np.zeros(0), np.array([0]), np.zeros(0, int), 1.0).shape == (0,)


def test_soft_keep_prunes_to_the_heaviest_members_by_hand():
    """Scores 3 / 2 / 1 / 0 (range 3) at temperature 1: weights 1, e^-1/3, e^-2/3, e^-1. With
    soft_keep 2 and c = 1 the two heaviest keep theirs; c = 2 keeps ceil(1.5 x 2) = 3 with
    soft_keep 1.5 (and c = 1 ceil(1.5) = 2); 0 keeps all; a group of 2 is not cut by a cap of 2."""
    scores, ptr = np.array([3.0, 2.0, 1.0, 0.0, 0.4, 0.9]), np.array([0, 4, 6])
    w = [1.0, math.exp(-1 / 3), math.exp(-2 / 3), math.exp(-1.0)]
    np.testing.assert_allclose(
        soft_weights(scores, ptr, np.array([1, 1]), 1.0, 2.0),
        [w[0], w[1], 0, 0, math.exp(-1.0), 1.0],
    )
    np.testing.assert_allclose(
        soft_weights(scores, ptr, np.array([2, 1]), 1.0, 1.5),
        [1.0, 1.0, math.exp(-1 / 3), 0, math.exp(-1.0), 1],  # 3rd: 1 of the range 3 below
    )
    np.testing.assert_allclose(
        soft_weights(scores, ptr, np.array([1, 1]), 1.0, 0.0), [*w, math.exp(-1.0), 1.0]
    )
    # keep 1: the top-c members alone, as hard
    np.testing.assert_allclose(
        soft_weights(scores, ptr, np.array([1, 1]), 1.0, 1.0), [1, 0, 0, 0, 0, 1]
    )
    with pytest.raises(SettingsError, match="assign.soft_keep must be 0"):
        AssignSettings(soft_keep=0.5)


def test_weighting_settings_are_checked():
    assert AssignSettings().weighting == "auto"
    with pytest.raises(SettingsError, match="assign.weighting"):
        AssignSettings(weighting="fuzzy")
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(SettingsError, match="assign.temperature"):
            AssignSettings(weighting="soft", temperature=bad)


# --- the weighted solver and the expected-loss problem --------------------------------------------


def _problem(seed=3, n=60, d=20):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr", dtype=np.float64)
    y = rng.random(n) < 0.4
    w = rng.uniform(0.2, 2.0, n)
    return X, y, w


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_weighted_solver_equals_the_public_estimators(loss, monkeypatch):
    """train_binary(sample_weight=w) on each of its paths (direct, public, direct refused by the
    fence) gives scikit-learn's public LinearSVC / LogisticRegression(solver='liblinear') fitted
    with sample_weight=w."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    from eagle_spark.classifiers import linear

    X, y, w = _problem()
    if loss == "squared_hinge":
        ref = LinearSVC(
            C=0.7, loss="squared_hinge", dual=True, tol=0.1, max_iter=100, random_state=4
        )
    else:
        ref = LogisticRegression(C=0.7, solver="liblinear", tol=0.1, max_iter=100, random_state=4)
    ref.fit(X, y, sample_weight=w)
    want = ref.coef_.ravel()
    unweighted = train_binary(X, y, loss=loss, C=0.7, threshold=0.0, seed=4)
    paths = [
        train_binary(X, y, loss=loss, C=0.7, threshold=0.0, seed=4, sample_weight=w),
        train_binary(X, y, loss=loss, C=0.7, threshold=0.0, seed=4, sample_weight=w, direct=False),
    ]
    monkeypatch.setattr(linear, "direct_solver_ok", lambda: False)
    paths.append(train_binary(X, y, loss=loss, C=0.7, threshold=0.0, seed=4, sample_weight=w))
    for w_idx, w_val, bias in paths:
        dense = np.zeros(X.shape[1])
        dense[w_idx] = w_val
        np.testing.assert_allclose(dense, want, rtol=1e-5, atol=1e-6)
        assert bias == pytest.approx(ref.intercept_[0], rel=1e-5)
    dense = np.zeros(X.shape[1])
    dense[unweighted[0]] = unweighted[1]
    assert not np.allclose(dense, want, atol=1e-3)  # the weights do change the model


def test_weighted_solver_rejects_bad_weights():
    X, y, w = _problem()
    for bad in (
        w[:-1],
        np.where(np.arange(len(w)) == 3, -1.0, w),
        np.where(np.arange(len(w)) == 3, np.nan, w),
    ):
        with pytest.raises(ValueError, match="sample_weight"):
            train_binary(X, y, sample_weight=bad)


def test_expected_loss_problem_by_hand():
    """Positives of weight 1 and every negative stay single rows of weight 1; a positive of
    weight 0.25 is a positive of weight 0.25 plus its row again as a negative of weight 0.75."""
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]]))
    y = np.array([True, True, False])
    X2, y2, sw = expected_loss_problem(X, y, np.array([1.0, 0.25, 0.0]))
    np.testing.assert_array_equal(X2.toarray(), [[1, 0], [0, 2], [3, 3], [0, 2]])
    np.testing.assert_array_equal(y2, [True, True, False, False])
    np.testing.assert_allclose(sw, [1.0, 0.25, 1.0, 0.75])
    same = expected_loss_problem(X, y, np.array([1.0, 1.0, 0.3]))  # a negative's weight is not read
    assert same[0] is X and same[1] is y and same[2] is None
    assert expected_loss_problem(X, y, None)[2] is None
    soft, y3, sw3 = expected_loss_rows(y, np.array([1.0, 0.25, 0.0]))  # the rows to append
    assert soft.tolist() == [1] and y3.tolist() == y2.tolist() and sw3.tolist() == sw.tolist()
    assert expected_loss_rows(y, None)[0].tolist() == []


# --- on Spark, against twins ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def soft(spark, tmp_path_factory):
    """The first 600 delicious training samples in random groups of 4, GRLR (T=2), and soft
    assignments at temperature 0.3, plus the hard and the Baseline assignments."""
    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.assignment.assign import assign
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.io.ingest import ingest
    from eagle_spark.settings import AggregateSettings, EmbedSettings, IngestSettings
    from tests.conftest import delicious_slice

    root = tmp_path_factory.mktemp("weighted")
    paths = {
        n: str(root / n)
        for n in ("train", "agg", "emb", "soft", "hard", "sharp", "flat", "base", "budget", "kept")
    }
    ingest(spark, delicious_slice(root, "train", 600), paths["train"], IngestSettings())
    aggregate(spark, paths["train"], paths["agg"], AggregateSettings(group_size=4))
    embed(spark, paths["agg"], paths["emb"], EmbedSettings(iterations=2, tasks=2))
    runs = {
        "soft": AssignSettings(weighting="soft", temperature=0.3, tasks=2, soft_keep=0.0),
        "hard": AssignSettings(tasks=2, weighting="hard"),
        "sharp": AssignSettings(weighting="soft", temperature=1e-4, tasks=2, soft_keep=0.0),
        "flat": AssignSettings(weighting="soft", temperature=1e6, tasks=2, soft_keep=0.0),
        "base": AssignSettings(method="baseline"),
        "budget": AssignSettings(
            weighting="soft", temperature=0.3, tasks=2, soft_keep=0.0, soft_budget=1.5
        ),
        "kept": AssignSettings(weighting="soft", tasks=2, soft_keep=2.0),
    }
    manifests = {
        name: assign(spark, paths["agg"], paths[name], p, embeddings=paths["emb"])
        for name, p in runs.items()
    }
    return paths, manifests


def _twin_scores(spark, paths):
    """[(group, label, count, the group's members by sample_id, their scores)] for every row of
    Y2, from the stored embeddings, X and Y1 with plain Python loops: scores <e_k, x_i / |x_i|>
    rounded to float32 as the embeddings are stored."""
    from eagle_spark.io.tables import read_table
    from tests.conftest import dataset_matrices

    ids, X, _, manifest = dataset_matrices(spark, paths["agg"])
    X = X.toarray().astype(np.float64)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-300)
    row = {int(s): i for i, s in enumerate(ids)}
    emb = {}
    for r in read_table(spark, paths["emb"], "label_emb").collect():
        e = np.zeros(X.shape[1])
        e[list(r.emb_idx)] = r.emb_val
        emb[r.label_id] = e
    members: dict = {}
    for r in read_table(spark, paths["agg"], "Y1").collect():
        members.setdefault(r.group_id, []).append(r.sample_id)
    out = []
    for r in read_table(spark, paths["agg"], "Y2").collect():
        group = sorted(members[r.group_id])
        s = [float(np.float32(X[row[m]] @ emb[r.label_id])) for m in group]
        out.append((r.group_id, r.label_id, r["count"], group, s))
    return out


def _twin_weights(spark, paths, temperature):
    """{(group, label, sample): weight} of :func:`_twin_scores`: the top-count members (ties to
    the smallest sample_id) get 1, the others exp(-((s_c - s_i) / (s_max - s_min)) / T), dropped
    below 1e-3; score differences below 1e-6 of the largest |score| are ties."""
    out = {}
    for g, k, count, group, s in _twin_scores(spark, paths):
        order = sorted(range(len(group)), key=lambda i: (-s[i], group[i]))
        s_c = s[order[min(count, len(group)) - 1]]
        spread, tol = max(s) - min(s), 1e-6 * max(abs(v) for v in s)
        for i, m in enumerate(group):
            if i in order[:count]:
                w = 1.0
            else:
                gap = s_c - s[i] if s_c - s[i] > tol else 0.0
                d = gap / spread if spread > tol else 0.0
                w = math.exp(-d / temperature)
            if w >= 1e-3:
                out[(g, k, m)] = w
    return out


def test_soft_assign_equals_the_twin(spark, soft):
    from eagle_spark.io.tables import read_table

    paths, manifests = soft
    got = {
        (r.group_id, r.label_id, r.sample_id): r.weight
        for r in read_table(spark, paths["soft"], "assignments").collect()
    }
    want = _twin_weights(spark, paths, 0.3)
    assert set(got) == set(want)
    np.testing.assert_allclose(
        [got[k] for k in sorted(want)], [want[k] for k in sorted(want)], rtol=2e-3, atol=2e-3
    )
    assert 0 < sum(w < 1 for w in got.values()) < len(got)
    # Y_filter carries the weights, label by label, in label order
    y = {
        r.sample_id: dict(zip(r.label_ids, r.label_weights))
        for r in read_table(spark, paths["soft"], "Y").collect()
    }
    for (_, label, sample), w in list(want.items())[:200]:
        assert y[sample][label] == pytest.approx(w, rel=2e-3, abs=2e-3)
    # the quality report weighs each pair: precision = weight of the true pairs / all weight
    q = manifests["soft"]["quality"]
    assert q["precision"] == pytest.approx(q["correct_weight"] / q["assigned_weight"])
    assert q["assigned_pairs"] == len(got)


def test_default_soft_keep_keeps_each_labels_heaviest_members_of_the_twin(spark, soft):
    """soft_keep 2 on delicious 600 in groups of 4: for each (group, label) pair the
    twin's ceil(2 c) heaviest members (c its count) keep their weights, the others are dropped
    (of members tied in weight at the cut, either may be kept)."""
    from eagle_spark.io.tables import read_table

    paths, _ = soft
    want = _twin_weights(spark, paths, 0.3)
    count = {
        (r.group_id, r.label_id): r["count"]
        for r in read_table(spark, paths["agg"], "Y2").collect()
    }
    by_pair: dict = {}
    for (g, k, m), w in want.items():
        by_pair.setdefault((g, k), []).append((-w, m))
    got = {
        (r.group_id, r.label_id, r.sample_id): r.weight
        for r in read_table(spark, paths["kept"], "assignments").collect()
    }
    assert len(got) < len(want)  # the cap binds on groups of 4
    assert set(got) <= set(want)
    got_pair: dict = {}
    for (g, k, _), w in got.items():
        got_pair.setdefault((g, k), []).append(w)
    assert got_pair.keys() == by_pair.keys()
    for pair, members in by_pair.items():  # members of equal weight may go either way
        top = sorted(-w for w, _ in members)[::-1][: math.ceil(2 * count[pair])]
        np.testing.assert_allclose(sorted(got_pair[pair])[::-1], top, rtol=2e-3, atol=2e-3)


def test_posterior_assign_equals_the_enumeration_twin(spark, soft, tmp_path, monkeypatch):
    """``assign.posterior`` on delicious 600 in groups of 4: the first round's weights are, pair by
    pair, the probability of each member under 'count members hold the label' with odds
    exp(-d / 0.3) (d the score's distance below the best over the pair's range), listed over
    every subset of the members in plain Python; a refinement round trains its scorer with the
    logistic loss and its weights still sum to min(count, size) per pair."""
    import itertools

    from eagle_spark.assignment import refine
    from eagle_spark.assignment.assign import assign
    from eagle_spark.io.tables import read_table

    paths, _ = soft
    want = {}
    for g, k, count, group, s in _twin_scores(spark, paths):
        spread = max(s) - min(s)
        d = [(max(s) - v) / spread if spread > 1e-6 * max(map(abs, s)) else 0.0 for v in s]
        c = min(count, len(group))
        total, q = 0.0, [0.0] * len(group)
        for subset in itertools.combinations(range(len(group)), c):
            p = math.exp(sum(-d[i] / 0.3 for i in subset))
            total += p
            for i in subset:
                q[i] += p
        for i, m in enumerate(group):
            if q[i] / total >= 1e-3:
                want[(g, k, m)] = q[i] / total
    params = AssignSettings(weighting="soft", posterior=True, temperature=0.3, tasks=2, soft_keep=0)
    assign(spark, paths["agg"], str(tmp_path / "post"), params, embeddings=paths["emb"])
    got = {
        (r.group_id, r.label_id, r.sample_id): r.weight
        for r in read_table(spark, str(tmp_path / "post"), "assignments").collect()
    }
    assert set(got) == set(want)
    np.testing.assert_allclose(
        [got[k] for k in sorted(want)], [want[k] for k in sorted(want)], rtol=2e-3, atol=2e-3
    )

    losses = []
    plain = refine.classifier_scorer

    def recording(*args, **kwargs):
        losses.append(kwargs.get("loss"))
        return plain(*args, **kwargs)

    monkeypatch.setattr(refine, "classifier_scorer", recording)
    refined = dataclasses.replace(params, refine_rounds=1)
    assign(spark, paths["agg"], str(tmp_path / "post_r1"), refined, embeddings=paths["emb"])
    assert losses == ["logistic"]
    count = {(g, k): min(c, len(group)) for g, k, c, group, _ in _twin_scores(spark, paths)}
    sums: dict = {}
    for r in read_table(spark, str(tmp_path / "post_r1"), "assignments").collect():
        sums[(r.group_id, r.label_id)] = sums.get((r.group_id, r.label_id), 0.0) + r.weight
    assert sums.keys() == count.keys()
    for pair, c in count.items():  # the floor drops at most 3 members' weights below 1e-3
        assert c - 3e-3 - 1e-4 * c <= sums[pair] <= c * (1 + 1e-4), pair


def _hard_positives_twin(spark, paths):
    """Sum over Y2's pairs of min(count, group size), with plain Python."""
    from eagle_spark.io.tables import read_table

    size: dict = {}
    for r in read_table(spark, paths["agg"], "Y1").collect():
        size[r.group_id] = size.get(r.group_id, 0) + 1
    return sum(
        min(r["count"], size[r.group_id]) for r in read_table(spark, paths["agg"], "Y2").collect()
    )


def test_within_budget_by_hand(spark):
    """Weights 1, 1, 0.9, 0.8, 0.5, 0.2, 0.1 with 2 hard positives: budget 2 keeps the two of
    weight 1 and the 4 - 2 = 2 heaviest others; budget 1 keeps only the weight-1 pairs; budget 5
    (10 >= 7 pairs) drops nothing; without weights, or below 1, it refuses."""
    from eagle_spark.assignment.budget import within_budget

    rows = [(0, 1, i, 0.0, w) for i, w in enumerate([1.0, 1.0, 0.9, 0.8, 0.5, 0.2, 0.1])]
    df = spark.createDataFrame(
        rows, "group_id long, label_id int, sample_id long, score float, weight float"
    )

    def kept(budget):
        out, record = within_budget(df, budget, 2)
        return sorted(r.sample_id for r in out.collect()), record

    got, record = kept(2.0)
    assert got == [0, 1, 2, 3]
    assert record["weight_one"] == 2 and record["light"] == 5 and record["hard_positives"] == 2
    assert record["threshold"] == pytest.approx(0.5)
    assert kept(1.0)[0] == [0, 1] and kept(1.0)[1]["threshold"] == 1.0
    assert kept(5.0)[0] == list(range(7)) and kept(5.0)[1]["threshold"] == 0.0
    assert kept(2.5)[0] == [0, 1, 2, 3, 4]  # floor(5) - 2 = 3 light pairs
    with pytest.raises(ValueError, match="budget must be >= 1"):
        within_budget(df, 0.5, 2)
    with pytest.raises(ValueError, match="no weight column"):
        within_budget(df.drop("weight"), 2.0, 2)


def test_soft_budget_keeps_the_heaviest_pairs_of_the_twin(spark, soft):
    """soft_budget 1.5 on delicious 600 in groups of 4: the assign stage keeps the twin's weight-1
    pairs and its floor(1.5 x hard positives) - (weight-1 pairs) heaviest others (a pair whose
    float32 weight ties within 1e-6 with the last one kept may go either way), at most 1.5 x the
    hard positives, and the manifest records the budget."""
    from eagle_spark.io.tables import read_table

    paths, manifests = soft
    want = _twin_weights(spark, paths, 0.3)
    n_hard = _hard_positives_twin(spark, paths)
    ones = {k for k, w in want.items() if w >= 1.0}
    light = sorted((w, k) for k, w in want.items() if w < 1.0)[::-1]
    k = math.floor(1.5 * n_hard) - len(ones)
    assert 0 < k < len(light)  # the budget binds on this data
    cut = light[k - 1][0]
    got = {
        (r.group_id, r.label_id, r.sample_id)
        for r in read_table(spark, paths["budget"], "assignments").collect()
    }
    assert len(got) <= math.floor(1.5 * n_hard)
    assert ones <= got
    assert {key for w, key in light if w > cut + 1e-6} <= got
    assert not {key for w, key in light if w < cut - 1e-6} & got
    budget = manifests["budget"]["budget"]
    assert budget["hard_positives"] == n_hard and budget["budget"] == 1.5
    assert budget["weight_one"] == len(ones) and budget["light"] == len(light)
    assert manifests["soft"]["budget"] is None
    with pytest.raises(SettingsError, match="assign.soft_budget"):
        AssignSettings(soft_budget=0.5)


def test_soft_assign_ends_are_hard_and_the_baseline(spark, soft):
    from eagle_spark.io.tables import read_table

    paths, manifests = soft

    def pairs(name):
        return {
            (r.sample_id, r.label_id)
            for r in read_table(spark, paths[name], "assignments").collect()
        }

    # near 0: the hard top-c, and beside it only members that tie with the c-th best (a tie goes
    # to the smallest sample_id under hard, to every tied member under soft)
    assert pairs("hard") <= pairs("sharp")
    assert pairs("sharp") == {(m, k) for (_, k, m) in _twin_weights(spark, paths, 1e-4)}
    assert len(pairs("sharp") - pairs("hard")) < 0.05 * len(pairs("hard"))
    assert pairs("flat") == pairs("base")
    flat = [r.weight for r in read_table(spark, paths["flat"], "assignments").collect()]
    assert min(flat) > 0.999
    assert (
        manifests["hard"]["quality"]["precision"]
        > manifests["soft"]["quality"]["precision"]
        > manifests["base"]["quality"]["precision"]
    )
    assert "label_weights" not in read_table(spark, paths["hard"], "Y").columns


def test_weighted_ova_equals_the_twin(spark, soft, tmp_path):
    """One-vs-all on soft assignments: each label's classifier is scikit-learn's LinearSVC fitted
    on the samples (weight 1, or a soft positive's weight) followed by a negative copy of every
    soft positive (weight 1 - w), written here from Y_filter's lists."""
    from sklearn.svm import LinearSVC

    from eagle_spark.classifiers.ova import train_ova
    from eagle_spark.io.tables import read_table
    from eagle_spark.settings import OVASettings
    from eagle_spark.sparse import l2_normalize_rows
    from tests.conftest import dataset_matrices
    from tests.unit.test_ova import weights

    paths, _ = soft
    model = str(tmp_path / "ova")
    meta = train_ova(spark, paths["soft"], model, OVASettings(tasks=2))
    assert meta["label_weights"] is True
    ids, X, _, _ = dataset_matrices(spark, paths["soft"])
    Xn = l2_normalize_rows(X).astype(np.float64)
    lw = {
        r.sample_id: dict(zip(r.label_ids, r.label_weights))
        for r in read_table(spark, paths["soft"], "Y").collect()
    }
    got = weights(spark, model)
    checked = 0
    for label in range(983):
        w_pos = np.array([lw[s].get(label, 0.0) for s in ids])
        soft_rows = [i for i in range(len(ids)) if 0 < w_pos[i] < 1]
        if not soft_rows:
            continue
        y = np.r_[w_pos > 0, np.zeros(len(soft_rows), bool)]
        sw = np.r_[np.where(w_pos > 0, w_pos, 1.0), 1 - w_pos[soft_rows]]
        Xl = sp.vstack([Xn, Xn[soft_rows]]).tocsr()
        svc = LinearSVC(
            C=meta["params"]["C"],
            loss="squared_hinge",
            dual=True,
            tol=meta["params"]["tol"],
            max_iter=100,
            random_state=meta["params"]["seed"],
        ).fit(Xl, y, sample_weight=sw)
        w = svc.coef_.ravel()
        keep = np.flatnonzero(np.abs(w) >= meta["params"]["threshold"])
        assert got[label][0] == keep.tolist()
        np.testing.assert_allclose(got[label][1], w[keep], rtol=1e-4)
        assert got[label][2] == pytest.approx(svc.intercept_[0], rel=1e-4, abs=1e-6)
        checked += 1
        if checked == 5:
            break
    assert checked == 5


@pytest.mark.parametrize("name", ["hard", "soft"])
def test_ova_within_groups_equals_the_twin(spark, soft, tmp_path, name):
    """One-vs-all with drawn negatives that keeps the labels' group members (the refinement's
    scorer on large data): label k's classifier is scikit-learn's LinearSVC fitted, in sample_id
    order, on k's positives (weighted as in the expected loss), the samples drawn by the seeded
    draw (test_ova.drawn_twin), and every member of the groups holding k (found here
    from Y1 and Y2 with plain loops); the joined path gives the same model."""
    from sklearn.svm import LinearSVC

    from eagle_spark.classifiers.ova import train_ova
    from eagle_spark.io.tables import read_table
    from eagle_spark.settings import OVASettings
    from eagle_spark.sparse import l2_normalize_rows
    from tests.conftest import dataset_matrices
    from tests.unit.test_ova import drawn_twin, weights

    paths, _ = soft
    params = OVASettings(tasks=2, threshold=0.0, negative_fraction=0.1)
    got = {}
    for access in ("cached", "joined"):
        model = str(tmp_path / access)
        meta = train_ova(
            spark,
            paths[name],
            model,
            dataclasses.replace(params, x_access=access),
            within_groups=paths["agg"],
        )
        assert meta["within_groups"] == paths["agg"]
        got[access] = weights(spark, model)
    assert got["cached"] == got["joined"]
    ids, X, _, _ = dataset_matrices(spark, paths[name])
    Xn = l2_normalize_rows(X).astype(np.float64)
    lw = {
        r.sample_id: dict(
            zip(r.label_ids, r.label_weights if name == "soft" else [1.0] * len(r.label_ids))
        )
        for r in read_table(spark, paths[name], "Y").collect()
    }
    members: dict = {}
    for r in read_table(spark, paths["agg"], "Y1").collect():
        members.setdefault(r.group_id, set()).add(r.sample_id)
    bag: dict = {}
    for r in read_table(spark, paths["agg"], "Y2").collect():
        bag.setdefault(r.label_id, set()).update(members[r.group_id])
    checked = 0
    for label in sorted(bag):
        w_all = np.array([lw[int(s)].get(label, 0.0) for s in ids])
        drawn = np.zeros(len(ids), dtype=bool)
        drawn[drawn_twin(params.seed, label, len(ids), params.negative_fraction)] = True
        in_bag = np.array([int(s) in bag[label] for s in ids])
        rows = np.flatnonzero((w_all > 0) | drawn | in_bag)
        bag_negatives = in_bag & (w_all == 0) & ~drawn
        w_pos = w_all[rows]
        soft_rows = [j for j in range(len(rows)) if 0 < w_pos[j] < 1]
        if not (bag_negatives.any() if name == "hard" else soft_rows):
            continue  # hard: labels whose group members add negatives; soft: labels with soft positives
        Xa = Xn[rows]
        y = np.r_[w_pos > 0, np.zeros(len(soft_rows), bool)]
        sw = np.r_[np.where(w_pos > 0, w_pos, 1.0), 1 - w_pos[soft_rows]]
        svc = LinearSVC(
            C=params.C,
            loss="squared_hinge",
            dual=True,
            tol=params.tol,
            max_iter=params.max_iter,
            random_state=params.seed,
        ).fit(sp.vstack([Xa, Xa[soft_rows]]).tocsr(), y, sample_weight=sw if soft_rows else None)
        w = svc.coef_.ravel()
        keep = np.flatnonzero(w)
        assert got["cached"][label][0] == keep.tolist()
        np.testing.assert_allclose(got["cached"][label][1], w[keep], rtol=1e-4, atol=1e-6)
        assert got["cached"][label][2] == pytest.approx(svc.intercept_[0], rel=1e-4, abs=1e-6)
        checked += 1
        if checked == 5:
            break
    assert checked == 5
    if name == "hard":  # the same draw without the groups loses the group members it missed
        drawn_only = str(tmp_path / "drawn")
        train_ova(spark, paths[name], drawn_only, params)
        assert weights(spark, drawn_only) != got["cached"]


def test_weighted_tree_trains_on_the_expected_loss(spark, soft, tmp_path):
    """The tree on soft assignments: its rankers are the twin's weighted LinearSVCs; the cached and
    the joined training paths give the same model; weighted and hard models differ."""
    from sklearn.svm import LinearSVC

    from eagle_spark.classifiers.tree import train_tree
    from eagle_spark.io.tables import read_table
    from eagle_spark.settings import TreeSettings
    from eagle_spark.sparse import l2_normalize_rows
    from tests.conftest import dataset_matrices

    paths, _ = soft
    params = TreeSettings(tasks=2, n_trees=1, max_leaf=8)

    def model_weights(path):
        return {
            r.label_id: (list(r.w_idx), list(np.round(r.w_val, 5)), round(r.bias, 5))
            for r in spark.read.parquet(f"{path}/data/weights_0").collect()
        }

    trained = {}
    for name, p in (
        ("soft", params),
        ("soft_joined", dataclasses.replace(params, x_access="joined")),
        ("hard", params),
    ):
        path = str(tmp_path / name)
        train_tree(spark, paths[name.split("_")[0]], path, p)
        trained[name] = model_weights(path)
    assert trained["soft"] == trained["soft_joined"]
    assert trained["soft"] != trained["hard"]
    # a ranker: tree 0's label nodes are n_clusters + label; its samples are the leaf's positives
    meta = spark.read.json(str(tmp_path / "soft" / "metadata.json"), multiLine=True).first()
    n_clusters = meta["n_clusters"][0]
    tree = {
        r.node_id: r.parent_id
        for r in spark.read.parquet(str(tmp_path / "soft" / "data/tree_0")).collect()
    }
    ids, X, _, _ = dataset_matrices(spark, paths["soft"])
    Xn = l2_normalize_rows(X).astype(np.float64)
    lw = {
        r.sample_id: dict(zip(r.label_ids, r.label_weights))
        for r in read_table(spark, paths["soft"], "Y").collect()
    }
    checked = 0
    for label in range(983):
        leaf = tree[n_clusters + label]
        siblings = [n - n_clusters for n, p in tree.items() if p == leaf and n >= n_clusters]
        active = [i for i, s in enumerate(ids) if any(k in lw[s] for k in siblings)]
        w_pos = np.array([lw[ids[i]].get(label, 0.0) for i in active])
        soft_rows = [j for j in range(len(active)) if 0 < w_pos[j] < 1]
        if not soft_rows or len(soft_rows) == len(active):
            continue
        Xa = Xn[active]
        y = np.r_[w_pos > 0, np.zeros(len(soft_rows), bool)]
        sw = np.r_[np.where(w_pos > 0, w_pos, 1.0), 1 - w_pos[soft_rows]]
        svc = LinearSVC(
            C=meta["ranker_C"],  # the rankers' cost, chosen on held-out samples
            loss="squared_hinge",
            dual=True,
            tol=params.tol,
            max_iter=params.max_iter,
            random_state=params.seed,
        ).fit(sp.vstack([Xa, Xa[soft_rows]]).tocsr(), y, sample_weight=sw)
        w = svc.coef_.ravel()
        keep = np.flatnonzero(np.abs(w) >= params.threshold)
        g_idx, g_val, g_bias = trained["soft"][n_clusters + label]
        assert g_idx == keep.tolist()
        np.testing.assert_allclose(g_val, w[keep], rtol=1e-4, atol=1e-5)
        assert g_bias == pytest.approx(svc.intercept_[0], rel=1e-4, abs=1e-5)
        checked += 1
        if checked == 4:
            break
    assert checked == 4


def test_bad_label_weights_are_refused_by_name(spark, soft, tmp_path):
    """A Y whose label_weights do not match its label_ids (or lie outside (0, 1]) is refused on the
    driver before any training task, naming the dataset and the sample_id."""
    import shutil

    from pyspark.sql import functions as F

    from eagle_spark.classifiers.ova import train_ova
    from eagle_spark.errors import BadInputError
    from eagle_spark.io.tables import read_table
    from eagle_spark.settings import OVASettings

    paths, _ = soft
    bad = tmp_path / "bad"
    shutil.copytree(paths["soft"], bad)
    y = read_table(spark, paths["soft"], "Y")
    victim = y.where(F.size("label_ids") > 0).agg(F.min("sample_id")).first()[0]
    broken = y.withColumn(
        "label_weights",
        F.when(
            F.col("sample_id") == victim, F.transform("label_weights", lambda w: w * 2 + 1)
        ).otherwise(F.col("label_weights")),
    )
    shutil.rmtree(bad / "Y")
    broken.write.parquet(str(bad / "Y"))
    # Y rewritten by another tool, which wrote the manifest anew: no file list, none claimed
    (bad / "_files.json").unlink()
    manifest = json.loads((bad / "_manifest.json").read_text())
    manifest.pop("file_list")
    (bad / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInputError, match=rf"sample_id {victim}: label_weights must hold"):
        train_ova(spark, str(bad), str(tmp_path / "m"), OVASettings(tasks=2))
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("element", ["float", "double"])
def test_outside_unit_weights_by_hand(spark, element):
    """The weight check without a lambda flags exactly the arrays a per-element check flags: a
    null, a NaN, an infinity or a value outside (0, 1]; an empty or a null array is not flagged
    (the callers check a null array apart)."""
    from pyspark.sql import functions as F

    from eagle_spark.classifiers.base import outside_unit_weights

    nan, inf = float("nan"), float("inf")
    cases = [
        [0.5, 1.0], [], [0.0], [-0.25], [1.5], [nan], [0.5, None], [inf], [-inf, 0.5], None,
        [1.0], [1e-6], [None], [0.3, 0.2, 1.00000001],
    ]  # fmt: skip
    expected = [
        False, False, True, True, True, True, True, True, True, False,
        False, False, True, element == "double",
    ]  # fmt: skip  # 1.00000001 rounds to 1.0 in float32
    frame = spark.createDataFrame(list(enumerate(cases)), f"id int, w array<{element}>").select(
        "id", outside_unit_weights(F.col("w")).alias("bad")
    )
    got = {r.id: r.bad for r in frame.collect()}
    assert [got[i] for i in range(len(cases))] == expected


# --- the Python API -------------------------------------------------------------------------------


def _label_weights(rows, labels="labels", weights="label_weights"):
    return {r.sample_id: dict(zip(r[labels], r[weights])) for r in rows if r[labels]}


def test_api_soft_weights_through_fit_transform_save_load(spark, soft, tmp_path):
    """GRLR(weighting='soft') adds label_weights equal to the assign stage's; the Params survive
    save / load; the classifiers take the weights column from a backed frame and from a plain one
    alike (the same model), and train another model without it."""
    from pyspark.sql import functions as F

    from eagle_spark import GRLR, Dataset, GRLRModel, OneVsRestXMC
    from eagle_spark.io.tables import read_table

    paths, _ = soft
    samples = Dataset.load(spark, paths["agg"]).samples(labelsCol=None)
    model = GRLR(maxIter=2, numTasks=2, weighting="soft", temperature=0.3).fit(samples)
    assigned = model.transform(samples)
    assert {"labels", "label_weights"} <= set(assigned.columns)
    want = _label_weights(  # the default soft_keep 2: the "kept" assign stage's
        read_table(spark, paths["kept"], "Y").collect(), "label_ids"
    )
    got = _label_weights(assigned.select("sample_id", "labels", "label_weights").collect())
    assert got.keys() == want.keys()
    for sample in want:
        assert got[sample].keys() == want[sample].keys()
        np.testing.assert_allclose(
            list(got[sample].values()), list(want[sample].values()), rtol=1e-6
        )
    model.write().overwrite().save(str(tmp_path / "grlr"))
    loaded = GRLRModel.load(str(tmp_path / "grlr"))
    assert (loaded.getOrDefault("weighting"), loaded.getOrDefault("temperature")) == ("soft", 0.3)
    again = _label_weights(
        loaded.transform(samples).select("sample_id", "labels", "label_weights").collect()
    )
    assert again == got
    hard = GRLRModel.load(str(tmp_path / "grlr")).setMethod("eagle")
    hard.set(hard.weighting, "hard")
    assert "label_weights" not in hard.transform(samples).columns

    def ova_weights(m):
        return {
            r.label_id: (list(r.w_idx), r.bias)
            for r in spark.read.parquet(f"{m._require_data()}/data/weights").collect()
        }

    backed = OneVsRestXMC(numTasks=2).fit(assigned)
    plain = assigned.select(
        "sample_id", "features", "labels", "label_weights"
    )  # not backed: written anew
    from eagle_spark.ml.frames import source_of

    assert source_of(plain) is None
    assert ova_weights(OneVsRestXMC(numTasks=2).fit(plain)) == ova_weights(backed)
    unweighted = OneVsRestXMC(numTasks=2).fit(assigned.drop("label_weights"))
    assert ova_weights(unweighted) != ova_weights(backed)
    backed.write().overwrite().save(str(tmp_path / "ova"))
    assert backed.metadata["label_weights"] is True
    with pytest.raises(ValueError, match="no label weights column 'w'"):
        OneVsRestXMC(labelWeightsCol="w").fit(assigned)
    bad = plain.withColumn("label_weights", F.transform("label_weights", lambda w: w + 1))
    with pytest.raises(
        ValueError, match=r"'labels' / 'label_weights' \(labelWeightsCol\) must hold one weight"
    ):
        OneVsRestXMC(numTasks=2).fit(bad)


def test_auto_chooses_the_best_candidate_on_held_out_groups(spark, soft, tmp_path, monkeypatch):
    """weighting=auto: every candidate scored on the same held-out groups (multiset P@k of a
    one-tree proxy), the best mean of P@1/3/5 chosen, and the whole data assigned exactly as the
    chosen candidate assigns it; the scratch data is gone from the output."""
    import os

    from eagle_spark import Dataset, GRLRModel
    from eagle_spark.assignment.selection import selection_score
    from eagle_spark.io.tables import read_table

    paths, _ = soft
    agg = Dataset.load(spark, paths["agg"])
    auto = GRLRModel.fromSettings(
        AssignSettings(
            weighting="auto",
            tasks=2,
            candidates=("baseline", "hard", "soft-1"),
            held_out=0.3,
            held_out_seed=5,
        )
    ).atFolder(paths["emb"])
    out = auto.transformDataset(agg, str(tmp_path / "auto"))
    sel = out.manifest["selection"]
    assert set(sel["candidates"]) == {"baseline", "hard", "soft-1"} and sel["held_out_groups"] > 10
    assert sel["seed"] == 5  # assign.held_out_seed (the Param heldOutSeed) reached the split
    for row in sel["candidates"].values():
        assert row["score"] == pytest.approx(selection_score(row), abs=1e-3)
        assert all(0 <= row[f"multiset P@{k}"] <= 100 for k in (1, 3, 5))
    best = max(sel["candidates"], key=lambda c: sel["candidates"][c]["score"])
    assert sel["chosen"] == best
    assert not os.path.exists(tmp_path / "auto" / "_select")
    from eagle_spark.settings import candidate_changes

    chosen = AssignSettings(tasks=2, **candidate_changes(best))
    assert out.manifest["parameters"]["weighting"] == "auto"  # what was asked
    assert out.manifest["used"]["weighting"] == chosen.weighting  # what it chose
    again = (
        GRLRModel.fromSettings(chosen)
        .atFolder(paths["emb"])
        .transformDataset(agg, str(tmp_path / "direct"))
    )

    def rows(ds):
        return sorted(
            tuple(r)
            for r in read_table(spark, ds.path, "assignments")
            .select("group_id", "label_id", "sample_id")
            .collect()
        )

    assert rows(out) == rows(again)
    # the split and the Baseline scored one after another (as on Spark Connect) instead of beside
    # the other candidates' assignments: the same scores, choice and output
    from eagle_spark.assignment import selection

    selection.forget_kept_splits(spark)
    monkeypatch.setattr(selection, "side_by_side", lambda session: False)
    apart = auto.transformDataset(agg, str(tmp_path / "apart"))
    assert apart.manifest["selection"] == sel
    assert rows(apart) == rows(out)


def test_auto_chooses_grlrs_iterations_with_at_t_candidates(spark, soft, tmp_path):
    """A candidate ``soft-1@t0`` of a model whose embeddings have T = 2 assigns with embeddings
    GRLR fits with T = 0 (EAGLE-0's e0): chosen alone, the output is the twin's soft weights of
    those embeddings (fitted directly with embed); beside ``soft-1`` both are scored on the same
    held-out groups and the record names the refit; ``@t2`` (the model's own T) refits nothing."""
    from eagle_spark import Dataset, GRLRModel
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.io.tables import read_table
    from eagle_spark.settings import EmbedSettings

    paths, _ = soft

    def model(candidates):
        settings = AssignSettings(
            weighting="auto", tasks=2, soft_keep=0.0, candidates=candidates, held_out=0.3
        )
        return GRLRModel.fromSettings(settings).atFolder(paths["emb"])

    agg = Dataset.load(spark, paths["agg"])
    alone = model(("soft-1@t0",)).transformDataset(agg, str(tmp_path / "alone"))
    assert alone.manifest["selection"]["chosen"] == "soft-1@t0"
    assert alone.manifest["selection"]["iterations"] == {"model": 2, "soft-1@t0": 0}
    e0 = str(tmp_path / "e0")  # the same embed settings as the fixture's but T = 0
    embed(spark, paths["agg"], e0, EmbedSettings(iterations=0, tasks=2))
    got = {
        (r.group_id, r.label_id, r.sample_id): r.weight
        for r in read_table(spark, alone.path, "assignments").collect()
    }
    want = _twin_weights(spark, {**paths, "emb": e0}, 1.0)
    assert set(got) == set(want)
    np.testing.assert_allclose(
        [got[k] for k in sorted(want)], [want[k] for k in sorted(want)], rtol=2e-3, atol=2e-3
    )
    assert want != _twin_weights(spark, paths, 1.0)  # T = 0 assigns unlike the model's T = 2
    both = model(("soft-1", "soft-1@t0")).transformDataset(agg, str(tmp_path / "both"))
    sel = both.manifest["selection"]
    assert set(sel["candidates"]) == {"soft-1", "soft-1@t0"}
    assert sel["chosen"] == max(sel["candidates"], key=lambda c: sel["candidates"][c]["score"])
    assert sel["candidates"]["soft-1@t0"] == alone.manifest["selection"]["candidates"]["soft-1@t0"]
    own = model(("soft-1@t2",)).transformDataset(agg, str(tmp_path / "own"))
    assert "iterations" not in own.manifest["selection"]
    assert own.manifest["selection"]["candidates"]["soft-1@t2"] == sel["candidates"]["soft-1"]


def test_auto_trains_the_proxy_on_a_seeded_share_of_the_groups_beyond_the_cap(
    spark, soft, tmp_path, monkeypatch
):
    """With more members than MAX_HELD_MEMBERS / held_out, the held-out share is MAX_HELD_MEMBERS
    / members (here 120 / 600 = 0.2 instead of 0.3). With more group labels (Y2's pairs) in the
    groups not held out than max_proxy_pairs, the proxy trains on the share cap / (the data's
    pairs x (1 - share)) of those groups picked by the split's second hash: the record's
    proxy_groups is the twin's count of the groups whose held-out hash says kept and whose second
    hash falls in that share, its proxy_pairs their labels and its proxy_positives their members x
    labels, summed by the twin; the held-out groups and so the score's data are the uncapped
    choice's; without a cap the proxy trains on every group not held out (MAX_PROXY_PAIRS is far
    above this data's)."""
    import collections

    from pyspark.sql import functions as F

    from eagle_spark import Dataset
    from eagle_spark.assignment import selection
    from eagle_spark.io.tables import read_table

    monkeypatch.setattr(selection, "_SPLITS", collections.OrderedDict())
    monkeypatch.setattr(selection, "MAX_HELD_MEMBERS", 120)
    paths, _ = soft
    agg = Dataset.load(spark, paths["agg"])
    settings = AssignSettings(
        weighting="auto", tasks=2, candidates=("baseline",), held_out=0.3, held_out_seed=5
    )
    y1 = read_table(spark, agg.path, "Y1").select("group_id").toPandas()
    y2 = read_table(spark, agg.path, "Y2").select("group_id").toPandas()
    size = y1["group_id"].value_counts()  # members of each group
    labels = y2["group_id"].value_counts()  # labels of each group
    baseline = {int(g): int(size[g]) * int(labels.get(g, 0)) for g in size.index}
    groups = read_table(spark, agg.path, "Y1").select("group_id").distinct()
    n_groups = groups.count()
    assert len(y1) == 600
    # the members from the manifest's group sizes, or counted where a frame's manifest has none
    manifest = {"n_groups": agg.manifest["n_groups"], "group_size_mean": 4.0}
    assert selection.group_members(spark, agg.path, manifest) == 4.0 * agg.manifest["n_groups"]
    assert selection.group_members(spark, agg.path, {"n_groups": 1}) == 600
    held = F.pmod(F.xxhash64(F.lit(5), F.col("group_id")), F.lit(10_000)) < F.lit(2_000)
    second = F.pmod(F.xxhash64(F.lit(5), F.col("group_id"), F.lit(1)), F.lit(10_000))
    n_held = groups.where(held).count()
    emb = paths["emb"]
    chose = selection.choose_assignment(spark, agg.path, settings, emb, str(tmp_path / "full"))
    # the Baseline's proxy trains on the Baseline of the kept part alone: the whole data is not
    # assigned in the selection, but by the caller when the Baseline wins
    assert chose.assigned is None and not (tmp_path / "full" / "assigned-0").exists()
    full = chose.record
    assert full["held_out"] == pytest.approx(0.2)
    assert (full["held_out_groups"], full["proxy_groups"]) == (n_held, n_groups - n_held)
    kept_all = [int(r[0]) for r in groups.where(~held).collect()]
    assert full["proxy_pairs"] == sum(int(labels.get(g, 0)) for g in kept_all)
    assert full["proxy_positives"] == sum(baseline[g] for g in kept_all)
    cap = 50 * len(y2) // n_groups  # about 50 groups' labels
    share = cap / (len(y2) * 0.8)
    sampled = [
        int(r[0])
        for r in groups.where(~held & (second < F.lit(int(round(share * 10_000))))).collect()
    ]
    assert 0 < len(sampled) < n_groups - n_held
    capped = selection.choose_assignment(
        spark, agg.path, settings, emb, str(tmp_path / "capped"), cap
    ).record
    assert (capped["held_out_groups"], capped["proxy_groups"]) == (n_held, len(sampled))
    assert capped["proxy_pairs"] == sum(int(labels.get(g, 0)) for g in sampled)
    assert capped["proxy_positives"] == sum(baseline[g] for g in sampled)
    assert capped["chosen"] == "baseline"
    with pytest.raises(ValueError, match="max_proxy_pairs must be >= 1"):
        selection.choose_assignment(spark, agg.path, settings, emb, str(tmp_path / "none"), 0)


def test_a_second_choice_on_the_same_data_reuses_the_split_and_the_baseline_score(
    spark, soft, tmp_path, monkeypatch
):
    """The held-out split and the Baseline's score (which no label embedding changes) are made
    once per driver process: a second choice on the same data splits nothing and trains one proxy
    (hard's) instead of two, with the same record and output; a kept Baseline that wins is
    assigned by the caller, as assigning the Baseline directly does."""
    import collections

    from eagle_spark import Dataset, GRLRModel
    from eagle_spark.assignment import selection
    from eagle_spark.io.tables import read_table

    monkeypatch.setattr(selection, "_SPLITS", collections.OrderedDict())
    fits, splits = [], []
    real_fit, real_split = selection.train_tree, selection.split_groups

    def counted_fit(session, dataset, *args, **kwargs):
        fits.append(dataset)
        return real_fit(session, dataset, *args, **kwargs)

    def counted_split(session, dataset, kept, held, *args, **kwargs):
        splits.append((kept, held))
        return real_split(session, dataset, kept, held, *args, **kwargs)

    # the proxies train through the classifiers' stage and the parts are cut by aggregation's
    monkeypatch.setattr(selection, "train_tree", counted_fit)
    monkeypatch.setattr(selection, "split_groups", counted_split)
    paths, _ = soft
    agg = Dataset.load(spark, paths["agg"])
    settings = AssignSettings(
        weighting="auto", tasks=2, candidates=("baseline", "hard"), held_out=0.3, held_out_seed=11
    )
    model = GRLRModel.fromSettings(settings).atFolder(paths["emb"])

    def rows(path):
        return sorted(
            tuple(r)
            for r in read_table(spark, path, "assignments")
            .select("group_id", "label_id", "sample_id")
            .collect()
        )

    first = model.transformDataset(agg, str(tmp_path / "first"))
    assert (len(splits), len(fits)) == (1, 2)  # the kept and held-out parts at once; two proxies
    second = model.transformDataset(agg, str(tmp_path / "second"))
    assert (len(splits), len(fits)) == (1, 3)  # no split, hard's proxy alone
    assert second.manifest["selection"] == first.manifest["selection"]
    assert rows(second.path) == rows(first.path)
    only = dataclasses.replace(settings, candidates=("baseline",))
    kept = GRLRModel.fromSettings(only).atFolder(paths["emb"])
    kept = kept.transformDataset(agg, str(tmp_path / "kept"))
    assert (len(splits), len(fits)) == (1, 3)  # the kept score chose: nothing split or trained
    assert kept.manifest["selection"]["chosen"] == "baseline"
    assert (
        kept.manifest["selection"]["candidates"]["baseline"]
        == first.manifest["selection"]["candidates"]["baseline"]
    )
    assert rows(kept.path) == rows(paths["base"])
    assert kept.manifest["n_assignments"] == read_table(spark, paths["base"], "assignments").count()

    # a kept split whose id map is gone is made again, and its scores with it
    import shutil

    ((_, split),) = selection._SPLITS.items()
    shutil.rmtree(split.ids)
    again = GRLRModel.fromSettings(only).atFolder(paths["emb"])
    again = again.transformDataset(agg, str(tmp_path / "again"))
    assert (len(splits), len(fits)) == (2, 4)
    assert again.manifest["selection"] == kept.manifest["selection"]
    # another seed is another split
    other = GRLRModel.fromSettings(dataclasses.replace(only, held_out_seed=12))
    other.atFolder(paths["emb"]).transformDataset(agg, str(tmp_path / "other"))
    assert (len(splits), len(fits)) == (3, 5)
    # forgetting the kept splits (seeds 11 and 12) deletes them: the next choice splits again
    import os
    import posixpath

    folders = [posixpath.dirname(split.fit) for split in selection._SPLITS.values()]
    assert len(folders) == 2 and all(os.path.isdir(f) for f in folders)
    assert selection.forget_kept_splits(spark) == 2
    assert not selection._SPLITS and not any(os.path.exists(f) for f in folders)
    GRLRModel.fromSettings(only).atFolder(paths["emb"]).transformDataset(agg, str(tmp_path / "f"))
    assert (len(splits), len(fits)) == (4, 6)
    # where executors may not reach the driver's work folder nothing is kept: split every time
    from eagle_spark import classic

    monkeypatch.setattr(classic, "is_local", lambda session: False)
    GRLRModel.fromSettings(only).atFolder(paths["emb"]).transformDataset(agg, str(tmp_path / "c"))
    assert (len(splits), len(fits)) == (5, 7)


def test_candidate_names_are_checked():
    from eagle_spark.settings import candidate_changes

    assert candidate_changes("soft-0.25") == {
        "method": "eagle",
        "weighting": "soft",
        "posterior": False,
        "temperature": 0.25,
        "refine_rounds": 0,
    }
    assert candidate_changes("post-0.3+r2x3") == {
        "method": "eagle",
        "weighting": "soft",
        "posterior": True,
        "temperature": 0.3,
        "refine_rounds": 2,
        "refine_folds": 3,
    }
    assert candidate_changes("hard+r1")["posterior"] is False
    assert candidate_changes("baseline")["method"] == "baseline"
    # @t<N>: the same assign settings, assigned with embeddings of N GRLR iterations
    from eagle_spark.settings import candidate_iterations

    assert candidate_changes("post-0.3+r2x3@t0") == candidate_changes("post-0.3+r2x3")
    assert candidate_iterations("soft-0.3+r1@t0") == 0
    assert candidate_iterations("hard@t15") == 15
    assert candidate_iterations("soft-0.3+r1") is None
    assert candidate_iterations("baseline") is None
    for bad in (
        "soft",
        "soft-0",
        "medium",
        "soft--1",
        "post",
        "post-0",
        "baseline+r1",
        "baseline@t0",
        "soft-0.3@t",
        "soft-0.3@tx",
        "soft-0.3@t-1",
        "@t0",
        "soft-0.3@t0+r1",
    ):
        with pytest.raises(SettingsError, match="assign.candidates"):
            candidate_changes(bad)
        with pytest.raises(SettingsError, match="assign.candidates"):
            candidate_iterations(bad)
    with pytest.raises(SettingsError, match="assign.held_out"):
        AssignSettings(held_out=0.95)


def test_y_matrix_refuses_label_ids_out_of_range():
    """The executor-side Y (and label weights) of a Y table whose ids reach n_labels: a ValueError
    naming the sample and the id, not a scipy matrix with indices out of bounds (which crashed a
    worker in tocsc); in range, the same matrix as a dense twin."""
    import pyarrow as pa

    from eagle_spark.io.parts import y_matrix

    yt = pa.table(
        {
            "sample_id": pa.array([4, 7, 9], pa.int64()),
            "label_ids": pa.array([[0, 2], [], [1]], pa.list_(pa.int32())),
            "label_weights": pa.array([[1.0, 0.5], [], [0.25]], pa.list_(pa.float32())),
        }
    )
    twin = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=bool)
    np.testing.assert_array_equal(y_matrix(yt, 3).toarray(), twin)
    np.testing.assert_allclose(
        y_matrix(yt, 3, "label_weights").toarray(), [[1, 0, 0.5], [0, 0, 0], [0, 0.25, 0]]
    )
    with pytest.raises(ValueError, match=r"ds/Y: sample_id 4 has label id 2, outside \[0, 2\)"):
        y_matrix(yt, 2, what="ds/Y")
    sliced = yt.slice(1)  # a table whose list column starts at an offset
    np.testing.assert_array_equal(y_matrix(sliced, 3).toarray(), twin[1:])
    np.testing.assert_allclose(
        y_matrix(sliced, 3, "label_weights").toarray(), [[0, 0, 0], [0, 0.25, 0]]
    )


def test_auto_on_one_group_falls_back_to_hard(spark, tmp_path):
    """One group: none can be held out, so auto scores nothing, assigns as hard top-c does and
    records why."""
    from pyspark.ml.linalg import SparseVector

    from eagle_spark import GRLR, Dataset

    rows = [(SparseVector(4, [i % 4], [1.0]), 0, [0, 1]) for i in range(3)]
    frame = spark.createDataFrame(rows, ["features", "group_id", "group_labels"])
    ds = Dataset.from_samples(frame, str(tmp_path / "ds"))
    model = GRLR(maxIter=1, numTasks=2, assignTasks=2).fitDataset(ds, str(tmp_path / "emb"))
    out = model.transformDataset(ds, str(tmp_path / "auto"))
    sel = out.manifest["selection"]
    assert sel["chosen"] == "hard" and sel["candidates"] == {} and "1 group" in sel["skipped"]
    # the manifest keeps what was asked and what was used; the tables' text says why
    assert out.manifest["parameters"]["weighting"] == "auto"
    assert out.manifest["used"]["weighting"] == "hard" and out.manifest["n_assignments"] == 2
    from eagle_spark.assignment.assign import choice_of

    assert choice_of(out.manifest) == (
        "auto could not choose (1 group(s): none can be held out to score on): hard"
    )


def test_group_folds_by_hand():
    """12 groups in 5 folds: sizes 3, 3, 2, 2, 2, every group once, the same folds for the same
    seed whatever the ids' order, other folds for another seed; k outside [1, 12] refused."""
    from eagle_spark.assignment.selection import group_folds

    ids = [7, 3, 11, 0, 5, 9, 1, 2, 10, 4, 8, 6, 3]  # 3 twice
    folds = group_folds(ids, 5, 0)
    assert sorted(len(f) for f in folds) == [2, 2, 2, 3, 3]
    assert sorted(g for f in folds for g in f) == list(range(12))
    assert folds == group_folds(sorted(set(ids))[::-1], 5, 0)
    assert folds != group_folds(ids, 5, 1)
    assert group_folds(ids, 1, 0) == [list(range(12))]
    for bad in (0, 13):
        with pytest.raises(ValueError, match="k must be in"):
            group_folds(ids, bad, 0)


def _multiset_twin(members, predictions, counts, k):
    """Plain-Python multiset precision numerators: for j = 1..k, the sum over groups and labels of
    min(members of the group with the label in their top j, the label's count)."""
    sums = []
    for j in range(1, k + 1):
        n = {}
        for sample, group in members.items():
            for label in predictions.get(sample, [])[:j]:
                n[(group, label)] = n.get((group, label), 0) + 1
        sums.append(sum(min(v, counts.get(key, 0)) for key, v in n.items()))
    return sums


def test_auto_on_few_groups_scores_every_group_once_in_folds(spark, tmp_path):
    """12 groups of 2 (held out at 0.2 that is 2.4 groups, fewer than MIN_HELD_GROUPS): every
    group is held out in exactly one of 5 folds, each fold's proxy trained on the other 12 - |fold|
    groups, and each candidate's score equals a plain-Python multiset P@1/3/5 pooled over the
    folds' members from the proxies' own predictions; the choice is the twin's best."""
    from pyspark.ml.linalg import SparseVector

    from eagle_spark import GRLR, Dataset
    from eagle_spark.assignment.selection import choose_assignment, group_folds, selection_score
    from eagle_spark.io.tables import read_parquet, read_table

    rows = [
        (
            SparseVector(6, {i % 6: 1.0, (i * 5 + 1) % 6: 0.5}),
            i // 2,
            sorted({(i - i % 2) % 6, (i - i % 2 + 1) % 6, (i - i % 2 + 2) % 6}),
        )
        for i in range(24)
    ]
    frame = spark.createDataFrame(rows, ["features", "group_id", "group_labels"])
    ds = Dataset.from_samples(frame, str(tmp_path / "ds"))
    GRLR(maxIter=1, numTasks=2, assignTasks=2).fitDataset(ds, str(tmp_path / "emb"))
    scratch = str(tmp_path / "select")
    emb = str(tmp_path / "emb")  # the fitted embeddings; the assign settings GRLR's defaults
    settings = AssignSettings(tasks=2)  # the default candidates
    found = choose_assignment(spark, ds.path, settings, emb, scratch)
    record = found.record
    assert record["folds"] == 5 and record["held_out_groups"] == 12
    groups = [r.group_id for r in read_table(spark, ds.path, "Y1").collect()]
    folds = group_folds(groups, 5, 0)
    assert sorted(record["proxy_groups"]) == sorted(12 - len(f) for f in folds)
    held_groups = []
    for f in range(5):
        ids = read_parquet(spark, f"{scratch}/fold-{f}/fit_ids").collect()
        held = Dataset.load(spark, f"{scratch}/fold-{f}/held")
        held_groups += [f] * held.n_groups
        assert not {r.group_id for r in ids} & set(folds[f])  # the proxy never sees its fold
    assert len(held_groups) == 12
    twin = {}
    for i, name in enumerate(settings.candidates):
        sums, n_members = [0, 0, 0, 0, 0], 0
        for f in range(5):
            held = f"{scratch}/fold-{f}/held"
            members = {r.sample_id: r.group_id for r in read_table(spark, held, "Y1").collect()}
            counts = {
                (r.group_id, r.label_id): r["count"]
                for r in read_table(spark, held, "Y2").collect()
            }
            preds = {
                r.sample_id: list(r.label_ids)
                for r in read_parquet(
                    spark, f"{scratch}/predictions-{i}-fold-{f}/predictions"
                ).collect()
            }
            sums = [a + b for a, b in zip(sums, _multiset_twin(members, preds, counts, 5))]
            n_members += len(members)
        row = {f"multiset P@{k}": 100 * sums[k - 1] / (k * n_members) for k in (1, 3, 5)}
        for key, value in row.items():
            assert record["candidates"][name][key] == pytest.approx(value, abs=0.006)
        twin[name] = selection_score(row)
    best = max(twin, key=lambda c: (round(twin[c], 3), c == "baseline"))
    assert record["chosen"] == best


def test_positive_weights_equal_a_dense_twin():
    """A matcher child's weight per active row: the largest of its labels' weights, read from the
    labels' columns only, against the dense row maximum of W restricted to them."""
    from eagle_spark.classifiers.tree.units import positive_weights

    rng = np.random.default_rng(0)
    W = sp.random(50, 12, density=0.3, random_state=1, format="csc", dtype=np.float32)
    dense = W.toarray()
    for _ in range(20):
        labels = np.sort(rng.choice(12, rng.integers(1, 6), replace=False))
        active = np.sort(rng.choice(50, rng.integers(0, 50), replace=False))
        np.testing.assert_allclose(
            positive_weights(W, active, labels),
            dense[np.ix_(active, labels)].max(axis=1) if len(active) else np.zeros(0),
        )


def test_selection_trains_the_proxy_on_the_whole_assignment_of_the_kept_groups(
    spark, soft, tmp_path
):
    """auto assigns the whole data once per candidate (the Baseline: the kept groups alone, shown
    equal here) and trains the proxy on the kept groups' part of it (fit_part): the part's Y
    equals a plain-Python twin built from the whole assignment and the split's id map, and, for
    an unrefined candidate, the Y of assigning the kept groups alone (Algorithm 2 assigns a group
    from its own members)."""
    from collections import defaultdict

    from eagle_spark import Dataset
    from eagle_spark.assignment.assign import assign
    from eagle_spark.assignment.selection import fit_part
    from eagle_spark.io.tables import read_table

    paths, _ = soft
    agg = Dataset.load(spark, paths["agg"])
    with pytest.raises(ValueError, match="idMap needs by='group'"):
        agg.split_part(str(tmp_path / "x"), 0.3, idMap=str(tmp_path / "m"))
    fit = agg.split_part(
        str(tmp_path / "fit"), 0.3, 7, by="group", labels=False, idMap=str(tmp_path / "ids")
    )
    ids = spark.read.parquet(str(tmp_path / "ids"))
    id_rows = ids.collect()
    assert len(id_rows) == fit.n_samples  # random groups: one group a sample
    assert sorted(r["part_sample_id"] for r in id_rows) == list(range(fit.n_samples))
    kept = {(r["sample_id"], r["group_id"]): r["part_sample_id"] for r in id_rows}

    def y_rows(path):
        frame = read_table(spark, path, "Y")
        weighted = "label_weights" in frame.columns
        return {
            r["sample_id"]: dict(
                zip(r["label_ids"], r["label_weights"] if weighted else [1.0] * len(r["label_ids"]))
            )
            for r in frame.collect()
        }

    for name in ("soft", "hard", "base"):
        part = fit_part(spark, fit.path, ids, paths[name], str(tmp_path / f"part-{name}"))
        got = y_rows(part)
        twin: dict[int, dict[int, float]] = defaultdict(dict)
        for r in read_table(spark, paths[name], "assignments").collect():
            at = kept.get((r["sample_id"], r["group_id"]))
            if at is not None:
                w = r.asDict().get("weight", 1.0)
                twin[at][r["label_id"]] = max(w, twin[at].get(r["label_id"], 0.0))
        assert set(got) == set(range(fit.n_samples))
        fractional = any(w < 1 for labels in got.values() for w in labels.values())
        assert fractional == (name == "soft")
        for sample, labels in got.items():
            assert labels.keys() == twin[sample].keys()
            for label, w in labels.items():
                assert w == pytest.approx(twin[sample][label], rel=1e-6)
        settings = {
            "soft": AssignSettings(weighting="soft", temperature=0.3, tasks=2, soft_keep=0.0),
            "hard": AssignSettings(tasks=2, weighting="hard"),
            "base": AssignSettings(method="baseline"),
        }[name]
        alone = assign(
            spark, fit.path, str(tmp_path / f"alone-{name}"), settings, embeddings=paths["emb"]
        )
        assert alone["n_assignments"] > 0
        expected = y_rows(str(tmp_path / f"alone-{name}"))
        assert expected.keys() == got.keys()
        for sample in got:
            assert got[sample].keys() == expected[sample].keys()
            for label, w in got[sample].items():
                assert w == pytest.approx(expected[sample][label], rel=1e-5)


def test_auto_keeps_the_refined_winner_and_its_rounds_figures(spark, soft, tmp_path):
    """A refined candidate that wins is the output as it was assigned in the selection (not
    assigned again), and its rounds' figures, computed for the winner alone from the rounds it
    left, equal those of assigning it directly."""
    from eagle_spark import Dataset, GRLRModel
    from eagle_spark.io.tables import read_table

    paths, _ = soft
    agg = Dataset.load(spark, paths["agg"])
    auto = GRLRModel.fromSettings(
        AssignSettings(weighting="auto", tasks=2, candidates=("soft-1+r1",), held_out=0.3)
    ).atFolder(paths["emb"])
    out = auto.transformDataset(agg, str(tmp_path / "auto"))
    direct = (
        GRLRModel.fromSettings(
            AssignSettings(weighting="soft", temperature=1.0, refine_rounds=1, tasks=2)
        )
        .atFolder(paths["emb"])
        .transformDataset(agg, str(tmp_path / "direct"))
    )
    assert out.manifest["selection"]["chosen"] == "soft-1+r1"
    got, want = out.manifest["refinement"], direct.manifest["refinement"]
    assert [r["round"] for r in got] == [0, 1] and got[1]["scorer"] == "classifier"
    assert {"n_assignments", "precision", "recall"} <= got[0].keys()
    assert {"changed", "weight_change"} <= got[1].keys()
    assert got == want
    assert out.manifest["quality"] == direct.manifest["quality"]

    def rows(ds):
        return sorted(
            (r[0], r[1], r[2], round(r[3], 5))
            for r in read_table(spark, ds.path, "assignments")
            .select("group_id", "label_id", "sample_id", "weight")
            .collect()
        )

    assert rows(out) == rows(direct)


def test_soft_budget_holds_in_every_refinement_round(spark, soft, tmp_path):
    """With refinement, each round's assignment is pruned to the budget before the next round's
    scorer trains on it: every round's record carries its budget and the written assignment has at
    most 1.5 x the hard positives."""
    from eagle_spark.assignment.assign import assign
    from eagle_spark.io.tables import read_table

    paths, _ = soft
    params = AssignSettings(
        weighting="soft", temperature=0.3, refine_rounds=1, tasks=2, soft_budget=1.5
    )
    manifest = assign(spark, paths["agg"], str(tmp_path / "r1"), params, embeddings=paths["emb"])
    n_hard = _hard_positives_twin(spark, paths)
    rounds = manifest["refinement"]
    assert [r["round"] for r in rounds] == [0, 1]
    for r in rounds:
        assert r["budget"]["hard_positives"] == n_hard
        assert r["n_assignments"] <= math.floor(1.5 * n_hard)
        assert r["budget"]["weight_one"] + r["budget"]["light"] > r["n_assignments"]
    n = read_table(spark, str(tmp_path / "r1"), "assignments").count()
    assert n == manifest["n_assignments"] == rounds[-1]["n_assignments"]
    assert manifest["budget"] is None  # with refinement the rounds say it
