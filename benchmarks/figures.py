"""The figures README.md, docs/design.md and docs/experiments.md quote, each read from its
benchmark's report.

    python benchmarks/figures.py           # print the generated blocks
    python benchmarks/figures.py --write   # rewrite them in README.md and docs/*.md

A block sits between ``<!-- figures:<name> -->`` and ``<!-- /figures:<name> -->`` in its document
and is generated whole from ``benchmarks/reports/*.json``; nothing in it is typed by hand, and
``tests/unit/test_figures.py`` fails when a document's block differs from what the reports give
now (rerun a benchmark, then ``--write``). Each figure names its report.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
from typing import Any, Callable, Optional

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPORTS = ROOT / "benchmarks" / "reports"


def report(name: str) -> dict[str, Any]:
    """The report ``benchmarks/reports/<name>.json``.

    Raises:
        FileNotFoundError: no such report.
    """
    return json.loads((REPORTS / f"{name}.json").read_text())


def _row(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    if len(found) != 1:
        raise LookupError(f"{len(found)} rows match {match}")
    return found[0]


def _pk(row: dict[str, Any]) -> str:
    return f"{row['P@1']:.2f} / {row['P@3']:.2f} / {row['P@5']:.2f}"


def _signed(d: dict[str, float]) -> str:
    return " / ".join(f"{d[k]:+.2f}" for k in ("P@1", "P@3", "P@5"))


def agreement() -> tuple[int, int]:
    """(cells where the group-level choice of ``auto`` is within 0.5 P@5 of the sample-level best,
    cells), over the selection reports (``candidates`` auto, criterion multiset)."""
    rows = [
        r
        for name in ("selection", "selection_synth")
        for r in report(name)["rows"]
        if r["candidates"] == "auto" and r["criterion"] == "multiset"
    ]
    return sum(r["sample P@5 best"] - r["sample P@5 chosen"] <= 0.5 for r in rows), len(rows)


def _tree_and_omikuji(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The label tree's and omikuji's rows of ``benchmarks/peers.py``'s report `name`."""
    rows = report(name)["rows"]
    return _row(rows, model="eagle_spark tree"), _row(rows, model="omikuji (Parabel, 3 trees)")


def readme() -> list[str]:
    """README.md's "Measured" list."""
    main = report("main_job")
    comp = main["comparison"]
    ingest = report("ingest")["rows"]
    plain, gz = _row(ingest, input="plain"), _row(ingest, input="gzip")
    synth = report("synth_aggregate")["rows"]
    gen, agg = _row(synth, step="synth", scale=1.0), _row(synth, step="aggregate R-10", scale=1.0)
    grlr = report("grlr_scale_1.0")["rows"]
    embed, assign = _row(grlr, step="embed T=20"), _row(grlr, step="assign eagle")
    both = _row(grlr, step="embed + assign (EAGLE)")
    cls = report("classifiers")["rows"]
    seeds = report("peers_bibtex_delicious_seeds")["rows"]

    def seed_mean(data: str) -> float:
        return statistics.mean(r["P@1"] for r in seeds if r["dataset"] == data)

    def p1(data: str, model: str) -> str:
        return f"{_row(cls, dataset=data, model=model)['P@1']:.2f}"

    t2 = report("table2_targets")["targets"]
    table2_pruned = report("table2_pruned")
    pruned = {**table2_pruned["targets"], "assign": table2_pruned["assign"]}
    in_sample = report("table2_auto")["targets"]
    default = report("table2_r1x2")["targets"]
    agree, cells = agreement()
    lines = [
        f"- The main job (`pipeline --conf conf/local.yaml --compare`, delicious R-4, "
        f"{len(main['rows']) - 1} stages): {main['median_wall_s']:.0f} s as a whole command (median of "
        f"{main['runs']} runs), peak RSS {main['peak_rss_GB']:.1f} GB; P@1/3/5 Baseline "
        f"{_pk(comp['baseline'])}, EAGLE-0 {_pk(comp['eagle0'])}, EAGLE {_pk(comp['eagle'])} "
        "(`main_job.json`).",
        f"- Ingest: {plain['lines']:,} lines ({plain['input_MB']:.0f} MB) in {plain['seconds']} s = "
        f"{plain['lines_per_s']:,} lines/s, peak RSS {plain['peak_rss_GB']} GB (all processes); gzip "
        f"(one task: gzip does not split) {gz['lines_per_s']:,} lines/s (`ingest.json`).",
        f"- {_generator_of('synth_aggregate', 'grlr_scale_1.0').capitalize()} synthetic Wiki-325K at "
        f"scale 1.0 ({gen['samples']:,} samples): generated in {gen['seconds']} s, aggregated into random groups of 10 in "
        f"{agg['seconds']} s, peak RSS {agg['peak_rss_GB']} GB (`synth_aggregate.json`); GRLR (T=20) + "
        f"EAGLE assignment {both['seconds']:.0f} s (embed {embed['seconds']:.0f} s, assign "
        f"{assign['seconds']:.0f} s; {both['ratio_to_floor']}x the arithmetic floor of its sparse "
        f"products), peak PSS {embed['peak_pss_GB']} GB, assignment precision {assign['precision']} "
        "(`grlr_scale_1.0.json`).",
        f"- Classifiers, P@1 on bibtex / delicious (`classifiers.json`): tree "
        f"{p1('bibtex', 'eagle_spark tree')} / {p1('delicious', 'eagle_spark tree')}, one-vs-all "
        f"{p1('bibtex', 'eagle_spark ova')} / {p1('delicious', 'eagle_spark ova')}, omikuji "
        f"{p1('bibtex', 'omikuji (Parabel, 3 trees)')} / {p1('delicious', 'omikuji (Parabel, 3 trees)')}, "
        f"napkinXC {p1('bibtex', 'napkinXC PLT')} / {p1('delicious', 'napkinXC PLT')}; the tree over "
        f"5 seeds {seed_mean('bibtex'):.2f} / {seed_mean('delicious'):.2f} "
        "(`peers_bibtex_delicious_seeds.json`).",
        "- The label tree against omikuji (Parabel mode, 3 trees, 2 threads) on "
        f"{_generator('peers_synth_wiki325k_0.1')} synthetic Wiki-325K, training as a whole call:",
        "",
        "  | data (report) | tree train s | omikuji train s | tree P@1/3/5 | omikuji P@1/3/5 | peak RSS GB tree / omikuji |",
        "  |---|---|---|---|---|---|",
    ]
    name = "peers_synth_wiki325k_0.1"
    tree, omi = _tree_and_omikuji(name)
    lines.append(
        f"  | scale 0.1, whole test set, median of 3 (`{name}.json`) | {tree['train_s']:,.1f} | "
        f"{omi['train_s']:,.1f} | {_pk(tree)} | {_pk(omi)} | {tree['peak_rss_GB']} / "
        f"{omi['peak_rss_GB']} |"
    )
    lines += [
        "",
        "- Learning from group labels, `auto` with its refined round cross-fitted in 3 folds "
        "(`auto r1x3`; the default cross-fits it in 2, which recovers as much on validation "
        "splits; each group label's soft weights on at most 2c members: "
        f"`assign.soft_keep` {pruned['assign']['soft_keep']:g}) "
        f"on the test sets of {_data_named('table2_pruned')} under R-4, R-10 and C-8 "
        f"({pruned['cells']} cells, `table2_pruned.json`): EAGLE minus the Baseline "
        f"{_signed(pruned['mean EAGLE - Baseline'])} at P@1/3/5, minus EAGLE (paper) "
        f"{_signed(pruned['mean EAGLE - EAGLE (paper)'])}; the default on "
        f"{_data_named('table2_r1x2')} ({default['cells']} cells, `table2_r1x2.json`) minus the "
        f"Baseline {_signed(default['mean EAGLE - Baseline'])}; with the round in-sample "
        f"(`table2_auto.json`) minus the Baseline {_signed(in_sample['mean EAGLE - Baseline'])}. "
        "In-sample and unpruned (`soft_keep` 0), on "
        f"{_data_named('table2_targets')} ({t2['cells']} cells, `table2_targets.json`): minus "
        f"the Baseline {_signed(t2['mean EAGLE - Baseline'])}, minus EAGLE (paper) "
        f"{_signed(t2['mean EAGLE - EAGLE (paper)'])}; the group-level choice "
        f"is within 0.5 P@5 of the sample-level best in {agree} of {cells} cells "
        f"(`selection.json`, `selection_synth.json`).",
    ]
    return lines


