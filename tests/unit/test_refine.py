"""Refinement with the classifier (``assign.refine_rounds``): a tiny planted data set where the
label embedding assigns wrongly and the classifier trained on that assignment assigns rightly."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

INTS = pa.list_(pa.field("element", pa.int32(), nullable=False))
FLOATS = pa.list_(pa.field("element", pa.float32(), nullable=False))

# Three kinds of member rows over 3 features (unit length, as normalised):
A = [1.0, 0.0, 0.0]  # truly label 0
B_EASY = [0.0, 2 / math.sqrt(5), 1 / math.sqrt(5)]  # truly label 1
B_HARD = [0.0, 1 / math.sqrt(10), 3 / math.sqrt(10)]  # truly label 1; so are the decoys
EMB = {0: [1.0, 0.0, 1.2], 1: [0.0, 1.0, 0.0]}  # e_0 leans on feature 2: wrong on B_HARD
N_EASY, N_HARD, N_DECOY = 20, 4, 20


def _planted() -> tuple[dict[str, pa.Table], dict[int, list[int]]]:
    """Groups 0..19 {A, B_EASY} and 20..23 {A, B_HARD} labelled {0, 1}; groups 24..43 of two
    decoys (B_HARD rows) labelled {1}. Sample 2g and 2g + 1 are group g's members."""
    rows, truth, y1, y2 = [], {}, [], []
    for g in range(N_EASY + N_HARD + N_DECOY):
        decoy = g >= N_EASY + N_HARD
        members = [B_HARD, B_HARD] if decoy else [A, B_EASY if g < N_EASY else B_HARD]
        for j, x in enumerate(members):
            sid = 2 * g + j
            rows.append(x)
            truth[sid] = [1] if decoy or j == 1 else [0]
            y1.append((sid, g))
        y2 += [(g, 1)] if decoy else [(g, 0), (g, 1)]
    ids = list(range(len(rows)))
    idx = [[i for i, v in enumerate(r) if v] for r in rows]
    val = [[v for v in r if v] for r in rows]
    tables = {
        "X": pa.table(
            {
                "sample_id": pa.array(ids, pa.int64()),
                "feat_idx": pa.array(idx, INTS),
                "feat_val": pa.array(val, FLOATS),
            }
        ),
        "Y": pa.table(
            {
                "sample_id": pa.array(ids, pa.int64()),
                "label_ids": pa.array([truth[i] for i in ids], INTS),
            }
        ),
        "Y1": pa.table(
            {
                "sample_id": pa.array([s for s, _ in y1], pa.int64()),
                "group_id": pa.array([g for _, g in y1], pa.int64()),
            }
        ),
        "Y2": pa.table(
            {
                "group_id": pa.array([g for g, _ in y2], pa.int64()),
                "label_id": pa.array([k for _, k in y2], pa.int32()),
                "count": pa.array([1] * len(y2), pa.int32()),
            }
        ),
    }
    return tables, truth


def _write(folder: pathlib.Path, tables: dict[str, pa.Table], manifest: dict) -> str:
    for name, table in tables.items():
        (folder / name).mkdir(parents=True)
        pq.write_table(table, folder / name / "part-0.parquet")
    (folder / "_manifest.json").write_text(json.dumps({"format_version": 1, **manifest}))
    return str(folder)


def _folders(
    tmp_path: pathlib.Path,
    planted: Optional[tuple[dict[str, pa.Table], dict[int, list[int]]]] = None,
) -> tuple[str, str, dict[int, list[int]]]:
    """(the planted aggregated dataset, embeddings holding EMB, the true labels); `planted`:
    other tables and truth (:func:`_planted`'s by default), with EMB[2] = A's feature when they
    have a label 2."""
    tables, truth = planted or _planted()
    n_groups = N_EASY + N_HARD + N_DECOY
    n_labels = max(max(v) for v in truth.values()) + 1
    dataset = _write(
        tmp_path / "agg",
        tables,
        {
            "kind": "aggregate",
            "n_samples": len(truth),
            "n_features": 3,
            "n_labels": n_labels,
            "n_groups": n_groups,
        },
    )
    emb = _write(
        tmp_path / "emb",
        {
            "label_emb": pa.table(
                {
                    "label_id": pa.array([0, 1, 2][:n_labels], pa.int32()),
                    "emb_idx": pa.array([[0, 2], [1], [0]][:n_labels], INTS),
                    "emb_val": pa.array([[1.0, 1.2], [1.0], [1.0]][:n_labels], FLOATS),
                    "n_groups": pa.array([N_EASY + N_HARD, n_groups, 1][:n_labels], pa.int32()),
                }
            )
        },
        {
            "kind": "embed",
            "n_labels": n_labels,
            "n_features": 3,
            "parameters": {"normalize": True, "iterations": 1, "prune_below": 0.0},
        },
    )
    return dataset, emb, truth


