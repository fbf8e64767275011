"""Label tree: Spark training == single-node twin; beam search == exhaustive search with a wide beam;
save -> load -> predict; determinism; bad inputs."""

import hashlib
import os
import pathlib

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from eagle_spark.classifiers import predict as predict_module
from eagle_spark.classifiers.predict import split_for_prediction
from eagle_spark.classifiers.tree import (
    beam_search,
    build_tree,
    deal,
    ensemble_search,
    index_trees,
    load_model,
    path_probability,
    pifa,
    predict_tree,
    rows_with,
    top_levels_for,
    train_tree,
    tree_shape,
)
from eagle_spark.cli import main
from eagle_spark.errors import BadInputError
from eagle_spark.io.ingest import ingest
from eagle_spark.io.parts import load_xy
from eagle_spark.io.tables import read_table
from eagle_spark.settings import IngestSettings, TreeSettings
from eagle_spark.sparse import compact_columns
from tests.conftest import TASKS_PER_STAGE
from tests.unit.test_ova import tiny  # noqa: F401  (module fixture: 1500 delicious samples)

# max_leaf_work 20000 without the split rule (max_split_shared None): 6 of the 32 leaves of tree 0
# (positives x labels up to 30,194) are split further, so the module's model has nodes below the
# shape's leaves and leaves at several depths
PARAMS = TreeSettings(
    max_leaf=40, tasks=3, min_task_work=0, max_leaf_work=20000, max_split_shared=None
)


@pytest.fixture(scope="module")
def tree_model(spark, tiny, tmp_path_factory):  # noqa: F811
    path = str(tmp_path_factory.mktemp("tree") / "m")
    meta = train_tree(spark, tiny["train"], path, PARAMS)
    return path, meta


def test_tree_structure():
    import scipy.sparse as sp

    reps = sp.csr_matrix(np.random.default_rng(0).random((50, 8)))
    tree = build_tree(reps, max_leaf=6, seed=0)
    leaves = [n for n in range(tree.n_clusters) if tree.is_leaf_cluster(n)]
    sizes = [len(tree.children_of(n)) for n in leaves]
    assert max(sizes) <= 6 and sum(sizes) == 50
    assert sorted(np.concatenate(tree.labels_under()[0:1])) == list(range(50))
    with pytest.raises(ValueError, match="max_leaf must be >= 2"):
        build_tree(reps, 1, 0)


def test_tree_shape_hand_worked():
    # 10 labels, <= 3 per leaf: 10 -> 5 + 5 (nodes 1, 2); depth first from the last pushed:
    # node 2 -> 3 + 2 (nodes 3, 4), then node 1 -> 3 + 2 (nodes 5, 6)
    shape = tree_shape(10, 3)
    assert shape.parent.tolist() == [-1, 0, 0, 2, 2, 1, 1]
    assert shape.size.tolist() == [10, 5, 5, 3, 2, 3, 2]
    assert shape.level.tolist() == [0, 1, 1, 2, 2, 2, 2]
    assert shape.kids.tolist() == [[1, 2], [5, 6], [3, 4], [-1, -1], [-1, -1], [-1, -1], [-1, -1]]
    assert tree_shape(3, 3).parent.tolist() == [-1]
    with pytest.raises(ValueError, match="max_leaf must be >= 2"):
        tree_shape(10, 1)


def test_tree_from_leaves_numbers_nodes_below_shape_leaves():
    # tree_shape(10, 3): parent [-1, 0, 0, 2, 2, 1, 1], leaves 3 (3 labels), 4, 5 (3 labels), 6.
    # Leaf 3 split into "0" = {0} and "1", itself split into "10" = {1}, "11" = {2}; leaf 5 into
    # "0" = {5, 6} and "1" = {7}. New ids in (node, path) order: (3, "0") 7, (3, "1") 8,
    # (3, "10") 9, (3, "11") 10, (5, "0") 11, (5, "1") 12; labels follow as elements 13..22.
    from eagle_spark.classifiers.tree import tree_from_leaves

    shape = tree_shape(10, 3)
    leaves = [
        (5, "1", np.array([7])),
        (3, "11", np.array([2])),
        (4, "", np.array([3, 4])),
        (3, "0", np.array([0])),
        (6, "", np.array([8, 9])),
        (5, "0", np.array([5, 6])),
        (3, "10", np.array([1])),
    ]
    tree = tree_from_leaves(shape, leaves, 10)
    assert tree.n_clusters == 13
    assert tree.parent.tolist() == (
        [-1, 0, 0, 2, 2, 1, 1] + [3, 3, 8, 8, 5, 5] + [7, 9, 10, 4, 4, 11, 11, 12, 6, 6]
    )
    assert tree.level.tolist() == [0, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4, 3, 3] + [
        4,
        5,
        5,
        3,
        3,
        4,
        4,
        4,
        3,
        3,
    ]
    assert tree_from_leaves(shape, leaves[::-1], 10).parent.tolist() == tree.parent.tolist()
    with pytest.raises(ValueError, match="node 2 is not a leaf"):
        tree_from_leaves(shape, leaves + [(2, "0", np.array([3]))], 10)
    with pytest.raises(ValueError, match="label 2 is in no leaf"):
        tree_from_leaves(shape, [leaf for leaf in leaves if leaf[1] != "11"], 10)


def test_label_representations_normalised_in_place_equal_the_copying_normaliser():
    """l2_normalize_rows_in_place (the label representations' normaliser: no copies of a matrix of
    hundreds of millions of values) gives the same float64 values bit for bit whatever the block
    of rows (l2_normalize_rows: one block, on a copy), and unit rows against a dense numpy twin;
    empty and all-zero rows stay 0."""
    from eagle_spark.sparse import l2_normalize_rows, l2_normalize_rows_in_place

    rng = np.random.default_rng(3)
    M = sp.random(300, 90, density=0.1, format="csr", dtype=np.float64, random_state=4)
    M = sp.csr_matrix(M.multiply(rng.normal(size=(1, 90))))  # signed values
    M = sp.csr_matrix(sp.diags((np.arange(300) % 11 != 0).astype(float)) @ M)  # empty rows
    M.eliminate_zeros()
    M.data[M.indptr[7] : M.indptr[8]] = 0.0  # a row of stored zeros
    assert np.diff(M.indptr).min() == 0  # and some rows with nothing stored
    want = l2_normalize_rows(M, np.float64)
    dense = M.toarray()
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    twin = np.divide(dense, norms, out=np.zeros_like(dense), where=norms > 0)
    for block in (1, 5, 64, 10**9):
        got = l2_normalize_rows_in_place(M.copy(), block)
        assert np.array_equal(got.data, want.data)
        assert np.array_equal(got.indices, want.indices)
        assert np.array_equal(got.indptr, want.indptr)
        np.testing.assert_allclose(got.toarray(), twin, rtol=1e-12, atol=0)
    owned = M.copy()
    assert l2_normalize_rows_in_place(owned) is owned  # in place: the same arrays
    with pytest.raises(ValueError, match="float CSR"):
        l2_normalize_rows_in_place(sp.csc_matrix(M))
    with pytest.raises(ValueError, match="block_nonzeros"):
        l2_normalize_rows_in_place(M.copy(), 0)


