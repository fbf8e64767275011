"""What a committed folder consists of: its file list, written at commit and checked on every read.

Every folder eagle_spark commits (a dataset, a model, label embeddings, predictions, metrics) holds
``_files.json``, written into the temporary sibling just before the rename that publishes it
(:func:`eagle_spark.io.fs.atomic_output`). It lists each file below the folder with:

- ``size`` (bytes) and ``crc32`` (zlib's CRC-32 of the content, hex);
- for Parquet files, ``rows`` and, for each integer column (list elements included), the smallest
  and largest value (``min`` / ``max``), read from the file's footer statistics;
- under ``tables``, the number of distinct group ids of Y1 (one column read at commit).

Reading a folder (:func:`check_folder`, called by the dataset and model readers before any Spark
job) lists the folder and compares: a listed file that is missing, a file whose size differs
(truncated, or rewritten), a small file other than Parquet (at most :data:`CHECKSUM_ON_READ`
bytes: model metadata, nested manifests) whose CRC differs, or an unlisted file inside one of the
folder's tables, is a :class:`BadInputError` naming the folder, the table and the file. Parquet
and large files are checksummed on request (``eagle-spark verify``, :func:`verify_folder`), which also
re-reads every Parquet footer. The statistics let a reader compare a manifest's ``n_samples``,
``n_features`` and ``n_labels`` with the data without reading it
(:func:`check_counts`).

Not listed: the list itself, the folder's own ``_manifest.json`` (whose facts are checked against
the statistics instead), hidden files (``.``-prefixed: checksum sidecars, in-progress parts).
Outside readers (Spark, pandas, Polars, DuckDB) skip ``_``-prefixed files, so tables read as before.

A list is complete or the folder is refused. The commit also writes ``"file_list": "_files.json"``
into the folder's descriptor (:data:`DESCRIPTORS`: the manifest, a model's ``metadata.json``, a
saved stage's Spark ML metadata), the file a reader needs anyway, so a listed folder whose list
was removed is refused rather than read unchecked; and every file of a listed folder (not only
of the tables the list names) must be in the list. A folder whose descriptor does not say so
(written by another tool, or by an eagle_spark before lists were marked) is described from its
files as they are.
"""

from __future__ import annotations

import json
import logging
import posixpath
import zlib
from typing import Any, Mapping, Optional

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.io.parts import filesystem_for

log = logging.getLogger(__name__)

FILES = "_files.json"
"""Name of the file list inside a committed folder."""

LIST_FORMAT_VERSION = 1

CHECKSUM_ON_READ = 1 << 20
"""Files other than Parquet up to this size (bytes: metadata, nested manifests, Spark ML's
``metadata/``) have their CRC-32 checked on every read; Parquet files and larger ones only by
``eagle-spark verify`` (on read their size is checked, and their readers check each footer)."""

_UNLISTED = ("_manifest.json",)
MARK = "file_list"
"""The descriptor key that says the folder's files were listed (its value: :data:`FILES`)."""
DESCRIPTORS = ("_manifest.json", "metadata.json", "metadata")
"""Where a folder says what it is, first found first: a dataset's (predictions', embeddings',
metrics') manifest, a model folder's ``metadata.json``, a saved pyspark.ml stage's ``metadata/``
(Spark ML's one-line JSON part file)."""
_CHUNK = 8 << 20


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/"))


