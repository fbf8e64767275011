"""Executor state held once per executor: one builder among concurrent workers, read-only maps,
sparse matrices over the mapped arrays without copies, and the Spark path's loaders on them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from eagle_spark import executor_state as ES
from tests.conftest import ROOT

WORKER = """
import json, os, sys, time
import numpy as np
from eagle_spark.executor_state import shared_arrays

def build():
    with open(os.path.join(sys.argv[1], "builds.log"), "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    time.sleep(1.0)  # the others must wait for this builder, not build too
    return {"v": np.arange(5, dtype=np.int64) * 3, "m": np.eye(2)}

a = shared_arrays("demo", ("k", 1), build)
print(json.dumps({"v": a["v"].tolist(), "m": a["m"].tolist(), "mapped": isinstance(a["v"], np.memmap),
                  "writeable": bool(a["v"].flags.writeable)}))
"""


def test_one_worker_builds_and_every_worker_maps(tmp_path):
    env = {**os.environ, "EAGLE_SPARK_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len((tmp_path / "builds.log").read_text().split()) == 1  # built once for four workers
    for out in outs:
        assert out == {
            "v": [0, 3, 6, 9, 12],
            "m": [[1.0, 0.0], [0.0, 1.0]],
            "mapped": True,
            "writeable": False,
        }


def test_sparse_matrices_are_views_of_the_mapped_arrays(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_SPARK_STATE_DIR", str(tmp_path))
    ES.forget()
    M = sp.random(50, 30, density=0.2, format="csr", random_state=0, dtype=np.float32)
    calls = []

    def build():
        calls.append(1)
        return ES.sparse_arrays(M, "M")

    a = ES.shared_arrays("demo", ("m", 1), build)
    csr = ES.sparse_from(a, "M")
    assert np.shares_memory(csr.data, a["M_data"]) and np.shares_memory(csr.indices, a["M_indices"])
    assert np.shares_memory(csr.indptr, a["M_indptr"])
    assert (csr != M).nnz == 0 and csr.dtype == np.float32
    csc = ES.sparse_from(ES.sparse_arrays(M.tocsc(), "C"), "C", "csc")
    assert (csc != M).nnz == 0
    with pytest.raises(ValueError, match="read-only"):
        csr.data[0] = 1.0
    assert ES.shared_arrays("demo", ("m", 1), build) is a and calls == [1]  # the process keeps it
    ES.forget("demo")
    assert ES.opened("demo") is None
    again = ES.shared_arrays("demo", ("m", 1), build)
    assert calls == [1] and np.array_equal(again["M_data"], a["M_data"])  # files reused, no rebuild
    ES.shared_arrays("demo", ("m", 2), lambda: {"x": np.zeros(1)})
    assert ES.opened("demo") == ("m", 2)  # a new key replaces the kind's entry


def test_a_failed_build_writes_nothing_and_can_be_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_SPARK_STATE_DIR", str(tmp_path))
    ES.forget()

    def broken():
        raise ValueError("sample_id 9 of Y1 is not in X")

    with pytest.raises(ValueError, match="sample_id 9"):
        ES.shared_arrays("demo", ("bad",), broken)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    assert ES.shared_arrays("demo", ("bad",), lambda: {"x": np.ones(2)})["x"].tolist() == [1.0, 1.0]


def test_a_generator_build_is_written_part_by_part(tmp_path, monkeypatch):
    """A build may yield (name, array) pairs: each is on disk before the next is made (so the
    builder holds one part), and a failure half-way leaves no folder behind."""
    monkeypatch.setenv("EAGLE_SPARK_STATE_DIR", str(tmp_path))
    ES.forget()
    seen = []

    def parts(fail_at=None):
        for t in range(3):
            if t == fail_at:
                raise ValueError(f"tree {t} is damaged")
            seen.append(sorted(p.name for p in tmp_path.glob("demo-*.tmp-*/*.npy")))
            yield f"w{t}", np.full(4, float(t))

    with pytest.raises(ValueError, match="tree 2 is damaged"):
        ES.shared_arrays("demo", ("g", 1), lambda: parts(fail_at=2))
    assert seen == [[], ["w0.npy"]]
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    seen.clear()
    a = ES.shared_arrays("demo", ("g", 1), parts)
    assert seen == [[], ["w0.npy"], ["w0.npy", "w1.npy"]]
    assert [a[f"w{t}"].tolist() for t in range(3)] == [[0.0] * 4, [1.0] * 4, [2.0] * 4]


def test_only_a_large_build_releases_the_heap(tmp_path, monkeypatch):
    """The builder collects garbage and returns pyarrow's freed buffers only after a state of at
    least RELEASE_HEAP_BYTES (counted over every array, a generator's parts included)."""
    monkeypatch.setenv("EAGLE_SPARK_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(ES, "RELEASE_HEAP_BYTES", 100)
    ES.forget()
    released = []
    monkeypatch.setattr(ES, "_release_heap", lambda: released.append(True))
    ES.shared_arrays("demo", ("small",), lambda: {"a": np.zeros(6), "b": np.zeros(6)})  # 96 bytes
    assert released == []
    ES.shared_arrays("demo", ("large",), lambda: iter([("a", np.zeros(6)), ("b", np.zeros(7))]))
    assert released == [True]  # 104 bytes


def test_training_data_equals_a_direct_read(spark, delicious, tmp_path, monkeypatch):
    """load_xy's mapped X and Y against an independent pyarrow + scipy reading of the tables."""
    import pyarrow.parquet as pq

    from eagle_spark.io.parts import load_xy

    monkeypatch.setenv("EAGLE_SPARK_STATE_DIR", str(tmp_path))
    ES.forget()
    ids, X, Y = load_xy(delicious, 500, 983, False)
    x = pq.read_table(f"{delicious}/X").sort_by("sample_id").to_pydict()
    y = dict(zip(*pq.read_table(f"{delicious}/Y").to_pydict().values()))
    rows = [
        (r, c, v)
        for r, (idx, val) in enumerate(zip(x["feat_idx"], x["feat_val"]))
        for c, v in zip(idx, val)
    ]
    want = sp.csr_matrix(
        ([v for _, _, v in rows], ([r for r, _, _ in rows], [c for _, c, _ in rows])),
        shape=(len(x["sample_id"]), 500),
        dtype=np.float32,
    )
    assert ids.tolist() == x["sample_id"] and (X != want).nnz == 0
    assert all(
        sorted(Y.getrow(i).indices.tolist()) == sorted(y[s])
        for i, s in enumerate(x["sample_id"][:200])
    )
    assert not X.data.flags.writeable and not Y.indices.flags.writeable  # mapped, read-only


def test_executor_lock_excludes_other_holders(tmp_path, monkeypatch):
    """One holder at a time: a second open of the lock (another worker) fails without waiting
    while the first holds it, and gets it once the first block has ended; names are file names."""
    monkeypatch.setenv("EAGLE_SPARK_STATE_DIR", str(tmp_path))
    with ES.executor_lock("unit") as first:
        assert first is True
        with ES.executor_lock("unit", wait=False) as second:
            assert second is False
        with ES.executor_lock("other", wait=False) as other:  # another name is another lock
            assert other is True
    with ES.executor_lock("unit", wait=False) as again:
        assert again is True
    assert (tmp_path / "unit.lock").exists()
    with pytest.raises(ValueError, match="executor lock name must be letters, digits"):
        with ES.executor_lock("../x"):
            pass
