"""The eagle-spark command-line contract: JSON summary, exit codes, settings flags."""

import json
import subprocess
import sys

import pytest
import yaml

from eagle_spark.cli import main
from tests.conftest import ROOT


def test_print_defaults_merges_conf_and_set(capsys, tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("spark:\n  master: local[1]\n")
    assert (
        main(["--conf", str(conf), "--set", "spark.shuffle_partitions=5", "--print-defaults"]) == 0
    )
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["spark"]["master"] == "local[1]" and printed["spark"]["shuffle_partitions"] == 5
    assert main(["ingest", "--output", "x", "--print-defaults"]) == 0
    assert "ingest:" in capsys.readouterr().out
    # a command's required flags are not needed to print the settings
    assert main(["train", "--print-defaults", "--set", "ova.C=0.25"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["ova"]["C"] == 0.25


def test_options_before_the_command_are_kept(capsys, tmp_path):
    """argparse lets a subcommand's defaults overwrite what was given before its name: --conf,
    --set and --log-level before ``train`` must survive, and --set before and after add up."""
    from eagle_spark.cli import _merge_after_command, build_parser

    args = _merge_after_command(
        build_parser().parse_args(
            ["--conf", "c.yaml", "--set", "tree.C=1", "--log-level", "WARNING", "train"]
            + ["--input", "x", "--output", "y", "--set", "tree.C=2", "--summary", "s.json"]
        )
    )
    assert (args.conf, args.overrides, args.log_level, args.summary) == (
        "c.yaml",
        ["tree.C=1", "tree.C=2"],
        "WARNING",
        "s.json",
    )
    after = build_parser().parse_args(["train", "--input", "x", "--output", "y"])
    assert (after.conf, after.overrides, after.log_level) == (None, [], "INFO")
    conf = tmp_path / "bad.yaml"
    conf.write_text("tree:\n  n_trees: 0\n")
    # the conf given before the command is read (and refused) before any JVM starts
    assert main(["--conf", str(conf), "train", "--input", "x", "--output", "y"]) == 2
    assert "tree.n_trees must be >= 1" in capsys.readouterr().err


def test_bad_usage_exits_2(capsys):
    assert main([]) == 2
    assert main(["no-such-command"]) == 2
    assert main(["ingest"]) == 2  # --output is required
    assert "--output" in capsys.readouterr().err
    assert main(["--set", "spark.nope=1", "--print-defaults"]) == 2
    assert "unknown setting 'spark.nope'" in capsys.readouterr().err
    assert main(["no-such-command", "--print-defaults"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["--set", "spark.nope=1", "--print-defaults"]) == 2
    assert "unknown setting 'spark.nope'" in capsys.readouterr().err


def test_ingest_embedded_default_prints_one_json_line(spark, tmp_path, capsys):
    out = tmp_path / "delicious"
    assert main(["ingest", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary["command"] == "ingest" and summary["output"] == str(out)
    assert (summary["n_samples"], summary["n_features"], summary["n_labels"]) == (12920, 500, 983)
    assert summary["samples_without_labels"] == 10 and summary["seconds"] > 0
    assert json.loads((out / "_manifest.json").read_text())["n_samples"] == 12920


def test_module_entry_point_help():
    done = subprocess.run(
        [sys.executable, "-m", "eagle_spark", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0
    for name in ("ingest", "export"):
        assert name in done.stdout


@pytest.mark.slow  # the whole recipe: 8 commands, the auto assignment and a 3-tree training (~3 min)
def test_readme_stage_by_stage_recipe_trains_the_pipelines_model(spark, tmp_path, capsys):
    """The README's stage-by-stage recipe, run as written (its shell variables expanded, its
    ``runs/`` moved under tmp_path), trains what the main job's EAGLE method trains: the label tree
    of conf/local.yaml, with the main job's EAGLE P@1 on delicious R-4 (as the README says)."""
    import re
    import shlex

    text = (ROOT / "README.md").read_text()
    block = re.search(r"stage by stage.*?```\n(.*?)```", text, re.S).group(1)
    lines = block.strip().splitlines()
    variables = dict(w.split("=", 1) for w in shlex.split(lines[0]))
    assert set(variables) == {"E", "C"} and variables["E"] == ".venv/bin/eagle-spark"
    commands = []
    for line in lines[1:]:
        for part in line.split("&&"):
            words = []
            for word in part.split():
                if word == "$E":
                    continue
                words += variables["C"].split() if word == "$C" else [word]
            commands.append(words)
    assert [c[0] for c in commands] == [
        "ingest",
        "ingest",
        "aggregate",
        "embed",
        "assign",
        "train",
        "predict",
        "evaluate",
    ]

    def local(word: str) -> str:
        if word.startswith("runs/"):
            return str(tmp_path / word)
        if word.startswith(("conf/", "eagle_spark/")):
            return str(ROOT / word)
        return word

    for words in commands:
        code = main([local(w) for w in words])
        out = capsys.readouterr().out
        assert code == 0, (words, out)
    summary = json.loads(out.strip().splitlines()[-1])
    meta = json.loads((tmp_path / "runs" / "model" / "metadata.json").read_text())
    assert meta["class"] == "TreeModel"  # the pipeline's classifier in conf/local.yaml
    main_job = json.loads((ROOT / "benchmarks" / "reports" / "main_job.json").read_text())
    want = main_job["comparison"]["eagle"]["P@1"] / 100  # the main job's EAGLE P@1, in percent
    assert summary["P"][0] == pytest.approx(want, abs=5e-5)  # the report rounds to 0.01 points