def _hand_worked_round_0(truth: dict[int, list[int]]) -> float:
    """Algorithm 2 with EMB by hand (numpy): the precision of its (sample, label) pairs."""
    tables, _ = _planted()
    X = np.zeros((len(truth), 3))
    for sid, (idx, val) in enumerate(
        zip(tables["X"]["feat_idx"].to_pylist(), tables["X"]["feat_val"].to_pylist())
    ):
        X[sid, idx] = val
    right = total = 0
    for g, k in zip(tables["Y2"]["group_id"].to_pylist(), tables["Y2"]["label_id"].to_pylist()):
        members = [2 * g, 2 * g + 1]
        scores = X[members] @ np.array(EMB[k])
        best = members[int(np.argmax(scores))]  # ties: the first (smaller sample_id)
        total += 1
        right += k in truth[best]
    return right / total


def test_second_round_corrects_what_the_embedding_got_wrong(spark, tmp_path):
    from eagle_spark.assignment.assign import assign
    from eagle_spark.io.tables import read_table
    from eagle_spark.settings import AssignSettings

    dataset, emb, truth = _folders(tmp_path)

    round_0 = _hand_worked_round_0(truth)
    assert round_0 == pytest.approx(64 / 68)  # the 4 hard groups' label 0 goes to B_HARD

    plain = assign(
        spark,
        dataset,
        str(tmp_path / "r0"),
        AssignSettings(weighting="hard", tasks=2),
        embeddings=emb,
    )
    assert plain["quality"]["precision"] == pytest.approx(round_0)
    assert "refinement" not in plain or plain["refinement"] is None

    manifest = assign(
        spark,
        dataset,
        str(tmp_path / "r1"),
        AssignSettings(weighting="hard", refine_rounds=1, tasks=2),
        embeddings=emb,
    )
    rounds = manifest["refinement"]
    assert [r["round"] for r in rounds] == [0, 1]
    assert [r["scorer"] for r in rounds] == ["embedding", "classifier"]
    assert rounds[0]["precision"] == pytest.approx(round_0)
    assert rounds[1]["precision"] == pytest.approx(1.0)
    assert rounds[1]["changed"] == pytest.approx(4 / 68, abs=1e-6)  # the 4 corrected pairs are new
    assert manifest["quality"]["precision"] == pytest.approx(1.0)
    got = read_table(spark, str(tmp_path / "r1"), "assignments").where("label_id = 0").collect()
    assert sorted(r.sample_id for r in got) == [2 * g for g in range(N_EASY + N_HARD)]  # every A
    assert manifest["parameters"]["refine_rounds"] == 1
    assert not any(p.name.startswith("_refine") for p in (tmp_path / "r1").iterdir())

    # the same through the Python API: GRLRModel's refineRounds Param
    from eagle_spark.ml import Dataset, GRLRModel

    model = GRLRModel.fromSettings(AssignSettings(weighting="hard", tasks=2)).atFolder(emb)
    model.set(model.refineRounds, 1)
    out = model.transformDataset(Dataset.at(spark, dataset), str(tmp_path / "api"))
    assert [r["precision"] for r in out.manifest["refinement"]] == pytest.approx([round_0, 1.0])


