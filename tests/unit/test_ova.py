"""One-vs-all on Spark == single-node twin; model folder round trip; determinism; bad inputs."""

import hashlib
import json
import pathlib
import shutil

import numpy as np
import pytest

from eagle_spark.classifiers.linear import train_binary
from eagle_spark.classifiers.ova import predict_ova, top_k, train_ova
from eagle_spark.cli import main
from eagle_spark.errors import BadInputError
from eagle_spark.io.ingest import ingest
from eagle_spark.io.tables import read_table
from eagle_spark.settings import IngestSettings, OVASettings
from eagle_spark.sparse import l2_normalize_rows
from tests.conftest import TASKS_PER_STAGE, dataset_matrices, delicious_slice


@pytest.fixture(scope="module")
def tiny(spark, tmp_path_factory):
    """The first 1500 delicious training samples and 300 test samples."""
    root = tmp_path_factory.mktemp("ova")
    out = {}
    for split, n in (("train", 1500), ("test", 300)):
        out[split] = str(root / split)
        ingest(spark, delicious_slice(root, split, n), out[split], IngestSettings())
    return out


@pytest.fixture(scope="module")
def model(spark, tiny, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("model") / "ova")
    meta = train_ova(spark, tiny["train"], path, OVASettings(tasks=4, min_task_work=0))
    return path, meta


def drawn_twin(seed: int, label: int, n: int, fraction: float) -> list[int]:
    """The negatives' draw as ``drawn_negatives``' docstring specifies it, row by row: a
    Bernoulli(`fraction`) process over rows 0..n-1 walked by its geometric gaps from
    default_rng([seed, label]), max(16, int(1.25 x n x fraction)) gaps at a time."""
    rng = np.random.default_rng([seed, label])
    chunk = max(16, int(1.25 * n * fraction))
    rows, at = [], -1
    while at < n:
        for gap in rng.geometric(fraction, chunk):
            at += int(gap)
            if at < n:
                rows.append(at)
    return rows


def test_drawn_negatives_follow_the_twin_and_the_fraction():
    """Equal to the twin (including a walk past one chunk), all rows at 1 and none at 0, and
    over 300 labels about n x fraction rows each, spread evenly (each half of the rows gets
    about half)."""
    from eagle_spark.classifiers.ova import drawn_negatives

    # (1, 1, 1000, 0.0128): 16 gaps reach only row 708, so the walk takes a second chunk
    assert np.random.default_rng([1, 1]).geometric(0.0128, 16).sum() < 1000
    for seed, label, n, fraction in ((3, 7, 1000, 0.05), (1, 1, 1000, 0.0128), (5, 2, 30, 0.9)):
        assert drawn_negatives(seed, label, n, fraction).tolist() == drawn_twin(
            seed, label, n, fraction
        )
    assert drawn_negatives(0, 0, 5, 1.0).tolist() == [0, 1, 2, 3, 4]
    assert drawn_negatives(0, 0, 5, 0.0).tolist() == []
    draws = [drawn_negatives(4, k, 10_000, 0.02) for k in range(300)]
    counts = np.array([len(d) for d in draws])
    assert counts.mean() == pytest.approx(200, rel=0.02)  # binomial: sd of the mean ~0.8
    low = sum(int((d < 5000).sum()) for d in draws) / counts.sum()
    assert low == pytest.approx(0.5, abs=0.01)
    assert all((np.diff(d) > 0).all() for d in draws)


def weights(spark, path):
    return {
        r.label_id: (list(r.w_idx), list(r.w_val), r.bias)
        for r in spark.read.parquet(f"{path}/data/weights").collect()
    }


def test_weights_are_written_without_dictionary_pages(model):
    from tests.unit.test_parts import dictionary_columns

    parts = dictionary_columns(f"{model[0]}/data/weights")
    assert len(parts) == 4 and all(cols == [] for cols in parts.values()), parts


def test_the_work_sets_the_tasks_and_no_weight(spark, tiny, model, tmp_path):
    """A label's problem visits every nonzero of X per pass: 983 x nnz(X) of work; with
    min_task_work at 1/2.5 of it the labels need ceil(2.5) = 3 tasks (of 8 allowed), rounded up to
    a multiple of the cores; with more work a task than there is, one per core; the same weights as
    the module's 4 tasks."""
    _, X, _, _ = dataset_matrices(spark, tiny["train"])
    work = 983 * X.nnz
    cores = TASKS_PER_STAGE  # the test session's parallelism
    expected = {work / 2.5: {1: 3, 2: 4}[cores], 1e15: cores}
    for min_task_work, tasks in expected.items():
        out = str(tmp_path / f"m{min_task_work:g}")
        train_ova(spark, tiny["train"], out, OVASettings(tasks=8, min_task_work=min_task_work))
        assert len(list(pathlib.Path(out, "data", "weights").glob("part-*"))) == tasks
        assert weights(spark, out) == weights(spark, model[0])


