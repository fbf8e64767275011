"""The settings sections of the learning stages: ``embed`` (GRLR), ``assign`` (with the names of
``assign.candidates``), the classifiers' ``train``, ``tree`` and ``ova``, ``predict`` and
``evaluate``."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Optional

from eagle_spark.errors import SettingsError
from eagle_spark.settings.declare import (
    Section,
    _check,
    _complaint,
    declarations,
    memory_mib,
    section,
    setting,
)
from eagle_spark.settings.shared import (
    cache_budget_setting,
    min_task_work_setting,
    tasks_setting,
    x_access_setting,
)

_ITERATIONS = re.compile(r"(.*)@t(\d+)")
"""A candidate name's ``@t<N>`` suffix: the label embeddings GRLR fits with N iterations."""


def candidate_iterations(name: str) -> Optional[int]:
    """The GRLR iterations T of the label embeddings a candidate of ``assign.candidates`` assigns
    with: N for a name ending in ``@t<N>`` (e.g. ``soft-0.3+r1@t0``, EAGLE-0's embeddings e0,
    paper Algorithm 1 with T = 0), None for the model's own embeddings. The name is checked by
    :func:`candidate_changes`.

    Raises:
        SettingsError: a name that :func:`candidate_changes` refuses.
    """
    candidate_changes(name)
    m = _ITERATIONS.fullmatch(name)
    return int(m.group(2)) if m else None


def candidate_changes(name: str) -> dict[str, Any]:
    """The ``assign`` settings of a candidate of ``assign.candidates``: ``baseline``, ``hard``
    (Algorithm 2's top-c), ``soft-<T>`` (soft weighting at temperature T > 0) or ``post-<T>``
    (posterior weighting, ``posterior``, the first round at temperature T); each but
    ``baseline`` may end in ``+r<N>``: N rounds of refinement with the classifier (0 without),
    in-sample, or ``+r<N>x<k>``: cross-fitted in k folds over the groups (``refine_folds``), and
    then in ``@t<N>``: assigned with label embeddings of N GRLR iterations instead of the model's
    (:func:`candidate_iterations`; the ``assign`` settings are the name's without it).

    Raises:
        SettingsError: any other name.
    """
    if name == "baseline":
        return {"method": "baseline", "weighting": "hard", "refine_rounds": 0}
    suffix = _ITERATIONS.fullmatch(name)
    m = re.fullmatch(
        r"(hard|(soft|post)-(\d+(?:\.\d+)?))(?:\+r(\d+)(?:x(\d+))?)?",
        suffix.group(1) if suffix else name,
    )
    _check(
        m is not None and (m.group(3) is None or float(m.group(3)) > 0),
        f"assign.candidates: {name!r} is not baseline, hard, soft-<temperature> (e.g. soft-0.3) "
        "or post-<temperature>, optionally with +r<rounds> of refinement (e.g. hard+r1), "
        "cross-fitted with +r<rounds>x<folds> (e.g. soft-0.3+r2x3), and @t<iterations> for "
        "embeddings of that many GRLR iterations (e.g. soft-0.3+r1@t0)",
    )
    if m is None:  # _check raised above; this tells the type checker
        raise SettingsError(f"assign.candidates: {name!r}")
    changes: dict[str, Any] = {
        "method": "eagle",
        "weighting": "hard",
        "posterior": False,
        "refine_rounds": 0,
    }
    if m.group(3) is not None:
        changes |= {
            "weighting": "soft",
            "posterior": m.group(2) == "post",
            "temperature": float(m.group(3)),
        }
    _check(
        m.group(5) is None or int(m.group(5)) >= 2,
        f"assign.candidates: {name!r}: cross-fitting needs at least 2 folds",
    )
    if m.group(4) is not None:
        changes["refine_rounds"] = int(m.group(4))
        changes["refine_folds"] = int(m.group(5)) if m.group(5) is not None else 0
    return changes


