"""spark-submit entry: the `train` stage (see `eagle-spark train --help`).

    spark-submit --master spark://127.0.0.1:7077 --conf spark.pyspark.python=$(which python) \
        jobs/train.py [stage arguments] [--conf conf/cluster.yaml]
"""

import sys

from eagle_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
