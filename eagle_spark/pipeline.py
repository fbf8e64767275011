"""The main job: ingest -> aggregate -> embed -> assign -> train -> predict -> evaluate, resumable.

One run folder holds every stage's output (each committed atomically by its stage)::

    <run>/data/train, data/test          ingested XC files (or the given datasets are used in place)
    <run>/data/aggregated                X, Y, Y1, Y2 (random groups of g, or clusters)
    <run>/embeddings/<method>            label embeddings (GRLR T iterations; eagle0: T = 0)
    <run>/assigned/<method>              assignments + X, Y = Y_filter
    <run>/models/<method>                classifier trained on Y_filter
    <run>/predictions/<method>           top-k of the test set
    <run>/metrics/<method>               P@k, nDCG@k, PSP@k
    <run>/delta/<table>_<method>         Delta tables (``format: delta``): assignments, predictions
    <run>/comparison.{json,md}           the paper's Table 2 layout (methods side by side); every value
                                         in percent, its JSON key says so (P_percent, ...)
    <run>/report.{json,md}               the latest run: per-stage status, wall time, rows, peak memory
    <run>/reports/<run id>.json          every run's report, kept
    <run>/logs/<run id>.log              each run's log lines with per-stage timings (local run folder);
                                         run id = UTC start time and pid, e.g. 20261123T020304Z-4242
    <run>/_stages/<stage>.json           what each finished stage was computed from
    <run>/_lock                          held while a run works in the folder (one writer at a time)

Methods (paper section 6): ``baseline`` gives every group label to every member (Y1 Y2),
``eagle0`` assigns with the initial label embeddings (Algorithm 2 with T = 0), ``eagle`` with the
embeddings after T GRLR iterations (Algorithms 1 + 2). After aggregate the methods are
independent: their stages run side by side, each method's in order, as many methods at once as
:func:`methods_at_once` allows (``pipeline.methods_at_once``).

One writer per run folder: a run takes ``<run>/_lock`` (:class:`eagle_spark.io.lock.RunLock`)
before it writes anything and keeps it to the end; a second run on the same folder exits 2 naming
the holder's pid, host and start time. The lock of a killed run is taken over (logged).

Resuming: a stage is skipped when its record in ``_stages/`` has the same fingerprint (stage name,
its settings, and the fingerprints of its inputs: size and modification time of a text file, the
bytes of a dataset's manifest) and its output still has the manifest the record saw. Changing a
setting, an input, or an output by hand reruns that stage and everything downstream of it.

Shared results: a method's train, predict and evaluate stages name what they compute by a key
(the stage's kind, its settings and what it reads: for train the training set's content,
:func:`eagle_spark.classifiers.base.training_identity`; for predict and evaluate their inputs'
fingerprints). When a stage of the run (run or skipped as unchanged) already has the key, the
stage copies that stage's output instead of computing it again (status ``copied``, its record and
report row name the source), waiting for it when it is still running; if that stage failed, the
stage computes its own. So when ``assign.weighting=auto`` chooses the Baseline for EAGLE-0 and
EAGLE, ``--compare`` trains, predicts and evaluates the Baseline's training set once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import posixpath
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Optional

from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.assignment.assign import choice_of
from eagle_spark.comparison import comparison_markdown, comparison_of, report_markdown
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.io.fs import (
    FileSystem,
    absolute,
    atomic_output,
    check_separate,
    input_read_errors,
)
from eagle_spark.io.lock import RunLock
from eagle_spark.monitor import PeakRSS
from eagle_spark.progress import SparkProgress, inherited, phase, phase_stack
from eagle_spark.settings import Settings, as_params

log = logging.getLogger(__name__)

PAPER_ASSIGN = {"method": "eagle", "multiplicity": False, "weighting": "hard"}
"""The ``assign`` settings of ``eagle_paper``: Algorithm 2 as printed."""


@dataclasses.dataclass
class Stage:
    """One step of the run.

    Attributes:
        name: unique within the run (``embed_eagle``, ``train_baseline``, ...).
        output: the folder the stage writes.
        inputs: text files or folders it reads (their fingerprints chain the stages).
        params: the settings it depends on (JSON-serialisable).
        run: does the work (replacing a stale output of an earlier run) and returns a summary
            dict.
        rows: key of the summary reported as the stage's row count.
        share: returns the key of what the stage computes (see the module docstring: stages with
            the same key write the same output), or None when it has none; called once the
            inputs exist. None: the stage is never shared.
    """

    name: str
    output: str
    inputs: list[str]
    params: dict[str, Any]
    run: Callable[[], dict[str, Any]]
    rows: str
    share: Optional[Callable[[], Optional[str]]] = None


@dataclasses.dataclass
class _Shared:
    """The stage of a run that computes (or computed) a shared key's output."""

    stage: str
    output: str
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    summary: Optional[dict[str, Any]] = None  # set when it succeeded


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Pipeline:
    """Runs stages in order with skip-if-unchanged, timing, memory and the run report.

    Args:
        spark: the active session.
        settings: all settings (the ``pipeline`` section says what to run).
        force: rerun every stage even when its record matches.
    """

    def __init__(self, spark: SparkSession, settings: Settings, force: bool = False) -> None:
        self.spark = spark
        given = settings.pipeline
        paths = ("output", "train", "test", "dataset", "test_dataset")
        settings = settings.replace(  # the tasks read and write them: absolute (io/fs.absolute)
            "pipeline",
            **{k: absolute(getattr(given, k)) for k in paths if getattr(given, k) is not None},
        )
        self.settings = settings
        self.force = force
        self.fs = FileSystem(spark)
        self.run_dir = settings.pipeline.output.rstrip("/")
        self.rows: list[dict[str, Any]] = []
        self._ran: set[str] = set()  # stages run by this run (``force`` reruns each once)
        self._locks: dict[str, threading.Lock] = {}  # one per stage: methods share some
        self._locks_lock = threading.Lock()
        self._thread = threading.local()  # a method's thread collects its own rows
        self._shared: dict[str, _Shared] = {}  # share key -> the stage that computes it

    # -- fingerprints -------------------------------------------------------------------------
    def _token(self, path: str) -> Optional[str]:
        """What identifies the current content of `path`: its manifest / metadata bytes, its Delta
        version, or size + modification time of a file; None when it does not exist."""
        for name in (S.MANIFEST, "metadata.json"):
            candidate = posixpath.join(path, name)
            if self.fs.exists(candidate):
                return _sha(self.fs.read_bytes(candidate))
        if not self.fs.exists(path):
            return None
        if self.fs.is_dir(path):
            log_dir = posixpath.join(path, "_delta_log")
            if self.fs.exists(log_dir):
                return "delta:" + max(self.fs.list(log_dir))
            raise BadInputError(
                f"{path} is a folder without {S.MANIFEST}: not an eagle_spark dataset"
            )
        size, mtime = self.fs.status(path)
        return f"file:{size}:{mtime}"

    def _fingerprint(self, stage: Stage) -> str:
        tokens = []
        for path in stage.inputs:
            token = self._token(path)
            if token is None:
                raise BadInputError(f"stage {stage.name}: input {path} does not exist")
            tokens.append(token)
        return _sha(
            json.dumps(
                {"stage": stage.name, "params": stage.params, "inputs": tokens}, sort_keys=True
            ).encode()
        )

    def share_key(
        self, kind: str, params: dict[str, Any], inputs: list[Optional[str]]
    ) -> Optional[str]:
        """The key of a stage of `kind` with settings `params` reading `inputs` (tokens or
        content digests; None when one has none: the stage is not shared)."""
        if any(token is None for token in inputs):
            return None
        blob = json.dumps({"kind": kind, "params": params, "inputs": inputs}, sort_keys=True)
        return _sha(blob.encode())

    def input_tokens(self, *paths: str) -> list[Optional[str]]:
        """:meth:`_token` of each path (for :meth:`share_key`)."""
        return [self._token(path) for path in paths]

    def _claim(self, key: Optional[str], stage: Stage) -> Optional[_Shared]:
        """The stage already holding `key` (None: `stage` now holds it and must settle it)."""
        if key is None:
            return None
        with self._locks_lock:
            held = self._shared.get(key)
            if held is None or (held.done.is_set() and held.summary is None):
                self._shared[key] = _Shared(stage.name, stage.output)
                return None
            return held

    def _settle(self, key: Optional[str], summary: Optional[dict[str, Any]]) -> None:
        if key is None:
            return
        with self._locks_lock:
            held = self._shared[key]
        held.summary = summary
        held.done.set()

    def write_file(self, path: str, data: bytes) -> None:
        """Write (or replace) a small file of the run folder atomically: a reader, or a run that
        resumes after a kill, sees the previous content or the new one (:func:`atomic_output`)."""
        with atomic_output(self.spark, path, overwrite=True) as tmp:
            self.fs.write_bytes(tmp, data)

    def _record_path(self, stage: Stage) -> str:
        return posixpath.join(self.run_dir, "_stages", f"{stage.name}.json")

    def _record(self, stage: Stage) -> Optional[dict[str, Any]]:
        path = self._record_path(stage)
        if not self.fs.exists(path):
            return None
        try:
            return json.loads(self.fs.read_bytes(path).decode())
        except ValueError:
            return None  # a damaged record only costs a rerun

    # -- running ------------------------------------------------------------------------------
    def run_stage(self, stage: Stage) -> dict[str, Any]:
        """Run `stage` unless its record matches; returns its summary (recorded or fresh).

        Thread-safe: methods running side by side may reach the same stage (``eagle_paper`` and
        ``eagle`` share ``embed_eagle``); the first runs it, the others wait for it and skip it.

        Raises:
            BadInputError: an input is missing or bad (nothing of the stage is written then).
        """
        with self._locks_lock:
            lock = self._locks.setdefault(stage.name, threading.Lock())
        with lock:
            return self._run_stage(stage)

    def _run_stage(self, stage: Stage) -> dict[str, Any]:
        fingerprint = self._fingerprint(stage)
        record = self._record(stage)
        if (
            (not self.force or stage.name in self._ran)
            and record is not None
            and record.get("fingerprint") == fingerprint
            and record.get("output_token") == self._token(stage.output)
        ):
            log.info("stage %s: unchanged, skipped (%s)", stage.name, stage.output)
            if stage.share is not None:  # a later stage with its key copies this output
                key = stage.share()
                if self._claim(key, stage) is None:
                    self._settle(key, record["summary"])
            self._rows().append(
                {
                    "stage": stage.name,
                    "status": "skipped",
                    "seconds": 0.0,
                    "rows": record.get("rows"),
                    "peak_rss_mb": None,
                    "output": stage.output,
                }
            )
            return record["summary"]
        key = stage.share() if stage.share is not None else None
        source = self._claim(key, stage)
        if source is not None:
            log.info(
                "stage %s: computes what %s computes; waiting for it", stage.name, source.stage
            )
            source.done.wait()
            if source.summary is None:  # it failed: compute it here (this stage now holds it)
                log.info("stage %s: %s failed; computing it", stage.name, source.stage)
                return self._run_stage(stage)
        log.info("stage %s: start -> %s", stage.name, stage.output)
        started = time.monotonic()
        summary = None
        try:
            with (
                PeakRSS(interval=0.5) as memory,
                input_read_errors(stage.inputs),
                phase(self.spark, stage.name),
            ):
                if source is None:
                    summary = stage.run()
                else:
                    summary = self._copy(source, stage)
        finally:
            if source is None:
                self._settle(key, summary)
        self._ran.add(stage.name)
        seconds = round(time.monotonic() - started, 3)
        rows = summary.get(stage.rows)
        peak_mb = round(memory.peak_bytes / 2**20, 1)
        log.info(
            "stage %s: done in %.1f s, %s %s, peak RSS %.0f MB",
            stage.name,
            seconds,
            rows,
            stage.rows,
            peak_mb,
        )
        record = {
            "stage": stage.name,
            "fingerprint": fingerprint,
            "output": stage.output,
            "output_token": self._token(stage.output),
            "summary": summary,
            "rows": rows,
            "seconds": seconds,
            "peak_rss_mb": peak_mb,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "copied_from": None if source is None else source.stage,
        }
        self.write_file(
            self._record_path(stage), (strict_json(record, indent=2, default=str) + "\n").encode()
        )
        self._rows().append(
            {
                "stage": stage.name,
                "status": "ran" if source is None else "copied",
                "seconds": seconds,
                "rows": rows,
                "peak_rss_mb": peak_mb,
                "output": stage.output,
                **({} if source is None else {"copied_from": source.stage}),
            }
        )
        return summary

    def _copy(self, source: _Shared, stage: Stage) -> dict[str, Any]:
        """Copy `source`'s output (committed, the same computation as `stage`'s) to `stage`'s
        output, atomically; returns `source`'s summary."""
        log.info("stage %s: copying %s's output %s", stage.name, source.stage, source.output)
        with atomic_output(self.spark, stage.output, overwrite=True) as tmp:
            self.fs.copy(source.output, tmp)
        return dict(source.summary or {})

    def _rows(self) -> list[dict[str, Any]]:
        return getattr(self._thread, "rows", self.rows)

    @contextlib.contextmanager
    def own_rows(self) -> Iterator[list[dict[str, Any]]]:
        """Collect the report rows of the stages the calling thread runs into a list of its own
        (a method run side by side), which the caller adds to :attr:`rows` in the methods'
        order; the report then lists each method's stages together, as one at a time would."""
        mine: list[dict[str, Any]] = []
        self._thread.rows = mine
        try:
            yield mine
        finally:
            del self._thread.rows

    def path(self, *parts: str) -> str:
        """A path inside the run folder."""
        return posixpath.join(self.run_dir, *parts)


