"""A dataset folder seen from Python: load it, read it as one frame of samples, write one."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eagle_spark import schemas as S
from eagle_spark.aggregation.split import (
    group_parts,
    held_bucket,
    kept_bucket,
    require_groups,
    split_groups,
)
from eagle_spark.io.convert import to_ml_vectors
from eagle_spark.io.fs import FileSystem, absolute, atomic_output, check_separate
from eagle_spark.io.tables import has_table, read_manifest, read_table
from eagle_spark.ml.base import takes_settings
from eagle_spark.ml.frames import ROWS, Source, check_columns, materialise, source_of, tag
from eagle_spark.settings import AggregateSettings, IngestSettings, SynthSettings, from_params


class Dataset:
    """A dataset folder (the on-disk format of every stage: ``X``, ``Y``, ``Y1``, ``Y2`` Parquet
    tables and ``_manifest.json``, see :mod:`eagle_spark.schemas`) for the Python API.

    Examples:
        >>> from pyspark.ml.linalg import SparseVector
        >>> frame = spark.createDataFrame(
        ...     [(SparseVector(3, [0], [1.0]), 7, [0, 1]), (SparseVector(3, [1], [1.0]), 7, [0, 1]),
        ...      (SparseVector(3, [2], [1.0]), 9, [1])], ["features", "group_id", "group_labels"])
        >>> ds = Dataset.from_samples(frame, work + "/ds")
        >>> (ds.n_samples, ds.n_features, ds.n_labels, ds.n_groups)
        (3, 3, 2, 2)
        >>> back = Dataset.load(spark, work + "/ds").samples()
        >>> sorted((r.sample_id, r.group_id, r.group_labels) for r in back.collect())
        [(0, 0, [0, 1]), (1, 0, [0, 1]), (2, 1, [1])]
    """

    def __init__(self, spark: SparkSession, path: str, manifest: dict[str, Any]) -> None:
        self.spark = spark
        self.path = absolute(path)
        self.manifest = manifest

    @classmethod
    def at(cls, spark: SparkSession, path: str) -> "Dataset":
        """A handle on the folder `path` that reads nothing yet: the stage given it checks the
        folder and names what is missing (the CLI's way in; ``load`` checks at once)."""
        return cls(spark, path, {})

    @classmethod
    def load(cls, spark: SparkSession, path: str) -> "Dataset":
        """Open a dataset folder written by ``ingest``, ``aggregate``, ``synth``, ``assign`` or
        :meth:`from_samples`.

        Raises:
            BadInputError (a ValueError): the folder or its manifest is missing or of another format
                version, or it has no X table.
        """
        manifest = read_manifest(spark, path)
        if not has_table(spark, path, S.X):
            from eagle_spark.errors import BadInputError

            raise BadInputError(f"dataset {path} has no X table")
        return cls(spark, path, manifest)

    @property
    def n_samples(self) -> int:
        """Rows of X."""
        return int(self.manifest["n_samples"])

    @property
    def n_features(self) -> int:
        """Columns of X (the feature space)."""
        return int(self.manifest["n_features"])

    @property
    def n_labels(self) -> int:
        """The label space (columns of Y and Y2)."""
        return int(self.manifest["n_labels"])

    @property
    def n_groups(self) -> Optional[int]:
        """Groups of Y1 (None for a dataset without groups)."""
        value = self.manifest.get("n_groups")
        return None if value is None else int(value)

    def has(self, table: str) -> bool:
        """Whether the dataset has `table` (``X``, ``Y``, ``Y1``, ``Y2``)."""
        return has_table(self.spark, self.path, table)

    def samples(
        self, featuresCol: str = "features", labelsCol: Optional[str] = "labels"
    ) -> DataFrame:
        """One row per sample, the frame the estimators take.

        Args:
            featuresCol: name of the features column (SparseVector of size n_features, float64
                values of X).
            labelsCol: name of the true labels column (Y's label ids, sorted) when the dataset has
                Y; None leaves it out (e.g. to let ``GRLRModel.transform`` write ``labels``).
        Returns:
            DataFrame[sample_id long, features vector, group_id long, group_labels array<int>,
            labels array<int>]: ``group_id`` / ``group_labels`` only for aggregated data (a sample
            in no group has nulls; ``group_labels`` repeats a label id by its count in Y2, and is
            sorted), ``labels`` only with Y, and ``label_weights`` (array<float>, in the labels'
            order) when Y carries weights (a soft ``assign`` output). Backed by this folder: an estimator given this very
            frame reads the folder and copies nothing.
        """
        X = read_table(self.spark, self.path, S.X)
        frame = to_ml_vectors(X, self.n_features, featuresCol).drop(S.FEAT_IDX, S.FEAT_VAL)
        columns = {"features": featuresCol}
        if self.has(S.Y1):
            frame = frame.join(read_table(self.spark, self.path, S.Y1), S.SAMPLE_ID, "left")
            columns["group"] = S.GROUP_ID
            if self.has(S.Y2):
                y2 = read_table(self.spark, self.path, S.Y2)
                per_group = y2.groupBy(S.GROUP_ID).agg(
                    F.sort_array(
                        F.flatten(F.collect_list(F.array_repeat(S.LABEL_ID, F.col(S.COUNT))))
                    ).alias("group_labels")
                )
                frame = frame.join(per_group, S.GROUP_ID, "left").withColumn(
                    "group_labels", F.coalesce("group_labels", F.array().cast("array<int>"))
                )
                frame = frame.select(S.SAMPLE_ID, featuresCol, S.GROUP_ID, "group_labels")
                columns["group_labels"] = "group_labels"
        if labelsCol is not None and self.has(S.Y):
            y = read_table(self.spark, self.path, S.Y)
            if S.LABEL_WEIGHTS in y.columns:  # sorted by label, weights in that order (assign)
                y = y.select(S.SAMPLE_ID, F.col(S.LABEL_IDS).alias(labelsCol), S.LABEL_WEIGHTS)
                columns["label_weights"] = S.LABEL_WEIGHTS
            else:
                y = y.select(S.SAMPLE_ID, F.sort_array(S.LABEL_IDS).alias(labelsCol))
            frame = frame.join(y, S.SAMPLE_ID, "left")
            columns["labels"] = labelsCol
        frame = frame.orderBy(S.SAMPLE_ID)
        return tag(
            frame,
            Source(
                path=self.path,
                columns=columns,
                keyed=frame,
                key=S.SAMPLE_ID,
                n_features=self.n_features,
                n_labels=self.n_labels,
            ),
        )

    @classmethod
    def from_samples(
        cls,
        samples: DataFrame,
        path: str,
        featuresCol: str = "features",
        groupCol: Optional[str] = None,
        groupLabelsCol: Optional[str] = None,
        labelsCol: Optional[str] = None,
        numFeatures: Optional[int] = None,
        numLabels: Optional[int] = None,
        overwrite: bool = False,
    ) -> "Dataset":
        """Write a frame of samples as a dataset folder (committed atomically).

        Args:
            samples: one row per sample with `featuresCol` (SparseVector, or ``feat_idx`` /
                ``feat_val`` arrays) and optionally a group column, a group-labels column and a
                labels column (arrays of label ids). Sample ids are given anew, 0 .. n-1 in the
                frame's order; group ids 0 .. n_groups-1 in the order of the group values.
            path: the folder to write.
            featuresCol, groupCol, groupLabelsCol, labelsCol: the columns (None: absent). When the
                frame has columns named ``group_id`` / ``group_labels`` / ``labels`` and the
                arguments are left None, those are used.
            numFeatures, numLabels: the feature / label space (default: from the data).
            overwrite: replace an existing folder.
        Returns:
            The written :class:`Dataset`.
        Raises:
            ValueError, TypeError: a missing or mistyped column, ids out of range, or members of a
                group with different group labels (the message names the column or group).
            OutputExistsError (a ValueError): `path` exists and `overwrite` is false.
        """
        path = absolute(path)
        names = samples.columns
        columns = {"features": featuresCol}
        for role, given, default in (
            ("group", groupCol, S.GROUP_ID),
            ("group_labels", groupLabelsCol, "group_labels"),
            ("labels", labelsCol, "labels"),
        ):
            if given is not None or default in names:
                columns[role] = given or default
        if "group_labels" in columns and "group" not in columns:
            raise ValueError("Dataset.from_samples: a group-labels column needs a group column")
        check_columns(samples, columns, "Dataset.from_samples")
        spark = samples.sparkSession
        src = source_of(samples)
        check_separate(path, [src.path] if src is not None else [])
        with atomic_output(spark, path, overwrite) as tmp:
            materialise(samples, columns, tmp, "Dataset.from_samples", numFeatures, numLabels)
            FileSystem(spark).delete(f"{tmp}/{ROWS}")
        return cls.load(spark, path)

    @classmethod
    @takes_settings(IngestSettings)
    def ingest(
        cls, spark: SparkSession, source: str, path: str, overwrite: bool = False, **params: Any
    ) -> "Dataset":
        """Read an Extreme Classification Repository / libsvm text file (plain or gzip) into a
        dataset folder with X and Y (:func:`eagle_spark.io.ingest.ingest`).

        Args:
            source: the text file.
            path: the dataset folder to write (atomic).
            overwrite: replace an existing folder.
            params: ``ingest`` settings by their Param names (the rest: their defaults):
            {params}
        Raises:
            TypeError: an unknown keyword argument.
            BadInputError (a ValueError): a bad line, header or count (``<file>:<line>: <problem>``),
                or a bad setting (SettingsError).
            OutputExistsError (a ValueError): `path` exists and `overwrite` is false.
        """
        settings = from_params(IngestSettings, params, "Dataset.ingest")
        path = absolute(path)
        source = absolute(source)
        from eagle_spark.io.ingest import ingest

        ingest(spark, source, path, settings, overwrite=overwrite)
        return cls.load(spark, path)

    @takes_settings(AggregateSettings)
    def aggregate(
        self,
        path: str,
        y1: Optional[str] = None,
        y2: Optional[str] = None,
        overwrite: bool = False,
        **params: Any,
    ) -> "Dataset":
        """Group the samples and aggregate their labels (paper section 6: R-g random groups of g,
        or C-D hierarchical balanced 2-means clusters to depth D): writes X, Y, Y1, Y2 to `path`
        (:func:`eagle_spark.aggregation.aggregate.aggregate`).

        Args:
            path: the aggregated dataset folder to write (atomic).
            y1, y2: your own Y1 and Y2 tables (Parquet or CSV files or folders; both or neither)
                instead of building groups; checked against X.
            overwrite: replace an existing folder.
            params: ``aggregate`` settings by their Param names (the rest: their defaults):
            {params}
        Raises:
            TypeError: an unknown keyword argument.
            ValueError: a bad setting (SettingsError), a dataset without Y, or a bad row of your
                tables (BadInputError).
        """
        settings = from_params(AggregateSettings, params, "Dataset.aggregate")
        path = absolute(path)
        from eagle_spark.aggregation.aggregate import aggregate

        aggregate(
            self.spark, self.path, path, settings, overwrite=overwrite, y1_path=y1, y2_path=y2
        )
        return type(self).load(self.spark, path)

    @classmethod
    @takes_settings(SynthSettings)
    def synth(
        cls, spark: SparkSession, path: str, overwrite: bool = False, **params: Any
    ) -> tuple["Dataset", "Dataset"]:
        """Generate a synthetic train / test pair of a benchmark's shape
        (:func:`eagle_spark.synth.synth`), or with ``like`` a twin of a labelled dataset
        (:func:`eagle_spark.synth.synth_like`), under `path` (``train/``, ``test/``).

        Args:
            path: the folder to write (atomic).
            overwrite: replace an existing folder.
            params: ``synth`` settings by their Param names (the rest: their defaults):
            {params}
        Returns:
            (train, test) datasets.
        Raises:
            TypeError: an unknown keyword argument.
            BadInputError (a ValueError): unknown preset, scale not > 0 (or above 1 with a
                difficulty), difficulty out of [0, 1], ``like`` not a dataset with true labels.
        """
        s = from_params(SynthSettings, params, "Dataset.synth")
        path = absolute(path)
        import posixpath

        from eagle_spark.synth import synth

        if s.like is not None:
            from eagle_spark.synth import synth_like

            synth_like(spark, path, absolute(s.like), s.scale, s.seed, s.rows_per_task, overwrite)
        else:
            synth(
                spark,
                path,
                s.preset,
                s.scale,
                s.seed,
                s.rows_per_task,
                overwrite=overwrite,
                difficulty=s.difficulty,
            )
        return cls.load(spark, posixpath.join(path, "train")), cls.load(
            spark, posixpath.join(path, "test")
        )

    def split(
        self,
        keptPath: str,
        heldPath: str,
        share: float,
        seed: int = 0,
        by: str = "sample",
        overwrite: bool = False,
        labels: bool = True,
        idMap: Optional[str] = None,
        keptShare: float = 1.0,
        heldGroups: Optional[Sequence[int]] = None,
    ) -> tuple["Dataset", "Dataset"]:
        """Cut the dataset in two by a seeded hash: a share `share` of it held out.

        Args:
            keptPath, heldPath: the two dataset folders to write (each atomic).
            share: held-out share in (0, 1).
            seed: seed of the hash (xxhash64 of seed and id).
            by: ``sample`` (samples by sample_id: a validation split) or ``group`` (the groups of an
                aggregated dataset by group_id, each part an aggregated dataset of its own with the
                members' X, Y1, Y2 and Y when present; samples in no group are dropped).
            overwrite: replace existing folders.
            labels: keep the true labels Y (false: only the groups' labels count); with
                ``by="group"`` and no labels both parts are written in one pass (one numbering of
                the members, each table read once per part).
            idMap: as :meth:`split_part`, the kept part's renumbering.
            keptShare: in (0, 1]: the share of the groups not held out that make up the kept part,
                chosen by a second seeded hash (:func:`eagle_spark.aggregation.split.kept_bucket`); the others are in neither
                part. Only with ``by="group"`` and no labels (a proxy's training set of bounded
                size: :mod:`eagle_spark.assignment.selection`).
            heldGroups: the group ids to hold out, instead of the share and the seed's hash
                (only with ``by="group"``, no labels and `keptShare` 1: the folds of
                :func:`eagle_spark.assignment.selection.group_folds`).
        Returns:
            (kept, held) datasets; ids are renumbered (:meth:`from_samples`), the feature and
            label spaces kept.
        Raises:
            ValueError: a share outside (0, 1), an unknown `by`, or ``group`` on a dataset without
                Y1 / Y2; `idMap` or a `keptShare` below 1 with another `by` or with `labels`; a
                `keptShare` outside (0, 1]; `heldGroups` with another `by`, with `labels`,
                with a `keptShare` below 1 or empty; OutputExistsError (a ValueError) as
                :meth:`from_samples`.
        """
        if heldGroups is not None and (by != "group" or labels):
            raise ValueError(
                "Dataset.split: heldGroups needs by='group', labels=False and keptShare 1"
            )
        if by == "group" and not labels:
            kept, held = split_groups(
                self.spark,
                self.path,
                keptPath,
                heldPath,
                share,
                seed,
                overwrite,
                idMap,
                keptShare,
                heldGroups,
            )
            return type(self).load(self.spark, kept), type(self).load(self.spark, held)
        if idMap is not None:
            raise ValueError("Dataset.split: idMap needs by='group' and labels=False")
        if keptShare != 1.0:
            raise ValueError("Dataset.split: keptShare needs by='group' and labels=False")
        return (
            self.split_part(
                keptPath, share, seed, by, held=False, overwrite=overwrite, labels=labels
            ),
            self.split_part(
                heldPath, share, seed, by, held=True, overwrite=overwrite, labels=labels
            ),
        )

    def split_part(
        self,
        path: str,
        share: float,
        seed: int = 0,
        by: str = "sample",
        held: bool = False,
        overwrite: bool = False,
        labels: bool = True,
        idMap: Optional[str] = None,
        keptShare: float = 1.0,
    ) -> "Dataset":
        """One part of :meth:`split` (the held-out one when `held`), written to `path`; without the
        true labels Y when `labels` is false (only the groups' labels count then).

        With `idMap` (only ``by="group"`` without labels) the part's renumbering is also written
        there as Parquet: one row per (member, group) of the part, ``sample_id`` and ``group_id``
        of this dataset, ``part_sample_id`` and ``part_group_id`` of the part.

        With `keptShare` below 1 (only ``by="group"`` without labels) the kept part holds that
        share of the groups not held out, as :meth:`split`'s; the held-out part is unchanged.

        Raises:
            ValueError: as :meth:`split`, or `idMap` or `keptShare` below 1 with another `by` or
                with `labels`.
        """
        path = absolute(path)
        if idMap is not None and (by != "group" or labels):
            raise ValueError("Dataset.split_part: idMap needs by='group' and labels=False")
        if keptShare != 1.0 and (by != "group" or labels):
            raise ValueError("Dataset.split_part: keptShare needs by='group' and labels=False")
        in_held = held_bucket(share, seed, S.GROUP_ID if by == "group" else S.SAMPLE_ID)
        if by not in ("sample", "group"):
            raise ValueError(f"Dataset.split: by must be sample or group, got {by!r}")
        if by == "group":
            require_groups(self.spark, self.path)
            if not labels:  # written table by table: no frame of samples is read
                idm = None if idMap is None else (held, absolute(idMap))
                kept = kept_bucket(keptShare, seed)
                part = group_parts(
                    self.spark, self.path, {held: path}, in_held, overwrite, idm, kept
                )
                return type(self).load(self.spark, part[held])
        frame = self.samples()
        groups: dict[str, Any] = {}
        if by == "group":
            frame = frame.where(F.col(S.GROUP_ID).isNotNull())
            groups = {
                "groupCol": S.GROUP_ID,
                "groupLabelsCol": "group_labels",
                "labelsCol": "labels" if "labels" in frame.columns else None,
            }
        if not labels:
            frame = frame.drop("labels")
        return type(self).from_samples(
            frame.filter(in_held if held else ~in_held).drop(S.SAMPLE_ID),
            path,
            numFeatures=self.n_features,
            numLabels=self.n_labels,
            overwrite=overwrite,
            **groups,
        )

    def save(self, path: str, overwrite: bool = False) -> "Dataset":
        """Copy the folder to `path` (committed atomically); returns the copy.

        Raises:
            OutputExistsError (a ValueError): `path` exists and `overwrite` is false, or `path`
                overlaps this folder.
        """
        path = absolute(path)
        check_separate(path, [self.path])
        with atomic_output(self.spark, path, overwrite) as tmp:
            FileSystem(self.spark).copy(self.path, tmp)
        return type(self).load(self.spark, path)

    def __repr__(self) -> str:
        return (
            f"Dataset({self.path!r}, n_samples={self.n_samples}, n_features={self.n_features}, "
            f"n_labels={self.n_labels}, n_groups={self.n_groups})"
        )


__all__ = ["Dataset"]
