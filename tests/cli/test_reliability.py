"""The bad-input catalogue (issue: reliability): settings, damaged inputs, one writer per run folder,
inputs never destroyed, no NaN written, strict JSON, leftovers of killed writers.

Each case checks the exit code, the place named in the message, that nothing was written, and that
a previous output is byte-identical afterwards."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

from eagle_spark.cli import main
from tests.cli.test_pipeline_bad_input import _manifest, _tables, _write

# ---------------------------------------------------------------------------------- helpers


def _snapshot(folder: pathlib.Path) -> dict[str, str]:
    if folder.is_file():
        return {folder.name: hashlib.sha256(folder.read_bytes()).hexdigest()}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _error_line(err: str, command: str) -> str:
    lines = [
        x
        for x in err.splitlines()
        if x.startswith(f"eagle-spark {command}: error:") or x.startswith("eagle-spark: error:")
    ]
    assert lines, err
    return lines[0]


def _strict(text: str) -> dict:
    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture(scope="module")
def agg(tmp_path_factory):
    """A valid 8-sample aggregated dataset (4 groups of 2, one label each)."""
    root = tmp_path_factory.mktemp("reliability")
    return pathlib.Path(_write(root / "agg", _tables(), _manifest()))


# ---------------------------------------------------------------------------------- 1. settings

SETTINGS = [
    ("embed.lr=.inf", "embed.lr", "finite"),
    ("embed.lr=.nan", "embed.lr", "finite"),
    ("embed.lr=0", "embed.lr", "finite number > 0"),
    ("tree.C=-.inf", "tree.C", "finite"),
    ("ova.tol=.inf", "ova.tol", "finite"),
    ("tree.threshold=.nan", "tree.threshold", "finite"),
    ("aggregate.noise=.inf", "aggregate.noise", "finite"),
    ("evaluate.propensity_a=.inf", "evaluate.propensity_a", "finite"),
    ("evaluate.propensity_b=0", "evaluate.propensity_b", "finite number > 0"),
    ("ova.negative_fraction=.nan", "ova.negative_fraction", "finite"),
    ("spark.driver_memory=1m", "spark.driver_memory", "below 512m"),
    ("spark.executor_memory=100m", "spark.executor_memory", "below 512m"),
    ("spark.driver_memory=lots", "spark.driver_memory", "must be a size"),
    ("spark.python_worker_memory=1g", "spark.python_worker_memory", "below 2g"),
]


@pytest.mark.parametrize("override,key,message", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_bad_setting_exits_2_before_spark_starts(agg, tmp_path, capsys, override, key, message):
    out = tmp_path / "emb"
    code = main(["embed", "--input", str(agg), "--output", str(out), "--set", override])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    line = _error_line(captured.err, "embed")
    assert key in line and message in line, line
    assert captured.out == ""  # no JVM message and no JSON line on stdout
    assert not out.exists()


def test_settings_objects_reject_non_finite_values_too():
    from eagle_spark.errors import SettingsError
    from eagle_spark.settings import EmbedSettings, EvaluateSettings, TreeSettings

    for make in (
        lambda: EmbedSettings(lr=float("inf")),
        lambda: TreeSettings(C=float("nan")),
        lambda: EvaluateSettings(propensity_a=float("inf")),
    ):
        with pytest.raises(SettingsError, match="finite"):
            make()


# ---------------------------------------------------------------------------------- no NaN written


def test_nan_embedding_fails_the_stage_naming_the_label(spark, agg, tmp_path):
    """GRLR with lambda = inf gives NaN embeddings; the task refuses to write them (exit 1)."""
    from eagle_spark.errors import NumericalError, from_task_failure
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.settings import EmbedSettings

    params = EmbedSettings(iterations=2, tasks=2)
    object.__setattr__(params, "lr", float("inf"))  # past the settings check, as a bug would be
    out = tmp_path / "emb"
    with pytest.raises(Exception) as info:
        embed(spark, str(agg), str(out), params)
    err = from_task_failure(info.value)
    assert isinstance(err, NumericalError) and err.exit_code == 1
    assert "embed: label" in str(err) and "not finite" in str(err)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_non_finite_weights_and_scores_are_refused():
    import numpy as np

    from eagle_spark.classifiers.linear import check_weights
    from eagle_spark.errors import NumericalError, check_finite_scores

    ok = (3, np.array([0, 2], np.int32), np.array([0.5, -1.0], np.float32), 0.25)
    check_weights([ok], "train: label")
    bad = (7, np.array([1], np.int32), np.array([np.nan], np.float32), 0.0)
    with pytest.raises(NumericalError, match="train: label 7: the trained weights are not finite"):
        check_weights([ok, bad], "train: label")
    with pytest.raises(NumericalError, match="train: label 9"):
        check_weights(
            [(9, np.zeros(0, np.int32), np.zeros(0, np.float32), float("inf"))], "train: label"
        )
    scores = np.array([[0.9, 0.1], [0.5, np.inf]])
    with pytest.raises(NumericalError, match="predict: sample_id 41: a label score is not finite"):
        check_finite_scores(scores, [40, 41], "predict")


def test_strict_json_names_the_non_finite_key():
    from eagle_spark.errors import NumericalError, strict_json

    assert json.loads(strict_json({"a": [1.0, 2]})) == {"a": [1.0, 2]}
    with pytest.raises(NumericalError, match=r"iterations\[1\]\.mean_max_score is nan"):
        strict_json({"iterations": [{"mean_max_score": 0.5}, {"mean_max_score": float("nan")}]})


def test_task_errors_are_recovered_from_spark_exceptions():
    from eagle_spark.errors import BadInputError, NumericalError, from_task_failure

    text = (
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 1\neagle_spark.errors.NumericalError: embed: label 3: not finite\n'
    )
    err = from_task_failure(RuntimeError(text))
    assert isinstance(err, NumericalError) and str(err) == "embed: label 3: not finite"
    assert from_task_failure(RuntimeError("java.lang.OutOfMemoryError")) is None
    assert from_task_failure(RuntimeError("eagle_spark.errors.NoSuchName: x")) is None
    bad = BadInputError("x")
    assert from_task_failure(bad) is bad


# ---------------------------------------------------------------------------------- 2. one writer


def test_run_lock_refuses_a_second_holder_and_takes_over_a_dead_one(tmp_path, caplog):
    from eagle_spark.errors import RunFolderInUseError
    from eagle_spark.io.lock import RunLock

    run = tmp_path / "run"
    with RunLock(None, str(run), "first"):
        held = json.loads((run / "_lock").read_text())
        assert held["pid"] == os.getpid() and held["run_id"] == "first"
        with pytest.raises(
            RunFolderInUseError, match=rf"is in use by pid {os.getpid()} on host .* since "
        ):
            RunLock(None, str(run), "second").__enter__()
    assert not (run / "_lock").exists()  # released
    dead = _dead_pid()
    (run / "_lock").write_text(
        json.dumps({"host": "h", "pid": dead, "started_at": "T", "run_id": "x"})
    )
    with caplog.at_level("WARNING", logger="eagle_spark"):
        with RunLock(None, str(run), "third"):
            assert json.loads((run / "_lock").read_text())["run_id"] == "third"
    assert f"taking over the lock of pid {dead}" in caplog.text


@pytest.mark.slow  # a second process holding the lock while a pipeline starts: ~15 s
def test_second_pipeline_on_a_locked_run_folder_exits_2(spark, agg, tmp_path, capsys):
    from eagle_spark.io.lock import RunLock

    run = tmp_path / "run"
    args = [
        "pipeline",
        "--dataset",
        str(agg),
        "--no-aggregate",
        "--output",
        str(run),
        "--until",
        "assign",
        "--set",
        "embed.iterations=2",
    ]
    with RunLock(None, str(run), "held-by-test"):
        before = _snapshot(run)
        code = main(args)
        line = _error_line(capsys.readouterr().err, "pipeline")
        assert code == 2
        assert f"run folder {run} is in use by pid {os.getpid()}" in line
        assert _snapshot(run) == before
    assert main(args) == 0
    assert main(args + ["--force"]) == 0
    logs = sorted((run / "logs").iterdir())
    assert len(logs) == 2 and all(p.suffix == ".log" for p in logs)  # one log per run
    assert not (run / "_lock").exists()


def test_lock_held_by_another_process_then_killed(spark, agg, tmp_path, capsys):
    """Across processes: a live holder makes the pipeline exit 2; SIGKILLed, its lock is taken over."""
    import signal

    from eagle_spark.io.lock import RunLock

    run = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom eagle_spark.io.lock import RunLock\n"
            "with RunLock(None, sys.argv[1], 'other'):\n    print('held', flush=True)\n    time.sleep(600)\n",
            str(run),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code = main(
            [
                "pipeline",
                "--dataset",
                str(agg),
                "--no-aggregate",
                "--output",
                str(run),
                "--until",
                "assign",
            ]
        )
        line = _error_line(capsys.readouterr().err, "pipeline")
        assert code == 2 and f"is in use by pid {holder.pid}" in line, line
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with RunLock(None, str(run), "after"):  # main() routed eagle_spark's log lines to stderr
        pass
    assert f"taking over the lock of pid {holder.pid}" in capsys.readouterr().err


def test_rename_never_nests_into_an_existing_folder(spark, tmp_path):
    from eagle_spark.io.fs import FileSystem

    fs = FileSystem(spark)
    for kind in ("dir", "file"):
        src, dst = tmp_path / f"src_{kind}", tmp_path / f"dst_{kind}"
        if kind == "dir":
            src.mkdir(), dst.mkdir()
            (src / "a").write_text("new"), (dst / "b").write_text("old")
        else:
            src.write_text("new"), dst.write_text("old")
        before = _snapshot(dst)
        with pytest.raises(FileExistsError):
            fs.rename(str(src), str(dst))
        assert _snapshot(dst) == before and src.exists()
    fs.rename(str(tmp_path / "src_dir"), str(tmp_path / "moved"))
    assert (tmp_path / "moved" / "a").read_text() == "new"


# ---------------------------------------------------------------------------------- 3. damaged input


def test_truncated_gzip_xc_file_exits_2_naming_the_file(spark, tmp_path, capsys):
    from eagle_spark.data import embedded_path

    data = pathlib.Path(embedded_path("delicious", "test")).read_bytes()
    for name, content in (
        ("truncated.txt.gz", data[: len(data) // 2]),
        ("garbage.txt.gz", data[:10] + b"\x00garbage" * 500),
    ):
        src = tmp_path / name
        src.write_bytes(content)
        out = tmp_path / f"out_{name}"
        code = main(["ingest", "--input", str(src), "--output", str(out)])
        line = _error_line(capsys.readouterr().err, "ingest")
        assert code == 2, line
        assert str(src) in line and "cannot be read" in line and "damaged or truncated" in line
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".out_{name}")]


# ---------------------------------------------------------------------------------- 4. one checker


@pytest.mark.slow  # aggregate + a whole pipeline run on user tables (~13 s)
def test_user_tables_with_uncovered_samples_and_featureless_members_pass_the_pipeline_check(
    spark, agg, tmp_path, capsys
):
    """aggregate --y1/--y2 and pipeline --no-aggregate share one definition of valid (check.py)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eagle_spark.aggregation.check import check_aggregated

    t = _tables()
    x = t["X"].to_pydict()
    x["feat_idx"][1], x["feat_val"][1] = [], []  # member of group 0 without features
    base = tmp_path / "base"
    _write(
        base,
        {"X": pa.table(x, schema=t["X"].schema), "Y": t["Y"]},
        {**_manifest(), "kind": "ingest"},
    )
    y1 = tmp_path / "y1.csv"
    y1.write_text("sample_id,group_id\n0,0\n1,0\n2,1\n3,1\n")  # samples 4..7 in no group
    y2 = tmp_path / "y2.csv"
    y2.write_text("group_id,label_id\n0,0\n1,1\n")
    out = tmp_path / "agg_user"
    code = main(
        ["aggregate", "--input", str(base), "--output", str(out), "--y1", str(y1), "--y2", str(y2)]
    )
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((out / "_manifest.json").read_text())
    assert (manifest["n_samples"], manifest["n_grouped_samples"], manifest["n_groups"]) == (8, 4, 2)
    assert pq.read_table(out / "X").num_rows == 8
    check_aggregated(spark, str(out))  # what aggregate writes, the pipeline's check accepts
    run = tmp_path / "run"
    code = main(
        [
            "pipeline",
            "--dataset",
            str(out),
            "--no-aggregate",
            "--output",
            str(run),
            "--until",
            "assign",
            "--set",
            "embed.iterations=2",
        ]
    )
    assert code == 0, capsys.readouterr().err


