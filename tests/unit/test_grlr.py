"""GRLR (Algorithm 1) and EAGLE assignment (Algorithm 2) on Spark == a numpy twin from the paper."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_spark.aggregation.aggregate import aggregate
from eagle_spark.assignment.assign import assign
from eagle_spark.assignment.members import eagle_assignments
from eagle_spark.cli import main
from eagle_spark.grlr.embedding import embed
from eagle_spark.io.ingest import ingest
from eagle_spark.io.tables import read_table
from eagle_spark.settings import AggregateSettings, AssignSettings, EmbedSettings, IngestSettings
from tests.conftest import TASKS_PER_STAGE, dataset_matrices


# ------------------------------------------------------------------ the twin, written from the paper
def proj(v):
    n = np.linalg.norm(v)
    return v / n if n > 0 else np.zeros_like(v)


TIE = 1e-9  # a score within 1e-9 relative of the group maximum attains it (documented tie rule)


def attains(v):
    return v >= v.max() - TIE * abs(v.max())


def twin(X, groups, label_groups, T, lam, normalize=True):
    """Algorithms 1 and 2 with plain loops. X dense (n, d) in sample_id order; groups: j -> sorted
    member rows; label_groups: k -> groups. Returns ({k: e_k}, {(j, k): chosen row}).

    Algorithm 2 scores with the embeddings as the layout stores them (float32 weights), like the
    Spark job, which reads label_emb; with float64 ones, near-ties (1e-8 apart) could flip."""
    X = np.asarray(X, dtype=np.float64)
    if normalize:
        X = np.array([proj(x) for x in X])
    emb = {}
    for k, Mk in label_groups.items():
        e = proj(sum(X[i] for j in Mk for i in groups[j]))
        for _ in range(T):
            total = np.zeros(X.shape[1])
            for j in Mk:
                v = X[groups[j]] @ e
                total += X[groups[j]][attains(v)].sum(axis=0)
            e = proj(e + lam * proj(total))
        emb[k] = e
    chosen = {}
    for k, Mk in label_groups.items():
        stored = emb[k].astype(np.float32).astype(np.float64)
        for j in Mk:
            v = X[groups[j]] @ stored
            chosen[(j, k)] = groups[j][int(np.argmax(attains(v)))]  # first: smallest sample_id
    return emb, chosen


def structure(spark, ds):
    ids, X, Y, manifest = dataset_matrices(spark, ds)
    row_of = {s: r for r, s in enumerate(ids)}
    groups = {}
    for r in read_table(spark, ds, "Y1").collect():
        groups.setdefault(r.group_id, []).append(row_of[r.sample_id])
    groups = {j: sorted(m) for j, m in groups.items()}
    label_groups = {}
    for r in read_table(spark, ds, "Y2").collect():
        label_groups.setdefault(r.label_id, []).append(r.group_id)
    return ids, X.toarray(), groups, {k: sorted(v) for k, v in label_groups.items()}


@pytest.fixture(scope="module")
def small(spark, tmp_path_factory):
    """600 samples of delicious, random groups of 4 (seed 0)."""
    import gzip

    from eagle_spark.data import embedded_path

    root = tmp_path_factory.mktemp("grlr")
    with gzip.open(embedded_path("delicious", "train"), "rt") as fh:
        next(fh)
        lines = [next(fh) for _ in range(600)]
    src = root / "small.txt"
    src.write_text("600 500 983\n" + "".join(lines))
    ds, agg = str(root / "ds"), str(root / "agg")
    ingest(spark, str(src), ds, IngestSettings())
    aggregate(spark, ds, agg, AggregateSettings(group_size=4, seed=0))
    return agg, structure(spark, agg)


def test_the_work_sets_the_bins_and_no_embedding(spark, small, tmp_path):
    """GRLR's work: candidate rows (a label's groups' members, summed over labels) x X's mean
    nonzeros per row x (T + 1). With min_task_work at 1/2.5 of it the labels are dealt into
    ceil(2.5) = 3 bins (of 8 allowed) rounded up to a multiple of the cores, one part file of
    label_emb each; with more work a bin than there is, one bin per core; the embeddings equal
    those of 8 bins (min_task_work 0) exactly."""
    agg, (_, X, groups, label_groups) = small
    candidate_rows = sum(len(groups[g]) for gs in label_groups.values() for g in gs)
    work = candidate_rows * np.count_nonzero(X) / X.shape[0] * (2 + 1)
    cores = TASKS_PER_STAGE  # the test session's parallelism
    got = {}
    for min_task_work, bins in ((0, 8), (work / 2.5, {1: 3, 2: 4}[cores]), (1e15, cores)):
        out = tmp_path / f"emb{min_task_work:g}"
        params = EmbedSettings(iterations=2, tasks=8, min_task_work=min_task_work)
        manifest = embed(spark, agg, str(out), params)
        assert manifest["n_candidate_rows"] == candidate_rows
        assert len(list((out / "label_emb").glob("part-*"))) == bins
        got[bins] = emb_dict(spark, str(out), X.shape[1])
    first = got.pop(8)
    for other in got.values():
        assert other.keys() == first.keys()
        assert all(np.array_equal(other[k], first[k]) for k in first)


def emb_dict(spark, folder, d):
    out = {}
    for r in read_table(spark, folder, "label_emb").collect():
        e = np.zeros(d)
        e[np.asarray(r.emb_idx, dtype=np.int64)] = r.emb_val
        out[r.label_id] = e
    return out


# split_rows=60: 163 labels of `small` are heavy, split into 2 to 9 chunks each (528 candidate rows
# at most); 12 made 553 heavy labels and cost 5x the time for no other path
@pytest.mark.parametrize("T, split_rows", [(0, 0), (3, 0), (3, 60)])
def test_spark_equals_twin(spark, small, tmp_path, T, split_rows):
    agg, (ids, X, groups, label_groups) = small
    params = EmbedSettings(
        iterations=T, lr=0.1, tasks=3, min_task_work=0, batch_rows=150, split_rows=split_rows
    )
    m = embed(spark, agg, str(tmp_path / "emb"), params)
    if split_rows:
        assert m["n_heavy_labels"] == 163  # the split-and-combine path really ran
    twin_emb, twin_chosen = twin(X, groups, label_groups, T, 0.1)
    got = emb_dict(spark, str(tmp_path / "emb"), X.shape[1])
    assert set(got) == set(twin_emb)
    worst = max(np.abs(got[k] - twin_emb[k]).max() for k in twin_emb)
    assert worst < 1e-5
    expected = {key: int(ids[row]) for key, row in twin_chosen.items()}
    # Algorithm 2 written by the embed pass: one rank-0 row per pair, the twin's choice
    top = read_table(spark, str(tmp_path / "emb"), "top_members").collect()
    assert {(r.group_id, r.label_id): r.sample_id for r in top if r.rank == 0} == expected
    y2 = read_table(spark, agg, "Y2").collect()
    assert len(top) == sum(min(r["count"], len(groups[r.group_id])) for r in y2)  # top-count
    assert len(top) > len(expected)  # some counts are above 1
    out = assign(
        spark,
        agg,
        str(tmp_path / "asg"),
        AssignSettings(tasks=3, multiplicity=False, weighting="hard"),
        embeddings=str(tmp_path / "emb"),
    )
    assert out["source"]["top_members"] == "from embed"
    rows = read_table(spark, str(tmp_path / "asg"), "assignments").collect()
    assert {(r.group_id, r.label_id): r.sample_id for r in rows} == expected
    # the recomputing path (stored embeddings + X) makes the same choices
    again = eagle_assignments(
        spark,
        agg,
        str(tmp_path / "emb"),
        AssignSettings(tasks=3, multiplicity=False, weighting="hard"),
        X.shape[1],
        True,
    )
    assert {(r.group_id, r.label_id): r.sample_id for r in again.collect()} == expected
    assert m["n_pairs"] == sum(len(v) for v in label_groups.values())


def test_iteration_statistics_match_twin(spark, small, tmp_path):
    agg, (ids, X, groups, label_groups) = small
    m = embed(spark, agg, str(tmp_path / "emb"), EmbedSettings(iterations=2, tasks=2))
    Xn = np.array([proj(x) for x in np.asarray(X, dtype=np.float64)])
    pairs = [(j, k) for k, M in label_groups.items() for j in M]
    previous = None
    for t in (0, 1, 2):
        emb, _ = twin(X, groups, label_groups, t, 0.1)  # e^t, float64
        scores = {(j, k): Xn[groups[j]] @ emb[k] for j, k in pairs}
        mean_max = sum(float(v.max()) for v in scores.values()) / len(pairs)
        assert m["iterations"][t]["mean_max_score"] == pytest.approx(mean_max, rel=1e-9)
        first = {p: int(np.argmax(attains(v))) for p, v in scores.items()}
        if previous is not None:
            changed = sum(first[p] != previous[p] for p in pairs) / len(pairs)
            assert m["iterations"][t]["changed_fraction"] == pytest.approx(changed)
        previous = first
    assert m["iterations"][2]["mean_max_score"] > m["iterations"][0]["mean_max_score"]


def _toy(spark, tmp_path, write_text, text, name):
    src = write_text(f"{name}.txt", text)
    ds = str(tmp_path / f"{name}_ds")
    ingest(spark, src, ds, IngestSettings())
    agg = str(tmp_path / f"{name}_agg")
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = int(text.split()[0])
    pq.write_table(
        pa.table({"sample_id": list(range(n)), "group_id": [i // 2 for i in range(n)]}),
        tmp_path / f"{name}_y1.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "group_id": [j for j in range(n // 2) for _ in (0, 1)],
                "label_id": [k for _ in range(n // 2) for k in (0, 1)],
            }
        ),
        tmp_path / f"{name}_y2.parquet",
    )
    aggregate(
        spark,
        ds,
        agg,
        AggregateSettings(),
        y1_path=str(tmp_path / f"{name}_y1.parquet"),
        y2_path=str(tmp_path / f"{name}_y2.parquet"),
    )
    return agg


def test_paper_toy_example_degenerates_to_zero(spark, tmp_path, write_text):
    """Section 3: samples x and -x in every group, both labels on every group: e0 = 0, no NaN."""
    text = "6 3 2\n0 0:1 1:2\n1 0:-1 1:-2\n0 0:1 1:2\n1 0:-1 1:-2\n0 0:1 1:2\n1 0:-1 1:-2\n"
    agg = _toy(spark, tmp_path, write_text, text, "toy")
    m = embed(spark, agg, str(tmp_path / "emb"), EmbedSettings(iterations=5))
    rows = read_table(spark, str(tmp_path / "emb"), "label_emb").collect()
    assert sorted((r.label_id, r.emb_idx, r.emb_val, r.n_groups) for r in rows) == [
        (0, [], [], 3),
        (1, [], [], 3),
    ]
    assert all(np.isfinite(it["mean_max_score"]) for it in m["iterations"])
    assign(
        spark,
        agg,
        str(tmp_path / "asg"),
        AssignSettings(weighting="hard"),
        embeddings=str(tmp_path / "emb"),
    )
    chosen = {
        (r.group_id, r.label_id): (r.sample_id, r.score)
        for r in read_table(spark, str(tmp_path / "asg"), "assignments").collect()
    }
    assert chosen == {(j, k): (2 * j, 0.0) for j in range(3) for k in (0, 1)}  # smallest id


def test_ties_select_every_maximum(spark, tmp_path, write_text):
    """Two identical members: both attain the maximum and both enter g (a_ij = 1 for ties)."""
    text = "4 3 2\n0 0:1\n0 0:1\n1 1:1 2:1\n1 2:1\n"
    agg = _toy(spark, tmp_path, write_text, text, "ties")
    embed(spark, agg, str(tmp_path / "emb"), EmbedSettings(iterations=2, normalize=False))
    ids, X, groups, label_groups = structure(spark, agg)
    twin_emb, _ = twin(X, groups, label_groups, 2, 0.1, normalize=False)
    got = emb_dict(spark, str(tmp_path / "emb"), 3)
    for k in twin_emb:
        np.testing.assert_allclose(got[k], twin_emb[k], atol=1e-6)


def test_singleton_groups_give_pifa(spark, tmp_path, write_text):
    """g = 1: GRLR equals Parabel's normalised label representation Proj(Y^T X) (section 4)."""
    text = "5 4 2\n0 0:1 1:1\n0,1 1:2\n1 2:1 3:1\n0 3:1\n1 0:1\n"
    src = write_text("pifa.txt", text)
    ds, agg = str(tmp_path / "ds"), str(tmp_path / "agg")
    ingest(spark, src, ds, IngestSettings())
    aggregate(spark, ds, agg, AggregateSettings(group_size=1, seed=0))
    embed(spark, agg, str(tmp_path / "emb"), EmbedSettings(iterations=4))
    _, X, Y, _ = dataset_matrices(spark, ds)
    Xn = X.toarray() / np.linalg.norm(X.toarray(), axis=1, keepdims=True)
    pifa = (Y.T @ sp.csr_matrix(Xn)).toarray()
    got = emb_dict(spark, str(tmp_path / "emb"), 4)
    for k in range(2):
        np.testing.assert_allclose(got[k], proj(pifa[k]), atol=1e-6)


