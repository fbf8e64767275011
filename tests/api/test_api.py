"""The Python API (eagle_spark.ml) on DataFrames: doctests, equality with the folder stages the CLI
runs, the in-memory (materialised) path, save/load, pyspark.ml Pipeline, and its errors."""

from __future__ import annotations

import doctest
import math
import os
import pathlib
import re

import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.linalg import SparseVector
from pyspark.sql import functions as F

import eagle_spark
from eagle_spark import (
    GRLR,
    Dataset,
    GRLRModel,
    LabelTreeClassifier,
    LabelTreeModel,
    OneVsRestXMC,
    OneVsRestXMCModel,
    classic,
    evaluate,
)
from eagle_spark.assignment.assign import assign
from eagle_spark.classifiers.ova import train_ova
from eagle_spark.classifiers.predict import PREDICTIONS, predict
from eagle_spark.classifiers.tree import train_tree
from eagle_spark.errors import BadInputError, OutputExistsError
from eagle_spark.evaluation.evaluate import evaluate as evaluate_folders
from eagle_spark.grlr.embedding import embed
from eagle_spark.io.tables import read_table
from eagle_spark.settings import (
    AssignSettings,
    EmbedSettings,
    EvaluateSettings,
    OVASettings,
    PredictSettings,
    TreeSettings,
)
from tests.conftest import ROOT, delicious_slice, last_line_of

TRAIN_ROWS, TEST_ROWS = 3000, 800
"""The API's equalities hold on any data: they run on the first samples of the delicious files
(the whole files' main job runs in CI's set-up step and the slow suite pins its figures)."""


@pytest.fixture(scope="module")
def r4(spark, tmp_path_factory):
    """The first TRAIN_ROWS delicious training samples in random groups of 4 (seed 0), through the
    API."""
    folder = tmp_path_factory.mktemp("api")
    train = Dataset.ingest(
        spark, delicious_slice(folder, "train", TRAIN_ROWS), str(folder / "train")
    )
    return train.aggregate(str(folder / "r4"), groupSize=4, seed=0)


@pytest.fixture(scope="module")
def test_set(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("api")
    return Dataset.ingest(spark, delicious_slice(folder, "test", TEST_ROWS), str(folder / "test"))


@pytest.fixture(scope="module")
def stages(spark, r4, tmp_path_factory):
    """What the CLI's embed / assign write for r4 (multiplicity on, as conf/local.yaml)."""
    base = tmp_path_factory.mktemp("stages")
    emb, filt = str(base / "emb"), str(base / "filtered")
    embed(spark, r4.path, emb, EmbedSettings())
    assign(
        spark, r4.path, filt, AssignSettings(multiplicity=True, weighting="hard"), embeddings=emb
    )
    y = {r.sample_id: sorted(r.label_ids) for r in read_table(spark, filt, "Y").collect()}
    return {"emb": emb, "filtered": filt, "Y_filter": y, "base": base}


def test_doctests_run(spark, tmp_path):
    """Every Examples: block of the API's docstrings runs and gives what it shows."""
    import eagle_spark.ml.classifiers as classifiers
    import eagle_spark.ml.dataset as dataset
    import eagle_spark.ml.evaluation as evaluation
    import eagle_spark.ml.grlr as grlr

    attempted = 0
    for module in (dataset, grlr, classifiers, evaluation):
        work = tmp_path / module.__name__
        work.mkdir()
        result = doctest.testmod(
            module,
            extraglobs={"spark": spark, "F": F, "work": str(work)},
            optionflags=doctest.ELLIPSIS,
            report=True,
        )
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 20


def test_top_level_names():
    assert {
        "GRLR",
        "GRLRModel",
        "LabelTreeClassifier",
        "LabelTreeModel",
        "OneVsRestXMC",
        "OneVsRestXMCModel",
        "evaluate",
        "Dataset",
    } <= set(eagle_spark.__all__)
    assert eagle_spark.GRLR is GRLR
    with pytest.raises(AttributeError):
        eagle_spark.NoSuchThing  # noqa: B018


def test_samples_frame_matches_tables(spark, r4):
    samples = r4.samples()
    assert samples.columns == ["sample_id", "features", "group_id", "group_labels", "labels"]
    assert samples.count() == r4.n_samples == TRAIN_ROWS
    first = samples.where("sample_id = 0").first()
    x = read_table(spark, r4.path, "X").where("sample_id = 0").first()
    assert list(first.features.indices) == list(x.feat_idx)
    assert first.features.size == 500
    y2 = read_table(spark, r4.path, "Y2").where(F.col("group_id") == first.group_id).collect()
    assert first.group_labels == sorted(r.label_id for r in y2 for _ in range(r["count"]))


def test_grlr_api_equals_the_stages(spark, r4, stages):
    """fit + transform on a dataset's frame gives the assign stage's Y_filter, sample for sample."""
    samples = r4.samples(labelsCol=None)
    model = GRLR(multiplicity=True, weighting="hard").fit(samples)
    assigned = model.transform(samples)
    got = {r.sample_id: r.labels for r in assigned.select("sample_id", "labels").collect()}
    assert got == stages["Y_filter"]
    emb_stage = {
        r.label_id: list(r.emb_idx) for r in read_table(spark, stages["emb"], "label_emb").collect()
    }
    emb_api = {r.label_id: list(r.embedding.indices) for r in model.labelEmbeddings.collect()}
    assert emb_api == emb_stage


def test_grlr_on_an_in_memory_frame(spark, r4, stages):
    """A frame the API did not make (other column names, an extra column, no sample_id) is written
    as a temporary dataset first; the assignments are the same, joined back to its own rows."""
    mem = r4.samples(labelsCol=None).select(
        F.col("sample_id").alias("doc"),
        F.col("features").alias("x"),
        F.col("group_id").alias("bag"),
        F.col("group_labels").alias("tags"),
    )
    model = GRLR(
        featuresCol="x",
        groupCol="bag",
        groupLabelsCol="tags",
        labelsCol="assigned",
        multiplicity=True,
        weighting="hard",
    ).fit(mem)
    out = model.transform(mem)
    assert out.columns == ["doc", "x", "bag", "tags", "assigned"]
    got = {r.doc: r.assigned for r in out.select("doc", "assigned").collect()}
    assert got == stages["Y_filter"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e39])
