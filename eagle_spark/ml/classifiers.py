"""The XMC classifiers as pyspark.ml Estimators and Models: a Parabel-like label tree and
one-vs-all, trained and applied by the distributed stages of :mod:`eagle_spark.classifiers`.

Both take one row per sample with ``featuresCol`` (SparseVector) and ``labelsCol`` (array<int>,
the sample's labels: Y, or Y_filter from ``GRLRModel.transform``), and their models add
``predictionCol`` (array<int>, top-k label ids, best first) and ``scoresCol`` (array<float>, the
matching scores) to any frame with features.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from pyspark.ml import Estimator, Model
from pyspark.ml.param import TypeConverters
from pyspark.ml.param.shared import HasFeaturesCol, HasPredictionCol
from pyspark.sql import DataFrame, SparkSession

from eagle_spark import schemas as S
from eagle_spark.classifiers.base import read_metadata
from eagle_spark.classifiers.ova import train_ova
from eagle_spark.classifiers.predict import PREDICTIONS, model_class, predict
from eagle_spark.classifiers.tree import train_tree
from eagle_spark.io.fs import absolute
from eagle_spark.io.tables import read_parquet
from eagle_spark.ml.base import (
    FolderModel,
    HasLabelWeightsCol,
    Persistent,
    SettingsParams,
    declared_param,
    fitted,
    optional_int,
    optional_string,
)
from eagle_spark.ml.dataset import Dataset
from eagle_spark.ml.frames import attach, refuse_taken, source_for, work_folder
from eagle_spark.settings import OVASettings, PredictSettings, TreeSettings

if TYPE_CHECKING:
    from eagle_spark.ml.accessors import OVAParamsAccessors, TreeParamsAccessors
    from eagle_spark.ml.grlr import GRLRModel
else:  # the generated accessors' declarations exist for type checkers only
    OVAParamsAccessors = TreeParamsAccessors = object


class _XMCParams(HasFeaturesCol, HasPredictionCol, HasLabelWeightsCol, SettingsParams):
    labelsCol = declared_param(
        "labelsCol", "the sample's labels, array<int> (fit)", TypeConverters.toString
    )
    scoresCol = declared_param(
        "scoresCol", "output: scores of the predicted labels, array<float>", TypeConverters.toString
    )
    numFeatures = declared_param(
        "numFeatures", "feature space of array features (default: from the data)", optional_int
    )
    numLabels = declared_param(
        "numLabels", "label space (default: largest label id + 1)", optional_int
    )
    _model_kind = ""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(
            featuresCol="features",
            labelsCol="labels",
            predictionCol="prediction",
            scoresCol="scores",
            numFeatures=None,
            numLabels=None,
        )
        self._set_settings_defaults()

    def _fit_frame(self, dataset: DataFrame, section: type, kind: str, where: str) -> Any:
        """``fit``: check the Params, find or write the frame's folder, ``fitDataset`` into a work folder."""
        self.settings(section)
        self.settings(PredictSettings)
        columns = {"features": self.getFeaturesCol(), "labels": self.getOrDefault(self.labelsCol)}
        weights_col = self.getOrDefault(self.labelWeightsCol)
        if weights_col in dataset.columns:
            columns["label_weights"] = weights_col
        elif self.isSet(self.labelWeightsCol):
            raise ValueError(
                f"{where}: the frame has no label weights column {weights_col!r} (labelWeightsCol); "
                f"it has {', '.join(dataset.columns)}"
            )
        src = source_for(
            dataset,
            columns,
            where,
            self.getOrDefault(self.numFeatures),
            self.getOrDefault(self.numLabels),
        )
        spark = dataset.sparkSession
        return self.fitDataset(Dataset.load(spark, src.path), work_folder(spark, kind))  # type: ignore[attr-defined]  # each estimator subclass defines it


