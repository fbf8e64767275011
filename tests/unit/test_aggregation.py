"""Aggregated-label data: random and cluster groups, Y2 = Y1^T Y, determinism, numpy twins."""

import hashlib
import json
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_spark.aggregation.aggregate import aggregate
from eagle_spark.aggregation.groups import cluster_groups, random_groups
from eagle_spark.io.tables import read_table
from eagle_spark.kmeans import balanced_2means
from eagle_spark.settings import AggregateSettings
from eagle_spark.sparse import l2_normalize_rows
from tests.conftest import dataset_matrices


def y1_matrix(spark, dataset, ids):
    rows = read_table(spark, dataset, "Y1").collect()
    index = {s: i for i, s in enumerate(ids)}
    groups = np.array([r.group_id for r in rows])
    return sp.csr_matrix(
        (np.ones(len(rows)), ([index[r.sample_id] for r in rows], groups)),
        shape=(len(ids), groups.max() + 1),
    )


def y2_matrix(spark, dataset, shape):
    rows = read_table(spark, dataset, "Y2").collect()
    return sp.csr_matrix(
        ([r["count"] for r in rows], ([r.group_id for r in rows], [r.label_id for r in rows])),
        shape=shape,
    )


@pytest.fixture(scope="module")
def random4(spark, delicious, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("agg") / "r4")
    manifest = aggregate(spark, delicious, out, AggregateSettings(group_size=4, seed=0))
    return out, manifest


def test_random_groups_y2_is_y1t_y(spark, delicious, random4):
    out, manifest = random4
    ids, _, Y, _ = dataset_matrices(spark, delicious)
    Y1 = y1_matrix(spark, out, ids)
    assert manifest["n_groups"] == 3230 and manifest["group_size_histogram"] == {"4": 3230}
    assert (np.asarray(Y1.sum(axis=1)).ravel() == 1).all()  # every sample in exactly one group
    expected = (Y1.T @ Y).tocsr()
    actual = y2_matrix(spark, out, expected.shape)
    assert (expected != actual).nnz == 0
    assert manifest["n_positive_pairs"] == expected.nnz
    assert manifest["n_positive_pairs_with_multiplicity"] == Y.nnz
    assert set(manifest["tables"]) == {"X", "Y", "Y1", "Y2"}


def test_remainder_group_and_set_merge(spark, tmp_path, write_text):
    from eagle_spark.io.ingest import ingest
    from eagle_spark.settings import IngestSettings

    lines = [f"{i % 3},{(i + 1) % 3} {i}:1" for i in range(10)]
    src = write_text("ten.txt", "10 10 3\n" + "\n".join(lines) + "\n")
    ds = str(tmp_path / "ds")
    ingest(spark, src, ds, IngestSettings())
    m = aggregate(
        spark, ds, str(tmp_path / "g3"), AggregateSettings(group_size=3, seed=5, merge="set")
    )
    assert m["group_size_histogram"] == {"1": 1, "3": 3}
    assert (m["group_size_mean"], m["group_size_max"], m["group_size_min"]) == (2.5, 3, 1)
    ids, _, Y, _ = dataset_matrices(spark, ds)
    Y1 = y1_matrix(spark, str(tmp_path / "g3"), ids)
    expected = ((Y1.T @ Y) > 0).astype(np.int64)
    assert (y2_matrix(spark, str(tmp_path / "g3"), expected.shape) != expected).nnz == 0


def _file_digests(folder):
    return sorted(
        hashlib.sha256(p.read_bytes()).hexdigest() for p in pathlib.Path(folder).rglob("*.parquet")
    )


def test_same_seed_byte_identical(spark, delicious, random4, tmp_path):
    out, _ = random4
    again = str(tmp_path / "again")
    aggregate(spark, delicious, again, AggregateSettings(group_size=4, seed=0))
    for table in ("Y1", "Y2"):
        assert _file_digests(f"{out}/{table}") == _file_digests(f"{again}/{table}")
    other = str(tmp_path / "other")
    aggregate(spark, delicious, other, AggregateSettings(group_size=4, seed=1))
    assert _file_digests(f"{out}/Y1") != _file_digests(f"{other}/Y1")


