"""HTTP/JSON front end of ``cronoq serve`` (docs/reference/http.md#conventions,
docs/reference/metrics.md#prometheus, docs/reference/behaviour.md#server-details) on Starlette (ASGI).

Theory of operation
-------------------
:func:`create_http_app` builds the ASGI application the runner serves with uvicorn on
``http_addr`` (and, with ``metrics_only=True``, the unauthenticated ``/metrics``, ``/healthz``,
``/readyz`` app of ``metrics_addr``).  Every operation is delegated to
:class:`~cronoq.server.app.ServerApp` (the same code the gRPC front end uses); its
:class:`~cronoq.server.app.ApiError` (a lower-case gRPC status name plus an error ``code``) and
the auth errors become ``{"error": message, "code": code}`` with the HTTP status of
:data:`cronoq.server.convert.HTTP_STATUS`.

Request handling, in order:

1. :class:`_Guard` (pure ASGI, before routing): the loopback ``Host`` check when it applies
   (no auth on a loopback listener: DNS-rebinding protection), the cross-site check (below)
   and the concurrency limits (``limits.max_concurrent_requests``; ``/v1/events`` streams
   count against ``limits.max_concurrent_streams``) → 403 / 429.  ``/healthz`` and
   ``/readyz`` are exempt.
2. The handler authenticates the bearer token and checks the route's role *before the body is
   read* → 401 / 403.
3. A body is parsed as JSON whatever its ``Content-Type`` (none is required: ``curl -d`` and
   ``urllib`` send form types), at most ``limits.max_http_body_bytes`` (checked against
   ``Content-Length`` and while reading, so chunked bodies are bounded too → 413) and within
   ``limits.request_timeout_s`` (→ 408).  Invalid JSON or a body that is not an object → 400.
4. Every count and length of a task is checked on the decoded JSON before anything is
   converted (``request_limits.check_json_task``, the same limits and messages as gRPC), then
   the task fields are converted into a protobuf ``TaskSpec`` (:func:`task_spec_from_json`) so
   the gRPC validation (``convert.submit_args``) applies unchanged.  A batch is converted in
   slices of a few milliseconds (``app.Slices``), the event loop serving others in between.

Responses render protobuf messages with their proto field names (:func:`message_json`): ids
as strings, enums as lower-case names without their prefix (``"succeeded"``, ``"high"``),
unset optional fields (times) as ``null``, other 64-bit integers as JSON numbers.

Cross-site requests (ours): without auth nothing but the network guards the API, and a web
page may make a browser send "simple" cross-site POSTs (form or text bodies, no preflight).  So
when no token is configured, a state-changing request (POST, PUT, DELETE, PATCH) that the
browser marks as cross-site is refused with 403 ``permission_denied``: an ``Origin`` whose
host:port differs from the ``Host`` header (``Origin: null`` included), or ``Sec-Fetch-Site:
cross-site`` / ``same-site``.  Requests without ``Origin`` (curl, urllib, httpx, programs) and
same-origin ones (the dashboard at ``/``) pass; GET (and so ``/v1/events``), ``/healthz`` and
``/readyz`` are never checked.  With auth on, the bearer token (which a browser never adds on
its own) is the protection.

Task references: in ``/v1/tasks/{ref}[/result|/cancel]`` a segment of decimal digits is an id,
anything else a URL-encoded key (``/`` as ``%2F``); ``?key=`` names the task by key whatever
the segment is (for digits-only keys: ``/v1/tasks/-?key=0042``).  Keys are scoped by tenant:
a key is looked up among the tasks of the token's tenant, or of ``?tenant=`` for a caller
whose token has none (else among the tasks without a tenant).

``/v1/events`` is Server-Sent Events: a ``: live`` comment once the subscription exists
(nothing submitted afterwards is missed), then ``event: status`` / ``data: <StatusEvent JSON>``
per transition, ``: keepalive`` comments every 15 s while idle, and a final ``event: error``
(``data_loss`` when the consumer fell too far behind, ``unavailable`` when the scheduler stops
or loses the leadership).

Fan-out (many open dashboards): the streams of one :class:`HttpApi` share one scheduler
subscription through an :class:`~cronoq.server.sse.EventHub`, which encodes each event once and
hands every stream of a filter the same chunk of frames, at most every :data:`SSE_FLUSH_S` while
events keep coming; each stream sends what is pending as one body chunk (see ``sse.py``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from cronoq.client import json_shapes
from cronoq.client.json_shapes import message_json
from cronoq.engine.model import STATUS_BY_NAME, STATUS_NAMES, SUCCEEDED, TaskState
from cronoq.errors import SchedulerError
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.runtime import task_fields
from cronoq.server import convert, ops, request_limits
from cronoq.server import metrics as metrics_mod
from cronoq.server.app import ApiError, ServerApp, Slices, event_filter, filter_group, store_failure
from cronoq.server.auth import Action, AuthError, Principal, restrict_pools
from cronoq.server.config import LimitsConfig, split_host_port
from cronoq.server.dashboard import dashboard_routes
from cronoq.server.http_conn import scope_peer_dns
from cronoq.server.sse import EventHub, Subscriber, any_frame, with_progress
from cronoq.server.workers import Blob

__all__ = [
    "HttpError",
    "create_http_app",
    "create_metrics_app",
    "message_json",
    "result_json",
    "task_spec_from_json",
]

log = logging.getLogger("cronoq.server.http")

UINT64_MAX: Final = (1 << 64) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT32_MAX: Final = (1 << 32) - 1
SSE_KEEPALIVE_S: Final = 15.0
#: after handing events to the event streams, the fan-out lets the next ones gather this long,
#: so they go out together (one wake-up and one send per stream instead of one per event)
SSE_FLUSH_S: Final = 0.05

# JSON names → wire numbers (cronoq.proto.enums); a condition also without its `on_`
PRIORITY_FROM_JSON: Final = dict(enums.PRIORITY.numbers)
MISS_FROM_JSON: Final = dict(enums.MISS_POLICY.numbers)
COND_FROM_JSON: Final = {
    name: v for n, v in enums.EDGE_COND.numbers.items() for name in (n, n.removeprefix("on_"))
}
OVERLAP_FROM_JSON: Final = dict(enums.OVERLAP.numbers)

#: the JSON names of the task fields (runtime.task_fields) and of the payload
PAYLOAD_FIELDS: Final = ("payload", "payload_base64", "content_type")
TASK_FIELDS: Final = frozenset(f.json for f in task_fields.TASK_FIELDS) | frozenset(PAYLOAD_FIELDS)
# the fields of one shape, converted by one loop each in task_spec_from_json
_STRING_FIELDS: Final = tuple(f.json for f in task_fields.of_shape("string"))
_SECONDS_FIELDS: Final = tuple(f.json for f in task_fields.of_shape("seconds"))
_UNIX_NS_FIELDS: Final = tuple(f.json for f in task_fields.of_shape("unix_ns"))
_STR_MAP_FIELDS: Final = tuple(f.json for f in task_fields.of_shape("str_map"))
RETRY_FIELDS: Final = frozenset(
    {"max_attempts", "initial_backoff_s", "multiplier", "max_backoff_s", "jitter"}
)
RECURRING_FIELDS: Final = frozenset({"name", "cron", "tz", "overlap", "tolerance_s", "on_miss", "task"})
#: task fields that make no sense in a recurring template (each occurrence is a fixed start).
NOT_IN_TEMPLATE: Final = ("start_in_s", "start_unix_ns", "deadline_unix_ns", "deps", "after")


# ---------------------------------------------------------------------------------------------
# errors


class HttpError(Exception):
    """A request failed with ``status``; the body is ``{"error": message, "code": code, **extra}``."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.extra = extra or {}
        self.headers = headers


