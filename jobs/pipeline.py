"""spark-submit entry: the main job (see `eagle-spark pipeline --help`).

    spark-submit --master spark://127.0.0.1:7077 --conf spark.pyspark.python=$(which python) \
        jobs/pipeline.py --conf conf/cluster.yaml [--compare] [--set key=value ...]
"""

import sys

from eagle_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["pipeline", *sys.argv[1:]]))
