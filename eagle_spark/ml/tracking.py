"""MLflow: log a fitted model (or a fitted ``pyspark.ml.PipelineModel`` of our stages) to a tracking
server and load it back for batch scoring, on classic and Spark Connect sessions alike.

MLflow's own Spark flavour (``mlflow.spark.log_model``) copies the saved model through the JVM's
Hadoop file system: it works on a classic session whose local file system is Hadoop's default
(our models are ``MLWritable`` / ``MLReadable`` pyspark.ml stages, so it saves and loads them as it
does any Python stage), and it cannot work under Spark Connect (no JVM on the client), nor on the
sessions :func:`eagle_spark.session.build_spark` makes (Hadoop's raw local file system, which that
copy refuses). This module's flavour needs neither:

* :func:`log_model` saves the stage with its own writer (``stage.write().save``: Spark ML's
  ``metadata/`` plus the model's ``data/``, each file listed in a checked manifest) and logs it as
  the one artifact of an ``mlflow.pyfunc`` model whose Python class is :class:`EagleSparkPyfunc`;
* :func:`load_model` downloads it and returns the stage itself (a :class:`LabelTreeModel`,
  :class:`OneVsRestXMCModel`, :class:`GRLRModel`, :class:`DeepMIMLModel` or ``PipelineModel``),
  whose ``transform`` scores a Spark DataFrame;
* ``mlflow.pyfunc.load_model(uri).predict(frame)`` does the same through MLflow's generic
  interface: a Spark DataFrame in, the transformed Spark DataFrame out; a pandas DataFrame is
  scored on the active session and returned as pandas.

The stage is read with the active session when the model is loaded; its files stay in the folder
MLflow downloaded them to (``dst_path``), which the session's executors must be able to read (any
local path in local mode; shared storage on a cluster or a remote Connect server).

The tracking store is MLflow's: ``mlflow.set_tracking_uri`` (a database, a server, or a local file
store, for which MLflow 3 asks ``MLFLOW_ALLOW_FILE_STORE=true``). Requires the ``[mlflow]`` extra.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from typing import TYPE_CHECKING, Any, Optional

import mlflow
import mlflow.pyfunc
from mlflow.pyfunc.model import PythonModel, PythonModelContext
from pyspark.ml import PipelineModel, Transformer
from pyspark.ml.util import DefaultParamsReader, MLWritable
from pyspark.sql import DataFrame, SparkSession

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError

if TYPE_CHECKING:
    from mlflow.models.model import ModelInfo

    from eagle_spark.ml.base import Persistent

#: name of the artifact that holds the saved stage, and of our entry in the MLmodel metadata
ARTIFACT = "stage"
FLAVOR = "eagle_spark"

_ROW = "_eagle_spark_row"
_PIPELINE = f"{PipelineModel.__module__}.{PipelineModel.__name__}"


def _model_classes() -> dict[str, type[Persistent]]:
    """The fitted stages this flavour logs and loads, by the class name their metadata records."""
    from eagle_spark.ml import (
        DeepMIMLModel,
        GRLRModel,
        LabelTreeModel,
        OneVsRestXMCModel,
    )

    classes: list[type[Persistent]] = [GRLRModel, LabelTreeModel, OneVsRestXMCModel, DeepMIMLModel]
    return {f"{c.__module__}.{c.__name__}": c for c in classes}


def _check_stage(model: Any) -> str:
    """The class name of `model` if this flavour can log it, else TypeError."""
    name = f"{type(model).__module__}.{type(model).__name__}"
    if name in _model_classes():
        return name
    if isinstance(model, PipelineModel):
        for stage in model.stages:
            inner = f"{type(stage).__module__}.{type(stage).__name__}"
            if inner not in _model_classes() and not inner.startswith("pyspark.ml."):
                raise TypeError(
                    f"log_model: the PipelineModel's stage {inner} is not a fitted "
                    "eagle_spark model or a pyspark.ml stage"
                )
        return _PIPELINE
    raise TypeError(
        f"log_model: {name} is not a fitted eagle_spark model (one of "
        f"{', '.join(sorted(c.rsplit('.', 1)[1] for c in _model_classes()))}) or a PipelineModel"
    )


def load_stage(path: str) -> Transformer:
    """Load the stage saved at the local folder `path` by :func:`log_model`, with the active session.

    Only the classes this flavour writes are loaded: the class named in the folder's Spark ML
    metadata is looked up in that list, never imported by name from the file.

    Raises:
        BadInputError (a ValueError): no Spark ML metadata at `path`, or a class this flavour does
            not log; a file missing, altered or added (checked by the stage's own reader).
        RuntimeError: no active Spark session.
    """
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("load_stage: no active SparkSession (create one before loading)")
    if not os.path.isdir(os.path.join(path, "metadata")):
        raise BadInputError(f"{path} is not a saved eagle_spark stage (no metadata/ folder)")
    name = DefaultParamsReader.loadMetadata(path, spark).get("class")
    if name == _PIPELINE:
        return PipelineModel.load(path)
    cls = _model_classes().get(str(name))
    if cls is None:
        raise BadInputError(
            f"{path} holds a {name}, which the eagle_spark MLflow flavour does not load"
        )
    return cls.load(path)


def _features_col(stage: Transformer) -> str:
    """The features column `stage` (or a PipelineModel's first stage that has one) reads."""
    stages = stage.stages if isinstance(stage, PipelineModel) else [stage]
    for s in stages:
        if s.hasParam("featuresCol"):
            return str(s.getOrDefault("featuresCol"))
    return "features"


def _spark_ready(frame: Any, features: str) -> Any:
    """A copy of the pandas `frame` that ``createDataFrame`` takes on either session kind: the
    Spark ML vectors of column `features` as ``feat_idx`` / ``feat_val`` arrays (the frame form
    the stages accept beside a vector column; Arrow, which Connect uses, has no vector type) and
    numpy arrays in cells (what ``toPandas`` gives for array columns) as lists."""
    import numpy as np
    from pyspark.ml.linalg import DenseVector, SparseVector

    out = frame.copy()
    if features in out.columns:
        values = out[features].tolist()
        if values and all(isinstance(v, (SparseVector, DenseVector)) for v in values):
            sparse = [v if isinstance(v, SparseVector) else v.toArray() for v in values]
            out[S.FEAT_IDX] = [
                v.indices.tolist() if isinstance(v, SparseVector) else np.flatnonzero(v).tolist()
                for v in sparse
            ]
            out[S.FEAT_VAL] = [
                v.values.tolist() if isinstance(v, SparseVector) else v[v != 0].tolist()
                for v in sparse
            ]
            out = out.drop(columns=[features])
    for name in out.columns:
        if out[name].dtype == object:
            out[name] = out[name].map(lambda v: v.tolist() if isinstance(v, np.ndarray) else v)
    return out


class EagleSparkPyfunc(PythonModel):
    """The ``mlflow.pyfunc`` face of a logged stage (what :func:`log_model` writes).

    ``load_context`` loads the stage from the ``stage`` artifact with the active session;
    ``predict`` transforms a Spark DataFrame (returned as a Spark DataFrame) or a pandas DataFrame
    (made a Spark DataFrame on the active session, returned as pandas in the input's row order,
    its vector column as ``feat_idx`` / ``feat_val``) with the stage's Params,
    e.g. ``featuresCol`` (a Spark ML vector column) and ``topK``.

    Memory: the driver holds the Params; the model's files are read by the executors as in
    ``transform``. A pandas input and output are held whole on the driver.
    """

    def __init__(self) -> None:
        self._stage: Optional[Transformer] = None

    def load_context(self, context: PythonModelContext) -> None:
        """Load the stage from the model's ``stage`` artifact (see :func:`load_stage`)."""
        self._stage = load_stage(context.artifacts[ARTIFACT])

    # model_input unannotated: MLflow reads predict's type hints as an input schema to enforce
    def predict(self, context, model_input, params=None):
        """Score `model_input` (Spark or pandas DataFrame) with the stage's ``transform``.

        Raises:
            TypeError: `model_input` is neither a Spark nor a pandas DataFrame.
            RuntimeError: a pandas input and no active Spark session.
        """
        del context, params
        if self._stage is None:
            raise RuntimeError("EagleSparkPyfunc.predict before load_context")
        if isinstance(model_input, DataFrame):
            return self._stage.transform(model_input)
        import pandas as pd

        if not isinstance(model_input, pd.DataFrame):
            raise TypeError(
                f"predict takes a Spark or pandas DataFrame, not {type(model_input).__name__}"
            )
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("predict on a pandas DataFrame needs an active SparkSession")
        frame = _spark_ready(model_input, _features_col(self._stage))
        frame[_ROW] = range(len(frame))
        out = self._stage.transform(spark.createDataFrame(frame)).toPandas()
        # Spark keeps no row order: the rows come back in the input's
        return out.sort_values(_ROW).drop(columns=[_ROW]).reset_index(drop=True)


def log_model(
    model: Transformer,
    name: str,
    *,
    registered_model_name: Optional[str] = None,
    **kwargs: Any,
) -> "ModelInfo":
    """Log a fitted model, or a fitted ``pyspark.ml.PipelineModel`` of our stages, to the active
    MLflow run (one is started if none is) as an ``mlflow.pyfunc`` model of this flavour.

    Args:
        model: a fitted GRLRModel, LabelTreeModel, OneVsRestXMCModel, DeepMIMLModel, or a
            PipelineModel whose stages are these or pyspark.ml's own.
        name: the logged model's name (``mlflow.pyfunc.log_model``'s ``name``).
        registered_model_name: also register it under this name in the model registry.
        kwargs: passed to ``mlflow.pyfunc.log_model`` (``signature``, ``tags``, ...).
    Returns:
        MLflow's ``ModelInfo`` (``model_uri`` loads it back with :func:`load_model`).
    Raises:
        TypeError: `model` is not one of those.
        ValueError: a model without data (not fitted, not loaded).
    """
    from eagle_spark._version import __version__
    from eagle_spark.io.fs import FileSystem
    from eagle_spark.ml.frames import work_folder

    cls = _check_stage(model)
    if not isinstance(model, MLWritable):  # every stage _check_stage takes is
        raise TypeError(f"{cls} cannot be saved (not MLWritable)")
    spark = SparkSession.active()
    with tempfile.TemporaryDirectory(prefix="eagle_spark-mlflow-") as local:
        # saved where the session writes (its work folder: the server under Connect may not see
        # this process's temporary folder), then brought to a local folder for MLflow to log
        saved = work_folder(spark, "mlflow")
        model.write().save(saved)
        fs = FileSystem(spark)
        staged = posixpath.join(local, ARTIFACT)
        try:
            fs.copy(saved, staged)
        finally:
            fs.delete(saved)
        import pyspark

        return mlflow.pyfunc.log_model(
            name=name,
            python_model=EagleSparkPyfunc(),
            artifacts={ARTIFACT: staged},
            pip_requirements=[f"eagle_spark=={__version__}", f"pyspark=={pyspark.__version__}"],
            metadata={FLAVOR: {"class": cls, "version": __version__}},
            registered_model_name=registered_model_name,
            **kwargs,
        )


def load_model(model_uri: str, dst_path: Optional[str] = None) -> Transformer:
    """The stage logged by :func:`log_model` at `model_uri` (``runs:/<run>/<name>``,
    ``models:/<name>/<version>``, a ``ModelInfo.model_uri``), read with the active session.

    Args:
        model_uri: where MLflow has the model.
        dst_path: a local folder to download it to (default: a new temporary folder). The loaded
            model reads its files there: keep it while the model is used.
    Returns:
        The fitted stage: ``transform`` scores a Spark DataFrame.
    Raises:
        BadInputError (a ValueError): the model at `model_uri` was not logged by this flavour, or
            its files are missing, altered or added.
        RuntimeError: no active Spark session.
    """
    from mlflow.models import Model

    local = mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=dst_path)
    meta = (Model.load(local).metadata or {}).get(FLAVOR)
    stage = os.path.join(local, "artifacts", ARTIFACT)
    if not meta or not os.path.isdir(stage):
        raise BadInputError(f"{model_uri} is not an eagle_spark model logged by log_model")
    loaded = load_stage(stage)
    got = f"{type(loaded).__module__}.{type(loaded).__name__}"
    if got != meta.get("class"):
        raise BadInputError(f"{model_uri}: the logged stage is a {got}, its MLmodel says {meta}")
    return loaded


__all__ = ["ARTIFACT", "FLAVOR", "EagleSparkPyfunc", "load_model", "load_stage", "log_model"]
