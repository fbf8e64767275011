"""Parabel-like label tree on Spark (a package: :mod:`.structure` nodes, shape and shared helpers,
:mod:`.indexer` the label clustering, :mod:`.training` the node classifiers, :mod:`.ranker_cost` the
rankers' cost chosen on held-out samples, :mod:`.search` beam-search prediction, :mod:`.scoring` its
kernel): indexer (balanced 2-means over label representations),
matcher/ranker classifiers trained in parallel tasks, and beam-search prediction.

Tree: node 0 is the root; internal nodes are split by balanced spherical 2-means
(:func:`eagle_spark.kmeans.balanced_2means`) of their labels' representations until a node holds at
most ``max_leaf`` labels (a leaf); a leaf whose training work (samples positive under it x its
labels) exceeds ``max_leaf_work`` is split further the same way (:func:`split_nodes`; with
``max_split_shared``, only where its halves share few samples: :func:`.structure.split_pays`), so that
leaves of head labels do not dominate the training. Label representations are PIFA (the L2-normalised sum of the
normalised feature rows of each label's positive samples, Y^T X) or given ones (e.g. the GRLR label
embeddings, ``label_repr``). Scored elements are the non-root nodes (matcher: "go into this child")
and the labels of each leaf (ranker); each has one binary linear classifier
(:func:`eagle_spark.classifiers.linear.train_binary`) trained on the samples that are positive under
its parent (have a label in the parent's subtree): PECOS's matcher-aware negatives M = Y C.

Distribution: the indexer (:func:`index_trees`) splits the top ``top_levels`` levels of each
tree in a first Spark stage, one task per tree (by default the fewest levels that leave two
sub-trees per core); every node at that depth roots a sub-tree that a task of a second stage
splits to its leaves. The tree's shape down to the max_leaf leaves (node ids, sizes) follows from
n_labels and max_leaf alone (:func:`tree_shape`), nodes below a heavy leaf are named by their path
from it and numbered after the shape's (:func:`tree_from_leaves`), and a node's 2-means seed
depends only on its name, so the result equals the single-node :func:`build_tree` wherever the
split happens. Training units (one per internal node: its children;
one per leaf: its labels) are independent, dealt into ``tasks`` bins by their positive samples
times their classifiers (:func:`deal`), and each task trains its units from the executor-side X/Y cache
(``x_access=cached``) or from the rows a join delivered to its bin (``x_access=joined``: the samples
positive under its nodes, PIFA summed by a join too; :mod:`eagle_spark.classifiers.joined`), labels in
batches inside the task. Never one Spark job per label. A unit's samples and features are restricted to the ones
it uses (:func:`eagle_spark.sparse.compact_columns`), so its cost does not grow with n_samples or n_features.

Prediction: beam search per batch of rows, every node's score of a block of rows computed in one
scatter pass over the rows' features with the weights held feature-major (:mod:`.scoring`); a child's probability is exp(-max(0, 1 - s)^2) for the
squared hinge (Parabel) or the sigmoid for the logistic loss, a path's the product along the path;
the ``beam_size`` best nodes are kept per level; label scores are the leaf path probability times the
label's probability; the top-k labels are returned.

References:
    Prabhu, Kag, Harsola, Agrawal, Varma, Parabel, WWW 2018; Yu et al., PECOS (XR-Linear).
"""

from eagle_spark.classifiers.tree.indexer import (
    build_tree,
    index_trees,
    label_reps,
    pifa,
    split_nodes,
)
from eagle_spark.classifiers.tree.search import (
    beam_search,
    ensemble_search,
    load_model,
    path_probability,
    predict_tree,
)
from eagle_spark.classifiers.tree.structure import (
    TREE,
    TREE_ARROW,
    LeafWork,
    Tree,
    TreeShape,
    deal,
    rows_with,
    top_levels_for,
    tree_from_leaves,
    tree_shape,
)
from eagle_spark.classifiers.tree.training import train_tree
from eagle_spark.classifiers.tree.units import train_unit

__all__ = [
    "TREE",
    "TREE_ARROW",
    "LeafWork",
    "Tree",
    "TreeShape",
    "beam_search",
    "build_tree",
    "deal",
    "ensemble_search",
    "index_trees",
    "label_reps",
    "load_model",
    "path_probability",
    "pifa",
    "predict_tree",
    "rows_with",
    "split_nodes",
    "top_levels_for",
    "train_tree",
    "train_unit",
    "tree_from_leaves",
    "tree_shape",
]