class _XMCModelBase(FolderModel):
    """transform and metadata of both classifier models."""

    def _predict_frame(self: Any, dataset: DataFrame, where: str) -> DataFrame:
        self.settings(PredictSettings)  # checked before any job
        spark = dataset.sparkSession
        self._require_data()
        meta = self.metadata
        src = source_for(
            dataset, {"features": self.getFeaturesCol()}, where, int(meta["n_features"])
        )
        if src.n_features > int(meta["n_features"]):
            raise ValueError(
                f"{where}: the frame's feature space ({src.n_features}) is larger than the "
                f"model's ({meta['n_features']})"
            )
        columns = {
            S.LABEL_IDS: self.getPredictionCol(),
            "scores": self.getOrDefault(self.scoresCol),
        }
        refuse_taken(src, columns.values(), where)  # before the prediction's jobs
        out = work_folder(spark, "predictions")
        self.transformDataset(Dataset.load(spark, src.path), out)
        preds = read_parquet(spark, f"{out}/{PREDICTIONS}")
        return attach(src, preds, columns, where)

    def transformDataset(self: Any, dataset: Dataset, path: str, overwrite: bool = False) -> dict:
        """Predict the top-``topK`` labels of a dataset folder's X into `path` (``predictions/``:
        sample_id, label_ids, scores; what ``transform`` does after it has the frame's folder;
        ``eagle-spark predict`` calls it).

        Returns:
            The manifest written (n_samples, top_k, source).
        Raises:
            ValueError: a bad Param value, or a model without data; BadInputError /
                OutputExistsError (ValueErrors) as :func:`eagle_spark.classifiers.predict.predict`.
        """
        path = absolute(path)
        params = self.settings(PredictSettings)
        return predict(
            dataset.spark, self._require_data(), dataset.path, path, params, overwrite=overwrite
        )

    @property
    def metadata(self: Any) -> dict:
        """The model folder's metadata.json: class, params, n_features, n_labels, created_at, ..."""
        from pyspark.sql import SparkSession

        return read_metadata(SparkSession.active(), self._require_data(), self._model_class)

    @property
    def numFeatures_(self: Any) -> int:
        """n_features of the training data."""
        return int(self.metadata["n_features"])

    @property
    def numLabels_(self: Any) -> int:
        """n_labels of the training data."""
        return int(self.metadata["n_labels"])