@section
@dataclass(frozen=True)
class EmbedSettings(Section):
    """GRLR label embeddings (:func:`eagle_spark.grlr.embedding.embed`; paper Algorithm 1)."""

    iterations: int = setting(
        20, "T, GRLR iterations (0 gives EAGLE-0's e0).", param="maxIter", bounds="[0, inf)"
    )
    lr: float = setting(
        0.1,
        "lambda, the step of e = Proj(e + lambda g); finite, > 0.",
        param="stepSize",
        bounds="(0, inf)",
    )
    normalize: bool = setting(True, "L2-normalise the rows of X first (cosine similarity).")
    tasks: int = tasks_setting(
        "label bins, at most one Spark task each (balanced by work).",
        more="Fewer when the aggregated data is small: see ``min_task_work``.",
    )
    min_task_work: float = min_task_work_setting(
        4e8,
        "the least estimated GRLR work a task gets, in nonzeros of the candidates' rows visited "
        "over the iterations (candidate rows x mean nonzeros of a row x (iterations + 1)); 0: "
        "always ``tasks`` bins.",
        more=(
            "The labels are dealt into one bin per ``min_task_work`` of work, rounded up to a "
            "multiple of the session's cores, when that is fewer than ``tasks``; heavy labels "
            "(``split_rows``, derived from ``tasks`` itself) are split as before, and the joined "
            "path (``x_access``), where a bin's rows are its task's memory, keeps ``tasks``. "
            "The default is about two seconds of one core's GRLR (2e8 a second on delicious "
            "R-4), twenty times a task's fixed cost; no embedding changes with it (each label is "
            "computed alone)."
        ),
    )
    batch_rows: int = setting(
        200_000,
        "candidate rows per vectorised batch inside a task (memory bound).",
        bounds="[1, inf)",
    )
    split_rows: int = setting(
        0,
        "labels with more candidate rows than this are split into chunks of groups; 0: max(2 x "
        "total / tasks, 500000).",
        more="The chunks' gradients are combined on the driver each iteration.",
        bounds="[0, inf)",
    )
    prune_below: float = setting(
        0.0,
        "store only embedding weights with |w| >= this, in [0, 1); 0 stores every nonzero weight "
        "(exact).",
        more=(
            "Smaller stored embeddings; the assignments of the same pass are computed before "
            "pruning and do not change."
        ),
        bounds="[0, 1)",
    )
    x_access: str = x_access_setting(
        "how tasks get the candidates' feature rows: ``cached``, ``joined`` or ``auto``.",
        more=(
            "``cached``: every executor reads X and Y1 once into its memory-mapped cache (fast; "
            "needs ~12 bytes per nonzero of X per machine). ``joined``: the design's map-reduce, "
            "Y2's pairs joined with the groups' member rows, so no task reads all of X (for X "
            "beyond one machine's memory; costs a shuffle of the candidates' rows). ``auto``: "
            "``cached`` while the cache fits ``cache_budget``, else ``joined``; the log says "
            "which and why. Same results either way."
        ),
    )
    cache_budget: Optional[str] = cache_budget_setting()


