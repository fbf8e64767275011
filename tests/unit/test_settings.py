"""Settings: YAML files, overrides, validation, and documented defaults equal to the code's."""

import dataclasses
import math
import os
import re
import subprocess
import sys
import typing

import pytest

from eagle_spark.errors import SettingsError
from eagle_spark.session import spark_conf
from eagle_spark.settings import (
    MIN_PYTHON_WORKER_MIB,
    Section,
    Settings,
    SparkSettings,
    declarations,
    memory_mib,
    shown,
)
from tests.conftest import ROOT


def test_defaults_and_yaml_round_trip(tmp_path):
    settings = Settings()
    path = tmp_path / "s.yaml"
    path.write_text(settings.to_yaml())
    assert Settings.load(str(path)) == settings


def test_overrides_typed():
    s = Settings.load(
        overrides=[
            "spark.master=local[2]",
            "spark.shuffle_partitions=3",
            "ingest.one_based=true",
            "spark.extra.spark.foo=bar",
            "tree.min_task_work=1e8",  # a string to PyYAML (YAML 1.1), a number to YAML 1.2
            "ova.min_task_work=.5e-1",
        ]
    )
    assert s.spark.master == "local[2]" and s.spark.shuffle_partitions == 3
    assert s.ingest.one_based is True and s.spark.extra == {"spark.foo": "bar"}
    assert s.tree.min_task_work == 1e8 and isinstance(s.tree.min_task_work, float)
    assert s.ova.min_task_work == 0.05


@pytest.mark.parametrize(
    "override, message",
    [
        ("spark.mastr=x", "unknown setting 'spark.mastr'"),
        ("sparky.master=x", "unknown setting 'sparky'"),
        ("spark.shuffle_partitions=two", "'spark.shuffle_partitions' must be an integer"),
        ("spark.shuffle_partitions=0", "spark.shuffle_partitions must be >= 1"),
        ("ingest.format=csv", "ingest.format must be xc or libsvm"),
        ("ingest.on_bad_line=ignore", "ingest.on_bad_line must be fail or skip"),
        ("ingest.one_based=1", "'ingest.one_based' must be true or false"),
        ("spark.extra.foo=bar", "must start with 'spark.'"),
        ("novalue", "must look like section.key=value"),
        ("tree.max_iter=0", "tree.max_iter must be >= 1, got 0"),
        ("tree.max_iter=2.5", "'tree.max_iter' must be an integer"),
        (
            "pipeline.methods=[eagle, eagel]",
            "pipeline.methods: must be baseline, eagle0, eagle_paper or eagle, got 'eagel'",
        ),
        ("aggregate.depth=25", "aggregate.depth must be in [0, 24], got 25"),
        ("embed.lr=-1", "embed.lr must be a finite number > 0, got -1.0"),
        ("embed.lr=1e", "'embed.lr' must be a number, got '1e'"),
        ("embed.lr=e8", "'embed.lr' must be a number, got 'e8'"),
        ("tree.min_task_work=-1e8", "tree.min_task_work must be a finite number >= 0, got -1"),
        ("ova.max_iter=2.5", "'ova.max_iter' must be an integer"),
        (
            "tree.matcher_C=0",
            "tree.matcher_C must be a finite number > 0 (or null), got 0.0",
        ),
        (
            "tree.matcher_max_iter=0",
            "tree.matcher_max_iter must be >= 1 (or null), got 0",
        ),
        ("tree.matcher_C_scale=depth", "tree.matcher_C_scale must be samples or none, got 'depth'"),
    ],
)
def test_bad_settings_rejected(override, message):
    with pytest.raises(SettingsError, match=re.escape(message)):
        Settings.load(overrides=[override])


