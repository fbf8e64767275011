"""What only a classic Spark session has (SparkContext, its JVM, RDDs, broadcasts) is used in
eagle_spark/classic.py alone, so everything else runs unchanged under Spark Connect."""

from __future__ import annotations

import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "eagle_spark"
JVM_ONLY = re.compile(r"\bsparkContext\b|\._jvm\b|\._jsc\b|\._jsparkSession\b|\._jdf\b|\.rdd\b")


def test_jvm_only_attributes_live_in_the_classic_module():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "classic.py" and path.parent == PACKAGE:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if JVM_ONLY.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert found == []


def test_the_pattern_finds_what_it_looks_for():
    for line in ("spark.sparkContext.defaultParallelism", "df.rdd.getNumPartitions()", "sc._jvm.x"):
        assert JVM_ONLY.search(line), line
    for line in ("F.broadcast(numbered)", "rddish = 1", "classic.jvm(spark)"):
        assert not JVM_ONLY.search(line), line
