"""Settings: YAML files, overrides, validation, and documented defaults equal to the code's."""

import dataclasses
import os
import re
import subprocess
import sys
import typing

import pytest

from eagle_spark.errors import SettingsError
from eagle_spark.params import MIN_PYTHON_WORKER_MIB, BaseParams, Settings, SparkParams, memory_mib
from eagle_spark.session import spark_conf
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
        ]
    )
    assert s.spark.master == "local[2]" and s.spark.shuffle_partitions == 3
    assert s.ingest.one_based is True and s.spark.extra == {"spark.foo": "bar"}


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
        ("tree.max_iter=0", "tree.max_iter must be an integer >= 1, got 0"),
        ("ova.max_iter=2.5", "'ova.max_iter' must be an integer"),
        (
            "tree.matcher_C=0",
            "tree.matcher_C must be a finite number > 0 (or null for tree.C), got 0",
        ),
        (
            "tree.matcher_max_iter=0",
            "tree.matcher_max_iter must be an integer >= 1 (or null for tree.max_iter), got 0",
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
_DEFAULT = re.compile(r"Default\s+(``[^`]*``|[-\w.,\[\]*+]+?)(?=[.,:;]?(?:\s|$)|\s\()")


def _documented(text: str):
    """The value a docstring's 'Default X' names: ``x`` a string, true/false, None/null, empty, or a
    number (thousands separated by commas)."""
    if text.startswith("``"):
        return text.strip("`")
    if text.startswith("[") and text.endswith("]"):  # a list: [a,b,c] (no spaces)
        return [_documented(item) for item in text[1:-1].split(",")]
    words = {"true": True, "false": False, "None": None, "null": None, "empty": {}}
    if text in words:
        return words[text]
    if not re.fullmatch(r"[-+\d.,e]+|inf", text):  # a bare word (a list's item)
        return text
    number = text.replace(",", "")
    try:
        return int(number)
    except ValueError:
        return float(number)


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_docstring_defaults_match_code(cls):
    """Each field's 'Default X' in the Attributes section equals the field's real default (every
    section, every field: a field without a stated default fails)."""
    doc = cls.__doc__
    names = "|".join(f.name for f in dataclasses.fields(cls))
    for f in dataclasses.fields(cls):
        match = re.search(rf"\n\s+{f.name}: (.*?)(?=\n\s+(?:{names}): |\Z)", doc, re.S)
        assert match, f"{cls.__name__}.{f.name} is not documented"
        default = _DEFAULT.search(" ".join(match.group(1).split()))
        assert default, f"{cls.__name__}.{f.name}: no 'Default ...' in its documentation"
        value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if isinstance(value, BaseParams):
            continue  # a nested section: checked as a section of its own
        expected = _documented(default.group(1))
        if isinstance(value, tuple):
            value = list(value) if len(value) != 1 else value[0]
        assert (
            value == expected
            and type(value) is type(expected)
            or (isinstance(value, float) and value == expected)
        ), f"{cls.__name__}.{f.name}: documented {default.group(1)!r}, code {value!r}"


def test_docstring_default_parser_reads_what_the_docs_write():
    found = [
        _documented(_DEFAULT.search(t).group(1))
        for t in (
            "Default 0.1.",
            "Default 1,000,000 (docs/design.md).",
            "Default ``local[*]``.",
            "Default 0.2, twice liblinear's",
            "Default None: the fewest",
            "Default null.",
            "Default true.",
            "Default [baseline,hard,soft-0.3].",
        )
    ]
    assert found == [
        0.1,
        1_000_000,
        "local[*]",
        0.2,
        None,
        None,
        True,
        ["baseline", "hard", "soft-0.3"],
    ]


def test_conf_files_load():
    for name in ("local.yaml", "cluster.yaml"):
        Settings.load(str(ROOT / "conf" / name))


def test_spark_conf_loopback_and_python():
    conf = spark_conf(SparkParams(python_worker_memory="2g", extra={"spark.x": "1"}))
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.executor.pyspark.memory"] == "2g"
    assert conf["spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"] == "system"
    assert not any(k.startswith("spark.executorEnv.") for k in spark_conf(SparkParams()))
    assert conf["spark.x"] == "1"
    assert conf["spark.pyspark.python"]
    assert "spark.driver.host" not in spark_conf(SparkParams(loopback=False))


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
        SparkParams(python_worker_memory=text)


def test_python_worker_memory_below_the_address_space_minimum_is_rejected():
    with pytest.raises(SettingsError, match=r"python_worker_memory=1g is below 2g: .*RLIMIT_AS"):
        SparkParams(python_worker_memory="1g")
    with pytest.raises(SettingsError, match="below 2g"):
        SparkParams(python_worker_memory="2047m")
    assert SparkParams(python_worker_memory="2048m").python_worker_memory == "2048m"
    assert SparkParams().python_worker_memory is None


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
        conf = spark_conf(SparkParams(python_worker_memory=f"{MIN_PYTHON_WORKER_MIB}m"))
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
    from eagle_spark.params import TreeParams

    assert TreeParams().max_leaf_work == 250_000  # with max_split_shared 0.1
    assert Settings.load(None, ["tree.max_leaf_work=null"]).tree.max_leaf_work is None
    assert Settings.load(None, ["tree.max_leaf_work=5000"]).tree.max_leaf_work == 5000
    with pytest.raises(SettingsError, match="tree.max_leaf_work must be >= 1"):
        TreeParams(max_leaf_work=0)


def test_train_max_split_shared_is_a_share_or_none():
    from eagle_spark.params import TreeParams

    assert TreeParams().max_split_shared == 0.1  # delicious's leaves share more and stay whole
    assert Settings.load(None, ["tree.max_split_shared=null"]).tree.max_split_shared is None
    assert Settings.load(None, ["tree.max_split_shared=0.1"]).tree.max_split_shared == 0.1
    assert Settings.load(None, ["tree.max_split_shared=0"]).tree.max_split_shared == 0
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(
            SettingsError, match="tree.max_split_shared must be a number in \\[0, 1\\]"
        ):
            TreeParams(max_split_shared=bad)


def test_train_tol_is_a_positive_setting():
    from eagle_spark.params import TreeParams

    assert TreeParams().tol == 0.2  # twice liblinear's and Parabel's eps (docs/design.md)
    assert Settings.load(None, ["tree.tol=0.1"]).tree.tol == 0.1
    with pytest.raises(SettingsError, match="tree.tol must be a finite number > 0"):
        TreeParams(tol=0.0)
