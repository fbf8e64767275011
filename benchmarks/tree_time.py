"""Where the label tree's training time goes: the whole ``train --model tree`` command by step, and
its classifiers' solver by kind of unit.

    python benchmarks/tree_time.py --dataset /tmp/eagle_main_job/run/assigned/baseline --report tree_time_delicious
    python benchmarks/tree_time.py --dataset /tmp/eagle-bench-peers/wiki325k_0.05_train --report tree_time_wiki325k_0.05

``--dataset``: a training set with X and Y (``pipeline --compare`` leaves the Baseline's under
``assigned/baseline`` of its run folder, ``benchmarks/peers.py`` the ingested ones under its
workdir); without label weights (weighted assignment's rankers train on another problem).

1. **The command**: ``eagle-spark train --model tree`` (default settings, local[``--cores``]) in a
   process of its own, from start to exit, with Spark's event log on. Rows per step of the
   training (``job_step``: training set, indexer, rankers' cost, unit sizes, units): Spark jobs,
   the seconds the driver waited on them (``job s``) and the tasks' core-seconds (``task s``);
   ``outside Spark jobs`` is the rest of the command (process and JVM start, the driver's own
   work, writing and committing the model, stopping).
2. **The solver**: the units of the trained model's first tree trained again in this process, one
   after the other on one core, from the same X / Y (no Spark), each liblinear call timed. Rows
   per kind of unit: the matchers of units holding at least 1/8 of the samples (the top levels),
   the other matchers, the rankers (leaf units); per row the classifiers, the nonzeros they were
   given (summed over calls), the seconds in liblinear, nanoseconds per nonzero, and the seconds
   when every call stops after one pass (liblinear's copy of the rows plus one pass: the cost a
   call pays whatever its passes). ``units s`` is the units' whole time (Python included).

Writes ``benchmarks/reports/<report>.json`` and prints both tables.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    event_log_overrides,
    jobs_by_description,
    only_app_id,
    print_table,
    stage_steps,
    write_report,
)

STEPS = ("training set", "indexer", "rankers' cost", "unit sizes", "units")
TOP_SHARE = 8
"""A matcher counts as a top-level one when its unit holds at least 1 / TOP_SHARE of the samples."""


def command(dataset: str, work: pathlib.Path, cores: int) -> tuple[float, list[dict]]:
    """Run and time the train command; (seconds, rows per step).

    Raises:
        SystemExit: the command failed (the end of its stderr is shown) or wrote no event log.
    """
    events = work / "events"
    shutil.rmtree(events, ignore_errors=True)
    overrides = [f"spark.master=local[{cores}]", "spark.driver_memory=8g"]
    overrides += event_log_overrides(events)
    args = [sys.executable, "-m", "eagle_spark.cli", "train", "--model", "tree"]
    args += ["--input", dataset, "--output", str(work / "model"), "--overwrite"]
    args += [a for o in overrides for a in ("--set", o)] + ["--log-level", "WARNING"]
    t0 = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    steps = stage_steps(jobs_by_description(events, only_app_id(events)), "train")
    unknown = sorted(set(steps) - set(STEPS) - {"(stage itself)"})
    if unknown or not steps:
        sys.exit(f"{events}: Spark jobs of steps this benchmark does not know: {unknown or steps}")
    rows = [{"step": step, **steps[step]} for step in (*STEPS, "(stage itself)") if step in steps]
    waited = sum(r["job s"] for r in rows)
    rows.append(
        {
            "step": "outside Spark jobs",
            "spark jobs": 0,
            "spark stages": 0,
            "job s": round(seconds - waited, 2),
            "task s": 0.0,
        }
    )
    rows.append(
        {
            "step": "whole command",
            "spark jobs": sum(r["spark jobs"] for r in rows),
            "spark stages": sum(r["spark stages"] for r in rows),
            "job s": round(seconds, 2),
            "task s": round(sum(r["task s"] for r in rows), 2),
        }
    )
    return seconds, rows


def solver(dataset: str, model: pathlib.Path) -> tuple[list[dict], dict]:
    """Train the first tree's units of `model` again on `dataset`, timing each liblinear call;
    (rows per kind of unit, totals).

    Raises:
        SystemExit: the dataset has label weights.
    """
    import numpy as np
    import pyarrow.parquet as pq

    import eagle_spark.classifiers.linear as linear
    from eagle_spark.classifiers.tree.structure import Tree
    from eagle_spark.classifiers.tree.units import train_unit, unit_rows
    from eagle_spark.io.parts import load_xy
    from eagle_spark.settings import TreeSettings

    meta = json.loads((model / "metadata.json").read_text())
    if meta.get("label_weights"):
        sys.exit(f"{dataset}: has label weights; give a training set without them")
    params = TreeSettings(**{**meta["params"], "C": meta["ranker_C"]})
    # the X / Y the training tasks load (outside Spark: a temporary folder this process removes)
    _, X, Y = load_xy(dataset, meta["n_features"], meta["n_labels"], params.normalize)
    table = pq.read_table(model / "data" / "tree_0")
    parent = np.full(table.num_rows, -1, dtype=np.int64)
    parent[table.column("node_id").to_numpy()] = table.column("parent_id").to_numpy()
    tree = Tree(parent, np.zeros(len(parent)), meta["n_clusters"][0], meta["n_labels"])
    under = tree.labels_under()
    units = [n for n in range(tree.n_clusters) if len(tree.children_of(n))]
    real_fit, calls = linear._direct_fit, []
    state = {"kind": "", "one_pass": False}

    def timed_fit(Xc, y, loss, C, max_iter, tol, seed, sample_weight):
        t = time.perf_counter()
        out = real_fit(
            Xc, y, loss, C, 1 if state["one_pass"] else max_iter, tol, seed, sample_weight
        )
        calls.append((state["kind"], Xc.nnz, time.perf_counter() - t))
        return out

    def kind(node: int, rows: int) -> str:
        if tree.is_leaf_cluster(node):
            return "rankers"
        return "matchers, top levels" if rows * TOP_SHARE >= X.shape[0] else "matchers, below"

    linear._direct_fit = timed_fit
    try:
        runs = {}
        for one_pass in (False, True):
            state["one_pass"], calls[:] = one_pass, []
            t0 = time.perf_counter()
            for node in units:
                active = unit_rows(under, X, Y, node)
                state["kind"] = kind(node, len(active))
                train_unit(tree, under, X, Y, node, params, active=active)
            runs[one_pass] = (time.perf_counter() - t0, list(calls))
    finally:
        linear._direct_fit = real_fit
    (units_s, full), (_, once) = runs[False], runs[True]
    out = []
    for name in ("matchers, top levels", "matchers, below", "rankers"):
        mine = [c for c in full if c[0] == name]
        if not mine:
            continue
        nnz, secs = sum(c[1] for c in mine), sum(c[2] for c in mine)
        out.append(
            {
                "unit kind": name,
                "classifiers": len(mine),
                "nonzeros": nnz,
                "liblinear s": round(secs, 2),
                "ns per nonzero": round(secs / max(nnz, 1) * 1e9, 2),
                "one pass s": round(sum(c[2] for c in once if c[0] == name), 2),
            }
        )
    totals = {
        "units s": round(units_s, 2),
        "liblinear s": round(sum(c[2] for c in full), 2),
        "units": len(units),
    }
    return out, totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="a training set folder with X and Y")
    parser.add_argument(
        "--report", required=True, help="report name (benchmarks/reports/<name>.json)"
    )
    parser.add_argument("--cores", type=int, default=2, help="the command's local[N]")
    parser.add_argument("--workdir", default="/tmp/eagle-bench-tree-time")
    args = parser.parse_args()
    if not pathlib.Path(args.dataset, "X").exists():
        parser.error(f"--dataset {args.dataset}: no X table there")
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    seconds, steps = command(args.dataset, work, args.cores)
    print_table(steps)
    kinds, totals = solver(args.dataset, work / "model")
    write_report(
        args.report,
        kinds,
        {
            "dataset": args.dataset,
            "cores": args.cores,
            "command": "eagle-spark train --model tree (default settings)",
            "command_s": round(seconds, 2),
            "steps": steps,
            "solver": {
                "tree": 0,
                "top_share": f"1/{TOP_SHARE}",
                **totals,
            },
        },
    )


if __name__ == "__main__":
    main()
