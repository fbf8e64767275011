"""The declaration machinery of the settings: a section is a frozen dataclass of
:func:`setting` fields (:func:`section` registers it), loaded from YAML-like dicts with every key
and type checked (:class:`Section`), its choices and bounds checked on construction
(:func:`check_declared`); everything else about a setting (Params, flags, the reference) is
generated from its declaration. The sections themselves are in :mod:`eagle_spark.settings.data`,
:mod:`~eagle_spark.settings.learning` and :mod:`~eagle_spark.settings.sections`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Self, Sequence, TypeVar

from eagle_spark.errors import SettingsError


class Section:
    """Mixin for frozen settings dataclasses: typed ``from_dict``/``to_dict`` and validation."""

    # what @dataclass gives every section (declared for type checkers; Section itself is not one)
    __dataclass_fields__: typing.ClassVar[dict[str, dataclasses.Field[Any]]]

    def __post_init__(self) -> None:
        check_declared(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, where: str = "") -> Self:
        """Build from a mapping, rejecting unknown keys and values of the wrong type.

        Args:
            data: key -> value (nested mappings for nested sections); None means all defaults.
            where: dotted prefix used in error messages (e.g. ``"spark."``).
        Returns:
            An instance of ``cls``.
        Raises:
            SettingsError: an unknown key, a value of the wrong type, or a failed check.
        """
        data = dict(data or {})
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SettingsError(
                f"unknown setting '{where}{unknown[0]}'; known keys of "
                f"{where.rstrip('.') or 'the top level'}: {', '.join(sorted(names))}"
            )
        values = {}
        for name, value in data.items():
            values[name] = _coerce(hints[name], value, f"{where}{name}")
        try:
            return cls(**values)
        except (TypeError, ValueError) as err:
            if isinstance(err, SettingsError):
                raise
            raise SettingsError(f"{where.rstrip('.') or 'settings'}: {err}") from err

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of every field (YAML/JSON serialisable)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, Section) else _plain(value)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


_YAML12_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
"""A number as YAML 1.2 writes it, exponent without a dot included (``1e8``)."""


def _coerce(hint: Any, value: Any, key: str) -> Any:
    """Check `value` against the annotation `hint`; ints are accepted where floats are expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union:
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, key)
    if isinstance(hint, type) and issubclass(hint, Section):
        if not isinstance(value, Mapping):
            raise SettingsError(f"setting {key!r} must be a mapping, got {value!r}")
        return hint.from_dict(value, where=f"{key}.")
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, Mapping):
            raise SettingsError(f"setting {key!r} must be a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"setting {key!r} must be a list, got {value!r}")
        return tuple(_coerce(args[0], v, key) for v in value)
    if hint is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"setting {key!r} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"setting {key!r} must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str) and _YAML12_NUMBER.fullmatch(value):
            value = float(value)  # PyYAML (YAML 1.1) reads 1e8 as a string; YAML 1.2 a number
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SettingsError(f"setting {key!r} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise SettingsError(f"setting {key!r} must be a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise SettingsError(f"setting {key!r} must be a string, got {value!r}")
        return value
    raise SettingsError(f"setting {key!r}: unsupported type {hint!r}")  # pragma: no cover


_UNITS = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}

MIN_PYTHON_WORKER_MIB = 2048
"""Smallest ``spark.python_worker_memory`` accepted, in MiB. Measured on this project's worker
process: address space 0.61 GB after its imports (resident 0.21 GB); with a 1 GiB cap (and
pyarrow's default pool, which reserves 1 GiB more at first use) an 8 MiB numpy allocation failed
in the assign stage of a standalone-cluster run while the worker held ~0.33 GB."""


def memory_mib(text: str, key: str) -> float:
    """A Spark memory string (``512m``, ``2g``, ``1t``, ``2048k``; no suffix = MiB) in MiB.

    Raises:
        SettingsError: `text` is not a positive whole number with an optional k/m/g/t suffix (any
            case, optionally followed by ``b``), as Spark reads sizes; the message names `key`.
    """
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", str(text), flags=re.IGNORECASE)
    if match is None or int(match.group(1)) <= 0:
        raise SettingsError(f"setting {key!r} must be a size such as 512m or 2g, got {text!r}")
    return float(match.group(1)) * _UNITS[(match.group(2) or "m").lower()]