def _synth_compare(name: str, scale: str) -> tuple[str, str, str]:
    """design.md's row of a main-job report on the realistic Wiki-325K preset at `scale`: time,
    memory, P@k, the Oracle's shares when it trained beside it, ``auto``'s choice and cost."""
    synth = report(name)
    copied = [r for r in synth["rows"] if r.get("status", "").startswith("copied")]
    assigns = [r for r in synth["rows"] if r["stage"].startswith("assign_")]
    oracle = synth.get("oracle")
    value = (
        f"{synth['median_wall_s']:.0f} s, peak PSS {synth['peak_pss_GB']:.1f} GB (RSS "
        f"{synth['peak_rss_GB']:.1f}); P@1/3/5 "
        + ", ".join(f"{m} {_pk(v)}" for m, v in synth["comparison"].items())
    )
    if oracle:  # the Oracle trained beside it: each method's P@1 as a share of the Oracle's
        value += (
            f"; Oracle {_pk(oracle)} (its `train` {oracle['seconds']['train']:.0f} s); P@1 / "
            "Oracle's: " + ", ".join(f"{m} {v['P@1']:.2f}" for m, v in synth["to_oracle"].items())
        )
    for method, chosen in (synth.get("selection") or {}).items():
        value += (
            f"; {method}'s `auto` chose {chosen['chose']}, selection "
            f"{chosen['selection job s']:.0f} s = {chosen['selection / training']:.2f} x the "
            "winner's training"
            + (
                f" ({chosen['selection / training, task s']:.2f} x in task seconds)"
                if chosen.get("selection / training, task s") is not None
                else ""
            )
        )
    if copied:
        value += f"; {len(copied)} stages copied from " + ", ".join(
            sorted({r["status"].removeprefix("copied from ") for r in copied})
        )
    value += "; " + ", ".join(f"{r['stage']} {r['median s']:.0f} s" for r in assigns)
    return (
        f"main job (`--compare`) on {_generator(name)} synthetic Wiki-325K {scale} (whole test "
        "set), one run" + ("" if oracle else ", no Oracle"),
        value,
        name,
    )


