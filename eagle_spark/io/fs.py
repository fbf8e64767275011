"""File-system operations on any path the library writes, through ``pyarrow.fs``, and atomic commits.

Every output of eagle_spark is written to a hidden sibling folder (``.<name>.tmp-<uuid>``) and renamed
into place only when complete, so a reader sees the previous output or the new one, never half of
one; a failure midway deletes the sibling and leaves the previous output untouched.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import re
import socket
import time
import uuid
from typing import Iterable, Iterator, Optional

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from eagle_spark.errors import (
    BadInputError,
    OutputExistsError,
    StorageError,
    innermost_cause,
    spark_condition,
    storage_error,
)
from eagle_spark.io import integrity
from eagle_spark.io.parts import filesystem_for

log = logging.getLogger(__name__)


def local_path(path: str) -> Optional[str]:
    """The local file-system path of `path` (plain path or ``file:`` URI), or None for other URIs."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    if "://" in path:
        return None
    return path


def absolute(path: str) -> str:
    """`path` made absolute when it is a relative local path (against this process's folder),
    else unchanged (absolute paths, ``file:`` and other URIs).

    The library hands paths to Spark tasks; a relative one would be read against the task's
    folder, which under Spark Connect (a session's own folder) or on a cluster is not the
    driver's. The API and the CLI therefore make every local path absolute where it comes in.
    """
    if "://" in path or path.startswith("file:") or os.path.isabs(path):
        return path
    return os.path.abspath(path)


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists on this host (signal 0 probe)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def resolve(path: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow file system, path inside it) of `path`: a local path or ``file:`` URI made
    absolute (against this process's folder, as Spark resolves it), any other URI as
    :func:`eagle_spark.io.parts.filesystem_for` resolves it."""
    local = local_path(path)
    if local is not None:
        return pafs.LocalFileSystem(), os.path.abspath(local)
    return filesystem_for(path)


class FileSystem:
    """File operations on any path the library writes, through ``pyarrow.fs`` (local disks and
    ``file:`` URIs, ``hdfs://``, ``s3://`` / ``s3a://``, ``gs://`` and what else pyarrow's
    ``FileSystem.from_uri`` resolves, with its usual credentials), on the driver and on executors
    alike, with no JVM: the same code under a classic session and under Spark Connect.

    Args:
        spark: unused; kept so that callers may pass their session (``FileSystem(spark)``).
    """

    def __init__(self, spark: Optional[SparkSession] = None) -> None:
        del spark

    _resolve = staticmethod(resolve)

    def _info(self, path: str) -> pafs.FileInfo:
        fs, p = self._resolve(path)
        return fs.get_file_info(p)

    def exists(self, path: str) -> bool:
        """Whether `path` (file or folder) exists."""
        return bool(self._info(path).type != pafs.FileType.NotFound)

    def is_dir(self, path: str) -> bool:
        """Whether `path` exists and is a folder."""
        return bool(self._info(path).type == pafs.FileType.Directory)

    def status(self, path: str) -> tuple[int, int]:
        """(length in bytes, modification time in ms since the epoch) of `path`.

        Raises:
            FileNotFoundError: `path` does not exist.
        """
        info = self._info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, "no such file or folder", path)
        return int(info.size or 0), int((info.mtime_ns or 0) // 1_000_000)

    def size(self, path: str) -> int:
        """Bytes of the file `path`, or of every file under the folder `path` (recursively).

        Raises:
            FileNotFoundError: `path` does not exist.
        """
        fs, p = self._resolve(path)
        info = fs.get_file_info(p)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, "no such file or folder", path)
        if info.type != pafs.FileType.Directory:
            return int(info.size or 0)
        found = fs.get_file_info(pafs.FileSelector(p, recursive=True))
        return sum(int(i.size or 0) for i in found if i.type == pafs.FileType.File)

    def delete(self, path: str) -> None:
        """Delete `path` recursively; a missing path is not an error."""
        fs, p = self._resolve(path)
        kind = fs.get_file_info(p).type
        try:
            if kind == pafs.FileType.Directory:
                fs.delete_dir(p)
            elif kind != pafs.FileType.NotFound:
                fs.delete_file(p)
        except FileNotFoundError:  # deleted meanwhile
            pass

    def rename(self, src: str, dst: str) -> None:
        """Rename `src` to `dst`, which must not exist: never into or over an existing path.

        On the local file system the check and the move are one system call (``rename(2)`` fails
        on a non-empty folder, ``link(2)`` on any existing file), so of two writers committing to
        one `dst` at the same moment exactly one wins. Elsewhere `dst` is checked before the move;
        a file system that cannot move a folder (object stores) copies it and deletes `src`, which
        is not atomic there, as with Hadoop's S3A.

        Raises:
            FileExistsError: `dst` exists (or appeared while renaming).
            OSError: the file system refused the rename.
        """
        lsrc, ldst = local_path(src), local_path(dst)
        if lsrc is not None and ldst is not None:
            if os.path.isdir(lsrc):
                try:
                    os.rename(lsrc, ldst)
                except OSError as err:
                    if err.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
                        raise FileExistsError(errno.EEXIST, "rename target exists", dst) from err
                    raise
            else:
                os.link(lsrc, ldst)  # FileExistsError when dst exists
                os.unlink(lsrc)
            return
        fs, psrc = self._resolve(src)
        dst_fs, pdst = self._resolve(dst)
        if dst_fs.get_file_info(pdst).type != pafs.FileType.NotFound:
            raise FileExistsError(errno.EEXIST, "rename target exists", dst)
        try:
            fs.move(psrc, pdst)
        except (NotImplementedError, pa.ArrowNotImplementedError):
            pafs.copy_files(psrc, pdst, source_filesystem=fs, destination_filesystem=dst_fs)
            self.delete(src)

    def create_new(self, path: str, data: bytes) -> bool:
        """Create file `path` holding `data` unless it exists: one ``open(O_CREAT | O_EXCL)`` on
        a local disk (of two processes exactly one creates it); elsewhere checked first, then
        written (pyarrow has no exclusive create there: two writers starting in the same instant
        could both succeed).

        Returns:
            True when this call created the file, False when it existed.
        """
        local = local_path(path)
        if local is not None:
            os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
            try:
                fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return True
        if self.exists(path):
            return False
        self.write_bytes(path, data)
        return True

    def copy(self, src: str, dst: str) -> None:
        """Copy file or folder `src` to `dst` byte for byte (`dst` must not exist).

        Raises:
            FileNotFoundError: `src` does not exist.
            FileExistsError: `dst` exists.
            OSError: the copy failed.
        """
        fs, psrc = self._resolve(src)
        dst_fs, pdst = self._resolve(dst)
        kind = fs.get_file_info(psrc).type
        if kind == pafs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, "no such file or folder", src)
        if dst_fs.get_file_info(pdst).type != pafs.FileType.NotFound:
            raise FileExistsError(errno.EEXIST, "copy target exists", dst)
        if kind == pafs.FileType.Directory:
            dst_fs.create_dir(pdst, recursive=True)
        else:
            dst_fs.create_dir(posixpath.dirname(pdst), recursive=True)
        pafs.copy_files(psrc, pdst, source_filesystem=fs, destination_filesystem=dst_fs)

    def list(self, path: str) -> list[str]:
        """Names (not paths) of the entries of folder `path`, sorted.

        Raises:
            FileNotFoundError: `path` does not exist.
        """
        fs, p = self._resolve(path)
        return sorted(posixpath.basename(i.path) for i in fs.get_file_info(pafs.FileSelector(p)))

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace the file `path` with `data` (its parent folders are made)."""
        fs, p = self._resolve(path)
        fs.create_dir(posixpath.dirname(p), recursive=True)
        with fs.open_output_stream(p) as out:
            out.write(data)

    def read_bytes(self, path: str) -> bytes:
        """The whole content of file `path`.

        Raises:
            FileNotFoundError: `path` does not exist.
            OSError: fewer bytes than the file's size could be read.
        """
        fs, p = self._resolve(path)
        info = fs.get_file_info(p)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        with fs.open_input_stream(p) as stream:
            data = stream.read()
        if info.size is not None and len(data) != info.size:
            raise OSError(f"short read of {path}: {len(data)} of {info.size} bytes")
        return bytes(data)


def sibling(path: str, tag: str) -> str:
    """A hidden path next to `path`: ``<parent>/.<name>.<tag>``."""
    trimmed = path.rstrip("/")
    parent, name = posixpath.split(trimmed)
    return posixpath.join(parent, f".{name}.{tag}") if parent else f".{name}.{tag}"


def require_exists(spark: SparkSession, path: str, what: str) -> None:
    """Raise :class:`BadInputError` naming `what` unless `path` exists (after
    :func:`restore_interrupted`)."""
    fs = FileSystem(spark)
    restore_interrupted(fs, path)
    if not fs.exists(path):
        raise BadInputError(f"{what} {path} does not exist")


def _canonical(path: str) -> str:
    """Absolute, normalised form of `path` for comparisons: symlinks resolved for local paths,
    ``scheme://authority/path`` normalised for other URIs."""
    local = local_path(path)
    if local is not None:
        return "file://" + os.path.realpath(os.path.abspath(local))
    scheme, _, rest = path.partition("://")
    authority, _, tail = rest.partition("/")
    return f"{scheme.lower()}://{authority}" + posixpath.normpath("/" + tail)


def overlaps(a: str, b: str) -> bool:
    """Whether paths `a` and `b` are the same, or one lies inside the other."""
    ca, cb = _canonical(a).rstrip("/"), _canonical(b).rstrip("/")
    return ca == cb or ca.startswith(cb + "/") or cb.startswith(ca + "/")


def check_separate(output: str, inputs: Iterable[Optional[str]]) -> None:
    """Refuse an output path equal to, inside, or containing one of the input paths.

    Writing there would delete or rewrite the inputs (``--overwrite`` replaces the whole output
    folder), so this is checked before any work, with or without overwriting.

    Args:
        output: the output path (file or folder).
        inputs: input paths (None entries are ignored).
    Raises:
        BadInputError: naming both paths.
    """
    out = _canonical(output).rstrip("/")
    for inp in inputs:
        if inp is None or not overlaps(output, inp):
            continue
        given = _canonical(inp).rstrip("/")
        how = "is" if out == given else "lies inside" if out.startswith(given + "/") else "contains"
        raise BadInputError(
            f"output {output} {how} the input {inp}: writing it would destroy "
            "the input; choose an output path outside every input"
        )


_HOST = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:40] or "host"
_SIBLING = re.compile(
    r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<ms>\d{13})-(?P<pid>\d+)-"
    r"(?P<uid>[0-9a-f]{12})-(?P<host>[A-Za-z0-9]*)(?:\.parts)?$"
)
STALE_FOREIGN_SECONDS = 3600
"""A leftover sibling written by another host is removed once it is this much older than the
writer that finds it (its process cannot be probed from here)."""