def test_refine_rounds_setting_is_checked():
    from eagle_spark.errors import SettingsError
    from eagle_spark.settings import AssignSettings, candidate_changes

    with pytest.raises(SettingsError, match="refine_rounds"):
        AssignSettings(refine_rounds=-1)
    assert candidate_changes("hard+r2") == {
        "method": "eagle",
        "weighting": "hard",
        "posterior": False,
        "refine_rounds": 2,
        "refine_folds": 0,
    }
    assert candidate_changes("soft-0.3+r1") == {
        "method": "eagle",
        "weighting": "soft",
        "posterior": False,
        "temperature": 0.3,
        "refine_rounds": 1,
        "refine_folds": 0,
    }
    assert candidate_changes("soft-0.3+r2x3") == {
        "method": "eagle",
        "weighting": "soft",
        "posterior": False,
        "temperature": 0.3,
        "refine_rounds": 2,
        "refine_folds": 3,
    }
    with pytest.raises(SettingsError):
        candidate_changes("baseline+r1")
    with pytest.raises(SettingsError, match="at least 2 folds"):
        candidate_changes("hard+r1x1")
    with pytest.raises(SettingsError, match="refine_folds must be 0"):
        AssignSettings(refine_folds=1)
    with pytest.raises(SettingsError, match="refine_tolerance"):
        AssignSettings(refine_tolerance=1.0)
    refined = AssignSettings(refine_rounds=2, refine_folds=3, refine_tolerance=0.1)
    assert refined.unrefined() == AssignSettings()


def test_soft_refinement_records_the_weights_change(spark, tmp_path):
    """Soft weighting with a round of refinement: the classifier's scores give new weights (the
    pairs stay), and the round says by how much they moved."""
    from eagle_spark.assignment.assign import assign
    from eagle_spark.settings import AssignSettings

    dataset, emb, _ = _folders(tmp_path)
    manifest = assign(
        spark,
        dataset,
        str(tmp_path / "soft"),
        AssignSettings(weighting="soft", temperature=0.3, refine_rounds=1, tasks=2),
        embeddings=emb,
    )
    first, second = manifest["refinement"]
    assert second["weight_change"] > 0
    # the weighted precision rises: the hard groups' label 0 moves its weight from B_HARD to A
    assert second["precision"] > first["precision"]


def test_first_round_from_an_earlier_output(spark, tmp_path):
    """assign_with(first_round=...) starts the rounds from an earlier unrefined output (what auto's
    refined candidate does): the same assignments as computing round 0 again; an output of other
    settings is refused by name."""
    from eagle_spark.assignment.assign import assign
    from eagle_spark.assignment.output import assign_with
    from eagle_spark.errors import BadInputError
    from eagle_spark.io.tables import read_table
    from eagle_spark.settings import AssignSettings

    dataset, emb, _ = _folders(tmp_path)
    hard = AssignSettings(weighting="hard", tasks=2)
    assign(spark, dataset, str(tmp_path / "r0"), hard, embeddings=emb)
    refined = AssignSettings(weighting="hard", refine_rounds=1, tasks=2)
    again = assign(spark, dataset, str(tmp_path / "again"), refined, embeddings=emb)
    reused = assign_with(
        spark,
        dataset,
        str(tmp_path / "reused"),
        refined,
        embeddings=emb,
        first_round=str(tmp_path / "r0"),
    )

    def pairs(name):
        return sorted(
            (r.group_id, r.label_id, r.sample_id)
            for r in read_table(spark, str(tmp_path / name), "assignments").collect()
        )

    assert pairs("reused") == pairs("again")
    assert [r["precision"] for r in reused["refinement"]] == [
        r["precision"] for r in again["refinement"]
    ]
    assert reused["quality"]["precision"] == pytest.approx(1.0)
    soft = AssignSettings(weighting="soft", refine_rounds=1, tasks=2)
    with pytest.raises(BadInputError, match="cannot be the first round"):
        assign_with(
            spark,
            dataset,
            str(tmp_path / "bad"),
            soft,
            embeddings=emb,
            first_round=str(tmp_path / "r0"),
        )
    assert not (tmp_path / "bad").exists()


