"""Table schemas of the dataset layout: the only place column and folder names are spelled.

Every stage reads and writes a *dataset* folder::

    <dataset>/_manifest.json   format_version, n_samples, n_features, n_labels, n_groups, source, ...
    <dataset>/X/    sample_id long, feat_idx array<int> (sorted, unique), feat_val array<float>
    <dataset>/Y/    sample_id long, label_ids array<int>        (true sample labels, when known;
                    an ``assign`` output with weighted assignment adds label_weights array<float>)
    <dataset>/Y1/   sample_id long, group_id long               (aggregated data)
    <dataset>/Y2/   group_id long, label_id int, count int      (aggregated data; count = multiplicity)

Symbols follow Shen, Yu, Sanghavi, Dhillon, "Extreme Multi-label Classification from Aggregated
Labels", ICML 2020, section 3: X (n_samples x n_features), Y1 (n_samples x n_groups),
Y2 (n_groups x n_labels), Y (n_samples x n_labels).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

FORMAT_VERSION = 1
"""Version of the dataset layout written into every ``_manifest.json``."""

MANIFEST = "_manifest.json"
REJECTED = "_rejected"

# Column names.
SAMPLE_ID = "sample_id"
GROUP_ID = "group_id"
LABEL_ID = "label_id"
LABEL_IDS = "label_ids"
LABEL_WEIGHTS = "label_weights"
"""Optional column of Y beside label_ids (weighted assignment): the weight in (0, 1] of each label,
in the same order; absent means weight 1 for every label."""
WEIGHT = "weight"
FEAT_IDX = "feat_idx"
FEAT_VAL = "feat_val"
COUNT = "count"
LINE = "line"
TEXT = "text"
REASON = "reason"

# Table (sub-folder) names.
X = "X"
Y = "Y"
Y1 = "Y1"
Y2 = "Y2"

LABEL_EMB = "label_emb"
ASSIGNMENTS = "assignments"
TOP_MEMBERS = "top_members"
RANK = "rank"
EMB_IDX = "emb_idx"
EMB_VAL = "emb_val"
N_GROUPS = "n_groups"
SCORE = "score"

PREDICTIONS = "predictions"
"""Table of a predict output: sample_id long, label_ids array<int> (top-k, best first), scores
array<float> (the matching scores)."""
SCORES = "scores"

# The layout's tables as Arrow schemas: the one declaration of each table's columns, types and
# nullability. Executor-side writers and mapInArrow functions use them as they are; the Spark
# StructTypes below are derived from them.
ARROW_INT_LIST = pa.list_(pa.field("element", pa.int32(), nullable=False))
ARROW_FLOAT_LIST = pa.list_(pa.field("element", pa.float32(), nullable=False))
LABEL_EMB_ARROW = pa.schema(
    [
        pa.field(LABEL_ID, pa.int32(), nullable=False),
        pa.field(EMB_IDX, ARROW_INT_LIST, nullable=False),
        pa.field(EMB_VAL, ARROW_FLOAT_LIST, nullable=False),
        pa.field(N_GROUPS, pa.int32(), nullable=False),
    ]
)
"""Arrow schema of an ``embed`` output's label embeddings (one sparse row per label)."""
X_ARROW = pa.schema(
    [
        pa.field(SAMPLE_ID, pa.int64(), nullable=False),
        pa.field(FEAT_IDX, ARROW_INT_LIST, nullable=False),
        pa.field(FEAT_VAL, ARROW_FLOAT_LIST, nullable=False),
    ]
)
"""Arrow schema of table X (executor-side writers: ingest, synth)."""
Y_ARROW = pa.schema(
    [
        pa.field(SAMPLE_ID, pa.int64(), nullable=False),
        pa.field(LABEL_IDS, ARROW_INT_LIST, nullable=False),
    ]
)
"""Arrow schema of table Y."""
Y1_ARROW = pa.schema(
    [
        pa.field(SAMPLE_ID, pa.int64(), nullable=False),
        pa.field(GROUP_ID, pa.int64(), nullable=False),
    ]
)
"""Arrow schema of table Y1 (sample -> group)."""
Y2_ARROW = pa.schema(
    [
        pa.field(GROUP_ID, pa.int64(), nullable=False),
        pa.field(LABEL_ID, pa.int32(), nullable=False),
        pa.field(COUNT, pa.int32(), nullable=False),
    ]
)
"""Arrow schema of table Y2 (group -> label, with the label's multiplicity in the group)."""
ASSIGNMENTS_ARROW = pa.schema(
    [
        pa.field(GROUP_ID, pa.int64(), nullable=False),
        pa.field(LABEL_ID, pa.int32(), nullable=False),
        pa.field(SAMPLE_ID, pa.int64(), nullable=False),
        pa.field(SCORE, pa.float32(), nullable=False),
    ]
)
"""Arrow schema of an ``assign`` output's assignments table (group, label, chosen member)."""
TOP_MEMBERS_ARROW = ASSIGNMENTS_ARROW.append(pa.field(RANK, pa.int32(), nullable=False))
"""``embed``'s Algorithm 2 in the same pass: for each (group, label) pair of Y2, its top-``count``
members by <e_k, x_i> (rank 0 = the argmax; ties to the smallest sample_id): the assignments'
columns and the member's rank."""
REJECTED_ARROW = pa.schema(
    [
        pa.field(LINE, pa.int64(), nullable=False),
        pa.field(TEXT, pa.string(), nullable=True),
        pa.field(REASON, pa.string(), nullable=False),
    ]
)
"""Arrow schema of ``_rejected`` (ingest with ``on_bad_line=skip``)."""

