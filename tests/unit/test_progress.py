"""Progress reporting: the bar, Spark stage tasks through the logger, quiet below INFO."""

from __future__ import annotations

import io
import logging
import time

import pytest

from eagle_spark.progress import SparkProgress, bar, phase, step


def test_bar_hand_worked():
    assert bar(0, 4, width=8) == "[........] 0/4"
    assert bar(3, 4, width=8) == "[######..] 3/4"
    assert bar(16, 16, width=4) == "[####] 16/16"
    assert bar(0, 0, width=3) == "[###] 0/0"
    with pytest.raises(ValueError):
        bar(5, 4)


def _slow_job(spark, tasks: int) -> int:
    def slow(rows):
        time.sleep(0.6)
        yield sum(1 for _ in rows)

    return sum(
        spark.sparkContext.parallelize(range(tasks * 10), tasks).mapPartitions(slow).collect()
    )


def test_stage_tasks_are_reported_at_info(spark, caplog):
    caplog.set_level(logging.INFO, logger="eagle_spark.progress")
    with phase(spark, "unit-test"):
        with SparkProgress(spark, interval=0.2, log_every=0.0, stream=io.StringIO()) as progress:
            assert _slow_job(spark, 4) == 40
        step("level %d of %d", 2, 5)
    lines = progress.lines
    assert any(line.startswith("unit-test: stage ") and " started: " in line for line in lines), (
        lines
    )
    assert any(line.endswith("] 4/4 tasks") and " ended: " in line for line in lines), lines
    assert "unit-test: level 2 of 5" in caplog.text
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None  # restored


def test_quiet_below_info(spark, caplog):
    caplog.set_level(logging.WARNING, logger="eagle_spark.progress")
    with SparkProgress(spark, interval=0.2, log_every=0.0, stream=io.StringIO()) as progress:
        _slow_job(spark, 2)
    step("not shown")
    assert progress.lines == [] and "not shown" not in caplog.text


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_redrawn_on_a_terminal(spark, caplog):
    caplog.set_level(logging.INFO, logger="eagle_spark.progress")
    term = _Terminal()
    with SparkProgress(spark, interval=0.1, log_every=100.0, stream=term):
        _slow_job(spark, 6)
    drawn = term.getvalue()
    assert "\r\x1b[K" in drawn and "tasks" in drawn


class _Stage:
    """What pyspark's Spark Connect client hands a progress handler for one stage."""

    def __init__(self, stage_id: int, num_tasks: int, num_completed_tasks: int, done: bool):
        self.stage_id, self.num_tasks = stage_id, num_tasks
        self.num_completed_tasks, self.done = num_completed_tasks, done


def test_connect_progress_messages_give_the_same_lines_hand_worked(spark, caplog):
    caplog.set_level(logging.INFO, logger="eagle_spark.progress")
    progress = SparkProgress(spark, log_every=0.0, stream=io.StringIO())

    def feed(operation, done, *stages):
        progress.on_connect_progress(
            stages=[_Stage(*stage) for stage in stages],
            inflight_tasks=0,
            operation_id=operation,
            done=done,
        )

    with phase(None, "connect"):
        feed("op", False, (3, 4, 1, False))
        feed("op", False, (3, 4, 1, False))  # no change: no line
        feed("op", False, (3, 4, 3, False))
        feed("op", False, (3, 4, 4, True), (4, 2, 0, False))
        feed("op2", False, (5, 8, 8, True))  # never seen running: no line
        feed("op", True, (3, 4, 4, True), (4, 2, 1, False))  # the operation ends stage 4
    width = "." * 30
    assert (
        progress.lines
        == [
            f"connect: stage 3 started: [#######{width[7:]}] 1/4 tasks",  # 1 * 30 // 4 = 7
            f"connect: stage 3: [{'#' * 22}{width[22:]}] 3/4 tasks",
            f"connect: stage 3 ended: [{'#' * 30}] 4/4 tasks",
            f"connect: stage 4 started: [{width}] 0/2 tasks",
            f"connect: stage 4 ended: [{'#' * 15}{width[15:]}] 1/2 tasks",  # the operation ended
        ]
    )


