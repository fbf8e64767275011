"""Synthetic generator: shapes, determinism (byte-identical), and the Spark job == the generator."""

import hashlib
import json
import pathlib

import numpy as np
import pytest

from eagle_spark.cli import main
from eagle_spark.errors import BadInputError
from eagle_spark.io.tables import read_table
from eagle_spark.synth import PRESETS, Generator, scaled_shape, synth


def digests(folder):
    root = pathlib.Path(folder)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def small(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("synth") / "w")
    pair = synth(spark, out, "wiki325k", scale=0.002, seed=7, rows_per_task=1000)
    return out, pair


def test_shape_statistics(small):
    _, pair = small
    shape = pair["shape"]
    assert (shape["n_train"], shape["n_test"]) == (3557, 1174)
    assert (shape["n_features"], shape["n_labels"]) == (3236, 650)
    train = pair["splits"]["train"]
    assert train["n_samples"] == 3557
    assert abs(train["labels_per_sample"] - 3.19) < 0.05
    assert abs(train["nnz_per_sample"] - 42) < 1.0
    assert abs(train["samples_per_label"] - 17.46) < 0.3
    assert train["max_samples_per_label"] > 20 * train["median_samples_per_label_among_used"]


def test_same_seed_byte_identical_and_partitioning_free(spark, small, tmp_path):
    out, _ = small
    again = str(tmp_path / "again")
    synth(spark, again, "wiki325k", scale=0.002, seed=7, rows_per_task=1000)
    assert digests(out) == digests(again)
    other_tasks = str(tmp_path / "tasks")
    synth(spark, other_tasks, "wiki325k", scale=0.002, seed=7, rows_per_task=700)
    rows = lambda d: sorted((r.sample_id, tuple(r.feat_idx), tuple(r.feat_val))  # noqa: E731
                            for r in read_table(spark, f"{d}/train", "X").collect())
    assert rows(out) == rows(other_tasks)
    different = str(tmp_path / "seed8")
    synth(spark, different, "wiki325k", scale=0.002, seed=8, rows_per_task=1000)
    assert digests(out) != digests(different)


def test_spark_output_equals_generator_twin(spark, small):
    out, pair = small
    shape = scaled_shape("wiki325k", 0.002)
    gen = Generator(shape=shape, seed=7)
    ids = np.arange(50, 80, dtype=np.int64)
    lab_off, labels = gen.labels(1, ids, gen.label_cdf())
    f_off, fids, vals = gen.features(1, ids, lab_off, labels, gen.feature_cdf())
    X = {r.sample_id: r for r in read_table(spark, f"{out}/test", "X").where("sample_id between 50 and 79").collect()}
    Y = {r.sample_id: r.label_ids for r in read_table(spark, f"{out}/test", "Y").where("sample_id between 50 and 79").collect()}
    for k, sid in enumerate(ids):
        assert Y[sid] == labels[lab_off[k]:lab_off[k + 1]].tolist()
        assert X[sid].feat_idx == fids[f_off[k]:f_off[k + 1]].tolist()
        np.testing.assert_allclose(X[sid].feat_val, vals[f_off[k]:f_off[k + 1]], rtol=1e-6)
        assert abs(np.linalg.norm(X[sid].feat_val) - 1) < 1e-5


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_shape(preset):
    shape = scaled_shape(preset, 0.01)
    gen = Generator(shape=shape, seed=0)
    ids = np.arange(2000, dtype=np.int64)
    lab_off, labels = gen.labels(0, ids, gen.label_cdf())
    f_off, fids, _ = gen.features(0, ids, lab_off, labels, gen.feature_cdf())
    assert abs(len(labels) / 2000 - shape.labels_per_sample) / shape.labels_per_sample < 0.03
    assert abs(len(fids) / 2000 - shape.nnz_per_sample) / shape.nnz_per_sample < 0.05
    assert labels.max() < shape.n_labels and fids.max() < shape.n_features


def test_bad_arguments(spark, tmp_path, capsys):
    with pytest.raises(BadInputError, match="unknown preset 'nope'"):
        scaled_shape("nope", 1.0)
    with pytest.raises(BadInputError, match=r"scale must be in \(0, 1\]"):
        scaled_shape("wiki325k", 1.5)
    assert main(["synth", "--output", str(tmp_path / "s"), "--scale", "0"]) == 2
    assert "synth.scale must be in (0, 1]" in capsys.readouterr().err


def test_cli_summary(spark, tmp_path, capsys):
    assert main(["synth", "--output", str(tmp_path / "e"), "--preset", "eurlex4k",
                 "--scale", "0.02"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["train_n_samples"] == 311 and summary["n_labels"] == 80
    assert (tmp_path / "e" / "train" / "_manifest.json").exists()
