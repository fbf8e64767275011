"""Training the MIML networks: in the driver's process (local mode), or data-parallel through
``pyspark.ml.torch.distributor.TorchDistributor`` (one PyTorch process per ``num_processes``,
gradients averaged by DistributedDataParallel over gloo).

Both run :func:`train_bags`: with world size W, process r trains on every W-th bag of each
epoch's shuffled order (the same order in every process: the shuffle is seeded by (seed, epoch)),
so one epoch visits every bag once whatever W is; with W = 1 it is plain minibatch Adam.

Memory per process: the training images (n x 784 float32, ~188 MB for MNIST's 60,000), the bag
index (n ints) and the network; a minibatch is batch_size x g x 784 floats.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np

from eagle_spark.miml.data import Bags
from eagle_spark.settings import MimlSettings

log = logging.getLogger(__name__)


_DEFAULTS = MimlSettings()


@dataclass(frozen=True)
class NetConfig:
    """The network and optimiser settings one training run uses: the ``miml`` section's fields of
    the same names (:class:`eagle_spark.settings.MimlSettings`, which declares them, their
    defaults and checks), shared by every method of a run (the paper tunes them once for
    Deep-MIML and reuses them).

    Raises:
        SettingsError (a ValueError): a value the ``miml`` section refuses, named.
    """

    hidden: int = _DEFAULTS.hidden
    concepts: int = _DEFAULTS.concepts
    epochs: int = _DEFAULTS.epochs
    lr: float = _DEFAULTS.lr
    batch_size: int = _DEFAULTS.batch_size
    tau: float = _DEFAULTS.tau
    mask_mix: Optional[float] = _DEFAULTS.mask_mix
    seed: int = _DEFAULTS.seed

    def __post_init__(self) -> None:
        MimlSettings(**asdict(self))  # the section's checks

    @classmethod
    def of(cls, settings: MimlSettings) -> "NetConfig":
        """The fields of a ``miml`` section."""
        return cls(**{name: getattr(settings, name) for name in cls.__dataclass_fields__})


def train_bags(
    x: np.ndarray,
    bags: Bags,
    config: NetConfig,
    label_emb: Optional[np.ndarray] = None,
    val: Optional[tuple[np.ndarray, np.ndarray]] = None,
    rank: int = 0,
    world: int = 1,
    ddp: bool = False,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]]]:
    """Train a :class:`DeepMIML` on bags of the images `x`.

    Args:
        x: (n_images, d) float32 instances (centred pixels).
        bags: members (n_bags, g) into x and counts (n_bags, L).
        config: the settings; ``config.tau`` applies only when `label_emb` is given.
        label_emb: (L, d) GRLR label embeddings for the co-attention mask; None: Deep-MIML.
        val: (x_val (m, d), y_val (m,)) single images to score after every epoch.
        rank, world: this process's rank and the number of processes (data-parallel shards).
        ddp: wrap the network in DistributedDataParallel (needs an initialised process group).
    Returns:
        (parameters as numpy arrays, one {"epoch", "loss", "val_accuracy"} per epoch; loss is
        the epoch's mean training loss, averaged over the processes with `ddp`, so every process
        returns the same; val_accuracy in % or NaN without `val`).
    """
    import torch

    from eagle_spark.miml.network import DeepMIML, accuracy, proportion_loss, state_numpy

    torch.manual_seed(config.seed)
    n_labels = bags.counts.shape[1]
    net = DeepMIML(
        x.shape[1],
        n_labels,
        config.hidden,
        config.concepts,
        label_emb,
        config.tau if label_emb is not None else 0.0,
        config.mask_mix,
    )
    model: Any = net
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    xt = torch.as_tensor(x)
    counts = torch.as_tensor(bags.counts, dtype=torch.float32)
    members = torch.as_tensor(
        np.array(bags.members)
    )  # a writable copy (the bags may be read-only maps)
    per_rank = len(bags.members) // world
    history = []
    for epoch in range(config.epochs):
        order = np.random.default_rng([config.seed, epoch]).permutation(len(bags.members))
        mine = torch.as_tensor(order[rank : per_rank * world : world])
        total, steps = 0.0, 0
        for lo in range(0, len(mine), config.batch_size):
            idx = mine[lo : lo + config.batch_size]
            logits = model(xt[members[idx]])
            loss = proportion_loss(logits, counts[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + loss.item(), steps + 1
        mean_loss = total / max(steps, 1)
        if (
            ddp and world > 1
        ):  # every process ends with the same history (any one's result is returned)
            import torch.distributed as dist

            both = torch.tensor([mean_loss], dtype=torch.float64)
            dist.all_reduce(both)
            mean_loss = float(both) / world
        acc = accuracy(net, *val) if val is not None else float("nan")
        history.append({"epoch": epoch + 1, "loss": mean_loss, "val_accuracy": acc})
    return state_numpy(net), history


def _distributed_main(data_path: str, config: dict, with_val: bool) -> tuple:
    """Body of each TorchDistributor process: joins the gloo process group torchrun set up (RANK,
    WORLD_SIZE, MASTER_ADDR/PORT), trains its shard and returns the result. Every process returns
    it (identical: DDP keeps the parameters equal, the losses are all-reduced): in local mode each
    process pickles its return value to the same output file, so a None from one rank could be
    the one TorchDistributor reads."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # one core per process: W processes share the machine's cores
    dist.init_process_group("gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        data = np.load(data_path)
        emb = data["label_emb"] if data["label_emb"].size else None
        val = (data["x_val"], data["y_val"]) if with_val else None
        result = train_bags(
            data["x"],
            Bags(data["members"], data["counts"]),
            NetConfig(**config),
            emb,
            val,
            rank=rank,
            world=world,
            ddp=True,
        )
    finally:
        dist.destroy_process_group()
    return result


def train_distributed(
    x: np.ndarray,
    bags: Bags,
    config: NetConfig,
    label_emb: Optional[np.ndarray],
    val: Optional[tuple[np.ndarray, np.ndarray]],
    num_processes: int,
    local_mode: bool = True,
) -> tuple[dict[str, np.ndarray], list[dict[str, float]]]:
    """:func:`train_bags` on `num_processes` PyTorch processes through Spark's TorchDistributor
    (``local_mode``: on the driver's machine, as ``torchrun --standalone``; else as a barrier
    Spark job on the executors, one task per process). Needs an active SparkSession.

    The data travel as one ``.npz`` file in a temporary folder every process reads (on a cluster
    it must be on storage the executors reach: set ``TMPDIR`` to such a folder).

    Returns:
        What :func:`train_bags` returns (the same in every process).
    Raises:
        ValueError: num_processes < 1.
        RuntimeError: from TorchDistributor when a process fails (its log is in the message).
    """
    from pyspark.ml.torch.distributor import TorchDistributor

    if num_processes < 1:
        raise ValueError(f"miml: num_processes must be >= 1, got {num_processes}")
    with tempfile.TemporaryDirectory(prefix="eagle_spark_miml-") as tmp:
        path = os.path.join(tmp, "data.npz")
        empty = np.zeros(0, np.float32)
        np.savez(
            path,
            x=x,
            members=bags.members,
            counts=bags.counts,
            label_emb=empty if label_emb is None else label_emb,
            x_val=empty if val is None else val[0],
            y_val=empty if val is None else val[1],
        )
        log.info(
            "miml: training on %d TorchDistributor processes (local_mode=%s)",
            num_processes,
            local_mode,
        )
        result = TorchDistributor(
            num_processes=num_processes, local_mode=local_mode, use_gpu=False
        ).run(_distributed_main, path, asdict(config), val is not None)
        if result is None:
            raise RuntimeError("miml: TorchDistributor returned nothing from the training process")
        return result
