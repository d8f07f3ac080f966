"""JSON in and out of the HTTP API (docs/reference/http.md#conventions): the error type and
bodies, the rendering of protobuf messages, the parsing of task bodies and query parameters.

Theory of operation
-------------------
Everything here is a pure function of its input (no request, no server state), used by the
handlers of ``http_api.py`` and the shard routes (``shards/http_routes.py``):

* Errors: a handler raises :class:`HttpError` (status, message, ``code``); :func:`http_error_of`
  maps the server's :class:`~cronoq.server.app.ApiError` and the auth errors onto it, and
  :func:`error_response` renders ``{"error": message, "code": code, **extra}``.
* Rendering: protobuf messages with their proto field names (``message_json``): ids as
  strings, enums as lower-case names without their prefix, unset optional fields as ``null``.
* Parsing: the bodies are the pydantic models of ``http_bodies.py`` (their errors worded by
  ``body_errors.py``).  :func:`task_spec_from_json` checks every count and length of a task on
  the decoded JSON first (``request_limits.check_json_task``, the same limits and messages as
  gRPC), then validates it with its model, whose values are wire values, into a protobuf
  ``TaskSpec``, so the gRPC validation (``convert.submission``) applies unchanged.  A
  malformed task field is 400 ``invalid`` (the SubmitError code); other bad input (JSON, body
  shape, query, path) 400 ``invalid_argument``.
* Query parameters (``query_*``): booleans, seconds, bounded integers, instants (RFC 3339 or
  Unix seconds), ``tag=k=v`` and repeatable, comma-separated lists (under their name or its
  plural, :data:`QUERY_ALIASES`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Set
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from cronoq.engine.model import STATUS_NAMES, SUCCEEDED, TaskState
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server import body_errors, convert, request_limits
from cronoq.server import http_bodies as bodies
from cronoq.server.app import ApiError, ServerApp
from cronoq.server.auth import AuthError
from cronoq.server.body_errors import type_name
from cronoq.server.config import LimitsConfig
from cronoq.server.http_bodies import NOT_IN_TEMPLATE, PAYLOAD_FIELDS, TASK_FIELDS
from cronoq.server.http_values import (
    COND_FROM_JSON,
    MISS_FROM_JSON,
    OVERLAP_FROM_JSON,
    PRIORITY_FROM_JSON,
    UINT32_MAX,
    UINT64_MAX,
    dumps,
)
from cronoq.server.workers import Blob
from cronoq.spec import json_shapes
from cronoq.spec.json_shapes import message_json

__all__ = [
    "COND_FROM_JSON",
    "MISS_FROM_JSON",
    "NOT_IN_TEMPLATE",
    "OVERLAP_FROM_JSON",
    "PAYLOAD_FIELDS",
    "PRIORITY_FROM_JSON",
    "TASK_FIELDS",
    "UINT32_MAX",
    "UINT64_MAX",
    "HttpError",
    "dumps",
    "type_name",
    "error_response",
    "http_error_of",
    "json_response",
    "message_json",
    "parse_instant",
    "recurring_request_from_json",
    "result_json",
    "task_spec_from_json",
]

#: the JSON names of the task fields (spec.fields) and of the payload
RECURRING_FIELDS: Final = frozenset(bodies.RecurringRequest.model_fields)


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


def invalid(message: str) -> HttpError:
    """A malformed task field: the SubmitError code ``invalid``
    (docs/reference/behaviour.md#server-details)."""
    return HttpError(400, message, "invalid")


def bad_request(message: str) -> HttpError:
    """Bad input that is not a task field (JSON, body shape, query, path): ``invalid_argument``."""
    return HttpError(400, message, "invalid_argument")


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(dumps(data), status_code=status, media_type="application/json", headers=headers)


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


def http_error_of(e: BaseException) -> HttpError:
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
    return message_json(convert.worker_info(s))


# ---------------------------------------------------------------------------------------------
# parsing (JSON → protobuf TaskSpec)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode_json_object(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object, whatever its content type; else 400 ``invalid_argument``
    (empty, not UTF-8, not JSON, NaN/Infinity, nested too deeply, not an object)."""
    if not body.strip():
        raise bad_request("request body is empty: expected a JSON object")
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise bad_request("request body is not valid UTF-8") from None
    except RecursionError:
        raise bad_request("request body is nested too deeply") from None
    except ValueError as e:
        raise bad_request(f"request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise bad_request(f"request body must be a JSON object (got {type_name(data)})")
    return data


def reject_unknown(obj: dict[str, Any], allowed: Set[str] | Mapping[str, Any], where: str) -> None:
    if obj.keys() <= (allowed.keys() if isinstance(allowed, Mapping) else allowed):
        return
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        at = f" in {where}" if where else ""
        raise invalid(f"unknown field{'s' if len(extra) > 1 else ''}{at}: {', '.join(extra)}")


def json_bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise invalid(f"{where} must be true or false (got {type_name(v)})")
    return v


def task_spec_from_json(
    obj: Any, where: str = "", limits: LimitsConfig | None = None, body: TypeAdapter[Any] = bodies.TASK_SPEC
) -> pb.TaskSpec:
    """The task fields of docs/reference/behaviour.md#server-details as a protobuf ``TaskSpec`` (400
    ``invalid`` when malformed).

    With ``limits``, every count and length is checked before the values are
    (``request_limits.check_json_task``: what a body costs is bounded by the limits); then the
    body is validated by its declaration (``http_bodies.TaskSpec``, or ``body``), whose values
    are already ``TaskSpec`` keyword arguments.
    """
    if not isinstance(obj, dict):
        raise invalid(f"{where or 'the task'} must be an object (got {type_name(obj)})")
    reject_unknown(obj, TASK_FIELDS, where)
    if limits is not None:
        try:
            request_limits.check_json_task(obj, limits)
        except request_limits.InvalidArgument as e:
            raise invalid(f"{where}: {e}" if where else str(e)) from None
    if "payload" in obj and "payload_base64" in obj:
        raise invalid(f"{where + '.' if where else ''}payload and payload_base64 are mutually exclusive")
    try:
        kw = body.validate_python(obj)
    except ValidationError as e:
        raise invalid(body_errors.message_of(e, where)) from None
    content_type = kw.pop("content_type", None)
    if "payload_base64" in kw:
        kw["payload"] = kw.pop("payload_base64")
        kw["content_type"] = "application/octet-stream" if content_type is None else content_type
    elif kw.get("payload") is not None:
        kw["content_type"] = "application/json" if content_type is None else content_type
    elif content_type is not None:
        kw["content_type"] = content_type
    after = kw.pop("after", None)
    if after:  # edge order: `after` first, then `deps` (a placeholder {"$output": i} counts on it)
        kw["deps"] = [*after, *(kw.get("deps") or ())]
    try:
        return pb.TaskSpec(**kw)
    except (ValueError, TypeError) as e:  # e.g. strings protobuf refuses (lone surrogates)
        raise invalid(f"{where or 'task'}: {e}") from None


# ---------------------------------------------------------------------------------------------
# query parameters


def query_bool(request: Request, name: str) -> bool:
    v = request.query_params.get(name)
    if v is None:
        return False
    s = v.strip().lower()
    if s in ("", "1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise bad_request(f"query parameter {name} must be true or false (got {v!r})")


def query_float(request: Request, name: str) -> float | None:
    v = request.query_params.get(name)
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except ValueError:
        raise bad_request(f"query parameter {name} must be a number of seconds (got {v!r})") from None
    if not math.isfinite(f) or f < 0:
        raise bad_request(f"query parameter {name} must be a finite, non-negative number (got {v!r})")
    return f


def query_int(request: Request, name: str, hi: int) -> int:
    v = request.query_params.get(name)
    if v is None or v == "":
        return 0
    if not (v.isascii() and v.isdigit()):
        raise bad_request(f"query parameter {name} must be a non-negative integer (got {v!r})")
    n = int(v)
    if n > hi:
        raise bad_request(f"query parameter {name} must be at most {hi} (got {v})")
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
            raise bad_request(f"{where} must be an RFC 3339 time or Unix seconds (got {v!r})")
        return int((dec * 1_000_000_000).to_integral_value())
    # an unencoded "+01:00" in a query string arrives as " 01:00"
    s = re.sub(r" (\d\d:?\d\d)$", r"+\1", s)
    try:
        d = datetime.fromisoformat(s)
    except ValueError:
        d = None
    if d is None or d.tzinfo is None:
        raise bad_request(
            f"{where} must be an RFC 3339 time with an offset (2026-12-02T10:00:00Z) "
            f"or Unix seconds (got {v!r})"
        )
    return round(d.timestamp() * 1e6) * 1000


def query_time(request: Request, name: str) -> int | None:
    v = request.query_params.get(name)
    if v is None or v.strip() == "":
        return None
    return parse_instant(v, f"query parameter {name}")


#: the plural names query parameters also answer to (``?kinds=`` is ``?kind=``, as the client's
#: and the bulk filter's field names say); ``http_query`` checks the names
QUERY_ALIASES: Final = {
    **{"pools": "pool", "statuses": "status", "kinds": "kind"},
    **{"tags": "tag", "ids": "id", "keys": "key"},
}
_PLURAL: Final = {v: k for k, v in QUERY_ALIASES.items()}


def _getlist(request: Request, name: str) -> list[str]:
    """Every value of ``name`` and of its plural alias."""
    q = request.query_params
    plural = _PLURAL.get(name)
    return q.getlist(name) + q.getlist(plural) if plural is not None else q.getlist(name)


def query_tags(request: Request) -> dict[str, str]:
    """``tag=k=v`` (repeatable; all must match)."""
    out: dict[str, str] = {}
    for v in _getlist(request, "tag"):
        k, eq, val = v.partition("=")
        if not eq or not k:
            raise bad_request(f"query parameter tag must be key=value (got {v!r})")
        if k in out and out[k] != val:
            raise bad_request(f"query parameter tag gives {k!r} two values ({out[k]!r} and {val!r})")
        out[k] = val
    return out


def query_list(request: Request, name: str) -> list[str]:
    """A repeatable query parameter whose values may also be comma-separated."""
    out: list[str] = []
    for v in _getlist(request, name):
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return list(dict.fromkeys(out))


def recurring_request_from_json(
    name: str, body: dict[str, Any], limits: LimitsConfig | None = None
) -> pb.RecurringRequest:
    """``PUT /v1/recurring/{name}``: ``{cron, tz, overlap, tolerance_s, on_miss, task}``
    (``http_bodies.RecurringRequest``), checked in the order the fields are listed."""
    reject_unknown(body, RECURRING_FIELDS, "")
    if not name:
        raise invalid("recurring schedule name must not be empty")
    if "name" in body and body["name"] != name:
        raise invalid(f"name in the body ({body['name']!r}) differs from the path ({name!r})")
    late: str | None = None  # (overlap is checked after the task)
    try:
        env = bodies.RecurringRequest.model_validate(
            {k: body[k] for k in ("cron", "tz", "overlap") if k in body}
        )
    except ValidationError as e:
        late = body_errors.message_of(e)
        if not late.startswith("overlap "):
            raise invalid(late) from None
    task = {} if body.get("task") is None else body["task"]
    if not isinstance(task, dict):
        raise invalid(f"task must be an object (got {type_name(task)})")
    task = dict(task)
    for f in NOT_IN_TEMPLATE:
        if f in task:
            raise invalid(
                f"task.{f} is not allowed in a recurring template (each occurrence is a fixed start)"
            )
    for f in ("tolerance_s", "on_miss"):
        if body.get(f) is not None:
            if task.get(f) is not None and task[f] != body[f]:
                raise invalid(f"{f} is given both at the top level and in task, with different values")
            task[f] = body[f]
    template = task_spec_from_json(task, "task", limits, bodies.TASK_TEMPLATE)
    if late is not None:
        raise invalid(late)
    try:
        req = pb.RecurringRequest(name=name, cron=env.cron, tz=env.tz or "", template=template)
    except (ValueError, TypeError) as e:  # strings protobuf refuses (lone surrogates): was a 500
        raise invalid(f"schedule: {e}") from None
    if env.overlap is not None:
        req.overlap = env.overlap  # type: ignore[assignment]
    return req
