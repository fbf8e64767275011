"""Progress of long work: the running Spark stage's tasks (done / total), and named steps.

:class:`SparkProgress` follows the running stages (polling a classic session's status tracker from a
daemon thread of the driver, or through a Spark Connect session's progress handler) and reports
their tasks through the ``eagle_spark.progress`` logger at INFO (a line when a stage
starts, then at most every ``log_every`` seconds while it runs, and when it ends), and, when
stderr is an interactive terminal, as one redrawn bar line instead of the periodic lines. Nothing
is reported when that logger is not enabled for INFO (``--log-level WARNING``).

:func:`step` reports a named step inside a stage (a GRLR iteration of the heavy labels, a tree
level, ...) through the same logger.

The label of a line is the current *phase*: :func:`phase` sets it (the CLI sets the command name,
the pipeline each stage's name), and Spark's job description shows it too (the Spark UI's jobs).
Phases are per thread: a thread that works for another (the pipeline runs its methods' stages
side by side, :func:`eagle_spark.pipeline.methods_at_once`) starts from that thread's phases
(:func:`phase_stack`, :func:`inherited`); a stage's progress line then names the innermost phase
of every thread at work, e.g. ``assign_eagle0+train_baseline`` (a thread waiting for the others,
whose phases they all inherited, is not named).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, TypeVar

from eagle_spark import classic

T = TypeVar("T")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.shell.progress import StageInfo

log = logging.getLogger("eagle_spark.progress")

_stacks: dict[int, tuple[str, ...]] = {}
"""The phases of every thread inside one, outermost first, by thread ident (in the order the
threads entered the outermost phase they are in)."""
_stacks_lock = threading.Lock()


def phase_stack() -> tuple[str, ...]:
    """The calling thread's phases, outermost first (empty outside any), to hand to a thread that
    works on its behalf (:func:`inherited`)."""
    with _stacks_lock:
        return _stacks.get(threading.get_ident(), ())


def _set_stack(stack: tuple[str, ...]) -> None:
    ident = threading.get_ident()
    with _stacks_lock:
        if stack:
            _stacks[ident] = stack
        else:
            _stacks.pop(ident, None)


@contextlib.contextmanager
def inherited(stack: tuple[str, ...]) -> Iterator[None]:
    """Run the block (in a thread working for another) inside `stack`, that thread's
    :func:`phase_stack`: its steps and stages are labelled as that thread's would be."""
    previous = phase_stack()
    _set_stack(stack)
    try:
        yield
    finally:
        _set_stack(previous)


