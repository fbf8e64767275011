"""Settings: YAML files, overrides, validation, and documented defaults equal to the code's."""

import dataclasses
import re

import pytest

from eagle_spark.errors import SettingsError
from eagle_spark.params import IngestParams, Settings, SparkParams
from eagle_spark.session import spark_conf
from tests.conftest import ROOT


def test_defaults_and_yaml_round_trip(tmp_path):
    settings = Settings()
    path = tmp_path / "s.yaml"
    path.write_text(settings.to_yaml())
    assert Settings.load(str(path)) == settings


def test_overrides_typed():
    s = Settings.load(overrides=["spark.master=local[2]", "spark.shuffle_partitions=3",
                                 "ingest.one_based=true", "spark.extra.spark.foo=bar"])
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


@pytest.mark.parametrize("cls", [SparkParams, IngestParams])
def test_docstring_defaults_match_code(cls):
    """Each 'Default X.' in the Attributes section equals the field's real default."""
    doc = cls.__doc__
    for f in dataclasses.fields(cls):
        match = re.search(rf"\n\s+{f.name}: (.*?)(?=\n\s+\w+: |\Z)", doc, re.S)
        assert match, f"{cls.__name__}.{f.name} is not documented"
        default = re.search(r"Default ``?([^`.]*?)``?\.", " ".join(match.group(1).split()))
        if default is None:
            continue  # documented in words ("None infers ...")
        value = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        text = default.group(1)
        expected = {"true": True, "false": False, "None": None, "empty": {}}.get(text, text)
        assert str(value) == str(expected), f"{cls.__name__}.{f.name}: doc {text!r} != {value!r}"


def test_conf_files_load():
    for name in ("local.yaml", "cluster.yaml"):
        Settings.load(str(ROOT / "conf" / name))


def test_spark_conf_loopback_and_python():
    conf = spark_conf(SparkParams(python_worker_memory="1g", extra={"spark.x": "1"}))
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.executor.pyspark.memory"] == "1g"
    assert conf["spark.x"] == "1"
    assert conf["spark.pyspark.python"]
    assert "spark.driver.host" not in spark_conf(SparkParams(loopback=False))
