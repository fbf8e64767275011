"""Bad inputs to the main job: exit 2, a message naming the table and the id, nothing overwritten."""

from __future__ import annotations

import hashlib
import json
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eagle_spark.cli import main

N_SAMPLES, N_FEATURES, N_LABELS = 8, 5, 4


def _tables() -> dict[str, pa.Table]:
    """8 samples in 4 groups of 2; group g has label g % 4; sample i has feature i % 5."""
    ints = pa.list_(pa.field("element", pa.int32(), nullable=False))
    floats = pa.list_(pa.field("element", pa.float32(), nullable=False))
    ids = list(range(N_SAMPLES))
    return {
        "X": pa.table(
            {
                "sample_id": pa.array(ids, pa.int64()),
                "feat_idx": pa.array(
                    [[i % N_FEATURES, (i + 1) % N_FEATURES] if i % 5 < 4 else [0, 4] for i in ids],
                    ints,
                ),
                "feat_val": pa.array([[1.0, 0.5 + i / 10] for i in ids], floats),
            }
        ),
        "Y": pa.table(
            {
                "sample_id": pa.array(ids, pa.int64()),
                "label_ids": pa.array([[(i // 2) % N_LABELS] for i in ids], ints),
            }
        ),
        "Y1": pa.table(
            {
                "sample_id": pa.array(ids, pa.int64()),
                "group_id": pa.array([i // 2 for i in ids], pa.int64()),
            }
        ),
        "Y2": pa.table(
            {
                "group_id": pa.array([0, 1, 2, 3], pa.int64()),
                "label_id": pa.array([0, 1, 2, 3], pa.int32()),
                "count": pa.array([1, 1, 1, 1], pa.int32()),
            }
        ),
    }


def _manifest(**changes) -> dict:
    return {
        "format_version": 1,
        "kind": "aggregate",
        "n_samples": N_SAMPLES,
        "n_features": N_FEATURES,
        "n_labels": N_LABELS,
        "n_groups": 4,
        "parameters": {"grouping": "supplied"},
        **changes,
    }


def _write(folder: pathlib.Path, tables: dict[str, pa.Table], manifest: dict) -> str:
    for name, table in tables.items():
        (folder / name).mkdir(parents=True)
        pq.write_table(table, folder / name / "part-0.parquet")
    (folder / "_manifest.json").write_text(json.dumps(manifest))
    return str(folder)


def _snapshot(folder: pathlib.Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def good_run(spark, tmp_path_factory):
    """A valid aggregated dataset and a run folder that a successful pipeline run filled."""
    root = tmp_path_factory.mktemp("bad_input")
    dataset = _write(root / "good", _tables(), _manifest())
    run = root / "run"
    code = main(
        [
            "pipeline",
            "--dataset",
            dataset,
            "--no-aggregate",
            "--output",
            str(run),
            "--until",
            "assign",
            "--set",
            "embed.iterations=2",
            "--set",
            "assign.weighting=hard",  # Algorithm 2: one member per (group, label)
        ]
    )
    assert code == 0
    return root, run


def test_valid_existing_dataset_runs(good_run):
    _, run = good_run
    manifest = json.loads((run / "assigned" / "eagle" / "_manifest.json").read_text())
    assert manifest["n_assignments"] == 4  # one member per (group, label)
    assert manifest["quality"]["precision"] == 1.0  # each group label belongs to both members


def _drop_group_3(t):
    return {**t, "Y2": t["Y2"].filter(pa.compute.not_equal(t["Y2"]["group_id"], 3))}


def _add_group_9(t):
    extra = pa.table(
        {
            "group_id": pa.array([9], pa.int64()),
            "label_id": pa.array([1], pa.int32()),
            "count": pa.array([1], pa.int32()),
        }
    )
    return {**t, "Y2": pa.concat_tables([t["Y2"], extra])}


def _label_7(t):
    return {**t, "Y2": t["Y2"].set_column(1, "label_id", pa.array([0, 1, 7, 3], pa.int32()))}


def _string_group(t):
    return {**t, "Y1": t["Y1"].set_column(1, "group_id", pa.array([str(i // 2) for i in range(8)]))}


def _no_features(t):
    x = t["X"].to_pydict()
    x["feat_idx"][5], x["feat_val"][5] = [], []
    return {**t, "X": pa.table(x, schema=t["X"].schema)}


def _bad_value(value):
    def change(t):
        x = t["X"].to_pydict()
        x["feat_val"][5] = [1.0, value]
        return {**t, "X": pa.table(x, schema=t["X"].schema)}

    return change


_nan_value = _bad_value(float("nan"))


def _feature_7(t):
    x = t["X"].to_pydict()
    x["feat_idx"][6] = [1, 7]
    return {**t, "X": pa.table(x, schema=t["X"].schema)}


CASES = {
    "labels out of range": (
        _label_7,
        {},
        "_manifest.json",
        "says n_labels=4 but table Y2 has label_id 7 (in file Y2/part-0.parquet",
    ),
    "empty group": (_drop_group_3, {}, "Y1 table", "group_id 3 has members but no labels in Y2"),
    "group without members": (
        _add_group_9,
        {},
        "Y2 table",
        "group_id 9 has labels but no members in Y1",
    ),
    "wrong schema": (
        _string_group,
        {},
        "/Y1",
        "column 'group_id' has type string, expected bigint",
    ),
    "NaN feature value": (_nan_value, {}, "/X", "sample_id 5 has a NaN or infinite feature value"),
    "+inf feature value": (
        _bad_value(float("inf")),
        {},
        "/X",
        "sample_id 5 has a NaN or infinite feature value",
    ),
    "-inf feature value": (
        _bad_value(float("-inf")),
        {},
        "/X",
        "sample_id 5 has a NaN or infinite feature value",
    ),
    "feature id out of range": (
        _feature_7,
        {},
        "_manifest.json",
        "says n_features=5 but table X has feat_idx 7 (in file X/part-0.parquet",
    ),
    "manifest disagrees": (
        lambda t: t,
        {"n_samples": 9},
        "_manifest.json",
        "says n_samples=9 but table",
    ),
    "manifest of another version": (
        lambda t: t,
        {"format_version": 99},
        "_manifest.json",
        "has format_version 99",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_dataset_exits_2_and_overwrites_nothing(good_run, case, capsys):
    root, run = good_run
    mutate, manifest_changes, where, message = CASES[case]
    dataset = _write(
        root / case.replace(" ", "_"), mutate(_tables()), _manifest(**manifest_changes)
    )
    before = _snapshot(run)
    code = main(
        [
            "pipeline",
            "--dataset",
            dataset,
            "--no-aggregate",
            "--output",
            str(run),
            "--until",
            "assign",
            "--set",
            "embed.iterations=2",
            "--force",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    line = [x for x in err.splitlines() if x.startswith("eagle-spark pipeline: error:")]
    assert line and where in line[0] and message in line[0], err
    assert _snapshot(run) == before


@pytest.mark.parametrize("flag", ["--dataset", "--train", "--test-dataset"])
def test_missing_paths_exit_2(good_run, flag, capsys):
    root, run = good_run
    before = _snapshot(run)
    args = ["pipeline", "--output", str(run), "--until", "assign", flag, str(root / "nowhere")]
    if flag == "--test-dataset":
        args += ["--dataset", str(root / "good"), "--no-aggregate", "--until", "evaluate"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{root / 'nowhere'} does not exist" in err
    assert _snapshot(run) == before


def test_group_members_without_features_are_accepted(good_run, capsys):
    """The one rule (aggregation/check.py): a member with an empty row of X is a valid member."""
    root, _ = good_run
    dataset = _write(root / "featureless_member", _no_features(_tables()), _manifest())
    run = root / "run_featureless"
    code = main(
        [
            "pipeline",
            "--dataset",
            dataset,
            "--no-aggregate",
            "--output",
            str(run),
            "--until",
            "assign",
            "--set",
            "embed.iterations=2",
            "--set",
            "assign.weighting=hard",
        ]
    )
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((run / "assigned" / "eagle" / "_manifest.json").read_text())
    assert manifest["n_assignments"] == 4


def _truncate(path: pathlib.Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: pathlib.Path) -> None:
    path.write_bytes(b"not a parquet file " * 20)


@pytest.mark.parametrize("table", ["X", "Y1", "Y2"])
@pytest.mark.parametrize("damage", [_truncate, _garbage], ids=["truncated", "garbage"])
def test_damaged_parquet_part_exits_2_naming_file_and_table(good_run, table, damage, capsys):
    root, run = good_run
    dataset = pathlib.Path(
        _write(root / f"damaged_{table}_{damage.__name__}", _tables(), _manifest())
    )
    part = dataset / table / "part-0.parquet"
    damage(part)
    before = _snapshot(run)
    code = main(
        [
            "pipeline",
            "--dataset",
            str(dataset),
            "--no-aggregate",
            "--output",
            str(run),
            "--until",
            "assign",
            "--set",
            "embed.iterations=2",
            "--force",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    line = [x for x in err.splitlines() if x.startswith("eagle-spark pipeline: error:")]
    assert line, err
    assert str(part) in line[0] and f"(table {table} of {dataset})" in line[0], line[0]
    assert "cannot be read" in line[0]
    assert _snapshot(run) == before
