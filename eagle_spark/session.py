"""Build the SparkSession from :class:`eagle_spark.params.SparkParams`; nothing is discovered implicitly.

Works in three situations:

* local mode (``master: local[*]``): the driver binds to 127.0.0.1 when ``loopback`` is set;
* a standalone cluster (``master: spark://host:7077``);
* under ``spark-submit``: the session spark-submit configured (master, memory) is kept, and only
  the SQL/Arrow settings below are applied on top.

Python workers are pinned to this interpreter (``PYSPARK_PYTHON``), otherwise they start whatever
``python3`` is first on PATH and fail to import pyarrow.
"""

from __future__ import annotations

import logging
import os
import sys

from pyspark.sql import SparkSession

from eagle_spark.logs import under_spark_submit
from eagle_spark.params import SparkParams

log = logging.getLogger(__name__)


def spark_conf(params: SparkParams) -> dict[str, str]:
    """The ``spark.*`` settings :func:`build_spark` applies, as strings.

    Args:
        params: the ``spark`` settings section.
    Returns:
        Mapping of Spark configuration keys to values (``extra`` entries last, so they win).
    """
    conf = {
        "spark.app.name": params.app_name,
        "spark.driver.memory": params.driver_memory,
        "spark.executor.memory": params.executor_memory,
        "spark.sql.shuffle.partitions": str(params.shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(params.arrow_batch_rows),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Local disks: Hadoop's raw local file system, so Spark writes no hidden .crc file beside each
        # Parquet part (readers that take a folder, such as polars.read_parquet, refuse them); the
        # Parquet footers and the pyarrow reads still detect damaged files.
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        # and no _SUCCESS marker beside them either (every output is committed by its own atomic
        # rename, and its manifest says it is complete)
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "spark.pyspark.driver.python": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
    }
    if params.python_worker_memory:
        conf["spark.executor.pyspark.memory"] = params.python_worker_memory
        # Spark enforces the cap as RLIMIT_AS (address space). pyarrow's default pool (mimalloc)
        # reserves 1 GiB of address space at first use; the system allocator maps only what is used.
        conf["spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"] = "system"
    if params.loopback:
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    conf.update({str(k): str(v) for k, v in params.extra.items()})
    return conf


def build_spark(params: SparkParams) -> SparkSession:
    """Create (or, under spark-submit or in a notebook, reuse) the SparkSession.

    Args:
        params: the ``spark`` settings section.
    Returns:
        The active SparkSession, with its log level set to ``params.log_level``.
    Raises:
        Nothing of its own; Spark's errors (e.g. a master URL that cannot be reached) pass through.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        log.info("reusing the active SparkSession (master %s)", active.sparkContext.master)
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if params.loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    submitted = under_spark_submit()
    if not submitted:
        builder = builder.master(params.master)
    for key, value in spark_conf(params).items():
        if submitted and key in ("spark.driver.memory", "spark.executor.memory", "spark.app.name"):
            continue  # spark-submit decided these before this process started
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(params.log_level)
    log.info("SparkSession up: master %s, version %s", spark.sparkContext.master, spark.version)
    return spark
