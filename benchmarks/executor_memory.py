"""Benchmark: memory of train and predict against the number of task slots (executor state).

    python benchmarks/executor_memory.py [--scale 0.05] [--slots 1 4] [--model tree]
        [--steps train predict] [--test-rows N] [--workdir /tmp/eagle-bench-memory] [--code DIR]
        [--name executor_memory] [--evaluate] [--driver-memory 6g] [--set KEY=VALUE ...]

Synthetic Wiki-325K at `--scale` (the preset, made once in the workdir; the report's `generator`
comes from the data's manifest, so data a planted generator made is named so); for each c in
`--slots`, ``eagle-spark train`` then ``eagle-spark predict`` (the model trained at the first c,
so every prediction uses the same model) run as their own processes with
``--set spark.master=local[c]``. While each runs, the proportional set size (PSS: shared pages
divided among the processes that map them, so a page cache copy mapped by four workers counts
once) of the command's whole process tree (driver, JVM, Python workers) is sampled every 0.2 s;
the report gives the peak of the sum, the peak of the Python workers' sum, their peak count, and
the ratio of each to the first `--slots` value. `--code DIR` runs another checkout of the library
(e.g. a git worktree of an older commit) for a before/after comparison. With `--steps predict`
only, the model is trained once at local[2] (not measured; reused across runs of the same scale);
`--test-rows N` predicts the first N test samples only. `--steps hold` measures the loaders
alone: c plain processes (no Spark) load the tree model (as prediction tasks do) or X and Y (as
training tasks do) with the checkout's code, touch every page, and the sum of their PSS is taken
once all hold it. `--evaluate` adds, after each prediction, ``eagle-spark evaluate`` of it against
the test set's Y (P@1/3/5, nDCG@5, PSP@5 with the Wikipedia propensities A = 0.5, B = 0.4 and the
train set's label frequencies), timed and sampled the same way, its metrics in the report row.
`--set KEY=VALUE` (repeatable) passes a setting to the measured train and predict commands, e.g.
``--set tree.heavy_unit_memory=64m`` to measure a fixed heavy-unit bound rather than ``auto``.

Target (executor-state issue): peak PSS at local[4] / local[1] <= 1.5 for train and for predict.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import psutil

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import folder_bytes, generator, write_report  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pss(proc: psutil.Process) -> int:
    try:
        return int(proc.memory_full_info().pss)
    except (psutil.Error, AttributeError):
        return 0


def _is_python_worker(proc: psutil.Process) -> bool:
    try:
        return "pyspark.daemon" in " ".join(proc.cmdline()) or "pyspark/daemon" in " ".join(
            proc.cmdline()
        )
    except psutil.Error:
        return False


def measure(args: list[str], env: dict, log: pathlib.Path, cwd: str, every: float = 0.2) -> dict:
    """Run `args` in `cwd`, sampling the PSS of its process tree every `every` seconds; returns
    seconds and peaks (MB). Reading PSS walks each process's page map, so with gigabytes mapped a
    sample costs ~0.1 s of CPU: sample less often for long runs (--sample-every).

    `cwd` must be the checkout whose code runs: ``python -m`` and ``-c`` put the working folder
    first on sys.path, before PYTHONPATH (Spark's local-mode workers start there too)."""
    peak = {"total": 0, "workers": 0, "n_workers": 0}
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    root = psutil.Process(proc.pid)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                tree = []
            workers = [p for p in tree if _is_python_worker(p)]
            total = sum(_pss(p) for p in tree)
            peak["total"] = max(peak["total"], total)
            peak["workers"] = max(peak["workers"], sum(_pss(p) for p in workers))
            peak["n_workers"] = max(peak["n_workers"], len(workers))
            done.wait(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    code = proc.wait()
    done.set()
    thread.join()
    if code != 0:
        raise RuntimeError(f"{' '.join(args)} exited with {code}; see {log}")
    return {
        "seconds": round(time.monotonic() - started, 1),
        "peak_pss_mb": round(peak["total"] / 2**20, 1),
        "peak_worker_pss_mb": round(peak["workers"] / 2**20, 1),
        "python_workers": peak["n_workers"],
    }


def _n_samples(dataset: pathlib.Path) -> int:
    """The number of samples a local dataset's manifest states."""
    return int(json.loads((dataset / "_manifest.json").read_text())["n_samples"])


def _prefix(dataset: pathlib.Path, out: pathlib.Path, n: int) -> pathlib.Path:
    """The first `n` samples (by sample_id) of a local dataset, as a dataset of their own."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if (out / "_manifest.json").exists():
        return out
    for table in ("X", "Y"):
        t = pq.read_table(dataset / table)
        t = t.filter(pc.less(t["sample_id"], n)).sort_by("sample_id")
        (out / table).mkdir(parents=True, exist_ok=True)
        parts = 16  # small files: Spark makes several partitions of them, one task per slot
        for k in range(parts):
            lo, hi = k * t.num_rows // parts, (k + 1) * t.num_rows // parts
            pq.write_table(t.slice(lo, hi - lo), out / table / f"part-{k:02d}.parquet")
    manifest = json.loads((dataset / "_manifest.json").read_text())
    (out / "_manifest.json").write_text(json.dumps({**manifest, "n_samples": n}))
    return out


HOLD = """
import json, sys, time
from eagle_spark.io.parts import load_xy
from eagle_spark.classifiers.tree import load_model
what, path = sys.argv[1], sys.argv[2]
if what == "model":
    mats = [W for _, W, _ in load_model(path, json.load(open(path + "/metadata.json")))]
else:
    manifest = json.load(open(path + "/_manifest.json"))
    _, X, Y = load_xy(path, manifest["n_features"], manifest["n_labels"], True)
    mats = [X, Y]
touched = sum(float(M.data.sum()) + int(M.indices.sum()) + int(M.indptr.sum()) for M in mats)
print("held", flush=True)
time.sleep(600)
"""


def hold(code: str, what: str, path: pathlib.Path, n: int, state: pathlib.Path) -> dict:
    """`n` processes load `what` (``model``: a tree model as prediction tasks do; ``xy``: X and Y
    as training tasks do) with `code`'s loaders and touch every page; the sum of their PSS."""
    import shutil

    shutil.rmtree(state, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": code, "EAGLE_SPARK_STATE_DIR": str(state)}
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HOLD, what, str(path)],
            env=env,
            cwd=code,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "held":
                raise RuntimeError(f"a {what} holder failed")
        pss = [psutil.Process(p.pid).memory_full_info().pss for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(state, ignore_errors=True)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "peak_pss_mb": round(sum(pss) / 2**20, 1),
        "peak_worker_pss_mb": round(sum(pss) / 2**20, 1),
        "python_workers": n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--model", choices=["tree", "ova"], default="tree")
    ap.add_argument("--workdir", default="/tmp/eagle-bench-memory")
    ap.add_argument("--code", default=str(ROOT), help="checkout whose eagle_spark to run")
    ap.add_argument("--name", default="executor_memory", help="report name")
    ap.add_argument(
        "--steps", nargs="+", choices=["train", "predict", "hold"], default=["train", "predict"]
    )
    ap.add_argument(
        "--test-rows", type=int, default=0, help="predict the first N test rows (0: all)"
    )
    ap.add_argument(
        "--evaluate", action="store_true", help="evaluate every prediction (P@k, nDCG@k, PSP@k)"
    )
    ap.add_argument(
        "--driver-memory", default="6g", help="spark.driver_memory of the measured commands"
    )
    ap.add_argument("--sample-every", type=float, default=0.2, help="seconds between PSS samples")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="settings",
        help="a setting for the measured commands (repeatable), e.g. tree.heavy_unit_memory=64m",
    )
    args = ap.parse_args()

    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": args.code, "PYSPARK_PYTHON": sys.executable}
    cli = [sys.executable, "-m", "eagle_spark"]
    data = work / f"wiki325k_{args.scale}"
    if not (data / "_manifest.json").exists():
        subprocess.run(
            [*cli, "synth", "--output", str(data), "--scale", str(args.scale), "--overwrite"],
            env=env,
            check=True,
            cwd=args.code,
            stdout=subprocess.DEVNULL,
        )
    # the manifest says which generator made the data: a planted one records its difficulty
    difficulty = json.loads((data / "_manifest.json").read_text())["parameters"].get("difficulty")
    test = data / "test"
    if args.test_rows:
        test = _prefix(data / "test", work / f"test_{args.scale}_{args.test_rows}", args.test_rows)
    rows = []
    model = None
    if "train" not in args.steps:
        model = work / f"model_{args.model}_{args.scale}"
        if not (model / "metadata.json").exists():
            subprocess.run(
                [
                    *cli,
                    "train",
                    "--input",
                    str(data / "train"),
                    "--output",
                    str(model),
                    "--model",
                    args.model,
                    "--overwrite",
                    "--set",
                    "spark.master=local[2]",
                    "--set",
                    "spark.driver_memory=8g",
                ],
                env=env,
                check=True,
                cwd=args.code,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
    for slots in args.slots:
        master = [
            "--set",
            f"spark.master=local[{slots}]",
            "--set",
            f"spark.driver_memory={args.driver_memory}",
            *[arg for kv in args.settings for arg in ("--set", kv)],
        ]
        if "train" in args.steps:
            out = work / f"model_{args.name}_{slots}"
            row = measure(
                [
                    *cli,
                    "train",
                    "--input",
                    str(data / "train"),
                    "--output",
                    str(out),
                    "--model",
                    args.model,
                    "--overwrite",
                    *master,
                ],
                env,
                work / f"train_{slots}.log",
                args.code,
                args.sample_every,
            )
            rows.append(
                {
                    "step": "train",
                    "slots": slots,
                    **row,
                    "model_mb": round(folder_bytes(out) / 2**20, 1),
                }
            )
            model = model or out
        if "predict" in args.steps:
            pred = work / f"pred_{args.name}_{slots}"
            row = measure(
                [
                    *cli,
                    "predict",
                    "--model",
                    str(model),
                    "--input",
                    str(test),
                    "--output",
                    str(pred),
                    "--overwrite",
                    *master,
                ],
                env,
                work / f"predict_{slots}.log",
                args.code,
                args.sample_every,
            )
            rows.append(
                {
                    "step": "predict",
                    "slots": slots,
                    **row,
                    "test_rows": _n_samples(test),
                    "model_mb": round(folder_bytes(model) / 2**20, 1),
                }
            )
            if args.evaluate:
                summary = work / f"metrics_{args.name}_{slots}.json"
                row = measure(
                    [
                        *cli,
                        "evaluate",
                        "--predictions",
                        str(pred),
                        "--input",
                        str(test),
                        "--propensity-a",
                        "0.5",
                        "--propensity-b",
                        "0.4",
                        "--propensity-from",
                        str(data / "train"),
                        "--summary",
                        str(summary),
                        *master,
                    ],
                    env,
                    work / f"evaluate_{slots}.log",
                    args.code,
                    args.sample_every,
                )
                m = json.loads(summary.read_text())
                rows.append(
                    {
                        "step": "evaluate",
                        "slots": slots,
                        **row,
                        "test_rows": m["n_samples"],
                        **{f"P@{k}": round(100 * m["P"][k - 1], 2) for k in (1, 3, 5)},
                        "nDCG@5": round(100 * m["nDCG"][4], 2),
                        "PSP@5": round(100 * m["PSP"][4], 2),
                    }
                )
    if "hold" in args.steps:  # the loaders alone: c processes holding the model / X and Y
        model = model or work / f"model_{args.model}_{args.scale}"
        for what, path in (("model", model), ("xy", data / "train")):
            for slots in args.slots:
                rows.append(
                    {
                        "step": f"hold_{what}",
                        "slots": slots,
                        **hold(args.code, what, path, slots, work / "hold_state"),
                        "model_mb": round(folder_bytes(model) / 2**20, 1),
                    }
                )
    for row in rows:
        base = next(r for r in rows if r["step"] == row["step"] and r["slots"] == args.slots[0])
        row["pss_ratio"] = round(row["peak_pss_mb"] / base["peak_pss_mb"], 2)
        row["worker_pss_ratio"] = round(
            row["peak_worker_pss_mb"] / max(base["peak_worker_pss_mb"], 1e-9), 2
        )
    git = subprocess.run(
        ["git", "-C", args.code, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    write_report(
        args.name,
        rows,
        {
            "scale": args.scale,
            "generator": generator(difficulty),
            "model": args.model,
            "code": git,
            "test_rows": args.test_rows or "all",
            "settings": args.settings,
            "target": "peak PSS local[4] / local[1] <= 1.5",
        },
    )


if __name__ == "__main__":
    main()
