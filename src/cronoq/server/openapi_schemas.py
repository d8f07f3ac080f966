"""The OpenAPI component schemas: the request bodies' (generated) and the responses'.

Theory of operation
-------------------
The request schemas are generated from the request body declarations (``openapi_requests``).
The response schemas of the messages rendered from protobuf (``TaskInfo``, ``SnapshotResponse``,
``WorkerInfo``, ``RecurringInfo``, ``StatusEvent``) are derived from the message descriptors
with the rendering rules of :func:`cronoq.spec.json_shapes.message_json` (ids as strings,
enums as lower-case names, unset optional fields null), so they cannot drift from the wire
contract; the other response bodies (built by hand in the handlers) are written out here.
"""

from __future__ import annotations

from typing import Any, Final

from cronoq.engine.model import STATUS_NAMES
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server.history import FIELDS as HISTORY_FIELDS
from cronoq.server.openapi_requests import request_schemas
from cronoq.spec.json_shapes import ID_FIELDS

__all__ = ["ref", "schemas"]

_REF: Final = "#/components/schemas/"


def ref(name: str) -> dict[str, Any]:
    """A reference to component schema ``name``."""
    return {"$ref": _REF + name}


def _enum_values(enum: Any) -> list[str]:
    zero = enum.values_by_number.get(0)
    prefix = zero.name[: -len("UNSPECIFIED")] if zero is not None else ""
    return [v.name[len(prefix) :].lower() for v in enum.values if v.number != 0]


def _field_schema(fd: Any) -> dict[str, Any]:
    t = fd.type
    if t == fd.TYPE_MESSAGE:
        return ref(fd.message_type.name)
    if t == fd.TYPE_ENUM:
        return {"type": "string", "enum": _enum_values(fd.enum_type), "nullable": True}
    if t == fd.TYPE_BOOL:
        return {"type": "boolean"}
    if t == fd.TYPE_STRING:
        return {"type": "string"}
    if t == fd.TYPE_BYTES:
        return {"type": "string", "format": "byte"}
    if t in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
        return {"type": "number", "nullable": True}
    if t in (fd.TYPE_UINT64, fd.TYPE_FIXED64, fd.TYPE_INT64, fd.TYPE_SINT64, fd.TYPE_SFIXED64):
        if fd.name in ID_FIELDS:
            return {"type": "string", "pattern": "^[0-9]+$", "description": "id (decimal string)"}
        s: dict[str, Any] = {"type": "integer", "format": "int64"}
        if t in (fd.TYPE_UINT64, fd.TYPE_FIXED64):
            s["minimum"] = 0
        return s
    s = {"type": "integer", "format": "int32"}
    if t in (fd.TYPE_UINT32, fd.TYPE_FIXED32):
        s["minimum"] = 0
    return s


def _message_schema(desc: Any, out: dict[str, Any]) -> None:
    """Add the schema of ``desc`` (and of the messages it contains) to ``out``."""
    if desc.name in out:
        return
    props: dict[str, Any] = {}
    out[desc.name] = {}  # placeholder against recursion
    for fd in desc.fields:
        mt = fd.message_type
        if mt is not None and mt.GetOptions().map_entry:
            vfd = mt.fields_by_name["value"]
            if vfd.message_type is not None:
                _message_schema(vfd.message_type, out)
            props[fd.name] = {"type": "object", "additionalProperties": _field_schema(vfd)}
            continue
        if mt is not None:
            _message_schema(mt, out)
        item = _field_schema(fd)
        if fd.is_repeated:
            props[fd.name] = {"type": "array", "items": item}
        elif mt is not None:
            props[fd.name] = {"allOf": [item], "nullable": True}
        else:
            if fd.has_presence:
                item = {**item, "nullable": True}
            props[fd.name] = item
    out[desc.name] = {"type": "object", "properties": props, "required": sorted(props)}


def _task_responses() -> dict[str, Any]:
    """The task routes' response bodies."""
    return {
        "Error": {
            "type": "object",
            "properties": {
                "error": {"type": "string", "description": "human-readable message"},
                "code": {
                    "type": "string",
                    "description": "the SubmitError code for submit errors (e.g. unknown_pool), "
                    "else the lower-case gRPC status name (not_found, invalid_argument, ...)",
                },
                "id": {"type": "string", "description": "the task's id (submit with wait that timed out)"},
            },
            "required": ["error", "code"],
        },
        "TaskResult": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[0-9]+$"},
                "status": {"type": "string", "enum": list(STATUS_NAMES)},
                "output": {"description": "the output when its bytes are JSON", "nullable": True},
                "output_base64": {"type": "string", "format": "byte", "description": "the output otherwise"},
                "content_type": {"type": "string"},
                "message": {"type": "string"},
                "output_available": {"type": "boolean"},
            },
            "required": ["id", "status", "content_type", "message", "output_available"],
        },
        "SubmitResponse": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[0-9]+$"},
                "duplicate": {"type": "boolean"},
                "result": ref("TaskResult"),
            },
            "required": ["id", "duplicate"],
        },
        "SubmitBatchResponse": {
            "type": "object",
            "properties": {"tasks": {"type": "array", "items": ref("SubmitResponse")}},
            "required": ["tasks"],
        },
        "TaskList": {
            "type": "object",
            "properties": {
                "tasks": {"type": "array", "items": ref("TaskInfo")},
                "next_after": {
                    "type": "string",
                    "pattern": "^[0-9]+$",
                    "description": 'last returned id when more may follow, else "0"',
                },
            },
            "required": ["tasks", "next_after"],
        },
        "CancelResponse": {
            "type": "object",
            "properties": {"cancelled": {"type": "boolean"}},
            "required": ["cancelled"],
        },
    }


