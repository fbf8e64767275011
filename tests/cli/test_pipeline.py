"""The main job end to end on the embedded delicious data: comparison, resume, Delta, report."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from eagle_spark.settings import Settings

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _settings(run: pathlib.Path, *overrides: str) -> Settings:
    return Settings.load(str(ROOT / "conf" / "local.yaml"), [f"pipeline.output={run}", *overrides])


TRAIN_ROWS, TEST_ROWS = 1500, 400
"""The compare run's slice of the embedded delicious files (the README's main command on the whole
files runs in CI's set-up step; the slow suite pins its figures): every stage and step of the main
job, the automatic assignment's choice included (375 groups, 90 of them held out)."""


@pytest.fixture(scope="module")
def compare_run(spark, tmp_path_factory):
    """One --compare run of the default conf (R-4, assign.weighting=auto, the label tree), as the
    README's main command, on the first TRAIN_ROWS / TEST_ROWS samples of the delicious files."""
    from eagle_spark.pipeline import run_pipeline
    from tests.conftest import delicious_slice

    folder = tmp_path_factory.mktemp("pipeline")
    given = [
        f"pipeline.train={delicious_slice(folder, 'train', TRAIN_ROWS)}",
        f"pipeline.test={delicious_slice(folder, 'test', TEST_ROWS)}",
    ]
    result = run_pipeline(
        spark, _settings(folder / "run", *given, "pipeline.methods=[baseline,eagle0,eagle]")
    )
    return folder / "run", given, result


def test_compare_writes_table2_layout_consistent_with_stage_outputs(spark, compare_run):
    from eagle_spark.evaluation.metrics import inv_propensity, metrics_from_lists

    run, _, result = compare_run
    comparison = json.loads((run / "comparison.json").read_text())
    assert comparison == result["comparison"]
    assert comparison["grouping"] == "R-4"
    md = (run / "comparison.md").read_text().splitlines()
    assert md[0] == "| grouping | metric | Baseline | EAGLE-0 | EAGLE |"
    assert [line.split("|")[2].strip() for line in md[2:]] == [
        "P@1",
        "P@3",
        "P@5",
        "assignment precision",
        "assignment recall",
        "assignment used",
    ]
    assert md[2].startswith("| R-4 | P@1 |")
    # what auto chose is in the table, the run report and the manifest (asked and used apart)
    for method in ("eagle0", "eagle"):
        manifest = json.loads((run / "assigned" / method / "_manifest.json").read_text())
        chosen = manifest["selection"]["chosen"]
        held = manifest["selection"]["held_out_groups"]
        assert comparison["methods"][method]["assignment_used"] == (
            f"auto: {chosen} (on {held:,} held-out groups)"
        )
        assert manifest["parameters"]["weighting"] == "auto"
        assert manifest["used"]["weighting"] != "auto" and manifest["used"]["candidates"]
        assert f"auto: {chosen}" in md[-1] and f"auto: {chosen}" in (run / "report.md").read_text()
    assert comparison["methods"]["baseline"]["assignment_used"] is None

    # every number of the table is the one its stage wrote ...
    for method, row in comparison["methods"].items():
        metrics = json.loads((run / "metrics" / method / "metrics.json").read_text())
        assert row["P_percent"] == [round(100 * v, 2) for v in metrics["P"]]
        quality = json.loads((run / "assigned" / method / "_manifest.json").read_text())["quality"]
        assert row["assignment_precision_percent"] == round(100 * quality["precision"], 2)
        # ... and P@k agrees with a single-node recomputation from the predictions (napkinXC's formula)
        preds = {
            r.sample_id: list(r.label_ids)
            for r in spark.read.parquet(str(run / "predictions" / method / "predictions")).collect()
        }
        true = {
            r.sample_id: list(r.label_ids)
            for r in spark.read.parquet(str(run / "data" / "test" / "Y")).collect()
        }
        ids = sorted(true)
        twin = metrics_from_lists(
            [true[i] for i in ids],
            [preds.get(i, []) for i in ids],
            5,
            inv_propensity(np.ones(983), 1),
        )
        np.testing.assert_allclose(twin["P"], metrics["P"], atol=1e-9)
    m = comparison["methods"]
    # assignment precision: both EAGLE methods above the Baseline, which keeps every pair. The
    # paper's EAGLE > EAGLE-0 (section 6) is its hard assignment's (test_grlr checks it); the
    # default's refined round scores members with a classifier, and on this slice the two are
    # within a few tenths of a point either way
    assert (
        min(m["eagle"]["assignment_precision_percent"], m["eagle0"]["assignment_precision_percent"])
        > m["baseline"]["assignment_precision_percent"]
    )
    assert m["baseline"]["assignment_recall_percent"] == 100.0
    # every value of comparison.json is in percent, and its key says so, but the assigned pairs
    # (a count: the positives the classifier trained on)
    assert m["baseline"]["assignment_pairs"] >= m["eagle"]["assignment_pairs"] > 0
    assert all(
        key in ("name", "assignment_used", "assignment_pairs") or key.endswith("_percent")
        for row in m.values()
        for key in row
    )


