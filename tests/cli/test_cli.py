"""The eagle-spark command-line contract: JSON summary, exit codes, settings flags."""

import json
import subprocess
import sys

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
