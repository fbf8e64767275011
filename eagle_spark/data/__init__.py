"""Embedded default data: the Delicious multi-label data set (XC text format, gzip).

``delicious/train.txt.gz`` (12,920 samples) and ``delicious/test.txt.gz`` (3,185 samples),
500 features, 983 labels. ``mnist/``: the first 5,000 training and 1,000 test images of MNIST in
their IDX format (gzip), for the default run of ``eagle-spark miml``. See ``README.md`` beside this
file for the sources and attribution.
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
        raise ValueError(
            f"no embedded data {name!r}/{split!r}; embedded: delicious/train, delicious/test"
        )
    return str(resources.files(__name__).joinpath(name, f"{split}.txt.gz"))


def mnist_sample() -> str:
    """Local folder of the embedded MNIST subset (the four IDX files, gzip: 5,000 training and
    1,000 test images, the first of each standard file)."""
    return str(resources.files(__name__).joinpath("mnist"))
