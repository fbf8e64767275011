"""eagle_spark: extreme multi-label classification from aggregated (group) labels, on Apache Spark.

Implements EAGLE (Shen, Yu, Sanghavi, Dhillon, "Extreme Multi-label Classification from Aggregated
Labels", ICML 2020) and the XMC pieces around it as Spark jobs. The command line is ``eagle-spark``
(:mod:`eagle_spark.cli`); the Python API on DataFrames is :mod:`eagle_spark.ml` (its names are
exported here); the dataset layout is in :mod:`eagle_spark.schemas`.
"""

from eagle_spark._version import __version__

_API = (
    "Dataset",
    "DeepMIML",
    "DeepMIMLModel",
    "GRLR",
    "GRLRModel",
    "LabelTreeClassifier",
    "LabelTreeModel",
    "OneVsRestXMC",
    "OneVsRestXMCModel",
    "evaluate",
)

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    """The Python API (:mod:`eagle_spark.ml`), imported on first use so that ``import eagle_spark``
    and ``eagle-spark --help`` stay fast."""
    if name in _API:
        from eagle_spark import ml

        return getattr(ml, name)
    raise AttributeError(f"module 'eagle_spark' has no attribute {name!r}")
