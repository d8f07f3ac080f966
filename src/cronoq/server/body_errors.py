"""pydantic's validation errors as the HTTP API's messages (docs/reference/http.md#conventions).

Theory of operation
-------------------
The request bodies are pydantic models (``http_bodies.py``); their errors are translated here,
and only here, into the messages the API has always given (``retry.max_attempts must be an
integer (got a string)``, ``unknown field in retry: x``), so a client sees the same answer
whichever layer refused its input.

* A where-path is built from the error's ``loc`` under the caller's prefix: names joined with
  ``.``, list indexes as ``[i]`` (``tasks[3].deps[0].target``).
* pydantic's own error types (``string_type``, ``float_type``, ``finite_number``,
  ``greater_than_equal``, ``bool_type``, ``model_type``/``dict_type``, ``list_type``,
  ``missing``, ``extra_forbidden``) map onto a fixed tail after that path.
* The value checks pydantic has no built-in for (priorities, ids, instants, ...) raise
  :func:`custom`: a :class:`~pydantic_core.PydanticCustomError` carrying the message tail and
  a sub-path below the field (``.target.id``), rendered the same way.
* One error is reported, as the hand parser did: the first in pydantic's order (fields in
  declaration order, which is the order the fields were always checked in), except that
  unknown fields of an object come before anything inside it (:func:`first_error`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

__all__ = ["CUSTOM", "UNKNOWN", "custom", "first_error", "message_of", "type_name", "unknown", "where_of"]

#: the error types of :func:`custom` and :func:`unknown`
CUSTOM = "cronoq"
UNKNOWN = "cronoq_unknown"


def custom(tail: str, sub: str = "") -> PydanticCustomError:
    """An error whose message is ``{where}{sub} {tail}`` (``sub`` below the field, e.g. ``.id``)."""
    return PydanticCustomError(CUSTOM, "{tail}", {"tail": tail, "sub": sub})


def unknown(names: list[str], sub: str = "") -> PydanticCustomError:
    """Unknown fields ``names`` (sorted) of the object at ``sub`` below the field."""
    return PydanticCustomError(UNKNOWN, "unknown fields", {"names": names, "sub": sub})


def type_name(v: Any) -> str:
    """A JSON value's kind, as the messages name it (``a string``, ``null``, ``an array``...)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def where_of(prefix: str, loc: Sequence[int | str], sub: str = "") -> str:
    """``prefix`` and ``loc`` as a path: ``tasks[0]`` + ``("deps", 1)`` → ``tasks[0].deps[1]``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    if sub and sub[0] not in ".[":
        sub = "." + sub
    if sub.startswith("."):
        return out + sub if out else sub[1:]
    return out + sub


def _tail(e: ErrorDetails) -> str:
    t, v = e["type"], e.get("input")
    if t == CUSTOM:
        return str(e.get("ctx", {})["tail"])
    if t == "string_type":
        return f"must be a string (got {type_name(v)})"
    if t == "float_type" and isinstance(v, int) and not isinstance(v, bool):
        return "must be finite"  # (an integer too large for a float)
    if t == "float_type":
        return f"must be a number (got {type_name(v)})"
    if t == "finite_number":
        return "must be finite"
    if t == "greater_than_equal":
        return f"must be a non-negative number of seconds (got {v})"
    if t == "bool_type":
        return f"must be true or false (got {type_name(v)})"
    if t in ("model_type", "dict_type", "model_attributes_type"):
        return f"must be an object (got {type_name(v)})"
    if t == "list_type":
        return f"must be an array (got {type_name(v)})"
    if t == "missing":
        return "must be a string (got null)"
    if t == "value_error":  # (raised by protobuf in a validator: lone surrogates)
        return str(e.get("ctx", {})["error"])
    return str(e["msg"])  # pragma: no cover (every type the models raise is above)


def first_error(errors: Sequence[ErrorDetails]) -> tuple[ErrorDetails, list[str]]:
    """The error the hand parser would have met first, with the unknown field names when it
    is an ``extra_forbidden`` (all of them, of the same object, sorted)."""
    first = errors[0]
    if first["type"] == "string_unicode":  # a key protobuf could not carry: never a field's name
        return {**first, "type": "extra_forbidden", "loc": (*first["loc"], first["input"])}, [first["input"]]
    extras: dict[tuple[int | str, ...], list[str]] = {}
    for e in errors:
        if e["type"] == "extra_forbidden":
            extras.setdefault(tuple(e["loc"][:-1]), []).append(str(e["loc"][-1]))
    loc = tuple(first["loc"])
    for depth in range(len(loc)):  # the outermost object on the way that has unknown fields
        names = extras.get(loc[:depth])
        if names:
            return {**first, "type": "extra_forbidden", "loc": (*loc[:depth], names[0])}, sorted(names)
    return first, []


def message_of(
    err: ValidationError, prefix: str = "", unknown_words: Callable[[list[str], str], str] | None = None
) -> str:
    """The message of the error reported for ``err`` (see :func:`first_error`), its path under
    ``prefix``; ``unknown_words(names, where)`` words unknown fields (by default
    ``unknown field(s) in where: a, b``)."""
    e, names = first_error(err.errors(include_url=False))
    ctx = e.get("ctx") or {}
    if e["type"] == UNKNOWN:
        names = list(ctx["names"])
        where = where_of(prefix, e["loc"], str(ctx["sub"]))
    elif names:
        where = where_of(prefix, e["loc"][:-1])
    if names:
        if unknown_words is not None:
            return unknown_words(names, where)
        at = f" in {where}" if where else ""
        return f"unknown field{'s' if len(names) > 1 else ''}{at}: {', '.join(names)}"
    if e["type"] == "value_error":  # (worded as the conversion's own failures)
        return f"{prefix or 'task'}: {_tail(e)}"
    where = where_of(prefix, e["loc"], str(ctx.get("sub", "")) if e["type"] == CUSTOM else "")
    tail = _tail(e)
    return f"{where} {tail}" if where else tail