# ---------------------------------------------------------------------------------- 5. outputs vs inputs


def _overlap_cases(agg: pathlib.Path, tmp: pathlib.Path):
    model_in_input = str(agg / "model")
    return {
        "embed output = input": ["embed", "--input", str(agg), "--output", str(agg), "--overwrite"],
        "assign output inside input": [
            "assign",
            "--input",
            str(agg),
            "--output",
            str(agg / "Y1"),
            "--method",
            "baseline",
            "--overwrite",
        ],
        "train output inside input": ["train", "--input", str(agg), "--output", model_in_input],
        "aggregate output contains input": [
            "aggregate",
            "--input",
            str(agg),
            "--output",
            str(agg.parent),
            "--overwrite",
        ],
        "export output = input": [
            "export",
            "--input",
            str(agg),
            "--output",
            str(agg),
            "--overwrite",
        ],
        "pipeline run folder contains dataset": [
            "pipeline",
            "--dataset",
            str(agg),
            "--no-aggregate",
            "--output",
            str(agg.parent),
            "--until",
            "assign",
        ],
    }


@pytest.mark.parametrize("case", sorted(_overlap_cases(pathlib.Path("a"), pathlib.Path("b"))))
def test_output_overlapping_an_input_is_refused_and_the_input_kept(
    spark, agg, tmp_path, capsys, case
):
    args = _overlap_cases(agg, tmp_path)[case]
    before = _snapshot(agg.parent)
    code = main(args)
    line = _error_line(capsys.readouterr().err, args[0])
    assert code == 2, line
    assert "would destroy the input" in line and str(agg) in line
    assert _snapshot(agg.parent) == before