def test_every_table_is_readable_as_a_folder_by_polars(compare_run):
    """No .crc or marker file beside Parquet parts: polars.read_parquet(folder) reads every table."""
    import polars as pl

    run, _, _ = compare_run
    tables = sorted({p.parent for p in run.rglob("*.parquet") if "delta" not in p.parts})
    assert len(tables) >= 20  # X, Y, Y1, Y2, embeddings, assignments, predictions, ...
    for folder in tables:
        others = [p.name for p in folder.iterdir() if not p.name.endswith(".parquet")]
        assert others == [], f"{folder}: {others}"
        assert pl.read_parquet(str(folder)).height > 0


def test_report_and_logs_cover_every_stage(compare_run):
    import pyarrow.parquet as pq

    run, _, _ = compare_run
    report = json.loads((run / "report.json").read_text())
    names = [r["stage"] for r in report["stages"]]
    # the methods ran side by side; the report lists each one's stages together, in order
    assert names == [
        "ingest_train",
        "ingest_test",
        "aggregate",
        *("assign_baseline", "train_baseline", "predict_baseline", "evaluate_baseline"),
        *("embed_eagle0", "assign_eagle0", "train_eagle0", "predict_eagle0", "evaluate_eagle0"),
        *("embed_eagle", "assign_eagle", "train_eagle", "predict_eagle", "evaluate_eagle"),
    ]
    for method in ("baseline", "eagle0", "eagle"):
        for step in ("assign", "train", "predict", "evaluate"):
            assert f"{step}_{method}" in names
    assert "embed_eagle" in names and "embed_eagle0" in names and "embed_baseline" not in names
    rows = {r["stage"]: r for r in report["stages"]}
    assert all(
        r["status"] == "ran" and r["seconds"] > 0 and r["peak_rss_mb"] > 100
        for r in report["stages"]
    )
    assert rows["ingest_train"]["rows"] == TRAIN_ROWS and rows["ingest_test"]["rows"] == TEST_ROWS
    assert rows["aggregate"]["rows"] == TRAIN_ROWS // 4  # groups of 4
    # one label embedding per label of Y2 (978 of the 983 labels occur in the slice's groups)
    y2 = pq.read_table(run / "data" / "aggregated" / "Y2", columns=["label_id"])
    assert rows["embed_eagle"]["rows"] == len(set(y2.column("label_id").to_pylist())) == 978
    # the slice is large enough for assign.weighting=auto to score its candidates (not the fallback)
    for method in ("eagle0", "eagle"):
        manifest = json.loads((run / "assigned" / method / "_manifest.json").read_text())
        chosen = manifest["selection"]
        assert set(chosen["candidates"]) == {"baseline", "soft-0.3+r1x2"}
        assert chosen["held_out_groups"] >= 20 and "skipped" not in chosen
    md = (run / "report.md").read_text()
    assert "| embed_eagle | ran |" in md
    logs = list((run / "logs").glob("*.log"))
    assert len(logs) == 1  # this run's own log file, named by its run id
    log_text = logs[0].read_text()
    assert "stage embed_eagle: done in" in log_text and "stage evaluate_eagle: done in" in log_text
    # progress of the running Spark stages, labelled by the pipeline stages at work (the methods
    # run side by side: a line names each running one, joined by "+")
    labels = [
        line.split(" INFO eagle_spark.progress: ")[1].split(": stage ")[0].split("+")
        for line in log_text.splitlines()
        if " INFO eagle_spark.progress: " in line and ": stage " in line
    ]
    assert any("embed_eagle" in names for names in labels) and " ended: [" in log_text
    assert any(len(names) > 1 for names in labels)  # stages of two methods at once
    assert all(set(names) <= {*rows, "spark"} for names in labels)  # spark: between stages
    # the run's report is kept under its run id as well
    assert (run / "reports" / f"{report['run_id']}.json").read_text() == (
        run / "report.json"
    ).read_text()
    assert logs[0].stem == report["run_id"]


