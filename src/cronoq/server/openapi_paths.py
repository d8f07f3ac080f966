"""The paths of the OpenAPI document: every route of the HTTP API and its operations.

Theory of operation
-------------------
An operation is built by :func:`_op` from its summary, its 200 response, the error statuses it
can answer (each with the ``Error`` schema and one shared description per status), its
parameters and its request body, which names a component schema (generated from the request
body declarations, ``openapi_requests``).  The paths come in three groups (the task routes,
the admin and ops routes, the operations routes of docs/how-to/operations.md); a path's
``operationId`` defaults to its method and path.
"""

from __future__ import annotations

from typing import Any, Final

from cronoq.engine.model import STATUS_NAMES
from cronoq.server.openapi_schemas import ref as _ref

__all__ = ["paths"]


def _error_responses(*codes: int) -> dict[str, Any]:
    text = {
        400: "bad input: invalid JSON, body not an object, invalid, cycle, duplicate_key_in_batch, "
        "resource_exceeds_capacity, unknown_resource",
        401: "missing or bad token",
        403: "wrong role, pool or tenant; without auth: a non-loopback Host; without a bearer token "
        "(no auth, or a client certificate): a state-changing request a browser marks as "
        "cross-site (foreign or null Origin, Sec-Fetch-Site cross-site/same-site)",
        404: "unknown task, pool or dependency",
        405: "method not allowed",
        408: "request body not received in time",
        409: "reservation_conflict",
        413: "body larger than limits.max_http_body_bytes",
        415: "a body whose content-type is not application/json (or application/*+json)",
        429: "overloaded / full / too many concurrent requests",
        503: "standby (not the leader) or shutting down",
        504: "wait timed out",
    }
    body = {"application/json": {"schema": _ref("Error")}}
    return {str(c): {"description": text[c], "content": body} for c in codes}


def _ok(schema: str, description: str = "OK") -> dict[str, Any]:
    return {"200": {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}}


_COMMON: Final = (401, 403, 429, 503)


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


def _params() -> dict[str, dict[str, Any]]:
    """The parameters several routes share."""
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
    pool_q = _q(
        "pool",
        {"type": "string"},
        "restrict to these pools (repeat or comma-separate; alias pools)",
        array=True,
    )
    tenant = _q("tenant", {"type": "string"}, "whose key the reference names (a token without a tenant)")
    return {
        "ref": ref_param,
        "key": key_param,
        "tenant": tenant,
        "timeout": timeout,
        "name": name_param,
        "pool": pool_q,
    }


def _list_params(pool_q: dict[str, Any]) -> list[dict[str, Any]]:
    """The query parameters of ``GET /v1/tasks``."""
    return [
        pool_q,
        _q(
            "status",
            {"type": "string", "enum": list(STATUS_NAMES)},
            "statuses (names are case-insensitive; alias statuses)",
            array=True,
        ),
        _q("after", {"type": "string", "pattern": "^[0-9]+$"}, "only ids greater than this"),
        _q("limit", {"type": "integer", "minimum": 0}, "at most this many (0 = 100; max_list)"),
        _q(
            "kind",
            {"type": "string"},
            "only these kinds (repeat or comma-separate; alias kinds)",
            array=True,
        ),
        _q(
            "tag",
            {"type": "string", "pattern": "^[^=]+=.*$"},
            "key=value; all must match (alias tags)",
            array=True,
        ),
        _q("created_after", {"type": "string"}, "created at or after (RFC 3339 or Unix seconds)"),
        _q("created_before", {"type": "string"}, "created before (RFC 3339 or Unix seconds)"),
    ]


