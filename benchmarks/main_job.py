"""The README's main job as a user waits for it: `eagle-spark pipeline --conf conf/local.yaml
--compare` on the embedded Delicious pair, the whole command timed from process start to exit,
each stage's wall time from the run's own report, several runs, medians.

    python benchmarks/main_job.py                 # 3 runs -> benchmarks/reports/main_job.json
    python benchmarks/main_job.py --runs 1 --report main_job_once
    python benchmarks/main_job.py --set pipeline.methods_at_once=1 --report main_job_one_method_at_a_time
    python benchmarks/main_job.py --set spark.class_archive=none --report main_job_no_class_archive
    python benchmarks/main_job.py --set assign.weighting=hard --report main_job_hard
    python benchmarks/main_job.py --set spark.driver_jit=full --report main_job_jit_full
    python benchmarks/main_job.py --set "assign.candidates=[baseline, soft-0.3+r1]" --report main_job_in_sample
    python benchmarks/main_job.py --report main_job_steps     # a report of its own for the steps table
    python benchmarks/main_job.py --data synth:wiki325k:0.1 --runs 1 --set spark.driver_memory=8g
    python benchmarks/main_job.py --data synth:wiki325k:1.0 --runs 1 --set spark.driver_memory=12g
    python benchmarks/main_job.py --data synth:wiki325k:1.0 --runs 1 --set spark.driver_memory=12g --stop-after 7200
    python benchmarks/main_job.py --data synth:wiki325k:0.1 --runs 1 --oracle --set spark.driver_memory=8g

The reports ``main_job_one_method_at_a_time``, ``main_job_no_class_archive`` and
``main_job_jit_full`` ran with ``auto``'s refined round in-sample (add ``--set
"assign.candidates=[baseline, soft-0.3+r1]"`` to remake them); docs/design.md compares them with
``main_job_in_sample``, the main job with those candidates.

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

With ``--oracle`` (synthetic data) the Oracle, the same classifier trained on the true Y, is
trained, predicts and is evaluated after the runs by the ``train``, ``predict`` and ``evaluate``
commands (each timed, with its peak RSS), and the report has each method's P@1 and P@5 over the
Oracle's (``to_oracle``). Every report of a complete run has, per method ``auto`` chose for, the
candidate it chose and its selection's seconds against the winner's own training
(``selection``).

With ``--stop-after SECONDS`` (one run) a command still running then is stopped (its whole process
group) and the report says ``complete: false``: the stages it finished, from the run's stage
records, with the one it stopped in (``stopped``, no seconds; its Spark jobs so far counted), the
peaks and CPU up to the stop, and per method what is known (the assignment's precision once
assigned, P@k once evaluated).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

from eagle_spark.progress import STEP_SEPARATOR

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    CPUByKind,
    PeakRSS,
    event_log_overrides,
    jobs_by_description,
    main_job,
    only_app_id,
    print_table,
    stage_jobs,
    stage_steps,
    write_report,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_once(work: pathlib.Path, settings: list[str], stop_after: float | None = None) -> dict:
    """One whole `pipeline --compare` command into `work` (with `settings`, ``KEY=VALUE`` each),
    with Spark's event log beside it: its wall seconds, the run's report and comparison, peak RSS,
    and Spark jobs per pipeline stage. With `stop_after` (seconds) a command still running then is
    stopped, and what it finished is read from the run folder (:func:`stopped_run`)."""
    shutil.rmtree(work, ignore_errors=True)
    events = work.parent / "events"
    shutil.rmtree(events, ignore_errors=True)
    overrides = [a for o in [*settings, *event_log_overrides(events)] for a in ("--set", o)]
    cpu, memory = CPUByKind(), PeakRSS(interval=1.0, pss=True)
    wall, peak, done, stopped = main_job(
        work, *overrides, cpu=cpu, memory=memory, stop_after=stop_after
    )
    if done.returncode != 0 and not stopped:
        sys.exit(f"the main job failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    jobs = jobs_by_description(events, only_app_id(events), until=time.time() if stopped else None)
    if stopped:
        stages, comparison = stopped_run(work, jobs)
        pipeline_s = None
    else:
        report = json.loads((work / "report.json").read_text())
        stages, pipeline_s = report["stages"], round(report["seconds"], 1)
        comparison = json.loads((work / "comparison.json").read_text())
    return {
        "stopped": stopped,
        "wall_s": round(wall, 1),
        "pipeline_s": pipeline_s,
        "peak_rss_GB": round(peak / 2**30, 2),
        "peak_pss_GB": round(memory.peak_pss_bytes / 2**30, 2),
        "cpu_s": cpu.seconds,
        "stages": stages,
        "comparison": comparison,
        "jobs": jobs,
    }


def stopped_run(work: pathlib.Path, jobs: dict) -> tuple[list[dict], dict]:
    """What a stopped run in `work` finished: its stages in the order they finished, from the
    pipeline's stage records (``_stages/<stage>.json``: seconds, ``ran`` or ``copied`` from
    another stage), then each stage that had Spark jobs in `jobs` (:func:`jobs_by_description`)
    but no record, ``stopped`` with no seconds; and the comparison (as ``comparison.json``'s) of
    what is known per method: its assignment's precision once assigned, P@k once evaluated."""
    from eagle_spark.comparison import percent_row

    records = sorted(
        (json.loads(p.read_text()) for p in (work / "_stages").glob("*.json")),
        key=lambda r: r["finished_at"],
    )
    stages = [
        {
            "stage": r["stage"],
            "status": "ran" if r["copied_from"] is None else "copied",
            "seconds": r["seconds"],
            **({"copied_from": r["copied_from"]} if r["copied_from"] else {}),
        }
        for r in records
    ]
    finished = {r["stage"] for r in records}
    for name in dict.fromkeys(k.split(STEP_SEPARATOR)[0] for k in jobs):
        if name not in finished and name not in ("", "pipeline"):
            stages.append({"stage": name, "status": "stopped", "seconds": None})
    summaries = {r["stage"]: r["summary"] for r in records}
    methods = {
        stage.removeprefix("assign_"): percent_row(
            summaries.get("evaluate_" + stage.removeprefix("assign_")), summary.get("quality")
        )
        for stage, summary in summaries.items()
        if stage.startswith("assign_")
    }
    return stages, {"methods": methods}


def synth_pair(spec: str, folder: pathlib.Path) -> tuple[list[str], str]:
    """The settings that point the pipeline at the synthetic pair of `spec`
    (``synth:PRESET:SCALE[:DIFFICULTY]``) and its description; the pair is generated into
    `folder` by ``eagle-spark synth`` (seed 0) unless a complete one is there already."""
    parts = spec.split(":")
    if len(parts) not in (3, 4) or parts[0] != "synth":
        sys.exit(f"--data {spec!r}: expected delicious or synth:PRESET:SCALE[:DIFFICULTY]")
    pair = folder / ("_".join(parts[1:]) + ("" if len(parts) == 4 else "_realistic"))
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
    generator = (
        f"planted generator, difficulty {parts[3]}" if len(parts) == 4 else "realistic preset"
    )
    return (
        [f"pipeline.dataset={pair / 'train'}", f"pipeline.test_dataset={pair / 'test'}"],
        f"{spec} ({generator}, seed 0, {shape}), R-4",
    )


def oracle_run(settings: list[str], work: pathlib.Path) -> dict:
    """The Oracle beside the compared methods: ``eagle-spark train`` on the training set's true Y
    (the pipeline's dataset, not aggregated), ``predict`` and ``evaluate`` on its test set, each a
    whole command (``conf/local.yaml`` and the pipeline's `settings` but the dataset's), timed;
    P@1/3/5 in percent and the peak RSS of all processes of each command."""
    given = dict(o.split("=", 1) for o in settings)
    train, test = given.get("pipeline.dataset"), given.get("pipeline.test_dataset")
    if not train or not test:
        sys.exit("--oracle needs a pair with true labels (--data synth:...)")
    rest = [a for o in settings if not o.startswith("pipeline.") for a in ("--set", o)]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    base = [sys.executable, "-m", "eagle_spark.cli", "--conf", "conf/local.yaml", *rest]
    steps = {
        "train": ["train", "--input", train, "--output", str(work / "model")],
        "predict": [
            "predict",
            "--model",
            str(work / "model"),
            "--input",
            test,
            "--output",
            str(work / "predictions"),
        ],
        "evaluate": [
            "evaluate",
            "--predictions",
            str(work / "predictions"),
            "--input",
            test,
            "--output",
            str(work / "metrics"),
        ],
    }
    out: dict = {"seconds": {}, "peak_rss_GB": {}}
    for name, args in steps.items():
        memory = PeakRSS(interval=1.0)
        t0 = time.perf_counter()
        with memory:
            done = subprocess.run(
                [*base, "--log-level", "WARNING", *args], cwd=ROOT, capture_output=True, text=True
            )
        if done.returncode != 0:
            sys.exit(f"oracle {name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        out["seconds"][name] = round(time.perf_counter() - t0, 1)
        out["peak_rss_GB"][name] = round(memory.peak_bytes / 2**30, 2)
    metrics = json.loads((work / "metrics" / "metrics.json").read_text())
    out.update({f"P@{k}": round(100 * metrics["P"][k - 1], 2) for k in (1, 3, 5)})
    return out


def selection_costs(run_folder: pathlib.Path, steps: list[dict], stages: list[dict]) -> dict:
    """Per method that ``assign.weighting=auto`` chose for: the candidate chosen (its assignment's
    manifest), the seconds its selection's Spark jobs took (the ``select ...`` steps of its assign
    stage, inner steps not counted twice) and the seconds of the winner's own training (its
    train stage, or the stage that one was copied from), and their ratio; the same in Spark task
    seconds (core-seconds: when the methods' stages run side by side, a job's wall seconds include
    waiting for the cores the other method holds, its task seconds do not)."""
    out = {}
    by_stage = {s["stage"]: s for s in stages}
    for stage in by_stage:
        if not stage.startswith("assign_"):
            continue
        method = stage.removeprefix("assign_")
        manifest = run_folder / "assigned" / method / "_manifest.json"
        record = json.loads(manifest.read_text()).get("selection") if manifest.exists() else None
        if not record:
            continue
        select = [
            s
            for s in steps
            if s["stage"] == stage and s["step"].startswith("select ") and " / " not in s["step"]
        ]
        select_s = sum(s["job s"] for s in select)
        select_task_s = sum(s["task s"] for s in select)
        train = by_stage.get("train_" + method, {})
        source = train.get("status", "").removeprefix("copied from ").strip()
        if source and source in by_stage:
            train = by_stage[source]
        train_s = train.get("median s")
        out[method] = {
            "chose": record.get("chosen"),
            "selection job s": round(select_s, 1),
            "winner's training s": train_s,
            "selection / training": round(select_s / train_s, 3) if train_s else None,
            "selection task s": round(select_task_s, 1),
            "winner's training task s": train.get("task s"),
            "selection / training, task s": (
                round(select_task_s / train["task s"], 3) if train.get("task s") else None
            ),
        }
    return out


def summarise(
    name: str,
    runs: list[dict],
    command: str,
    data: str,
    extra: dict | None = None,
    run_folder: pathlib.Path | None = None,
) -> None:
    """Write report `name` from `runs` (:func:`run_once`'s, one or more of the same `command` on
    `data`) and print its tables: per stage the medians over the runs, the steps inside the
    stages, CPU by process kind, the last run's comparison. A stopped run (one alone) gives the
    stages it finished and ``complete`` false; a stage it stopped in has no seconds. A run's
    ``cpu_s`` or ``peak_pss_GB`` None (not sampled) makes the report's None. `extra` is added to
    the report as it is; with `run_folder` (the last run's) the report has ``selection``
    (:func:`selection_costs`)."""
    stopped = any(r["stopped"] for r in runs)
    if stopped and len(runs) > 1:
        raise ValueError("a stopped run is reported alone (--stop-after takes --runs 1)")
    names = [s["stage"] for s in runs[0]["stages"]]

    def seconds(run: dict, name: str) -> float | None:
        return next(s["seconds"] for s in run["stages"] if s["stage"] == name)

    def median_of(name: str, key: str) -> float:
        return round(statistics.median(stage_jobs(r["jobs"], name)[key] for r in runs), 2)

    steps = []
    for stage in names:
        found = [stage_steps(r["jobs"], stage) for r in runs]
        for step in found[-1]:
            steps.append(
                {"stage": stage, "step": step}
                | {
                    key: round(statistics.median(f.get(step, {}).get(key, 0) for f in found), 2)
                    for key in ("spark jobs", "job s", "task s")
                }
            )

    def status(name: str) -> str:  # ran, copied from another stage (the last run's), stopped
        row = next(s for s in runs[-1]["stages"] if s["stage"] == name)
        return row["status"] + (f" from {row['copied_from']}" if row.get("copied_from") else "")

    def median_seconds(name: str) -> float | None:
        found = [seconds(r, name) for r in runs]
        return None if None in found else round(statistics.median(found), 1)  # type: ignore[type-var]

    stages = [
        {
            "stage": stage,
            "status": status(stage),
            "median s": median_seconds(stage),
            "runs s": [seconds(r, stage) for r in runs],
            "spark jobs": median_of(stage, "spark jobs"),
            "spark stages": median_of(stage, "spark stages"),
            "job s": median_of(stage, "job s"),
            "task s": median_of(stage, "task s"),
        }
        for stage in names
    ]
    methods = runs[-1]["comparison"]["methods"]

    def total(run: dict, key: str) -> float:
        return sum(v[key] for v in run["jobs"].values())

    rows = [
        {
            "stage": "whole command" + (" (stopped)" if stopped else ""),
            "median s": round(statistics.median(r["wall_s"] for r in runs), 1),
            "runs s": [r["wall_s"] for r in runs],
            "spark jobs": statistics.median(total(r, "spark jobs") for r in runs),
            "spark stages": statistics.median(total(r, "spark stages") for r in runs),
            "job s": round(statistics.median(total(r, "job s") for r in runs), 2),
            "task s": round(statistics.median(total(r, "task s") for r in runs), 2),
        }
    ] + stages
    cpu_s = (
        None  # not sampled (a run adopted after its start: see the report's annotation)
        if any(r["cpu_s"] is None for r in runs)
        else {
            kind: round(statistics.median(r["cpu_s"][kind] for r in runs), 1)
            for kind in CPUByKind.KINDS
        }
    )

    def at(values: list[float], k: int) -> float | None:
        return values[k - 1] if len(values) >= k else None

    write_report(
        name,
        rows,
        {
            "command": command,
            "data": data,
            "runs": len(runs),
            "complete": not stopped,
            "median_wall_s": rows[0]["median s"],
            "median_pipeline_s": None
            if stopped
            else round(statistics.median(r["pipeline_s"] for r in runs), 1),
            "peak_rss_GB": max(r["peak_rss_GB"] for r in runs),
            "peak_pss_GB": None
            if any(r["peak_pss_GB"] is None for r in runs)
            else max(r["peak_pss_GB"] for r in runs),
            "cpu_s": cpu_s,
            "steps": steps,
            "comparison": {
                m: {
                    "P@1": at(v["P_percent"], 1),
                    "P@3": at(v["P_percent"], 3),
                    "P@5": at(v["P_percent"], 5),
                    "assignment precision": v["assignment_precision_percent"],
                }
                for m, v in methods.items()
            },
            **(extra or {}),
            **(
                {"selection": selection_costs(run_folder, steps, stages)}
                if run_folder is not None and not stopped
                else {}
            ),
        },
    )
    if cpu_s is not None:
        print("\nCPU seconds of the command's processes by kind (medians):")
        print_table([cpu_s | {"all": round(sum(cpu_s.values()), 1)}])
    print("\nsteps inside the stages (medians; a step's figures include its inner steps'):")
    print_table(steps)


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
    parser.add_argument(
        "--stop-after",
        type=float,
        metavar="SECONDS",
        help="stop a command still running after this many seconds and report what it finished "
        "(with --runs 1)",
    )
    parser.add_argument(
        "--oracle",
        action="store_true",
        help="also train, predict and evaluate the Oracle (the classifier on the true Y) and "
        "report each method's P@k / the Oracle's (synthetic data only)",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.stop_after is not None and (args.runs != 1 or args.stop_after <= 0):
        parser.error("--stop-after takes a positive number of seconds and --runs 1")
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
        found = run_once(work / "run", [*data_settings, *args.set], args.stop_after)
        runs.append(found)
        print(
            f"run {i + 1}/{args.runs}: {found['wall_s']} s "
            + ("(stopped)" if found["stopped"] else f"(pipeline {found['pipeline_s']} s)")
            + f", peak RSS {found['peak_rss_GB']} GB, PSS {found['peak_pss_GB']} GB",
            flush=True,
        )
    command = " ".join(
        ["eagle-spark pipeline --conf conf/local.yaml --compare"]
        + [f"--set {o}" for o in [*data_settings, *args.set]]
    )
    extra = {}
    if args.oracle:
        oracle = oracle_run([*data_settings, *args.set], work / "oracle")
        print(f"oracle: {oracle}", flush=True)
        methods = runs[-1]["comparison"]["methods"]
        extra["oracle"] = oracle
        extra["to_oracle"] = {
            m: {
                f"P@{k}": round(v["P_percent"][k - 1] / oracle[f"P@{k}"], 3)
                for k in (1, 5)
                if len(v["P_percent"]) >= k
            }
            for m, v in methods.items()
        }
    summarise(report, runs, command, data, extra, work / "run")


if __name__ == "__main__":
    main()
