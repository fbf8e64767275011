"""The realistic synthetic generator: a topic model of multi-label data, fitted to a dataset.

:mod:`eagle_spark.synth`'s presets give each label private prototype features, so a label stays
identifiable after its positives are diluted by aggregation (the Baseline keeps ~0.9 of the
Oracle). Real multi-label sets differ in what aggregation hurts: labels co-occur, share evidence
with related labels, have long frequency tails, and samples vary widely in how many labels and
words they have. This model draws each of those from statistics of a fully labelled dataset
(:func:`describe`), never from aggregated results:

* **label frequencies**: the source's label-frequency curve (share of positives against rank
  fraction, :attr:`TwinModel.label_curve`); label 0 is the most frequent;
* **labels per sample**: the source's distribution (:attr:`TwinModel.labels_pmf`, 0 allowed);
* **co-occurrence**: labels fall into topics of :attr:`TwinModel.topic_size` by a hash of the
  label id; a sample's first label is drawn from the frequencies, each further label with
  probability :attr:`TwinModel.cohesion` from the topic of one of its earlier labels (in
  proportion to the frequencies, so each label's marginal frequency is kept) and otherwise from
  the whole set. ``cohesion`` is fitted to the source's share of label pairs seen again
  (:func:`pair_information`);
* **words**: a sample of ``n`` nonzeros (drawn from the source's nonzeros-per-sample quantiles)
  spends a share :attr:`TwinModel.signal` of its word draws on evidence of its labels and the
  rest on background words drawn from the source's feature-frequency curve. Each evidence word
  is, with probability :attr:`TwinModel.shared`, a word of the label's topic (shared with every
  label of the topic), otherwise one of the label's own ``label_words`` words (Zipf within the
  set). ``signal`` is the difficulty: it is fitted so that the Oracle's P@1 on the twin matches
  the source's (:func:`fit`);
* **values**: tf-idf-like, (1 + log count) x an inverse frequency of the word, rows
  L2-normalised.

Every draw is a counter-based hash of (seed, split, sample_id, draw) as in :mod:`eagle_spark.synth`,
so any sample is generated alone: files do not depend on partitioning, and reruns are
byte-identical. A model scales (:meth:`TwinModel.scaled`): sample, label and feature counts are
multiplied, every per-sample distribution and the frequency curves (against rank fraction) are kept.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import scipy.sparse as sp

from eagle_spark.counter_rng import first_distinct, hash_parts, uniform
from eagle_spark.errors import BadInputError

CURVE_POINTS = 96
"""Points of a frequency curve (cumulative share at geometric rank fractions)."""
NNZ_QUANTILES = 64
"""Quantile steps of the nonzeros-per-sample distribution."""
MAX_LABELS_PMF = 256
"""Labels per sample above this are counted as this many."""


@dataclass(frozen=True)
class TwinModel:
    """Fitted parameters of the realistic generator (module docstring); JSON-serialisable.

    Attributes:
        n_train, n_test, n_features, n_labels: counts.
        label_curve: (rank fraction, cumulative share of positives) points, both in [0, 1],
            increasing, ending at (1, 1); labels are ranked by frequency.
        feature_curve: the same for the features' occurrences (background words).
        labels_pmf: P(labels per sample = j), j = 0 .. len - 1.
        nnz_quantiles: nonzeros per sample at quantiles 0, 1/64, ..., 1.
        cohesion: in [0, 1], the chance a further label comes from an earlier label's topic.
        signal: in (0, 1], the share of a sample's word draws that are evidence of its labels.
        shared: in [0, 1], the share of evidence words drawn from the label's topic.
        topic_size: labels per topic.
        label_words: own words per label.
        draws_per_nnz: word draws per nonzero wanted (duplicates are summed), >= 1.
        source: where the statistics came from (a name, a path, a preset).
    """

    n_train: int
    n_test: int
    n_features: int
    n_labels: int
    label_curve: tuple[tuple[float, float], ...]
    feature_curve: tuple[tuple[float, float], ...]
    labels_pmf: tuple[float, ...]
    nnz_quantiles: tuple[float, ...]
    cohesion: float = 0.5
    signal: float = 0.5
    shared: float = 0.5
    topic_size: int = 16
    label_words: int = 16
    draws_per_nnz: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("n_train", "n_features", "n_labels"):
            if getattr(self, name) < 1:
                raise BadInputError(f"twin model: {name} must be >= 1, got {getattr(self, name)}")
        if self.n_test < 0:
            raise BadInputError(f"twin model: n_test must be >= 0, got {self.n_test}")
        for name, lo, hi in (("cohesion", 0, 1), ("shared", 0, 1), ("signal", 0, 1)):
            v = getattr(self, name)
            if not (lo <= v <= hi) or (name == "signal" and v <= 0):
                raise BadInputError(f"twin model: {name} must be in [{lo}, {hi}], got {v}")
        for name in ("label_curve", "feature_curve"):
            _check_curve(name, getattr(self, name))
        pmf = np.asarray(self.labels_pmf, dtype=np.float64)
        if pmf.ndim != 1 or len(pmf) < 1 or (pmf < 0).any() or abs(pmf.sum() - 1) > 1e-6:
            raise BadInputError("twin model: labels_pmf must be probabilities summing to 1")
        q = np.asarray(self.nnz_quantiles, dtype=np.float64)
        if len(q) < 2 or (np.diff(q) < 0).any() or q[0] < 0:
            raise BadInputError("twin model: nnz_quantiles must be >= 0 and non-decreasing")
        if self.topic_size < 1 or self.label_words < 1 or not self.draws_per_nnz >= 1:
            raise BadInputError(
                "twin model: topic_size and label_words must be >= 1, draws_per_nnz >= 1"
            )

    @property
    def labels_per_sample(self) -> float:
        """Mean labels per sample the model draws for (before duplicates are dropped)."""
        return float(np.dot(np.arange(len(self.labels_pmf)), self.labels_pmf))

    @property
    def nnz_per_sample(self) -> float:
        """Mean of the nonzeros-per-sample distribution."""
        q = np.asarray(self.nnz_quantiles)
        return float(np.mean((q[1:] + q[:-1]) / 2))

    def scaled(self, scale: float) -> "TwinModel":
        """The model with sample, label and feature counts multiplied by `scale` (> 0).

        Per-sample distributions and the curves (against rank fraction) are kept; the feature
        count is floored at 4 x the largest nonzeros per sample, so that a small scale still has
        room for the longest rows.

        Raises:
            BadInputError: scale not finite and > 0.
        """
        if not (math.isfinite(scale) and scale > 0):
            raise BadInputError(f"scale must be > 0, got {scale}")
        if scale == 1:
            return self
        return dataclasses.replace(
            self,
            n_train=max(1, round(self.n_train * scale)),
            n_test=max(1, round(self.n_test * scale)) if self.n_test else 0,
            n_labels=max(2, round(self.n_labels * scale)),
            n_features=max(int(4 * self.nnz_quantiles[-1]) + 1, round(self.n_features * scale)),
        )

    def to_json(self) -> dict[str, Any]:
        """The parameters as a JSON object (curves as lists of pairs)."""
        out = dataclasses.asdict(self)
        out["label_curve"] = [list(p) for p in self.label_curve]
        out["feature_curve"] = [list(p) for p in self.feature_curve]
        out["labels_pmf"] = list(self.labels_pmf)
        out["nnz_quantiles"] = list(self.nnz_quantiles)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any], what: str = "twin model") -> "TwinModel":
        """The inverse of :meth:`to_json`.

        Raises:
            BadInputError: a missing or unknown key, or a value out of range, naming `what`.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(obj) - names)
        if unknown:
            raise BadInputError(f"{what}: unknown key(s) {unknown}")
        try:
            kw = dict(obj)
            for k in ("label_curve", "feature_curve"):
                kw[k] = tuple((float(a), float(b)) for a, b in kw[k])
            kw["labels_pmf"] = tuple(float(v) for v in kw["labels_pmf"])
            kw["nnz_quantiles"] = tuple(float(v) for v in kw["nnz_quantiles"])
            return cls(**kw)
        except (KeyError, TypeError, ValueError) as err:
            raise BadInputError(f"{what}: {err}") from err


