"""The settings sections of the runs (``pipeline``, ``miml``, ``experiment``) and :class:`Settings`,
the root that holds every section. The other sections are declared in :mod:`.data` (session and
data stages) and :mod:`.learning` (the learning stages); the settings several of them share, in
:mod:`.shared`."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import yaml

from eagle_spark.errors import SettingsError
from eagle_spark.settings.data import (
    AggregateSettings,
    IngestSettings,
    SparkSettings,
    SynthSettings,
)
from eagle_spark.settings.declare import (
    Section,
    _check,
    root,
    section,
    setting,
)
from eagle_spark.settings.learning import (
    AssignSettings,
    EmbedSettings,
    EvaluateSettings,
    OVASettings,
    PredictSettings,
    TrainSettings,
    TreeSettings,
    check_candidate,
)
from eagle_spark.settings.shared import (
    GROUP_CRITERIA,
    PIPELINE_METHODS,
)


@section
@dataclass(frozen=True)
class PipelineSettings(Section):
    """The main job, ``eagle-spark pipeline`` (:mod:`eagle_spark.pipeline`)."""

    output: str = setting(
        "runs/pipeline", "run folder (every stage's output, comparison, report, logs)."
    )
    train: Optional[str] = setting(
        None,
        "XC / libsvm text file of the training set; null with no ``dataset``: the embedded "
        "delicious train file.",
    )
    test: Optional[str] = setting(
        None,
        "text file of the test set; null with no ``test_dataset``: the embedded delicious test "
        "file (when ``train`` and ``dataset`` are null too).",
    )
    dataset: Optional[str] = setting(
        None,
        "an existing dataset to start from instead of ingesting ``train``.",
        more="It has X and Y when ``aggregate`` is true, X, Y1 and Y2 (Y optional) when false.",
    )
    test_dataset: Optional[str] = setting(
        None, "an existing dataset with X and Y to predict and evaluate on."
    )
    aggregate: bool = setting(
        True,
        "build Y1 / Y2 from the training Y with the ``aggregate`` settings; false uses the groups "
        "of `dataset` as they are.",
    )
    methods: tuple[str, ...] = setting(
        ("eagle",),
        "which of ``baseline``, ``eagle0``, ``eagle_paper`` and ``eagle`` (the ``assign`` "
        "settings) to run.",
        more=(
            "``eagle_paper`` is Algorithm 2 as printed (hard argmax); ``--compare`` runs "
            "baseline, eagle0 and eagle."
        ),
        choices=PIPELINE_METHODS,
    )
    methods_at_once: int = setting(
        0,
        "how many methods' stages run side by side (each method's own stages in order); 0: as "
        "many as the machine's memory allows for the data (a classic session in local mode; one "
        "elsewhere).",
        more=(
            "The methods are independent after aggregate, and a small stage leaves cores idle "
            "between its Spark jobs, which another method's jobs then use; each method running "
            "holds its own executor state (:func:`eagle_spark.pipeline.methods_at_once` gives "
            "the rule). 1: one method after another."
        ),
        bounds="[0, inf)",
    )
    until: str = setting(
        "evaluate",
        "last stage: ``assign``, ``train``, ``predict`` or ``evaluate``.",
        choices=("assign", "train", "predict", "evaluate"),
    )
    format: str = setting(
        "parquet",
        "``parquet``, or ``delta`` to also publish assignments and predictions as Delta tables "
        "under ``<output>/delta/``.",
        choices=("parquet", "delta"),
    )

    def __post_init__(self) -> None:
        _check(len(self.methods) >= 1, "pipeline.methods must name at least one method")
        _check(len(set(self.methods)) == len(self.methods), "pipeline.methods has a repeat")
        _check(
            not (self.train is not None and self.dataset is not None),
            "give pipeline.train (a text file) or pipeline.dataset (a dataset folder), not both",
        )
        _check(
            not (self.test is not None and self.test_dataset is not None),
            "give pipeline.test or pipeline.test_dataset, not both",
        )


MIML_METHODS = ("deep-miml", "eagle0", "eagle")
"""The MIML network's masks: none (Deep-MIML), from EAGLE-0's (T = 0) or EAGLE's GRLR embeddings."""


