"""One assignment's output: the members' assignments of given ``assign`` settings (refined and
budgeted as they say) written as the filtered dataset (X, Y = Y_filter, ``assignments/``) with its
manifest.

:func:`assign_with` is what the ``assign`` stage (:func:`eagle_spark.assignment.assign.assign`)
runs for fixed settings and what the automatic assignment
(:mod:`eagle_spark.assignment.selection`) runs for each candidate; :func:`write_assignment` writes
into a folder the caller commits, so that the stage can move the chosen candidate's tables into
its own output instead of writing them again.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Optional

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.assignment.members import (
    assignment_quality,
    assignments_of,
    first_round_of,
    pairs_of,
    true_pairs,
    write_filtered,
)
from eagle_spark.assignment.refine import budgeted, refine, round_records
from eagle_spark.errors import BadInputError
from eagle_spark.io.fs import FileSystem, atomic_output, check_separate
from eagle_spark.io.tables import (
    has_table,
    new_manifest,
    read_manifest,
    read_table,
    require_tables,
    table_path,
    table_rows,
    write_manifest,
    write_table,
)
from eagle_spark.progress import job_step
from eagle_spark.settings import AssignSettings

log = logging.getLogger(__name__)

SCRATCH = ("_select", "_refine", "_budget")
"""The scratch folders inside an output's temporary folder, deleted before it is committed."""


def check_inputs(
    spark: SparkSession,
    dataset: str,
    output_path: str,
    params: AssignSettings,
    embeddings: Optional[str],
) -> dict[str, Any]:
    """Check an assignment's inputs before any job runs; returns the dataset's manifest.

    Raises:
        BadInputError: a missing table (X, Y1, Y2), or method ``eagle`` without `embeddings`.
        OutputExistsError: `output_path` overlaps the inputs.
    """
    check_separate(output_path, [dataset, embeddings])
    manifest = require_tables(spark, dataset, (S.X, S.Y1, S.Y2), " (aggregate it first)")
    if params.method == "eagle" and embeddings is None:
        raise BadInputError("method 'eagle' needs embeddings (the output folder of embed)")
    return manifest


def assign_with(
    spark: SparkSession,
    dataset: str,
    output_path: str,
    params: AssignSettings,
    embeddings: Optional[str] = None,
    overwrite: bool = False,
    first_round: Optional[str] = None,
    diagnostics: bool = True,
    rounds_scratch: Optional[str] = None,
) -> dict[str, Any]:
    """Assign with fixed settings (``weighting`` hard, soft or posterior; not ``auto``) and write
    the output folder `output_path` atomically.

    Args:
        spark: the active session.
        dataset: aggregated dataset (X, Y1, Y2; Y optional, for the quality report).
        output_path: dataset folder to write (atomic).
        params: the ``assign`` settings section (``weighting`` not ``auto``).
        embeddings: output folder of ``embed`` (required for ``eagle``).
        overwrite: replace an existing output.
        first_round: an earlier output of this function on the same `dataset` and `embeddings`
            with the same settings but ``refine_rounds`` 0 (the automatic assignment scores both
            ``soft-0.3`` and ``soft-0.3+r1``): its assignments are this call's round 0 instead of
            being computed again. Its manifest must say so (same dataset, same settings), else
            BadInputError.
        diagnostics: record each refinement round's figures and, when `dataset` has the true Y,
            the assignment's quality in the manifest (false for the automatic assignment's
            candidates: only the winner's figures are kept, and they are computed for it).
        rounds_scratch: where refinement leaves its rounds (a folder that must not exist; the
            caller deletes it; :func:`eagle_spark.assignment.refine.round_records` reads it).
            None: a folder inside the output's temporary folder, deleted before the commit.
    Returns:
        The manifest (:func:`write_assignment`).
    Raises:
        BadInputError: as :func:`check_inputs`, a label without embedding, ``weighting=auto``
            (the stage chooses: :func:`eagle_spark.assignment.assign.assign`), or a
            `first_round` made from other data or settings.
        OutputExistsError: the output exists and `overwrite` is false.
    """
    if params.method == "eagle" and params.weighting == "auto":
        raise BadInputError(
            "assign_with: weighting=auto is a choice between candidates, made by "
            "eagle_spark.assignment.assign.assign"
        )
    manifest_in = check_inputs(spark, dataset, output_path, params, embeddings)
    with atomic_output(spark, output_path, overwrite) as tmp:
        manifest = write_assignment(
            spark,
            dataset,
            tmp,
            manifest_in,
            params,
            embeddings,
            first_round=first_round,
            diagnostics=diagnostics,
            rounds_scratch=rounds_scratch,
        )
    return manifest


