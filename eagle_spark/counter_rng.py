"""Counter-based randomness for the synthetic generators (:mod:`eagle_spark.synth`,
:mod:`eagle_spark.twin`): every draw is a splitmix64 hash of (seed, parts...), so a sample is
generated alone, whatever the partitioning, and reruns give byte-identical files."""

from __future__ import annotations

import numpy as np


def splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 values (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def hash_parts(seed: int, *parts: np.ndarray | int) -> np.ndarray:
    """uint64 hash of (seed, parts...), broadcast over the parts' shapes."""
    h = np.full(
        np.broadcast(*[np.asarray(p) for p in parts]).shape,
        np.uint64(seed * 0x9E3779B97F4A7C15 % 2**64),
        dtype=np.uint64,
    )
    for i, p in enumerate(parts):
        h = splitmix(
            h ^ (np.asarray(p, dtype=np.uint64) + np.uint64(0x632BE59BD9B4E019 * (i + 1) % 2**64))
        )
    return h


def uniform(seed: int, *parts: np.ndarray | int) -> np.ndarray:
    """float64 in [0, 1) from :func:`hash_parts` (53 bits)."""
    return (hash_parts(seed, *parts) >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


def first_distinct(draws: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first ``want[i]`` distinct values of each row of `draws` (n x k int64), in draw order,
    then sorted: (offsets int64 (n+1), values int64 sorted per row). A row with fewer distinct
    values keeps all of them."""
    n, k = draws.shape
    order = np.argsort(draws, axis=1, kind="stable")
    sorted_draws = np.take_along_axis(draws, order, axis=1)
    first_sorted = np.ones_like(sorted_draws, dtype=bool)
    first_sorted[:, 1:] = sorted_draws[:, 1:] != sorted_draws[:, :-1]
    first = np.empty_like(first_sorted)
    np.put_along_axis(first, order, first_sorted, axis=1)
    keep = first & (np.cumsum(first, axis=1) <= want[:, None])
    counts = keep.sum(axis=1)
    values = np.sort(np.where(keep, draws, np.iinfo(np.int64).max), axis=1)
    flat = values[np.arange(k)[None, :] < counts[:, None]]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets, flat
