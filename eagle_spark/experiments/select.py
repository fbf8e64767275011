"""Choosing how to learn from group labels with group labels alone: ``experiment select``.

A user with only group labels cannot measure P@k of samples. What they can measure is how well a
model trained on some groups predicts the labels of other groups: hold out a seeded share of the
groups, train each candidate (the Baseline, EAGLE's hard top-c assignment, weighted assignments
of a few temperatures) on the rest, predict every held-out member, combine the members'
predictions into one per group (:mod:`eagle_spark.evaluation.group`) and score it against the
held-out groups' labels Y2. The candidate with the best mean of group-level P@1, P@3 and P@5 is
chosen. Where the samples' true labels are known (the held-out members' Y), the same run also
scores each candidate at the sample level, so the report says how often the group-level choice is
within 0.5 P@5 of the choice the sample labels would make. The test set is never read.

Folder (resumable like the pipeline)::

    DIR/data/train                      the ingested training set (or the given dataset)
    DIR/groupings/<G>/data/aggregated   the training set's groups (R-g, C-D as in table2)
    DIR/groupings/<G>/data/fit|held     its groups split by a seeded hash of group_id
    DIR/groupings/<G>/runs/<candidate>  each candidate's pipeline run (fit -> predict held-out)
    DIR/select.{json,md}                every candidate's scores, the choice, the agreement
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.assignment.selection import CRITERION, K, precision_row, selection_score
from eagle_spark.errors import BadInputError, strict_json
from eagle_spark.evaluation.group import CRITERIA
from eagle_spark.experiments.report import refresh
from eagle_spark.experiments.xmc import Grouping, _split_stage, _write
from eagle_spark.pipeline import (
    Pipeline,
    Stage,
    check_inputs,
    ingest_inputs,
    open_run,
    run_pipeline,
)
from eagle_spark.settings import (
    ExperimentSettings,
    Settings,
    candidate_changes,
    candidate_iterations,
)

log = logging.getLogger(__name__)

CANDIDATES = ExperimentSettings().candidates
"""The default candidates (``experiment.candidates``; names as ``assign.candidates``:
:func:`eagle_spark.settings.candidate_changes`)."""

AGREEMENT_P5 = 0.5
"""The group-level choice agrees with the sample-level one when its sample P@5 is within this of
the best candidate's (percentage points)."""


def select(
    spark: SparkSession,
    settings: Settings,
    groupings: Sequence[str],
    output: str,
    candidates: Sequence[str] = tuple(CANDIDATES),
    held_out: float = 0.2,
    criterion: str = CRITERION,
    force: bool = False,
) -> dict[str, Any]:
    """Score every candidate on held-out groups of every grouping and choose by group labels alone.

    Args:
        spark: the active session.
        settings: all settings; ``pipeline.train`` (XC file) or ``pipeline.dataset`` names the
            training set (default: the embedded delicious file); the classifier is ``train.model``'s;
            the groups are made as in ``experiment table2`` (``aggregate`` section per grouping);
            ``aggregate.seed`` also seeds the held-out split.
        groupings: names as in table2 (``R-4``, ``R-10``, ``C``, ``C-8``).
        output: the experiment folder (module docstring); locked for the run.
        candidates: candidate names (``baseline``, ``hard``, ``soft-<T>``; default :data:`CANDIDATES`).
        held_out: share of the groups held out, in (0, 0.9].
        criterion: the group-level precision that ranks the candidates
            (:data:`eagle_spark.evaluation.group.CRITERIA`); every one is recorded.
        force: rerun every stage.
    Returns:
        {"output", "held_out", "criterion", "groupings": {name: {"candidates": {cand: row},
        "chosen", "sample_best", "agrees"}}, "agreement"}; a row has every criterion's P@1/3/5
        (``max P@1``, ``sum P@1``, ``multiset P@1``, ...), and where the held-out members have true
        labels sample P@1/3/5, PSP@5 and the assignment precision (percent).
    Raises:
        BadInputError: an unknown candidate or criterion, no grouping or candidate, a share outside
            (0, 0.9], and as :func:`eagle_spark.pipeline.run_pipeline`.
    """
    if not candidates:
        raise BadInputError("give at least one candidate (e.g. baseline hard soft-0.3)")
    for name in candidates:
        candidate_changes(name)  # SettingsError (a BadInputError) for an unknown name
    if criterion not in CRITERIA:
        raise BadInputError(f"criterion must be one of {', '.join(CRITERIA)}, got {criterion!r}")
    if not 0.0 < held_out <= 0.9:
        raise BadInputError(f"held_out must be in (0, 0.9], got {held_out}")
    if not groupings:
        raise BadInputError("give at least one grouping (e.g. R-4)")
    parsed = [Grouping.parse(g, settings.aggregate.depth) for g in groupings]
    outer = settings.replace(
        "pipeline", output=output, until="assign", test=None, test_dataset=None
    )
    pipe = Pipeline(spark, outer, force)
    check_inputs(pipe)
    results: dict[str, Any] = {}
    with open_run(pipe):
        train_data, _ = ingest_inputs(pipe)
        for g in parsed:
            results[g.name] = _select_grouping(
                spark, g.apply(outer), pipe, g, train_data, candidates, held_out, criterion, force
            )
    agreeing = [r["agrees"] for r in results.values() if r["agrees"] is not None]
    out = {
        "output": output,
        "held_out": held_out,
        "criterion": criterion,
        "candidates": list(candidates),
        "groupings": results,
        "agreement": (sum(agreeing) / len(agreeing)) if agreeing else None,
    }
    base = output.rstrip("/")
    _write(spark, f"{base}/select.json", (strict_json(out, indent=2) + "\n").encode())
    _write(spark, f"{base}/select.md", (select_markdown(out) + "\n").encode())
    refresh(spark, output)
    log.info("selection -> %s/select.md:\n%s", base, select_markdown(out))
    return out