def test_methods_side_by_side_a_failed_one_lets_the_others_finish(
    spark, tmp_path, monkeypatch, caplog
):
    """Two methods run in two threads; when one fails the other still finishes (its stages are
    recorded) and the failure is raised; a rerun one method at a time skips what was finished."""
    import logging
    import threading

    import eagle_spark.pipeline as pipeline
    from eagle_spark.errors import BadInputError
    from tests.conftest import delicious_slice

    real, threads = pipeline._run_method, {}

    def failing(pipe, method, *args):
        threads[method] = threading.current_thread().name
        if method == "eagle0":
            raise BadInputError("eagle0 broke")
        return real(pipe, method, *args)

    run = tmp_path / "run"
    given = [
        f"pipeline.train={delicious_slice(tmp_path, 'train', 400)}",
        f"pipeline.test={delicious_slice(tmp_path, 'test', 100)}",
        "pipeline.methods=[baseline,eagle0]",
        "pipeline.until=assign",
        "assign.weighting=hard",  # the choice among candidates is the compare run's to test
    ]
    monkeypatch.setattr(pipeline, "_run_method", failing)
    caplog.set_level(logging.INFO, logger="eagle_spark.pipeline")
    with pytest.raises(BadInputError, match="eagle0 broke"):
        pipeline.run_pipeline(spark, _settings(run, *given))
    assert "methods baseline, eagle0: 2 side by side" in caplog.text
    assert threads["baseline"] != threads["eagle0"]
    assert all(name.startswith("eagle-spark-method") for name in threads.values())
    assert (run / "_stages" / "assign_baseline.json").exists()  # finished despite eagle0
    assert not (run / "assigned" / "eagle0").exists()

    monkeypatch.setattr(pipeline, "_run_method", real)
    again = pipeline.run_pipeline(spark, _settings(run, *given, "pipeline.methods_at_once=1"))
    status = {r["stage"]: r["status"] for r in again["stages"]}
    assert status == {
        "ingest_train": "skipped",
        "aggregate": "skipped",
        "assign_baseline": "skipped",
        "embed_eagle0": "ran",
        "assign_eagle0": "ran",
    }


