"""The paper's experiments: Table 2 with the Oracle and Figure 3's ablations on Spark
(:mod:`eagle_spark.experiments.xmc`), Figure 2's regression simulation in numpy
(:mod:`eagle_spark.experiments.regression`). ``eagle-spark experiment table2|ablation|regression``
runs them; docs/experiments.md shows how and what they gave."""
