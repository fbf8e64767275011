"""Figures of the experiments: matplotlib on its headless Agg backend, PNG files written atomically."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def new_figure(n_panels: int, width: float = 5.0, height: float = 3.8) -> tuple[Figure, list[Axes]]:
    """A figure with `n_panels` side by side on the Agg backend (no display needed); (fig, axes)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n_panels, height), dpi=110, layout="constrained")
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    for ax in axes:
        ax.grid(True, alpha=0.3)
    return fig, list(axes)


def save_figure(fig: Figure, path: str) -> None:
    """Write `fig` as a PNG at `path` (a local path), through a temporary sibling renamed into place."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, format="png")
    os.replace(tmp, path)


def write_text(path: str, text: str) -> None:
    """Write `text` to the local file `path` through a temporary sibling renamed into place."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
