"""The label tree's structure: nodes and their parents, the size-determined shape, the
numbering of nodes below heavy leaves, and the helpers every part of the tree uses (rows positive
under labels, compacted columns, dealing work into bins). See :mod:`eagle_spark.classifiers.tree`."""

from __future__ import annotations

import heapq
import logging
from typing import Any, NamedTuple, Optional

import numpy as np
import scipy.sparse as sp

from eagle_spark import schemas as S

log = logging.getLogger(__name__)


TREE = "data/tree"
"""Tree tables ``data/tree_<t>``, one per tree; in a tree model's ``data/weights_<t>`` the
``label_id`` column holds the scored element id (cluster node id, or n_clusters + label)."""
TREE_ARROW = S.TREE_ARROW


class Tree:
    """The label tree as arrays. Element ids: clusters 0..n_clusters-1 (0 = root), then label l has
    element id n_clusters + l.

    Attributes:
        parent: (n_elements,) parent element (-1 for the root).
        level: (n_elements,) depth (root 0).
        n_clusters: cluster nodes (root included).
        n_labels: labels.
    """

    def __init__(
        self, parent: np.ndarray, level: np.ndarray, n_clusters: int, n_labels: int
    ) -> None:
        self.parent, self.level = parent.astype(np.int64), level.astype(np.int64)
        self.n_clusters, self.n_labels = n_clusters, n_labels
        order = np.argsort(self.parent, kind="stable")
        counts = np.bincount(self.parent[self.parent >= 0], minlength=len(parent))
        self.child_ptr = np.r_[0, np.cumsum(counts)]
        self.children = order[self.parent[order] >= 0]

    def children_of(self, node: int) -> np.ndarray:
        return self.children[self.child_ptr[node] : self.child_ptr[node + 1]]

    def is_leaf_cluster(self, node: int) -> bool:
        kids = self.children_of(node)
        return len(kids) > 0 and bool((kids >= self.n_clusters).all())

    def labels_under(self) -> list[np.ndarray]:
        """Per cluster node: the labels of its subtree, ascending (int64 arrays)."""
        label = np.arange(self.n_labels)
        node = self.parent[self.n_clusters :]
        nodes, labels = [], []
        while len(label):  # walk every label up to the root, one level per round
            nodes.append(node)
            labels.append(label)
            up = self.parent[node]
            label, node = label[up >= 0], up[up >= 0]
        nodes_a, labels_a = np.concatenate(nodes), np.concatenate(labels)
        order = np.lexsort((labels_a, nodes_a))
        bounds = np.searchsorted(nodes_a[order], np.arange(self.n_clusters + 1))
        labels_a = labels_a[order]
        return [labels_a[bounds[i] : bounds[i + 1]] for i in range(self.n_clusters)]


class TreeShape(NamedTuple):
    """The cluster nodes of a label tree before any clustering: balanced 2-means splits a node of m
    labels into children of ceil(m/2) and floor(m/2) labels whatever the representations, so ids,
    parents and sizes follow from n_labels and max_leaf alone. Node ids are the depth-first order
    of :func:`build_tree` (node 0 the root); a node's 2-means seed is ``[seed, node]``, so any part
    of the tree can be split anywhere (driver, either indexer stage) and give the same tree. The
    nodes that ``max_leaf_work`` adds below its leaves depend on the data and are numbered after
    it (:func:`tree_from_leaves`).

    Attributes:
        parent: (n_clusters,) parent node (-1 for the root).
        level: (n_clusters,) depth (root 0).
        size: (n_clusters,) labels in the node's subtree.
        kids: (n_clusters, 2) left (ceil half) and right child, -1 for leaves (size <= max_leaf).
    """

    parent: np.ndarray
    level: np.ndarray
    size: np.ndarray
    kids: np.ndarray


