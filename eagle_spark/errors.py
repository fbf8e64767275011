"""Exceptions of eagle_spark, the exit codes the CLI maps them to, and strict JSON.

The CLI contract: exit 0 on success, 2 on bad usage or bad input (the message says what is wrong
and where: file, line or row), 1 on an internal failure.
"""

from __future__ import annotations

import errno
import json
import math
import re
from typing import Any, Callable, Iterator, Sequence

import numpy as np

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2


class EagleError(Exception):
    """Base class of every error eagle_spark raises on purpose."""

    exit_code = EXIT_INTERNAL


class BadInputError(EagleError, ValueError):
    """Input data or arguments are wrong; the message names the file, line or row and the problem."""

    exit_code = EXIT_BAD_INPUT


class OutputExistsError(BadInputError):
    """The output path exists and overwriting was not asked for (``overwrite=False``).

    Attributes:
        path: the output path.
        existed: true when the output was there before the write began (the caller may offer its
            own way to overwrite: the CLI names ``--overwrite``, the Python API ``overwrite=True``),
            false when another writer committed it meanwhile.
    """

    def __init__(self, message: str, path: str = "", existed: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.existed = existed


class SettingsError(BadInputError):
    """A settings file or a ``--set key=value`` override is invalid (unknown key, wrong type)."""


class RunFolderInUseError(BadInputError):
    """Another live process holds the run folder's lock (:mod:`eagle_spark.io.lock`)."""


class StorageError(BadInputError):
    """The user's storage refused a write or a read: full, over quota, read-only or not permitted.

    Exit code 2 (the storage is the user's to fix); the message names the path and the cause.
    """


# (errno, the phrase Java and the C library use, what the message says)
_STORAGE_CAUSES = (
    (errno.ENOSPC, "No space left on device", "no space left on the device"),
    (errno.EDQUOT, "Disk quota exceeded", "the disk quota is exceeded"),
    (errno.EROFS, "Read-only file system", "the file system is read-only"),
    (errno.EACCES, "Permission denied", "permission denied"),
    (None, "AccessDeniedException", "permission denied"),
    (errno.ENOTDIR, "Not a directory", "a parent of it is a file, not a folder"),
    (None, "ParentNotDirectoryException", "a parent of it is a file, not a folder"),
    (
        None,
        "Mkdirs failed to create",
        "its folder cannot be created (permission denied, read-only, or a parent is a file)",
    ),
)
_JAVA_PATH = re.compile(r"(?:file:)?(/[^\s:'\"()]+)")


def storage_error(exc: BaseException, path: str | None = None) -> StorageError | None:
    """The :class:`StorageError` a failure amounts to, or None when storage is not the cause.

    Looks at `exc` and its causes: an ``OSError`` whose errno is ENOSPC, EDQUOT, EROFS, EACCES or
    ENOTDIR, or an error (Spark, Py4J, pyarrow) whose text carries the phrase for one of them
    (``No space left on device``, ``Read-only file system``, ``Permission denied``,
    ``AccessDeniedException``, ``Not a directory``, Hadoop's ``ParentNotDirectoryException`` and
    ``Mkdirs failed to create``).

    Args:
        exc: the failure.
        path: what the command was writing (named when the error itself names no path).
    Returns:
        A StorageError naming the path and the cause, or None.
    """
    for current in _chain(exc):
        if isinstance(current, OSError):
            for code, _, said in _STORAGE_CAUSES:
                if code is not None and current.errno == code:
                    where = current.filename or path or "the output"
                    return StorageError(f"cannot write {where}: {said}")
        for line in str(current).splitlines():
            for _, phrase, said in _STORAGE_CAUSES:
                if phrase in line:
                    named = _JAVA_PATH.search(line)
                    where = named.group(1) if named else path or "the output"
                    return StorageError(f"cannot write {where}: {said} ({line.strip()[:200]})")
    return None


def spark_condition(exc: BaseException) -> tuple[str, dict[str, str]] | None:
    """The error condition Spark attached to `exc` or one of its causes, with its parameters.

    Spark 4 names each of its errors by a condition (``FAILED_READ_FILE.NO_HINT``,
    ``PATH_NOT_FOUND``, ...) with named message parameters (``path``); the condition is read from
    ``getCondition()`` of a PySpark exception (every one under Spark Connect, the captured ones on
    a classic session) or of the Java exception a classic session's ``Py4JJavaError`` wraps (and
    its causes), never parsed from the message text.

    Args:
        exc: what a Spark call raised on the driver.
    Returns:
        (condition, message parameters), or None when neither `exc` nor a cause carries one.
    """
    for current in _chain(exc):
        getter = getattr(current, "getCondition", None)
        if callable(getter):
            condition = getter()
            if condition:
                parameters = getattr(current, "getMessageParameters", None)
                return str(condition), dict((parameters() if callable(parameters) else None) or {})
        for java in _java_chain(current):
            try:
                condition = java.getCondition()
            except Exception:  # a Java exception that is not a SparkThrowable
                continue
            if condition:
                return str(condition), {
                    str(k): str(v) for k, v in dict(java.getMessageParameters()).items()
                }
    return None


def innermost_cause(exc: BaseException) -> str | None:
    """``<Java class>: <message>`` of the innermost Java cause of a classic session's error, or
    None (no Java exception behind `exc`, e.g. under Spark Connect)."""
    for current in _chain(exc):
        found = list(_java_chain(current))
        if found:
            last = found[-1]
            return f"{last.getClass().getName()}: {str(last.getMessage() or '').strip()}"
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and its Python causes (``__cause__`` / ``__context__``), each once."""
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _java_chain(exc: BaseException) -> Any:
    """The Java exception a ``Py4JJavaError`` wraps and its Java causes (none for other errors)."""
    java = getattr(exc, "java_exception", None)
    depth = 0
    while java is not None and depth < 32:
        yield java
        java = java.getCause()
        depth += 1


class NumericalError(EagleError, ArithmeticError):
    """A stage computed a NaN or infinite embedding, weight or score; nothing of it is written.

    Raised inside Spark tasks as well; :func:`from_task_failure` recovers it on the driver. The
    message names the stage and the label, node or sample. Exit code 1 (an internal failure: the
    settings and inputs were checked, so the computation itself went wrong).
    """


def check_finite(values: np.ndarray, describe: Callable[[int], str]) -> None:
    """Raise :class:`NumericalError` unless every element of `values` is finite.

    Args:
        values: any numpy array (checked in one vectorised pass).
        describe: maps the flat index of the first non-finite element to the message (it names the
            stage and the label, node or sample).
    Raises:
        NumericalError: some element is NaN or +-inf.
    """
    flat = np.asarray(values).ravel()
    if flat.size and not np.isfinite(flat).all():
        raise NumericalError(describe(int(np.flatnonzero(~np.isfinite(flat))[0])))


def check_finite_scores(scores: np.ndarray, sample_ids: Sequence[int], stage: str) -> None:
    """:func:`check_finite` for a (rows, k) score block; the message names the row's sample_id.

    Args:
        scores: (n_rows, k) array of one batch.
        sample_ids: the batch's sample ids (any sequence indexable by row; Arrow arrays too).
        stage: names the stage in the message (``predict``).
    Raises:
        NumericalError: a score is NaN or infinite.
    """
    width = max(1, scores.shape[1]) if scores.ndim == 2 else 1

    def describe(i: int) -> str:
        sid = sample_ids[i // width]
        sid = sid.as_py() if hasattr(sid, "as_py") else sid
        return f"{stage}: sample_id {sid}: a label score is not finite (NaN or infinite)"

    check_finite(scores, describe)


# Spark wraps an exception raised in a Python task in a PythonException / Py4JJavaError whose text
# holds the task's traceback; its last line for our errors is "eagle_spark.errors.<Name>: <message>".
_TASK_ERROR = re.compile(r"eagle_spark\.errors\.(\w+): (.+)")


def from_task_failure(exc: BaseException) -> EagleError | None:
    """The :class:`EagleError` a Spark task raised, recovered from the driver-side exception.

    Args:
        exc: what a Spark action raised on the driver (``PythonException``, ``Py4JJavaError``, ...).
    Returns:
        A new instance of the task's error class with its message, or None when `exc` does not
        carry one of eagle_spark's errors.
    """
    if isinstance(exc, EagleError):
        return exc
    match = _TASK_ERROR.search(str(exc))
    if match is None:
        return None
    cls = globals().get(match.group(1))
    if not (isinstance(cls, type) and issubclass(cls, EagleError)):
        return None
    return cls(match.group(2).strip())


def _finite_or_fail(value: Any, where: str) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise NumericalError(f"{where or 'the value'} is {value!r}: not valid in strict JSON")
    if isinstance(value, dict):
        return {
            k: _finite_or_fail(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_finite_or_fail(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def strict_json(obj: object, **kwargs: Any) -> str:
    """``json.dumps`` that never writes NaN / Infinity (which are not JSON).

    Args:
        obj: JSON-serialisable object; ``default=str`` may be passed for other objects.
        kwargs: passed to :func:`json.dumps` (``indent``, ``sort_keys``, ``default``).
    Returns:
        The JSON text.
    Raises:
        NumericalError: a float in `obj` is NaN or infinite (the message gives its key path).
    """
    _finite_or_fail(obj, "")
    return json.dumps(obj, allow_nan=False, **kwargs)
