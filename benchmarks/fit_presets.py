"""Fit the realistic presets: each preset's model (``eagle_spark.twin.published_model``) from
its published statistics (``eagle_spark.synth.PRESETS``: the paper's Table 1 counts, labels and
nonzeros per sample) with ``signal`` and ``shared`` fitted to Table 1's Oracle P@1 and P@5 / P@1
(``eagle_spark.twin.fit_published``: a ridge one-vs-all Oracle on a twin of 10,000 rows).

    python benchmarks/fit_presets.py                       # all four (about 40 min on 2 cores)
    python benchmarks/fit_presets.py --presets eurlex4k    # one; the file keeps the others

Writes the package data ``eagle_spark/data/presets.json`` that ``synth --preset`` reads (the
models and each fit's targets and steps) and prints a short table. No data set is read.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import print_table  # noqa: E402

from eagle_spark import twin  # noqa: E402
from eagle_spark.synth import PRESET_MODELS, PRESETS  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[1] / "eagle_spark" / "data" / PRESET_MODELS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=sorted(PRESETS), choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    data.update(
        {
            "generator": "eagle_spark.twin",
            "written_by": "benchmarks/fit_presets.py",
            "statistics": "eagle_spark.synth.PRESETS (the paper's Table 1)",
            "priors": {
                "cohesion": twin.PRIOR_COHESION,
                "nnz_log_sd": twin.PRIOR_NNZ_LOG_SD,
                "head": twin.PRIOR_HEAD,
            },
        }
    )
    presets = data.setdefault("presets", {})
    for name in args.presets:
        s = PRESETS[name]
        t0 = time.perf_counter()
        model = twin.published_model(
            s.n_train,
            s.n_test,
            s.n_features,
            s.n_labels,
            s.labels_per_sample,
            s.nnz_per_sample,
            source=f"preset {name} (published statistics)",
        )
        fitted, record = twin.fit_published(model, s.oracle_precision, seed=args.seed)
        presets[name] = {
            "model": fitted.to_json(),
            "fit": record,
            "fit_s": round(time.perf_counter() - t0, 1),
        }
        OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{name}: fitted in {presets[name]['fit_s']} s", flush=True)
    print_table(
        [
            {
                "preset": n,
                "signal": p["model"]["signal"],
                "shared": p["model"]["shared"],
                "P@1 target": p["fit"]["target P@1"],
                "P@1 reached": p["fit"]["reached P@1"],
                "P@5/P@1 target": p["fit"]["target P@5 / P@1"],
                "P@5/P@1 reached": p["fit"]["reached P@5 / P@1"],
                "fit s": p["fit_s"],
            }
            for n, p in sorted(presets.items())
        ]
    )


if __name__ == "__main__":
    main()
