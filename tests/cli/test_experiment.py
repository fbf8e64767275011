"""``eagle-spark experiment``: Table 2 with the Oracle, a Figure 3 ablation and the Figure 2
regression from the command line, on a 400-sample slice of the embedded delicious data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eagle_spark.cli import main
from tests.conftest import delicious_slice

FAST = [
    "--set",
    "ova.tasks=2",
    "--set",
    "embed.tasks=2",
    "--set",
    "assign.tasks=2",
    "--set",
    "spark.master=local[2]",
]


@pytest.fixture(scope="module")
def slice_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("experiment_data")
    return {split: delicious_slice(root, split, n) for split, n in (("train", 400), ("test", 150))}


def _run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _precision_at(preds: dict, truth: dict, k: int) -> float:
    """P@k written out: hits among the first k predictions over k, averaged over the samples."""
    total = 0.0
    for sid, labels in truth.items():
        total += len(set(preds.get(sid, [])[:k]) & set(labels)) / k
    return total / len(truth)


@pytest.mark.slow
def test_table2_then_ablation_in_one_folder(spark, slice_files, tmp_path, capsys):
    out = tmp_path / "exp"
    args = [
        "experiment",
        "table2",
        "--train",
        slice_files["train"],
        "--test",
        slice_files["test"],
        "--groupings",
        "R-2",
        "C-2",
        "--validation",
        "0.25",
        "--output",
        str(out),
        *FAST,
    ]
    code, stdout, err = _run(capsys, *args)
    assert code == 0, err
    line = json.loads(stdout)
    table = json.loads((out / "table2.json").read_text())
    assert line["groupings"] == table["groupings"] and set(table["groupings"]) == {"R-2", "C-2"}
    assert table["evaluated_on"] == "validation split of train"

    # the validation split: a partition of the 400 training samples, the Oracle evaluated on it
    fit = json.loads((out / "data" / "fit" / "_manifest.json").read_text())["n_samples"]
    val = json.loads((out / "data" / "validation" / "_manifest.json").read_text())["n_samples"]
    assert fit + val == 400 and 50 <= val <= 150

    # the Oracle's P@k is the one its predictions give against the validation labels
    preds = {
        r.sample_id: list(r.label_ids)
        for r in spark.read.parquet(str(out / "predictions" / "oracle" / "predictions")).collect()
    }
    truth = {
        r.sample_id: list(r.label_ids)
        for r in spark.read.parquet(str(out / "data" / "validation" / "Y")).collect()
    }
    assert len(preds) == val
    for k in (1, 3, 5):
        assert table["oracle"]["P_percent"][k - 1] == pytest.approx(
            100 * _precision_at(preds, truth, k), abs=0.006
        )

    # every grouping's numbers are its pipeline run's
    for name in ("R-2", "C-2"):
        comparison = json.loads((out / "groupings" / name / "comparison.json").read_text())
        for method, row in comparison["methods"].items():
            assert table["groupings"][name][method]["P_percent"] == row["P_percent"]
    md = (out / "table2.md").read_text().splitlines()
    assert md[0] == "| grouping | metric | Oracle | Baseline | EAGLE-0 | EAGLE (paper) | EAGLE |"
    assert md[2].startswith(f"| R-2 | P@1 | {table['oracle']['P_percent'][0]:.2f} |")

    # resumable: the same command again reruns nothing
    oracle_meta = (out / "models" / "oracle" / "metadata.json").stat().st_mtime_ns
    code, _, err = _run(capsys, *args)
    assert code == 0, err
    assert (out / "models" / "oracle" / "metadata.json").stat().st_mtime_ns == oracle_meta
    report = json.loads((out / "groupings" / "R-2" / "report.json").read_text())
    assert {r["status"] for r in report["stages"]} == {"skipped"}

    # Figure 3 in the same folder: R-2 is reused, R-3 is new; decrements follow from the P@k
    code, stdout, err = _run(
        capsys,
        "experiment",
        "ablation",
        "--axis",
        "group-size",
        "--values",
        "2",
        "3",
        "--train",
        slice_files["train"],
        "--test",
        slice_files["test"],
        "--validation",
        "0.25",
        "--output",
        str(out),
        *FAST,
    )
    assert code == 0, err
    ablation = json.loads((out / "ablation_group-size.json").read_text())
    assert ablation["groupings"] == ["R-2", "R-3"]
    oracle = ablation["oracle_P_percent"]
    for i, name in enumerate(ablation["groupings"]):
        for method in ("baseline", "eagle0", "eagle_paper", "eagle"):
            p = ablation["result"]["groupings"][name][method]["P_percent"]
            for k in (1, 3, 5):
                want = 100 * (oracle[k - 1] - p[k - 1]) / oracle[k - 1]
                assert ablation["decrement_percent"][method][f"P@{k}"][i] == pytest.approx(
                    want, abs=0.006
                )
    assert ablation["result"]["groupings"]["R-2"] == table["groupings"]["R-2"]
    import matplotlib.image

    image = matplotlib.image.imread(out / "ablation_group-size.png")
    assert image.shape[0] > 300 and image.shape[1] > 900  # three panels side by side
    report_md = (out / "report.md").read_text()
    assert "## Table 2" in report_md and "## Figure 3: ablation over group-size" in report_md
    assert "![group-size](ablation_group-size.png)" in report_md


def test_experiment_bad_usage(slice_files, tmp_path, capsys):
    code, _, err = _run(capsys, "experiment", "ablation", "--output", str(tmp_path / "a"), *FAST)
    assert code == 2 and "needs --axis and --values" in err
    code, _, err = _run(
        capsys,
        "experiment",
        "table2",
        "--groupings",
        "R-0",
        "--train",
        slice_files["train"],
        "--test",
        slice_files["test"],
        "--output",
        str(tmp_path / "b"),
        *FAST,
    )
    assert code == 2 and "grouping 'R-0'" in err
    assert not (tmp_path / "b").exists()
    code, _, err = _run(
        capsys,
        "experiment",
        "table2",
        "--validation",
        "0.95",
        "--train",
        slice_files["train"],
        "--test",
        slice_files["test"],
        "--output",
        str(tmp_path / "c"),
        *FAST,
    )
    assert code == 2 and "validation must be in [0, 0.9]" in err


def test_experiment_regression_needs_no_spark(tmp_path, capsys):
    code, stdout, err = _run(
        capsys,
        "experiment",
        "regression",
        "--values",
        "0",
        "10",
        "--seeds",
        "3",
        "--output",
        str(tmp_path / "r"),
    )
    assert code == 0, err
    assert "no Spark session" in err
    rows = json.loads(stdout)["rows"]
    assert [r["sigma2"] for r in rows] == [0.0, 10.0]
    assert rows[1]["assignment_rel_rms"] < rows[1]["baseline_rel_rms"]
    assert (tmp_path / "r" / "regression.png").stat().st_size > 10_000
    data = json.loads((tmp_path / "r" / "regression.json").read_text())
    assert np.isclose(data["rows"][0]["baseline_rel_rms"], 1.0)


def test_select_scores_candidates_on_held_out_groups(spark, slice_files, tmp_path, capsys):
    """``experiment select``: the groups of R-4 split into fit / held-out parts (a partition of the
    groups), every candidate's group-level P@k equal to the one its predictions give against the
    held-out Y2 (written out here), the choice the best mean of group P@1/3/5, and the sample-level
    agreement recorded."""
    out = tmp_path / "sel"
    code, stdout, err = _run(
        capsys,
        "experiment",
        "select",
        "--train",
        slice_files["train"],
        "--groupings",
        "R-4",
        "--candidates",
        "baseline",
        "hard",
        "soft-0.3",
        "soft-0.3@t0",
        "--held-out",
        "0.3",
        "--output",
        str(out),
        "--set",
        "tree.n_trees=1",
        "--set",
        "tree.tasks=2",
        *FAST,
    )
    assert code == 0, err
    line = json.loads(stdout)
    result = json.loads((out / "select.json").read_text())
    g = result["groupings"]["R-4"]
    assert set(g["candidates"]) == {"baseline", "hard", "soft-0.3", "soft-0.3@t0"}
    assert line["chosen"] == {"R-4": g["chosen"]}
    runs = out / "groupings" / "R-4" / "runs"
    for cand, T in (("soft-0.3", 20), ("soft-0.3@t0", 0)):  # @t0: the pipeline's GRLR at T = 0
        emb = json.loads((runs / cand / "embeddings" / "eagle" / "_manifest.json").read_text())
        assert emb["parameters"]["iterations"] == T
    root = out / "groupings" / "R-4" / "data"
    n = {
        p: json.loads((root / p / "_manifest.json").read_text())
        for p in ("aggregated", "fit", "held")
    }
    assert n["fit"]["n_groups"] + n["held"]["n_groups"] == n["aggregated"]["n_groups"] == 100
    assert (
        n["fit"]["n_samples"] + n["held"]["n_samples"] == 400 and 15 <= n["held"]["n_groups"] <= 45
    )
    # group P@k of the last candidate written out: members' best scores per label, top k against Y2
    preds = spark.read.parquet(
        str(
            out
            / "groupings"
            / "R-4"
            / "runs"
            / "soft-0.3"
            / "predictions"
            / "eagle"
            / "predictions"
        )
    ).collect()
    group_of = {
        r.sample_id: r.group_id for r in spark.read.parquet(str(root / "held" / "Y1")).collect()
    }
    labels: dict = {}
    for r in spark.read.parquet(str(root / "held" / "Y2")).collect():
        labels.setdefault(r.group_id, set()).add(r.label_id)
    best: dict = {}
    for r in preds:
        for k, s in zip(r.label_ids, r.scores):
            key = (group_of[r.sample_id], k)
            best[key] = max(best.get(key, -np.inf), s)
    for k in (1, 3, 5):
        total = 0.0
        for grp, true in labels.items():
            ranked = sorted(
                (lab for (gg, lab) in best if gg == grp), key=lambda lab: (-best[(grp, lab)], lab)
            )
            total += len(set(ranked[:k]) & true) / k
        assert g["candidates"]["soft-0.3"][f"max P@{k}"] == pytest.approx(
            100 * total / len(labels), abs=0.006
        )
    means = {
        c: np.mean([row[f"{result['criterion']} P@{k}"] for k in (1, 3, 5)])
        for c, row in g["candidates"].items()
    }
    assert means[g["chosen"]] == max(means.values())
    p5 = {c: row["sample P@5"] for c, row in g["candidates"].items()}
    assert g["sample_best"] in p5 and p5[g["sample_best"]] == max(p5.values())
    assert g["agrees"] == (p5[g["chosen"]] >= max(p5.values()) - 0.5)
    assert (out / "select.md").exists() and "(chosen)" in (out / "select.md").read_text()
