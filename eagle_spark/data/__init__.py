"""Embedded default data: the Delicious multi-label data set (XC text format, gzip).

``delicious/train.txt.gz`` (12,920 samples) and ``delicious/test.txt.gz`` (3,185 samples),
500 features, 983 labels. See ``README.md`` beside this file for the source and attribution.
"""

from __future__ import annotations

from importlib import resources

DATASETS = {"delicious": ("train", "test")}


def embedded_path(name: str = "delicious", split: str = "train") -> str:
    """Local file path of an embedded data file.

    Args:
        name: data set name (only ``delicious`` is embedded).
        split: ``train`` or ``test``.
    Returns:
        Absolute path of ``<name>/<split>.txt.gz`` inside the installed package.
    Raises:
        ValueError: unknown name or split.
    """
    if name not in DATASETS or split not in DATASETS[name]:
        raise ValueError(f"no embedded data {name!r}/{split!r}; embedded: delicious/train, delicious/test")
    return str(resources.files(__name__).joinpath(name, f"{split}.txt.gz"))