def _check_curve(name: str, curve: Any) -> None:
    c = np.asarray(curve, dtype=np.float64)
    if (
        c.ndim != 2
        or c.shape[1] != 2
        or len(c) < 2
        or (np.diff(c, axis=0) < 0).any()
        or c.min() < 0
        or abs(c[-1, 0] - 1) > 1e-9
        or abs(c[-1, 1] - 1) > 1e-9
    ):
        raise BadInputError(
            f"twin model: {name} must be non-decreasing (rank fraction, share) pairs in [0, 1] "
            "ending at (1, 1)"
        )


# ---- statistics of a labelled dataset ----


def frequency_curve(
    counts: np.ndarray, points: int = CURVE_POINTS
) -> tuple[tuple[float, float], ...]:
    """The cumulative share of `counts` (sorted decreasing) at geometric rank fractions.

    Args:
        counts: occurrences per item (label or feature), shape (n_items,), >= 0, sum > 0.
    Returns:
        ((0, 0), (r_1, s_1), ..., (1, 1)): s_j is the share of all occurrences held by the
        round(r_j x n_items) most frequent items; the first point past 0 is the single most
        frequent item, so the head is exact.
    """
    c = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    n = len(c)
    cum = np.concatenate([[0.0], np.cumsum(c)]) / c.sum()
    ranks = np.unique(np.round(np.geomspace(1, n, points)).astype(np.int64))
    pts = [(0.0, 0.0)] + [(float(r / n), float(cum[r])) for r in ranks]
    pts[-1] = (1.0, 1.0)
    return tuple(pts)


RANK_MAP_POWER = 3
"""p of the rank map of a scaled curve (:func:`curve_masses`): a larger p keeps more head items
one to one."""


