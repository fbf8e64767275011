"""eagle_spark: extreme multi-label classification from aggregated (group) labels, on Apache Spark.

Implements EAGLE (Shen, Yu, Sanghavi, Dhillon, "Extreme Multi-label Classification from Aggregated
Labels", ICML 2020) and the XMC pieces around it as Spark jobs. The command line is ``eagle-spark``
(:mod:`eagle_spark.cli`); the dataset layout is in :mod:`eagle_spark.schemas`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
