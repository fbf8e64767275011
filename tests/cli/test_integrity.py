"""Integrity of what is on disk: file lists, manifests checked against their tables, replaces
without a window, files the CLI writes, and clear last lines (the catalogue in docs/design.md)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from eagle_spark.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _error_line(err: str, command: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith(f"eagle-spark {command}: error:")]
    assert lines, err
    return lines[-1]


# ------------------------------------------------------------------ replacing an output, killed

_WRITER = textwrap.dedent("""
    import sys
    from eagle_spark.io.fs import atomic_output
    from eagle_spark.session import build_spark
    from eagle_spark.settings import SparkSettings
    spark = build_spark(SparkSettings(master="local[1]", driver_memory="1g",
                                    extra={"spark.ui.enabled": "false"}))
    with atomic_output(spark, sys.argv[1], overwrite=True) as tmp:
        import os
        os.makedirs(tmp + "/T")
        for i in range(3):
            open(f"{tmp}/T/part-{i}.txt", "w").write("new" * (i + 1))
    print("committed")
""")


def _write_folder(spark, target: pathlib.Path, word: str, overwrite: bool = False) -> None:
    from eagle_spark.io.fs import atomic_output

    with atomic_output(spark, str(target), overwrite=overwrite) as tmp:
        os.makedirs(f"{tmp}/T")
        for i in range(3):
            pathlib.Path(f"{tmp}/T/part-{i}.txt").write_text(word * (i + 1))


def _content(target: pathlib.Path) -> set[str]:
    return {p.read_text() for p in (target / "T").iterdir()}


@pytest.mark.parametrize(
    "step,survivor",
    [("written", "old"), ("moved-old", "old"), ("moved-new", "new"), ("deleted-old", "new")],
)
def test_replace_killed_at_each_step_leaves_old_or_new_complete(spark, tmp_path, step, survivor):
    """A replace killed right after each of its steps (the process exits, no clean-up runs):
    the next reader finds the old or the new output complete and listed, the old one is never
    deleted without overwrite, and the next replace leaves no sibling behind."""
    from eagle_spark.errors import OutputExistsError
    from eagle_spark.io.fs import FAULT_ENV, require_exists
    from eagle_spark.io.integrity import check_folder

    target = tmp_path / "out"
    _write_folder(spark, target, "old")
    env = {**os.environ, FAULT_ENV: step, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 137, done.stderr[-2000:]
    assert "committed" not in done.stdout
    if step == "moved-old":  # the window the fix closes: the target is gone, the old one aside
        assert not target.exists()
    require_exists(spark, str(target), "output")  # what every reader does first
    check_folder(str(target), "output", full=True)
    assert _content(target) == {w * n for w in [survivor] for n in (1, 2, 3)}
    with pytest.raises(OutputExistsError):
        _write_folder(spark, target, "third")  # without overwrite: kept
    assert _content(target) == {survivor * n for n in (1, 2, 3)}
    _write_folder(spark, target, "third", overwrite=True)
    assert _content(target) == {"third" * n for n in (1, 2, 3)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no .old / .tmp left


def test_restored_output_is_logged(spark, tmp_path, caplog):
    """The repair says what it did."""
    from eagle_spark.io import fs as fs_module

    target = tmp_path / "out"
    _write_folder(spark, target, "old")
    aside = tmp_path / ".out.old-0000000000001-999999-abcdefabcdef-otherhost"
    target.rename(aside)
    with caplog.at_level("WARNING"):
        assert fs_module.restore_interrupted(spark, str(target))
    assert _content(target) == {"old", "oldold", "oldoldold"}
    assert "restored" in caplog.text and "interrupted" in caplog.text


# ------------------------------------------------------------------ the catalogue (issue cases)


@pytest.fixture(scope="module")
def trained(spark, tmp_path_factory):
    """A small ingested train / test pair of the embedded Delicious data, a tree model, and its
    predictions (everything written by the CLI, so every folder has its file list)."""
    from tests.conftest import delicious_slice

    root = tmp_path_factory.mktemp("integrity")
    for split, n in (("train", 400), ("test", 120)):
        path = delicious_slice(root, split, n)
        assert main(["ingest", "--input", path, "--output", str(root / split)]) == 0
    assert (
        main(
            [
                "train",
                "--input",
                str(root / "train"),
                "--output",
                str(root / "model"),
                "--model",
                "tree",
                "--set",
                "tree.n_trees=2",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "predict",
                "--model",
                str(root / "model"),
                "--input",
                str(root / "test"),
                "--output",
                str(root / "pred"),
            ]
        )
        == 0
    )
    return root


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def _edit_json(path: pathlib.Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2))


def test_every_committed_folder_lists_its_files(trained):
    """Datasets, models and predictions carry _files.json with each file's size, CRC-32 and, for
    Parquet, rows and integer column bounds from the footer; outside readers still read them."""
    import zlib

    import pyarrow.dataset as pads

    for name in ("train", "model", "pred"):
        listing = json.loads((trained / name / "_files.json").read_text())
        files = listing["files"]
        on_disk = {
            str(p.relative_to(trained / name))
            for p in (trained / name).rglob("*")
            if p.is_file()
            and not any(s.startswith(".") for s in p.relative_to(trained / name).parts)
        }
        assert set(files) == on_disk - {"_files.json", "_manifest.json"}
        for rel, entry in files.items():
            data = (trained / name / rel).read_bytes()
            assert entry["size"] == len(data)
            assert entry["crc32"] == f"{zlib.crc32(data) & 0xFFFFFFFF:08x}"
    x = json.loads((trained / "train" / "_files.json").read_text())["files"]
    table = pads.dataset(str(trained / "train" / "X")).to_table()
    assert sum(e["rows"] for r, e in x.items() if r.startswith("X/")) == table.num_rows == 400
    assert max(e["max"]["feat_idx"] for r, e in x.items() if r.startswith("X/")) == max(
        max(v) for v in table.column("feat_idx").to_pylist() if v
    )
    assert pads.dataset(str(trained / "pred" / "predictions")).to_table().num_rows == 120


def test_case_1_model_missing_a_weights_part_is_refused(trained, tmp_path, capsys):
    model = _copy(trained / "model", tmp_path / "model")
    part = sorted((model / "data" / "weights_0").glob("*.parquet"))[0]
    part.unlink()
    code = main(
        [
            "predict",
            "--model",
            str(model),
            "--input",
            str(trained / "test"),
            "--output",
            str(tmp_path / "p"),
        ]
    )
    line = _error_line(capsys.readouterr().err, "predict")
    assert code == 2
    assert f"model {model}" in line and "table data/weights_0" in line and part.name in line
    assert "is missing" in line
    assert not (tmp_path / "p").exists()


def test_case_2_label_ids_beyond_n_labels_are_refused_before_any_task(trained, tmp_path, capsys):
    data = _copy(trained / "train", tmp_path / "train")
    _edit_json(data / "_manifest.json", n_labels=20)
    code = main(["train", "--input", str(data), "--output", str(tmp_path / "m"), "--model", "tree"])
    line = _error_line(capsys.readouterr().err, "train")
    assert code == 2
    assert f"dataset {data}" in line and "says n_labels=20 but table Y has label_ids" in line


def test_y_matrix_refuses_out_of_range_ids_naming_the_sample():
    """The bounds check where the sparse matrix is built (a worker used to segfault): a twin fed
    one id beyond n_labels."""
    import pyarrow as pa

    from eagle_spark.io.parts import y_matrix

    yt = pa.table(
        {
            "sample_id": pa.array([0, 1], pa.int64()),
            "label_ids": pa.array([[0, 2], [5]], pa.list_(pa.int32())),
        }
    )
    assert y_matrix(yt, 6).toarray().astype(int).tolist() == [
        [1, 0, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 1],
    ]
    with pytest.raises(ValueError, match="5") as info:
        y_matrix(yt, 5, what="d/Y")
    assert "d/Y" in str(info.value) and "sample" in str(info.value)


def test_case_3_summary_may_not_destroy_an_input_or_an_existing_file(trained, tmp_path, capsys):
    manifest = trained / "test" / "_manifest.json"
    before = manifest.read_bytes()
    code = main(
        [
            "evaluate",
            "--predictions",
            str(trained / "pred"),
            "--input",
            str(trained / "test"),
            "--output",
            str(tmp_path / "m1"),
            "--summary",
            str(manifest),
        ]
    )
    line = _error_line(capsys.readouterr().err, "evaluate")
    assert code == 2 and "lies inside the input" in line
    assert manifest.read_bytes() == before
    summary = tmp_path / "summary.json"
    summary.write_text("keep me\n")
    code = main(
        [
            "evaluate",
            "--predictions",
            str(trained / "pred"),
            "--input",
            str(trained / "test"),
            "--output",
            str(tmp_path / "m2"),
            "--summary",
            str(summary),
        ]
    )
    line = _error_line(capsys.readouterr().err, "evaluate")
    assert code == 2 and "exists" in line and "--overwrite" in line
    assert summary.read_text() == "keep me\n" and not (tmp_path / "m2").exists()
    code = main(
        [
            "evaluate",
            "--predictions",
            str(trained / "pred"),
            "--input",
            str(trained / "test"),
            "--output",
            str(tmp_path / "m3"),
            "--summary",
            str(summary),
            "--overwrite",
        ]
    )
    assert code == 0 and json.loads(summary.read_text())["command"] == "evaluate"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("command", ["embed", "train", "predict"])
def test_case_4_n_features_below_the_largest_feature_id_is_refused_by_name(
    trained, tmp_path, capsys, command
):
    data = _copy(trained / "train", tmp_path / "train")
    _edit_json(data / "_manifest.json", n_features=100)
    args = {
        "embed": ["embed", "--input", str(data), "--output", str(tmp_path / "o")],
        "train": ["train", "--input", str(data), "--output", str(tmp_path / "o")],
        "predict": [
            "predict",
            "--model",
            str(trained / "model"),
            "--input",
            str(data),
            "--output",
            str(tmp_path / "o"),
        ],
    }[command]
    code = main(args)
    line = _error_line(capsys.readouterr().err, command)
    assert code == 2
    assert f"dataset {data}" in line and "says n_features=100 but table X has feat_idx" in line


def test_case_5_n_samples_disagreeing_with_x_is_refused(trained, tmp_path, capsys):
    data = _copy(trained / "test", tmp_path / "test")
    _edit_json(data / "_manifest.json", n_samples=60)
    code = main(
        [
            "predict",
            "--model",
            str(trained / "model"),
            "--input",
            str(data),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    line = _error_line(capsys.readouterr().err, "predict")
    assert code == 2 and "says n_samples=60 but table X has 120 rows" in line
    # rows removed from X (a part rewritten with half its rows): its size no longer matches
    import pyarrow.parquet as pq

    data = _copy(trained / "test", tmp_path / "test2")
    part = sorted((data / "X").glob("*.parquet"))[0]
    table = pq.read_table(part)
    pq.write_table(table.slice(0, table.num_rows // 2), part)
    code = main(
        [
            "predict",
            "--model",
            str(trained / "model"),
            "--input",
            str(data),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    line = _error_line(capsys.readouterr().err, "predict")
    assert (
        code == 2 and "table X" in line and part.name in line and "truncated or rewritten" in line
    )


@pytest.mark.parametrize("damage", ["tree folder removed", "n_trees edited", "file added"])
def test_case_6_damaged_model_is_refused_naming_model_and_file(trained, tmp_path, capsys, damage):

    model = _copy(trained / "model", tmp_path / "model")
    if damage == "tree folder removed":
        folder = sorted(p for p in (model / "data").iterdir() if p.name.endswith("_1"))[0]
        shutil.rmtree(folder)
        expected = f"{folder.name}/"
    elif damage == "n_trees edited":
        _edit_json(model / "metadata.json", n_trees=1)
        expected = "file metadata.json has"
    else:
        extra = model / "data" / "weights_0" / "part-99999.parquet"
        shutil.copy(sorted((model / "data" / "weights_0").glob("*.parquet"))[0], extra)
        expected = "part-99999.parquet is not in its file list"
    code = main(
        [
            "predict",
            "--model",
            str(model),
            "--input",
            str(trained / "test"),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    line = _error_line(capsys.readouterr().err, "predict")
    assert code == 2 and f"model {model}" in line and expected in line, line


def _predict_argv(model, data, out) -> list[str]:
    return ["predict", "--model", str(model), "--input", str(data), "--output", str(out)]


def _predict(model, data, out) -> int:
    """`eagle-spark predict` of `model` on `data` into `out`; its exit code."""
    return main(_predict_argv(model, data, out))


def test_a_removed_file_list_is_refused_not_read_unchecked(trained, tmp_path, capsys):
    """A model whose list was deleted and one of whose weights parts was swapped for another's:
    its metadata.json says the commit listed it, so predict refuses it instead of predicting."""

    model = _copy(trained / "model", tmp_path / "model")
    assert json.loads((model / "metadata.json").read_text())["file_list"] == "_files.json"
    (model / "_files.json").unlink()
    parts = sorted((model / "data" / "weights_0").glob("*.parquet"))
    other = sorted((model / "data" / "weights_1").glob("*.parquet"))[0]
    shutil.copy(other, parts[0])
    out = tmp_path / "o"
    code = _predict(model, trained / "test", out)
    line = _error_line(capsys.readouterr().err, "predict")
    assert code == 2 and f"model {model} has no file list _files.json" in line, line
    assert f"{model}/metadata.json says eagle_spark listed its files" in line
    assert not out.exists()
    # a dataset's manifest carries the same mark; so does a saved pyspark.ml stage (test_api)
    data = _copy(trained / "test", tmp_path / "test")
    assert json.loads((data / "_manifest.json").read_text())["file_list"] == "_files.json"
    (data / "_files.json").unlink()
    assert main(["verify", "--input", str(data)]) == 2
    assert f"{data}/_manifest.json says eagle_spark" in _error_line(
        capsys.readouterr().err, "verify"
    )


def test_a_list_that_omits_a_table_is_refused(trained, tmp_path, capsys):
    """A test set whose list lost X's entries and whose X was swapped for another X: every file of
    a listed folder must be listed, so verify, predict and evaluate refuse it."""

    data = _copy(trained / "test", tmp_path / "test")
    path = data / "_files.json"
    listing = json.loads(path.read_text())
    listing["files"] = {r: e for r, e in listing["files"].items() if not r.startswith("X/")}
    path.write_text(json.dumps(listing))
    shutil.rmtree(data / "X")
    shutil.copytree(trained / "train" / "X", data / "X")
    assert main(["verify", "--input", str(data)]) == 2
    line = _error_line(capsys.readouterr().err, "verify")
    assert f"dataset {data}" in line or f"folder {data}" in line, line
    assert "table X: file X/" in line and "is not in its file list" in line
    code = _predict(trained / "model", data, tmp_path / "p")
    assert code == 2 and "is not in its file list" in _error_line(
        capsys.readouterr().err, "predict"
    )
    assert not (tmp_path / "p").exists()
    code = main(["evaluate", "--predictions", str(trained / "pred"), "--input", str(data)])
    assert code == 2 and "is not in its file list" in _error_line(
        capsys.readouterr().err, "evaluate"
    )


def test_verify_refuses_an_empty_list(tmp_path, capsys):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "_files.json").write_text(json.dumps({"format_version": 1, "files": {}}))
    assert main(["verify", "--input", str(folder)]) == 2
    assert "lists no file" in _error_line(capsys.readouterr().err, "verify")


def test_altered_parquet_of_the_same_size_is_found_by_verify(trained, tmp_path, capsys):
    data = _copy(trained / "test", tmp_path / "test")
    assert main(["verify", "--input", str(data), "--input", str(trained / "model")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [v["folder"] for v in out["verified"]] == [str(data), str(trained / "model")]
    part = sorted((data / "Y").glob("*.parquet"))[0]
    raw = bytearray(part.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    part.write_bytes(bytes(raw))
    assert main(["verify", "--input", str(data)]) == 2
    line = _error_line(capsys.readouterr().err, "verify")
    assert "table Y" in line and part.name in line and "CRC-32" in line


def test_verify_record_lists_a_folder_written_by_another_tool(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "made"
    (folder / "X").mkdir(parents=True)
    pq.write_table(
        pa.table({"sample_id": pa.array([0, 1], pa.int64())}), folder / "X" / "p.parquet"
    )
    assert main(["verify", "--input", str(folder)]) == 2
    assert "no file list" in _error_line(capsys.readouterr().err, "verify")
    assert main(["verify", "--input", str(folder), "--record"]) == 0
    assert json.loads((folder / "_files.json").read_text())["files"]["X/p.parquet"]["rows"] == 2
    assert main(["verify", "--input", str(folder), "--record"]) == 2  # a list is never replaced


def test_case_7_empty_label_space_is_a_value_error_naming_the_column(spark):
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql import types as T

    from eagle_spark.ml import LabelTreeClassifier

    schema = T.StructType(
        [
            T.StructField("features", VectorUDT()),
            T.StructField("labels", T.ArrayType(T.IntegerType())),
        ]
    )
    frame = spark.createDataFrame(
        [(Vectors.dense([1.0, 0.0]), []), (Vectors.dense([0.0, 1.0]), None)], schema
    )
    with pytest.raises(ValueError, match="label column 'labels' holds no label id in any row"):
        LabelTreeClassifier().fit(frame)


def test_case_8_conf_that_is_not_utf8_exits_2_naming_the_file(tmp_path, capsys):
    conf = tmp_path / "bad.yaml"
    conf.write_bytes(b"spark:\n  app_name: caf\xe9\n")
    assert main(["train", "--conf", str(conf), "--input", "x", "--output", "y"]) == 2
    err = capsys.readouterr().err
    assert f"settings file {conf} is not UTF-8" in err.strip().splitlines()[-1]


def test_case_9_full_disk_ends_in_one_error_line_naming_the_path(
    trained, tmp_path, capsys, monkeypatch
):
    """The storage refusing a write (a Java IOException from the commit, as Spark raises it, and
    a Python OSError) ends in one `eagle-spark <command> error:` line, exit 2."""
    import errno

    from eagle_spark.io import fs as fs_module

    def full(self, src, dst):
        raise RuntimeError(
            "An error occurred while calling o77.rename.\n: java.io.IOException: "
            "No space left on device\n\tat java.base/java.io.FileOutputStream.write"
        )

    monkeypatch.setattr(fs_module.FileSystem, "rename", full)
    out = tmp_path / "p"
    code = main(
        [
            "predict",
            "--model",
            str(trained / "model"),
            "--input",
            str(trained / "test"),
            "--output",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("eagle-spark predict: error:") and str(out) in last
    assert "no space left on the device" in last
    monkeypatch.undo()

    from eagle_spark.io import integrity

    def denied(folder):
        raise PermissionError(errno.EACCES, "Permission denied", f"{folder}/_files.json")

    monkeypatch.setattr(integrity, "record", denied)
    code = main(
        [
            "predict",
            "--model",
            str(trained / "model"),
            "--input",
            str(trained / "test"),
            "--output",
            str(out),
        ]
    )
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("eagle-spark predict: error: cannot write ")
    assert "_files.json: permission denied" in last
    assert not out.exists()


def test_case_9_short_idx_file_gives_the_real_sizes(tmp_path):
    from eagle_spark.errors import BadInputError
    from eagle_spark.miml.data import read_idx

    path = tmp_path / "t10k-images-idx3-ubyte"
    path.write_bytes((0x803).to_bytes(4, "big") + (2).to_bytes(4, "big"))  # 8 of 16 header bytes
    with pytest.raises(BadInputError, match="8 bytes, shorter than its 16-byte header"):
        read_idx(str(path))
    path.write_bytes((0x801).to_bytes(4, "big") + (5).to_bytes(4, "big") + bytes(3))
    with pytest.raises(
        BadInputError,
        match=r"header says 5 = 5 values \(13 bytes with the 8-byte "
        r"header\), the file has 11 bytes \(3 values\)",
    ):
        read_idx(str(path))


def test_evaluate_checks_the_predictions_folder(trained, tmp_path, capsys):
    """A prediction part removed after predict: evaluate names it instead of scoring fewer rows."""
    pred = _copy(trained / "pred", tmp_path / "pred")
    part = sorted((pred / "predictions").glob("*.parquet"))[0]
    part.unlink()
    code = main(["evaluate", "--predictions", str(pred), "--input", str(trained / "test")])
    line = _error_line(capsys.readouterr().err, "evaluate")
    assert (
        code == 2 and f"predictions {pred}" in line and part.name in line and "is missing" in line
    )


def test_evaluate_refuses_predictions_of_another_dataset(trained, tmp_path, capsys):
    """Predictions of the test set against the training set: the manifest they were made on is
    not --input's (exit 2 naming both); a byte copy of the test set is the same commit."""
    pred, test = trained / "pred", trained / "test"
    code = main(["evaluate", "--predictions", str(pred), "--input", str(trained / "train")])
    line = _error_line(capsys.readouterr().err, "evaluate")
    assert code == 2 and f"predictions {pred} and dataset {trained / 'train'}" in line, line
    assert f"made on '{test}'" in line
    copy = _copy(test, tmp_path / "test")
    assert main(["evaluate", "--predictions", str(pred), "--input", str(copy)]) == 0


