"""Synthetic clean XMC train/test pairs at the shapes of real benchmarks.

A preset (:data:`PRESETS`: the paper's four data sets by their Table 1 statistics) is drawn by
one of two generators:

* **realistic** (the default, :func:`synth` without a difficulty): the preset's
  :class:`eagle_spark.twin.TwinModel` (:func:`preset_model`), built from the published
  statistics (:func:`eagle_spark.twin.published_model`: labels in co-occurring topics with shared
  evidence, a power-law label tail, log-normal document lengths) and fitted to Table 1's Oracle
  P@1 and P@5 (``benchmarks/fit_presets.py``); its behaviour under aggregation is measured
  against the paper's Table 2 by ``benchmarks/synth_realism.py``.
* **planted** (``difficulty`` given), the generator of the earlier reports, described below.

The planted model (all randomness is a counter-based hash of (seed, split, sample_id, draw), so
any sample can be generated alone: output does not depend on partitioning, and reruns and task
retries give byte-identical files):

* **label frequencies** follow a power law, p_k proportional to (k + 1 + k0)^(-alpha) (label 0 is
  the most frequent);
* **labels per sample**: L = 1 + Poisson(labels_per_sample - 1), drawn as distinct labels from p;
* **label prototypes**: label k owns ``prototype_size`` feature ids (hashed from k) with weights in
  [0.5, 1.5); a sample keeps each prototype feature of each of its labels with probability
  ``prototype_keep``, valued weight x U[0.5, 1.5);
* **noise words**: the rest of ``nnz_per_sample`` are feature ids drawn from a power law over the
  vocabulary (common words), valued 0.25 x U[0.5, 1.5) (low "idf");
* rows are L2-normalised (tf-idf-like positive values), duplicate ids summed.

**Difficulty** d in [0, 1] (``difficulty``; 0 = the easy data above, drawn exactly as before the
setting existed) makes labels confusable the way real ones are:

* **topics**: labels fall into topics of ``topic_size`` (16) by a hash of the label id; each
  prototype slot of a label is, with probability d, one of the 2 x prototype_size ids of its
  topic's shared pool instead of its own id, so labels of a topic share words;
* **weaker evidence**: a sample keeps each prototype feature with probability
  prototype_keep x (1 - d / 2);
* **distractors**: a sample also shows, at half that rate, the prototype features of
  round(d x labels_per_sample) labels it does not have (drawn from the label power law: documents
  mention other subjects);
* **louder noise words**: valued (0.25 + 0.75 d) x U[0.5, 1.5).

The number of noise words still fills nnz_per_sample, so every shape statistic is kept. Each
preset's default d (:data:`DIFFICULTY`) was calibrated so that omikuji (Parabel mode, 3 trees) on
the generated pair gets a P@1 within the range of published results on the real data set
(docs/design.md, "Synthetic data").

Labels are thus identifiable from the prototype features of a sample (classifiers reach non-trivial
precision), and within a group the members' features tell which member owns which label (assignment
accuracy can be measured).

Generation runs on the executors: ``spark.range`` ids, one ``mapInArrow`` task per id range that
generates its rows in vectorised numpy and writes X/Y part files with pyarrow
(:class:`eagle_spark.io.parts.PartWriter`); the driver collects one summary row per task.
"""

from __future__ import annotations

import functools
import logging
import math
import posixpath
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
import scipy.stats
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark import schemas as S
from eagle_spark.counter_rng import first_distinct, hash_parts, uniform
from eagle_spark.errors import BadInputError
from eagle_spark.io.fs import FileSystem, atomic_output
from eagle_spark.io.parts import PartWriters
from eagle_spark.io.tables import new_manifest, read_manifest, read_table, write_manifest
from eagle_spark.rows import first_row

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shape:
    """The statistics a preset reproduces (scale 1).

    Attributes:
        n_train, n_test: samples per split.
        n_features, n_labels: vocabulary and label-set sizes.
        labels_per_sample: mean labels per sample (train).
        nnz_per_sample: mean nonzero features per sample.
        oracle_precision: P@1 / P@3 / P@5 (points) of a classifier trained on the clean set
            (the paper's Table 1, "std. precision"): what the realistic preset is fitted to.
    """

    n_train: int
    n_test: int
    n_features: int
    n_labels: int
    labels_per_sample: float
    nnz_per_sample: float
    oracle_precision: tuple[float, float, float] = (0.0, 0.0, 0.0)