def _task_paths(p: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The task routes: submit, list, get, result, cancel, events."""
    ref_param, key_param, timeout, pool_q = p["ref"], p["key"], p["timeout"], p["pool"]
    tenant = p["tenant"]
    return {
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
                params=_list_params(pool_q),
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
            "get": _op(
                "Get a task", _ok("TaskInfo"), (400, 404, *_COMMON), params=[ref_param, key_param, tenant]
            )
        },
        "/v1/tasks/{ref}/result": {
            "get": _op(
                "Wait for a task's result",
                _ok("TaskResult"),
                (400, 404, 504, *_COMMON),
                params=[ref_param, key_param, tenant, timeout],
            )
        },
        "/v1/tasks/{ref}/cancel": {
            "post": _op(
                "Cancel a task",
                _ok("CancelResponse"),
                (400, 404, *_COMMON),
                params=[ref_param, key_param, tenant],
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
                    _q(
                        "id",
                        {"type": "string", "pattern": "^[0-9]+$"},
                        "only these task ids (alias ids)",
                        array=True,
                    ),
                    _q("key", {"type": "string"}, "only these task keys (alias keys)", array=True),
                    _q(
                        "progress",
                        {"type": "boolean"},
                        "also progress updates (`event: progress`, at most 4 per second per task)",
                    ),
                ],
            )
        },
    }


def _signal_op(name_param: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/signals/{name}`` (docs/how-to/durable.md#signals): the body is optional."""
    op = _op(
        "Send a signal (write-once per name while retained)",
        _ok("SignalResponse"),
        (400, 408, 413, *_COMMON),
        params=[
            {
                **name_param,
                "description": "the signal name, URL-encoded (a `/` in it as `%2F`)",
                "schema": {"type": "string", "minLength": 1, "maxLength": 256},
            }
        ],
        body="SignalRequest",
    )
    op["requestBody"]["required"] = False
    return op


#: the description of a schedule's name in its paths
_SCHEDULE_NAME = "the schedule name, URL-encoded (a `/` in it as `%2F`)"


def _admin_paths(p: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The admin and ops routes: snapshot, history, workers, recurring schedules, metrics, health."""
    name_param = p["name"]
    schedule_param = {**name_param, "description": _SCHEDULE_NAME}
    text_plain = {"text/plain": {"schema": {"type": "string"}}}
    put_recurring = _op(
        "Create or replace a recurring schedule",
        _ok("RecurringInfo"),
        (400, 404, 408, 409, 413, *_COMMON),
        params=[schedule_param],
        body="RecurringRequest",
        tags=("admin",),
    )
    put_recurring["responses"]["409"]["description"] = (
        "a token restricted to some pools names a schedule of another pool (failed_precondition)"
    )
    return {
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
        "/v1/resources/{name}/keys": {
            "get": _op(
                "The busiest keys of a keyed resource (top N by waiting units)",
                _ok("ResourceKeysResponse"),
                (400, 404, *_COMMON),
                params=[
                    {**name_param, "description": "the resource name, URL-encoded (a `/` in it as `%2F`)"},
                    _q("top", {"type": "integer", "minimum": 1, "maximum": 1000}, "how many"),
                ],
                tags=("admin",),
            )
        },
        "/v1/recurring": {"get": _op("Recurring schedules", _ok("RecurringList"), _COMMON, tags=("admin",))},
        "/v1/recurring/{name}": {
            "get": _op(
                "One recurring schedule",
                _ok("RecurringInfo"),
                (404, *_COMMON),
                params=[schedule_param],
                tags=("admin",),
            ),
            "put": put_recurring,
            "delete": _op(
                "Remove a recurring schedule",
                _ok("RemoveResponse"),
                _COMMON,
                params=[schedule_param],
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


def _ops_paths(
    ref_param: dict[str, Any],
    key_param: dict[str, Any],
    name_param: dict[str, Any],
    tenant_param: dict[str, Any],
) -> dict[str, Any]:
    """The operations routes (docs/how-to/operations.md): pause/resume, run now, replay, bulk."""
    pool_param = {**name_param, "description": "the pool name, URL-encoded (a `/` in it as `%2F`)"}
    schedule_param = {**name_param, "description": _SCHEDULE_NAME}
    admin = ("admin",)
    replay = _op("Replay a finished task as a new one", _ok("SubmitResponse"), (400, 404, 409, *_COMMON))
    replay["parameters"] = [ref_param, key_param, tenant_param]
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
        "/v1/signals/{name}": {"post": _signal_op(name_param)},
        "/v1/recurring/{name}/pause": {
            "post": _op(
                "Pause a recurring schedule",
                _ok("PauseResponse"),
                (404, *_COMMON),
                params=[schedule_param],
                tags=admin,
            )
        },
        "/v1/recurring/{name}/resume": {
            "post": _op(
                "Resume a recurring schedule",
                _ok("PauseResponse"),
                (404, *_COMMON),
                params=[schedule_param],
                tags=admin,
            )
        },
        "/v1/recurring/{name}/run": {
            "post": _op(
                "Run a recurring schedule now",
                _ok("SubmitResponse"),
                (404, *_COMMON),
                params=[schedule_param],
                tags=admin,
            )
        },
    }


def paths() -> dict[str, Any]:
    """Every path of the document, with its operations."""
    p = _params()
    paths: dict[str, Any] = {**_task_paths(p), **_admin_paths(p)}
    paths.update(_ops_paths(p["ref"], p["key"], p["name"], p["tenant"]))
    for path, item in paths.items():
        for method, op in item.items():
            if method in ("post", "put", "delete", "patch"):  # (http_guard: a body must be JSON)
                op["responses"].update(_error_responses(415))
                op["responses"] = dict(sorted(op["responses"].items()))
            if not op.get("operationId"):
                slug = path.strip("/").replace("/", "_").replace("{", "").replace("}", "").replace(":", "_")
                op["operationId"] = f"{method}_{slug}".replace(".", "_")
    return paths
