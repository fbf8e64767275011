"""spark-submit entry: the `evaluate` stage (see `eagle-spark evaluate --help`).

    spark-submit --master spark://127.0.0.1:7077 --conf spark.pyspark.python=$(which python) \
        jobs/evaluate.py [stage arguments] [--conf conf/cluster.yaml]
"""

import sys

from eagle_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["evaluate", *sys.argv[1:]]))