def _section(settings: Settings, name: str, **changes: Any) -> Any:
    return dataclasses.replace(getattr(settings, name), **changes)


def run_pipeline(spark: SparkSession, settings: Settings, force: bool = False) -> dict[str, Any]:
    """Run the main job (module docstring) and write the comparison and the run report.

    Args:
        spark: the active session (local mode, standalone cluster, or spark-submit's).
        settings: all settings; ``settings.pipeline`` names the inputs, methods, run folder, format.
        force: rerun every stage.
    Returns:
        {"output", "methods", "comparison" (per method: P@k, assignment precision/recall), "stages"
        (per-stage rows of the report), "seconds"}.
    Raises:
        BadInputError: missing inputs, tables with the wrong schema, a manifest disagreeing with its
            tables, labels out of range, empty groups, samples without features, groups without
            members (all checked before the first stage writes anything).
    """
    pipe = Pipeline(spark, settings, force)
    started = time.monotonic()
    check_inputs(pipe)

    with open_run(pipe) as run_id:
        return _run_stages(spark, settings, pipe, started, run_id)


@contextlib.contextmanager
def open_run(pipe: Pipeline) -> Iterator[str]:
    """Hold the run folder for one run: its lock (``_lock``), its log file ``logs/<run id>.log``
    and Spark progress logging; yields the run id (UTC start time and pid).

    Raises:
        RunFolderInUseError: another live process holds the folder.
    """
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"
    with RunLock(pipe.spark, pipe.run_dir, run_id):
        handler = _file_log(pipe.run_dir, run_id)
        try:
            with SparkProgress(pipe.spark):
                yield run_id
        finally:
            if handler is not None:
                logging.getLogger("eagle_spark").removeHandler(handler)
                handler.close()


