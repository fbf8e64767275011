"""Cost follows the labels present: a training set whose label ids reach far beyond the labels it
holds trains (and stores) only those labels, and its model predicts what the same classifier
trained on the labels numbered 0 .. m-1 predicts, with the ids given back."""

import logging
import pathlib

import numpy as np
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from eagle_spark.classifiers.labels import LABEL_MAP, SPARSE_SLACK
from eagle_spark.classifiers.ova import predict_ova, train_ova
from eagle_spark.classifiers.tree import predict_tree, train_tree
from eagle_spark.io.ingest import ingest
from eagle_spark.io.tables import read_table
from eagle_spark.ml import Dataset, OneVsRestXMC
from eagle_spark.settings import IngestSettings, OVASettings, TreeSettings
from tests.conftest import delicious_slice

SPREAD = 10_007  # label i of the compact set is id i x SPREAD + 3 of the spread one
N_SPREAD = 10**7


def _relabelled(spark, source, path, ids, n_labels):
    """`source` in groups of 4 consecutive samples, each label id l (of a sample and of its
    group) written as ids[index of l among the present labels]."""
    frame = Dataset.load(spark, source).samples()
    present = sorted({int(x) for r in frame.select("labels").collect() for x in r.labels})
    mapping = F.create_map(*[F.lit(v) for old, new in zip(present, ids) for v in (old, int(new))])
    frame = frame.withColumn(
        "labels", F.transform("labels", lambda x: F.element_at(mapping, x).cast("int"))
    ).withColumn("group_id", (F.col("sample_id") / 4).cast("long"))
    group_labels = frame.groupBy("group_id").agg(
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("labels")))).alias("group_labels")
    )
    frame = frame.join(group_labels, "group_id").orderBy("sample_id")
    return Dataset.from_samples(
        frame.drop("sample_id"), path, numFeatures=500, numLabels=n_labels
    ).path, len(present)


@pytest.fixture(scope="module")
def pair(spark, tmp_path_factory):
    """(compact, spread, m): the first 600 delicious training samples with their m present labels
    numbered 0 .. m-1, and the same with label i as id i x SPREAD + 3 of 10^7 labels; the first
    200 test samples."""
    root = tmp_path_factory.mktemp("labels")
    src = str(root / "src")
    ingest(spark, delicious_slice(root, "train", 600), src, IngestSettings())
    test = str(root / "test")
    ingest(spark, delicious_slice(root, "test", 200), test, IngestSettings())
    compact, m = _relabelled(spark, src, str(root / "compact"), np.arange(983), None)
    spread, _ = _relabelled(spark, src, str(root / "spread"), np.arange(983) * SPREAD + 3, N_SPREAD)
    return compact, spread, m, test


def _predictions(spark, predict, path, test, **kw):
    X = read_table(spark, test, "X")
    rows = sorted(predict(spark, path, X, 500, 5, **kw).collect(), key=lambda r: r.sample_id)
    return [list(r.label_ids) for r in rows], np.array([list(r.scores) for r in rows])


def test_ova_trains_and_stores_only_the_labels_present(spark, pair, tmp_path, caplog):
    compact, spread, m, test = pair
    assert N_SPREAD > 2 * m + SPARSE_SLACK
    params = OVASettings(tasks=2, min_task_work=0)
    train_ova(spark, compact, str(tmp_path / "c"), params)
    with caplog.at_level(logging.WARNING, logger="eagle_spark.classifiers.labels"):
        meta = train_ova(spark, spread, str(tmp_path / "s"), params)
    warned = [r.getMessage() for r in caplog.records if "empty labels" in r.getMessage()]
    assert len(warned) == 1 and f"{N_SPREAD - m} empty labels" in warned[0], warned
    assert spread in warned[0]
    assert (meta["n_labels"], meta["n_labels_trained"], meta["n_labels_empty"]) == (
        N_SPREAD,
        m,
        N_SPREAD - m,
    )
    assert meta["n_labels_without_positives"] == N_SPREAD - m
    # the model holds m classifiers, the compact one's, and the map of their ids
    weights = {
        r.label_id: (list(r.w_idx), list(r.w_val), r.bias)
        for r in spark.read.parquet(str(tmp_path / "s" / "data" / "weights")).collect()
    }
    twin = {
        r.label_id: (list(r.w_idx), list(r.w_val), r.bias)
        for r in spark.read.parquet(str(tmp_path / "c" / "data" / "weights")).collect()
    }
    assert weights == twin and len(weights) == m
    label_map = pq.read_table(tmp_path / "s" / LABEL_MAP).to_pydict()
    assert label_map["label_id"] == [i * SPREAD + 3 for i in range(m)]
    assert not (tmp_path / "s" / "_labels").exists()  # the compact copy is gone
    got, got_scores = _predictions(spark, predict_ova, str(tmp_path / "s"), test)
    want, want_scores = _predictions(spark, predict_ova, str(tmp_path / "c"), test)
    assert got == [[i * SPREAD + 3 for i in row] for row in want]
    np.testing.assert_array_equal(got_scores, want_scores)