PRESETS: dict[str, Shape] = {
    # Table 1 of the paper and the Extreme Classification Repository's statistics.
    "wiki325k": Shape(1_778_351, 587_084, 1_617_899, 325_056, 3.19, 42.0, (66.04, 43.63, 33.05)),
    "eurlex4k": Shape(15_539, 3_809, 5_000, 3_993, 5.31, 236.0, (82.71, 69.42, 58.14)),
    "wiki10-31k": Shape(14_146, 6_616, 101_938, 30_938, 18.64, 673.0, (84.31, 72.57, 63.39)),
    "amazoncat13k": Shape(1_186_239, 306_782, 203_882, 13_330, 5.04, 71.0, (93.03, 79.16, 64.52)),
}


DIFFICULTY: dict[str, float] = {
    # calibrated with omikuji P@1 against the real data set's published results (Parabel's in
    # the Extreme Classification Repository / the EAGLE paper's Table 1 "std. precision")
    "wiki325k": 1.0,
    "eurlex4k": 0.4,
    "wiki10-31k": 0.7,
    "amazoncat13k": 0.35,
}
"""Each preset's default difficulty (see the module docstring); 0 gives the easy data."""


@dataclass(frozen=True)
class Generator:
    """Counter-based generator of one preset at one scale (see the module docstring).

    Attributes:
        shape: the scaled shape.
        seed: base seed.
        alpha, k0: label power law; feature_alpha: power law of noise words.
        prototype_size, prototype_keep: planted label structure.
        difficulty: in [0, 1], how confusable labels are (module docstring); 0: easy data.
        topic_size: labels per topic (difficulty > 0 only).
    """

    shape: Shape
    seed: int
    alpha: float = 1.0
    k0: float = 2.0
    feature_alpha: float = 1.0
    prototype_size: int = 10
    prototype_keep: float = 0.6
    difficulty: float = 0.0
    topic_size: int = 16

    @property
    def keep(self) -> float:
        """Probability that a sample shows one prototype feature of one of its labels."""
        return self.prototype_keep * (1.0 - 0.5 * self.difficulty)

    @property
    def distractors(self) -> int:
        """Labels per sample whose prototype features a sample shows without having the label."""
        return int(round(self.difficulty * self.shape.labels_per_sample))

    @functools.cached_property
    def _label_cdf(self) -> np.ndarray:
        return self.label_cdf()

    @functools.cached_property
    def _feature_cdf(self) -> np.ndarray:
        return self.feature_cdf()

    def rows(
        self, split: int, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(label offsets, label ids, feature offsets, feature ids, values) of the rows `ids`:
        :meth:`labels` then :meth:`features` (what a generation task writes)."""
        lab_off, labels = self.labels(split, ids, self._label_cdf)
        return (lab_off, labels, *self.features(split, ids, lab_off, labels, self._feature_cdf))

    @property
    def noise_weight(self) -> float:
        """Typical value of a noise word (0.25 for easy data, up to 1.0: as loud as a prototype)."""
        return 0.25 + 0.75 * self.difficulty

    def topic_of(self, labels: np.ndarray) -> np.ndarray:
        """Topic of each label: a hash of the label id into ceil(n_labels / topic_size) topics."""
        n_topics = max(1, -(-self.shape.n_labels // self.topic_size))
        return (self._hash(4, labels) % np.uint64(n_topics)).astype(np.int64)

    def prototype_features(self, labels: np.ndarray) -> np.ndarray:
        """Prototype feature ids, shape (len(labels), prototype_size).

        Slot j of label k is its own id (a hash of (k, j)) or, with probability ``difficulty``, one
        of the 2 x prototype_size ids of k's topic's shared pool (so labels of a topic look alike).
        """
        j = np.arange(self.prototype_size)[None, :]
        lab = labels[:, None]
        fid = self._hash(2, lab, j) % np.uint64(self.shape.n_features)
        if self.difficulty > 0:
            pool = self._hash(7, lab, j) % np.uint64(2 * self.prototype_size)
            shared = self._hash(6, self.topic_of(labels)[:, None], pool) % np.uint64(
                self.shape.n_features
            )
            fid = np.where(self._uniform(5, lab, j) < self.difficulty, shared, fid)
        return fid.astype(np.int64)

    # ---- counter-based randomness ----
    def _hash(self, *parts: np.ndarray | int) -> np.ndarray:
        return hash_parts(self.seed, *parts)

    def _uniform(self, *parts: np.ndarray | int) -> np.ndarray:
        return uniform(self.seed, *parts)

    # ---- distributions ----
    def label_cdf(self) -> np.ndarray:
        w = (np.arange(self.shape.n_labels, dtype=np.float64) + 1 + self.k0) ** -self.alpha
        return np.cumsum(w) / w.sum()

    def feature_cdf(self) -> np.ndarray:
        w = (np.arange(self.shape.n_features, dtype=np.float64) + 1) ** -self.feature_alpha
        return np.cumsum(w) / w.sum()

    @functools.cached_property
    def _noise_draws(self) -> int:
        planted = self.shape.labels_per_sample * self._kept_per_label(
            self.keep
        ) + self.distractors * self._kept_per_label(0.5 * self.keep)
        target = min(max(1.0, self.shape.nnz_per_sample - planted), 0.5 * self.shape.n_features)
        w = (np.arange(self.shape.n_features, dtype=np.float64) + 1) ** -self.feature_alpha
        p = w / w.sum()
        log1mp = np.log1p(-np.minimum(p, 1 - 1e-12))

        def distinct(m: float) -> float:  # expected distinct ids among m draws
            return float(np.sum(-np.expm1(m * log1mp)))

        lo, hi = target, target
        while distinct(hi) < target and hi < 1e6:
            hi *= 2
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if distinct(mid) < target else (lo, mid)
        return max(1, int(round(hi)))

    def _kept_per_label(self, keep: float) -> float:
        """Expected distinct prototype features a sample shows of one label kept at rate `keep`
        (own slots are distinct; shared slots are draws from the topic's pool of 2 x size ids)."""
        p = self.prototype_size
        shared = self.difficulty * p
        return (p - shared) * keep + 2 * p * (1.0 - (1.0 - keep / (2 * p)) ** shared)

    def noise_words(self) -> int:
        """Noise-word draws per sample, so that their expected distinct count fills what the
        prototypes leave of nnz_per_sample (duplicates are summed)."""
        return self._noise_draws

    def labels(self, split: int, ids: np.ndarray, cdf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distinct labels of each sample: (offsets int64 (n+1), label ids int64 sorted per row)."""
        mean_extra = max(self.shape.labels_per_sample - 1.0, 0.0)
        top = int(scipy.stats.poisson.ppf(1 - 1e-12, mean_extra)) + 2 if mean_extra > 0 else 1
        poisson_cdf = (
            scipy.stats.poisson.cdf(np.arange(top), mean_extra) if mean_extra > 0 else np.ones(1)
        )
        want = 1 + np.searchsorted(poisson_cdf, self._uniform(split, ids, 0), side="right")
        want = np.minimum(want, self.shape.n_labels)
        k = int(min(self.shape.n_labels, 3 * int(want.max()) + 8))
        draws = np.searchsorted(
            cdf, self._uniform(split, ids[:, None], 1 + np.arange(k)[None, :]), side="right"
        )
        draws = np.minimum(draws, self.shape.n_labels - 1)
        return first_distinct(draws, want)  # the first `want` distinct, in draw order

    def _planted(
        self,
        split: int,
        ids: np.ndarray,
        owner: np.ndarray,
        lab: np.ndarray,
        slot: np.ndarray,
        keep: float,
        keep_salt: int,
        value_salt: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The prototype features a sample shows of one label each: (row, feature id, value) of the
        kept slots, for rows `owner`, labels `lab` at place `slot` in their sample, kept at rate `keep`."""
        j = np.arange(self.prototype_size)[None, :]
        sid, slot = ids[owner][:, None], slot[:, None]
        kept = self._uniform(split, sid, keep_salt + slot, j + 10_000) < keep
        val = (0.5 + self._uniform(3, lab[:, None], j)) * (
            0.5 + self._uniform(split, sid, value_salt + j, slot)
        )
        return (
            np.broadcast_to(owner[:, None], kept.shape)[kept],
            self.prototype_features(lab)[kept],
            val[kept],
        )

    def features(
        self, split: int, ids: np.ndarray, lab_off: np.ndarray, labels: np.ndarray, fcdf: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sparse rows: (offsets int64 (n+1), feature ids int32, values float32), L2-normalised."""
        n = len(ids)
        owner = np.repeat(np.arange(n), np.diff(lab_off))  # sample of each positive
        slot = np.arange(len(labels)) - lab_off[owner]  # its place among the sample's labels
        rows_p, fid_p, val_p = self._planted(
            split, ids, owner, labels, slot, self.keep, 1000, 20_000
        )
        md = self.distractors
        if md:  # prototype features of labels the sample does not have (drawn like labels)
            draws = np.searchsorted(
                self._label_cdf,
                self._uniform(split, ids[:, None], 50_000 + np.arange(md)[None, :]),
                side="right",
            )
            d_lab = np.minimum(draws, self.shape.n_labels - 1).ravel()
            d = self._planted(
                split,
                ids,
                np.repeat(np.arange(n), md),
                d_lab,
                np.tile(np.arange(md), n),
                0.5 * self.keep,
                60_000,
                70_000,
            )
            rows_p, fid_p, val_p = (
                np.concatenate([a, b]) for a, b in zip((rows_p, fid_p, val_p), d)
            )
        m = self.noise_words()
        jn = np.arange(m)[None, :]
        fid_n = np.searchsorted(fcdf, self._uniform(split, ids[:, None], 30_000 + jn), side="right")
        fid_n = np.minimum(fid_n, self.shape.n_features - 1).ravel()
        val_n = (
            self.noise_weight * (0.5 + self._uniform(split, ids[:, None], 40_000 + jn))
        ).ravel()
        rows_n = np.repeat(np.arange(n), m)
        rows = np.concatenate([rows_p, rows_n])
        fids = np.concatenate([fid_p, fid_n])
        vals = np.concatenate([val_p, val_n])
        order = np.lexsort((fids, rows))
        rows, fids, vals = rows[order], fids[order], vals[order]
        new = np.ones(len(rows), dtype=bool)
        new[1:] = (rows[1:] != rows[:-1]) | (fids[1:] != fids[:-1])
        starts = np.flatnonzero(new)
        vals = np.add.reduceat(vals, starts) if len(starts) else vals
        rows, fids = rows[starts], fids[starts]
        norms = np.sqrt(np.bincount(rows, weights=vals * vals, minlength=n))
        vals = vals / norms[rows]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
        return offsets, fids.astype(np.int32), vals.astype(np.float32)


def scaled_shape(preset: str, scale: float) -> Shape:
    """The preset's shape with counts multiplied by `scale` (ratios per sample unchanged).

    The feature count is floored at 4 x nnz_per_sample so that tiny scales keep the per-sample
    statistics (e.g. eurlex4k at scale 0.01 has 944 features, not 50).

    Raises:
        BadInputError: unknown preset or scale not in (0, 1].
    """
    if preset not in PRESETS:
        raise BadInputError(f"unknown preset {preset!r}; presets: {', '.join(sorted(PRESETS))}")
    if not 0 < scale <= 1:
        raise BadInputError(f"scale must be in (0, 1], got {scale}")
    base = PRESETS[preset]
    return Shape(
        n_train=max(1, round(base.n_train * scale)),
        n_test=max(1, round(base.n_test * scale)),
        # floor: a row of nnz_per_sample distinct ids needs a vocabulary several times larger
        n_features=max(int(4 * base.nnz_per_sample), round(base.n_features * scale)),
        n_labels=max(2, round(base.n_labels * scale)),
        labels_per_sample=base.labels_per_sample,
        nnz_per_sample=base.nnz_per_sample,
    )


_SUMMARY = pa.schema(
    [
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("nnz", pa.int64(), nullable=False),
        pa.field("positives", pa.int64(), nullable=False),
    ]
)


def _generate_task(gen: Any, split: int, out: str, batch_rows: int):
    """mapInArrow function: id batches of one task -> X/Y part files + one summary row.

    `gen` is a :class:`Generator` or a :class:`eagle_spark.twin.TwinGenerator` (anything with
    ``rows(split, ids)``). A task holds one batch of `batch_rows` rows at a time and the
    generator's tables (label and feature cumulative masses: 8 bytes per label and feature)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = nnz = positives = 0
        with PartWriters(out, {S.X: S.X_ARROW, S.Y: S.Y_ARROW}) as writers:
            for batch in batches:
                all_ids = np.asarray(batch.column(0), dtype=np.int64)
                if not len(all_ids):
                    continue
                writers.name(f"part-{int(all_ids[0]):012d}.parquet")
                for start in range(0, len(all_ids), batch_rows):
                    ids = all_ids[start : start + batch_rows]
                    lab_off, labels, f_off, fids, vals = gen.rows(split, ids)
                    sid = pa.array(ids)
                    writers.write(
                        S.X,
                        pa.RecordBatch.from_arrays(
                            [
                                sid,
                                pa.ListArray.from_arrays(
                                    pa.array(f_off.astype(np.int32)),
                                    pa.array(fids),
                                    type=S.ARROW_INT_LIST,
                                ),
                                pa.ListArray.from_arrays(
                                    pa.array(f_off.astype(np.int32)),
                                    pa.array(vals),
                                    type=S.ARROW_FLOAT_LIST,
                                ),
                            ],
                            schema=S.X_ARROW,
                        ),
                    )
                    writers.write(
                        S.Y,
                        pa.RecordBatch.from_arrays(
                            [
                                sid,
                                pa.ListArray.from_arrays(
                                    pa.array(lab_off.astype(np.int32)),
                                    pa.array(labels.astype(np.int32)),
                                    type=S.ARROW_INT_LIST,
                                ),
                            ],
                            schema=S.Y_ARROW,
                        ),
                    )
                    rows += len(ids)
                    nnz += len(fids)
                    positives += len(labels)
        yield pa.RecordBatch.from_pydict(
            {"rows": [rows], "nnz": [nnz], "positives": [positives]}, schema=_SUMMARY
        )

    return run


def _label_stats(spark: SparkSession, dataset: str, n_labels: int) -> dict[str, Any]:
    freq = (
        read_table(spark, dataset, S.Y)
        .select(F.explode(S.LABEL_IDS).alias(S.LABEL_ID))
        .groupBy(S.LABEL_ID)
        .count()
    )
    row = first_row(
        freq.agg(
            F.count(F.lit(1)).alias("used"),
            F.max("count").alias("max"),
            F.expr("percentile_approx(count, 0.5)").alias("median"),
        ),
        "_label_stats",
    )
    return {
        "labels_with_samples": int(row["used"]),
        "max_samples_per_label": int(row["max"] or 0),
        "median_samples_per_label_among_used": int(row["median"] or 0),
        "labels_without_samples": n_labels - int(row["used"]),
    }


def _write_pair(
    spark: SparkSession,
    output_path: str,
    gen: Any,
    counts: tuple[int, int],
    n_features: int,
    n_labels: int,
    rows_per_task: int,
    overwrite: bool,
    source: dict[str, Any],
    parameters: dict[str, Any],
    pair_extra: dict[str, Any],
) -> dict[str, Any]:
    """Generate ``train`` and ``test`` of `counts` rows with `gen` (one task per `rows_per_task`
    ids) into `output_path` atomically; each split's manifest gets `source` (plus its split),
    `parameters` and its statistics; returns the pair's manifest (with `pair_extra`)."""
    batch_rows = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") or 10000)
    splits: dict[str, Any] = {}
    with atomic_output(spark, output_path, overwrite) as tmp:
        for split, (name, n) in enumerate((("train", counts[0]), ("test", counts[1]))):
            out = posixpath.join(tmp, name)
            tasks = max(1, math.ceil(n / rows_per_task))
            ids = spark.range(0, n, numPartitions=tasks).withColumnRenamed("id", S.SAMPLE_ID)
            rows = ids.mapInArrow(
                _generate_task(gen, split, out, batch_rows), from_arrow_schema(_SUMMARY)
            ).collect()
            n_rows = sum(r["rows"] for r in rows)
            nnz = sum(r["nnz"] for r in rows)
            pos = sum(r["positives"] for r in rows)
            stats = {
                "n_samples": n_rows,
                "nnz_per_sample": nnz / max(n_rows, 1),
                "labels_per_sample": pos / max(n_rows, 1),
                "samples_per_label": pos / n_labels,
                **_label_stats(spark, out, n_labels),
            }
            manifest = new_manifest(
                "synth",
                n_samples=n_rows,
                n_features=n_features,
                n_labels=n_labels,
                source={**source, "split": name},
                parameters=parameters,
                tables=[S.X, S.Y],
                stats=stats,
            )
            write_manifest(spark, out, manifest)
            splits[name] = stats
            log.info("synth %s: %d samples", name, n_rows)
        pair = new_manifest("synth", source=source, splits=splits, **pair_extra)
        write_manifest(spark, tmp, pair)
    return pair


PRESET_MODELS = "presets.json"
"""The presets' fitted realistic models, package data of :mod:`eagle_spark.data` written by
``benchmarks/fit_presets.py`` (:func:`eagle_spark.twin.published_model` +
:func:`eagle_spark.twin.fit_published` on each preset's :data:`PRESETS` statistics)."""


def preset_model(preset: str, path: Optional[str] = None) -> Any:
    """The realistic model (:class:`eagle_spark.twin.TwinModel`, scale 1) of a preset, read from
    :data:`PRESET_MODELS` (or the JSON file `path`) and checked: its counts must be the preset's
    :data:`PRESETS` counts.

    Raises:
        BadInputError: unknown preset; the file missing, not JSON, without the preset, or with a
            model that fails its checks or does not match the preset's counts (naming the file).
    """
    import importlib.resources
    import json

    from eagle_spark.twin import TwinModel

    if preset not in PRESETS:
        raise BadInputError(f"unknown preset {preset!r}; presets: {', '.join(sorted(PRESETS))}")
    if path is None:
        res: Any = importlib.resources.files("eagle_spark.data").joinpath(PRESET_MODELS)
        what = f"eagle_spark/data/{PRESET_MODELS}"
    else:
        import pathlib

        res, what = pathlib.Path(path), path
    try:
        obj = json.loads(res.read_text(encoding="utf-8"))
        entry = obj["presets"][preset]["model"]
    except FileNotFoundError as err:
        raise BadInputError(f"{what} is missing: run benchmarks/fit_presets.py") from err
    except (ValueError, KeyError, TypeError) as err:
        raise BadInputError(f"{what}: no valid model of preset {preset!r} ({err})") from err
    model = TwinModel.from_json(entry, what=f"{what}, preset {preset}")
    shape = PRESETS[preset]
    want = (shape.n_train, shape.n_test, shape.n_features, shape.n_labels)
    got = (model.n_train, model.n_test, model.n_features, model.n_labels)
    if got != want:
        raise BadInputError(
            f"{what}: preset {preset!r} has counts {got}, PRESETS says {want}: refit with "
            "benchmarks/fit_presets.py"
        )
    return model


def synth(
    spark: SparkSession,
    output_path: str,
    preset: str,
    scale: float = 1.0,
    seed: int = 0,
    rows_per_task: int = 250_000,
    overwrite: bool = False,
    difficulty: Optional[float] = None,
) -> dict[str, Any]:
    """Generate ``<output>/train`` and ``<output>/test`` datasets (X, Y) of a preset's shape.

    Without `difficulty` the pair is drawn from the preset's realistic model
    (:func:`preset_model`, :mod:`eagle_spark.twin`: labels in co-occurring topics, shared
    evidence, a long label tail, fitted to the paper's Table 1 Oracle precision); with it, from
    the planted-prototype generator of this module's docstring (:class:`Generator`), which the
    earlier reports used.

    Args:
        spark: the active session.
        output_path: folder for the pair (written atomically as a whole).
        preset: one of :data:`PRESETS`.
        scale: > 0 (at most 1 with `difficulty`); sample, feature and label counts are
            multiplied by it.
        seed: base seed (same seed -> byte-identical files).
        rows_per_task: samples generated per Spark task.
        overwrite: replace an existing output.
        difficulty: None: the realistic model; in [0, 1]: the planted generator at this
            difficulty (0: its easy data).
    Returns:
        Manifest of the pair: ``parameters`` (the realistic model as ``model``, or the planted
        generator's difficulty), ``shape`` (the counts) and per split n_samples, nnz_per_sample,
        labels_per_sample, samples_per_label and label-frequency statistics.
    Raises:
        BadInputError: unknown preset, scale out of range, rows_per_task < 1, difficulty not in
            [0, 1], the preset's model file invalid.
        OutputExistsError: the output exists and `overwrite` is false.
    """
    if rows_per_task < 1:
        raise BadInputError(f"rows_per_task must be >= 1, got {rows_per_task}")
    if difficulty is None:
        from eagle_spark import twin

        if not (math.isfinite(scale) and scale > 0):
            raise BadInputError(f"scale must be > 0, got {scale}")
        model = twin.calibrate_draws(preset_model(preset).scaled(scale), seed=seed)
        counts = {
            "n_train": model.n_train,
            "n_test": model.n_test,
            "n_features": model.n_features,
            "n_labels": model.n_labels,
        }
        return _write_twin(
            spark,
            output_path,
            model,
            seed,
            rows_per_task,
            overwrite,
            {"preset": preset, "scale": scale},
            {"shape": counts},
        )
    shape = scaled_shape(preset, scale)
    difficulty = float(difficulty)
    if not 0 <= difficulty <= 1:
        raise BadInputError(f"difficulty must be in [0, 1], got {difficulty}")
    gen = Generator(shape=shape, seed=seed, difficulty=difficulty)
    return _write_pair(
        spark,
        output_path,
        gen,
        (shape.n_train, shape.n_test),
        shape.n_features,
        shape.n_labels,
        rows_per_task,
        overwrite,
        source={"generator": "eagle_spark.synth", "preset": preset, "scale": scale},
        parameters={
            "seed": seed,
            "rows_per_task": rows_per_task,
            "alpha": gen.alpha,
            "k0": gen.k0,
            "feature_alpha": gen.feature_alpha,
            "prototype_size": gen.prototype_size,
            "prototype_keep": gen.prototype_keep,
            "difficulty": difficulty,
            "topic_size": gen.topic_size,
            "distractors": gen.distractors,
            "noise_weight": gen.noise_weight,
        },
        pair_extra={
            "parameters": {"seed": seed, "difficulty": difficulty},
            "shape": {k: v for k, v in shape.__dict__.items() if k != "oracle_precision"},
        },
    )


def _read_labelled(spark: SparkSession, dataset: str) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(X CSR float32, Y CSR bool) of a dataset folder with true labels, in the driver, read by
    the classifiers' loader (:func:`eagle_spark.io.parts.load_xy`: about 12 bytes per
    nonzero of X and 8 per positive).

    Raises:
        BadInputError: not a dataset, or a dataset without a Y table (no true labels), naming it.
    """
    from eagle_spark.io.parts import load_xy

    manifest = read_manifest(spark, dataset)
    if S.Y not in manifest.get("tables", []):
        raise BadInputError(
            f"synth --like: dataset {dataset} has no Y table (true labels); a twin is fitted to "
            "fully labelled data"
        )
    try:
        _, X, Y = load_xy(dataset, int(manifest["n_features"]), int(manifest["n_labels"]), False)
    except ValueError as err:  # ids of X and Y differ, a label id out of range
        raise BadInputError(str(err)) from err
    return X, Y.tocsr()


def synth_like(
    spark: SparkSession,
    output_path: str,
    like: str,
    scale: float = 1.0,
    seed: int = 0,
    rows_per_task: int = 250_000,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Generate a twin of a labelled dataset: ``<output>/train`` and ``<output>/test`` drawn from
    the realistic model (:mod:`eagle_spark.twin`) fitted to `like`'s statistics.

    `like` is a dataset folder with Y, or a pair folder as ``synth`` writes (``train/`` and
    ``test/``; the test split's size is then kept). The source's rows are read into the driver
    (about 12 bytes per nonzero); the fit (:func:`eagle_spark.twin.fit_like`) uses at most
    :data:`eagle_spark.twin.FIT_ROWS` of them and never a test set.

    Args:
        like: the source; scale: > 0, multiplies sample, label and feature counts (1 keeps the
            source's; above 1 sizes data that does not exist yet); the rest as :func:`synth`.
    Returns:
        The pair's manifest: ``model`` (every fitted parameter, what :meth:`TwinModel.from_json`
        reads back), ``fit`` (the fit's targets and steps), the splits' statistics.
    Raises:
        BadInputError: `like` is not a dataset or has no Y (naming it), scale not > 0,
            rows_per_task < 1, fewer than 10 rows.
        OutputExistsError: the output exists and `overwrite` is false.
    """
    from eagle_spark import twin

    if not (math.isfinite(scale) and scale > 0):
        raise BadInputError(f"synth.scale must be > 0, got {scale}")
    if rows_per_task < 1:
        raise BadInputError(f"rows_per_task must be >= 1, got {rows_per_task}")
    fs = FileSystem(spark)
    train_path, n_test = like, None
    if not fs.exists(posixpath.join(like, S.MANIFEST)) and fs.exists(
        posixpath.join(like, "train", S.MANIFEST)
    ):
        train_path = posixpath.join(like, "train")
        test_path = posixpath.join(like, "test")
        if fs.exists(posixpath.join(test_path, S.MANIFEST)):
            n_test = int(read_manifest(spark, test_path)["n_samples"])
    X, Y = _read_labelled(spark, train_path)
    if n_test is None:
        n_test = max(1, -(-X.shape[0] // 4))
    model, record = twin.fit_like(X, Y, n_test, source=like, seed=seed)
    if scale != 1:  # a larger vocabulary repeats fewer word draws: fit the draws again
        model = twin.calibrate_draws(model.scaled(scale), seed=seed)
    return _write_twin(
        spark,
        output_path,
        model,
        seed,
        rows_per_task,
        overwrite,
        {"like": like, "scale": scale},
        {"fit": record},
    )


def _write_twin(
    spark: SparkSession,
    output_path: str,
    model: Any,
    seed: int,
    rows_per_task: int,
    overwrite: bool,
    source: dict[str, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """:func:`_write_pair` of a :class:`eagle_spark.twin.TwinModel`: the model's generator and
    counts, the model in the manifests' ``parameters``, `source` and the pair's `extra`."""
    from eagle_spark import twin

    params = {"seed": seed, "rows_per_task": rows_per_task, "model": model.to_json()}
    return _write_pair(
        spark,
        output_path,
        twin.TwinGenerator(model, seed),
        (model.n_train, model.n_test),
        model.n_features,
        model.n_labels,
        rows_per_task,
        overwrite,
        source={"generator": "eagle_spark.twin", **source},
        parameters=params,
        pair_extra={"parameters": params, **extra},
    )