def check_inputs(pipe: Pipeline) -> None:
    """Validate every input ``pipeline`` names before anything is written.

    Raises:
        BadInputError: no test set where prediction is asked, a missing file, a dataset with the
            wrong tables or schema (see :func:`run_pipeline`), or a run folder overlapping an input.
    """
    from eagle_spark.aggregation.check import check_aggregated, check_dataset

    spark, p = pipe.spark, pipe.settings.pipeline
    default_data = p.train is None and p.dataset is None
    if (
        p.test is None
        and p.test_dataset is None
        and not default_data
        and p.until in ("predict", "evaluate")
    ):
        raise BadInputError(
            "pipeline.test or pipeline.test_dataset is needed to predict and evaluate "
            "(or set pipeline.until=train)"
        )
    with input_read_errors([p.dataset, p.test_dataset]):
        if p.dataset is not None:
            if p.aggregate:
                check_dataset(spark, p.dataset, need=(S.X, S.Y))
            else:
                check_aggregated(spark, p.dataset)
        if p.test_dataset is not None:
            check_dataset(spark, p.test_dataset, need=(S.X, S.Y))
    for path in (p.train, p.test):
        if path is not None and not pipe.fs.exists(path):
            raise BadInputError(f"input file {path} does not exist")
    check_separate(pipe.run_dir, [p.train, p.test, p.dataset, p.test_dataset])


