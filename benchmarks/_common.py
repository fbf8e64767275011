"""Shared pieces of the benchmark scripts: peak RSS of the process tree, a memory-capped child
process, JSON report, table."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import pathlib
import platform
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Optional, Sequence

import psutil

from eagle_spark.io.fs import FileSystem
from eagle_spark.monitor import PeakRSS  # also re-exported for the scripts
from eagle_spark.progress import STEP_SEPARATOR  # a step's job description: <stage> / <step>

REPORTS = pathlib.Path(__file__).resolve().parent / "reports"
IN_SAMPLE_CANDIDATES = ("baseline", "soft-0.3+r1")
"""``assign.candidates`` of the benchmarks' ``auto``: the Baseline against soft T = 0.3 refined once
in-sample (the library's default cross-fits the round: ``auto r1x2``)."""
CROSS_FITTED_CANDIDATES = ("baseline", "soft-0.3+r1x3")
"""``assign.candidates`` of the benchmarks' ``auto r1x3``: the round cross-fitted in 3 folds (a
point of the frontier of the choosing's cost against the recovered share)."""
TWO_FOLD_CANDIDATES = ("baseline", "soft-0.3+r1x2")
"""``assign.candidates`` of the benchmarks' ``auto r1x2``: the round cross-fitted in 2 folds (the
library's default, named so that the reports keep meaning what they measured if it moves)."""
TWO_ROUND_CANDIDATES = ("baseline", "soft-0.3+r2x2")
"""``assign.candidates`` of the benchmarks' ``auto r2x2``: two rounds, each cross-fitted in 2 folds
(a point of the same frontier)."""


def folder_bytes(path: str | os.PathLike) -> int:
    """Total size in bytes of the files under `path` (:meth:`eagle_spark.io.fs.FileSystem.size`)."""
    return FileSystem().size(os.fspath(path))


def run_capped(
    fn: Callable[..., dict], kwargs: dict[str, Any], cap_bytes: int, interval: float = 0.5
) -> dict:
    """``fn(**kwargs)`` (a report row) in a child process (spawned: it shares no memory with this
    one) whose RSS, with its own children's, is checked every `interval` seconds; above
    `cap_bytes` the child is killed, so a peer that would run the machine out of memory ends alone
    instead of through the kernel's OOM killer. Returns fn's row, or ``{"error": ...,
    "peak_rss_GB": ..., "stopped_after_s": ...}`` when the child was stopped or died without one.
    `fn` must be importable by name (a module-level function) and its row picklable."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_capped_child, args=(fn, kwargs, out), daemon=True)
    t0 = time.monotonic()
    child.start()
    peak = 0
    while True:
        try:
            return out.get(timeout=interval)  # the row arrived: the child exits by itself
        except queue.Empty:
            pass
        rss = PeakRSS.sample(child.pid)
        peak = max(peak, rss)
        stopped = round(time.monotonic() - t0, 1)
        if rss > cap_bytes:
            child.kill()
            child.join()
            return {
                "error": f"stopped at {rss / 2**30:.2f} GB RSS, above the cap of {cap_bytes / 2**30:.2f} GB",
                "peak_rss_GB": round(peak / 2**30, 2),
                "stopped_after_s": stopped,
            }
        if not child.is_alive():
            try:  # the row may have been queued just before the exit
                return out.get(timeout=interval)
            except queue.Empty:
                return {
                    "error": f"the process ended with exit code {child.exitcode} and no row",
                    "peak_rss_GB": round(peak / 2**30, 2),
                    "stopped_after_s": stopped,
                }


def _capped_child(fn: Callable[..., dict], kwargs: dict[str, Any], out) -> None:
    out.put(fn(**kwargs))


def write_report(
    name: str,
    rows: Sequence[dict[str, Any]],
    extra: dict[str, Any] | None = None,
    table: bool = True,
) -> pathlib.Path:
    """Write ``benchmarks/reports/<name>.json`` atomically (a temporary file renamed over it, so a
    run killed mid-write leaves the previous report) and, with `table`, print the rows as a table;
    returns the path."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(),
        },
        **(extra or {}),
        "rows": list(rows),
    }
    path = REPORTS / f"{name}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)
    if table:
        print_table(rows)
        print(f"report: {path}")
    return path


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    """Print dict rows as an aligned text table."""
    if not rows:
        return
    keys = list(rows[0])
    cells = [[_fmt(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths)))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def event_log_overrides(folder: str | os.PathLike) -> list[str]:
    """Settings overrides that make Spark write its event log (uncompressed JSON lines) to `folder`,
    so :func:`stage_times` can report the phases of a run after the session has stopped."""
    path = pathlib.Path(folder).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return [
        "spark.extra.spark.eventLog.enabled=true",
        f"spark.extra.spark.eventLog.dir={path.as_uri()}",
        "spark.extra.spark.eventLog.compress=false",
    ]


