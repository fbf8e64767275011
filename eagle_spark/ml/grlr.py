"""GRLR label embeddings and EAGLE's label assignment as a pyspark.ml Estimator and Model.

``GRLR.fit`` runs Algorithm 1 of the paper (Shen, Yu, Sanghavi, Dhillon, ICML 2020, section 3.2)
on Spark through :func:`eagle_spark.grlr.embedding.embed`; ``GRLRModel.transform`` runs Algorithm 2
(section 3.3, :func:`eagle_spark.assignment.assign.assign`) and adds Y_filter as a column.
"""

from __future__ import annotations

from typing import Any, Optional, Self

from pyspark import keyword_only
from pyspark.ml import Estimator, Model
from pyspark.ml.linalg import SparseVector, VectorUDT
from pyspark.ml.param import TypeConverters
from pyspark.ml.param.shared import HasFeaturesCol, HasMaxIter, HasStepSize
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.assignment.assign import assign
from eagle_spark.grlr.embedding import embed
from eagle_spark.io.fs import absolute
from eagle_spark.io.tables import read_manifest, read_table
from eagle_spark.ml.base import (
    FolderModel,
    HasLabelWeightsCol,
    Persistent,
    SettingsParams,
    fitted,
    optional_int,
    optional_string,
    settings_param,
)
from eagle_spark.ml.dataset import Dataset
from eagle_spark.ml.frames import attach, source_for, work_folder
from eagle_spark.params import AssignParams, EmbedParams


class _GRLRParams(HasFeaturesCol, HasMaxIter, HasStepSize, HasLabelWeightsCol, SettingsParams):
    groupCol = settings_param(
        "groupCol",
        "group of each sample (any atomic type; null: in no group), Y1 of the paper",
        TypeConverters.toString,
    )
    groupLabelsCol = settings_param(
        "groupLabelsCol",
        "the labels of the sample's group, array<int>; a "
        "repeated id is the label's multiplicity (Y2)",
        TypeConverters.toString,
    )
    labelsCol = settings_param(
        "labelsCol",
        "output of transform: the labels assigned to the sample (Y_filter), array<int>",
        TypeConverters.toString,
    )
    normalize = settings_param(
        "normalize", "L2-normalise the rows of X first", TypeConverters.toBoolean
    )
    pruneBelow = settings_param(
        "pruneBelow",
        "store only embedding weights with |w| >= this (0: all)",
        TypeConverters.toFloat,
    )
    xAccess = settings_param(
        "xAccess",
        "auto | cached | joined: how tasks get the groups' feature rows",
        TypeConverters.toString,
    )
    numTasks = settings_param("numTasks", "label bins, one Spark task each", TypeConverters.toInt)
    batchRows = settings_param(
        "batchRows", "candidate rows per vectorised batch inside a task", TypeConverters.toInt
    )
    splitRows = settings_param(
        "splitRows",
        "labels with more candidate rows are split into chunks (0: automatic)",
        TypeConverters.toInt,
    )
    cacheBudget = settings_param(
        "cacheBudget",
        "the executor cache size xAccess=auto allows (a Spark "
        "size such as 4g; None: half the Python worker memory or 4g)",
        optional_string,
    )
    assignTasks = settings_param(
        "assignTasks", "transform, when it recomputes assignments: label bins", TypeConverters.toInt
    )
    assignBatchRows = settings_param(
        "assignBatchRows",
        "transform, when it recomputes assignments: rows per batch",
        TypeConverters.toInt,
    )
    assignXAccess = settings_param(
        "assignXAccess",
        "transform, when it recomputes assignments: auto | cached | joined",
        TypeConverters.toString,
    )
    assignCacheBudget = settings_param(
        "assignCacheBudget", "transform: the cache budget of assignXAccess=auto", optional_string
    )
    method = settings_param(
        "method",
        "transform: eagle (each group label to its best member, "
        "Algorithm 2) or baseline (every member gets all its group's labels)",
        TypeConverters.toString,
    )
    multiplicity = settings_param(
        "multiplicity",
        "transform: a label of count c goes to the top-c members",
        TypeConverters.toBoolean,
    )
    weighting = settings_param(
        "weighting",
        "transform: auto (the best of candidates on held-out groups), "
        "hard (a label to its top-c members, weight 1) or soft (every member a "
        "weight in (0, 1] from its score; adds labelWeightsCol)",
        TypeConverters.toString,
    )
    temperature = settings_param(
        "temperature",
        "transform, soft weighting: near 0 hard top-c, large the Baseline",
        TypeConverters.toFloat,
    )
    candidates = settings_param(
        "candidates",
        "transform, weighting auto: the assignments to choose from "
        "(baseline, hard, soft-<T>; hard and soft-<T> with +r<N> rounds of "
        "refinement)",
        lambda v: tuple(TypeConverters.toListString(v)),
    )
    refineRounds = settings_param(
        "refineRounds",
        "transform: rounds of refinement with a one-vs-all "
        "classifier trained on the assignment (0: the embedding's alone)",
        TypeConverters.toInt,
    )
    heldOut = settings_param(
        "heldOut",
        "transform, weighting auto: share of the groups held out to score the candidates",
        TypeConverters.toFloat,
    )
    numFeatures = settings_param(
        "numFeatures", "feature space of array features (default: from the data)", optional_int
    )
    numLabels = settings_param(
        "numLabels", "label space (default: largest label id + 1)", optional_int
    )

    _fields = {
        EmbedParams: {
            "maxIter": "iterations",
            "stepSize": "lr",
            "normalize": "normalize",
            "pruneBelow": "prune_below",
            "xAccess": "x_access",
            "numTasks": "tasks",
            "batchRows": "batch_rows",
            "splitRows": "split_rows",
            "cacheBudget": "cache_budget",
        },
        AssignParams: {
            "method": "method",
            "multiplicity": "multiplicity",
            "weighting": "weighting",
            "temperature": "temperature",
            "candidates": "candidates",
            "heldOut": "held_out",
            "refineRounds": "refine_rounds",
            "assignTasks": "tasks",
            "assignBatchRows": "batch_rows",
            "assignXAccess": "x_access",
            "assignCacheBudget": "cache_budget",
        },
    }

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(
            featuresCol="features",
            groupCol=S.GROUP_ID,
            groupLabelsCol="group_labels",
            labelsCol="labels",
            numFeatures=None,
            numLabels=None,
        )
        self._set_settings_defaults()

    def _columns(self) -> dict[str, str]:
        return {
            "features": self.getFeaturesCol(),
            "group": self.getOrDefault(self.groupCol),
            "group_labels": self.getOrDefault(self.groupLabelsCol),
        }

    def setMethod(self, value: str) -> Self:
        """``eagle`` (default) or ``baseline``."""
        return self._set(method=value)

    def setLabelsCol(self, value: str) -> Self:
        """Name of the column transform adds."""
        return self._set(labelsCol=value)


