"""The classifiers' join path (``tree.x_access`` / ``ova.x_access`` = ``joined``): each training
task receives its units' rows through a Spark join instead of the executor cache of X. The models
must be the cached path's, weight for weight (the cached path is itself twin-tested in test_tree.py
and test_ova.py); the needs of a bin are checked against plain-Python sets."""

import dataclasses
import json
import logging
import shutil

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from eagle_spark.classifiers.joined import ProportionalBlocks, load_y
from eagle_spark.classifiers.ova import _rows_of_block, train_ova
from eagle_spark.classifiers.tree import train_tree
from eagle_spark.settings import OVASettings
from tests.conftest import TASKS_PER_STAGE
from tests.unit.test_ova import (  # noqa: F401  (tiny: module fixture, 1500 delicious samples)
    drawn_twin,
    tiny,
)
from tests.unit.test_tree import PARAMS, tree_model  # noqa: F401  (the cached path's model)


def _rows(spark, folder):
    """Every row of a Parquet folder, sorted, lists as tuples."""
    return sorted(
        tuple(tuple(v) if isinstance(v, list) else v for v in r)
        for r in spark.read.parquet(folder).collect()
    )


def _same_model(spark, a, b, tables):
    for table in tables:
        assert _rows(spark, f"{a}/data/{table}") == _rows(spark, f"{b}/data/{table}"), table


def test_tree_joined_equals_cached(spark, tiny, tree_model, tmp_path):  # noqa: F811
    """PIFA summed through the join, the indexer on Y alone, every unit's rows joined: the same
    trees and the same weights as the cached path (3 trees, heavy leaves split further)."""
    path, meta = tree_model
    joined = str(tmp_path / "joined")
    got = train_tree(spark, tiny["train"], joined, dataclasses.replace(PARAMS, x_access="joined"))
    assert (meta["x_access"], got["x_access"]) == ("cached", "joined")
    assert got["n_clusters"] == meta["n_clusters"] and got["depth"] == meta["depth"]
    # the rankers' cost is chosen on the same held-out samples, from rows the join delivered
    assert got["ranker_C_held_out"] == meta["ranker_C_held_out"]
    assert got["ranker_C"] == meta["ranker_C"]
    _same_model(
        spark,
        path,
        joined,
        [f"{t}_{i}" for t in ("tree", "weights") for i in range(PARAMS.n_trees)],
    )
    assert not (tmp_path / "joined" / "_pifa").exists()  # the scratch PIFA is not left in the model


@pytest.mark.parametrize("fraction", [1.0, 0.3])
def test_ova_joined_equals_cached(spark, tiny, tmp_path, fraction):  # noqa: F811
    """All negatives (every block needs all rows) and a drawn 30% (a block needs its labels'
    positives and draws): the same weights as the cached path."""
    out = {}
    for mode in ("cached", "joined"):
        out[mode] = str(tmp_path / mode)
        meta = train_ova(
            spark,
            tiny["train"],
            out[mode],
            OVASettings(tasks=3, min_task_work=0, negative_fraction=fraction, x_access=mode),
        )
        assert meta["x_access"] == mode
    _same_model(spark, out["cached"], out["joined"], ["weights"])


def test_ova_block_needs_hand_checked(spark, tiny):  # noqa: F811
    """A block's needed rows with negative_fraction 0.02: its labels' positives and each label's own
    draw over all samples (test_ova.drawn_twin), rebuilt here with sets; a label without a positive
    needs no row (its classifier is constant), so a block of such labels alone needs none."""
    ids, Y = load_y(tiny["train"], 983)
    params = OVASettings(negative_fraction=0.02, seed=4)
    rows_of_bin = _rows_of_block(params, 983, 40)
    Yr = sp.csr_matrix(Y)
    empty = {k for k in range(983) if Y[:, k].nnz == 0}
    assert empty  # the blocks holding an empty label are checked below
    blocks = ProportionalBlocks(983, 40)
    holding_empty = {b for b in range(40) if any(k in empty for k in range(*blocks.labels(b)))}
    for b in (7, *holding_empty):
        lo, hi = blocks.labels(b)
        positives = {
            i
            for i in range(len(ids))
            for k in Yr.indices[Yr.indptr[i] : Yr.indptr[i + 1]]
            if lo <= k < hi
        }
        drawn = set()
        for k in range(lo, hi):
            if k not in empty:
                drawn |= set(drawn_twin(4, k, len(ids), 0.02))
        want = positives | drawn
        assert set(rows_of_bin(b, ids, Y).tolist()) == want
        assert 0 < len(positives) < len(want) < len(ids)


def test_auto_picks_joined_beyond_the_budget(spark, tiny, tmp_path, caplog):  # noqa: F811
    with caplog.at_level(logging.INFO, logger="eagle_spark.classifiers.joined"):
        big = train_ova(
            spark, tiny["train"], str(tmp_path / "a"), OVASettings(tasks=4, cache_budget="4g")
        )
        small = train_ova(
            spark, tiny["train"], str(tmp_path / "b"), OVASettings(tasks=4, cache_budget="1k")
        )
    assert (big["x_access"], small["x_access"]) == ("cached", "joined")
    # little work: the cached rows train in one task per core; the joined path keeps its 4 blocks
    # (a block's rows are its task's memory)
    parts = [len(list((tmp_path / m / "data" / "weights").glob("part-*"))) for m in ("a", "b")]
    assert parts == [TASKS_PER_STAGE, 4]
    assert (
        "ova: joined training rows (ova.x_access=auto: the executor cache of X needs ~0 MiB, "
        "the budget (ova.cache_budget) is 0 MiB)" in caplog.text
    )
    _same_model(spark, str(tmp_path / "a"), str(tmp_path / "b"), ["weights"])


def test_a_sample_of_y_without_features_is_named(spark, tiny, tmp_path):  # noqa: F811
    """Y has sample 5, X does not: the join path says so instead of training without it."""
    data = tmp_path / "holed"
    shutil.copytree(tiny["train"], data)
    table = pq.read_table(data / "X")
    shutil.rmtree(data / "X")
    (data / "X").mkdir()
    pq.write_table(table.filter(pc.not_equal(table["sample_id"], 5)), data / "X" / "part-0.parquet")
    # tables rewritten by another tool: no file list, a manifest that agrees with the new X
    (data / "_files.json").unlink()
    manifest = json.loads((data / "_manifest.json").read_text())
    manifest.pop("file_list")  # the other tool's manifest claims no file list
    (data / "_manifest.json").write_text(json.dumps({**manifest, "n_samples": table.num_rows - 1}))
    with pytest.raises(Exception, match="sample_id 5 of Y has no row in X"):
        train_ova(spark, str(data), str(tmp_path / "m"), OVASettings(tasks=2, x_access="joined"))
    assert not (tmp_path / "m").exists()