def test_spark_equals_twin(spark, tiny, model):
    path, meta = model
    _, X, Y, manifest = dataset_matrices(spark, tiny["train"])
    Xn = l2_normalize_rows(X)
    got = weights(spark, path)
    assert sorted(got) == list(range(983))
    from sklearn.svm import LinearSVC

    for label in (0, 1, 5, 77, 500, 982):  # the twin: scikit-learn's public LinearSVC, pruned here
        y = Y[:, label].toarray().ravel() > 0
        if not y.any():
            assert got[label] == ([], [], -1.0)
            continue
        svc = LinearSVC(
            C=meta["params"]["C"],
            loss="squared_hinge",
            dual=True,
            tol=meta["params"]["tol"],
            max_iter=100,
            random_state=meta["params"]["seed"],
        ).fit(Xn.astype(np.float64), y)
        w = svc.coef_.ravel()
        keep = np.flatnonzero(np.abs(w) >= meta["params"]["threshold"])
        assert got[label][0] == keep.tolist()
        np.testing.assert_allclose(got[label][1], w[keep], rtol=1e-5)
        assert got[label][2] == pytest.approx(svc.intercept_[0], rel=1e-5)
    assert meta["n_labels_without_positives"] == int((np.asarray(Y.sum(axis=0)).ravel() == 0).sum())
    # predictions: X W + b, top-5, best first, ties by label id
    _, Xt, _, _ = dataset_matrices(spark, tiny["test"])
    W = np.zeros((500, 983))
    b = np.zeros(983)
    for label, (idx, val, bias) in got.items():
        W[idx, label] = val
        b[label] = bias
    scores = l2_normalize_rows(Xt).toarray() @ W + b
    want_labels, want_scores = top_k(scores.astype(np.float32), 5)
    X_test = read_table(spark, tiny["test"], "X")
    preds = sorted(predict_ova(spark, path, X_test, 500, 5).collect(), key=lambda r: r.sample_id)
    assert [r.label_ids for r in preds] == want_labels.tolist()
    np.testing.assert_allclose([r.scores for r in preds], want_scores, rtol=1e-5, atol=1e-6)


def test_top_k_order():
    labels, scores = top_k(np.array([[0.1, 0.5, 0.5, -1.0]]), 3)
    assert labels.tolist() == [[1, 2, 0]] and scores.tolist() == [[0.5, 0.5, 0.1]]


def _digests(folder):
    return sorted(
        hashlib.sha256(p.read_bytes()).hexdigest() for p in pathlib.Path(folder).rglob("*.parquet")
    )


