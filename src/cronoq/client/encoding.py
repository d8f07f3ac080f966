"""Payload encoding and task-spec building for the wire (docs/reference/behaviour.md#server-details,
docs/reference/behaviour.md#client-worker): the client's side of :mod:`cronoq.spec`.

Payloads travel as bytes plus a content type (:mod:`cronoq.spec.payloads`, re-exported here).
:func:`build_spec` validates the task fields of docs/reference/behaviour.md#task-fields into a
:class:`~cronoq.spec.submission.Submission` (the same validators and messages as in process) and
writes it as a ``cronoq.v1.TaskSpec`` (:mod:`cronoq.spec.wire`: priority names to the enum,
durations to ``*_s``, instants to exact ``*_unix_ns``, ``after``/``deps`` to ``deps``).  A bad
value is a ``ValueError``; an unknown field is a ``TypeError``.

Only protobuf is needed here (no grpc).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cronoq.engine.time import check_seconds
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.spec import fields as task_fields
from cronoq.spec.payloads import (
    CONTENT_TYPE_BYTES,
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_TEXT,
    decode_payload,
    encode_payload,
    is_json,
    is_text,
)
from cronoq.spec.submission import Submission
from cronoq.spec.wire import (
    OVERLAPS,
    UINT64_MAX,
    overlap_from_wire,
    overlap_to_wire,
    priority_from_wire,
    priority_to_wire,
    retry_to_wire,
    status_from_wire,
    status_to_wire,
    task_ref,
    to_wire,
)

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

#: Keyword arguments :func:`build_spec` accepts besides the payload: the task fields
#: (spec.fields) and the payload's ``content_type``.
TASK_FIELDS = task_fields.names() | {"content_type"}


def build_spec(payload: object = None, **fields: Any) -> pb.TaskSpec:
    """Validate ``payload`` and the task fields (docs/reference/behaviour.md#task-fields) into a wire
    ``TaskSpec``.

    Unset fields stay unset, so the server applies its (pool's) defaults. ``content_type``
    overrides the content type the payload encoding picked.
    """
    if not fields:  # a payload only (a common per-task submit): every other field stays unset
        spec = pb.TaskSpec()
        spec.payload, spec.content_type = encode_payload(payload)
        return spec
    content_type = fields.pop("content_type", None)
    if content_type is not None and not isinstance(content_type, str):
        raise ValueError(f"content_type must be a string (got {content_type!r})")
    return to_wire(Submission.from_kwargs(payload, **fields), content_type)


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