def test_evaluate_refuses_another_tools_predictions_beyond_the_dataset(trained, tmp_path, capsys):
    """Predictions without a manifest (another tool's) of 120 samples against a 50-sample set:
    more rows than samples and ids beyond its Y are exit 2, not P@k over a mismatch."""
    from tests.conftest import delicious_slice

    pred = _copy(trained / "pred", tmp_path / "pred")
    (pred / "_manifest.json").unlink()
    small = tmp_path / "small"
    assert (
        main(["ingest", "--input", delicious_slice(tmp_path, "test", 50), "--output", str(small)])
        == 0
    )
    capsys.readouterr()
    code = main(["evaluate", "--predictions", str(pred), "--input", str(small)])
    line = _error_line(capsys.readouterr().err, "evaluate")
    assert code == 2 and "120 predicted rows, the dataset has n_samples=50" in line, line


def test_evaluate_refuses_an_empty_test_set(trained, tmp_path, capsys):
    header_only = tmp_path / "empty.txt"
    header_only.write_text("0 500 983\n")
    empty = tmp_path / "empty"
    assert main(["ingest", "--input", str(header_only), "--output", str(empty)]) == 0
    capsys.readouterr()
    code = main(["evaluate", "--predictions", str(trained / "pred"), "--input", str(empty)])
    line = _error_line(capsys.readouterr().err, "evaluate")
    assert code == 2 and f"dataset {empty} has no samples" in line, line


