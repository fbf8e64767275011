"""The figures README.md and docs/*.md quote are their reports' (benchmarks/figures.py), and
benchmarks/reports holds one current report per configuration, each cited."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPORTS = ROOT / "benchmarks" / "reports"


def _figures():
    spec = importlib.util.spec_from_file_location(
        "bench_figures", ROOT / "benchmarks" / "figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("block", sorted(_figures().BLOCKS))
def test_each_quoted_figure_equals_its_report(block):
    figures = _figures()
    doc, _ = figures.BLOCKS[block]
    found = figures.pattern(block).search(doc.read_text())
    assert found is not None, f"{doc.name} has no figures:{block} block"
    assert found.group(1) == figures.body(block), (
        f"{doc.name}'s figures differ from the reports: run `python benchmarks/figures.py --write`"
    )


def test_a_changed_report_value_is_caught(monkeypatch):
    """The comparison above can fail: a report that says otherwise gives another block."""
    figures = _figures()
    real = figures.report

    def altered(name):
        data = real(name)
        if name == "ingest":
            data["rows"][0]["lines_per_s"] += 1
        return data

    before = figures.body("measured")
    monkeypatch.setattr(figures, "report", altered)
    assert figures.body("measured") != before


def test_every_report_is_cited_and_none_is_a_dated_or_rerun_variant():
    cited = "\n".join(
        p.read_text()
        for p in [
            ROOT / "README.md",
            *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "tests").rglob("*.py")),
        ]
    )
    names = sorted(p.stem for p in REPORTS.glob("*.json"))
    assert names, "no reports"
    uncited = [n for n in names if f"{n}.json" not in cited]
    assert not uncited, f"reports cited nowhere: {uncited}"
    variants = [n for n in names if re.search(r"_(before|rerun|run\d+)$|\d{4}-\d{2}-\d{2}", n)]
    assert not variants, f"one current report per configuration; variants: {variants}"
    assert sorted(p.name for p in REPORTS.iterdir() if p.suffix != ".json") == [], (
        "only JSON reports"
    )


def test_the_docs_carry_no_dates_or_issue_numbers():
    for doc in (ROOT / "docs" / "design.md", ROOT / "docs" / "experiments.md", ROOT / "README.md"):
        found = re.findall(r"20\d{2}-\d{2}-\d{2}|[Ii]ssue [0-9]+", doc.read_text())
        assert not found, f"{doc.name}: {found}"


def test_experiments_page_is_a_description_not_a_notebook():
    """docs/experiments.md quotes measured figures only inside generated blocks: outside them (and
    outside code) no number with two decimals is left but the stated tolerances and settings, and
    no commit hash or run-by-run history."""
    figures = _figures()
    text = (ROOT / "docs" / "experiments.md").read_text()
    prose = re.sub(r"(?s)<!-- figures:(\w+) -->.*?<!-- /figures:\1 -->", "", text)
    prose = re.sub(r"(?s)```.*?```", "", prose)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    stated = {"0.05", "0.07", "0.10", "0.01"}  # the targets' tolerances and a setting's value
    typed = sorted(set(re.findall(r"\b\d+\.\d{2,}\b", prose)) - stated)
    assert not typed, f"figures typed by hand outside a generated block: {typed}"
    history = re.findall(
        r"\b[0-9a-f]{7,40}\b|How it got there|rehearsal|the issue asks|last stop|previous default",
        prose,
    )
    assert not history, f"history in the description: {history}"
    assert len(re.findall(r"<!-- figures:\w+ -->", text)) == sum(
        1 for doc, _ in figures.BLOCKS.values() if doc.name == "experiments.md"
    )
