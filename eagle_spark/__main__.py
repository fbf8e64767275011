"""``python -m eagle_spark``: the same as the ``eagle-spark`` command."""

import sys

from eagle_spark.cli import main

sys.exit(main())