def curve_masses(curve: tuple[tuple[float, float], ...], n_items: int) -> np.ndarray:
    """Each of `n_items` ranked items' share of occurrences under a curve of
    :func:`frequency_curve` (linear between its points), shape (n_items,), summing to 1.

    At the source's own count N (the curve's first point past 0 is 1 / N) item r holds the share
    of the source's item r. At another count n the items map to the source's ranks by
    rho(r) = r + (N - n) (r / n)^p (p = :data:`RANK_MAP_POWER`; for n > N its inverse): the head
    stays one to one, so a smaller or larger model's most frequent items are as frequent per
    sample as the source's, and the tail items are merged (n < N) or split (n > N), so that the
    mean occurrences per item scale with n. Item r holds the share between rho(r) and rho(r + 1).
    """
    c = np.asarray(curve, dtype=np.float64)
    first = c[1, 0] if len(c) > 1 and c[1, 0] > 0 else 1.0 / n_items
    N = max(1, int(round(1.0 / first)))
    r = np.arange(n_items + 1, dtype=np.float64)
    if n_items <= N:
        rho = r + (N - n_items) * (r / n_items) ** RANK_MAP_POWER
    else:
        grid = np.arange(N + 1, dtype=np.float64)
        rho = np.interp(r, grid + (n_items - N) * (grid / N) ** RANK_MAP_POWER, grid)
    edges = np.interp(rho / N, c[:, 0], c[:, 1])
    m = np.maximum(np.diff(edges), 0.0)
    return m / m.sum()


def pair_information(Y: sp.csr_matrix, max_rows: int = 20_000, seed: int = 0) -> float:
    """The mutual information (nats) between two distinct labels of one sample: the
    co-occurrence statistic ``cohesion`` is fitted to (0 when labels co-occur at random).

    The joint of (a, b) is the share of within-sample ordered pairs a != b that are (a, b); the
    plug-in estimate is biased upwards on few samples, so it is compared only between a source
    and a twin measured on the same number of rows.

    Args:
        Y: samples x labels, CSR (any values; nonzeros are positives).
        max_rows: at most this many rows are used (a seeded choice).
    Returns:
        >= 0; 0 when no sample has two labels.
    """
    Y = sp.csr_matrix(Y, copy=False)
    if Y.shape[0] > max_rows:
        rows = np.sort(np.random.default_rng(seed).choice(Y.shape[0], max_rows, replace=False))
        Y = Y[rows]
    B = Y.copy()
    B.data = np.ones_like(B.data, dtype=np.float64)
    C = (B.T @ B).tocoo()  # pair counts (labels x labels)
    off = C.row != C.col
    a, b, c = C.row[off], C.col[off], C.data[off]
    total = c.sum()
    if not len(c) or total == 0:
        return 0.0
    pa = np.bincount(a, weights=c, minlength=Y.shape[1]) / total
    pj = c / total
    return float(max(0.0, np.sum(pj * np.log(pj / (pa[a] * pa[b])))))


def describe(X: sp.csr_matrix, Y: sp.csr_matrix, n_test: int, source: str = "") -> TwinModel:
    """The twin model of a labelled dataset before fitting (``cohesion`` and ``signal`` are
    fitted by :func:`fit`): its counts, label and feature frequency curves, labels-per-sample
    distribution and nonzeros-per-sample quantiles.

    Args:
        X: samples x features, CSR; Y: samples x labels, CSR.
        n_test: the test split's size of the twin.
        source: recorded in the model.
    Raises:
        BadInputError: no positive label or no nonzero feature (nothing to model).
    """
    X = sp.csr_matrix(X)
    Y = sp.csr_matrix(Y)
    Y.sum_duplicates()
    n, n_features = X.shape
    n_labels = Y.shape[1]
    lab_counts = np.bincount(Y.indices, minlength=n_labels)
    if lab_counts.sum() == 0:
        raise BadInputError(f"{source or 'dataset'}: no sample has a label, nothing to model")
    feat_counts = np.bincount(X.indices, minlength=n_features)
    if feat_counts.sum() == 0:
        raise BadInputError(f"{source or 'dataset'}: X has no nonzero, nothing to model")
    per = np.minimum(np.diff(Y.indptr), MAX_LABELS_PMF)
    pmf = np.bincount(per, minlength=1).astype(np.float64)
    pmf /= pmf.sum()
    nnz = np.diff(X.indptr).astype(np.float64)
    q = np.quantile(nnz, np.linspace(0, 1, NNZ_QUANTILES + 1))
    return TwinModel(
        n_train=n,
        n_test=n_test,
        n_features=n_features,
        n_labels=n_labels,
        label_curve=frequency_curve(lab_counts),
        feature_curve=frequency_curve(feat_counts),
        labels_pmf=tuple(float(v) for v in pmf),
        nnz_quantiles=tuple(float(v) for v in q),
        topic_size=max(8, 2 * math.ceil(float(np.dot(np.arange(len(pmf)), pmf)))),
        source=source,
    )


