"""The MIML network (paper section 5: Deep-MIML with EAGLE's co-attention mask) as a pyspark.ml
Estimator and Model.

``DeepMIML.fit(frame)`` reads a frame of bags, one row per instance: ``featuresCol`` (a Spark ML
vector; dense images in the paper's MNIST experiment), ``groupCol`` (the instance's bag; null: in
no bag, left out) and ``groupLabelsCol`` (the bag's labels with repeats, array<int>, the same on
every member: a label listed c times is held by c of the bag's instances, the paper's list merge).
It then

1. collects the bags to the driver: X as a dense (n, d) float32 matrix and the bags as
   (n_bags, g) member indices plus (n_bags, L) label counts (:class:`eagle_spark.miml.data.Bags`);
   every bag must hold the same number g of instances (the network takes g x d bags);
2. for ``method`` ``eagle`` / ``eagle0`` computes GRLR label embeddings on Spark (paper
   Algorithm 1 with T = ``maxIter`` / T = 0, on the bags re-organised as the paper's list merge:
   :func:`eagle_spark.miml.bags.multiset_dataset`), centred unless ``centreEmbeddings`` is false;
   ``deep-miml`` uses none;
3. trains :class:`eagle_spark.miml.network.DeepMIML` with Adam on the bags' label proportions,
   in the driver's process (``numProcesses`` 0) or data-parallel through pyspark's
   ``TorchDistributor`` (``numProcesses`` >= 1, ``localMode`` as TorchDistributor's), see
   :mod:`eagle_spark.miml.training`.

``DeepMIMLModel.transform(frame)`` scores every row as a bag of one (the paper's test: the mask is
1 there) and adds ``scoresCol`` (array<float>, the L bag logits) and ``predictionCol`` (double, the
label with the highest logit). The forward pass of a bag of one is two dense layers and a max
over the K concepts; it runs in numpy on the executors (no PyTorch needed there).

Memory: the fit holds X densely on the driver (n x d x 4 bytes: 188 MB for MNIST's 60,000 images)
and what training keeps (:mod:`eagle_spark.miml.training`); a transform task keeps the network's
weights (d x hidden + hidden x K x L floats: 0.8 MB for MNIST's defaults, shipped in the task's
closure) and one Arrow batch of rows, whatever the data's size and the cores.

Scratch folders (the bags' datasets for GRLR, an unsaved model) live in the work folder
(:mod:`eagle_spark.ml.frames`), which must be a local or mounted path here: the bags are written
with the local file API.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import math
import os
import posixpath
import shutil
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.ml import Estimator, Model
from pyspark.ml.functions import vector_to_array
from pyspark.ml.param import TypeConverters
from pyspark.ml.param.shared import HasFeaturesCol, HasPredictionCol
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError
from eagle_spark.io.fs import FileSystem, atomic_output, local_path
from eagle_spark.io.tables import new_manifest, read_manifest, write_manifest
from eagle_spark.miml.data import Bags
from eagle_spark.ml.base import (
    FolderModel,
    Persistent,
    SettingsParams,
    declared_param,
    optional_int,
)
from eagle_spark.ml.dataset import Dataset
from eagle_spark.ml.frames import check_columns, work_folder
from eagle_spark.ml.grlr import GRLR
from eagle_spark.settings import MIML_METHODS, MimlSettings

if TYPE_CHECKING:  # PyTorch-free names only: eagle_spark.miml.training imports torch lazily
    from eagle_spark.miml.training import NetConfig
    from eagle_spark.ml.accessors import DeepMIMLParamsAccessors
else:  # the generated accessors' declarations exist for type checkers only
    DeepMIMLParamsAccessors = object

log = logging.getLogger(__name__)

METHODS = MIML_METHODS
"""``method`` values: no mask (Deep-MIML), the mask from EAGLE-0's (T = 0) or EAGLE's (T =
``maxIter``) GRLR label embeddings."""
NETWORK = "network.npz"
"""File of a model folder holding the network's parameters (numpy arrays by state-dict name)."""
KIND = "miml-model"
"""The ``kind`` of a model folder's manifest."""


