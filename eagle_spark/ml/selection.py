"""``assign.weighting=auto``: choose how to learn from group labels with group labels alone.

Between giving every member every group label (the Baseline) and giving each label to its best
members only (EAGLE's hard top-c assignment) lies the soft weighting (:func:`eagle_spark.assignment.
assign.soft_weights`); which is best depends on the data (how well a group's members can be told
apart, how many labels a sample has). No sample label is needed to choose: a seeded share
(``assign.held_out``, at most :data:`MAX_HELD_GROUPS` groups) of the groups is held out, each
candidate (``assign.candidates``) assigns the other groups' labels with the model's label
embeddings and trains a proxy classifier on them (the label tree with one tree, default
settings), the proxy predicts the held-out members, and the members' predictions
are scored against the held-out groups' labels Y2 with their counts
(:func:`eagle_spark.evaluation.group.group_precisions`, criterion :data:`CRITERION`: the multiset
precision). The candidate with the best mean of group-level P@1, P@3 and P@5 wins (ties: the
first listed), and the whole data is then assigned with it.

The label embeddings are those GRLR fitted on all the groups, held-out ones included: fitting them
again without the held-out groups would double GRLR's cost, and the held-out groups' labels reach
the candidates only through the embeddings' scores of the other groups' members, never as training
labels of the proxy. Cost: per candidate an assignment of the kept groups, a one-tree training on
them (about a third of the default three trees') and a prediction of the held-out members; a
refined candidate (``soft-0.3+r1``) whose unrefined settings are also a candidate starts from that
candidate's assignment. All scratch data lives in a folder the caller deletes.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from typing import TYPE_CHECKING, Any

import numpy as np

from eagle_spark import schemas as S
from eagle_spark.settings import AssignSettings, TreeSettings, candidate_changes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eagle_spark.ml.dataset import Dataset
    from eagle_spark.ml.grlr import GRLRModel

log = logging.getLogger(__name__)

K = (1, 3, 5)
CRITERION = "multiset"
"""Which group-level precision ranks the candidates (:data:`eagle_spark.evaluation.group.CRITERIA`):
the multiset precision, an upper bound of the members' sample P@k that caps predicting a group
label for more members than hold it; the union-based ``max`` / ``sum`` favour the Baseline, whose
members all predict their group's popular labels (measured with ``experiment select`` on the
training sets of bibtex and delicious: docs/experiments.md)."""
MIN_HELD_GROUPS = 20
"""With fewer groups than this held out (small data), the candidates are not scored: the
:data:`FALLBACK` is used, and the record says why."""
FALLBACK = "hard"
"""The assignment used when there are too few groups to choose (whether or not it is a candidate):
the paper's EAGLE (Algorithm 2, top-c with ``assign.multiplicity``)."""
MAX_HELD_GROUPS = 5000
"""At most about this many groups are held out (the share ``assign.held_out`` shrinks on larger
data): the candidates' scores are means over the held-out members, whose spread shrinks with
their number, while predicting them costs each candidate a prediction pass over them."""
PROXY = TreeSettings(n_trees=1)
"""The proxy classifier the candidates are scored with: the label tree of the default settings,
one tree (a third of the default's training)."""


def selection_score(row: dict[str, Any], criterion: str = CRITERION) -> float:
    """The score of a candidate's row: the mean of its P@1, P@3 and P@5 by `criterion`
    (percent; the row's keys are ``<criterion> P@<k>``)."""
    return float(np.mean([row[f"{criterion} P@{k}"] for k in K]))


def precision_row(
    predictions: DataFrame, Y1: DataFrame, Y2: DataFrame, n_labels: int
) -> dict[str, float]:
    """{"<criterion> P@<k>": percent} of every group-level criterion at k in :data:`K`."""
    from eagle_spark.evaluation.group import group_precisions

    found = group_precisions(predictions, Y1, Y2, max(K), n_labels)
    return {f"{c} P@{k}": round(100 * p[k - 1], 2) for c, p in found.items() for k in K}


