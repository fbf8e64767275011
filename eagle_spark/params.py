"""Settings: frozen dataclasses, loaded from YAML, overridden by ``--set section.key=value``.

One way to configure: every knob lives in a section dataclass below, with its
unit and default in the docstring. A run is fully described by one YAML file, printed by
``eagle-spark --print-defaults``. Precedence, lowest first: code defaults, ``--conf FILE``,
``--set key=value`` overrides, then the explicit flags of a command (``--iterations 5`` is the same
as ``--set embed.iterations=5``).

Every ``from_dict`` rejects unknown keys and wrong types with :class:`SettingsError` naming the key.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import yaml

from eagle_spark.errors import SettingsError


class BaseParams:
    """Mixin for frozen settings dataclasses: typed ``from_dict``/``to_dict`` and validation."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, where: str = "") -> "BaseParams":
        """Build from a mapping, rejecting unknown keys and values of the wrong type.

        Args:
            data: key -> value (nested mappings for nested sections); None means all defaults.
            where: dotted prefix used in error messages (e.g. ``"spark."``).
        Returns:
            An instance of ``cls``.
        Raises:
            SettingsError: an unknown key, a value of the wrong type, or a failed check.
        """
        data = dict(data or {})
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - names)
        if unknown:
            raise SettingsError(
                f"unknown setting '{where}{unknown[0]}'; known keys of "
                f"{where.rstrip('.') or 'the top level'}: {', '.join(sorted(names))}"
            )
        values = {}
        for name, value in data.items():
            values[name] = _coerce(hints[name], value, f"{where}{name}")
        try:
            return cls(**values)  # type: ignore[call-arg]
        except (TypeError, ValueError) as err:
            if isinstance(err, SettingsError):
                raise
            raise SettingsError(f"{where.rstrip('.') or 'settings'}: {err}") from err

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of every field (YAML/JSON serialisable)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, BaseParams) else _plain(value)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _coerce(hint: Any, value: Any, key: str) -> Any:
    """Check `value` against the annotation `hint`; ints are accepted where floats are expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union:
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, key)
    if isinstance(hint, type) and issubclass(hint, BaseParams):
        if not isinstance(value, Mapping):
            raise SettingsError(f"setting {key!r} must be a mapping, got {value!r}")
        return hint.from_dict(value, where=f"{key}.")
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, Mapping):
            raise SettingsError(f"setting {key!r} must be a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"setting {key!r} must be a list, got {value!r}")
        return tuple(_coerce(args[0], v, key) for v in value)
    if hint is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"setting {key!r} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"setting {key!r} must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(f"setting {key!r} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise SettingsError(f"setting {key!r} must be a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise SettingsError(f"setting {key!r} must be a string, got {value!r}")
        return value
    raise SettingsError(f"setting {key!r}: unsupported type {hint!r}")  # pragma: no cover


_UNITS = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}

MIN_PYTHON_WORKER_MIB = 2048
"""Smallest ``spark.python_worker_memory`` accepted, in MiB. Measured on this project's worker
process: address space 0.61 GB after its imports (resident 0.21 GB); with a 1 GiB cap (and
pyarrow's default pool, which reserves 1 GiB more at first use) an 8 MiB numpy allocation failed
in the assign stage of a standalone-cluster run while the worker held ~0.33 GB."""


def memory_mib(text: str, key: str) -> float:
    """A Spark memory string (``512m``, ``2g``, ``1t``, ``2048k``; no suffix = MiB) in MiB.

    Raises:
        SettingsError: `text` is not a positive whole number with an optional k/m/g/t suffix (any
            case, optionally followed by ``b``), as Spark reads sizes; the message names `key`.
    """
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", str(text), flags=re.IGNORECASE)
    if match is None or int(match.group(1)) <= 0:
        raise SettingsError(f"setting {key!r} must be a size such as 512m or 2g, got {text!r}")
    return float(match.group(1)) * _UNITS[(match.group(2) or "m").lower()]


MIN_JVM_MIB = 512
"""Smallest ``spark.driver_memory`` / ``spark.executor_memory`` accepted, in MiB. Spark reserves
300 MiB of every JVM heap and refuses to start with less than 1.5 times that (450 MiB: "System
memory ... must be at least 471859200"); 512m is the next round size above it."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise SettingsError(message)


def candidate_changes(name: str) -> dict[str, Any]:
    """The ``assign`` settings of a candidate of ``assign.candidates``: ``baseline``, ``hard``
    (Algorithm 2's top-c) or ``soft-<T>`` (soft weighting at temperature T > 0); ``hard`` and
    ``soft-<T>`` may end in ``+r<N>``: N rounds of refinement with the classifier (0 without).

    Raises:
        SettingsError: any other name.
    """
    if name == "baseline":
        return {"method": "baseline", "weighting": "hard", "refine_rounds": 0}
    m = re.fullmatch(r"(hard|soft-(\d+(?:\.\d+)?))(?:\+r(\d+))?", name)
    _check(
        m is not None and (m.group(2) is None or float(m.group(2)) > 0),
        f"assign.candidates: {name!r} is not baseline, hard or soft-<temperature> (e.g. soft-0.3), "
        "optionally with +r<rounds> of refinement (e.g. hard+r1)",
    )
    if m is None:  # _check raised above; this tells the type checker
        raise SettingsError(f"assign.candidates: {name!r}")
    changes: dict[str, Any] = {"method": "eagle", "weighting": "hard", "refine_rounds": 0}
    if m.group(2) is not None:
        changes |= {"weighting": "soft", "temperature": float(m.group(2))}
    if m.group(3) is not None:
        changes["refine_rounds"] = int(m.group(3))
    return changes


def _check_x_access(section: str, x_access: str, cache_budget: Optional[str]) -> None:
    _check(
        x_access in ("auto", "cached", "joined"),
        f"{section}.x_access must be auto, cached or joined, got {x_access!r}",
    )
    if cache_budget is not None:
        memory_mib(cache_budget, f"{section}.cache_budget")


def _finite(value: float) -> bool:
    return math.isfinite(value)


def _check_jvm_memory(text: str, key: str) -> None:
    mib = memory_mib(text, key)
    _check(
        mib >= MIN_JVM_MIB,
        f"{key}={text} is below {MIN_JVM_MIB}m: Spark reserves 300 MiB of the JVM heap and "
        f"will not start a JVM with less than 450 MiB; set {MIN_JVM_MIB}m or more",
    )


@dataclass(frozen=True)
class SparkParams(BaseParams):
    """How the SparkSession is built (:func:`eagle_spark.session.build_spark`).

    Attributes:
        master: Spark master URL: ``local[*]``, ``local[N]`` or ``spark://host:port``. Ignored under
            spark-submit, which sets its own, and with ``remote``. Default ``local[*]``.
        remote: a Spark Connect URL (``sc://host:port``, or ``local[N]`` for a Connect server
            started in this process): every command then runs on a Spark Connect session; on an
            ``sc://`` server only the ``spark.sql.*`` settings apply (the server's own decide the
            rest). Default null: a classic session.
        app_name: application name shown by Spark. Default ``eagle-spark``.
        driver_memory: JVM heap of the driver (local mode: of everything), e.g. ``4g``; at least
            ``512m`` (:data:`MIN_JVM_MIB`). Default ``4g``.
        executor_memory: JVM heap per executor (cluster mode); at least ``512m``. Default ``2g``.
        python_worker_memory: cap per Python worker (``spark.executor.pyspark.memory``), or None for
            no cap. Spark enforces it as the worker's address-space limit (``RLIMIT_AS``), not its
            resident memory: a worker maps ~0.6 GB on importing numpy, scipy, pyarrow and
            scikit-learn, so the cap must be at least ``2g`` (:data:`MIN_PYTHON_WORKER_MIB`) and
            about 0.7 GB above the data a task holds. With a cap, the workers use pyarrow's system
            allocator (``ARROW_DEFAULT_MEMORY_POOL=system``), since its default pool reserves 1 GiB
            of address space at first use. Default None.
        shuffle_partitions: ``spark.sql.shuffle.partitions``. Default 8.
        arrow_batch_rows: rows per Arrow batch handed to Python (``maxRecordsPerBatch``). Default 10000.
        loopback: bind the driver to 127.0.0.1 (local mode and the tests). Default true.
        log_level: Spark's log level (``WARN``, ``INFO``, ...). Default ``WARN``.
        extra: any other ``spark.*`` settings, verbatim. Default empty.
    """

    master: str = "local[*]"
    remote: Optional[str] = None
    app_name: str = "eagle-spark"
    driver_memory: str = "4g"
    executor_memory: str = "2g"
    python_worker_memory: Optional[str] = None
    shuffle_partitions: int = 8
    arrow_batch_rows: int = 10000
    loopback: bool = True
    log_level: str = "WARN"
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(self.shuffle_partitions >= 1, "spark.shuffle_partitions must be >= 1")
        _check(self.arrow_batch_rows >= 1, "spark.arrow_batch_rows must be >= 1")
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


@dataclass(frozen=True)
class IngestParams(BaseParams):
    """Reading XC / libsvm text files (:func:`eagle_spark.io.ingest.ingest`).

    Attributes:
        format: ``xc`` (header line ``n_samples n_features n_labels``) or ``libsvm`` (no header).
            Default ``xc``.
        one_based: feature ids in the file start at 1 (labels stay 0-based). Default false.
        on_bad_line: ``fail`` (exit 2 naming file, line, problem; nothing written) or ``skip``
            (bad lines go to ``_rejected/`` and are counted in the manifest). Default ``fail``.
        n_features: libsvm only: the feature count (ids must be below it); None infers max id + 1.
            Default None.
        n_labels: libsvm only: the label count; None infers max label id + 1. Default None.
    """

    format: str = "xc"
    one_based: bool = False
    on_bad_line: str = "fail"
    n_features: Optional[int] = None
    n_labels: Optional[int] = None

    def __post_init__(self) -> None:
        _check(
            self.format in ("xc", "libsvm"),
            f"ingest.format must be xc or libsvm, got {self.format!r}",
        )
        _check(
            self.on_bad_line in ("fail", "skip"),
            f"ingest.on_bad_line must be fail or skip, got {self.on_bad_line!r}",
        )
        for name in ("n_features", "n_labels"):
            value = getattr(self, name)
            _check(value is None or value >= 0, f"ingest.{name} must be >= 0")


@dataclass(frozen=True)
class AggregateParams(BaseParams):
    """Building aggregated-label data (:func:`eagle_spark.aggregation.aggregate.aggregate`).

    Attributes:
        grouping: ``random`` (shuffle, cut into groups of ``group_size``) or ``cluster``
            (hierarchical balanced 2-means to ``depth``). Default ``random``.
        group_size: g, samples per random group (the last group holds the remainder). Default 4.
        depth: D, levels of the cluster hierarchy (up to 2^D groups). Default 8.
        noise: sigma of the Gaussian noise added to the clustered features only; finite, >= 0.
            Default 0.0.
        seed: seed of the shuffle / initial centroids / noise. Default 0.
        merge: ``list`` (Y2 count = multiplicity) or ``set`` (count = 1). Default ``list``.
        kmeans_iterations: 2-means rounds per tree node. Default 20.
        on_bad_row: user-supplied Y1/Y2: ``fail`` (exit 2 naming table and id) or ``skip`` (drop
            and count in the manifest). Default ``fail``.
    """

    grouping: str = "random"
    group_size: int = 4
    depth: int = 8
    noise: float = 0.0
    seed: int = 0
    merge: str = "list"
    kmeans_iterations: int = 20
    on_bad_row: str = "fail"

    def __post_init__(self) -> None:
        _check(
            self.grouping in ("random", "cluster"),
            f"aggregate.grouping must be random or cluster, got {self.grouping!r}",
        )
        _check(self.group_size >= 1, "aggregate.group_size must be >= 1")
        _check(0 <= self.depth <= 24, "aggregate.depth must be in [0, 24]")
        _check(
            _finite(self.noise) and self.noise >= 0, "aggregate.noise must be a finite number >= 0"
        )
        _check(
            self.merge in ("list", "set"),
            f"aggregate.merge must be list or set, got {self.merge!r}",
        )
        _check(self.kmeans_iterations >= 1, "aggregate.kmeans_iterations must be >= 1")
        _check(
            self.on_bad_row in ("fail", "skip"),
            f"aggregate.on_bad_row must be fail or skip, got {self.on_bad_row!r}",
        )


@dataclass(frozen=True)
class SynthParams(BaseParams):
    """Synthetic data (:func:`eagle_spark.synth.synth`).

    Attributes:
        preset: shape to reproduce: ``wiki325k``, ``eurlex4k``, ``wiki10-31k``, ``amazoncat13k``.
            Default ``wiki325k``.
        scale: in (0, 1]; sample, feature and label counts are multiplied by it. Default 1.0.
        seed: base seed; the same seed gives byte-identical tables. Default 0.
        rows_per_task: samples generated per Spark task. Default 250000.
        difficulty: in [0, 1], how confusable the labels are (topics sharing words, weaker
            evidence, distractor labels, louder noise words); null: the preset's calibrated
            default (wiki325k 1.0, eurlex4k 0.4, wiki10-31k 0.7, amazoncat13k 0.35: omikuji's
            P@1 near the real data set's); 0: the easy data of earlier versions. Default null.
    """

    preset: str = "wiki325k"
    scale: float = 1.0
    seed: int = 0
    rows_per_task: int = 250000
    difficulty: Optional[float] = None

    def __post_init__(self) -> None:
        _check(0 < self.scale <= 1, f"synth.scale must be in (0, 1], got {self.scale}")
        _check(self.rows_per_task >= 1, "synth.rows_per_task must be >= 1")
        _check(
            self.difficulty is None or (_finite(self.difficulty) and 0 <= self.difficulty <= 1),
            f"synth.difficulty must be in [0, 1] or null, got {self.difficulty}",
        )


@dataclass(frozen=True)
class EmbedParams(BaseParams):
    """GRLR label embeddings (:func:`eagle_spark.grlr.embedding.embed`; paper Algorithm 1).

    Attributes:
        iterations: T, GRLR iterations (0 gives EAGLE-0's e0). Default 20.
        lr: lambda, the step of e = Proj(e + lambda g); finite, > 0. Default 0.1.
        normalize: L2-normalise the rows of X first (cosine similarity). Default true.
        tasks: label bins, one Spark task each (balanced by work). Default 16.
        batch_rows: candidate rows per vectorised batch inside a task (memory bound). Default 200000.
        split_rows: labels with more candidate rows than this are split into chunks of groups,
            combined on the driver each iteration; 0 means max(2 x total / tasks, 500000).
            Default 0.
        prune_below: store only embedding weights with |w| >= this (smaller stored embeddings;
            the assignments of the same pass are computed before pruning and do not change).
            0 stores every nonzero weight (exact). Default 0.
        x_access: how tasks get the candidates' feature rows. ``cached``: every executor reads X and
            Y1 once into its memory-mapped cache (fast; needs ~12 bytes per nonzero of X per
            machine). ``joined``: the design's map-reduce, Y2's pairs joined with the groups'
            member rows, so no task reads all of X (for X beyond one machine's memory; costs a
            shuffle of the candidates' rows). ``auto``: ``cached`` while the cache fits
            ``cache_budget``, else ``joined``; the log says which and why. Same results either way.
            Default ``auto``.
        cache_budget: the executor cache size ``auto`` allows, a Spark size (``4g``); null: half of
            ``spark.python_worker_memory`` when set, else 4g. Default null.
    """

    iterations: int = 20
    lr: float = 0.1
    normalize: bool = True
    tasks: int = 16
    batch_rows: int = 200000
    split_rows: int = 0
    prune_below: float = 0.0
    x_access: str = "auto"
    cache_budget: Optional[str] = None

    def __post_init__(self) -> None:
        _check_x_access("embed", self.x_access, self.cache_budget)
        _check(self.iterations >= 0, "embed.iterations must be >= 0")
        _check(
            _finite(self.prune_below) and 0 <= self.prune_below < 1,
            f"embed.prune_below must be a finite number in [0, 1), got {self.prune_below}",
        )
        _check(
            _finite(self.lr) and self.lr > 0, f"embed.lr must be a finite number > 0, got {self.lr}"
        )
        _check(self.tasks >= 1, "embed.tasks must be >= 1")
        _check(self.batch_rows >= 1, "embed.batch_rows must be >= 1")
        _check(self.split_rows >= 0, "embed.split_rows must be >= 0")


@dataclass(frozen=True)
class AssignParams(BaseParams):
    """Label assignment (:func:`eagle_spark.assignment.assign.assign`; paper Algorithm 2).

    Attributes:
        method: ``eagle`` (each group label to its member with the highest <e_k, x_i>, ties to the
            smallest sample_id) or ``baseline`` (every member gets all its group's labels, Y1 Y2).
            Default ``eagle``.
        multiplicity: a label of list-merge count c goes to the top-c distinct members (top-c);
            false: to its best member only (Algorithm 2 as printed). Default true, chosen on the
            developers' data (validation splits of train, label tree): on R-4, R-10 and
            C-8 groupings of bibtex and delicious the tree on top-c assignments beat the Baseline by
            11.7 / 7.1 / 5.8 points of P@1 / 3 / 5 on average while the printed argmax lost to it
            by 3.9 / 5.4 / 5.1; on synthetic eurlex4k both lose, top-c by less (-17.9 vs -30.6 at
            P@1); benchmarks/reports/assignment_variants*.json. With set-merge counts (all 1) the two
            are the same.
        weighting: ``hard`` (a label goes to its top member, or top-c, with weight 1: Algorithm 2),
            ``soft`` (every member of a group may get each group label, with a weight in (0, 1]
            from its score: :func:`eagle_spark.assignment.assign.soft_weights`; Y_filter then
            carries ``label_weights`` and the classifiers train on the expected loss) or ``auto``
            (each of ``candidates`` is tried on held-out groups and the best by group-level P@k
            is used: :mod:`eagle_spark.ml.selection`; needs no sample labels). Default ``auto``:
            no one point of the family wins on every data set (docs/experiments.md, "Learning from
            group labels"), so the data chooses.
        temperature: with ``soft``, how far the weights spread below the top-c members: a member
            whose score lies a share d of the group's score range below the c-th best gets
            exp(-d / temperature); near 0 it is ``hard``, large it is the Baseline (weight 1 for
            every member). Finite, > 0. Default 0.3.
        candidates: with ``auto``, the assignments to choose from: ``baseline`` (every member
            every group label), ``hard`` (top-c) and ``soft-<T>`` (soft weighting at temperature
            T), each of the last two optionally with ``+r<N>`` rounds of refinement (``hard+r1``).
            Default [baseline,soft-0.3+r1]: on validation splits of bibtex and delicious (R-4,
            R-10, C-8) soft T=0.3 with one round of refinement beat the Baseline by 15.8 / 10.3 /
            8.5 points of P@1/3/5 on average (benchmarks/reports/assignment_variants_refine.json),
            and choosing among baseline, hard, soft-0.3 and soft-0.3+r1 on held-out groups of
            bibtex, delicious and synthetic eurlex4k (selection.json, selection_synth.json) never
            chose hard or soft-0.3, so they only cost a proxy training each; the Baseline stays
            for data where nothing beats it.
        held_out: with ``auto``, the share of the groups held out to score the candidates on, in
            (0, 0.9]. Default 0.2.
        refine_rounds: rounds of refinement with the classifier after the embedding's assignment
            (multiple-instance EM: train one-vs-all on the assignment, score each group's members
            for its labels by w_k . x_i, assign again with the same weighting;
            :mod:`eagle_spark.assignment.refine`), in [0, 10]. 0 is Algorithm 2 alone. A candidate
            of ``auto`` may set it (``hard+r1``). Default 0.
        tasks: label bins, one Spark task each. Default 16.
        batch_rows: candidate rows per vectorised batch inside a task. Default 200000.
        x_access: as in ``embed``, for when the assignments are recomputed from stored
            embeddings (``embed`` normally writes them in its own pass; ``soft`` always
            recomputes, it needs every member's score). Default ``auto``.
        cache_budget: as in ``embed``. Default null.
    """

    method: str = "eagle"
    multiplicity: bool = True
    weighting: str = "auto"
    temperature: float = 0.3
    candidates: tuple[str, ...] = ("baseline", "soft-0.3+r1")
    held_out: float = 0.2
    refine_rounds: int = 0
    tasks: int = 16
    batch_rows: int = 200000
    x_access: str = "auto"
    cache_budget: Optional[str] = None

    def __post_init__(self) -> None:
        _check_x_access("assign", self.x_access, self.cache_budget)
        _check(
            self.method in ("eagle", "baseline"),
            f"assign.method must be eagle or baseline, got {self.method!r}",
        )
        _check(
            self.weighting in ("hard", "soft", "auto"),
            f"assign.weighting must be hard, soft or auto, got {self.weighting!r}",
        )
        _check(
            len(self.candidates) >= 1 and len(set(self.candidates)) == len(self.candidates),
            "assign.candidates must name at least one candidate, each once",
        )
        for name in self.candidates:
            candidate_changes(name)
        _check(
            _finite(self.held_out) and 0 < self.held_out <= 0.9,
            f"assign.held_out must be in (0, 0.9], got {self.held_out!r}",
        )
        _check(
            _finite(self.temperature) and self.temperature > 0,
            f"assign.temperature must be finite and > 0, got {self.temperature!r}",
        )
        _check(
            0 <= self.refine_rounds <= 10,
            f"assign.refine_rounds must be in [0, 10], got {self.refine_rounds!r}",
        )
        _check(self.tasks >= 1, "assign.tasks must be >= 1")
        _check(self.batch_rows >= 1, "assign.batch_rows must be >= 1")


_LINEAR_DOC = """
        loss: ``squared_hinge`` (Parabel/PECOS default) or ``logistic``. Default ``squared_hinge``.
        C: liblinear cost (inverse L2 regularisation) on L2-normalised rows; finite, > 0. Default 0.5.
        threshold: weights with |w| below it are pruned; finite, >= 0. Default 0.1.
        tol: liblinear's stopping tolerance, finite, > 0 (``eps``: the dual coordinate descent stops
            when its projected-gradient gap falls below tol times the first pass's). Default 0.2,
            twice liblinear's and Parabel's 0.1: it trained the tree ~20% faster on delicious and
            ~9% faster on synthetic Wiki-325K with the same P@1 on bibtex, delicious and the
            synthetic set (benchmarks/peers.py; runs in the git history of docs/design.md).
        max_iter: liblinear's cap on passes of its dual coordinate descent over a classifier's
            samples, >= 1. Default 100.
        normalize: L2-normalise the rows of X. Default true.
        tasks: label blocks / training units dealt into this many Spark tasks. Default 16.
        seed: seed of the solver's sample order (and the tree's 2-means, the negative sampling).
            Default 0.
        unassigned: trained on EAGLE's assignments, what a member of a group labelled k that was
            not assigned k is for label k: ``negative`` (the paper: every sample without k is a
            negative of k) or ``ignore`` (left out of k's training set, neither positive nor
            negative: the tree leaves it out of the ranker of k in k's leaf). No effect on other
            training data. Default ``negative``.
        x_access: how training tasks get their units' rows of X. ``cached``: every executor reads X
            and Y once into its memory-mapped cache (~8 bytes per nonzero of X per machine).
            ``joined``: each task receives only the rows its units train on through a Spark join
            of (task, sample) pairs with X (the tree: the samples positive under its nodes, all of
            them for the root; one-vs-all: its labels' positives and drawn negatives, so every
            sample when negative_fraction is 1), and the tree's PIFA label representations are
            summed by a join too; Y stays cached (~5 bytes per positive). ``auto``: ``cached``
            while the cache fits ``cache_budget``, else ``joined``; the log says which and why.
            Same models either way. Default ``auto``.
        cache_budget: the executor cache size ``auto`` allows, a Spark size (``4g``); null: half of
            ``spark.python_worker_memory`` when set, else 4g. Default null."""


def _check_linear(section: str, p: Any) -> None:
    _check(
        p.loss in ("squared_hinge", "logistic"),
        f"{section}.loss must be squared_hinge or logistic, got {p.loss!r}",
    )
    _check(_finite(p.C) and p.C > 0, f"{section}.C must be a finite number > 0, got {p.C}")
    _check(
        _finite(p.threshold) and p.threshold >= 0,
        f"{section}.threshold must be a finite number >= 0, got {p.threshold}",
    )
    _check(_finite(p.tol) and p.tol > 0, f"{section}.tol must be a finite number > 0, got {p.tol}")
    _check(
        isinstance(p.max_iter, int) and not isinstance(p.max_iter, bool) and p.max_iter >= 1,
        f"{section}.max_iter must be an integer >= 1, got {p.max_iter!r}",
    )
    _check(p.tasks >= 1, f"{section}.tasks must be >= 1")
    _check(
        p.unassigned in ("negative", "ignore"),
        f"{section}.unassigned must be negative or ignore, got {p.unassigned!r}",
    )
    _check_x_access(section, p.x_access, p.cache_budget)


@dataclass(frozen=True)
class TrainParams(BaseParams):
    """Which classifier ``train`` and the pipeline use; its knobs are in its own section
    (``tree`` or ``ova``).

    Attributes:
        model: ``ova`` (one-vs-all, section ``ova``) or ``tree`` (Parabel-like label tree, section
            ``tree``). Default ``ova``.
    """

    model: str = "ova"

    def __post_init__(self) -> None:
        _check(
            self.model in ("ova", "tree"), f"train.model must be ova or tree, got {self.model!r}"
        )


@dataclass(frozen=True)
class TreeParams(BaseParams):
    __doc__ = (
        """The label-tree classifier (:mod:`eagle_spark.classifiers.tree`; ``LabelTreeClassifier``).

    Attributes:"""
        + _LINEAR_DOC
        + """
        matcher_C: liblinear cost of the matcher (the classifiers of the tree's inner nodes, which
            route a sample to a child node); ``C`` is then the rankers' (a leaf's label
            classifiers'). Finite, > 0, or None for ``C`` everywhere. Default None. 2 gains
            ~0.5-0.7 points of P@1/3/5 on calibrated synthetic Wiki-325K (scale 0.1) with the
            same P@1 on bibtex and delicious (means over 5 seeds), but trains ~1.75x longer into
            a ~1.6x larger model there (~1.25x with ``matcher_max_iter`` 20; runs in the git
            history of docs/design.md). Those figures are with ``matcher_C_scale`` none; with
            ``samples`` it is the root's cost, scaled below it.
        matcher_C_scale: how the matcher's cost follows its node's size. ``samples``: the
            classifiers of node v's children use (``matcher_C`` or ``C``) x n_samples / n_v, where
            n_v is the number of samples positive under v (the rows they train on) and n_samples
            the training set's. Their squared-hinge loss sums over n_v rows, so this keeps the
            weight of the loss against the regulariser, per sample, the same at every depth (the
            rule omikuji applies to its logistic-loss classifiers). The root's matcher is
            unchanged (n_v = n_samples), and so are the rankers. ``none``: the same cost at every
            node (Parabel's). Default ``samples``: +0.44 / +0.84 / +0.86 P@1/3/5 on calibrated
            synthetic Wiki-325K (scale 0.1), bibtex / delicious unchanged (means over 5 seeds),
            1.1-1.3x the training time and a 1.75x larger model there (runs in the git history
            of docs/design.md).
        matcher_max_iter: liblinear's cap on passes for the matcher alone (``max_iter`` is then
            the rankers'); an integer >= 1, or None for ``max_iter`` everywhere. Default 10. The
            matcher's units hold the most rows (the root's, every sample), and at a larger cost
            (``matcher_C``, or the deep nodes' under ``matcher_C_scale``) they need the most
            passes. With ``matcher_C_scale`` samples, 10 keeps the P@k of 20 on synthetic
            Wiki-325K at scale 0.1 and on bibtex / delicious (means over 5 seeds) and trains the
            matchers in ~0.75x the time; at a uniform ``matcher_C`` 2, 10 costs delicious 0.6 P@1
            and 20 does not (runs in the git history of docs/design.md).
        max_leaf: maximum labels per leaf. Default 100.
        max_leaf_work: a leaf whose training work (samples positive under it x its labels)
            exceeds this is split further by the same balanced 2-means, while it has >= 4 labels,
            so that no leaf (usually one holding head labels) costs much more than the others.
            None: the leaves are Parabel's (only max_leaf). Default 250,000, with
            ``max_split_shared`` 0.1 (docs/design.md, "Classifiers").
        max_split_shared: with ``max_leaf_work``, a heavy leaf's split is kept only when at most
            this share (in [0, 1]) of the leaf's positive samples is positive under both halves:
            the halves' rankers then train on (1 + share) / 2 of the leaf's row x classifier
            pairs, so a split whose halves share most samples saves little work and still adds a
            routing decision. None: every heavy leaf is split (as before). Measured: the heavy
            leaves of calibrated synthetic Wiki-325K (scale 0.1) share 0.5-6.4% of their samples,
            delicious's 17-45%, so 0.1 splits the former and leaves delicious's trees as
            without a budget (runs in the git history of docs/design.md). Default 0.1.
        n_trees: trees in the ensemble (Parabel uses 3), scores averaged. Default 3.
        top_levels: levels of every tree the indexer's first Spark stage splits, one task per
            tree; every node at that depth roots a sub-tree split by the second stage, whose tasks
            are balanced (0: no first stage, whole trees in the second). Default None: the fewest
            levels that leave at least two sub-trees per core of the session
            (``n_trees * 2**levels >= 2 * defaultParallelism``; 1 for 3 trees on 2 cores).
        heavy_unit_memory: a training unit (a node's children trained on the samples positive
            under it) whose working memory, estimated at 40 bytes per nonzero of its rows (the
            rows in float64 for liblinear and liblinear's own copy; measured 36-40), exceeds this
            bound is heavy: an executor trains one heavy unit at a time, whatever its task slots,
            and a task whose heavy unit must wait trains its other units first. This keeps
            training's peak memory from growing with the slots beyond what the machine holds (the
            root's unit alone is ~3 GB at Wiki-325K scale). ``auto``: half the memory available on
            the executor's machine when training starts (Linux ``MemAvailable``) divided by its
            task slots, so units train side by side while every slot's largest unit fits, one at a
            time beyond (:func:`eagle_spark.classifiers.tree.training.heavy_limit`). A Spark
            size (``64m``, ``2g``): that bound. Null: no bound. Same model either way. Default
            ``auto``.
    """
    )

    loss: str = "squared_hinge"
    C: float = 0.5
    matcher_C: Optional[float] = None
    threshold: float = 0.1
    tol: float = 0.2
    max_iter: int = 100
    matcher_C_scale: str = "samples"
    matcher_max_iter: Optional[int] = 10
    normalize: bool = True
    tasks: int = 16
    seed: int = 0
    max_leaf: int = 100
    max_leaf_work: Optional[int] = 250_000
    max_split_shared: Optional[float] = 0.1
    n_trees: int = 3
    top_levels: Optional[int] = None
    unassigned: str = "negative"
    x_access: str = "auto"
    cache_budget: Optional[str] = None
    heavy_unit_memory: Optional[str] = "auto"

    def __post_init__(self) -> None:
        _check_linear("tree", self)
        _check(
            self.matcher_C is None or (_finite(self.matcher_C) and self.matcher_C > 0),
            f"tree.matcher_C must be a finite number > 0 (or null for tree.C), got {self.matcher_C}",
        )
        _check(
            self.matcher_C_scale in ("samples", "none"),
            f"tree.matcher_C_scale must be samples or none, got {self.matcher_C_scale!r}",
        )
        m = self.matcher_max_iter
        _check(
            m is None or (isinstance(m, int) and not isinstance(m, bool) and m >= 1),
            f"tree.matcher_max_iter must be an integer >= 1 (or null for tree.max_iter), got {m!r}",
        )
        if self.heavy_unit_memory not in (None, "auto"):
            memory_mib(self.heavy_unit_memory, "tree.heavy_unit_memory (or auto, or null)")
        _check(self.n_trees >= 1, "tree.n_trees must be >= 1")
        _check(
            self.top_levels is None or self.top_levels >= 0,
            "tree.top_levels must be >= 0 (or null for automatic)",
        )
        _check(self.max_leaf >= 2, "tree.max_leaf must be >= 2")
        _check(
            self.max_leaf_work is None or self.max_leaf_work >= 1,
            "tree.max_leaf_work must be >= 1 (or null for none)",
        )
        shared = self.max_split_shared
        _check(
            shared is None or (_finite(shared) and 0 <= shared <= 1),
            f"tree.max_split_shared must be a number in [0, 1] (or null for always), got {shared!r}",
        )


@dataclass(frozen=True)
class OVAParams(BaseParams):
    __doc__ = (
        """The one-vs-all classifier (:mod:`eagle_spark.classifiers.ova`; ``OneVsRestXMC``).

    Attributes:"""
        + _LINEAR_DOC
        + """
        negative_fraction: share of the negatives each label trains on (1 = all). Default 1.0.
    """
    )

    loss: str = "squared_hinge"
    C: float = 0.5
    threshold: float = 0.1
    tol: float = 0.2
    max_iter: int = 100
    normalize: bool = True
    tasks: int = 16
    seed: int = 0
    negative_fraction: float = 1.0
    unassigned: str = "negative"
    x_access: str = "auto"
    cache_budget: Optional[str] = None

    def __post_init__(self) -> None:
        _check_linear("ova", self)
        _check(0 < self.negative_fraction <= 1, "ova.negative_fraction must be in (0, 1]")


@dataclass(frozen=True)
class PredictParams(BaseParams):
    """Batch prediction (:func:`eagle_spark.classifiers.predict.predict`).

    Attributes:
        top_k: predictions kept per sample. Default 5.
        beam_size: tree: nodes kept per level by the beam search. Default 10.
        batch_rows: one-vs-all: rows scored together inside a task. Default 1000.
        tasks: Spark tasks scoring X. 0 = automatic: when X is read as fewer than two
            partitions per core (``spark.default.parallelism`` x 2) and has at least
            :data:`PREDICT_MIN_TASK_ROWS` rows per such task, its rows are range-partitioned by
            sample_id into that many tasks (a few large files otherwise leave cores idle); else as
            read. N > 0: always N range partitions. Default 0.
    """

    top_k: int = 5
    beam_size: int = 10
    batch_rows: int = 1000
    tasks: int = 0

    def __post_init__(self) -> None:
        _check(self.top_k >= 1, "predict.top_k must be >= 1")
        _check(self.beam_size >= 1, "predict.beam_size must be >= 1")
        _check(self.batch_rows >= 1, "predict.batch_rows must be >= 1")
        _check(self.tasks >= 0, "predict.tasks must be >= 0 (0: automatic)")


PREDICT_MIN_TASK_ROWS = 5000
"""predict.tasks=0 splits X only when every task gets at least this many rows (a shuffle of X is
not worth it for less)."""


@dataclass(frozen=True)
class EvaluateParams(BaseParams):
    """Evaluation (:func:`eagle_spark.evaluation.evaluate.evaluate`).

    Attributes:
        k: evaluate at 1..k. Default 5.
        propensity_a: A of the inverse propensity (Jain et al. 2016), finite, > 0. Default 0.55.
        propensity_b: B of the inverse propensity, finite, > 0 (a label seen 0 times gets
            (0 + B)^-A). Default 1.5.
    """

    k: int = 5
    propensity_a: float = 0.55
    propensity_b: float = 1.5

    def __post_init__(self) -> None:
        _check(self.k >= 1, "evaluate.k must be >= 1")
        _check(
            _finite(self.propensity_a) and self.propensity_a > 0,
            f"evaluate.propensity_a must be a finite number > 0, got {self.propensity_a}",
        )
        _check(
            _finite(self.propensity_b) and self.propensity_b > 0,
            f"evaluate.propensity_b must be a finite number > 0, got {self.propensity_b}",
        )


@dataclass(frozen=True)
class PipelineParams(BaseParams):
    """The main job, ``eagle-spark pipeline`` (:mod:`eagle_spark.pipeline`).

    Attributes:
        output: run folder (every stage's output, comparison, report, logs). Default ``runs/pipeline``.
        train: XC / libsvm text file of the training set; None with no `dataset` means the
            embedded delicious train file. Default None.
        test: text file of the test set; None with no `test_dataset` means the embedded delicious
            test file (when `train` and `dataset` are None too). Default None.
        dataset: an existing dataset to start from instead of ingesting `train`: with X and Y when
            `aggregate` is true, with X, Y1, Y2 (Y optional) when false. Default None.
        test_dataset: an existing dataset with X and Y to predict and evaluate on. Default None.
        aggregate: build Y1 / Y2 from the training Y with the ``aggregate`` settings; false uses the
            groups of `dataset` as they are. Default true.
        methods: which of ``baseline``, ``eagle0``, ``eagle_paper`` (Algorithm 2 as printed: hard
            argmax) and ``eagle`` (the ``assign`` settings) to run (``--compare``: baseline, eagle0,
            eagle). Default ``eagle``.
        until: last stage: ``assign``, ``train``, ``predict`` or ``evaluate``. Default ``evaluate``.
        format: ``parquet``, or ``delta`` to also publish assignments and predictions as Delta
            tables under ``<output>/delta/``. Default ``parquet``.
    """

    output: str = "runs/pipeline"
    train: Optional[str] = None
    test: Optional[str] = None
    dataset: Optional[str] = None
    test_dataset: Optional[str] = None
    aggregate: bool = True
    methods: tuple[str, ...] = ("eagle",)
    until: str = "evaluate"
    format: str = "parquet"

    def __post_init__(self) -> None:
        _check(len(self.methods) >= 1, "pipeline.methods must name at least one method")
        for m in self.methods:
            _check(
                m in ("baseline", "eagle0", "eagle_paper", "eagle"),
                f"pipeline.methods: {m!r} is not one of baseline, eagle0, eagle_paper, eagle",
            )
        _check(len(set(self.methods)) == len(self.methods), "pipeline.methods has a repeat")
        _check(
            self.until in ("assign", "train", "predict", "evaluate"),
            f"pipeline.until must be assign, train, predict or evaluate, got {self.until!r}",
        )
        _check(
            self.format in ("parquet", "delta"),
            f"pipeline.format must be parquet or delta, got {self.format!r}",
        )
        _check(
            not (self.train is not None and self.dataset is not None),
            "give pipeline.train (a text file) or pipeline.dataset (a dataset folder), not both",
        )
        _check(
            not (self.test is not None and self.test_dataset is not None),
            "give pipeline.test or pipeline.test_dataset, not both",
        )


@dataclass(frozen=True)
class Settings(BaseParams):
    """All settings of a run, one section per stage; ``conf/*.yaml`` files mirror this shape.

    Attributes:
        spark: :class:`SparkParams`.
        ingest: :class:`IngestParams`.
        aggregate: :class:`AggregateParams`.
        synth: :class:`SynthParams`.
        embed: :class:`EmbedParams`.
        assign: :class:`AssignParams`.
        train: :class:`TrainParams` (which classifier).
        tree: :class:`TreeParams`.
        ova: :class:`OVAParams`.
        predict: :class:`PredictParams`.
        evaluate: :class:`EvaluateParams`.
        pipeline: :class:`PipelineParams`.
    """

    spark: SparkParams = field(default_factory=SparkParams)
    ingest: IngestParams = field(default_factory=IngestParams)
    aggregate: AggregateParams = field(default_factory=AggregateParams)
    synth: SynthParams = field(default_factory=SynthParams)
    embed: EmbedParams = field(default_factory=EmbedParams)
    assign: AssignParams = field(default_factory=AssignParams)
    train: TrainParams = field(default_factory=TrainParams)
    tree: TreeParams = field(default_factory=TreeParams)
    ova: OVAParams = field(default_factory=OVAParams)
    predict: PredictParams = field(default_factory=PredictParams)
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    pipeline: PipelineParams = field(default_factory=PipelineParams)

    @classmethod
    def load(cls, conf: str | None = None, overrides: Sequence[str] = ()) -> "Settings":
        """Read a YAML settings file and apply ``key=value`` overrides.

        Args:
            conf: path of a YAML file shaped like :class:`Settings` (None: defaults only).
            overrides: ``section.key=value`` strings; values are parsed as YAML scalars
                (``3`` int, ``0.1`` float, ``true`` bool, anything else a string).
        Returns:
            Validated settings.
        Raises:
            SettingsError: the file is missing or not YAML, a key is unknown, a value has the wrong
                type, or an override is not ``key=value``.
        """
        data: dict[str, Any] = {}
        if conf is not None:
            try:
                with open(conf, encoding="utf-8") as fh:
                    loaded = yaml.safe_load(fh)
            except OSError as err:
                raise SettingsError(f"settings file {conf}: {err.strerror}") from err
            except UnicodeDecodeError as err:
                raise SettingsError(
                    f"settings file {conf} is not UTF-8 text: byte {err.object[err.start]:#04x} "
                    f"at offset {err.start} cannot be decoded"
                ) from err
            except yaml.YAMLError as err:
                raise SettingsError(f"settings file {conf} is not valid YAML: {err}") from err
            if loaded is not None and not isinstance(loaded, dict):
                raise SettingsError(f"settings file {conf} must hold a mapping of sections")
            data = loaded or {}
        for item in overrides:
            key, sep, raw = item.partition("=")
            if not sep or not key.strip():
                raise SettingsError(f"override {item!r} must look like section.key=value")
            try:
                value = yaml.safe_load(raw) if raw.strip() else ""
            except yaml.YAMLError:
                value = raw
            node = data
            parts = key.strip().split(".")
            if len(parts) > 2 and parts[1] == "extra":  # spark.extra.spark.x.y=v: key is spark.x.y
                parts = [parts[0], "extra", ".".join(parts[2:])]
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise SettingsError(f"override {item!r}: {part!r} is not a section")
            node[parts[-1]] = value
        return typing.cast(Settings, cls.from_dict(data))

    def classifier(self) -> "TreeParams | OVAParams":
        """The settings section of the classifier ``train.model`` names (``tree`` or ``ova``)."""
        return self.tree if self.train.model == "tree" else self.ova

    def replace(self, section: str, **changes: Any) -> "Settings":
        """A copy with some fields of one section changed (validated like a ``--set``).

        Raises:
            SettingsError: unknown section or key, or a value of the wrong type.
        """
        if section not in {f.name for f in dataclasses.fields(self)}:
            raise SettingsError(f"unknown settings section {section!r}")
        current = getattr(self, section).to_dict()
        current.update(changes)
        new_section = type(getattr(self, section)).from_dict(current, where=f"{section}.")
        return dataclasses.replace(self, **{section: new_section})

    def to_yaml(self) -> str:
        """YAML text of every setting with its current value."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False)