def test_rerun_skips_unchanged_stages_and_reruns_what_a_setting_touches(spark, compare_run):
    from eagle_spark.pipeline import run_pipeline

    run, given, first = compare_run
    again = run_pipeline(spark, _settings(run, *given, "pipeline.methods=[baseline,eagle0,eagle]"))
    assert {r["status"] for r in again["stages"]} == {"skipped"}
    assert len(list((run / "reports").glob("*.json"))) == 2  # both runs' reports are kept
    assert again["comparison"] == first["comparison"]

    # one GRLR setting changes: EAGLE's chain reruns, Baseline / EAGLE-0 and the data do not
    changed = run_pipeline(
        spark,
        _settings(run, *given, "pipeline.methods=[baseline,eagle0,eagle]", "embed.iterations=3"),
    )
    ran = {r["stage"] for r in changed["stages"] if r["status"] == "ran"}
    assert ran == {"embed_eagle", "assign_eagle", "train_eagle", "predict_eagle", "evaluate_eagle"}
    manifest = json.loads((run / "embeddings" / "eagle" / "_manifest.json").read_text())
    assert manifest["parameters"]["iterations"] == 3


def test_format_delta_publishes_versions_read_by_deltalake_polars_duckdb(spark, compare_run):
    import duckdb
    import polars as pl
    from deltalake import DeltaTable

    from eagle_spark.io.delta import read_delta
    from eagle_spark.pipeline import run_pipeline

    run, given, _ = compare_run
    result = run_pipeline(
        spark, _settings(run, *given, "pipeline.format=delta", "embed.iterations=3")
    )
    ran = {r["stage"] for r in result["stages"] if r["status"] == "ran"}
    assert ran == {"delta_assignments_eagle", "delta_predictions_eagle"}  # nothing else recomputed
    table = str(run / "delta" / "assignments_eagle")
    expected = sorted(
        map(
            tuple,
            spark.read.parquet(str(run / "assigned" / "eagle" / "assignments"))
            .select("group_id", "label_id", "sample_id")
            .collect(),
        )
    )
    dt = DeltaTable(table)
    assert dt.version() == 0
    got = dt.to_pyarrow_table().to_pydict()
    assert sorted(zip(got["group_id"], got["label_id"], got["sample_id"])) == expected
    polars_rows = pl.read_delta(table).select("group_id", "label_id", "sample_id").rows()
    assert sorted(polars_rows) == expected
    con = duckdb.connect()
    con.register("assignments", dt.to_pyarrow_dataset())
    assert con.execute("select count(*), count(distinct group_id) from assignments").fetchone() == (
        len(expected),
        len({r[0] for r in expected}),
    )
    spark_rows = read_delta(spark, table).select("group_id", "label_id", "sample_id").collect()
    assert sorted(map(tuple, spark_rows)) == expected

    # a forced rerun commits version 1 with identical rows; version 0 stays readable (time travel)
    from eagle_spark.io.delta import publish_delta

    publish_delta(spark, str(run / "assigned" / "eagle" / "assignments"), table)
    assert DeltaTable(table).version() == 1
    v1 = DeltaTable(table).to_pyarrow_table().to_pydict()
    v0 = DeltaTable(table, version=0).to_pyarrow_table().to_pydict()
    assert sorted(zip(v1["group_id"], v1["label_id"], v1["sample_id"])) == expected
    assert sorted(zip(v0["group_id"], v0["label_id"], v0["sample_id"])) == expected
    assert len(DeltaTable(table).history()) == 2


def test_eagle_paper_is_algorithm_2_as_printed_on_eagle_s_embeddings(spark, tmp_path):
    """Method eagle_paper reuses EAGLE's GRLR stage (one embed_eagle) and gives each (group,
    label) pair of Y2 exactly one member, while eagle (top-c) gives a pair of count c its c best."""
    from eagle_spark.io.tables import read_table
    from eagle_spark.pipeline import run_pipeline

    run = tmp_path / "paper"
    result = run_pipeline(
        spark,
        _settings(
            run,
            "pipeline.methods=[eagle_paper,eagle]",
            "pipeline.until=assign",
            "embed.iterations=2",
            "assign.weighting=hard",
        ),
    )
    names = [r["stage"] for r in result["stages"]]
    assert (
        names.count("embed_eagle") == 2 and "embed_eagle_paper" not in names
    )  # the second is skipped
    assert [r["status"] for r in result["stages"] if r["stage"] == "embed_eagle"] == [
        "ran",
        "skipped",
    ]
    y2 = read_table(spark, str(run / "data" / "aggregated"), "Y2")
    paper = read_table(spark, str(run / "assigned" / "eagle_paper"), "assignments")
    eagle = read_table(spark, str(run / "assigned" / "eagle"), "assignments")
    assert paper.count() == y2.count() == paper.select("group_id", "label_id").distinct().count()
    assert eagle.count() == y2.agg({"count": "sum"}).first()[0]
    assert result["comparison"]["methods"]["eagle_paper"]["name"] == "EAGLE (paper)"


