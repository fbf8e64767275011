"""spark-submit entry: export a dataset's X and Y as an XC text file.

    spark-submit --master spark://127.0.0.1:7077 --conf spark.pyspark.python=$(which python) \
        jobs/export.py --input out/train --output train_export.txt.gz
"""

import sys

from eagle_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["export", *sys.argv[1:]]))