def working_for(spark: Optional[SparkSession], fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` wrapped to run in another thread as the calling thread's work: inside the calling
    thread's phases (:func:`inherited`) and with its Spark job description, so its steps and jobs
    are labelled as the caller's would be; the worker thread's description is restored after."""
    stack, description = phase_stack(), classic.job_description(spark)

    def run(*args: Any, **kwargs: Any) -> T:
        with inherited(stack):
            old = classic.job_description(spark)
            classic.set_job_description(spark, description)
            try:
                return fn(*args, **kwargs)
            finally:
                classic.set_job_description(spark, old)

    return run


def current_phase() -> str:
    """The calling thread's innermost phase ("" outside any)."""
    stack = phase_stack()
    return stack[-1] if stack else ""


def active_phases() -> str:
    """The label of work seen from outside any thread (a progress line): the innermost phase of
    every thread at work, joined by ``+`` in the order of :data:`_stacks`; a thread whose phases
    another thread's begin with (it waits for that thread) is left out. "" when none."""
    with _stacks_lock:
        stacks = list(_stacks.values())
    leaves = [s for s in stacks if not any(len(o) > len(s) and o[: len(s)] == s for o in stacks)]
    return "+".join(dict.fromkeys(s[-1] for s in leaves))


@contextlib.contextmanager
def phase(spark: Optional[SparkSession], name: str) -> Iterator[None]:
    """Label the work the calling thread does inside the block (progress lines, Spark job
    descriptions, which are per thread too).

    Args:
        spark: the session (its job description is set for the block), or None.
        name: e.g. ``embed`` or ``train_eagle``.
    """
    previous = phase_stack()
    _set_stack(previous + (name,))
    old_desc = classic.job_description(spark)
    classic.set_job_description(spark, name)
    try:
        yield
    finally:
        _set_stack(previous)
        classic.set_job_description(spark, old_desc)


STEP_SEPARATOR = " / "
"""Between a job description and the name of a :func:`job_step` inside it."""


@contextlib.contextmanager
def job_step(spark: Optional[SparkSession], name: str) -> Iterator[None]:
    """Name the Spark jobs the calling thread starts inside the block as a step of its current
    job description: ``<description> / <name>`` (``assign_eagle / select baseline: proxy
    training``), so Spark's UI and event log tell a stage's parts apart
    (``benchmarks/main_job.py`` tables them). The phase and the progress lines are unchanged.
    Steps nest; nothing under Spark Connect, which has no job descriptions.

    Args:
        spark: the session, or None (nothing is named).
        name: the step, e.g. ``select baseline: proxy training``.
    """
    old = classic.job_description(spark)
    classic.set_job_description(spark, f"{old}{STEP_SEPARATOR}{name}" if old else name)
    try:
        yield
    finally:
        classic.set_job_description(spark, old)


def step(message: str, *args: Any) -> None:
    """Report one step of the calling thread's phase at INFO (``<phase>: <message>``)."""
    if log.isEnabledFor(logging.INFO):
        log.info("%s: " + message, current_phase() or "eagle_spark", *args)


def bar(done: int, total: int, width: int = 30) -> str:
    """A text progress bar: ``[#########.....]  9/15`` (`width` characters inside the brackets).

    Raises:
        ValueError: `total` < 0, `done` outside [0, total], or `width` < 1.
    """
    if total < 0 or not 0 <= done <= max(total, 0) or width < 1:
        raise ValueError(
            f"bar needs 0 <= done <= total and width >= 1, got {done}/{total}, {width}"
        )
    filled = width if total == 0 else done * width // total
    return f"[{'#' * filled}{'.' * (width - filled)}] {done:>{len(str(total))}}/{total}"


class SparkProgress:
    """Report the tasks of the running Spark stages until stopped (a context manager).

    On a classic session a daemon thread polls the status tracker every `interval` seconds; under
    Spark Connect the session's progress handler (``registerProgressHandler``) receives what the
    server sends with each operation's results (its ``spark.connect.progress.reportInterval``),
    on the thread that runs the operation. Both feed the same lines.

    Args:
        spark: the session whose stages are reported.
        interval: seconds between polls of a classic session (> 0).
        log_every: seconds between the periodic log lines of a running stage (>= 0).
        stream: where the terminal bar goes (default stderr); the bar is drawn only when it is a TTY.
    Raises:
        ValueError: `interval` <= 0 or `log_every` < 0.

    Monitors nest: only the outermost one reports (the CLI wraps every command, the pipeline its
    run).

    Memory and cost: one driver thread on a classic session, each poll a few Py4J calls for the
    active stage ids and their task counts; under Connect a call per progress message. Either way
    a few numbers per running stage, never touching executors.
    """

    def __init__(
        self,
        spark: SparkSession,
        interval: float = 1.0,
        log_every: float = 10.0,
        stream: Optional[Any] = None,
    ) -> None:
        if interval <= 0 or log_every < 0:
            raise ValueError(
                f"interval must be > 0 and log_every >= 0, got {interval}, {log_every}"
            )
        self.spark = spark
        self.tracker = classic.status_tracker(spark)  # None under Spark Connect
        self.connect = classic.is_connect(spark)
        self.interval, self.log_every = interval, log_every
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="eagle-spark-progress")
        self._lock = threading.Lock()
        self._seen: dict[int, tuple[int, int, float]] = {}  # stage id -> (done, total, last logged)
        self._handler: Optional[Callable[..., None]] = None
        self.lines: list[str] = []  # every line reported (for tests and the run log)

    _running = (
        0  # monitors entered and not yet left: a nested one (pipeline inside the CLI) is idle
    )

    def __enter__(self) -> "SparkProgress":
        self._outer = SparkProgress._running == 0
        SparkProgress._running += 1
        if self._outer and log.isEnabledFor(logging.INFO):
            if self.tracker is not None:
                self._thread.start()
            elif self.connect:
                self._handler = self.on_connect_progress
                self.spark.registerProgressHandler(self._handler)  # type: ignore[arg-type]  # stub: a ProgressHandler; any callable works
        return self

    def __exit__(self, *exc: Any) -> None:
        SparkProgress._running -= 1
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._handler is not None:
            self.spark.removeProgressHandler(self._handler)  # type: ignore[arg-type]  # as registered
            self._handler = None
        if self._outer:
            self.poll(final=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a failed poll (JVM gone at shutdown) ends reporting
                return

    def _observe(self, stage_id: int, done: int, total: int, name: str, now: float) -> None:
        """A running stage's task counts: a line when it is new, then as `log_every` / the bar say."""
        previous = self._seen.get(stage_id)
        if previous is None:
            about = f" ({name})" if name else ""
            self._report(f"stage {stage_id} started: {bar(min(done, total), total)} tasks{about}")
            self._seen[stage_id] = (done, total, now)
        elif done != previous[0]:
            if self.tty:
                self._draw(f"stage {stage_id} {bar(min(done, total), total)} tasks")
                self._seen[stage_id] = (done, total, previous[2])
            elif now - previous[2] >= self.log_every:
                self._report(f"stage {stage_id}: {bar(min(done, total), total)} tasks")
                self._seen[stage_id] = (done, total, now)
            else:
                self._seen[stage_id] = (done, total, previous[2])

    def _ended(self, stage_id: int, done: int, total: int, failed: int = 0) -> None:
        self._seen.pop(stage_id, None)
        extra = f", {failed} failed" if failed else ""
        self._report(f"stage {stage_id} ended: {bar(min(done, total), total)} tasks{extra}")

    def on_connect_progress(
        self,
        stages: Optional[Iterable[StageInfo]],
        inflight_tasks: int,
        operation_id: Optional[str],
        done: bool,
    ) -> None:
        """The Spark Connect progress handler: `stages` are pyspark's ``StageInfo`` records (stage_id,
        num_tasks, num_completed_tasks, done) of one operation; `done` is the operation's end, which
        ends the stages it still had running."""
        del inflight_tasks, operation_id
        if not log.isEnabledFor(logging.INFO):
            return
        now = time.monotonic()
        with self._lock:
            for info in stages or ():
                stage_id, total = int(info.stage_id), int(info.num_tasks)
                finished = int(info.num_completed_tasks)
                if info.done or done:
                    if stage_id in self._seen:
                        self._ended(stage_id, total if info.done else finished, total)
                    continue
                self._observe(stage_id, finished, total, "", now)

    def poll(self, final: bool = False) -> None:
        """Read a classic session's active stages once and report what changed (also called at the
        end)."""
        if not log.isEnabledFor(logging.INFO):
            return
        if self.tracker is None:  # Spark Connect: what is still open ends with the monitor
            if final:
                with self._lock:
                    for stage_id, (done, total, _) in list(self._seen.items()):
                        self._ended(stage_id, done, total)
            return
        now = time.monotonic()
        active = set()
        with self._lock:
            for stage_id in () if final else self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage_id)
                if info is None:
                    continue
                active.add(stage_id)
                self._observe(
                    stage_id, int(info.numCompletedTasks), int(info.numTasks), info.name, now
                )
            for stage_id in [s for s in self._seen if s not in active]:
                done, total, _ = self._seen[stage_id]
                info = self.tracker.getStageInfo(stage_id)
                failed = 0
                if info is not None:
                    total, failed = int(info.numTasks), int(info.numFailedTasks)
                    done = max(done, int(info.numCompletedTasks))
                    if int(info.numActiveTasks) == 0 and failed == 0:
                        done = total  # no longer active, nothing running or failed: listener lags
                self._ended(stage_id, done, total, failed)

    def _report(self, text: str) -> None:
        line = f"{active_phases() or 'spark'}: {text}"
        self.lines.append(line)
        if self.tty:
            self.stream.write("\r\033[K")
        log.info("%s", line)

    def _draw(self, text: str) -> None:
        line = f"{active_phases() or 'spark'}: {text}"
        self.lines.append(line)
        self.stream.write(f"\r\033[K{line}")
        self.stream.flush()


__all__ = [
    "STEP_SEPARATOR",
    "SparkProgress",
    "active_phases",
    "bar",
    "current_phase",
    "inherited",
    "job_step",
    "phase",
    "phase_stack",
    "step",
    "working_for",
]