def _tag(kind: str, started_ms: int) -> str:
    return f"{kind}-{started_ms:013d}-{os.getpid()}-{uuid.uuid4().hex[:12]}-{_HOST}"


FAULT_ENV = "EAGLE_SPARK_FAULT_AT"
"""Fault injection for the commit's tests: when this environment variable names a step of
:func:`atomic_output` (``written``, ``moved-old``, ``moved-new``, ``deleted-old``), the process
exits at once (``os._exit(137)``, as if killed) right after that step."""


def _step(name: str) -> None:
    if os.environ.get(FAULT_ENV) == name:
        os._exit(137)


def _siblings(fs: "FileSystem", path: str) -> Iterator[tuple[re.Match, str]]:
    """(name match, path) of the ``.tmp-*`` / ``.old-*`` siblings of `path` whose writer is not a
    live process of this host (other than this one)."""
    parent, name = posixpath.split(path.rstrip("/"))
    parent = parent or "."
    if not fs.exists(parent):
        return
    for entry in fs.list(parent):
        m = _SIBLING.match(entry)
        if m is None or m.group("name") != name:
            continue
        pid = int(m.group("pid"))
        if m.group("host") == _HOST and pid != os.getpid() and pid_alive(pid):
            continue
        yield m, posixpath.join(parent, entry)