def write_assignment(
    spark: SparkSession,
    dataset: str,
    tmp: str,
    manifest_in: dict[str, Any],
    params: AssignSettings,
    embeddings: Optional[str],
    asked: Optional[AssignSettings] = None,
    selection: Optional[dict[str, Any]] = None,
    chosen: Optional[str] = None,
    chosen_rounds: Optional[str] = None,
    first_round: Optional[str] = None,
    diagnostics: bool = True,
    rounds_scratch: Optional[str] = None,
) -> dict[str, Any]:
    """Write one assignment's tables and manifest into `tmp` (a folder the caller commits; its
    scratch folders :data:`SCRATCH` are deleted here once read).

    Args:
        manifest_in: the dataset's manifest (:func:`check_inputs`).
        params: the settings assigned with (the chosen candidate's under ``auto``).
        asked: the settings the caller gave (``weighting=auto``), kept as the manifest's
            ``parameters`` with `params` as ``used``; None: `params`.
        selection: the automatic assignment's record (the manifest's ``selection``).
        chosen: the chosen candidate's output folder of `dataset`, whose tables move into `tmp`
            (not written again); None: the assignment is computed here.
        chosen_rounds: the folder the chosen candidate's refinement rounds were left in.
        first_round, diagnostics, rounds_scratch: as :func:`assign_with`.
    Returns:
        The manifest: n_samples, n_labels, n_assignments, samples_with_labels, and, when the
        input has the true Y, ``quality`` (precision, recall); ``parameters`` (what was asked),
        ``used`` and ``selection`` under ``auto``, ``refinement`` and ``budget`` when they ran.
    """
    n_features = int(manifest_in["n_features"])
    X = read_table(spark, dataset, S.X)
    truth = None
    if has_table(spark, dataset, S.Y):
        truth = true_pairs(read_table(spark, dataset, S.Y), read_table(spark, dataset, S.Y1))
    last_quality = None  # the last round's, when the rounds' figures were computed
    rounds = None
    budget = None  # without refinement, what the soft budget pruned
    fs = FileSystem(spark)
    if chosen is not None:  # the selection's winner wrote this very output: its tables move
        winner = read_manifest(spark, chosen, what="assign")
        source, rounds = winner["source"], winner.get("refinement")
        if rounds and diagnostics and chosen_rounds is not None:
            with job_step(spark, "rounds' figures"):
                figures, last_quality = round_records(spark, chosen_rounds, len(rounds) - 1, truth)
                rounds = [old | new for old, new in zip(rounds, figures)]  # budget, folds
        for table in (S.X, S.Y, S.ASSIGNMENTS):
            fs.rename(table_path(chosen, table), table_path(tmp, table))
        written = read_table(spark, tmp, S.ASSIGNMENTS)
        n_assignments = int(winner["n_assignments"])
        samples_with_labels = int(winner["samples_with_labels"])
    else:
        if first_round is not None:
            assignments, source = first_round_of(spark, first_round, dataset, embeddings, params)
        else:
            assignments, source = assignments_of(
                spark, dataset, params, embeddings, manifest_in, n_features
            )
        if params.method == "eagle" and params.refine_rounds > 0:
            assignments, rounds, last_quality = refine(
                spark,
                dataset,
                X,
                assignments,
                params,
                rounds_scratch or posixpath.join(tmp, "_refine"),
                n_features,
                int(manifest_in["n_labels"]),
                int(manifest_in["n_samples"]),
                truth,
                diagnostics,
            )
        elif params.weighting == "soft" and params.soft_budget > 0:
            with job_step(spark, "budget"):
                assignments, budget = budgeted(
                    spark, dataset, assignments, params, posixpath.join(tmp, "_budget", "a")
                )
        with job_step(spark, "output"):  # (without refinement, the assignment's jobs too)
            write_table(
                assignments.repartition(
                    int(spark.conf.get("spark.sql.shuffle.partitions") or 200),
                    S.GROUP_ID,
                    S.LABEL_ID,
                ).sortWithinPartitions(S.GROUP_ID, S.LABEL_ID, S.SAMPLE_ID),
                tmp,
                S.ASSIGNMENTS,
            )
            written = read_table(spark, tmp, S.ASSIGNMENTS)
            write_filtered(spark, X, dataset, written, tmp)
            # the rows from the footers, the samples from Y (one row per sample, every assigned
            # sample a row of X): no pass over the assignments for either
            n_assignments = table_rows(tmp, S.ASSIGNMENTS)
            samples_with_labels = read_table(spark, tmp, S.Y).where(F.size(S.LABEL_IDS) > 0).count()
    quality = None
    if truth is not None and diagnostics:  # the last round's assignments are the ones written
        with job_step(spark, "quality"):
            quality = (
                last_quality
                if rounds and last_quality is not None
                else assignment_quality(truth, pairs_of(written))
            )
    manifest = new_manifest(
        "assign",
        n_samples=int(manifest_in["n_samples"]),
        n_features=n_features,
        n_labels=int(manifest_in["n_labels"]),
        n_assignments=n_assignments,
        samples_with_labels=samples_with_labels,
        quality=quality,
        source=source,
        parameters=(asked or params).to_dict(),
        used=params.to_dict() if selection is not None else None,
        selection=selection,
        refinement=rounds,
        budget=budget,
        tables=[S.X, S.Y, S.ASSIGNMENTS],
    )
    write_manifest(spark, tmp, manifest)
    # the scratch folders were read by the tables written above, now unused
    for scratch in SCRATCH:
        fs.delete(posixpath.join(tmp, scratch))
    if quality:
        log.info(
            "assign %s: precision %.4f recall %.4f",
            params.method,
            quality["precision"],
            quality["recall"],
        )
    return manifest


__all__ = ["SCRATCH", "assign_with", "check_inputs", "write_assignment"]