@dataclass(frozen=True)
class TwinGenerator:
    """Counter-based generator of one :class:`TwinModel` (module docstring).

    What it holds: the label masses and per-topic cumulative masses (~3 float64 per label) and
    the feature curve's cumulative masses (1 float64 per feature); a batch of ``n`` rows needs
    ~60 bytes per word draw. Generation of a row depends only on (seed, split, sample_id).
    """

    model: TwinModel
    seed: int = 0

    def rows(
        self, split: int, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(label offsets, label ids, feature offsets, feature ids, values) of the rows `ids`."""
        lab_off, labels = self.labels(split, ids)
        return (lab_off, labels, *self.features(split, ids, lab_off, labels))

    def _hash(self, *parts: np.ndarray | int) -> np.ndarray:
        return hash_parts(self.seed, *parts)

    def _uniform(self, *parts: np.ndarray | int) -> np.ndarray:
        return uniform(self.seed, *parts)

    # ---- tables built once per generator ----
    @functools.cached_property
    def label_mass(self) -> np.ndarray:
        """Share of positives of each label id (label 0 the most frequent), (n_labels,)."""
        return curve_masses(self.model.label_curve, self.model.n_labels)

    @functools.cached_property
    def label_cdf(self) -> np.ndarray:
        c = np.cumsum(self.label_mass)
        return c / c[-1]

    @functools.cached_property
    def n_topics(self) -> int:
        return max(1, -(-self.model.n_labels // self.model.topic_size))

    def topic_of(self, labels: np.ndarray) -> np.ndarray:
        """Topic of each label id: a hash of the id (so a topic mixes frequent and rare labels)."""
        return (self._hash(4, labels) % np.uint64(self.n_topics)).astype(np.int64)

    @functools.cached_property
    def _topics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(labels ordered by topic, cumulative mass in that order with a leading 0, start
        offset of each topic in it (n_topics + 1))."""
        labels = np.arange(self.model.n_labels, dtype=np.int64)
        t = self.topic_of(labels)
        order = np.argsort(t, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(self.label_mass[order])])
        starts = np.searchsorted(t[order], np.arange(self.n_topics + 1))
        return order, cum, starts

    @functools.cached_property
    def feature_cdf(self) -> np.ndarray:
        c = np.cumsum(curve_masses(self.model.feature_curve, self.model.n_features))
        return c / c[-1]

    @functools.cached_property
    def idf(self) -> np.ndarray:
        """An inverse frequency per feature id, from the feature curve (id = rank), in [1, ~15]."""
        m = curve_masses(self.model.feature_curve, self.model.n_features)
        return 1.0 + np.log1p(1.0 / np.maximum(m * self.model.n_features, 1e-6))

    @functools.cached_property
    def _count_cdf(self) -> np.ndarray:
        c = np.cumsum(self.model.labels_pmf)
        return c / c[-1]

    # ---- labels ----
    def labels(self, split: int, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distinct labels of each sample: (offsets int64 (n+1), label ids int64 sorted per row).

        Draw j of a row is, with probability ``cohesion``, from the topic of one of the row's
        draws 0 .. j-1 (chosen uniformly), otherwise from the label frequencies; the first
        ``want`` distinct draws are kept (``want`` from ``labels_pmf``).
        """
        n = len(ids)
        want = np.searchsorted(self._count_cdf, self._uniform(split, ids, 0), side="right")
        want = np.minimum(want, min(len(self.model.labels_pmf) - 1, self.model.n_labels))
        if n == 0 or int(want.max()) == 0:
            return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        k = int(min(3 * int(want.max()) + 8, 4 * self.model.n_labels))
        order, cum, starts = self._topics
        draws = np.empty((n, k), dtype=np.int64)
        idx = ids[:, None]
        u_free = self._uniform(split, idx, 1 + np.arange(k)[None, :])
        free = np.minimum(
            np.searchsorted(self.label_cdf, u_free, side="right"), self.model.n_labels - 1
        )
        u_coh = self._uniform(split, idx, 100_000 + np.arange(k)[None, :])
        u_pick = self._uniform(split, idx, 200_000 + np.arange(k)[None, :])
        u_in = self._uniform(split, idx, 300_000 + np.arange(k)[None, :])
        draws[:, 0] = free[:, 0]
        for j in range(1, k):
            src = draws[np.arange(n), np.minimum((u_pick[:, j] * j).astype(np.int64), j - 1)]
            t = self.topic_of(src)
            lo, hi = cum[starts[t]], cum[starts[t + 1]]
            pos = np.searchsorted(cum, lo + u_in[:, j] * (hi - lo), side="right") - 1
            pos = np.clip(pos, starts[t], starts[t + 1] - 1)
            in_topic = order[pos]
            draws[:, j] = np.where(u_coh[:, j] < self.model.cohesion, in_topic, free[:, j])
        return first_distinct(draws, want)

    # ---- features ----
    def nnz_wanted(self, split: int, ids: np.ndarray) -> np.ndarray:
        """Nonzeros wanted per row: the quantile function at a uniform, rounded, >= 1."""
        q = np.asarray(self.model.nnz_quantiles)
        u = self._uniform(split, ids, 400_000)
        v = np.interp(u * (len(q) - 1), np.arange(len(q)), q)
        return np.maximum(1, np.round(v)).astype(np.int64)

    def features(
        self, split: int, ids: np.ndarray, lab_off: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sparse rows: (offsets int64 (n+1), feature ids int32, values float32), L2-normalised.

        A row wanting ``w`` nonzeros makes ``ceil(w x draws_per_nnz)`` word draws; each is, with
        probability ``signal`` (when the row has labels), evidence of one of its labels chosen
        uniformly, otherwise a background word.
        """
        m = self.model
        n = len(ids)
        n_draws = np.ceil(self.nnz_wanted(split, ids) * m.draws_per_nnz).astype(np.int64)
        row = np.repeat(np.arange(n), n_draws)
        tok = np.arange(len(row)) - np.repeat(np.cumsum(n_draws) - n_draws, n_draws)
        sid = ids[row]
        n_lab = np.diff(lab_off)[row]
        is_sig = (self._uniform(split, sid, 500_000 + tok) < m.signal) & (n_lab > 0)
        # background words
        fid = np.minimum(
            np.searchsorted(
                self.feature_cdf, self._uniform(split, sid, 600_000 + tok), side="right"
            ),
            m.n_features - 1,
        )
        # evidence words: a label of the row, then its topic's word or one of its own words
        s = np.flatnonzero(is_sig)
        if len(s):
            pick = np.minimum(
                (self._uniform(split, sid[s], 700_000 + tok[s]) * n_lab[s]).astype(np.int64),
                n_lab[s] - 1,
            )
            lab = labels[lab_off[row[s]] + pick]
            zipf = 1.0 / np.arange(1, m.label_words + 1)
            zcdf = np.cumsum(zipf) / zipf.sum()
            j = np.searchsorted(zcdf, self._uniform(split, sid[s], 800_000 + tok[s]), side="right")
            j = np.minimum(j, m.label_words - 1)
            topical = self._uniform(split, sid[s], 900_000 + tok[s]) < m.shared
            own = self._hash(2, lab, j) % np.uint64(m.n_features)
            pool = 2 * m.label_words
            jt = np.minimum(
                np.searchsorted(
                    np.cumsum(1.0 / np.arange(1, pool + 1)) / np.sum(1.0 / np.arange(1, pool + 1)),
                    self._uniform(split, sid[s], 1_000_000 + tok[s]),
                    side="right",
                ),
                pool - 1,
            )
            top = self._hash(6, self.topic_of(lab), jt) % np.uint64(m.n_features)
            fid[s] = np.where(topical, top, own).astype(np.int64)
        order = np.lexsort((fid, row))
        row, fid = row[order], fid[order]
        new = np.ones(len(row), dtype=bool)
        new[1:] = (row[1:] != row[:-1]) | (fid[1:] != fid[:-1])
        starts = np.flatnonzero(new)
        count = np.diff(np.append(starts, len(row))).astype(np.float64)
        row, fid = row[starts], fid[starts]
        vals = (1.0 + np.log(count)) * self.idf[fid]
        norms = np.sqrt(np.bincount(row, weights=vals * vals, minlength=n))
        vals = vals / norms[row]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=n), out=offsets[1:])
        return offsets, fid.astype(np.int32), vals.astype(np.float32)

    def matrices(self, split: int, ids: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(X, Y) of the rows `ids` as scipy CSR (float32 X, bool Y): the twin in memory."""
        lab_off, labels = self.labels(split, ids)
        f_off, fids, vals = self.features(split, ids, lab_off, labels)
        X = sp.csr_matrix((vals, fids, f_off), shape=(len(ids), self.model.n_features))
        Y = sp.csr_matrix(
            (np.ones(len(labels), dtype=bool), labels, lab_off),
            shape=(len(ids), self.model.n_labels),
        )
        return X, Y


def calibrate_draws(model: TwinModel, rows: int = 2000, seed: int = 0) -> TwinModel:
    """The model with ``draws_per_nnz`` set so that the mean nonzeros per row (after duplicate
    words are summed) is the model's: three fixed-point steps on `rows` generated rows."""
    m = dataclasses.replace(model, draws_per_nnz=1.0)
    ids = np.arange(min(rows, max(model.n_train, 1)), dtype=np.int64)
    for _ in range(3):
        gen = TwinGenerator(m, seed)
        lab_off, labels = gen.labels(0, ids)
        f_off, _, _ = gen.features(0, ids, lab_off, labels)
        got = (f_off[-1] / len(ids)) or 1.0
        m = dataclasses.replace(
            m, draws_per_nnz=max(1.0, m.draws_per_nnz * model.nnz_per_sample / got)
        )
    return m


def ridge_oracle_precision(
    X_train: sp.csr_matrix,
    Y_train: sp.csr_matrix,
    X_test: sp.csr_matrix,
    Y_test: sp.csr_matrix,
    ks: tuple[int, ...] = (1, 5),
    lam: float = 1.0,
) -> dict[int, float]:
    """P@k (points) of ridge regression one-vs-all on the true labels: the cheap in-driver Oracle
    the twin's difficulty is fitted with (its Baseline / Oracle ratios under aggregation track the
    label tree's on bibtex and delicious within ~0.05; ``benchmarks/synth_realism.py``).

    Rows are L2-normalised; W = (X^T X + lam I)^-1 X^T Y, or the dual form when features
    outnumber training rows, solved by Cholesky in float32 (lam I keeps the system well
    conditioned) against the labels or, when labels outnumber the test rows, against the test
    rows. Memory: a dense features x features (or rows x rows) float32 matrix, a dense one of that
    size by min(labels, test rows), and the test rows x labels scores.
    """
    import scipy.linalg
    from sklearn.preprocessing import normalize

    A = normalize(sp.csr_matrix(X_train, dtype=np.float32))
    B = normalize(sp.csr_matrix(X_test, dtype=np.float32))
    Yd = sp.csr_matrix(Y_train, dtype=np.float32)
    primal = A.shape[1] <= A.shape[0]
    M = (A.T @ A) if primal else (A @ A.T)
    M = M.toarray()
    M[np.diag_indices_from(M)] += lam
    factor = scipy.linalg.cho_factor(M, overwrite_a=True)
    # S = B M^-1 A^T Y (primal) or B A^T M^-1 Y (dual); solve against the smaller of the test
    # rows and the labels, so that many labels never make a dense features x labels matrix
    if Yd.shape[1] <= B.shape[0]:
        R = (A.T @ Yd) if primal else Yd
        W = scipy.linalg.cho_solve(factor, R.toarray())
        S = np.asarray(B @ W) if primal else np.asarray((B @ A.T) @ W)
    else:
        R = B.T if primal else A @ B.T
        Z = scipy.linalg.cho_solve(factor, R.toarray())  # (features or rows) x test rows
        S = np.asarray((sp.csr_matrix(A.T @ Yd if primal else Yd).T @ Z).T)
    Yt = sp.csr_matrix(Y_test, dtype=bool)
    out = {}
    top = np.argsort(-S, axis=1, kind="stable")[:, : max(ks)]
    rows = np.arange(S.shape[0])[:, None]
    hits = np.asarray(Yt[rows, top].todense(), dtype=np.float64)
    for k in ks:
        out[k] = float(100.0 * hits[:, :k].sum(axis=1).mean() / k) if S.shape[0] else 0.0
    return out


def _bisect(
    f: Callable[[float], float], target: float, tol: float, steps: int, increasing: bool = True
) -> tuple[float, float, list[list[float]]]:
    """Bisection on [0, 1] for f(x) = target; returns (best x, its f, the steps)."""
    lo, hi = 0.0, 1.0
    best: tuple[float, float] = (0.5, float("inf"))
    trail: list[list[float]] = []
    for _ in range(steps):
        mid = (lo + hi) / 2
        v = f(mid)
        trail.append([round(mid, 4), round(v, 4)])
        if abs(v - target) < abs(best[1] - target):
            best = (mid, v)
        if abs(v - target) <= tol:
            break
        below = v < target if increasing else v > target
        lo, hi = (mid, hi) if below else (lo, mid)
    return best[0], best[1], trail


def fit(
    model: TwinModel,
    Y_rows: sp.csr_matrix,
    split: Optional[tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]] = None,
    seed: int = 0,
) -> tuple[TwinModel, dict[str, Any]]:
    """Fit the model's free parameters to fully labelled data (never to aggregated results):

    1. ``cohesion`` so that the twin's :func:`pair_information` equals the source's (bisection;
       the information rises with the cohesion);
    2. ``draws_per_nnz`` so that the mean nonzeros per sample is the source's;
    3. with `split` (a training part and a validation part of the source): ``shared`` so that
       the Oracle's P@5 / P@1 on the twin is the source's (more words shared within a topic make
       a sample's further labels easier to rank), and inside each step ``signal`` so that the
       Oracle's P@1 is the source's within 0.5 point; the Oracle is
       :func:`ridge_oracle_precision` on a twin of the split's sizes.

    Args:
        model: from :func:`describe`.
        Y_rows: the source's labels (rows x labels CSR), for the co-occurrence statistic.
        split: (X_fit, Y_fit, X_val, Y_val) of the source; None: ``shared`` and ``signal`` are
            kept.
    Returns:
        (fitted model, the fit's record: targets, each step's value and what it gave).
    """
    n_rows = min(Y_rows.shape[0], 20_000)
    target_info = pair_information(Y_rows, max_rows=n_rows, seed=seed)
    ids = np.arange(n_rows, dtype=np.int64)

    def info(c: float) -> float:
        g = TwinGenerator(dataclasses.replace(model, cohesion=c), seed)
        lab_off, labels = g.labels(0, ids)
        Y = sp.csr_matrix((np.ones(len(labels)), labels, lab_off), shape=(len(ids), model.n_labels))
        return pair_information(Y, max_rows=len(ids))

    c, got, trail = _bisect(info, target_info, tol=0.005 * max(target_info, 1e-3), steps=12)
    record: dict[str, Any] = {
        "pair_information": {
            "target": round(target_info, 4),
            "reached": round(got, 4),
            "steps": trail,
        }
    }
    model = calibrate_draws(dataclasses.replace(model, cohesion=round(c, 4)), seed=seed)
    if split is None:
        return model, record
    X_fit, Y_fit, X_val, Y_val = split
    real = ridge_oracle_precision(X_fit, Y_fit, X_val, Y_val)
    model, record["oracle"] = fit_oracle(
        model, real[1], real[5] / max(real[1], 1e-9), X_fit.shape[0], X_val.shape[0], seed
    )
    return model, record