@section
@dataclass(frozen=True)
class AssignSettings(Section):
    """Label assignment (:func:`eagle_spark.assignment.assign.assign`; paper Algorithm 2)."""

    method: str = setting(
        "eagle",
        "``eagle`` (each group label to its best-scoring members: Algorithm 2) or ``baseline`` "
        "(every member gets all its group's labels, Y1 Y2).",
        more="EAGLE scores member i for label k by <e_k, x_i>, ties to the smallest sample_id.",
        choices=("eagle", "baseline"),
    )
    multiplicity: bool = setting(
        True,
        "a label of list-merge count c goes to the top-c distinct members; false: to its best "
        "member only (Algorithm 2 as printed).",
        more=(
            "Chosen on validation splits of train (label tree): on R-4, R-10 and C-8 groupings "
            "of bibtex and delicious the tree on top-c assignments beat the Baseline by 11.7 / "
            "7.1 / 5.8 points of P@1 / 3 / 5 on average while the printed argmax lost to it by "
            "3.9 / 5.4 / 5.1; on synthetic eurlex4k both lose, top-c by less (-17.9 vs -30.6 at "
            "P@1); benchmarks/reports/assignment_variants*.json. With set-merge counts (all 1) "
            "the two are the same."
        ),
    )
    weighting: str = setting(
        "auto",
        "``hard`` (a label to its top-c members, weight 1), ``soft`` (every member a weight in "
        "(0, 1] from its score) or ``auto`` (the best of ``candidates`` on held-out groups).",
        more=(
            "``hard`` is Algorithm 2. ``soft``: "
            ":func:`eagle_spark.assignment.members.soft_weights`; Y_filter then carries "
            "``label_weights`` and the classifiers train on the expected loss. ``auto``: each "
            "candidate is tried on held-out groups and the best by group-level P@k is used "
            "(:mod:`eagle_spark.assignment.selection`; needs no sample labels). No one point of the "
            'family wins on every data set (docs/experiments.md, "Learning from group labels"), '
            "so the data chooses."
        ),
        choices=("hard", "soft", "auto"),
    )
    temperature: float = setting(
        0.3,
        "with ``soft``, how far the weights spread below the top-c members; finite, > 0: near 0 "
        "is ``hard``, large is the Baseline.",
        more=(
            "A member whose score lies a share d of the group's score range below the c-th best "
            "gets exp(-d / temperature)."
        ),
        bounds="(0, inf)",
    )
    posterior: bool = setting(
        False,
        "with ``soft``, a member's weight is its posterior of holding the label given that c "
        "members of the group hold it, instead of exp(-d / temperature).",
        more=(
            "The E-step of multiple-instance EM "
            "(:func:`eagle_spark.assignment.members.posterior_weights`): the first round's "
            "odds are exp(-d / temperature), the refinement rounds' the logistic-loss "
            "classifier's, which are trained for it and need no temperature. A candidate of "
            "``auto`` may set it (``post-0.3+r1``)."
        ),
    )
    soft_keep: float = setting(
        2.0,
        "with ``soft``, at most ceil(soft_keep x c) members of a group get a weight for its "
        "label, the heaviest; 0: every member above the weight floor.",
        more=(
            "The rest, what the weights call least likely, stay negatives, so a soft "
            "assignment has at most soft_keep x the hard one's positives (the paper's point: "
            "assignment cuts the Baseline's false positives). 1 keeps the top-c members with "
            "their weights. Unpruned (0), the refined soft weighting trained on 3.5 to 14 times "
            "hard's (sample, label) pairs on validation splits of bibtex and delicious (R-4, "
            "R-10, C-8), nearly the Baseline's rows; the default is the point of the frontier "
            "of pairs against P@k that the rule 'the most accurate mean P@1/3/5 among the "
            "points with at most 2x hard's pairs in every cell' picks "
            "(benchmarks/reports/assignment_variants_budget.json and "
            'assignment_variants_keep.json; docs/experiments.md, "Pruned soft weighting").'
        ),
        bounds="[0, inf)",
    )
    soft_budget: float = setting(
        0.0,
        "with ``soft``, the positives of every round's assignment at most soft_budget x the hard "
        "assignment's (sum over Y2's pairs of min(c, group size)); 0: no budget.",
        more=(
            "The lightest pairs go first, under one weight threshold for the whole assignment "
            "(:func:`eagle_spark.assignment.budget.within_budget`): the top-c members keep "
            "weight 1 and the budget's rest goes to the heaviest other pairs wherever they are, "
            "so data whose soft assignment is within the budget is not changed at all. "
            "The frontier of positives against P@k on validation splits is docs/experiments.md, "
            '"Pruned soft weighting".'
        ),
        bounds="[0, inf)",
    )
    candidates: tuple[str, ...] = setting(
        ("baseline", "soft-0.3+r1x2"),
        "with ``auto``, the assignments to choose from: ``baseline``, ``hard`` (top-c), "
        "``soft-<T>``, ``post-<T>``, each but the first with ``+r<N>[x<k>]`` and ``@t<T>``.",
        more=(
            "``+r<N>``: rounds of refinement, ``x<k>`` cross-fitted in k folds; ``@t<T>``: "
            "assigned with embeddings GRLR fits with T iterations (``@t0``: EAGLE-0's) instead "
            "of the model's (candidate_changes, candidate_iterations). The default is the point "
            "the rule 'the most accurate mean P@1/3/5 among the choices whose fit costs at most "
            "1.5x that of auto with the in-sample round' picks on validation splits: one round "
            "cross-fitted in 2 folds recovers more of the Oracle - Baseline gap than the "
            "in-sample round and, on the mean of P@1/3/5, at least as much as 3 folds, on "
            "bibtex and delicious (R-4, R-10, C-8; benchmarks/reports/"
            "assignment_variants_auto_r1x2.json, assignment_variants_auto_r1x3.json) and on "
            "realistic synthetic Wiki-325K 0.05 (R-4, R-10; assignment_variants_r1x2_wiki325k"
            ".json, assignment_variants_r1x3_wiki325k.json), for less than 3 folds cost "
            "(assignment_cost_wiki325k_0.1_r1x2.json). Two such rounds (``soft-0.3+r2x2``) "
            "recover more on bibtex and delicious at a fit over the bound "
            "(assignment_variants_auto_r2x2.json, assignment_cost_delicious_r2x2.json). "
            "Choosing among baseline, hard, soft-0.3 and soft-0.3+r1 on held-out groups "
            "(selection.json, selection_synth.json) never chose hard or soft-0.3, so they are "
            "not candidates; the Baseline stays for data where nothing beats it "
            '(docs/experiments.md, "Cross-fitted refinement").'
        ),
    )
    held_out: float = setting(
        0.2,
        "with ``auto``, the share of the groups held out to score the candidates on, in (0, 0.9].",
        bounds="(0, 0.9]",
    )
    held_out_seed: int = setting(
        0,
        "with ``auto``, the seed of the held-out groups' hash; with ``refine_folds``, of the "
        "folds'.",
        bounds="[0, inf)",
    )
    refine_rounds: int = setting(
        0,
        "rounds of refinement with the classifier after the embedding's assignment, in [0, 10]; "
        "0: Algorithm 2 alone.",
        more=(
            "Multiple-instance EM: train one-vs-all on the assignment, score each group's "
            "members for its labels by w_k . x_i, assign again with the same weighting "
            "(:mod:`eagle_spark.assignment.refine`). A candidate of ``auto`` may set it "
            "(``hard+r1``)."
        ),
        bounds="[0, 10]",
    )
    refine_folds: int = setting(
        0,
        "with refinement, 0: in-sample (a round's classifier trains on every group); k in "
        "[2, 10]: cross-fitted, a fold's members scored by a classifier of the other k - 1 folds.",
        more=(
            "In-sample, the scorer of a group has learned that group's own previous assignment "
            "and tends to confirm it; cross-fitted, it never saw the group's labels "
            "(:func:`eagle_spark.assignment.refine.cross_fitted_assignments`), at k trainings "
            "on (k - 1) / k of the samples a round. A label no other fold's members were "
            "assigned keeps its previous round's assignment in that fold. A candidate of "
            "``auto`` may set it (``soft-0.3+r2x3``: two cross-fitted rounds in 3 folds)."
        ),
        bounds="[0, 10]",
    )
    refine_tolerance: float = setting(
        0.0,
        "with refinement, stop before ``refine_rounds`` once a round changes at most this share "
        "of the pairs (and, weighted, their weights by at most this on average), in [0, 1).",
        more=(
            "A round's change is the share of its distinct (sample, label) pairs the previous "
            "round did not have, and under soft weighting also the mean absolute change of a "
            "pair's weight (:func:`eagle_spark.assignment.refine.round_records`); 0 stops only "
            "when a round changed nothing. The manifest's rounds say where it stopped."
        ),
        bounds="[0, 1)",
    )
    refine_negatives: float = setting(
        0.0,
        "with refinement, negatives a scorer draws outside a label's groups per positive pair "
        "of its training set (at most all); 0: all within a round's budget.",
        more=(
            "A label's members that its groups hold but the round did not assign it are always "
            "negatives besides (:func:`eagle_spark.assignment.refine.negative_fraction`): the "
            "scorer must rank a group's members. The draw is one seeded share of the samples "
            "for every label, so the negatives drawn follow the assignment's positives instead "
            "of labels x samples; 0 keeps the round's budget of 5e7 (label, sample) pairs "
            "(:data:`eagle_spark.assignment.refine.NEGATIVE_BUDGET`)."
        ),
        bounds="[0, inf)",
    )
    tasks: int = tasks_setting("label bins, one Spark task each.", param="assignTasks")
    batch_rows: int = setting(
        200_000,
        "candidate rows per vectorised batch inside a task.",
        param="assignBatchRows",
        bounds="[1, inf)",
    )
    x_access: str = x_access_setting(
        "as in ``embed``, when the assignments are recomputed from stored embeddings.",
        more=(
            "``embed`` normally writes them in its own pass; ``soft`` always recomputes, it "
            "needs every member's score."
        ),
        param="assignXAccess",
    )
    cache_budget: Optional[str] = cache_budget_setting(
        "as in ``embed``.", param="assignCacheBudget"
    )

    def __post_init__(self) -> None:
        _check(
            len(self.candidates) >= 1 and len(set(self.candidates)) == len(self.candidates),
            "assign.candidates must name at least one candidate, each once",
        )
        for name in self.candidates:
            check_candidate(name, "assign.candidates")
        _check(
            self.soft_keep == 0 or self.soft_keep >= 1,
            f"assign.soft_keep must be 0 (no cap) or >= 1, got {self.soft_keep}",
        )
        _check(
            self.soft_budget == 0 or self.soft_budget >= 1,
            f"assign.soft_budget must be 0 (no budget) or >= 1, got {self.soft_budget}",
        )
        _check(
            self.refine_folds != 1,
            "assign.refine_folds must be 0 (in-sample) or 2-10 folds, got 1",
        )

    def unrefined(self) -> "AssignSettings":
        """These settings without refinement (the refinement's own settings back to their
        defaults, which then play no part): the first round of a refined assignment."""
        return dataclasses.replace(
            self, refine_rounds=0, refine_folds=0, refine_tolerance=0.0, refine_negatives=0.0
        )


