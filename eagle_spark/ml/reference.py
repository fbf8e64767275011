"""The settings reference, ``docs/settings.md``, as a command:
``python -m eagle_spark.ml.reference > docs/settings.md``.

It lives above the API because the reference names the estimators' Params that mirror each
setting (:func:`mirrored_params`), while :mod:`eagle_spark.settings`, at the
bottom of the package, knows nothing of the API (:func:`eagle_spark.settings.reference` takes the
mirrors as an argument).
"""

from __future__ import annotations

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


def main() -> None:
    """Print the settings reference (Markdown) to standard output."""
    print(reference(mirrored_params()))


if __name__ == "__main__":
    main()