def fit_oracle(
    model: TwinModel,
    target_p1: float,
    target_ratio: float,
    n_fit: int,
    n_val: int,
    seed: int = 0,
) -> tuple[TwinModel, dict[str, Any]]:
    """Fit ``shared`` and ``signal`` to an Oracle's P@1 and P@5 / P@1 (fully labelled data).

    ``shared`` is bisected so that the twin's Oracle P@5 / P@1 is `target_ratio` (within 1%; more
    words shared within a topic make a sample's further labels easier to rank), and inside each
    step ``signal`` so that its P@1 is `target_p1` within 0.5 point. The Oracle is
    :func:`ridge_oracle_precision` trained on the twin's first `n_fit` training rows and scored on
    `n_val` rows of its test split.

    Args:
        model: the model to fit (counts as it is; cohesion and draws already set).
        target_p1: points in (0, 100); target_ratio: P@5 / P@1 in (0, 1].
    Returns:
        (fitted model, the record: targets, reached values, every bisection step).
    Raises:
        BadInputError: a target out of range, or n_fit / n_val < 1.
    """
    if not (0 < target_p1 < 100 and 0 < target_ratio <= 1) or n_fit < 1 or n_val < 1:
        raise BadInputError(
            f"fit_oracle: need 0 < P@1 < 100, 0 < P@5/P@1 <= 1 and rows >= 1, got {target_p1}, "
            f"{target_ratio}, {n_fit}, {n_val}"
        )
    fit_ids = np.arange(n_fit, dtype=np.int64)
    val_ids = np.arange(n_val, dtype=np.int64)
    inner: dict[float, tuple[TwinModel, dict[int, float], list[list[float]]]] = {}

    def oracle(m: TwinModel) -> dict[int, float]:
        g = TwinGenerator(m, seed)
        a, b = g.matrices(0, fit_ids)
        x, y = g.matrices(1, val_ids)
        return ridge_oracle_precision(a, b, x, y)

    def ratio(shared: float) -> float:
        base = dataclasses.replace(model, shared=round(shared, 4))
        seen: dict[float, tuple[TwinModel, dict[int, float]]] = {}

        def p1(sig: float) -> float:
            m = calibrate_draws(
                dataclasses.replace(base, signal=round(max(sig, 1e-3), 4)), seed=seed
            )
            p = oracle(m)
            seen[sig] = (m, p)
            return p[1]

        sig, _, steps = _bisect(p1, target_p1, tol=0.5, steps=9)
        m, p = seen[sig]
        inner[shared] = (m, p, steps)
        return p[5] / max(p[1], 1e-9)

    sh, got_ratio, trail = _bisect(ratio, target_ratio, tol=0.01 * target_ratio, steps=7)
    m, p, steps = inner[sh]
    return m, {
        "proxy": "ridge one-vs-all (ridge_oracle_precision)",
        "rows": [n_fit, n_val],
        "target P@1": round(target_p1, 2),
        "target P@5 / P@1": round(target_ratio, 4),
        "reached P@1": round(p[1], 2),
        "reached P@5 / P@1": round(got_ratio, 4),
        "shared steps": trail,
        "signal steps": steps,
    }


