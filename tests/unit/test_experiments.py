"""The experiments' single-node parts: Theorem 1's regression (against an independently written
twin), grouping names, Figure 3's decrement, Table 2's layout, and U of ``unassigned=ignore``."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from eagle_spark.errors import BadInputError
from eagle_spark.experiments import regression as R
from eagle_spark.experiments import report, xmc
from eagle_spark.settings import Settings


# -- Figure 2: the regression simulation --------------------------------------------------------
def _twin_draw(g, n, d, l, sigma1, sigma2, sigma_e, rng):
    """Theorem 1's setting written out with loops and normal equations (not the module's code).
    Draw order (the module's documented order): B*, centres, deviations, noise, permutations."""
    m = n // g
    B = rng.standard_normal((d, l))
    B = B / math.sqrt(float((B**2).sum()))
    centres = sigma1 * rng.standard_normal((m, d))
    dev = sigma2 * rng.standard_normal((n, d))
    X = np.array([centres[i // g] + dev[i] for i in range(n)])
    Z_true = X @ B + sigma_e * rng.standard_normal((n, l))
    order = []
    for j in range(m):
        order.extend(j * g + rng.permutation(g))
    Z = Z_true[np.array(order)]

    def ls(A, T):
        return np.linalg.solve(A.T @ A, A.T @ T)

    B_o = ls(X, Z_true)
    Xs = np.array([X[j * g : (j + 1) * g].sum(axis=0) for j in range(m)])
    Zs = np.array([Z[j * g : (j + 1) * g].sum(axis=0) for j in range(m)])
    B_a = ls(Xs, Zs)
    chosen = np.zeros_like(X)
    for i in range(n):
        j = i // g
        members = range(j * g, (j + 1) * g)
        best = min(members, key=lambda a: float(np.sum((Z[i] - X[a] @ B_a) ** 2)))
        chosen[i] = X[best]
    B_b = ls(chosen, Z)
    err = lambda E: math.sqrt(float(((E - B) ** 2).sum()))  # noqa: E731
    return {"oracle": err(B_o), "baseline": err(B_a), "assignment": err(B_b)}


@pytest.mark.parametrize("sigma2", [0.0, 0.5, 5.0])
def test_regression_draw_equals_the_twin(sigma2):
    setting = R.RegressionSetting(g=5, n=200, d=4, l=3)
    got = R.simulate_once(setting, sigma2, np.random.default_rng([3, 1]))
    want = _twin_draw(5, 200, 4, 3, 1.0, sigma2, 1.0, np.random.default_rng([3, 1]))
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12)


def test_regression_hand_worked_cases():
    # sigma_2 = 0: the members of a group are identical, so the group sums lose nothing and any
    # assignment picks the same x: all three estimators coincide
    same = R.simulate_once(R.RegressionSetting(g=4, n=80, d=3, l=2), 0.0, np.random.default_rng(0))
    assert same["baseline"] == pytest.approx(same["oracle"], rel=1e-9)
    assert same["assignment"] == pytest.approx(same["oracle"], rel=1e-9)
    # no response noise: B* is recovered exactly by every estimator (the right member has residual 0)
    exact = R.simulate_once(
        R.RegressionSetting(g=4, n=80, d=3, l=2, sigma_e=0.0), 2.0, np.random.default_rng(1)
    )
    assert max(exact.values()) < 1e-9


def test_regression_has_the_papers_shape():
    res = R.simulate(R.RegressionSetting(sigma2=(0.0, 10.0), seeds=5))
    low, high = res["rows"]
    assert low["baseline_rel_rms"] == pytest.approx(1.0) and low[
        "assignment_rel_rms"
    ] == pytest.approx(1.0)
    # heterogeneous groups: the baseline loses about sqrt(g) = 3.16 (Theorem 1), the assignment is near the oracle
    assert 2.5 < high["baseline_rel_rms"] < 4.0
    assert high["assignment_rel_rms"] < 1.2


def test_regression_setting_errors():
    with pytest.raises(ValueError, match="multiple of g"):
        R.RegressionSetting(g=3, n=100)
    with pytest.raises(ValueError, match="sigma2"):
        R.RegressionSetting(sigma2=(-1.0,))
    with pytest.raises(ValueError, match="at least d"):
        R.RegressionSetting(g=10, n=50, d=10)


def test_regression_run_writes_json_png_and_report(tmp_path):
    import matplotlib.image

    res = R.run(R.RegressionSetting(sigma2=(0.0, 1.0), seeds=2), str(tmp_path))
    assert [r["sigma2"] for r in res["rows"]] == [0.0, 1.0]
    image = matplotlib.image.imread(tmp_path / "regression.png")
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
    report = (tmp_path / "report.md").read_text()
    assert "![Figure 2](regression.png)" in report and "| 1 |" in report
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


# -- groupings, decrement, Table 2 layout ------------------------------------------------------
@pytest.mark.parametrize(
    "text, want",
    [
        ("R-4", xmc.Grouping("R-4", "random", group_size=4)),
        ("C", xmc.Grouping("C-8", "cluster", depth=8)),
        ("C-5", xmc.Grouping("C-5", "cluster", depth=5)),
        ("C-5-n0.5", xmc.Grouping("C-5-n0.5", "cluster", depth=5, noise=0.5)),
    ],
)
def test_grouping_names(text, want):
    assert xmc.Grouping.parse(text, default_depth=8) == want


@pytest.mark.parametrize("text", ["R", "R-0", "X-4", "C-a", "R-4-n1"])
def test_bad_grouping_names(text):
    with pytest.raises(BadInputError, match="grouping"):
        xmc.Grouping.parse(text, 8)


def test_grouping_settings_and_axes():
    s = Settings()
    g = xmc.Grouping.parse("C-3-n2", 8).apply(s)
    assert (g.aggregate.grouping, g.aggregate.depth, g.aggregate.noise) == ("cluster", 3, 2.0)
    assert [x.name for x in xmc.axis_groupings("group-size", [2, 4], s)] == ["R-2", "R-4"]
    assert [x.name for x in xmc.axis_groupings("depth", [2, 6], s)] == ["C-2", "C-6"]
    assert [x.name for x in xmc.axis_groupings("noise", [0, 0.5], s)] == ["C-8", "C-8-n0.5"]
    with pytest.raises(BadInputError, match="whole numbers"):
        xmc.axis_groupings("group-size", [2.5], s)
    with pytest.raises(BadInputError, match="unknown ablation axis"):
        xmc.axis_groupings("size", [2], s)


def test_decrement_hand_worked():
    assert xmc.decrement(50.0, 40.0) == pytest.approx(20.0)
    assert xmc.decrement(80.0, 80.0) == 0.0
    assert xmc.decrement(40.0, 50.0) == pytest.approx(-25.0)
    with pytest.raises(ValueError):
        xmc.decrement(0.0, 1.0)


def test_table2_markdown_layout():
    row = lambda p, psp, prec=None, rec=None: {  # noqa: E731
        "P_percent": p,
        "nDCG_percent": p,
        "PSP_percent": psp,
        "assignment_precision_percent": prec,
        "assignment_recall_percent": rec,
    }
    res = {
        "oracle": row([60, 55, 52, 50, 48], [20, 21, 22, 23, 24]),
        "groupings": {
            "R-4": {
                "baseline": row([40, 39, 38, 37, 36], [10, 11, 12, 13, 14], 28.8, 100.0),
                "eagle": row([45, 44, 43, 42, 41], [15, 16, 17, 18, 19], 38.7, 38.7),
            }
        },
    }
    lines = report.table2_markdown(res).splitlines()
    assert lines[0] == "| grouping | metric | Oracle | Baseline | EAGLE |"
    assert lines[2] == "| R-4 | P@1 | 60.00 | 40.00 | 45.00 |"
    assert lines[3] == "|  | P@3 | 52.00 | 38.00 | 43.00 |"
    assert lines[5] == "|  | PSP@5 | 24.00 | 14.00 | 19.00 |"
    assert lines[6] == "| | assignment precision | – | 28.80 | 38.70 |"


# -- U of unassigned=ignore --------------------------------------------------------------------
def _table(path, name, data):
    (path / name).mkdir(parents=True)
    pq.write_table(pa.table(data), path / name / "part-0.parquet")


def test_load_unassigned_hand_worked(tmp_path):
    from eagle_spark.classifiers.base import load_unassigned

    groups, assigned = tmp_path / "agg", tmp_path / "assigned"
    # samples 10, 11 in group 0 (labels 1, 2); 12, 13 in group 1 (labels 2, 3); 14 in no group
    _table(
        groups,
        "Y1",
        {
            "sample_id": pa.array([10, 11, 12, 13], pa.int64()),
            "group_id": pa.array([0, 0, 1, 1], pa.int64()),
        },
    )
    _table(
        groups,
        "Y2",
        {
            "group_id": pa.array([0, 0, 1, 1], pa.int64()),
            "label_id": pa.array([1, 2, 2, 3], pa.int32()),
        },
    )
    assigned.mkdir()
    ids = np.array([10, 11, 12, 13, 14])
    # assigned: 10 <- 1, 11 <- 2, 12 <- 2 and 3, 13 <- nothing, 14 <- nothing
    Y = sp.csr_matrix(
        np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=bool)
    ).tocsc()
    U = load_unassigned(str(assigned), str(groups), ids, Y).toarray()
    want = np.array(
        [[0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]], dtype=bool
    )
    assert (U == want).all()


def test_tree_ranker_leaves_unassigned_samples_out():
    """train_unit with U equals the solver on rows filtered by hand (a root with two label leaves)."""
    from eagle_spark.classifiers.linear import train_binary
    from eagle_spark.classifiers.tree import train_unit
    from eagle_spark.classifiers.tree.structure import Tree
    from eagle_spark.settings import TreeSettings

    rng = np.random.default_rng(0)
    X = sp.random(40, 12, density=0.4, format="csr", random_state=1, dtype=np.float32)
    y0 = rng.random(40) < 0.4
    Y = sp.csc_matrix(np.c_[y0, ~y0])
    unknown0 = np.array(
        [i for i in range(40) if not y0[i]][:7]
    )  # 7 negatives of label 0 are unknown
    U = sp.csc_matrix((np.ones(7, dtype=bool), (unknown0, np.zeros(7, dtype=int))), shape=(40, 2))
    tree = Tree(
        np.array([-1, 0, 0]), np.array([0, 1, 1]), 1, 2
    )  # root 0, labels 0 and 1 as elements 1, 2
    under = tree.labels_under()
    params = TreeSettings()
    got = {
        child: (w_idx, w_val, b)
        for child, w_idx, w_val, b in train_unit(tree, under, X, Y, 0, params, U)
    }
    keep = np.ones(40, dtype=bool)
    keep[unknown0] = False
    for child, rows, y in ((1, keep, y0[keep]), (2, np.ones(40, dtype=bool), ~y0)):
        w_idx, w_val, bias = train_binary(
            X[rows].astype(np.float64),
            y,
            params.loss,
            params.C,
            params.threshold,
            tol=params.tol,
            seed=params.seed,
        )
        dense_want = np.zeros(12)
        dense_want[w_idx] = w_val
        dense_got = np.zeros(12)
        dense_got[got[child][0]] = got[child][1]
        assert np.allclose(dense_got, dense_want, atol=1e-6) and got[child][2] == pytest.approx(
            bias, abs=1e-6
        )
    plain = {c: (i, v) for c, i, v, _ in train_unit(tree, under, X, Y, 0, params)}
    assert not np.array_equal(plain[1][1], got[1][1])  # the unknowns did change label 0's ranker


def test_reproducing_the_paper_page_is_complete():
    """docs/experiments.md shows every figure it names (the PNGs are in the repository and are
    PNGs), and gives the three commands with the groupings and axes they were run with."""
    import pathlib
    import re

    docs = pathlib.Path(__file__).resolve().parents[2] / "docs"
    text = (docs / "experiments.md").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    want = {
        f"figures/{ds}_ablation_{axis}.png"
        for ds in ("delicious", "bibtex")
        for axis in ("group-size", "depth", "noise")
    } | {"figures/regression.png"}
    assert want <= set(figures)
    for name in figures:
        assert (docs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    for command in (
        "experiment table2",
        "experiment ablation",
        "experiment regression",
        "--axis group-size",
        "--axis depth",
        "--axis noise",
        "--groupings R-4 R-10 C",
    ):
        assert command in text
