"""The package's import contract (pyproject.toml's [tool.importlinter]): it holds, it sees imports
inside function bodies (a cycle planted there breaks it), and docs/design.md's layer picture is
the contract's list of layers."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import tomllib

from tests.conftest import ROOT


def _lint_imports(cwd: pathlib.Path, pythonpath: pathlib.Path) -> subprocess.CompletedProcess:
    command = pathlib.Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(command), "--config", "pyproject.toml", "--no-cache"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(pythonpath)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_package_keeps_its_import_contract():
    done = _lint_imports(ROOT, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_cycle_inside_a_function_body_breaks_the_contract(tmp_path):
    """grimp reads every import statement: `low` importing `high` only inside a function is still
    an import against the layers, and a cycle with `high`, which imports `low` at the top."""
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("from planted import low\n")
    (pkg / "low.py").write_text(
        textwrap.dedent(
            """
            def late():
                from planted import high

                return high
            """
        )
    )
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [tool.importlinter]
            root_package = "planted"

            [[tool.importlinter.contracts]]
            name = "layers"
            type = "layers"
            containers = ["planted"]
            layers = ["high", "low"]

            [[tool.importlinter.contracts]]
            name = "acyclic"
            type = "acyclic_siblings"
            ancestors = ["planted"]
            """
        )
    )
    done = _lint_imports(tmp_path, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "0 kept, 2 broken" in done.stdout
    assert "planted.low -> planted.high" in done.stdout


def test_the_design_layer_picture_is_the_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [
        c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"
    ]
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    block = design.split("<!-- layers: the contract's list -->\n```\n", 1)[1].split("\n```", 1)[0]
    assert block.splitlines() == layers, (
        "docs/design.md's layer picture differs from pyproject.toml's [tool.importlinter] layers"
    )
    import pkgutil

    import eagle_spark

    named = {name.strip() for row in layers for name in row.split("|")}
    modules = {m.name for m in pkgutil.iter_modules(eagle_spark.__path__)}
    assert modules <= named, f"modules in no layer of the contract: {sorted(modules - named)}"
