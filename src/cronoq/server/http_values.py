"""The JSON value types of the HTTP request bodies that pydantic has no built-in for.

Theory of operation
-------------------
Each type here is an ``Annotated`` type for the models of ``http_bodies.py``: a
``PlainValidator`` that checks a decoded JSON value the way the API always has and returns it
as its wire value (a priority's enum number, a ``TaskRef``, a ``Dep``, the payload's bytes), and
``json_schema_input_type`` that gives the OpenAPI schema of what it accepts.  A refused value
raises :func:`~cronoq.server.body_errors.custom` with the message tail (and, inside a
composite value, the sub-path) that ``body_errors`` renders.

The plain types (strings, seconds, booleans, objects, arrays) are pydantic's own, strict, with
their constraints as ``Field`` s; their errors are worded by ``body_errors`` too.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from cronoq.engine.model import STATUS_NAMES
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server.body_errors import custom, type_name, unknown

__all__ = [
    "COND_FROM_JSON",
    "MISS_FROM_JSON",
    "OVERLAP_FROM_JSON",
    "PRIORITY_FROM_JSON",
    "UINT32_MAX",
    "UINT64_MAX",
    "After",
    "Attempts",
    "Base64",
    "Dep",
    "Deps",
    "FilterString",
    "Force",
    "Instant",
    "Limit",
    "Names",
    "OnMiss",
    "Overlap",
    "Payload",
    "Priority",
    "RequestKey",
    "ResourceUnits",
    "Seconds",
    "Statuses",
    "StrMap",
    "StrValues",
    "TaskRefObject",
    "UnixNs",
    "choice",
    "dumps",
    "integer",
    "target",
]

UINT64_MAX: Final = (1 << 64) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT32_MAX: Final = (1 << 32) - 1

# JSON names → wire numbers (cronoq.proto.enums); a condition also without its `on_`
PRIORITY_FROM_JSON: Final = dict(enums.PRIORITY.numbers)
MISS_FROM_JSON: Final = dict(enums.MISS_POLICY.numbers)
COND_FROM_JSON: Final = {
    name: v for n, v in enums.EDGE_COND.numbers.items() for name in (n, n.removeprefix("on_"))
}
OVERLAP_FROM_JSON: Final = dict(enums.OVERLAP.numbers)


def dumps(data: Any) -> bytes:
    """Compact UTF-8 JSON (NaN refused)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _literal(names: Any) -> Any:
    """``Literal[*names]`` (for a schema's ``enum``)."""
    return Literal.__getitem__(tuple(names))


# ---------------------------------------------------------------------------------------------
# checks (each returns the wire value or raises body_errors.custom)


def integer(v: Any, lo: int, hi: int, *, strings: bool = False, sub: str = "") -> int:
    """An integer in [lo, hi]; integral floats are accepted; digit strings when ``strings``."""
    if isinstance(v, bool):
        raise custom("must be an integer (got a boolean)", sub)
    if isinstance(v, int):
        n = v
    elif isinstance(v, float) and v.is_integer():
        n = int(v)
    elif strings and isinstance(v, str) and v.strip().lstrip("+-").isdigit() and v.strip().isascii():
        n = int(v.strip())
    else:
        what = "an integer or a string of digits" if strings else "an integer"
        raise custom(f"must be {what} (got {type_name(v) if not isinstance(v, str) else repr(v)})", sub)
    if not lo <= n <= hi:
        raise custom(f"must be between {lo} and {hi} (got {n})", sub)
    return n


def choice(v: Any, options: dict[str, int], sub: str = "") -> int:
    """One of ``options`` (case-insensitive) as its wire number."""
    if not isinstance(v, str) or v.strip().lower() not in options:
        names = ", ".join(dict.fromkeys(options))
        raise custom(f"must be one of {names} (got {json.dumps(v)})", sub)
    return options[v.strip().lower()]


def _priority(v: Any) -> int | None:
    """A name (case-insensitive) or, as in-process (docs/reference/behaviour.md#task-fields), an
    integer 0..3 (0 = critical ... 3 = low)."""
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        if not 0 <= v <= 3:
            raise custom(f"must be 0..=3 (0 = critical) or a name (got {v})")
        return enums.PRIORITY_TO_WIRE[v]
    return choice(v, PRIORITY_FROM_JSON)


def _unknown(obj: dict[str, Any], allowed: tuple[str, ...], sub: str) -> None:
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        raise unknown(extra, sub)