def check_candidate(name: str, key: str) -> dict[str, Any]:
    """:func:`candidate_changes` of `name`, each change checked against the bounds and choices
    the ``assign`` setting it sets declares (so ``hard+r99`` is refused here, naming `key`, the
    setting the user wrote, not later as ``assign.refine_rounds``).

    Raises:
        SettingsError: `name` is not a candidate, or sets a value its setting refuses.
    """
    declared = {item.name: item for item in declarations(AssignSettings)}
    changes = candidate_changes(name)
    for setting_name, value in changes.items():
        complaint = _complaint(declared[setting_name], value)
        _check(complaint is None, f"{key}: {name!r} sets assign.{setting_name}, which {complaint}")
    return changes


@section
@dataclass(frozen=True)
class LinearSettings(Section):
    """The liblinear solver settings both classifiers share (``tree`` and ``ova`` sections)."""

    loss: str = setting(
        "squared_hinge",
        "``squared_hinge`` (Parabel/PECOS default) or ``logistic``.",
        choices=("squared_hinge", "logistic"),
    )
    C: float = setting(
        0.5,
        "liblinear cost (inverse L2 regularisation) on L2-normalised rows; finite, > 0.",
        bounds="(0, inf)",
    )
    threshold: float = setting(
        0.1,
        "weights with |w| below it are pruned; finite, >= 0.",
        param="pruneThreshold",
        bounds="[0, inf)",
    )
    tol: float = setting(
        0.2,
        "liblinear's stopping tolerance (``eps``), finite, > 0.",
        more=(
            "The dual coordinate descent stops when its projected-gradient gap falls below tol "
            "times the first pass's. Twice liblinear's and Parabel's 0.1: it trained the tree "
            "~20% faster on delicious and ~9% faster on synthetic Wiki-325K with the same P@1 on "
            "bibtex, delicious and the synthetic set (benchmarks/peers.py; runs in the git "
            "history of docs/design.md)."
        ),
        bounds="(0, inf)",
    )
    max_iter: int = setting(
        100,
        "liblinear's cap on passes of its dual coordinate descent over a classifier's samples, >= "
        "1.",
        bounds="[1, inf)",
    )
    normalize: bool = setting(True, "L2-normalise the rows of X.")
    tasks: int = tasks_setting(
        "label blocks / training units dealt into at most this many Spark tasks.",
        more="Fewer when the training set is small: see ``min_task_work``.",
    )
    min_task_work: float = min_task_work_setting(
        1e8,
        "the least estimated liblinear work a training task gets, in nonzeros of X visited per "
        "pass summed over its classifiers; 0: always ``tasks`` tasks.",
        more=(
            "A training stage runs one task per ``min_task_work`` of its estimated work, rounded "
            "up to a multiple of the session's cores, when that is fewer than ``tasks`` (and "
            "never more tasks than units); on the joined path (``x_access``) a task's rows are "
            "its memory, so it keeps ``tasks``. The default is about two seconds of one core's "
            "liblinear (the tree trained 4-7e7 a second per core on delicious' Baseline and "
            "EAGLE assignments), twenty times a task's fixed cost (its Python task, part files "
            "and scheduling, ~0.1 s). The number of tasks changes no weight (each classifier has "
            "its own seed); the times are in benchmarks/reports/training_tasks.json."
        ),
    )
    seed: int = setting(
        0, "seed of the solver's sample order (and the tree's 2-means, the negative sampling)."
    )
    unassigned: str = setting(
        "negative",
        "on EAGLE's assignments, a member of a group labelled k not assigned k is k's "
        "``negative`` (the paper) or left out (``ignore``).",
        more=(
            "``ignore``: neither positive nor negative of k; the tree leaves it out of the "
            "ranker of k in k's leaf. No effect on other training data."
        ),
        choices=("negative", "ignore"),
    )
    x_access: str = x_access_setting(
        "how training tasks get their units' rows of X: ``cached``, ``joined`` or ``auto``.",
        more=(
            "``cached``: every executor reads X and Y once into its memory-mapped cache (~8 "
            "bytes per nonzero of X per machine). ``joined``: each task receives only the rows "
            "its units train on through a Spark join of (task, sample) pairs with X (the tree: "
            "the samples positive under its nodes, all of them for the root; one-vs-all: its "
            "labels' positives and drawn negatives, so every sample when negative_fraction is "
            "1), and the tree's PIFA label representations are summed by a join too; Y stays "
            "cached (~5 bytes per positive). ``auto``: ``cached`` while the cache fits "
            "``cache_budget``, else ``joined``; the log says which and why. Same models either "
            "way."
        ),
    )
    cache_budget: Optional[str] = cache_budget_setting()


