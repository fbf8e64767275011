"""The Python API on DataFrames, following pyspark.ml's Estimator -> Model -> transform contract.

::

    from eagle_spark import Dataset, GRLR, LabelTreeClassifier, evaluate
    samples = Dataset.load(spark, "runs/r4").samples(labelsCol=None)
    grlr = GRLR(maxIter=20, stepSize=0.1).fit(samples)        # Algorithm 1
    assigned = grlr.transform(samples)                          # Algorithm 2: adds labels (Y_filter)
    tree = LabelTreeClassifier().fit(assigned)
    pred = tree.transform(Dataset.load(spark, "runs/test").samples())
    evaluate(pred, k=5)

Every stage is a pyspark.ml ``Estimator`` / ``Model`` (they fit in a ``pyspark.ml.Pipeline``), saves
with ``save(path)`` / ``write().overwrite().save(path)`` and loads with ``Model.load(path)``. How
frames reach the Spark stages (and when a frame is written as a temporary dataset) is in
:mod:`eagle_spark.ml.frames`.
"""

from eagle_spark.ml.base import sign_constructors
from eagle_spark.ml.classifiers import (
    LabelTreeClassifier,
    LabelTreeModel,
    OneVsRestXMC,
    OneVsRestXMCModel,
)
from eagle_spark.ml.dataset import Dataset
from eagle_spark.ml.evaluation import evaluate
from eagle_spark.ml.frames import WORK_DIR_CONF
from eagle_spark.ml.grlr import GRLR, GRLRModel
from eagle_spark.ml.miml import DeepMIML, DeepMIMLModel

sign_constructors()

__all__ = [
    "Dataset",
    "DeepMIML",
    "DeepMIMLModel",
    "GRLR",
    "GRLRModel",
    "LabelTreeClassifier",
    "LabelTreeModel",
    "OneVsRestXMC",
    "OneVsRestXMCModel",
    "WORK_DIR_CONF",
    "evaluate",
]
