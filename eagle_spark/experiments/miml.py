"""The paper's MIML experiment (section 6, Table 3's MNIST column): Deep-MIML, EAGLE-0 and EAGLE
trained on bags of g MNIST images and scored on single test images.

One run, for one group size g:

1. the training images (centred pixels) written as a dataset and cut into bags of g by the
   ``aggregate`` job (random grouping, list merge, seed ``data_seed``: every method and network
   seed sees the same bags; :mod:`eagle_spark.miml.bags`);
2. the label embeddings by the ``embed`` job (GRLR, :class:`eagle_spark.ml.grlr.GRLR`) on the bags
   with their repeated digits (:func:`eagle_spark.miml.bags.multiset_dataset`); T = 0 gives
   EAGLE-0's embeddings, T = ``iterations`` EAGLE's; then centred
   (:func:`eagle_spark.miml.bags.centre_embeddings`) unless ``centre_embeddings`` is False;
3. optionally the learning rate and the number of epochs tuned once, for Deep-MIML, on a held-out
   share of the training images scored as single images, then used for every method (as the
   paper does);
4. every method trained with ``seeds`` network seeds (:mod:`eagle_spark.miml.training`: in the
   driver, or through TorchDistributor with ``num_processes`` >= 1), top-1 accuracy on the test
   images (mean and spread);
5. ``results.json``, ``curves.png`` (training loss and test accuracy per epoch) and
   ``embeddings.png`` (the learned label embeddings as 28 x 28 images, the paper's Figure 4) in the
   output folder, each file written atomically.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from eagle_spark.miml.bags import (
    centre_embeddings,
    embed_tasks,
    multiset_dataset,
    spark_bags,
    write_images_dataset,
)
from eagle_spark.miml.data import Bags, Images, centre, load_mnist, make_bags
from eagle_spark.miml.training import NetConfig
from eagle_spark.ml.miml import label_embeddings
from eagle_spark.settings import MimlSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

METHODS = {"deep-miml": None, "eagle0": 0, "eagle": None}
"""Method -> GRLR iterations of its label embeddings (None for deep-miml: no embeddings; eagle
uses ``miml.iterations``)."""
PAPER_TABLE3 = {
    4: {"deep-miml": 94.70, "eagle0": 94.82, "eagle": 94.82},
    50: {"deep-miml": 33.33, "eagle0": 36.10, "eagle": 38.46},
}
"""Top-1 accuracy (%) of Table 3, MNIST column, by group size."""


def _local_folder(output: str) -> str:
    os.makedirs(output, exist_ok=True)
    return output


def _train(
    x: np.ndarray,
    bags: Bags,
    net: NetConfig,
    emb: Optional[np.ndarray],
    val: tuple[np.ndarray, np.ndarray],
    num_processes: int,
) -> tuple[dict, list]:
    """(parameters, history) of one network trained by :meth:`eagle_spark.ml.miml.DeepMIML.fitBags`
    with the settings `net` (the experiment's bags and embeddings are already on the driver)."""
    from eagle_spark.ml.miml import DeepMIML

    model = DeepMIML(
        hidden=net.hidden,
        concepts=net.concepts,
        epochs=net.epochs,
        learningRate=net.lr,
        batchSize=net.batch_size,
        tau=net.tau,
        maskMix=net.mask_mix,
        seed=net.seed,
        numProcesses=num_processes,
    ).fitBags(x, bags, emb, val)
    return model.state(), model.history


def tune(x: np.ndarray, labels: np.ndarray, setting: MimlSettings) -> dict[str, Any]:
    """Deep-MIML's learning rate and epochs, picked on a held-out share of the training images.

    Bags are drawn from the rest (in numpy: the tuning run's bags only feed Deep-MIML, which
    needs no embeddings); each rate in ``setting.tune_lr`` trains ``setting.epochs`` epochs
    (seed 0) and is scored on the held-out images after every epoch. Returns the best
    ``{"lr", "epochs", "val_accuracy"}`` and every rate's curve (``"curves"``).
    """
    rng = np.random.default_rng([setting.data_seed, 1])
    held = rng.permutation(len(labels))
    n_val = max(1, int(round(setting.validation * len(labels))))
    val_idx, fit_idx = held[:n_val], held[n_val:]
    bags = make_bags(labels[fit_idx], setting.group_size, setting.data_seed)
    bags = Bags(fit_idx[bags.members], bags.counts)
    best: dict[str, Any] = {"val_accuracy": -1.0, "curves": {}}
    for lr in setting.tune_lr:
        _, hist = _train(
            x,
            bags,
            dataclasses.replace(NetConfig.of(setting), lr=lr, seed=0),
            None,
            (x[val_idx], labels[val_idx]),
            setting.num_processes,
        )
        best["curves"][str(lr)] = [h["val_accuracy"] for h in hist]
        top = max(hist, key=lambda h: h["val_accuracy"])
        log.info(
            "miml tune: lr %g: best validation accuracy %.2f%% at epoch %d",
            lr,
            top["val_accuracy"],
            top["epoch"],
        )
        if top["val_accuracy"] > best["val_accuracy"]:
            best.update(lr=lr, epochs=int(top["epoch"]), val_accuracy=top["val_accuracy"])
    return best


def run_miml(
    spark: SparkSession, images_dir: str, output: str, setting: MimlSettings
) -> dict[str, Any]:
    """Run the experiment (module docstring) and write its files into the local folder `output`.

    Args:
        spark: active session (GRLR runs on it; TorchDistributor too when num_processes >= 1).
        images_dir: folder with the four MNIST IDX files (gzip or not).
        output: local folder for results.json, curves.png, embeddings.png.
        setting: the ``miml`` settings (each seed's network uses seed 0 .. ``seeds`` - 1).
    Returns:
        The content of results.json: per method the accuracies per seed, mean and std, the
        paper's figure for the group size when it has one; the settings; seconds per step.
    Raises:
        BadInputError: a missing or malformed IDX file (names it).
        ValueError: a bad setting.
    """
    from eagle_spark.errors import strict_json
    from eagle_spark.experiments.figures import write_text

    started = time.monotonic()
    train, test = load_mnist(images_dir)
    if setting.train_images:
        train = Images(train.x[: setting.train_images], train.y[: setting.train_images])
    if setting.test_images:
        test = Images(test.x[: setting.test_images], test.y[: setting.test_images])
    x, x_test = centre(train.x, test.x)
    seconds: dict[str, float] = {}
    net, tuned = NetConfig.of(setting), None
    if setting.tune_lr:
        t0 = time.monotonic()
        tuned = tune(x, train.y, setting)
        net = dataclasses.replace(net, lr=tuned["lr"], epochs=tuned["epochs"])
        seconds["tune"] = round(time.monotonic() - t0, 1)
    work = tempfile.mkdtemp(prefix="_work-", dir=_local_folder(output))
    try:
        t0 = time.monotonic()
        images = write_images_dataset(x, train.y, os.path.join(work, "images"))
        bags = spark_bags(
            spark, images, os.path.join(work, "bags"), setting.group_size, setting.data_seed
        )
        seconds["bags"] = round(time.monotonic() - t0, 1)
        embeddings: dict[str, np.ndarray] = {}
        if any(m != "deep-miml" for m in setting.methods):
            multiset = multiset_dataset(images, bags, os.path.join(work, "bags_multiset"))
        for method in setting.methods:
            if method == "deep-miml":
                continue
            t0 = time.monotonic()
            iters = 0 if method == "eagle0" else setting.iterations
            emb = label_embeddings(
                spark,
                multiset,
                os.path.join(work, f"emb_{method}"),
                iters,
                setting.step,
                embed_tasks(bags, x.shape[1]),
            )
            embeddings[method] = centre_embeddings(emb) if setting.centre_embeddings else emb
            seconds[f"grlr_{method}"] = round(time.monotonic() - t0, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results: dict[str, Any] = {}
    curves: dict[str, list] = {}
    for method in setting.methods:
        t0 = time.monotonic()
        accs, hists = [], []
        for seed in range(setting.seeds):
            _, hist = _train(
                x,
                bags,
                dataclasses.replace(net, seed=seed),
                embeddings.get(method),
                (x_test, test.y),
                setting.num_processes,
            )
            accs.append(hist[-1]["val_accuracy"])
            hists.append(hist)
        curves[method] = hists
        paper = PAPER_TABLE3.get(setting.group_size, {}).get(method)
        results[method] = {
            "accuracy": [round(a, 2) for a in accs],
            "mean": round(float(np.mean(accs)), 2),
            "std": round(float(np.std(accs)), 2),
            "paper": paper,
        }
        seconds[f"train_{method}"] = round(time.monotonic() - t0, 1)
        log.info(
            "miml g=%d %s: top-1 accuracy %.2f +- %.2f %% (%d seeds)",
            setting.group_size,
            method,
            results[method]["mean"],
            results[method]["std"],
            setting.seeds,
        )
    seconds["total"] = round(time.monotonic() - started, 1)
    out = {
        "group_size": setting.group_size,
        "n_bags": int(len(bags.members)),
        "train_images": int(len(train.y)),
        "test_images": int(len(test.y)),
        "methods": results,
        "net": dataclasses.asdict(net),
        "tuned": tuned,
        "iterations": setting.iterations,
        "step": setting.step,
        "centre_embeddings": setting.centre_embeddings,
        "num_processes": setting.num_processes,
        "seconds": seconds,
    }
    os.makedirs(output, exist_ok=True)
    write_text(os.path.join(output, "results.json"), strict_json(out, indent=2) + "\n")
    plot_curves(curves, setting.group_size, os.path.join(output, "curves.png"))
    if embeddings:
        plot_embeddings(embeddings, os.path.join(output, "embeddings.png"))
    return out


def plot_curves(curves: dict[str, list], group_size: int, path: str) -> None:
    """Training loss and test accuracy per epoch, one line per method (mean over seeds)."""
    from eagle_spark.experiments.figures import new_figure, save_figure

    fig, (ax_loss, ax_acc) = new_figure(2)
    for method, hists in curves.items():
        epochs = [h["epoch"] for h in hists[0]]
        ax_loss.plot(
            epochs,
            np.mean([[h["loss"] for h in hist] for hist in hists], axis=0),
            marker="o",
            label=method,
        )
        ax_acc.plot(
            epochs,
            np.mean([[h["val_accuracy"] for h in hist] for hist in hists], axis=0),
            marker="o",
            label=method,
        )
    ax_loss.set(
        xlabel="epoch",
        ylabel="training loss (cross-entropy to label shares)",
        title=f"MNIST bags of g = {group_size}: training loss",
    )
    ax_acc.set(
        xlabel="epoch",
        ylabel="top-1 accuracy on single test images (%)",
        title=f"MNIST bags of g = {group_size}: test accuracy",
    )
    from matplotlib.ticker import MaxNLocator

    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()
    save_figure(fig, path)


def plot_embeddings(embeddings: dict[str, np.ndarray], path: str) -> None:
    """Each method's label embeddings as 28 x 28 images (one row per method, one column per
    label), on a symmetric colour scale per image (the paper's Figure 4)."""
    import matplotlib

    from eagle_spark.experiments.figures import save_figure

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    n_labels = next(iter(embeddings.values())).shape[0]
    fig = Figure(figsize=(1.3 * n_labels, 1.5 * len(embeddings)), dpi=110, layout="constrained")
    axes = fig.subplots(len(embeddings), n_labels, squeeze=False)
    for r, (method, emb) in enumerate(embeddings.items()):
        for k in range(n_labels):
            ax = axes[r][k]
            img = emb[k].reshape(28, 28)
            lim = float(np.abs(img).max()) or 1.0
            ax.imshow(img, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"label {k}")
            if k == 0:
                ax.set_ylabel(method)
    save_figure(fig, path)


__all__ = [
    "METHODS",
    "PAPER_TABLE3",
    "plot_curves",
    "plot_embeddings",
    "run_miml",
    "tune",
]