def test_save_load_predict_and_determinism(spark, tiny, model, tmp_path, capsys):
    path, _ = model
    moved = tmp_path / "elsewhere"
    shutil.copytree(path, moved)
    for p in (path, str(moved)):
        assert (
            main(
                [
                    "predict",
                    "--model",
                    p,
                    "--input",
                    tiny["test"],
                    "--output",
                    str(tmp_path / f"pred_{pathlib.Path(p).name}"),
                ]
            )
            == 0
        )
    capsys.readouterr()
    a = sorted(map(tuple, spark.read.parquet(str(tmp_path / "pred_ova" / "predictions")).collect()))
    b = sorted(
        map(tuple, spark.read.parquet(str(tmp_path / "pred_elsewhere" / "predictions")).collect())
    )
    assert a == b and len(a) == 300
    sampled = OVASettings(tasks=3, min_task_work=0, negative_fraction=0.5, seed=3)
    train_ova(spark, tiny["train"], str(tmp_path / "s1"), sampled)
    train_ova(spark, tiny["train"], str(tmp_path / "s2"), sampled)
    assert _digests(tmp_path / "s1") == _digests(tmp_path / "s2")
    assert (
        main(
            [
                "evaluate",
                "--predictions",
                str(tmp_path / "pred_ova"),
                "--input",
                tiny["test"],
                "--propensity-from",
                tiny["train"],
                "--output",
                str(tmp_path / "metrics"),
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert len(summary["P"]) == 5 and 0.3 < summary["P"][0] <= 1.0
    assert (tmp_path / "metrics" / "metrics.md").read_text().startswith("| metric |")


def test_bad_inputs(spark, tiny, model, tmp_path, capsys, write_text):
    path, _ = model
    assert (
        main(
            [
                "predict",
                "--model",
                str(tmp_path / "nope"),
                "--input",
                tiny["test"],
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    old = tmp_path / "old"
    shutil.copytree(path, old)
    meta = json.loads((old / "metadata.json").read_text())
    (old / "metadata.json").write_text(json.dumps(meta | {"format_version": 99}))
    assert (
        main(
            [
                "predict",
                "--model",
                str(old),
                "--input",
                tiny["test"],
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    assert "format_version 99" in capsys.readouterr().err
    (old / "metadata.json").write_text(json.dumps(meta | {"class": "RandomForest"}))
    assert (
        main(
            [
                "predict",
                "--model",
                str(old),
                "--input",
                tiny["test"],
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    assert (
        "is a 'RandomForest'; predict takes an OVAModel or a TreeModel" in capsys.readouterr().err
    )
    (old / "metadata.json").write_text("{not json")
    assert (
        main(
            [
                "predict",
                "--model",
                str(old),
                "--input",
                tiny["test"],
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    assert "is not valid JSON" in capsys.readouterr().err
    wide = write_text("wide.txt", "1 900 983\n1 800:1\n")
    ingest(spark, wide, str(tmp_path / "wide"), IngestSettings())
    assert (
        main(
            [
                "predict",
                "--model",
                path,
                "--input",
                str(tmp_path / "wide"),
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    assert "900 features, beyond the model's n_features=500" in capsys.readouterr().err
    empty = write_text("empty.txt", "0 500 983\n")
    ingest(spark, empty, str(tmp_path / "empty"), IngestSettings())
    with pytest.raises(BadInputError, match="has no samples to train on"):
        train_ova(spark, str(tmp_path / "empty"), str(tmp_path / "m"), OVASettings())
    assert not (tmp_path / "m").exists()


def test_constant_classifier_for_labels_without_positives():
    import scipy.sparse as sp

    X = sp.csr_matrix(np.eye(3))
    assert train_binary(X, np.zeros(3, bool))[2] == -1.0
    assert train_binary(X, np.ones(3, bool))[2] == 1.0
    with pytest.raises(ValueError, match="loss must be"):
        train_binary(X, np.array([True, False, True]), loss="hinge")


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_direct_solver_call_equals_the_estimators(loss, seed, dtype, monkeypatch):
    """train_binary's direct liblinear call (scikit-learn's private train_wrap) gives the weights
    LinearSVC / LogisticRegression give, bit for bit, and the fence lets it be used; float32 rows
    (the one-vs-all's) take the direct call too, as float64."""
    import scipy.sparse as sp

    from eagle_spark.classifiers import linear

    rng = np.random.default_rng(3)
    X = sp.random(400, 60, density=0.1, format="csr", random_state=3, dtype=np.float64)
    X = X.astype(dtype)
    y = rng.random(400) < 0.2
    assert linear.direct_solver_ok()  # the scikit-learn this project installs passes the check
    solved, real = [], linear._direct_fit
    monkeypatch.setattr(
        linear, "_direct_fit", lambda X, *args: solved.append(X.dtype) or real(X, *args)
    )
    direct = train_binary(X, y, loss=loss, threshold=0.0, seed=seed)
    assert solved == [np.float64]
    public = train_binary(X, y, loss=loss, threshold=0.0, seed=seed, direct=False)
    assert len(direct[0]) > 0 and solved == [np.float64]
    np.testing.assert_array_equal(direct[0], public[0])
    np.testing.assert_array_equal(direct[1], public[1])
    assert direct[2] == public[2]
    if loss == "squared_hinge":  # the dual CD visits samples in the seed's order (the primal
        # logistic solver does not shuffle): another seed, other weights, so the seed is passed on
        other = train_binary(X, y, loss=loss, threshold=0.0, seed=seed + 1)
        assert not np.array_equal(other[1], direct[1])


def _wrong_wrap(*args):
    """A train_wrap whose result is off by a little (a changed meaning of an argument)."""
    from sklearn.svm._liblinear import train_wrap

    raw, n_iter = train_wrap(*args)
    return raw * 1.001, n_iter


def _changed_signature(X, y, is_sparse, solver):
    raise AssertionError("never reached: called with the old argument list")


@pytest.mark.parametrize(
    "wrap, why",
    [
        (_wrong_wrap, "other weights"),
        (_changed_signature, "raised TypeError"),
        (None, "has no sklearn.svm._liblinear.train_wrap"),
    ],
)
def test_direct_solver_fence_falls_back_loudly(wrap, why, monkeypatch, caplog):
    """A private liblinear wrapper that gives other weights, takes other arguments or is gone is
    refused once per process with a RuntimeWarning and a log line naming the reason, and every
    fit then gives the public estimators' weights."""
    import scipy.sparse as sp

    from eagle_spark.classifiers import linear

    real = linear._liblinear()
    monkeypatch.setattr(
        linear, "_liblinear", lambda: None if wrap is None else real._replace(train=wrap)
    )
    linear.direct_solver_ok.cache_clear()
    try:
        rng = np.random.default_rng(4)
        X = sp.random(200, 30, density=0.2, format="csr", random_state=4, dtype=np.float64)
        y = rng.random(200) < 0.3
        with pytest.warns(RuntimeWarning, match=why), caplog.at_level("WARNING"):
            got = train_binary(X, y, threshold=0.0, seed=1)
        assert "falls back to the public estimators" in caplog.text
        want = train_binary(X, y, threshold=0.0, seed=1, direct=False)
        np.testing.assert_array_equal(got[1], want[1])
        assert got[2] == want[2]
        assert linear.direct_solver_ok() is False  # decided once: no second warning
    finally:
        linear.direct_solver_ok.cache_clear()


@pytest.mark.slow
def test_unassigned_ignore_equals_twin(spark, tiny, tmp_path):
    """unassigned=ignore: label k's problem leaves out the members of groups labelled k that EAGLE
    did not assign k; the twin finds them from Y1, Y2 and Y_filter with plain Python sets."""
    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.assignment.assign import assign
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.settings import AggregateSettings, AssignSettings, EmbedSettings

    agg, emb, assigned = (str(tmp_path / n) for n in ("agg", "emb", "assigned"))
    aggregate(spark, tiny["train"], agg, AggregateSettings(group_size=4))
    embed(spark, agg, emb, EmbedSettings(iterations=2, tasks=2))
    assign(spark, agg, assigned, AssignSettings(weighting="hard"), embeddings=emb)
    model_path = str(tmp_path / "ova_ignore")
    train_ova(spark, assigned, model_path, OVASettings(tasks=2, unassigned="ignore"))
    ids, X, Y, _ = dataset_matrices(spark, assigned)
    group_of = {r.sample_id: r.group_id for r in read_table(spark, agg, "Y1").collect()}
    group_labels: dict = {}
    for r in read_table(spark, agg, "Y2").collect():
        group_labels.setdefault(r.group_id, set()).add(r.label_id)
    Xn = l2_normalize_rows(X)
    got = weights(spark, model_path)
    checked = 0
    for label in range(983):
        y = Y[:, label].toarray().ravel() > 0
        unknown = [
            i
            for i, sid in enumerate(ids)
            if not y[i] and label in group_labels.get(group_of.get(sid), set())
        ]
        if not unknown or not y.any():
            continue
        keep = np.ones(len(ids), dtype=bool)
        keep[unknown] = False
        w_idx, w_val, bias = train_binary(
            Xn[keep].astype(np.float64), y[keep], "squared_hinge", 0.5, 0.1, tol=0.2, seed=0
        )
        g_idx, g_val, g_bias = got[label]
        assert list(g_idx) == list(w_idx)
        assert np.allclose(g_val, w_val, atol=1e-6) and g_bias == pytest.approx(bias, abs=1e-6)
        checked += 1
        if checked == 6:
            break
    assert checked == 6
    # the Baseline gives every member all its group's labels: nothing to leave out, same model
    base, base_model = str(tmp_path / "base"), str(tmp_path / "ova_base")
    assign(spark, agg, base, AssignSettings(method="baseline"))
    train_ova(spark, base, base_model, OVASettings(tasks=2, unassigned="ignore"))
    train_ova(spark, base, str(tmp_path / "ova_base_neg"), OVASettings(tasks=2))
    assert weights(spark, base_model) == weights(spark, str(tmp_path / "ova_base_neg"))