class _DeepMIMLParams(HasFeaturesCol, HasPredictionCol, SettingsParams, DeepMIMLParamsAccessors):
    _mirrors = (
        (
            MimlSettings,
            (
                "method",
                "iterations",
                "step",
                "centre_embeddings",
                "hidden",
                "concepts",
                "epochs",
                "lr",
                "batch_size",
                "tau",
                "mask_mix",
                "seed",
                "num_processes",
                "local_mode",
            ),
        ),
    )

    groupCol = declared_param(
        "groupCol",
        "bag of each instance (any atomic type; null: in no bag)",
        TypeConverters.toString,
    )
    groupLabelsCol = declared_param(
        "groupLabelsCol",
        "the labels of the instance's bag, array<int>, with repeats: a label listed c times "
        "is held by c of the bag's instances",
        TypeConverters.toString,
    )
    scoresCol = declared_param(
        "scoresCol", "output of transform: the L bag logits, array<float>", TypeConverters.toString
    )
    numLabels = declared_param(
        "numLabels", "the label space L (default: largest label id + 1)", optional_int
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(
            featuresCol="features",
            predictionCol="prediction",
            groupCol=S.GROUP_ID,
            groupLabelsCol="group_labels",
            scoresCol="scores",
            numLabels=None,
        )
        self._set_settings_defaults()

    def netConfig(self) -> NetConfig:
        """The :class:`eagle_spark.miml.training.NetConfig` of the current Params.

        Raises:
            ValueError: a bad value (the ``miml`` section's checks), naming the Param.
        """
        from eagle_spark.miml.training import NetConfig

        return NetConfig.of(self.settings(MimlSettings))


class DeepMIML(Estimator, _DeepMIMLParams, Persistent):
    """Deep-MIML with EAGLE's co-attention mask, trained from bags of instances (module docstring).

    Params (settings section and default; the constructor takes any of them by name):
    {params}

    and ``numLabels`` (default: largest label id + 1), ``featuresCol``, ``groupCol`` (group_id),
    ``groupLabelsCol`` (group_labels), and for the model's transform ``scoresCol`` (scores),
    ``predictionCol`` (prediction).

    Raises (fit): ValueError / TypeError naming a missing or mistyped column or a bad Param value
    (before any Spark job); ValueError naming the bag when bags differ in size, when a bag's members
    disagree on its labels or when a bag has no label; RuntimeError from TorchDistributor when a
    training process fails.

    Source: paper section 5 (Figure 2) and Feng & Zhou (2017) for Deep-MIML.
    """

    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.setParams(**params)

    def _fit(self, dataset: DataFrame) -> "DeepMIMLModel":
        self.netConfig()  # the Params checked before any Spark job
        spark = dataset.sparkSession
        x, bags = collect_bags(
            dataset,
            self.getFeaturesCol(),
            self.getOrDefault(self.groupCol),
            self.getOrDefault(self.groupLabelsCol),
            self.getOrDefault(self.numLabels),
        )
        emb = None
        if self.settings(MimlSettings).method != "deep-miml":
            emb = self.labelEmbeddings(spark, x, bags)
        return self.fitBags(x, bags, emb)

    def labelEmbeddings(self, spark: SparkSession, x: np.ndarray, bags: Bags) -> np.ndarray:
        """The mask's GRLR label embeddings of `bags` (``method`` eagle: T = ``maxIter``; eagle0:
        T = 0), computed on Spark in a scratch folder of the work folder, centred unless
        ``centreEmbeddings`` is false.

        Args:
            x: (n, d) float32 instances. bags: the bags into x.
        Returns:
            (L, d) float32 (unit rows; centred rows sum to ~0 over labels).
        Raises:
            ValueError: the work folder is not a local path.
        """
        from eagle_spark.miml.bags import (
            centre_embeddings,
            embed_tasks,
            multiset_dataset,
            write_images_dataset,
        )

        folder = work_folder(spark, "miml")
        local = local_path(folder)
        if local is None:
            raise ValueError(
                f"DeepMIML: the work folder {folder} is not a local path: the bags' scratch "
                "datasets are written with the local file API (set spark.eagle_spark.workDir "
                "to a local or mounted folder)"
            )
        n_labels = int(bags.counts.shape[1])
        miml = self.settings(MimlSettings)
        iterations = 0 if miml.method == "eagle0" else miml.iterations
        try:
            images = write_images_dataset(x, None, os.path.join(local, "images"), n_labels)
            multiset = multiset_dataset(images, bags, os.path.join(local, "multiset"))
            emb = label_embeddings(
                spark,
                multiset,
                os.path.join(local, "embeddings"),
                iterations,
                miml.step,
                embed_tasks(bags, x.shape[1]),
            )
        finally:
            shutil.rmtree(local, ignore_errors=True)
        return centre_embeddings(emb) if miml.centre_embeddings else emb

    def fitBags(
        self,
        x: np.ndarray,
        bags: Bags,
        labelEmbeddings: Optional[np.ndarray] = None,
        validation: Optional[tuple[np.ndarray, np.ndarray]] = None,
    ) -> "DeepMIMLModel":
        """Train on bags already in the driver's memory (what ``fit`` does once it has collected
        the frame; the ``miml`` experiment calls it with its MNIST bags).

        Args:
            x: (n, d) float32 instances. bags: (n_bags, g) members into x, (n_bags, L) counts.
            labelEmbeddings: (L, d) the mask's label embeddings; None: no mask (Deep-MIML).
            validation: (x_val (m, d), y_val (m,)) single instances scored after every epoch
                (the model's ``history`` then has their top-1 accuracy, %).
        Returns:
            The model (its folder in the work folder until saved).
        Raises:
            ValueError: a bad Param value; labelEmbeddings not (L, d).
            RuntimeError: from TorchDistributor when a process fails.
        """
        from eagle_spark.miml.training import train_bags, train_distributed

        config = self.netConfig()
        miml = self.settings(MimlSettings)
        processes = miml.num_processes
        if processes >= 1:
            state, history = train_distributed(
                x,
                bags,
                config,
                labelEmbeddings,
                validation,
                processes,
                local_mode=miml.local_mode,
            )
        else:
            state, history = train_bags(x, bags, config, labelEmbeddings, validation)
        spark = SparkSession.active()
        path = work_folder(spark, "model")
        write_model(spark, path, state, config, bags, history, miml.method)
        model = DeepMIMLModel()
        model._attach_data(path)
        return self._copyValues(model)


def collect_bags(
    df: DataFrame,
    features: str,
    group: str,
    group_labels: str,
    n_labels: Optional[int] = None,
) -> tuple[np.ndarray, Bags]:
    """The frame's bags in the driver's memory.

    Args:
        df: one row per instance (module docstring); rows with a null group are left out.
        features, group, group_labels: its columns.
        n_labels: L (default: largest label id + 1).
    Returns:
        (X (n, d) float32 in the order of the bags' sorted values, members (n_bags, g) into X,
        counts (n_bags, L) int64), bags in the order of their values.
    Raises:
        ValueError / TypeError: a missing or mistyped column; no bag; bags of different sizes,
            members disagreeing on their bag's labels, a bag without a label or a label id outside
            [0, n_labels) (each names the bag).
    """
    check_columns(
        df,
        {"features": features, "group": group, "group_labels": group_labels},
        "DeepMIML.fit",
    )
    if features not in df.columns:
        raise TypeError(f"DeepMIML.fit: {features!r} must be a Spark ML vector column")
    rows = (
        df.where(F.col(group).isNotNull())
        .select(
            F.col(group).cast("string").alias("bag"),
            vector_to_array(F.col(features), "float32").alias("x"),
            F.array_sort(F.col(group_labels).cast("array<long>")).alias("labels"),
        )
        .orderBy("bag")
        .toArrow()
    )
    if rows.num_rows == 0:
        raise ValueError("DeepMIML.fit: the frame has no row in a bag")
    names = np.asarray(rows.column("bag").to_pylist(), dtype=object)
    xs = rows.column("x").combine_chunks()
    lengths = np.asarray(pc.list_value_length(xs))
    if lengths.min() != lengths.max():
        raise ValueError(
            f"DeepMIML.fit: the {features!r} vectors differ in size "
            f"({lengths.min()} to {lengths.max()})"
        )
    x = np.array(xs.flatten(), dtype=np.float32)  # a writable copy (PyTorch needs one)
    x = x.reshape(rows.num_rows, int(lengths[0]))
    starts = np.flatnonzero(np.r_[True, names[1:] != names[:-1]])
    sizes = np.diff(np.r_[starts, len(names)])
    g = int(np.bincount(sizes).argmax())
    odd = np.flatnonzero(sizes != g)
    if len(odd):
        raise ValueError(
            f"DeepMIML.fit: every bag must hold the same number of instances (the network takes "
            f"g x d bags): bag {names[starts[odd[0]]]!r} holds {sizes[odd[0]]}, most hold {g}"
        )
    labels = rows.column("labels").to_pylist()
    hi = max((max(v) for v in labels if v), default=-1)
    width_l = int(n_labels) if n_labels is not None else hi + 1
    counts = np.zeros((len(starts), max(width_l, 1)), dtype=np.int64)
    for b, lo in enumerate(starts):
        first = labels[lo]
        if not first:
            raise ValueError(f"DeepMIML.fit: bag {names[lo]!r} has no label")
        for i in range(lo + 1, lo + g):
            if labels[i] != first:
                raise ValueError(
                    f"DeepMIML.fit: the members of bag {names[lo]!r} disagree on its labels "
                    f"({first} and {labels[i]})"
                )
        if first[0] < 0 or first[-1] >= width_l:
            raise ValueError(
                f"DeepMIML.fit: bag {names[lo]!r} holds label id "
                f"{first[0] if first[0] < 0 else first[-1]}, outside [0, {width_l})"
            )
        np.add.at(counts[b], first, 1)
    members = (starts[:, None] + np.arange(g)[None, :]).astype(np.int64)
    return x, Bags(members, counts)


def write_model(
    spark: SparkSession,
    path: str,
    state: dict[str, np.ndarray],
    config: NetConfig,
    bags: Bags,
    history: list[dict[str, float]],
    method: str,
) -> None:
    """Write a model folder at `path` (atomic): :data:`NETWORK` and a manifest (kind
    :data:`KIND`: n_features, n_labels, group_size, n_bags, method, net settings, history)."""
    buf = io.BytesIO()
    np.savez(buf, **state)  # type: ignore[arg-type]  # numpy's stub reads ** as allow_pickle
    first = state["base.0.weight"]
    plain = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in h.items()}
        for h in history
    ]
    with atomic_output(spark, path) as tmp:
        FileSystem(spark).write_bytes(posixpath.join(tmp, NETWORK), buf.getvalue())
        write_manifest(
            spark,
            tmp,
            new_manifest(
                KIND,
                n_features=int(first.shape[1]),
                n_labels=int(bags.counts.shape[1]),
                group_size=bags.group_size,
                n_bags=int(len(bags.members)),
                method=method,
                net=dataclasses.asdict(config),
                history=plain,
            ),
        )


