"""The rankers' liblinear cost, chosen on held-out samples of the training set
(``tree.ranker_C_choice: held_out``). See :mod:`eagle_spark.classifiers.tree`.

Which cost ranks best depends on the data: on validation splits of bibtex and delicious the
label tree's P@3/5 fall by ~0.3-1 point when the rankers' cost doubles from 0.5, while on
calibrated synthetic Wiki-325K (scale 0.05, ~17 positives per label) the same change gains
0.4-0.6 points at P@1/3/5. So the rankers' cost is not a constant: it is chosen among
``C`` x :data:`FACTORS` by how well each ranks held-out samples, within their leaves.

How: a seeded sample of leaf clusters (all trees' leaves in a seeded order, taken until their
positives reach :data:`SAMPLE_POSITIVES` and at least :data:`MIN_LEAVES` are taken, or none is
left). In each, a seeded :data:`HELD_OUT_SHARE` of the samples positive under the leaf is held
out; the leaf's rankers are trained on the rest with each candidate cost (the training code of
the model itself, :func:`~eagle_spark.classifiers.tree.units.train_unit`, so ``unassigned`` and
label weights apply as they do in training), and each held-out sample's labels in the leaf are
ranked by the rankers' scores. A candidate's figure is the mean over k in (1, 3, 5) of the
held-out samples' hits in their top k divided by min(k, their positives in the leaf) (so every
figure is in [0, 1] whatever the samples' label counts). The best figure wins; ties go to ``C``
itself, then to the smaller cost. The matchers keep ``matcher_C`` (or ``C``): only the rankers'
cost changes, as the matchers' classifiers are not what the held-out ranking measures.

The work is bounded by the sample's positives, not by the data's size: the sampled leaves'
rankers are trained len(FACTORS) times on 80% of their rows.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import scipy.sparse as sp
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from eagle_spark.classic import default_parallelism
from eagle_spark.classifiers.base import load_label_weights, load_unassigned
from eagle_spark.classifiers.tree.structure import Tree, deal
from eagle_spark.classifiers.tree.units import BinTrainer, bin_label_tables, train_unit, unit_rows
from eagle_spark.io.parts import load_xy
from eagle_spark.settings import TreeSettings

log = logging.getLogger(__name__)

FACTORS = (0.5, 1.0, 2.0)
"""The candidate costs of the rankers, as multiples of ``tree.C``."""
HELD_OUT_SHARE = 0.2
"""Share of a sampled leaf's samples held out of its rankers' training to be ranked."""
SAMPLE_POSITIVES = 10_000
"""Leaves are sampled until their positives (samples x labels of theirs, summed) reach this."""
MIN_LEAVES = 2
"""At least this many leaves are sampled (all of them when the trees have fewer)."""
KS = (1, 3, 5)
"""The ranks at which held-out rankings are scored."""

FIGURES = pa.schema(
    [
        pa.field("tree", pa.int32(), False),
        pa.field("node", pa.int32(), False),
        pa.field("candidate", pa.int32(), False),
        pa.field("held_out", pa.int64(), False),
        *[pa.field(f"hits_{k}", pa.float64(), False) for k in KS],
    ]
)
"""Per sampled leaf and candidate: held-out samples ranked, and their normalised hits at each k."""


def sample_leaves(
    trees: list[Tree], label_freq: np.ndarray, seed: int
) -> list[tuple[int, int, float]]:
    """The leaf clusters whose held-out samples choose the rankers' cost: (tree, node, positives)
    in a seeded order (``numpy.random.default_rng([seed, 1])``) over all trees' leaves, taken until
    their positives (`label_freq` summed over their labels) reach :data:`SAMPLE_POSITIVES` with at
    least :data:`MIN_LEAVES` taken.

    Args:
        trees: the ensemble's trees. label_freq: (n_labels,) positives per label.
    Returns:
        [(tree, node, positives)], possibly empty (no tree has a leaf cluster).
    """
    leaves = []
    for t, tree in enumerate(trees):
        under = tree.labels_under()
        for v in range(tree.n_clusters):
            if tree.is_leaf_cluster(v):
                leaves.append((t, v, float(label_freq[under[v]].sum())))
    order = np.random.default_rng([seed, 1]).permutation(len(leaves))
    out: list[tuple[int, int, float]] = []
    total = 0.0
    for i in order:
        if total >= SAMPLE_POSITIVES and len(out) >= MIN_LEAVES:
            break
        out.append(leaves[int(i)])
        total += leaves[int(i)][2]
    return out


def held_out_mask(n_rows: int, seed: int, tree: int, node: int) -> np.ndarray:
    """(n_rows,) bool: the rows of a leaf's training rows held out, a seeded
    :data:`HELD_OUT_SHARE` (``default_rng([seed, tree, node])``); the same whichever way the rows
    reached the task."""
    return np.random.default_rng([seed, tree, node]).random(n_rows) < HELD_OUT_SHARE


def ranking_hits(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Normalised hits of held-out rankings.

    Args:
        scores: (m, L) scores of m held-out samples for a leaf's L labels.
        truth: (m, L) bool, the samples' positives among those labels.
    Returns:
        (len(KS),) float64: per k, the sum over samples of (true labels among the k best scores)
        / min(k, the sample's positives); a sample without positives adds 0. Ties in the scores
        rank the lower label first.
    """
    order = np.argsort(-scores, axis=1, kind="stable")
    positives = truth.sum(axis=1)
    out = np.zeros(len(KS))
    for i, k in enumerate(KS):
        hits = np.take_along_axis(truth, order[:, :k], axis=1).sum(axis=1)
        out[i] = (hits / np.maximum(np.minimum(k, positives), 1)).sum()
    return out