# Model folders (metadata.json + data/): a one-vs-all model's data/weights (one row per label), a
# tree model's data/tree_<t> and data/weights_<t> (one row per scored element: cluster nodes, then
# labels as n_clusters + label).
WEIGHTS_ARROW = pa.schema(
    [
        pa.field(LABEL_ID, pa.int32(), nullable=False),  # label id, or the tree's scored element id
        pa.field("w_idx", ARROW_INT_LIST, nullable=False),  # feature ids of the kept weights
        pa.field("w_val", ARROW_FLOAT_LIST, nullable=False),
        pa.field("bias", pa.float32(), nullable=False),
    ]
)
"""Arrow schema of a model's weights tables."""
TREE_ARROW = pa.schema(
    [
        pa.field("node_id", pa.int32(), nullable=False),  # scored element id (nodes, then labels)
        pa.field("parent_id", pa.int32(), nullable=False),  # -1 for the root
        pa.field("level", pa.int32(), nullable=False),
        pa.field(LABEL_ID, pa.int32(), nullable=False),  # -1 for cluster nodes
    ]
)
"""Arrow schema of a tree model's ``data/tree_<t>`` tables."""
PREDICTIONS_ARROW = pa.schema(
    [
        pa.field(SAMPLE_ID, pa.int64(), nullable=False),
        pa.field(LABEL_IDS, ARROW_INT_LIST, nullable=False),
        pa.field(SCORES, ARROW_FLOAT_LIST, nullable=False),
    ]
)
"""Arrow schema of the predictions table (what the predict tasks yield)."""

X_SCHEMA = from_arrow_schema(X_ARROW)
Y_SCHEMA = from_arrow_schema(Y_ARROW)
Y1_SCHEMA = from_arrow_schema(Y1_ARROW)
Y2_SCHEMA = from_arrow_schema(Y2_ARROW)
REJECTED_SCHEMA = from_arrow_schema(REJECTED_ARROW)
LABEL_EMB_SCHEMA = from_arrow_schema(LABEL_EMB_ARROW)
ASSIGNMENTS_SCHEMA = from_arrow_schema(ASSIGNMENTS_ARROW)
TOP_MEMBERS_SCHEMA = from_arrow_schema(TOP_MEMBERS_ARROW)
"""The Spark types of the layout's tables, derived from their Arrow schemas (names, types and
nullability, list elements not null)."""

TABLE_SCHEMAS: dict[str, T.StructType] = {
    X: X_SCHEMA,
    Y: Y_SCHEMA,
    Y1: Y1_SCHEMA,
    Y2: Y2_SCHEMA,
    LABEL_EMB: LABEL_EMB_SCHEMA,
    ASSIGNMENTS: ASSIGNMENTS_SCHEMA,
    TOP_MEMBERS: TOP_MEMBERS_SCHEMA,
}
"""Schema of every table of the dataset layout, by folder name."""

OPTIONAL_COLUMNS: dict[str, list[T.StructField]] = {
    Y: list(from_arrow_schema(pa.schema([pa.field(LABEL_WEIGHTS, ARROW_FLOAT_LIST, False)]))),
    ASSIGNMENTS: list(from_arrow_schema(pa.schema([pa.field(WEIGHT, pa.float32(), False)]))),
}
"""Columns a layout table may have after its schema's (kept, in this order, when present): Y's
label weights and the assignments' weight, written by weighted assignment."""


def spark_type_equal(actual: T.DataType, expected: T.DataType) -> bool:
    """True when two Spark types are equal ignoring nullability.

    Args:
        actual: the type read from a table.
        expected: the type the layout prescribes.
    Returns:
        Whether the two have the same names and data types at every level.
    """
    if isinstance(expected, T.StructType):
        if not isinstance(actual, T.StructType) or len(actual.fields) != len(expected.fields):
            return False
        return all(
            a.name == e.name and spark_type_equal(a.dataType, e.dataType)
            for a, e in zip(actual.fields, expected.fields)
        )
    if isinstance(expected, T.ArrayType):
        return isinstance(actual, T.ArrayType) and spark_type_equal(
            actual.elementType, expected.elementType
        )
    return type(actual) is type(expected)