def test_a_non_finite_feature_in_a_frame_is_refused_naming_the_sample(spark, tmp_path, bad):
    """NaN, infinity, or a value beyond float32 (which becomes infinity) in a frame's features:
    a ValueError naming the sample before anything trains (not a task failure blaming a setting)."""
    rows = [
        (10, SparseVector(4, [0, 2], [1.0, 0.5]), [1]),
        (11, SparseVector(4, [1, 3], [0.5, bad]), [0]),
        (12, SparseVector(4, [0], [2.0]), [1]),
    ]
    frame = spark.createDataFrame(rows, ["sample_id", "features", "labels"])
    with pytest.raises(
        ValueError,
        match=r"features column 'features' holds a NaN or infinite value .* in the sample with "
        r"sample_id 11 \(row 1 of the frame",
    ):
        Dataset.from_samples(frame, str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()
    with pytest.raises(ValueError, match="sample_id 11"):
        LabelTreeClassifier(numTrees=1).fit(frame)


def test_baseline_method_gives_every_member_its_group_labels(spark, r4):
    samples = r4.samples(labelsCol=None)
    model = GRLR(maxIter=0).fit(samples).setMethod("baseline")
    rows = model.transform(samples).select("group_labels", "labels").collect()
    assert all(r.labels == sorted(set(r.group_labels)) for r in rows)


def test_tree_api_equals_the_stages(spark, r4, stages, test_set):
    """LabelTreeClassifier.fit on GRLR's output and transform on the test frame give the train /
    predict stages' predictions, and evaluate() gives the evaluate stage's metrics."""
    base = stages["base"]
    params = TreeSettings(n_trees=1)
    train_tree(spark, stages["filtered"], str(base / "tree"), params)
    predict(spark, str(base / "tree"), test_set.path, str(base / "pred"), PredictSettings())
    want = {
        r.sample_id: list(r.label_ids)
        for r in spark.read.parquet(f"{base}/pred/{PREDICTIONS}").collect()
    }
    metrics = evaluate_folders(spark, str(base / "pred"), test_set.path, EvaluateSettings())

    samples = r4.samples(labelsCol=None)
    assigned = GRLR(multiplicity=True, weighting="hard").fit(samples).transform(samples)
    model = LabelTreeClassifier(numTrees=1).fit(assigned)
    pred = model.transform(test_set.samples())
    got = {r.sample_id: r.prediction for r in pred.select("sample_id", "prediction").collect()}
    assert got == want
    m = evaluate(pred, k=5)
    for i in range(5):
        assert m[f"P@{i + 1}"] == pytest.approx(metrics["P"][i], abs=1e-12)
        assert m[f"nDCG@{i + 1}"] == pytest.approx(metrics["nDCG"][i], abs=1e-12)
        assert m[f"PSP@{i + 1}"] == pytest.approx(metrics["PSP"][i], abs=1e-12)
    assert m["n_samples"] == TEST_ROWS
    assert model.numLabels_ == 983 and model.numFeatures_ == 500


def test_ova_api_equals_the_stages(spark, stages, test_set):
    base = stages["base"]
    train_ova(spark, stages["filtered"], str(base / "ova"), OVASettings())
    predict(
        spark, str(base / "ova"), test_set.path, str(base / "ova_pred"), PredictSettings(top_k=3)
    )
    want = {
        r.sample_id: list(r.label_ids)
        for r in spark.read.parquet(f"{base}/ova_pred/{PREDICTIONS}").collect()
    }
    train = Dataset.load(spark, stages["filtered"]).samples()  # X and Y = Y_filter, backed
    model = OneVsRestXMC(topK=3).fit(train)
    pred = model.transform(test_set.samples())
    got = {r.sample_id: r.prediction for r in pred.select("sample_id", "prediction").collect()}
    assert got == want
    scores = pred.select("scores").first().scores
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)


