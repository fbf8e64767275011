"""spark-submit entry: the `predict` stage (see `eagle-spark predict --help`).

    spark-submit --master spark://127.0.0.1:7077 --conf spark.pyspark.python=$(which python) \
        jobs/predict.py [stage arguments] [--conf conf/cluster.yaml]
"""

import sys

from eagle_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["predict", *sys.argv[1:]]))