def test_readme_run_folder_layout_is_what_is_on_disk(compare_run):
    """Every path the README's "Run folder" paragraph names exists in a --compare run (with
    <method> and <stage> for each method and stage, <run id> for the run's), and the predictions'
    Parquet table is the folder the README points a reader at."""
    import re

    import pyarrow.parquet as pq

    run, _, result = compare_run
    text = (ROOT / "README.md").read_text()
    paragraph = re.search(
        r"Run folder \(`pipeline.output`.*?\): (.*?)\. A stage", text, re.S
    ).group(1)
    paragraph = " ".join(paragraph.split())  # the README wraps its lines anywhere
    named = re.findall(r"`([^`]+)`", paragraph)
    assert "predictions/<method>/predictions" in named and "_stages/<stage>.json" in named
    run_ids = [p.stem for p in (run / "reports").glob("*.json")]  # other tests rerun this folder
    assert run_ids
    stages = [r["stage"] for r in result["stages"]]
    assert "`embeddings/<method>` (EAGLE-0 and EAGLE)" in paragraph  # the Baseline embeds nothing
    for name in named:
        if name.startswith("_") and "/" not in name:  # a file inside each folder, not a path
            continue
        methods = (
            ["eagle0", "eagle"]
            if name.startswith("embeddings/")
            else ["baseline", "eagle0", "eagle"]
        )
        for path in {
            name.replace("<method>", m).replace("<stage>", s).replace("<run id>", r)
            for m in methods
            for s in stages
            for r in run_ids
        }:
            for found in (
                [path]
                if "{" not in path
                else [path.replace("{json,md}", ext) for ext in ("json", "md")]
            ):
                assert (run / found.rstrip("/")).exists(), (
                    f"the README names {name}: {found} is missing"
                )
    table = pq.read_table(run / "predictions" / "eagle" / "predictions")
    assert table.num_rows == TEST_ROWS