def test_random_groups_bad_size(spark):
    with pytest.raises(ValueError, match="group_size must be >= 1"):
        random_groups(spark.range(3).withColumnRenamed("id", "sample_id"), 0, 0)


def twin_cluster(X, ids, depth, seed, max_iter=20):
    """Single-node twin: the same recursion in numpy, node by node."""
    rows = l2_normalize_rows(X)
    node = np.zeros(len(ids), dtype=np.int64)
    for level in range(depth):
        new = node.copy()
        for n in np.unique(node):
            members = np.flatnonzero(node == n)  # ids are sorted, as the Spark side sorts
            right = balanced_2means(rows[members], seed=[seed, level, int(n)], max_iter=max_iter)
            new[members] = 2 * n + right
        node = new
    _, group = np.unique(node, return_inverse=True)
    return group


def mean_within_group_cosine(X, group):
    rows = l2_normalize_rows(X)
    total, pairs = 0.0, 0
    for g in np.unique(group):
        members = rows[np.flatnonzero(group == g)]
        gram = (members @ members.T).toarray()
        m = members.shape[0]
        total += gram.sum() - np.trace(gram)
        pairs += m * (m - 1)
    return total / pairs


def test_cluster_groups_match_twin_and_are_homogeneous(spark, delicious, tmp_path):
    ids, X, _, manifest = dataset_matrices(spark, delicious)
    Xdf = read_table(spark, delicious, "X")
    Y1 = cluster_groups(Xdf, manifest["n_features"], depth=6, seed=3)
    got = {r.sample_id: r.group_id for r in Y1.collect()}
    spark_groups = np.array([got[i] for i in ids])
    twin = twin_cluster(X, ids, depth=6, seed=3)
    assert np.array_equal(spark_groups, twin)
    sizes = np.bincount(spark_groups)
    assert len(sizes) == 64 and sizes.max() - sizes.min() <= 1  # balanced: 201 or 202
    rnd = read_table(
        spark,
        aggregate(spark, delicious, str(tmp_path / "r"), AggregateSettings(group_size=202, seed=0))
        and str(tmp_path / "r"),
        "Y1",
    ).collect()
    rnd_map = {r.sample_id: r.group_id for r in rnd}
    random_cos = mean_within_group_cosine(X, np.array([rnd_map[i] for i in ids]))
    cluster_cos = mean_within_group_cosine(X, spark_groups)
    noisy = {
        r.sample_id: r.group_id
        for r in cluster_groups(Xdf, manifest["n_features"], depth=6, seed=3, noise=0.2).collect()
    }
    noisy_cos = mean_within_group_cosine(X, np.array([noisy[i] for i in ids]))
    # measured on delicious: random 0.054, noise 0.2 -> 0.166, clean 0.284 (noise 0.05 -> 0.263)
    assert cluster_cos > 4 * random_cos
    assert random_cos < noisy_cos < cluster_cos


def test_cluster_aggregate_manifest(spark, delicious, tmp_path, capsys):
    from eagle_spark.cli import main

    out = tmp_path / "c"
    assert (
        main(
            [
                "aggregate",
                "--input",
                delicious,
                "--output",
                str(out),
                "--grouping",
                "cluster",
                "--depth",
                "3",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_groups"] == 8 and summary["group_size_max"] == 1615
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["parameters"]["grouping"] == "cluster" and manifest["parameters"]["depth"] == 3
    assert manifest["group_size_histogram"] == {"1615": 8}


def test_bad_cluster_arguments(spark, delicious):
    X = read_table(spark, delicious, "X")
    with pytest.raises(ValueError, match="depth"):
        cluster_groups(X, 500, depth=-1, seed=0)
    with pytest.raises(ValueError, match="noise"):
        cluster_groups(X, 500, depth=1, seed=0, noise=-1.0)
    with pytest.raises(ValueError, match="max_iter"):
        balanced_2means(np.eye(3), seed=0, max_iter=0)
