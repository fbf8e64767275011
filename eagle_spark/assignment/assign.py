"""The ``assign`` stage: group labels to samples, by EAGLE's assignment (Algorithm 2), the
Baseline, a weighting between them, or a choice among candidates made on held-out groups.

* Fixed settings (``method`` baseline, or eagle with ``weighting`` hard, soft or posterior): the
  members' assignments (:mod:`eagle_spark.assignment.members`), refined
  (:mod:`eagle_spark.assignment.refine`) and budgeted as the settings say, written as the
  filtered dataset (:func:`eagle_spark.assignment.output.assign_with`).
* ``weighting=auto``: the candidates (``assign.candidates``) are scored on held-out groups with
  a proxy classifier (:func:`eagle_spark.assignment.selection.choose_assignment`) and the
  winner's assignment, already written in the selection's scratch folder, becomes this output
  (its tables moved, not written again); the manifest's ``selection`` records every candidate.

Output: a dataset whose ``Y`` is Y_filter (sample_id, sorted label_ids; samples of X that received
no label have an empty list), whose ``X`` is a byte copy of the input's, plus ``assignments/``
(group_id, label_id, sample_id, score[, weight]). When the input has the true Y, the manifest
reports the assignment's precision and recall.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Mapping, Optional

from pyspark.sql import SparkSession

from eagle_spark.assignment.output import assign_with, check_inputs, write_assignment
from eagle_spark.assignment.selection import choose_assignment
from eagle_spark.errors import BadInputError
from eagle_spark.io.fs import atomic_output
from eagle_spark.settings import AssignSettings

log = logging.getLogger(__name__)


def assign(
    spark: SparkSession,
    dataset: str,
    output_path: str,
    params: AssignSettings,
    embeddings: Optional[str] = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Assign group labels to samples and write the filtered dataset (X, Y = Y_filter).

    Args:
        spark: the active session.
        dataset: aggregated dataset (X, Y1, Y2; Y optional, for the quality report).
        output_path: dataset folder to write (atomic).
        params: the ``assign`` settings section; with ``weighting=auto`` the choice is made here
            (:func:`eagle_spark.assignment.selection.choose_assignment`).
        embeddings: output folder of ``embed`` on `dataset` (required for ``eagle``).
        overwrite: replace an existing output.
    Returns:
        The manifest: n_samples, n_labels, n_assignments, samples_with_labels, and, when the input
        has the true Y, ``quality`` (precision, recall); its ``parameters`` are the settings given,
        and under ``auto`` ``used`` the chosen candidate's, with ``selection`` recording every
        candidate.
    Raises:
        BadInputError: a missing table or embeddings folder, or a label without embedding.
        OutputExistsError: the output exists and `overwrite` is false.
    Source: paper Algorithm 2 (hard); the Baseline of section 6; soft, posterior, refinement and
    the choice among them are this project's (docs/design.md).
    """
    if not (params.method == "eagle" and params.weighting == "auto"):
        return assign_with(spark, dataset, output_path, params, embeddings, overwrite)
    manifest_in = check_inputs(spark, dataset, output_path, params, embeddings)
    if embeddings is None:  # (check_inputs raised already: method eagle)
        raise BadInputError("method 'eagle' needs embeddings (the output folder of embed)")
    with atomic_output(spark, output_path, overwrite) as tmp:
        found = choose_assignment(
            spark, dataset, params, embeddings, posixpath.join(tmp, "_select")
        )
        log.info("assign auto: chose %s", found.record["chosen"])
        manifest = write_assignment(
            spark,
            dataset,
            tmp,
            manifest_in,
            found.settings,
            embeddings,
            asked=params,
            selection=found.record,
            chosen=found.assigned,
            chosen_rounds=found.rounds,
        )
    return manifest


def choice_of(manifest: Mapping[str, Any]) -> Optional[str]:
    """What ``weighting=auto`` did, as the comparison and the tables say it: ``auto: <candidate>
    (on N held-out groups)`` or ``(on all N groups in k folds)``, or ``auto could not choose
    (<why>): <fallback>``; None when the assignment was not chosen (another weighting, the
    Baseline)."""
    selection = manifest.get("selection")
    if not isinstance(selection, dict):
        return None
    if selection.get("skipped"):
        return f"auto could not choose ({selection['skipped']}): {selection.get('chosen')}"
    held, folds = selection.get("held_out_groups"), selection.get("folds")
    if held and folds:
        return f"auto: {selection.get('chosen')} (on all {held:,} groups in {folds} folds)"
    return f"auto: {selection.get('chosen')}" + (f" (on {held:,} held-out groups)" if held else "")


__all__ = ["assign", "choice_of"]