def test_phases_are_per_thread_and_a_waiting_parent_is_not_named():
    """Hand-worked: the main thread in ("pipeline",) starts two threads that inherit it; each
    enters its own stage. A progress line names both stages (in the order the threads began),
    not the waiting parent; steps are labelled by their own thread's phase."""
    import threading

    from eagle_spark.progress import active_phases, current_phase, inherited, phase_stack

    entered, release = threading.Barrier(3), threading.Event()
    seen: dict[str, str] = {}

    def method(name: str, stack: tuple, first: threading.Event | None) -> None:
        if first is not None:
            first.wait()  # enter after the other thread: a fixed order of the label
        with inherited(stack), phase(None, name):
            seen[name] = current_phase()
            if first is None:
                started.set()
            entered.wait()
            release.wait()
        seen[name + " after"] = "/".join(phase_stack())

    started = threading.Event()
    with phase(None, "pipeline"):
        stack = phase_stack()
        assert stack == ("pipeline",) and active_phases() == "pipeline"
        threads = [
            threading.Thread(target=method, args=("assign_eagle0", stack, None)),
            threading.Thread(target=method, args=("train_baseline", stack, started)),
        ]
        for t in threads:
            t.start()
        entered.wait()
        assert active_phases() == "assign_eagle0+train_baseline"
        assert current_phase() == "pipeline"
        release.set()
        for t in threads:
            t.join()
        assert active_phases() == "pipeline"
    assert active_phases() == "" and phase_stack() == ()
    assert seen == {
        "assign_eagle0": "assign_eagle0",
        "train_baseline": "train_baseline",
        "assign_eagle0 after": "",
        "train_baseline after": "",
    }


def test_job_step_names_the_jobs_inside_it_and_leaves_the_phase(spark):
    """A step's jobs carry ``<description> / <step>`` (as their tasks see it), steps nest, and the
    description before the block comes back after it; the phase (progress lines) is unchanged."""
    from pyspark import TaskContext

    from eagle_spark.progress import current_phase, job_step

    def described(_):
        yield TaskContext.get().getLocalProperty("spark.job.description")

    def run():
        return spark.sparkContext.parallelize([0], 1).mapPartitions(described).collect()[0]

    with phase(spark, "assign_eagle"):
        with job_step(spark, "select baseline: proxy training"):
            assert run() == "assign_eagle / select baseline: proxy training"
            assert current_phase() == "assign_eagle"
            with job_step(spark, "round 1: one-vs-all scorer"):
                assert run() == (
                    "assign_eagle / select baseline: proxy training / round 1: one-vs-all scorer"
                )
            assert run() == "assign_eagle / select baseline: proxy training"
        assert run() == "assign_eagle"
    with job_step(spark, "alone"):
        assert run() == "alone"
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None
    with job_step(None, "no session"):  # nothing to name
        assert current_phase() == ""


def test_work_for_another_thread_is_labelled_as_that_threads(spark):
    """``working_for``: a worker thread's jobs carry the caller's description with its own steps
    after it, the caller's phase names its progress lines, and the worker's own description comes
    back when the work returns."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark import TaskContext

    from eagle_spark.progress import current_phase, job_step, working_for

    def described(_):
        yield TaskContext.get().getLocalProperty("spark.job.description")

    def work():
        with job_step(spark, "select baseline: proxy training"):
            seen = spark.sparkContext.parallelize([0], 1).mapPartitions(described).collect()[0]
        return seen, current_phase()

    def own():
        return spark.sparkContext.getLocalProperty("spark.job.description"), current_phase()

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(own).result() == (None, "")
        with phase(spark, "assign_eagle"):
            labelled = pool.submit(working_for(spark, work)).result()
        assert labelled == ("assign_eagle / select baseline: proxy training", "assign_eagle")
        assert pool.submit(own).result() == (None, "")  # the same worker, as it was