def leaf_figures(
    tree: Tree,
    under: list,
    t: int,
    node: int,
    X: sp.csr_matrix,
    Y: sp.csc_matrix,
    params: TreeSettings,
    U: Optional[sp.csc_matrix] = None,
    n_samples: Optional[int] = None,
    W: Optional[sp.csc_matrix] = None,
) -> list[tuple]:
    """One sampled leaf's figures: for each candidate cost (index into :data:`FACTORS`), the
    leaf's rankers trained on its rows but the held-out ones (:func:`held_out_mask`) and the held
    out rows ranked (:func:`ranking_hits`).

    Args:
        tree, under: the tree and its labels_under(); t: its index; node: a leaf cluster of it.
        X, Y, U, W, n_samples: as :func:`~eagle_spark.classifiers.tree.units.train_unit`
            takes them (rows of X in sample_id order, holding every row positive under `node`).
    Returns:
        [(candidate, held-out rows, hits at each k)]; empty when nothing is held out or nothing is
        left to train on.

    Memory: the leaf's rows as the training of its unit holds them (~40 bytes per nonzero) and the
    held-out scores (held-out rows x the leaf's labels x 8 bytes).
    """
    active = unit_rows(under, X, Y, node)
    held = held_out_mask(len(active), params.seed, t, node)
    if not held.any() or held.all():
        return []
    fit, test = active[~held], active[held]
    labels = under[node]
    Xf = X[fit]  # the rows the rankers train on, every one positive under `node`
    Yf = _leaf_rows(Y, fit, labels)
    Uf = None if U is None else _leaf_rows(U, fit, labels)
    Wf = None if W is None else _leaf_rows(W, fit, labels)
    Xh = X[test].astype(np.float64)
    truth = Y[:, labels].tocsr()[test].toarray() > 0
    out = []
    for i, factor in enumerate(FACTORS):
        trained = train_unit(
            tree,
            under,
            Xf,
            Yf,
            node,
            dataclasses.replace(params, C=params.C * factor),
            Uf,
            n_samples=X.shape[0] if n_samples is None else n_samples,
            W=Wf,
        )
        scores = np.zeros((len(test), len(labels)))
        column = {int(lab): j for j, lab in enumerate(labels)}
        for child, w_idx, w_val, bias in trained:
            j = column[int(child) - tree.n_clusters]
            scores[:, j] = Xh[:, w_idx] @ w_val.astype(np.float64) + bias
        out.append((i, len(test), *ranking_hits(scores, truth)))
    return out


def with_ranker_cost(params: TreeSettings, cost: float) -> TreeSettings:
    """The settings the units train with once the rankers' cost is `cost`: ``C`` = `cost` (what
    label children use) and ``matcher_C`` = the matchers' own (``matcher_C``, else the given
    ``C``), so the matchers train as before."""
    matcher = params.C if params.matcher_C is None else params.matcher_C
    return dataclasses.replace(params, C=cost, matcher_C=matcher)


