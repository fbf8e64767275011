"""Where eagle_spark's log lines go: stderr, or, under spark-submit, the driver JVM's log4j.

spark-submit runs the job's Python process with its stderr merged into its stdout (PySpark's
``PythonRunner`` redirects the error stream into the output stream it copies to the driver's
stdout), so Python log lines written to stderr would share stdout with the job's one JSON summary
line. Under spark-submit the CLI therefore buffers its log records until the session exists, then
hands them, and every later one, to log4j, the driver's own logging (its console appender writes to
the driver's real stderr; a cluster's log4j configuration applies to them like to Spark's own
lines). The ``eagle_spark`` log4j logger is set to the CLI's ``--log-level``.

Uses the driver JVM's py4j view through :func:`eagle_spark.classic.jvm` (spark-submit always
gives a classic session; pyspark is pinned to 4.2.0).
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from typing import TYPE_CHECKING, Any

from eagle_spark import classic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LOG4J_LEVEL = {
    "DEBUG": "DEBUG",
    "INFO": "INFO",
    "WARNING": "WARN",
    "ERROR": "ERROR",
    "CRITICAL": "FATAL",
}


def under_spark_submit() -> bool:
    """True when this Python process was started by spark-submit (the JVM gateway already exists)."""
    import os

    return "PYSPARK_GATEWAY_PORT" in os.environ


class Log4jHandler(logging.Handler):
    """Forwards records to log4j loggers of the same names in the driver JVM.

    Args:
        spark: the active session (its driver JVM receives the records).
    Records that cannot be forwarded (the JVM has stopped) are written to stderr instead.
    """

    def __init__(self, spark: SparkSession) -> None:
        super().__init__()
        self._gateway = classic.jvm(spark)
        self._loggers: dict[str, Any] = {}
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))  # log4j adds time and level

    def emit(self, record: logging.LogRecord) -> None:
        try:
            logger = self._loggers.get(record.name)
            if logger is None:
                logger = self._gateway.org.apache.logging.log4j.LogManager.getLogger(record.name)
                self._loggers[record.name] = logger
            text = self.format(record)
            if record.levelno >= logging.ERROR:
                logger.error(text)
            elif record.levelno >= logging.WARNING:
                logger.warn(text)
            elif record.levelno >= logging.INFO:
                logger.info(text)
            else:
                logger.debug(text)
        except Exception:  # noqa: BLE001 - the JVM is gone: keep the line
            sys.stderr.write(logging.Formatter(FORMAT).format(record) + "\n")


def configure(level: str) -> None:
    """Set up eagle_spark's logging at `level` (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``): to stderr,
    or, under spark-submit, into a buffer that :func:`to_log4j` empties into log4j."""
    if under_spark_submit():
        handler: logging.Handler = logging.handlers.MemoryHandler(
            capacity=100_000, flushLevel=logging.CRITICAL + 1
        )
        handler.setFormatter(logging.Formatter(FORMAT))
        logging.basicConfig(level=getattr(logging, level), handlers=[handler], force=True)
    else:
        logging.basicConfig(
            level=getattr(logging, level), format=FORMAT, stream=sys.stderr, force=True
        )
    for handler in logging.getLogger().handlers:  # a run's log file may lower the logger's level
        handler.setLevel(getattr(logging, level))  # to INFO; stderr keeps the level asked for
    logging.getLogger("py4j").setLevel(logging.WARNING)


def to_log4j(spark: SparkSession, level: str) -> None:
    """Under spark-submit: send the buffered records and every later one to the driver's log4j,
    with the ``eagle_spark`` log4j logger at `level`. Elsewhere nothing changes."""
    root = logging.getLogger()
    buffers = [h for h in root.handlers if isinstance(h, logging.handlers.MemoryHandler)]
    if not under_spark_submit() or not buffers:
        return
    jvm = classic.jvm(spark)
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "eagle_spark", jvm.org.apache.logging.log4j.Level.toLevel(_LOG4J_LEVEL[level])
    )
    forward = Log4jHandler(spark)
    for buffer in buffers:
        buffer.setTarget(forward)
        buffer.flush()
        root.removeHandler(buffer)
        buffer.close()
    root.addHandler(forward)


__all__ = ["FORMAT", "Log4jHandler", "configure", "to_log4j", "under_spark_submit"]