def tree_shape(n_labels: int, max_leaf: int) -> TreeShape:
    """The :class:`TreeShape` of a tree of `n_labels` labels with at most `max_leaf` per leaf.

    Raises:
        ValueError: max_leaf < 2.
    """
    if max_leaf < 2:
        raise ValueError(f"max_leaf must be >= 2, got {max_leaf}")
    parent, level, size, kids = [-1], [0], [n_labels], [[-1, -1]]
    stack = [0]
    while stack:  # the same visiting order as the clustering, so the same ids
        node = stack.pop()
        if size[node] <= max_leaf:
            continue
        for c, half in enumerate(((size[node] + 1) // 2, size[node] // 2)):
            kids[node][c] = len(parent)
            stack.append(len(parent))
            parent.append(node)
            level.append(level[node] + 1)
            size.append(half)
            kids.append([-1, -1])
    return TreeShape(
        np.array(parent, dtype=np.int64),
        np.array(level, dtype=np.int64),
        np.array(size, dtype=np.int64),
        np.array(kids, dtype=np.int64).reshape(-1, 2),
    )


class LeafWork(NamedTuple):
    """What deciding whether a leaf is too heavy needs (``tree.max_leaf_work``).

    Attributes:
        max_work: the budget: samples positive under a leaf x its labels (the row x classifier
            pairs its training unit fits).
        label_freq: (n_labels,) positives per label; their sum over a leaf's labels bounds its
            positive samples, so most leaves are decided without Y.
        Y: (n_samples, n_labels) CSC positives, or a function returning it (called only for a leaf
            the bound does not clear).
        max_shared: a heavy leaf is split only when at most this share of its positive samples is
            positive under both halves (``tree.max_split_shared``; :func:`split_pays`); None: always.
    """

    max_work: int
    label_freq: np.ndarray
    Y: Any
    max_shared: Optional[float] = None


def _positives(work: LeafWork) -> sp.csc_matrix:
    return work.Y() if callable(work.Y) else work.Y


def is_heavy(work: Optional[LeafWork], labels: np.ndarray) -> bool:
    """Whether a leaf of `labels` must be split further: it has at least 4 labels (children of
    >= 2) and its samples positive under it x its labels exceed the budget."""
    if (
        work is None
        or len(labels) < 4
        or work.label_freq[labels].sum() * len(labels) <= work.max_work
    ):
        return False
    return len(rows_with(_positives(work), labels)) * len(labels) > work.max_work


def split_pays(work: Optional[LeafWork], labels: np.ndarray, to_right: np.ndarray) -> bool:
    """Whether splitting a heavy leaf of `labels` into ``labels[~to_right]`` / ``labels[to_right]``
    is kept under ``work.max_shared``.

    A leaf's rankers train on its r positive samples, r x m row x classifier pairs; after the split
    they train on r0 and r1 samples with m / 2 labels each, (r0 + r1) x m / 2 pairs, and
    r0 + r1 = r + s where s is the number of samples positive under both halves. The split halves
    the work when s / r is near 0 and saves little when it is near 1, while every split adds a
    routing decision to the beam search, so a split is kept only when s / r <= ``max_shared``.

    Args:
        work: the budget and Y (:class:`LeafWork`); None or ``max_shared`` None: always True.
        labels: (m,) the leaf's labels (int64). to_right: (m,) bool, the 2-means halves.
    Returns:
        True when the split is kept.
    Source: this project (docs/design.md, "Work-bounded leaves").
    """
    if work is None or work.max_shared is None:
        return True
    Y = _positives(work)
    r = len(rows_with(Y, labels))
    shared = len(rows_with(Y, labels[~to_right])) + len(rows_with(Y, labels[to_right])) - r
    return shared <= work.max_shared * r


def tree_from_leaves(
    shape: TreeShape, leaves: list[tuple[int, str, np.ndarray]], n_labels: int
) -> Tree:
    """The Tree whose leaf (node, path) holds `labels` for each (node, path, labels) of `leaves`.

    Nodes below a leaf of `shape` (non-empty paths, :func:`split_nodes`) get the ids after the
    shape's, in the order of (node, path) (depth first), so the ids do not depend on the order
    of `leaves`.

    Raises:
        ValueError: a label is in no leaf, or a leaf is a node of the shape that is not a leaf.
    """
    prefixes = sorted(
        {(int(v), path[:i]) for v, path, _ in leaves for i in range(1, len(path) + 1)}
    )
    ids = {key: len(shape.parent) + i for i, key in enumerate(prefixes)}
    extra_parent = [ids.get((v, p[:-1]), v) for v, p in prefixes]
    extra_level = [int(shape.level[v]) + len(p) for v, p in prefixes]
    label_parent = np.full(n_labels, -1, dtype=np.int64)
    for node, path, labels in leaves:
        if shape.kids[node][0] >= 0:
            raise ValueError(f"node {node} is not a leaf of the tree shape")
        label_parent[labels] = ids[(int(node), path)] if path else node
    if (label_parent < 0).any():
        raise ValueError(f"label {int(np.flatnonzero(label_parent < 0)[0])} is in no leaf")
    cluster_parent = np.r_[shape.parent, np.array(extra_parent, dtype=np.int64)]
    cluster_level = np.r_[shape.level, np.array(extra_level, dtype=np.int64)]
    parent = np.r_[cluster_parent, label_parent]
    level = np.r_[cluster_level, cluster_level[label_parent] + 1]
    return Tree(parent, level, len(cluster_parent), n_labels)


def positives_of(Y: sp.csc_matrix, labels: np.ndarray) -> np.ndarray:
    """Sample ids (rows of Y) of every positive of `labels`, column after column: a sample with
    several of them appears once per label. O(their nnz), not O(n)."""
    starts, ends = Y.indptr[labels], Y.indptr[np.asarray(labels) + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    pos = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(total)
    return Y.indices[pos]


def rows_with(Y: sp.csc_matrix, labels: np.ndarray) -> np.ndarray:
    """Ascending ids of the samples (rows of Y) having any of `labels`; O(their nnz), not O(n)."""
    if len(labels) == 1 and Y.has_sorted_indices:  # one column: already ascending and unique
        return Y.indices[Y.indptr[labels[0]] : Y.indptr[labels[0] + 1]]
    return np.unique(positives_of(Y, labels))


def deal(work: np.ndarray, bins: int) -> list[list[int]]:
    """Indices of `work` dealt into `bins` lists: heaviest first, each to the least loaded bin
    (longest-processing-time rule; ties to the lower bin), so the bins' sums are balanced."""
    out: list[list[int]] = [[] for _ in range(bins)]
    heap = [(0.0, b) for b in range(bins)]
    work = np.asarray(work, dtype=np.float64)
    for i in np.argsort(-work, kind="stable"):
        load, b = heapq.heappop(heap)
        out[b].append(int(i))
        heapq.heappush(heap, (load + float(work[i]), b))
    return out


def top_levels_for(n_trees: int, cores: int) -> int:
    """The fewest tree levels to split first so that the sub-trees below them number at least two
    per core: min L with n_trees * 2**L >= 2 * cores (the default of ``tree.top_levels``; the
    first stage has one task per tree, so fewer levels keep more of the work in the balanced
    second stage)."""
    levels = 0
    while n_trees * 2**levels < 2 * max(1, cores):
        levels += 1
    return levels
