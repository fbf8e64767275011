"""What only a classic Spark session has (the SparkContext and its JVM), in one place, each used
only when present: the library runs the same algorithms on a classic session and under Spark
Connect, and asks this module for the few facts a classic session gives more precisely.

Under Spark Connect (``SparkSession.builder.remote(...)``) there is no SparkContext: the default
parallelism comes from settings (``spark.default.parallelism``, else the master's ``local[N]``, else
``spark.sql.shuffle.partitions``), a frame's partition count is unknown (callers then repartition or
take the safe path), job descriptions and the status tracker are absent (the progress lines come
from the session's progress handler instead: :mod:`eagle_spark.progress`), and log4j forwarding
does not apply (it is for spark-submit).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Optional

from pyspark.sql import DataFrame, SparkSession

if TYPE_CHECKING:
    from py4j.java_gateway import JVMView
    from pyspark import StatusTracker


def is_connect(obj: SparkSession | DataFrame) -> bool:
    """Whether `obj` (a session or a DataFrame) belongs to Spark Connect (the ``pyspark.sql.connect``
    classes), decided from its class without importing the Connect client."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def _context(spark: Optional[SparkSession]) -> Any:
    if spark is None or is_connect(spark):
        return None
    return spark.sparkContext


def master(spark: SparkSession) -> str:
    """The session's master URL (``local[2]``, ``spark://...``); under Connect the server's
    ``spark.master`` setting, or "" when it is not readable."""
    sc = _context(spark)
    if sc is not None:
        return str(sc.master)
    try:
        return str(spark.conf.get("spark.master", "") or "")
    except Exception:  # noqa: BLE001 - a Connect server may refuse to show a static setting
        return ""


def is_local(spark: SparkSession) -> bool:
    """Whether the session's executors run in the driver's process (master ``local...``)."""
    return master(spark).startswith("local")


def default_parallelism(spark: SparkSession) -> int:
    """Task slots Spark plans with: SparkContext.defaultParallelism on a classic session; under
    Connect ``spark.default.parallelism`` when set, else N of a ``local[N]`` master (the machine's
    cores for ``local[*]``), else ``spark.sql.shuffle.partitions``. At least 1."""
    sc = _context(spark)
    if sc is not None:
        return max(1, int(sc.defaultParallelism))
    given = spark.conf.get("spark.default.parallelism", None)
    if given:
        return max(1, int(given))
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master(spark))
    if m:
        cores = m.group(1)
        return max(1, os.cpu_count() or 1) if cores in (None, "*") else max(1, int(cores))
    return max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))


def num_partitions(df: DataFrame) -> Optional[int]:
    """Partitions of `df` as it would be read (no job runs), or None under Spark Connect, which
    does not expose it."""
    if is_connect(df):
        return None
    return int(df.rdd.getNumPartitions())


def status_tracker(spark: SparkSession) -> Optional[StatusTracker]:
    """The SparkContext's status tracker (active stages and their task counts), or None under
    Spark Connect."""
    sc = _context(spark)
    return sc.statusTracker() if sc is not None else None


def job_description(spark: Optional[SparkSession]) -> Optional[str]:
    """The job description set on this thread (None when unset or under Spark Connect)."""
    sc = _context(spark)
    return sc.getLocalProperty("spark.job.description") if sc is not None else None


def set_job_description(spark: Optional[SparkSession], text: Optional[str]) -> None:
    """Name the Spark jobs this thread starts (shown in the UI and the event log); nothing under
    Spark Connect."""
    sc = _context(spark)
    if sc is not None:
        sc.setJobDescription(text)


def set_log_level(spark: SparkSession, level: str) -> None:
    """Spark's own log level (classic sessions; a Connect server keeps its own)."""
    sc = _context(spark)
    if sc is not None:
        sc.setLogLevel(level)


def jvm(spark: SparkSession) -> JVMView:
    """The driver JVM's py4j view (log4j forwarding under spark-submit, Delta's JVM API).

    Raises:
        RuntimeError: under Spark Connect, which has no JVM in the client.
    """
    sc = _context(spark)
    if sc is None or sc._jvm is None:
        raise RuntimeError(
            "this needs a classic Spark session (a JVM in the driver's process); "
            "it is not available under Spark Connect"
        )
    return sc._jvm


__all__ = [
    "default_parallelism",
    "is_connect",
    "is_local",
    "job_description",
    "jvm",
    "master",
    "num_partitions",
    "set_job_description",
    "set_log_level",
    "status_tracker",
]
