"""Executor-side state held once per executor (machine), shared by every Python worker there.

Spark runs one Python worker process per task slot. Before this module each worker read its own
copy of X, Y, Y1, label representations and model weights into its heap, so an executor with c
cores held c copies. Now the first worker that needs a piece of state builds it (reads the Parquet
tables, normalises, converts) under an exclusive file lock and writes its arrays as ``.npy`` files
into a folder of the executor's local storage; every worker (the builder included) then opens
those files with ``numpy.load(mmap_mode="r")``. The pages live once in the operating system's page
cache and are mapped into each worker: the proportional set size (PSS) of the machine does not
grow with the number of task slots, and a worker never holds a private copy.

Where the files go: Spark's per-application working folder of the executor
(``SparkFiles.getRootDirectory()``, under ``spark.local.dir``), which Spark deletes when the
executor stops; outside a Spark task (the driver, tests) a temporary folder deleted at exit.
``EAGLE_SPARK_STATE_DIR`` overrides both. With one executor per machine (the usual deployment, and
local mode) that is once per machine; several executors on one machine hold one copy each.

Arrays are read-only (a write raises ``ValueError: assignment destination is read-only``), so no
caller can change state another worker sees. Each process remembers the arrays it opened, one
entry per kind of state (``x``, ``grlr``, ``reps``, ``tree``, ``ova``), so a new key of a kind
(another dataset, a rewritten model) replaces that kind's entry.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
import threading
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    TypeVar,
    Union,
)

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import scipy.sparse as sp

_lock = threading.RLock()  # a build may need another kind of state (PIFA reads X and Y)
_opened: dict[str, tuple[tuple, dict[str, np.ndarray]]] = {}
_fallback_root: Optional[str] = None
Built = Union[Mapping[str, np.ndarray], Iterable[tuple[str, np.ndarray]]]
"""What a state's build function returns: name -> array, or (name, array) pairs made one by one."""


def state_root() -> str:
    """The folder holding this executor's shared state (module docstring)."""
    global _fallback_root
    override = os.environ.get("EAGLE_SPARK_STATE_DIR")
    if override:
        return override
    from pyspark.files import SparkFiles

    try:  # in a task: the executor's folder; on a driver with a SparkContext: the driver's
        return os.path.join(SparkFiles.getRootDirectory(), "eagle_spark_state")
    except Exception:  # noqa: BLE001 - no SparkContext in this process (plain Python, tests)
        pass
    if _fallback_root is None:
        _fallback_root = tempfile.mkdtemp(prefix="eagle_spark_state-")
        atexit.register(shutil.rmtree, _fallback_root, True)
    return _fallback_root


def _folder(kind: str, key: tuple) -> str:
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
    return os.path.join(state_root(), f"{kind}-{digest}")


def _write(folder: str, arrays: Built) -> int:
    """Write the arrays into `folder` (whole or not at all); returns their bytes."""
    tmp = f"{folder}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    written = 0
    try:
        for name, value in arrays.items() if isinstance(arrays, Mapping) else arrays:
            value = np.ascontiguousarray(value)
            np.save(os.path.join(tmp, f"{name}.npy"), value, allow_pickle=False)
            written += value.nbytes
            del value  # no reference kept here while a generator makes its next array
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed build leaves nothing behind
        raise
    os.rename(tmp, folder)  # complete files only: the folder appears whole
    return written


RELEASE_HEAP_BYTES = 64 << 20
"""A built state at least this large is followed by :func:`_release_heap`; below it, the freed
buffers are too few to matter and the full garbage collection (tens of ms in a worker that has
imported scikit-learn) is skipped."""


def _release_heap() -> None:
    """Give the builder's freed buffers back to the OS (pyarrow's pool keeps them otherwise), so
    the builder does not hold a private copy's worth of memory next to the shared maps."""
    import gc

    gc.collect()
    try:
        import pyarrow as pa

        pa.default_memory_pool().release_unused()
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pass


def _open(folder: str) -> dict[str, np.ndarray]:
    return {
        name[:-4]: np.load(os.path.join(folder, name), mmap_mode="r", allow_pickle=False)
        for name in sorted(os.listdir(folder))
        if name.endswith(".npy")
    }


