"""MLflow: a fitted model and a fitted pyspark.ml Pipeline of ours log to a local file-store
tracking URI and load back for batch scoring on a DataFrame (eagle_spark.ml.tracking).

These tests also run on a Spark Connect session (tests/api/test_connect.py reruns this file with
the Connect fixture), where MLflow's own Spark flavour cannot work."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.linalg import SparseVector

from eagle_spark import GRLR, LabelTreeClassifier, OneVsRestXMC
from eagle_spark.errors import BadInputError
from tests.conftest import REMOTE_ENV, ROOT, last_line_of

mlflow = pytest.importorskip("mlflow", reason="MLflow (the [mlflow] extra) is not installed")
tracking = pytest.importorskip("eagle_spark.ml.tracking")


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A local file-store tracking URI (MLflow 3 asks MLFLOW_ALLOW_FILE_STORE for it)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    yield tmp_path
    if mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(before)


def _frame(spark, n=60, seed=0):
    """n samples in 6 features, label j = the sample's strongest of features 2j, 2j+1; groups of 3
    consecutive samples with the union of their labels."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        x = rng.random(6)
        label = int(np.argmax(x.reshape(3, 2).max(axis=1)))
        rows.append((i, SparseVector(6, list(range(6)), x.tolist()), [label], i // 3))
    frame = spark.createDataFrame(rows, ["sample_id", "features", "labels", "group_id"])
    groups = {}
    for i, _, labels, g in rows:
        groups.setdefault(g, set()).update(labels)
    by_group = spark.createDataFrame(
        [(g, sorted(ls)) for g, ls in groups.items()], ["group_id", "group_labels"]
    )
    return frame.join(by_group, "group_id")


def _predictions(frame):
    return {
        r.sample_id: list(r.prediction) for r in frame.select("sample_id", "prediction").collect()
    }


def test_a_logged_model_loads_back_and_scores_as_before(spark, store):
    frame = _frame(spark)
    model = OneVsRestXMC(topK=2, numTasks=2).fit(frame)
    want = _predictions(model.transform(frame))
    with mlflow.start_run():
        info = tracking.log_model(model, "ova")
    back = tracking.load_model(info.model_uri, dst_path=str(store / "download"))
    assert type(back).__name__ == "OneVsRestXMCModel"
    assert back.getOrDefault("topK") == 2
    assert _predictions(back.transform(frame)) == want

    # the same through MLflow's generic interface: Spark in, Spark out; pandas in, pandas out
    pyfunc = mlflow.pyfunc.load_model(info.model_uri)
    assert _predictions(pyfunc.predict(frame)) == want
    rows = frame.select("sample_id", "features").orderBy("sample_id").toPandas()
    out = pyfunc.predict(rows.iloc[::-1].reset_index(drop=True))
    assert out["sample_id"].tolist() == rows["sample_id"].tolist()[::-1]  # the input's row order
    assert {s: list(p) for s, p in zip(out["sample_id"], out["prediction"])} == want


def test_a_fitted_pipeline_logs_and_loads(spark, store):
    frame = _frame(spark)
    samples = frame.drop("labels")
    fitted = Pipeline(
        stages=[GRLR(maxIter=5, weighting="hard"), LabelTreeClassifier(numTrees=1, topK=2)]
    ).fit(samples)
    want = _predictions(fitted.stages[1].transform(samples))
    info = tracking.log_model(fitted, "pipeline")  # starts a run when none is active
    back = tracking.load_model(info.model_uri)
    assert isinstance(back, PipelineModel)
    assert [type(s).__name__ for s in back.stages] == ["GRLRModel", "LabelTreeModel"]
    assert back.stages[0].getOrDefault("maxIter") == 5
    assert _predictions(back.stages[1].transform(samples)) == want
    meta = mlflow.models.Model.load(info.model_uri).metadata["eagle_spark"]
    assert meta["class"] == "pyspark.ml.pipeline.PipelineModel"


def test_what_is_not_a_fitted_model_is_refused(spark, store):
    with pytest.raises(TypeError, match="not a fitted eagle_spark model"):
        tracking.log_model(OneVsRestXMC(), "estimator")


def test_a_model_not_logged_by_this_flavour_is_refused(spark, store):
    class Echo(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):
            return model_input

    info = mlflow.pyfunc.log_model(name="echo", python_model=Echo())
    with pytest.raises(BadInputError, match="not an eagle_spark model"):
        tracking.load_model(info.model_uri)


def test_an_altered_logged_file_is_refused_on_load(spark, store):
    model = OneVsRestXMC(topK=1, numTasks=2).fit(_frame(spark, n=30))
    info = tracking.log_model(model, "ova")
    local = pathlib.Path(mlflow.artifacts.download_artifacts(info.model_uri))
    data = [p for p in (local / "artifacts" / "stage" / "data").rglob("*") if p.is_file()]
    victim = max(data, key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[:-8])  # cut short: its recorded size no longer holds
    with pytest.raises(BadInputError):
        tracking.load_stage(os.fspath(local / "artifacts" / "stage"))


SPARK_FLAVOUR = """
import json, sys
import mlflow, mlflow.spark
from pyspark.ml import Pipeline
from pyspark.sql import SparkSession
from tests.api.test_mlflow import _frame, _predictions
from eagle_spark import GRLR, LabelTreeClassifier

spark = SparkSession.builder.master("local[2]").getOrCreate()  # Hadoop's default local file system
mlflow.set_tracking_uri(sys.argv[1])
samples = _frame(spark).drop("labels")
fitted = Pipeline(stages=[GRLR(maxIter=5, weighting="hard"),
                          LabelTreeClassifier(numTrees=1, topK=2)]).fit(samples)
with mlflow.start_run():
    info = mlflow.spark.log_model(fitted, artifact_path="pipeline")
back = mlflow.spark.load_model(info.model_uri)
print(json.dumps([_predictions(fitted.stages[1].transform(samples)) ==
                  _predictions(back.stages[1].transform(samples)),
                  [type(s).__name__ for s in back.stages]]))
"""


@pytest.mark.slow
def test_mlflow_spark_flavour_works_on_a_plain_classic_session(tmp_path):
    """MLflow's own Spark flavour saves and loads our stages where it can copy through Hadoop's
    local file system (a classic session without build_spark's raw local file system)."""
    if os.environ.get(REMOTE_ENV):
        pytest.skip("MLflow's Spark flavour needs a classic session")
    env = {
        **os.environ,
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
    }
    last = last_line_of(["-c", SPARK_FLAVOUR, (tmp_path / "mlruns").as_uri()], tmp_path, env, 600)
    same, stages = json.loads(last)
    assert same and stages == ["GRLRModel", "LabelTreeModel"]