@section
@dataclass(frozen=True)
class MimlSettings(Section):
    """The MIML extension, paper section 5 (``eagle-spark miml``; :class:`eagle_spark.ml.DeepMIML`)."""

    method: str = setting(
        "eagle",
        "DeepMIML's mask: ``deep-miml`` (none), ``eagle0`` or ``eagle`` (GRLR label embeddings at "
        "T = 0 or ``iterations``).",
        choices=MIML_METHODS,
    )
    methods: tuple[str, ...] = setting(
        MIML_METHODS, "the methods the ``miml`` command trains and compares.", choices=MIML_METHODS
    )
    group_size: int = setting(
        4, "g, images per training bag of the ``miml`` command (paper: 4, 50).", bounds="[1, inf)"
    )
    seeds: int = setting(
        3,
        "network seeds per method of the ``miml`` command (0 .. seeds-1): mean and spread.",
        bounds="[1, inf)",
    )
    iterations: int = setting(
        20,
        "GRLR's T for the mask's label embeddings (``eagle``; paper: 20).",
        param="maxIter",
        bounds="[0, inf)",
    )
    step: float = setting(
        0.1,
        "GRLR's lambda for the mask's label embeddings; finite, > 0.",
        param="stepSize",
        bounds="(0, inf)",
    )
    centre_embeddings: bool = setting(
        True,
        "take the label embeddings' shared component out before they make the mask.",
        more="(:func:`eagle_spark.miml.bags.centre_embeddings`; the figure shows them so).",
    )
    hidden: int = setting(256, "width of the base model's first layer.", bounds="[1, inf)")
    concepts: int = setting(4, "K, concepts per label.", bounds="[1, inf)")
    epochs: int = setting(
        10, "passes over the bags (with ``tune_lr``: the most tried).", bounds="[1, inf)"
    )
    lr: float = setting(
        0.001, "Adam's learning rate; finite, > 0.", param="learningRate", bounds="(0, inf)"
    )
    batch_size: int = setting(64, "bags per optimiser step.", bounds="[1, inf)")
    tau: float = setting(
        3.0, "hardness of the co-attention mask (unused by deep-miml); >= 0.", bounds="[0, inf)"
    )
    mask_mix: Optional[float] = setting(
        0.5,
        "the mask: alpha in (0, 1], the max-normalised mask mixed with 1; null: the paper's "
        "M = g softmax.",
        bounds="(0, 1]",
    )
    seed: int = setting(
        0, "network initialisation and bag order (the ``miml`` command uses 0 .. seeds-1)."
    )
    tune_lr: tuple[float, ...] = setting(
        (),
        "learning rates to try for Deep-MIML on a held-out share of the training images; "
        "empty: ``lr`` and ``epochs`` as given.",
        more="The paper's protocol: tuned once for Deep-MIML, then used for every method.",
        bounds="(0, inf)",
    )
    validation: float = setting(
        0.1,
        "share of the training images held out to tune ``lr`` (with ``tune_lr``), in (0, 1).",
        bounds="(0, 1)",
    )
    train_images: int = setting(0, "use the first N training images (0: all).", bounds="[0, inf)")
    test_images: int = setting(0, "use the first N test images (0: all).", bounds="[0, inf)")
    num_processes: int = setting(
        0,
        "0: train in the driver's process; N >= 1: N PyTorch processes through Spark's "
        "TorchDistributor.",
        bounds="[0, inf)",
    )
    local_mode: bool = setting(
        True,
        "TorchDistributor's local_mode: processes on the driver's machine (true) or a barrier "
        "Spark job on the executors (false).",
    )
    data_seed: int = setting(0, "seed of the bags' draw.")

    def __post_init__(self) -> None:
        _check(len(self.methods) >= 1, "miml.methods must name at least one method")


