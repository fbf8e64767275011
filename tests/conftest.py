"""Shared fixtures: one local Spark session for the whole run, paths to the shared real data."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib

import pytest

from eagle_spark.session import build_spark
from eagle_spark.settings import SparkSettings

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

# Settings for a fast test session (measured: ~3.5 s to start): small partition counts, no UI,
# in-memory catalog, no whole-stage code generation (tests run many small queries on small data,
# where compiling each query's code costs more than it saves: tests/api/test_api.py 97 s against
# 106 s, tests/cli/test_pipeline.py 93 s against 92 s; turning expression code generation off
# too, spark.sql.codegen.factoryMode=NO_CODEGEN, made test_pipeline.py 109 s), and room for the
# JVM's compiled code: with TieredStopAtLevel=1 its code cache is 48 MB (240 MB by default), a test
# process's Spark compiles up to 64 MB, and the JVM swept and recompiled all along
# (tests/unit/test_weighted_assignment.py: the JVM's CPU 92 s against 73 s with the cache at
# 512 MB, reserved address space, and no flushing; its sweeper thread 5.7 s against 0.2 s, its
# compiler 10.6 s against 6.3 s). Tasks per stage (shuffle partitions and default parallelism):
# the session's CORES shared by the pytest processes (PYTEST_XDIST_WORKER_COUNT); under the
# README's command, a process per core, a session that also planned two tasks per stage ran four on
# two cores (one session, 563 tests: 429 s with 2 and 2, 409 s with 2 shuffle partitions and
# parallelism 1, 400 s with 1 and 2, 344, 388 and 387 s with 1 and 1); a single process (the slow
# suite) plans 2. Tests of work spread over several tasks ask for them (``tasks=``,
# :func:`shuffle_partitions`). The product keeps Spark's defaults; the slow suite's main job and
# commands run in processes of their own.
CORES = 2  # the test session's local[N]
TASKS_PER_STAGE = max(1, CORES // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
TEST_SPARK = SparkSettings(
    master=f"local[{CORES}]",
    app_name="eagle-spark-tests",
    driver_memory="3g",
    shuffle_partitions=TASKS_PER_STAGE,
    arrow_batch_rows=1000,
    extra={
        "spark.default.parallelism": str(TASKS_PER_STAGE),
        "spark.ui.enabled": "false",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.codegen.wholeStage": "false",
        "spark.driver.extraJavaOptions": (
            "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
            " -XX:-UseCodeCacheFlushing -XX:ReservedCodeCacheSize=512m"
        ),
    },
)


REMOTE_ENV = "EAGLE_SPARK_TEST_REMOTE"
"""When set (e.g. ``local[2]``), the session is a Spark Connect session on that URL
(``spark.remote``): tests/api/test_connect.py runs the API tests so, in a process of their own."""


@pytest.fixture(scope="session")
def spark():
    remote = os.environ.get(REMOTE_ENV)
    session = build_spark(dataclasses.replace(TEST_SPARK, remote=remote) if remote else TEST_SPARK)
    yield session
    session.stop()


@contextlib.contextmanager
def shuffle_partitions(spark, n: int):
    """Run the block with ``spark.sql.shuffle.partitions`` = `n` (the test session's is 1 under
    pytest-xdist on 2 cores): a test of work spread over a shuffle's partitions asks for several;
    the setting is restored."""
    old = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", old)


def shared_file(*parts: str) -> pathlib.Path:
    """A file under ../shared/data, or skip the test with the reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data {path} is absent (../shared/data is not beside the checkout)")
    return path


@pytest.fixture
def write_text(tmp_path):
    """Write a small text file (optionally gzip) under tmp_path and return its path as str."""
    import gzip

    def _write(name: str, text: str) -> str:
        path = tmp_path / name
        if name.endswith(".gz"):
            with gzip.open(path, "wt") as fh:
                fh.write(text)
        else:
            path.write_text(text)
        return str(path)

    return _write


os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)


@pytest.fixture(scope="session")
def delicious(spark, tmp_path_factory):
    """The embedded Delicious train file, ingested once per test run (dataset path)."""
    from eagle_spark.data import embedded_path
    from eagle_spark.io.ingest import ingest
    from eagle_spark.settings import IngestSettings

    out = str(tmp_path_factory.mktemp("embedded") / "delicious")
    ingest(spark, embedded_path("delicious", "train"), out, IngestSettings())
    return out


def dataset_matrices(spark, dataset):
    """(sample_ids, X csr, Y csr, manifest) of a dataset, rows in sample_id order (tests only)."""
    import numpy as np
    import scipy.sparse as sp

    from eagle_spark.io.tables import read_manifest, read_table

    manifest = read_manifest(spark, dataset)
    xr = sorted(read_table(spark, dataset, "X").collect(), key=lambda r: r.sample_id)
    yr = {r.sample_id: r.label_ids for r in read_table(spark, dataset, "Y").collect()}
    ids = np.array([r.sample_id for r in xr])
    X = sp.csr_matrix(
        (
            np.concatenate([r.feat_val for r in xr]).astype(np.float32),
            np.concatenate([r.feat_idx for r in xr]).astype(np.int64),
            np.concatenate([[0], np.cumsum([len(r.feat_idx) for r in xr])]),
        ),
        shape=(len(xr), manifest["n_features"]),
    )
    labels = [yr[i] for i in ids]
    Y = sp.csr_matrix(
        (
            np.ones(sum(map(len, labels)), dtype=np.float32),
            np.concatenate([np.array(l, dtype=np.int64) for l in labels]),
            np.concatenate([[0], np.cumsum([len(l) for l in labels])]),
        ),
        shape=(len(xr), manifest["n_labels"]),
    )
    return ids, X, Y, manifest


def delicious_slice(folder, split: str, n: int) -> str:
    """Write the first `n` samples of the embedded delicious `split` as an XC file in `folder`;
    returns its path."""
    import gzip

    from eagle_spark.data import embedded_path

    with gzip.open(embedded_path("delicious", split), "rt") as fh:
        next(fh)
        lines = [next(fh) for _ in range(n)]
    path = pathlib.Path(folder) / f"{split}.txt"
    path.write_text(f"{n} 500 983\n" + "".join(lines))
    return str(path)


def last_line_of(
    args: list[str], cwd, env: dict | None, timeout: float, python: str | None = None
) -> str:
    """Run a Python process (`args` after the interpreter: `python`, default this one; `env`
    None inherits this process's), require exit 0 (else fail with the end of its stderr) and
    return the last line it printed (tests that run a script or a command in a process of its
    own)."""
    import subprocess
    import sys

    done = subprocess.run(
        [python or sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout.strip().splitlines()[-1]
