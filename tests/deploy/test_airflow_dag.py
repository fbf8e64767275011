"""The Airflow DAG example (examples/airflow/eagle_daily.py) loads with the real apache-airflow and
Spark provider, and the spark-submit arguments it renders are valid eagle-spark arguments."""

from __future__ import annotations

import json
import os

import pytest

from eagle_spark.cli import build_parser
from tests.conftest import ROOT, last_line_of

AIRFLOW_PYTHON = os.environ.get(
    "EAGLE_AIRFLOW_PYTHON", str(ROOT / ".venv-airflow" / "bin" / "python")
)


@pytest.fixture(scope="module")
def dag(tmp_path_factory):
    if not os.path.exists(AIRFLOW_PYTHON):
        pytest.skip(
            f"no Airflow environment at {AIRFLOW_PYTHON} (make it with: python3 -m venv .venv-airflow && "
            ".venv-airflow/bin/pip install -r examples/airflow/requirements.txt; .ci/run does)"
        )
    home = tmp_path_factory.mktemp("airflow_home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "EAGLE_SPARK_HOME": str(ROOT),
        "EAGLE_RUNS": "/data/eagle/runs",
        "EAGLE_PYTHON": "/opt/eagle/bin/python",
    }
    last = last_line_of(
        [
            str(ROOT / "tests" / "deploy" / "airflow_load_dag.py"),
            str(ROOT / "examples" / "airflow"),
            "2026-11-23",
        ],
        None,
        env,
        300,
        python=AIRFLOW_PYTHON,
    )
    return json.loads(last)


@pytest.mark.slow
def test_dag_loads_with_a_spark_submit_task(dag):
    assert dag["import_errors"] == {}
    assert dag["dag_ids"] == ["eagle_daily"]
    assert dag["task_ids"] == ["pipeline"]
    assert dag["operator"] == "SparkSubmitOperator"
    assert dag["retries"] == 2 and dag["retry_delay_s"] == 600.0
    assert dag["schedule"] == "@daily" and dag["max_active_runs"] == 1 and dag["catchup"] is False
    assert dag["application"] == str(ROOT / "jobs" / "pipeline.py")
    assert dag["conf"]["spark.pyspark.python"] == "/opt/eagle/bin/python"
    assert dag["name"] == "eagle-daily-20261123"


@pytest.mark.slow
def test_dag_renders_a_dated_run_folder_that_the_cli_accepts(dag):
    args = dag["args"]
    assert args[args.index("--output") + 1] == "/data/eagle/runs/2026-11-23"
    assert args[args.index("--summary") + 1] == "/data/eagle/runs/2026-11-23/summary.json"
    parsed = build_parser().parse_args(["pipeline", *args])  # argparse exits on an unknown flag
    assert parsed.output == "/data/eagle/runs/2026-11-23"
    assert parsed.summary == "/data/eagle/runs/2026-11-23/summary.json"
    assert parsed.methods == ["baseline", "eagle0", "eagle"]
    assert parsed.conf == str(ROOT / "conf" / "cluster.yaml")
