"""What the estimators share: Params mirrored from the settings dataclasses, and persistence.

Every tuning Param of an estimator is one field of a settings section (:mod:`eagle_spark.params`):
its default is that field's default, and the values are checked by the same ``__post_init__``
when ``fit`` / ``transform`` builds the section (a bad value raises ``ValueError`` naming the Param
before any job runs). The CLI's ``--set section.key=value`` and the Python Params are thus one set
of knobs with one set of checks.

Persistence follows pyspark.ml: ``model.save(path)`` / ``model.write().overwrite().save(path)`` /
``Model.load(path)`` write Spark ML's ``metadata/`` (class, uid, Params) and, for models, the
model's folder under ``data/``, so the stages also save and load inside a ``pyspark.ml`` Pipeline.
A save is committed atomically: written beside `path` and renamed into place.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Callable, ClassVar, Generic, Optional, Self, Type, TypeVar

from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.util import (
    DefaultParamsReader,
    DefaultParamsWriter,
    MLReadable,
    MLReader,
    MLWritable,
    MLWriter,
)
from pyspark.sql import SparkSession

from eagle_spark import schemas as S
from eagle_spark.errors import BadInputError, SettingsError
from eagle_spark.io.fs import (
    FileSystem,
    absolute,
    atomic_output,
    check_separate,
    restore_interrupted,
)
from eagle_spark.io.integrity import check_folder
from eagle_spark.params import BaseParams

P = TypeVar("P", bound=BaseParams)
M = TypeVar("M")


def optional_int(value: object) -> Optional[int]:
    """Param converter: None or a whole number."""
    return None if value is None else TypeConverters.toInt(value)


def optional_float(value: object) -> Optional[float]:
    """Param converter: None or a number."""
    return None if value is None else TypeConverters.toFloat(value)


def optional_string(value: object) -> Optional[str]:
    """Param converter: None or a string."""
    return None if value is None else TypeConverters.toString(value)


def settings_param(name: str, doc: str, converter: Callable[[object], object]) -> Param:
    """A Param declared on a class body (pyspark's idiom: ``Params._dummy()`` as parent)."""
    return Param(Params._dummy(), name, doc, typeConverter=converter)


class HasLabelWeightsCol(Params):
    """The ``labelWeightsCol`` Param (default ``label_weights``): each assigned label's weight in
    (0, 1], array<float> in the labels column's order (weighted assignment). GRLRModel.transform
    writes it under soft weighting; the classifiers' fit reads it when the frame has it and train
    on the expected loss."""

    labelWeightsCol = Param(
        Params._dummy(),
        "labelWeightsCol",
        "each assigned label's weight in (0, 1], "
        "array<float> in the labels column's order: written by GRLRModel.transform with "
        "soft weighting, read by the classifiers' fit when the frame has it",
        typeConverter=TypeConverters.toString,
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(labelWeightsCol=S.LABEL_WEIGHTS)


class SettingsParams(Params):
    """Params that mirror settings fields.

    Subclasses declare ``_fields = {SettingsClass: {"paramName": "field_name", ...}, ...}``; the
    defaults are set from the dataclasses, and :meth:`settings` builds a checked section.
    """

    _fields: ClassVar[dict[type, dict[str, str]]] = {}
    _input_kwargs: dict[str, Any]  # set by pyspark's @keyword_only on each constructor call

    def _set_settings_defaults(self) -> None:
        for cls, mapping in self._fields.items():
            defaults = cls()
            self._setDefault(**{name: getattr(defaults, field) for name, field in mapping.items()})

    def _set_given(self, kwargs: dict[str, Any]) -> None:
        """Set the keyword arguments a constructor was given (``self._input_kwargs``).

        None means "the default" for a Param that cannot hold it (``numTrees=None``), and is kept
        where None is one of the Param's values (``maxSplitShared=None``: every heavy leaf split;
        ``maxLeafWork=None``: Parabel's leaves), so it is not silently replaced by the default.
        """

        def holds_none(name: str) -> bool:
            try:
                return getattr(self, name).typeConverter(None) is None
            except TypeError:
                return False

        self._set(**{k: v for k, v in kwargs.items() if v is not None or holds_none(k)})

    @classmethod
    def fromSettings(cls, *sections: BaseParams) -> Self:
        """A new instance whose Params take the values of settings sections (``EmbedParams``,
        ``TreeParams``, ...): how the CLI and the pipeline, which read settings files, build the
        estimators and models they run.

        Raises:
            KeyError: a section this class has no Params for.
        """
        instance = cls()
        for section in sections:
            mapping = cls._fields[type(section)]
            instance._set(**{name: getattr(section, field) for name, field in mapping.items()})
        return instance

    def settings(self, cls: Type[P], **fixed: Any) -> P:
        """The settings section `cls` from the current Param values (plus `fixed` fields).

        Raises:
            ValueError: a value fails the section's checks; the message names the Param.
        """
        mapping = self._fields[cls]
        values = {field: self.getOrDefault(name) for name, field in mapping.items()}
        values = {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()}
        try:
            return cls.from_dict(values | fixed)  # type: ignore[return-value]
        except SettingsError as err:
            message = str(err)
            for name, field in mapping.items():
                message = re.sub(rf"'?\b(\w+\.)?{re.escape(field)}\b'?(?= )", name, message)
            raise ValueError(f"{type(self).__name__}: {message}") from None


class ParamsWriter(MLWriter):
    """Writes an estimator (Params only) as Spark ML's ``metadata/``, atomically."""

    def __init__(self, instance: Params) -> None:
        super().__init__()
        self.instance = instance

    def save(self, path: str) -> None:
        """Write to `path`; an existing `path` is an error unless ``overwrite()`` was called.

        Raises:
            OutputExistsError (a ValueError): `path` exists and overwrite was not asked for.
        """
        spark = self.sparkSession
        check_separate(path, self._inputs())
        with atomic_output(spark, path, self.shouldOverwrite) as tmp:
            DefaultParamsWriter.saveMetadata(self.instance, tmp, spark, extraMetadata=self._extra())
            self._save_data(spark, tmp)

    def _inputs(self) -> list[str]:
        return []

    def _extra(self) -> dict[str, Any]:
        from eagle_spark import __version__

        return {"eagle_spark_version": __version__}

    def _save_data(self, spark: SparkSession, tmp: str) -> None:
        pass


class FolderModelWriter(ParamsWriter):
    """Writes a model: ``metadata/`` plus the model's folder copied to ``data/``."""

    def _inputs(self) -> list[str]:
        return [self.instance.dataPath]  # type: ignore[attr-defined]

    def _save_data(self, spark: SparkSession, tmp: str) -> None:
        FileSystem(spark).copy(self.instance.dataPath, posixpath.join(tmp, "data"))  # type: ignore[attr-defined]


class ParamsReader(MLReader, Generic[M]):
    """Reads what :class:`ParamsWriter` / :class:`FolderModelWriter` wrote."""

    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> M:
        """Load the instance saved at `path`.

        Raises:
            BadInputError (a ValueError): no Spark ML metadata at `path`, or it holds another class;
                a file of it is missing, altered or added (:func:`eagle_spark.io.integrity.check_folder`).
        """
        spark = self.sparkSession
        fs = FileSystem(spark)
        restore_interrupted(fs, path)
        if not fs.exists(posixpath.join(path, "metadata")):
            raise BadInputError(f"{path} is not a saved eagle_spark stage (no metadata/ folder)")
        check_folder(path, "saved stage")
        metadata = DefaultParamsReader.loadMetadata(path, spark)
        expected = f"{self.cls.__module__}.{self.cls.__name__}"
        if metadata.get("class") != expected:
            raise BadInputError(f"{path} holds a {metadata.get('class')}, not a {expected}")
        instance = self.cls()
        instance._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(instance, metadata)
        if isinstance(instance, FolderModel):
            data = posixpath.join(path, "data")
            if not fs.exists(data):
                raise BadInputError(f"saved model {path} has no data/ folder")
            instance._attach_data(data)
        return instance


class Persistent(MLWritable, MLReadable):
    """Mixin: ``write()`` / ``save(path)`` / ``read()`` / ``load(path)`` (pyspark.ml contract)."""

    def write(self) -> MLWriter:
        """An atomic writer of this instance (``.overwrite()`` to replace an existing folder)."""
        return FolderModelWriter(self) if isinstance(self, FolderModel) else ParamsWriter(self)  # type: ignore[arg-type]

    @classmethod
    def read(cls) -> MLReader:
        """A reader of this class (``.load(path)``; the active session is used)."""
        return ParamsReader(cls)


class FolderModel:
    """Mixin of a fitted model whose data is one folder written by a stage (``dataPath``).

    A model's folder is in the work folder until it is saved (see :mod:`eagle_spark.ml.frames`);
    a loaded model reads the saved folder's ``data/``, which must stay where it is.
    """

    dataPath: str = ""

    def _attach_data(self, path: str) -> None:
        self.dataPath = absolute(path)

    def atFolder(self, path: str) -> Self:
        """This model, reading its data from a stage's output folder `path` (e.g. what
        ``eagle-spark embed`` or ``train`` wrote; a saved model's folder is read by ``load``)."""
        self._attach_data(path)
        return self

    def _require_data(self) -> str:
        if not self.dataPath:
            raise ValueError(
                f"{type(self).__name__} has no data: fit an estimator or load a saved model"
            )
        return self.dataPath


def fitted(estimator: Params, model: M, path: str, run: Callable[[str], object]) -> M:
    """Run a training stage into the folder `path` and return `model` reading it, with the
    estimator's Params copied (pyspark.ml's ``_copyValues``).

    Args:
        estimator: the estimator being fitted.
        model: a new, empty model (a :class:`FolderModel`).
        path: the stage's output folder (a work folder for ``fit``, the caller's for ``fitDataset``).
        run: writes the stage's output folder given its path.
    """
    run(path)
    model._attach_data(path)  # type: ignore[attr-defined]
    return estimator._copyValues(model)  # type: ignore[arg-type,return-value,type-var]


__all__ = [
    "FolderModel",
    "FolderModelWriter",
    "ParamsReader",
    "ParamsWriter",
    "Persistent",
    "SettingsParams",
    "fitted",
    "optional_float",
    "optional_int",
    "settings_param",
]