def _run_stages(
    spark: SparkSession, settings: Settings, pipe: "Pipeline", started: float, run_id: str
) -> dict[str, Any]:
    """The stages of :func:`run_pipeline`, once its inputs are checked and the run folder locked."""
    from eagle_spark.classifiers.predict import PREDICTIONS
    from eagle_spark.io.delta import publish_delta

    p = settings.pipeline
    train_data, test_data = ingest_inputs(pipe)

    # -- aggregate ---------------------------------------------------------------------------
    agg = train_data
    if p.aggregate:
        agg = pipe.path("data", "aggregated")
        pipe.run_stage(
            Stage(
                "aggregate",
                agg,
                [train_data],
                settings.aggregate.to_dict(),
                lambda: _aggregate(spark, train_data, agg, settings),
                "n_groups",
            )
        )
    grouping = _grouping_name(spark, agg)

    # -- per method: embed, assign, train, predict, evaluate ----------------------------------
    results = _run_methods(pipe, agg, test_data, train_data)

    # -- Delta tables ------------------------------------------------------------------------
    delta: dict[str, Any] = {}
    if p.format == "delta":
        for method in p.methods:
            tables = [("assignments", pipe.path("assigned", method), S.ASSIGNMENTS)]
            if p.until in ("predict", "evaluate"):
                tables.append(("predictions", pipe.path("predictions", method), PREDICTIONS))
            for name, folder, table in tables:
                target = pipe.path("delta", f"{name}_{method}")
                delta[f"{name}_{method}"] = pipe.run_stage(
                    Stage(
                        f"delta_{name}_{method}",
                        target,
                        [folder],
                        {"format": "delta"},
                        functools.partial(publish_delta, spark, f"{folder}/{table}", target),
                        "rows",
                    )
                )

    comparison = comparison_of(results, grouping, p.until)
    if p.until == "evaluate":
        _write_text(pipe, "comparison.json", strict_json(comparison, indent=2) + "\n")
        _write_text(pipe, "comparison.md", comparison_markdown(comparison) + "\n")
        log.info(
            "comparison (%s) -> %s:\n%s",
            grouping,
            pipe.path("comparison.md"),
            comparison_markdown(comparison),
        )
    seconds = round(time.monotonic() - started, 3)
    report = {
        "output": pipe.run_dir,
        "run_id": run_id,
        "methods": list(p.methods),
        "grouping": grouping,
        "seconds": seconds,
        "stages": pipe.rows,
        "assignment_used": {m: r.get("assignment_used") for m, r in results.items()},
        "delta": delta,
        "settings": settings.to_dict(),
    }
    report_json = strict_json(report, indent=2, default=str) + "\n"
    _write_text(pipe, f"reports/{run_id}.json", report_json)  # every run's report is kept
    _write_text(pipe, "report.json", report_json)  # the latest run's
    _write_text(pipe, "report.md", report_markdown(report) + "\n")
    return {
        "output": pipe.run_dir,
        "methods": list(p.methods),
        "grouping": grouping,
        "comparison": comparison,
        "stages": pipe.rows,
        "seconds": seconds,
    }