def _files(fs: pafs.FileSystem, root: str) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime in ns) of the regular, not hidden files below `root`."""
    out = {}
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = posixpath.relpath(info.path, root)
        if _hidden(rel) or rel == FILES or rel in _UNLISTED:
            continue
        out[rel] = (int(info.size), int(info.mtime_ns or 0))
    return out


def crc32(fs: pafs.FileSystem, path: str) -> str:
    """zlib CRC-32 of the file `path` of `fs`, 8 hex digits."""
    value = 0
    with fs.open_input_stream(path) as stream:
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            value = zlib.crc32(chunk, value)
    return f"{value & 0xFFFFFFFF:08x}"


def parquet_facts(fs: pafs.FileSystem, path: str) -> dict[str, Any]:
    """Rows and per integer column min / max of one Parquet file, from its footer.

    Returns:
        ``{"rows": int, "min": {column: int}, "max": {column: int}}``; a column is the top-level
        name (a list column's elements count as the column). A column some row group has no
        statistics for is left out.
    Raises:
        OSError, pyarrow.ArrowInvalid: the footer cannot be read.
    """
    with fs.open_input_file(path) as handle:
        meta = pq.ParquetFile(handle).metadata
    lows: dict[str, int] = {}
    highs: dict[str, int] = {}
    missing: set[str] = set()
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            if column.physical_type not in ("INT32", "INT64"):
                continue
            name = column.path_in_schema.split(".")[0]
            stats = column.statistics
            if stats is None or not stats.has_min_max:
                if column.num_values and (stats is None or stats.null_count != column.num_values):
                    missing.add(name)
                continue
            lows[name] = min(lows.get(name, stats.min), int(stats.min))
            highs[name] = max(highs.get(name, stats.max), int(stats.max))
    for name in missing:
        lows.pop(name, None)
        highs.pop(name, None)
    return {"rows": int(meta.num_rows), "min": lows, "max": highs}


_DESCRIBED: dict[tuple, dict[str, Any]] = {}
"""Descriptions of folders without a list (sizes and footers), by folder and its files' sizes and
mtimes: a pipeline reads a manifest many times per stage, and a changed file changes the key."""
_DESCRIBED_MAX = 64


def describe(folder: str, checksums: bool = True) -> dict[str, Any]:
    """The file list of `folder` as it is now (every file read once for its CRC-32).

    Args:
        folder: a folder (local path, ``file:`` or any URI pyarrow.fs understands).
        checksums: compute each file's CRC-32. Without, only sizes and Parquet footers are
            read, and the description is reused while the folder's files keep their sizes and
            modification times (:data:`_DESCRIBED`).
    Returns:
        ``{"format_version": 1, "files": {relative path: {"size", "crc32"[, "rows", "min", "max"]}}}``
        and, with a Y1 table, ``tables`` (its distinct group ids).
    Raises:
        OSError: a file cannot be read.
        BadInputError: a Parquet footer cannot be read (naming the file and its table).
    """
    fs, root = filesystem_for(folder)
    found = _files(fs, root)
    key = (folder, tuple(sorted(found.items())))
    if not checksums and key in _DESCRIBED:
        return _DESCRIBED[key]
    files = {}
    for rel, (size, _) in sorted(found.items()):
        path = posixpath.join(root, rel)
        entry: dict[str, Any] = {"size": size}
        if checksums:
            entry["crc32"] = crc32(fs, path)
        if rel.endswith(".parquet"):
            try:
                entry.update(parquet_facts(fs, path))
            except Exception as err:  # noqa: BLE001 - any reader failure is a damaged file
                where = posixpath.join(folder.rstrip("/"), rel)
                raise BadInputError(
                    f"input file {where} (table {_table(rel)} of {folder}) cannot be "
                    f"read: {err} (the file is damaged or truncated)"
                ) from None
        files[rel] = entry
    listing: dict[str, Any] = {"format_version": LIST_FORMAT_VERSION, "files": files}
    groups = _distinct(fs, root, files, "Y1", "group_id")
    if groups is not None:
        listing["tables"] = {"Y1": {"distinct": {"group_id": groups}}}
    if not checksums:
        if len(_DESCRIBED) >= _DESCRIBED_MAX:
            _DESCRIBED.pop(next(iter(_DESCRIBED)))
        _DESCRIBED[key] = listing
    return listing


def _distinct(
    fs: pafs.FileSystem, root: str, files: Mapping[str, Any], table: str, column: str
) -> Optional[int]:
    """Distinct values of `column` over `table`'s Parquet files (None: no such table or column).
    Reads that one column (Y1's group ids: 8 bytes a sample)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    paths = [
        posixpath.join(root, rel)
        for rel in files
        if posixpath.dirname(rel) == table and rel.endswith(".parquet")
    ]
    if not paths:
        return None
    data = pads.dataset(paths, filesystem=fs, format="parquet")
    if column not in data.schema.names:
        return None
    return int(pc.count_distinct(data.to_table(columns=[column]).column(column)).as_py())


def record(folder: str) -> Optional[dict[str, Any]]:
    """Write ``<folder>/_files.json`` describing `folder` (no-op when `folder` is a file).

    Called on the temporary sibling of an atomic commit, after everything is written and before
    the rename. First the folder's JSON descriptor (``_manifest.json`` or ``metadata.json``) gets
    ``"file_list": "_files.json"`` (:data:`MARK`; a saved stage's Spark ML metadata carries it
    from its writer). Cost: one read of every byte (CRC-32, ~1 GB/s) and one footer per Parquet
    file.

    Returns:
        The list written, or None for a file.
    """
    fs, root = filesystem_for(folder)
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        return None
    _mark(fs, root)
    listing = describe(folder)
    with fs.open_output_stream(posixpath.join(root, FILES)) as out:
        out.write((strict_json(listing, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return listing


def _mark(fs: pafs.FileSystem, root: str) -> None:
    """Write :data:`MARK` into the first JSON descriptor file of `root` that exists."""
    for name in DESCRIPTORS[:2]:
        path = posixpath.join(root, name)
        try:
            with fs.open_input_stream(path) as stream:
                raw = stream.read()
        except FileNotFoundError:
            continue
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise BadInputError(f"{path} is not valid JSON: {err}") from None
        if isinstance(data, dict) and data.get(MARK) != FILES:
            data[MARK] = FILES
            with fs.open_output_stream(path) as out:
                out.write((strict_json(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
        return


def claims_list(folder: str) -> Optional[str]:
    """The descriptor of `folder` that says its files were listed (:data:`MARK`), or None.

    Read: ``_manifest.json``, else ``metadata.json``, else the first part file of ``metadata/``
    (one JSON line); a descriptor that is not JSON says nothing here (its reader reports it).
    """
    fs, root = filesystem_for(folder)
    for name in DESCRIPTORS:
        path = posixpath.join(root, name)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            continue
        one_line = info.type == pafs.FileType.Directory
        if one_line:
            parts = sorted(
                i.path
                for i in fs.get_file_info(pafs.FileSelector(path))
                if i.type == pafs.FileType.File and posixpath.basename(i.path).startswith("part-")
            )
            if not parts:
                return None
            path = parts[0]
        try:
            with fs.open_input_stream(path) as stream:
                text = stream.read().decode("utf-8")
            if one_line:  # Spark ML writes its metadata as one JSON line
                text = text.splitlines()[0] if text else ""
            data = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        if isinstance(data, dict) and data.get(MARK) == FILES:
            return posixpath.join(folder.rstrip("/"), posixpath.relpath(path, root))
        return None
    return None


def _table(rel: str) -> str:
    parts = rel.split("/")
    return "/".join(parts[:-1]) if len(parts) > 1 else "(top level)"


def read_list(folder: str, what: str) -> Optional[dict[str, Any]]:
    """The recorded file list of `folder`, checked for shape; None when it has none.

    Raises:
        BadInputError: the list is not JSON, or has another format.
    """
    fs, root = filesystem_for(folder)
    path = posixpath.join(root, FILES)
    try:
        with fs.open_input_stream(path) as stream:
            raw = stream.read()
    except FileNotFoundError:
        return None
    try:
        listing = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInputError(
            f"{what} {folder}: its file list {FILES} is not valid JSON: {err}"
        ) from None
    files = listing.get("files") if isinstance(listing, dict) else None
    if (
        not isinstance(listing, dict)
        or listing.get("format_version") != LIST_FORMAT_VERSION
        or not isinstance(files, dict)
        or not all(isinstance(e, dict) and isinstance(e.get("size"), int) for e in files.values())
    ):
        raise BadInputError(
            f"{what} {folder}: its file list {FILES} is not a version "
            f"{LIST_FORMAT_VERSION} list of files with sizes"
        )
    return listing


def check_folder(folder: str, what: str = "folder", full: bool = False) -> Optional[dict[str, Any]]:
    """Check that `folder` holds exactly the files its list names, at their recorded sizes.

    Args:
        folder: a committed folder (a file path is not checked).
        what: how messages name it (``dataset``, ``model``, ...).
        full: also compare every file's CRC-32 and every Parquet file's footer row count (what
            ``eagle-spark verify`` does); otherwise only files up to :data:`CHECKSUM_ON_READ`
            bytes are checksummed.
    A folder without a list whose descriptor does not claim one (tables a user wrote with another
    tool, or an output of an earlier eagle_spark) is described from its files as they are (sizes
    and Parquet footers, logged), so its manifest is still checked by :func:`check_counts`;
    ``eagle-spark verify --record`` writes a list for it.

    Returns:
        The file list (for :func:`check_counts`), or None when `folder` is a file.
    Raises:
        BadInputError: the folder does not exist; its list is bad, or missing while its
            descriptor says it was listed (:func:`claims_list`); a file is missing, has another
            size or checksum, has a damaged footer, or is not listed (the message names the
            folder, the table and the file).
    """
    fs, root = filesystem_for(folder)
    kind = fs.get_file_info(root).type
    if kind == pafs.FileType.NotFound:
        raise BadInputError(f"{what} {folder} does not exist")
    if kind != pafs.FileType.Directory:
        return None
    listing = read_list(folder, what)
    if listing is None:
        marked = claims_list(folder)
        if marked is not None:
            raise BadInputError(
                f"{what} {folder} has no file list {FILES}, but {marked} says eagle_spark "
                "listed its files at commit: the list was removed, so the folder cannot be "
                "checked (write it again from its inputs; if its files are known good, "
                f"`eagle-spark verify --input {folder} --record` lists them as they are now)"
            )
        if full:
            raise BadInputError(
                f"{what} {folder} has no file list {FILES} to verify against "
                f"(`eagle-spark verify {folder} --record` writes one)"
            )
        log.info(
            "%s %s has no file list %s: its files are described as they are", what, folder, FILES
        )
        return describe(folder, checksums=False)
    listed = listing["files"]
    actual = _files(fs, root)

    def fail(rel: str, why: str) -> BadInputError:
        return BadInputError(
            f"{what} {folder}: table {_table(rel)}: file {rel} {why} "
            "(the folder is damaged or was changed after it was written)"
        )

    for rel, entry in sorted(listed.items()):
        if rel not in actual:
            raise fail(rel, f"is missing (its file list {FILES} names it)")
        if actual[rel][0] != entry["size"]:
            raise fail(
                rel,
                f"has {actual[rel][0]} bytes, its file list says {entry['size']} "
                "(truncated or rewritten)",
            )
        small = entry["size"] <= CHECKSUM_ON_READ and not rel.endswith(".parquet")
        if (full or small) and "crc32" in entry:
            found = crc32(fs, posixpath.join(root, rel))
            if found != entry["crc32"]:
                raise fail(
                    rel, f"has CRC-32 {found}, its file list says {entry['crc32']} (altered)"
                )
        if full and "rows" in entry:
            try:
                rows = parquet_facts(fs, posixpath.join(root, rel))["rows"]
            except Exception as err:  # noqa: BLE001 - any reader failure is a damaged file
                raise fail(rel, f"has a footer that cannot be read ({err})") from None
            if rows != entry["rows"]:
                raise fail(rel, f"has {rows} rows, its file list says {entry['rows']}")
    for rel in sorted(set(actual) - set(listed)):  # a list is complete or the folder is refused
        raise fail(rel, f"is not in its file list {FILES} (added, or left out of the list)")
    return listing


def table_facts(listing: Mapping[str, Any], table: str) -> Optional[dict[str, Any]]:
    """Rows and integer column bounds of `table` (a sub-folder, or "" for the top level) summed
    over its listed Parquet files, or None when the list has no Parquet file there."""
    rows = 0
    lows: dict[str, int] = {}
    highs: dict[str, int] = {}
    found = False
    for rel, entry in listing["files"].items():
        if posixpath.dirname(rel) != table or "rows" not in entry:
            continue
        found = True
        rows += int(entry["rows"])
        for name, value in entry.get("min", {}).items():
            lows[name] = min(lows.get(name, value), value)
        for name, value in entry.get("max", {}).items():
            highs[name] = max(highs.get(name, value), value)
    return {"rows": rows, "min": lows, "max": highs} if found else None


# (manifest key, table, column): the column's values must lie in [0, manifest[key]).
_BOUNDS = (
    ("n_features", "X", "feat_idx"),
    ("n_labels", "Y", "label_ids"),
    ("n_labels", "Y2", "label_id"),
    ("n_labels", "assignments", "label_id"),
)
# (manifest key, table): the table has exactly manifest[key] rows.
_ROWS = (("n_samples", "X"), ("n_samples", "predictions"))


def check_counts(
    folder: str, manifest: Mapping[str, Any], listing: Mapping[str, Any], what: str = "dataset"
) -> None:
    """Compare a manifest's sizes with its tables' recorded statistics.

    Checked: X (and predictions) has ``n_samples`` rows; X's feature ids lie below ``n_features``;
    Y's, Y2's and the assignments' label ids below ``n_labels``; none of them is negative; Y1 has
    ``n_groups`` distinct group ids (group ids are names, not positions, so only their number is
    checked; an embeddings folder's ``n_labels`` counts the labels embedded). A key the manifest lacks, or a table the
    folder does not have, is not checked.

    Raises:
        BadInputError: naming the folder, the manifest key, its value and what the data holds.
    """
    facts = {}

    def of(table: str) -> Optional[dict[str, Any]]:
        if table not in facts:
            facts[table] = table_facts(listing, table)
        return facts[table]

    for key, table in _ROWS:
        got = of(table)
        if got is not None and isinstance(manifest.get(key), int) and got["rows"] != manifest[key]:
            raise BadInputError(
                f"{what} {folder}: {_manifest(folder)} says {key}={manifest[key]} "
                f"but table {table} has {got['rows']} rows"
            )
    groups = listing.get("tables", {}).get("Y1", {}).get("distinct", {}).get("group_id")
    if (
        isinstance(groups, int)
        and isinstance(manifest.get("n_groups"), int)
        and groups != manifest["n_groups"]
    ):
        raise BadInputError(
            f"{what} {folder}: {_manifest(folder)} says n_groups={manifest['n_groups']} "
            f"but table Y1 has {groups} distinct group_id"
        )
    for key, table, column in _BOUNDS:
        got = of(table)
        if got is None or not isinstance(manifest.get(key), int):
            continue
        low, high = got["min"].get(column), got["max"].get(column)
        if low is not None and low < 0:
            raise BadInputError(
                f"{what} {folder}: table {table} has {column} {low} (in file "
                f"{_holder(listing, table, 'min', column, low)}), below 0"
            )
        if high is not None and high >= manifest[key]:
            raise BadInputError(
                f"{what} {folder}: {_manifest(folder)} says {key}={manifest[key]} "
                f"but table {table} has {column} {high} (in file "
                f"{_holder(listing, table, 'max', column, high)}; ids must lie in "
                f"[0, {manifest[key]}))"
            )


def _holder(listing: Mapping[str, Any], table: str, side: str, column: str, value: int) -> str:
    """The first listed file of `table` whose `side` statistic of `column` is `value`."""
    return next(
        rel
        for rel, e in sorted(listing["files"].items())
        if posixpath.dirname(rel) == table and e.get(side, {}).get(column) == value
    )


def _manifest(folder: str) -> str:
    return posixpath.join(folder.rstrip("/"), "_manifest.json")


def verify_folder(folder: str, what: str = "folder") -> dict[str, Any]:
    """Everything :func:`check_folder` checks, with every file's CRC-32 and Parquet footer, and
    the folder's ``_manifest.json`` (when it has one) against the statistics (:func:`check_counts`).

    Returns:
        ``{"folder", "files", "bytes", "rows"}`` of the verified folder.
    Raises:
        BadInputError: as :func:`check_folder` and :func:`check_counts`; a list that lists no
            file; a manifest that is not JSON.
    """
    listing = check_folder(folder, what, full=True)
    if listing is None:
        raise BadInputError(f"{what} {folder} is a file, not a committed folder")
    if not listing["files"]:
        raise BadInputError(
            f"{what} {folder}: its file list {FILES} lists no file (an empty list checks nothing)"
        )
    fs, root = filesystem_for(folder)
    try:
        with fs.open_input_stream(posixpath.join(root, "_manifest.json")) as stream:
            manifest = json.loads(stream.read().decode("utf-8"))
    except FileNotFoundError:
        manifest = None
    except (UnicodeDecodeError, ValueError) as err:
        raise BadInputError(f"{_manifest(folder)} is not valid JSON: {err}") from None
    if isinstance(manifest, dict):
        check_counts(folder, manifest, listing, what)
    files = listing["files"].values()
    return {
        "folder": folder,
        "files": len(files),
        "bytes": sum(e["size"] for e in files),
        "rows": sum(e.get("rows", 0) for e in files),
    }
