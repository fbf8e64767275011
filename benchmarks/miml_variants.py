"""Why the MIML mask and embeddings are not the paper's as printed: ``eagle-spark miml`` at g = 50
(the settings ``miml_mnist_g50.json`` was tuned to: lr 1e-4, 20 epochs, tau 3, 3 network seeds)
with the paper's mask M = g softmax or the max-normalised mask mixed half with 1, and the GRLR
embeddings as they are or centred.

    python benchmarks/miml_variants.py              # needs ../shared/data/mnist and the [miml] extra
    python benchmarks/miml_variants.py --markdown   # the table of docs/experiments.md

Report ``miml_mnist_g50_variants.json``: a row per variant (mask, centring, tau) with EAGLE-0's and
EAGLE's top-1 test accuracy (percent, mean and per seed) and its seconds. Deep-MIML uses no
embeddings and no mask, so its row is the default run's (``miml_mnist_g50.json``), and so is the
row of the defaults (the max-normalised mask mixed half with 1, centred embeddings, tau 3).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import REPORTS, write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
IMAGES = ROOT.parent / "shared" / "data" / "mnist"
# (name, miml.mask_mix (None: the paper's mask), miml.centre_embeddings, miml.tau)
VARIANTS: tuple[tuple[str, float | None, bool, float], ...] = (
    ("paper's mask, embeddings as GRLR gives them", None, False, 3.0),
    ("mixed mask, embeddings as GRLR gives them", 0.5, False, 3.0),
    ("paper's mask, centred embeddings, tau 10", None, True, 10.0),
)
DEFAULT = "mixed mask, centred embeddings (the defaults)"


def row(name: str, res: dict[str, Any], source: str) -> dict[str, Any]:
    """A report row of variant `name` from a ``miml`` run's results (``results.json``, as
    :func:`eagle_spark.experiments.miml.run_miml` returns it) read from `source`."""
    return {
        "variant": name,
        "mask_mix": res["net"]["mask_mix"],
        "centred": res["centre_embeddings"],
        "tau": res["net"]["tau"],
        **{f"{m} mean": res["methods"][m]["mean"] for m in ("eagle0", "eagle")},
        **{f"{m} seeds": res["methods"][m]["accuracy"] for m in ("eagle0", "eagle")},
        "seconds": res["seconds"]["total"],
        "from": source,
    }


def run(work: str) -> None:
    """Run every variant of :data:`VARIANTS` (EAGLE-0 and EAGLE) and write the report after each."""
    from eagle_spark.experiments.miml import run_miml
    from eagle_spark.session import build_spark
    from eagle_spark.settings import Settings

    if not IMAGES.exists():
        sys.exit(f"{IMAGES} is missing: this benchmark needs ../shared/data")
    default = json.loads((REPORTS / "miml_mnist_g50.json").read_text())
    net = default["net"]
    extra = {"group_size": default["group_size"], "deep-miml": default["methods"]["deep-miml"]}
    base = Settings.load(str(ROOT / "conf" / "local.yaml"), [])
    spark = build_spark(base.spark)
    rows = [row(DEFAULT, default, "miml_mnist_g50.json")]
    for name, mix, centred, tau in VARIANTS:
        setting = base.replace(
            "miml",
            group_size=default["group_size"],
            methods=("eagle0", "eagle"),
            seeds=len(default["methods"]["eagle"]["accuracy"]),
            epochs=net["epochs"],
            lr=net["lr"],
            tune_lr=(),
            tau=tau,
            mask_mix=mix,
            centre_embeddings=centred,
        ).miml
        rows.append(
            row(name, run_miml(spark, str(IMAGES), f"{work}/{len(rows)}", setting), "this run")
        )
        write_report("miml_mnist_g50_variants", rows, extra, table=False)
    spark.stop()
    write_report("miml_mnist_g50_variants", rows, extra)


def markdown() -> list[str]:
    """The report as a table: per variant EAGLE-0's and EAGLE's top-1 accuracy (percent, mean
    over the seeds), then Deep-MIML's, which uses neither."""
    rep = json.loads((REPORTS / "miml_mnist_g50_variants.json").read_text())
    out = [
        f"| g = {rep['group_size']}, mean of 3 network seeds | EAGLE-0 | EAGLE |",
        "|---|---|---|",
    ]
    out += [
        f"| {r['variant']} | {r['eagle0 mean']:.2f} | {r['eagle mean']:.2f} |" for r in rep["rows"]
    ]
    out += ["", f"Deep-MIML (no mask, no embeddings): {rep['deep-miml']['mean']:.2f}."]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/eagle_miml_variants")
    parser.add_argument("--markdown", action="store_true", help="print the table and exit")
    args = parser.parse_args()
    if args.markdown:
        print("\n".join(markdown()))
        return
    run(args.work)


if __name__ == "__main__":
    main()
