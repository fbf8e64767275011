"""benchmarks/_common: stage_times (phases of a run from a hand-written Spark event log),
write_report (the JSON report, replaced atomically) and run_capped (a memory-capped child)."""

import json
import os
import pathlib
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import _common  # noqa: E402
from _common import run_capped, stage_times, write_report  # noqa: E402


def _events(stage_id, name, submitted, completed, tasks):
    out = [
        {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": stage_id,
            "Task Info": {"Launch Time": launch, "Finish Time": finish},
        }
        for launch, finish in tasks
    ]
    out.append(
        {
            "Event": "SparkListenerStageCompleted",
            "Stage Info": {
                "Stage ID": stage_id,
                "Stage Name": name,
                "Number of Tasks": len(tasks),
                "Submission Time": submitted,
                "Completion Time": completed,
            },
        }
    )
    return out


@pytest.mark.parametrize("rolling", [False, True])
def test_stage_times_sums_tasks_and_drops_short_stages(tmp_path, rolling):
    events = (
        [{"Event": "SparkListenerApplicationStart"}]
        + _events(0, "collect at tree.py:400", 1_000, 11_000, [(1_000, 7_000), (1_500, 10_500)])
        + _events(1, "count at x.py:1", 12_000, 12_400, [(12_000, 12_300)])
    )
    lines = [json.dumps(e) + "\n" for e in events]
    if rolling:  # Spark 4's layout: a folder of numbered parts
        folder = tmp_path / "eventlog_v2_app-1"
        folder.mkdir()
        (folder / "events_2_app-1").write_text("".join(lines[3:]))
        (folder / "events_1_app-1").write_text("".join(lines[:3]))
    else:
        (tmp_path / "app-1").write_text("".join(lines))
    assert stage_times(tmp_path, "app-1") == [
        {
            "stage": 0,
            "name": "collect at tree.py:400",
            "seconds": 10.0,
            "tasks": 2,
            "task_s_sum": 15.0,
            "task_s_min": 6.0,
            "task_s_max": 9.0,
        }
    ]
    assert [r["stage"] for r in stage_times(tmp_path, "app-1", min_seconds=0)] == [0, 1]


def test_stage_times_names_the_missing_log(tmp_path):
    with pytest.raises(FileNotFoundError, match="app-9: no Spark event log"):
        stage_times(tmp_path, "app-9")


def test_shuffle_bytes_are_summed_per_job_group(tmp_path):
    from _common import shuffle_bytes_by_job_group

    def done(sid, written):
        acc = (
            [{"Name": "internal.metrics.shuffle.write.bytesWritten", "Value": written}]
            if written
            else []
        )
        return {
            "Event": "SparkListenerStageCompleted",
            "Stage Info": {
                "Stage ID": sid,
                "Stage Name": f"s{sid}",
                "Number of Tasks": 1,
                "Submission Time": 0,
                "Completion Time": 1,
                "Accumulables": acc + [{"Name": "internal.metrics.resultSize", "Value": 7}],
            },
        }

    events = [
        {
            "Event": "SparkListenerJobStart",
            "Stage IDs": [0, 1],
            "Properties": {"spark.jobGroup.id": "embed"},
        },
        done(0, 1000),
        done(1, 0),
        {
            "Event": "SparkListenerJobStart",
            "Stage IDs": [2, 3],
            "Properties": {"spark.jobGroup.id": "assign"},
        },
        done(2, 250),
        done(3, 50),
        {"Event": "SparkListenerJobStart", "Stage IDs": [1, 4], "Properties": {}},  # stage 1 reused
        done(4, 5),
    ]
    (tmp_path / "app-2").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert shuffle_bytes_by_job_group(tmp_path, "app-2") == {"embed": 1000, "assign": 300, "": 5}