def test_bad_files(tmp_path):
    with pytest.raises(SettingsError, match="No such file"):
        Settings.load(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(SettingsError, match="must hold a mapping"):
        Settings.load(str(bad))
    bad.write_text("spark: {master: [unclosed\n")
    with pytest.raises(SettingsError, match="not valid YAML"):
        Settings.load(str(bad))


SECTIONS = [typing.get_type_hints(Settings)[f.name] for f in dataclasses.fields(Settings)]


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_every_setting_is_declared_once_with_a_line_of_doc(cls):
    """Each field of each section is declared by setting(): one line of doc, and a generated
    docstring entry that gives the field's real default (so help() and the code agree)."""
    items = declarations(cls)
    assert [i.name for i in items] == [f.name for f in dataclasses.fields(cls)]
    for item in items:
        assert item.doc and "\n" not in item.doc and len(item.doc) <= 200, item.name
        entry = re.search(rf"\n {{8}}{item.name}: (.*?)(?=\n {{8}}\w+: |\s*\Z)", cls.__doc__, re.S)
        assert entry, f"{cls.__name__}.{item.name} is missing from the docstring"
        assert f"Default {shown(item.default)}." in " ".join(entry.group(1).split())


def test_shown_defaults_read_as_the_docs_write_them():
    assert [shown(v) for v in (None, True, "auto", ("a", "b"), {}, 0.1, 250_000)] == [
        "null",
        "true",
        "``auto``",
        "[a, b]",
        "empty",
        "0.1",
        "250000",
    ]


def test_a_field_without_a_declaration_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Bare(Section):
        x: int = 1

    with pytest.raises(TypeError, match="Bare.x is not declared with setting"):
        declarations(Bare)


def test_the_solver_settings_are_shared_by_both_classifiers():
    from eagle_spark.settings import LinearSettings, OVASettings, TreeSettings

    shared = [f.name for f in dataclasses.fields(LinearSettings)]
    assert "C" in shared and "tol" in shared and "x_access" in shared
    for cls in (TreeSettings, OVASettings):
        assert issubclass(cls, LinearSettings)
        assert [f.name for f in dataclasses.fields(cls)][: len(shared)] == shared


def test_conf_files_load():
    for name in ("local.yaml", "cluster.yaml"):
        Settings.load(str(ROOT / "conf" / name))


def test_spark_conf_loopback_and_python():
    conf = spark_conf(SparkSettings(python_worker_memory="2g", extra={"spark.x": "1"}))
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.executor.pyspark.memory"] == "2g"
    assert conf["spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"] == "system"
    assert not any(k.startswith("spark.executorEnv.") for k in spark_conf(SparkSettings()))
    assert conf["spark.x"] == "1"
    assert conf["spark.pyspark.python"]
    assert "spark.driver.host" not in spark_conf(SparkSettings(loopback=False))


@pytest.mark.parametrize(
    "master, jit, given, added",
    [
        ("local[*]", "auto", "", True),
        ("local[2]", "auto", "-XX:+UseSerialGC", True),
        ("local", "auto", "", True),
        ("spark://host:7077", "auto", "", False),  # a cluster's driver runs no tasks
        ("local-cluster[2,1,1024]", "auto", "", False),  # nor does local-cluster's
        ("spark://host:7077", "quick", "", True),
        ("local[2]", "full", "", False),
        ("local[2]", "auto", "-XX:TieredStopAtLevel=4", False),  # the user chose
        ("local[2]", "quick", "-XX:-TieredCompilation", False),
    ],
)
def test_driver_jit_options(master, jit, given, added):
    from eagle_spark.session import jit_options

    options = jit_options(SparkSettings(master=master, driver_jit=jit), given)
    expected = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
    assert options == (expected if added else [])


def test_driver_jit_keeps_the_users_code_cache_size():
    from eagle_spark.session import jit_options

    given = "-XX:ReservedCodeCacheSize=512m"
    assert jit_options(SparkSettings(master="local[2]"), given) == ["-XX:TieredStopAtLevel=1"]


def test_driver_jit_rejects_an_unknown_value():
    with pytest.raises(SettingsError, match="driver_jit"):
        SparkSettings(driver_jit="fast")


_JIT_SESSION = """
from eagle_spark.session import build_spark
from eagle_spark.settings import SparkSettings
spark = build_spark(SparkSettings(master="local[1]", class_archive="none",
                                  extra={"spark.ui.enabled": "false"}))
print(spark.conf.get("spark.driver.extraJavaOptions", ""))
spark.stop()
"""


def test_a_local_session_starts_its_jvm_with_the_quick_jit():
    """build_spark passes the options to the JVM it starts (its extraJavaOptions), in a process of
    its own: this test run's session was started with options of its own. (``full`` and the other
    cases add nothing: test_driver_jit_options.)"""
    done = subprocess.run(
        [sys.executable, "-c", _JIT_SESSION],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
    )


@pytest.mark.parametrize(
    "text, mib",
    [
        ("512m", 512),
        ("2g", 2048),
        ("2G", 2048),
        ("3gb", 3072),
        ("2048k", 2),
        ("1t", 1024 * 1024),
        ("700", 700),
    ],
)
def test_memory_mib_reads_spark_sizes(text, mib):
    assert memory_mib(text, "k") == mib


@pytest.mark.parametrize("text", ["", "1.5g", "-2g", "0g", "2x", "g"])
def test_memory_mib_rejects_what_spark_cannot_read(text):
    with pytest.raises(
        SettingsError, match=re.escape("setting 'spark.python_worker_memory' must be a size")
    ):
        SparkSettings(python_worker_memory=text)


def test_python_worker_memory_below_the_address_space_minimum_is_rejected():
    with pytest.raises(SettingsError, match=r"python_worker_memory=1g is below 2g: .*RLIMIT_AS"):
        SparkSettings(python_worker_memory="1g")
    with pytest.raises(SettingsError, match="below 2g"):
        SparkSettings(python_worker_memory="2047m")
    assert SparkSettings(python_worker_memory="2048m").python_worker_memory == "2048m"
    assert SparkSettings().python_worker_memory is None


_WORKER = """
import resource, sys
import numpy as np, pyarrow as pa
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]) << 20,) * 2)  # as pyspark's worker does
import scipy.sparse, sklearn.svm, pyspark.sql
import eagle_spark.assignment.assign, eagle_spark.classifiers.tree, eagle_spark.grlr.embedding
pa.table({"a": np.arange(1_000_000)[::-1].copy()}).sort_by("a")
data = np.empty(int(sys.argv[2]) << 20, dtype=np.uint8)
print("held", data.nbytes >> 20)
"""


@pytest.mark.parametrize("pool_env", [True, False])
def test_worker_at_the_minimum_cap_holds_its_data_only_with_the_system_pool(pool_env):
    """A Python worker under the smallest accepted cap (RLIMIT_AS, as Spark sets it) with the
    environment spark_conf gives the executors can hold (cap - 768 MiB) of data; with pyarrow's
    default pool (a 1 GiB reserve) the same allocation fails."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if pool_env:
        prefix = "spark.executorEnv."
        conf = spark_conf(SparkSettings(python_worker_memory=f"{MIN_PYTHON_WORKER_MIB}m"))
        env.update({k[len(prefix) :]: v for k, v in conf.items() if k.startswith(prefix)})
    data_mib = MIN_PYTHON_WORKER_MIB - 768
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, str(MIN_PYTHON_WORKER_MIB), str(data_mib)],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if pool_env:
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == ["held", str(data_mib)]
    else:
        assert done.returncode != 0 and "MemoryError" in done.stderr, (
            done.stdout + done.stderr[-2000:]
        )


def test_train_max_leaf_work_is_a_positive_setting_or_none():
    from eagle_spark.settings import TreeSettings

    assert TreeSettings().max_leaf_work == 250_000  # with max_split_shared 0.1
    assert Settings.load(None, ["tree.max_leaf_work=null"]).tree.max_leaf_work is None
    assert Settings.load(None, ["tree.max_leaf_work=5000"]).tree.max_leaf_work == 5000
    with pytest.raises(SettingsError, match="tree.max_leaf_work must be >= 1"):
        TreeSettings(max_leaf_work=0)


def test_train_max_split_shared_is_a_share_or_none():
    from eagle_spark.settings import TreeSettings

    assert TreeSettings().max_split_shared == 0.1  # delicious's leaves share more and stay whole
    assert Settings.load(None, ["tree.max_split_shared=null"]).tree.max_split_shared is None
    assert Settings.load(None, ["tree.max_split_shared=0.1"]).tree.max_split_shared == 0.1
    assert Settings.load(None, ["tree.max_split_shared=0"]).tree.max_split_shared == 0
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(
            SettingsError, match="tree.max_split_shared must be in \\[0, 1\\] \\(or null\\)"
        ):
            TreeSettings(max_split_shared=bad)


def test_train_tol_is_a_positive_setting():
    from eagle_spark.settings import TreeSettings

    assert TreeSettings().tol == 0.2  # twice liblinear's and Parabel's eps (docs/design.md)
    assert Settings.load(None, ["tree.tol=0.1"]).tree.tol == 0.1
    with pytest.raises(SettingsError, match="tree.tol must be a finite number > 0"):
        TreeSettings(tol=0.0)


def test_the_settings_reference_is_generated_from_the_declarations():
    """docs/settings.md is what the declarations generate (regenerate it with
    `python -m eagle_spark.ml.reference > docs/settings.md`)."""
    from eagle_spark.ml.reference import mirrored_params
    from eagle_spark.settings import reference

    assert mirrored_params()[("tree", "n_trees")] == [
        "LabelTreeClassifier.numTrees",
        "LabelTreeModel.numTrees",
    ]
    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert text == reference(mirrored_params()) + "\n", (
        "docs/settings.md is stale: python -m eagle_spark.ml.reference > docs/settings.md"
    )


def test_a_command_flag_is_generated_from_its_setting_and_overrides_it():
    import argparse

    from eagle_spark.commands import setting_flags, with_flags

    p = argparse.ArgumentParser()
    setting_flags(p, "embed", "iterations", "normalize")
    setting_flags(p, "tree", "max_leaf_work")
    help_text = p.format_help()
    assert "T, GRLR iterations (0 gives EAGLE-0's e0) (embed.iterations, default 20)" in " ".join(
        help_text.split()
    )
    base = Settings.load(overrides=["embed.iterations=7"])
    assert with_flags(base, p.parse_args([])) == base
    changed = with_flags(base, p.parse_args(["--iterations", "3", "--no-normalize"]))
    assert (changed.embed.iterations, changed.embed.normalize) == (3, False)
    assert with_flags(base, p.parse_args(["--max-leaf-work", "9"])).tree.max_leaf_work == 9
    with pytest.raises(SettingsError, match="embed.iterations must be >= 0"):
        with_flags(base, p.parse_args(["--iterations", "-1"]))


def test_one_declaration_makes_the_param_its_accessors_and_its_docs():
    """A new setting is one declaration: mirrored by an estimator, it is a Param with the
    declared name, doc and default, a getter, a setter, a constructor keyword, a docstring entry,
    and the round trip to the section."""
    from typing import Optional

    from eagle_spark.ml.base import SettingsParams
    from eagle_spark.settings import section, setting

    @section
    @dataclasses.dataclass(frozen=True)
    class ToySettings(Section):
        """A toy section."""

        beam_width: int = setting(7, "nodes kept per level.")
        cap: Optional[float] = setting(None, "an upper bound; null: none.", param="upperBound")

    class Toy(SettingsParams):
        """A toy estimator.

        Params:
            {params}
        """

        _mirrors = (ToySettings,)

        def __init__(self, **params):
            super().__init__()
            self._set_settings_defaults()
            self.setParams(**params)

    assert Toy._fields == {ToySettings: {"beamWidth": "beam_width", "upperBound": "cap"}}
    toy = Toy(beamWidth=9)
    assert (toy.getBeamWidth(), toy.getUpperBound()) == (9, None)
    assert toy.beamWidth.doc == "nodes kept per level."
    assert toy.setUpperBound(0.5).settings(ToySettings) == ToySettings(beam_width=9, cap=0.5)
    assert "beam_width: nodes kept per level. Default 7." in " ".join(ToySettings.__doc__.split())
    with pytest.raises(TypeError, match="beamWidth cannot be None"):
        Toy(beamWidth=None)


def test_dataset_methods_take_the_settings_by_their_param_names():
    import inspect

    from eagle_spark.ml import Dataset
    from eagle_spark.settings import AggregateSettings, as_params, from_params

    signature = inspect.signature(Dataset.aggregate).parameters
    assert signature["groupSize"].default == 4 and signature["onBadRow"].default == "fail"
    assert "numFeatures" in inspect.signature(Dataset.ingest).parameters
    assert "rowsPerTask" in inspect.signature(Dataset.synth).parameters
    assert "``groupSize`` (aggregate.group_size, 4)" in Dataset.aggregate.__doc__
    s = from_params(AggregateSettings, {"groupSize": 10, "onBadRow": "skip"}, "here")
    assert s == AggregateSettings(group_size=10, on_bad_row="skip")
    assert from_params(AggregateSettings, as_params(s), "here") == s
    with pytest.raises(TypeError, match="here got an unexpected keyword argument 'group_size'"):
        from_params(AggregateSettings, {"group_size": 10}, "here")


def test_the_miml_and_experiment_settings_are_sections(capsys):
    from eagle_spark.commands import COMMANDS, with_flags
    from eagle_spark.miml.training import NetConfig
    from eagle_spark.settings import MimlSettings

    s = Settings.load(overrides=["miml.group_size=50", "experiment.held_out=0.3"])
    assert (s.miml.group_size, s.experiment.held_out) == (50, 0.3)
    assert NetConfig() == NetConfig.of(MimlSettings())  # the network's defaults are the section's
    with pytest.raises(SettingsError, match="miml.mask_mix must be in"):
        NetConfig(mask_mix=1.5)
    with pytest.raises(SettingsError, match="experiment.criterion must be one of"):
        Settings.load(overrides=["experiment.criterion=median"])
    import argparse

    p = argparse.ArgumentParser()
    COMMANDS["miml"][1](p)
    args = p.parse_args(["--output", "x", "--methods", "eagle", "--tune-lr", "0.01", "0.001"])
    flagged = with_flags(s, args)
    assert (flagged.miml.methods, flagged.miml.tune_lr) == (("eagle",), (0.01, 0.001))
    assert (
        with_flags(s, p.parse_args(["--output", "x", "--no-centring"])).miml.centre_embeddings
        is False
    )
    from eagle_spark.cli import main

    assert main(["--print-defaults"]) == 0
    text = capsys.readouterr().out
    assert "\nmiml:\n" in text and "\nexperiment:\n" in text


def test_declared_ranges_are_checked_on_construction_and_become_flag_choices():
    """choices= and bounds= of a declaration are checked whenever a section is built (in Python
    too, not only from YAML) and give the command flags their choices."""
    import argparse

    from eagle_spark.commands import setting_flags
    from eagle_spark.settings import EmbedSettings, MimlSettings, TreeSettings

    with pytest.raises(SettingsError, match="tree.n_trees must be >= 1, got 0"):
        TreeSettings(n_trees=0)
    with pytest.raises(SettingsError, match="tree.n_trees must be an integer, got 2.5"):
        TreeSettings(n_trees=2.5)
    with pytest.raises(SettingsError, match="embed.prune_below must be in \\[0, 1\\), got 1.0"):
        EmbedSettings(prune_below=1.0)
    with pytest.raises(SettingsError, match="embed.lr must be a finite number > 0, got nan"):
        EmbedSettings(lr=float("nan"))
    with pytest.raises(SettingsError, match="miml.tune_lr: must be a finite number > 0, got 0.0"):
        MimlSettings(tune_lr=(0.1, 0.0))
    assert TreeSettings(matcher_C=None).matcher_C is None  # null where the type allows it
    p = argparse.ArgumentParser()
    setting_flags(p, "tree", "loss")
    with pytest.raises(SystemExit):
        p.parse_args(["--loss", "hinge"])
    assert p.parse_args(["--loss", "logistic"]).loss == "logistic"


def test_a_candidate_is_checked_against_the_settings_it_sets_naming_the_users_key(tmp_path):
    """``hard+r99`` parses, but sets assign.refine_rounds=99 outside [0, 10]: refused at load,
    naming assign.candidates (the key written), before any session (the CLI exits 2 in a process
    that never starts a JVM, and nothing is written)."""
    import subprocess
    import sys

    from eagle_spark.errors import SettingsError
    from eagle_spark.settings import AssignSettings, ExperimentSettings, Settings

    with pytest.raises(
        SettingsError,
        match=r"assign\.candidates: 'hard\+r99' sets assign\.refine_rounds, which must be in "
        r"\[0, 10\], got 99",
    ):
        Settings.load(None, ["assign.candidates=[baseline, hard+r99]"])
    with pytest.raises(SettingsError, match=r"experiment\.candidates: 'soft-0\.3\+r11'"):
        ExperimentSettings(candidates=("soft-0.3+r11",))
    assert AssignSettings(candidates=("hard+r10", "soft-0.3+r1")).candidates[0] == "hard+r10"
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "eagle_spark",
            "assign",
            "--input",
            str(tmp_path / "agg"),
            "--output",
            str(out),
            "--set",
            "assign.candidates=[hard+r99]",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "'hard+r99' sets assign.refine_rounds" in done.stderr.strip().splitlines()[-1]
    assert "SparkSession" not in done.stderr and not out.exists()


def test_the_settings_sections_share_one_declaration():
    """x_access, cache_budget, tasks and min_task_work have one shape wherever they appear: the
    same default, values and checks (a cache budget is checked as a Spark size by the declaration
    itself, in every section that has one)."""
    from eagle_spark.settings import (
        X_ACCESS,
        AssignSettings,
        EmbedSettings,
        LinearSettings,
        OVASettings,
        TreeSettings,
        declarations,
    )

    sections = (EmbedSettings, AssignSettings, TreeSettings, OVASettings)
    for cls in sections:
        by_name = {d.name: d for d in declarations(cls)}
        assert (by_name["x_access"].default, by_name["x_access"].choices) == ("auto", X_ACCESS)
        assert by_name["cache_budget"].default is None and by_name["cache_budget"].size
        assert (by_name["tasks"].default, by_name["tasks"].bounds) == (
            16,
            (1.0, True, math.inf, False),
        )
        key = cls.__name__.removesuffix("Settings").lower()
        with pytest.raises(
            SettingsError,
            match=re.escape(
                f"{key}.cache_budget must be a size such as 512m or 2g (or null), got 'lots'"
            ),
        ):
            cls(cache_budget="lots")
        assert cls(cache_budget="512m").cache_budget == "512m"
    for cls in (EmbedSettings, LinearSettings):
        work = {d.name: d for d in declarations(cls)}["min_task_work"]
        assert (work.param, work.bounds) == ("minTaskWork", (0.0, True, math.inf, False))


def test_the_accessors_stub_is_generated_and_type_checkers_see_it(tmp_path):
    """eagle_spark/ml/accessors.pyi is what the declarations generate (regenerate it with
    `python -m eagle_spark.ml.reference --accessors > eagle_spark/ml/accessors.pyi`), and mypy,
    reading it, types a generated getter from its setting and refuses a wrong setter argument."""
    from mypy import api

    from eagle_spark.ml.reference import accessors_source

    stub = (ROOT / "eagle_spark" / "ml" / "accessors.pyi").read_text(encoding="utf-8")
    assert stub == accessors_source(), (
        "eagle_spark/ml/accessors.pyi is stale: "
        "python -m eagle_spark.ml.reference --accessors > eagle_spark/ml/accessors.pyi"
    )
    use = tmp_path / "use.py"
    use.write_text(
        "from eagle_spark.ml import GRLR, LabelTreeClassifier\n"
        "reveal_type(LabelTreeClassifier().setNumTrees(2).getNumTrees())\n"
        "reveal_type(GRLR().getCacheBudget())\n"
        'LabelTreeClassifier().setNumTrees("two")\n'
    )
    out, _, status = api.run(
        [str(use), "--follow-imports=silent", "--ignore-missing-imports", "--no-incremental"]
    )
    assert status == 1, out
    assert 'use.py:2: note: Revealed type is "int"' in out
    assert 'use.py:3: note: Revealed type is "str | None"' in out
    assert 'Argument 1 to "setNumTrees" of "TreeParamsAccessors" has incompatible type "str"' in out