def test_a_method_whose_training_set_is_the_baselines_copies_its_results(spark, tmp_path):
    """assign.weighting=auto that chooses the Baseline (its only candidate here) writes the
    Baseline's tables: EAGLE's train, predict and evaluate then copy the Baseline's outputs (status
    copied, byte-identical model, equal metrics) instead of computing them again; a rerun skips
    them, and one whose EAGLE model is gone copies the skipped Baseline's again; alone, EAGLE
    trains the same model itself."""
    import filecmp
    import shutil

    from eagle_spark.pipeline import run_pipeline
    from tests.conftest import delicious_slice

    run = tmp_path / "run"
    given = [
        f"pipeline.train={delicious_slice(tmp_path, 'train', 400)}",
        f"pipeline.test={delicious_slice(tmp_path, 'test', 100)}",
        "pipeline.methods=[baseline,eagle]",
        "pipeline.methods_at_once=1",
        "assign.candidates=[baseline]",
        "embed.iterations=1",
        "tree.n_trees=1",
    ]
    result = run_pipeline(spark, _settings(run, *given))
    rows = {r["stage"]: r for r in result["stages"]}
    assert (
        json.loads((run / "assigned" / "eagle" / "_manifest.json").read_text())["selection"][
            "chosen"
        ]
        == "baseline"
    )
    for step in ("train", "predict", "evaluate"):
        assert rows[f"{step}_baseline"]["status"] == "ran"
        assert rows[f"{step}_eagle"]["status"] == "copied"
        assert rows[f"{step}_eagle"]["copied_from"] == f"{step}_baseline"
        record = json.loads((run / "_stages" / f"{step}_eagle.json").read_text())
        assert record["copied_from"] == f"{step}_baseline"
    for folder in ("models", "predictions", "metrics"):
        base, eagle = run / folder / "baseline", run / folder / "eagle"
        files = sorted(
            str(p.relative_to(base))
            for p in base.rglob("*")
            if p.is_file() and p.name != "_files.json"
        )
        assert (
            files
            and sorted(
                str(p.relative_to(eagle))
                for p in eagle.rglob("*")
                if p.is_file() and p.name != "_files.json"
            )
            == files
        )
        assert filecmp.cmpfiles(base, eagle, files, shallow=False)[0] == files
    methods = result["comparison"]["methods"]
    assert methods["eagle"]["P_percent"] == methods["baseline"]["P_percent"]
    assert "| train_eagle | copied from train_baseline |" in (run / "report.md").read_text()

    again = run_pipeline(spark, _settings(run, *given))
    assert {r["status"] for r in again["stages"]} == {"skipped"}

    shutil.rmtree(run / "models" / "eagle")  # the Baseline's stages are skipped, EAGLE's copy it
    third = run_pipeline(spark, _settings(run, *given))
    status = {r["stage"]: r["status"] for r in third["stages"]}
    assert status["train_baseline"] == "skipped" and status["train_eagle"] == "copied"
    assert status["predict_eagle"] == "skipped"  # the same model bytes: its input is unchanged
    assert third["comparison"] == result["comparison"]

    # without the Baseline in the run, EAGLE trains, predicts and evaluates its own: the same
    for folder in ("models", "predictions", "metrics"):
        shutil.rmtree(run / folder / "eagle")
    alone = run_pipeline(spark, _settings(run, *given, "pipeline.methods=[eagle]"))
    status = {r["stage"]: r["status"] for r in alone["stages"]}
    assert status["assign_eagle"] == "skipped"
    assert [status[f"{step}_eagle"] for step in ("train", "predict", "evaluate")] == ["ran"] * 3
    assert alone["comparison"]["methods"]["eagle"] == methods["eagle"]

    # the identity: how a training set was made does not count, what it holds does
    from eagle_spark.classifiers.base import training_identity

    def identity_with(change) -> str | None:
        folder = tmp_path / f"copy-{len(list(tmp_path.glob('copy-*')))}"
        shutil.copytree(run / "assigned" / "baseline", folder)
        manifest = json.loads((folder / "_manifest.json").read_text())
        listing = json.loads((folder / "_files.json").read_text())
        change(manifest, listing)
        (folder / "_manifest.json").write_text(json.dumps(manifest))
        (folder / "_files.json").write_text(json.dumps(listing))
        return training_identity(spark, str(folder))

    base = training_identity(spark, str(run / "assigned" / "baseline"))
    assert base == training_identity(spark, str(run / "assigned" / "eagle"))
    assert identity_with(lambda m, f: m.update(created_at="x", selection=None, quality={})) == base
    assert identity_with(lambda m, f: m["parameters"].update(weighting="soft")) == base
    assert identity_with(lambda m, f: m["parameters"].update(method="eagle")) != base
    assert identity_with(lambda m, f: m.update(n_labels=m["n_labels"] + 1)) != base
    y_file = next(
        k
        for k in json.loads((run / "assigned" / "baseline" / "_files.json").read_text())["files"]
        if k.startswith("Y/")
    )
    assert identity_with(lambda m, f: f["files"][y_file].update(crc32="00000000")) != base
    assert identity_with(lambda m, f: f["files"][y_file].pop("crc32")) is None
    assert training_identity(spark, str(run / "data" / "aggregated")) != base
