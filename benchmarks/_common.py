"""Shared pieces of the benchmark scripts: peak RSS of the process tree, JSON report, table."""

from __future__ import annotations

import json
import os
import pathlib
import platform
import threading
import time
from typing import Any, Sequence

import psutil

REPORTS = pathlib.Path(__file__).resolve().parent / "reports"


class PeakRSS:
    """Samples the summed RSS of this process and all its descendants (JVM, Python workers).

    Use as a context manager; ``peak_bytes`` holds the largest sum seen (sampled every
    `interval` seconds, so very short spikes can be missed).
    """

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        root = psutil.Process(os.getpid())
        total = 0
        for proc in [root, *root.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRSS":
        self.peak_bytes = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._sample())


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