def test_library_stage_refuses_overlap_too(spark, agg):
    from eagle_spark.errors import BadInputError
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.settings import EmbedSettings

    with pytest.raises(BadInputError, match="lies inside the input"):
        embed(spark, str(agg), str(agg / "emb"), EmbedSettings(iterations=1), overwrite=True)


# ---------------------------------------------------------------------------------- 6. leftovers


def test_commit_removes_leftovers_of_dead_writers_only(spark, tmp_path, caplog):
    import time

    from eagle_spark.io.fs import _HOST, atomic_output

    old_ms = int(time.time() * 1000) - 60_000
    dead = _dead_pid()
    leftovers = {
        "dead_tmp": f".out.tmp-{old_ms:013d}-{dead}-aaaaaaaaaaaa-{_HOST}",
        "dead_old": f".out.old-{old_ms:013d}-{dead}-bbbbbbbbbbbb-{_HOST}",
        "dead_parts": f".out.tmp-{old_ms:013d}-{dead}-cccccccccccc-{_HOST}.parts",
        "foreign_recent": f".out.tmp-{old_ms:013d}-{dead}-dddddddddddd-otherhost",
        "other_target": f".outx.tmp-{old_ms:013d}-{dead}-eeeeeeeeeeee-{_HOST}",
    }
    live_ppid = os.getppid()
    leftovers["live_writer"] = f".out.tmp-{old_ms:013d}-{live_ppid}-ffffffffffff-{_HOST}"
    for name in leftovers.values():
        (tmp_path / name).mkdir()
    (tmp_path / "out").mkdir()  # the target exists: a dead writer's .old sibling is a leftover
    (tmp_path / "out" / "previous").write_text(
        "p"
    )  # (a missing target is restored from it instead)
    with caplog.at_level("INFO", logger="eagle_spark"):
        with atomic_output(spark, str(tmp_path / "out"), overwrite=True) as tmp:
            pathlib.Path(tmp).mkdir()
            (pathlib.Path(tmp) / "f").write_text("x")
    left = {p.name for p in tmp_path.iterdir()}
    for key in ("dead_tmp", "dead_old", "dead_parts"):
        assert leftovers[key] not in left, key
        assert f"removed {tmp_path / leftovers[key]}" in caplog.text
    for key in ("foreign_recent", "other_target", "live_writer"):
        assert leftovers[key] in left, key
    assert (tmp_path / "out" / "f").read_text() == "x"


