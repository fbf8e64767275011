"""spark-submit entry: ingest an XC / libsvm text file into a dataset.

    spark-submit --master spark://127.0.0.1:7077 --conf spark.pyspark.python=$(which python) \
        jobs/ingest.py --input train.txt.gz --output out/train [--conf conf/cluster.yaml]
"""

import sys

from eagle_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