def test_jobs_by_description_counts_jobs_waits_and_task_seconds_in_a_window(tmp_path):
    from _common import jobs_by_description

    def job(jid, name, stages, submitted, completed):
        return [
            {
                "Event": "SparkListenerJobStart",
                "Job ID": jid,
                "Submission Time": submitted,
                "Stage IDs": stages,
                "Properties": {"spark.job.description": name} if name else {},
            },
            {"Event": "SparkListenerJobEnd", "Job ID": jid, "Completion Time": completed},
        ]

    def task(sid, run_ms):
        return {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": sid,
            "Task Metrics": {"Executor Run Time": run_ms},
        }

    events = (
        job(0, "assign_eagle", [0, 1], 10_000, 12_500)
        + [task(0, 1_500), task(0, 1_250), task(1, 750)]
        + job(1, "assign_eagle", [2], 13_000, 13_500)
        + [task(2, 400)]
        + job(2, None, [3], 14_000, 14_100)
        + [task(3, 100)]
        + job(3, "assign_eagle", [4], 50_000, 51_000)  # a later run's
        + [task(4, 2_000)]
    )
    (tmp_path / "app-3").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert jobs_by_description(tmp_path, "app-3", (9.0, 20.0)) == {
        "assign_eagle": {"spark jobs": 2, "spark stages": 3, "job s": 3.0, "task s": 3.9},
        "": {"spark jobs": 1, "spark stages": 1, "job s": 0.1, "task s": 0.1},
    }
    everything = jobs_by_description(tmp_path, "app-3")
    assert everything["assign_eagle"] == {
        "spark jobs": 3,
        "spark stages": 4,
        "job s": 4.0,
        "task s": 5.9,
    }
    # an application stopped while job 4 ran: without `until` its wait is unknown (0), with it
    # the wait counts up to the stop; of its tasks, those that ended (0.9 s) count
    running = events + job(4, "train_eagle / units", [5], 60_000, None)[:1] + [task(5, 900)]
    (tmp_path / "app-4").write_text("".join(json.dumps(e) + "\n" for e in running))
    assert jobs_by_description(tmp_path, "app-4")["train_eagle / units"]["job s"] == 0.0
    stopped = jobs_by_description(tmp_path, "app-4", until=75.5)
    assert stopped["train_eagle / units"] == {
        "spark jobs": 1,
        "spark stages": 1,
        "job s": 15.5,
        "task s": 0.9,
    }
    assert stopped["assign_eagle"] == everything["assign_eagle"]  # ended jobs: as before