def test_n_groups_disagreeing_with_y1_is_refused(trained, tmp_path, capsys):
    """The aggregated data's manifest against Y1's distinct group ids, recorded at commit."""
    agg = tmp_path / "agg"
    assert (
        main(
            [
                "aggregate",
                "--input",
                str(trained / "train"),
                "--output",
                str(agg),
                "--set",
                "aggregate.group_size=4",
            ]
        )
        == 0
    )
    capsys.readouterr()
    listing = json.loads((agg / "_files.json").read_text())
    manifest = json.loads((agg / "_manifest.json").read_text())
    assert listing["tables"]["Y1"]["distinct"]["group_id"] == manifest["n_groups"] == 100
    _edit_json(agg / "_manifest.json", n_groups=99)
    code = main(["embed", "--input", str(agg), "--output", str(tmp_path / "emb")])
    line = _error_line(capsys.readouterr().err, "embed")
    assert code == 2 and "says n_groups=99 but table Y1 has 100 distinct group_id" in line


# ------------------------------------------------------------------ one storage-error path
def _refused_commands(trained, agg, out):
    txt = str(trained / "test.txt")
    return {
        "ingest": ["ingest", "--input", txt, "--output", out],
        "export": ["export", "--input", str(trained / "test"), "--output", f"{out}.txt"],
        "aggregate": ["aggregate", "--input", str(trained / "train"), "--output", out],
        "synth": ["synth", "--preset", "eurlex4k", "--scale", "0.01", "--output", out],
        "embed": ["embed", "--input", agg, "--output", out, "--set", "embed.iterations=1"],
        "assign": ["assign", "--input", agg, "--method", "baseline", "--output", out],
        "train": ["train", "--input", str(trained / "train"), "--output", out, "--model", "tree"],
        "predict": _predict_argv(trained / "model", trained / "test", out),
        "evaluate": [
            "evaluate",
            "--predictions",
            str(trained / "pred"),
            "--input",
            str(trained / "test"),
            "--output",
            out,
        ],
        "pipeline": [
            "pipeline",
            "--dataset",
            str(trained / "train"),
            "--test-dataset",
            str(trained / "test"),
            "--output",
            out,
        ],
        "experiment": [
            "experiment",
            "table2",
            "--dataset",
            str(trained / "train"),
            "--test-dataset",
            str(trained / "test"),
            "--groupings",
            "R-4",
            "--output",
            out,
        ],
        "summary": [
            "verify",
            "--input",
            str(trained / "test"),
            "--summary",
            f"{out}.json",
        ],
    }