def design() -> list[str]:
    """docs/design.md's "Current figures" table."""
    rows: list[tuple[str, str, str]] = []
    main = report("main_job")
    rows.append(
        (
            "main job, delicious R-4, whole command (median)",
            f"{main['median_wall_s']:.0f} s, peak RSS {main['peak_rss_GB']:.1f} GB",
            "main_job",
        )
    )
    whole = _row(main["rows"], stage="whole command")
    cores = main["machine"]["cpus"]
    rows.append(
        (
            "the main job's Spark jobs; its tasks' work, share of the cores over the command",
            f"{whole['spark jobs']:,.0f} jobs; {whole['task s']:.0f} core-s, "
            f"{whole['task s'] / (cores * whole['median s']):.0%} of {cores} cores",
            "main_job",
        )
    )
    # the variants below ran with auto's refined round in-sample: compared with that main job
    in_sample = report("main_job_in_sample")
    in_sample_whole = _row(in_sample["rows"], stage="whole command")
    rows.append(
        (
            "main job, the default / `auto` with the refined round in-sample: its tasks' work "
            "(the two measured on different days, so their wall seconds are not compared)",
            f"{whole['task s']:.0f} / {in_sample_whole['task s']:.0f} core-s "
            f"({whole['task s'] / in_sample_whole['task s']:.2f}x); {whole['spark jobs']:,.0f} / "
            f"{in_sample_whole['spark jobs']:,.0f} Spark jobs",
            "main_job_in_sample",
        )
    )
    alone = report("main_job_one_method_at_a_time")
    rows.append(
        (
            "main job with the refined round in-sample, one method at a time "
            "(`pipeline.methods_at_once=1`) / side by side (`main_job_in_sample`)",
            f"{alone['median_wall_s']:.0f} s / {in_sample['median_wall_s']:.0f} s; same table: "
            f"{alone['comparison'] == in_sample['comparison']}",
            "main_job_one_method_at_a_time",
        )
    )
    cold = report("main_job_no_class_archive")
    rows.append(
        (
            "main job with the refined round in-sample, without the driver's class archive "
            "(`spark.class_archive=none`) / with it",
            f"{cold['median_wall_s']:.0f} s / {in_sample['median_wall_s']:.0f} s; same table: "
            f"{cold['comparison'] == in_sample['comparison']}",
            "main_job_no_class_archive",
        )
    )
    full_jit = report("main_job_jit_full")
    rows.append(
        (
            "main job with the refined round in-sample, with the driver JVM's both compilers "
            "(`spark.driver_jit=full`) / its first only (`auto` in local mode)",
            f"{full_jit['median_wall_s']:.0f} s / {in_sample['median_wall_s']:.0f} s; compilers "
            f"{full_jit['cpu_s']['jvm compilers']:.0f} / {in_sample['cpu_s']['jvm compilers']:.0f} "
            f"core-s; same table: {full_jit['comparison'] == in_sample['comparison']}",
            "main_job_jit_full",
        )
    )
    rows.append(
        (
            "the main job's CPU by process kind (medians)",
            ", ".join(f"{kind} {sec:.0f} core-s" for kind, sec in main["cpu_s"].items()),
            "main_job",
        )
    )
    hard = report("main_job_hard")
    rows.append(
        (
            "main job with the paper's assignment (`assign.weighting=hard`) / `auto` with the "
            "refined round in-sample",
            f"{hard['median_wall_s']:.0f} s / {in_sample['median_wall_s']:.0f} s; "
            f"{_row(hard['rows'], stage='whole command')['spark jobs']:,.0f} / "
            f"{in_sample_whole['spark jobs']:,.0f} Spark jobs",
            "main_job_hard",
        )
    )
    steps = report("main_job_steps")
    top = sorted(
        (r for r in steps["steps"] if r["stage"] == "assign_eagle0" and " / " not in r["step"]),
        key=lambda r: -r["task s"],
    )[:3]
    rows.append(
        (
            "the main job's `assign_eagle0` with the round in 3 folds (`auto r1x3`): its "
            "costliest steps",
            ", ".join(f"{r['step']} {r['task s']:.0f} core-s" for r in top),
            "main_job_steps",
        )
    )
    for name, scale in (  # the realistic preset's compares (0.2, 0.3 without the Oracle)
        ("main_job_synth_wiki325k_0.1_r1x2", "0.1, the default (the round in 2 folds)"),
        ("main_job_synth_wiki325k_0.1", "0.1, auto with the round in-sample"),
        ("main_job_synth_wiki325k_0.2", "0.2, auto with the round in-sample"),
        ("main_job_synth_wiki325k_0.3", "0.3, auto with the round in-sample"),
    ):
        if (REPORTS / f"{name}.json").exists():
            rows.append(_synth_compare(name, scale))
    stray = report("labels_present")["rows"]
    rows.append(
        (
            "one stray label id on a 45-label frame (10^5, 10^7, 2^31 - 2): the fit's time over "
            "the fit without it, labels trained",
            "; ".join(
                f"{est} "
                + ", ".join(
                    f"{r['x without']:.2f}x"
                    for r in stray
                    if r["estimator"] == est and r["stray id"]
                )
                + f" ({max(r['labels trained'] for r in stray if r['estimator'] == est)} labels)"
                for est in dict.fromkeys(r["estimator"] for r in stray)
            ),
            "labels_present",
        )
    )
    connect = report("connect_main_job")
    on = _row(connect["rows"], session="connect")
    rows.append(
        (
            "main job under Spark Connect (`--remote local[2]`) / classic, one run each",
            f"{on['median s']:.0f} s, {on['/ classic']}x; same table: {on['same table']}",
            "connect_main_job",
        )
    )
    plain = _row(report("ingest")["rows"], input="plain")
    rows.append(("ingest, plain XC text", f"{plain['lines_per_s']:,} lines/s", "ingest"))
    grlr = report("grlr_scale_1.0")["rows"]
    both = _row(grlr, step="embed + assign (EAGLE)")
    rows.append(
        (
            f"GRLR + assignment, {_generator('grlr_scale_1.0')} synthetic Wiki-325K 1.0, cached rows",
            f"{both['seconds']:.0f} s, {both['ratio_to_floor']}x the floor",
            "grlr_scale_1.0",
        )
    )
    joined = _row(report("grlr_scale_1.0_joined")["rows"], step="embed + assign (EAGLE)")
    emb_j = _row(report("grlr_scale_1.0_joined")["rows"], step="embed T=20")
    rows.append(
        (
            f"GRLR + assignment, {_generator('grlr_scale_1.0_joined')} synthetic Wiki-325K 1.0, "
            "joined rows",
            f"{joined['seconds']:.0f} s, peak PSS {emb_j['peak_pss_GB']} GB, "
            f"{emb_j['shuffle_MB']:,.0f} MB shuffled",
            "grlr_scale_1.0_joined",
        )
    )
    for name, rows_kind in (("grlr_scale_0.1", "cached"), ("grlr_scale_0.1_joined", "joined")):
        r = _row(report(name)["rows"], step="embed T=20")
        rows.append(
            (
                f"GRLR, {_generator(name)} synthetic Wiki-325K 0.1, {rows_kind} rows",
                f"embed {r['seconds']} s, peak PSS {r['peak_pss_GB']} GB, {r['shuffle_MB']:,.0f} MB shuffled",
                name,
            )
        )
    name = "peers_synth_wiki325k_0.1"
    tree, omi = _tree_and_omikuji(name)
    rows.append(
        (
            f"tree / omikuji training, {_generator(name)} synthetic Wiki-325K 0.1",
            f"{tree['train_s']:,.1f} / {omi['train_s']:,.1f} s "
            f"({tree['train_s'] / omi['train_s']:.2f}x), P@1 {tree['P@1']:.2f} / {omi['P@1']:.2f}",
            name,
        )
    )
    tuned = "peers_validation_tree_defaults"
    val = report(tuned)["rows"]
    split = (
        "P@1/3/5 on validation splits (20% of each training file; wiki325k: "
        f"{_generator(tuned)} synthetic)"
    )
    datasets = list(dict.fromkeys(r["dataset"] for r in val))
    rows.append(
        (
            "the tree's rankers' cost chosen on held-out samples (`tree.ranker_C_choice`) minus "
            f"`none` (C 0.5), {split}; the cost chosen",
            "; ".join(
                f"{data.removesuffix('_val')} "
                + " / ".join(f"{chosen[f'P@{k}'] - fixed[f'P@{k}']:+.2f}" for k in (1, 3, 5))
                + f" ({chosen['ranker_C']:g})"
                for data in datasets
                for chosen, fixed in [
                    (
                        _row(val, dataset=data, model="eagle_spark tree"),
                        _row(val, dataset=data, model="eagle_spark tree ranker_C_choice=none"),
                    )
                ]
            ),
            tuned,
        )
    )
    rows.append(
        (
            "fewer passes for the tree's matchers (`tree.matcher_max_iter` 5 / 7) minus the "
            f"default 10, {split}; training time against the default's",
            "; ".join(
                f"{data.removesuffix('_val')} "
                + ", ".join(
                    " / ".join(f"{fewer[f'P@{k}'] - ten[f'P@{k}']:+.2f}" for k in (1, 3, 5))
                    + f" ({fewer['train_s'] / ten['train_s']:.2f}x)"
                    for fewer in (
                        _row(val, dataset=data, model=f"eagle_spark tree matcher_max_iter={n}")
                        for n in (5, 7)
                    )
                )
                for data in datasets
                for ten in [_row(val, dataset=data, model="eagle_spark tree")]
            ),
            tuned,
        )
    )
    for name, data in (
        ("tree_time_delicious", "delicious R-4, Baseline (main job)"),
        ("tree_time_wiki325k_0.05", f"{_tree_time_generator()} synthetic Wiki-325K 0.05"),
    ):
        r = report(name)
        rows.append(
            (
                f"`eagle-spark train --model tree` by step, {data}",
                f"{r['command_s']:.1f} s: "
                + ", ".join(f"{st['step']} {st['job s']:.1f}" for st in r["steps"][:-1]),
                name,
            )
        )
        rows.append(
            (
                f"the tree's liblinear calls by unit kind (its first tree again, one core), {data}",
                "; ".join(
                    f"{k['unit kind']} {k['liblinear s']:.2f} s ({k['classifiers']:,} "
                    f"classifiers, {k['ns per nonzero']:.0f} ns per nonzero, one pass "
                    f"{k['one pass s']:.2f} s)"
                    for k in r["rows"]
                )
                + f"; the units {r['solver']['units s']:.2f} s in all",
                name,
            )
        )
    for scale in ("0.05", "0.1"):
        name = f"peers_synth_wiki325k_{scale}_command"
        tree, omi = _tree_and_omikuji(name)
        rows.append(
            (
                "`eagle-spark train --model tree` as a whole command (in-process training) / "
                f"omikuji training, {_generator(name)} synthetic Wiki-325K {scale}",
                f"{tree['train_command_s']:,.1f} ({tree['train_s']:,.1f}) / {omi['train_s']:,.1f} s "
                f"({tree['train_command_s'] / omi['train_s']:.2f}x), P@1/3/5 "
                + " / ".join(f"{tree[f'P@{k}'] - omi[f'P@{k}']:+.2f}" for k in (1, 3, 5))
                + " against omikuji",
                name,
            )
        )
    name = "peers_synth_wiki325k_0.1"
    tree, omi = _tree_and_omikuji(name)
    rows.append(
        (
            f"tree / omikuji prediction, {_generator(name)} synthetic Wiki-325K 0.1",
            f"{tree['predict_ms_row_core']} / {omi['predict_ms_row_core']} ms per row per core",
            name,
        )
    )
    eur = report("peers_synth_eurlex4k_1.0")["rows"]
    rows.append(
        (
            f"P@1 on {_generator('peers_synth_eurlex4k_1.0')} synthetic eurlex4k 1.0: tree / "
            "one-vs-all / omikuji / napkinXC",
            " / ".join(
                f"{_row(eur, model=m)['P@1']:.2f}"
                for m in (
                    "eagle_spark tree",
                    "eagle_spark ova",
                    "omikuji (Parabel, 3 trees)",
                    "napkinXC PLT",
                )
            ),
            "peers_synth_eurlex4k_1.0",
        )
    )
    mem = report("executor_memory_train_0.1")["rows"]
    rows.append(
        (
            f"training memory, local[4] / local[1], {_generator('executor_memory_train_0.1')} "
            "synthetic Wiki-325K 0.1",
            f"{_row(mem, slots=4)['pss_ratio']}x peak PSS",
            "executor_memory_train_0.1",
        )
    )
    name = "executor_memory"
    ratios = ", ".join(
        f"{x['step']} {x['pss_ratio']}x" for x in report(name)["rows"] if x["slots"] > 1
    )
    rows.append(
        (
            f"train / predict memory, local[4] / local[1], {_generator(name)} synthetic "
            "Wiki-325K 0.05",
            ratios,
            name,
        )
    )
    for scale in ("0.05", "0.1"):
        r = report(f"joined_training_wiki325k_{scale}")["rows"]
        c, j = _row(r, x_access="cached"), _row(r, x_access="joined")
        rows.append(
            (
                f"tree training, cached / joined rows, "
                f"{_generator(f'joined_training_wiki325k_{scale}')} synthetic Wiki-325K {scale}",
                f"{c['train_s']} / {j['train_s']} s, same model: {j['same_as_first']}",
                f"joined_training_wiki325k_{scale}",
            )
        )
    found = report("training_tasks")["rows"]
    rows.append(
        (
            "whole calls in as many tasks as the work needs (`min_task_work`) / always `tasks` "
            "(16)",
            "; ".join(
                f"{r['model']} on {r['data']}: {r['median s (rule)']:.2f} / "
                f"{r['median s (fixed)']:.2f} s ({r['tasks (rule)']} / {r['tasks (fixed)']} tasks)"
                for r in found
            )
            + f"; same output: {all(r['same output'] for r in found)}",
            "training_tasks",
        )
    )
    integ = report("integrity_cost")
    rows.append(
        (
            "file lists and checks, share of the main job",
            f"{integ['median_share_%']}%",
            "integrity_cost",
        )
    )
    soft_keep = report("table2_pruned")["assign"]["soft_keep"]
    for name, what in (
        ("table2_pruned", f"EAGLE (default, `soft_keep` {soft_keep:g})"),
        ("table2_auto", "EAGLE (`auto`, the refined round in-sample)"),
        ("table2_targets", "EAGLE (`auto` in-sample, unpruned: `soft_keep` 0)"),
    ):
        targets = report(name)["targets"]
        rows.append(
            (
                f"{what} minus Baseline, mean of {targets['cells']} test cells "
                f"({_data_named(name)})",
                _signed(targets["mean EAGLE - Baseline"]),
                name,
            )
        )
    agree, cells = agreement()
    rows.append(
        (
            "group-level choice within 0.5 P@5 of the sample-level best",
            f"{agree} of {cells} cells",
            "selection, selection_synth",
        )
    )
    rows += proxy_size_rows()
    for name, data in cost_reports():
        label = f"EAGLE's fit, auto / hard, {data}"
        found = report(name)["rows"]
        auto = _row(found, setting="auto")
        figure = f"{auto['fit / hard']}x (chose {auto['chosen']})"
        alone = winner_alone(found, auto)
        if alone:  # what the choice costs without choosing
            figure += f"; {alone['setting']} alone {alone['fit / hard']}x"
        rows.append((label, figure, name))
    rows.append(default_choosing_row())
    lines = ["| what | figure | report |", "|---|---|---|"]
    for what, figure, names in rows:
        refs = ", ".join(f"`{n.strip()}.json`" for n in names.split(","))
        lines.append(f"| {what} | {figure} | {refs} |")
    return lines