def target(v: Any, sub: str = "") -> pb.TaskRef:
    """A task id (integer or digits) or key, or ``{"id"}`` / ``{"key"}``."""
    if isinstance(v, dict):
        _unknown(v, ("id", "key"), sub)
        if ("id" in v) == ("key" in v):
            raise custom("must have exactly one of id, key", sub)
        if "id" in v:
            return pb.TaskRef(id=integer(v["id"], 1, UINT64_MAX, strings=True, sub=f"{sub}.id"))
        key = v["key"]
        if not isinstance(key, str):
            raise custom(f"must be a string (got {type_name(key)})", f"{sub}.key")
        if not key:
            raise custom("must not be empty", f"{sub}.key")
        return pb.TaskRef(key=key)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise custom(f"must be a task id or key (got {type_name(v)})", sub)
    if isinstance(v, int) or (v.isdigit() and v.isascii()):
        return pb.TaskRef(id=integer(v, 1, UINT64_MAX, strings=True, sub=sub))
    if not v:
        raise custom("must not be empty", sub)
    return pb.TaskRef(key=v)


def _dep(d: Any) -> pb.Dep:
    """One ``deps`` item: ``{"target", "cond"?}`` or a bare target (success edge)."""
    if isinstance(d, dict) and "target" in d:
        _unknown(d, ("target", "cond"), "")
        cond = 1 if d.get("cond") is None else choice(d["cond"], COND_FROM_JSON, ".cond")
        return pb.Dep(target=target(d["target"], ".target"), cond=cond)  # type: ignore[arg-type]
    if isinstance(d, dict):
        raise custom("must be an object with a target (and an optional cond)")
    return pb.Dep(target=target(d), cond=1)  # type: ignore[arg-type]


def _after(v: Any) -> list[pb.Dep] | None:
    """One id or key, as in-process ``after=ref`` (docs/reference/behaviour.md#task-fields), or
    an array of them: success edges."""
    if v is None:
        return None
    if isinstance(v, (str, int)) and not isinstance(v, bool):
        return [pb.Dep(target=target(v), cond=1)]  # type: ignore[arg-type]
    if not isinstance(v, list):
        raise custom(f"must be a task id or key or an array of them (got {type_name(v)})")
    return [pb.Dep(target=target(a, f"[{i}]"), cond=1) for i, a in enumerate(v)]  # type: ignore[arg-type]


def _str_map(v: Any) -> dict[str, str] | None:
    """``tags`` / ``labels``: string values; numbers and booleans are stringified with ``str()``
    as in-process (docs/reference/behaviour.md#task-fields: ``True`` → ``"True"``, ``1`` → ``"1"``);
    null, arrays and objects are refused."""
    if v is None:
        return None
    if not isinstance(v, dict):
        raise custom(f"must be an object (got {type_name(v)})")
    out: dict[str, str] = {}
    for k, val in v.items():
        if isinstance(val, str):
            out[k] = val
        elif isinstance(val, (bool, int, float)):
            out[k] = str(val)
        else:
            raise custom(f"must be a string, number or boolean (got {type_name(val)})", f".{k}")
    return out


def _base64(v: Any) -> bytes:
    if not isinstance(v, str):
        raise custom(f"must be a string (got {type_name(v)})")
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise custom("is not valid base64") from None


def _payload(v: Any) -> bytes | None:
    if v is None:
        return None
    try:
        return dumps(v)
    except (ValueError, TypeError):
        raise custom("cannot be encoded as JSON") from None


# ---------------------------------------------------------------------------------------------
# schema-only shapes of the composite values (what json_schema_input_type shows)


class TaskRefObject(BaseModel):
    """A task named by `{"id": ...}` or `{"key": ...}` (exactly one)."""

    model_config = ConfigDict(extra="forbid")
    id: Annotated[int, Field(ge=1)] | Annotated[str, Field(pattern="^[0-9]+$")] = None  # type: ignore[assignment]
    key: Annotated[str, Field(min_length=1)] = None  # type: ignore[assignment]


TargetScalar = (
    Annotated[int, Field(ge=1, json_schema_extra={"format": "int64"})]
    | Annotated[str, Field(min_length=1, description="decimal digits = an id, else a key")]
)
TargetInput = TargetScalar | TaskRefObject


_COND: Final = _literal(COND_FROM_JSON)


class Dep(BaseModel):
    """A dependency edge: its target and the condition (default on_success)."""

    model_config = ConfigDict(extra="forbid")
    target: TargetInput
    cond: _COND | None = None  # type: ignore[valid-type]


# ---------------------------------------------------------------------------------------------
# the types


def _choice_of(options: dict[str, int]) -> Any:
    def check(v: Any) -> int | None:
        return None if v is None else choice(v, options)

    return check