def _dead_siblings(fs: "FileSystem", path: str, kind: str) -> list[tuple[int, str]]:
    """(start ms, path) of the ``.<kind>-*`` siblings of `path` whose writer is gone, oldest first."""
    return sorted(
        (int(m.group("ms")), p) for m, p in _siblings(fs, path) if m.group("kind") == kind
    )


def restore_interrupted(spark_or_fs: SparkSession | FileSystem | None, path: str) -> bool:
    """Put back the previous output of `path` when a replace was killed between its two renames.

    :func:`atomic_output` replaces an output by renaming it to a ``.old-*`` sibling and then the
    new one into place. A kill between the two leaves `path` missing and the previous output,
    complete, in the sibling: this renames the newest such sibling (of a writer that is gone) back
    to `path`, and logs a warning saying so. Called before every commit to `path` and by the
    readers when `path` is missing. Nothing happens when `path` exists.

    Returns:
        True when an output was restored.
    """
    fs = spark_or_fs if isinstance(spark_or_fs, FileSystem) else FileSystem(spark_or_fs)
    if fs.exists(path):
        return False
    olds = _dead_siblings(fs, path, "old")
    if not olds:
        return False
    _, newest = olds[-1]
    try:
        fs.rename(newest, path)
    except FileExistsError:  # another process restored or committed it meanwhile
        return False
    log.warning(
        "restored %s from %s: a replace of it was interrupted between its two renames "
        "(the previous output is back; the interrupted one was not committed)",
        path,
        newest,
    )
    return True


