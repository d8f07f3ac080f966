"""Converters: one annotation → how a value of it travels as JSON, checked on both sides.

Theory of operation
-------------------
A task's arguments and return value travel as JSON. For each parameter (and the return
annotation) :func:`converter_for` builds, once per task at decoration, a :class:`Converter`:

* *native* — the annotation is made of JSON types only (no annotation, ``Any``, ``object``,
  ``int``, ``float``, ``str``, ``bool``, ``None``, ``list[X]``, ``dict[str, X]``,
  ``tuple[X, ...]``, unions/``Optional`` and ``Literal`` of those): the value is checked with
  plain ``isinstance`` tests. No pydantic: the fast path. A scalar travels as is; a container
  (list, tuple, dict) is copied both ways — to its JSON form when sent (:func:`json_copy`:
  tuples become arrays), into fresh objects when received (the converter's ``load``: arrays
  annotated ``tuple`` become tuples again) — so a value behaves as it does through a
  server's JSON: a caller that reuses a list after submitting, or an attempt that mutates
  its argument, changes no other attempt, retry or occurrence (in process nothing else
  would copy it).
* *adapted* — anything else (pydantic models, dataclasses, ``datetime``, ``UUID``, ``Decimal``,
  enums, ``TypedDict``...): a pydantic v2 ``TypeAdapter`` built at decoration validates the
  value and dumps it to JSON (``mode="json"``) on the sending side, and validates the JSON back
  into the annotated type on the receiving side. pydantic is imported only here, and only
  when such an annotation appears; without it, or when pydantic cannot handle the annotation,
  decoration fails with :class:`TaskDefinitionError`.

``to_wire`` (sending) and ``from_wire`` (receiving) raise :class:`ConversionError` with a
message that names nothing but the problem; callers add the task and argument names.
"""

from __future__ import annotations

import contextlib
import math
import types
import typing
from collections.abc import Callable
from typing import Any

from cronoq.errors import CronoqError

__all__ = ["ConversionError", "Converter", "TaskDefinitionError", "converter_for", "is_json", "json_copy"]


class TaskDefinitionError(CronoqError, TypeError):
    """A task (or a recurring schedule of one) cannot be defined as written: raised at
    decoration, before anything runs or is submitted."""


class ConversionError(ValueError):
    """A value does not match its annotation or is not JSON."""


_SCALARS = (str, int, float, bool, type(None))


def is_json(value: object, depth: int = 0) -> bool:
    """True when ``value`` is made of JSON types (finite floats, str keys; tuples as arrays)."""
    tp = type(value)
    if tp is str or tp is int or tp is bool or value is None:
        return True
    if tp is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if depth > 100:
        return False
    if tp is list or tp is tuple:
        return all(is_json(v, depth + 1) for v in value)  # type: ignore[attr-defined]
    if tp is dict:
        return all(type(k) is str and is_json(v, depth + 1) for k, v in value.items())  # type: ignore[attr-defined]
    return False


def json_copy(value: object) -> object:
    """A fresh copy of a JSON value (checked by :func:`is_json`): new lists and dicts all the
    way down, tuples as lists (the form a value has after a trip through JSON)."""
    tp = type(value)
    if tp is list or tp is tuple:
        return [json_copy(v) for v in value]  # type: ignore[attr-defined]
    if tp is dict:
        return {k: json_copy(v) for k, v in value.items()}  # type: ignore[attr-defined]
    return value


Check = Callable[[object], bool]
#: a received JSON value → fresh Python objects of the annotation (None: a scalar, as is)
Load = Callable[[object], object]


def _is_int(v: object) -> bool:
    return type(v) is int


def _is_float(v: object) -> bool:
    tp = type(v)
    return tp is int or (tp is float and math.isfinite(v))  # type: ignore[arg-type]


def _is_str(v: object) -> bool:
    return type(v) is str


def _is_bool(v: object) -> bool:
    return type(v) is bool


def _is_none(v: object) -> bool:
    return v is None


_SCALAR_CHECKS: dict[object, Check] = {
    int: _is_int,
    float: _is_float,
    str: _is_str,
    bool: _is_bool,
    type(None): _is_none,
    None: _is_none,
}


