"""XMC metrics P@k, nDCG@k and PSP@k, for k = 1..K, on Spark (with single-node twins).

Definitions follow napkinXC (``napkinxc.metrics``), each returned for every position 1..K:

* P@k = mean over rows of |top_k(pred) ∩ true| / k;
* nDCG@k = mean over rows of DCG@k / IDCG@k, DCG@k = sum_{r<=k} [pred_r in true] / log2(r + 1),
  IDCG@k = sum_{r <= min(k, |true|)} 1 / log2(r + 1);
* PSP@k (normalised) = sum over rows of (1/k) sum_{r<=k} [pred_r in true] inv_ps(pred_r), divided by
  the same sum for the best possible ranking (true labels sorted by inv_ps);
* inverse propensity (Jain, Prabhu, Varma, KDD 2016): inv_ps(l) = 1 + C (N_l + B)^(-A),
  C = (ln n - 1)(B + 1)^A, with N_l the label's count among the n rows of the reference set
  (A = 0.55, B = 1.5 by default; 0.5 / 0.4 for WikiLSHTC-325K).

Rows without true labels follow the Extreme Classification Repository's convention (as napkinXC):
they are counted in the mean and contribute 0 to P@k and nDCG@k (and nothing to PSP's sums).
Rows of the evaluated dataset without predictions count as empty rankings. Metrics are in [0, 1].
"""

from __future__ import annotations

import math
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S


def inv_propensity(label_counts: np.ndarray, n: int, A: float = 0.55, B: float = 1.5) -> np.ndarray:
    """Jain et al. (2016) inverse propensities.

    Args:
        label_counts: (n_labels,) number of reference rows having each label.
        n: number of reference rows.
        A, B: data-set constants.
    Returns:
        (n_labels,) float64 inverse propensities (>= 1).
    Raises:
        ValueError: n < 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    C = (math.log(n) - 1) * (B + 1) ** A
    return 1 + C * (np.asarray(label_counts, dtype=np.float64) + B) ** -A


def _row_sums(
    true: Sequence[Sequence[int]], pred: Sequence[Sequence[int]], k: int, inv_ps: np.ndarray
) -> np.ndarray:
    """Per-position sums over rows: [P (k), nDCG (k), PSP (k), best PSP (k)] as a (4, k) array."""
    out = np.zeros((4, k))
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    cum_discount = np.cumsum(discount)
    positions = np.arange(1, k + 1)
    for t, p in zip(true, pred):
        t_set = set(int(x) for x in t)
        p = [int(x) for x in p[:k]]
        hits = np.zeros(k)
        hits[: len(p)] = [1.0 if x in t_set else 0.0 for x in p]
        cum_hits = np.cumsum(hits)
        out[0] += cum_hits / positions
        if t_set:
            idcg = cum_discount[np.minimum(np.arange(k), len(t_set) - 1)]
            out[1] += np.cumsum(hits * discount) / idcg
        gains = np.zeros(k)
        gains[: len(p)] = [inv_ps[x] if x in t_set and x < len(inv_ps) else 0.0 for x in p]
        out[2] += np.cumsum(gains) / positions
        best = np.zeros(k)
        top = np.sort([inv_ps[x] for x in t_set if x < len(inv_ps)])[::-1][:k]
        best[: len(top)] = top
        out[3] += np.cumsum(best) / positions
    return out


def metrics_from_lists(
    true: Sequence[Sequence[int]], pred: Sequence[Sequence[int]], k: int, inv_ps: np.ndarray
) -> dict[str, list[float]]:
    """Single-node metrics over lists of true label ids and ranked predicted ids.

    Returns:
        {"P": [P@1..k], "nDCG": [...], "PSP": [...]}; empty input gives zeros.
    """
    sums = _row_sums(true, pred, k, inv_ps)
    n = len(true)
    return _finish(sums, n)


def _finish(sums: np.ndarray, n: int) -> dict[str, list[float]]:
    psp = np.divide(sums[2], sums[3], out=np.zeros_like(sums[2]), where=sums[3] > 0)
    return {
        "P": (sums[0] / max(n, 1)).tolist(),
        "nDCG": (sums[1] / max(n, 1)).tolist(),
        "PSP": psp.tolist(),
    }


_PARTIAL = pa.schema(
    [
        pa.field("rows", pa.int64(), nullable=False),
        pa.field(
            "sums", pa.list_(pa.field("element", pa.float64(), nullable=False)), nullable=False
        ),
    ]
)


def evaluate_frames(Y: DataFrame, predictions: DataFrame, k: int, inv_ps: np.ndarray) -> dict:
    """Metrics on Spark: one partial-sum row per Arrow batch, summed on the driver.

    Args:
        Y: DataFrame[sample_id, label_ids] (true labels; its rows are the evaluated rows).
        predictions: DataFrame[sample_id, label_ids] ranked best first (extra columns ignored).
        k: K >= 1.
        inv_ps: (n_labels,) inverse propensities (shipped to the tasks: 8 bytes per label).
    Returns:
        {"n_samples", "k", "P", "nDCG", "PSP"} with lists of length k.
    Raises:
        ValueError: k < 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    joined = Y.select(S.SAMPLE_ID, F.col(S.LABEL_IDS).alias("_true")).join(
        predictions.select(S.SAMPLE_ID, F.col(S.LABEL_IDS).alias("_pred")), S.SAMPLE_ID, "left"
    )
    return evaluate_pairs(joined, "_true", "_pred", k, inv_ps)