def choose_assignment(
    model: GRLRModel, dataset: Dataset, scratch: str
) -> tuple[AssignSettings, dict[str, Any]]:
    """Score ``assign.candidates`` on held-out groups of `dataset` and return the best.

    Args:
        model: the fitted :class:`eagle_spark.ml.GRLRModel` (its ``assign`` Params give the
            candidates and the held-out share; its embeddings' manifest the GRLR settings).
        dataset: the aggregated :class:`eagle_spark.ml.Dataset` (X, Y1, Y2) being assigned.
        scratch: a folder to write into (not existing; the caller deletes it).
    Returns:
        (the chosen candidate's ``assign`` settings, the record: held_out, proxy, candidates (name
        -> group P@1/3/5 in percent, the score), chosen).
    Raises:
        BadInputError (a ValueError): as the stages it runs (e.g. no groups held out).
    Source: this project (choosing from group labels alone), beyond the paper.
    """
    from eagle_spark.assignment.assign import assign
    from eagle_spark.errors import BadInputError
    from eagle_spark.evaluation.group import multiset_precision
    from eagle_spark.io.tables import read_table
    from eagle_spark.ml.classifiers import LabelTreeClassifier

    params = model.settings(AssignSettings)
    spark = dataset.spark
    dataset = type(dataset).load(
        spark, dataset.path
    )  # a Dataset.at handle has not read its manifest
    n_groups = int(dataset.n_groups or 0)
    share = min(params.held_out, MAX_HELD_GROUPS / n_groups) if n_groups else params.held_out
    fallback = FALLBACK
    if n_groups * share < MIN_HELD_GROUPS:
        log.warning(
            "assign auto: %d groups are too few to hold out %d of them; using %s",
            n_groups,
            MIN_HELD_GROUPS,
            fallback,
        )
        return (
            dataclasses.replace(params, **candidate_changes(fallback)),
            {
                "held_out": share,
                "skipped": f"{n_groups} groups: fewer than {MIN_HELD_GROUPS} would be held out",
                "candidates": {},
                "chosen": fallback,
            },
        )
    fit = dataset.split_part(
        posixpath.join(scratch, "fit"), share, params.held_out_seed, by="group", labels=False
    )
    held = dataset.split_part(
        posixpath.join(scratch, "held"),
        share,
        params.held_out_seed,
        by="group",
        held=True,
        labels=False,
    )
    if not held.n_groups or not fit.n_groups:
        raise BadInputError(
            f"assign.weighting=auto: holding out {share:g} of the groups of {dataset.path} leaves "
            f"{fit.n_groups or 0} to fit and {held.n_groups or 0} to score; give more groups or "
            "another assign.held_out"
        )
    emb = model._require_data()  # GRLR of all the groups (see the module docstring)
    Y1, Y2 = read_table(spark, held.path, S.Y1), read_table(spark, held.path, S.Y2)
    rows: dict[str, Any] = {}
    done: dict[AssignSettings, str] = {}  # a candidate's settings -> its assigned folder
    for i, name in enumerate(params.candidates):
        chosen = dataclasses.replace(params, **candidate_changes(name))
        assigned = posixpath.join(scratch, f"assigned-{i}")
        unrefined = done.get(dataclasses.replace(chosen, refine_rounds=0))
        assign(
            spark,
            fit.path,
            assigned,
            chosen,
            embeddings=emb if chosen.method == "eagle" else None,
            # a refined candidate whose unrefined settings were scored starts from their output
            first_round=unrefined if chosen.refine_rounds > 0 else None,
            diagnostics=False,
        )
        done[chosen] = assigned
        proxy = LabelTreeClassifier.fromSettings(PROXY).fitDataset(
            type(dataset).load(spark, assigned), posixpath.join(scratch, f"model-{i}")
        )
        preds = posixpath.join(scratch, f"predictions-{i}")
        proxy.transformDataset(held, preds)
        found = multiset_precision(
            spark.read.parquet(posixpath.join(preds, "predictions")), Y1, Y2, max(K)
        )
        rows[name] = {f"{CRITERION} P@{k}": round(100 * found[k - 1], 2) for k in K}
        rows[name]["score"] = round(selection_score(rows[name]), 3)
        log.info("assign auto: candidate %s: score %.2f", name, rows[name]["score"])
    best = max(params.candidates, key=lambda c: (rows[c]["score"], -params.candidates.index(c)))
    return (
        dataclasses.replace(params, **candidate_changes(best)),
        {
            "held_out": share,
            "seed": params.held_out_seed,
            "proxy": "label tree, 1 tree, default settings",
            "held_out_groups": held.n_groups,
            "candidates": rows,
            "chosen": best,
        },
    )


__all__ = ["CRITERION", "PROXY", "choose_assignment", "precision_row", "selection_score"]