@section
@dataclass(frozen=True)
class TrainSettings(Section):
    """Which classifier ``train`` and the pipeline use; its knobs are in its own section
    (``tree`` or ``ova``)."""

    model: str = setting(
        "ova",
        "``ova`` (one-vs-all, section ``ova``) or ``tree`` (Parabel-like label tree, section "
        "``tree``).",
        choices=("ova", "tree"),
    )


@section
@dataclass(frozen=True)
class TreeSettings(LinearSettings):
    """The label-tree classifier (:mod:`eagle_spark.classifiers.tree`; ``LabelTreeClassifier``)."""

    matcher_C: Optional[float] = setting(
        None,
        "liblinear cost of the matcher (the inner nodes' classifiers), ``C`` then being the "
        "rankers'; finite, > 0; null: ``C``.",
        more=(
            "2 gains ~0.5-0.7 points of P@1/3/5 on calibrated synthetic Wiki-325K (scale 0.1) "
            "with the same P@1 on bibtex and delicious (means over 5 seeds), but trains ~1.75x "
            "longer into a ~1.6x larger model there (~1.25x with ``matcher_max_iter`` 20; runs "
            "in the git history of docs/design.md). Those figures are with ``matcher_C_scale`` "
            "none; with ``samples`` it is the root's cost, scaled below it."
        ),
        bounds="(0, inf)",
    )
    ranker_C_choice: str = setting(
        "held_out",
        "how the rankers' (the leaves' label classifiers') cost is set: ``held_out`` (chosen "
        "among ``C`` x 0.5, 1, 2 on held-out samples) or ``none`` (``C``).",
        more=(
            "``held_out``: a seeded sample of leaves (until their positives reach 10,000, at "
            "least 2) holds out 20% of its samples; the rankers trained on the rest with each "
            "cost rank the held-out samples' labels in their leaf, and the cost with the best "
            "mean of the normalised hits at 1, 3 and 5 is the rankers' (ties: ``C``). The "
            "matchers keep ``matcher_C`` (or ``C``). The model's metadata records the choice "
            "and its figures (:mod:`eagle_spark.classifiers.tree.ranker_cost`). Why it is chosen, "
            "not set: on validation splits (20% of each training file) doubling the cost from "
            "0.5 costs bibtex and delicious P@3/5 while it gains on realistic synthetic "
            "Wiki-325K; what the choice gives there: docs/design.md, Current figures "
            "(``benchmarks/reports/peers_validation_tree_defaults.json``)."
        ),
        choices=("held_out", "none"),
    )
    matcher_C_scale: str = setting(
        "samples",
        "how the matcher's cost follows its node's size: ``samples`` (x n_samples / the node's "
        "samples) or ``none`` (Parabel's: the same everywhere).",
        more=(
            "``samples``: the classifiers of node v's children use (``matcher_C`` or ``C``) x "
            "n_samples / n_v, where n_v is the number of samples positive under v (the rows they "
            "train on). Their squared-hinge loss sums over n_v rows, so this keeps the weight of "
            "the loss against the regulariser, per sample, the same at every depth (the rule "
            "omikuji applies to its logistic-loss classifiers). The root's matcher is unchanged "
            "(n_v = n_samples), and so are the rankers. +0.44 / +0.84 / +0.86 P@1/3/5 on "
            "calibrated synthetic Wiki-325K (scale 0.1), bibtex / delicious unchanged (means "
            "over 5 seeds), 1.1-1.3x the training time and a 1.75x larger model there (runs in "
            "the git history of docs/design.md)."
        ),
        choices=("samples", "none"),
    )
    matcher_max_iter: Optional[int] = setting(
        10,
        "liblinear's cap on passes for the matcher alone, ``max_iter`` then being the rankers'; "
        ">= 1; null: ``max_iter``.",
        more=(
            "The matcher's units hold the most rows (the root's, every sample), and at a larger "
            "cost (``matcher_C``, or the deep nodes' under ``matcher_C_scale``) they need the "
            "most passes. With ``matcher_C_scale`` samples, 10 keeps the P@k of 20 on synthetic "
            "Wiki-325K at scale 0.1 and on bibtex / delicious (means over 5 seeds) and trains "
            "the matchers in ~0.75x the time; at a uniform ``matcher_C`` 2, 10 costs delicious "
            "0.6 P@1 and 20 does not (runs in the git history of docs/design.md). Fewer passes "
            "train faster where the matchers are most of the work: on validation splits "
            "(docs/design.md, Current figures; "
            "``benchmarks/reports/peers_validation_tree_defaults.json``) 5 costs P@k on "
            "delicious and realistic synthetic Wiki-325K, 7 keeps it there; 7's time saving was "
            "measured only beside other benchmarks, so 10 stays until a run alone settles it."
        ),
        bounds="[1, inf)",
    )
    max_leaf: int = setting(100, "maximum labels per leaf.", bounds="[2, inf)")
    max_leaf_work: Optional[int] = setting(
        250_000,
        "a leaf whose work (samples positive under it x its labels) exceeds this is split "
        "further; null: Parabel's leaves (only ``max_leaf``).",
        more=(
            "The split is the same balanced 2-means, while the leaf has >= 4 labels, so that no "
            "leaf (usually one holding head labels) costs much more than the others. The default "
            'goes with ``max_split_shared`` 0.1 (docs/design.md, "Classifiers").'
        ),
        bounds="[1, inf)",
    )
    max_split_shared: Optional[float] = setting(
        0.1,
        "with ``max_leaf_work``, a heavy leaf's split is kept only when at most this share (in "
        "[0, 1]) of its samples is positive under both halves; null: always.",
        more=(
            "The halves' rankers train on (1 + share) / 2 of the leaf's row x classifier pairs, "
            "so a split whose halves share most samples saves little work and still adds a "
            "routing decision. Measured: the heavy leaves of calibrated synthetic Wiki-325K "
            "(scale 0.1) share 0.5-6.4% of their samples, delicious's 17-45%, so 0.1 splits the "
            "former and leaves delicious's trees as without a budget (runs in the git history of "
            "docs/design.md)."
        ),
        bounds="[0, 1]",
    )
    n_trees: int = setting(
        3,
        "trees in the ensemble (Parabel uses 3), scores averaged.",
        param="numTrees",
        bounds="[1, inf)",
    )
    top_levels: Optional[int] = setting(
        None,
        "levels of every tree the indexer's first Spark stage splits, one task per tree; null: "
        "the fewest that leave two sub-trees per core.",
        more=(
            "Every node at that depth roots a sub-tree split by the second stage, whose tasks "
            "are balanced (0: no first stage, whole trees in the second). Null gives ``n_trees * "
            "2**levels >= 2 * defaultParallelism`` (1 for 3 trees on 2 cores)."
        ),
        bounds="[0, inf)",
    )
    heavy_unit_memory: Optional[str] = setting(
        "auto",
        "training units above this working memory (a Spark size) train one at a time per "
        "executor; ``auto``: half the machine's available memory / its task slots; null: no bound.",
        more=(
            "A training unit is a node's children trained on the samples positive under it; its "
            "working memory is estimated at 40 bytes per nonzero of its rows (the rows in "
            "float64 for liblinear and liblinear's own copy; measured 36-40). An executor trains "
            "one heavy unit at a time, whatever its task slots, and a task whose heavy unit must "
            "wait trains its other units first. This keeps training's peak memory from growing "
            "with the slots beyond what the machine holds (the root's unit alone is ~3 GB at "
            "Wiki-325K scale). ``auto`` reads Linux ``MemAvailable`` when training starts "
            "(:func:`eagle_spark.classifiers.tree.units.heavy_limit`). Same model either way."
        ),
    )

    def __post_init__(self) -> None:
        if self.heavy_unit_memory not in (None, "auto"):
            memory_mib(self.heavy_unit_memory, "tree.heavy_unit_memory (or auto, or null)")