def test_save_load_and_pipeline(spark, r4, test_set, tmp_path):
    """Stages fit, save and load inside a pyspark.ml Pipeline; a loaded model predicts the same."""
    samples = r4.samples(labelsCol=None)
    pipe = Pipeline(
        stages=[
            GRLR(maxIter=5, multiplicity=True, weighting="hard"),
            LabelTreeClassifier(numTrees=1, topK=3),
        ]
    )
    fitted = pipe.fit(samples)
    assert isinstance(fitted.stages[0], GRLRModel) and isinstance(fitted.stages[1], LabelTreeModel)
    test = test_set.samples()
    before = {r.sample_id: r.prediction for r in fitted.stages[1].transform(test).collect()}
    path = str(tmp_path / "pipeline_model")
    fitted.save(path)
    loaded = PipelineModel.load(path)
    assert isinstance(loaded.stages[1], LabelTreeModel)
    assert loaded.stages[0].getOrDefault("maxIter") == 5
    after = {r.sample_id: r.prediction for r in loaded.stages[1].transform(test).collect()}
    assert after == before
    # an estimator saves its Params only
    Pipeline(stages=[GRLR(stepSize=0.5)]).save(str(tmp_path / "unfitted"))
    assert Pipeline.load(str(tmp_path / "unfitted")).getStages()[0].getOrDefault("stepSize") == 0.5

    tree = fitted.stages[1]
    one = str(tmp_path / "tree")
    tree.save(one)
    with pytest.raises(OutputExistsError):
        tree.save(one)
    tree.write().overwrite().save(one)
    assert {
        r.sample_id: r.prediction for r in LabelTreeModel.load(one).transform(test).collect()
    } == before
    with pytest.raises(BadInputError, match="holds a eagle_spark.ml.classifiers.LabelTreeModel"):
        OneVsRestXMCModel.load(one)
    with pytest.raises(BadInputError, match="not a saved eagle_spark stage"):
        GRLRModel.load(str(tmp_path))
    # the saved stage's Spark ML metadata says its files were listed: without its list it is
    # refused, not loaded unchecked
    (pathlib.Path(one) / "_files.json").unlink()
    with pytest.raises(BadInputError, match=r"has no file list _files.json, but .*metadata/part-"):
        LabelTreeModel.load(one)


