"""``DIR/report.md``: every experiment result found in an experiment folder (Table 2, each
ablation axis, the regression), its figures embedded next to its numbers. Rebuilt from the JSON
results after each experiment, so experiments run into one folder share one report."""

from __future__ import annotations

import json
import os
import posixpath
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_AXES = ("group-size", "depth", "noise")


def report_markdown(read: Callable[[str], Optional[str]]) -> str:
    """The report from the results `read(name)` returns (the file's text, None when absent)."""
    from eagle_spark.experiments.regression import markdown as regression_markdown
    from eagle_spark.experiments.xmc import ablation_markdown, table2_markdown

    parts = [
        "# Experiments",
        "",
        "Reproductions of the paper's Table 2, Figure 3 and Figure 2 (docs/experiments.md says how). "
        "Values in percent unless said otherwise.",
        "",
    ]
    found = False
    table2 = read("table2.json")
    if table2 is not None:
        res = json.loads(table2)
        parts += [
            "## Table 2: Oracle, Baseline, EAGLE-0, EAGLE",
            "",
            f"Classifier: {res['model']}; evaluated on the {res['evaluated_on']}.",
            "",
            table2_markdown(res),
            "",
        ]
        found = True
    for axis in _AXES:
        text = read(f"ablation_{axis}.json")
        if text is not None:
            out = json.loads(text)
            parts += [
                f"## Figure 3: ablation over {axis}",
                "",
                f"Classifier: {out['result']['model']}; evaluated on the {out['result']['evaluated_on']}.",
                "",
                ablation_markdown(out, f"ablation_{axis}.png"),
                "",
            ]
            found = True
    text = read("regression.json")
    if text is not None:
        parts += ["## " + regression_markdown(json.loads(text), "regression.png").lstrip("# "), ""]
        found = True
    if not found:
        parts += ["No results yet."]
    return "\n".join(parts).rstrip() + "\n"


def refresh_local(output: str) -> str:
    """Rebuild ``report.md`` of the local folder `output` (atomic); returns its path."""
    from eagle_spark.experiments.figures import write_text

    def read(name: str) -> Optional[str]:
        path = os.path.join(output, name)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as fh:
            return fh.read()

    path = os.path.join(output, "report.md")
    write_text(path, report_markdown(read))
    return path


def refresh(spark: SparkSession, output: str) -> str:
    """Rebuild ``report.md`` of `output` on any file system Spark reaches (atomic); returns its path."""
    from eagle_spark.io.fs import FileSystem, atomic_output

    fs = FileSystem(spark)

    def read(name: str) -> Optional[str]:
        path = posixpath.join(output, name)
        return fs.read_bytes(path).decode() if fs.exists(path) else None

    path = posixpath.join(output.rstrip("/"), "report.md")
    text = report_markdown(read)
    with atomic_output(spark, path, overwrite=True) as tmp:
        fs.write_bytes(tmp, text.encode())
    return path