def _list_of(item: Check) -> Check:
    def check(v: object) -> bool:
        return (type(v) is list or type(v) is tuple) and all(item(x) for x in v)

    return check


def _dict_of(value: Check) -> Check:
    def check(v: object) -> bool:
        return type(v) is dict and all(type(k) is str and value(x) for k, x in v.items())

    return check


def _any_of(checks: list[Check]) -> Check:
    def check(v: object) -> bool:
        return any(c(v) for c in checks)

    return check


def _literal(values: tuple[object, ...]) -> Check | None:
    if not all(type(x) in _SCALARS for x in values):
        return None
    allowed = {(type(x), x) for x in values}

    def check(v: object) -> bool:
        try:
            return (type(v), v) in allowed
        except TypeError:  # unhashable
            return False

    return check


def _load_items(item: Load | None, into: Callable[[Any], object]) -> Load:
    def load(v: Any) -> object:
        return into(v if item is None else map(item, v))

    return load


def _load_values(item: Load | None) -> Load:
    def load(v: Any) -> object:
        return dict(v) if item is None else {k: item(x) for k, x in v.items()}

    return load


def _load_first(checks: list[Check], loads: list[Load | None]) -> Load:
    pairs = list(zip(checks, loads))

    def load(v: object) -> object:
        for check, one in pairs:
            if check(v):
                return v if one is None else one(v)
        return json_copy(v)  # pragma: no cover - from_wire checked the value first

    return load


#: the native form of an annotation: its check, and its load (None for scalars)
Native = tuple[Check, Load | None]
_ANY: Native = (is_json, json_copy)


def _native(annotation: object) -> Native | None:
    """Check and load of a JSON-only annotation, or None when the annotation needs pydantic."""
    if annotation is Any or annotation is object or annotation is typing.Any:
        return _ANY
    scalar = _SCALAR_CHECKS.get(annotation) if isinstance(annotation, typing.Hashable) else None
    if scalar is not None:
        return scalar, None
    if annotation is list or annotation is tuple:
        return _list_of(is_json), _load_items(json_copy, annotation)
    if annotation is dict:
        return _dict_of(is_json), _load_values(json_copy)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _native(args[0])
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        item = _native(args[0]) if args else _ANY
        return None if item is None else (_list_of(item[0]), _load_items(item[1], origin))
    if origin is dict:
        if args and args[0] is not str:
            return None
        value = _native(args[1]) if len(args) == 2 else _ANY
        return None if value is None else (_dict_of(value[0]), _load_values(value[1]))
    if origin is typing.Union or origin is types.UnionType:
        members = [_native(a) for a in args]
        if any(m is None for m in members):
            return None
        checks = [m[0] for m in members]  # type: ignore[index]
        loads = [m[1] for m in members]  # type: ignore[index]
        return _any_of(checks), None if all(x is None for x in loads) else _load_first(checks, loads)
    if origin is typing.Literal:
        check = _literal(args)
        return None if check is None else (check, None)
    return None


def _describe(annotation: object) -> str:
    name = getattr(annotation, "__qualname__", None) or getattr(annotation, "__name__", None)
    if isinstance(annotation, type) and name:
        return str(name)
    return repr(annotation).replace("typing.", "")


def _not_json(value: object, at: str = "", depth: int = 0) -> str | None:
    """Why JSON cannot carry ``value``, naming the part and where it is (``"nan at [1] is not
    JSON-serializable (...)"``), or None if it can."""
    where = f" at {at}" if at else ""
    tp = type(value)
    if tp is float and not math.isfinite(value):  # type: ignore[arg-type]
        return f"{value!r}{where} is not JSON-serializable (JSON has no NaN or infinity)"
    if tp is str or tp is int or tp is bool or tp is float or value is None:
        return None
    if depth > 100:
        return f"a value nested over 100 levels deep{where} is not JSON-serializable"
    if tp is list or tp is tuple:
        for i, v in enumerate(typing.cast(list[Any], value)):
            if (why := _not_json(v, f"{at}[{i}]", depth + 1)) is not None:
                return why
        return None
    if tp is dict:
        for k, v in value.items():  # type: ignore[attr-defined]
            if type(k) is not str:
                return f"the key {k!r}{where} is not JSON-serializable (JSON object keys are strings)"
            if (why := _not_json(v, f"{at}[{k!r}]", depth + 1)) is not None:
                return why
        return None
    return f"a value of type {tp.__name__}{where} is not JSON-serializable{_ANNOTATE}"