def _select_grouping(
    spark: SparkSession,
    settings: Settings,
    pipe: Pipeline,
    g: Grouping,
    train_data: str,
    candidates: Sequence[str],
    held_out: float,
    criterion: str,
    force: bool,
) -> dict[str, Any]:
    """One grouping: aggregate, split the groups, run every candidate, choose."""
    from eagle_spark.io.tables import has_table, read_manifest, read_parquet, read_table
    from eagle_spark.pipeline import _aggregate

    agg = pipe.path("groupings", g.name, "data", "aggregated")
    pipe.run_stage(
        Stage(
            f"aggregate_{g.name}",
            agg,
            [train_data],
            settings.aggregate.to_dict(),
            lambda: _aggregate(spark, train_data, agg, settings),
            "n_groups",
        )
    )
    sub = Pipeline(
        spark, settings.replace("pipeline", output=pipe.path("groupings", g.name)), force
    )
    fit, held = _split_stage(
        sub, agg, held_out, settings.aggregate.seed, by="group", names=("fit", "held")
    )
    known = has_table(spark, held, S.Y)
    Y1, Y2 = read_table(spark, held, S.Y1), read_table(spark, held, S.Y2)
    n_labels = int(read_manifest(spark, held)["n_labels"])
    rows: dict[str, Any] = {}
    for cand in candidates:
        changes = candidate_changes(cand)
        method = changes["method"]
        at = candidate_iterations(cand)  # @t<N>: the pipeline's GRLR with N iterations
        run = settings if at is None else settings.replace("embed", iterations=at)
        run = run.replace("assign", **changes).replace(
            "pipeline",
            output=pipe.path("groupings", g.name, "runs", cand),
            train=None,
            test=None,
            dataset=fit,
            test_dataset=held,
            aggregate=False,
            methods=(method,),
            until="evaluate" if known else "predict",
        )
        log.info("select %s: candidate %s", g.name, cand)
        res = run_pipeline(spark, run, force=force)
        preds = read_parquet(spark, f"{run.pipeline.output}/predictions/{method}/predictions")
        row: dict[str, Any] = precision_row(preds, Y1, Y2, n_labels)
        if known:
            m = res["comparison"]["methods"][method]
            row |= {f"sample P@{k}": m["P_percent"][k - 1] for k in K}
            row |= {
                "sample PSP@5": m["PSP_percent"][4],
                "assignment precision": m.get("assignment_precision_percent"),
            }
        rows[cand] = row
    chosen = max(
        candidates, key=lambda c: (selection_score(rows[c], criterion), -list(candidates).index(c))
    )
    sample_best, agrees = None, None
    if known:
        sample_best = max(
            candidates, key=lambda c: (rows[c]["sample P@5"], -list(candidates).index(c))
        )
        agrees = rows[chosen]["sample P@5"] >= rows[sample_best]["sample P@5"] - AGREEMENT_P5
    return {"candidates": rows, "chosen": chosen, "sample_best": sample_best, "agrees": agrees}


def select_markdown(result: dict[str, Any]) -> str:
    """One table per grouping: each candidate's group-level (and sample-level) scores, the choice."""
    lines = [
        f"Held-out groups: {100 * result['held_out']:g}%; chosen by the mean of {result['criterion']} "
        "P@1/3/5 (max / sum: the members' scores of a label combined, the group's top k against its "
        "labels; multiset: the members' top k against Y2's counts).",
        "",
    ]
    for name, res in result["groupings"].items():
        cols = list(next(iter(res["candidates"].values())).keys())
        lines += [
            f"### {name}",
            "",
            "| candidate | " + " | ".join(cols) + " |",
            "|---|" + "---|" * len(cols),
        ]
        for cand, row in res["candidates"].items():
            mark = " (chosen)" if cand == res["chosen"] else ""
            mark += " (best by sample P@5)" if cand == res["sample_best"] else ""
            lines.append(
                f"| {cand}{mark} | "
                + " | ".join("–" if row[c] is None else f"{row[c]:.2f}" for c in cols)
                + " |"
            )
        lines.append("")
    if result["agreement"] is not None:
        lines.append(
            f"Group-level choice within {AGREEMENT_P5} sample P@5 of the sample-level best: "
            f"{100 * result['agreement']:.0f}% of groupings."
        )
    return "\n".join(lines)


__all__ = ["CANDIDATES", "select", "select_markdown"]