class GRLR(Estimator, _GRLRParams, Persistent):
    """Group-Robust Label Representation: one label embedding per label from group labels
    (paper Algorithm 1, the T GRLR iterations e <- Proj(e + lambda g)); T = 0 gives EAGLE-0.

    Input frame: one row per sample with ``featuresCol`` (SparseVector, n_features; or ``feat_idx``
    / ``feat_val`` arrays), ``groupCol`` and ``groupLabelsCol`` (the group's labels, the same on
    every member; repeated ids = multiplicity). A frame from :meth:`Dataset.samples` is read from
    its folder; any other frame is first written once as a temporary dataset under the work folder
    (``spark.eagle_spark.workDir``, see :mod:`eagle_spark.ml.frames`).

    Params (each is a field of the ``embed`` / ``assign`` settings, with its default):
    ``maxIter`` (T, 20), ``stepSize`` (lambda, 0.1), ``normalize`` (true), ``pruneBelow`` (0),
    ``xAccess`` (auto), ``cacheBudget``, ``numTasks`` (16), ``batchRows``, ``splitRows``; for the
    model's transform ``method`` (eagle), ``multiplicity`` (true: top-c), ``weighting`` (auto: the
    best of ``candidates`` on ``heldOut`` (0.2) of the groups; hard: Algorithm 2; soft: weighted
    assignment, whose weights go to ``labelWeightsCol``, label_weights), ``temperature`` (0.3),
    ``refineRounds`` (0: rounds of refinement with a one-vs-all classifier trained on the
    assignment, :mod:`eagle_spark.assignment.refine`), ``labelsCol`` (labels), and, when
    it recomputes assignments, ``assignTasks``, ``assignBatchRows``, ``assignXAccess``,
    ``assignCacheBudget``.

    Raises (fit): ValueError / TypeError naming a missing or mistyped column or a bad Param value,
    before any Spark job.

    Examples:
        >>> from pyspark.ml.linalg import SparseVector
        >>> samples = spark.createDataFrame(
        ...     [("a", SparseVector(3, [0], [1.0]), 7, [0, 1]), ("b", SparseVector(3, [1], [1.0]), 7, [0, 1]),
        ...      ("c", SparseVector(3, [1, 2], [1.0, 1.0]), 9, [1])],
        ...     ["name", "features", "group_id", "group_labels"])
        >>> model = GRLR(maxIter=20, stepSize=0.1).fit(samples)
        >>> model.labelEmbeddings.count()
        2
        >>> assigned = model.transform(samples)
        >>> [(r.name, r.labels) for r in assigned.orderBy("name").collect()]
        [('a', [0]), ('b', [1]), ('c', [1])]
    """

    @keyword_only
    def __init__(
        self,
        *,
        featuresCol: str = "features",
        groupCol: str = S.GROUP_ID,
        groupLabelsCol: str = "group_labels",
        labelsCol: str = "labels",
        labelWeightsCol: str = S.LABEL_WEIGHTS,
        weighting: Optional[str] = None,
        temperature: Optional[float] = None,
        candidates: Optional[list] = None,
        heldOut: Optional[float] = None,
        refineRounds: Optional[int] = None,
        maxIter: Optional[int] = None,
        stepSize: Optional[float] = None,
        normalize: Optional[bool] = None,
        pruneBelow: Optional[float] = None,
        xAccess: Optional[str] = None,
        numTasks: Optional[int] = None,
        method: Optional[str] = None,
        multiplicity: Optional[bool] = None,
        numFeatures: Optional[int] = None,
        numLabels: Optional[int] = None,
        batchRows: Optional[int] = None,
        splitRows: Optional[int] = None,
        cacheBudget: Optional[str] = None,
        assignTasks: Optional[int] = None,
        assignBatchRows: Optional[int] = None,
        assignXAccess: Optional[str] = None,
        assignCacheBudget: Optional[str] = None,
    ) -> None:
        super().__init__()
        self._set_given(self._input_kwargs)

    def _fit(self, dataset: DataFrame) -> "GRLRModel":
        self.settings(EmbedParams)
        self.settings(AssignParams)  # checked now, used by the model's transform
        src = source_for(
            dataset,
            self._columns(),
            "GRLR.fit",
            self.getOrDefault(self.numFeatures),
            self.getOrDefault(self.numLabels),
        )
        spark = dataset.sparkSession
        return self.fitDataset(Dataset.load(spark, src.path), work_folder(spark, "embeddings"))

    def fitDataset(self, dataset: Dataset, path: str, overwrite: bool = False) -> "GRLRModel":
        """Fit on an aggregated dataset folder and write the label embeddings to `path` (what
        ``fit`` does after it has the frame's folder; ``eagle-spark embed`` calls it).

        Args:
            dataset: aggregated dataset (X, Y1, Y2) on storage every executor reaches.
            path: the ``embed`` output folder to write (atomic): ``label_emb/``, ``top_members/``
                and the manifest (:func:`eagle_spark.grlr.embedding.embed`).
            overwrite: replace an existing `path`.
        Returns:
            The model, reading `path`.
        Raises:
            ValueError: a bad Param value; BadInputError (a ValueError) for a dataset without Y1 /
                Y2; OutputExistsError (a ValueError) when `path` exists and `overwrite` is false.
        """
        path = absolute(path)
        params = self.settings(EmbedParams)
        return fitted(
            self,
            GRLRModel(),
            path,
            lambda out: embed(dataset.spark, dataset.path, out, params, overwrite=overwrite),
        )


