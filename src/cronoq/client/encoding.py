"""Payload encoding and task-spec building for the wire (docs/reference/behaviour.md#server-details,
docs/reference/behaviour.md#client-worker).

Payloads (and handler outputs) travel as bytes plus a content type:

==================  =================================  ===============================
Python value        bytes                              content type
==================  =================================  ===============================
``None``            empty                              ``""``
bytes-like          as is                              ``application/octet-stream``, or
                                                       its ``content_type`` attribute
``str``             UTF-8                              ``text/plain; charset=utf-8``
anything else       compact UTF-8 JSON                 ``application/json``
==================  =================================  ===============================

:func:`build_spec` maps the task fields of docs/reference/behaviour.md#task-fields onto
``cronoq.v1.TaskSpec``: priority names to the enum, durations in seconds to ``*_s``, instants (Unix seconds or
aware datetimes) to ``*_unix_ns``, ``after=[refs]`` and ``deps=[Dep]`` to ``deps`` with ``EdgeCond``, a
:class:`~cronoq.RetryPolicy` to the wire ``RetryPolicy``. Validation errors are the in-process
``ValueError`` messages; an unknown field is a ``TypeError``.

Only protobuf is needed here (no grpc).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from cronoq.engine.model import Priority, RetryPolicy, parse_on_miss
from cronoq.engine.time import check_seconds
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.runtime import task_fields
from cronoq.runtime.task import check_key, parse_deps, str_map, unix_seconds

__all__ = [
    "CONTENT_TYPE_BYTES",
    "CONTENT_TYPE_JSON",
    "CONTENT_TYPE_TEXT",
    "OVERLAPS",
    "TASK_FIELDS",
    "build_spec",
    "decode_payload",
    "encode_payload",
    "is_json",
    "is_text",
    "overlap_from_wire",
    "overlap_to_wire",
    "priority_from_wire",
    "priority_to_wire",
    "retry_to_wire",
    "status_from_wire",
    "status_to_wire",
    "task",
    "task_ref",
]

CONTENT_TYPE_BYTES = "application/octet-stream"
CONTENT_TYPE_TEXT = "text/plain; charset=utf-8"
CONTENT_TYPE_JSON = "application/json"

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1

#: Keyword arguments :func:`build_spec` accepts besides the payload: the task fields
#: (runtime.task_fields) and the payload's ``content_type``.
TASK_FIELDS = task_fields.names() | {"content_type"}
#: the option fields that are durations, sent as their ``*_s`` wire field
_SECONDS_OPTIONS = tuple(f for f in task_fields.of_shape("seconds") if f.option)

# ---------------------------------------------------------------------------------------------
# Payloads


def encode_payload(value: object) -> tuple[bytes, str]:
    """``(bytes, content_type)`` for a payload or handler output (table in the module doc)."""
    if value is None:
        return b"", ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        if type(value) is bytes:
            return value, CONTENT_TYPE_BYTES
        return bytes(value), getattr(value, "content_type", CONTENT_TYPE_BYTES)
    if isinstance(value, str):
        return value.encode("utf-8"), CONTENT_TYPE_TEXT
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload of type {type(value).__name__} cannot be encoded as JSON: {exc}") from None
    return text.encode("utf-8"), CONTENT_TYPE_JSON


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    """``application/json`` or any ``+json`` media type (parameters ignored)."""
    mt = _media_type(content_type)
    return mt == CONTENT_TYPE_JSON or (mt.startswith("application/") and mt.endswith("+json"))


def is_text(content_type: str) -> bool:
    return _media_type(content_type).startswith("text/")


def decode_payload(data: bytes, content_type: str) -> Any:
    """The Python value for ``(data, content_type)``: JSON → object, ``text/*`` → str,
    empty untyped → None, anything else → bytes."""
    if is_json(content_type):
        return json.loads(data) if data else None
    if is_text(content_type):
        return data.decode("utf-8")
    if not data and not content_type:
        return None
    return bytes(data)


# ---------------------------------------------------------------------------------------------
# Enums

#: Wire Overlap values by policy name (docs/reference/behaviour.md#cron).
OVERLAPS: dict[str, int] = dict(enums.OVERLAP.numbers)


def status_from_wire(value: int) -> str:
    """Lower-case status name (``"succeeded"``); ``"unspecified"`` for 0, ``"unknown(n)"`` for
    values newer than this client."""
    if value == 0:
        return "unspecified"
    return enums.TASK_STATUS.names.get(value, f"unknown({value})")


def status_to_wire(value: object) -> int:
    """A status name (case-insensitive) or wire value → wire ``TaskStatus``."""
    if isinstance(value, str):
        v = enums.TASK_STATUS.numbers.get(value.lower())
        if v is None:
            raise ValueError(f"unknown status {value!r}")
        return v
    if isinstance(value, int) and not isinstance(value, bool) and value in enums.TASK_STATUS.names:
        return value
    raise ValueError(f"unknown status {value!r}")


def priority_to_wire(value: object) -> int:
    """``Priority``, int 0..3 or name → wire ``Priority`` (CRITICAL=1 .. LOW=4)."""
    return enums.PRIORITY_TO_WIRE[Priority.parse(value)]


def priority_from_wire(value: int) -> str:
    """Lower-case class name; ``"normal"`` for UNSPECIFIED (the server default)."""
    if value == pb.PRIORITY_UNSPECIFIED:
        return "normal"
    name = enums.PRIORITY.names.get(value)
    return f"unknown({value})" if name is None else name


def overlap_to_wire(value: object) -> int:
    if isinstance(value, str) and value in OVERLAPS:
        return OVERLAPS[value]
    raise ValueError("overlap must be 'skip', 'allow', 'queue' or 'queue_on_success'")


def overlap_from_wire(value: int) -> str:
    if value == pb.OVERLAP_UNSPECIFIED:
        return "skip"
    return enums.OVERLAP.names.get(value, f"unknown({value})")


# ---------------------------------------------------------------------------------------------
# Refs, retry, specs


def task_ref(ref: object) -> pb.TaskRef:
    """A task id (int ≥ 1), a key (non-empty str), or anything with an int ``id`` attribute
    (``Submitted``, ``TaskInfo``, ``Event``) → ``TaskRef``."""
    if not isinstance(ref, (int, str)):
        rid = getattr(ref, "id", None)
        if isinstance(rid, int) and not isinstance(rid, bool):
            ref = rid
    if isinstance(ref, bool) or not isinstance(ref, (int, str)):
        raise ValueError(f"a task reference is a task id (int >= 1) or a key (str), got {ref!r}")
    if isinstance(ref, int):
        if not 1 <= ref <= UINT64_MAX:
            raise ValueError(f"task id out of range (got {ref})")
        return pb.TaskRef(id=ref)
    if not ref:
        raise ValueError("a task key must be a non-empty string")
    return pb.TaskRef(key=ref)


# The wire reads 0 in these fields as "the default"; an explicit 0 s is sent as 1 ns instead.
_TINY = 1e-9


def retry_to_wire(policy: RetryPolicy) -> pb.RetryPolicy:
    """A :class:`~cronoq.RetryPolicy` → wire ``RetryPolicy``.

    On the wire a zero ``initial_backoff_s``/``max_backoff_s`` means "default", so a policy
    that asks for no backoff is sent with 1 ns, which the server treats as immediate.
    """
    if not isinstance(policy, RetryPolicy):
        raise ValueError(f"retry must be a RetryPolicy (got {policy!r})")
    if policy.max_attempts > UINT32_MAX:
        raise ValueError(f"max_attempts must be <= {UINT32_MAX} (got {policy.max_attempts})")
    return pb.RetryPolicy(
        max_attempts=policy.max_attempts,
        initial_backoff_s=policy.initial_backoff or _TINY,
        multiplier=policy.multiplier,
        max_backoff_s=policy.max_backoff or _TINY,
        jitter=policy.jitter,
    )


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _unix_ns(name: str, value: object) -> int:
    """An instant (Unix seconds or aware datetime) → Unix ns, exactly (no float rounding of
    the product)."""
    unix_seconds(name, value)  # validates, with the in-process messages
    if isinstance(value, _dt.datetime):
        delta = value - _EPOCH
        ns = ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1_000
    elif isinstance(value, int):
        ns = value * 1_000_000_000
    else:
        assert isinstance(value, float)
        ns = round(Fraction(value) * 1_000_000_000)
    if not -INT64_MAX <= ns <= INT64_MAX:
        raise ValueError(f"{name} is out of range (got {value!r})")
    return ns


def build_spec(payload: object = None, **fields: Any) -> pb.TaskSpec:
    """Validate ``payload`` and the task fields (docs/reference/behaviour.md#task-fields) into a wire
    ``TaskSpec``.

    Unset fields stay unset, so the server applies its (pool's) defaults. ``content_type``
    overrides the content type the payload encoding picked.
    """
    if fields and not fields.keys() <= TASK_FIELDS:
        unknown = sorted(set(fields) - TASK_FIELDS)
        raise TypeError(f"unexpected task field {unknown[0]!r}")
    spec = pb.TaskSpec()
    data, ctype = encode_payload(payload)
    spec.payload = data
    content_type = fields.get("content_type")
    if content_type is not None:
        if not isinstance(content_type, str):
            raise ValueError(f"content_type must be a string (got {content_type!r})")
        ctype = content_type
    spec.content_type = ctype
    if not fields:  # a payload only (a common per-task submit): every other field stays unset
        return spec

    pool = fields.get("pool")
    if pool is not None:
        if not isinstance(pool, str):
            raise ValueError(f"pool must be a string (got {pool!r})")
        spec.pool = pool
    kind = fields.get("kind")
    if kind is not None:
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"kind must be a non-empty string (got {kind!r})")
        spec.kind = kind
    if fields.get("priority") is not None:
        spec.priority = priority_to_wire(fields["priority"])  # type: ignore[assignment]
    key = check_key(fields.get("key"))
    if key is not None:
        spec.key = key

    deadline_in, deadline_at = fields.get("deadline_in"), fields.get("deadline_at")
    if deadline_in is not None and deadline_at is not None:
        raise ValueError("deadline_in and deadline_at are mutually exclusive")
    if deadline_in is not None:
        spec.deadline_in_s = check_seconds("deadline_in", deadline_in)
    if deadline_at is not None:
        spec.deadline_unix_ns = _unix_ns("deadline_at", deadline_at)
    start_in, start_at = fields.get("start_in"), fields.get("start_at")
    if start_in is not None and start_at is not None:
        raise ValueError("start_in and start_at are mutually exclusive")
    if start_in is not None:
        spec.start_in_s = check_seconds("start_in", start_in)
    if start_at is not None:
        spec.start_unix_ns = _unix_ns("start_at", start_at)

    for f in _SECONDS_OPTIONS:  # tolerance, duration_hint, timeout
        if fields.get(f.name) is not None:
            setattr(spec, f.wire, check_seconds(f.name, fields[f.name]))
    if fields.get("on_miss") is not None:
        spec.on_miss = enums.MISS_TO_WIRE[parse_on_miss(fields["on_miss"])]  # type: ignore[assignment]
    if fields.get("retry") is not None:
        spec.retry.CopyFrom(retry_to_wire(fields["retry"]))

    for target, cond in parse_deps(fields.get("after"), fields.get("deps")) or ():
        spec.deps.append(pb.Dep(target=task_ref(target), cond=enums.COND_TO_WIRE[cond]))  # type: ignore[arg-type]

    resources = fields.get("resources")
    if resources is not None:
        if not isinstance(resources, Mapping):
            raise ValueError("resources must be a mapping of resource name to units")
        for name, amount in resources.items():
            if not isinstance(name, str):
                raise ValueError(f"resource names must be strings (got {name!r})")
            if isinstance(amount, bool) or not isinstance(amount, int) or not 1 <= amount <= UINT32_MAX:
                raise ValueError(f"resource amount must be an int >= 1 (got {amount!r} for '{name}')")
            spec.resources[name] = amount
    for f in task_fields.of_shape("str_map"):  # tags, labels
        mapping = str_map(f.name, fields.get(f.name))
        if mapping:
            getattr(spec, f.wire).update(mapping)
    tenant = fields.get("tenant")
    if tenant is not None:
        if not isinstance(tenant, str):
            raise ValueError(f"tenant must be a string (got {tenant!r})")
        spec.tenant = tenant
    return spec


def task(payload: object = None, **fields: Any) -> pb.TaskSpec:
    """A task spec for :meth:`Client.submit_batch`: ``task(payload, **task fields)``,
    validated now (same errors as ``submit``)."""
    return build_spec(payload, **fields)


def spec_of(item: object) -> pb.TaskSpec:
    """Batch member → ``TaskSpec``: a spec from :func:`task`, or a mapping of task fields with
    an optional ``payload``."""
    if isinstance(item, pb.TaskSpec):
        return item
    if isinstance(item, Mapping):
        fields = dict(item)
        payload = fields.pop("payload", None)
        return build_spec(payload, **fields)
    raise ValueError(f"batch members must be task(...) specs or mappings of task fields (got {item!r})")


def uint64_list(name: str, values: Iterable[object] | None) -> list[int]:
    out: list[int] = []
    for v in values or ():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= UINT64_MAX:
            raise ValueError(f"{name} must contain task ids (got {v!r})")
        out.append(v)
    return out


def str_list(name: str, values: Iterable[object] | str | None) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        return [values]
    out: list[str] = []
    for v in values:
        if not isinstance(v, str):
            raise ValueError(f"{name} must contain strings (got {v!r})")
        out.append(v)
    return out


def seconds_or_none(name: str, value: object) -> float | None:
    return None if value is None else check_seconds(name, value)