# ---------------------------------------------------------------------------------- 8. blank lines, CSV cells


def test_blank_line_in_xc_file_is_named(spark, tmp_path, write_text, capsys):
    src = write_text("blank.txt", "3 4 2\n0 0:1\n\n1 2:1\n")
    out = tmp_path / "out"
    code = main(["ingest", "--input", src, "--output", str(out)])
    line = _error_line(capsys.readouterr().err, "ingest")
    assert code == 2 and f"{src}:3: blank line" in line, line
    assert not out.exists()
    code = main(
        [
            "ingest",
            "--input",
            write_text("blank2.txt", "3 4 2\n0 0:1\n\n1 2:1\n"),
            "--output",
            str(out),
            "--on-bad-line",
            "skip",
        ]
    )
    assert code == 0
    import pyarrow.parquet as pq

    rejected = pq.read_table(out / "_rejected").to_pylist()
    assert rejected == [
        {
            "line": 3,
            "text": "",
            "reason": "blank line: a sample line needs a label field or features",
        }
    ]


@pytest.mark.parametrize(
    "table,body,message",
    [
        (
            "y1",
            "sample_id,group_id\n0,0\n1,x7\n",
            "y1.csv:3: group_id 'x7' is not a non-negative whole number: line '1,x7'",
        ),
        ("y1", "sample_id,group_id\n0,0\n,0\n", "y1.csv:3: sample_id is empty: line ',0'"),
        (
            "y2",
            "group_id,label_id,count\n0,1,1\n0,2,0\n",
            "y2.csv:3: count '0' is not a whole number >= 1: line '0,2,0'",
        ),
    ],
)
def test_bad_csv_cell_is_named_with_line_and_text(
    spark, agg, tmp_path, capsys, table, body, message
):
    good = {"y1": "sample_id,group_id\n0,0\n1,0\n", "y2": "group_id,label_id\n0,1\n"}
    paths = {}
    for name in ("y1", "y2"):
        paths[name] = tmp_path / f"{name}.csv"
        paths[name].write_text(body if name == table else good[name])
    out = tmp_path / "out"
    code = main(
        [
            "aggregate",
            "--input",
            str(agg),
            "--output",
            str(out),
            "--y1",
            str(paths["y1"]),
            "--y2",
            str(paths["y2"]),
        ]
    )
    line = _error_line(capsys.readouterr().err, "aggregate")
    assert code == 2 and message in line, line
    assert not out.exists()