FIT_ROWS = 10_000
"""Rows of the source (and of the twin) the difficulty is fitted on, at most."""


def fit_like(
    X: sp.csr_matrix, Y: sp.csr_matrix, n_test: int, source: str = "", seed: int = 0
) -> tuple[TwinModel, dict[str, Any]]:
    """The fitted twin model of a labelled dataset: :func:`describe`, then :func:`fit` on a
    validation split of it (a seeded 80 / 20 cut of at most :data:`FIT_ROWS` rows; no test set
    is read).

    Args:
        X, Y: the source's training rows (CSR); n_test: the twin's test split size.
    Raises:
        BadInputError: fewer than 10 rows, no label or no feature.
    """
    X = sp.csr_matrix(X)
    Y = sp.csr_matrix(Y)
    if X.shape[0] < 10:
        raise BadInputError(f"{source or 'dataset'}: {X.shape[0]} rows, a twin needs at least 10")
    model = describe(X, Y, n_test, source)
    rng = np.random.default_rng(seed)
    rows = rng.permutation(X.shape[0])[:FIT_ROWS]
    cut = max(1, int(round(0.8 * len(rows))))
    fit_rows, val_rows = np.sort(rows[:cut]), np.sort(rows[cut:])
    split = (X[fit_rows], Y[fit_rows], X[val_rows], Y[val_rows])
    fitted, record = fit(model, Y, split, seed=seed)
    return fitted, record