def test_the_groups_follow_the_compact_labels(spark, pair, tmp_path):
    """The refinement's scorer (within_groups, drawn negatives): the groups' Y2 is renumbered with
    Y, so every unassigned member of a label's groups stays among its negatives."""
    compact, spread, m, _ = pair
    params = OVASettings(tasks=2, min_task_work=0, negative_fraction=0.3)
    train_ova(spark, compact, str(tmp_path / "c"), params, within_groups=compact)
    meta = train_ova(spark, spread, str(tmp_path / "s"), params, within_groups=spread)
    assert meta["n_labels_trained"] == m and meta["within_groups"] == spread
    got, want = (
        sorted(
            tuple(r) for r in spark.read.parquet(str(tmp_path / p / "data" / "weights")).collect()
        )
        for p in ("s", "c")
    )
    assert got == want


def test_tree_trains_on_the_labels_present(spark, pair, tmp_path):
    compact, spread, m, test = pair
    params = TreeSettings(n_trees=1, tasks=2, max_leaf=20)
    train_tree(spark, compact, str(tmp_path / "c"), params)
    meta = train_tree(spark, spread, str(tmp_path / "s"), params)
    assert (meta["n_labels"], meta["n_labels_trained"]) == (N_SPREAD, m)
    assert meta["source"] == {"dataset": spread}
    got, got_scores = _predictions(spark, predict_tree, str(tmp_path / "s"), test, beam=10)
    want, want_scores = _predictions(spark, predict_tree, str(tmp_path / "c"), test, beam=10)
    assert got == [[i * SPREAD + 3 for i in row] for row in want]
    np.testing.assert_allclose(got_scores, want_scores, rtol=1e-6)


def test_few_empty_labels_are_trained_as_before(spark, pair, tmp_path):
    """delicious's own 983 labels, some without a sample in 600: no compact copy, a constant
    classifier for each empty label, as the one-vs-all always had."""
    src = str(pathlib.Path(pair[0]).parent / "src")
    meta = train_ova(spark, src, str(tmp_path / "o"), OVASettings(tasks=2, min_task_work=0))
    assert "label_map" not in meta and meta["n_labels"] == 983
    assert meta["n_labels_without_positives"] == 983 - pair[2] > 0
    assert spark.read.parquet(str(tmp_path / "o" / "data" / "weights")).count() == 983


def test_frames_with_one_stray_id_fit_in_the_labels_present(spark, pair, tmp_path):
    """From plain frames: 45 labels, one of them (label 0) written as id 2^31 - 2 (n_labels
    2^31 - 1); the fit trains the 45 and predicts the far one by its id."""
    compact, _, _, test = pair
    far = 2**31 - 2
    frame = Dataset.load(spark, compact).samples().where(F.size("labels") > 0)
    frame = frame.withColumn(
        "labels",
        F.array_sort(
            F.array_distinct(
                F.transform("labels", lambda x: F.when(x % 45 == 0, F.lit(far)).otherwise(x % 45))
            )
        ).cast("array<int>"),
    ).drop("sample_id")
    model = OneVsRestXMC(numTasks=2, topK=3).fit(frame)
    assert model.metadata["n_labels"] == far + 1
    assert model.metadata["n_labels_trained"] == 45
    predicted = {
        int(x) for r in model.transform(frame).select("prediction").collect() for x in r[0]
    }
    assert far in predicted and predicted <= set(range(1, 45)) | {far}
