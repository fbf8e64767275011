"""The realistic generator (eagle_spark.twin) and ``synth --like``: statistics kept, hand-worked
statistics, scaling, determinism, and a source without true labels refused."""

import hashlib
import json
import math
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_spark import twin as T
from eagle_spark.cli import main
from eagle_spark.errors import BadInputError
from eagle_spark.io.tables import read_table


def hand_made(n=400, n_features=60, n_labels=12, seed=3):
    """A small labelled dataset: labels 0..11 with a decaying frequency, 1-4 labels a sample,
    3-20 features a sample."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_labels + 1)
    p /= p.sum()
    yr, yc, xr, xc, xv = [], [], [], [], []
    for i in range(n):
        labs = rng.choice(n_labels, size=rng.integers(1, 5), replace=False, p=p)
        yr += [i] * len(labs)
        yc += list(labs)
        feats = rng.choice(n_features, size=rng.integers(3, 21), replace=False)
        xr += [i] * len(feats)
        xc += list(feats)
        xv += list(rng.random(len(feats)) + 0.1)
    X = sp.csr_matrix((xv, (xr, xc)), shape=(n, n_features))
    Y = sp.csr_matrix((np.ones(len(yr)), (yr, yc)), shape=(n, n_labels))
    return X, Y


def test_frequency_curve_and_masses_hand_worked():
    curve = T.frequency_curve(np.array([1, 4, 1, 2]))
    assert curve[0] == (0.0, 0.0) and curve[-1] == (1.0, 1.0)
    assert curve[1] == (0.25, 0.5)  # the most frequent item holds half of the occurrences
    np.testing.assert_allclose(T.curve_masses(curve, 4), [0.5, 0.25, 0.125, 0.125])
    # half the items: rho(r) = r + (4 - 2) (r / 2)^3 = 1.25 at r = 1, so the first holds the
    # share up to rank 1.25: 0.5 + 0.25 x 0.25 (the second item's slope)
    np.testing.assert_allclose(T.curve_masses(curve, 2), [0.5625, 0.4375])
    # twice the items: rho is the inverse of g + (8 - 4) (g / 4)^3, which maps source rank 1 to
    # 1.0625, so the first item holds 0.5 / 1.0625 = 8/17; rank 4 -> 8, the tail split most
    m8 = T.curve_masses(curve, 8)
    np.testing.assert_allclose(m8[0], 8 / 17)
    np.testing.assert_allclose(m8[-3:], [0.125 * 1.0 / 3.3125] * 3)
    assert abs(m8.sum() - 1) < 1e-12 and (np.diff(m8) <= 1e-12).all()


def test_pair_information_hand_worked():
    # every sample has labels 0 and 1: the ordered pairs (0,1), (1,0) have joint 1/2 each and
    # marginals 1/2: I = 2 x 1/2 log((1/2) / (1/4)) = log 2
    Y = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 0]]))
    assert T.pair_information(Y) == pytest.approx(math.log(2))
    # pairs spread evenly over all 3 x 2 ordered pairs: joint 1/6, marginals 1/3, I = log(1.5)
    Y = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]]))
    assert T.pair_information(Y) == pytest.approx(math.log(1.5))
    assert T.pair_information(sp.csr_matrix(np.eye(3))) == 0.0  # no sample has two labels


def test_describe_counts_exact_and_twin_statistics_kept():
    X, Y = hand_made()
    m = T.describe(X, Y, n_test=100, source="hand")
    assert (m.n_train, m.n_test, m.n_features, m.n_labels) == (400, 100, 60, 12)
    per = np.diff(Y.indptr)
    np.testing.assert_allclose(m.labels_pmf, np.bincount(per, minlength=5) / 400)
    assert m.nnz_quantiles[0] == np.diff(X.indptr).min()
    assert m.nnz_quantiles[-1] == np.diff(X.indptr).max()
    m = T.calibrate_draws(m)
    gen = T.TwinGenerator(m, seed=1)
    Xt, Yt = gen.matrices(0, np.arange(4000, dtype=np.int64))
    # labels per sample: the same distribution (within 0.03 per count)
    got = np.bincount(np.diff(Yt.indptr), minlength=len(m.labels_pmf)) / 4000
    np.testing.assert_allclose(got[: len(m.labels_pmf)], m.labels_pmf, atol=0.03)
    # nonzeros per sample: mean within 3%, spread kept (10th / 90th percentiles within 2)
    nnz, src = np.diff(Xt.indptr), np.diff(X.indptr)
    assert abs(nnz.mean() - src.mean()) / src.mean() < 0.03
    for q in (10, 90):
        assert abs(np.percentile(nnz, q) - np.percentile(src, q)) <= 2
    # the label-frequency curve: each label's share within 0.04 of the source's (sorted). The
    # head is flattened a little: a row keeps distinct labels, and with up to 4 of 12 labels the
    # most frequent one is drawn twice often (measured 0.196 against 0.234)
    share = np.sort(np.bincount(Yt.indices, minlength=12))[::-1] / Yt.nnz
    src_share = np.sort(np.bincount(Y.indices, minlength=12))[::-1] / Y.nnz
    np.testing.assert_allclose(share, src_share, atol=0.04)
    # rows are L2-normalised and ids in range
    np.testing.assert_allclose(sp.linalg.norm(Xt, axis=1), 1.0, rtol=1e-5)
    assert Xt.indices.max() < 60 and Yt.indices.max() < 12


def test_cohesion_raises_co_occurrence_and_fit_reaches_the_source():
    X, Y = hand_made()
    m = T.describe(X, Y, 100)
    ids = np.arange(2000, dtype=np.int64)
    infos = []
    for c in (0.0, 0.5, 1.0):
        _, Yt = T.TwinGenerator(T.TwinModel.from_json({**m.to_json(), "cohesion": c})).matrices(
            0, ids
        )
        infos.append(T.pair_information(Yt))
    assert infos[0] < infos[1] < infos[2]
    fitted, record = T.fit(m, Y)
    assert record["pair_information"]["reached"] == pytest.approx(
        record["pair_information"]["target"], rel=0.05
    )
    assert 0 <= fitted.cohesion <= 1


def test_scale_two_doubles_counts_keeps_per_sample_statistics():
    X, Y = hand_made()
    m = T.calibrate_draws(T.describe(X, Y, 100))
    big = T.calibrate_draws(m.scaled(2))  # a larger vocabulary has fewer repeated draws
    assert (big.n_train, big.n_test, big.n_labels, big.n_features) == (800, 200, 24, 120)
    assert big.labels_pmf == m.labels_pmf and big.nnz_quantiles == m.nnz_quantiles
    assert big.label_curve == m.label_curve and big.cohesion == m.cohesion
    a = T.TwinGenerator(m).matrices(0, np.arange(m.n_train, dtype=np.int64))
    b = T.TwinGenerator(big).matrices(0, np.arange(big.n_train, dtype=np.int64))
    for x, y in ((a[0], b[0]), (a[1], b[1])):
        per_a, per_b = x.nnz / x.shape[0], y.nnz / y.shape[0]
        assert abs(per_a - per_b) / per_a < 0.05
    with pytest.raises(BadInputError, match="scale must be > 0"):
        m.scaled(0)


def test_model_json_round_trip_and_checks():
    X, Y = hand_made()
    m = T.describe(X, Y, 100, source="hand")
    assert T.TwinModel.from_json(json.loads(json.dumps(m.to_json()))) == m
    with pytest.raises(BadInputError, match="unknown key"):
        T.TwinModel.from_json({**m.to_json(), "nope": 1})
    with pytest.raises(BadInputError, match="cohesion must be in"):
        T.TwinModel.from_json({**m.to_json(), "cohesion": 1.5})
    with pytest.raises(BadInputError, match="no sample has a label"):
        T.describe(X, sp.csr_matrix(Y.shape), 10, source="empty")


@pytest.fixture(scope="module")
def source(spark, tmp_path_factory):
    """The hand-made dataset as a dataset folder (train) and a test folder beside it."""
    from pyspark.ml.linalg import SparseVector

    from eagle_spark.ml import Dataset

    X, Y = hand_made()
    root = tmp_path_factory.mktemp("twin")
    rows = [
        (
            SparseVector(60, X[i].indices.tolist(), X[i].data.tolist()),
            sorted(Y[i].indices.tolist()),
        )
        for i in range(X.shape[0])
    ]
    frame = spark.createDataFrame(rows, ["features", "labels"])
    Dataset.from_samples(frame, str(root / "pair" / "train"), numFeatures=60, numLabels=12)
    Dataset.from_samples(frame.limit(50), str(root / "pair" / "test"), numFeatures=60, numLabels=12)
    return root


def digests(folder):
    root = pathlib.Path(folder)
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.parquet"))
    }


def test_synth_like_keeps_counts_and_is_deterministic(spark, source, tmp_path, capsys):
    out = tmp_path / "twin"
    assert main(["synth", "--like", str(source / "pair"), "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["train_n_samples"], summary["test_n_samples"]) == (400, 50)
    assert (summary["n_features"], summary["n_labels"]) == (60, 12)
    manifest = json.loads((out / "_manifest.json").read_text())
    model = T.TwinModel.from_json(manifest["parameters"]["model"])
    assert model.n_train == 400 and "oracle" in manifest["fit"]
    again = tmp_path / "again"
    assert (
        main(
            [
                "synth",
                "--like",
                str(source / "pair"),
                "--output",
                str(again),
                "--set",
                "synth.rows_per_task=70",
            ]
        )
        == 0
    )
    capsys.readouterr()

    def rows(d):
        return sorted(
            (r.sample_id, tuple(r.feat_idx), tuple(r.feat_val))
            for r in read_table(spark, f"{d}/train", "X").collect()
        )

    assert rows(out) == rows(again)  # partitioning does not change a row
    # the Spark job writes what the generator makes
    gen = T.TwinGenerator(model, 0)
    lab_off, labels, *_ = gen.rows(1, np.arange(10, 20, dtype=np.int64))
    Yw = {
        r.sample_id: r.label_ids
        for r in read_table(spark, f"{out}/test", "Y")
        .where("sample_id between 10 and 19")
        .collect()
    }
    for k, sid in enumerate(range(10, 20)):
        assert Yw[sid] == labels[lab_off[k] : lab_off[k + 1]].tolist()
    # a rerun with the same seed is byte-identical
    third = tmp_path / "third"
    assert main(["synth", "--like", str(source / "pair"), "--output", str(third)]) == 0
    capsys.readouterr()
    assert digests(out) == digests(third)
    # a twin at scale 2 has twice the samples
    big = tmp_path / "big"
    assert (
        main(["synth", "--like", str(source / "pair"), "--output", str(big), "--scale", "2"]) == 0
    )
    s2 = json.loads(capsys.readouterr().out)
    assert (s2["train_n_samples"], s2["test_n_samples"], s2["n_labels"]) == (800, 100, 24)
    assert abs(s2["train_labels_per_sample"] - summary["train_labels_per_sample"]) < 0.25


def test_synth_like_refuses_a_dataset_without_labels(spark, source, tmp_path, capsys):
    from pyspark.ml.linalg import SparseVector

    from eagle_spark.ml import Dataset

    frame = spark.createDataFrame([(SparseVector(4, [0], [1.0]),)] * 12, ["features"])
    unlabelled = str(tmp_path / "nolabels")
    Dataset.from_samples(frame, unlabelled, numFeatures=4)
    assert main(["synth", "--like", unlabelled, "--output", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "nolabels" in err and "no Y table" in err
    assert not (tmp_path / "t").exists()


def test_label_power_law_hand_worked():
    """Two labels, 3 positives, a large training set: c1 + c2 = 3 with the rarest c2 = 1 gives
    c1 = 2 = 2^a x c2, so a = 1 and no offset. With a head cap the counts sum to the positives,
    the rarest is 1 and the most frequent is in `head` of the samples."""
    a, k0 = T.label_power_law(2, 3.0, 1000)
    assert abs(a - 1.0) < 1e-9 and k0 == 0.0
    assert T.label_power_law(10, 5.0, 100) == (0.0, 0.0)  # fewer positives than labels
    n_labels, positives, n_train = 500, 20_000.0, 4_000
    a, k0 = T.label_power_law(n_labels, positives, n_train, head=0.25)
    w = (np.arange(1, n_labels + 1) + k0) ** -a
    c = positives * w / w.sum()
    assert k0 > 0 and abs(c[-1] - 1) < 1e-3 and abs(c[0] - 0.25 * n_train) < 1.0
    with pytest.raises(BadInputError, match="head in"):
        T.label_power_law(5, 10.0, 10, head=0)


def test_published_model_keeps_the_published_means():
    """A model from published statistics has their counts and means: labels per sample
    1 + Poisson (mean 5.31, no sample without a label), log-normal nonzeros of mean 236 capped at
    a quarter of the vocabulary, the label curve's rarest label at one expected sample."""
    m = T.published_model(15_539, 3_809, 5_000, 3_993, 5.31, 236.0)
    assert (m.n_train, m.n_test, m.n_features, m.n_labels) == (15_539, 3_809, 5_000, 3_993)
    assert m.labels_pmf[0] == 0.0 and abs(m.labels_per_sample - 5.31) < 1e-6
    assert abs(m.nnz_per_sample - 236.0) < 0.3 and max(m.nnz_quantiles) <= 1_250
    masses = T.curve_masses(m.label_curve, m.n_labels)
    positives = 15_539 * 5.31
    assert 0.5 < masses[-1] * positives < 2.0  # the curve interpolates the power law
    assert abs(masses[0] * positives / 15_539 - T.PRIOR_HEAD) < 0.02
    assert m.cohesion == T.PRIOR_COHESION