def test_heavy_leaves_are_split_until_within_budget(tiny):  # noqa: F811
    """max_leaf_work: every leaf with >= 4 labels has positives x labels within the budget, none
    has more than max_leaf labels; without it the leaves are the shape's (Parabel's)."""
    _, X, Y = load_xy(tiny["train"], 500, 983, True)
    reps = pifa(X, Y)
    plain = build_tree(reps, 40, 0)
    assert plain.n_clusters == len(tree_shape(983, 40).parent) == 63
    for budget in (20000, 5000):
        tree = build_tree(reps, 40, 0, Y=Y, max_leaf_work=budget)
        under = tree.labels_under()
        leaves = [n for n in range(tree.n_clusters) if tree.is_leaf_cluster(n)]
        assert (
            sum(len(under[n]) for n in leaves) == 983 and max(len(under[n]) for n in leaves) <= 40
        )
        for n in leaves:
            assert len(under[n]) < 4 or len(rows_with(Y, under[n])) * len(under[n]) <= budget
        assert tree.n_clusters > 63 and tree.level.max() > plain.level.max()
        # the shape's leaves that were within the budget keep their labels
        kept = [n for n in range(63) if plain.is_leaf_cluster(n) and tree.is_leaf_cluster(n)]
        assert kept and all(np.array_equal(under[n], plain.labels_under()[n]) for n in kept)
    with pytest.raises(ValueError, match="max_leaf_work needs Y"):
        build_tree(reps, 40, 0, max_leaf_work=5000)


def test_split_pays_hand_worked():
    """Samples s0..s5 with labels {0}, {1}, {2}, {3}, {0, 2}, {1, 3}; a leaf of labels 0-3 split
    into {0, 1} / {2, 3}: all 6 samples are under the leaf, 4 under each half, so 4 + 4 - 6 = 2 of
    the 6 (a share of 1/3) are under both halves."""
    from eagle_spark.classifiers.tree import LeafWork
    from eagle_spark.classifiers.tree.structure import split_pays

    rows, cols = [0, 1, 2, 3, 4, 4, 5, 5], [0, 1, 2, 3, 0, 2, 1, 3]
    Y = sp.csc_matrix((np.ones(8, np.float32), (rows, cols)), shape=(6, 4))
    labels, to_right = np.arange(4, dtype=np.int64), np.array([False, False, True, True])
    freq = np.asarray(Y.sum(axis=0)).ravel().astype(np.int64)
    assert not split_pays(LeafWork(1, freq, Y, 0.3), labels, to_right)
    assert split_pays(LeafWork(1, freq, Y, 0.34), labels, to_right)
    assert split_pays(
        LeafWork(1, freq, lambda: Y, 1 / 3), labels, to_right
    )  # Y on demand; <= keeps
    assert split_pays(LeafWork(1, freq, Y), labels, to_right) and split_pays(None, labels, to_right)
    # {0, 2} / {1, 3}: s4 and s5 lie wholly in one half, no sample is under both
    assert split_pays(LeafWork(1, freq, Y, 0.0), labels, np.array([False, True, False, True]))


def test_deal_balances_bins():
    # heaviest first to the least loaded bin: 5 -> b0, 4 -> b1, 3 -> b1 (7), 3 -> b0 (8), 3 -> b1
    assert deal(np.array([5, 4, 3, 3, 3]), 2) == [[0, 3], [1, 2, 4]]  # loads 8 / 10
    assert deal(np.array([1.0]), 3) == [[0], [], []]


def test_tasks_for_work_hand_worked():
    from eagle_spark.tasks import tasks_for_work

    # delicious' Baseline tree: 93 units, 6.06e8 of work, 2 cores: ceil(6.06) = 7, rounded up to
    # a multiple of the cores, 8 tasks of 16
    assert tasks_for_work(16, 1e8, 93, 6.06e8, 2) == 8
    assert tasks_for_work(16, 1e8, 93, 6.06e8, 3) == 9
    assert tasks_for_work(16, 1e8, 93, 6.06e8, 1) == 7
    assert tasks_for_work(16, 1e8, 93, 3e7, 2) == 2  # little work: still a task per core
    assert tasks_for_work(16, 1e8, 93, 3e7, 1) == 1
    assert tasks_for_work(16, 1e8, 93, 5e10, 2) == 16  # much work: `tasks` bounds it
    assert tasks_for_work(16, 0, 93, 3e7, 2) == 16  # min_task_work 0: always `tasks`
    assert tasks_for_work(16, 1e8, 3, 5e10, 8) == 3  # no more tasks than units
    assert tasks_for_work(16, 1e8, 0, 0.0, 2) == 1  # nothing to train: one task
    assert tasks_for_work(4, 1e8, 93, 3e7, 8) == 4  # the cores never exceed `tasks`
    assert tasks_for_work(16, 1e8, 93, 15.5e8, 2) == 16  # 16 needed, a multiple of the cores
    assert tasks_for_work(15, 1e8, 93, 15.5e8, 2) == 15  # the rounding stays within `tasks`


def test_place_units_keeps_heavy_units_in_the_first_bins():
    from eagle_spark.classifiers.tree.training import place_units

    work = np.array([9.0, 1.0, 8.0, 2.0, 7.0, 3.0])
    heavy = np.array([True, False, True, False, True, False])
    # one executor: the heavy units 0, 2, 4 in bin 0 (heaviest first); the light ones dealt over
    # bins 1, 2 (3 -> b1, 2 -> b2, 1 -> b2: loads 3 / 3)
    assert place_units(work, heavy, 3, 1) == [[0, 2, 4], [5], [3, 1]]
    # two executors: heavy 9 -> b0, 8 -> b1, then 7 to the less loaded b1 (8 < 9)
    assert place_units(work, heavy, 4, 2) == [[0], [2, 4], [5], [3, 1]]
    # unknown executors, no heavy unit, or one bin: dealt over every bin as deal() does
    assert place_units(work, heavy, 3, 0) == deal(work, 3)
    assert place_units(work, np.zeros(6, bool), 3, 1) == deal(work, 3)
    assert place_units(work, heavy, 1, 1) == [[0, 2, 4, 5, 3, 1]]
    assert place_units(work, np.ones(6, bool), 3, 1) == deal(work, 3)


def test_nonzeros_under_counts_each_row_once_as_a_dense_twin():
    """nonzeros_under (a scatter, no sort) == a dense twin: the nonzeros of X's rows having any
    label under the node, a row with several such labels once; every row for the root; a node
    whose labels have no positive 0."""
    from eagle_spark.classifiers.tree.training import nonzeros_under

    rng = np.random.default_rng(3)
    n, L = 300, 40
    Yd = rng.random((n, L)) < 0.08  # most rows with several labels
    Yd[:, 7] = False  # a label without positives
    row_nnz = rng.integers(0, 9, size=n)
    under = [np.arange(L), np.arange(0, 20), np.array([3, 4, 5, 11]), np.array([7]), np.array([8])]
    got = nonzeros_under(under, [2, 0, 1, 3, 4, 1], sp.csc_matrix(Yd.astype(np.float32)), row_nnz)
    want = [int(row_nnz[Yd[:, under[v]].any(axis=1)].sum()) for v in (2, 0, 1, 3, 4, 1)]
    want[1] = int(row_nnz.sum())  # node 0: every row
    assert got.tolist() == want
    assert got[3] == 0 and 0 < got[0] < got[2] < got[1]
    assert got.dtype == np.int64