def test_refinement_draws_negatives_only_beyond_its_budget():
    """Within 5e7 labels x samples (bibtex, delicious) every sample not assigned a label is its
    negative; beyond it the share drawn is budget / (labels x samples)."""
    from eagle_spark.assignment.refine import NEGATIVE_BUDGET, negative_fraction

    assert NEGATIVE_BUDGET == 50_000_000
    assert negative_fraction(983, 12_920) == 1.0  # delicious: 1.3e7
    assert negative_fraction(159, 4_880) == 1.0  # bibtex
    assert negative_fraction(10_000, 5_000) == 1.0  # exactly the budget
    assert negative_fraction(30_938, 14_146) == pytest.approx(
        5e7 / (30_938 * 14_146)
    )  # Wiki10-31K: 0.114
    assert negative_fraction(32_506, 177_835) == pytest.approx(
        0.00865, rel=1e-3
    )  # synth wiki325k 0.1


def test_a_cross_fitted_round_shares_the_negative_budget_between_its_folds():
    """k fold scorers get budget / k each: within it (delicious' folds: 983 x 8,613 = 8.5e6 <=
    1.67e7) every negative stays; beyond it a fold draws a k-th of what the whole budget would, so
    the round's drawn negatives are about one in-sample scorer's (wiki325k 0.1: 32,506 labels x
    118,557 samples outside a fold draw 0.00432, not 0.01297)."""
    from eagle_spark.assignment.refine import negative_fraction

    assert negative_fraction(983, 8_613, folds=3) == 1.0
    assert negative_fraction(10_000, 5_000, folds=2) == pytest.approx(0.5)  # 2.5e7 of 5e7
    assert negative_fraction(32_506, 118_557, folds=3) == pytest.approx(
        5e7 / 3 / (32_506 * 118_557)
    )
    assert negative_fraction(32_506, 118_557, folds=3) == pytest.approx(0.004325, rel=1e-3)
    # in all: 3 scorers x 0.004325 x 118,557 = 1,538 drawn rows per label, an in-sample
    # scorer's 0.00865 x 177,835 = 1,538
    with pytest.raises(ValueError, match="folds must be >= 1"):
        negative_fraction(10, 10, folds=0)


def test_refine_negatives_draws_a_share_that_follows_the_positives():
    """With ``assign.refine_negatives`` r the drawn negatives are about r per positive pair over
    all labels, whatever the budget: a delicious fold (983 labels x 8,613 samples = 8,466,579
    pairs) with 300,000 positives draws 3,000,000 / 8,466,579 = 0.35433 of its negatives at r = 10,
    every one at r = 30 (9e6 > 8.47e6); wiki325k 0.1's fold with 1.2e6 positives at r = 10 draws
    1.2e7 / 3.854e9 = 0.003114 (the shared budget: 0.004325)."""
    from eagle_spark.assignment.refine import negative_fraction

    assert negative_fraction(983, 8_613, 3, positives=300_000, per_positive=10) == pytest.approx(
        0.35433, rel=1e-4
    )
    assert negative_fraction(983, 8_613, 3, positives=300_000, per_positive=30) == 1.0
    assert negative_fraction(32_506, 118_557, 3, 1_200_000, 10.0) == pytest.approx(
        0.003114, rel=1e-3
    )
    assert negative_fraction(983, 8_613, 3, positives=0, per_positive=10) == 1.0  # nothing drawn
    with pytest.raises(ValueError, match="must be >= 0"):
        negative_fraction(10, 10, per_positive=-1.0, positives=5)


