"""Build the SparkSession from :class:`eagle_spark.settings.SparkSettings`; nothing is discovered implicitly.

Works in three situations:

* local mode (``master: local[*]``): the driver binds to 127.0.0.1 when ``loopback`` is set;
* a standalone cluster (``master: spark://host:7077``);
* under ``spark-submit``: the session spark-submit configured (master, memory) is kept, and only
  the SQL/Arrow settings below are applied on top.

A driver JVM this module starts maps Spark's classes from the install's class archive
(:mod:`eagle_spark.jvm_archive`, setting ``class_archive``) once one is made, and in local mode
compiles hot code with the JVM's first compiler only (:func:`jit_options`, setting ``driver_jit``).

Python workers are pinned to this interpreter (``PYSPARK_PYTHON``), otherwise they start whatever
``python3`` is first on PATH and fail to import pyarrow.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from pyspark.sql import SparkSession

from eagle_spark.classic import master, set_log_level
from eagle_spark.jvm_archive import driver_options
from eagle_spark.logs import under_spark_submit
from eagle_spark.settings import SparkSettings

log = logging.getLogger(__name__)


def spark_conf(params: SparkSettings) -> dict[str, str]:
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


QUICK_JIT = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")
"""HotSpot's first compiler only (C1), with the code cache the JVM gives both compilers (240 MB,
reserved address space; with C1 alone it would be 48 MB, which Spark's generated classes overflow,
and the JVM then sweeps and recompiles)."""


def jit_options(params: SparkSettings, given: str = "") -> list[str]:
    """The driver JVM's compiler options of the setting ``spark.driver_jit``, to add after `given`
    (``spark.driver.extraJavaOptions`` from ``spark.extra``): :data:`QUICK_JIT` for ``quick``, and
    for ``auto`` with a ``local`` master (the driver JVM runs the tasks, so the optimising compiler
    takes cores from them), without the code cache's size when `given` sets it; [] for ``full``,
    for ``auto`` with a cluster master, and when `given` already chooses (``TieredStopAtLevel``,
    ``TieredCompilation``).

    Source: this project (measured in ``benchmarks/main_job.py``'s ``main_job_jit_full`` report
    against ``main_job``), beyond the paper.
    """
    if "TieredStopAtLevel" in given or "TieredCompilation" in given:
        return []
    local = params.master == "local" or params.master.startswith("local[")  # not local-cluster
    quick = params.driver_jit == "quick" or (params.driver_jit == "auto" and local)
    if not quick:
        return []
    return [o for o in QUICK_JIT if o.removeprefix("-XX:").split("=")[0] not in given]


def build_spark(params: SparkSettings) -> SparkSession:
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
        log.info("reusing the active SparkSession (master %s)", master(active))
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if params.loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if params.remote:
        return _connect(params)
    builder = SparkSession.builder
    submitted = under_spark_submit()
    if not submitted:
        builder = builder.master(params.master)
    conf = spark_conf(params)
    if not submitted:  # a JVM this process starts: its compilers, Spark's classes from the archive
        given = conf.get("spark.driver.extraJavaOptions", "")
        added = [*jit_options(params, given), *driver_options(params.class_archive, given)]
        if added:
            conf["spark.driver.extraJavaOptions"] = " ".join([given, *added]).strip()
    for key, value in conf.items():
        if submitted and key in ("spark.driver.memory", "spark.executor.memory", "spark.app.name"):
            continue  # spark-submit decided these before this process started
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    set_log_level(spark, params.log_level)
    log.info("SparkSession up: master %s, version %s", master(spark), spark.version)
    return spark


CONNECT_PORT = 15002
"""Spark Connect's default port (an ``sc://host`` URL without one)."""
REACH_SECONDS = 10.0
"""How long :func:`_reachable` waits for the server to accept a connection."""


def _reachable(url: str) -> None:
    """Check that the ``sc://host[:port]`` server accepts a TCP connection within
    :data:`REACH_SECONDS` (the Connect client itself retries for minutes before it gives up).

    Raises:
        BadInputError: naming the URL and the reason.
    """
    import socket
    from urllib.parse import urlsplit

    from eagle_spark.errors import BadInputError

    parts = urlsplit(url.split(";", 1)[0])
    try:
        host, port = parts.hostname, parts.port or CONNECT_PORT
    except ValueError as err:
        raise BadInputError(f"spark.remote={url}: not a valid sc://host:port URL ({err})") from err
    if not host:
        raise BadInputError(f"spark.remote={url}: no host (sc://host:port)")
    try:
        socket.create_connection((host, port), timeout=REACH_SECONDS).close()
    except OSError as err:
        raise BadInputError(
            f"spark.remote={url}: cannot reach the Spark Connect server at {host}:{port} ({err})"
        ) from err


def _connect(params: SparkSettings) -> SparkSession:
    """A Spark Connect session for ``params.remote`` (``spark.remote``).

    ``local[N]`` starts a Connect server in this process with every setting; an ``sc://`` server
    takes the ``spark.sql.*`` settings (the others are its own) and is first probed with a TCP
    connection, so an unreachable one fails at once instead of after the client's retries.

    Raises:
        BadInputError: the server cannot be reached (names the URL and the reason).
    """
    from eagle_spark.errors import BadInputError

    remote = str(params.remote)
    if remote.startswith("sc://"):
        _reachable(remote)
    builder = SparkSession.builder.remote(remote)
    for key, value in spark_conf(params).items():
        if remote.startswith("local") or key.startswith("spark.sql."):
            builder = builder.config(key, value)
    try:
        with warnings.catch_warnings():
            # local[N]: the settings configure the server this process starts; pyspark then also
            # tries each on the session and warns for the static ones, which are already in force
            warnings.filterwarnings("ignore", message=".*CANNOT_MODIFY.*CONFIG")
            spark = builder.getOrCreate()
        spark.sql("SELECT 1").collect()
    except Exception as err:  # noqa: BLE001 - gRPC, connection and session errors alike
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BadInputError(
            f"spark.remote={remote}: cannot reach the Spark Connect server ({reason[:300]})"
        ) from err
    log.info("Spark Connect session up: %s, version %s", remote, spark.version)
    return spark


def local_session(cores: int = 2, connect: bool = False) -> SparkSession:
    """A Spark session on this machine for scripts and notebooks, with the library's settings.

    Python workers run this interpreter (``sys.executable``), so a script started as
    ``.venv/bin/python script.py`` finds the venv's packages in its workers without an activated
    venv (a plain ``SparkSession.builder`` starts them with the first ``python3`` on PATH).
    An active session is returned as it is.

    Args:
        cores: local[cores] (>= 1).
        connect: a Spark Connect session (a Connect server started in this process, as
            ``SparkSession.builder.remote("local[cores]")``) instead of a classic one.
    Returns:
        The session.
    Raises:
        ValueError: cores < 1.
    """
    if cores < 1:
        raise ValueError(f"local_session: cores must be >= 1, got {cores}")
    url = f"local[{cores}]"
    return build_spark(SparkSettings(master=url, remote=url if connect else None))