def test_write_report_replaces_the_report_whole(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_common, "REPORTS", tmp_path)
    first = [{"model": "tree", "P@1": 64.69}]
    path = write_report("peers_x", first, {"complete": False}, table=False)
    assert capsys.readouterr().out == ""
    assert (
        json.loads(path.read_text())["rows"] == first
        and json.loads(path.read_text())["complete"] is False
    )

    def write_half(self, text, *a, **k):  # a run killed mid-write: half the bytes, then the error
        with open(self, "w") as fh:
            fh.write(text[: len(text) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(pathlib.Path, "write_text", write_half)
    with pytest.raises(OSError, match="disk full"):
        write_report("peers_x", first + [{"model": "omikuji", "P@1": 63.34}], {"complete": True})
    monkeypatch.undo()
    assert json.loads(path.read_text())["rows"] == first  # the earlier report, whole
    assert [f.name for f in tmp_path.iterdir() if f.name.endswith(".json")] == ["peers_x.json"]


def _row(x):
    return {"model": "m", "x": x}


def _hog(mb):
    block = np.ones(mb * 2**20 // 8)  # touched: resident
    time.sleep(60)
    return {"model": "never", "n": int(block.size)}


def _exit(code):
    os._exit(code)


def test_run_capped_returns_the_row_stops_a_hog_and_reports_a_death():
    assert run_capped(_row, {"x": 2}, 2**36) == {"model": "m", "x": 2}
    hog = run_capped(_hog, {"mb": 600}, 300 * 2**20, interval=0.1)
    assert "model" not in hog  # stopped (its row would have come after 60 s)
    assert "above the cap of 0.29 GB" in hog["error"]
    assert hog["peak_rss_GB"] >= 0.29  # above the 300 MiB (0.293 GiB) cap, rounded
    died = run_capped(_exit, {"code": 3}, 2**36, interval=0.1)
    assert died["error"] == "the process ended with exit code 3 and no row"


def test_peak_rss_sample_of_a_process_tree_and_of_an_ended_process():
    import subprocess

    import psutil

    from eagle_spark.monitor import PeakRSS

    assert PeakRSS.sample() >= psutil.Process().memory_info().rss > 0  # this process, plus children
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert PeakRSS.sample(child.pid) == 0  # reaped: no such process


def test_stage_figures_sum_the_steps_inside_a_stage():
    from _common import stage_jobs, stage_steps

    def fig(jobs, job_s, task_s):
        return {"spark jobs": jobs, "spark stages": jobs, "job s": job_s, "task s": task_s}

    jobs = {
        "assign_eagle": fig(2, 0.5, 0.25),
        "assign_eagle / select: held-out split": fig(10, 2.0, 1.5),
        "assign_eagle / select soft: assign": fig(3, 1.0, 1.0),
        "assign_eagle / select soft: assign / round 1: one-vs-all scorer": fig(4, 9.5, 18.5),
        "assign_eagle0 / select: held-out split": fig(1, 7.0, 7.0),  # another stage
        "train_eagle": fig(11, 26.0, 32.0),
    }
    assert stage_jobs(jobs, "assign_eagle") == fig(19, 13.0, 21.25)
    assert stage_jobs(jobs, "train_eagle") == fig(11, 26.0, 32.0)
    assert stage_jobs(jobs, "predict_eagle") == fig(0, 0, 0)
    assert stage_steps(jobs, "assign_eagle") == {
        "select: held-out split": fig(10, 2.0, 1.5),
        "select soft: assign": fig(7, 10.5, 19.5),  # with the round inside it
        "select soft: assign / round 1: one-vs-all scorer": fig(4, 9.5, 18.5),
        "(stage itself)": fig(2, 0.5, 0.25),
    }
    assert stage_steps(jobs, "train_eagle") == {}


_BUSY = """# eagle_spark: a driver's stand-in
import time
start = time.process_time()
while time.process_time() - start < 1.0:
    pass
time.sleep(0.3)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")
def test_cpu_by_kind_counts_a_child_by_its_command_line():
    """A child that burns 1.0 s of CPU and names eagle_spark is the driver's Python; nothing else
    started, so the other kinds stay at zero (a Spark JVM this test process already runs, under
    pytest-xdist, is not counted)."""
    import subprocess

    with _common.CPUByKind(interval=0.1) as cpu:
        subprocess.run([sys.executable, "-c", _BUSY], check=True)
    assert set(cpu.seconds) == set(_common.CPUByKind.KINDS)
    assert 0.9 <= cpu.seconds["driver python"] <= 1.5, cpu.seconds
    assert cpu.seconds["jvm compilers"] == cpu.seconds["jvm other"] == 0.0
    assert cpu.seconds["python workers"] == 0.0


def _record(stage, finished_at, seconds, summary, copied_from=None):
    return {
        "stage": stage,
        "summary": summary,
        "seconds": seconds,
        "finished_at": finished_at,
        "copied_from": copied_from,
    }


def test_a_stopped_run_gives_the_stages_it_finished_and_what_is_known_per_method(tmp_path):
    """benchmarks/main_job.py's stopped_run on a run folder written by hand: the stage records in
    the order they finished, the stage with Spark jobs but no record as stopped; per method the
    assignment's precision (percent) once assigned, P@k once evaluated."""
    import main_job

    records = tmp_path / "_stages"
    records.mkdir()
    for rec in [
        _record("train_baseline", "2026-01-01T00:30:00Z", 1500.5, {"n_labels": 3}),
        _record("aggregate", "2026-01-01T00:01:00Z", 54.0, {"n_groups": 2}),
        _record("assign_baseline", "2026-01-01T00:05:00Z", 224.6, {"quality": {"precision": 0.25}}),
        _record("evaluate_baseline", "2026-01-01T00:40:00Z", 1.5, {"P": [0.5, 0.25, 0.125]}, None),
        _record("assign_eagle0", "2026-01-01T00:50:00Z", 300.0, {"quality": {"precision": 0.5}}),
        _record("train_eagle0", "2026-01-01T00:51:00Z", 2.0, {}, copied_from="train_baseline"),
    ]:
        (records / f"{rec['stage']}.json").write_text(json.dumps(rec))
    fig = {"spark jobs": 1, "spark stages": 1, "job s": 1.0, "task s": 1.0}
    jobs = {
        "pipeline": fig,  # the inputs' checks, before any stage
        "aggregate": fig,
        "train_baseline / indexer": fig,
        "embed_eagle": fig,
        "assign_eagle / select: held-out split": fig,
    }
    stages, comparison = main_job.stopped_run(tmp_path, jobs)
    assert stages == [
        {"stage": "aggregate", "status": "ran", "seconds": 54.0},
        {"stage": "assign_baseline", "status": "ran", "seconds": 224.6},
        {"stage": "train_baseline", "status": "ran", "seconds": 1500.5},
        {"stage": "evaluate_baseline", "status": "ran", "seconds": 1.5},
        {"stage": "assign_eagle0", "status": "ran", "seconds": 300.0},
        {
            "stage": "train_eagle0",
            "status": "copied",
            "seconds": 2.0,
            "copied_from": "train_baseline",
        },
        {"stage": "embed_eagle", "status": "stopped", "seconds": None},
        {"stage": "assign_eagle", "status": "stopped", "seconds": None},
    ]
    assert set(comparison["methods"]) == {"baseline", "eagle0"}
    baseline, eagle0 = comparison["methods"]["baseline"], comparison["methods"]["eagle0"]
    assert baseline["P_percent"] == [50.0, 25.0, 12.5]
    assert baseline["assignment_precision_percent"] == 25.0
    assert eagle0["P_percent"] == [] and eagle0["assignment_precision_percent"] == 50.0


def test_a_stopped_run_is_reported_incomplete_with_what_it_finished(tmp_path, monkeypatch):
    """main_job.summarise on one stopped run: complete false, the whole command's row named so,
    the stopped stage without seconds but with its Spark figures, P@k None for a method not yet
    evaluated, and no CPU figures where none were sampled; a stopped run is never a median."""
    import main_job

    monkeypatch.setattr(_common, "REPORTS", tmp_path)

    def fig(jobs, job_s, task_s):
        return {"spark jobs": jobs, "spark stages": jobs, "job s": job_s, "task s": task_s}

    run = {
        "stopped": True,
        "wall_s": 100.0,
        "pipeline_s": None,
        "peak_rss_GB": 9.5,
        "peak_pss_GB": None,
        "cpu_s": None,
        "stages": [
            {"stage": "assign_baseline", "status": "ran", "seconds": 20.0},
            {"stage": "train_baseline", "status": "stopped", "seconds": None},
        ],
        "comparison": {
            "methods": {
                "baseline": {"P_percent": [], "assignment_precision_percent": 25.3},
            }
        },
        "jobs": {
            "pipeline": fig(2, 5.0, 9.0),
            "assign_baseline / output": fig(3, 15.0, 28.0),
            "train_baseline / indexer": fig(2, 60.0, 110.0),
        },
    }
    main_job.summarise("main_job_x", [run], "eagle-spark pipeline ...", "data", {"note": "n"})
    got = json.loads((tmp_path / "main_job_x.json").read_text())
    assert got["complete"] is False and got["note"] == "n"
    assert got["cpu_s"] is None and got["peak_pss_GB"] is None and got["peak_rss_GB"] == 9.5
    assert got["median_wall_s"] == 100.0 and got["median_pipeline_s"] is None
    whole, assign, train = got["rows"]
    assert whole["stage"] == "whole command (stopped)" and whole["task s"] == 147.0
    assert (assign["status"], assign["median s"], assign["task s"]) == ("ran", 20.0, 28.0)
    assert (train["status"], train["median s"], train["job s"]) == ("stopped", None, 60.0)
    assert got["comparison"] == {
        "baseline": {"P@1": None, "P@3": None, "P@5": None, "assignment precision": 25.3}
    }
    with pytest.raises(ValueError, match="reported alone"):
        main_job.summarise("main_job_y", [run, run], "c", "d")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")
def test_main_job_stopped_leaves_no_process_of_its_group(tmp_path):
    """The real main job stopped after 4 s (its JVM is starting or reading by then): reported as
    stopped, and none of the processes it started (driver, JVM, Python workers) is left."""
    import psutil

    seen: set[int] = set()
    # a Spark session this test process runs already (pytest-xdist runs several test files in one
    # process) has a JVM and Python workers of its own: they are not the command's
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    class Watch(_common.PeakRSS):  # records the command's processes while it runs
        def _take(self):
            seen.update(
                p.pid for p in psutil.Process().children(recursive=True) if p.pid not in before
            )

    wall, _, done, stopped = _common.main_job(
        tmp_path / "run", memory=Watch(interval=0.2), stop_after=4.0
    )
    assert stopped and done.returncode != 0
    assert 4.0 <= wall < 70.0
    assert seen  # the command did start
    left = [p for p in seen if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert left == []


def test_only_app_id_names_the_one_event_log_or_refuses(tmp_path):
    from _common import only_app_id

    with pytest.raises(ValueError, match="found \\[\\]"):
        only_app_id(tmp_path)
    (tmp_path / "eventlog_v2_local-17").mkdir()  # the rolling layout's folder
    assert only_app_id(tmp_path) == "local-17"
    (tmp_path / "local-18").write_text("")  # a second application (single-file layout)
    with pytest.raises(ValueError, match="expected the event log of one application"):
        only_app_id(tmp_path)
