"""Shared pieces of the benchmark scripts: peak RSS of the process tree, JSON report, table."""

from __future__ import annotations

import json
import os
import pathlib
import platform
import time
from typing import Any, Sequence

import psutil

from eagle_spark.monitor import PeakRSS  # noqa: F401  (re-exported for the scripts)

REPORTS = pathlib.Path(__file__).resolve().parent / "reports"


def folder_bytes(path: str | os.PathLike) -> int:
    """Total size in bytes of the files under `path`."""
    p = pathlib.Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def write_report(name: str, rows: Sequence[dict[str, Any]], extra: dict[str, Any] | None = None) -> pathlib.Path:
    """Write ``benchmarks/reports/<name>.json`` and print the rows as a table; returns the path."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
                    "python": platform.python_version()},
        **(extra or {}),
        "rows": list(rows),
    }
    path = REPORTS / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print_table(rows)
    print(f"report: {path}")
    return path


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    """Print dict rows as an aligned text table."""
    if not rows:
        return
    keys = list(rows[0])
    cells = [[_fmt(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
