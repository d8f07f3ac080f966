"""The OpenAPI 3.0 document of the HTTP/JSON API (``GET /openapi.json``, docs/reference/http.md#conventions).

Response schemas of the messages rendered from protobuf (``TaskInfo``, ``SnapshotResponse``,
``WorkerInfo``, ``RecurringInfo``, ``StatusEvent``) are derived from the message descriptors
with the rendering rules of :func:`cronoq.client.json_shapes.message_json` (ids as strings, enums
as lower-case names, unset optional fields null), so they cannot drift from the wire contract;
the task fields of the request schemas come from their declaration (``runtime.task_fields``,
one schema per value shape); the rest of the request schemas are written out here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cronoq.engine.model import STATUS_NAMES
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.runtime import task_fields
from cronoq.server.history import FIELDS as HISTORY_FIELDS

if TYPE_CHECKING:
    from cronoq.server.app import ServerApp

__all__ = ["openapi_document"]

_ID_FIELDS = frozenset({"id", "next_after", "last_task_id", "task_id", "worker_id"})
_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _REF + name}


def _enum_values(enum: Any) -> list[str]:
    zero = enum.values_by_number.get(0)
    prefix = zero.name[: -len("UNSPECIFIED")] if zero is not None else ""
    return [v.name[len(prefix) :].lower() for v in enum.values if v.number != 0]


def _field_schema(fd: Any) -> dict[str, Any]:
    t = fd.type
    if t == fd.TYPE_MESSAGE:
        return _ref(fd.message_type.name)
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
        if fd.name in _ID_FIELDS:
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


def _schemas(app: ServerApp | None) -> dict[str, Any]:
    seconds = {"type": "number", "minimum": 0, "description": "seconds"}
    unix_ns = {
        "oneOf": [{"type": "integer", "format": "int64"}, {"type": "string", "pattern": "^-?[0-9]+$"}],
        "description": "Unix time in nanoseconds (an integer or a string of digits)",
    }
    task_target = {
        "oneOf": [
            {"type": "integer", "minimum": 1, "format": "int64"},
            {"type": "string", "minLength": 1, "description": "decimal digits = an id, else a key"},
            {
                "type": "object",
                "properties": {
                    "id": {
                        "oneOf": [
                            {"type": "integer", "minimum": 1},
                            {"type": "string", "pattern": "^[0-9]+$"},
                        ]
                    },
                    "key": {"type": "string", "minLength": 1},
                },
                "additionalProperties": False,
            },
        ]
    }
    #: tags/labels in requests: numbers and booleans are stringified (as in-process,
    #: docs/reference/behaviour.md#task-fields)
    str_map_in = {
        "type": "object",
        "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]},
        "description": "string values; numbers and booleans are stringified with Python's str()",
    }
    #: the schema of a task field's JSON value, by its shape (runtime.task_fields)
    by_shape: dict[str, Any] = {
        "string": {"type": "string"},
        "priority": {
            "description": "a name (case-insensitive) or an integer 0..3 (0 = critical, 3 = low)",
            "oneOf": [
                {"type": "string", "enum": list(enums.PRIORITY.numbers)},
                {"type": "integer", "minimum": 0, "maximum": 3},
            ],
        },
        "seconds": seconds,
        "unix_ns": unix_ns,
        "on_miss": {"type": "string", "enum": list(enums.MISS_POLICY.numbers)},
        "retry": _ref("RetryPolicy"),
        "deps": {"type": "array", "items": _ref("Dep")},
        "after": {
            "oneOf": [
                {"type": "array", "items": task_target},
                {"type": "integer", "minimum": 1, "format": "int64"},
                {"type": "string", "minLength": 1},
            ],
            "description": "ids or keys (on_success): an array, or one id or key",
        },
        "resources": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 4294967295},
        },
        "str_map": str_map_in,
    }
    out: dict[str, Any] = {
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
        "RetryPolicy": {
            "type": "object",
            "description": "absent = the pool's policy; a zero field means its default (3, 1.0, 2.0, 60.0)",
            "properties": {
                "max_attempts": {"type": "integer", "minimum": 0, "maximum": 4294967295},
                "initial_backoff_s": seconds,
                "multiplier": {"type": "number", "minimum": 0},
                "max_backoff_s": seconds,
                "jitter": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "Dep": {
            "type": "object",
            "properties": {
                "target": task_target,
                "cond": {
                    "type": "string",
                    "enum": [
                        *enums.EDGE_COND.numbers,
                        *(n.removeprefix("on_") for n in enums.EDGE_COND.numbers),
                    ],
                },
            },
            "required": ["target"],
            "additionalProperties": False,
        },
        "TaskSpec": {
            "type": "object",
            "description": "Task fields (proto TaskSpec names); `payload` is any JSON value "
            "(sent as application/json), or `payload_base64` with `content_type`.",
            "properties": {
                **{f.json: by_shape[f.shape] for f in task_fields.TASK_FIELDS},
                "payload": {"description": "any JSON value", "nullable": True},
                "payload_base64": {"type": "string", "format": "byte"},
                "content_type": {"type": "string"},
            },
            "additionalProperties": False,
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
                "result": _ref("TaskResult"),
            },
            "required": ["id", "duplicate"],
        },
        "SubmitBatchRequest": {
            "type": "object",
            "properties": {"tasks": {"type": "array", "items": _ref("TaskSpec")}},
            "required": ["tasks"],
            "additionalProperties": False,
        },
        "SubmitBatchResponse": {
            "type": "object",
            "properties": {"tasks": {"type": "array", "items": _ref("SubmitResponse")}},
            "required": ["tasks"],
        },
        "TaskList": {
            "type": "object",
            "properties": {
                "tasks": {"type": "array", "items": _ref("TaskInfo")},
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
        "WorkerList": {
            "type": "object",
            "properties": {"workers": {"type": "array", "items": _ref("WorkerInfo")}},
            "required": ["workers"],
        },
        "RecurringList": {
            "type": "object",
            "properties": {"schedules": {"type": "array", "items": _ref("RecurringInfo")}},
            "required": ["schedules"],
        },
        "RecurringRequest": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "optional; must equal the path's name"},
                "cron": {"type": "string", "minLength": 1},
                "tz": {"type": "string", "description": "IANA time zone (default UTC)"},
                "overlap": {"type": "string", "enum": list(enums.OVERLAP.numbers)},
                "tolerance_s": seconds,
                "on_miss": by_shape["on_miss"],
                "task": _ref("TaskSpec"),
            },
            "required": ["cron"],
            "additionalProperties": False,
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
                            "pools": {"type": "object", "additionalProperties": _ref("HistoryPool")},
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
    }
    for desc in (
        pb.TaskInfo.DESCRIPTOR,
        pb.SnapshotResponse.DESCRIPTOR,
        pb.WorkerInfo.DESCRIPTOR,
        pb.RecurringInfo.DESCRIPTOR,
        pb.StatusEvent.DESCRIPTOR,
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
        "anyOf": [_ref("Progress"), {"type": "object", "nullable": True, "enum": [None]}]
    }
    out["TaskInfo"]["properties"]["status"]["nullable"] = False
    out["TaskInfo"]["properties"]["priority"]["nullable"] = False
    out.update(_ops_schemas())
    return out


def _ops_schemas() -> dict[str, Any]:
    """Schemas of the operations routes (docs/how-to/operations.md)."""
    instant = {
        "oneOf": [{"type": "string", "format": "date-time"}, {"type": "number"}],
        "description": "RFC 3339 time or Unix seconds",
    }
    names = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    return {
        "PauseResponse": {
            "type": "object",
            "properties": {"changed": {"type": "boolean", "description": "false: it already was so"}},
            "required": ["changed"],
        },
        "ReplayRequest": {
            "type": "object",
            "properties": {"force": {"type": "boolean", "description": "also replay a succeeded task"}},
            "additionalProperties": False,
        },
        "TaskFilter": {
            "type": "object",
            "description": "every criterion given must hold; at least one is required",
            "minProperties": 1,
            "additionalProperties": False,
            "properties": {
                "pools": names,
                "statuses": {
                    "oneOf": [
                        {"type": "string", "enum": list(STATUS_NAMES)},
                        {"type": "array", "items": {"type": "string", "enum": list(STATUS_NAMES)}},
                    ]
                },
                "kinds": names,
                "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                "tenant": {"type": "string"},
                "created_after": instant,
                "created_before": instant,
                "finished_after": instant,
                "finished_before": instant,
                "limit": {"type": "integer", "minimum": 1},
            },
        },
        "BulkRequest": {
            "type": "object",
            "additionalProperties": False,
            "required": ["filter"],
            "properties": {
                "filter": _ref("TaskFilter"),
                "request_key": {"type": "string", "description": "a retry with it answers the first result"},
                "force": {"type": "boolean", "description": "tasks:replay: also succeeded tasks"},
            },
        },
        "BulkResponse": {
            "type": "object",
            "properties": {"matched": {"type": "integer"}, "acted": {"type": "integer"}},
            "required": ["matched", "acted"],
        },
    }


def _ops_paths(
    ref_param: dict[str, Any], key_param: dict[str, Any], name_param: dict[str, Any]
) -> dict[str, Any]:
    """The operations routes (docs/how-to/operations.md): pause/resume, run now, replay, bulk."""
    pool_param = {**name_param, "description": "pool name"}
    admin = ("admin",)
    replay = _op("Replay a finished task as a new one", _ok("SubmitResponse"), (400, 404, 409, *_COMMON))
    replay["parameters"] = [ref_param, key_param]
    replay["requestBody"] = {
        "required": False,
        "content": {"application/json": {"schema": _ref("ReplayRequest")}},
    }
    replay["description"] = (
        "409 with code not_finished, succeeded (use force) or payload_unavailable when refused"
    )
    return {
        "/v1/tasks/{ref}/replay": {"post": replay},
        "/v1/tasks:replay": {
            "post": _op(
                "Replay every finished task matching a filter",
                _ok("BulkResponse"),
                (400, 404, 408, 413, *_COMMON),
                body="BulkRequest",
            )
        },
        "/v1/tasks:cancel": {
            "post": _op(
                "Cancel every unfinished task matching a filter",
                _ok("BulkResponse"),
                (400, 404, 408, 413, *_COMMON),
                body="BulkRequest",
            )
        },
        "/v1/pools/{name}/pause": {
            "post": _op(
                "Pause a pool", _ok("PauseResponse"), (404, *_COMMON), params=[pool_param], tags=admin
            )
        },
        "/v1/pools/{name}/resume": {
            "post": _op(
                "Resume a pool", _ok("PauseResponse"), (404, *_COMMON), params=[pool_param], tags=admin
            )
        },
        "/v1/recurring/{name}/pause": {
            "post": _op(
                "Pause a recurring schedule",
                _ok("PauseResponse"),
                (404, *_COMMON),
                params=[name_param],
                tags=admin,
            )
        },
        "/v1/recurring/{name}/resume": {
            "post": _op(
                "Resume a recurring schedule",
                _ok("PauseResponse"),
                (404, *_COMMON),
                params=[name_param],
                tags=admin,
            )
        },
        "/v1/recurring/{name}/run": {
            "post": _op(
                "Run a recurring schedule now",
                _ok("SubmitResponse"),
                (404, *_COMMON),
                params=[name_param],
                tags=admin,
            )
        },
    }


def _error_responses(*codes: int) -> dict[str, Any]:
    text = {
        400: "bad input: invalid JSON, body not an object, invalid, cycle, duplicate_key_in_batch, "
        "resource_exceeds_capacity, unknown_resource",
        401: "missing or bad token",
        403: "wrong role, pool or tenant; without auth: a non-loopback Host, or a state-changing "
        "request a browser marks as cross-site (foreign or null Origin, Sec-Fetch-Site cross-site/same-site)",
        404: "unknown task, pool or dependency",
        405: "method not allowed",
        408: "request body not received in time",
        409: "reservation_conflict",
        413: "body larger than limits.max_http_body_bytes",
        429: "overloaded / full / too many concurrent requests",
        503: "standby (not the leader) or shutting down",
        504: "wait timed out",
    }
    body = {"application/json": {"schema": _ref("Error")}}
    return {str(c): {"description": text[c], "content": body} for c in codes}


def _ok(schema: str, description: str = "OK") -> dict[str, Any]:
    return {"200": {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}}


_COMMON = (401, 403, 429, 503)


def _op(
    summary: str,
    ok: dict[str, Any],
    errors: tuple[int, ...],
    *,
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
    tags: tuple[str, ...] = ("tasks",),
    security: bool = True,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "operationId": "",
        "tags": list(tags),
        "responses": {**ok, **_error_responses(*sorted(set(errors)))},
    }
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    if not security:
        op["security"] = []
    return op


def _q(name: str, schema: dict[str, Any], description: str, *, array: bool = False) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name, "in": "query", "required": False, "description": description}
    if array:
        p["schema"] = {"type": "array", "items": schema}
        p["style"] = "form"
        p["explode"] = True
    else:
        p["schema"] = schema
    return p


def openapi_document(app: ServerApp | None = None) -> dict[str, Any]:
    """The OpenAPI 3.0.3 document of the HTTP/JSON API."""
    ref_param = {
        "name": "ref",
        "in": "path",
        "required": True,
        "description": "decimal digits = a task id; anything else = a URL-encoded task key",
        "schema": {"type": "string", "minLength": 1},
    }
    key_param = _q("key", {"type": "string", "minLength": 1}, "names the task by key (for digits-only keys)")
    timeout = _q("timeout", {"type": "number", "minimum": 0}, "seconds to wait (capped by limits.max_wait_s)")
    name_param = {
        "name": "name",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1},
    }
    pool_q = _q("pool", {"type": "string"}, "restrict to these pools (repeat or comma-separate)", array=True)
    text_plain = {"text/plain": {"schema": {"type": "string"}}}
    paths: dict[str, Any] = {
        "/v1/tasks": {
            "post": _op(
                "Submit a task",
                _ok("SubmitResponse"),
                (400, 404, 408, 409, 413, 504, *_COMMON),
                params=[
                    _q("wait", {"type": "boolean"}, "answer once the task is terminal"),
                    _q("timeout", {"type": "number", "minimum": 0}, "bound on the wait, seconds"),
                ],
                body="TaskSpec",
            ),
            "get": _op(
                "List live and retained tasks (ascending id)",
                _ok("TaskList"),
                (400, 404, *_COMMON),
                params=[
                    pool_q,
                    _q(
                        "status",
                        {"type": "string", "enum": list(STATUS_NAMES)},
                        "statuses (names are case-insensitive)",
                        array=True,
                    ),
                    _q("after", {"type": "string", "pattern": "^[0-9]+$"}, "only ids greater than this"),
                    _q("limit", {"type": "integer", "minimum": 0}, "at most this many (0 = 100; max_list)"),
                    _q("kind", {"type": "string"}, "only these kinds (repeat or comma-separate)", array=True),
                    _q(
                        "tag",
                        {"type": "string", "pattern": "^[^=]+=.*$"},
                        "key=value; all must match",
                        array=True,
                    ),
                    _q("created_after", {"type": "string"}, "created at or after (RFC 3339 or Unix seconds)"),
                    _q("created_before", {"type": "string"}, "created before (RFC 3339 or Unix seconds)"),
                ],
            ),
        },
        "/v1/tasks:batch": {
            "post": _op(
                "Submit tasks atomically",
                _ok("SubmitBatchResponse"),
                (400, 404, 408, 409, 413, *_COMMON),
                body="SubmitBatchRequest",
            )
        },
        "/v1/tasks/{ref}": {
            "get": _op("Get a task", _ok("TaskInfo"), (400, 404, *_COMMON), params=[ref_param, key_param])
        },
        "/v1/tasks/{ref}/result": {
            "get": _op(
                "Wait for a task's result",
                _ok("TaskResult"),
                (400, 404, 504, *_COMMON),
                params=[ref_param, key_param, timeout],
            )
        },
        "/v1/tasks/{ref}/cancel": {
            "post": _op(
                "Cancel a task", _ok("CancelResponse"), (400, 404, *_COMMON), params=[ref_param, key_param]
            )
        },
        "/v1/events": {
            "get": _op(
                "Status events (Server-Sent Events)",
                {
                    "200": {
                        "description": "`event: status` with `data:` a StatusEvent (see the "
                        "StatusEvent schema); with `progress`, also `event: progress` with `data:` "
                        "a ProgressEvent; `: live` once subscribed; `event: error` at the end",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    }
                },
                (400, 404, *_COMMON),
                params=[
                    pool_q,
                    _q("all_transitions", {"type": "boolean"}, "every transition, not only terminal ones"),
                    _q("id", {"type": "string", "pattern": "^[0-9]+$"}, "only these task ids", array=True),
                    _q("key", {"type": "string"}, "only these task keys", array=True),
                    _q(
                        "progress",
                        {"type": "boolean"},
                        "also progress updates (`event: progress`, at most 4 per second per task)",
                    ),
                ],
            )
        },
        "/v1/snapshot": {"get": _op("Scheduler snapshot", _ok("SnapshotResponse"), _COMMON, tags=("admin",))},
        "/v1/history": {
            "get": _op(
                "Per-second pool figures of the last 30 minutes",
                _ok("History"),
                (400, *_COMMON),
                params=[_q("seconds", {"type": "integer", "minimum": 1, "maximum": 1800}, "how far back")],
                tags=("admin",),
            )
        },
        "/v1/workers": {"get": _op("Connected workers", _ok("WorkerList"), _COMMON, tags=("admin",))},
        "/v1/recurring": {"get": _op("Recurring schedules", _ok("RecurringList"), _COMMON, tags=("admin",))},
        "/v1/recurring/{name}": {
            "get": _op(
                "One recurring schedule",
                _ok("RecurringInfo"),
                (404, *_COMMON),
                params=[name_param],
                tags=("admin",),
            ),
            "put": _op(
                "Create or replace a recurring schedule",
                _ok("RecurringInfo"),
                (400, 404, 408, 413, *_COMMON),
                params=[name_param],
                body="RecurringRequest",
                tags=("admin",),
            ),
            "delete": _op(
                "Remove a recurring schedule",
                _ok("RemoveResponse"),
                _COMMON,
                params=[name_param],
                tags=("admin",),
            ),
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (text format 0.0.4)",
                "operationId": "metrics",
                "tags": ["ops"],
                "responses": {
                    "200": {"description": "OK", "content": text_plain},
                    **_error_responses(401, 403, 429),
                },
            }
        },
        "/healthz": {
            "get": _op(
                "Liveness (200 while the process runs)", _ok("Health"), (), tags=("ops",), security=False
            )
        },
        "/readyz": {
            "get": _op(
                "Readiness (200 only when leading)", _ok("Health"), (503,), tags=("ops",), security=False
            )
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "operationId": "openapi",
                "tags": ["ops"],
                "responses": {
                    "200": {
                        "description": "OK",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }
    paths.update(_ops_paths(ref_param, key_param, name_param))
    for path, item in paths.items():
        for method, op in item.items():
            if not op.get("operationId"):
                slug = path.strip("/").replace("/", "_").replace("{", "").replace("}", "").replace(":", "_")
                op["operationId"] = f"{method}_{slug}".replace(".", "_")
    max_body = app.limits.max_http_body_bytes if app is not None else None
    info_desc = (
        "HTTP/JSON API of `cronoq serve` (its reference: docs/reference/http.md). Ids are decimal "
        'strings; errors are `{"error", "code"}`. Auth: `authorization: Bearer <token>` once any token is '
        "configured. "
        "Request bodies are parsed as JSON whatever their Content-Type. Without auth, state-changing "
        "requests (POST, PUT, DELETE, PATCH) that a browser marks as cross-site are refused (403)."
    )
    if max_body is not None:
        info_desc += f" Bodies are limited to {max_body} bytes."
    return {
        "openapi": "3.0.3",
        "info": {"title": "cronoq", "version": "1", "description": info_desc},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": _schemas(app),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
