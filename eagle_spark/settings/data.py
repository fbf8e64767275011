"""The settings sections of the session and the data stages: ``spark``, ``ingest``, ``aggregate``
and ``synth``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from eagle_spark.errors import SettingsError
from eagle_spark.settings.declare import (
    Section,
    _check,
    memory_mib,
    section,
    setting,
)
from eagle_spark.settings.shared import (
    MIN_PYTHON_WORKER_MIB,
    _check_jvm_memory,
)


@section
@dataclass(frozen=True)
class SparkSettings(Section):
    """How the SparkSession is built (:func:`eagle_spark.session.build_spark`)."""

    master: str = setting(
        "local[*]",
        "Spark master URL: ``local[*]``, ``local[N]`` or ``spark://host:port``.",
        more="Ignored under spark-submit, which sets its own, and with ``remote``.",
    )
    remote: Optional[str] = setting(
        None,
        "a Spark Connect URL (``sc://host:port``, or ``local[N]`` for a Connect server started in "
        "this process); null: a classic session.",
        more=(
            "Every command then runs on a Spark Connect session; on an ``sc://`` server only the "
            "``spark.sql.*`` settings apply (the server's own decide the rest)."
        ),
    )
    app_name: str = setting("eagle-spark", "application name shown by Spark.")
    driver_memory: str = setting(
        "4g",
        "JVM heap of the driver (local mode: of everything), e.g. ``4g``; at least ``512m``.",
        more="The floor is :data:`MIN_JVM_MIB`.",
    )
    executor_memory: str = setting("2g", "JVM heap per executor (cluster mode); at least ``512m``.")
    python_worker_memory: Optional[str] = setting(
        None,
        "cap per Python worker (``spark.executor.pyspark.memory``); null: no cap.",
        more=(
            "Spark enforces it as the worker's address-space limit (``RLIMIT_AS``), not its "
            "resident memory: a worker maps ~0.6 GB on importing numpy, scipy, pyarrow and "
            "scikit-learn, so the cap must be at least ``2g`` (:data:`MIN_PYTHON_WORKER_MIB`) "
            "and about 0.7 GB above the data a task holds. With a cap, the workers use pyarrow's "
            "system allocator (``ARROW_DEFAULT_MEMORY_POOL=system``), since its default pool "
            "reserves 1 GiB of address space at first use."
        ),
    )
    shuffle_partitions: int = setting(8, "``spark.sql.shuffle.partitions``.", bounds="[1, inf)")
    arrow_batch_rows: int = setting(
        10000, "rows per Arrow batch handed to Python (``maxRecordsPerBatch``).", bounds="[1, inf)"
    )
    loopback: bool = setting(True, "bind the driver to 127.0.0.1 (local mode and the tests).")
    log_level: str = setting("WARN", "Spark's log level (``WARN``, ``INFO``, ...).")
    extra: dict = setting(None, "any other ``spark.*`` settings, verbatim.", factory=dict)
    class_archive: Optional[str] = setting(
        "auto",
        "folder of the driver JVM's class archive (``auto``: ``$XDG_CACHE_HOME/eagle_spark``, "
        "else ``~/.cache/eagle_spark``); ``none`` or null: no archive.",
        more=(
            "The JVM maps Spark's classes from it instead of loading them one by one, so a "
            "command's session is up ~2 s sooner. Made once per install in the background by the "
            "first session that finds none (~180 MB); only classic sessions this library starts "
            "use it (:mod:`eagle_spark.jvm_archive`)."
        ),
    )

    driver_jit: str = setting(
        "auto",
        "how the driver JVM this library starts compiles hot code: ``quick`` (its first compiler "
        "only), ``full`` (the JVM's default: both); ``auto``: quick with a ``local`` master, full "
        "otherwise.",
        choices=("auto", "quick", "full"),
        more=(
            "In local mode the driver JVM runs the tasks, and its optimising compiler works on the "
            "cores the tasks need; with the first compiler only, the main job and the tree's "
            "``train`` command take less time (``benchmarks/main_job.py``). A cluster's "
            "driver runs no tasks and keeps the default. Only classic sessions this library starts "
            "(not under spark-submit, not Spark Connect); nothing is added when "
            "``spark.extra``'s ``spark.driver.extraJavaOptions`` already choose "
            "(``TieredStopAtLevel``, ``TieredCompilation``) (:func:`eagle_spark.session.jit_options`)."
        ),
    )

    def __post_init__(self) -> None:
        _check(bool(self.master), "spark.master must not be empty")
        _check(
            self.remote is None
            or re.fullmatch(r"sc://[^/\s]+(/.*)?|local(\[[^\]]*\])?", self.remote) is not None,
            f"spark.remote must be sc://host:port or local[N], got {self.remote!r}",
        )
        _check_jvm_memory(self.driver_memory, "spark.driver_memory")
        _check_jvm_memory(self.executor_memory, "spark.executor_memory")
        if self.python_worker_memory is not None:
            mib = memory_mib(self.python_worker_memory, "spark.python_worker_memory")
            _check(
                mib >= MIN_PYTHON_WORKER_MIB,
                f"spark.python_worker_memory={self.python_worker_memory} is below "
                f"{MIN_PYTHON_WORKER_MIB // 1024}g: Spark applies it as "
                "the Python worker's address-space limit (RLIMIT_AS), and a worker maps ~0.6 GB of "
                f"address space on its imports alone; set {MIN_PYTHON_WORKER_MIB // 1024}g or more "
                "(about 0.7 GB above the data a task holds), or leave it unset for no cap",
            )
        for key in self.extra:
            _check(
                str(key).startswith("spark."), f"spark.extra key {key!r} must start with 'spark.'"
            )


@section
@dataclass(frozen=True)
class IngestSettings(Section):
    """Reading XC / libsvm text files (:func:`eagle_spark.io.ingest.ingest`)."""

    format: str = setting(
        "xc",
        "``xc`` (header line ``n_samples n_features n_labels``) or ``libsvm`` (no header).",
        choices=("xc", "libsvm"),
    )
    one_based: bool = setting(False, "feature ids in the file start at 1 (labels stay 0-based).")
    on_bad_line: str = setting(
        "fail",
        "``fail`` (exit 2 naming file, line, problem; nothing written) or ``skip`` (bad lines go "
        "to ``_rejected/``).",
        more="Skipped lines are counted in the manifest.",
        choices=("fail", "skip"),
    )
    n_features: Optional[int] = setting(
        None,
        "libsvm only: the feature count (ids must be below it); null: max id + 1.",
        param="numFeatures",
        bounds="[0, inf)",
    )
    n_labels: Optional[int] = setting(
        None,
        "libsvm only: the label count; null: max label id + 1.",
        param="numLabels",
        bounds="[0, inf)",
    )


@section
@dataclass(frozen=True)
class AggregateSettings(Section):
    """Building aggregated-label data (:func:`eagle_spark.aggregation.aggregate.aggregate`)."""

    grouping: str = setting(
        "random",
        "``random`` (shuffle, cut into groups of ``group_size``) or ``cluster`` (hierarchical "
        "balanced 2-means to ``depth``).",
        choices=("random", "cluster"),
    )
    group_size: int = setting(
        4, "g, samples per random group (the last group holds the remainder).", bounds="[1, inf)"
    )
    depth: int = setting(
        8, "D, levels of the cluster hierarchy (up to 2^D groups).", bounds="[0, 24]"
    )
    noise: float = setting(
        0.0,
        "sigma of the Gaussian noise added to the clustered features only; finite, >= 0.",
        bounds="[0, inf)",
    )
    seed: int = setting(0, "seed of the shuffle / initial centroids / noise.")
    merge: str = setting(
        "list",
        "``list`` (Y2 count = multiplicity) or ``set`` (count = 1).",
        choices=("list", "set"),
    )
    kmeans_iterations: int = setting(20, "2-means rounds per tree node.", bounds="[1, inf)")
    on_bad_row: str = setting(
        "fail",
        "user-supplied Y1/Y2: ``fail`` (exit 2 naming table and id) or ``skip`` (drop the row).",
        more="Skipped rows are counted in the manifest.",
        choices=("fail", "skip"),
    )


@section
@dataclass(frozen=True)
class SynthSettings(Section):
    """Synthetic data (:func:`eagle_spark.synth.synth`)."""

    preset: str = setting(
        "wiki325k",
        "shape to reproduce: ``wiki325k``, ``eurlex4k``, ``wiki10-31k``, ``amazoncat13k``.",
    )
    scale: float = setting(
        1.0,
        "> 0; sample, feature and label counts are multiplied by it (above 1: a larger twin).",
        more=(
            "1 keeps the preset's (or the ``like`` source's) counts; the planted generator "
            "(``difficulty`` given) allows at most 1."
        ),
        bounds="(0, inf)",
    )
    like: Optional[str] = setting(
        None,
        "a labelled dataset (or a train/test pair folder) to make a twin of, instead of a preset.",
        more=(
            "The realistic model (``eagle_spark.twin``) is fitted to its statistics: counts, "
            "label and feature frequency curves, labels and nonzeros per sample, label "
            "co-occurrence, and the Oracle's P@1 and P@5 on a validation split of it."
        ),
    )
    seed: int = setting(0, "base seed; the same seed gives byte-identical tables.")
    rows_per_task: int = setting(250_000, "samples generated per Spark task.", bounds="[1, inf)")
    difficulty: Optional[float] = setting(
        None,
        "null: the preset's realistic model; in [0, 1]: the planted generator at this difficulty.",
        more=(
            "The realistic model (``eagle_spark.twin``) draws labels in co-occurring topics "
            "with shared evidence and a long tail, fitted to the paper's Table 1 Oracle "
            "precision. The planted generator made the earlier reports: each label has private "
            "prototype words; confusable labels (a higher difficulty) share topic words, have "
            "weaker evidence, distractor labels and louder noise words. Its calibrated values "
            "(wiki325k 1.0, eurlex4k 0.4, wiki10-31k 0.7, amazoncat13k 0.35) put omikuji's P@1 "
            "near the real data set's; 0 is its easy data."
        ),
        bounds="[0, 1]",
    )

    def __post_init__(self) -> None:
        if self.difficulty is not None and self.scale > 1:
            raise SettingsError(
                f"synth.scale must be in (0, 1] for the planted generator (synth.difficulty "
                f"given), got {self.scale} (the realistic presets and twins may be larger)"
            )
        if self.like is not None and self.difficulty is not None:
            raise SettingsError(
                "synth.difficulty applies to presets; a twin's difficulty is fitted to the "
                "source (synth.like)"
            )