def _invalid(message: str) -> HttpError:
    """A malformed task field: the SubmitError code ``invalid``
    (docs/reference/behaviour.md#server-details)."""
    return HttpError(400, message, "invalid")


def _bad(message: str) -> HttpError:
    """Bad input that is not a task field (JSON, body shape, query, path): ``invalid_argument``."""
    return HttpError(400, message, "invalid_argument")


def _dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(_dumps(data), status_code=status, media_type="application/json", headers=headers)


def error_response(
    status: int,
    message: str,
    code: str,
    extra: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    body: dict[str, Any] = {"error": message, "code": code}
    if extra:
        body.update(extra)
    if status == 401:
        headers = {**(headers or {}), "www-authenticate": 'Bearer realm="cronoq"'}
    return json_response(body, status, headers)


def _from_exception(e: BaseException) -> HttpError:
    if isinstance(e, HttpError):
        return e
    if isinstance(e, ApiError):
        return HttpError(convert.HTTP_STATUS.get(e.status, 500), e.message, e.code)
    if isinstance(e, AuthError):
        return HttpError(e.http_status, e.message, e.code)
    raise e


# ---------------------------------------------------------------------------------------------
# rendering (protobuf message → JSON with proto field names)


def result_json(t: TaskState) -> dict[str, Any]:
    """``{id, status, output?, output_base64?, content_type, message, output_available}``."""
    available = t.status == SUCCEEDED and isinstance(t.output, Blob)
    out = t.output if available else None
    assert out is None or isinstance(out, Blob)
    return json_shapes.result_json(
        t.id,
        STATUS_NAMES[t.status],
        output=None if out is None else out.data,
        content_type="" if out is None else out.content_type,
        message=t.message or "",
    )


def event_json(ev: Any) -> dict[str, Any]:
    return json_shapes.event_json(convert.status_event(ev), ev.at)


def recurring_json(app: ServerApp, info: Any) -> dict[str, Any]:
    return message_json(convert.recurring_msg(info))


def worker_json(s: Any) -> dict[str, Any]:
    return message_json(
        pb.WorkerInfo(
            id=s.id,
            name=s.name,
            pool=s.pool,
            labels=s.labels,
            slots=s.slots,
            busy=s.busy,
            connected_unix_ns=s.connected_unix_ns,
        )
    )


# ---------------------------------------------------------------------------------------------
# parsing (JSON → protobuf TaskSpec)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _where(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _type(v: Any) -> str:
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


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _invalid(f"{where} must be a string (got {_type(v)})")
    return v


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _invalid(f"{where} must be a number (got {_type(v)})")
    f = float(v)
    if not math.isfinite(f):
        raise _invalid(f"{where} must be finite")
    return f


def _seconds(v: Any, where: str) -> float:
    f = _number(v, where)
    if f < 0:
        raise _invalid(f"{where} must be a non-negative number of seconds (got {v})")
    return f


def _integer(v: Any, where: str, lo: int, hi: int, *, strings: bool = False) -> int:
    """An integer in [lo, hi]; integral floats are accepted; digit strings when ``strings``."""
    if isinstance(v, bool):
        raise _invalid(f"{where} must be an integer (got a boolean)")
    if isinstance(v, int):
        n = v
    elif isinstance(v, float) and v.is_integer():
        n = int(v)
    elif strings and isinstance(v, str) and v.strip().lstrip("+-").isdigit() and v.strip().isascii():
        n = int(v.strip())
    else:
        what = "an integer or a string of digits" if strings else "an integer"
        raise _invalid(f"{where} must be {what} (got {_type(v) if not isinstance(v, str) else repr(v)})")
    if not lo <= n <= hi:
        raise _invalid(f"{where} must be between {lo} and {hi} (got {n})")
    return n


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise _invalid(f"{where} must be true or false (got {_type(v)})")
    return v


def _object(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _invalid(f"{where} must be an object (got {_type(v)})")
    return v


def _str_map(v: Any, where: str) -> dict[str, str]:
    """``tags`` / ``labels``: string values; numbers and booleans are stringified with ``str()``
    as in-process (docs/reference/behaviour.md#task-fields: ``True`` → ``"True"``, ``1`` → ``"1"``); null,
    arrays and objects are refused."""
    obj = _object(v, where)
    out: dict[str, str] = {}
    for k, val in obj.items():
        if isinstance(val, str):
            out[k] = val
        elif isinstance(val, (bool, int, float)):
            out[k] = str(val)
        else:
            raise _invalid(f"{where}.{k} must be a string, number or boolean (got {_type(val)})")
    return out


def _choice(v: Any, where: str, options: dict[str, int]) -> int:
    if not isinstance(v, str) or v.strip().lower() not in options:
        names = ", ".join(dict.fromkeys(options))
        raise _invalid(f"{where} must be one of {names} (got {json.dumps(v)})")
    return options[v.strip().lower()]


def _priority(v: Any, where: str) -> int:
    """A priority as its wire value: a name (case-insensitive) or, as in-process
    (docs/reference/behaviour.md#task-fields), an integer 0..3 (0 = critical ... 3 = low)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if not 0 <= v <= 3:
            raise _invalid(f"{where} must be 0..=3 (0 = critical) or a name (got {v})")
        return enums.PRIORITY_TO_WIRE[v]
    return _choice(v, where, PRIORITY_FROM_JSON)


def _unknown(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        at = f" in {where}" if where else ""
        raise _invalid(f"unknown field{'s' if len(extra) > 1 else ''}{at}: {', '.join(extra)}")


def _dep_target(v: Any, where: str) -> pb.TaskRef:
    if isinstance(v, dict):
        _unknown(v, frozenset({"id", "key"}), where)
        if ("id" in v) == ("key" in v):
            raise _invalid(f"{where} must have exactly one of id, key")
        if "id" in v:
            return pb.TaskRef(id=_integer(v["id"], f"{where}.id", 1, UINT64_MAX, strings=True))
        key = _str(v["key"], f"{where}.key")
        if not key:
            raise _invalid(f"{where}.key must not be empty")
        return pb.TaskRef(key=key)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise _invalid(f"{where} must be a task id or key (got {_type(v)})")
    if isinstance(v, int) or (v.isdigit() and v.isascii()):
        return pb.TaskRef(id=_integer(v, where, 1, UINT64_MAX, strings=True))
    if not v:
        raise _invalid(f"{where} must not be empty")
    return pb.TaskRef(key=v)


def _set_payload(spec: pb.TaskSpec, obj: dict[str, Any], where: str) -> None:
    if "payload" in obj and "payload_base64" in obj:
        raise _invalid(f"{_where(where, 'payload')} and payload_base64 are mutually exclusive")
    content_type = None
    if "content_type" in obj:
        content_type = _str(obj["content_type"], _where(where, "content_type"))
    if "payload_base64" in obj:
        raw = _str(obj["payload_base64"], _where(where, "payload_base64"))
        try:
            spec.payload = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise _invalid(f"{_where(where, 'payload_base64')} is not valid base64") from None
        spec.content_type = "application/octet-stream" if content_type is None else content_type
    elif "payload" in obj and obj["payload"] is not None:
        try:
            spec.payload = _dumps(obj["payload"])
        except (ValueError, TypeError):
            raise _invalid(f"{_where(where, 'payload')} cannot be encoded as JSON") from None
        spec.content_type = "application/json" if content_type is None else content_type
    elif content_type is not None:
        spec.content_type = content_type


def task_spec_from_json(obj: Any, where: str = "", limits: LimitsConfig | None = None) -> pb.TaskSpec:
    """The task fields of docs/reference/behaviour.md#server-details as a protobuf ``TaskSpec`` (400
    ``invalid`` when malformed).

    With ``limits``, every count and length is checked before anything is converted
    (``request_limits.check_json_task``: what a body costs is bounded by the limits).
    """
    obj = _object(obj, where or "the task")
    _unknown(obj, TASK_FIELDS, where)
    if limits is not None:
        try:
            request_limits.check_json_task(obj, limits)
        except request_limits.InvalidArgument as e:
            raise _invalid(f"{where}: {e}" if where else str(e)) from None
    spec = pb.TaskSpec()
    w = functools.partial(_where, where)
    try:
        _set_payload(spec, obj, where)
        for name in _STRING_FIELDS:  # pool, kind, key, tenant
            if name in obj and obj[name] is not None:
                setattr(spec, name, _str(obj[name], w(name)))
        if obj.get("priority") is not None:
            spec.priority = _priority(obj["priority"], w("priority"))  # type: ignore[assignment]
        if obj.get("on_miss") is not None:
            spec.on_miss = _choice(obj["on_miss"], w("on_miss"), MISS_FROM_JSON)  # type: ignore[assignment]
        for name in _SECONDS_FIELDS:  # deadline_in_s, start_in_s, tolerance_s, ...
            if obj.get(name) is not None:
                setattr(spec, name, _seconds(obj[name], w(name)))
        for name in _UNIX_NS_FIELDS:  # deadline_unix_ns, start_unix_ns
            if obj.get(name) is not None:
                setattr(spec, name, _integer(obj[name], w(name), INT64_MIN, INT64_MAX, strings=True))
        if obj.get("retry") is not None:
            r = _object(obj["retry"], w("retry"))
            _unknown(r, RETRY_FIELDS, w("retry"))
            rp = spec.retry
            rp.SetInParent()
            if r.get("max_attempts") is not None:
                rp.max_attempts = _integer(r["max_attempts"], w("retry.max_attempts"), 0, UINT32_MAX)
            for name in ("initial_backoff_s", "multiplier", "max_backoff_s"):
                if r.get(name) is not None:
                    setattr(rp, name, _seconds(r[name], w(f"retry.{name}")))
            if r.get("jitter") is not None:
                rp.jitter = _bool(r["jitter"], w("retry.jitter"))
        deps: list[pb.Dep] = []
        if obj.get("deps") is not None:
            if not isinstance(obj["deps"], list):
                raise _invalid(f"{w('deps')} must be an array (got {_type(obj['deps'])})")
            for i, d in enumerate(obj["deps"]):
                dw = w(f"deps[{i}]")
                if isinstance(d, dict) and "target" in d:
                    _unknown(d, frozenset({"target", "cond"}), dw)
                    cond = 1 if d.get("cond") is None else _choice(d["cond"], f"{dw}.cond", COND_FROM_JSON)
                    deps.append(pb.Dep(target=_dep_target(d["target"], f"{dw}.target"), cond=cond))  # type: ignore[arg-type]
                elif isinstance(d, dict):
                    raise _invalid(f"{dw} must be an object with a target (and an optional cond)")
                else:
                    deps.append(pb.Dep(target=_dep_target(d, dw), cond=1))  # type: ignore[arg-type]
        after = obj.get("after")
        if isinstance(after, (str, int)) and not isinstance(after, bool):
            # one id or key, as in-process `after=ref` (docs/reference/behaviour.md#task-fields)
            deps.append(pb.Dep(target=_dep_target(after, w("after")), cond=1))  # type: ignore[arg-type]
        elif after is not None:
            if not isinstance(after, list):
                raise _invalid(
                    f"{w('after')} must be a task id or key or an array of them (got {_type(after)})"
                )
            for i, a in enumerate(after):
                deps.append(pb.Dep(target=_dep_target(a, w(f"after[{i}]")), cond=1))  # type: ignore[arg-type]
        if deps:
            spec.deps.extend(deps)
        if obj.get("resources") is not None:
            res = _object(obj["resources"], w("resources"))
            for k, v in res.items():
                spec.resources[k] = _integer(v, w(f"resources.{k}"), 1, UINT32_MAX)
        for name in _STR_MAP_FIELDS:  # tags, labels
            if obj.get(name) is not None:
                getattr(spec, name).update(_str_map(obj[name], w(name)))
    except HttpError:
        raise
    except (ValueError, TypeError) as e:  # e.g. strings protobuf refuses (lone surrogates)
        raise _invalid(f"{where or 'task'}: {e}") from None
    return spec


# ---------------------------------------------------------------------------------------------
# query parameters


def _q_bool(request: Request, name: str) -> bool:
    v = request.query_params.get(name)
    if v is None:
        return False
    s = v.strip().lower()
    if s in ("", "1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise _bad(f"query parameter {name} must be true or false (got {v!r})")


def _q_float(request: Request, name: str) -> float | None:
    v = request.query_params.get(name)
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except ValueError:
        raise _bad(f"query parameter {name} must be a number of seconds (got {v!r})") from None
    if not math.isfinite(f) or f < 0:
        raise _bad(f"query parameter {name} must be a finite, non-negative number (got {v!r})")
    return f


def _q_int(request: Request, name: str, hi: int) -> int:
    v = request.query_params.get(name)
    if v is None or v == "":
        return 0
    if not (v.isascii() and v.isdigit()):
        raise _bad(f"query parameter {name} must be a non-negative integer (got {v!r})")
    n = int(v)
    if n > hi:
        raise _bad(f"query parameter {name} must be at most {hi} (got {v})")
    return n


def parse_instant(v: str, where: str) -> int:
    """An instant as Unix ns: RFC 3339 (``2026-12-02T10:00:00Z``, an offset is required) or
    Unix seconds (``1733133600``, ``1733133600.5``); else 400 naming ``where``."""
    s = v.strip()
    try:
        dec = Decimal(s)  # (exact: a float would lose the nanoseconds)
    except InvalidOperation:
        pass
    else:
        if not dec.is_finite() or not -9_200_000_000 < dec < 9_200_000_000:
            raise _bad(f"{where} must be an RFC 3339 time or Unix seconds (got {v!r})")
        return int((dec * 1_000_000_000).to_integral_value())
    # an unencoded "+01:00" in a query string arrives as " 01:00"
    s = re.sub(r" (\d\d:?\d\d)$", r"+\1", s)
    try:
        d = datetime.fromisoformat(s)
    except ValueError:
        d = None
    if d is None or d.tzinfo is None:
        raise _bad(
            f"{where} must be an RFC 3339 time with an offset (2026-12-02T10:00:00Z) "
            f"or Unix seconds (got {v!r})"
        )
    return round(d.timestamp() * 1e6) * 1000


def _q_time(request: Request, name: str) -> int | None:
    v = request.query_params.get(name)
    if v is None or v.strip() == "":
        return None
    return parse_instant(v, f"query parameter {name}")


def _q_tags(request: Request) -> dict[str, str]:
    """``tag=k=v`` (repeatable; all must match)."""
    out: dict[str, str] = {}
    for v in request.query_params.getlist("tag"):
        k, eq, val = v.partition("=")
        if not eq or not k:
            raise _bad(f"query parameter tag must be key=value (got {v!r})")
        if k in out and out[k] != val:
            raise _bad(f"query parameter tag gives {k!r} two values ({out[k]!r} and {val!r})")
        out[k] = val
    return out


def _q_list(request: Request, name: str) -> list[str]:
    """A repeatable query parameter whose values may also be comma-separated."""
    out: list[str] = []
    for v in request.query_params.getlist(name):
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------------------------------------
# the guard (Host check, cross-site check, concurrency limits) — pure ASGI, before routing

EXEMPT_PATHS: Final = frozenset({"/healthz", "/readyz"})
#: methods that change state: refused cross-site when auth is off (see the module docstring)
UNSAFE_METHODS: Final = frozenset({"POST", "PUT", "DELETE", "PATCH"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _authority(host: str | None, port: int | str | None, scheme: str) -> tuple[str, int] | None:
    """``(host, port)`` normalized for comparison (lower case, no brackets or trailing dot,
    the scheme's default port filled in); None when it cannot be made sense of."""
    if not host:
        return None
    h = host.strip().lower().strip("[]")
    if h.endswith(".") and len(h) > 1:
        h = h[:-1]
    if port is None or port == "":
        p = _DEFAULT_PORTS.get(scheme.lower())
        if p is None:
            return None
    else:
        if isinstance(port, str) and not (port.isascii() and port.isdigit()):
            return None
        p = int(port)
    return h, p


def cross_site_reason(method: str, scheme: str, headers: Mapping[str, str]) -> str | None:
    """Why a state-changing request is cross-site as a browser marks it, else None.

    ``headers`` maps lower-case names to values (``origin``, ``sec-fetch-site``, ``host``).
    """
    if method.upper() not in UNSAFE_METHODS:
        return None
    site = headers.get("sec-fetch-site", "").strip().lower()
    if site in ("cross-site", "same-site"):
        return f"the browser marked it Sec-Fetch-Site: {site}"
    origin = headers.get("origin")
    if origin is None:
        return None  # not a browser's cross-origin request (curl, urllib, httpx, our client)
    o = origin.strip()
    if o.lower() == "null":
        return "it comes from an opaque origin (Origin: null)"
    try:
        u = urlsplit(o)
        theirs = _authority(u.hostname, u.port, u.scheme) if u.scheme and u.netloc else None
    except ValueError:
        theirs = None
    host = headers.get("host")
    ours = None
    if host:
        try:
            h, p = split_host_port(host.strip())
        except ValueError:
            pass
        else:
            ours = _authority(h, p, scheme)
    if theirs is None or ours is None or theirs != ours:
        return f"its Origin {origin!r} is not this server's (Host {host!r})"
    return None


class _Guard:
    def __init__(self, inner: ASGIApp, api: HttpApi, listen_addr: str | None) -> None:
        self.inner = inner
        self.api = api
        self.listen_addr = listen_addr
        self.requests = 0
        self.streams = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if path in EXEMPT_PATHS:
            await self.inner(scope, receive, send)
            return
        auth = self.api.app.auth
        method: str = scope.get("method", "GET")
        cross_site = not auth.auth_enabled and method.upper() in UNSAFE_METHODS
        if self.listen_addr is not None or cross_site:
            headers: dict[str, str] = {}
            for k, v in scope.get("headers") or ():
                if k in (b"host", b"origin", b"sec-fetch-site") and k.decode("latin-1") not in headers:
                    headers[k.decode("latin-1")] = v.decode("latin-1")
            if self.listen_addr is not None:
                try:
                    auth.check_http_host(self.listen_addr, headers.get("host"))
                except AuthError as e:
                    await error_response(e.http_status, e.message, e.code)(scope, receive, send)
                    return
            reason = cross_site_reason(method, scope.get("scheme", "http"), headers) if cross_site else None
            if reason is not None:
                await error_response(
                    403,
                    f"cross-site request refused: {reason}. Without auth this server accepts "
                    f"{', '.join(sorted(UNSAFE_METHODS))} requests only from its own origin or from "
                    "non-browser clients (no Origin header); configure [[auth.tokens]] to allow "
                    "other origins with a bearer token",
                    "permission_denied",
                )(scope, receive, send)
                return
        limits = self.api.app.limits
        stream = path == "/v1/events"
        if stream:
            if self.streams >= limits.max_concurrent_streams:
                await error_response(
                    429,
                    "too many concurrent event streams "
                    f"(max_concurrent_streams {limits.max_concurrent_streams})",
                    "resource_exhausted",
                )(scope, receive, send)
                return
            self.streams += 1
        else:
            if self.requests >= limits.max_concurrent_requests:
                await error_response(
                    429,
                    "too many concurrent requests "
                    f"(max_concurrent_requests {limits.max_concurrent_requests})",
                    "resource_exhausted",
                )(scope, receive, send)
                return
            self.requests += 1
        try:
            await self.inner(scope, receive, send)
        finally:
            if stream:
                self.streams -= 1
            else:
                self.requests -= 1


# ---------------------------------------------------------------------------------------------
# the event stream (SSE) response


class _EventsResponse(Response):
    """``/v1/events``: one stream of the shared subscription (see the module docstring).

    The stream joins the subscription before ``: live`` is sent, so everything after that
    comment is seen.  A task waits on ``receive`` for the disconnect; the stream leaves the
    subscription however the response ends.
    """

    media_type = "text/event-stream"

    def __init__(
        self, api: HttpApi, group: Hashable, keep: Callable[[Any], bool] | None, progress: bool = False
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-cache", "x-accel-buffering": "no"})
        self.api = api
        self.group = group
        self.keep = keep
        self.progress = progress

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if self.progress:
                hub, sub = self.api.subscribe_progress(self.group, self.keep)
            else:
                hub, sub = self.api.subscribe(self.group, self.keep)
        except ApiError as e:  # the leadership went since the handler checked it
            he = _from_exception(e)
            await error_response(he.status, he.message, he.code)(scope, receive, send)
            return

        async def until_disconnect() -> None:
            try:
                while (await receive())["type"] != "http.disconnect":
                    pass
            finally:
                sub.disconnect()

        watcher = asyncio.get_running_loop().create_task(until_disconnect())
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            await send({"type": "http.response.body", "body": b": live\n\n", "more_body": True})
            while True:
                await sub.wait(SSE_KEEPALIVE_S)
                if sub.gone:
                    return
                if sub.chunks:  # what was published before an end is still sent
                    await send({"type": "http.response.body", "body": sub.take(), "more_body": True})
                elif sub.end is not None:
                    break
                else:
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
            err = sub.end
            tail = b"event: error\ndata: " + _dumps({"error": err.message, "code": err.code}) + b"\n\n"
            await send({"type": "http.response.body", "body": tail, "more_body": False})
        finally:
            hub.leave(sub)
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


# ---------------------------------------------------------------------------------------------
# handlers

Handler = Callable[[Request], Awaitable[Response]]


def _handler(
    fn: Callable[[HttpApi, Request], Awaitable[Response]],
) -> Callable[[HttpApi, Request], Awaitable[Response]]:
    """Turn every failure of a handler into the JSON error body."""

    @functools.wraps(fn)
    async def wrapped(self: HttpApi, request: Request) -> Response:
        try:
            return await fn(self, request)
        except (HttpError, ApiError, AuthError) as e:
            he = _from_exception(e)
            if he.status >= 500 and he.status not in (503, 504):
                log.warning("HTTP %s %s: %s", request.method, request.url.path, he.message)
            return error_response(he.status, he.message, he.code, he.extra, he.headers)
        except SchedulerError as e:  # a store failure: 503, retryable, without the store's detail
            return error_response(503, store_failure(e).message, "unavailable")
        except Exception as e:
            log.exception("internal error in HTTP %s %s", request.method, request.url.path)
            return error_response(500, f"internal error: {type(e).__name__}", "internal")

    return wrapped


class HttpApi:
    """The route handlers over one :class:`ServerApp`."""

    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.hub: EventHub | None = None  # the event streams' shared subscription, while any
        self.phub: EventHub | None = None  # the same for the streams that asked for progress

    # -- helpers ------------------------------------------------------------------------------

    def subscribe(self, group: Hashable, keep: Callable[[Any], bool] | None) -> tuple[EventHub, Subscriber]:
        """A new event stream on the shared subscription (created with the first stream)."""
        sched = self.app.require_leader()
        hub = self.hub
        if hub is None or hub.closed or hub.stream.closed:
            hub = self.hub = EventHub(self.app.events(), sched.seam.event_capacity, SSE_FLUSH_S)
        return hub, hub.subscribe(group, keep)

    def subscribe_progress(
        self, group: Hashable, keep: Callable[[Any], bool] | None
    ) -> tuple[EventHub, Subscriber]:
        """A new ``?progress=1`` event stream, on the shared subscription with progress events."""
        sched = self.app.require_leader()
        hub = self.phub
        if hub is None or hub.closed or hub.stream.closed:
            stream = sched.events(progress=True)
            hub = self.phub = EventHub(stream, sched.seam.event_capacity, SSE_FLUSH_S, encode=any_frame)
        return hub, hub.subscribe(group, keep)

    def auth(self, request: Request, action: Action) -> Principal | None:
        """Authenticate and check the role of the route; never reads the body."""
        auth = self.app.auth
        header = request.headers.get("authorization")
        if header is None and auth.certs_enabled:  # a client certificate (mutual TLS) instead
            return auth.check(None, action, peer_dns=scope_peer_dns(request.scope))
        return auth.check(header, action)

    async def read_json(self, request: Request) -> Any:
        # (whatever the content type: none is required; see the module docstring)
        limits = self.app.limits
        limit = limits.max_http_body_bytes
        cl = request.headers.get("content-length")
        if cl is not None:
            if not (cl.strip().isascii() and cl.strip().isdigit()):
                raise _bad(f"malformed content-length {cl!r}")
            if int(cl) > limit:
                raise HttpError(
                    413, f"request body larger than max_http_body_bytes ({limit})", "resource_exhausted"
                )

        async def collect() -> bytes:
            chunks: list[bytes] = []
            n = 0
            async for chunk in request.stream():
                n += len(chunk)
                if n > limit:
                    raise HttpError(
                        413, f"request body larger than max_http_body_bytes ({limit})", "resource_exhausted"
                    )
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            body = await asyncio.wait_for(collect(), limits.request_timeout_s)
        except TimeoutError:
            raise HttpError(
                408, f"request body not received within {limits.request_timeout_s:g} s", "deadline_exceeded"
            ) from None
        if not body.strip():
            raise _bad("request body is empty: expected a JSON object")
        try:
            data = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError:
            raise _bad("request body is not valid UTF-8") from None
        except RecursionError:
            raise _bad("request body is nested too deeply") from None
        except ValueError as e:
            raise _bad(f"request body is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise _bad(f"request body must be a JSON object (got {_type(data)})")
        return data

    def _pools_filter(self, principal: Principal | None, requested: list[str]) -> list[str]:
        for p in requested:
            if p not in self.app.sched.pools:
                raise HttpError(404, f"unknown pool '{p}'", "not_found")
        return restrict_pools(principal, requested) or []

    # -- tasks --------------------------------------------------------------------------------

    @_handler
    async def submit(self, request: Request) -> Response:
        principal = self.auth(request, Action.SUBMIT)
        wait = _q_bool(request, "wait")
        timeout = _q_float(request, "timeout")
        body = await self.read_json(request)
        spec = task_spec_from_json(body, limits=self.app.limits)
        tid, dup = await self.app.submit(principal, spec)
        out: dict[str, Any] = {"id": str(tid), "duplicate": dup}
        if wait:
            try:
                t = await self.app.wait(principal, tid, timeout)
            except ApiError as e:
                he = _from_exception(e)
                he.extra = {"id": str(tid), "duplicate": dup}
                raise he from None
            out["result"] = result_json(t)
        return json_response(out)

    @_handler
    async def submit_batch(self, request: Request) -> Response:
        principal = self.auth(request, Action.SUBMIT_BATCH)
        body = await self.read_json(request)
        _unknown(body, frozenset({"tasks"}), "")
        tasks = body.get("tasks")
        if not isinstance(tasks, list):
            raise _bad(f"tasks must be an array of task objects (got {_type(tasks)})")
        limits = self.app.limits
        try:
            request_limits.check_batch(limits, len(tasks))
        except request_limits.InvalidArgument as e:
            raise _invalid(str(e)) from None
        specs = []
        slices = Slices()
        for i, t in enumerate(tasks):
            specs.append(task_spec_from_json(t, f"tasks[{i}]", limits))
            await slices.step()
        results = await self.app.submit_batch(principal, specs)
        return json_response({"tasks": [{"id": str(i), "duplicate": d} for i, d in results]})

    @_handler
    async def list_tasks(self, request: Request) -> Response:
        principal = self.auth(request, Action.LIST_TASKS)
        pools = self._pools_filter(principal, _q_list(request, "pool"))
        statuses = list(dict.fromkeys(s.lower() for s in _q_list(request, "status")))  # case-insensitive
        for s in statuses:
            if s not in STATUS_BY_NAME:
                raise _bad(f"unknown status {s!r} (one of {', '.join(STATUS_NAMES)})")
        after = _q_int(request, "after", UINT64_MAX)
        limit = _q_int(request, "limit", UINT32_MAX)
        tasks, next_after = self.app.list_tasks(
            principal,
            pools,
            statuses,
            after,
            limit,
            kinds=_q_list(request, "kind"),
            tags=_q_tags(request),
            created_after_ns=_q_time(request, "created_after"),
            created_before_ns=_q_time(request, "created_before"),
        )
        return json_response(
            {"tasks": [message_json(self.app.task_info(t)) for t in tasks], "next_after": str(next_after)}
        )

    def _task_ref(self, request: Request) -> tuple[int | str, str]:
        """``(ref, action)`` of ``/v1/tasks/{ref}[/result|/cancel]`` from the raw (encoded) path."""
        raw = request.scope.get("raw_path")
        marker = "/v1/tasks/"
        if isinstance(raw, (bytes, bytearray)):
            text = bytes(raw).split(b"?", 1)[0].decode("latin-1")
        else:
            text = request.url.path
        idx = text.find(marker)
        rest = text[idx + len(marker) :] if idx >= 0 else request.path_params.get("rest", "")
        parts = rest.split("/")
        if len(parts) == 1:
            sub = ""
        elif len(parts) == 2 and parts[1] in ("result", "cancel", "replay"):
            sub = parts[1]
        else:
            raise HttpError(
                404, "no such route (a key containing '/' must be URL-encoded as %2F)", "not_found"
            )
        key = request.query_params.get("key")
        if key is not None:
            if not key:
                raise _bad("query parameter key must not be empty")
            return key, sub
        try:
            seg = unquote(parts[0], errors="strict")
        except UnicodeDecodeError:
            raise _bad("the task key in the path is not valid URL-encoded UTF-8") from None
        if not seg:
            raise _bad("missing task id or key")
        if seg.isascii() and seg.isdigit():
            n = int(seg)
            if not 1 <= n <= UINT64_MAX:
                raise HttpError(404, f"unknown task '{seg}'", "not_found")
            return n, sub
        return seg, sub

    def parse_task_ref(self, request: Request) -> tuple[int | str, str]:
        """``(ref, action)`` of a ``/v1/tasks/...`` request (for the shard routes)."""
        return self._task_ref(request)

    @_handler
    async def task_ref(self, request: Request) -> Response:
        ref, sub = self._task_ref(request)
        tenant = request.query_params.get("tenant") or None  # whose key (keys are per tenant)
        method = request.method
        if sub == "" and method in ("GET", "HEAD"):
            principal = self.auth(request, Action.GET)
            t = self.app.get(principal, ref, tenant)
            return json_response(message_json(self.app.task_info(t, detail=True)))
        if sub == "result" and method in ("GET", "HEAD"):
            principal = self.auth(request, Action.WAIT)
            timeout = _q_float(request, "timeout")
            t = await self.app.wait(principal, ref, timeout, tenant)
            return json_response(result_json(t))
        if sub == "cancel" and method == "POST":
            principal = self.auth(request, Action.CANCEL)
            ok = await self.app.cancel(principal, ref, tenant)
            return json_response({"cancelled": ok})
        if sub == "replay" and method == "POST":
            return await self.replay(request, ref, tenant)
        allow = "POST" if sub in ("cancel", "replay") else "GET"
        raise HttpError(
            405, f"method {method} not allowed here (use {allow})", "unimplemented", headers={"allow": allow}
        )

    # -- operations (docs/how-to/operations.md) ------------------------------------------------

    async def _optional_json(self, request: Request) -> dict[str, Any]:
        """A JSON object body, or {} when there is none."""
        cl = request.headers.get("content-length")
        if (cl is None or cl.strip() == "0") and "transfer-encoding" not in request.headers:
            return {}
        data: dict[str, Any] = await self.read_json(request)
        return data

    async def replay(self, request: Request, ref: int | str, tenant: str | None) -> Response:
        """``POST /v1/tasks/{ref}/replay`` (body ``{"force": bool}``, optional)."""
        principal = self.auth(request, Action.REPLAY)
        body = await self._optional_json(request)
        for k in body:
            if k != "force":
                raise _bad(f"unknown field '{k}' (expected force)")
        force = _bool(body.get("force", False), "force")
        tid = await ops.replay(self.app, principal, ref, force, tenant)
        return json_response({"id": str(tid), "duplicate": False})

    @_handler
    async def bulk(self, request: Request) -> Response:
        """``POST /v1/tasks:replay`` / ``POST /v1/tasks:cancel``."""
        action = "replay" if request.url.path.endswith(":replay") else "cancel"
        principal = self.auth(request, Action.REPLAY_WHERE if action == "replay" else Action.CANCEL_WHERE)
        filt, key, force = ops.bulk_from_json(await self.read_json(request))
        res = await ops.bulk(self.app, principal, action, filt, key, force)
        return json_response({"matched": res.matched, "acted": res.acted})

    @_handler
    async def pool_op(self, request: Request) -> Response:
        """``POST /v1/pools/{name}/pause|resume``."""
        name, op = request.path_params["name"], request.path_params["op"]
        if op not in ("pause", "resume"):
            raise HttpError(404, f"no such route: {request.method} {request.url.path}", "not_found")
        principal = self.auth(request, Action.PAUSE_POOL if op == "pause" else Action.RESUME_POOL)
        changed = await ops.set_paused(self.app, principal, "pool", name, op == "pause")
        return json_response({"changed": changed})

    @_handler
    async def recurring_op(self, request: Request) -> Response:
        """``POST /v1/recurring/{name}/pause|resume|run``."""
        name, op = request.path_params["name"], request.path_params["op"]
        actions = {
            "pause": Action.PAUSE_RECURRING,
            "resume": Action.RESUME_RECURRING,
            "run": Action.TRIGGER_RECURRING,
        }
        if op not in actions:
            raise HttpError(404, f"no such route: {request.method} {request.url.path}", "not_found")
        principal = self.auth(request, actions[op])
        if op == "run":
            tid = await ops.trigger(self.app, principal, name)
            return json_response({"id": str(tid), "duplicate": False})
        changed = await ops.set_paused(self.app, principal, "recurring", name, op == "pause")
        return json_response({"changed": changed})

    # -- events (SSE) -------------------------------------------------------------------------

    @_handler
    async def events(self, request: Request) -> Response:
        principal = self.auth(request, Action.WATCH)
        pools = self._pools_filter(principal, _q_list(request, "pool"))
        all_transitions = _q_bool(request, "all_transitions")
        ids: list[int] = []
        for v in _q_list(request, "id"):
            if not (v.isascii() and v.isdigit()) or not 1 <= int(v) <= UINT64_MAX:
                raise _bad(f"query parameter id must be a task id (got {v!r})")
            ids.append(int(v))
        keys = _q_list(request, "key")

        keep = event_filter(principal, pools, ids, keys, all_transitions, self.app.task_of_tenant)
        group = filter_group(principal, pools, ids, keys, all_transitions) if keep is not None else None
        self.app.require_leader()  # standby → 503 before the stream starts
        if _q_bool(request, "progress"):  # docs/how-to/progress.md#event-streams
            keep_p = event_filter(principal, pools, ids, keys, True, self.app.task_of_tenant)
            keep = with_progress(keep, keep_p)  # (None exactly when keep was: the same group)
            return _EventsResponse(self, group, keep, progress=True)
        return _EventsResponse(self, group, keep)

    # -- admin --------------------------------------------------------------------------------

    @_handler
    async def snapshot(self, request: Request) -> Response:
        principal = self.auth(request, Action.SNAPSHOT)
        snap, by_pool = await self.app.snapshot()
        msg = convert.snapshot_msg(snap, by_pool)
        if principal is not None and principal.pools is not None:
            keep = [p for p in msg.pools if p.name in principal.pools]
            del msg.pools[:]
            msg.pools.extend(keep)
            msg.workers_connected = sum(p.workers_connected for p in keep)
        return json_response(message_json(msg))

    @_handler
    async def history(self, request: Request) -> Response:
        """``GET /v1/history?seconds=N``: the per-second pool figures of the last N seconds
        (default and at most the ring's 1,800), oldest first (docs/reference/http.md#history)."""
        principal = self.auth(request, Action.SNAPSHOT)
        ring = self.app.history
        raw = request.query_params.get("seconds")
        seconds = ring.capacity
        if raw is not None and raw != "":
            if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= ring.capacity:
                raise _bad(
                    f"query parameter seconds must be an integer from 1 to {ring.capacity} (got {raw!r})"
                )
            seconds = int(raw)
        sched = self.app.require_leader()
        now = sched.clock.time_ns() / 1e9
        allowed = None if principal is None or principal.pools is None else principal.pools
        keep = None if allowed is None else allowed.__contains__
        points = [p.as_json(keep) for p in ring.since(now - seconds)]
        return json_response({"interval_s": 1, "points": points})

    @_handler
    async def workers(self, request: Request) -> Response:
        principal = self.auth(request, Action.LIST_WORKERS)
        sessions = self.app.list_workers(principal)
        return json_response({"workers": [worker_json(s) for s in sorted(sessions, key=lambda s: s.id)]})

    @_handler
    async def list_recurring(self, request: Request) -> Response:
        principal = self.auth(request, Action.LIST_RECURRING)
        infos = await self.app.list_recurring(principal)
        return json_response(
            {"schedules": [recurring_json(self.app, i) for i in sorted(infos, key=lambda i: i.name)]}
        )

    @_handler
    async def recurring(self, request: Request) -> Response:
        name: str = request.path_params["name"]
        if request.method in ("GET", "HEAD"):
            principal = self.auth(request, Action.LIST_RECURRING)
            for info in await self.app.list_recurring(principal):
                if info.name == name:
                    return json_response(recurring_json(self.app, info))
            raise HttpError(404, f"unknown recurring schedule '{name}'", "not_found")
        if request.method == "DELETE":
            principal = self.auth(request, Action.REMOVE_RECURRING)
            if principal is not None and principal.pools is not None:
                for info in await self.app.list_recurring(None):
                    if info.name == name and info.pool not in principal.pools:
                        raise HttpError(
                            403, f"token is not allowed to use pool '{info.pool}'", "permission_denied"
                        )
            removed = await self.app.remove_recurring(principal, name)
            return json_response({"removed": removed})
        # PUT
        principal = self.auth(request, Action.ADD_RECURRING)
        body = await self.read_json(request)
        req = recurring_request_from_json(name, body, self.app.limits)
        await self.app.add_recurring(principal, req)
        for info in await self.app.list_recurring(None):
            if info.name == name:
                return json_response(recurring_json(self.app, info))
        raise HttpError(503, "the schedule vanished while it was added", "unavailable")  # pragma: no cover

    @_handler
    async def metrics(self, request: Request) -> Response:
        principal = self.auth(request, Action.METRICS)
        return await self._metrics(principal)

    async def _metrics(self, principal: Principal | None) -> Response:
        app = self.app
        pools = None if principal is None or principal.pools is None else principal.pools
        snap = None
        leading = app.leading and not app.stopping
        if leading:
            try:
                snap, _ = await app.snapshot()
            except ApiError:
                leading = False
        by_pool = {name: app.registry.connected(name) for name in app.sched.pools}
        body = metrics_mod.render(snap, by_pool, leader=leading, pools=pools, shard=app.config.server.shard)
        return Response(body, media_type=metrics_mod.CONTENT_TYPE)

    async def metrics_open(self, request: Request) -> Response:
        try:
            return await self._metrics(None)
        except Exception as e:  # pragma: no cover - defensive
            log.exception("internal error rendering /metrics")
            return error_response(500, f"internal error: {type(e).__name__}", "internal")

    # -- health and docs ----------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok", "leading": self.app.leading, "time": time.time()})

    async def readyz(self, request: Request) -> Response:
        app = self.app
        if app.stopping:
            return error_response(503, "server is shutting down", "unavailable")
        if not app.leading or not app.sched.started:
            return error_response(503, "this server is a standby (not the leader)", "unavailable")
        if not app.ready():
            return error_response(
                503, "the leadership lease is about to lapse (not renewed in time)", "unavailable"
            )
        return json_response({"status": "ready", "leading": True})

    async def openapi(self, request: Request) -> Response:
        from cronoq.server.openapi import openapi_document

        return json_response(openapi_document(self.app))


def recurring_request_from_json(
    name: str, body: dict[str, Any], limits: LimitsConfig | None = None
) -> pb.RecurringRequest:
    """``PUT /v1/recurring/{name}``: ``{cron, tz, overlap, tolerance_s, on_miss, task}``."""
    _unknown(body, RECURRING_FIELDS, "")
    if not name:
        raise _invalid("recurring schedule name must not be empty")
    if "name" in body and body["name"] != name:
        raise _invalid(f"name in the body ({body['name']!r}) differs from the path ({name!r})")
    cron = _str(body.get("cron"), "cron")
    if not cron.strip():
        raise _invalid("cron must not be empty")
    tz = "" if body.get("tz") is None else _str(body["tz"], "tz")
    task = {} if body.get("task") is None else dict(_object(body["task"], "task"))
    for f in NOT_IN_TEMPLATE:
        if f in task:
            raise _invalid(
                f"task.{f} is not allowed in a recurring template (each occurrence is a fixed start)"
            )
    for f in ("tolerance_s", "on_miss"):
        if body.get(f) is not None:
            if task.get(f) is not None and task[f] != body[f]:
                raise _invalid(f"{f} is given both at the top level and in task, with different values")
            task[f] = body[f]
    template = task_spec_from_json(task, "task", limits)
    req = pb.RecurringRequest(name=name, cron=cron, tz=tz, template=template)
    if body.get("overlap") is not None:
        req.overlap = _choice(body["overlap"], "overlap", OVERLAP_FROM_JSON)  # type: ignore[assignment]
    return req


# ---------------------------------------------------------------------------------------------
# assembly


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Routing errors (no such route, wrong method) as JSON error bodies."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(404, f"no such route: {request.method} {request.url.path}", "not_found")
    if exc.status_code == 405:
        return error_response(
            405,
            f"method {request.method} not allowed on {request.url.path}",
            "unimplemented",
            headers=exc.headers,
        )
    return error_response(exc.status_code, str(exc.detail), "invalid_argument", headers=exc.headers)


def create_http_app(
    app: ServerApp,
    *,
    metrics_only: bool = False,
    listen_addr: str | None = None,
) -> Starlette:
    """The ASGI app of ``http_addr`` (or, with ``metrics_only``, of ``metrics_addr``).

    ``listen_addr`` is the address the app is served on (default: the configured
    ``server.http_addr`` / ``server.metrics_addr``); the loopback ``Host`` check applies when
    it is a loopback address and no token is configured.
    """
    api = HttpApi(app)
    if listen_addr is None:
        listen_addr = app.config.server.metrics_addr if metrics_only else app.config.server.http_addr
    routes: list[BaseRoute] = [
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/readyz", api.readyz, methods=["GET"]),
    ]
    if metrics_only:
        routes.append(Route("/metrics", api.metrics_open, methods=["GET"]))
    else:
        routes += [
            Route("/metrics", api.metrics, methods=["GET"]),
            Route("/openapi.json", api.openapi, methods=["GET"]),
            Route("/v1/tasks", api.submit, methods=["POST"]),
            Route("/v1/tasks", api.list_tasks, methods=["GET"]),
            Route("/v1/tasks:batch", api.submit_batch, methods=["POST"]),
            Route("/v1/tasks/{rest:path}", api.task_ref, methods=["GET", "POST"]),
            Route("/v1/events", api.events, methods=["GET"]),
            Route("/v1/snapshot", api.snapshot, methods=["GET"]),
            Route("/v1/history", api.history, methods=["GET"]),
            Route("/v1/workers", api.workers, methods=["GET"]),
            Route("/v1/recurring", api.list_recurring, methods=["GET"]),
            Route("/v1/recurring/{name}", api.recurring, methods=["GET", "PUT", "DELETE"]),
            Route("/v1/tasks:replay", api.bulk, methods=["POST"]),
            Route("/v1/tasks:cancel", api.bulk, methods=["POST"]),
            Route("/v1/pools/{name}/{op}", api.pool_op, methods=["POST"]),
            Route("/v1/recurring/{name}/{op}", api.recurring_op, methods=["POST"]),
        ]
        routes += dashboard_routes()
        from cronoq.server.shards.http_routes import sharded_routes  # (docs/how-to/shards.md)

        routes = sharded_routes(api, routes)
    star = Starlette(routes=routes, exception_handlers={HTTPException: _http_exception})
    star.state.cronoq_app = app
    star.state.http_api = api
    star.add_middleware(_GuardMiddleware, api=api, listen_addr=listen_addr)
    grpc_web = app.config.server.grpc_web
    if grpc_web is not None and not metrics_only:  # outermost: before the guard (grpc_web.py)
        from cronoq.server.grpc_web import GrpcWebMiddleware

        star.add_middleware(
            GrpcWebMiddleware, api=app, listen_addr=listen_addr, origins=grpc_web.allowed_origins
        )
    return star


class _GuardMiddleware(_Guard):
    """:class:`_Guard` with the ``(app, **options)`` signature Starlette's middleware stack uses."""

    def __init__(self, app: ASGIApp, api: HttpApi, listen_addr: str | None) -> None:
        super().__init__(app, api, listen_addr)


# public for the shard routes (server/shards/http_routes.py)
http_error_of = _from_exception
query_bool, query_float, query_int, query_list = _q_bool, _q_float, _q_int, _q_list
query_tags, query_time = _q_tags, _q_time


def create_metrics_app(app: ServerApp, *, listen_addr: str | None = None) -> Starlette:
    """The app of ``metrics_addr``: unauthenticated ``/metrics``, ``/healthz``, ``/readyz``."""
    return create_http_app(app, metrics_only=True, listen_addr=listen_addr)