class GRLRModel(Model, _GRLRParams, FolderModel, Persistent):
    """Fitted GRLR: the label embeddings, and Algorithm 2 as ``transform``.

    ``transform(samples)`` adds ``labelsCol`` (array<int>, sorted): the labels assigned to each
    sample (Y_filter; empty for a sample that got none, or is in no group); with ``weighting``
    ``soft`` also ``labelWeightsCol`` (array<float>, each label's weight in (0, 1], in the same
    order), which the classifiers train on. On the very frame the
    model was fitted on it reads the assignments ``fit`` computed in the same pass; on another
    frame (same label space and feature space) it recomputes them from the stored embeddings.
    With ``method="baseline"`` every member gets all its group's labels (Y1 Y2).

    Memory: as the ``assign`` stage; executors hold X once per machine (executor state).
    """

    def __init__(self) -> None:
        super().__init__()

    @property
    def labelEmbeddings(self) -> DataFrame:
        """DataFrame[label_id int, embedding vector (SparseVector of size n_features, unit L2 norm
        or empty), n_groups int]: one row per label of Y2 (paper section 3.2's e_k)."""
        path = self._require_data()
        spark = self._spark()
        n_features = int(read_manifest(spark, path)["n_features"])
        emb = read_table(spark, path, S.LABEL_EMB)

        @F.udf(returnType=VectorUDT(), useArrow=False)
        def vector(idx, val):  # no type hints: Spark would read them as a pandas UDF
            return SparseVector(n_features, idx, val)

        return emb.select(S.LABEL_ID, vector(S.EMB_IDX, S.EMB_VAL).alias("embedding"), S.N_GROUPS)

    @property
    def summary(self) -> dict[str, Any]:
        """The ``embed`` manifest: n_labels, n_pairs, per-iteration statistics, parameters."""
        return read_manifest(self._spark(), self._require_data())

    def _spark(self) -> Any:
        from pyspark.sql import SparkSession

        return SparkSession.active()

    def _transform(self, dataset: DataFrame) -> DataFrame:
        params = self.settings(AssignParams)  # checked before any job
        if params.method == "eagle":
            self._require_data()
        labels_col = self.getOrDefault(self.labelsCol)
        src = source_for(
            dataset,
            self._columns(),
            "GRLRModel.transform",
            self.getOrDefault(self.numFeatures),
            self.getOrDefault(self.numLabels),
        )
        spark = dataset.sparkSession
        out = work_folder(spark, "assigned")
        self.transformDataset(Dataset.load(spark, src.path), out)
        y = read_table(spark, out, S.Y)
        if S.LABEL_WEIGHTS in y.columns:  # labels sorted, weights in their order (y_filter)
            weights_col = self.getOrDefault(self.labelWeightsCol)
            return attach(
                src,
                y,
                {S.LABEL_IDS: labels_col, S.LABEL_WEIGHTS: weights_col},
                "GRLRModel.transform",
                backs=(
                    out,
                    {
                        "features": src.columns["features"],
                        "labels": labels_col,
                        "label_weights": weights_col,
                    },
                ),
            )
        y = y.select(S.SAMPLE_ID, F.sort_array(S.LABEL_IDS).alias(S.LABEL_IDS))
        return attach(
            src,
            y,
            {S.LABEL_IDS: labels_col},
            "GRLRModel.transform",
            backs=(out, {"features": src.columns["features"], "labels": labels_col}),
        )

    def transformDataset(self, dataset: Dataset, path: str, overwrite: bool = False) -> Dataset:
        """Assign the group labels of an aggregated dataset folder (Algorithm 2, or Baseline) and
        write the filtered dataset (X, Y = Y_filter, assignments) to `path` (what ``transform`` does
        after it has the frame's folder; ``eagle-spark assign`` calls it).

        With ``weighting="auto"`` the candidates (``candidates``) are first scored on held-out
        groups of the dataset and the best is used (:mod:`eagle_spark.ml.selection`; the manifest's
        ``selection`` records every candidate's group-level P@k).

        Returns:
            The written dataset; its ``manifest`` holds n_assignments, samples_with_labels and,
            when the input has the true Y, the assignment ``quality`` (precision, recall).
        Raises:
            ValueError: a bad Param value, or method ``eagle`` on a model without embeddings;
                BadInputError / OutputExistsError (ValueErrors) as :func:`eagle_spark.assignment.assign.assign`.
        """
        path = absolute(path)
        params = self.settings(AssignParams)
        embeddings = self._require_data() if params.method == "eagle" else None
        from eagle_spark.ml.selection import choose_assignment

        auto = params.method == "eagle" and params.weighting == "auto"
        select = (lambda scratch: choose_assignment(self, dataset, scratch)) if auto else None
        assign(
            dataset.spark,
            dataset.path,
            path,
            params,
            embeddings=embeddings,
            overwrite=overwrite,
            select=select,
        )
        return Dataset.load(dataset.spark, path)


__all__ = ["GRLR", "GRLRModel"]
