"""Refinement with the classifier (multiple-instance EM, as in mi-SVM): after an assignment, train a
linear one-vs-all classifier on it, score each group's members for the group's labels with that
classifier, and assign again (``assign.refine_rounds`` rounds).

The first round's scorer is the label embedding (<e_k, x_i>, paper Algorithm 2); round r >= 1
scores a pair (member i, label k) by w_k . x_i of the one-vs-all classifier trained on round
r - 1's assignment (hard or weighted, the same solver as ``train --model ova`` but without pruning
weights within :data:`NEGATIVE_BUDGET`, so every label of Y2 keeps a scorer; beyond it pruned as
the one-vs-all model's, |w| < ``OVASettings().threshold``, since a label's weights reach every
feature of its training rows: unpruned, synthetic Wiki-325K at scale 0.1 had 512M of them and
reading them back ran out of memory; a label whose weights all prune away scores its members
alike, which the assignment treats as ties). Label k's negatives are every sample not assigned
k while the one-vs-all work (labels x samples) is within :data:`NEGATIVE_BUDGET` (a round's,
shared by the k scorers of a cross-fitted one); beyond it a
seeded share :func:`negative_fraction` of the samples outside k's groups is drawn, and the members
of k's groups not assigned k are always kept (``train_ova(within_groups=...)``): the scorer must
rank a group's members, and without the draw a label costs all n samples (at Wiki10-31K's 31k
labels, hours). With ``assign.refine_negatives`` R the share drawn is instead about R per positive
pair of the scorer's training set, at any size (the budget's negatives per positive fall as the
data grows). Trained on k's groups alone (no sample outside them) the scorer ranks worse:
on validation splits of bibtex and delicious, soft T=0.3 refined once lost 4.0 / 2.7 / 1.9 points
of P@1 / P@3 / P@5 against all negatives (docs/experiments.md). The bias b_k is left out: within a (group, label)
pair it shifts every member's score alike, and neither the top-c choice, the range-relative soft
weights nor the posterior weights (``assign.posterior``, whose scorer trains with the logistic loss
so that w_k . x_i is a log-odds, :func:`scorer_loss`) depend on it. The classifier's weights are written in the layout of label embeddings, so the
assignment itself is the same code (:func:`eagle_spark.assignment.members.eagle_assignments`) with
another scorer.

With ``assign.refine_folds`` k the rounds are cross-fitted (:func:`cross_fitted_assignments`): the
groups fall in k seeded folds and a fold's members are scored by a classifier trained on the
other folds' samples and assignments only, so no scorer has seen the labels of the groups it
scores. With ``assign.refine_tolerance`` the rounds stop early once one changes at most that
share of its pairs (:func:`converged`).

Memory: what ``train --model ova`` and the assignment keep (once per executor: X as CSR, the
labels of the round's Y and the (member, group label) pairs it lacks, ~5 bytes each); the rounds run one after another and keep nothing between them but the
previous round's assignments, on disk in the scratch folder.
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any, Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.assignment.budget import hard_positives, within_budget
from eagle_spark.assignment.members import (
    eagle_assignments,
    quality_of,
    write_filtered,
    write_training_set,
)
from eagle_spark.io.tables import (
    new_manifest,
    read_manifest,
    read_parquet,
    read_table,
    table_rows,
    write_manifest,
    write_table,
)
from eagle_spark.progress import job_step
from eagle_spark.rows import first_row
from eagle_spark.settings import AssignSettings, OVASettings

log = logging.getLogger(__name__)

NEGATIVE_BUDGET = 50_000_000
"""(label, sample) pairs the refinement's one-vs-all trains on before it draws negatives: about four
times delicious's full one-vs-all (983 labels x 12,920 samples), so bibtex and delicious, on which
refinement was measured, train on all their negatives; beyond it the share drawn shrinks as
labels x samples grow (a cost bound, not a tuned constant)."""


def negative_fraction(
    n_labels: int,
    n_samples: int,
    folds: int = 1,
    positives: int = 0,
    per_positive: float = 0.0,
) -> float:
    """The share of the negatives a refinement scorer's one-vs-all draws (a label's unassigned
    group members are kept besides).

    With `per_positive` 0: 1 within the budget, else budget / (labels x samples), the budget a
    round's: :data:`NEGATIVE_BUDGET` labels x samples, shared by the `folds` scorers of a
    cross-fitted round (each gets budget / folds), so that beyond the budget a cross-fitted round
    draws about as many negatives in all as an in-sample one, where k scorers with the whole
    budget each would cost k times its one-vs-all. With `per_positive` r > 0
    (``assign.refine_negatives``): r x `positives` / (labels x samples), at most 1, so about r
    negatives are drawn per positive pair over all labels, so the drawn negatives follow the
    assignment's positives (each fold scorer's its own; a label's fit keeps a fixed cost besides,
    docs/experiments.md, "How many negatives a refinement scorer needs").

    Args:
        n_labels: labels of the scorer's training set.
        n_samples: its samples (a fold scorer's: those outside the fold).
        folds: the round's scorers: 1 in-sample, k cross-fitted.
        positives: the (sample, label) pairs its training samples were assigned, all labels
            (read with `per_positive`).
        per_positive: ``assign.refine_negatives``, >= 0.
    Returns:
        The share in (0, 1]; 1 when no pair is positive (one-vs-all draws only for labels
        with a positive).
    Raises:
        ValueError: `folds` below 1, `per_positive` or `positives` negative.
    """
    if folds < 1:
        raise ValueError(f"negative_fraction: folds must be >= 1, got {folds}")
    if per_positive < 0 or positives < 0:
        raise ValueError(
            "negative_fraction: per_positive and positives must be >= 0, got "
            f"{per_positive} and {positives}"
        )
    if per_positive > 0 and positives == 0:
        return 1.0  # no label has a positive: one-vs-all draws for none
    budget = per_positive * positives if per_positive > 0 else NEGATIVE_BUDGET / folds
    work = n_labels * n_samples
    return 1.0 if work <= budget else budget / work


def scorer_loss(params: AssignSettings) -> str:
    """The refinement scorer's loss: logistic under ``assign.posterior`` (the posterior weights
    read its scores as log-odds), else the one-vs-all default (squared hinge)."""
    return "logistic" if params.weighting == "soft" and params.posterior else OVASettings().loss


def classifier_scorer(
    spark: SparkSession,
    assigned: str,
    groups: str,
    folder: str,
    n_features: int,
    n_labels: int,
    tasks: int,
    seed: int = 0,
    loss: Optional[str] = None,
    folds: int = 1,
    per_positive: float = 0.0,
    positives: Optional[int] = None,
) -> str:
    """Train one-vs-all on the dataset `assigned` (X, Y = an assignment's Y_filter, with
    ``label_weights`` when weighted), negatives drawn and weights pruned as the module docstring
    says, and write its weight vectors as label embeddings. A label of `assigned` without a
    positive costs no fit (one-vs-all's constant classifier), so a training set restricted to
    the labels that will be read costs those labels alone.

    Args:
        assigned: dataset folder with X and Y.
        groups: the aggregated dataset (Y1, Y2) `assigned` was assigned from.
        folder: scratch folder (must not exist); the model goes to ``folder/model``, the scorer to
            ``folder/scorer``.
        n_features, n_labels: the data's sizes.
        tasks: Spark tasks of the training (``assign.tasks``).
        loss: the solver's loss (:func:`scorer_loss`), None: the one-vs-all default.
        folds: the scorers of its round that share the negative budget (:func:`negative_fraction`).
        per_positive: ``assign.refine_negatives``: negatives drawn per positive pair of
            `assigned` (0: the shared budget).
        positives: the positive pairs `per_positive` counts (a cross-fitted fold's: those of its
            samples' whole assignment, all labels; None: `assigned`'s Y, counted by one Spark
            job when `per_positive` > 0).
    Returns:
        The scorer folder: ``label_emb`` (label_id, emb_idx = the weights' feature ids, emb_val =
        their values, n_groups 0) and a manifest whose ``parameters.normalize`` is the
        classifier's row normalisation.
    """
    from eagle_spark.classifiers.ova import train_ova

    n_samples = int(read_manifest(spark, assigned)["n_samples"])
    if positives is None:
        positives = count_positives(spark, assigned) if per_positive > 0 else 0
    fraction = negative_fraction(n_labels, n_samples, folds, positives, per_positive)
    params = OVASettings(
        threshold=0.0 if fraction >= 1.0 else OVASettings().threshold,
        tasks=tasks,
        seed=seed,
        negative_fraction=fraction,
        loss=loss or OVASettings().loss,
    )
    model = posixpath.join(folder, "model")
    meta = train_ova(spark, assigned, model, params, within_groups=groups)
    scorer = posixpath.join(folder, "scorer")
    weights = read_parquet(spark, posixpath.join(model, "data", "weights"))
    if "label_map" in meta:  # trained on the labels present: their ids back
        from eagle_spark.classifiers.labels import LABEL_INDEX

        ids = read_parquet(spark, posixpath.join(model, meta["label_map"]))
        weights = weights.withColumnRenamed(S.LABEL_ID, LABEL_INDEX).join(
            F.broadcast(ids), LABEL_INDEX
        )
    write_table(
        weights.select(
            S.LABEL_ID,
            F.col("w_idx").alias(S.EMB_IDX),
            F.col("w_val").alias(S.EMB_VAL),
            F.lit(0).cast("int").alias(S.N_GROUPS),
        ),
        scorer,
        S.LABEL_EMB,
    )
    write_manifest(
        spark,
        scorer,
        new_manifest(
            "refine-scorer",
            n_labels=n_labels,
            n_features=n_features,
            source={"model": model},
            parameters={"normalize": params.normalize, "iterations": 0, "prune_below": 0.0},
            tables=[S.LABEL_EMB],
        ),
    )
    return scorer


def count_positives(spark: SparkSession, assigned: str | DataFrame) -> int:
    """The (sample, label) pairs of a training set's Y (a dataset folder) or of assignments
    (group_id, label_id, sample_id, ...: distinct (sample, label) pairs), one Spark job."""
    with job_step(spark, "positives"):
        if isinstance(assigned, str):
            pairs = read_table(spark, assigned, S.Y).agg(F.sum(F.size(S.LABEL_IDS)))
            where = f"{assigned}: table Y"
        else:
            pairs = assigned.select(S.SAMPLE_ID, S.LABEL_ID).distinct().agg(F.count(F.lit(1)))
            where = "the assignments"
        return int(first_row(pairs, where)[0] or 0)


def refine(
    spark: SparkSession,
    dataset: str,
    X: DataFrame,
    assignments: DataFrame,
    params: AssignSettings,
    scratch: str,
    n_features: int,
    n_labels: int,
    n_samples: int,
    truth: Optional[DataFrame] = None,
    diagnostics: bool = True,
) -> tuple[DataFrame, list[dict[str, Any]], Optional[dict[str, float]]]:
    """Run ``params.refine_rounds`` rounds of refinement on the first round's `assignments`
    (in-sample, or cross-fitted in ``params.refine_folds`` folds), fewer when a round is within
    ``params.refine_tolerance`` of the one before (:func:`converged`).

    Args:
        dataset: the aggregated dataset (X, Y1, Y2).
        X: its X table.
        assignments: round 0's assignments (group_id, label_id, sample_id, score[, weight]).
        params: the assignment's settings (method eagle; weighting hard or soft).
        scratch: a folder for the rounds' datasets, classifiers and assignments (round r's in
            ``assign_<r>``, which :func:`round_records` reads; deleted by the caller).
        truth: the true (sample, label) pairs when Y is known
            (:func:`eagle_spark.assignment.members.true_pairs`): the rounds' precision and recall.
        diagnostics: compute the rounds' figures (:func:`round_records`); false when nobody reads
            them now (the candidates of ``weighting=auto``: the winner's are computed from its
            scratch folder afterwards).
    Returns:
        (the last round's assignments, read back from the scratch folder; one record per round:
        ``round`` and ``scorer`` (``embedding`` or ``classifier``), ``folds`` when
        cross-fitted, ``stopped`` on the last when the tolerance ended the rounds, ``budget`` (what
        :func:`budgeted` pruned) under a soft budget, with `diagnostics` the figures
        of :func:`round_records`; with `diagnostics` and `truth` the last round's quality as
        :func:`eagle_spark.assignment.members.assignment_quality` gives it, else None).
    """

    budgets: dict[int, Optional[dict[str, Any]]] = {}
    n_hard = (  # one count for every round
        hard_positives(spark, dataset, params.multiplicity)
        if params.weighting == "soft" and params.soft_budget > 0
        else None
    )
    with job_step(spark, "round 0"):
        current, budgets[0] = budgeted(
            spark, dataset, assignments, params, posixpath.join(scratch, "assign_0"), n_hard
        )
    step = params.unrefined()
    folds = (
        _materialise(
            group_folds_frame(spark, dataset, params.refine_folds, params.held_out_seed),
            posixpath.join(scratch, "folds"),
            spark,
        )
        if params.refine_folds
        else None
    )
    done, stopped = 0, None
    for r in range(1, params.refine_rounds + 1):
        if folds is not None:
            with job_step(spark, f"round {r}: cross-fitted in {params.refine_folds} folds"):
                scored = cross_fitted_assignments(
                    spark,
                    dataset,
                    X,
                    current,
                    folds,
                    step,
                    posixpath.join(scratch, f"cross_{r}"),
                    n_features,
                    n_labels,
                    params.refine_negatives,
                )
        else:
            assigned = posixpath.join(scratch, f"round_{r - 1}")
            with job_step(spark, f"round {r}: training set"):
                write_training_set(
                    spark,
                    X,
                    dataset,
                    current,
                    assigned,
                    "refine-round",
                    {"n_samples": n_samples, "n_features": n_features, "n_labels": n_labels},
                )
            with job_step(spark, f"round {r}: one-vs-all scorer"):
                scorer = classifier_scorer(
                    spark,
                    assigned,
                    dataset,
                    posixpath.join(scratch, f"classifier_{r}"),
                    n_features,
                    n_labels,
                    params.tasks,
                    loss=scorer_loss(params),
                    per_positive=params.refine_negatives,
                )
            scored = eagle_assignments(
                spark,
                dataset,
                scorer,
                step,
                n_features,
                OVASettings().normalize,
                log_odds=params.posterior,
            )
        with job_step(spark, f"round {r}: assignments"):
            current, budgets[r] = budgeted(
                spark, dataset, scored, step, posixpath.join(scratch, f"assign_{r}"), n_hard
            )
        log.info("refine: round %d assigned", r)
        done = r
        if r < params.refine_rounds:
            with job_step(spark, f"round {r}: change"):
                change = round_records(spark, scratch, r, first=r - 1)[0][-1]
            if converged(change, params.refine_tolerance):
                stopped = r
                log.info(
                    "refine: stopped after round %d of %d: %s within the tolerance %g",
                    r,
                    params.refine_rounds,
                    change,
                    params.refine_tolerance,
                )
                break
    last: Optional[dict[str, float]] = None
    if diagnostics:
        with job_step(spark, "rounds' figures"):
            records, last = round_records(spark, scratch, done, truth)
    else:
        records = [
            {"round": r, "scorer": "classifier" if r else "embedding"} for r in range(done + 1)
        ]
    for record in records:
        if budgets.get(record["round"]) is not None:
            record["budget"] = budgets[record["round"]]
        if record["round"] and params.refine_folds:
            record["folds"] = params.refine_folds
    if stopped is not None:
        records[-1]["stopped"] = (
            f"converged: changed at most the tolerance {params.refine_tolerance:g}"
        )
    return current, records, last


def converged(change: dict[str, Any], tolerance: float) -> bool:
    """Whether a round's `change` (a :func:`round_records` record: ``changed`` and, weighted,
    ``weight_change``) is within `tolerance` (``assign.refine_tolerance``): both at most it."""
    return change["changed"] <= tolerance and change.get("weight_change", 0.0) <= tolerance


FOLD = "_fold"
"""The fold column of :func:`group_folds_frame`."""


def group_folds_frame(spark: SparkSession, dataset: str, k: int, seed: int) -> DataFrame:
    """DataFrame[group_id, _fold]: each group of `dataset`'s Y1 and Y2 in one of `k` folds by a
    seeded hash (pmod(xxhash64(group_id, seed), k)): the cross-fitted refinement's folds, about
    equal in size on many groups, the same on every run and partitioning.

    Raises:
        ValueError: `k` below 2.
    """
    if k < 2:
        raise ValueError(f"group_folds_frame: k must be >= 2, got {k}")
    groups = (
        read_table(spark, dataset, S.Y1)
        .select(S.GROUP_ID)
        .unionByName(read_table(spark, dataset, S.Y2).select(S.GROUP_ID))
        .distinct()
    )
    return groups.select(
        S.GROUP_ID,
        F.pmod(F.xxhash64(S.GROUP_ID, F.lit(seed)), F.lit(k)).cast("int").alias(FOLD),
    )


def cross_fitted_assignments(
    spark: SparkSession,
    dataset: str,
    X: DataFrame,
    current: DataFrame,
    folds: DataFrame,
    params: AssignSettings,
    scratch: str,
    n_features: int,
    n_labels: int,
    per_positive: float = 0.0,
) -> DataFrame:
    """One cross-fitted round: for each fold f of `folds`, train the one-vs-all scorer
    (:func:`classifier_scorer`) on the samples of no group of f with their `current`
    assignments of the labels f's groups hold (the scorer of no other label is used; the
    others are left out of its Y, so they cost no fit), and assign f's groups with it; a
    (group, label) pair of f whose label that scorer cannot know (no sample outside f was
    assigned it: the scorer saw no positive of it) keeps its `current` rows.

    So the classifier that scores a group never saw that group's labels nor its members: the
    in-sample round's scorer has learned the group's own previous assignment and tends to
    confirm it (multiple-instance EM's self-confirmation; cross-fitting as in double machine
    learning, Chernozhukov et al. 2018).

    Args:
        dataset: the aggregated dataset (X, Y1, Y2); X: its X table.
        current: the previous round's assignments (group_id, label_id, sample_id, score[,
            weight]).
        folds: :func:`group_folds_frame` of `dataset` (materialised).
        params: the round's assignment settings (no refinement).
        scratch: a folder that must not exist: fold f's training set in ``train_<f>``, its
            classifier and scorer in ``classifier_<f>``.
        per_positive: ``assign.refine_negatives`` of the refined settings (`params` are the
            unrefined ones), for each fold's scorer (:func:`negative_fraction`).
    Returns:
        The round's assignments (lazy; the scorers are trained when this returns), the same
        columns as `current`.
    Memory: each fold's training is :func:`classifier_scorer`'s on (k - 1) / k of the samples
        (once per executor: that fold's X and Y); the folds train one after another. Work:
        fold f fits the labels f's groups hold, on (k - 1) / k of the samples within the
        negative budget; beyond it the folds share the budget (:func:`negative_fraction`), so
        the drawn negatives cost at most about one in-sample round. Fold f fits a label only
        when f holds one of its groups and another fold's samples were assigned it: k times at
        most, never when its groups all lie in one fold.
    """
    from functools import reduce

    Y1 = read_table(spark, dataset, S.Y1)
    Y2 = read_table(spark, dataset, S.Y2)
    k = int(first_row(folds.agg(F.max(FOLD)), "the folds")[0]) + 1
    parts = []
    for f in range(k):
        held_groups = folds.where(F.col(FOLD) == f).select(S.GROUP_ID)
        held_samples = Y1.join(held_groups, S.GROUP_ID, "left_semi").select(S.SAMPLE_ID)
        train = posixpath.join(scratch, f"train_{f}")
        X_f = X.join(held_samples, S.SAMPLE_ID, "left_anti")
        pairs = Y2.join(held_groups, S.GROUP_ID, "left_semi")
        with job_step(spark, f"fold {f}: training set"):
            outside = current.join(held_samples, S.SAMPLE_ID, "left_anti")
            taught = outside.join(  # only the labels f's groups hold: no other is ever read
                pairs.select(S.LABEL_ID).distinct(), S.LABEL_ID, "left_semi"
            )
            write_filtered(spark, X_f, None, taught, train)
            write_manifest(
                spark,
                train,
                new_manifest(
                    "refine-fold",
                    n_samples=table_rows(train, S.X),
                    n_features=n_features,
                    n_labels=n_labels,
                    source={"dataset": dataset, "fold": f, "folds": k},
                    tables=[S.X, S.Y],
                ),
            )
        with job_step(spark, f"fold {f}: one-vs-all scorer"):
            scorer = classifier_scorer(
                spark,
                train,
                dataset,
                posixpath.join(scratch, f"classifier_{f}"),
                n_features,
                n_labels,
                params.tasks,
                loss=scorer_loss(params),
                folds=k,
                per_positive=per_positive,
                positives=count_positives(spark, outside) if per_positive > 0 else 0,
            )
        known = taught.select(S.LABEL_ID).distinct()  # labels with a positive to learn from
        parts.append(
            eagle_assignments(
                spark,
                dataset,
                scorer,
                params,
                n_features,
                OVASettings().normalize,
                pairs=pairs.join(known, S.LABEL_ID, "left_semi"),
                log_odds=params.posterior,
            ).select(*current.columns)
        )
        unscored = pairs.join(known, S.LABEL_ID, "left_anti").select(S.GROUP_ID, S.LABEL_ID)
        parts.append(current.join(unscored, [S.GROUP_ID, S.LABEL_ID], "left_semi"))
    return reduce(DataFrame.unionByName, parts)


def round_records(
    spark: SparkSession,
    scratch: str,
    rounds: int,
    truth: Optional[DataFrame] = None,
    first: int = 0,
) -> tuple[list[dict[str, Any]], Optional[dict[str, float]]]:
    """The figures of the rounds :func:`refine` left in `scratch` (rounds `first` .. `rounds`),
    all in one Spark aggregation: every round's assignment rows and the true pairs are grouped by
    (sample, label) once, and each figure is a sum over those groups.

    Args:
        truth: the true (sample, label) pairs (:func:`eagle_spark.assignment.members.true_pairs`,
            each pair once), or None.
        first: the first round read (its record has no change: the round before is not read);
            :func:`refine` reads two rounds to check its tolerance.
    Returns:
        (one record per round: ``round``, ``scorer`` (``embedding`` or ``classifier``),
        ``n_assignments`` (assignment rows), from round 1 ``changed`` (share of the round's
        distinct (sample, label) pairs that the previous round did not have) and, when both rounds
        are weighted, ``weight_change`` (mean absolute change of a pair's largest weight over the
        pairs of either round, 0 where a pair is absent), and with `truth` ``precision`` /
        ``recall`` (:func:`eagle_spark.assignment.members.assignment_quality`); the last round's
        whole quality with `truth`, else None).
    """
    from functools import reduce

    parts, weighted = [], {}
    span = range(first, rounds + 1)
    for r in span:
        current = read_parquet(spark, posixpath.join(scratch, f"assign_{r}"))
        weighted[r] = S.WEIGHT in current.columns
        weight = F.col(S.WEIGHT).cast("double") if weighted[r] else F.lit(1.0)
        parts.append(
            current.select(S.SAMPLE_ID, S.LABEL_ID, F.lit(r).alias("_r"), weight.alias("_w"))
        )
    if truth is not None:
        parts.append(
            truth.select(
                S.SAMPLE_ID,
                S.LABEL_ID,
                F.lit(-1).alias("_r"),
                F.lit(None).cast("double").alias("_w"),
            )
        )
    in_round = {r: F.col("_r") == r for r in span}
    pairs = (
        reduce(DataFrame.unionByName, parts)
        .groupBy(S.SAMPLE_ID, S.LABEL_ID)
        .agg(
            *[F.count(F.when(cond, 1)).alias(f"_n{r}") for r, cond in in_round.items()],
            *[F.max(F.when(cond, F.col("_w"))).alias(f"_w{r}") for r, cond in in_round.items()],
            F.max(F.when(F.col("_r") == -1, True)).alias("_true"),
        )
    )
    is_true = F.col("_true").isNotNull()
    figures = [F.count("_true").alias("n_true")]
    for r in span:
        now = F.col(f"_w{r}")
        figures += [
            F.sum(f"_n{r}").alias(f"rows{r}"),
            F.count(now).alias(f"pairs{r}"),
            F.count(F.when(now.isNotNull() & is_true, 1)).alias(f"hits{r}"),
            F.sum(now).alias(f"w{r}"),
            F.sum(F.when(is_true, now)).alias(f"w_hits{r}"),
        ]
        if r > first:
            before = F.col(f"_w{r - 1}")
            either = now.isNotNull() | before.isNotNull()
            figures += [
                F.count(F.when(now.isNotNull() & before.isNull(), 1)).alias(f"new{r}"),
                F.count(F.when(either, 1)).alias(f"either{r}"),
                F.sum(
                    F.when(
                        either,
                        F.abs(F.coalesce(now, F.lit(0.0)) - F.coalesce(before, F.lit(0.0))),
                    )
                ).alias(f"diff{r}"),
            ]
    row = first_row(pairs.agg(*figures), "round_records")
    records, last = [], None
    for r in span:
        record: dict[str, Any] = {
            "round": r,
            "scorer": "classifier" if r else "embedding",
            "n_assignments": int(row[f"rows{r}"] or 0),
        }
        n = int(row[f"pairs{r}"])
        if r > first:
            record["changed"] = round(int(row[f"new{r}"]) / n, 6) if n else 0.0
            if weighted[r] and weighted[r - 1]:  # soft: the pairs barely change, their weights do
                n_either = int(row[f"either{r}"])
                diff = float(row[f"diff{r}"] or 0.0)
                record["weight_change"] = round(diff / n_either, 6) if n_either else 0.0
        if truth is not None:
            last = quality_of(
                n,
                int(row[f"hits{r}"]),
                int(row["n_true"]),
                float(row[f"w{r}"] or 0.0),
                float(row[f"w_hits{r}"] or 0.0),
                weighted[r],
            )
            record |= {"precision": last["precision"], "recall": last["recall"]}
        records.append(record)
        log.info("refine: round %d: %s", r, record)
    return records, last


def budgeted(
    spark: SparkSession,
    dataset: str,
    assignments: DataFrame,
    params: AssignSettings,
    path: str,
    n_hard: Optional[int] = None,
) -> tuple[DataFrame, Optional[dict[str, Any]]]:
    """Write `assignments` to the Parquet folder `path` (which must not exist) and read them back,
    pruned first to ``params.soft_budget`` (:func:`eagle_spark.assignment.budget.within_budget`)
    when the weighting is soft with a budget: then the unpruned ones go to ``<path>_all``.

    `n_hard`: :func:`eagle_spark.assignment.budget.hard_positives` of `dataset` when the caller
    knows it (the rounds of one refinement share it), else computed here.

    Returns:
        (the assignments read from `path`; the budget's record, None without a budget).
    """
    if params.weighting != "soft" or params.soft_budget <= 0:
        return _materialise(assignments, path, spark), None
    every = _materialise(assignments, path + "_all", spark)
    if n_hard is None:
        n_hard = hard_positives(spark, dataset, params.multiplicity)
    kept, record = within_budget(every, params.soft_budget, n_hard)
    return _materialise(kept, path, spark), record


def _materialise(assignments: DataFrame, path: str, spark: SparkSession) -> DataFrame:
    assignments.write.parquet(path)
    return read_parquet(spark, path)