class _TreeParams(_XMCParams, TreeParamsAccessors):
    _mirrors = (TreeSettings, (PredictSettings, ("top_k", "beam_size", "tasks")))

    labelRepr = declared_param(
        "labelRepr",
        "folder of label embeddings (a GRLR model's data, see "
        "setLabelEmbeddings) clustered by the indexer; None: PIFA",
        optional_string,
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(labelRepr=None)


class LabelTreeClassifier(Estimator, _TreeParams, Persistent):
    """A Parabel-like label-tree ensemble (balanced 2-means label indexer, one-vs-rest linear
    classifiers at every node, beam search) trained on Spark by
    :func:`eagle_spark.classifiers.tree.train_tree`.

    Params (settings section and default; the constructor takes any of them by name):
    {params}

    and ``featuresCol``, ``labelsCol``, ``labelWeightsCol``, ``labelRepr`` (None: PIFA; see
    :meth:`setLabelEmbeddings`), ``numFeatures``, ``numLabels``, ``predictionCol``, ``scoresCol``.

    Input: ``featuresCol`` SparseVector (n_features) and ``labelsCol`` array<int>, and, when the
    frame has it, ``labelWeightsCol`` (label_weights: array<float>, one weight in (0, 1] per label,
    from ``GRLRModel.transform`` with soft weighting): every classifier then trains on the expected
    loss, a label of weight w being a positive of weight w and a negative of weight 1 - w. A frame
    from ``GRLRModel.transform`` or :meth:`Dataset.samples` is read from its folder; any other is
    first written once as a temporary dataset (see :mod:`eagle_spark.ml.frames`).

    Raises (fit): ValueError / TypeError naming a missing or mistyped column or a bad Param value,
    before any Spark job; BadInputError (a ValueError) when there are no samples.

    References: Prabhu et al., Parabel (WWW 2018); EAGLE paper section 6 trains it on Y_filter.

    Examples:
        >>> from pyspark.ml.linalg import SparseVector
        >>> train = spark.createDataFrame(
        ...     [(SparseVector(3, [0], [1.0]), [0]), (SparseVector(3, [1], [1.0]), [1]),
        ...      (SparseVector(3, [2], [1.0]), [2])], ["features", "labels"])
        >>> model = LabelTreeClassifier(numTrees=1, topK=1).fit(train)
        >>> pred = model.transform(train)
        >>> sorted((r.labels, r.prediction) for r in pred.collect())
        [([0], [0]), ([1], [1]), ([2], [2])]
    """

    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.setParams(**params)

    def setLabelRepr(self, path: str) -> "LabelTreeClassifier":
        """Cluster the labels by the embeddings in an ``embed`` output folder instead of PIFA."""
        return self._set(labelRepr=path)

    def setLabelEmbeddings(self, model: GRLRModel) -> "LabelTreeClassifier":
        """Cluster the labels by a fitted or loaded ``GRLRModel``'s embeddings instead of PIFA."""
        return self._set(labelRepr=model._require_data())

    def _fit(self, dataset: DataFrame) -> "LabelTreeModel":
        return self._fit_frame(dataset, TreeSettings, "tree", "LabelTreeClassifier.fit")

    def fitDataset(self, dataset: Dataset, path: str, overwrite: bool = False) -> "LabelTreeModel":
        """Train on a dataset folder's X and Y and write the model folder to `path` (what ``fit``
        does after it has the frame's folder; ``eagle-spark train --model tree`` calls it).

        Raises:
            ValueError: a bad Param value; BadInputError (a ValueError) for no samples or no Y;
                OutputExistsError (a ValueError) when `path` exists and `overwrite` is false.
        """
        path = absolute(path)
        params, label_repr = self.settings(TreeSettings), self.getOrDefault(self.labelRepr)
        return fitted(
            self,
            LabelTreeModel(),
            path,
            lambda out: train_tree(
                dataset.spark, dataset.path, out, params, label_repr=label_repr, overwrite=overwrite
            ),
        )


class LabelTreeModel(Model, _TreeParams, _XMCModelBase, Persistent):
    """Fitted label tree: ``transform`` adds the top-``topK`` labels by beam search (``beamSize``)
    as ``predictionCol`` and their averaged scores as ``scoresCol``.

    Memory: each executor maps the model once per machine (executor state); a task holds its batch.
    """

    _model_class = "TreeModel"

    def __init__(self) -> None:
        super().__init__()

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return self._predict_frame(dataset, "LabelTreeModel.transform")


class _OVAParams(_XMCParams, OVAParamsAccessors):
    _mirrors = (OVASettings, (PredictSettings, ("top_k", "batch_rows", "tasks")))


class OneVsRestXMC(Estimator, _OVAParams, Persistent):
    """One binary linear classifier per label (one-vs-all), trained in label blocks inside Spark
    tasks by :func:`eagle_spark.classifiers.ova.train_ova` (never one Spark job per label).

    Params (settings section and default; the constructor takes any of them by name):
    {params}

    and ``featuresCol``, ``labelsCol``, ``labelWeightsCol``, ``numFeatures``, ``numLabels``,
    ``predictionCol``, ``scoresCol``.

    Input: as :class:`LabelTreeClassifier` (``featuresCol``, ``labelsCol``, and ``labelWeightsCol``
    when the frame has it: each label's classifier then trains on the expected loss).

    Raises (fit): ValueError / TypeError naming a missing or mistyped column or a bad Param value,
    before any Spark job.

    Examples:
        >>> from pyspark.ml.linalg import SparseVector
        >>> train = spark.createDataFrame(
        ...     [(SparseVector(3, [0], [1.0]), [0]), (SparseVector(3, [1], [1.0]), [1]),
        ...      (SparseVector(3, [2], [1.0]), [2])], ["features", "labels"])
        >>> model = OneVsRestXMC(topK=2).fit(train)
        >>> sorted((r.labels, r.prediction[0]) for r in model.transform(train).collect())
        [([0], 0), ([1], 1), ([2], 2)]
    """

    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.setParams(**params)

    def _fit(self, dataset: DataFrame) -> "OneVsRestXMCModel":
        return self._fit_frame(dataset, OVASettings, "ova", "OneVsRestXMC.fit")

    def fitDataset(
        self, dataset: Dataset, path: str, overwrite: bool = False
    ) -> "OneVsRestXMCModel":
        """Train on a dataset folder's X and Y and write the model folder to `path` (what ``fit``
        does after it has the frame's folder; ``eagle-spark train --model ova`` calls it).

        Raises:
            ValueError: a bad Param value; BadInputError (a ValueError) for no samples or no Y;
                OutputExistsError (a ValueError) when `path` exists and `overwrite` is false.
        """
        path = absolute(path)
        params = self.settings(OVASettings)
        return fitted(
            self,
            OneVsRestXMCModel(),
            path,
            lambda out: train_ova(dataset.spark, dataset.path, out, params, overwrite=overwrite),
        )


class OneVsRestXMCModel(Model, _OVAParams, _XMCModelBase, Persistent):
    """Fitted one-vs-all: ``transform`` scores every label and adds the top-``topK``.

    Memory: each executor maps the weights once per machine; a task holds a batch of
    ``batchRows`` x n_labels scores.
    """

    _model_class = "OVAModel"

    def __init__(self) -> None:
        super().__init__()

    def _transform(self, dataset: DataFrame) -> DataFrame:
        return self._predict_frame(dataset, "OneVsRestXMCModel.transform")


def model_at(
    spark: SparkSession, path: str, predict_params: Optional[PredictSettings] = None
) -> "LabelTreeModel | OneVsRestXMCModel":
    """The model of a ``train`` output folder (``metadata.json`` + ``data/``): a LabelTreeModel or a
    OneVsRestXMCModel reading it, with the prediction Params of `predict_params`.

    Raises:
        BadInputError (a ValueError): the folder has no model metadata or another class.
    """
    classes: dict[str, type[LabelTreeModel] | type[OneVsRestXMCModel]] = {
        "TreeModel": LabelTreeModel,
        "OVAModel": OneVsRestXMCModel,
    }
    cls = classes[model_class(spark, path)]
    model = cls.fromSettings(predict_params) if predict_params is not None else cls()
    return model.atFolder(path)


__all__ = ["LabelTreeClassifier", "LabelTreeModel", "OneVsRestXMC", "OneVsRestXMCModel", "model_at"]
