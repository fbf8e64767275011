"""What the estimators share: Params mirrored from the settings dataclasses, and persistence.

Every tuning Param of an estimator is one field of a settings section (:mod:`eagle_spark.settings`):
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

import inspect
import posixpath
import re
import textwrap
import typing
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
from eagle_spark.settings import Section, declarations, section_key, shown

P = TypeVar("P", bound=Section)
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


def declared_param(name: str, doc: str, converter: Callable[[object], object]) -> Param:
    """A Param that is not a setting (a column name, a frame's sizes), declared on a class body
    (pyspark's idiom: ``Params._dummy()`` as parent)."""
    return Param(Params._dummy(), name, doc, typeConverter=converter)


def _converter(hint: Any) -> Callable[[object], object]:
    """The Param type converter of a setting's type annotation."""
    if typing.get_origin(hint) is typing.Union:
        inner = _converter(next(a for a in typing.get_args(hint) if a is not type(None)))
        return lambda value: None if value is None else inner(value)
    if typing.get_origin(hint) is tuple:
        return lambda value: tuple(TypeConverters.toListString(value))
    converters: dict[Any, Callable[[object], object]] = {
        bool: TypeConverters.toBoolean,
        int: TypeConverters.toInt,
        float: TypeConverters.toFloat,
        str: TypeConverters.toString,
    }
    if hint not in converters:
        raise TypeError(f"no Param type for settings of type {hint!r}")
    return converters[hint]


def _accessors(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def get(self: Params) -> Any:
        return self.getOrDefault(name)

    def set_(self: Params, value: Any) -> Any:
        return self._set(**{name: value})

    get.__doc__ = f"The value of ``{name}`` (its default when not set)."
    set_.__doc__ = f"Set ``{name}``."
    return get, set_


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
    """Params generated from settings declarations (:func:`eagle_spark.settings.setting`).

    A subclass names the sections it mirrors in ``_mirrors``: a section class (all its settings)
    or ``(section class, ("field", ...))`` (some of them). For each mirrored setting the class gets
    a Param (the declaration's name, its line of doc, a converter from its type), its default,
    ``getX`` and ``setX`` (unless the class defines them), and ``_fields`` maps the Params back to
    the fields. A ``{params}`` in the class docstring is replaced by the list of the Params with
    their defaults. A constructor takes any of its Params by name (:meth:`setParams`).
    """

    _mirrors: ClassVar[tuple[Any, ...]] = ()
    _fields: ClassVar[dict[type, dict[str, str]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_mirrors" in cls.__dict__:
            fields: dict[type, dict[str, str]] = {}
            for entry in cls._mirrors:
                section, only = entry if isinstance(entry, tuple) else (entry, None)
                mapping = fields.setdefault(section, {})
                for item in declarations(section):
                    if only is not None and item.name not in only:
                        continue
                    if any(item.param in m for m in fields.values()):
                        raise TypeError(f"{cls.__name__}: Param {item.param} is mirrored twice")
                    mapping[item.param] = item.name
                    setattr(
                        cls, item.param, declared_param(item.param, item.doc, _converter(item.hint))
                    )
                    getter, setter = _accessors(item.param)
                    for method, made in (
                        (f"get{item.param[0].upper()}{item.param[1:]}", getter),
                        (f"set{item.param[0].upper()}{item.param[1:]}", setter),
                    ):
                        if not hasattr(cls, method):
                            setattr(cls, method, made)
            cls._fields = fields
        if cls.__doc__ and "    {params}" in cls.__doc__:
            cls.__doc__ = cls.__doc__.replace("    {params}", cls._params_doc())
        init = cls.__dict__.get("__init__")
        if init is not None and any(
            p.kind is p.VAR_KEYWORD for p in inspect.signature(init).parameters.values()
        ):
            _CONSTRUCTORS.append(cls)

    @classmethod
    def _params_doc(cls) -> str:
        return "\n".join(
            _param_lines(section, mapping.items(), "    ")
            for section, mapping in cls._fields.items()
        )

    def _set_settings_defaults(self) -> None:
        for cls, mapping in self._fields.items():
            defaults = cls()
            self._setDefault(**{name: getattr(defaults, field) for name, field in mapping.items()})

    def setParams(self, **params: Any) -> Self:
        """Set Params by name (pyspark.ml's ``setParams``).

        Raises:
            TypeError: a name that is not a Param of this class, or a value its converter refuses.
        """
        known = {p.name: p for p in self.params}
        for name, value in params.items():
            if name not in known:
                raise TypeError(
                    f"{type(self).__name__} has no Param {name!r}; its Params: "
                    + ", ".join(sorted(known))
                )
            if value is None:  # pyspark's _set skips the converter for None
                try:
                    known[name].typeConverter(None)
                except TypeError:
                    raise TypeError(
                        f"{type(self).__name__}: {name} cannot be None (it has no null value)"
                    ) from None
        return self._set(**params)

    @classmethod
    def fromSettings(cls, *sections: Section) -> Self:
        """A new instance whose Params take the values of settings sections (``EmbedSettings``,
        ``TreeSettings``, ...): how the CLI and the pipeline, which read settings files, build the
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
            return cls.from_dict(values | fixed)
        except SettingsError as err:
            message = str(err)
            for name, field in mapping.items():
                message = re.sub(rf"'?\b(\w+\.)?{re.escape(field)}\b'?(?= )", name, message)
            raise ValueError(f"{type(self).__name__}: {message}") from None


def _param_lines(section: type, pairs: Any, indent: str) -> str:
    """Docstring lines, one per (Param, field) of `section`: name, setting key, default, doc."""
    items = {d.name: d for d in declarations(section)}
    key = section_key(section)
    rows = [
        f"``{param}`` ({key}.{name}, {shown(items[name].default)}): {items[name].doc}"
        for param, name in pairs
    ]
    return "\n".join(
        textwrap.fill(r, 96, initial_indent=f"{indent}- ", subsequent_indent=f"{indent}  ")
        for r in rows
    )


F = TypeVar("F", bound=Callable[..., Any])


def takes_settings(section: type) -> Callable[[F], F]:
    """Decorator of a function taking a settings section's values as keyword arguments named by
    their Params (``**params``; :func:`eagle_spark.settings.from_params` builds the section): its
    docstring's ``{params}`` becomes the list of them, and its signature shows them, keyword-only
    with their defaults (for ``help()`` and IDEs)."""

    def decorate(function: F) -> F:
        items = declarations(section)
        if function.__doc__ and "{params}" in function.__doc__:
            line = next(x for x in function.__doc__.splitlines() if x.strip() == "{params}")
            indent = line[: len(line) - len(line.lstrip())]
            function.__doc__ = function.__doc__.replace(
                line, _param_lines(section, [(d.param, d.name) for d in items], indent)
            )
        own = [
            p
            for p in inspect.signature(function).parameters.values()
            if p.kind is not p.VAR_KEYWORD
        ]
        function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # inspect reads it
            own
            + [
                inspect.Parameter(d.param, inspect.Parameter.KEYWORD_ONLY, default=d.default)
                for d in items
            ]
        )
        return function

    return decorate


_CONSTRUCTORS: list[type] = []
"""The classes whose constructor takes Params by name (``**params``), for :func:`sign_constructors`."""


def sign_constructors() -> None:
    """Give each constructor that takes Params by name the signature ``help()`` and IDEs show:
    keyword-only, one per Param, with its default (run once the classes exist: an instance is
    made, which an ABC's ``__init_subclass__`` cannot do)."""
    while _CONSTRUCTORS:
        cls = _CONSTRUCTORS.pop()
        instance = cls()
        cls.__init__.__signature__ = inspect.Signature(  # type: ignore[misc]  # inspect reads it
            [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            + [
                inspect.Parameter(
                    p.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=instance.getOrDefault(p) if instance.hasDefault(p) else None,
                )
                for p in sorted(instance.params, key=lambda p: p.name)
            ]
        )


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
        from eagle_spark._version import __version__
        from eagle_spark.io.integrity import FILES, MARK

        # the commit lists the folder's files: the metadata says so (a removed list is damage)
        return {"eagle_spark_version": __version__, MARK: FILES}

    def _save_data(self, spark: SparkSession, tmp: str) -> None:
        pass


class FolderModelWriter(ParamsWriter):
    """Writes a model: ``metadata/`` plus the model's folder copied to ``data/``."""

    def __init__(self, instance: Params) -> None:
        super().__init__(instance)
        if not isinstance(instance, FolderModel):
            raise TypeError(f"{type(instance).__name__} is not a model with a data folder")
        self.model = instance

    def _inputs(self) -> list[str]:
        return [self.model.dataPath]

    def _save_data(self, spark: SparkSession, tmp: str) -> None:
        FileSystem(spark).copy(self.model.dataPath, posixpath.join(tmp, "data"))


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
        if not isinstance(self, Params):
            raise TypeError(f"{type(self).__name__} is not pyspark.ml Params")
        return FolderModelWriter(self) if isinstance(self, FolderModel) else ParamsWriter(self)

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
    model._attach_data(path)  # type: ignore[attr-defined]  # M: a FolderModel (the docstring)
    return estimator._copyValues(model)  # type: ignore[type-var]  # M: Params too


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
    "declared_param",
]