# ---------------------------------------------------------------------------------- 7. malformed lines

MALFORMED = {  # one line per class of xc._MESSAGES: (line, message)
    "missing colon": ("0 3", "missing ':' in feature token '3'"),
    "non-numeric feature id": ("0 a:1", "non-numeric feature id in 'a:1'"),
    "negative feature id": ("0 -1:1", "negative feature id in '-1:1'"),
    "non-numeric value": ("0 1:x", "non-numeric feature value in '1:x'"),
    "nan value": ("0 1:nan", "NaN or infinite feature value in '1:nan'"),
    "feature id too large": ("0 9:1", "feature id 9 is not below n_features=4"),
    "duplicate feature": ("0 1:1 1:2", "duplicate feature id 1"),
    "non-numeric label": ("a 1:1", "non-numeric label id 'a'"),
    "negative label": ("-1 1:1", "negative label id '-1'"),
    "label too large": ("5 1:1", "label id 5 is not below n_labels=2"),
    "duplicate label": ("1,1 1:1", "duplicate label id 1"),
    "empty label": ("0,,1 1:1", "empty label id in label field '0,,1'"),
    "float32 overflow": ("0 1:1e39", "feature value 1e+39 overflows float32"),
    "blank": ("   ", "blank line: a sample line needs a label field or features"),
}


@pytest.fixture(scope="module")
def previous_output(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("malformed")
    src = root / "good.txt"
    src.write_text("2 4 2\n0 0:1\n1 2:0.5\n")
    out = root / "out"
    assert main(["ingest", "--input", str(src), "--output", str(out)]) == 0
    return root, out


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_line_exits_2_and_keeps_the_previous_output(previous_output, case, capsys):
    root, out = previous_output
    bad, message = MALFORMED[case]
    src = root / f"{case.replace(' ', '_')}.txt.gz"
    with gzip.open(src, "wt") as fh:
        fh.write(f"3 4 2\n0 0:1\n{bad}\n1 2:1\n")
    before = _snapshot(out)
    code = main(["ingest", "--input", str(src), "--output", str(out), "--overwrite"])
    line = _error_line(capsys.readouterr().err, "ingest")
    assert code == 2 and f"{src}:3: {message}" in line, line
    assert _snapshot(out) == before
