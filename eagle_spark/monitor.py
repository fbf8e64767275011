"""Peak memory of this process tree, sampled in a background thread (run report, benchmarks).

In local mode the tree is everything a run uses: the driver's Python, the JVM it starts and the
Python workers the JVM forks. Under a cluster manager only the driver's share is visible here.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psutil


class PeakRSS:
    """Samples the summed resident set size (bytes) of this process and all its descendants.

    Use as a context manager; ``peak_bytes`` holds the largest sum seen. Samples are taken every
    `interval` seconds, so spikes shorter than that can be missed. With `pss`, the proportional set
    size is summed too (``peak_pss_bytes``): RSS counts a page shared by several processes (the
    memory-mapped executor state, the OS page cache of files they map) once per process, PSS
    splits it among them, so the PSS sum is the tree's real footprint. Reading PSS walks every
    mapping (Linux ``smaps``), so use a longer interval with it.

    Args:
        interval: seconds between samples. Must be > 0.
        pss: also sample the summed PSS.
    Raises:
        ValueError: `interval` <= 0.
    """

    def __init__(self, interval: float = 0.2, pss: bool = False) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.interval = interval
        self.pss = pss
        self.peak_bytes = 0
        self.peak_pss_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="peak-rss")

    @staticmethod
    def sample(pid: int | None = None) -> int:
        """Current summed RSS in bytes of process `pid` (default: this one) and its descendants;
        0 when `pid` has ended."""
        try:
            root = psutil.Process(os.getpid() if pid is None else pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:  # the process ended
            return 0
        total = 0
        for proc in tree:
            try:
                total += proc.memory_info().rss
            except psutil.Error:  # the process ended between listing and reading
                pass
        return total

    @staticmethod
    def sample_pss() -> tuple[int, int]:
        """Current summed (RSS, PSS) in bytes of this process and its descendants."""
        root = psutil.Process(os.getpid())
        rss = pss = 0
        for proc in [root, *root.children(recursive=True)]:
            try:
                info = proc.memory_full_info()
            except psutil.Error:
                continue
            rss, pss = rss + info.rss, pss + info.pss
        return rss, pss

    def _take(self) -> None:
        if self.pss:
            rss, pss = self.sample_pss()
            self.peak_pss_bytes = max(self.peak_pss_bytes, pss)
        else:
            rss = self.sample()
        self.peak_bytes = max(self.peak_bytes, rss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRSS":
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._take()


__all__ = ["PeakRSS"]