def test_beyond_the_budget_the_scorer_draws_negatives_and_prunes(spark, tmp_path, monkeypatch):
    """With the budget below labels x samples the scorer's one-vs-all draws its negatives (keeping
    the labels' group members) and prunes its weights as the one-vs-all model's; on the planted
    data round 1 still corrects round 0."""
    from eagle_spark.assignment import refine
    from eagle_spark.assignment.assign import assign
    from eagle_spark.settings import AssignSettings, OVASettings

    dataset, emb, _ = _folders(tmp_path)
    n = 2 * (N_EASY + N_HARD + N_DECOY)
    monkeypatch.setattr(refine, "NEGATIVE_BUDGET", 40)
    assert refine.negative_fraction(2, n) == pytest.approx(40 / (2 * n))
    r0 = str(tmp_path / "r0")
    assign(spark, dataset, r0, AssignSettings(weighting="hard", tasks=2), embeddings=emb)
    scorer = refine.classifier_scorer(spark, r0, dataset, str(tmp_path / "scorer"), 3, 2, tasks=2)
    meta = json.loads((tmp_path / "scorer" / "model" / "metadata.json").read_text())
    assert meta["params"]["threshold"] == OVASettings().threshold
    assert meta["params"]["negative_fraction"] == pytest.approx(40 / (2 * n))
    assert meta["within_groups"] == dataset
    assert scorer == str(tmp_path / "scorer" / "scorer")
    manifest = assign(
        spark,
        dataset,
        str(tmp_path / "r1"),
        AssignSettings(weighting="hard", refine_rounds=1, tasks=2),
        embeddings=emb,
    )
    assert [r["precision"] for r in manifest["refinement"]] == pytest.approx([64 / 68, 1.0])


def test_round_figures_by_hand(spark, tmp_path):
    """round_records' one aggregation against figures worked by hand: assignment rows (a pair
    assigned in two groups counts twice), distinct pairs with their largest weight, the new pairs,
    the weights' change over the pairs of either round, and weighted precision / recall."""
    from eagle_spark.assignment.refine import round_records

    def write(rows, r, weighted=True):
        schema = "group_id long, label_id int, sample_id long, score float" + (
            ", weight float" if weighted else ""
        )
        spark.createDataFrame(rows, schema).write.parquet(str(tmp_path / f"assign_{r}"))

    # round 0: (10, 1) in groups 0 and 1 (weights 1 and 0.25), (11, 1) 0.5, (11, 2) 1
    write(
        [(0, 1, 10, 0.9, 1.0), (0, 1, 11, 0.1, 0.5), (1, 1, 10, 0.2, 0.25), (0, 2, 11, 0.3, 1.0)], 0
    )
    # round 1: (10, 1) 1, (11, 1) 0.2, (12, 2) 1 (new)
    write([(0, 1, 10, 0.9, 1.0), (0, 1, 11, 0.1, 0.2), (0, 2, 12, 0.8, 1.0)], 1)
    truth = spark.createDataFrame([(10, 1), (12, 2), (13, 3)], "sample_id long, label_id int")
    records, last = round_records(spark, str(tmp_path), 1, truth)
    assert records[0] == {
        "round": 0,
        "scorer": "embedding",
        "n_assignments": 4,
        "precision": pytest.approx(1.0 / 2.5),  # (10, 1) of weights 1 + 0.5 + 1
        "recall": pytest.approx(1 / 3),
    }
    assert records[1] == {
        "round": 1,
        "scorer": "classifier",
        "n_assignments": 3,
        "changed": round(1 / 3, 6),
        # pairs of either round: (10,1) 0, (11,1) |0.2-0.5|, (11,2) 1, (12,2) 1
        "weight_change": round(2.3 / 4, 6),
        "precision": pytest.approx(2 / 2.2),
        "recall": pytest.approx(2 / 3),
    }
    assert last == {
        "precision": pytest.approx(2 / 2.2),
        "recall": pytest.approx(2 / 3),
        "assigned_pairs": 3,
        "true_pairs": 3,
        "correct_pairs": 2,
        "assigned_weight": pytest.approx(2.2),
        "correct_weight": pytest.approx(2.0),
    }
    # hard rounds (no weights), no truth: counts and changes only
    hard = tmp_path / "hard"
    hard.mkdir()
    tmp_path = hard
    write([(0, 1, 10, 0.9), (1, 1, 10, 0.2), (0, 2, 11, 0.3)], 0, weighted=False)
    write([(0, 1, 11, 0.9), (0, 2, 11, 0.3)], 1, weighted=False)
    records, last = round_records(spark, str(hard), 1)
    assert last is None
    assert records == [
        {"round": 0, "scorer": "embedding", "n_assignments": 3},
        {"round": 1, "scorer": "classifier", "n_assignments": 2, "changed": 0.5},
    ]