MIN_JVM_MIB = 512
"""Smallest ``spark.driver_memory`` / ``spark.executor_memory`` accepted, in MiB. Spark reserves
300 MiB of every JVM heap and refuses to start with less than 1.5 times that (450 MiB: "System
memory ... must be at least 471859200"); 512m is the next round size above it."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise SettingsError(message)


def _finite(value: float) -> bool:
    return math.isfinite(value)


T = TypeVar("T")
V = TypeVar("V")
S = TypeVar("S", bound="Section")


@typing.overload
def setting(
    default: V,
    doc: str = "",
    *,
    more: str = "",
    param: Optional[str] = None,
    choices: Sequence[object] = (),
    bounds: Optional[str] = None,
    size: bool = False,
) -> V: ...


@typing.overload
def setting(
    default: None,
    doc: str = "",
    *,
    more: str = "",
    param: Optional[str] = None,
    factory: Callable[[], V],
    choices: Sequence[object] = (),
    bounds: Optional[str] = None,
    size: bool = False,
) -> V: ...


def setting(
    default: object = None,
    doc: str = "",
    *,
    more: str = "",
    param: Optional[str] = None,
    factory: Optional[Callable[[], object]] = None,
    choices: Sequence[object] = (),
    bounds: Optional[str] = None,
    size: bool = False,
) -> Any:
    """Declare one setting of a section: the only place it is written down.

    Everything else is generated from it: the section's docstring, the pyspark Param of every
    estimator that mirrors the section (:class:`eagle_spark.ml.base.SettingsParams`: name, doc,
    type converter, default, getter and setter), ``--print-defaults``' comments and the settings
    reference (``docs/settings.md``, :func:`reference`).

    Args:
        default: the value when nothing sets it (immutable; use `factory` for a dict).
        doc: one line: what the setting is, its unit and its values.
        more: what else a user should know (how it works, why the default is what it is).
        param: the Param name when it is not the field name in camelCase (``n_trees`` ->
            ``numTrees``).
        factory: makes the default (instead of `default`).
        choices: the values it may take (each item's, for a list); also the flag's choices.
        bounds: the range a number (each item's, for a list) must lie in, as an interval:
            ``[1, inf)``, ``(0, 1]``; a float must also be finite.
        size: the value is a Spark size (``512m``, ``4g``; :func:`memory_mib`).
    Returns:
        A dataclass field carrying the declaration in its metadata; the section checks the
        choices and bounds of every setting on construction (:func:`check_declared`), before its
        own ``__post_init__`` checks what involves several settings.
    Raises:
        ValueError: `bounds` is not an interval.
    """
    metadata = {
        "doc": doc,
        "more": more,
        "param": param,
        "choices": tuple(choices),
        "bounds": None if bounds is None else _interval(bounds),
        "size": size,
    }
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Declared:
    """One declared setting as :func:`declarations` lists it."""

    name: str
    hint: Any
    default: Any
    doc: str
    more: str
    param: str
    choices: tuple[Any, ...] = ()
    bounds: Optional[tuple[float, bool, float, bool]] = None
    size: bool = False


def _interval(text: str) -> tuple[float, bool, float, bool]:
    """``[1, inf)`` -> (1.0, True, inf, False): a range's bounds and whether each belongs to it.

    Raises:
        ValueError: `text` is not an interval.
    """
    m = re.fullmatch(r"\s*([\[(])\s*([^,\s]+)\s*,\s*([^\])\s]+)\s*([\])])\s*", text)
    if m is None:
        raise ValueError(f"bounds {text!r} must look like [0, 1) or (0, inf)")
    return float(m.group(2)), m.group(1) == "[", float(m.group(3)), m.group(4) == "]"


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


def range_text(bounds: tuple[float, bool, float, bool]) -> str:
    """How a message says a range: ``>= 1``, ``> 0``, ``in [0, 1)`` or ``finite``."""
    low, low_in, high, high_in = bounds
    if math.isinf(low) and math.isinf(high):
        return "finite"
    if math.isinf(high):
        return f"{'>=' if low_in else '>'} {_number(low)}"
    return f"in {'[' if low_in else '('}{_number(low)}, {_number(high)}{']' if high_in else ')'}"


def _words(values: Sequence[object]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    names = [str(v) for v in values]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _complaint(item: "Declared", value: Any) -> Optional[str]:
    """What is wrong with one value (an item's, for a list) of a setting, or None."""
    if item.size:
        try:
            memory_mib(value, item.name)
        except SettingsError:
            return f"must be a size such as 512m or 2g, got {value!r}"
        return None
    if item.choices and value not in item.choices:
        return f"must be {_words(item.choices)}, got {value!r}"
    if item.bounds is None:
        return None
    low, low_in, high, high_in = item.bounds
    whole = int in (typing.get_args(item.hint) or (item.hint,))
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (whole and not isinstance(value, int))
    ):
        return f"must be {'an integer' if whole else 'a number'}, got {value!r}"
    inside = (
        math.isfinite(value)
        and (value >= low if low_in else value > low)
        and (value <= high if high_in else value < high)
    )
    if inside:
        return None
    said = range_text(item.bounds)
    if said == "finite":
        said = "a finite number"
    elif not whole and not said.startswith("in"):
        said = "a finite number " + said
    return f"must be {said}, got {value!r}"


def section_key(cls: type) -> str:
    """A section's name in messages and docs: its key in :class:`Settings`, else its class name."""
    try:
        return section_name(cls)
    except SettingsError:
        return cls.__name__


def check_declared(section: "Section") -> None:
    """Check every setting of `section` against its declared choices, bounds and sizes (a list:
    each item; None passes where the setting's type allows it).

    Raises:
        SettingsError: the first setting out of its choices or bounds, named
            ``section.key must be ..., got ...``.
    """
    cls = type(section)
    key = section_key(cls)
    for item in declarations(cls):
        value = getattr(section, item.name)
        if value is None and type(None) in typing.get_args(item.hint):
            continue
        for one in value if isinstance(value, tuple) else (value,):
            complaint = _complaint(item, one)
            if complaint is not None:
                null = " (or null)" if type(None) in typing.get_args(item.hint) else ""
                if isinstance(value, tuple):
                    raise SettingsError(f"{key}.{item.name}: {complaint}")
                raise SettingsError(
                    f"{key}.{item.name} {complaint.replace(', got', null + ', got', 1)}"
                )


def camel(name: str) -> str:
    """``max_leaf_work`` -> ``maxLeafWork`` (the Param name of a field without its own)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_DECLARED: dict[type, tuple[Declared, ...]] = {}
"""Section class -> its declarations, read once per class (every section built checks its values
against them)."""


def declarations(cls: type) -> tuple[Declared, ...]:
    """The declared settings of a section class, in field order.

    Raises:
        TypeError: a field of `cls` not declared with :func:`setting`.
    """
    if cls not in _DECLARED:
        _DECLARED[cls] = _declare(cls)
    return _DECLARED[cls]


def _declare(cls: type) -> tuple[Declared, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "doc" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with setting()")
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = f.default
        out.append(
            Declared(
                f.name,
                hints[f.name],
                default,
                f.metadata["doc"],
                f.metadata["more"],
                f.metadata["param"] or camel(f.name),
                f.metadata.get("choices", ()),
                f.metadata.get("bounds"),
                f.metadata.get("size", False),
            )
        )
    return tuple(out)


def shown(value: object) -> str:
    """A default as YAML and the docs write it: null, true/false, ``text``, [a, b], numbers."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"``{value}``"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, dict):
        return "empty" if not value else repr(value)
    return repr(value)


def described(item: Declared) -> str:
    """A setting's whole documentation: its line, its default, then the rest."""
    return " ".join(x for x in (item.doc, f"Default {shown(item.default)}.", item.more) if x)


def section(cls: type[T]) -> type[T]:
    """Class decorator of a settings section (over ``@dataclass(frozen=True)``): its docstring's
    Attributes are generated from its :func:`setting` declarations."""
    body = "\n".join(
        textwrap.fill(
            f"{item.name}: {described(item)}",
            width=96,
            initial_indent=" " * 8,
            subsequent_indent=" " * 12,
            break_on_hyphens=False,
        )
        for item in declarations(cls)
    )
    cls.__doc__ = f"{(cls.__doc__ or '').strip()}\n\n    Attributes:\n{body}\n    "
    own = cls.__dict__.get("__post_init__")
    if own is not None:  # the declared checks first, then the section's own

        def __post_init__(self: Any) -> None:
            check_declared(self)
            own(self)

        __post_init__.__doc__ = own.__doc__
        setattr(cls, "__post_init__", __post_init__)
    return cls


def as_params(section: Section) -> dict[str, Any]:
    """A section's values keyed by their Param names (``group_size`` -> ``groupSize``): the
    keyword arguments the estimators and the :class:`eagle_spark.ml.Dataset` methods take."""
    return {d.param: getattr(section, d.name) for d in declarations(type(section))}


def from_params(cls: type[S], params: Mapping[str, object], where: str) -> S:
    """The section `cls` from keyword arguments named by its Params (the rest take defaults).

    Raises:
        TypeError: a name that is not one of the section's Params (the message lists them).
        SettingsError (a ValueError): a value the section refuses.
    """
    names = {d.param: d.name for d in declarations(cls)}
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise TypeError(
            f"{where} got an unexpected keyword argument {unknown[0]!r}; its settings: "
            + ", ".join(names)
        )
    return cls(**{names[k]: v for k, v in params.items()})


_ROOT: list[type] = []
"""The root section (:class:`eagle_spark.settings.Settings`), registered by :func:`root`."""


def root(cls: type[T]) -> type[T]:
    """Register `cls` as the root of the sections, whose fields name them (``Settings.tree``):
    :func:`section_class` and :func:`section_name` read it."""
    _ROOT[:] = [cls]
    _NAMES.clear()
    return cls


def section_class(name: str) -> type:
    """The class of the settings section `name` (``tree`` -> ``TreeSettings``).

    Raises:
        SettingsError: no section is called `name`.
    """
    for f in dataclasses.fields(_ROOT[0]):
        if f.name == name:
            return typing.cast(type, typing.get_type_hints(_ROOT[0])[name])
    raise SettingsError(f"unknown settings section {name!r}")


def section_name(cls: type) -> str:
    """The key of a section class in :class:`~eagle_spark.settings.Settings` (``TreeSettings`` ->
    ``tree``).

    Raises:
        SettingsError: `cls` is not a section of :class:`~eagle_spark.settings.Settings`.
    """
    if not _NAMES:
        hints = typing.get_type_hints(_ROOT[0])
        _NAMES.update({hints[f.name]: f.name for f in dataclasses.fields(_ROOT[0])})
    if cls not in _NAMES:
        raise SettingsError(f"{cls.__name__} is not a section of Settings")
    return _NAMES[cls]


_NAMES: dict[type, str] = {}
"""Section class -> its key in :class:`~eagle_spark.settings.Settings`, filled on first use."""