@pytest.mark.parametrize(
    "cls, unused",
    [
        (GRLR, {}),
        (GRLRModel, {}),
        (LabelTreeClassifier, {PredictSettings: {"batch_rows"}}),
        (LabelTreeModel, {PredictSettings: {"batch_rows"}}),
        (OneVsRestXMC, {PredictSettings: {"beam_size"}}),
        (OneVsRestXMCModel, {PredictSettings: {"beam_size"}}),
    ],
)
def test_every_setting_is_a_param(cls, unused):
    """Each field of the settings sections an estimator uses is one of its Params (so the CLI's
    settings reach the stages through the API), but prediction knobs of the other classifier; an
    estimator's constructor takes every one of them as a keyword."""
    import dataclasses
    import inspect

    for section, mapping in cls._fields.items():
        fields = {f.name for f in dataclasses.fields(section)}
        assert set(mapping.values()) == fields - unused.get(section, set()), (
            cls.__name__,
            section.__name__,
        )
        assert all(cls().hasParam(name) for name in mapping)
        if not cls.__name__.endswith("Model"):
            assert set(mapping) <= set(inspect.signature(cls.__init__).parameters), cls.__name__


def test_from_settings_sets_the_params():
    est = GRLR.fromSettings(
        EmbedSettings(iterations=3, lr=0.5, cache_budget="2g"),
        AssignSettings(method="baseline", tasks=4),
    )
    assert (
        est.getOrDefault("maxIter"),
        est.getOrDefault("stepSize"),
        est.getOrDefault("cacheBudget"),
    ) == (3, 0.5, "2g")
    assert (est.getOrDefault("method"), est.getOrDefault("assignTasks")) == ("baseline", 4)
    assert est.settings(EmbedSettings) == EmbedSettings(iterations=3, lr=0.5, cache_budget="2g")
    tree = LabelTreeClassifier.fromSettings(
        TreeSettings(n_trees=2, max_leaf_work=None, top_levels=1)
    )
    assert tree.settings(TreeSettings) == TreeSettings(n_trees=2, max_leaf_work=None, top_levels=1)
    assert OneVsRestXMC.fromSettings(OVASettings(C=2.0)).settings(OVASettings) == OVASettings(C=2.0)
    assert OneVsRestXMC(maxIter=20).settings(OVASettings) == OVASettings(max_iter=20)
    assert LabelTreeClassifier(maxIter=20).settings(TreeSettings) == TreeSettings(max_iter=20)
    assert LabelTreeClassifier(
        matcherC=2.0, matcherMaxIter=10, matcherCScale="none", unassigned="ignore"
    ).settings(TreeSettings) == TreeSettings(
        matcher_C=2.0, matcher_max_iter=10, matcher_C_scale="none", unassigned="ignore"
    )
    # None given to the constructor: a value where the setting takes null (no split rule,
    # Parabel's leaves), refused where it does not (numTrees)
    assert LabelTreeClassifier(maxSplitShared=None, maxLeafWork=None).settings(
        TreeSettings
    ) == TreeSettings(max_split_shared=None, max_leaf_work=None)
    with pytest.raises(TypeError, match="numTrees"):
        LabelTreeClassifier(numTrees=None)
    with pytest.raises(TypeError, match="has no Param 'numTree'"):
        LabelTreeClassifier(numTree=2)
    assert LabelTreeClassifier().settings(TreeSettings).max_split_shared == 0.1


def test_session_kind_is_the_one_asked_for(spark):
    """Spark Connect when tests/conftest.py's EAGLE_SPARK_TEST_REMOTE is set (tests/api/
    test_connect.py runs this module so), else classic."""
    from tests.conftest import REMOTE_ENV

    assert classic.is_connect(spark) == bool(os.environ.get(REMOTE_ENV))
    assert classic.is_connect(spark.range(1)) == classic.is_connect(spark)


def test_a_group_part_without_labels_equals_the_frame_written_with_from_samples(
    spark, r4, tmp_path
):
    """split_part(by="group", labels=False), which the automatic assignment's selection uses,
    writes its tables directly; they equal what from_samples writes from the same rows."""
    share, seed = 0.2, 0
    for held in (False, True):
        part = r4.split_part(
            str(tmp_path / f"part-{held}"), share, seed, by="group", held=held, labels=False
        )
        bucket = F.pmod(F.xxhash64(F.lit(seed), F.col("group_id")), F.lit(10_000))
        keep = bucket < F.lit(int(round(share * 10_000)))
        frame = r4.samples(labelsCol=None).where(F.col("group_id").isNotNull())
        twin = Dataset.from_samples(
            frame.filter(keep if held else ~keep).drop("sample_id"),
            str(tmp_path / f"twin-{held}"),
            numFeatures=r4.n_features,
            numLabels=r4.n_labels,
        )
        assert (part.n_samples, part.n_groups, part.n_features, part.n_labels) == (
            twin.n_samples,
            twin.n_groups,
            twin.n_features,
            twin.n_labels,
        )
        assert part.n_groups == (155 if held else 595)  # of the 750 groups of 4
        assert not part.has("Y")
        for table, key in (
            ("X", ["sample_id"]),
            ("Y1", ["sample_id"]),
            ("Y2", ["group_id", "label_id"]),
        ):
            got = read_table(spark, part.path, table).orderBy(*key).collect()
            want = read_table(spark, twin.path, table).orderBy(*key).collect()
            assert got == want, table


