"""File-system operations on any path Spark reads, through Hadoop's FileSystem API, and atomic commits.

Every output of eagle_spark is written to a hidden sibling folder (``.<name>.tmp-<uuid>``) and renamed
into place only when complete, so a reader sees the previous output or the new one, never half of
one; a failure midway deletes the sibling and leaves the previous output untouched.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import uuid
from typing import Any, Iterator

from pyspark.sql import SparkSession

from eagle_spark.errors import BadInputError, OutputExistsError

log = logging.getLogger(__name__)


class FileSystem:
    """Thin wrapper over ``org.apache.hadoop.fs.FileSystem`` for the session's Hadoop configuration.

    Args:
        spark: the active session (its JVM gateway is used).
    """

    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _resolve(self, path: str) -> tuple[Any, Any]:
        jpath = self._jvm.org.apache.hadoop.fs.Path(path)
        return jpath.getFileSystem(self._conf), jpath

    def _resolve_raw(self, path: str) -> tuple[Any, Any]:
        """Like _resolve, but the local file system without its hidden .crc checksum files, so
        that small files (manifests, metadata) stay editable by hand and by other tools."""
        fs, jpath = self._resolve(path)
        checksummed = self._jvm.java.lang.Class.forName("org.apache.hadoop.fs.ChecksumFileSystem")
        if checksummed.isInstance(fs):  # LocalFileSystem and subclasses (Hive's proxy)
            fs = fs.getRawFileSystem()
        return fs, jpath

    def exists(self, path: str) -> bool:
        """Whether `path` (file or folder) exists."""
        fs, jpath = self._resolve(path)
        return bool(fs.exists(jpath))

    def is_dir(self, path: str) -> bool:
        """Whether `path` exists and is a folder."""
        fs, jpath = self._resolve(path)
        return bool(fs.exists(jpath)) and bool(fs.getFileStatus(jpath).isDirectory())

    def size(self, path: str) -> int:
        """Length in bytes of file `path`."""
        fs, jpath = self._resolve(path)
        return int(fs.getFileStatus(jpath).getLen())

    def status(self, path: str) -> tuple[int, int]:
        """(length in bytes, modification time in ms since the epoch) of `path`."""
        fs, jpath = self._resolve(path)
        st = fs.getFileStatus(jpath)
        return int(st.getLen()), int(st.getModificationTime())

    def delete(self, path: str) -> None:
        """Delete `path` recursively; a missing path is not an error."""
        fs, jpath = self._resolve(path)
        fs.delete(jpath, True)

    def rename(self, src: str, dst: str) -> None:
        """Rename `src` to `dst` (which must not exist).

        Raises:
            OSError: the file system refused the rename.
        """
        fs, jsrc = self._resolve(src)
        _, jdst = self._resolve(dst)
        if not fs.rename(jsrc, jdst):
            raise OSError(f"could not rename {src} to {dst}")

    def copy(self, src: str, dst: str) -> None:
        """Copy file or folder `src` to `dst` byte for byte (``dst`` must not exist).

        Raises:
            OSError: the copy failed.
        """
        fs, jsrc = self._resolve(src)
        dst_fs, jdst = self._resolve(dst)
        util = self._jvm.org.apache.hadoop.fs.FileUtil
        if not util.copy(fs, jsrc, dst_fs, jdst, False, self._conf):
            raise OSError(f"could not copy {src} to {dst}")

    def mkdirs(self, path: str) -> None:
        """Create `path` and its parents."""
        fs, jpath = self._resolve(path)
        fs.mkdirs(jpath)

    def list(self, path: str) -> list[str]:
        """Names (not paths) of the entries of folder `path`, sorted."""
        fs, jpath = self._resolve(path)
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(jpath))

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace the file `path` with `data` (no checksum file on local disks)."""
        fs, jpath = self._resolve_raw(path)
        stream = fs.create(jpath, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def read_bytes(self, path: str) -> bytes:
        """The whole content of file `path`.

        Raises:
            FileNotFoundError: `path` does not exist.
        """
        fs, jpath = self._resolve_raw(path)
        if not fs.exists(jpath):
            raise FileNotFoundError(path)
        length = int(fs.getFileStatus(jpath).getLen())
        stream = fs.open(jpath)
        try:
            buf = self._jvm.java.io.ByteArrayOutputStream()
            self._jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, buf, 1 << 16, False)
            data = bytes(buf.toByteArray())
        finally:
            stream.close()
        if len(data) != length:
            raise OSError(f"short read of {path}: {len(data)} of {length} bytes")
        return data


def sibling(path: str, tag: str) -> str:
    """A hidden path next to `path`: ``<parent>/.<name>.<tag>``."""
    trimmed = path.rstrip("/")
    parent, name = posixpath.split(trimmed)
    return posixpath.join(parent, f".{name}.{tag}") if parent else f".{name}.{tag}"


def require_exists(spark: SparkSession, path: str, what: str) -> None:
    """Raise :class:`BadInputError` naming `what` unless `path` exists."""
    if not FileSystem(spark).exists(path):
        raise BadInputError(f"{what} {path} does not exist")


@contextlib.contextmanager
def atomic_output(spark: SparkSession, path: str, overwrite: bool = False) -> Iterator[str]:
    """Write an output beside `path` and move it into place only when the block succeeds.

    Usage::

        with atomic_output(spark, out, overwrite) as tmp:
            df.write.parquet(f"{tmp}/X")          # write everything under tmp

    Args:
        spark: the active session.
        path: final output path (file or folder).
        overwrite: replace an existing `path`; otherwise an existing one is an error.
    Yields:
        The temporary sibling path to write to (does not exist yet).
    Raises:
        OutputExistsError: `path` exists and `overwrite` is false (checked before and after the
            block, so no work is wasted and a concurrent writer is not clobbered).
    """
    fs = FileSystem(spark)
    if fs.exists(path) and not overwrite:
        raise OutputExistsError(f"output {path} exists; pass --overwrite to replace it")
    tmp = sibling(path, f"tmp-{uuid.uuid4().hex[:12]}")
    try:
        yield tmp
        if not fs.exists(tmp):
            raise OSError(f"nothing was written to {tmp}")
    except BaseException:
        fs.delete(tmp)
        raise
    backup = None
    if fs.exists(path):
        if not overwrite:
            fs.delete(tmp)
            raise OutputExistsError(f"output {path} appeared while writing; not replaced")
        backup = sibling(path, f"old-{uuid.uuid4().hex[:12]}")
        fs.rename(path, backup)
    try:
        fs.rename(tmp, path)
    except BaseException:
        if backup is not None:
            fs.rename(backup, path)
        fs.delete(tmp)
        raise
    if backup is not None:
        fs.delete(backup)
    log.info("committed %s", path)