def ingest_inputs(pipe: Pipeline) -> tuple[str, Optional[str]]:
    """Stages ``ingest_train`` / ``ingest_test``: the training and test sets as dataset folders
    (``pipeline.dataset`` / ``test_dataset`` used in place; XC files ingested into ``data/``; the
    embedded delicious files when nothing is given). Returns (train dataset, test dataset or None
    when ``pipeline.until`` stops before prediction)."""
    from eagle_spark.data import embedded_path

    spark, settings, p = pipe.spark, pipe.settings, pipe.settings.pipeline
    train_data = p.dataset
    if train_data is None:
        source = p.train or embedded_path("delicious", "train")
        train_data = pipe.path("data", "train")
        pipe.run_stage(
            Stage(
                "ingest_train",
                train_data,
                [source],
                settings.ingest.to_dict(),
                functools.partial(_ingest, spark, source, train_data, settings),
                "n_samples",
            )
        )
    test_data = p.test_dataset
    if test_data is None and p.until in ("predict", "evaluate"):
        source = p.test or embedded_path("delicious", "test")
        test_data = pipe.path("data", "test")
        pipe.run_stage(
            Stage(
                "ingest_test",
                test_data,
                [source],
                settings.ingest.to_dict(),
                functools.partial(_ingest, spark, source, test_data, settings),
                "n_samples",
            )
        )
    return train_data, test_data


