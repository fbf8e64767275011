"""Ingest and export on Spark: real files, every bad-input case, atomic outputs, round trip."""

import json
import os

import pytest
from pyspark.sql import functions as F

from eagle_spark.cli import main
from eagle_spark.io.ingest import ingest
from eagle_spark.io.tables import read_manifest, read_table
from eagle_spark.settings import IngestSettings
from tests.conftest import shared_file

SMALL = "4 5 3\n0,2 0:1 3:0.5\n 1:2\n1 4:1.5 0:1\n2\n"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "name, split, n_samples, n_features, n_labels, labels_per_sample, no_label",
    [
        ("bibtex", "train", 4880, 1836, 159, 2.380, 0),
        ("bibtex", "test", 2515, 1836, 159, None, None),
        ("delicious", "train", 12920, 500, 983, 19.047, 10),
        ("delicious", "test", 3185, 500, 983, None, None),
    ],
)
def test_real_files(
    spark, tmp_path, name, split, n_samples, n_features, n_labels, labels_per_sample, no_label
):
    path = shared_file("xc", name, f"{split}.txt.gz")
    out = str(tmp_path / "ds")
    manifest = ingest(spark, str(path), out, IngestSettings())
    assert (manifest["n_samples"], manifest["n_features"], manifest["n_labels"]) == (
        n_samples,
        n_features,
        n_labels,
    )
    if labels_per_sample is not None:
        assert round(manifest["stats"]["labels_per_sample"], 3) == labels_per_sample
        assert manifest["stats"]["samples_without_labels"] == no_label
    X = read_table(spark, out, "X")
    assert X.count() == n_samples
    ids = X.agg(F.min("sample_id"), F.max("sample_id")).first()
    assert tuple(ids) == (0, n_samples - 1)
    # sorted, unique feature ids in every row
    assert X.where(F.col("feat_idx") != F.array_sort(F.array_distinct("feat_idx"))).count() == 0
    assert read_manifest(spark, out) == manifest


def test_small_file_tables(spark, tmp_path, write_text):
    src = write_text("small.txt", SMALL)
    out = str(tmp_path / "ds")
    manifest = ingest(spark, src, out, IngestSettings())
    X = {r.sample_id: (r.feat_idx, r.feat_val) for r in read_table(spark, out, "X").collect()}
    Y = {r.sample_id: r.label_ids for r in read_table(spark, out, "Y").collect()}
    assert X == {0: ([0, 3], [1.0, 0.5]), 1: ([1], [2.0]), 2: ([0, 4], [1.0, 1.5]), 3: ([], [])}
    assert Y == {0: [0, 2], 1: [], 2: [1], 3: [2]}
    assert manifest["stats"]["nnz"] == 5 and manifest["stats"]["n_positives"] == 4
    assert manifest["rejected"] == {"lines": 0}
    assert manifest["format_version"] == 1 and manifest["source"]["path"] == src
    schema = read_table(spark, out, "X").schema.simpleString()
    assert schema == "struct<sample_id:bigint,feat_idx:array<int>,feat_val:array<float>>"


BAD_CASES = [
    ("4 5 3\n0 0:1\n1 x:1\n2 0:1\n0 1:1\n", 3, "non-numeric feature id in 'x:1'"),
    ("4 5 3\n0 0:1\n1 1:1\n2 0:abc\n0 1:1\n", 4, "non-numeric feature value in '0:abc'"),
    ("4 5 3\n0 0:1\n1 1:1\n2 0:1\n0 1\n", 5, "missing ':' in feature token '1'"),
    ("4 5 3\n0 -2:1\n1 1:1\n2 0:1\n0 1:1\n", 2, "negative feature id in '-2:1'"),
    ("4 5 3\n0 0:1\n-1 1:1\n2 0:1\n0 1:1\n", 3, "negative label id '-1'"),
    ("4 5 3\n0 0:1\n1 5:1\n2 0:1\n0 1:1\n", 3, "feature id 5 is not below n_features=5"),
    ("4 5 3\n0 0:1\n3 1:1\n2 0:1\n0 1:1\n", 3, "label id 3 is not below n_labels=3"),
    ("4 5 3\n0 0:1\n1 1:1 1:2\n2 0:1\n0 1:1\n", 3, "duplicate feature id 1"),
    ("4 5 3\n0 0:1\n1 1:NaN\n2 0:1\n0 1:1\n", 3, "NaN or infinite feature value in '1:NaN'"),
    ("4 5 3\n0 0:1\n1 1:inf\n2 0:1\n0 1:1\n", 3, "NaN or infinite feature value in '1:inf'"),
    ("4 5 3\n0 0:1\n1 1:1\n2 0:1\n", 1, "header says 4 samples but the file has 3 sample lines"),
    (
        "4 5 3\n0 0:1\n1 1:1\n2 0:1\n0 1:1\n1 1:1\n",
        1,
        "header says 4 samples but the file has 5 sample lines",
    ),
    ("4 five 3\n0 0:1\n", 1, "header must be three non-negative integers"),
]


