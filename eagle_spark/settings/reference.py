"""The settings reference, ``docs/settings.md``, generated from the declarations
(``python -m eagle_spark.ml.reference > docs/settings.md``, where the API supplies the Params that
mirror each setting)."""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Mapping, Sequence

from eagle_spark.settings.declare import declarations, range_text, shown
from eagle_spark.settings.sections import Settings


def _markdown(text: str) -> str:
    """Docstring markup as Markdown: ``x`` and :role:`x` -> `x`; table pipes escaped."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text).replace("``", "`")
    return text.replace("|", "\\|")


def reference(mirrors: Mapping[tuple[str, str], Sequence[str]]) -> str:
    """The settings reference, ``docs/settings.md``: every section and setting with its default,
    the estimators' Params that mirror it and its documentation, generated from the declarations
    (``python -m eagle_spark.ml.reference > docs/settings.md``; a test checks the file is current).

    Args:
        mirrors: (section, field) -> the Params that mirror it, e.g. ``LabelTreeClassifier.numTrees``
            (:func:`eagle_spark.ml.reference.mirrored_params`).
    """
    out = [
        "# Settings reference",
        "",
        "Generated from the declarations in `eagle_spark/settings/` (`data.py`, `learning.py`, "
        "`sections.py`) (`python -m eagle_spark.ml.reference > docs/settings.md`). A setting is set in a YAML file "
        "(`--conf`), by `--set section.key=value`, by a command's flag where it has one, or "
        "through the estimator Params that mirror it (the Params column).",
        "",
    ]
    hints = typing.get_type_hints(Settings)
    for f in dataclasses.fields(Settings):
        cls = hints[f.name]
        summary = " ".join((cls.__doc__ or "").split("Attributes:")[0].split())
        out += [f"## `{f.name}`", "", _markdown(summary), ""]
        out += ["| key | default | values | Params | what |", "|---|---|---|---|---|"]
        for item in declarations(cls):
            text = _markdown(" ".join(x for x in (item.doc, item.more) if x))
            default = shown(item.default).strip("`")
            values = ", ".join(f"`{v}`" for v in item.choices)
            if item.bounds is not None:
                values = _markdown(range_text(item.bounds))
            params = ", ".join(f"`{p}`" for p in mirrors.get((f.name, item.name), ()))
            out.append(f"| `{item.name}` | `{default}` | {values} | {params} | {text} |")
        out.append("")
    return "\n".join(out)
