"""A driver SIGKILLed mid-write leaves the previous output complete and readable (Parquet commit
and Delta version), and a rerun gives identical outputs."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _kill_group_when(proc: subprocess.Popen, ready, timeout: float = 300) -> None:
    """SIGKILL the process group `proc` leads (the driver's Python and its JVM) once ready()."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(
                f"the writer ended (exit {proc.returncode}) before it could be killed"
            )
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the write to start")
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


@pytest.fixture(scope="module")
def aggregated(spark, delicious, tmp_path_factory):
    """Delicious R-4 with EAGLE-0 embeddings (inputs of the assign stage)."""
    from eagle_spark.aggregation.aggregate import aggregate
    from eagle_spark.grlr.embedding import embed
    from eagle_spark.settings import AggregateSettings, EmbedSettings

    root = tmp_path_factory.mktemp("faults")
    agg, emb = str(root / "agg"), str(root / "emb")
    aggregate(spark, delicious, agg, AggregateSettings(group_size=4, seed=0))
    embed(spark, agg, emb, EmbedSettings(iterations=0))
    return root, agg, emb


def _rows(spark, folder: str) -> list[tuple]:
    return sorted(map(tuple, spark.read.parquet(folder).collect()))


@pytest.mark.slow
def test_driver_killed_while_committing_parquet_keeps_previous_output(spark, aggregated):
    from eagle_spark.assignment.assign import assign
    from eagle_spark.settings import AssignSettings

    root, agg, emb = aggregated
    out = root / "assigned"
    assign(spark, agg, str(out), AssignSettings(weighting="hard"), embeddings=emb)
    manifest_before = (out / "_manifest.json").read_bytes()
    rows_before = _rows(spark, str(out / "assignments"))

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eagle_spark",
            "assign",
            "--input",
            agg,
            "--embeddings",
            emb,
            "--output",
            str(out),
            "--overwrite",
            "--weighting",
            "hard",
            "--set",
            "spark.master=local[1]",
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    # the hidden sibling appears when the new output starts being written; kill once it has data
    _kill_group_when(
        proc,
        lambda: any(
            p.name.startswith(".assigned.tmp-") and any(p.rglob("*.parquet"))
            for p in root.iterdir()
        ),
    )
    assert (out / "_manifest.json").read_bytes() == manifest_before
    assert _rows(spark, str(out / "assignments")) == rows_before
    # a rerun replaces it with identical content
    assign(spark, agg, str(out), AssignSettings(weighting="hard"), embeddings=emb, overwrite=True)
    assert _rows(spark, str(out / "assignments")) == rows_before
    assert json.loads((out / "_manifest.json").read_text())["n_assignments"] == len(rows_before)


_SLOW_PUBLISH = textwrap.dedent("""
    import pathlib, sys, time
    import eagle_spark.io.delta as delta

    real = delta._parquet_batches
    marker = pathlib.Path(sys.argv[3])

    def slow(folder):
        reader = real(folder)
        def batches():
            for i, batch in enumerate(reader):
                yield batch
                if i == 0:
                    marker.touch()      # the write is under way: the test kills us now
                    time.sleep(120)
        import pyarrow as pa
        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    delta._parquet_batches = slow
    delta.publish_delta(None, sys.argv[1], sys.argv[2], writer="deltalake")
""")


@pytest.mark.slow
def test_driver_killed_mid_delta_write_keeps_previous_version(tmp_path):
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from eagle_spark.io.delta import publish_delta

    def source(folder: pathlib.Path, offset: int) -> str:
        folder.mkdir()
        for part in range(3):  # several 65,536-row batches, so the write has a middle
            ids = pa.array(
                range(offset + part * 100_000, offset + (part + 1) * 100_000), pa.int64()
            )
            pq.write_table(
                pa.table({"sample_id": ids, "score": pa.compute.cast(ids, pa.float32())}),
                folder / f"part-{part}.parquet",
            )
        return str(folder)

    v0_src, v1_src = source(tmp_path / "v0", 0), source(tmp_path / "v1", 10**6)
    table = str(tmp_path / "delta_table")
    assert publish_delta(None, v0_src, table, writer="deltalake")["version"] == 0
    v0 = DeltaTable(table).to_pyarrow_table().sort_by("sample_id")

    marker = tmp_path / "writing"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_PUBLISH, v1_src, table, str(marker)],
        start_new_session=True,
        cwd=ROOT,
    )
    _kill_group_when(proc, marker.exists, timeout=120)
    dt = DeltaTable(table)
    assert dt.version() == 0
    assert dt.to_pyarrow_table().sort_by("sample_id").equals(v0)

    # the rerun commits version 1 with exactly the new rows; version 0 is still readable
    assert publish_delta(None, v1_src, table, writer="deltalake") == {
        "table": table,
        "version": 1,
        "rows": 300_000,
        "writer": "deltalake",
    }
    v1 = DeltaTable(table).to_pyarrow_table().sort_by("sample_id")
    assert v1["sample_id"].to_pylist() == list(range(10**6, 10**6 + 300_000))
    assert DeltaTable(table, version=0).to_pyarrow_table().sort_by("sample_id").equals(v0)
