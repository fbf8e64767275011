"""The README's main job as a user waits for it: `eagle-spark pipeline --conf conf/local.yaml
--compare` on the embedded Delicious pair, the whole command timed from process start to exit,
each stage's wall time from the run's own report, several runs, medians.

    python benchmarks/main_job.py                 # 3 runs -> benchmarks/reports/main_job.json
    python benchmarks/main_job.py --runs 1 --report main_job_once
    python benchmarks/main_job.py --set pipeline.methods_at_once=1 --report main_job_one_method_at_a_time
    python benchmarks/main_job.py --set spark.class_archive=none --report main_job_no_class_archive
    python benchmarks/main_job.py --set assign.weighting=hard --report main_job_hard
    python benchmarks/main_job.py --set spark.driver_jit=full --report main_job_jit_full
    python benchmarks/main_job.py --report main_job_steps     # a report of its own for the steps table
    python benchmarks/main_job.py --data synth:wiki325k:0.1 --runs 1 --set spark.driver_memory=8g
    python benchmarks/main_job.py --data synth:wiki325k:1.0 --runs 1 --set spark.driver_memory=12g

``--data synth:PRESET:SCALE[:DIFFICULTY]`` runs the same command on a synthetic pair instead of the
embedded Delicious (``pipeline.dataset`` / ``pipeline.test_dataset``: the whole test set is
predicted and evaluated); the pair is generated once by ``eagle-spark synth`` (seed 0) into
``WORK/data`` and reused by later runs (its generation is not part of any run's time), and the
report is ``main_job_synth_PRESET_SCALE`` unless ``--report`` names another.

Every run starts from an empty run folder (nothing is skipped by the pipeline's resume), in a
process of its own (the JVM's start is part of what a user waits for). The report has per run the
command's wall seconds, the pipeline's own total and the peak RSS and PSS of all its processes
(PSS counts a page that several processes map, such as the executor state, once); per stage the
median of its seconds over the runs, and from Spark's event log how many Spark jobs and stages it
ran, how long the driver waited on them (the rest of a stage's time is driver-side work: Python,
file commits, manifest reads) and the core-seconds their tasks worked (``task s``; above ``job s``
when the cores ran tasks side by side; the methods' stages overlap, so the stages' seconds add up to
more than the whole); under ``steps``, the same figures for the named steps inside a stage (the
Spark job descriptions ``eagle_spark.progress.job_step`` sets: ``assign.weighting=auto``'s held-out
split, each candidate's assignment, refinement rounds, proxy training and scoring, the winner's
figures); the CPU seconds of the command's processes by kind (the JVM's compiler threads, the rest
of the JVM, the Python workers, the driver's Python; ``cpu_s``); and the comparison table (P@1/3/5
per method) of the last run, which every run reproduces (the runs are seeded); each stage's status in
the last run (``ran``, or ``copied from`` the stage whose output it copied: see
:mod:`eagle_spark.pipeline`). Compare timings only within one report: this
machine's speed varies between days.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    CPUByKind,
    PeakRSS,
    event_log_overrides,
    jobs_by_description,
    main_job,
    print_table,
    stage_jobs,
    stage_steps,
    write_report,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_once(work: pathlib.Path, settings: list[str]) -> dict:
    """One whole `pipeline --compare` command into `work` (with `settings`, ``KEY=VALUE`` each),
    with Spark's event log beside it: its wall seconds, the run's report and comparison, peak RSS,
    and Spark jobs per pipeline stage."""
    shutil.rmtree(work, ignore_errors=True)
    events = work.parent / "events"
    shutil.rmtree(events, ignore_errors=True)
    overrides = [a for o in [*settings, *event_log_overrides(events)] for a in ("--set", o)]
    cpu, memory = CPUByKind(), PeakRSS(interval=1.0, pss=True)
    wall, peak, done = main_job(work, *overrides, cpu=cpu, memory=memory)
    if done.returncode != 0:
        sys.exit(f"the main job failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    report = json.loads((work / "report.json").read_text())
    comparison = json.loads((work / "comparison.json").read_text())
    logs = [p for p in events.iterdir()]
    if len(logs) != 1:
        sys.exit(f"{events}: expected the event log of one application, found {len(logs)}")
    app_id = logs[0].name.removeprefix("eventlog_v2_")
    return {
        "wall_s": round(wall, 1),
        "pipeline_s": round(report["seconds"], 1),
        "peak_rss_GB": round(peak / 2**30, 2),
        "peak_pss_GB": round(memory.peak_pss_bytes / 2**30, 2),
        "cpu_s": cpu.seconds,
        "stages": report["stages"],
        "comparison": comparison,
        "jobs": jobs_by_description(events, app_id),
    }


def synth_pair(spec: str, folder: pathlib.Path) -> tuple[list[str], str]:
    """The settings that point the pipeline at the synthetic pair of `spec`
    (``synth:PRESET:SCALE[:DIFFICULTY]``) and its description; the pair is generated into
    `folder` by ``eagle-spark synth`` (seed 0) unless a complete one is there already."""
    parts = spec.split(":")
    if len(parts) not in (3, 4) or parts[0] != "synth":
        sys.exit(f"--data {spec!r}: expected delicious or synth:PRESET:SCALE[:DIFFICULTY]")
    pair = folder / "_".join(parts[1:])
    if not all((pair / split / "_manifest.json").exists() for split in ("train", "test")):
        command = [
            sys.executable,
            "-m",
            "eagle_spark.cli",
            "synth",
            "--output",
            str(pair),
            "--preset",
            parts[1],
            "--scale",
            parts[2],
            "--seed",
            "0",
            "--overwrite",
            "--log-level",
            "WARNING",
            "--summary",
            str(folder / "synth_summary.json"),
            *(["--difficulty", parts[3]] if len(parts) == 4 else []),
        ]
        print(f"generating {spec} into {pair} (not timed)", flush=True)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"eagle-spark synth failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    manifest = json.loads((pair / "train" / "_manifest.json").read_text())
    shape = f"{manifest['n_samples']} train samples, {manifest['n_labels']} labels"
    return (
        [f"pipeline.dataset={pair / 'train'}", f"pipeline.test_dataset={pair / 'test'}"],
        f"{spec} (seed 0, {shape}), R-4",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=3, help="how many whole runs (default 3; medians over them)"
    )
    parser.add_argument(
        "--report",
        help="report name under benchmarks/reports (default main_job, with synthetic data "
        "main_job_synth_PRESET_SCALE)",
    )
    parser.add_argument(
        "--data",
        default="delicious",
        help="delicious (the embedded pair, default) or synth:PRESET:SCALE[:DIFFICULTY]",
    )
    parser.add_argument("--work", default="/tmp/eagle_main_job")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for every run, as the command's --set (repeatable; kept in the report)",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data_settings, data = [], "delicious (embedded), R-4"
    if args.data != "delicious":
        data_settings, data = synth_pair(args.data, work / "data")
    report = args.report or (
        "main_job" if args.data == "delicious" else "main_job_" + "_".join(args.data.split(":")[:3])
    )
    runs = []
    for i in range(args.runs):
        found = run_once(work / "run", [*data_settings, *args.set])
        runs.append(found)
        print(
            f"run {i + 1}/{args.runs}: {found['wall_s']} s (pipeline {found['pipeline_s']} s), "
            f"peak RSS {found['peak_rss_GB']} GB, PSS {found['peak_pss_GB']} GB",
            flush=True,
        )
    names = [s["stage"] for s in runs[0]["stages"]]

    def seconds(run: dict, name: str) -> float:
        return next(s["seconds"] for s in run["stages"] if s["stage"] == name)

    def median_of(name: str, key: str) -> float:
        return round(statistics.median(stage_jobs(r["jobs"], name)[key] for r in runs), 2)

    steps = []
    for name in names:
        found = [stage_steps(r["jobs"], name) for r in runs]
        for step in found[-1]:
            steps.append(
                {"stage": name, "step": step}
                | {
                    key: round(statistics.median(f.get(step, {}).get(key, 0) for f in found), 2)
                    for key in ("spark jobs", "job s", "task s")
                }
            )

    def status(name: str) -> str:  # ran, or copied from another stage (the last run's)
        row = next(s for s in runs[-1]["stages"] if s["stage"] == name)
        return row["status"] + (f" from {row['copied_from']}" if row.get("copied_from") else "")

    stages = [
        {
            "stage": name,
            "status": status(name),
            "median s": round(statistics.median(seconds(r, name) for r in runs), 1),
            "runs s": [seconds(r, name) for r in runs],
            "spark jobs": median_of(name, "spark jobs"),
            "spark stages": median_of(name, "spark stages"),
            "job s": median_of(name, "job s"),
            "task s": median_of(name, "task s"),
        }
        for name in names
    ]
    methods = runs[-1]["comparison"]["methods"]

    def total(run: dict, key: str) -> float:
        return sum(v[key] for v in run["jobs"].values())

    rows = [
        {
            "stage": "whole command",
            "median s": round(statistics.median(r["wall_s"] for r in runs), 1),
            "runs s": [r["wall_s"] for r in runs],
            "spark jobs": statistics.median(total(r, "spark jobs") for r in runs),
            "spark stages": statistics.median(total(r, "spark stages") for r in runs),
            "job s": round(statistics.median(total(r, "job s") for r in runs), 2),
            "task s": round(statistics.median(total(r, "task s") for r in runs), 2),
        }
    ] + stages
    cpu_s = {
        kind: round(statistics.median(r["cpu_s"][kind] for r in runs), 1)
        for kind in CPUByKind.KINDS
    }
    write_report(
        report,
        rows,
        {
            "command": " ".join(
                ["eagle-spark pipeline --conf conf/local.yaml --compare"]
                + [f"--set {o}" for o in [*data_settings, *args.set]]
            ),
            "data": data,
            "runs": args.runs,
            "median_wall_s": rows[0]["median s"],
            "median_pipeline_s": round(statistics.median(r["pipeline_s"] for r in runs), 1),
            "peak_rss_GB": max(r["peak_rss_GB"] for r in runs),
            "peak_pss_GB": max(r["peak_pss_GB"] for r in runs),
            "cpu_s": cpu_s,
            "steps": steps,
            "comparison": {
                m: {
                    "P@1": v["P_percent"][0],
                    "P@3": v["P_percent"][2],
                    "P@5": v["P_percent"][4],
                    "assignment precision": v["assignment_precision_percent"],
                }
                for m, v in methods.items()
            },
        },
    )
    print("\nCPU seconds of the command's processes by kind (medians):")
    print_table([cpu_s | {"all": round(sum(cpu_s.values()), 1)}])
    print("\nsteps inside the stages (medians; a step's figures include its inner steps'):")
    print_table(steps)


if __name__ == "__main__":
    main()
