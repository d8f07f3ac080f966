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
* Parsing: :func:`task_spec_from_json` checks every count and length of a task on the decoded
  JSON first (``request_limits.check_json_task``, the same limits and messages as gRPC) and only
  then converts the fields into a protobuf ``TaskSpec``, so the gRPC validation
  (``convert.submit_args``) applies unchanged.  A malformed task field is 400 ``invalid`` (the
  SubmitError code); other bad input (JSON, body shape, query, path) 400 ``invalid_argument``.
* Query parameters (``query_*``): booleans, seconds, bounded integers, instants (RFC 3339 or
  Unix seconds), ``tag=k=v`` and repeatable, comma-separated lists.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from cronoq.client import json_shapes
from cronoq.client.json_shapes import message_json
from cronoq.engine.model import STATUS_NAMES, SUCCEEDED, TaskState
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.runtime import task_fields
from cronoq.server import convert, request_limits
from cronoq.server.app import ApiError, ServerApp
from cronoq.server.auth import AuthError
from cronoq.server.config import LimitsConfig
from cronoq.server.workers import Blob

__all__ = [
    "HttpError",
    "error_response",
    "http_error_of",
    "json_response",
    "message_json",
    "parse_instant",
    "recurring_request_from_json",
    "result_json",
    "task_spec_from_json",
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


def invalid(message: str) -> HttpError:
    """A malformed task field: the SubmitError code ``invalid``
    (docs/reference/behaviour.md#server-details)."""
    return HttpError(400, message, "invalid")


def bad_request(message: str) -> HttpError:
    """Bad input that is not a task field (JSON, body shape, query, path): ``invalid_argument``."""
    return HttpError(400, message, "invalid_argument")


def dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


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


def _where(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def type_name(v: Any) -> str:
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
        raise invalid(f"{where} must be a string (got {type_name(v)})")
    return v


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise invalid(f"{where} must be a number (got {type_name(v)})")
    f = float(v)
    if not math.isfinite(f):
        raise invalid(f"{where} must be finite")
    return f


def _seconds(v: Any, where: str) -> float:
    f = _number(v, where)
    if f < 0:
        raise invalid(f"{where} must be a non-negative number of seconds (got {v})")
    return f


def _integer(v: Any, where: str, lo: int, hi: int, *, strings: bool = False) -> int:
    """An integer in [lo, hi]; integral floats are accepted; digit strings when ``strings``."""
    if isinstance(v, bool):
        raise invalid(f"{where} must be an integer (got a boolean)")
    if isinstance(v, int):
        n = v
    elif isinstance(v, float) and v.is_integer():
        n = int(v)
    elif strings and isinstance(v, str) and v.strip().lstrip("+-").isdigit() and v.strip().isascii():
        n = int(v.strip())
    else:
        what = "an integer or a string of digits" if strings else "an integer"
        raise invalid(f"{where} must be {what} (got {type_name(v) if not isinstance(v, str) else repr(v)})")
    if not lo <= n <= hi:
        raise invalid(f"{where} must be between {lo} and {hi} (got {n})")
    return n


def json_bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise invalid(f"{where} must be true or false (got {type_name(v)})")
    return v


def _object(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise invalid(f"{where} must be an object (got {type_name(v)})")
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
            raise invalid(f"{where}.{k} must be a string, number or boolean (got {type_name(val)})")
    return out


def _choice(v: Any, where: str, options: dict[str, int]) -> int:
    if not isinstance(v, str) or v.strip().lower() not in options:
        names = ", ".join(dict.fromkeys(options))
        raise invalid(f"{where} must be one of {names} (got {json.dumps(v)})")
    return options[v.strip().lower()]


def _priority(v: Any, where: str) -> int:
    """A priority as its wire value: a name (case-insensitive) or, as in-process
    (docs/reference/behaviour.md#task-fields), an integer 0..3 (0 = critical ... 3 = low)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if not 0 <= v <= 3:
            raise invalid(f"{where} must be 0..=3 (0 = critical) or a name (got {v})")
        return enums.PRIORITY_TO_WIRE[v]
    return _choice(v, where, PRIORITY_FROM_JSON)


def reject_unknown(obj: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        at = f" in {where}" if where else ""
        raise invalid(f"unknown field{'s' if len(extra) > 1 else ''}{at}: {', '.join(extra)}")


def _dep_target(v: Any, where: str) -> pb.TaskRef:
    if isinstance(v, dict):
        reject_unknown(v, frozenset({"id", "key"}), where)
        if ("id" in v) == ("key" in v):
            raise invalid(f"{where} must have exactly one of id, key")
        if "id" in v:
            return pb.TaskRef(id=_integer(v["id"], f"{where}.id", 1, UINT64_MAX, strings=True))
        key = _str(v["key"], f"{where}.key")
        if not key:
            raise invalid(f"{where}.key must not be empty")
        return pb.TaskRef(key=key)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise invalid(f"{where} must be a task id or key (got {type_name(v)})")
    if isinstance(v, int) or (v.isdigit() and v.isascii()):
        return pb.TaskRef(id=_integer(v, where, 1, UINT64_MAX, strings=True))
    if not v:
        raise invalid(f"{where} must not be empty")
    return pb.TaskRef(key=v)


def _set_payload(spec: pb.TaskSpec, obj: dict[str, Any], where: str) -> None:
    if "payload" in obj and "payload_base64" in obj:
        raise invalid(f"{_where(where, 'payload')} and payload_base64 are mutually exclusive")
    content_type = None
    if "content_type" in obj:
        content_type = _str(obj["content_type"], _where(where, "content_type"))
    if "payload_base64" in obj:
        raw = _str(obj["payload_base64"], _where(where, "payload_base64"))
        try:
            spec.payload = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise invalid(f"{_where(where, 'payload_base64')} is not valid base64") from None
        spec.content_type = "application/octet-stream" if content_type is None else content_type
    elif "payload" in obj and obj["payload"] is not None:
        try:
            spec.payload = dumps(obj["payload"])
        except (ValueError, TypeError):
            raise invalid(f"{_where(where, 'payload')} cannot be encoded as JSON") from None
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
    reject_unknown(obj, TASK_FIELDS, where)
    if limits is not None:
        try:
            request_limits.check_json_task(obj, limits)
        except request_limits.InvalidArgument as e:
            raise invalid(f"{where}: {e}" if where else str(e)) from None
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
            reject_unknown(r, RETRY_FIELDS, w("retry"))
            rp = spec.retry
            rp.SetInParent()
            if r.get("max_attempts") is not None:
                rp.max_attempts = _integer(r["max_attempts"], w("retry.max_attempts"), 0, UINT32_MAX)
            for name in ("initial_backoff_s", "multiplier", "max_backoff_s"):
                if r.get(name) is not None:
                    setattr(rp, name, _seconds(r[name], w(f"retry.{name}")))
            if r.get("jitter") is not None:
                rp.jitter = json_bool(r["jitter"], w("retry.jitter"))
        deps: list[pb.Dep] = []
        if obj.get("deps") is not None:
            if not isinstance(obj["deps"], list):
                raise invalid(f"{w('deps')} must be an array (got {type_name(obj['deps'])})")
            for i, d in enumerate(obj["deps"]):
                dw = w(f"deps[{i}]")
                if isinstance(d, dict) and "target" in d:
                    reject_unknown(d, frozenset({"target", "cond"}), dw)
                    cond = 1 if d.get("cond") is None else _choice(d["cond"], f"{dw}.cond", COND_FROM_JSON)
                    deps.append(pb.Dep(target=_dep_target(d["target"], f"{dw}.target"), cond=cond))  # type: ignore[arg-type]
                elif isinstance(d, dict):
                    raise invalid(f"{dw} must be an object with a target (and an optional cond)")
                else:
                    deps.append(pb.Dep(target=_dep_target(d, dw), cond=1))  # type: ignore[arg-type]
        after = obj.get("after")
        if isinstance(after, (str, int)) and not isinstance(after, bool):
            # one id or key, as in-process `after=ref` (docs/reference/behaviour.md#task-fields)
            deps.append(pb.Dep(target=_dep_target(after, w("after")), cond=1))  # type: ignore[arg-type]
        elif after is not None:
            if not isinstance(after, list):
                raise invalid(
                    f"{w('after')} must be a task id or key or an array of them (got {type_name(after)})"
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
        raise invalid(f"{where or 'task'}: {e}") from None
    return spec


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


def query_tags(request: Request) -> dict[str, str]:
    """``tag=k=v`` (repeatable; all must match)."""
    out: dict[str, str] = {}
    for v in request.query_params.getlist("tag"):
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
    for v in request.query_params.getlist(name):
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return list(dict.fromkeys(out))


def recurring_request_from_json(
    name: str, body: dict[str, Any], limits: LimitsConfig | None = None
) -> pb.RecurringRequest:
    """``PUT /v1/recurring/{name}``: ``{cron, tz, overlap, tolerance_s, on_miss, task}``."""
    reject_unknown(body, RECURRING_FIELDS, "")
    if not name:
        raise invalid("recurring schedule name must not be empty")
    if "name" in body and body["name"] != name:
        raise invalid(f"name in the body ({body['name']!r}) differs from the path ({name!r})")
    cron = _str(body.get("cron"), "cron")
    if not cron.strip():
        raise invalid("cron must not be empty")
    tz = "" if body.get("tz") is None else _str(body["tz"], "tz")
    task = {} if body.get("task") is None else dict(_object(body["task"], "task"))
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
    template = task_spec_from_json(task, "task", limits)
    req = pb.RecurringRequest(name=name, cron=cron, tz=tz, template=template)
    if body.get("overlap") is not None:
        req.overlap = _choice(body["overlap"], "overlap", OVERLAP_FROM_JSON)  # type: ignore[assignment]
    return req