@pytest.mark.parametrize(("n", "d", "n_labels"), [(300, 50, 20), (300, 50, 400), (100, 500, 20)])
def test_ridge_oracle_equals_a_dense_solve(n, d, n_labels):
    """Each of the proxy's forms (primal or dual; solved against the labels or the test rows)
    gives the P@k of a dense float64 ridge solve W = (A^T A + I)^-1 A^T Y on normalised rows."""
    from sklearn.preprocessing import normalize

    A = sp.random(n, d, 0.1, random_state=1, format="csr")
    B = sp.random(80, d, 0.1, random_state=3, format="csr")
    Y = sp.random(n, n_labels, 0.05, random_state=2, format="csr")
    Yt = sp.random(80, n_labels, 0.05, random_state=4, format="csr")
    Y.data[:] = 1
    Yt.data[:] = 1
    An, Bn = normalize(A), normalize(B)
    S = Bn @ np.linalg.solve((An.T @ An).toarray() + np.eye(d), (An.T @ Y).toarray())
    top = np.argsort(-S, axis=1, kind="stable")[:, :5]
    hits = np.asarray(Yt.tocsr()[np.arange(80)[:, None], top].todense(), dtype=float)
    got = T.ridge_oracle_precision(A, Y, B, Yt)
    assert got[1] == pytest.approx(100 * hits[:, 0].mean())
    assert got[5] == pytest.approx(100 * hits.mean())
