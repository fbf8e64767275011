"""A daily eagle_spark main job in Apache Airflow: one SparkSubmitOperator per day, a dated run folder.

Each run of the DAG submits ``jobs/pipeline.py`` (Baseline, EAGLE-0 and EAGLE side by side) with
``spark-submit`` into ``<EAGLE_RUNS>/<ds>``: the run folder of that logical date. A retried or
re-run day reuses its own folder, and the pipeline skips the stages that already finished there
(its stage records), so a retry resumes instead of starting over; other days are never touched.
The job's JSON summary goes to ``<run folder>/summary.json`` (``--summary``), and the run report
``report.json`` of every run stays in that folder.

Settings come from environment variables of the Airflow workers:

* ``EAGLE_SPARK_HOME``: the checkout (holds ``jobs/`` and ``conf/``), default the folder two
  levels above this file.
* ``EAGLE_RUNS``: the root of the dated run folders (storage every Spark executor reaches).
* ``EAGLE_SPARK_CONN``: the Airflow connection of the Spark master (``spark_default``: a connection
  of type ``spark`` whose host is e.g. ``spark://127.0.0.1:7077`` or ``yarn``).
* ``EAGLE_PYTHON``: the Python the executors run (``spark.pyspark.python``), where eagle_spark is
  installed (or ship it: ``jobs/README.md``, ``--py-files`` / ``--archives``).

Needs ``apache-airflow`` and ``apache-airflow-providers-apache-spark`` (the ``[airflow]`` recipe in
``jobs/README.md``); ``tests/deploy/test_airflow_dag.py`` loads this file with them.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG

HOME = os.environ.get(
    "EAGLE_SPARK_HOME", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
RUNS = os.environ.get("EAGLE_RUNS", os.path.join(HOME, "runs", "daily"))
RUN = RUNS + "/{{ ds }}"  # the dated run folder (templated by Airflow)
PYTHON = os.environ.get("EAGLE_PYTHON", "python3")

with DAG(
    dag_id="eagle_daily",
    description="eagle_spark main job: Baseline / EAGLE-0 / EAGLE on the day's data",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,  # one run folder written at a time
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
    tags=["eagle_spark"],
) as dag:
    SparkSubmitOperator(
        task_id="pipeline",
        conn_id=os.environ.get("EAGLE_SPARK_CONN", "spark_default"),
        application=os.path.join(HOME, "jobs", "pipeline.py"),
        name="eagle-daily-{{ ds_nodash }}",
        conf={
            "spark.pyspark.python": PYTHON,
            "spark.pyspark.driver.python": PYTHON,
        },
        application_args=[
            "--conf",
            os.path.join(HOME, "conf", "cluster.yaml"),
            "--compare",
            "--output",
            RUN,
            "--summary",
            RUN + "/summary.json",
        ],
        execution_timeout=timedelta(hours=3),
    )