def evaluate_pairs(
    rows: DataFrame, true_col: str, pred_col: str, k: int, inv_ps: np.ndarray
) -> dict:
    """Metrics of a frame that holds each row's true labels and its ranked predictions side by side.

    Args:
        rows: DataFrame with `true_col` array<int> (true label ids) and `pred_col` array<int>
            (predicted label ids, best first; null counts as no prediction); every row is evaluated.
        true_col, pred_col: the two columns.
        k: K >= 1.
        inv_ps: (n_labels,) inverse propensities; label ids must be below n_labels.
    Returns:
        {"n_samples", "k", "P", "nDCG", "PSP"} with lists of length k (fractions in [0, 1]).
    Raises:
        ValueError: k < 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")

    def partial(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            true = [t or [] for t in batch.column(0).to_pylist()]
            pred = [p or [] for p in batch.column(1).to_pylist()]
            sums = _row_sums(true, pred, k, inv_ps)
            yield pa.RecordBatch.from_pydict(
                {"rows": [len(true)], "sums": [sums.ravel().tolist()]}, schema=_PARTIAL
            )

    parts = (
        rows.select(true_col, pred_col).mapInArrow(partial, from_arrow_schema(_PARTIAL)).collect()
    )  # one row per batch
    n = sum(r["rows"] for r in parts)
    sums = (
        np.sum([np.asarray(r["sums"]).reshape(4, k) for r in parts], axis=0)
        if parts
        else np.zeros((4, k))
    )
    return {"n_samples": n, "k": k, **_finish(sums, n)}


_COUNTS = pa.schema([pa.field("rows", pa.int64(), False), pa.field("counts", pa.binary(), False)])


def label_counts(Y: DataFrame, n_labels: int) -> tuple[np.ndarray, int]:
    """(counts per label (n_labels,) float64, number of rows) of a Y table, in one Spark pass:
    each task counts its partition's label ids (``np.bincount``) and sends one dense int64
    vector (8 bytes per label), summed on the driver. Ids outside [0, n_labels) are not counted.
    """

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        counts, rows = np.zeros(n_labels, dtype=np.int64), 0
        for batch in batches:
            rows += batch.num_rows
            ids = np.asarray(batch.column(0).flatten(), dtype=np.int64)
            ids = ids[(ids >= 0) & (ids < n_labels)]
            counts += np.bincount(ids, minlength=n_labels)
        yield pa.RecordBatch.from_arrays(
            [pa.array([rows], pa.int64()), pa.array([counts.tobytes()])], schema=_COUNTS
        )

    counts, n = np.zeros(n_labels), 0
    for row in Y.select(S.LABEL_IDS).mapInArrow(count, from_arrow_schema(_COUNTS)).collect():
        counts += np.frombuffer(row["counts"], dtype=np.int64)
        n += row["rows"]
    return counts, n


def table(result: dict) -> str:
    """Markdown table of a result of :func:`evaluate_frames` (values x 100)."""
    k = result["k"]
    lines = [
        "| metric | " + " | ".join(f"@{i}" for i in range(1, k + 1)) + " |",
        "|---|" + "---|" * k,
    ]
    for name in ("P", "nDCG", "PSP"):
        lines.append(f"| {name} | " + " | ".join(f"{100 * v:.2f}" for v in result[name]) + " |")
    return "\n".join(lines)