def _leaf_rows(M: sp.csc_matrix, rows: np.ndarray, labels: np.ndarray) -> sp.csc_matrix:
    """Rows `rows` of CSC `M` (n_samples x n_labels) with only the columns `labels` (a leaf's,
    ascending) kept, the others empty: all a leaf's rankers read, as CSC with sorted indices.
    O(the nonzeros of those columns), not of `M`."""
    sub = M[:, labels].tocsr()[rows]
    out = sp.csr_matrix(
        (sub.data, np.asarray(labels)[sub.indices], sub.indptr), shape=(len(rows), M.shape[1])
    ).tocsc()
    out.sort_indices()
    return out


def choose(figures: dict[int, np.ndarray], C: float) -> tuple[float, dict[float, list[float]]]:
    """The rankers' cost from the summed figures.

    Args:
        figures: candidate index -> (held-out rows, hits at each k) summed over the sampled leaves.
        C: ``tree.C``.
    Returns:
        (the chosen cost, {cost: [mean normalised hits at each k]}); `C` when nothing was held out.
    """
    means = {}
    for i, row in sorted(figures.items()):
        if row[0] > 0:
            means[C * FACTORS[i]] = [float(h / row[0]) for h in row[1:]]
    if not means:
        return C, means
    best = max(
        means,
        key=lambda c: (float(np.mean(means[c])), c == C, -c),
    )
    return best, means