PROXY_SIZE = (
    ("selection_proxy_size_delicious", "delicious R-4"),
    ("selection_proxy_size_wiki325k_0.05", "realistic synthetic Wiki-325K 0.05 R-4"),
    ("selection_proxy_size_wiki325k_0.1_r10", "realistic synthetic Wiki-325K 0.1 R-10"),
)
"""The reports of ``benchmarks/selection_proxy_size.py`` and what each measured."""


def proxy_size_rows() -> list[tuple[str, str, str]]:
    """design.md's current-figures rows of ``selection_proxy_size`` reports: whether the choice
    held at every cap, the margin and seconds at the default cap (:data:`eagle_spark.assignment.
    selection.MAX_PROXY_PAIRS`, else the smallest measured) against no cap, in group labels (Y2's
    pairs) and the Baseline positives they carry."""
    from eagle_spark.assignment.selection import MAX_PROXY_PAIRS

    rows = []
    for name, label in PROXY_SIZE:
        found = report(name)["rows"]
        full = _row(found, cap="none")
        capped = [r for r in found if r["cap"] != "none"]
        least = next(
            (r for r in capped if r["cap"] == MAX_PROXY_PAIRS),
            min(capped, key=lambda r: r["proxy pairs"]),
        )
        changed = [r for r in found if r["chosen"] != full["chosen"]]
        held = (
            f"chose {full['chosen']} at every cap"
            if not changed
            else f"chose {full['chosen']} uncapped, another with "
            + ", ".join(f"{r['proxy pairs']:,}" for r in changed)
            + " group labels"
        )
        rows.append(
            (
                f"`auto`'s choice with its proxies trained on fewer group labels, {label}",
                f"{held}; margin {least['margin']:.2f} points with {least['proxy pairs']:,} group "
                f"labels ({least['proxy groups']:,} groups, {least['proxy positives']:,} Baseline "
                f"positives), {full['margin']:.2f} with all {full['proxy pairs']:,}; the choice "
                f"{least['seconds']:.0f} / {full['seconds']:.0f} s",
                name,
            )
        )
    return rows


def _generator(name: str) -> str:
    """Which generator made the synthetic data of report `name`: "realistic" when its ``data`` or
    ``generator`` says so (the realistic presets and twins), else "planted" (the generator before
    them, whose reports say neither)."""
    rep = report(name)
    return (
        "realistic"
        if "realistic" in f"{rep.get('data', '')} {rep.get('generator', '')}"
        else "planted"
    )


def _generator_of(*names: str) -> str:
    """The one generator of reports `names` (:func:`_generator`), for a sentence quoting them
    together; ValueError when they were made by different generators."""
    found = {_generator(name) for name in names}
    if len(found) != 1:
        raise ValueError(f"{', '.join(names)} were made by different generators: {sorted(found)}")
    return found.pop()


def _data_named(name: str) -> str:
    """The data sets of ``table2.py``'s report `name` as prose: a real one by its name, a synthetic
    one (``synth:<preset>:<scale>``) as "<generator> synthetic <preset> <scale>", the generator
    from the report's ``generator`` map (planted when it names none)."""
    r = report(name)
    made = r.get("generator") or {}
    named = []
    for d in r["datasets"]:
        if d.startswith("synth:"):
            _, preset, scale = d.split(":")[:3]
            named.append(f"{made.get(d) or 'planted'} synthetic {preset} {scale}")
        else:
            named.append(d)
    return ", ".join(named[:-1]) + f" and {named[-1]}" if len(named) > 1 else named[0]


def _tree_time_generator() -> str:
    """The generator of ``tree_time_wiki325k_0.05``'s data: its training set is the one
    ``peers_synth_wiki325k_0.05_command`` ingested into its workdir (ValueError when it is not)."""
    peers = report("peers_synth_wiki325k_0.05_command")
    if not report("tree_time_wiki325k_0.05")["dataset"].startswith(str(peers.get("workdir"))):
        raise ValueError(
            "tree_time_wiki325k_0.05 did not train on peers_synth_wiki325k_0.05_command's data"
        )
    return _generator("peers_synth_wiki325k_0.05_command")


COST_REPORTS = (
    ("assignment_cost_delicious", "delicious R-4"),
    ("assignment_cost_wiki325k_0.1", "Wiki-325K 0.1 R-10"),
    ("assignment_cost_wiki325k_0.1_r4", "Wiki-325K 0.1 R-4"),
)
"""``benchmarks/assignment_cost.py``'s reports and their data (a synthetic one's generator is
read from the report)."""


def cost_reports(reports: tuple[tuple[str, str], ...] = COST_REPORTS) -> list[tuple[str, str]]:
    """(report name, its data as the tables name it) of `reports` (:data:`COST_REPORTS`): a
    synthetic one's data named with its generator."""
    return [
        (name, data if data.startswith("delicious") else f"{_generator(name)} synthetic {data}")
        for name, data in reports
    ]