def only_app_id(folder: str | os.PathLike) -> str:
    """The application id of the one Spark event log in `folder` (single file or rolling layout).

    Raises:
        ValueError: `folder` holds no event log or more than one.
    """
    logs = [p.name.removeprefix("eventlog_v2_") for p in pathlib.Path(folder).iterdir()]
    if len(logs) != 1:
        raise ValueError(f"{folder}: expected the event log of one application, found {logs}")
    return logs[0]


def read_events(folder: str | os.PathLike, app_id: str):
    """The JSON events of application `app_id`'s event log in `folder` (single file or rolling)."""
    single, rolling = pathlib.Path(folder) / app_id, pathlib.Path(folder) / f"eventlog_v2_{app_id}"
    if single.exists():
        files = [single]
    elif rolling.is_dir():  # the rolling layout (Spark 4's default): events_<n>_<app id> files
        files = sorted(rolling.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    else:
        raise FileNotFoundError(f"{single}: no Spark event log (was spark.eventLog.enabled set?)")
    for path in files:
        with path.open() as f:
            for line in f:
                yield json.loads(line)


def shuffle_bytes_by_job_group(folder: str | os.PathLike, app_id: str) -> dict[str, int]:
    """Bytes written to shuffle files per job group (``SparkContext.setJobGroup``) of application
    `app_id`, from its event log in `folder`: the sum over the group's completed stages of the
    ``internal.metrics.shuffle.write.bytesWritten`` accumulator. Jobs without a group count under ""."""
    group_of_stage: dict[int, str] = {}
    written: dict[int, int] = {}
    for event in read_events(folder, app_id):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            group = (event.get("Properties") or {}).get("spark.jobGroup.id") or ""
            for sid in event.get("Stage IDs", []):
                group_of_stage.setdefault(sid, group)
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            for acc in info.get("Accumulables", []):
                if acc.get("Name") == "internal.metrics.shuffle.write.bytesWritten":
                    written[info["Stage ID"]] = int(acc.get("Value") or 0)
    totals: dict[str, int] = {}
    for sid, n in written.items():
        group = group_of_stage.get(sid, "")
        totals[group] = totals.get(group, 0) + n
    return totals


def jobs_by_description(
    folder: str | os.PathLike,
    app_id: str,
    window: tuple[float, float] | None = None,
    until: float | None = None,
) -> dict[str, dict[str, Any]]:
    """Per job description (``SparkContext.setJobDescription``: the pipeline names its stages so)
    of application `app_id`, from its event log in `folder`: how many Spark jobs and Spark stages
    ran, the seconds from the first job's submission to the last one's end summed over jobs
    (``job s``: time the driver waited on Spark), and the tasks' executor run time summed
    (``task s``: core-seconds of work; above ``job s`` when tasks ran in parallel). Jobs without a
    description count under "". With `window` (epoch seconds, start and end) only the jobs
    submitted inside it count. With `until` (epoch seconds: when a stopped application ended) a job
    the log never saw end counts its wait up to then (its running tasks' work is not in the log)."""
    found: dict[str, dict[str, Any]] = {}
    started: dict[int, tuple[str, int]] = {}
    stage_of: dict[int, str] = {}
    for event in read_events(folder, app_id):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            if window and not window[0] <= event["Submission Time"] / 1e3 <= window[1]:
                continue
            name = (event.get("Properties") or {}).get("spark.job.description") or ""
            started[event["Job ID"]] = (name, event["Submission Time"])
            row = found.setdefault(
                name, {"spark jobs": 0, "spark stages": 0, "job s": 0.0, "task s": 0.0}
            )
            row["spark jobs"] += 1
            row["spark stages"] += len(event.get("Stage IDs", []))
            stage_of.update({s: name for s in event.get("Stage IDs", [])})
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in started:
            name, t0 = started.pop(event["Job ID"])
            found[name]["job s"] = round(
                found[name]["job s"] + (event["Completion Time"] - t0) / 1e3, 2
            )
        elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_of:
            run = (event.get("Task Metrics") or {}).get("Executor Run Time", 0)
            row = found[stage_of[event["Stage ID"]]]
            row["task s"] = round(row["task s"] + run / 1e3, 2)
    if until is not None:
        for name, t0 in started.values():
            found[name]["job s"] = round(found[name]["job s"] + max(0.0, until - t0 / 1e3), 2)
    return found


_FIGURES = ("spark jobs", "spark stages", "job s", "task s")


def stage_jobs(jobs: dict[str, dict[str, Any]], stage: str) -> dict[str, Any]:
    """The figures of :func:`jobs_by_description` (`jobs`) for pipeline stage `stage`: its own
    description's and every step's inside it (``<stage> / ...``) summed."""
    rows = [v for k, v in jobs.items() if k == stage or k.startswith(stage + STEP_SEPARATOR)]
    return {key: round(sum(r[key] for r in rows), 2) for key in _FIGURES}


def stage_steps(jobs: dict[str, dict[str, Any]], stage: str) -> dict[str, dict[str, Any]]:
    """The figures of :func:`jobs_by_description` (`jobs`) for each step of `stage` at every
    depth, by step path (``select baseline: proxy training``, ``select soft-0.3+r1: assign /
    round 1: one-vs-all scorer``); a step's figures include those of the steps inside it, and
    ``(stage itself)`` holds the jobs outside every step. Empty when the stage has no steps."""
    prefix = stage + STEP_SEPARATOR
    own = jobs.get(stage)
    inside = {k[len(prefix) :]: v for k, v in jobs.items() if k.startswith(prefix)}
    if not inside:
        return {}
    paths = set()
    for key in inside:
        parts = key.split(STEP_SEPARATOR)
        paths.update(STEP_SEPARATOR.join(parts[: i + 1]) for i in range(len(parts)))
    out = {path: stage_jobs(inside, path) for path in sorted(paths)}
    if own is not None:
        out["(stage itself)"] = {key: own[key] for key in _FIGURES}
    return out


def stage_times(
    folder: str | os.PathLike, app_id: str, min_seconds: float = 1.0
) -> list[dict[str, Any]]:
    """Per Spark stage of application `app_id`, from its event log in `folder`: name, wall
    seconds, number of tasks, and the tasks' seconds (sum, min, max).

    Stages shorter than `min_seconds` are left out. Raises FileNotFoundError when the log is missing.
    """
    stages: dict[int, dict[str, Any]] = {}
    tasks: dict[int, list[float]] = {}
    for event in read_events(folder, app_id):
        kind = event.get("Event")
        if kind == "SparkListenerTaskEnd":
            info = event["Task Info"]
            seconds = (info["Finish Time"] - info["Launch Time"]) / 1e3
            tasks.setdefault(event["Stage ID"], []).append(seconds)
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            stages[info["Stage ID"]] = {
                "stage": info["Stage ID"],
                "name": info["Stage Name"],
                "seconds": round((info["Completion Time"] - info["Submission Time"]) / 1e3, 1),
                "tasks": info["Number of Tasks"],
            }
    rows = []
    for sid, row in sorted(stages.items()):
        if row["seconds"] < min_seconds:
            continue
        secs = tasks.get(sid, [])
        row.update(
            task_s_sum=round(sum(secs), 1),
            task_s_min=round(min(secs, default=0.0), 1),
            task_s_max=round(max(secs, default=0.0), 1),
        )
        rows.append(row)
    return rows


DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "xc"


def generator(difficulty: float | None) -> str:
    """Which generator :func:`eagle_spark.synth.synth` uses for `difficulty`: "realistic" (the
    preset's realistic model) without one, "planted" (the generator before the realistic presets)
    with one. Reports keep it so that a figure names the generator of its data."""
    return "realistic" if difficulty is None else "planted"


def synth_generator(spec: str) -> str | None:
    """The generator of a ``--data`` entry (:func:`generator`): ``synth:<preset>:<scale>`` and
    ``like:<name>`` (``synth --like``) realistic, ``synth:<preset>:<scale>:<difficulty>``
    planted, None for real data."""
    if spec.startswith("like:"):
        return generator(None)
    if spec.startswith("synth:"):
        parts = spec.split(":")
        return generator(float(parts[3]) if len(parts) > 3 else None)
    return None


def data_settings(spark: Any, base: Any, name: str, work: str, test: bool = False) -> Any:
    """`base` (Settings) naming data set `name` for the pipeline: ``bibtex`` or another folder of
    ../shared/data/xc (its train.txt.gz, and with `test` its test.txt.gz), or
    ``synth:<preset>:<scale>`` (the pair generated with seed 0 into `work` when missing), or
    ``like:<name>`` (the twin of ../shared/data/xc/<name> made by ``synth --like``). Exits
    with a message when ../shared/data lacks the folder."""
    from eagle_spark.synth import synth, synth_like

    if name.startswith("like:"):  # a twin (synth --like) of a data set of ../shared/data/xc
        source = name.split(":", 1)[1]
        if not (DATA / source).exists():
            sys.exit(f"{DATA / source} is missing: this benchmark needs ../shared/data")
        pair = f"{work}/twin_{source}_data"
        if not pathlib.Path(pair).exists():
            from eagle_spark.io.ingest import ingest

            real = f"{work}/real_{source}_data"
            for split in ("train", "test"):
                if not pathlib.Path(f"{real}/{split}").exists():
                    ingest(
                        spark,
                        str(DATA / source / f"{split}.txt.gz"),
                        f"{real}/{split}",
                        base.ingest,
                    )
            synth_like(spark, pair, real, seed=0)
        return base.replace(
            "pipeline",
            dataset=f"{pair}/train",
            **({"test_dataset": f"{pair}/test"} if test else {}),
        )
    if name.startswith("synth:"):
        _, preset, scale = name.split(":")
        pair = f"{work}/{preset}_{scale}_realistic_data"  # not a planted pair of earlier runs
        if not pathlib.Path(pair).exists():
            synth(spark, pair, preset, float(scale), seed=0)
        return base.replace(
            "pipeline",
            dataset=f"{pair}/train",
            **({"test_dataset": f"{pair}/test"} if test else {}),
        )
    if not (DATA / name).exists():
        sys.exit(f"{DATA / name} is missing: this benchmark needs ../shared/data")
    return base.replace(
        "pipeline",
        train=str(DATA / name / "train.txt.gz"),
        **({"test": str(DATA / name / "test.txt.gz")} if test else {}),
    )


class CPUByKind:
    """CPU seconds (user + system) of this process's descendants by kind, sampled every
    `interval` seconds in a background thread (Linux: the JVM's threads are named in
    ``/proc/<pid>/task/<tid>/comm``): ``jvm compilers`` (HotSpot's C1 / C2 compiler threads),
    ``jvm other`` (the rest of the JVM: tasks, query planning, garbage collection), ``python
    workers`` (the ``pyspark.daemon`` processes the JVM forks), ``driver python`` (the command's own
    process). Processes that run already when sampling starts (a test session's JVM) are not
    counted. A process's last sample counts, so the CPU of a process or compiler thread that ended
    less than `interval` after its last sample is missed (Spark's Python workers and the compiler
    threads live as long as the JVM).

    Use as a context manager; ``seconds`` holds the totals afterwards.
    """

    KINDS = ("jvm compilers", "jvm other", "python workers", "driver python")

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.seconds: dict[str, float] = {k: 0.0 for k in self.KINDS}
        self._last: dict[tuple[int, str], float] = {}
        self._before: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-by-kind")

    @staticmethod
    def _compiler_seconds(proc: psutil.Process) -> float:
        total = 0.0
        for thread in proc.threads():
            try:
                name = pathlib.Path(f"/proc/{proc.pid}/task/{thread.id}/comm").read_text()
            except OSError:  # the thread ended
                continue
            if "CompilerThre" in name:
                total += thread.user_time + thread.system_time
        return total

    def _take(self) -> None:
        for proc in psutil.Process(os.getpid()).children(recursive=True):
            if proc.pid in self._before:
                continue
            try:
                cmd = " ".join(proc.cmdline())
                times = proc.cpu_times()
                own = times.user + times.system
                if proc.name() == "java":
                    compilers = self._compiler_seconds(proc)
                    self._last[(proc.pid, "jvm compilers")] = compilers
                    self._last[(proc.pid, "jvm other")] = own - compilers
                elif "pyspark.daemon" in cmd:
                    self._last[(proc.pid, "python workers")] = own
                elif "eagle_spark" in cmd:
                    self._last[(proc.pid, "driver python")] = own
            except (psutil.Error, OSError):  # the process ended
                pass

    def _run(self) -> None:
        while not self._stop.is_set():
            self._take()
            self._stop.wait(self.interval)

    def __enter__(self) -> "CPUByKind":
        self._before = {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.seconds = {k: 0.0 for k in self.KINDS}
        for (_, kind), value in self._last.items():
            self.seconds[kind] += value
        self.seconds = {k: round(v, 1) for k, v in self.seconds.items()}


def main_job(
    output: str | os.PathLike,
    *extra: str,
    cpu: Optional[CPUByKind] = None,
    memory: Optional[PeakRSS] = None,
    stop_after: Optional[float] = None,
) -> tuple[float, float, subprocess.CompletedProcess, bool]:
    """Run the README's main job as a whole command, `python -m eagle_spark.cli pipeline --conf
    conf/local.yaml --compare --output OUTPUT --log-level WARNING EXTRA...`, from the repository's
    folder: (wall seconds, peak RSS of all its processes in bytes, the finished process, whether it
    was stopped); with `cpu`, its processes' CPU seconds by kind are sampled into it; `memory` is
    the sampler of the peak (default ``PeakRSS(interval=0.5)``; one with ``pss`` also gives the
    peak PSS). With `stop_after` (seconds) a command still running then is stopped: SIGTERM to its
    process group (the driver and its JVM; Spark's Python workers, in a group of their own, end
    with the JVM), SIGKILL 60 s later if any of the group is left."""
    root = pathlib.Path(__file__).resolve().parents[1]
    command = [
        sys.executable,
        "-m",
        "eagle_spark.cli",
        "pipeline",
        "--conf",
        str(root / "conf" / "local.yaml"),
        "--compare",
        "--output",
        str(output),
        "--log-level",
        "WARNING",
        *extra,
    ]
    t0 = time.monotonic()
    memory = memory or PeakRSS(interval=0.5)
    stopped = False
    with memory, cpu or contextlib.nullcontext():
        proc = subprocess.Popen(
            command,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, so that a stop reaches every process
        )
        try:
            out, err = proc.communicate(timeout=stop_after)
        except subprocess.TimeoutExpired:
            stopped = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
    done = subprocess.CompletedProcess(command, proc.returncode, out, err)
    return time.monotonic() - t0, memory.peak_bytes, done, stopped