def test_unit_nonzeros_count_the_rows_under_each_node(spark, tiny, tree_model):  # noqa: F811
    """The Spark sizing of the units (one task per tree) == a dense twin: nonzeros of X in the
    rows that have a label under the node (every row for a root)."""
    from eagle_spark.classifiers.tree.training import unit_nonzeros

    path, meta = tree_model
    _, X, Y = load_xy(tiny["train"], 500, 983, True)
    Yd, row_nnz = Y.toarray(), np.diff(X.indptr)
    trees, units, want = [], [], []
    for t in range(meta["n_trees"]):
        tt = pq.read_table(f"{path}/data/tree_{t}").sort_by("node_id")
        parent, nc = tt.column("parent_id").to_numpy(), int(meta["n_clusters"][t])
        trees.append((parent, nc))
        below = np.zeros((nc, 983), dtype=bool)  # labels below each cluster node, by walking up
        for label in range(983):
            v = parent[nc + label]
            while v >= 0:
                below[v, label] = True
                v = parent[v]
        for node in range(nc):
            if (parent[:nc] == node).any() or (parent[nc:] == node).any():
                units.append((t, node))
                rows = Yd[:, below[node]].any(axis=1) if node else np.ones(len(Yd), bool)
                want.append(int(row_nnz[rows].sum()))
    got, available, cpus = unit_nonzeros(spark, tiny["train"], 500, 983, PARAMS, trees, units)
    assert got.tolist() == want and got[0] == X.nnz
    # the executor's machine is this one (local mode): its memory and CPUs as the tasks saw them
    assert 0 < available <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert cpus == os.cpu_count()


def test_heavy_limit_auto_shares_the_available_memory_among_the_slots(spark):
    """heavy_unit_memory: auto = half the available bytes / slots; a size is that size; null (or
    auto with the memory unknown) no bound; local[N] has N slots, a cluster its executor cores."""
    import dataclasses

    from eagle_spark.classifiers.tree.units import heavy_limit, memory_available, task_slots
    from eagle_spark.errors import SettingsError

    auto = dataclasses.replace(PARAMS, heavy_unit_memory="auto")
    assert TreeSettings().heavy_unit_memory == "auto"
    assert heavy_limit(auto, 16 * 2**30, 2) == 4 * 2**30  # 0.5 x 16 GiB / 2 slots
    assert heavy_limit(auto, 3 * 2**30, 4) == 384 * 2**20
    assert heavy_limit(auto, 0, 2) is None and heavy_limit(auto, None, 2) is None
    assert (
        heavy_limit(dataclasses.replace(PARAMS, heavy_unit_memory="64m"), 16 * 2**30, 2)
        == 64 * 2**20
    )
    assert heavy_limit(dataclasses.replace(PARAMS, heavy_unit_memory=None), 16 * 2**30, 2) is None
    with pytest.raises(SettingsError, match="heavy_unit_memory"):
        TreeSettings(heavy_unit_memory="lots")
    assert 0 < memory_available() <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert task_slots(spark) == spark.sparkContext.defaultParallelism  # local mode


def test_task_slots_on_a_cluster_without_task_cpus_set(spark, monkeypatch):
    """A cluster session where spark.task.cpus and spark.executor.cores are unset (a standalone
    cluster's default): one CPU per task, an executor's CPUs bounded by defaultParallelism."""
    import eagle_spark.classifiers.tree.units as units

    monkeypatch.setattr(units, "is_local", lambda _: False)
    assert spark.conf.get("spark.executor.cores", None) is None
    parallel = spark.sparkContext.defaultParallelism
    assert units.task_slots(spark, cpus=1) == 1
    assert units.task_slots(spark, cpus=64) == parallel


@pytest.mark.parametrize("n_features", [10, 100])  # dense-mask and sort branches
def test_compact_columns_and_rows_with(n_features):
    import scipy.sparse as sp

    M = sp.csr_matrix(([2.0, 1.0, 3.0], [5, 1, 5], [0, 1, 3]), shape=(2, n_features))
    cols, local = compact_columns(M, np.float64)
    assert cols.tolist() == [1, 5] and local.shape == (2, 2) and local.dtype == np.float64
    assert local.toarray().tolist() == [[0.0, 2.0], [1.0, 3.0]]
    cols, local = compact_columns(M[1:])  # a row slice: indptr not starting at 0 is handled
    assert cols.tolist() == [1, 5] and local.toarray().tolist() == [[1.0, 3.0]]
    Y = sp.csc_matrix(np.array([[1, 0, 0], [0, 0, 1], [1, 0, 1], [0, 0, 0]], dtype=bool))
    assert rows_with(Y, np.array([0])).tolist() == [0, 2]
    assert rows_with(Y, np.array([2, 0])).tolist() == [0, 1, 2]
    assert rows_with(Y, np.array([1])).tolist() == []


def test_top_levels_for_leaves_two_subtrees_per_core():
    assert top_levels_for(3, 2) == 1  # 3 trees x 2 sub-trees >= 4
    assert top_levels_for(4, 1) == 0  # 4 whole trees >= 2
    assert top_levels_for(1, 1) == 1
    assert top_levels_for(3, 32) == 5  # 96 >= 64 > 48
    assert top_levels_for(3, 0) == 0  # unknown parallelism counts as one core: 3 >= 2


@pytest.mark.parametrize(
    "top_levels,tasks,max_leaf_work",
    [
        (0, 1, None),
        (2, 3, None),
        (4, 2, None),
        (50, 3, None),
        (None, 2, None),
        (0, 1, 5000),
        (2, 3, 5000),
        (50, 3, 5000),
    ],
)
def test_distributed_indexer_equals_twin(spark, tiny, top_levels, tasks, max_leaf_work):  # noqa: F811
    """Top levels in a first Spark stage (one task per tree), sub-trees in a second: the same trees
    as build_tree, for any split point between the two stages (top_levels 50 = all in the first),
    with and without heavy leaves split further (max_leaf_work), and the driver never computes
    the label representations."""
    from eagle_spark.executor_state import forget, opened

    _, X, Y = load_xy(tiny["train"], 500, 983, True)
    params = TreeSettings(
        max_leaf=20,
        tasks=tasks,
        n_trees=2,
        seed=5,
        top_levels=top_levels,
        max_leaf_work=max_leaf_work,
        max_split_shared=None,
    )
    forget("reps")
    trees = index_trees(spark, tiny["train"], 500, 983, params)
    assert opened("reps") is None  # the tasks' worker processes map them, not the driver
    for t, got in enumerate(trees):
        twin = build_tree(pifa(X, Y), 20, 5 + t, Y=Y, max_leaf_work=max_leaf_work)
        assert got.n_clusters == twin.n_clusters
        if max_leaf_work is None:
            assert got.n_clusters == 127  # 983 labels -> 64 leaves of 15-16
        else:
            assert got.n_clusters > 127  # heavy leaves split further
        np.testing.assert_array_equal(got.parent, twin.parent)
        np.testing.assert_array_equal(got.level, twin.level)
    assert not np.array_equal(trees[0].parent, trees[1].parent)  # seeds 5 and 6 differ


