"""One writer per run folder: an exclusive lock file ``<run>/_lock`` held for the whole run.

The lock file holds JSON ``{"host", "pid", "started_at", "run_id"}`` of its holder.

* Local run folders (a path or a ``file:`` URI): the file is opened with ``O_CREAT`` and locked
  with ``flock(LOCK_EX | LOCK_NB)``. The kernel releases the lock when its process dies, however it
  dies, so a lock left by a killed run is taken over at once (with a log line naming the dead
  holder); a live holder makes the second run fail with :class:`RunFolderInUseError` ("run folder
  ... is in use by pid N on host H since T"). After locking, the holder checks that the path still
  names the inode it locked (a releasing holder unlinks the file), so two runs never both hold it.
* Other file systems (``hdfs://``, ``s3a://``, ...): the file is created with Hadoop's
  ``create(overwrite=false)`` (atomic on HDFS); an existing lock of a dead process of this host is
  taken over, any other existing lock fails the run. A lock left by a machine that died must be
  deleted by hand there; the message says which file.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import logging
import os
import posixpath
import socket
from typing import Any, Optional

from pyspark.sql import SparkSession

from eagle_spark.errors import RunFolderInUseError
from eagle_spark.io.fs import FileSystem, local_path, pid_alive

log = logging.getLogger(__name__)

LOCK_NAME = "_lock"


def _describe(holder: dict[str, Any]) -> str:
    return (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')} since "
        f"{holder.get('started_at', '?')}"
    )


def _parse(text: str) -> dict[str, Any]:
    try:
        holder = json.loads(text) if text.strip() else {}
    except ValueError:
        holder = {}
    return holder if isinstance(holder, dict) else {}


class RunLock:
    """Exclusive lock of a run folder for the life of one run (a context manager).

    Args:
        spark: the active session (for non-local run folders).
        run_dir: the run folder; created if missing.
        run_id: identifies this run in the lock and in log lines.
    Raises:
        RunFolderInUseError: on entering, another live process holds the lock.
    """

    def __init__(self, spark: Optional[SparkSession], run_dir: str, run_id: str) -> None:
        self.spark = spark
        self.run_dir = run_dir.rstrip("/") or "/"
        self.path = posixpath.join(self.run_dir, LOCK_NAME)
        self.holder = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "run_id": run_id,
        }
        self._fd: Optional[int] = None
        self._remote = False

    # -- local ---------------------------------------------------------------------------------
    def _acquire_local(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                holder = _parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
                os.close(fd)
                raise RunFolderInUseError(
                    f"run folder {self.run_dir} is in use by {_describe(holder)} "
                    f"(lock {path}); wait for it to finish or choose another pipeline.output"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the holder released (unlinked) it between our open and flock: retry
                os.close(fd)
                continue
            previous = _parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            if previous:
                log.warning(
                    "run folder %s: taking over the lock of %s: that process is gone",
                    self.run_dir,
                    _describe(previous),
                )
            data = json.dumps(self.holder).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            self._fd = fd
            return

    # -- other file systems --------------------------------------------------------------------
    def _acquire_remote(self) -> None:
        if self.spark is None:
            raise ValueError(f"a SparkSession is needed to lock {self.run_dir}")
        fs = FileSystem(self.spark)
        for _ in range(2):
            if fs.create_new(self.path, json.dumps(self.holder).encode()):
                self._remote = True
                return
            holder = _parse(fs.read_bytes(self.path).decode("utf-8", "replace"))
            stale = holder.get("host") == self.holder["host"] and not pid_alive(
                int(holder.get("pid", -1))
            )
            if not stale:
                raise RunFolderInUseError(
                    f"run folder {self.run_dir} is in use by {_describe(holder)} (lock {self.path}; "
                    "if that process is gone on another machine, delete the lock file)"
                )
            log.warning(
                "run folder %s: taking over the lock of %s: that process is gone",
                self.run_dir,
                _describe(holder),
            )
            fs.delete(self.path)
        raise RunFolderInUseError(f"run folder {self.run_dir}: lost the race for {self.path}")

    def __enter__(self) -> "RunLock":
        local = local_path(self.path)
        if local is not None:
            self._acquire_local(local)
        else:
            self._acquire_remote()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def release(self) -> None:
        """Give the lock up (unlink the file, then unlock). Idempotent."""
        if self._fd is not None:
            local = local_path(self.path)
            try:
                if local is not None:
                    os.unlink(local)
            except FileNotFoundError:
                pass
            finally:
                os.close(self._fd)  # closing the descriptor drops the flock
                self._fd = None
        elif self._remote and self.spark is not None:
            FileSystem(self.spark).delete(self.path)
            self._remote = False


__all__ = ["LOCK_NAME", "RunLock"]