def shared_arrays(kind: str, key: tuple, build: Callable[[], Built]) -> dict[str, np.ndarray]:
    """Arrays of one piece of state, built once per executor and memory-mapped by every worker.

    Args:
        kind: the kind of state (one open entry per kind and process).
        key: identifies the content (paths, folder versions, settings): equal keys, equal arrays.
        build: makes the arrays (name -> numpy array, any dtype but object) when no worker of this
            executor has yet; runs in one worker only, under the lock. It may return an iterable
            of (name, array) pairs instead of a dict: each array is written as it comes, so a
            generator that makes its arrays one part at a time (one tree of a model) never holds
            the whole state in its heap.
    Returns:
        name -> read-only ``numpy.memmap`` (0-d arrays for scalars).
    Raises:
        Whatever `build` raises (nothing is written then, and the next caller tries again).

    Memory: the builder holds the arrays in its heap while building and writing them (once per
    executor; a generator: only the part being made); afterwards every worker maps the files, so
    the executor's resident memory for this state is its size once, whatever the number of task
    slots.
    """
    with _lock:
        entry = _opened.get(kind)
        if entry is not None and entry[0] == key:
            return entry[1]
        folder = _folder(kind, key)
        if not os.path.isdir(folder):
            os.makedirs(os.path.dirname(folder), exist_ok=True)
            fd = os.open(f"{folder}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # other workers wait here for the builder
                if not os.path.isdir(folder):
                    if _write(folder, build()) >= RELEASE_HEAP_BYTES:
                        _release_heap()
            finally:
                os.close(fd)
        arrays = _open(folder)
        _opened[kind] = (key, arrays)
        return arrays


T = TypeVar("T")
_views: dict[str, tuple[tuple, Any]] = {}


def shared_state(
    kind: str, key: tuple, build: Callable[[], Built], view: Callable[[dict[str, np.ndarray]], T]
) -> T:
    """One piece of executor state as the object its users want, made from the mapped arrays once
    per process: the single cache every loader goes through (X and Y, GRLR's context, label
    representations, tree and one-vs-all weights).

    Args:
        kind, key, build: as :func:`shared_arrays` (one open entry per kind and process; a new key
            replaces the kind's entry).
        view: wraps the read-only arrays without copying (e.g. :func:`sparse_from`); its result is
            kept for the next call with the same key.
    Returns:
        ``view(arrays)``.
    Raises:
        Whatever `build` raises (nothing is written then).
    """
    with _lock:
        entry = _views.get(kind)
        if entry is not None and entry[0] == key and opened(kind) == key:
            return entry[1]
    out = view(shared_arrays(kind, key, build))
    with _lock:
        _views[kind] = (key, out)
    return out


def sparse_arrays(M: "sp.spmatrix", prefix: str) -> dict[str, np.ndarray]:
    """The arrays of a CSR / CSC matrix for :func:`shared_arrays`, with the index dtype scipy keeps
    (int32 while every index and offset fits, as scipy would otherwise copy to downcast)."""
    small = max(M.nnz, *M.shape) < np.iinfo(np.int32).max
    idx = np.int32 if small else np.int64
    return {
        f"{prefix}_data": M.data,
        f"{prefix}_indices": M.indices.astype(idx, copy=False),
        f"{prefix}_indptr": M.indptr.astype(idx, copy=False),
        f"{prefix}_shape": np.asarray(M.shape, dtype=np.int64),
    }


def sparse_from(arrays: dict[str, np.ndarray], prefix: str, fmt: str = "csr") -> "sp.spmatrix":
    """The CSR (or CSC) matrix over the mapped arrays of :func:`sparse_arrays`, without a copy."""
    import scipy.sparse as sp

    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    shape = tuple(int(v) for v in arrays[f"{prefix}_shape"])
    return cls(
        (arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"], arrays[f"{prefix}_indptr"]),
        shape=shape,
        copy=False,
    )


@contextlib.contextmanager
def executor_lock(name: str, wait: bool = True) -> Iterator[bool]:
    """An exclusive lock shared by every Python worker of this executor (an ``flock`` on
    ``<state_root>/<name>.lock``): at most one holder per executor at a time, released when the
    block ends or the holder dies.

    Args:
        name: the lock's name (a file name: letters, digits, ``-``, ``_``).
        wait: block until the lock is free (True), or give up at once when another holds it.
    Yields:
        True when this block holds the lock; False only with ``wait=False`` when another holder has
        it (the block then runs without it and must not do what the lock guards).
    Raises:
        ValueError: `name` is not a plain file name.
    """
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"executor lock name must be letters, digits, - or _, got {name!r}")
    root = state_root()
    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, f"{name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True  # closing the descriptor below releases the lock
    finally:
        os.close(fd)


def opened(kind: str) -> Optional[tuple]:
    """The key of the `kind` state this process has open, or None (for tests and diagnostics)."""
    entry = _opened.get(kind)
    return entry[0] if entry else None


def forget(kind: Optional[str] = None) -> None:
    """Drop this process's handles of `kind` (all kinds when None); the files stay for others."""
    with _lock:
        if kind is None:
            _opened.clear()
            _views.clear()
        else:
            _opened.pop(kind, None)
            _views.pop(kind, None)


__all__ = [
    "executor_lock",
    "forget",
    "opened",
    "shared_arrays",
    "shared_state",
    "sparse_arrays",
    "sparse_from",
    "state_root",
]