# ---- a model from published statistics (the presets) ----

PRIOR_COHESION = 0.83
"""``cohesion`` of a model built from published statistics, which carry no co-occurrence: the
value fitted on the two real sets at hand (bibtex 0.824, delicious 0.842;
``benchmarks/reports/synth_realism.json``), whose label pairs repeat alike."""
PRIOR_NNZ_LOG_SD = 1.0
"""Standard deviation of log(nonzeros per sample) of such a model: between bibtex's 0.79 and
delicious's 1.36 (published statistics give only the mean)."""


PRIOR_HEAD = 0.27
"""Share of the samples that have the most frequent label, in such a model: the mean of bibtex's
0.14 and delicious's 0.40 (published statistics give no head)."""


def label_power_law(
    n_labels: int, positives: float, n_train: int, head: float = PRIOR_HEAD
) -> tuple[float, float]:
    """(a, k0) of label counts c_r = C (r + k0)^-a, r = 1 .. n_labels, summing to `positives`:
    the rarest label has one expected training sample, as in XMC sets whose tail labels have a
    single one, and the most frequent is in at most a share `head` of the `n_train` samples
    (k0 = 0, a plain Zipf law, when that already holds). (0, 0) when positives <= n_labels.

    Raises:
        BadInputError: n_labels or n_train < 1, positives <= 0, head not in (0, 1].
    """
    if n_labels < 1 or n_train < 1 or not positives > 0 or not 0 < head <= 1:
        raise BadInputError(
            f"need n_labels, n_train >= 1, positives > 0, head in (0, 1], got {n_labels}, "
            f"{n_train}, {positives}, {head}"
        )
    if positives <= n_labels:
        return 0.0, 0.0
    r = np.arange(1, n_labels + 1, dtype=np.float64)

    def exponent(k0: float) -> float:  # the rarest count falls as a rises
        lo, hi = 0.0, 12.0
        for _ in range(60):
            a = (lo + hi) / 2
            w = (r + k0) ** -a
            lo, hi = (a, hi) if positives * w[-1] / w.sum() > 1 else (lo, a)
        return (lo + hi) / 2

    def top(k0: float) -> tuple[float, float]:
        a = exponent(k0)
        w = (r + k0) ** -a
        return float(positives * w[0] / w.sum()), a

    most, a = top(0.0)
    if most <= head * n_train:
        return a, 0.0
    lo, hi = 0.0, float(n_labels)
    for _ in range(50):  # a larger offset flattens the head
        k0 = (lo + hi) / 2
        lo, hi = (k0, hi) if top(k0)[0] > head * n_train else (lo, k0)
    k0 = (lo + hi) / 2
    return top(k0)[1], k0