#: what to do about an object of a type JSON lacks, when the annotation did not say its type
_ANNOTATE = " (annotate it with its type, e.g. datetime or a pydantic model, for pydantic to convert it)"


class Converter:
    """How values of one annotation are checked and carried (see the module docstring)."""

    __slots__ = ("_adapter", "annotation", "check", "load", "native", "plain")

    def __init__(
        self, annotation: object, check: Check | None, adapter: Any, load: Load | None = None
    ) -> None:
        self.annotation = annotation
        #: the native check (value -> bool), None when pydantic converts
        self.check = check
        #: a native container's load (a received value → fresh objects); None for scalars
        self.load = load
        self._adapter = adapter
        self.native = adapter is None
        #: values travel and arrive as they are: native scalars (no copy, no conversion)
        self.plain = self.native and load is None

    def to_wire(self, value: object) -> object:
        """The JSON form of ``value`` (sending side); ConversionError if it does not fit."""
        check = self.check
        if check is not None:
            if check(value):
                return value if self.load is None else json_copy(value)
            if is_json(value):
                raise ConversionError(f"expected {_describe(self.annotation)}, got {value!r}")
            raise ConversionError(_not_json(value) or f"{value!r} is not JSON")
        adapter = self._adapter
        try:
            obj = adapter.validate_python(value)
            return adapter.dump_python(obj, mode="json")
        except Exception as e:
            raise ConversionError(_pydantic_message(e)) from None

    def from_wire(self, value: object) -> object:
        """The annotated value of a JSON value (receiving side); ConversionError if invalid."""
        check = self.check
        if check is not None:
            if check(value):
                load = self.load
                return value if load is None else load(value)
            raise ConversionError(f"expected {_describe(self.annotation)}, got {value!r}")
        try:
            return self._adapter.validate_python(value)
        except Exception as e:
            raise ConversionError(_pydantic_message(e)) from None

    def __repr__(self) -> str:
        return f"Converter({_describe(self.annotation)}, {'native' if self.native else 'pydantic'})"


def _pydantic_message(e: Exception) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            parts = []
            for err in errors():
                loc = ".".join(str(x) for x in err.get("loc", ()))
                parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
            if parts:
                return "; ".join(parts)
        except Exception:  # pragma: no cover - an unexpected error shape
            pass
    return str(e)


#: converters of JSON-only annotations are stateless: share them
_NATIVE_CACHE: dict[object, Converter] = {}


def converter_for(annotation: object, where: str) -> Converter:
    """The converter of ``annotation``; ``where`` (e.g. ``"task 'shop.pay', argument 'when'"``)
    goes into the TaskDefinitionError raised when it cannot be built."""
    try:
        cached = _NATIVE_CACHE.get(annotation)
    except TypeError:  # an unhashable annotation object
        cached = None
    if cached is not None:
        return cached
    native = _native(annotation)
    if native is not None:
        conv = Converter(annotation, native[0], None, native[1])
        with contextlib.suppress(TypeError):  # an unhashable annotation: not cached
            _NATIVE_CACHE[annotation] = conv
        return conv
    try:
        import pydantic
    except ImportError:
        raise TaskDefinitionError(
            f"{where}: the annotation {_describe(annotation)} needs pydantic v2 to be validated and "
            "converted to JSON; install it with `pip install 'cronoq[tasks]'` (or annotate with JSON "
            "types: int, float, str, bool, None, list, dict)"
        ) from None
    try:
        adapter: Any = pydantic.TypeAdapter(annotation)  # type: ignore[arg-type]
    except Exception as e:
        raise TaskDefinitionError(
            f"{where}: pydantic cannot handle the annotation {_describe(annotation)}: {e}"
        ) from None
    return Converter(annotation, None, adapter)