@pytest.mark.parametrize(
    "command",
    [
        "ingest",
        "export",
        "aggregate",
        "synth",
        "embed",
        "assign",
        "train",
        "predict",
        "evaluate",
        "pipeline",
        "experiment",
        "summary",
    ],
)
def test_a_refused_write_is_exit_2_in_one_line_naming_the_path(trained, tmp_path, capsys, command):
    """The output's parent is a regular file, which every layer (pyarrow.fs, Spark's writer,
    Hadoop) refuses as it refuses a read-only or forbidden folder: each command ends in exit 2
    and one error line naming the output, before any Spark job, with nothing written."""
    agg = trained / "agg4"
    if not agg.exists():
        assert main(["aggregate", "--input", str(trained / "train"), "--output", str(agg)]) == 0
    if not (trained / "test.txt").exists():
        assert (
            main(
                ["export", "--input", str(trained / "test"), "--output", str(trained / "test.txt")]
            )
            == 0
        )
    capsys.readouterr()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    out = str(blocker / "out")
    argv = _refused_commands(trained, str(agg), out)[command]
    code = main(argv)
    err = capsys.readouterr().err
    name = argv[0]
    line = _error_line(err, name)
    assert code == 2, err
    assert "cannot write " in line and str(blocker) in line, line
    if command != "summary":  # the summary file's own message says "File exists" (its parent)
        assert "a parent of it is a file, not a folder" in line, line
    assert "Traceback" not in err and "at org.apache" not in err
    assert blocker.read_text() == "not a folder\n"


def test_hadoops_refusals_are_storage_errors_naming_the_path():
    """What Spark's writer raises through Hadoop when a folder cannot be made (a read-only or
    forbidden parent, as a non-root user meets it) is the same one-line refusal."""
    from eagle_spark.errors import storage_error

    java = (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o81.parquet.\n"
        ": java.io.IOException: Mkdirs failed to create file:/data/ro/.agg.tmp-1/Y1/_temporary/0 "
        "(exists=false, cwd=file:/home/u)\n\tat org.apache.hadoop.fs.ChecksumFileSystem.create"
    )
    err = storage_error(RuntimeError(java), "/data/ro/agg")
    assert str(err).startswith(
        "cannot write /data/ro/.agg.tmp-1/Y1/_temporary/0: its folder cannot be created "
        "(permission denied, read-only, or a parent is a file)"
    )
    parent = storage_error(
        RuntimeError("org.apache.hadoop.fs.ParentNotDirectoryException: /data/f is not a directory")
    )
    assert "/data/f: a parent of it is a file, not a folder" in str(parent)