def published_model(
    n_train: int,
    n_test: int,
    n_features: int,
    n_labels: int,
    labels_per_sample: float,
    nnz_per_sample: float,
    source: str = "",
) -> TwinModel:
    """The model of a data set known only by its published statistics (counts, mean labels and
    nonzeros per sample), before ``signal`` and ``shared`` are fitted (:func:`fit_oracle`):

    * labels per sample: 1 + Poisson(labels_per_sample - 1);
    * label frequencies: a power law whose rarest label has one expected training sample and
      whose most frequent is in :data:`PRIOR_HEAD` of the samples (:func:`label_power_law`);
    * features: Zipf's law (exponent 1) over the vocabulary; nonzeros per sample log-normal with
      the published mean and :data:`PRIOR_NNZ_LOG_SD`, at most a quarter of the vocabulary;
    * ``cohesion`` :data:`PRIOR_COHESION`; topics of max(8, 2 x ceil(labels per sample)) labels.

    Raises:
        BadInputError: a count < 1, labels_per_sample < 1 or nnz_per_sample < 1.
    """
    import scipy.stats

    if min(n_train, n_features, n_labels) < 1 or labels_per_sample < 1 or nnz_per_sample < 1:
        raise BadInputError(
            "published statistics: counts must be >= 1 and labels / nonzeros per sample >= 1"
        )
    r = np.arange(1, n_labels + 1, dtype=np.float64)
    a, k0 = label_power_law(n_labels, n_train * labels_per_sample, n_train)
    counts = (r + k0) ** -a
    j = np.arange(min(MAX_LABELS_PMF, n_labels) + 1)
    pmf = np.where(j >= 1, scipy.stats.poisson.pmf(j - 1, labels_per_sample - 1), 0.0)
    pmf /= pmf.sum()
    p = np.clip(np.linspace(0, 1, NNZ_QUANTILES + 1), 0.5 / NNZ_QUANTILES, 1 - 0.5 / NNZ_QUANTILES)
    sd = PRIOR_NNZ_LOG_SD
    q = np.exp(np.log(nnz_per_sample) - sd * sd / 2 + sd * scipy.stats.norm.ppf(p))
    cap = max(1.0, n_features / 4)
    for _ in range(20):  # rescale to the published mean under the floor and the cap
        q = np.clip(q, 1.0, cap)
        mean = float(np.mean((q[1:] + q[:-1]) / 2))
        if abs(mean - nnz_per_sample) < 1e-3 * nnz_per_sample:
            break
        q = q * nnz_per_sample / mean
    return TwinModel(
        n_train=n_train,
        n_test=n_test,
        n_features=n_features,
        n_labels=n_labels,
        label_curve=frequency_curve(counts),
        feature_curve=frequency_curve(1.0 / np.arange(1, n_features + 1)),
        labels_pmf=tuple(float(v) for v in pmf),
        nnz_quantiles=tuple(float(v) for v in np.clip(q, 1.0, cap)),
        cohesion=PRIOR_COHESION,
        topic_size=max(8, 2 * math.ceil(labels_per_sample)),
        source=source,
    )


def fit_published(
    model: TwinModel, oracle_precision: tuple[float, float, float], seed: int = 0
) -> tuple[TwinModel, dict[str, Any]]:
    """Fit a :func:`published_model`'s ``signal`` and ``shared`` to a published Oracle's
    P@1 / P@3 / P@5 (points; the paper's Table 1 "std. precision").

    The fit runs on the model scaled so that its training split has 0.8 x :data:`FIT_ROWS` rows
    (samples per label, labels per sample and the curves are scale-free), validated on 0.2 x
    FIT_ROWS rows of its test split; the fitted parameters are then set on the unscaled model.

    Raises:
        BadInputError: precision not in (0, 100) or P@5 > P@1.
    """
    p1, _, p5 = (float(v) for v in oracle_precision)
    n_fit, n_val = int(0.8 * FIT_ROWS), FIT_ROWS - int(0.8 * FIT_ROWS)
    small = model.scaled(min(1.0, n_fit / model.n_train))
    small = calibrate_draws(small, seed=seed)
    fitted, record = fit_oracle(small, p1, p5 / p1, min(n_fit, small.n_train), n_val, seed)
    record["scale"] = round(small.n_train / model.n_train, 6)
    out = dataclasses.replace(model, signal=fitted.signal, shared=fitted.shared)
    return calibrate_draws(out, seed=seed), record