def _twin_leaves(reps, max_leaf, seed, label_sets, max_work, max_shared=None):
    """An independent recursive Parabel indexer: {leaf labels: leaf node id, or None below a shape
    leaf}. Node ids follow the convention the trees document: a node with more than max_leaf labels
    gets two children numbered next (left: ceil half) when it is visited, right subtree first; node v
    splits with seed [seed, v]; a leaf of >= 4 labels whose positive samples x labels exceed
    max_work is split further, the node at path p below leaf v with seed [seed, v, 1 + p...],
    unless (max_shared given) more than max_shared of its positive samples are positive under
    both halves."""
    from sklearn.preprocessing import normalize

    from eagle_spark.kmeans import balanced_2means

    reps = sp.csr_matrix(normalize(reps))
    leaves, next_id = {}, [1]

    def positives(labels):
        want = set(labels.tolist())
        return sum(1 for ls in label_sets if ls & want)

    def visit(v, labels):  # a node of the size-determined shape
        if len(labels) > max_leaf:
            left, right = next_id[0], next_id[0] + 1
            next_id[0] += 2
            to_right = balanced_2means(reps[labels], seed=[seed, v], max_iter=20)
            visit(right, labels[to_right])
            visit(left, labels[~to_right])
        else:
            below(v, (), labels)

    def both(left, right):  # samples with a label on each side
        lset, rset = set(left.tolist()), set(right.tolist())
        return sum(1 for ls in label_sets if ls & lset and ls & rset)

    def below(v, path, labels):  # a shape leaf, split further while too heavy
        if max_work is not None and len(labels) >= 4 and positives(labels) * len(labels) > max_work:
            to_right = balanced_2means(
                reps[labels], seed=[seed, v, *[1 + b for b in path]], max_iter=20
            )
            if max_shared is None or both(
                labels[~to_right], labels[to_right]
            ) <= max_shared * positives(labels):
                below(v, (*path, 1), labels[to_right])
                below(v, (*path, 0), labels[~to_right])
                return
        leaves[frozenset(labels.tolist())] = v if not path else None

    visit(0, np.arange(reps.shape[0]))
    return leaves


@pytest.mark.parametrize(
    "top_levels,max_leaf_work,max_shared", [(0, None, None), (2, 5000, None), (2, 5000, 0.3)]
)
def test_distributed_indexer_equals_an_independent_twin(
    spark,
    tiny,  # noqa: F811
    top_levels,
    max_leaf_work,
    max_shared,
):
    """The Spark indexer's leaves (and the ids of the shape's leaves) equal an independently
    written recursive indexer over PIFA (Y^T X of the normalised rows) built here, also when heavy
    leaves' splits are kept only if their halves share few samples (max_split_shared)."""
    _, X, Y = load_xy(tiny["train"], 500, 983, True)
    reps = sp.csr_matrix(Y.T.astype(np.float64) @ sp.csr_matrix(X, dtype=np.float64))
    Yr = Y.tocsr()
    label_sets = [
        set(Yr.indices[Yr.indptr[i] : Yr.indptr[i + 1]].tolist()) for i in range(Yr.shape[0])
    ]
    params = TreeSettings(
        max_leaf=20,
        tasks=3,
        n_trees=2,
        seed=5,
        top_levels=top_levels,
        max_leaf_work=max_leaf_work,
        max_split_shared=max_shared,
    )
    trees = index_trees(spark, tiny["train"], 500, 983, params)
    for t, got in enumerate(trees):
        want = _twin_leaves(reps, 20, 5 + t, label_sets, max_leaf_work, max_shared)
        if max_shared is not None:  # the rule keeps some heavy leaves whole, not all of them
            every = _twin_leaves(reps, 20, 5 + t, label_sets, max_leaf_work)
            assert 64 < len(want) < len(every)
        leaf_of = got.parent[got.n_clusters :]
        found = {}
        for leaf in np.unique(leaf_of):
            found[frozenset(np.flatnonzero(leaf_of == leaf).tolist())] = (
                int(leaf) if leaf < 127 else None
            )
        assert found == want
        assert (len(want) > 64) == (max_leaf_work is not None)


def test_distributed_indexer_with_given_label_representations(spark, tiny, tmp_path):  # noqa: F811
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    from eagle_spark import schemas as S

    reps = sp.random(983, 16, density=0.3, format="csr", random_state=1, dtype=np.float32)
    (tmp_path / "emb" / S.LABEL_EMB).mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                S.LABEL_ID: pa.array(np.arange(983, dtype=np.int32)),
                S.EMB_IDX: [
                    reps.indices[reps.indptr[i] : reps.indptr[i + 1]].tolist() for i in range(983)
                ],
                S.EMB_VAL: [
                    reps.data[reps.indptr[i] : reps.indptr[i + 1]].tolist() for i in range(983)
                ],
                S.N_GROUPS: pa.array(np.ones(983, dtype=np.int32)),
            },
            schema=S.LABEL_EMB_ARROW,
        ),
        tmp_path / "emb" / S.LABEL_EMB / "part-00000.parquet",
    )
    params = TreeSettings(max_leaf=20, tasks=2, n_trees=1, top_levels=1)
    got = index_trees(spark, tiny["train"], 16, 983, params, label_repr=str(tmp_path / "emb"))[0]
    np.testing.assert_array_equal(got.parent, build_tree(reps, 20, 0).parent)
    assert not np.array_equal(
        got.parent, build_tree(pifa(*load_xy(tiny["train"], 500, 983, True)[1:]), 20, 0).parent
    )


def test_weights_are_written_without_dictionary_pages(tree_model):
    """The weights tables (many distinct feature ids and values) skip Parquet's dictionary
    encoding; the tree table keeps pyarrow's default."""
    from tests.unit.test_parts import dictionary_columns

    path, meta = tree_model
    for t in range(meta["n_trees"]):
        parts = dictionary_columns(f"{path}/data/weights_{t}")
        assert parts and all(cols == [] for cols in parts.values()), parts
    assert dictionary_columns(f"{path}/data/tree_0")["part-00000.parquet"] != []


