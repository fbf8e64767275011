"""The settings reference, ``docs/settings.md``, and the typed declarations of the generated Param
accessors, ``eagle_spark/ml/accessors.pyi``, as a command (tests check both are current)::

    python -m eagle_spark.ml.reference > docs/settings.md
    python -m eagle_spark.ml.reference --accessors > eagle_spark/ml/accessors.pyi

It lives above the API because the reference names the estimators' Params that mirror each
setting (:func:`mirrored_params`), while :mod:`eagle_spark.settings`, at the
bottom of the package, knows nothing of the API (:func:`eagle_spark.settings.reference` takes the
mirrors as an argument).
"""

from __future__ import annotations

import argparse
import sys
import types
import typing

import eagle_spark.ml as ml
from eagle_spark.ml.base import SettingsParams
from eagle_spark.settings import reference, section_name


def mirrored_params() -> dict[tuple[str, str], list[str]]:
    """(section, field) -> the public estimators' and models' Params that mirror the setting
    (``("tree", "n_trees") -> ["LabelTreeClassifier.numTrees", "LabelTreeModel.numTrees"]``), for
    the settings reference."""
    out: dict[tuple[str, str], list[str]] = {}
    for name in sorted(ml.__all__):
        cls = getattr(ml, name)
        if isinstance(cls, type) and issubclass(cls, SettingsParams):
            for section, mapping in cls._fields.items():
                for param, field in mapping.items():
                    out.setdefault((section_name(section), field), []).append(f"{name}.{param}")
    return out


def _type_text(hint: typing.Any) -> str:
    """A settings annotation as source text (``int``, ``str | None``, ``tuple[str, ...]``)."""
    if hint is type(None):
        return "None"
    if hint is Ellipsis:
        return "..."
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(_type_text(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_text(a) for a in args)}]"
    return typing.cast(str, hint.__name__)


def _param_classes() -> list[type]:
    """The classes that mirror settings sections (``_mirrors`` in their own body), by name."""
    found: dict[str, type] = {}
    for name in ml.__all__:
        cls = getattr(ml, name)
        if isinstance(cls, type) and issubclass(cls, SettingsParams):
            for klass in cls.__mro__:
                if "_mirrors" in klass.__dict__ and klass is not SettingsParams:
                    found[klass.__name__] = klass
    return [found[k] for k in sorted(found)]


def accessors_source() -> str:
    """``eagle_spark/ml/accessors.pyi``, a stub with no module behind it: for each class
    mirroring settings, a class declaring the ``getX`` / ``setX`` methods
    :class:`~eagle_spark.ml.base.SettingsParams` generates for it, typed from the settings'
    annotations, so that type checkers and IDEs see them (the class inherits it only under
    ``TYPE_CHECKING``; at run time the name is ``object``)."""
    out = [
        '"""Typed declarations of the Param accessors :class:`eagle_spark.ml.base.SettingsParams`',
        "generates from the settings declarations, for type checkers and IDEs: a stub only (each",
        "class inherits its declarations under ``TYPE_CHECKING``). Generated: ``python -m",
        "eagle_spark.ml.reference --accessors > eagle_spark/ml/accessors.pyi``; a test checks it",
        'is current."""',
        "",
        "from typing import Self",
    ]
    for cls in _param_classes():
        fields: dict[type, dict[str, str]] = getattr(cls, "_fields")
        out += ["", f"class {cls.__name__.lstrip('_')}Accessors:"]
        out += [f'    """The generated accessors of ``{cls.__name__}``."""', ""]
        for section, mapping in fields.items():
            hints = typing.get_type_hints(section)
            for param, field in mapping.items():
                text = _type_text(hints[field])
                cap = param[0].upper() + param[1:]
                if getattr(cls, f"get{cap}").__qualname__.startswith("_accessors."):
                    out.append(f"    def get{cap}(self) -> {text}: ...")
                if getattr(cls, f"set{cap}").__qualname__.startswith("_accessors."):
                    out.append(f"    def set{cap}(self, value: {text}) -> Self: ...")
    return "\n".join(out) + "\n"


def main(argv: typing.Optional[list[str]] = None) -> None:
    """Print the settings reference (Markdown), or with ``--accessors`` the accessors module, to
    standard output."""
    parser = argparse.ArgumentParser(prog="python -m eagle_spark.ml.reference")
    parser.add_argument(
        "--accessors", action="store_true", help="print eagle_spark/ml/accessors.pyi instead"
    )
    args = parser.parse_args(argv)
    sys.stdout.write(accessors_source() if args.accessors else reference(mirrored_params()) + "\n")


if __name__ == "__main__":
    main()