@section
@dataclass(frozen=True)
class ExperimentSettings(Section):
    """The paper's experiments, ``eagle-spark experiment`` (:mod:`eagle_spark.experiments`)."""

    groupings: tuple[str, ...] = setting(
        ("R-4", "R-10", "C"),
        "table2 and select: the groupings, R-<g>, C (depth ``aggregate.depth``), C-<depth> or "
        "C-<depth>-n<noise>.",
    )
    methods: tuple[str, ...] = setting(
        ("baseline", "eagle0", "eagle_paper", "eagle"),
        "table2 and ablation: the methods beside the Oracle (``eagle_paper``: Algorithm 2 as "
        "printed; ``eagle``: the ``assign`` settings).",
        choices=PIPELINE_METHODS,
    )
    validation: float = setting(
        0.0,
        "table2 and ablation: evaluate on this held-out share of the training set instead of "
        "the test set (for tuning), in [0, 0.9]; 0: the test set.",
        bounds="[0, 0.9]",
    )
    axis: Optional[str] = setting(
        None,
        "ablation: what varies, ``group-size``, ``depth`` or ``noise`` (Figure 3 left, middle, "
        "right).",
        choices=("group-size", "depth", "noise"),
    )
    values: tuple[float, ...] = setting(
        (),
        "ablation: the axis' values (e.g. 2 4 8 16); regression: the sigma_2 values (empty: the "
        "paper's).",
        bounds="(-inf, inf)",
    )
    seeds: int = setting(10, "regression: draws per sigma_2.", bounds="[1, inf)")
    candidates: tuple[str, ...] = setting(
        ("baseline", "hard", "soft-0.1", "soft-0.3", "soft-1", "soft-0.3+r1"),
        "select: the candidates scored on held-out groups (names as ``assign.candidates``).",
    )
    held_out: float = setting(
        0.2, "select: the share of the groups held out, in (0, 0.9].", bounds="(0, 0.9]"
    )
    criterion: Optional[str] = setting(
        None,
        "select: the group-level precision that ranks the candidates, ``max``, ``sum`` or "
        "``multiset``; null: the one ``assign.weighting`` auto uses.",
    )

    def __post_init__(self) -> None:
        _check(len(self.methods) >= 1, "experiment.methods must name at least one method")
        _check(len(self.groupings) >= 1, "experiment.groupings must name at least one grouping")
        _check(len(self.candidates) >= 1, "experiment.candidates must name at least one")
        for name in self.candidates:
            check_candidate(name, "experiment.candidates")
        if self.criterion is not None:
            _check(
                self.criterion in GROUP_CRITERIA,
                f"experiment.criterion must be one of {', '.join(GROUP_CRITERIA)}, "
                f"got {self.criterion!r}",
            )


@dataclass(frozen=True)
class Settings(Section):
    """All settings of a run, one section per stage; ``conf/*.yaml`` files mirror this shape.

    Attributes:
        spark: :class:`SparkSettings`.
        ingest: :class:`IngestSettings`.
        aggregate: :class:`AggregateSettings`.
        synth: :class:`SynthSettings`.
        embed: :class:`EmbedSettings`.
        assign: :class:`AssignSettings`.
        train: :class:`TrainSettings` (which classifier).
        tree: :class:`TreeSettings`.
        ova: :class:`OVASettings`.
        predict: :class:`PredictSettings`.
        evaluate: :class:`EvaluateSettings`.
        pipeline: :class:`PipelineSettings`.
        miml: :class:`MimlSettings`.
        experiment: :class:`ExperimentSettings`.
    """

    spark: SparkSettings = field(default_factory=SparkSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    aggregate: AggregateSettings = field(default_factory=AggregateSettings)
    synth: SynthSettings = field(default_factory=SynthSettings)
    embed: EmbedSettings = field(default_factory=EmbedSettings)
    assign: AssignSettings = field(default_factory=AssignSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    tree: TreeSettings = field(default_factory=TreeSettings)
    ova: OVASettings = field(default_factory=OVASettings)
    predict: PredictSettings = field(default_factory=PredictSettings)
    evaluate: EvaluateSettings = field(default_factory=EvaluateSettings)
    pipeline: PipelineSettings = field(default_factory=PipelineSettings)
    miml: MimlSettings = field(default_factory=MimlSettings)
    experiment: ExperimentSettings = field(default_factory=ExperimentSettings)

    def __post_init__(self) -> None:
        """Nothing to check here: each section checked itself when it was built."""

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

    def classifier(self) -> "TreeSettings | OVASettings":
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


root(Settings)