def _with_private_label(tmp_path: pathlib.Path) -> tuple[str, str, dict[int, list[int]]]:
    """The planted data with label 2 held by group 0 alone (truly its member A, sample 0), and
    an embedding for it that scores A first."""
    tables, truth = _planted()
    truth[0] = [0, 2]
    tables["Y"] = tables["Y"].set_column(
        1, "label_ids", pa.array([truth[i] for i in range(len(truth))], INTS)
    )
    extra = pa.table(
        {
            "group_id": pa.array([0], pa.int64()),
            "label_id": pa.array([2], pa.int32()),
            "count": pa.array([1], pa.int32()),
        }
    )
    tables["Y2"] = pa.concat_tables([tables["Y2"], extra])
    return _folders(tmp_path, (tables, truth))


def _cross_fitted_in_two_folds(spark, tmp_path, **settings):
    """Hard assignment of :func:`_with_private_label`'s data with one refinement round
    cross-fitted in 2 folds (and the ``assign`` `settings`), to ``tmp_path/x1``; returns (its
    manifest, the rounds' scratch folder, kept)."""
    from eagle_spark.assignment.output import assign_with
    from eagle_spark.settings import AssignSettings

    dataset, emb, _ = _with_private_label(tmp_path)
    rounds = tmp_path / "rounds"
    manifest = assign_with(
        spark,
        dataset,
        str(tmp_path / "x1"),
        AssignSettings(weighting="hard", refine_rounds=1, refine_folds=2, tasks=2, **settings),
        embeddings=emb,
        rounds_scratch=str(rounds),
    )
    return manifest, rounds


def test_cross_fitted_round_never_lets_a_group_see_its_own_labels(spark, tmp_path):
    """refine_folds 2 on the planted data: each fold's training set is exactly the samples of the
    other fold's groups (X) with their round-0 labels that the fold's own groups hold (Y; a
    plain-Python twin built from the folds and Y2 read back), so the scorer of group 0's fold never
    saw a positive of label 2, which only group 0 holds, and (0, 2) keeps its round-0 member; the
    round still corrects the 4 hard groups."""
    manifest, rounds = _cross_fitted_in_two_folds(spark, tmp_path)
    first, second = manifest["refinement"]
    assert second["folds"] == 2 and "folds" not in first
    assert first["precision"] == pytest.approx(65 / 69)  # round 0: 4 hard groups' label 0 wrong
    assert second["precision"] == pytest.approx(1.0)
    assert second["changed"] == pytest.approx(4 / 69, abs=1e-6)

    fold_of = {r["group_id"]: r["_fold"] for r in pq.read_table(rounds / "folds").to_pylist()}
    assert set(fold_of) == set(range(N_EASY + N_HARD + N_DECOY))
    assert set(fold_of.values()) == {0, 1}
    round_0 = pq.read_table(rounds / "assign_0").to_pylist()
    Y2 = pq.read_table(tmp_path / "agg" / "Y2").to_pylist()
    pruned = 0
    for f in (0, 1):
        train = rounds / "cross_1" / f"train_{f}"
        held = {r["label_id"] for r in Y2 if fold_of[r["group_id"]] == f}
        others = [s for g, fold in fold_of.items() if fold != f for s in (2 * g, 2 * g + 1)]
        want = {}  # the twin: members of the other fold's groups, their round-0 labels f holds
        for sid in others:
            labels = {r["label_id"] for r in round_0 if r["sample_id"] == sid}
            pruned += len(labels - held)
            if labels & held:
                want[sid] = sorted(labels & held)
        got = {
            r["sample_id"]: sorted(r["label_ids"])
            for r in pq.read_table(train / "Y").to_pylist()
            if r["label_ids"]
        }
        assert got == want
        x_ids = sorted(pq.read_table(train / "X").column("sample_id").to_pylist())
        assert x_ids == sorted(others)
        taught = {k for labels in got.values() for k in labels}
        assert 2 not in taught  # only group 0 holds label 2: no fold both holds and learns it
    assert pruned > 0  # some fold's scorer left a label out
    final = pq.read_table(tmp_path / "x1" / "assignments").to_pylist()
    assert [r["sample_id"] for r in final if r["label_id"] == 2] == [0]


