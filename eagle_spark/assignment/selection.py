"""``assign.weighting=auto``: choose how to learn from group labels with group labels alone.

Between giving every member every group label (the Baseline) and giving each label to its best
members only (EAGLE's hard top-c assignment) lies the soft weighting (:func:`eagle_spark.assignment.
assign.soft_weights`); which is best depends on the data (how well a group's members can be told
apart, how many labels a sample has). No sample label is needed to choose: a seeded share
(``assign.held_out``, at most :data:`MAX_HELD_MEMBERS` members) of the groups is held out, each
candidate (``assign.candidates``) assigns the whole data, a proxy classifier (the label tree
with one tree, default settings) trains on what it gave the members of the other groups (groups of
at most about :data:`MAX_PROXY_PAIRS` group labels, a seeded sample on larger data:
:func:`fit_part`), the proxy predicts the held-out members, and the members' predictions are
scored against the held-out groups' labels Y2 with their counts
(:func:`eagle_spark.evaluation.group.group_precisions`, criterion :data:`CRITERION`: the multiset
precision). The candidate with the best mean of group-level P@1, P@3 and P@5 wins (ties: the
first listed), and its assignment of the whole data is the output: it is not computed again.
When the share would hold out fewer than :data:`MIN_HELD_GROUPS` groups (small data), every group
is scored in k folds instead, each held out once while the proxy trains on the others.

It is a stage of ``assign``: :func:`eagle_spark.assignment.assign.assign` calls
:func:`choose_assignment` with its settings and label embeddings, and each candidate is assigned
by :func:`eagle_spark.assignment.output.assign_with`, the proxies trained and run by the
classifiers' own stages (:func:`eagle_spark.classifiers.tree.train_tree`,
:func:`eagle_spark.classifiers.predict.predict`), the parts cut by
:func:`eagle_spark.aggregation.split.split_groups`: nothing here goes through the Python API.

What the held-out groups reach: the label embeddings are those GRLR fitted on all the groups,
held-out ones included (fitting them again without the held-out groups would double GRLR's cost),
and a refined candidate's classifier scorer (:mod:`eagle_spark.assignment.refine`) is trained on
the first round's assignment of all the groups. Both only score a kept group's members for that
group's own labels, so a held-out group's labels reach the proxy as the choice of which kept
member gets a kept group's label, never as a training label: Algorithm 2 assigns each group from
its own members, so an unrefined candidate gives the kept groups exactly what assigning them
alone would. Cost: per candidate an assignment of the whole data (the output's, if it wins; the
Baseline, which reads only Y1 and Y2, assigns the kept groups alone, and the caller assigns the
whole data if it wins), a one-tree training on the kept groups (about a third of the default
three trees' on data of up to :data:`MAX_PROXY_PAIRS` group labels, a bounded cost above it) and a
prediction of the held-out members; a refined candidate (``soft-0.3+r1``) whose unrefined
settings are also a candidate starts from that candidate's assignment. On a classic session the
held-out split and the Baseline's scoring run in a second driver thread beside the other
candidates' assignments, which need no split (:func:`side_by_side`): the same jobs, whose tasks
fill the slots the others leave idle. All other scratch data lives in a folder the caller deletes
after writing the output.

GRLR's iterations are chosen the same way: a candidate named ``<name>@t<N>`` assigns with label
embeddings GRLR fits on the whole data with N iterations and the model's other ``embed`` settings
(:class:`EmbeddingsAt`; ``soft-0.3+r1@t0`` gives an EAGLE model EAGLE-0's embeddings e0 as a
candidate), at one GRLR fit per distinct N besides the candidate's own cost; the record's
``iterations`` says which candidates did and the model's T.

Within one driver process the held-out split of a dataset and the scores of the candidates that
do not read the label embeddings (the Baseline) are made once and reused (:class:`HeldOutSplit`,
where every executor reaches the driver's work folder: :func:`held_out_split`):
``pipeline --compare`` chooses for EAGLE-0 and for EAGLE on the same aggregated data with the same
seed, and a refit of GRLR on the same data chooses again. The key is the dataset's folder and its
manifest (rewriting a folder writes a new manifest), the shares and the seed; the parts are loaded
(and so checked) again at each use, and recomputed when they are gone. Driver threads choosing on
the same split at once (``pipeline`` runs its methods side by side) take turns to make it and to
score the Baseline (:func:`split_work`): the first does the work, the others reuse it.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import posixpath
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from eagle_spark import classic
from eagle_spark import schemas as S
from eagle_spark.aggregation.split import split_groups
from eagle_spark.assignment.budget import group_labels
from eagle_spark.assignment.members import write_training_set
from eagle_spark.assignment.output import assign_with
from eagle_spark.classifiers.predict import PREDICTIONS, predict
from eagle_spark.classifiers.tree import train_tree
from eagle_spark.errors import BadInputError
from eagle_spark.evaluation.group import group_precisions, multiset_precision
from eagle_spark.grlr.embedding import embed
from eagle_spark.io.fs import FileSystem
from eagle_spark.io.tables import read_manifest, read_parquet, read_table, require_tables
from eagle_spark.io.work import WORK_DIR_CONF, work_folder
from eagle_spark.progress import job_step, working_for
from eagle_spark.settings import (
    AssignSettings,
    EmbedSettings,
    PredictSettings,
    TreeSettings,
    candidate_changes,
    candidate_iterations,
)

log = logging.getLogger(__name__)

K = (1, 3, 5)
CRITERION = "multiset"
"""Which group-level precision ranks the candidates (:data:`eagle_spark.evaluation.group.CRITERIA`):
the multiset precision, an upper bound of the members' sample P@k that caps predicting a group
label for more members than hold it; the union-based ``max`` / ``sum`` favour the Baseline, whose
members all predict their group's popular labels (measured with ``experiment select`` on the
training sets of bibtex and delicious: docs/experiments.md)."""
MIN_HELD_GROUPS = 20
"""With fewer groups than this held out by the share (small data), every group is scored instead,
in k folds (:func:`group_folds`, k = round(1 / share) within [2, :data:`MAX_FOLDS`], at most the
number of groups): each fold is held out once while a proxy trains on the others, and a
candidate's score pools the folds' held-out members (the record has ``folds``)."""
MAX_FOLDS = 10
"""At most this many folds (a proxy training per fold and candidate)."""
FALLBACK = "hard"
"""The assignment used when no group can be held out (a dataset of one group; whether or not it
is a candidate): the paper's EAGLE (Algorithm 2, top-c with ``assign.multiplicity``); the record
says why."""


def group_folds(group_ids: Sequence[int], k: int, seed: int) -> list[list[int]]:
    """The groups in `k` folds whose sizes differ by at most one: the distinct ids sorted, put in a
    seeded random order (numpy's default generator of `seed`), the i-th to fold i mod k.

    Args:
        group_ids: the group ids (any order; repeats count once).
        k: the number of folds, in [1, the number of distinct ids].
        seed: ``assign.held_out_seed``.
    Returns:
        k lists of group ids, each sorted; every id in exactly one.
    Raises:
        ValueError: `k` outside [1, distinct ids].
    """
    ids = sorted({int(g) for g in group_ids})
    if not 1 <= k <= len(ids):
        raise ValueError(f"group_folds: k must be in [1, {len(ids)}], got {k}")
    order = np.random.default_rng(seed).permutation(len(ids))
    return [sorted(ids[j] for j in order[f::k]) for f in range(k)]


MAX_HELD_MEMBERS = 20_000
"""At most about this many group members are held out (the share ``assign.held_out`` shrinks on
larger data): the candidates' scores are means over the held-out members, whose spread shrinks
with their number, while predicting them costs each candidate a prediction pass over them, per
member (5,000 groups of 4, 2,000 of 10)."""
MAX_PROXY_PAIRS = 100_000
"""The proxy trains on groups not held out with at most about this many group labels, Y2's
(group, label) pairs (:func:`eagle_spark.assignment.budget.group_labels`; a seeded share of the
groups, ``kept_share`` of :func:`eagle_spark.aggregation.split.split_groups`, on larger data): what
a proxy learns from, so its score's noise is about the same on data of any size above it (fewer
groups cover fewer labels and the choice turns on near-ties), while its cost, at most the Baseline
positives (the pairs times their groups' sizes, recorded as ``proxy_positives``), stops growing
with the data. Every candidate trains on the same groups, so the comparison stays paired. The rule
that chose it: the smallest measured cap that holds at least as many group labels as the held-out
members do at :data:`MAX_HELD_MEMBERS` on realistic synthetic Wiki-325K (55,000 at R-4, 62,000 at
R-10: a proxy should have learnt about as many group labels as it is scored on) and at which
it and every larger cap choose as the uncapped proxy does, on every data set measured with
``benchmarks/selection_proxy_size.py`` (training data only, never a test set; docs/design.md's
current figures give each report's result)."""
PROXY = TreeSettings(n_trees=1, ranker_C_choice="none")
"""The proxy classifier the candidates are scored with: the label tree of the default settings,
one tree (a third of the default's training), its rankers at ``tree.C`` (the candidates are
compared on one classifier, not each tuned; the choice was validated with this proxy)."""


def selection_score(row: dict[str, Any], criterion: str = CRITERION) -> float:
    """The score of a candidate's row: the mean of its P@1, P@3 and P@5 by `criterion`
    (percent; the row's keys are ``<criterion> P@<k>``)."""
    return float(np.mean([row[f"{criterion} P@{k}"] for k in K]))


def precision_row(
    predictions: DataFrame, Y1: DataFrame, Y2: DataFrame, n_labels: int
) -> dict[str, float]:
    """{"<criterion> P@<k>": percent} of every group-level criterion at k in :data:`K`."""
    found = group_precisions(predictions, Y1, Y2, max(K), n_labels)
    return {f"{c} P@{k}": round(100 * p[k - 1], 2) for c, p in found.items() for k in K}


class Selection(NamedTuple):
    """What :func:`choose_assignment` returns."""

    settings: AssignSettings
    """the chosen candidate's ``assign`` settings"""
    record: dict[str, Any]
    """held_out, seed, proxy, held_out_groups (the groups scored), proxy_groups (the groups the
    proxy trained on; with ``folds`` one count per fold), proxy_pairs and proxy_positives (without
    ``folds``: those groups' labels and Baseline positives, the most any candidate's proxy trains
    on), folds (when every group was scored in
    folds: :data:`MIN_HELD_GROUPS`), candidates (name -> group P@1/3/5 in percent and the score),
    iterations (when a candidate assigned with refitted embeddings: ``model``, the model's T,
    and each such candidate's), chosen; or skipped and chosen when no group could be held out"""
    assigned: Optional[str]
    """the chosen candidate's assignment of the whole data (an ``assign`` output folder inside
    the scratch folder), or None when the caller is to compute it: nothing was scored (the
    fallback), or the winner's score was kept from an earlier choice on the same split"""
    rounds: Optional[str] = None
    """when the chosen candidate is refined, the folder its rounds were left in
    (:func:`eagle_spark.assignment.refine.round_records`)"""


MAX_KEPT_SPLITS = 4
"""How many held-out splits (of distinct datasets, shares or seeds) a driver process keeps for
reuse; the oldest is deleted beyond it (each is about the size of its dataset)."""


@dataclasses.dataclass
class HeldOutSplit:
    """The held-out split of one dataset, kept for reuse in this driver process.

    Attributes:
        fit, held: folders of the kept and the held-out groups' parts
            (:func:`eagle_spark.aggregation.split.split_groups`).
        ids: folder of the kept part's id map (sample_id, group_id -> part_sample_id,
            part_group_id).
        scores: the score rows of the candidates that read neither the label embeddings nor any
            other ``assign`` setting (the Baseline), by candidate name: the same for every GRLR
            model of the data.
    """

    fit: str
    held: str
    ids: str
    scores: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)


_SPLITS: collections.OrderedDict[tuple[str, str, float, int, float], HeldOutSplit] = (
    collections.OrderedDict()
)
_SPLITS_LOCK = threading.Lock()


_SPLIT_WORK: dict[tuple[str, str, float, int, float], threading.Lock] = {}


def _split_key(
    dataset: str, manifest: dict[str, Any], share: float, seed: int, kept_share: float
) -> tuple[str, str, float, int, float]:
    return (dataset, json.dumps(manifest, sort_keys=True, default=str), share, seed, kept_share)


def split_work(
    dataset: str, manifest: dict[str, Any], share: float, seed: int, kept_share: float = 1.0
) -> threading.Lock:
    """The lock a driver thread holds while it makes the held-out split of (`dataset` with its
    `manifest`, `share`, `seed`, `kept_share`) or scores a kept candidate on it: methods run side
    by side (:func:`eagle_spark.pipeline.methods_at_once`) then make each split, and score the
    Baseline on it, once; the other thread waits and reuses the result."""
    with _SPLITS_LOCK:
        return _SPLIT_WORK.setdefault(
            _split_key(dataset, manifest, share, seed, kept_share), threading.Lock()
        )


def held_out_split(
    spark: SparkSession,
    dataset: str,
    manifest: dict[str, Any],
    share: float,
    seed: int,
    scratch: str,
    kept_share: float = 1.0,
) -> tuple[str, str, str, dict]:
    """The kept and held-out parts of `dataset` by group (share `share` held out, seed `seed`; the
    kept part a share `kept_share` of the other groups), made once per driver process and reused
    while the dataset's manifest is unchanged.

    Kept only where every executor reaches the driver's work folder
    (:func:`eagle_spark.io.work.work_folder`): ``spark.eagle_spark.workDir`` is set, or the
    session is a classic one in local mode. Elsewhere (a cluster or a Connect server without that
    setting) the parts are made in `scratch` each time and nothing is kept.

    Args:
        dataset: an aggregated dataset's folder (Y1, Y2); manifest: its manifest.
        share: the held-out share of the groups, in (0, 1).
        seed: the split's seed.
        scratch: the caller's scratch folder (used when the split is not kept).
        kept_share: in (0, 1], as :func:`eagle_spark.aggregation.split.split_groups`'s.
    Returns:
        (kept part's folder, held-out part's folder, id map folder, the split's kept score rows by
        candidate name: a dict the caller adds to; see :class:`HeldOutSplit`). Kept parts must not
        be changed; beyond :data:`MAX_KEPT_SPLITS` the oldest is deleted.
    Raises:
        BadInputError / ValueError: as :func:`eagle_spark.aggregation.split.split_groups`.
    """
    keep = bool(spark.conf.get(WORK_DIR_CONF, None)) or (
        not classic.is_connect(spark) and classic.is_local(spark)
    )
    key = _split_key(dataset, manifest, share, seed, kept_share)
    with _SPLITS_LOCK:
        kept = _SPLITS.get(key) if keep else None
        if kept is not None:
            _SPLITS.move_to_end(key)
    if kept is not None:
        try:  # the parts' manifests and tables are checked; a part removed meanwhile is made again
            if not FileSystem(spark).exists(kept.ids):
                raise FileNotFoundError(f"the id map {kept.ids} is gone")
            for part in (kept.fit, kept.held):
                require_tables(spark, part, (S.X, S.Y1, S.Y2))
            return kept.fit, kept.held, kept.ids, kept.scores
        except (BadInputError, OSError, ValueError) as err:
            log.warning(
                "assign auto: the kept held-out split is unusable (%s); splitting again", err
            )
    folder = work_folder(spark, "held-out-split") if keep else scratch
    ids = posixpath.join(folder, "fit_ids")
    fit, held = split_groups(
        spark,
        dataset,
        posixpath.join(folder, "fit"),
        posixpath.join(folder, "held"),
        share,
        seed,
        id_map=ids,
        kept_share=kept_share,
    )
    made = HeldOutSplit(fit, held, ids)
    if not keep:
        return fit, held, ids, made.scores
    with _SPLITS_LOCK:
        _SPLITS[key] = made
        while len(_SPLITS) > MAX_KEPT_SPLITS:
            _, old = _SPLITS.popitem(last=False)
            FileSystem(spark).delete(posixpath.dirname(old.fit))
    return fit, held, ids, made.scores


def forget_kept_splits(spark: SparkSession) -> int:
    """Delete the held-out splits this driver process keeps (:func:`held_out_split`) with the
    Baseline scores kept beside them: the next choice on any data splits and scores its Baseline
    again. For a long-lived driver (a notebook) that wants the disk back, and to measure a choice
    as a run alone makes it (``benchmarks/assignment_cost.py --alone``).

    Returns:
        How many splits were forgotten.
    """
    with _SPLITS_LOCK:
        kept = list(_SPLITS.values())
        _SPLITS.clear()
    fs = FileSystem(spark)
    for split in kept:
        fs.delete(posixpath.dirname(split.fit))
    return len(kept)


def proxy_work(spark: SparkSession, part: str) -> dict[str, int]:
    """{"proxy_pairs": the group labels, "proxy_positives": the Baseline positives} of the kept
    part `part` (:func:`eagle_spark.assignment.budget.group_labels`)."""
    found = group_labels(spark, part)
    return {"proxy_pairs": found.pairs, "proxy_positives": found.baseline_positives}


def group_members(spark: SparkSession, dataset: str, manifest: dict[str, Any]) -> float:
    """The group members (Y1's rows) of `dataset`: n_groups x group_size_mean from its
    `manifest` where ``aggregate`` wrote them, else counted (a frame's manifest,
    :meth:`eagle_spark.Dataset.from_samples`, has no group sizes)."""
    if manifest.get("group_size_mean") is not None:
        return int(manifest.get("n_groups") or 0) * float(manifest["group_size_mean"])
    return float(read_table(spark, dataset, S.Y1).count())


class _Parts(NamedTuple):
    """What a choice scores on: (kept part, held-out part, id map) once, or once per fold; each
    pair's groups; the split's kept scores (:class:`HeldOutSplit`); the lock a thread holds while
    it scores a kept candidate (:func:`split_work`)."""

    splits: list[tuple[str, str, DataFrame]]
    counts: list[tuple[int, int]]
    known: dict[str, dict[str, float]]
    work: contextlib.AbstractContextManager[Any]


def _reads_groups_only(params: AssignSettings, name: str) -> bool:
    """Whether candidate `name` reads only Y1 and Y2 (the Baseline): no label embedding, no other
    ``assign`` setting."""
    return dataclasses.replace(params, **candidate_changes(name)).method == "baseline"


def side_by_side(spark: SparkSession) -> bool:
    """Whether :func:`choose_assignment` makes the held-out split and scores the Baseline in a
    second driver thread while the other candidates assign the whole data: on a classic session
    (local mode or a cluster; the jobs share the task slots, each task keeps what it would alone);
    on Spark Connect one after another, as ``pipeline``'s methods run there."""
    return not classic.is_connect(spark)


def _groups(spark: SparkSession, part: str) -> int:
    """A dataset folder's number of groups, from its manifest."""
    return int(read_manifest(spark, part).get("n_groups") or 0)


def choose_assignment(
    spark: SparkSession,
    dataset: str,
    params: AssignSettings,
    embeddings: str,
    scratch: str,
    max_proxy_pairs: int = MAX_PROXY_PAIRS,
) -> Selection:
    """Score ``assign.candidates`` on held-out groups of `dataset` and return the best.

    Args:
        spark: the active session.
        dataset: the aggregated dataset's folder (X, Y1, Y2) being assigned.
        params: the ``assign`` settings (``weighting=auto``): the candidates, the held-out share
            and seed; a candidate's settings are these with its name's changes
            (:func:`eagle_spark.settings.candidate_changes`).
        embeddings: the label embeddings' folder (``embed``'s output for `dataset`; its manifest
            gives the GRLR settings a ``@t<N>`` candidate refits with).
        scratch: a folder to write into (not existing; the caller deletes it).
        max_proxy_pairs: the proxy trains on groups not held out of about this many group labels
            (Y2's pairs) at most (:data:`MAX_PROXY_PAIRS`; another value measures how the choice
            depends on it: ``benchmarks/selection_proxy_size.py``).
    Returns:
        A :class:`Selection`.
    Raises:
        BadInputError (a ValueError): as the stages it runs (e.g. no groups held out).
        ValueError: `max_proxy_pairs` below 1.
    Memory: a task keeps what the stage it runs for keeps (the assignment's, the proxy training's
        and prediction's: :func:`eagle_spark.classifiers.tree.train_tree`); with the Baseline
        scored side by side (:func:`side_by_side`) an executor may hold both at once: the kept
        part's X and the proxy's labels (at most about :data:`MAX_PROXY_PAIRS` group labels'
        Baseline positives, whatever the data's size) beside the assignment's state. The driver
        keeps the candidates' score rows.
    Source: this project (choosing from group labels alone), beyond the paper.
    """
    if max_proxy_pairs < 1:
        raise ValueError(f"choose_assignment: max_proxy_pairs must be >= 1, got {max_proxy_pairs}")
    manifest = read_manifest(spark, dataset)
    n_groups = int(manifest.get("n_groups") or 0)
    n_members = group_members(spark, dataset, manifest)
    share = (
        min(params.held_out, MAX_HELD_MEMBERS / max(n_members, 1.0))
        if n_groups
        else params.held_out
    )
    fallback = FALLBACK
    folds: Optional[list[list[int]]] = None
    if n_groups * share < MIN_HELD_GROUPS:
        k = min(n_groups, max(2, min(MAX_FOLDS, round(1 / share))))
        if k < 2:
            log.warning(
                "assign auto: %d group(s): none can be held out to score on; using %s",
                n_groups,
                fallback,
            )
            return Selection(
                dataclasses.replace(params, **candidate_changes(fallback)),
                {
                    "held_out": share,
                    "skipped": f"{n_groups} group(s): none can be held out to score on",
                    "candidates": {},
                    "chosen": fallback,
                },
                None,
            )
        groups = [
            int(r[0])
            for r in read_table(spark, dataset, S.Y1).select(S.GROUP_ID).distinct().collect()
        ]
        folds = group_folds(groups, k, params.held_out_seed)
        log.info(
            "assign auto: %d groups, fewer than %d held out at %.3g: scoring on all of them in "
            "%d folds",
            n_groups,
            MIN_HELD_GROUPS,
            share,
            k,
        )

    def make_parts() -> _Parts:
        """The kept and held-out parts (one pair, or one per fold) and each part's groups."""
        if folds is None:
            # the group labels of the groups not held out, about (1 - share) of the data's
            n_pairs = group_labels(spark, dataset).pairs
            kept_share = min(1.0, max_proxy_pairs / max(n_pairs * (1.0 - share), 1.0))
            work = split_work(dataset, manifest, share, params.held_out_seed, kept_share)
            with work, job_step(spark, "select: held-out split"):
                fit, held, fit_ids, known = held_out_split(
                    spark, dataset, manifest, share, params.held_out_seed, scratch, kept_share
                )
            n_fit, n_held = _groups(spark, fit), _groups(spark, held)
            if not n_held or not n_fit:
                raise BadInputError(
                    f"assign.weighting=auto: holding out {share:g} of the groups of {dataset} "
                    f"leaves {n_fit} to fit and {n_held} to score; give more groups or another "
                    "assign.held_out"
                )
            return _Parts(
                [(fit, held, read_parquet(spark, fit_ids))], [(n_fit, n_held)], known, work
            )
        parts = _Parts([], [], {}, contextlib.nullcontext())
        with job_step(spark, "select: folds"):
            for f, fold in enumerate(folds):
                ids_path = posixpath.join(scratch, f"fold-{f}", "fit_ids")
                fit, held = split_groups(
                    spark,
                    dataset,
                    posixpath.join(scratch, f"fold-{f}", "fit"),
                    posixpath.join(scratch, f"fold-{f}", "held"),
                    0.5,
                    id_map=ids_path,
                    held_groups=fold,
                )
                parts.splits.append((fit, held, read_parquet(spark, ids_path)))
                parts.counts.append((_groups(spark, fit), _groups(spark, held)))
        return parts

    def proxy_score(
        parts: _Parts, i: int, name: str, chosen: AssignSettings, assigned: Optional[str]
    ) -> dict[str, Any]:
        """The candidate's score row: a proxy per part trained on what `assigned` (the
        candidate's output for the whole data; None: assign the kept part with `chosen`) gave
        the kept groups, scored on the held-out members, pooled over the parts."""
        found, members = np.zeros(len(K)), 0
        for f, (fit, held, ids) in enumerate(parts.splits):
            tag = f"{i}" if folds is None else f"{i}-fold-{f}"
            training = posixpath.join(scratch, f"fit-{tag}")
            with job_step(spark, f"select {name}: proxy training set"):
                if assigned is not None:
                    fit_part(spark, fit, ids, assigned, training)
                else:
                    assign_with(spark, fit, training, chosen, diagnostics=False)
            proxy = posixpath.join(scratch, f"model-{tag}")
            with job_step(spark, f"select {name}: proxy training"):
                train_tree(spark, training, proxy, PROXY)
            preds = posixpath.join(scratch, f"predictions-{tag}")
            with job_step(spark, f"select {name}: proxy prediction and score"):
                predict(spark, proxy, held, preds, PredictSettings())
                Y1 = read_table(spark, held, S.Y1)
                part = multiset_precision(
                    read_parquet(spark, posixpath.join(preds, PREDICTIONS)),
                    Y1,
                    read_table(spark, held, S.Y2),
                    max(K),
                )
                n = Y1.count()  # the part's members: its precision's denominator
            found += n * np.asarray([part[k - 1] for k in K])
            members += n
        found = found / max(members, 1)
        row: dict[str, Any] = {
            f"{CRITERION} P@{k}": round(100 * found[j], 2) for j, k in enumerate(K)
        }
        row["score"] = round(selection_score(row), 3)
        log.info("assign auto: candidate %s: score %.2f", name, row["score"])
        return row

    rows: dict[str, Any] = {}
    # the candidates that read only Y1 and Y2 (the Baseline): a proxy's training set is the
    # candidate's assignment of the kept part alone (the same rows as the kept part of its whole
    # assignment), and the caller assigns the whole data if one wins
    kept_only: list[tuple[int, str]] = []
    assigning: list[tuple[int, str]] = []
    for i, c in enumerate(params.candidates):
        (kept_only if _reads_groups_only(params, c) else assigning).append((i, c))

    def score_kept_only(ready: Callable[[], _Parts]) -> None:
        parts = ready()
        for i, name in kept_only:
            # scored by one thread at a time on a kept split: a second one reuses its score
            with parts.work:
                if name in parts.known:  # scored on this split before
                    rows[name] = dict(parts.known[name])
                    log.info(
                        "assign auto: candidate %s: score %.2f (kept)", name, rows[name]["score"]
                    )
                    continue
                chosen = dataclasses.replace(params, **candidate_changes(name))
                rows[name] = proxy_score(parts, i, name, chosen, None)
                if folds is None:  # reads no embedding or setting: kept with the split
                    parts.known[name] = dict(rows[name])

    # GRLR of all the groups (see the module docstring)
    at_t = EmbeddingsAt(spark, dataset, embeddings, posixpath.join(scratch, "embeddings"))
    # (a candidate's settings, its embeddings' iterations) -> its assigned folder
    done: dict[tuple[AssignSettings, Optional[int]], str] = {}
    rounds: dict[str, Optional[str]] = {}  # a candidate's name -> the folder its rounds are in

    def assign_and_score(ready: Callable[[], _Parts]) -> None:
        for i, name in assigning:
            chosen = dataclasses.replace(params, **candidate_changes(name))
            at = candidate_iterations(name)
            assigned = posixpath.join(scratch, f"assigned-{i}")
            rounds[name] = posixpath.join(scratch, f"rounds-{i}") if chosen.refine_rounds else None
            unrefined = done.get((chosen.unrefined(), at))
            with job_step(spark, f"select {name}: assign"):
                assign_with(
                    spark,
                    dataset,
                    assigned,
                    chosen,
                    embeddings=at_t.at(at) if chosen.method == "eagle" else None,
                    # a refined candidate whose unrefined settings were scored starts from
                    # their output
                    first_round=unrefined if chosen.refine_rounds > 0 else None,
                    # the figures are the winner's alone: the caller computes them, a refined
                    # candidate's from the rounds it leaves in the scratch folder
                    diagnostics=False,
                    rounds_scratch=rounds[name],
                )
            done[(chosen.unrefined() if not chosen.refine_rounds else chosen, at)] = assigned
            rows[name] = proxy_score(ready(), i, name, chosen, assigned)

    if assigning and side_by_side(spark):
        # the split and the Baseline's scoring in a second driver thread, beside the assignments
        # (which need no split): their Spark jobs fill the task slots the others leave idle
        with ThreadPoolExecutor(1, thread_name_prefix="eagle-spark-select") as pool:
            made = pool.submit(working_for(spark, make_parts))
            kept = pool.submit(working_for(spark, score_kept_only), made.result)
            assign_and_score(made.result)
        kept.result()
        parts = made.result()
    else:
        parts = make_parts()
        score_kept_only(lambda: parts)
        assign_and_score(lambda: parts)
    splits, counts = parts.splits, parts.counts
    best = max(params.candidates, key=lambda c: (rows[c]["score"], -params.candidates.index(c)))
    won = dataclasses.replace(params, **candidate_changes(best))
    refitted = {  # the candidates assigned with embeddings other than the model's
        c: t
        for c in params.candidates
        if (t := candidate_iterations(c)) is not None and at_t.at(t) != embeddings
    }
    return Selection(
        won,
        {
            "held_out": share,
            "seed": params.held_out_seed,
            "proxy": "label tree, 1 tree, default settings",
            "held_out_groups": sum(n_held for _, n_held in counts),
            "proxy_groups": (counts[0][0] if folds is None else [n_fit for n_fit, _ in counts]),
            **(proxy_work(spark, splits[0][0]) if folds is None else {}),
            **({"folds": len(folds)} if folds is not None else {}),
            **({"iterations": {"model": at_t.settings.iterations, **refitted}} if refitted else {}),
            "candidates": {c: rows[c] for c in params.candidates},
            "chosen": best,
        },
        done.get((won, candidate_iterations(best))),  # None for a kept score: the caller assigns
        rounds.get(best),
    )


class EmbeddingsAt:
    """The label embeddings a candidate assigns with: the model's own, or for a candidate named
    ``...@t<N>`` (:func:`eagle_spark.settings.candidate_iterations`) GRLR refitted on the whole
    dataset with N iterations and the model's other ``embed`` settings (paper Algorithm 1; T = 0
    gives EAGLE-0's e0), fitted once per N into the selection's scratch folder.

    Cost: one GRLR fit per distinct N other than the model's (its ``embed`` stage's), on the
    driver's Spark session; nothing is kept in executor memory beyond what that fit keeps.

    Args:
        spark: the session.
        dataset: the aggregated dataset's folder.
        own: the model's ``embed`` output folder.
        scratch: a folder to write the refitted embeddings under (the caller deletes it).
    Raises:
        BadInputError: the model's embeddings fail their integrity check (at the first
            ``@t<N>`` candidate; without one their manifest is not read).
    """

    def __init__(self, spark: SparkSession, dataset: str, own: str, scratch: str) -> None:
        self._spark, self._dataset, self._own, self._scratch = spark, dataset, own, scratch
        self._settings: Optional[EmbedSettings] = None  # read at the first @t candidate only
        self._fitted: dict[int, str] = {}

    @property
    def settings(self) -> EmbedSettings:
        """The model's ``embed`` settings, from its embeddings' manifest (read once)."""
        if self._settings is None:
            used = read_manifest(self._spark, self._own, what="embeddings")["parameters"]
            found = EmbedSettings.from_dict(used, f"{self._own}/_manifest.json parameters")
            if not isinstance(found, EmbedSettings):  # from_dict builds its own class
                raise TypeError(f"EmbeddingsAt: {self._own}: not embed settings")
            self._settings = found
        return self._settings

    def at(self, iterations: Optional[int]) -> str:
        """The embeddings' folder for T = `iterations` (None: the model's)."""
        if iterations is None or iterations == self.settings.iterations:
            return self._own
        if iterations not in self._fitted:
            path = posixpath.join(self._scratch, f"t{iterations}")
            with job_step(self._spark, f"select: embeddings at T = {iterations}"):
                embed(
                    self._spark,
                    self._dataset,
                    path,
                    dataclasses.replace(self.settings, iterations=iterations),
                )
            self._fitted[iterations] = path
        return self._fitted[iterations]


def fit_part(spark: SparkSession, fit: str, ids: DataFrame, assigned: str, path: str) -> str:
    """The proxy's training set: the kept groups' part `fit` (X, renumbered ids) with the labels
    the candidate's output `assigned` (of the whole dataset) gave its members for those groups.

    Args:
        fit: the kept part's folder (:func:`eagle_spark.aggregation.split.split_groups`).
        ids: its id map (sample_id, group_id -> part_sample_id, part_group_id).
        assigned: the candidate's :func:`eagle_spark.assignment.output.assign_with` output.
        path: the dataset folder to write (X copied from `fit`, Y the members' labels, with
            ``label_weights`` when the assignment is weighted).
    Returns:
        `path`. A member's labels come from its kept groups only: a sample that is also in a
        held-out group does not train on that group's labels.
    """
    part = read_manifest(spark, fit)
    members = read_table(spark, assigned, S.ASSIGNMENTS).join(
        ids.select(S.SAMPLE_ID, S.GROUP_ID, "part_sample_id"), [S.SAMPLE_ID, S.GROUP_ID]
    )
    members = members.drop(S.SAMPLE_ID).withColumnRenamed("part_sample_id", S.SAMPLE_ID)
    write_training_set(
        spark,
        read_table(spark, fit, S.X),
        fit,
        members,
        path,
        "selection-fit",
        {k: part[k] for k in ("n_samples", "n_features", "n_labels")},
        source={"part": fit, "assigned": assigned},
    )
    return path


__all__ = [
    "CRITERION",
    "EmbeddingsAt",
    "HeldOutSplit",
    "MAX_KEPT_SPLITS",
    "PROXY",
    "MAX_FOLDS",
    "MIN_HELD_GROUPS",
    "Selection",
    "choose_assignment",
    "group_folds",
    "fit_part",
    "forget_kept_splits",
    "held_out_split",
    "precision_row",
    "selection_score",
    "side_by_side",
    "split_work",
]