def _figures_task(
    dataset: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    trees: list,
    units_by_bin: dict,
    groups: Optional[str],
    weighted: bool,
):
    """mapInArrow: bin ids -> :data:`FIGURES` rows of the bin's sampled leaves, from the executor
    cache of X and Y (``x_access=cached``). A task holds the cached X / Y (shared per executor)
    and one leaf's working set at a time (:func:`leaf_figures`)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids, X, Y = load_xy(dataset, n_features, n_labels, params.normalize)
        U = load_unassigned(dataset, groups, ids, Y) if groups is not None else None
        W = load_label_weights(dataset, n_labels) if weighted else None
        trees_of = _TreesOf(trees, n_labels)
        for batch in batches:
            for b in np.asarray(batch.column(0), dtype=np.int64):
                rows = trees_of.figures(units_by_bin.get(int(b), []), X, Y, params, U, None, W)
                if rows:
                    yield figures_batch(rows)

    return run


class _TreesOf:
    """The trees of a task, each built and its labels_under() computed once, on first use."""

    def __init__(self, trees: list, n_labels: int) -> None:
        self.trees, self.n_labels = trees, n_labels
        self.built: dict[int, tuple[Tree, list]] = {}

    def figures(
        self,
        units: list,
        X: sp.csr_matrix,
        Y: sp.csc_matrix,
        params: TreeSettings,
        U: Optional[sp.csc_matrix],
        n_samples: Optional[int],
        W: Optional[sp.csc_matrix],
    ) -> list[tuple]:
        """:data:`FIGURES` rows of the sampled leaves `units` [(tree, node)] (:func:`leaf_figures`
        on these rows)."""
        out = []
        for t, node in units:
            if t not in self.built:
                parent, n_clusters = self.trees[t]
                tree = Tree(parent, np.zeros(len(parent)), n_clusters, self.n_labels)
                self.built[t] = (tree, tree.labels_under())
            tree, under = self.built[t]
            for got in leaf_figures(tree, under, t, node, X, Y, params, U, n_samples, W):
                out.append((t, node, *got))
        return out


def _figure_tuple(row) -> tuple:
    """(candidate, held-out rows, hits at each k) of a collected :data:`FIGURES` row."""
    return (row["candidate"], row["held_out"], *[row[f"hits_{k}"] for k in KS])


def figures_batch(rows: list) -> pa.RecordBatch:
    """:data:`FIGURES` rows (tree, node, candidate, held-out rows, hits at each k) as a batch."""
    cols = list(zip(*rows))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.asarray(cols[0], np.int32)),
            pa.array(np.asarray(cols[1], np.int32)),
            pa.array(np.asarray(cols[2], np.int32)),
            pa.array(np.asarray(cols[3], np.int64)),
            *[pa.array(np.asarray(c, np.float64)) for c in cols[4:]],
        ],
        schema=FIGURES,
    )


def choose_ranker_cost(
    spark: SparkSession,
    dataset: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    trees: list[Tree],
    label_freq: np.ndarray,
    groups: Optional[str],
    weighted: bool,
    access: str,
) -> tuple[float, dict]:
    """Choose the rankers' liblinear cost on held-out samples (module docstring): one Spark stage
    over the sampled leaves (:func:`sample_leaves`), on the executor cache of X and Y
    (``access`` cached) or on rows a join delivers (joined); the same figures either way.

    Args:
        trees: the indexed trees. label_freq: (n_labels,) positives per label.
        groups: the unassigned groups' table (``unassigned=ignore``) or None. weighted: Y has
            label weights.
    Returns:
        (cost, report): report = {"candidates": [costs], "held_out_hits": {cost: [mean hits at
        k = 1, 3, 5]}, "leaves": sampled leaves, "held_out": held-out rows ranked per candidate}.
    Raises:
        Spark's PythonException (from a ValueError) on the joined path: a sample of Y has no row in
        X.
    """
    sampled = sample_leaves(trees, label_freq, params.seed)
    candidates = [params.C * f for f in FACTORS]
    if not sampled:
        return params.C, {"candidates": candidates, "held_out_hits": {}, "leaves": 0}
    bins = max(1, min(len(sampled), 2 * default_parallelism(spark)))
    dealt = deal(np.array([p for _, _, p in sampled]), bins)
    units_by_bin = {b: [(sampled[i][0], sampled[i][1]) for i in idx] for b, idx in enumerate(dealt)}
    task_trees = [(tr.parent, tr.n_clusters) for tr in trees]
    if access == "joined":
        got = _joined_figures(
            spark, dataset, n_features, n_labels, params, task_trees, units_by_bin, groups, weighted
        )
    else:
        run = _figures_task(
            dataset, n_features, n_labels, params, task_trees, units_by_bin, groups, weighted
        )
        got = [
            _figure_tuple(r)
            for r in spark.range(0, bins, numPartitions=bins)
            .mapInArrow(run, from_arrow_schema(FIGURES))
            .collect()
        ]
    sums: dict[int, np.ndarray] = {}
    for cand, held, *hits in got:
        sums[int(cand)] = sums.get(int(cand), np.zeros(1 + len(KS))) + np.array([held, *hits])
    cost, means = choose(sums, params.C)
    held_rows = int(max((s[0] for s in sums.values()), default=0))
    return cost, {
        "candidates": candidates,
        "held_out_hits": {f"{c:g}": [round(h, 6) for h in m] for c, m in means.items()},
        "leaves": len(sampled),
        "held_out": held_rows,
    }


def _joined_figures(
    spark: SparkSession,
    dataset: str,
    n_features: int,
    n_labels: int,
    params: TreeSettings,
    trees: list,
    units_by_bin: dict,
    groups: Optional[str],
    weighted: bool,
) -> list[tuple]:
    """The figures on the join path: each bin's rows (the samples positive under its leaves)
    arrive through :func:`~eagle_spark.classifiers.joined.joined_stage`."""
    from eagle_spark.classifiers.joined import joined_stage, load_y, local_rows

    rows_of = BinTrainer("", n_labels, params, trees, units_by_bin)
    bins = max(units_by_bin) + 1

    def figures_bin(b: int, table: pa.Table) -> pa.Table:
        ids, Y = load_y(dataset, n_labels)
        rows, Xb, Yb = local_rows(table, ids, Y, n_features, params.normalize, "train (tree)")
        U, W = bin_label_tables(dataset, n_labels, groups, weighted, ids, Y, rows)
        out = _TreesOf(trees, n_labels).figures(
            units_by_bin.get(b, []), Xb, Yb, params, U, len(ids), W
        )
        if not out:
            return FIGURES.empty_table()
        return pa.Table.from_batches([figures_batch(out)])

    ddl = "tree int, node int, candidate int, held_out long, " + ", ".join(
        f"hits_{k} double" for k in KS
    )
    done = joined_stage(spark, dataset, n_labels, bins, rows_of.rows_of_bin, figures_bin, ddl)
    return [_figure_tuple(r) for r in done]


__all__ = [
    "FACTORS",
    "HELD_OUT_SHARE",
    "MIN_LEAVES",
    "SAMPLE_POSITIVES",
    "choose",
    "choose_ranker_cost",
    "held_out_mask",
    "leaf_figures",
    "ranking_hits",
    "sample_leaves",
    "with_ranker_cost",
]
