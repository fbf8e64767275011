"""MIML data for the paper's section 5 experiment: MNIST images in IDX files, bags of g random
training images labelled with the multiset of their digits, and single test images.

Paper, section 6 ("MIML experiments") and appendix: every training "sample" is a bag of g random
images with the labels of its images (g = 4 or 50); pixels are the raw 784 values with the
training mean subtracted; accuracy is measured on the standard test set, one image at a time. With
g = 50 nearly every bag holds every digit, so the bag's labels are kept as a list with repeats
(the multiplicity of each digit), not as a set.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass

import numpy as np

from eagle_spark.errors import BadInputError

IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions (n, rows, cols)
LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension (n,)
MNIST_FILES = {
    "train_images": "train-images.idx3-ubyte",
    "train_labels": "train-labels.idx1-ubyte",
    "test_images": "t10k-images.idx3-ubyte",
    "test_labels": "t10k-labels.idx1-ubyte",
}
"""The standard MNIST file names (each may also be gzip-compressed, with a ``.gz`` suffix)."""


def read_idx(path: str) -> np.ndarray:
    """An IDX file (LeCun's MNIST format; ``.gz`` read through gzip) as a uint8 array.

    Returns:
        (n, rows, cols) for an image file (magic 0x803), (n,) for a label file (magic 0x801).
    Raises:
        BadInputError: the file is missing, its magic number is not one of those two, or its
            length does not match the dimensions of its header (the message names the file).
    """
    if not os.path.isfile(path):
        raise BadInputError(f"{path}: no such IDX file")
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as exc:
        raise BadInputError(f"{path}: cannot read the IDX file: {exc}") from exc
    if len(raw) < 8:
        raise BadInputError(f"{path}: {len(raw)} bytes, shorter than an IDX header")
    magic = int.from_bytes(raw[:4], "big")
    if magic not in (IMAGES_MAGIC, LABELS_MAGIC):
        raise BadInputError(
            f"{path}: magic number {magic:#010x} is not an IDX uint8 image (0x00000803) "
            f"or label (0x00000801) file"
        )
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise BadInputError(
            f"{path}: {len(raw)} bytes, shorter than its {header}-byte header ({ndim} dimensions)"
        )
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    size = int(np.prod(dims))
    if len(raw) != header + size:
        raise BadInputError(
            f"{path}: header says {' x '.join(map(str, dims))} = {size:,} values "
            f"({header + size:,} bytes with the {header}-byte header), the file has "
            f"{len(raw):,} bytes ({len(raw) - header:,} values)"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


@dataclass(frozen=True)
class Images:
    """Images and their digit labels.

    Attributes:
        x: (n, 784) float32 pixels in [0, 1].
        y: (n,) int64 labels 0..9.
    """

    x: np.ndarray
    y: np.ndarray


def _find(folder: str, name: str) -> str:
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.isfile(path):
            return path
    raise BadInputError(
        f"{folder}: no {name} (or {name}.gz): an MNIST folder holds "
        f"{', '.join(MNIST_FILES.values())}"
    )


def load_mnist(folder: str) -> tuple[Images, Images]:
    """The training and test sets of an MNIST folder (the four standard IDX files, gzip or not).

    Returns:
        (train, test) :class:`Images`, pixels scaled to [0, 1].
    Raises:
        BadInputError: a file is missing or malformed (:func:`read_idx`), or an image file and its
            label file disagree on the number of images.
    """
    out = []
    for split in ("train", "test"):
        ipath, lpath = (
            _find(folder, MNIST_FILES[f"{split}_images"]),
            _find(folder, MNIST_FILES[f"{split}_labels"]),
        )
        images, labels = read_idx(ipath), read_idx(lpath)
        if images.ndim != 3 or labels.ndim != 1:
            raise BadInputError(f"{ipath} / {lpath}: expected an image file and a label file")
        if len(images) != len(labels):
            raise BadInputError(
                f"{ipath} holds {len(images):,} images but {lpath} {len(labels):,} labels"
            )
        if labels.size and labels.max() > 9:
            raise BadInputError(f"{lpath}: label {int(labels.max())} is not a digit 0-9")
        out.append(
            Images(
                images.reshape(len(images), -1).astype(np.float32) / 255.0, labels.astype(np.int64)
            )
        )
    return out[0], out[1]


@dataclass(frozen=True)
class Bags:
    """Bags of g images: the MIML training set (Y1 and Y2 of the paper).

    Attributes:
        members: (n_bags, g) int64 image indices into the training images (each image in one bag).
        counts: (n_bags, n_labels) int64, how many of the bag's images show each label (the bag's
            label list with repeats; ``counts > 0`` is the label set).
    """

    members: np.ndarray
    counts: np.ndarray

    @property
    def group_size(self) -> int:
        """g, images per bag."""
        return int(self.members.shape[1])


def make_bags(labels: np.ndarray, group_size: int, seed: int, n_labels: int = 10) -> Bags:
    """Bags of `group_size` random images: a random permutation of the images cut into
    ``len(labels) // group_size`` bags (the remainder is left out), each image in one bag.

    Raises:
        ValueError: group_size < 1, or fewer images than group_size.
    """
    if group_size < 1:
        raise ValueError(f"group size must be >= 1, got {group_size}")
    n_bags = len(labels) // group_size
    if n_bags == 0:
        raise ValueError(f"{len(labels)} images cannot fill one bag of {group_size}")
    order = np.random.default_rng(seed).permutation(len(labels))[: n_bags * group_size]
    members = order.reshape(n_bags, group_size).astype(np.int64)
    counts = np.zeros((n_bags, n_labels), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n_bags), group_size), labels[members].ravel()), 1)
    return Bags(members, counts)


def centre(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Subtract the training images' mean pixel vector from every set (the paper's input)."""
    mean = train.mean(axis=0, dtype=np.float64).astype(np.float32)
    return [train - mean, *(o - mean for o in others)]