def test_cross_fitted_scorers_each_draw_their_share_of_the_budget(spark, tmp_path, monkeypatch):
    """With the budget (40 labels x samples) below the work, each of the 2 fold scorers of a
    cross-fitted round trains with budget / 2 / (labels x its training rows), read from its
    training set's manifest (the data's labels, whichever it fits): at most one in-sample
    scorer's drawn negatives in all."""
    from eagle_spark.assignment import refine

    monkeypatch.setattr(refine, "NEGATIVE_BUDGET", 40)
    _, rounds = _cross_fitted_in_two_folds(spark, tmp_path)
    for f in (0, 1):
        train = json.loads((rounds / "cross_1" / f"train_{f}" / "_manifest.json").read_text())
        meta = json.loads(
            (rounds / "cross_1" / f"classifier_{f}" / "model" / "metadata.json").read_text()
        )
        work = train["n_labels"] * train["n_samples"]
        assert work > 20
        assert meta["params"]["negative_fraction"] == pytest.approx(40 / 2 / work)


def test_refine_negatives_reaches_each_fold_scorer(spark, tmp_path):
    """``assign.refine_negatives`` 0.5 on a cross-fitted round: each fold scorer trains with 0.5 x
    the positive pairs of its samples' round-0 assignment (all labels, counted here from the
    rounds' files, not from the fold's Y, which keeps only the labels the fold's groups hold) /
    (labels x its samples), whatever the budget (which these tiny folds are far within)."""
    manifest, rounds = _cross_fitted_in_two_folds(spark, tmp_path, refine_negatives=0.5)
    assert manifest["refinement"][1]["folds"] == 2
    fold_of = {r["group_id"]: r["_fold"] for r in pq.read_table(rounds / "folds").to_pylist()}
    round_0 = pq.read_table(rounds / "assign_0").to_pylist()
    smaller = []
    for f in (0, 1):
        train = rounds / "cross_1" / f"train_{f}"
        outside = {g for g, fold in fold_of.items() if fold != f}  # samples 2g, 2g + 1
        positives = len(
            {(r["sample_id"], r["label_id"]) for r in round_0 if r["sample_id"] // 2 in outside}
        )
        sizes = json.loads((train / "_manifest.json").read_text())
        meta = json.loads(
            (rounds / "cross_1" / f"classifier_{f}" / "model" / "metadata.json").read_text()
        )
        want = 0.5 * positives / (sizes["n_labels"] * sizes["n_samples"])
        fitted = sum(len(r["label_ids"]) for r in pq.read_table(train / "Y").to_pylist())
        smaller.append(fitted < positives)
        assert 0 < want < 1
        assert meta["params"]["negative_fraction"] == pytest.approx(want)
    assert any(smaller)  # a fold's Y left labels out: counting it would give another share


def test_rounds_stop_at_the_tolerance(spark, tmp_path):
    """Hard refinement of the planted data changes 4 / 68 pairs in round 1 and none in round 2:
    with 3 rounds asked and tolerance 0 the rounds stop after round 2, with tolerance 0.1 after
    round 1 (4 / 68 = 0.059 <= 0.1); the last record says why and the output is that round's."""
    from eagle_spark.assignment.assign import assign
    from eagle_spark.settings import AssignSettings

    dataset, emb, _ = _folders(tmp_path)
    zero = assign(
        spark,
        dataset,
        str(tmp_path / "t0"),
        AssignSettings(weighting="hard", refine_rounds=3, tasks=2),
        embeddings=emb,
    )
    assert [r["round"] for r in zero["refinement"]] == [0, 1, 2]
    assert zero["refinement"][1]["changed"] == pytest.approx(4 / 68, abs=1e-6)
    assert zero["refinement"][2]["changed"] == 0.0
    assert "stopped" in zero["refinement"][2] and "stopped" not in zero["refinement"][1]
    loose = assign(
        spark,
        dataset,
        str(tmp_path / "t1"),
        AssignSettings(weighting="hard", refine_rounds=3, refine_tolerance=0.1, tasks=2),
        embeddings=emb,
    )
    assert [r["round"] for r in loose["refinement"]] == [0, 1]
    assert "stopped" in loose["refinement"][1]
    assert loose["quality"]["precision"] == pytest.approx(1.0)
