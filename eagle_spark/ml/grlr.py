"""GRLR label embeddings and EAGLE's label assignment as a pyspark.ml Estimator and Model.

``GRLR.fit`` runs Algorithm 1 of the paper (Shen, Yu, Sanghavi, Dhillon, ICML 2020, section 3.2)
on Spark through :func:`eagle_spark.grlr.embedding.embed`; ``GRLRModel.transform`` runs Algorithm 2
(section 3.3, :func:`eagle_spark.assignment.assign.assign`) and adds Y_filter as a column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from pyspark.ml import Estimator, Model
from pyspark.ml.linalg import SparseVector, VectorUDT
from pyspark.ml.param import TypeConverters
from pyspark.ml.param.shared import HasFeaturesCol
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
    declared_param,
    fitted,
    optional_int,
)
from eagle_spark.ml.dataset import Dataset
from eagle_spark.ml.frames import attach, refuse_taken, source_for, work_folder
from eagle_spark.settings import AssignSettings, EmbedSettings

if TYPE_CHECKING:
    from eagle_spark.ml.accessors import GRLRParamsAccessors
else:  # the generated accessors' declarations exist for type checkers only
    GRLRParamsAccessors = object


class _GRLRParams(HasFeaturesCol, HasLabelWeightsCol, SettingsParams, GRLRParamsAccessors):
    _mirrors = (EmbedSettings, AssignSettings)

    groupCol = declared_param(
        "groupCol",
        "group of each sample (any atomic type; null: in no group), Y1 of the paper",
        TypeConverters.toString,
    )
    groupLabelsCol = declared_param(
        "groupLabelsCol",
        "the labels of the sample's group, array<int>; a "
        "repeated id is the label's multiplicity (Y2)",
        TypeConverters.toString,
    )
    labelsCol = declared_param(
        "labelsCol",
        "output of transform: the labels assigned to the sample (Y_filter), array<int>",
        TypeConverters.toString,
    )
    numFeatures = declared_param(
        "numFeatures", "feature space of array features (default: from the data)", optional_int
    )
    numLabels = declared_param(
        "numLabels", "label space (default: largest label id + 1)", optional_int
    )

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

    Params (settings section and default; the constructor takes any of them by name; the
    ``assign`` ones act in the model's transform):
    {params}

    and ``featuresCol``, ``groupCol``, ``groupLabelsCol``, ``labelsCol`` (transform's output,
    labels), ``labelWeightsCol`` (soft weighting's output, label_weights), ``numFeatures``,
    ``numLabels``.

    Raises (fit): ValueError / TypeError naming a missing or mistyped column or a bad Param value,
    before any Spark job.

    Examples:
        >>> from pyspark.ml.linalg import SparseVector
        >>> samples = spark.createDataFrame(
        ...     [("a", SparseVector(3, [0], [1.0]), 7, [0, 1]), ("b", SparseVector(3, [1], [1.0]), 7, [0, 1]),
        ...      ("c", SparseVector(3, [1, 2], [1.0, 1.0]), 9, [1])],
        ...     ["name", "features", "group_id", "group_labels"])
        >>> model = GRLR(maxIter=20, stepSize=0.1, weighting="hard").fit(samples)  # Algorithm 2
        >>> model.labelEmbeddings.count()
        2
        >>> assigned = model.transform(samples)
        >>> [(r.name, r.labels) for r in assigned.orderBy("name").collect()]
        [('a', [0]), ('b', [1]), ('c', [1])]
    """

    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.setParams(**params)

    def _fit(self, dataset: DataFrame) -> "GRLRModel":
        self.settings(EmbedSettings)
        self.settings(AssignSettings)  # checked now, used by the model's transform
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
        params = self.settings(EmbedSettings)
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
        params = self.settings(AssignSettings)  # checked before any job
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
        # the labels column always, the weights column when the output is surely weighted (auto
        # may choose an unweighted candidate: attach checks it once the choice is made)
        refuse_taken(
            src,
            [labels_col]
            + ([self.getOrDefault(self.labelWeightsCol)] if params.weighting == "soft" else []),
            "GRLRModel.transform",
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
        groups of the dataset and the best is used (:mod:`eagle_spark.assignment.selection`; the
        manifest's ``selection`` records every candidate's group-level P@k).

        Returns:
            The written dataset; its ``manifest`` holds n_assignments, samples_with_labels and,
            when the input has the true Y, the assignment ``quality`` (precision, recall).
        Raises:
            ValueError: a bad Param value, or method ``eagle`` on a model without embeddings;
                BadInputError / OutputExistsError (ValueErrors) as :func:`eagle_spark.assignment.assign.assign`.
        """
        params = self.settings(AssignSettings)
        embeddings = self._require_data() if params.method == "eagle" else None
        assign(dataset.spark, dataset.path, absolute(path), params, embeddings, overwrite)
        return Dataset.load(dataset.spark, path)


__all__ = ["GRLR", "GRLRModel"]