def test_spark_training_equals_twin(spark, tiny, tree_model):  # noqa: F811
    """Every checked node classifier of the Spark-trained tree equals an independent twin: the
    node's training set worked out here from the tree's parent array and the samples' label sets
    (samples with a label under the node; positives: a label under the child), and scikit-learn's
    public LinearSVC with the same C, tol and seed, pruned at the threshold."""
    import pyarrow.parquet as pq
    from sklearn.svm import LinearSVC

    path, meta = tree_model
    _, X, Y = load_xy(tiny["train"], 500, 983, True)
    assert meta["n_trees"] == 3 and meta["n_clusters"][0] > 63
    n_clusters = int(meta["n_clusters"][0])
    tt = pq.read_table(f"{path}/data/tree_0").to_pydict()
    parent = dict(zip(tt["node_id"], tt["parent_id"], strict=True))
    wt = pq.read_table(f"{path}/data/weights_0").to_pydict()
    weights = {
        e: (i, v, b)
        for e, i, v, b in zip(wt["label_id"], wt["w_idx"], wt["w_val"], wt["bias"], strict=True)
    }
    under: dict[int, set] = {}
    for label in range(983):  # walk up from every label's element
        node = n_clusters + label
        while node >= 0:
            under.setdefault(node, set()).add(label)
            node = parent[node]
    Yr = Y.tocsr()
    labels_of = [
        set(Yr.indices[Yr.indptr[i] : Yr.indptr[i + 1]].tolist()) for i in range(Yr.shape[0])
    ]
    children: dict[int, list] = {}
    for element, p in sorted(parent.items()):
        children.setdefault(p, []).append(element)
    internal = [n for n in sorted(children) if n >= 0]
    checked = 0
    for node in (internal[0], internal[len(internal) // 2], internal[-1]):
        active = [i for i, ls in enumerate(labels_of) if node == 0 or ls & under[node]]
        Xa = X[active].astype(np.float64)
        for child in children[node][:4]:
            y = np.array([bool(labels_of[i] & under[child]) for i in active])
            w_idx, w_val, b = weights[child]
            if y.all() or not y.any():
                assert (list(w_idx), b) == ([], 1.0 if y.all() else -1.0)
                continue
            C, max_iter = meta["ranker_C"], PARAMS.max_iter  # a ranker's: chosen on held-out
            if (
                child < n_clusters
            ):  # the matcher's, scaled by the training set's share under the node
                C = PARAMS.C if PARAMS.matcher_C is None else PARAMS.matcher_C
                if PARAMS.matcher_C_scale == "samples":
                    C = C * X.shape[0] / len(active)
                max_iter = (
                    PARAMS.max_iter if PARAMS.matcher_max_iter is None else PARAMS.matcher_max_iter
                )
            svc = LinearSVC(
                C=C,
                loss="squared_hinge",
                dual=True,
                tol=PARAMS.tol,
                max_iter=max_iter,
                random_state=PARAMS.seed,
            ).fit(Xa, y)
            w = svc.coef_.ravel()
            keep = np.flatnonzero(np.abs(w) >= PARAMS.threshold)
            assert list(w_idx) == keep.tolist()
            np.testing.assert_allclose(w_val, w[keep], rtol=1e-5)
            assert b == pytest.approx(svc.intercept_[0], rel=1e-5)
            checked += 1
    assert checked >= 6


def test_heavy_units_wait_for_the_executor_lock_and_train_the_same(
    spark,
    tiny,  # noqa: F811
    tree_model,
    tmp_path,
    monkeypatch,
):
    """tree.heavy_unit_memory: while another worker holds the executor's heavy-unit lock, a task
    trains its light units and its heavy ones wait (blocked: the light units' classifiers only);
    once the lock is free they train, and every weight equals the Spark-trained model's."""
    import dataclasses
    import threading
    import time

    from eagle_spark.classifiers.tree.ranker_cost import with_ranker_cost
    from eagle_spark.classifiers.tree.structure import Tree
    from eagle_spark.classifiers.tree.units import (
        HEAVY_UNIT_LOCK,
        BinTrainer,
        heavy_limit,
        unit_memory,
        unit_rows,
    )
    from eagle_spark.executor_state import executor_lock

    monkeypatch.setenv("EAGLE_SPARK_STATE_DIR", str(tmp_path / "state"))
    path, meta = tree_model
    _, X, Y = load_xy(tiny["train"], 500, 983, True)
    trees, units, size = [], [], {}
    for t in range(meta["n_trees"]):
        tt = pq.read_table(f"{path}/data/tree_{t}").sort_by("node_id")
        parent, nc = tt.column("parent_id").to_numpy(), int(meta["n_clusters"][t])
        trees.append((parent, nc))
        tree = Tree(parent, np.zeros(len(parent)), nc, 983)
        under = tree.labels_under()
        for node in range(nc):
            if len(tree.children_of(node)):
                units.append((t, node, len(tree.children_of(node))))
                size[t, node] = unit_memory(X, unit_rows(under, X, Y, node))
    limit_k = int(np.median(list(size.values()))) // 1024
    heavy = [u for u in units if size[u[0], u[1]] > limit_k * 1024]
    light_classifiers = sum(k for t, n, k in units if size[t, n] <= limit_k * 1024)
    assert 0 < len(heavy) < len(units) and size[0, 0] == 40 * X.nnz  # the root: every nonzero
    params = with_ranker_cost(  # as training: the rankers at the cost chosen on held-out rows
        dataclasses.replace(PARAMS, heavy_unit_memory=f"{limit_k}k"), meta["ranker_C"]
    )
    trainer = BinTrainer(
        str(tmp_path / "out"),
        983,
        params,
        trees,
        {0: [(t, n) for t, n, _ in units]},
        heavy_limit(params),
    )
    thread = threading.Thread(target=trainer.train, args=(0, X, Y, None))
    with executor_lock(HEAVY_UNIT_LOCK) as held:  # another worker trains a heavy unit
        assert held
        thread.start()
        deadline = time.monotonic() + 120
        while trainer.trained < light_classifiers and time.monotonic() < deadline:
            time.sleep(0.05)
        thread.join(0.5)
        assert thread.is_alive() and trainer.trained == light_classifiers  # heavy units wait
    thread.join(120)
    assert not thread.is_alive() and trainer.trained == sum(k for _, _, k in units)
    for t in range(meta["n_trees"]):
        got = sorted(map(str, pq.read_table(tmp_path / "out" / f"weights_{t}").to_pylist()))
        want = sorted(map(str, pq.read_table(f"{path}/data/weights_{t}").to_pylist()))
        assert got == want


def exhaustive(tree, WT, bias, x, loss):
    """Twin: every label's path probability by walking up from the label."""
    scores = np.asarray((WT @ x.T).todense()).ravel() + bias
    prob = path_probability(scores, loss)
    out = np.ones(tree.n_labels)
    for label in range(tree.n_labels):
        node = tree.n_clusters + label
        while tree.parent[node] >= 0:
            out[label] *= prob[node]
            node = int(tree.parent[node])
    return out


def test_wide_beam_equals_exhaustive(spark, tiny, tree_model):  # noqa: F811
    path, meta = tree_model
    models = load_model(path, meta)
    tree, WT, bias = models[0]
    _, Xt, _ = load_xy(tiny["test"], 500, 983, True)
    for i in range(5):
        x = Xt[i].astype(np.float64)  # as predict_tree scores (the weights stay float32)
        labels, scores = beam_search(tree, WT, bias, x, beam=10**6, k=5, loss="squared_hinge")
        full = exhaustive(tree, WT, bias, x, "squared_hinge")
        order = np.lexsort((np.arange(len(full)), -full))[:5]
        assert labels[0].tolist() == order.tolist()
        np.testing.assert_allclose(scores[0], full[order], rtol=1e-9)
        # the ensemble with wide beams averages every tree's exhaustive path probabilities
        mean = np.mean([exhaustive(t, w, b, x, "squared_hinge") for t, w, b in models], axis=0)
        labels, scores = ensemble_search(models, x, beam=10**6, k=5, loss="squared_hinge")
        top = np.lexsort((np.arange(len(mean)), -mean))[:5]
        assert labels[0].tolist() == top.tolist()
        np.testing.assert_allclose(scores[0], mean[top], rtol=1e-9)


def _digests(folder):
    return sorted(
        hashlib.sha256(p.read_bytes()).hexdigest() for p in pathlib.Path(folder).rglob("*.parquet")
    )


def test_cli_round_trip_and_determinism(spark, tiny, tree_model, tmp_path, capsys):  # noqa: F811
    path, _ = tree_model
    again = tmp_path / "again"
    assert (
        main(
            [
                "train",
                "--model",
                "tree",
                "--input",
                tiny["train"],
                "--output",
                str(again),
                "--set",
                "tree.max_leaf=40",
                "--set",
                "tree.tasks=3",
                "--set",
                "tree.min_task_work=1e15",  # more work a task than there is: one task per core
                "--set",
                "tree.max_leaf_work=20000",
                "--set",
                "tree.max_split_shared=null",
            ]
        )
        == 0
    )

    def rows(m):
        return sorted(
            (t, r.label_id, tuple(r.w_idx), tuple(r.w_val), r.bias)
            for t in range(3)
            for r in spark.read.parquet(f"{m}/data/weights_{t}").collect()
        )

    assert rows(path) == rows(str(again))  # same seed, other task count: the same classifiers
    parts = {
        m: [len(list(pathlib.Path(f"{m}/data/weights_{t}").glob("part-*"))) for t in range(3)]
        for m in (path, str(again))
    }
    assert parts == {path: [3] * 3, str(again): [min(3, TASKS_PER_STAGE)] * 3}
    assert _digests(f"{path}/data/tree_0") == _digests(f"{again}/data/tree_0")
    assert (
        main(
            [
                "predict",
                "--model",
                str(again),
                "--input",
                tiny["test"],
                "--output",
                str(tmp_path / "pred"),
                "--beam-size",
                "5",
            ]
        )
        == 0
    )
    capsys.readouterr()
    preds = {
        r.sample_id: r.label_ids
        for r in spark.read.parquet(str(tmp_path / "pred" / "predictions")).collect()
    }
    X = read_table(spark, tiny["test"], "X")
    direct = {r.sample_id: r.label_ids for r in predict_tree(spark, path, X, 500, 5, 5).collect()}
    assert preds == direct and len(preds) == 300 and all(len(v) == 5 for v in preds.values())
    # in 3 tasks (range partitions of sample_id, sorted within): the same predictions, 3 files
    assert (
        main(
            [
                "predict",
                "--model",
                str(again),
                "--input",
                tiny["test"],
                "--output",
                str(tmp_path / "pred3"),
                "--beam-size",
                "5",
                "--set",
                "predict.tasks=3",
            ]
        )
        == 0
    )
    files = sorted((tmp_path / "pred3" / "predictions").glob("part-*.parquet"))
    ids = [pq.read_table(f).column("sample_id").to_pylist() for f in files]
    assert len(files) == 3 and all(part == sorted(part) and part for part in ids)
    assert max(ids[0]) < min(ids[1]) and max(ids[1]) < min(ids[2])
    assert {
        r.sample_id: r.label_ids
        for r in spark.read.parquet(str(tmp_path / "pred3" / "predictions")).collect()
    } == preds


def test_split_for_prediction(spark, tiny, monkeypatch):  # noqa: F811
    X = read_table(spark, tiny["test"], "X")
    parts = X.rdd.getNumPartitions()
    want = 2 * spark.sparkContext.defaultParallelism
    assert parts < want  # the tiny test set is one small file
    # automatic: too few rows per task (300 < 2 x cores x 5000) -> as read
    assert split_for_prediction(spark, X, 300, 0).rdd.getNumPartitions() == parts
    monkeypatch.setattr(predict_module, "PREDICT_MIN_TASK_ROWS", 10)
    split = split_for_prediction(spark, X, 300, 0)
    assert split.rdd.getNumPartitions() == want
    rows = split.rdd.glom().map(lambda part: [r.sample_id for r in part]).collect()
    assert sorted(i for part in rows for i in part) == sorted(r.sample_id for r in X.collect())
    assert all(part == sorted(part) for part in rows)
    assert split_for_prediction(spark, X, 300, 5).rdd.getNumPartitions() == 5


def test_bad_model(spark, tiny, tmp_path, capsys):  # noqa: F811
    assert (
        main(
            [
                "predict",
                "--model",
                str(tmp_path / "none"),
                "--input",
                tiny["test"],
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    assert (
        main(
            [
                "train",
                "--model",
                "tree",
                "--input",
                tiny["train"],
                "--output",
                str(tmp_path / "t"),
                "--label-repr",
                str(tmp_path / "none"),
            ]
        )
        == 2
    )
    assert "have no label_emb table" in capsys.readouterr().err


def test_retrained_model_at_the_same_path_is_not_served_from_a_stale_cache(spark, tiny, tmp_path):  # noqa: F811
    """Python workers cache models and datasets; a folder rewritten at the same path must be reread."""
    from eagle_spark.classifiers.predict import predict
    from eagle_spark.settings import PredictSettings

    def rows(folder):
        return sorted(
            map(
                tuple,
                spark.read.parquet(f"{folder}/predictions")
                .select("sample_id", "label_ids")
                .collect(),
            )
        )

    model, fresh = str(tmp_path / "m"), str(tmp_path / "fresh")
    train_tree(spark, tiny["train"], model, PARAMS)
    predict(spark, model, tiny["test"], str(tmp_path / "p1"), PredictSettings())
    other = TreeSettings(max_leaf=40, tasks=3, n_trees=1, C=0.05)
    train_tree(spark, tiny["train"], model, other, overwrite=True)  # same path, another model
    train_tree(spark, tiny["train"], fresh, other)
    predict(spark, model, tiny["test"], str(tmp_path / "p2"), PredictSettings())
    predict(spark, fresh, tiny["test"], str(tmp_path / "p3"), PredictSettings())
    assert rows(tmp_path / "p2") == rows(tmp_path / "p3")
    assert rows(tmp_path / "p2") != rows(tmp_path / "p1")


def test_empty_training_set_is_rejected_before_any_output(spark, tmp_path, write_text):
    """The tree checks for samples on the X table (the driver no longer loads X): a clear error
    naming the dataset, and no model folder."""
    ingest(spark, write_text("empty.txt", "0 500 983\n"), str(tmp_path / "empty"), IngestSettings())
    with pytest.raises(
        BadInputError, match=f"dataset {tmp_path / 'empty'} has no samples to train on"
    ):
        train_tree(spark, str(tmp_path / "empty"), str(tmp_path / "m"), TreeSettings())
    assert not (tmp_path / "m").exists()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_train_unit_passes_the_solver_settings():
    """train_unit's matchers follow tree.C / tol / max_iter: the twin is scikit-learn's public
    LinearSVC with the same settings (one pass of the solver here differs from its converged
    answer, so a setting that is not passed through changes the weights)."""
    from sklearn.svm import LinearSVC

    from eagle_spark.classifiers.tree import train_unit
    from eagle_spark.classifiers.tree.structure import Tree
    from eagle_spark.settings import TreeSettings

    X = sp.random(60, 15, density=0.5, format="csr", random_state=3, dtype=np.float64)
    y0 = np.random.default_rng(3).random(60) < 0.5
    Y = sp.csc_matrix(np.c_[y0, ~y0])
    tree = Tree(np.array([-1, 0, 0]), np.array([0, 1, 1]), 1, 2)
    under = tree.labels_under()
    got = {}
    for max_iter in (1, 100):
        params = TreeSettings(C=2.0, tol=1e-3, max_iter=max_iter, threshold=0.0)
        got[max_iter] = {c: (i, v, b) for c, i, v, b in train_unit(tree, under, X, Y, 0, params)}
        svc = LinearSVC(
            C=2.0,
            loss="squared_hinge",
            dual=True,
            tol=1e-3,
            max_iter=max_iter,
            random_state=params.seed,
        ).fit(X, y0)
        w_idx, w_val, bias = got[max_iter][1]
        dense = np.zeros(15)
        dense[w_idx] = w_val
        np.testing.assert_allclose(dense, svc.coef_.ravel(), rtol=1e-5, atol=1e-6)
        assert bias == pytest.approx(svc.intercept_[0], rel=1e-5)
    assert not np.allclose(got[1][1][1], got[100][1][1], rtol=1e-3)


def _svc_twin(Xs, y, C: float, max_iter: int, seed: int) -> tuple:
    """scikit-learn's LinearSVC (squared hinge, dual, tol 1e-3): (coef (d,), intercept)."""
    from sklearn.svm import LinearSVC

    svc = LinearSVC(
        C=C, loss="squared_hinge", dual=True, tol=1e-3, max_iter=max_iter, random_state=seed
    ).fit(Xs, y)
    return svc.coef_.ravel(), svc.intercept_[0]


def _dense_weights(w_idx, w_val, d: int) -> np.ndarray:
    """(d,) float64 from a classifier's kept weight indices and values."""
    w = np.zeros(d)
    w[w_idx] = w_val
    return w


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    "matcher, ranker",
    [
        (dict(C=4.0, max_iter=100), dict(C=0.25, max_iter=100)),  # tree.matcher_C
        (dict(C=0.25, max_iter=1), dict(C=0.25, max_iter=100)),  # tree.matcher_max_iter
        (dict(C=4.0, max_iter=2), dict(C=0.25, max_iter=100)),  # both
    ],
)
def test_the_matcher_has_its_own_cost_and_pass_cap(matcher, ranker):
    """tree.matcher_C / matcher_max_iter train the classifiers of cluster children (the matcher)
    and tree.C / max_iter those of label children (the rankers); the twin is scikit-learn's
    LinearSVC at each setting, on a two-level tree of 4 labels (root -> clusters 1, 2 -> labels
    {0, 1}, {2, 3})."""

    from eagle_spark.classifiers.tree import train_unit
    from eagle_spark.classifiers.tree.structure import Tree
    from eagle_spark.settings import TreeSettings

    rng = np.random.default_rng(5)
    X = sp.random(80, 12, density=0.5, format="csr", random_state=5, dtype=np.float64)
    label = rng.integers(0, 4, 80)  # one label per sample
    Y = sp.csc_matrix(np.eye(4, dtype=bool)[label])
    tree = Tree(np.array([-1, 0, 0, 1, 1, 2, 2]), np.array([0, 1, 1, 2, 2, 2, 2]), 3, 4)
    under = tree.labels_under()
    params = TreeSettings(
        C=ranker["C"],
        max_iter=ranker["max_iter"],
        matcher_C=matcher["C"],
        matcher_max_iter=matcher["max_iter"],
        tol=1e-3,
        threshold=0.0,
    )

    def twin(Xs, y, C, max_iter):
        return _svc_twin(Xs, y, C, max_iter, params.seed)

    def dense(w_idx, w_val):
        return _dense_weights(w_idx, w_val, 12)

    matchers = {c: (i, v, b) for c, i, v, b in train_unit(tree, under, X, Y, 0, params)}
    assert sorted(matchers) == [1, 2]
    w, b = twin(X, label <= 1, **matcher)  # cluster 1 holds labels 0 and 1
    np.testing.assert_allclose(dense(*matchers[1][:2]), w, rtol=1e-5, atol=1e-6)
    assert matchers[1][2] == pytest.approx(b, rel=1e-5)
    other, _ = twin(X, label <= 1, **ranker)
    assert not np.allclose(
        dense(*matchers[1][:2]), other, rtol=1e-2
    )  # the setting makes a difference

    rankers = {c: (i, v, b) for c, i, v, b in train_unit(tree, under, X, Y, 1, params)}
    rows = np.flatnonzero(label <= 1)  # the samples positive under cluster 1
    assert sorted(rankers) == [3, 4]  # elements of labels 0 and 1
    w, b = twin(X[rows], label[rows] == 1, **ranker)
    np.testing.assert_allclose(dense(*rankers[4][:2]), w, rtol=1e-5, atol=1e-6)
    assert rankers[4][2] == pytest.approx(b, rel=1e-5)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("scale", ["samples", "none"])
def test_the_matchers_cost_follows_the_samples_under_its_node(scale):
    """tree.matcher_C_scale: with ``samples`` the classifiers of node v's cluster children use
    matcher_C x n_samples / n_v (n_v: the samples positive under v), with ``none`` matcher_C; the
    root's (n_v = n_samples) and the rankers' are unscaled. Twin: scikit-learn's LinearSVC at the
    hand-computed cost, on a three-level tree of 8 labels (root -> clusters 1, 2; 1 -> 3, 4;
    2 -> 5, 6; leaf 3 + i holds labels 2i, 2i + 1)."""

    from eagle_spark.classifiers.tree import train_unit
    from eagle_spark.classifiers.tree.structure import Tree
    from eagle_spark.settings import TreeSettings

    rng = np.random.default_rng(11)
    X = sp.random(120, 15, density=0.4, format="csr", random_state=11, dtype=np.float64)
    label = rng.integers(0, 8, 120)  # one label per sample
    Y = sp.csc_matrix(np.eye(8, dtype=bool)[label])
    parent = np.array([-1, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6])
    level = np.array([0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3])
    tree = Tree(parent, level, 7, 8)
    under = tree.labels_under()
    params = TreeSettings(
        C=0.25, matcher_C=0.5, matcher_C_scale=scale, matcher_max_iter=None, tol=1e-3, threshold=0.0
    )
    n_under_1 = int((label <= 3).sum())
    assert 40 < n_under_1 < 80  # so the scaled cost differs from the unscaled one

    def fit(Xs, y, C):
        return _svc_twin(Xs, y, C, 100, params.seed)

    def dense(w_idx, w_val):
        return _dense_weights(w_idx, w_val, 15)

    root = {c: (i, v, b) for c, i, v, b in train_unit(tree, under, X, Y, 0, params)}
    w, b = fit(X, label <= 3, 0.5)  # the root's matcher: n_v = n_samples, so matcher_C itself
    np.testing.assert_allclose(dense(*root[1][:2]), w, rtol=1e-5, atol=1e-6)
    assert root[1][2] == pytest.approx(b, rel=1e-5)

    rows = np.flatnonzero(label <= 3)  # the samples positive under cluster 1
    inner = {c: (i, v, b) for c, i, v, b in train_unit(tree, under, X, Y, 1, params)}
    assert sorted(inner) == [3, 4]
    cost = 0.5 * 120 / n_under_1 if scale == "samples" else 0.5
    w, b = fit(X[rows], label[rows] >= 2, cost)  # cluster 4 holds labels 2 and 3
    np.testing.assert_allclose(dense(*inner[4][:2]), w, rtol=1e-5, atol=1e-6)
    assert inner[4][2] == pytest.approx(b, rel=1e-5)
    other, _ = fit(X[rows], label[rows] >= 2, 0.5 * 120 / n_under_1 if scale == "none" else 0.5)
    assert not np.allclose(dense(*inner[4][:2]), other, rtol=1e-2)  # the scale makes a difference

    leaf_rows = np.flatnonzero(label <= 1)  # the rankers of leaf 3 (labels 0, 1): C, unscaled
    rankers = {c: (i, v, b) for c, i, v, b in train_unit(tree, under, X, Y, 3, params)}
    w, b = fit(X[leaf_rows], label[leaf_rows] == 1, 0.25)
    np.testing.assert_allclose(dense(*rankers[8][:2]), w, rtol=1e-5, atol=1e-6)
    assert rankers[8][2] == pytest.approx(b, rel=1e-5)

    # a node with no samples under it (labels 4-7 unused) has nothing to scale by: no weights, bias -1
    unused = sp.csc_matrix(np.eye(8, dtype=bool)[label % 4])
    assert [(c, list(i), b) for c, i, _, b in train_unit(tree, under, X, unused, 2, params)] == [
        (5, [], -1.0),
        (6, [], -1.0),
    ]


def test_rankers_cost_is_chosen_as_an_independent_twin_chooses(tiny, tree_model):  # noqa: F811
    """tree.ranker_C_choice held_out (the default) == a twin written from the rule the settings
    state: leaves in the order (tree, node) permuted by default_rng([seed, 1]), taken until their
    positives reach 10,000 and at least 2 are taken; per leaf 20% of the samples under it held out
    by default_rng([seed, tree, node]).random(n) < 0.2; per cost C x 0.5 / 1 / 2 the leaf's label
    classifiers (scikit-learn's public LinearSVC, pruned at the threshold) trained on the rest rank
    each held-out sample's labels; figure: hits at 1 / 3 / 5 over min(k, positives in the leaf),
    averaged over the held-out samples; the best mean of the three wins."""
    from sklearn.svm import LinearSVC

    path, meta = tree_model
    _, X, Y = load_xy(tiny["train"], 500, 983, True)
    Yr = Y.tocsr()
    freq = np.asarray(Y.sum(axis=0)).ravel()
    leaves = []
    for t, n_clusters in enumerate(meta["n_clusters"]):
        tt = pq.read_table(f"{path}/data/tree_{t}").to_pydict()
        parent = dict(zip(tt["node_id"], tt["parent_id"], strict=True))
        label_of = {e: e - n_clusters for e in parent if e >= n_clusters}
        for v in range(n_clusters):
            kids = [e for e, p in parent.items() if p == v]
            if kids and all(e >= n_clusters for e in kids):
                labels = sorted(label_of[e] for e in kids)
                leaves.append((t, v, labels, float(freq[labels].sum())))
    sampled, total = [], 0.0
    for i in np.random.default_rng([PARAMS.seed, 1]).permutation(len(leaves)):
        if total >= 10_000 and len(sampled) >= 2:
            break
        sampled.append(leaves[i])
        total += leaves[i][3]
    sums = {c: np.zeros(4) for c in (0.5 * PARAMS.C, PARAMS.C, 2 * PARAMS.C)}
    for t, v, labels, _ in sampled:
        active = [i for i in range(X.shape[0]) if set(Yr[i].indices) & set(labels)]
        held = np.random.default_rng([PARAMS.seed, t, v]).random(len(active)) < 0.2
        fit = [a for a, h in zip(active, held, strict=True) if not h]
        test = [a for a, h in zip(active, held, strict=True) if h]
        truth = Yr[test][:, labels].toarray() > 0
        for C in sums:
            scores = np.zeros(truth.shape)
            for j, label in enumerate(labels):
                y = Yr[fit][:, [label]].toarray().ravel() > 0
                if y.all() or not y.any():
                    scores[:, j] = 1.0 if y.all() else -1.0
                    continue
                svc = LinearSVC(
                    C=C, dual=True, tol=PARAMS.tol, max_iter=PARAMS.max_iter, random_state=0
                ).fit(X[fit].astype(np.float64), y)
                w = np.where(np.abs(svc.coef_.ravel()) >= PARAMS.threshold, svc.coef_.ravel(), 0)
                scores[:, j] = X[test].astype(np.float64) @ w + svc.intercept_[0]
            for s, row in zip(scores, truth, strict=True):
                ranked = row[np.argsort(-s, kind="stable")]
                for n, k in enumerate((1, 3, 5)):
                    sums[C][n] += ranked[:k].sum() / max(min(k, row.sum()), 1)
            sums[C][3] += len(test)
    want = {C: [h / s[3] for h in s[:3]] for C, s in sums.items()}
    got = meta["ranker_C_held_out"]
    assert got["leaves"] == len(sampled) >= 2 and got["candidates"] == list(sums)
    assert got["held_out"] == sums[PARAMS.C][3] > 100
    for C, figures in want.items():
        np.testing.assert_allclose(got["held_out_hits"][f"{C:g}"], figures, atol=2e-6)
    assert meta["ranker_C"] == max(want, key=lambda C: (np.mean(want[C]), C == PARAMS.C, -C))


def test_rankers_cost_none_keeps_c(spark, tiny, tree_model, tmp_path):  # noqa: F811
    """tree.ranker_C_choice none: no held-out stage, the rankers train at C (metadata ranker_C =
    C); tree 0 is the held_out model's tree 0, its rankers the same exactly when that chose C."""
    import dataclasses

    path, meta = tree_model
    got = train_tree(
        spark,
        tiny["train"],
        str(tmp_path / "none"),
        dataclasses.replace(PARAMS, ranker_C_choice="none", n_trees=1),
    )
    assert got["ranker_C"] == PARAMS.C and "ranker_C_held_out" not in got
    assert meta["ranker_C"] in (0.5 * PARAMS.C, PARAMS.C, 2 * PARAMS.C)

    def rankers(folder):
        rows = pq.read_table(f"{folder}/data/weights_0").to_pylist()
        n_clusters = int(meta["n_clusters"][0])
        return sorted(str(r) for r in rows if r["label_id"] >= n_clusters)

    def matchers(folder):
        rows = pq.read_table(f"{folder}/data/weights_0").to_pylist()
        return sorted(str(r) for r in rows if r["label_id"] < int(meta["n_clusters"][0]))

    assert matchers(tmp_path / "none") == matchers(path)  # the matchers keep their cost
    assert (rankers(tmp_path / "none") == rankers(path)) == (meta["ranker_C"] == PARAMS.C)


def test_the_training_names_its_spark_jobs_by_step(spark, tiny, tmp_path, monkeypatch):  # noqa: F811
    """Each step of the training starts its Spark jobs under ``<description> / <step>``: the
    training set's checks and label counts, the indexer, the rankers' cost, the unit sizes and
    the units (what benchmarks/tree_time.py and main_job.py table); the description is restored."""
    import dataclasses

    from eagle_spark import classic
    from eagle_spark.classifiers.tree import ranker_cost, training

    seen = []

    def recording(name, fn):
        def wrapped(*args, **kwargs):
            seen.append((name, classic.job_description(spark)))
            return fn(*args, **kwargs)

        return wrapped

    for name in ("label_counts", "index_trees", "unit_nonzeros", "_train_units_task"):
        monkeypatch.setattr(training, name, recording(name, getattr(training, name)))
    monkeypatch.setattr(
        ranker_cost,
        "choose_ranker_cost",
        recording("choose_ranker_cost", ranker_cost.choose_ranker_cost),
    )
    classic.set_job_description(spark, "train_x")
    try:
        train_tree(
            spark, tiny["train"], str(tmp_path / "m"), dataclasses.replace(PARAMS, n_trees=1)
        )
        assert classic.job_description(spark) == "train_x"
    finally:
        classic.set_job_description(spark, None)
    assert seen == [
        ("label_counts", "train_x / training set"),
        ("index_trees", "train_x / indexer"),
        ("choose_ranker_cost", "train_x / rankers' cost"),
        ("unit_nonzeros", "train_x / unit sizes"),
        ("_train_units_task", "train_x / units"),
    ]
