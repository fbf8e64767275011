"""How many of the pipeline's methods run side by side: the setting, the memory rule, and the
size of a folder it reads (FileSystem.size)."""

from __future__ import annotations

import pytest

from eagle_spark.io.fs import FileSystem


def test_size_of_a_file_and_of_a_folder_recursively(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.bin").write_bytes(b"abc")
    (tmp_path / "d" / "sub" / "b.bin").write_bytes(b"12345")
    fs = FileSystem()
    assert fs.size(str(tmp_path / "d" / "a.bin")) == 3
    assert fs.size(str(tmp_path / "d")) == 8
    assert fs.size(f"file://{tmp_path}/d") == 8
    with pytest.raises(FileNotFoundError, match="missing"):
        fs.size(str(tmp_path / "missing"))


@pytest.mark.parametrize(
    "setting, n_methods, available, expected",
    [
        (2, 3, 0, 2),  # the setting caps the count ...
        (5, 3, 0, 3),  # ... at most the methods
        (1, 3, 10**12, 1),  # one after another
        # rule: 100-byte dataset -> 20 x 100 = 2,000 bytes per method, half the available memory
        (0, 3, 12_000, 3),  # 6,000 // 2,000 = 3
        (0, 3, 9_000, 2),  # 4,500 // 2,000 = 2
        (0, 3, 3_000, 1),  # 1,500 // 2,000 = 0 -> at least one
        (0, 1, 10**12, 1),  # a single method
    ],
)
def test_methods_at_once_setting_and_memory_rule(
    spark, tmp_path, monkeypatch, setting, n_methods, available, expected
):
    import eagle_spark.classifiers.tree.units as units
    from eagle_spark.pipeline import CHAIN_MEMORY_PER_BYTE, METHODS_MEMORY_SHARE, methods_at_once

    assert (CHAIN_MEMORY_PER_BYTE, METHODS_MEMORY_SHARE) == (20, 0.5)  # the hand-worked cases' rule
    (tmp_path / "agg" / "X").mkdir(parents=True)
    (tmp_path / "agg" / "X" / "part.parquet").write_bytes(b"x" * 60)
    (tmp_path / "agg" / "_manifest.json").write_bytes(b"y" * 40)
    monkeypatch.setattr(units, "memory_available", lambda: available)
    assert methods_at_once(spark, setting, str(tmp_path / "agg"), n_methods) == expected


@pytest.mark.parametrize("where", ["cluster", "connect"])
def test_methods_at_once_is_one_off_a_classic_local_session(spark, tmp_path, monkeypatch, where):
    """A cluster's executors and a Connect server may be on other machines, whose memory this
    process does not see: the rule runs one method at a time there; the setting still caps."""
    import eagle_spark.classic as classic
    import eagle_spark.classifiers.tree.units as units
    from eagle_spark.pipeline import methods_at_once

    monkeypatch.setattr(units, "memory_available", lambda: 10**15)
    if where == "cluster":
        monkeypatch.setattr(classic, "is_local", lambda _: False)
    else:
        monkeypatch.setattr(classic, "is_connect", lambda _: True)
    (tmp_path / "agg").mkdir()
    assert methods_at_once(spark, 0, str(tmp_path / "agg"), 3) == 1
    assert methods_at_once(spark, 3, str(tmp_path / "agg"), 3) == 3
