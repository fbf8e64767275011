"""Spark Connect: the API tests on a Connect session, the CLI's ``--remote``.

A process holds either a classic session or a Connect one started from ``remote("local[2]")``, so
the API tests run again in a pytest process of their own whose ``spark`` fixture is a Connect
session (tests/conftest.py, ``EAGLE_SPARK_TEST_REMOTE``); ``test_session_kind_is_the_one_asked_for``
in tests/api/test_api.py makes sure that run really was on Connect."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from tests.conftest import REMOTE_ENV, last_line_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytest.importorskip(
    "grpc", reason="the Spark Connect client (the [connect] extra) is not installed"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_api_tests_pass_on_a_spark_connect_session(tmp_path):
    env = {**os.environ, REMOTE_ENV: "local[2]"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "not slow",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::UserWarning",
            f"--basetemp={tmp_path / 'base'}",
            "tests/api/test_api.py",
            "tests/api/test_miml_api.py",
            "tests/api/test_mlflow.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    tail = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, tail
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary


def test_cli_remote_unreachable_is_exit_2_naming_it(tmp_path):
    port = _free_port()  # bound and released: nothing listens there
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle_spark.cli",
            "ingest",
            "--remote",
            f"sc://127.0.0.1:{port}",
            "--input",
            str(ROOT / "eagle_spark" / "data" / "delicious" / "test.txt.gz"),
            "--output",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        f"spark.remote=sc://127.0.0.1:{port}: cannot reach the Spark Connect server at "
        f"127.0.0.1:{port}" in done.stderr
    )
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle_spark.cli",
            "ingest",
            "--remote",
            "http://x",
            "--input",
            "a",
            "--output",
            str(tmp_path / "o"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "spark.remote must be sc://host:port or local[N]" in bad.stderr


@pytest.mark.slow
def test_cli_commands_run_on_a_remote_session_as_on_a_classic_one(spark, tmp_path):
    """ingest, aggregate and embed with --remote local[2] (a Connect server in the command's
    process) write the same tables as the same commands on this classic session."""
    from eagle_spark.cli import main

    data = str(ROOT / "eagle_spark" / "data" / "delicious" / "test.txt.gz")
    steps = [
        ["ingest", "--input", data, "--output", "{d}/ingested"],
        ["aggregate", "--input", "{d}/ingested", "--output", "{d}/r4", "--group-size", "4"],
        ["embed", "--input", "{d}/r4", "--output", "{d}/emb", "--iterations", "3"],
    ]
    remote, local = tmp_path / "remote", tmp_path / "local"
    for argv in steps:
        args = [
            *[a.format(d=remote) for a in argv],
            "--remote",
            "local[2]",
            "--log-level",
            "WARNING",
        ]
        last = last_line_of(["-m", "eagle_spark.cli", *args], ROOT, None, 600)
        assert json.loads(last)["command"] == argv[0]
        assert main([*[a.format(d=local) for a in argv], "--log-level", "WARNING"]) == 0
    for folder, table, key in [
        ("ingested", "X", ["sample_id"]),
        ("r4", "Y1", ["sample_id"]),
        ("emb", "label_emb", ["label_id"]),
    ]:
        a = spark.read.parquet(str(remote / folder / table)).orderBy(*key).collect()
        b = spark.read.parquet(str(local / folder / table)).orderBy(*key).collect()
        assert a == b, (folder, table)


@pytest.mark.slow
def test_main_job_on_a_connect_server_gives_the_classic_table(tmp_path):
    """A real Spark Connect server from the pip package (spark-submit --class SparkConnectServer on
    127.0.0.1, a free port), and `eagle-spark pipeline --compare --remote sc://127.0.0.1:PORT`: the
    comparison table equals the classic main job's (benchmarks/reports/main_job.json)."""
    import pyspark

    from tests.deploy.test_cluster import Processes, _wait

    spark_home = os.path.dirname(pyspark.__file__)
    port = _free_port()
    env = {
        **os.environ,
        "SPARK_HOME": spark_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    procs = Processes(tmp_path)
    run = tmp_path / "run"
    try:
        server = procs.start(
            "server",
            [
                os.path.join(spark_home, "bin", "spark-submit"),
                "--master",
                "local[2]",
                "--driver-memory",
                "4g",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                f"spark.pyspark.python={sys.executable}",
                "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer",
                "spark-internal",
            ],
            env,
        )

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        _wait(listening, 120, "the Connect server's port", [server])
        last_line_of(
            [
                "-m",
                "eagle_spark.cli",
                "pipeline",
                "--conf",
                str(ROOT / "conf" / "local.yaml"),
                "--compare",
                "--output",
                str(run),
                "--remote",
                f"sc://127.0.0.1:{port}",
                "--log-level",
                "WARNING",
            ],
            ROOT,
            None,
            1800,
        )
    finally:
        procs.stop()
    got = json.loads((run / "comparison.json").read_text())["methods"]
    want = json.loads((ROOT / "benchmarks" / "reports" / "main_job.json").read_text())["comparison"]
    for method, row in want.items():
        for k in (1, 3, 5):
            assert got[method]["P_percent"][k - 1] == row[f"P@{k}"], (method, k)