def _admin_responses() -> dict[str, Any]:
    """The admin and operations routes' response bodies (docs/how-to/operations.md)."""
    return {
        "WorkerList": {
            "type": "object",
            "properties": {"workers": {"type": "array", "items": ref("WorkerInfo")}},
            "required": ["workers"],
        },
        "RecurringList": {
            "type": "object",
            "properties": {"schedules": {"type": "array", "items": ref("RecurringInfo")}},
            "required": ["schedules"],
        },
        "RemoveResponse": {
            "type": "object",
            "properties": {"removed": {"type": "boolean"}},
            "required": ["removed"],
        },
        "History": {
            "type": "object",
            "description": "GET /v1/history: one point per second, oldest first",
            "properties": {
                "interval_s": {"type": "integer"},
                "points": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "at": {"type": "integer", "description": "Unix seconds"},
                            "pools": {"type": "object", "additionalProperties": ref("HistoryPool")},
                        },
                        "required": ["at", "pools"],
                    },
                },
            },
            "required": ["interval_s", "points"],
        },
        "HistoryPool": {
            "type": "object",
            "properties": {
                **{
                    k: {"type": "integer", "minimum": 0}
                    for k in ("busy", "capacity", "desired", "held", "pending")
                },
                "pending_by_class": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                **{
                    k: {"type": "integer", "minimum": 0, "description": "in the 60 s window"}
                    for k in ("dispatched", "succeeded", "failed")
                },
                "paused": {"type": "boolean"},
            },
            "required": list(HISTORY_FIELDS),
        },
        "Health": {"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]},
        "SignalResponse": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "duplicate": {
                    "type": "boolean",
                    "description": "the signal already existed: nothing changed (its first payload stays)",
                },
            },
            "required": ["name", "duplicate"],
        },
        "PauseResponse": {
            "type": "object",
            "properties": {"changed": {"type": "boolean", "description": "false: it already was so"}},
            "required": ["changed"],
        },
        "BulkResponse": {
            "type": "object",
            "properties": {
                "matched": {"type": "integer"},
                "acted": {"type": "integer"},
                "resumed": {
                    "type": "boolean",
                    "description": "present (true) when an interrupted first call with this "
                    "request_key was finished: the counts include what it did before",
                },
            },
            "required": ["matched", "acted"],
        },
    }


def _message_schemas() -> dict[str, Any]:
    """The schemas derived from the protobuf messages (see the module docstring)."""
    out: dict[str, Any] = {}
    for desc in (
        pb.TaskInfo.DESCRIPTOR,
        pb.SnapshotResponse.DESCRIPTOR,
        pb.WorkerInfo.DESCRIPTOR,
        pb.RecurringInfo.DESCRIPTOR,
        pb.StatusEvent.DESCRIPTOR,
        pb.ResourceKeysResponse.DESCRIPTOR,
    ):
        _message_schema(desc, out)
    ev = out["StatusEvent"]
    ev["properties"].pop("progress", None)  # (a Watch's progress update; SSE has its own frame)
    ev["properties"]["at"] = {"type": "number", "description": "Unix seconds"}
    ev["required"] = sorted(ev["properties"])
    ev["description"] = "`data:` of an SSE `event: status` on /v1/events"
    out["ProgressEvent"] = {
        "type": "object",
        "description": "`data:` of an SSE `event: progress` on /v1/events?progress=1",
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "pool": {"type": "string"},
            "key": {"type": "string"},
            "attempt": {"type": "integer"},
            "done": {"type": "number"},
            "total": {"type": "number", "nullable": True},
            "message": {"type": "string"},
            "at": {"type": "number", "description": "Unix seconds (when it was reported)"},
        },
        "required": ["at", "attempt", "done", "id", "key", "message", "pool", "total"],
    }
    # null until the attempt reports progress (a nullable allOf does not admit null in 3.0)
    out["TaskInfo"]["properties"]["progress"] = {
        "anyOf": [ref("Progress"), {"type": "object", "nullable": True, "enum": [None]}]
    }
    out["TaskInfo"]["properties"]["status"]["nullable"] = False
    out["TaskInfo"]["properties"]["priority"]["nullable"] = False
    return out


def schemas() -> dict[str, Any]:
    """Every component schema of the document."""
    return {**request_schemas(), **_task_responses(), **_admin_responses(), **_message_schemas()}