def test_group_parts_of_overlapping_groups_equal_a_python_twin(spark, tmp_path, write_text):
    """A sample in two groups of a part is two samples of it (one per (member, group) row, as
    from_samples writes samples() rows), numbered in (sample_id, group_id) order; split() writes
    both parts in one pass, each equal to its split_part(); the id map renumbers the kept part.
    The twin numbers the rows in Python from the tables (hand-built supplied Y1 / Y2)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eagle_spark.io.ingest import ingest
    from eagle_spark.settings import IngestSettings

    n = 40
    src = write_text(
        "x.txt",
        f"{n} 6 5\n" + "\n".join(f"{i % 5} {i % 6}:1 {(i + 1) % 6}:0.5" for i in range(n)) + "\n",
    )
    ingest(spark, src, str(tmp_path / "x"), IngestSettings())
    # samples 0, 3, 6, ... also belong to the next pair's group
    y1 = [(i, i // 2) for i in range(n)] + [(i, i // 2 + 1) for i in range(0, n - 2, 3)]
    y2 = [(g, g % 5, 1 + g % 2) for g in sorted({g for _, g in y1})]
    for name, columns, rows in (
        ("y1", ["sample_id", "group_id"], y1),
        ("y2", ["group_id", "label_id", "count"], y2),
    ):
        pq.write_table(
            pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)}),
            tmp_path / f"{name}.parquet",
        )
    ds = Dataset.load(spark, str(tmp_path / "x")).aggregate(
        str(tmp_path / "agg"), y1=str(tmp_path / "y1.parquet"), y2=str(tmp_path / "y2.parquet")
    )
    share, seed = 0.3, 0
    groups = sorted({g for _, g in y1})
    bucket = F.pmod(F.xxhash64(F.lit(seed), F.col("group_id")), F.lit(10_000))
    held_groups = {
        r.group_id
        for r in spark.createDataFrame([(g,) for g in groups], "group_id long")
        .where(bucket < F.lit(int(share * 10_000)))
        .collect()
    }
    assert 0 < len(held_groups) < len(groups)
    x = {
        r.sample_id: (list(r.feat_idx), list(r.feat_val))
        for r in read_table(spark, ds.path, "X").collect()
    }

    def twin(held, keep=None):
        rows = sorted(
            (s, g) for s, g in y1 if (g in held_groups) == held and (keep is None or g in keep)
        )
        number = {g: i for i, g in enumerate(sorted({g for _, g in rows}))}
        return {
            "X": [(i, *x[s]) for i, (s, _) in enumerate(rows)],
            "Y1": [(i, number[g]) for i, (_, g) in enumerate(rows)],
            "Y2": sorted((number[g], label, c) for g, label, c in y2 if g in number),
            "ids": sorted((s, g, i, number[g]) for i, (s, g) in enumerate(rows)),
        }

    def tables(part):
        return {
            name: sorted(tuple(r) for r in read_table(spark, part.path, name).collect())
            for name in ("X", "Y1", "Y2")
        }

    def split(name, **kw):  # the kept part, the held-out part and the id map, named by `name`
        return ds.split(
            str(tmp_path / f"kept{name}"),
            str(tmp_path / f"held{name}"),
            share,
            seed,
            by="group",
            labels=False,
            idMap=str(tmp_path / f"ids{name}"),
            **kw,
        )

    kept, held = split("")
    for flag, part in ((False, kept), (True, held)):
        want = twin(flag)
        assert (part.n_samples, part.n_groups) == (
            len(want["X"]),
            len({g for _, g in want["Y1"]}),
        )
        assert tables(part) == {k: want[k] for k in ("X", "Y1", "Y2")}
        assert not part.has("Y")
        alone = ds.split_part(
            str(tmp_path / f"alone-{flag}"), share, seed, "group", flag, labels=False
        )
        assert tables(alone) == tables(part)
    ids = spark.read.parquet(str(tmp_path / "ids")).select(
        "sample_id", "group_id", "part_sample_id", "part_group_id"
    )
    assert sorted(tuple(r) for r in ids.collect()) == twin(False)["ids"]
    # the overlap is exercised: some sample is two samples of one part
    assert any(
        len([r for r in twin(flag)["ids"] if r[0] == sample]) > 1
        for flag in (False, True)
        for sample in range(0, n - 2, 3)
    )
    # keptShare: the kept part holds the groups not held out whose second hash (of seed, group_id
    # and 1) falls in the share; the held-out part is unchanged
    second = F.pmod(F.xxhash64(F.lit(seed), F.col("group_id"), F.lit(1)), F.lit(10_000))
    sampled = {
        r.group_id
        for r in spark.createDataFrame([(g,) for g in groups], "group_id long")
        .where(second < F.lit(5_000))
        .collect()
    }
    assert 0 < len(sampled - held_groups) < len(set(groups) - held_groups)
    kept_half, held_half = split("-half", keptShare=0.5)
    want = twin(False, sampled)
    assert tables(kept_half) == {k: want[k] for k in ("X", "Y1", "Y2")}
    assert (kept_half.n_samples, kept_half.n_groups) == (len(want["X"]), len(sampled - held_groups))
    assert tables(held_half) == tables(held)
    ids = spark.read.parquet(str(tmp_path / "ids-half"))
    assert sorted(tuple(r) for r in ids.collect()) == want["ids"]
    alone = ds.split_part(
        str(tmp_path / "alone-half"), share, seed, "group", False, labels=False, keptShare=0.5
    )
    assert tables(alone) == tables(kept_half)
    for bad, match in ((0.0, "keptShare must be in"), (1.5, "keptShare must be in")):
        with pytest.raises(ValueError, match=match):
            ds.split_part(str(tmp_path / "bad"), share, seed, "group", labels=False, keptShare=bad)
    with pytest.raises(ValueError, match="keptShare needs by='group'"):
        ds.split(str(tmp_path / "a"), str(tmp_path / "b"), share, seed, keptShare=0.5)


def test_stage_progress_is_reported_on_either_session_kind(spark, caplog):
    """SparkProgress follows a real job: the status tracker on classic, the progress handler
    under Spark Connect (the server reports a running operation every 2 s by default)."""
    import io
    import logging
    import time

    from eagle_spark.progress import SparkProgress

    def slow(batches):
        for batch in batches:
            time.sleep(2.5)
            yield batch

    caplog.set_level(logging.INFO, logger="eagle_spark.progress")
    with SparkProgress(spark, interval=0.2, log_every=0.0, stream=io.StringIO()) as progress:
        assert spark.range(0, 40, 1, 4).mapInPandas(slow, "id long").count() == 40
    assert any(" started: " in line for line in progress.lines), progress.lines
    assert any(" ended: " in line and line.endswith("/4 tasks") for line in progress.lines), (
        progress.lines
    )


def test_errors_name_the_column_or_param_before_any_job(spark):
    rows = [(SparseVector(3, [0], [1.0]), 1, [0]), (SparseVector(3, [1], [1.0]), 1, [0])]
    frame = spark.createDataFrame(rows, ["features", "group_id", "group_labels"])
    tracker = classic.status_tracker(spark)  # None under Spark Connect: jobs are not observable
    jobs_before = set(tracker.getJobIdsForGroup()) if tracker is not None else set()
    with pytest.raises(
        ValueError, match="no group_labels column 'tags'.*features, group_id, group_labels"
    ):
        GRLR(groupLabelsCol="tags").fit(frame)
    with pytest.raises(
        TypeError, match="column 'group_id' \\(features\\) must be a Spark ML vector.*bigint"
    ):
        GRLR(featuresCol="group_id").fit(frame)
    with pytest.raises(
        TypeError, match="column 'features' \\(group_labels\\) must be an array of label ids"
    ):
        GRLR(groupLabelsCol="features").fit(frame)
    with pytest.raises(ValueError, match="stepSize must be a finite number > 0, got -1.0"):
        GRLR(stepSize=-1.0).fit(frame)
    with pytest.raises(ValueError, match="numTrees must be >= 1"):
        LabelTreeClassifier(numTrees=0).fit(frame.withColumnRenamed("group_labels", "labels"))
    with pytest.raises(ValueError, match="xAccess must be auto, cached or joined"):
        GRLR(xAccess="sometimes").fit(frame)
    with pytest.raises(TypeError, match="column 'labels' \\(labels\\) must be an array"):
        evaluate(frame.withColumn("labels", F.lit(1)).withColumn("prediction", F.array(F.lit(1))))
    if tracker is not None:
        assert set(tracker.getJobIdsForGroup()) == jobs_before  # no Spark job ran


def test_group_members_with_different_labels_are_refused(spark):
    frame = spark.createDataFrame(
        [
            (SparseVector(3, [0], [1.0]), "g1", [0, 1]),
            (SparseVector(3, [1], [1.0]), "g1", [1]),
            (SparseVector(3, [2], [1.0]), "g2", [2]),
        ],
        ["features", "bag", "group_labels"],
    )
    with pytest.raises(
        ValueError, match="members of group 'g1' \\(column 'bag'\\) have different 'group_labels'"
    ):
        GRLR(groupCol="bag").fit(frame)


def test_transform_never_overwrites_a_column(spark, r4, monkeypatch):
    """Refused before the assignment or the prediction runs: the output columns are known."""

    def must_not_run(*args, **kwargs):
        raise AssertionError("the stage ran before its output columns were checked")

    samples = r4.samples(labelsCol="labels")  # true labels already in "labels"
    model = GRLR(maxIter=0).fit(samples)
    monkeypatch.setattr(type(model), "transformDataset", must_not_run)
    with pytest.raises(ValueError, match="already has a column 'labels'"):
        model.transform(samples)
    weighted = r4.samples(labelsCol="label_weights")  # any column of that name
    soft = GRLR(maxIter=0, weighting="soft").fit(weighted)
    with pytest.raises(ValueError, match="already has a column 'label_weights'"):
        soft.transform(weighted)
    rows = [([0], [1.0], [0]), ([1], [1.0], [1])]
    ova = OneVsRestXMC(numFeatures=2).fit(
        spark.createDataFrame(rows, ["feat_idx", "feat_val", "labels"])
    )
    monkeypatch.setattr(type(ova), "transformDataset", must_not_run)
    with pytest.raises(ValueError, match="already has a column 'prediction'"):
        ova.transform(spark.createDataFrame(rows, ["feat_idx", "feat_val", "prediction"]))


def test_array_features_equal_vector_features(spark):
    """features given as feat_idx / feat_val arrays train and predict like the SparseVector column."""
    rows = [
        ([0, 2], [1.0, 0.5], [0]),
        ([1], [1.0], [1]),
        ([2, 3], [1.0, 2.0], [2]),
        ([0, 3], [0.3, 1.0], [0, 2]),
    ]
    arrays = spark.createDataFrame(rows, ["feat_idx", "feat_val", "labels"])
    vectors = spark.createDataFrame(
        [(SparseVector(4, i, v), y) for i, v, y in rows], ["features", "labels"]
    )
    got = {}
    for name, frame in (("arrays", arrays), ("vectors", vectors)):
        model = OneVsRestXMC(topK=2, numFeatures=4 if name == "arrays" else None).fit(frame)
        got[name] = sorted(
            (tuple(r.labels), tuple(r.prediction), tuple(round(x, 6) for x in r.scores))
            for r in model.transform(frame).collect()
        )
    assert got["arrays"] == got["vectors"]
    assert all(p[0] in y for y, p, _ in got["vectors"])  # a label of the sample's own ranks first


def test_feature_ids_beyond_the_space_are_refused(spark):
    frame = spark.createDataFrame(
        [([0, 7], [1.0, 1.0], [0]), ([1], [1.0], [1])], ["feat_idx", "feat_val", "labels"]
    )
    with pytest.raises(ValueError, match="feature id 7, beyond the feature space of 4"):
        OneVsRestXMC(numFeatures=4).fit(frame)


def test_evaluate_hand_worked(spark):
    """Two rows, k = 2: true {0, 1} / {2}; predicted [0, 2] / [1, 2]."""
    frame = spark.createDataFrame([([0, 1], [0, 2]), ([2], [1, 2])], ["labels", "prediction"])
    m = evaluate(frame, k=2, propensityA=0.55, propensityB=1.5)
    assert m["P@1"] == 0.5 and m["P@2"] == 0.5
    ndcg2 = (1 / (1 + 1 / math.log2(3)) + (1 / math.log2(3)) / 1) / 2
    assert m["nDCG@2"] == pytest.approx(ndcg2)
    # propensities from the frame's own labels: every label seen once, so PSP@1 = P@1's share
    assert m["PSP@1"] == pytest.approx(0.5)
    # from a reference where label 0 is common: n = 5, counts (3, 1, 1); 1/p_l = 1 + C (n_l + B)^-A,
    # C = (ln n - 1)(B + 1)^A (Jain et al. 2016). PSP@1 = (row 1's gain 1/p_0) / (best: 1/p_1 + 1/p_2)
    ref = spark.createDataFrame([([0],), ([0],), ([0],), ([1],), ([2],)], ["labels"])
    m = evaluate(frame, k=2, propensityFrom=ref)
    c = (math.log(5) - 1) * 2.5**0.55
    inv0, inv1 = 1 + c * (3 + 1.5) ** -0.55, 1 + c * (1 + 1.5) ** -0.55
    assert m["PSP@1"] == pytest.approx(inv0 / (inv1 + inv1))


@pytest.mark.slow  # the whole example twice: ingest, aggregate, GRLR, 3 trees, save, load, predict
@pytest.mark.parametrize("connect", [False, True], ids=["classic", "connect"])
def test_readme_from_python_runs_as_written(tmp_path, connect):
    """The README's "From Python" example runs as written, as a script started with this
    interpreter's path (``.venv/bin/python example.py``) and no activated venv (the venv's bin
    folder is not on PATH), in a folder of its own; and with ``local_session(connect=True)``, the
    variant the README names, on Spark Connect. Both give the main job's EAGLE P@1 on delicious
    R-4 (conf/local.yaml's stages and settings)."""
    import ast
    import sys

    text = (ROOT / "README.md").read_text()
    section = text.split("## From Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "spark = local_session(cores=2)" in code
    if connect:
        code = code.replace("local_session(cores=2)", "local_session(cores=2, connect=True)")
    script = tmp_path / "example.py"
    script.write_text(code)
    bin_dir = os.path.dirname(sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if os.path.abspath(p) != bin_dir
    )
    if "grpc" not in sys.modules and connect:
        pytest.importorskip("grpc", reason="the Spark Connect client is not installed")
    printed = ast.literal_eval(last_line_of([str(script)], tmp_path, env, 1200))  # a dict
    import json

    main_job = json.loads((ROOT / "benchmarks" / "reports" / "main_job.json").read_text())
    want = main_job["comparison"]["eagle"]["P@1"]  # what the README quotes (test_figures)
    assert printed["P@1"] == pytest.approx(want, abs=0.005)
    assert f"P@1 {want:.2f}" in text
    assert (tmp_path / "runs" / "py" / "tree" / "metadata").is_dir()


def test_a_killed_drivers_work_folder_is_removed_by_the_next_driver(tmp_path):
    """A driver killed (SIGKILL: no exit handler runs) leaves its work folder, held-out splits and
    all; the next driver's first work folder removes it, and keeps a live driver's."""
    import subprocess
    import sys
    import textwrap

    from eagle_spark.io.work import WORK_PREFIX, sweep_dead_work

    script = textwrap.dedent(
        """
        import os, pathlib, signal
        from eagle_spark.io.work import work_folder

        class Conf:
            def get(self, key, default=None):
                return default

        class Session:
            conf = Conf()

        folder = pathlib.Path(work_folder(Session(), "held-out-split"))
        folder.mkdir()
        (folder / "part.parquet").write_bytes(b"x" * 100)
        print(folder.parent, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == -9, done.stderr
    left = pathlib.Path(done.stdout.strip())
    assert left.parent == tmp_path and left.name.startswith(WORK_PREFIX) and left.exists()
    live = tmp_path / f"{WORK_PREFIX}{os.getpid()}-abc123"
    live.mkdir()
    foreign = tmp_path / f"{WORK_PREFIX}abc123"  # no pid in the name: not ours to judge
    foreign.mkdir()
    assert sweep_dead_work(str(tmp_path)) == [str(left)]
    assert not left.exists() and live.exists() and foreign.exists()