@pytest.mark.parametrize("text, line, message", BAD_CASES)
def test_bad_input_fails_with_file_and_line(
    spark, tmp_path, write_text, capsys, text, line, message
):
    src = write_text("bad.txt", text)
    out = tmp_path / "ds"
    code, stdout, stderr = run_cli(capsys, "ingest", "--input", src, "--output", str(out))
    assert code == 2
    assert f"{src}:{line}: {message}" in stderr
    assert stdout == ""
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.txt"]  # no temporary sibling left


def test_line_numbers_exact_across_splits(spark, tmp_path, write_text):
    lines = [f"{i % 7} {i % 50}:1 {50 + i % 50}:0.5" for i in range(3000)]
    lines[2222] = "1 3:1 3:2"
    src = write_text("big.txt", "3000 100 7\n" + "\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    try:
        assert spark.read.text(src).rdd.getNumPartitions() > 5
        with pytest.raises(ValueError, match=f"{src}:2224: duplicate feature id 3$"):
            ingest(spark, src, str(tmp_path / "ds"), IngestSettings())
        manifest = ingest(spark, src, str(tmp_path / "ok"), IngestSettings(on_bad_line="skip"))
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert manifest["n_samples"] == 2999
    X = read_table(spark, str(tmp_path / "ok"), "X")
    row = X.where("sample_id = 2223").first()  # line 2225 holds lines[2223]
    assert row.feat_idx == [2223 % 50, 50 + 2223 % 50]
    assert X.where("sample_id = 2222").count() == 0


def test_skip_mode_rejected_table_and_counts(spark, tmp_path, write_text, capsys):
    src = write_text("bad.txt.gz", "4 5 3\n0 0:1\n1 x:1\n2 0:1 0:2\n0 1:1\n")
    out = tmp_path / "ds"
    code, stdout, _ = run_cli(
        capsys, "ingest", "--input", src, "--output", str(out), "--on-bad-line", "skip"
    )
    assert code == 0
    summary = json.loads(stdout)
    assert summary["rejected_lines"] == 2 and summary["n_samples"] == 2
    rejected = spark.read.parquet(str(out / "_rejected")).orderBy("line").collect()
    assert [(r.line, r.text, r.reason) for r in rejected] == [
        (3, "1 x:1", "non-numeric feature id in 'x:1'"),
        (4, "2 0:1 0:2", "duplicate feature id 0"),
    ]
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["rejected"] == {"lines": 2}
    assert sorted(r.sample_id for r in read_table(spark, str(out), "X").collect()) == [0, 3]


def test_existing_output_kept_unless_overwrite(spark, tmp_path, write_text, capsys):
    src = write_text("small.txt", SMALL)
    out = tmp_path / "ds"
    assert run_cli(capsys, "ingest", "--input", src, "--output", str(out))[0] == 0
    before = (out / "_manifest.json").read_text()
    code, _, err = run_cli(capsys, "ingest", "--input", src, "--output", str(out))
    assert code == 2 and "exists; pass --overwrite" in err
    assert (out / "_manifest.json").read_text() == before
    other = write_text("other.txt", "1 5 3\n1 2:1\n")
    assert run_cli(capsys, "ingest", "--input", other, "--output", str(out), "--overwrite")[0] == 0
    assert json.loads((out / "_manifest.json").read_text())["n_samples"] == 1
    assert read_table(spark, str(out), "X").count() == 1


def test_failure_midway_leaves_no_output(spark, tmp_path, write_text, capsys, monkeypatch):
    src = write_text("small.txt", SMALL)
    out = tmp_path / "ds"
    assert run_cli(capsys, "ingest", "--input", src, "--output", str(out))[0] == 0
    previous = sorted(p.name for p in out.rglob("*"))
    import eagle_spark.io.ingest as ingest_module

    def explode(*args, **kwargs):
        raise RuntimeError("disk full while writing the manifest")

    monkeypatch.setattr(ingest_module, "write_manifest", explode)
    code, _, _ = run_cli(capsys, "ingest", "--input", src, "--output", str(out), "--overwrite")
    assert code == 1
    assert sorted(p.name for p in out.rglob("*")) == previous  # previous output intact
    fresh = tmp_path / "fresh"
    assert run_cli(capsys, "ingest", "--input", src, "--output", str(fresh))[0] == 1
    assert not fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "small.txt"]


