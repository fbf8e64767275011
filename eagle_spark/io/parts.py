"""Executor-side Parquet part files, written with pyarrow from inside Spark tasks.

Spark's own Parquet writer converts every array element through the JVM row format (about 60k rows/s
for 40-element arrays on two cores, PLATFORM.md); pyarrow writes the Arrow batches a ``mapInArrow``
task already holds at C++ speed. A part file is named deterministically by the caller (e.g. by the
input split it comes from), written under a unique in-progress name and renamed at the end, so a
retried or speculative task replaces the file with identical content and readers never see half of
one. The folder still is a normal Parquet table that Spark, pandas, Polars and DuckDB read.
"""

from __future__ import annotations

import posixpath
import uuid
from typing import Optional

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


def filesystem_for(path: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow file system, path inside it) for a local path, ``file://`` URI or other URI."""
    if "://" in path:
        if path.startswith("file://"):
            return pafs.LocalFileSystem(), path[len("file://"):]
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), path


class PartWriter:
    """Write one Parquet part file of a table folder from a stream of Arrow batches.

    Args:
        folder: table folder (local path, ``file://`` or any URI pyarrow.fs understands).
        name: file name inside `folder`, deterministic for the task (e.g. ``part-00042.parquet``).
        schema: Arrow schema of every batch.
    Raises:
        OSError: the file system refused to create or rename the file.
    """

    def __init__(self, folder: str, name: str, schema: pa.Schema) -> None:
        self._fs, self._folder = filesystem_for(folder)
        self._final = posixpath.join(self._folder, name)
        self._tmp = posixpath.join(self._folder, f".{name}.inprogress-{uuid.uuid4().hex[:12]}")
        self._schema = schema
        self._writer: Optional[pq.ParquetWriter] = None
        self.rows = 0

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append rows (nothing is created until the first non-empty batch)."""
        if batch.num_rows == 0:
            return
        if self._writer is None:
            self._fs.create_dir(self._folder, recursive=True)
            self._writer = pq.ParquetWriter(self._tmp, self._schema, filesystem=self._fs)
        if isinstance(batch, pa.RecordBatch):
            batch = pa.Table.from_batches([batch], self._schema)
        self._writer.write_table(batch)
        self.rows += batch.num_rows

    def close(self, allow_empty: bool = False) -> None:
        """Finish the file and move it to its final name (replacing an earlier attempt's).

        Args:
            allow_empty: write a zero-row file (schema only) when no row was written.
        """
        if self._writer is None and allow_empty:
            self._fs.create_dir(self._folder, recursive=True)
            self._writer = pq.ParquetWriter(self._tmp, self._schema, filesystem=self._fs)
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        self._fs.move(self._tmp, self._final)

    def abort(self) -> None:
        """Drop the in-progress file."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._fs.delete_file(self._tmp)


class PartWriters:
    """One part file per table of a dataset, opened on first use, for one Spark task.

    Use as a context manager: on a clean exit every file is closed and moved into place; on an
    exception every in-progress file is deleted and the exception propagates.

    Args:
        root: dataset folder (the tables are sub-folders).
        schemas: table name -> Arrow schema.
    """

    def __init__(self, root: str, schemas: dict[str, pa.Schema]) -> None:
        self._root = root
        self._schemas = schemas
        self._name: Optional[str] = None
        self._writers: dict[str, PartWriter] = {}

    def name(self, name: str) -> None:
        """Set the part file name (deterministic for the task) before the first write."""
        if self._name is None:
            self._name = name

    def write(self, table: str, batch: pa.RecordBatch | pa.Table) -> None:
        """Append `batch` to `table`'s part file."""
        if self._name is None:
            raise RuntimeError("PartWriters.name() must be called before write()")
        if table not in self._writers:
            self._writers[table] = PartWriter(posixpath.join(self._root, table), self._name,
                                              self._schemas[table])
        self._writers[table].write(batch)

    def __enter__(self) -> "PartWriters":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        for writer in self._writers.values():
            if exc_type is None:
                writer.close()
            else:
                writer.abort()