def _leftovers(fs: "FileSystem", path: str, started_ms: int) -> list[str]:
    """Hidden ``.tmp-*`` / ``.old-*`` siblings of `path` left by writers that are gone: started
    before `started_ms` and, on this host, whose process is dead (other hosts: older by
    :data:`STALE_FOREIGN_SECONDS`)."""
    out = []
    for m, sib in _siblings(fs, path):
        ms = int(m.group("ms"))
        if ms >= started_ms:
            continue
        if m.group("host") != _HOST and started_ms - ms < STALE_FOREIGN_SECONDS * 1000:
            continue
        out.append(sib)
    return out


def probe_writable(tmp: str, path: str) -> None:
    """Create and remove the folder `tmp` (beside the output `path`, its parents made), so a
    file system that refuses the write (permission, read-only, a parent that is a file, quota)
    is one :class:`eagle_spark.errors.StorageError` naming `path` before any Spark job, whichever
    layer would have met it first (pyarrow.fs, Spark's writer, Hadoop's ``Mkdirs failed``).

    Raises:
        StorageError (exit 2): the folder cannot be created.
    """
    fs, p = resolve(tmp)
    try:
        fs.create_dir(p, recursive=True)
        fs.delete_dir(p)
    except OSError as err:
        known = storage_error(err, path)
        said = " ".join(str(err).split())  # one line
        raise (known or StorageError(f"cannot write {path}: {said}")) from None


@contextlib.contextmanager
def atomic_output(spark: SparkSession, path: str, overwrite: bool = False) -> Iterator[str]:
    """Write an output beside `path` and move it into place only when the block succeeds.

    Usage::

        check_separate(out, [dataset])            # first thing a stage does
        ...                                       # read, compute
        with atomic_output(spark, out, overwrite) as tmp:
            df.write.parquet(f"{tmp}/X")          # write everything under tmp

    The sibling is named ``.<name>.tmp-<start ms>-<pid>-<id>-<host>``. After a successful commit,
    siblings of the same target left by writers that are gone (killed runs: started before this
    one, and whose process is dead on this host, or older by an hour on another host) are deleted
    and logged.

    Args:
        spark: the active session.
        path: final output path (file or folder).
        overwrite: replace an existing `path`; otherwise an existing one is an error.
    Yields:
        The temporary sibling path to write to (does not exist yet).
    Raises:
        OutputExistsError: `path` exists and `overwrite` is false (checked before and after the
            block, so no work is wasted and a concurrent writer is not clobbered), or another
            writer committed to `path` while this one was writing.
        StorageError: the file system refuses to create the temporary sibling
            (:func:`probe_writable`, before the block runs).
    """
    fs = FileSystem(spark)
    restore_interrupted(fs, path)
    if fs.exists(path) and not overwrite:
        raise OutputExistsError(f"output {path} exists", path=path, existed=True)
    started_ms = int(time.time() * 1000)
    tmp = sibling(path, _tag("tmp", started_ms))
    probe_writable(tmp, path)
    try:
        yield tmp
        if not fs.exists(tmp):
            raise OSError(f"nothing was written to {tmp}")
        integrity.record(tmp)  # the folder's file list (a file output is left as it is)
    except BaseException:
        fs.delete(tmp)
        raise
    _step("written")
    backup = None
    if fs.exists(path):
        if not overwrite:
            fs.delete(tmp)
            raise OutputExistsError(f"output {path} appeared while writing; not replaced")
        backup = sibling(path, _tag("old", started_ms))
        fs.rename(path, backup)
        _step("moved-old")
    try:
        fs.rename(tmp, path)
        _step("moved-new")
    except FileExistsError:
        fs.delete(tmp)
        if backup is not None:  # another writer committed meanwhile: keep its output
            fs.delete(backup)
        raise OutputExistsError(
            f"output {path} was committed by another writer meanwhile; "
            "this one's output was discarded"
        ) from None
    except BaseException:
        if backup is not None:
            fs.rename(backup, path)
        fs.delete(tmp)
        raise
    if backup is not None:
        fs.delete(backup)
        _step("deleted-old")
    log.info("committed %s", path)
    for left in _leftovers(fs, path, started_ms):
        fs.delete(left)
        log.info("removed %s, left by an earlier writer of %s that is gone", left, path)