def read_network(spark: SparkSession, path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(manifest, parameters) of a model folder, checked: the folder's files against its file
    list, the manifest's kind, and every parameter's shape against the manifest's sizes.

    Raises:
        BadInputError: a missing or altered file, another kind of folder, a missing parameter or
            one of the wrong shape (names the file and the array).
    """
    manifest = read_manifest(spark, path, what="MIML model")
    if manifest.get("kind") != KIND:
        raise BadInputError(f"{path} holds a {manifest.get('kind')!r} folder, not a MIML model")
    file = posixpath.join(path, NETWORK)
    try:
        with np.load(io.BytesIO(FileSystem(spark).read_bytes(file)), allow_pickle=False) as z:
            state = {k: z[k] for k in z.files}
    except (OSError, ValueError) as err:
        raise BadInputError(f"{file} is not a readable .npz file: {err}") from err
    d, n_labels, net = int(manifest["n_features"]), int(manifest["n_labels"]), manifest["net"]
    h, kl = int(net["hidden"]), int(net["concepts"]) * n_labels
    want = {
        "base.0.weight": (h, d),
        "base.0.bias": (h,),
        "base.2.weight": (kl, h),
        "base.2.bias": (kl,),
    }
    for name, shape in want.items():
        if name not in state:
            raise BadInputError(f"{file} has no array {name!r}")
        if state[name].shape != shape:
            raise BadInputError(
                f"{file}: array {name!r} has shape {state[name].shape}, the manifest's sizes "
                f"need {shape}"
            )
    return manifest, state


def bag_of_one_logits(state: dict[str, np.ndarray], x: np.ndarray, concepts: int) -> np.ndarray:
    """The network's logits of single instances (bags of one, where the mask is 1): (m, L).

    max over the K concepts of relu(W2 relu(W1 x + b1) + b2) viewed as (K, L), in numpy (the twin
    of :meth:`eagle_spark.miml.network.DeepMIML.forward` on (m, 1, d) bags).

    Args:
        state: the parameters (``base.0.*``, ``base.2.*``). x: (m, d) float32. concepts: K.
    """
    h = np.maximum(x @ state["base.0.weight"].T + state["base.0.bias"], 0.0)
    v1 = np.maximum(h @ state["base.2.weight"].T + state["base.2.bias"], 0.0)
    return v1.reshape(len(x), concepts, -1).max(axis=1).astype(np.float32)


class DeepMIMLModel(Model, _DeepMIMLParams, FolderModel, Persistent):
    """A fitted :class:`DeepMIML`: ``transform`` adds ``scoresCol`` (array<float>, L logits of the
    row as a bag of one) and ``predictionCol`` (double, the best label); ``history`` is the
    training's per-epoch record.

    Memory: per transform task the network's weights (module docstring) and one Arrow batch.
    """

    def __init__(self) -> None:
        super().__init__()
        self._network: Optional[tuple[dict[str, Any], dict[str, np.ndarray]]] = None

    def _attach_data(self, path: str) -> None:
        super()._attach_data(path)
        self._network = None

    def _read(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if self._network is None:
            self._network = read_network(SparkSession.active(), self._require_data())
        return self._network

    @property
    def history(self) -> list[dict[str, Any]]:
        """Per epoch: ``epoch``, ``loss`` (mean training loss), ``val_accuracy`` (%, None without
        validation data)."""
        return list(self._read()[0]["history"])

    def state(self) -> dict[str, np.ndarray]:
        """The network's parameters by state-dict name (numpy arrays; a copy)."""
        return {k: v.copy() for k, v in self._read()[1].items()}

    def _transform(self, dataset: DataFrame) -> DataFrame:
        manifest, state = self._read()
        feat, scores, pred = (
            self.getFeaturesCol(),
            self.getOrDefault(self.scoresCol),
            self.getPredictionCol(),
        )
        for out in (scores, pred):
            if out in dataset.columns:
                raise ValueError(
                    f"DeepMIMLModel.transform: the frame already has a column {out!r}; set "
                    "scoresCol / predictionCol to another name"
                )
        check_columns(dataset, {"features": feat}, "DeepMIMLModel.transform")
        d, concepts = int(manifest["n_features"]), int(manifest["net"]["concepts"])
        weights = {k: v for k, v in state.items() if k.startswith("base.")}

        @F.pandas_udf(T.ArrayType(T.FloatType()))  # type: ignore[call-overload]  # stub: Series -> Series with a DataType return is missing
        def logits(vectors: pd.Series) -> pd.Series:
            x = (
                np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
                if len(vectors)
                else (np.zeros((0, d), np.float32))
            )
            if x.shape[1] != d:
                raise ValueError(
                    f"DeepMIMLModel.transform: {feat!r} has {x.shape[1]} features, the model {d}"
                )
            return pd.Series(list(bag_of_one_logits(weights, x, concepts)))

        out = dataset.withColumn(scores, logits(vector_to_array(F.col(feat), "float32")))
        best = F.expr(f"array_position(`{scores}`, array_max(`{scores}`)) - 1")
        return out.withColumn(pred, best.cast("double"))


__all__ = ["DeepMIML", "DeepMIMLModel", "bag_of_one_logits", "collect_bags", "read_network"]


def label_embeddings(
    spark: SparkSession, dataset: str, out: str, iterations: int, step: float, tasks: int = 16
) -> np.ndarray:
    """GRLR label embeddings (paper Algorithm 1) of an aggregated dataset, by the ``embed`` job
    (:class:`eagle_spark.ml.grlr.GRLR`; rows L2-normalised, `tasks` its ``numTasks``), written to `out`.

    Returns:
        (n_labels, n_features) float32, a unit-norm row per label (zeros for an empty embedding).
    """
    ds = Dataset.load(spark, dataset)
    GRLR(maxIter=iterations, stepSize=step, numTasks=tasks).fitDataset(ds, out, overwrite=True)
    n_labels, d = int(ds.manifest["n_labels"]), int(ds.manifest["n_features"])
    emb = np.zeros((n_labels, d), dtype=np.float32)
    table = pq.read_table(os.path.join(out, S.LABEL_EMB))
    for k, idx, val in zip(
        table.column(S.LABEL_ID).to_pylist(),
        table.column(S.EMB_IDX).to_pylist(),
        table.column(S.EMB_VAL).to_pylist(),
        strict=True,
    ):
        emb[k, idx] = val
    return emb
