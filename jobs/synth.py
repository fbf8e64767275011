"""spark-submit entry: the `synth` stage (see `eagle-spark synth --help`).

    spark-submit --master spark://127.0.0.1:7077 --conf spark.pyspark.python=$(which python) \
        jobs/synth.py [stage arguments] [--conf conf/cluster.yaml]
"""

import sys

from eagle_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["synth", *sys.argv[1:]]))
