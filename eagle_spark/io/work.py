"""The driver's work folder: where the library keeps temporary datasets, unsaved models and the
automatic assignment's held-out splits (``spark.eagle_spark.workDir`` when set, else a folder
under the driver's temporary directory, deleted when the Python process exits).

On a cluster the setting must name storage every executor reaches (a shared file system or an
object-store URI pyarrow supports); without it the folder is the driver's local disk, which
executors reach only in local mode.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import threading
import uuid
from typing import Optional

from pyspark.sql import SparkSession

from eagle_spark.io.fs import absolute, pid_alive

log = logging.getLogger(__name__)

WORK_DIR_CONF = "spark.eagle_spark.workDir"
"""Spark setting naming the folder for the API's temporary datasets and unsaved models."""

_driver_work: Optional[str] = None
_driver_work_lock = threading.Lock()


WORK_PREFIX = "eagle_spark-ml-"
"""The driver's work folder is ``<temporary dir>/eagle_spark-ml-<pid>-<random>``: the pid says
whose it is, so a later driver removes those of drivers that were killed
(:func:`sweep_dead_work`)."""


def sweep_dead_work(root: str) -> list[str]:
    """Remove the work folders (:data:`WORK_PREFIX`) below `root` whose driver process is gone
    from this host (killed before its exit handler ran), and log each one.

    A folder whose pid is alive (this driver, a concurrent one, or a reused pid) is kept, and so
    is one without a pid in its name.

    Returns:
        The folders removed.
    """
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        m = re.fullmatch(re.escape(WORK_PREFIX) + r"(\d+)-\w+", name)
        if m is None or pid_alive(int(m.group(1))):
            continue
        path = os.path.join(root, name)
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            removed.append(path)
            log.info("removed %s, the work folder of driver %s, which is gone", path, m.group(1))
    return removed


def work_folder(spark: SparkSession, kind: str) -> str:
    """A new, not yet existing folder for a temporary dataset or an unsaved model.

    The first call of a driver process makes its work folder (and removes those of killed
    drivers: :func:`sweep_dead_work`); it is deleted when the process exits.

    Args:
        spark: the active session (its ``spark.eagle_spark.workDir`` setting, if any, is used).
        kind: a word naming the content (``dataset``, ``embeddings``, ``model``, ...).
    Returns:
        ``<work dir>/<kind>-<12 hex digits>``.
    """
    global _driver_work
    base = spark.conf.get(WORK_DIR_CONF, None)
    if not base:
        with _driver_work_lock:  # driver threads (the pipeline's methods) share one folder
            if _driver_work is None:
                sweep_dead_work(tempfile.gettempdir())
                _driver_work = tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-")
                atexit.register(shutil.rmtree, _driver_work, True)
            base = _driver_work
    return f"{absolute(base).rstrip('/')}/{kind}-{uuid.uuid4().hex[:12]}"


__all__ = ["WORK_DIR_CONF", "WORK_PREFIX", "sweep_dead_work", "work_folder"]
