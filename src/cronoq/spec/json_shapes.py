"""The JSON shapes of the HTTP/JSON API (docs/reference/http.md#conventions,
docs/reference/behaviour.md#server-details), shared by the server and the CLI.

Pure functions over protobuf messages and plain values (no grpc, no server imports), so the
``cronoq`` client commands print the same JSON as ``cronoq serve``'s HTTP API
(``src/cronoq/server/http_json.py`` renders the HTTP API's responses with these):

* :func:`message_json` renders a wire message with its proto field names: ids (:data:`ID_FIELDS`)
  as decimal strings, enums as lower-case names without their prefix (``"succeeded"``,
  ``"high"``; UNSPECIFIED as null), unset optional fields (times) as null, bytes as base64,
  non-finite doubles as null, other 64-bit integers as JSON numbers.
* :func:`result_json` is a task's outcome ``{id, status, output?, output_base64?,
  content_type, message, output_available}``: ``output`` when the output bytes are JSON,
  else ``output_base64`` (neither when no output is available).
* :func:`event_json` is a ``StatusEvent`` plus ``at`` (Unix seconds), as sent on ``/v1/events``.
* :func:`bulk_json` is a bulk action's answer ``{matched, acted, unavailable_shards?, resumed?}``.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any, Final

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

__all__ = [
    "ID_FIELDS",
    "bulk_json",
    "event_json",
    "guess_content_type",
    "json_output",
    "message_json",
    "result_json",
]

#: 64-bit integer fields rendered as JSON strings (every id, alone or in a list, since ids
#: pass 2**53 from epoch 32 and JavaScript would round them; docs/reference/http.md#conventions).
ID_FIELDS: Final = frozenset(
    {
        "id",
        "ids",
        "after",
        "next_after",
        "last_task_id",
        "task_id",
        "worker_id",
        "lease",
        "parents",
        "children",
        "replay_of",
        "replayed_by",
    }
)

_FD = pb.TaskInfo.DESCRIPTOR.fields_by_name["id"]
_INT64_TYPES: Final = frozenset(
    {_FD.TYPE_INT64, _FD.TYPE_UINT64, _FD.TYPE_SINT64, _FD.TYPE_FIXED64, _FD.TYPE_SFIXED64}
)


def _enum_name(fd: Any, value: int) -> str | int | None:
    ev = fd.enum_type.values_by_number.get(value)
    if ev is None:
        return value
    if value == 0:
        return None
    zero = fd.enum_type.values_by_number.get(0)
    prefix = (
        zero.name[: -len("UNSPECIFIED")] if zero is not None and zero.name.endswith("UNSPECIFIED") else ""
    )
    name: str = ev.name
    if prefix and name.startswith(prefix):
        name = name[len(prefix) :]
    return name.lower()


def _scalar(fd: Any, value: Any) -> Any:
    t = fd.type
    if t == fd.TYPE_ENUM:
        return _enum_name(fd, value)
    if t == fd.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    if t in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
        return float(value) if math.isfinite(value) else None
    if t in _INT64_TYPES and fd.name in ID_FIELDS:
        return str(value)
    return value


def message_json(msg: Any) -> dict[str, Any]:
    """A protobuf message as JSON-ready data (see the module docstring for the conventions)."""
    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        name = fd.name
        value = getattr(msg, name)
        mt = fd.message_type
        if mt is not None and mt.GetOptions().map_entry:
            vfd = mt.fields_by_name["value"]
            if vfd.message_type is not None:
                out[name] = {k: message_json(v) for k, v in value.items()}
            else:
                out[name] = {k: _scalar(vfd, v) for k, v in value.items()}
        elif fd.is_repeated:
            if mt is not None:
                out[name] = [message_json(v) for v in value]
            else:
                out[name] = [_scalar(fd, v) for v in value]
        elif mt is not None:
            out[name] = message_json(value) if msg.HasField(name) else None
        elif fd.has_presence and not msg.HasField(name):
            out[name] = None
        else:
            out[name] = _scalar(fd, value)
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_output(data: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when ``data`` is (non-empty) JSON, else ``(False, None)``."""
    if not data:
        return False, None
    try:
        return True, json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False, None


def guess_content_type(data: bytes) -> str:
    """The content type a cronoq worker gives an output of these bytes
    (docs/reference/behaviour.md#client-worker payload encoding): ``""`` when empty, JSON, UTF-8 text, else
    ``application/octet-stream``.

    For outputs read over gRPC, whose ``TaskResult`` carries no content type.
    """
    if not data:
        return ""
    if json_output(data)[0]:
        return "application/json"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain; charset=utf-8"


def result_json(
    task_id: int, status: str, *, output: bytes | None, content_type: str = "", message: str = ""
) -> dict[str, Any]:
    """``{id, status, output?, output_base64?, content_type, message, output_available}``.

    ``output`` is None when no output is available (the task did not succeed, or its output
    is no longer retained); ``content_type`` only counts when it is.
    """
    out: dict[str, Any] = {"id": str(task_id), "status": status}
    available = output is not None
    if output is not None:
        ok, value = json_output(output)
        if ok:
            out["output"] = value
        else:
            out["output_base64"] = base64.b64encode(output).decode("ascii")
    out["content_type"] = content_type if available else ""
    out["message"] = message or ""
    out["output_available"] = available
    return out


def event_json(msg: pb.StatusEvent, at: float | None = None) -> dict[str, Any]:
    """A status event as on ``/v1/events``: the ``StatusEvent`` fields plus ``at`` (Unix
    seconds; from ``at_unix_ns`` unless given)."""
    out = message_json(msg)
    if out.get("progress", 0) is None:  # (set only on a Watch's progress update)
        del out["progress"]
    out["at"] = msg.at_unix_ns / 1e9 if at is None else at
    return out


def bulk_json(
    matched: int, acted: int, unavailable_shards: list[str] | None = None, resumed: bool = False
) -> dict[str, Any]:
    """A bulk action's answer; ``unavailable_shards`` when given (a sharded answer), ``resumed``
    only when true (the counts include what an interrupted first call with the key did)."""
    out: dict[str, Any] = {"matched": matched, "acted": acted}
    if unavailable_shards is not None:
        out["unavailable_shards"] = unavailable_shards
    if resumed:
        out["resumed"] = True
    return out