@pytest.fixture(scope="module")
def delicious_r4(spark, delicious, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("r4") / "agg")
    aggregate(spark, delicious, out, AggregateSettings(group_size=4, seed=0))
    return out


def test_delicious_precision_order(spark, delicious_r4, tmp_path, capsys):
    """EAGLE (T=20) > EAGLE-0 > Baseline in assignment precision on delicious R-4, seed 0, with the
    default top-c assignment and with Algorithm 2 as printed (--no-multiplicity)."""
    precision = {}
    for T in (20, 0):
        assert (
            main(
                [
                    "embed",
                    "--input",
                    delicious_r4,
                    "--output",
                    str(tmp_path / f"e{T}"),
                    "--iterations",
                    str(T),
                ]
            )
            == 0
        )
        capsys.readouterr()
        for flag in ("--multiplicity", "--no-multiplicity"):
            name = f"{'eagle' if T else 'eagle0'}{flag[1:]}"
            args = [
                "assign",
                "--input",
                delicious_r4,
                "--embeddings",
                str(tmp_path / f"e{T}"),
                "--output",
                str(tmp_path / name),
                "--weighting",
                "hard",
            ]
            assert (
                main(args + ([flag] if flag == "--no-multiplicity" else [])) == 0
            )  # top-c: default
            precision[name] = json.loads(capsys.readouterr().out)["precision"]
    assert (
        main(
            [
                "assign",
                "--input",
                delicious_r4,
                "--method",
                "baseline",
                "--output",
                str(tmp_path / "base"),
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    precision["baseline"] = summary["precision"]
    assert summary["recall"] == 1.0
    # measured: top-c eagle 0.4016, eagle-0 0.3841 (the main job's comparison table); argmax
    # eagle 0.3704, eagle-0 0.3507; baseline 0.2877
    for mode in ("-multiplicity", "-no-multiplicity"):
        assert precision["eagle" + mode] > precision["eagle0" + mode] > precision["baseline"]
    assert precision["eagle-multiplicity"] == pytest.approx(0.4016, abs=0.002)
    assert precision["eagle-no-multiplicity"] == pytest.approx(0.3704, abs=0.002)
    Yf = read_table(spark, str(tmp_path / "eagle-multiplicity"), "Y")
    assert Yf.count() == 12920  # every sample of X, with [] when it got no label
    assert read_table(spark, str(tmp_path / "eagle-multiplicity"), "X").count() == 12920


def test_multiplicity_gives_top_c(spark, tmp_path, write_text):
    """Y2 counts 2 and 3: the top-c members by <e_k, x_i>, from the embed pass and recomputed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = (
        "8 4 2\n0 0:1\n0 0:0.9 1:0.2\n1 0:0.5 1:0.7\n1 1:1 2:0.1\n"
        "0 2:1 0:0.3\n1 2:0.8 3:0.4\n0 3:1\n1 0:0.2 3:0.9\n"
    )
    src = write_text("mult.txt", text)
    ds, agg = str(tmp_path / "mult_ds"), str(tmp_path / "mult_agg")
    ingest(spark, src, ds, IngestSettings())
    pq.write_table(
        pa.table({"sample_id": list(range(8)), "group_id": [0] * 4 + [1] * 4}),
        tmp_path / "y1.parquet",
    )
    pq.write_table(
        pa.table({"group_id": [0, 0, 1, 1], "label_id": [0, 1, 0, 1], "count": [2, 1, 3, 1]}),
        tmp_path / "y2.parquet",
    )
    aggregate(
        spark,
        ds,
        agg,
        AggregateSettings(),
        y1_path=str(tmp_path / "y1.parquet"),
        y2_path=str(tmp_path / "y2.parquet"),
    )
    embed(spark, agg, str(tmp_path / "emb"), EmbedSettings(iterations=2))
    ids, X, groups, label_groups = structure(spark, agg)
    emb, _ = twin(X, groups, label_groups, 2, 0.1)
    Xn = np.array([proj(x) for x in X])
    count = {(0, 0): 2, (0, 1): 1, (1, 0): 3, (1, 1): 1}
    expected = set()
    for (j, k), c in count.items():
        scores = Xn[groups[j]] @ emb[k].astype(np.float32).astype(np.float64)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        expected |= {(j, k, int(ids[groups[j][i]])) for i in order[:c]}
    assert len(expected) == 7
    for reuse in (True, False):
        out = tmp_path / f"asg{reuse}"
        assign(
            spark,
            agg,
            str(out),
            AssignSettings(multiplicity=True, weighting="hard"),
            embeddings=str(tmp_path / "emb"),
        )
        if not reuse:
            got = eagle_assignments(
                spark,
                agg,
                str(tmp_path / "emb"),
                AssignSettings(multiplicity=True, weighting="hard"),
                4,
                True,
            )
        else:
            got = read_table(spark, str(out), "assignments")
        assert {(r.group_id, r.label_id, r.sample_id) for r in got.collect()} == expected
    plain = assign(
        spark,
        agg,
        str(tmp_path / "plain"),
        AssignSettings(multiplicity=False, weighting="hard"),
        embeddings=str(tmp_path / "emb"),
    )
    assert plain["n_assignments"] == 4  # without multiplicity: the argmax of each pair


def test_top_members_reused_only_for_the_same_dataset(spark, small, tmp_path):
    """An embeddings folder is reused only for the dataset (path and version) it was made from."""
    import shutil

    agg, (ids, X, groups, label_groups) = small
    embed(spark, agg, str(tmp_path / "emb"), EmbedSettings(iterations=1, tasks=2))
    copy = str(tmp_path / "copy")
    shutil.copytree(agg, copy)
    a = assign(
        spark,
        agg,
        str(tmp_path / "a"),
        AssignSettings(weighting="hard"),
        embeddings=str(tmp_path / "emb"),
    )
    b = assign(
        spark,
        copy,
        str(tmp_path / "b"),
        AssignSettings(weighting="hard"),
        embeddings=str(tmp_path / "emb"),
    )
    assert (a["source"]["top_members"], b["source"]["top_members"]) == ("from embed", "recomputed")
    rows = [
        sorted(tuple(r) for r in read_table(spark, str(tmp_path / n), "assignments").collect())
        for n in "ab"
    ]
    assert rows[0] == rows[1]


def test_prune_below_shrinks_stored_embeddings_not_assignments(spark, small, tmp_path):
    agg, (ids, X, groups, label_groups) = small
    exact = embed(spark, agg, str(tmp_path / "exact"), EmbedSettings(iterations=2, tasks=2))
    pruned = embed(
        spark, agg, str(tmp_path / "pruned"), EmbedSettings(iterations=2, tasks=2, prune_below=0.05)
    )
    assert pruned["parameters"]["prune_below"] == 0.05 and exact["parameters"]["prune_below"] == 0.0
    e_exact = emb_dict(spark, str(tmp_path / "exact"), X.shape[1])
    e_pruned = emb_dict(spark, str(tmp_path / "pruned"), X.shape[1])
    for k, e in e_exact.items():
        kept = np.abs(e) >= 0.05
        np.testing.assert_array_equal(e_pruned[k], np.where(kept, e, 0.0))
    assert sum((e != 0).sum() for e in e_pruned.values()) < 0.8 * sum(
        (e != 0).sum() for e in e_exact.values()
    )
    top = [
        sorted(tuple(r) for r in read_table(spark, str(tmp_path / n), "top_members").collect())
        for n in ("exact", "pruned")
    ]
    assert top[0] == top[1]


def test_bad_inputs(spark, small, tmp_path, capsys):
    agg, _ = small
    assert main(["assign", "--input", agg, "--output", str(tmp_path / "a")]) == 2
    assert "--method eagle needs --embeddings" in capsys.readouterr().err
    assert main(["embed", "--input", str(tmp_path / "nope"), "--output", str(tmp_path / "e")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["embed", "--input", agg, "--output", str(tmp_path / "e"), "--lr", "0"]) == 2
    assert "embed.lr must be a finite number > 0" in capsys.readouterr().err
    assert (
        main(
            [
                "assign",
                "--input",
                agg,
                "--embeddings",
                str(tmp_path / "nope"),
                "--output",
                str(tmp_path / "a"),
            ]
        )
        == 2
    )


def _table_rows(spark, folder, table):
    return sorted(
        tuple(tuple(v) if isinstance(v, list) else v for v in r)
        for r in read_table(spark, folder, table).collect()
    )


@pytest.mark.parametrize(
    "split_rows", [0, pytest.param(60, marks=pytest.mark.slow)]
)  # 60: heavy labels (as in test_spark_equals_twin)
def test_joined_path_equals_cached(spark, small, tmp_path, split_rows):
    """embed.x_access=joined (pairs joined with the groups' member rows, no executor cache) writes
    the same embeddings and top members as the cached path, value for value; with split_rows=60 the
    heavy labels' chunks go through the join too, spread over 3 shuffle partitions."""
    from tests.conftest import shuffle_partitions

    agg, (ids, X, groups, label_groups) = small
    out = {}
    for mode in ("cached", "joined"):
        with shuffle_partitions(spark, 3):
            out[mode] = embed(
                spark,
                agg,
                str(tmp_path / mode),
                EmbedSettings(  # 3 bins on both paths: the figures sum over bins in one order
                    iterations=3,
                    tasks=3,
                    min_task_work=0,
                    batch_rows=150,
                    split_rows=split_rows,
                    x_access=mode,
                ),
            )
        assert out[mode]["x_access"] == mode
    if split_rows:
        assert out["joined"]["n_heavy_labels"] == 163
    for table in ("label_emb", "top_members"):
        assert _table_rows(spark, str(tmp_path / "cached"), table) == _table_rows(
            spark, str(tmp_path / "joined"), table
        )
    assert out["cached"]["iterations"] == out["joined"]["iterations"]
    # and the twin agrees with the joined path
    twin_emb, _ = twin(X, groups, label_groups, 3, 0.1)
    got = emb_dict(spark, str(tmp_path / "joined"), X.shape[1])
    assert max(np.abs(got[k] - twin_emb[k]).max() for k in twin_emb) < 1e-5


def test_assign_recomputed_on_the_joined_path(spark, small, tmp_path):
    agg, (ids, X, groups, label_groups) = small
    embed(spark, agg, str(tmp_path / "emb"), EmbedSettings(iterations=2, tasks=2))
    emb = str(tmp_path / "emb")
    rows = {}
    for mode in ("cached", "joined"):
        df = eagle_assignments(
            spark,
            agg,
            emb,
            AssignSettings(x_access=mode, multiplicity=True, weighting="hard"),
            X.shape[1],
            True,
        )
        rows[mode] = sorted(tuple(r) for r in df.collect())
    assert rows["cached"] == rows["joined"]
    stored = sorted(tuple(r)[:4] for r in read_table(spark, emb, "top_members").collect())
    assert rows["joined"] == sorted((g, k, s, pytest.approx(sc)) for g, k, s, sc in stored)


def test_auto_picks_the_path_by_the_cache_budget(spark, small, tmp_path, caplog):
    agg, _ = small
    import logging

    with caplog.at_level(logging.INFO, logger="eagle_spark.grlr.embedding"):
        big = embed(spark, agg, str(tmp_path / "a"), EmbedSettings(iterations=0, cache_budget="4g"))
        tiny = embed(
            spark, agg, str(tmp_path / "b"), EmbedSettings(iterations=0, cache_budget="1k")
        )
    assert (big["x_access"], tiny["x_access"]) == ("cached", "joined")
    # 600 rows of delicious: 12 bytes per nonzero + 16 per row + 16 per Y1 row, well under 1 MiB
    assert (
        "the executor cache of X and Y1 needs ~0 MiB, the budget (embed.cache_budget) is 4,096 MiB"
        in big["x_access_reason"]
    )
    assert "embed: joined path (embed.x_access=auto" in caplog.text
    assert _table_rows(spark, str(tmp_path / "a"), "top_members") == _table_rows(
        spark, str(tmp_path / "b"), "top_members"
    )


@pytest.mark.parametrize("n_labels", [1, 3])
def test_label_columns_equal_a_unique_twin(n_labels):
    """The batch's (label, feature) columns and each entry's column, for one label (the marking
    fast path) and several (the transposes), against np.unique over label * d + feature keys."""
    from eagle_spark.grlr.kernel import _label_columns

    rng = np.random.default_rng(n_labels)
    A = sp.random(30, 50, density=0.15, format="csr", random_state=rng)
    A[4] = 0  # an empty candidate row
    A = sp.csr_matrix(A)
    A.data[:] = 1.0
    cand_label = np.sort(rng.integers(0, n_labels, size=30))
    (col_label, col_feature), inverse = _label_columns(A, cand_label, n_labels)
    entry_label = np.repeat(cand_label, np.diff(A.indptr))
    keys, want_inverse = np.unique(entry_label * 50 + A.indices, return_inverse=True)
    assert col_label.tolist() == (keys // 50).tolist()
    assert col_feature.tolist() == (keys % 50).tolist() and col_feature.dtype == np.int32
    assert inverse.tolist() == want_inverse.ravel().tolist()


@pytest.mark.parametrize("n", [3, 16, 40])
def test_partition_keys_give_every_bin_its_own_task(spark, n):
    """repartition(n, bin) with the keys of partition_keys puts bin b alone in partition b, where
    the bin ids 0..n-1 themselves share partitions (the unbalanced embed stage)."""
    from pyspark.sql import functions as F

    from eagle_spark.grlr.embedding import partition_keys

    keys = partition_keys(spark, n)
    assert len(set(keys)) == n
    rows = spark.createDataFrame([(k, i) for k in keys for i in range(3)], "b int, i int")
    placed = (
        rows.repartition(n, "b").select(F.spark_partition_id().alias("p"), "b").distinct().collect()
    )
    assert sorted((r["p"], r["b"]) for r in placed) == list(enumerate(keys))
    plain = spark.createDataFrame([(b,) for b in range(n)], "b int").repartition(n, "b")
    used = plain.select(F.spark_partition_id().alias("p")).distinct().count()
    assert used < n  # why the keys are needed: plain bin ids collide


def kernel_twin(X, pair_label, ptr, rows, k, T, lr):
    """Algorithm 1 for label k of a PairBatch as the paper writes it: dense, normalising every step."""
    pairs = np.flatnonzero(pair_label == k)
    A = X[rows[ptr[pairs[0]] : ptr[pairs[-1] + 1]]].toarray()
    local = ptr[pairs] - ptr[pairs[0]]
    want = proj(A.sum(axis=0))
    for _ in range(T):
        chosen = np.concatenate([attains(v) for v in np.split(A @ want, local[1:])])
        want = proj(want + lr * proj(A[chosen].sum(axis=0)))
    return want


def check_kernel(block, X, pair_label, ptr, rows, n_labels, T, lr, atol=1e-12):
    """LabelBlock.grlr's e equals kernel_twin on every label's block (and the block covers the
    twin's support)."""
    e, _ = block.grlr(T, lr)
    for k in range(n_labels):
        want = kernel_twin(X, pair_label, ptr, rows, k, T, lr)
        lo, hi = block.label_ptr[k], block.label_ptr[k + 1]
        np.testing.assert_allclose(e[lo:hi], want[block.col_feature[lo:hi]], atol=atol)
        assert np.abs(want).sum() > 0 and set(np.flatnonzero(want)) <= set(
            block.col_feature[lo:hi].tolist()
        )


def test_kernel_keeps_e_as_a_scaled_w_and_rescales_it(monkeypatch):
    """LabelBlock.grlr keeps e = w / ||w|| with w unnormalised and ||w|| carried by a recurrence:
    with lambda = 1e40, ||w|| passes 1e100 within six iterations and w is rescaled, and e still
    equals a per-label twin that normalises every step (Algorithm 1 as the paper writes it); so
    it does at lambda = 0.1."""
    from eagle_spark.grlr.kernel import LabelBlock, PairBatch

    rng = np.random.default_rng(3)
    X = sp.random(40, 12, density=0.35, format="csr", random_state=rng)
    pair_label = np.array([0, 0, 1, 2, 2, 2])
    ptr = np.r_[0, np.cumsum([3, 4, 2, 5, 3, 4])]
    rows = rng.choice(40, size=ptr[-1], replace=False)
    rescales = {}
    scale = LabelBlock.scale_blocks

    def counted(self, factor, v, out=None):
        rescales[lr] = rescales.get(lr, 0) + 1
        return scale(self, factor, v, out)

    monkeypatch.setattr(LabelBlock, "scale_blocks", counted)
    for lr in (0.1, 1e40):
        block = LabelBlock(X, PairBatch(pair_label, ptr, rows, 3))
        check_kernel(block, X, pair_label, ptr, rows, 3, 6, lr)
    # one column rescale per iteration and one for e at the end; lambda = 1e40 rescales w too
    assert rescales[0.1] == 6 + 1 and rescales[1e40] > 6 + 1


def test_kernel_recomputes_the_norm_when_a_step_nearly_cancels_w(monkeypatch):
    """Hand-made label whose first step points almost against e: groups {u} and {v1, v2} with
    w0 = u + v1 + v2 = (1, 0); v1 scores 3 > v2's 2, so g = u + v1 = (-1, -0.01) and with
    lambda = 1 the new w is ~1% of the old one: ||w + c g||^2 = ||w||^2 + 2c<w, g> + c^2 ||g||^2
    would lose two digits there, so the kernel measures that norm from w instead (one norm over
    the columns more than the g norms), and e equals the twin."""
    from eagle_spark.grlr.kernel import LabelBlock, PairBatch

    u, v1, v2 = [-4.0, -0.51], [3.0, 0.5], [2.0, 0.01]
    X = sp.csr_matrix(np.array([u, v1, v2]))
    pair_label, ptr, rows = np.array([0, 0]), np.array([0, 1, 3]), np.array([0, 1, 2])
    norms = []
    measure = LabelBlock.block_norms
    monkeypatch.setattr(
        LabelBlock, "block_norms", lambda self, v: norms.append(1) or measure(self, v)
    )
    block = LabelBlock(X, PairBatch(pair_label, ptr, rows, 1))
    check_kernel(block, X, pair_label, ptr, rows, 1, 4, 1.0, atol=1e-13)
    # w0's norm, one g norm per iteration, and at least the first step's w measured again
    assert len(norms) > 1 + 4