# Where pyarrow's Parquet reader (executor-side reads of X, embeddings, weights) names the file it
# failed on: pyarrow's errors carry no condition, so its message is read.
_ARROW_FAILED_READ = (
    re.compile(r"Could not open Parquet input source '([^']+)'"),
    re.compile(r"Could not read schema from '([^']+)'"),
)
_CAUSE = re.compile(r"Caused by: ([\w.$]+(?:Exception|Error)): ([^\n]*)")
_ARROW_CAUSE = re.compile(
    r"(Parquet magic bytes not found[^\n.]*|Couldn't deserialize thrift[^\n]*|"
    r"Unexpected end of stream[^\n]*)"
)


def damaged_file(exc: BaseException) -> Optional[tuple[str, str]]:
    """The file a failed read names, and why, from a Spark or pyarrow exception (or None).

    Spark's reads are recognised by their error condition ``FAILED_READ_FILE.*`` and its ``path``
    parameter (:func:`eagle_spark.errors.spark_condition`); pyarrow's Parquet reads inside Python
    tasks by pyarrow's own message.

    Returns:
        (path as named by the error, reason: the innermost cause Spark reports, e.g.
        ``java.io.EOFException: Unexpected end of input stream``).
    """
    text = str(exc)
    found = spark_condition(exc)
    reason = None
    if found is not None and found[0].split(".")[0] == "FAILED_READ_FILE" and found[1].get("path"):
        path, reason = found[1]["path"], innermost_cause(exc)
    else:
        matches = (pattern.search(text) for pattern in _ARROW_FAILED_READ)
        match = next((m for m in matches if m is not None), None)
        if match is None:
            return None
        path = match.group(1)
    if reason is None:  # pyarrow's failure, or no Java exception behind Spark's (Spark Connect)
        causes = _CAUSE.findall(text)
        arrow = _ARROW_CAUSE.search(text)
        if causes:
            name, message = causes[-1]
            reason = f"{name}: {message.strip()}"
        elif arrow is not None:
            reason = arrow.group(1).strip()
        else:
            reason = text.strip().splitlines()[0][:300]
    return path, reason


@contextlib.contextmanager
def input_read_errors(inputs: Iterable[Optional[str]]) -> Iterator[None]:
    """Turn a failed read of one of `inputs` (a damaged or truncated file) into a
    :class:`BadInputError` naming the file and its table; other failures pass unchanged.

    Used at stage boundaries (each CLI command, each pipeline stage): a truncated gzip text file,
    a Parquet part file with a broken footer or page, or a checksum mismatch then exits 2 with
    ``input file <path> (table <T> of <dataset>) cannot be read: <reason>``.

    Args:
        inputs: the paths the stage reads (None entries ignored).
    Raises:
        BadInputError: the failure names a file inside one of `inputs`.
    """
    try:
        yield
    except BadInputError:
        raise
    except Exception as exc:
        found = damaged_file(exc)
        if found is None:
            raise
        path, reason = found
        owner = next((i for i in inputs if i is not None and overlaps(path, i)), None)
        if owner is None:
            raise
        table = posixpath.basename(posixpath.dirname(path.rstrip("/")))
        where = f" (table {table} of {owner})" if owner.rstrip("/") != path.rstrip("/") else ""
        raise BadInputError(
            f"input file {path}{where} cannot be read: {reason} (the file is damaged or truncated)"
        ) from exc