OnMiss = Annotated[
    int | None,
    PlainValidator(_choice_of(MISS_FROM_JSON), json_schema_input_type=_literal(MISS_FROM_JSON) | None),
]
Overlap = Annotated[
    int | None,
    PlainValidator(_choice_of(OVERLAP_FROM_JSON), json_schema_input_type=_literal(OVERLAP_FROM_JSON) | None),
]
Seconds = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False, description="seconds")]
Attempts = Annotated[
    int,
    PlainValidator(
        lambda v: None if v is None else integer(v, 0, UINT32_MAX),
        json_schema_input_type=Annotated[int, Field(ge=0, le=UINT32_MAX)],
    ),
]
ResourceUnits = Annotated[
    int,
    PlainValidator(
        lambda v: integer(v, 1, UINT32_MAX), json_schema_input_type=Annotated[int, Field(ge=1, le=UINT32_MAX)]
    ),
]
UnixNs = Annotated[
    int | None,
    PlainValidator(
        lambda v: None if v is None else integer(v, INT64_MIN, INT64_MAX, strings=True),
        json_schema_input_type=Annotated[int, Field(json_schema_extra={"format": "int64"})]
        | Annotated[str, Field(pattern="^-?[0-9]+$")]
        | None,
    ),
    Field(description="Unix time in nanoseconds (an integer or a string of digits)"),
]
Priority = Annotated[
    int | None,
    PlainValidator(
        _priority,
        json_schema_input_type=_literal(PRIORITY_FROM_JSON) | Annotated[int, Field(ge=0, le=3)] | None,
    ),
    Field(description="a name (case-insensitive) or an integer 0..3 (0 = critical, 3 = low)"),
]
Deps = list[Annotated[pb.Dep, PlainValidator(_dep, json_schema_input_type=Dep | TargetScalar)]]
After = Annotated[
    list[pb.Dep] | None,
    PlainValidator(_after, json_schema_input_type=list[TargetInput] | TargetInput | None),
    Field(description="ids or keys (on_success): an array, or one id or key"),
]
StrMap = Annotated[
    dict[str, str] | None,
    PlainValidator(_str_map, json_schema_input_type=dict[str, str | float | bool] | None),
    Field(description="string values; numbers and booleans are stringified with Python's str()"),
]
Base64 = Annotated[
    bytes,
    PlainValidator(
        _base64, json_schema_input_type=Annotated[str, Field(json_schema_extra={"format": "byte"})]
    ),
]
Payload = Annotated[
    bytes | None, PlainValidator(_payload, json_schema_input_type=Any), Field(description="any JSON value")
]

#: bulk filter values (docs/how-to/operations.md)
STATUS_LITERAL: Final = _literal(STATUS_NAMES)


def _instant(v: Any) -> float:
    """RFC 3339 string or Unix seconds -> Unix seconds."""
    if isinstance(v, bool) or v is None:
        raise custom("must be an RFC 3339 time or Unix seconds")
    if isinstance(v, int | float):
        try:
            finite = math.isfinite(v)
        except OverflowError:  # (an integer too large for a float)
            finite = False
        if not finite:
            raise custom("must be finite")
        return float(v)
    if isinstance(v, str):
        try:
            d = datetime.fromisoformat(v.strip())
        except ValueError:
            raise custom(f"is not an RFC 3339 time: {v!r}") from None
        if d.tzinfo is None:
            raise custom(f"must name its UTC offset (e.g. 'Z'): {v!r}")
        return d.timestamp()
    raise custom("must be an RFC 3339 time or Unix seconds")


def _names(v: Any) -> list[str]:
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise custom("must be a string or a list of strings")
    return items


def _str_values(v: Any) -> dict[str, str]:
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        raise custom("must be an object of strings")
    return dict(v)


def _exact(kind: type, tail: str) -> Any:
    def check(v: Any) -> Any:
        if not isinstance(v, kind):
            raise custom(tail)
        return v

    return check


def _limit(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise custom("must be an integer >= 1")
    return v


Instant = Annotated[
    float | None,
    PlainValidator(
        _instant,
        json_schema_input_type=Annotated[str, Field(json_schema_extra={"format": "date-time"})] | float,
    ),
    Field(description="RFC 3339 time or Unix seconds"),
]
Names = Annotated[list[str] | None, PlainValidator(_names, json_schema_input_type=str | list[str])]
Statuses = Annotated[
    list[str] | None, PlainValidator(_names, json_schema_input_type=STATUS_LITERAL | list[STATUS_LITERAL])  # type: ignore[valid-type]
]
StrValues = Annotated[
    dict[str, str] | None, PlainValidator(_str_values, json_schema_input_type=dict[str, str])
]
FilterString = Annotated[
    str | None, PlainValidator(_exact(str, "must be a string"), json_schema_input_type=str)
]
Limit = Annotated[int | None, PlainValidator(_limit, json_schema_input_type=Annotated[int, Field(ge=1)])]
RequestKey = Annotated[str, PlainValidator(_exact(str, "must be a string"), json_schema_input_type=str)]
Force = Annotated[bool, PlainValidator(_exact(bool, "must be true or false"), json_schema_input_type=bool)]