@section
@dataclass(frozen=True)
class OVASettings(LinearSettings):
    """The one-vs-all classifier (:mod:`eagle_spark.classifiers.ova`; ``OneVsRestXMC``)."""

    negative_fraction: float = setting(
        1.0, "share of the negatives each label trains on (1 = all).", bounds="(0, 1]"
    )


@section
@dataclass(frozen=True)
class PredictSettings(Section):
    """Batch prediction (:func:`eagle_spark.classifiers.predict.predict`)."""

    top_k: int = setting(5, "predictions kept per sample.", bounds="[1, inf)")
    beam_size: int = setting(
        10, "tree: nodes kept per level by the beam search.", bounds="[1, inf)"
    )
    batch_rows: int = setting(
        1000, "one-vs-all: rows scored together inside a task.", bounds="[1, inf)"
    )
    tasks: int = setting(
        0,
        "Spark tasks scoring X; 0: automatic (range partitions when X is read as too few "
        "partitions), N > 0: always N range partitions.",
        more=(
            "Automatic: when X is read as fewer than two partitions per core "
            "(``spark.default.parallelism`` x 2) and has at least :data:`PREDICT_MIN_TASK_ROWS` "
            "rows per such task, its rows are range-partitioned by sample_id into that many "
            "tasks (a few large files otherwise leave cores idle); else as read."
        ),
        param="predictTasks",
        bounds="[0, inf)",
    )


PREDICT_MIN_TASK_ROWS = 5000
"""predict.tasks=0 splits X only when every task gets at least this many rows (a shuffle of X is
not worth it for less)."""


@section
@dataclass(frozen=True)
class EvaluateSettings(Section):
    """Evaluation (:func:`eagle_spark.evaluation.evaluate.evaluate`)."""

    k: int = setting(5, "evaluate at 1..k.", bounds="[1, inf)")
    propensity_a: float = setting(
        0.55, "A of the inverse propensity (Jain et al. 2016), finite, > 0.", bounds="(0, inf)"
    )
    propensity_b: float = setting(
        1.5,
        "B of the inverse propensity, finite, > 0 (a label seen 0 times gets (0 + B)^-A).",
        bounds="(0, inf)",
    )
