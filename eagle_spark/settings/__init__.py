"""Settings: frozen dataclasses, loaded from YAML, overridden by ``--set section.key=value``.

One way to configure: every knob lives in a section dataclass below, with its
unit and default in the docstring. A run is fully described by one YAML file, printed by
``eagle-spark --print-defaults``. Precedence, lowest first: code defaults, ``--conf FILE``,
``--set key=value`` overrides, then the explicit flags of a command (``--iterations 5`` is the same
as ``--set embed.iterations=5``).

Every ``from_dict`` rejects unknown keys and wrong types with :class:`SettingsError` naming the key.
"""

from eagle_spark.settings.data import (
    AggregateSettings,
    IngestSettings,
    SparkSettings,
    SynthSettings,
)
from eagle_spark.settings.declare import (
    Declared,
    Section,
    as_params,
    camel,
    check_declared,
    declarations,
    described,
    from_params,
    memory_mib,
    range_text,
    root,
    section,
    section_class,
    section_key,
    section_name,
    setting,
    shown,
)
from eagle_spark.settings.learning import (
    PREDICT_MIN_TASK_ROWS,
    AssignSettings,
    EmbedSettings,
    EvaluateSettings,
    LinearSettings,
    OVASettings,
    PredictSettings,
    TrainSettings,
    TreeSettings,
    candidate_changes,
    candidate_iterations,
    check_candidate,
)
from eagle_spark.settings.reference import reference
from eagle_spark.settings.sections import (
    MIML_METHODS,
    ExperimentSettings,
    MimlSettings,
    PipelineSettings,
    Settings,
)
from eagle_spark.settings.shared import (
    GROUP_CRITERIA,
    MIN_JVM_MIB,
    MIN_PYTHON_WORKER_MIB,
    PIPELINE_METHODS,
    X_ACCESS,
)

__all__ = [
    "Declared",
    "Section",
    "as_params",
    "camel",
    "check_declared",
    "declarations",
    "described",
    "from_params",
    "memory_mib",
    "range_text",
    "section",
    "section_key",
    "setting",
    "shown",
    "root",
    "reference",
    "GROUP_CRITERIA",
    "MIML_METHODS",
    "MIN_JVM_MIB",
    "MIN_PYTHON_WORKER_MIB",
    "PIPELINE_METHODS",
    "PREDICT_MIN_TASK_ROWS",
    "X_ACCESS",
    "AggregateSettings",
    "AssignSettings",
    "EmbedSettings",
    "EvaluateSettings",
    "ExperimentSettings",
    "IngestSettings",
    "LinearSettings",
    "MimlSettings",
    "OVASettings",
    "PipelineSettings",
    "PredictSettings",
    "Settings",
    "SparkSettings",
    "SynthSettings",
    "TrainSettings",
    "TreeSettings",
    "candidate_changes",
    "candidate_iterations",
    "check_candidate",
    "section_class",
    "section_name",
]