def winner_alone(rows: list[dict[str, Any]], auto: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The row, among an ``assignment_cost`` report's `rows`, of the candidate that the ``auto``
    row `auto` chose run as a fixed setting (candidate ``soft-0.3+r1`` is setting ``soft
    T=0.3+r1``), or None when it was not run (or `auto` chose nothing)."""
    chosen = auto.get("chosen")
    setting = chosen.replace("soft-", "soft T=") if chosen else None
    return next((r for r in rows if setting and r["setting"] == setting), None)


def cost() -> list[str]:
    """docs/experiments.md's table of what learning from group labels costs, per setting
    (:data:`COST_REPORTS`)."""
    return cost_table(cost_reports())


R1X3_COST_REPORTS = (
    ("assignment_cost_delicious_r1x3", "delicious R-4"),
    ("assignment_cost_wiki325k_0.1_r1x3_whole_budget", "Wiki-325K 0.1 R-4, whole budget per fold"),
    ("assignment_cost_wiki325k_0.1_r1x3_every_label", "Wiki-325K 0.1 R-4, every label fitted"),
    ("assignment_cost_wiki325k_0.1_r1x3", "Wiki-325K 0.1 R-4"),
    ("assignment_cost_wiki325k_0.3_r1x3", "Wiki-325K 0.3 R-4"),
    ("assignment_cost_wiki325k_0.1_r1x2", "Wiki-325K 0.1 R-4, each auto alone"),
    ("assignment_cost_wiki325k_0.3_r1x2", "Wiki-325K 0.3 R-4, each auto alone"),
)
"""``assignment_cost`` reports of the cross-fitted round against ``auto`` (``auto r1x3`` first, the
later ``auto`` rows reusing its held-out split and the Baseline's score, unless ``each auto
alone``: ``--alone``) and their data."""


def cost_r1x3() -> list[str]:
    """docs/experiments.md's cost of ``auto r1x3`` against ``auto`` (:data:`R1X3_COST_REPORTS`),
    as :func:`cost_table`."""
    return cost_table(cost_reports(R1X3_COST_REPORTS))


R2X2_COST_REPORTS = (("assignment_cost_delicious_r2x2", "delicious R-4, each auto alone"),)
"""``assignment_cost`` report of two cross-fitted rounds (``auto r2x2``) against one (``auto
r1x2``, the default) and the in-sample round (``auto``), each choosing alone."""


def cost_r2x2() -> list[str]:
    """docs/experiments.md's cost of ``auto r2x2`` against ``auto r1x2`` and ``auto``
    (:data:`R2X2_COST_REPORTS`), as :func:`cost_table`."""
    return cost_table(cost_reports(R2X2_COST_REPORTS))


NEGATIVES_COST_REPORTS = (
    ("assignment_cost_delicious_neg", "delicious R-4"),
    ("assignment_cost_wiki325k_0.1_neg", "Wiki-325K 0.1 R-4"),
)
"""``assignment_cost`` reports of the refined candidate's scorer drawing R negatives per positive
(``assign.refine_negatives``) and their data."""


def cost_negatives() -> list[str]:
    """docs/experiments.md's cost of the scorer's negatives per positive
    (:data:`NEGATIVES_COST_REPORTS`), as :func:`cost_table`."""
    return cost_table(cost_reports(NEGATIVES_COST_REPORTS))


def choosing_ratio(hard: dict | None, r: dict) -> float | None:
    """What an ``auto`` row of an ``assignment_cost`` report does beyond the winner's own
    assignment (the `hard` row's assign stage) and its training, against that training (wall
    seconds of the stages); None for another row or without a `hard` row."""
    if hard is None or not r["setting"].startswith("auto"):
        return None
    return (r["assign s"] - hard["assign s"]) / r["train s"]


DEFAULT_COST_REPORTS = (
    ("assignment_cost_wiki325k_0.1_r1x2", 0.1, "auto r1x2"),
    ("assignment_cost_wiki325k_0.3_r1x2", 0.3, "auto r1x2"),
)
"""``assignment_cost`` reports of the default (``auto r1x2``: the round cross-fitted in 2 folds)
at realistic synthetic Wiki-325K R-4, their scales and the setting's row."""


def default_choosing_row() -> tuple[str, str, str]:
    """design.md's current-figures row of what the choosing costs at scale with the round
    cross-fitted (:data:`DEFAULT_COST_REPORTS`)."""
    figures = []
    for name, scale, setting in DEFAULT_COST_REPORTS:
        rows = report(name)["rows"]
        auto = _row(rows, setting=setting)
        ratio = choosing_ratio(_row(rows, setting="hard"), auto)
        figures.append(f"`{setting}` {ratio:.2f}x at {scale:g} (chose {auto['chosen']})")
    return (
        "the choosing with the round cross-fitted (the default: `auto r1x2`) / the winner's "
        "training, realistic synthetic Wiki-325K R-4",
        "; ".join(figures),
        ", ".join(name for name, _, _ in DEFAULT_COST_REPORTS),
    )


def cost_table(reports: list[tuple[str, str]]) -> list[str]:
    """The cost table of ``assignment_cost`` reports `reports` ((name, data) pairs): per setting
    the stages' seconds, the fit against hard's, the assign stage's Spark jobs, the fit's task
    core-seconds, the candidate chosen and what the choosing costs against the winner's training."""
    lines = [
        "| data | setting | embed s | assign s | train s | fit s | fit / hard | assign Spark jobs "
        "| fit task core-s | chosen | choosing / the winner's training | beyond the winner alone "
        "| report |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, data in reports:
        rows = report(name)["rows"]
        hard = next((r for r in rows if r["setting"] == "hard"), None)
        for r in rows:
            ratio = choosing_ratio(hard, r)
            choosing = "-" if ratio is None else f"{ratio:.2f}x"
            # the same beyond the winner's assignment as the winner alone makes it (its own row:
            # a refined candidate's scorer is its method's cost, chosen or not)
            alone = winner_alone(rows, r)
            beyond = (
                f"{(r['assign s'] - alone['assign s']) / r['train s']:.2f}x"
                if alone and r["setting"].startswith("auto")
                else "-"
            )
            cells = [
                r.get(k)
                for k in (
                    "embed s",
                    "assign s",
                    "train s",
                    "fit s",
                    "fit / hard",
                    "assign jobs",
                    "fit task s",
                )
            ]
            shown = ["-" if c is None else f"{c:,.1f}" for c in cells]
            shown[4] = "-" if cells[4] is None else f"{cells[4]:.2f}x"
            shown[5] = "-" if cells[5] is None else str(cells[5])
            lines.append(
                f"| {data} | {r['setting']} | "
                + " | ".join(shown)
                + f" | {r.get('chosen') or '-'} | {choosing} | {beyond} | `{name}.json` |"
            )
    return lines


def cost_model() -> list[str]:
    """docs/design.md's cost model table (``benchmarks/cost_model.py``'s report): per stage the
    fitted exponent, the check against a measured run, the local[1] -> local[N] speed-up and the
    predictions at scale 1.0 (the model's work on this machine, and wall seconds on 1, N, 32 and
    128 cores from the speed-up)."""
    r = report("cost_model")
    measure = r.get("measure", "task s")
    scales = ", ".join(f"{v:g} (`{name}.json`)" for name, v in r["fitted"].items())
    check, speedup = r.get("check"), r.get("speedup")
    full = r["predictions"].get("1") or {}
    cores = [k.split()[0] for k in full if k.endswith(" cores wall sum s")]
    head = "| stage | seconds ~ scale^b: b |"
    if check:
        head += f" predicted / measured at {check['scale']:g} (s) | error |"
    if speedup:
        head += f" speed-up local[1] -> local[{r['machine_cpus']}] at {speedup['scale']:g} | p |"
    if full:
        head += f" scale 1.0, {measure} |" + "".join(
            f" scale 1.0, {c} cores, wall s |" for c in cores
        )
    lines = [
        f"Fitted on the main job's runs at scales {scales} (`cost_model.json`; "
        f"{r['machine_cpus']} cores); the fitted seconds are the stages' {measure} (Spark task "
        "core-seconds: the stages run side by side, so wall seconds include waiting for cores).",
    ]
    if speedup:
        one, many = speedup["runs"]
        lines[0] += (
            f" The speed-up is the stage's wall seconds in `{one}.json` (local[1]) over "
            f"`{many}.json`; the whole command's was {speedup['whole command speed-up']:.2f}x. A "
            "stage's wall seconds on c cores are its one-core seconds (its work times the local[1] "
            "run's wall per task second) x ((1 - p) + p / c), Amdahl's law with the measured "
            "parallel share p: what the model says, ignoring a cluster's shuffle and start-up."
        )
    lines += ["", head, "|" + "---|" * (head.count("|") - 1)]
    by_stage = {row["stage"]: row for row in r["rows"]}
    per_stage = (speedup or {}).get("per stage", {})
    for stage, fitted in r["model"].items():
        cells = [stage, f"{fitted['b']:.2f}"]
        if check:
            row = by_stage.get(stage, {})
            predicted = next((v for k, v in row.items() if k.startswith("predicted s")), None)
            measured, error = row.get("measured s"), row.get("error")
            cells.append(
                "-"
                if predicted is None or measured is None
                else f"{predicted:,.0f} / {measured:,.0f}"
            )
            cells.append("-" if error is None else f"{100 * error:+.0f}%")
        if speedup:
            f = per_stage.get(stage)
            cells += ["-", "-"] if f is None else [f"{f['S']:.2f}x", f"{f['p']:.2f}"]
        if full:
            cells.append(f"{full[f'this machine {measure}'][stage]:,.0f}")
            for c in cores:
                v = full[f"{c} cores wall s"].get(stage)
                cells.append("-" if v is None else f"{v:,.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    total = ["total (stages summed)", ""]
    if check:
        total += [
            f"{check['total predicted s']:,.0f} / {check['total measured s']:,.0f}",
            f"{100 * check['total error']:+.0f}%",
        ]
    if speedup:
        total += [f"{speedup['whole command speed-up']:.2f}x (whole command)", ""]
    if full:
        total.append(f"{full[f'this machine total {measure}']:,.0f}")
        total += [f"{full[f'{c} cores wall sum s']:,.0f}" for c in cores]
    lines.append("| " + " | ".join(total) + " |")
    whole = [c for c in cores if f"{c} cores whole command s" in full]
    if whole:
        measured = (check or {}).get("whole command s")
        lines += [
            "",
            "The whole command at scale 1.0, between the shared stages plus the longest method's "
            "chain (the methods side by side) and the stages summed (one after the other): "
            + "; ".join(
                "{} cores {:,.0f}-{:,.0f} s".format(c, *full[f"{c} cores whole command s"])
                for c in whole
            )
            + "."
            + (
                " At {:g} on {} cores the same interval is {:,.0f}-{:,.0f} s; the run measured "
                "{:,.0f} s.".format(
                    check["scale"],
                    measured["cores"],
                    *measured["predicted interval"],
                    measured["measured"],
                )
                if measured
                else ""
            ),
        ]
    return lines


def frontier() -> list[str]:
    """docs/experiments.md's pruning frontier (``assignment_variants.py`` on validation splits):
    per variant its assigned pairs over hard top-c's (the rows the classifier trains on), the mean
    P@k over the Baseline's and against the unpruned soft weighting, and its worst cell. The
    variants of the budget report, then those of the keep report it does not have, each against
    the unpruned row of its own report."""
    unpruned = "soft T=0.3+r1"
    lines = [
        "| variant | max / mean pairs over top-c's | mean P@1 / P@3 / P@5 − Baseline "
        "| mean P@1 / P@3 / P@5 − unpruned | worst cell's P@1 − unpruned |",
        "|---|---|---|---|---|",
    ]
    shown: set[str] = set()
    for name in ("assignment_variants_budget", "assignment_variants_keep"):
        r = report(name)
        rows = [x for x in r["rows"] if x["variant"].startswith("EAGLE ")]
        cells = sorted({(x["dataset"], x["grouping"]) for x in rows})

        def at(variant: str, cell: tuple[str, str], rows: list[dict[str, Any]] = r["rows"]):
            return _row(rows, dataset=cell[0], grouping=cell[1], variant=variant)

        for summary in r["summary"]:
            variant = summary["variant"]
            if variant in shown:
                continue
            shown.add(variant)
            pairs = [at(f"EAGLE {variant}", c).get("pairs / top-c") for c in cells]
            pairs = [p for p in pairs if p is not None]
            vs = {
                k: [at(f"EAGLE {variant}", c)[k] - at(f"EAGLE {unpruned}", c)[k] for c in cells]
                for k in ("P@1", "P@3", "P@5")
            }
            worst = min(zip(vs["P@1"], cells))
            lines.append(
                f"| {variant} | "
                + (f"{max(pairs):.2f} / {sum(pairs) / len(pairs):.2f}" if pairs else "-")
                + " | "
                + " / ".join(
                    f"{summary[f'mean {k} - Baseline']:+.2f}" for k in ("P@1", "P@3", "P@5")
                )
                + " | "
                + " / ".join(f"{sum(v) / len(v):+.2f}" for v in vs.values())
                + f" | {worst[0]:+.2f} ({worst[1][0]} {worst[1][1]}) |"
            )
    return lines


def recovered(report_name: str) -> list[str]:
    """A table of ``assignment_variants.py``'s report `report_name` (validation splits): per EAGLE
    variant its largest assigned pairs over hard top-c's in any cell, the mean P@1/3/5 over the
    Baseline's, the mean share of the Oracle - Baseline gap it recovers ((EAGLE - Baseline) /
    (Oracle - Baseline), cells whose gap is above 0.5 points), and the seconds of its runs summed
    over the data sets (the benchmark times one run per data set and variant, all groupings; the
    first variant's also trains the Baseline, EAGLE-0 and the Oracle: not shown)."""
    r = report(report_name)
    rows = r["rows"]
    cells = sorted({(x["dataset"], x["grouping"]) for x in rows})
    lines = [
        "| variant | max pairs / top-c | mean P@1 / P@3 / P@5 − Baseline "
        "| recovered share of Oracle − Baseline, P@1 / P@3 / P@5 | the variant's runs, s |",
        "|---|---|---|---|---|",
    ]
    for i, summary in enumerate(r["summary"]):
        variant = summary["variant"]
        mine = [_row(rows, dataset=d, grouping=g, variant=f"EAGLE {variant}") for d, g in cells]
        runs = {d: x["seconds"] for (d, _), x in zip(cells, mine)}  # one run per data set
        share = []
        for k in ("P@1", "P@3", "P@5"):
            got = []
            for (d, g), row in zip(cells, mine):
                base = _row(rows, dataset=d, grouping=g, variant="Baseline")[k]
                gap = _row(rows, dataset=d, grouping=g, variant="Oracle")[k] - base
                if gap > 0.5:
                    got.append((row[k] - base) / gap)
            share.append(f"{sum(got) / len(got):.2f}" if got else "-")
        pairs = [x["pairs / top-c"] for x in mine if x.get("pairs / top-c") is not None]
        lines.append(
            f"| {variant} | "
            + (f"{max(pairs):.2f}" if pairs else "-")
            + " | "
            + " / ".join(f"{summary[f'mean {k} - Baseline']:+.2f}" for k in ("P@1", "P@3", "P@5"))
            + " | "
            + " / ".join(share)
            + (" | - |" if i == 0 else f" | {sum(runs.values()):.0f} |")
        )
    return lines


def _share(row: dict[str, Any], base: dict[str, Any], oracle: dict[str, Any], k: str) -> float:
    """(method - Baseline) / (Oracle - Baseline) at `k`: the share of what aggregation costs
    (the Oracle's lead over the Baseline) that a method recovers."""
    return (row[k] - base[k]) / (oracle[k] - base[k])


def shares(report_name: str) -> list[str]:
    """Per cell (data set, grouping) of a ``table2.py`` report and per method, the recovered share
    (:func:`_share`) at P@1 / P@3 / P@5, then their means over the cells that have it."""
    r = report(report_name)
    rows = r["rows"]
    methods = [("eagle_paper", "EAGLE (paper)"), ("eagle0", "EAGLE-0"), ("eagle", "EAGLE")]
    cells = [(d, g) for d in r["datasets"] for g in r["groupings"]]
    cells = [(d, g) for d, g in cells if any(x["dataset"] == d for x in rows)]
    lines = [
        "| data | grouping | " + " | ".join(name for _, name in methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    means: dict[str, list[list[float]]] = {m: [] for m, _ in methods}
    for d, g in cells:
        by = {x["method"]: x for x in rows if x["dataset"] == d and x["grouping"].startswith(g)}
        cols = []
        for m, _ in methods:
            if m not in by:  # a method the report did not run on this set
                cols.append("-")
                continue
            got = [_share(by[m], by["baseline"], by["oracle"], k) for k in ("P@1", "P@3", "P@5")]
            means[m].append(got)
            cols.append(" / ".join(f"{v:.2f}" for v in got))
        lines.append(f"| {d} | {by['eagle']['grouping']} | " + " | ".join(cols) + " |")
    lines.append(
        "| mean | |"
        + "".join(
            " " + " / ".join(f"{sum(c) / len(c):.2f}" for c in zip(*means[m])) + " |"
            for m, _ in methods
        )
    )
    return lines


def shares_on_test_sets(report_name: str) -> Callable[[], list[str]]:
    """A docs/experiments.md block of :func:`shares` of ``table2.py``'s report `report_name` (test
    sets): ``auto r1x3`` (``table2_pruned``), the default on four sets (``table2_r1x2``), ``auto``
    with the refined round in-sample (``table2_auto``), the same unpruned (``table2_targets``)."""
    return lambda: shares(report_name)


def validation_shares(report_name: str) -> Callable[[], list[str]]:
    """A docs/experiments.md block of ``assignment_variants.py``'s report `report_name`
    (validation splits): :func:`recovered`'s means, then :func:`recovered_cells`' cells (the
    cross-fitted refinement, ``auto r1x3``, the refined candidate at Wiki-325K scale in 3 and 2
    folds, the posterior weights, ``auto @t0`` on delicious)."""
    return lambda: recovered(report_name) + [""] + recovered_cells(report_name)


def recovered_cells(report_name: str) -> list[str]:
    """Per EAGLE variant of ``assignment_variants.py``'s report `report_name` and per cell, the
    recovered share (:func:`_share`) at P@1 / P@3 / P@5."""
    r = report(report_name)
    rows = r["rows"]
    cells = sorted({(x["dataset"], x["grouping"]) for x in rows})
    lines = [
        "| variant | " + " | ".join(f"{d} {g}" for d, g in cells) + " |",
        "|---|" + "---|" * len(cells),
    ]
    for summary in r["summary"]:
        cols = []
        for d, g in cells:
            by = {x["variant"]: x for x in rows if x["dataset"] == d and x["grouping"] == g}
            mine = by[f"EAGLE {summary['variant']}"]
            cols.append(
                " / ".join(
                    f"{_share(mine, by['Baseline'], by['Oracle'], k):.2f}"
                    for k in ("P@1", "P@3", "P@5")
                )
            )
        lines.append(f"| {summary['variant']} | " + " | ".join(cols) + " |")
    return lines


def _benchmark(name: str) -> Any:
    """The module ``benchmarks/<name>.py`` (for its ``markdown`` renderer of its report)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", ROOT / "benchmarks" / f"{name}.py"
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"benchmarks/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variants() -> list[str]:
    """docs/experiments.md's first assignment variants (``assignment_variants.py``): per report
    and variant the mean over its cells of the variant minus the Baseline, top-c (the default's
    hard assignment) in bold."""
    lines = ["| data | variant | P@1 | P@3 | P@5 |", "|---|---|---|---|---|"]
    for name, data in (
        ("assignment_variants", "bibtex + delicious"),
        (
            "assignment_variants_synth",
            f"{_generator('assignment_variants_synth')} synthetic eurlex4k, scale 0.5",
        ),
    ):
        label = data
        for row in report(name)["summary"]:
            v = row["variant"] + (" (Algorithm 2 as printed)" if row["variant"] == "argmax" else "")
            cells = [f"{row[f'mean P@{k} - Baseline']:+.2f}".replace("-", "−") for k in (1, 3, 5)]
            if name == "assignment_variants" and row["variant"] == "top-c":
                v, cells = f"**{v} (default)**", [f"**{c}**" for c in cells]
            lines.append(f"| {label} | {v} | " + " | ".join(cells) + " |")
            label = ""
    return lines


def variant_cells(
    name: str, columns: tuple[tuple[str, str], ...], precision: bool = False
) -> list[str]:
    """Per cell (data set, grouping) of ``assignment_variants.py``'s report `name` the P@1 / P@3 /
    P@5 of each (row variant, column title) of `columns`, with the assignment's precision in
    brackets when `precision` (the final round's, as the report has it)."""
    rows = report(name)["rows"]
    lines = [
        "| data | grouping | " + " | ".join(t for _, t in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    shown = None
    for d, g in dict.fromkeys((x["dataset"], x["grouping"]) for x in rows):
        by = {x["variant"]: x for x in rows if x["dataset"] == d and x["grouping"] == g}
        cells = []
        for v, _ in columns:
            text = _pk(by[v])
            if precision and by[v].get("assignment precision") is not None:
                text += f" ({by[v]['assignment precision']:.1f})"
            cells.append(text)
        lines.append(f"| {'' if d == shown else d} | {g} | " + " | ".join(cells) + " |")
        shown = d
    return lines


def soft_cells() -> list[str]:
    """docs/experiments.md's soft weighting per cell (``assignment_variants_soft``), then each
    variant's mean over the Baseline."""
    return variant_cells(
        "assignment_variants_soft",
        (
            ("Baseline", "Baseline"),
            ("EAGLE top-c", "hard top-c"),
            ("EAGLE soft T=0.3", "soft T=0.3"),
            ("EAGLE soft T=1", "soft T=1"),
        ),
    ) + summary_means(
        "assignment_variants_soft",
        {
            "top-c": "hard",
            "soft T=0.1": "soft T=0.1",
            "soft T=0.3": "soft T=0.3",
            "soft T=1": "soft T=1",
        },
    )


def refine_cells() -> list[str]:
    """docs/experiments.md's refinement per cell (``assignment_variants_refine``)."""
    return variant_cells(
        "assignment_variants_refine",
        (
            ("EAGLE top-c", "hard top-c"),
            ("EAGLE top-c+r1", "hard + 1 round"),
            ("EAGLE soft T=0.3+r1", "soft T=0.3 + 1 round"),
        ),
        precision=True,
    ) + summary_means(
        "assignment_variants_refine",
        {"top-c": "hard", "top-c+r1": "hard + 1 round", "soft T=0.3+r1": "soft T=0.3 + 1 round"},
    )


def summary_means(name: str, labels: dict[str, str]) -> list[str]:
    """The line under a cell table of ``assignment_variants.py``'s report `name`: each variant of
    `labels` (report name -> shown name) with its mean over the cells of P@1 / P@3 / P@5 minus the
    Baseline's, from the report's summary."""
    by = {x["variant"]: x for x in report(name)["summary"]}
    parts = [
        shown + " " + " / ".join(f"{by[v][f'mean P@{k} - Baseline']:+.2f}" for k in (1, 3, 5))
        for v, shown in labels.items()
    ]
    return ["", f"Mean over the cells minus the Baseline, P@1 / P@3 / P@5: {'; '.join(parts)}."]


def selection_agreement() -> list[str]:
    """docs/experiments.md's agreement of each group-level criterion with the sample-level best
    candidate (``selection.json``, ``selection_synth.json``): cells where the criterion's choice is
    within 0.5 of the best candidate's sample P@5, for auto's candidates and for all six."""
    reps = {"real": report("selection"), "synth": report("selection_synth")}

    def count(rep: dict[str, Any], candidates: str, criterion: str) -> str:
        s = _row(rep["summary"], candidates=candidates, criterion=criterion)
        return f"{round(s['agreement %'] * s['cells'] / 100)} of {s['cells']}"

    synth = f"{_generator('selection_synth')} synthetic eurlex4k 0.5"
    lines = [
        "| criterion | bibtex + delicious, auto's candidates | bibtex + delicious, all six "
        f"| {synth}, auto's candidates | {synth}, all six |",
        "|---|---|---|---|---|",
    ]
    for criterion, shown in (
        ("max", "union, max of member scores"),
        ("sum", "union, sum of member scores"),
        ("multiset", "**multiset** (auto's)"),
    ):
        cells = [count(reps[d], c, criterion) for d in ("real", "synth") for c in ("auto", "all")]
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    agree, cells = agreement()
    lines += [
        "",
        f"The multiset criterion with auto's candidates agrees in {agree} of {cells} cells "
        f"({100 * agree / cells:.0f}%; `selection.json`, `selection_synth.json`).",
    ]
    return lines


def selection_gain() -> list[str]:
    """docs/experiments.md's sample-level worth of the group-level choice (``selection.json``,
    ``selection_synth.json``): per report, the mean over its cells of the sample P@1 / P@3 / P@5 of
    the candidate that the multiset criterion chose among auto's candidates, minus the Baseline's
    and minus hard top-c's, on the held-out members."""
    lines = [
        "| data | cells | chosen − Baseline, sample P@1 / P@3 / P@5 "
        "| chosen − hard top-c, sample P@1 / P@3 / P@5 |",
        "|---|---|---|---|",
    ]
    for name, data in (
        ("selection", "bibtex + delicious"),
        ("selection_synth", f"{_generator('selection_synth')} synthetic eurlex4k 0.5"),
    ):
        rep = report(name)
        rows = [
            r for r in rep["rows"] if r["candidates"] == "auto" and r["criterion"] == "multiset"
        ]

        def score(r: dict[str, Any], candidate: str, k: int, rep: dict[str, Any] = rep) -> float:
            s = _row(
                rep["candidate_scores"],
                dataset=r["dataset"],
                grouping=r["grouping"],
                candidate=candidate,
            )
            return float(s[f"sample P@{k}"])

        def mean_diff(other: str) -> str:
            return " / ".join(
                f"{sum(score(r, r['chosen'], k) - score(r, other, k) for r in rows) / len(rows):+.2f}"
                for k in (1, 3, 5)
            )

        lines.append(f"| {data} | {len(rows)} | {mean_diff('baseline')} | {mean_diff('hard')} |")
    return lines


def refine_within() -> list[str]:
    """docs/experiments.md's refinement trained on a label's groups alone
    (``assignment_variants_refine_within``) beside the full one (``assignment_variants_refine``)."""
    return summary_means(
        "assignment_variants_refine_within",
        {
            "soft T=0.3+r1": "within the label's groups, soft T=0.3 + 1 round",
            "top-c+r1": "hard + 1 round",
        },
    )[1:]


def pruning_test() -> list[str]:
    """docs/experiments.md's EAGLE minus the Baseline per data set on test sets: ``auto r1x3``
    (``table2_pruned``: the refined round cross-fitted in 3 folds, ``assign.soft_keep`` 2) beside
    ``auto`` with the round in-sample, pruned (``table2_auto``) and unpruned (``table2_targets``);
    "-" for a data set a report did not run. The mean over each set's groupings, P@1 / P@3 / P@5."""
    columns = [
        report(name)["targets"]["per data set EAGLE - Baseline"]
        for name in ("table2_pruned", "table2_auto", "table2_targets")
    ]
    lines = [
        "| data | `auto r1x3` (`soft_keep` 2) − Baseline | in-sample, `soft_keep` 2 − "
        "Baseline | in-sample, unpruned − Baseline |",
        "|---|---|---|---|",
    ]
    for ds in dict.fromkeys(d for by in columns for d in by):
        cells = [_signed(by[ds]) if ds in by else "-" for by in columns]
        lines.append(f"| {ds} | " + " | ".join(cells) + " |")
    return lines


def pruned() -> list[str]:
    """docs/experiments.md's first pruning frontier (``assignment_variants_pruned``): per variant
    its largest positives over hard top-c's in any cell, its mean P@k over the Baseline's and
    against the unpruned soft weighting's."""
    summary = report("assignment_variants_pruned")["summary"]
    unpruned = _row(summary, variant="soft T=0.3+r1")
    lines = [
        "| variant | max positives / top-c | mean P@1 / P@3 / P@5 − Baseline "
        "| P@1 / P@3 / P@5 − unpruned |",
        "|---|---|---|---|",
    ]
    for s in summary:
        diff = " / ".join(
            f"{s[f'mean P@{k} - Baseline'] - unpruned[f'mean P@{k} - Baseline']:+.2f}"
            for k in (1, 3, 5)
        )
        means = " / ".join(f"{s[f'mean P@{k} - Baseline']:+.2f}" for k in (1, 3, 5))
        lines.append(f"| {s['variant']} | {s['max positives / top-c']:.2f} | {means} | {diff} |")
    return lines


def paper_table2() -> list[str]:
    """docs/experiments.md's Table 2 with the paper's hard top-c assignment on delicious and
    bibtex (``paper_experiments_<data>.json``), as ``paper_experiments.py --markdown table2``."""
    return _benchmark("paper_experiments").table2_markdown()


def paper_ablation(axis: str) -> Callable[[], list[str]]:
    """docs/experiments.md's Figure 3 decrements along `axis` (``paper_experiments_<data>``)."""
    return lambda: _benchmark("paper_experiments").ablation_markdown(axis)


def paper_regression() -> list[str]:
    """docs/experiments.md's Figure 2 table (``paper_regression.json``)."""
    return _benchmark("paper_experiments").regression_markdown()


def miml() -> list[str]:
    """docs/experiments.md's Table 3 (``miml_mnist_g4``, ``miml_mnist_g50``)."""
    return _benchmark("paper_experiments").miml_markdown()


def miml_variants() -> list[str]:
    """docs/experiments.md's MIML mask and centring variants (``miml_mnist_g50_variants``)."""
    return _benchmark("miml_variants").markdown()


def table2_default() -> list[str]:
    """docs/experiments.md's Table 2 of ``auto r1x3`` on four data sets (``table2_pruned``), as
    ``benchmarks/table2.py --markdown --report table2_pruned`` prints it."""
    return _benchmark("table2").markdown(report("table2_pruned")).splitlines()


def realism() -> list[str]:
    """docs/experiments.md's twins against their real sets (``synth_realism``), as
    ``benchmarks/synth_realism.py --markdown`` prints it."""
    return _benchmark("synth_realism").markdown(report("synth_realism")).rstrip().splitlines()


def levers() -> list[str]:
    """docs/experiments.md's Baseline / Oracle as each unidentified part of the realistic presets
    moves (``realism_levers``), as ``benchmarks/realism_levers.py --markdown`` prints it."""
    return _benchmark("realism_levers").markdown(report("realism_levers")).rstrip().splitlines()


BLOCKS: dict[str, tuple[pathlib.Path, Callable[[], list[str]]]] = {
    "measured": (ROOT / "README.md", readme),
    "current": (ROOT / "docs" / "design.md", design),
    "cost": (ROOT / "docs" / "experiments.md", cost),
    "frontier": (ROOT / "docs" / "experiments.md", frontier),
    "cost_model": (ROOT / "docs" / "design.md", cost_model),
    "t0_delicious": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_t0_delicious"),
    ),
    "shares_default": (ROOT / "docs" / "experiments.md", shares_on_test_sets("table2_pruned")),
    "shares_auto": (ROOT / "docs" / "experiments.md", shares_on_test_sets("table2_auto")),
    "shares_unpruned": (ROOT / "docs" / "experiments.md", shares_on_test_sets("table2_targets")),
    "shares_r1x2": (ROOT / "docs" / "experiments.md", shares_on_test_sets("table2_r1x2")),
    "cross": (ROOT / "docs" / "experiments.md", validation_shares("assignment_variants_cross")),
    "auto_r1x3": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_auto_r1x3"),
    ),
    "r1x3_wiki325k": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_r1x3_wiki325k"),
    ),
    "auto_r1x2": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_auto_r1x2"),
    ),
    "r1x2_wiki325k": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_r1x2_wiki325k"),
    ),
    "cost_r1x3": (ROOT / "docs" / "experiments.md", cost_r1x3),
    "auto_r2x2": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_auto_r2x2"),
    ),
    "cost_r2x2": (ROOT / "docs" / "experiments.md", cost_r2x2),
    "negatives": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_neg"),
    ),
    "negatives_wiki325k": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_neg_wiki325k"),
    ),
    "cost_negatives": (ROOT / "docs" / "experiments.md", cost_negatives),
    "posterior": (
        ROOT / "docs" / "experiments.md",
        validation_shares("assignment_variants_posterior"),
    ),
    "table2_default": (ROOT / "docs" / "experiments.md", table2_default),
    "variants": (ROOT / "docs" / "experiments.md", variants),
    "soft_cells": (ROOT / "docs" / "experiments.md", soft_cells),
    "refine_cells": (ROOT / "docs" / "experiments.md", refine_cells),
    "realism": (ROOT / "docs" / "experiments.md", realism),
    "levers": (ROOT / "docs" / "experiments.md", levers),
    "selection_agreement": (ROOT / "docs" / "experiments.md", selection_agreement),
    "pruned": (ROOT / "docs" / "experiments.md", pruned),
    "pruning_test": (ROOT / "docs" / "experiments.md", pruning_test),
    "selection_gain": (ROOT / "docs" / "experiments.md", selection_gain),
    "refine_within": (ROOT / "docs" / "experiments.md", refine_within),
    "paper_table2": (ROOT / "docs" / "experiments.md", paper_table2),
    "paper_group_size": (ROOT / "docs" / "experiments.md", paper_ablation("group-size")),
    "paper_depth": (ROOT / "docs" / "experiments.md", paper_ablation("depth")),
    "paper_noise": (ROOT / "docs" / "experiments.md", paper_ablation("noise")),
    "paper_regression": (ROOT / "docs" / "experiments.md", paper_regression),
    "miml": (ROOT / "docs" / "experiments.md", miml),
    "miml_variants": (ROOT / "docs" / "experiments.md", miml_variants),
}


def pattern(name: str) -> re.Pattern[str]:
    """The block `name` with its markers (group 1: its body)."""
    return re.compile(rf"(?s)<!-- figures:{name} -->\n(.*?)<!-- /figures:{name} -->")


def body(name: str) -> str:
    """Block `name` as the reports give it now."""
    return "\n".join(BLOCKS[name][1]()) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help="rewrite the blocks in their documents"
    )
    args = parser.parse_args()
    for name, (doc, _) in BLOCKS.items():
        text = body(name)
        if not args.write:
            print(f"== {name} ({doc.relative_to(ROOT)})\n{text}")
            continue
        old = doc.read_text()
        if not pattern(name).search(old):
            raise SystemExit(
                f"{doc}: no <!-- figures:{name} --> ... <!-- /figures:{name} --> block"
            )
        doc.write_text(
            pattern(name).sub(
                lambda _: f"<!-- figures:{name} -->\n{text}<!-- /figures:{name} -->", old
            )
        )
        print(f"wrote {name} in {doc.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