def _ingest(spark: SparkSession, source: str, out: str, settings: Settings) -> dict[str, Any]:
    from eagle_spark.ml import Dataset

    return Dataset.ingest(spark, source, out, overwrite=True, **as_params(settings.ingest)).manifest


def _aggregate(spark: SparkSession, dataset: str, out: str, settings: Settings) -> dict[str, Any]:
    from eagle_spark.ml import Dataset

    return (
        Dataset.at(spark, dataset)
        .aggregate(
            out,
            **as_params(settings.aggregate),
            overwrite=True,
        )
        .manifest
    )


CHAIN_MEMORY_PER_BYTE = 20
"""Estimated peak memory of one method's stages per byte of the aggregated dataset's files:
training the label tree on synthetic Wiki-325K 0.1 (an 85 MB dataset) peaked at 1.5 GB (one task
slot) to 2.2 GB (four) of PSS over all processes (benchmarks/reports/
executor_memory_train_0.1.json), 18-26 bytes per byte."""
METHODS_MEMORY_SHARE = 0.5
"""Share of the memory available on the machine (at the start of the methods' stages) that the
methods running side by side may take together (:func:`methods_at_once`); the rest is for the
driver, the JVM's growth and the page cache."""


def methods_at_once(spark: SparkSession, setting: int, dataset: str, n_methods: int) -> int:
    """How many of `n_methods` methods run their stages side by side (at least 1).

    `setting` (``pipeline.methods_at_once``) > 0 caps it. 0 is the rule: on a classic session in
    local mode as many as fit in :data:`METHODS_MEMORY_SHARE` of the machine's available memory
    at :data:`CHAIN_MEMORY_PER_BYTE` bytes per byte of `dataset`'s files (the aggregated data);
    elsewhere one (a cluster's executors, or a Spark Connect server, may be on other machines,
    whose memory this process does not see). On a machine with ~20 GB available the embedded
    Delicious data (1.3 MB) runs all three ``--compare`` methods at once and synthetic Wiki-325K
    1.0 (~0.8 GB) one after another.

    Raises:
        FileNotFoundError: `dataset` does not exist (setting 0 only).
    """
    if setting > 0:
        return max(1, min(setting, n_methods))
    from eagle_spark import classic
    from eagle_spark.classifiers.tree.units import memory_available

    if n_methods <= 1 or classic.is_connect(spark) or not classic.is_local(spark):
        return 1
    need = CHAIN_MEMORY_PER_BYTE * max(1, FileSystem(spark).size(dataset))
    return max(1, min(n_methods, int(METHODS_MEMORY_SHARE * memory_available() // need)))


def _run_methods(
    pipe: Pipeline, agg: str, test_data: Optional[str], train_data: str
) -> dict[str, dict[str, Any]]:
    """:func:`_run_method` for every method of ``pipeline.methods``, :func:`methods_at_once` of
    them side by side (one thread each, labelled by the caller's phases); results in the methods'
    order.

    When a method fails, the others still run to their end (what they finish is recorded and a
    rerun skips it); then the first failure in the methods' order is raised.
    """
    methods = list(pipe.settings.pipeline.methods)
    at_once = methods_at_once(pipe.spark, pipe.settings.pipeline.methods_at_once, agg, len(methods))
    if at_once == 1:
        return {m: _run_method(pipe, m, agg, test_data, train_data) for m in methods}
    log.info("methods %s: %d side by side", ", ".join(methods), at_once)
    stack = phase_stack()
    rows: dict[str, list[dict[str, Any]]] = {}

    def run(method: str) -> dict[str, Any]:
        with inherited(stack), pipe.own_rows() as rows[method]:
            return _run_method(pipe, method, agg, test_data, train_data)

    with ThreadPoolExecutor(at_once, thread_name_prefix="eagle-spark-method") as pool:
        futures = {m: pool.submit(run, m) for m in methods}
    for method in methods:  # the report lists each method's stages together
        pipe.rows.extend(rows.get(method, []))
    failed = [(m, err) for m, f in futures.items() if (err := f.exception()) is not None]
    for method, err in failed[1:]:
        log.error("method %s failed too: %s: %s", method, type(err).__name__, err)
    if failed:
        raise failed[0][1]
    return {m: f.result() for m, f in futures.items()}


def _run_method(
    pipe: Pipeline, method: str, agg: str, test_data: Optional[str], train_data: str
) -> dict[str, Any]:
    """embed (eagle / eagle0), assign, train, predict, evaluate for one method; returns its results."""
    from eagle_spark.ml import GRLR, Dataset, GRLRModel

    spark, settings, p = pipe.spark, pipe.settings, pipe.settings.pipeline
    out: dict[str, Any] = {}
    assigned = pipe.path("assigned", method)
    assign_params = (
        _section(settings, "assign", **PAPER_ASSIGN)
        if method == "eagle_paper"
        else _section(settings, "assign", method="baseline" if method == "baseline" else "eagle")
    )
    if method == "baseline":
        assign_inputs, emb = [agg], None
    else:
        learner = (
            "eagle" if method == "eagle_paper" else method
        )  # the paper's EAGLE shares EAGLE's GRLR
        emb = pipe.path("embeddings", learner)
        embed_params = (
            settings.embed if learner == "eagle" else _section(settings, "embed", iterations=0)
        )
        pipe.run_stage(
            Stage(
                f"embed_{learner}",
                emb,
                [agg],
                embed_params.to_dict(),
                lambda: (
                    GRLR.fromSettings(embed_params)
                    .fitDataset(Dataset.at(spark, agg), emb, overwrite=True)
                    .summary
                ),
                "n_labels",
            )
        )
        assign_inputs = [agg, emb]
    # baseline ignores every assign setting but the method: keep its fingerprint independent of them
    depends = {"method": "baseline"} if method == "baseline" else assign_params.to_dict()
    summary = pipe.run_stage(
        Stage(
            f"assign_{method}",
            assigned,
            assign_inputs,
            depends,
            lambda: (
                (
                    GRLRModel.fromSettings(assign_params).atFolder(emb)
                    if emb
                    else GRLRModel.fromSettings(assign_params)
                )
                .transformDataset(Dataset.at(spark, agg), assigned, overwrite=True)
                .manifest
            ),
            "n_assignments",
        )
    )
    out["assignment"] = summary.get("quality")
    out["assignment_used"] = choice_of(summary)  # what auto chose, or why it could not
    if p.until == "assign":
        return out
    return {**out, **classify(pipe, method, assigned, test_data, train_data)}


def classify(
    pipe: Pipeline, name: str, training: str, test_data: Optional[str], train_data: str
) -> dict[str, Any]:
    """Stages ``train_<name>``, ``predict_<name>``, ``evaluate_<name>`` (as far as
    ``pipeline.until``): the classifier of ``train.model`` fitted on `training`'s X and Y into
    ``models/<name>``, its top-k of `test_data` and their metrics (propensities from `train_data`'s
    Y when it has one). Returns {"metrics": ...} once evaluated, else {}."""
    from eagle_spark.evaluation.evaluate import evaluate
    from eagle_spark.io.tables import has_table
    from eagle_spark.ml import Dataset, LabelTreeClassifier, OneVsRestXMC
    from eagle_spark.ml.classifiers import model_at

    spark, settings, p = pipe.spark, pipe.settings, pipe.settings.pipeline
    model = pipe.path("models", name)
    kind, train_params = settings.train.model, settings.classifier()

    def train() -> dict[str, Any]:
        estimator = (LabelTreeClassifier if kind == "tree" else OneVsRestXMC).fromSettings(
            train_params
        )
        return estimator.fitDataset(Dataset.at(spark, training), model, overwrite=True).metadata

    from eagle_spark.classifiers.base import training_identity

    train_settings = {"model": kind, **train_params.to_dict()}
    pipe.run_stage(
        Stage(
            f"train_{name}",
            model,
            [training],
            train_settings,
            train,
            "n_labels",
            share=lambda: pipe.share_key(
                "train", train_settings, [training_identity(spark, training)]
            ),
        )
    )
    if p.until == "train" or test_data is None:
        return {}
    preds = pipe.path("predictions", name)
    pipe.run_stage(
        Stage(
            f"predict_{name}",
            preds,
            [model, test_data],
            settings.predict.to_dict(),
            lambda: model_at(spark, model, settings.predict).transformDataset(
                Dataset.at(spark, test_data), preds, overwrite=True
            ),
            "n_samples",
            share=lambda: pipe.share_key(
                "predict", settings.predict.to_dict(), pipe.input_tokens(model, test_data)
            ),
        )
    )
    if p.until == "predict":
        return {}
    metrics = pipe.path("metrics", name)
    reference = train_data if has_table(spark, train_data, S.Y) else test_data
    return {
        "metrics": pipe.run_stage(
            Stage(
                f"evaluate_{name}",
                metrics,
                [preds, test_data, reference],
                settings.evaluate.to_dict(),
                lambda: evaluate(
                    spark,
                    preds,
                    test_data,
                    settings.evaluate,
                    output_path=metrics,
                    propensity_from=reference,
                    overwrite=True,
                ),
                "n_samples",
                share=lambda: pipe.share_key(
                    "evaluate",
                    settings.evaluate.to_dict(),
                    pipe.input_tokens(preds, test_data, reference),
                ),
            )
        )
    }


def _grouping_name(spark: SparkSession, agg: str) -> str:
    """``R-g`` for random groups of g, ``C`` for clusters, ``supplied`` otherwise (Table 2 rows)."""
    from eagle_spark.io.tables import read_manifest

    params = read_manifest(spark, agg).get("parameters") or {}
    if params.get("grouping") == "random":
        return f"R-{params.get('group_size')}"
    if params.get("grouping") == "cluster":
        return "C"
    return str(params.get("grouping", "supplied"))


def _write_text(pipe: Pipeline, name: str, text: str) -> None:
    pipe.write_file(pipe.path(name), text.encode())


def _file_log(run_dir: str, run_id: str) -> Optional[logging.Handler]:
    """Write eagle_spark's log lines to ``<run>/logs/<run_id>.log`` when the run folder is local."""
    if "://" in run_dir and not run_dir.startswith("file://"):
        return None
    local = run_dir[len("file://") :] if run_dir.startswith("file://") else run_dir
    os.makedirs(os.path.join(local, "logs"), exist_ok=True)
    handler = logging.FileHandler(os.path.join(local, "logs", f"{run_id}.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    logger = logging.getLogger("eagle_spark")
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler


__all__ = [
    "Pipeline",
    "Stage",
    "check_inputs",
    "classify",
    "ingest_inputs",
    "open_run",
    "run_pipeline",
]