def test_missing_input_and_folder_input(spark, tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "ingest", "--input", str(tmp_path / "nope.txt"), "--output", str(tmp_path / "ds")
    )
    assert code == 2 and f"input file {tmp_path / 'nope.txt'} does not exist" in err
    (tmp_path / "folder").mkdir()
    code, _, err = run_cli(
        capsys, "ingest", "--input", str(tmp_path / "folder"), "--output", str(tmp_path / "ds")
    )
    assert code == 2 and "is a folder" in err


def test_libsvm_one_based(spark, tmp_path, write_text):
    src = write_text("data.svm", "1,3 1:0.5 4:1\n0 2:2\n 3:1\n")
    out = str(tmp_path / "ds")
    manifest = ingest(spark, src, out, IngestSettings(format="libsvm", one_based=True))
    assert (manifest["n_samples"], manifest["n_features"], manifest["n_labels"]) == (3, 4, 4)
    X = {r.sample_id: r.feat_idx for r in read_table(spark, out, "X").collect()}
    assert X == {0: [0, 3], 1: [1], 2: [2]}
    with pytest.raises(ValueError, match=r"data.svm:1: feature id 3 is not below n_features=3"):
        ingest(
            spark,
            src,
            str(tmp_path / "x"),
            IngestSettings(format="libsvm", one_based=True, n_features=3),
        )


def _tables(spark, ds):
    X = sorted(
        (r.sample_id, tuple(r.feat_idx), tuple(r.feat_val))
        for r in read_table(spark, ds, "X").collect()
    )
    Y = sorted((r.sample_id, tuple(r.label_ids)) for r in read_table(spark, ds, "Y").collect())
    return X, Y


def test_export_round_trip(spark, tmp_path, write_text, capsys):
    src = write_text("small.txt", "4 5 3\n0,2 0:1 3:1e-07\n 1:2.25\n1 4:-1.5 0:1\n2\n")
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    ingest(spark, src, first, IngestSettings())
    exported = str(tmp_path / "out.txt.gz")
    code, stdout, _ = run_cli(capsys, "export", "--input", first, "--output", exported)
    assert code == 0 and json.loads(stdout)["n_samples"] == 4
    assert sorted(os.listdir(tmp_path)) == ["a", "out.txt.gz", "small.txt"]
    ingest(spark, exported, second, IngestSettings())
    assert _tables(spark, first) == _tables(spark, second)
    import gzip

    text = gzip.open(exported, "rt").read().splitlines()
    assert text[0] == "4 5 3" and text[2] == " 1:2.25" and text[4] == "2 "


def test_export_round_trip_delicious(spark, tmp_path):
    path = shared_file("xc", "delicious", "test.txt.gz")
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    ingest(spark, str(path), first, IngestSettings())
    from eagle_spark.io.export import export_xc

    export_xc(spark, first, str(tmp_path / "d.txt"))
    ingest(spark, str(tmp_path / "d.txt"), second, IngestSettings())
    assert _tables(spark, first) == _tables(spark, second)
