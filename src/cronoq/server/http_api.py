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

One Starlette route per path and method, each with its own handler method of
:class:`HttpApi`; a path without a route is 404 ``not_found``, a method a path does not have
405 ``unimplemented`` with an ``Allow`` header (:func:`_http_exception`).  The pieces:

* ``http_guard.py``: the checks before routing (loopback ``Host``, cross-site, concurrency
  limits), then in each handler the caller's token and role *before the body is read*, and the
  body within its size and time limits.
* ``http_json.py``: the error bodies, the rendering of messages, the parsing of task bodies
  (every count checked before anything is converted) and of query parameters.  A batch is
  converted in slices of a few milliseconds (``app.Slices``), the event loop serving others
  in between.

Task references: in ``/v1/tasks/{ref}[/result|/cancel|/replay]`` a segment of decimal digits is
an id, anything else a URL-encoded key (``/`` as ``%2F``): these routes (:class:`RawPathRoute`)
match the raw path, so an encoded ``/`` stays inside the segment.  ``?key=`` names the task by
key whatever the segment is (for digits-only keys: ``/v1/tasks/-?key=0042``).  So does
``POST /v1/signals/{name}``, ``/v1/recurring/{name}[/pause|/resume|/run]``,
``POST /v1/pools/{name}/pause|resume`` and ``GET /v1/resources/{name}/keys``: a signal, schedule,
pool or resource name may hold a ``/`` as well (sent as ``%2F``).  Keys are
scoped by tenant: a key is looked up among the tasks of the token's tenant, or of
``?tenant=`` for a caller whose token has none (else among the tasks without a tenant).

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
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final
from urllib.parse import unquote

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

from cronoq.engine.keyed import MAX_TOP
from cronoq.engine.model import STATUS_BY_NAME, STATUS_NAMES
from cronoq.errors import SchedulerError
from cronoq.server import body_errors, http_guard, ops, request_limits, task_history
from cronoq.server import metrics as metrics_mod
from cronoq.server.app import (
    ApiError,
    BlobCodec,
    ServerApp,
    Slices,
    event_filter,
    filter_group,
    store_failure,
)
from cronoq.server.auth import Action, AuthError, Principal, allows_pool, restrict_pools
from cronoq.server.dashboard import dashboard_routes
from cronoq.server.http_bodies import ReplayRequest, SignalRequest, SubmitBatchRequest
from cronoq.server.http_json import (
    UINT32_MAX,
    UINT64_MAX,
    HttpError,
    bad_request,
    dumps,
    error_response,
    http_error_of,
    invalid,
    json_response,
    query_bool,
    query_float,
    query_int,
    query_list,
    query_tags,
    query_time,
    recurring_json,
    recurring_request_from_json,
    reject_unknown,
    result_json,
    task_spec_from_json,
    type_name,
    worker_json,
)
from cronoq.server.http_query import with_query_check
from cronoq.server.sse import EventHub, Subscriber, any_frame, with_progress
from cronoq.spec.json_shapes import bulk_json, message_json

__all__ = [
    "TASK",
    "HttpApi",
    "RawPathRoute",
    "create_http_app",
    "create_metrics_app",
]

log = logging.getLogger("cronoq.server.http")

SSE_KEEPALIVE_S: Final = 15.0
#: after handing events to the event streams, the fan-out lets the next ones gather this long,
#: so they go out together (one wake-up and one send per stream instead of one per event)
SSE_FLUSH_S: Final = 0.05


class _Segment(Convertor[str]):
    """A path segment, empty included (``/v1/tasks/`` is 400 "missing task id or key")."""

    regex = "[^/]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("segment", _Segment())

#: the path of a task (``/v1/tasks/{ref}``; its sub-resources append ``/result`` etc.)
TASK: Final = "/v1/tasks/{ref:segment}"
#: the path of a signal (``/v1/signals/{name}``: any signal name, URL-encoded, ``/`` included)
SIGNAL: Final = "/v1/signals/{name:segment}"
#: the path of a recurring schedule (``/v1/recurring/{name}``: any schedule name, URL-encoded)
RECURRING: Final = "/v1/recurring/{name:segment}"
#: the path of a pool (``/v1/pools/{name}``: any pool name, URL-encoded; its routes append ``/pause`` etc.)
POOL: Final = "/v1/pools/{name:segment}"
#: the path of a resource (``/v1/resources/{name}``: any resource name, URL-encoded)
RESOURCE: Final = "/v1/resources/{name:segment}"
#: the prefixes of the routes whose name segment is matched URL-encoded (:class:`RawPathRoute`)
RAW_PREFIXES: Final = tuple(path.split("{", 1)[0] for path in (TASK, SIGNAL, RECURRING, POOL, RESOURCE))


class RawPathRoute(Route):
    """A route matched against the raw (still URL-encoded) path: a ``%2F`` in a task key or a
    signal, schedule, pool or resource name stays inside its segment instead of splitting it
    (the handler decodes the segment: :func:`path_segment`).

    Under a ``root_path`` (the app mounted in another ASGI app, or a server's ``--root-path``)
    the raw path holds the prefix too: it is matched past the prefix.  A path that cannot be
    matched raw (no ``raw_path``, or a prefix that was itself URL-encoded) is matched decoded,
    as a plain route, and the child scope says so (:data:`DECODED`): its segment is not decoded
    a second time (``%2541`` stays ``%41``), only a ``%2F`` in it splits it (404)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and isinstance(raw, (bytes, bytearray)):
            text = bytes(raw).split(b"?", 1)[0].decode("latin-1")
            root: str = scope.get("root_path") or ""
            if text.startswith(root) and text[len(root) :].startswith(RAW_PREFIXES):
                return super().matches({**scope, "path": text})  # (Starlette matches past root_path)
        match, child = super().matches(scope)
        return match, {**child, DECODED: True}


#: the key of a :class:`RawPathRoute`'s scope when it matched the decoded path
DECODED: Final = "cronoq.path_decoded"


def path_segment(request: Request, name: str, what: str) -> str:
    """Path parameter ``name`` of a :class:`RawPathRoute`, URL-decoded (``what`` names it in
    the 400 answer when it is not URL-encoded UTF-8); as it is when the route matched the
    decoded path (:data:`DECODED`)."""
    value: str = request.path_params[name]
    if request.scope.get(DECODED):
        return value
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise bad_request(f"the {what} in the path is not valid URL-encoded UTF-8") from None


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
            he = http_error_of(e)
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
            tail = b"event: error\ndata: " + dumps({"error": err.message, "code": err.code}) + b"\n\n"
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
            he = http_error_of(e)
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
        """Authenticate and check the role of the route; never reads the body (http_guard)."""
        return http_guard.authenticate(self.app, request, action)

    async def read_json(self, request: Request) -> dict[str, Any]:
        """The JSON object body, within the body limits (http_guard)."""
        return await http_guard.read_json(self.app, request)

    def _pools_filter(self, principal: Principal | None, requested: list[str]) -> list[str]:
        for p in requested:
            if p not in self.app.sched.pools or not allows_pool(principal, p):  # (no oracle)
                raise HttpError(404, f"unknown pool '{p}'", "not_found")
        return restrict_pools(principal, requested) or []

    # -- tasks --------------------------------------------------------------------------------

    @_handler
    async def submit(self, request: Request) -> Response:
        """``POST /v1/tasks`` (``?wait=1&timeout=S``)."""
        principal = self.auth(request, Action.SUBMIT)
        wait = query_bool(request, "wait")
        timeout = query_float(request, "timeout")
        body = await self.read_json(request)
        spec = task_spec_from_json(body, limits=self.app.limits)
        tid, dup = await self.app.submit(principal, spec)
        out: dict[str, Any] = {"id": str(tid), "duplicate": dup}
        if wait:
            try:
                t = await self.app.wait(principal, tid, timeout)
            except ApiError as e:
                he = http_error_of(e)
                he.extra = {"id": str(tid), "duplicate": dup}
                raise he from None
            out["result"] = result_json(t)
        return json_response(out)

    @_handler
    async def submit_batch(self, request: Request) -> Response:
        """``POST /v1/tasks:batch``."""
        principal = self.auth(request, Action.SUBMIT_BATCH)
        body = await self.read_json(request)
        reject_unknown(body, SubmitBatchRequest.model_fields, "")
        tasks = body.get("tasks")
        if not isinstance(tasks, list):
            raise bad_request(f"tasks must be an array of task objects (got {type_name(tasks)})")
        limits = self.app.limits
        try:
            request_limits.check_batch(limits, len(tasks))
        except request_limits.InvalidArgument as e:
            raise invalid(str(e)) from None
        specs = []
        slices = Slices()
        for i, t in enumerate(tasks):
            specs.append(task_spec_from_json(t, f"tasks[{i}]", limits))
            await slices.step()
        results = await self.app.submit_batch(principal, specs)
        return json_response({"tasks": [{"id": str(i), "duplicate": d} for i, d in results]})

    @_handler
    async def list_tasks(self, request: Request) -> Response:
        """``GET /v1/tasks`` (filters and paging in the query)."""
        principal = self.auth(request, Action.LIST_TASKS)
        pools = self._pools_filter(principal, query_list(request, "pool"))
        statuses = list(dict.fromkeys(s.lower() for s in query_list(request, "status")))  # case-insensitive
        for s in statuses:
            if s not in STATUS_BY_NAME:
                raise bad_request(f"unknown status {s!r} (one of {', '.join(STATUS_NAMES)})")
        after = query_int(request, "after", UINT64_MAX)
        limit = query_int(request, "limit", UINT32_MAX)
        tasks, next_after = self.app.list_tasks(
            principal,
            pools,
            statuses,
            after,
            limit,
            kinds=query_list(request, "kind"),
            tags=query_tags(request),
            created_after_ns=query_time(request, "created_after"),
            created_before_ns=query_time(request, "created_before"),
        )
        return json_response(
            {"tasks": [message_json(self.app.task_info(t)) for t in tasks], "next_after": str(next_after)}
        )

    def task_ref_of(self, request: Request) -> int | str:
        """The task of a ``/v1/tasks/{ref}...`` request: ``?key=``, else the (raw, URL-encoded)
        segment: digits are an id, anything else a key (see the module docstring)."""
        key = request.query_params.get("key")
        if key is not None:
            if not key:
                raise bad_request("query parameter key must not be empty")
            return key
        seg = path_segment(request, "ref", "task key")
        if not seg:
            raise bad_request("missing task id or key")
        if seg.isascii() and seg.isdigit():
            n = int(seg)
            if not 1 <= n <= UINT64_MAX:
                raise HttpError(404, f"unknown task '{seg}'", "not_found")
            return n
        return seg

    @staticmethod
    def tenant_of(request: Request) -> str | None:
        """``?tenant=``: whose key the reference names (keys are per tenant)."""
        return request.query_params.get("tenant") or None

    @_handler
    async def get_task(self, request: Request) -> Response:
        """``GET /v1/tasks/{ref}``."""
        ref = self.task_ref_of(request)
        principal = self.auth(request, Action.GET)
        try:
            t = self.app.get(principal, ref, self.tenant_of(request))
        except ApiError as e:
            rec = await self._from_history(e, principal, ref, self.tenant_of(request))
            return json_response(message_json(task_history.history_info(self.app, rec)))
        return json_response(message_json(self.app.task_info(t, detail=True)))

    async def _from_history(
        self, e: ApiError, principal: Principal | None, ref: int | str, tenant: str | None
    ) -> Any:
        """After the engine's retention: the task from the store's history (``task_history``),
        else the error ``e``."""
        rec = None
        if e.code == "not_found":
            rec = await task_history.finished_from_store(self.app, principal, ref, BlobCodec(), tenant)
        if rec is None:
            raise e
        return rec

    @_handler
    async def task_result(self, request: Request) -> Response:
        """``GET /v1/tasks/{ref}/result`` (``?timeout=S``)."""
        ref = self.task_ref_of(request)
        principal = self.auth(request, Action.WAIT)
        timeout = query_float(request, "timeout")
        try:
            t = await self.app.wait(principal, ref, timeout, self.tenant_of(request))
        except ApiError as e:
            rec = await self._from_history(e, principal, ref, self.tenant_of(request))
            return json_response(task_history.history_result(rec))
        return json_response(result_json(t))

    @_handler
    async def cancel_task(self, request: Request) -> Response:
        """``POST /v1/tasks/{ref}/cancel``."""
        ref = self.task_ref_of(request)
        principal = self.auth(request, Action.CANCEL)
        ok = await self.app.cancel(principal, ref, self.tenant_of(request))
        return json_response({"cancelled": ok})

    # -- operations (docs/how-to/operations.md) ------------------------------------------------

    @_handler
    async def replay_task(self, request: Request) -> Response:
        """``POST /v1/tasks/{ref}/replay`` (body ``{"force": bool}``, optional)."""
        ref = self.task_ref_of(request)
        principal = self.auth(request, Action.REPLAY)
        body = await http_guard.read_optional_json(self.app, request)
        for k in body:
            if k not in ReplayRequest.model_fields:
                raise bad_request(f"unknown field '{k}' (expected force)")
        try:
            force = ReplayRequest.model_validate(body).force
        except ValidationError as e:
            raise invalid(body_errors.message_of(e)) from None
        tid = await ops.replay(self.app, principal, ref, force, self.tenant_of(request))
        return json_response({"id": str(tid), "duplicate": False})

    async def _bulk(self, request: Request, action: str, role: Action) -> Response:
        principal = self.auth(request, role)
        filt, key, force = ops.bulk_from_json(await self.read_json(request))
        res = await ops.bulk(self.app, principal, action, filt, key, force)
        return json_response(bulk_json(res.matched, res.acted, resumed=res.resumed))

    @_handler
    async def replay_where(self, request: Request) -> Response:
        """``POST /v1/tasks:replay``."""
        return await self._bulk(request, "replay", Action.REPLAY_WHERE)

    @_handler
    async def cancel_where(self, request: Request) -> Response:
        """``POST /v1/tasks:cancel``."""
        return await self._bulk(request, "cancel", Action.CANCEL_WHERE)

    @_handler
    async def signal(self, request: Request) -> Response:
        """``POST /v1/signals/{name}`` (body ``{"payload": ...}``, optional)."""
        from cronoq.server.signals import send_signal

        principal = self.auth(request, Action.SIGNAL)
        body = await http_guard.read_optional_json(self.app, request)
        for k in body:
            if k not in SignalRequest.model_fields:
                raise bad_request(f"unknown field '{k}' (expected payload)")
        name = path_segment(request, "name", "signal name")
        dup = await send_signal(self.app, principal, name, body.get("payload"))
        return json_response({"name": name, "duplicate": dup})

    async def _pool_paused(self, request: Request, paused: bool) -> Response:
        principal = self.auth(request, Action.PAUSE_POOL if paused else Action.RESUME_POOL)
        name = path_segment(request, "name", "pool name")
        changed = await ops.set_paused(self.app, principal, "pool", name, paused)
        return json_response({"changed": changed})

    @_handler
    async def pause_pool(self, request: Request) -> Response:
        """``POST /v1/pools/{name}/pause``."""
        return await self._pool_paused(request, True)

    @_handler
    async def resume_pool(self, request: Request) -> Response:
        """``POST /v1/pools/{name}/resume``."""
        return await self._pool_paused(request, False)

    async def _recurring_paused(self, request: Request, paused: bool) -> Response:
        principal = self.auth(request, Action.PAUSE_RECURRING if paused else Action.RESUME_RECURRING)
        name = path_segment(request, "name", "schedule name")
        changed = await ops.set_paused(self.app, principal, "recurring", name, paused)
        return json_response({"changed": changed})

    @_handler
    async def pause_recurring(self, request: Request) -> Response:
        """``POST /v1/recurring/{name}/pause``."""
        return await self._recurring_paused(request, True)

    @_handler
    async def resume_recurring(self, request: Request) -> Response:
        """``POST /v1/recurring/{name}/resume``."""
        return await self._recurring_paused(request, False)

    @_handler
    async def run_recurring(self, request: Request) -> Response:
        """``POST /v1/recurring/{name}/run``: one occurrence now."""
        principal = self.auth(request, Action.TRIGGER_RECURRING)
        tid = await ops.trigger(self.app, principal, path_segment(request, "name", "schedule name"))
        return json_response({"id": str(tid), "duplicate": False})

    # -- events (SSE) -------------------------------------------------------------------------

    @_handler
    async def events(self, request: Request) -> Response:
        principal = self.auth(request, Action.WATCH)
        raw_pools, raw_ids, keys = (
            query_list(request, "pool"),
            query_list(request, "id"),
            query_list(request, "key"),
        )
        self.app.check_filter(items=len(raw_pools) + len(raw_ids) + len(keys), keys=keys)
        pools = self._pools_filter(principal, raw_pools)
        all_transitions = query_bool(request, "all_transitions")
        ids: list[int] = []
        for v in raw_ids:
            if not (v.isascii() and v.isdigit()) or not 1 <= int(v) <= UINT64_MAX:
                raise bad_request(f"query parameter id must be a task id (got {v!r})")
            ids.append(int(v))

        keep = event_filter(principal, pools, ids, keys, all_transitions, self.app.task_of_tenant)
        group = filter_group(principal, pools, ids, keys, all_transitions) if keep is not None else None
        self.app.require_leader()  # standby → 503 before the stream starts
        if query_bool(request, "progress"):  # docs/how-to/progress.md#event-streams
            keep_p = event_filter(principal, pools, ids, keys, True, self.app.task_of_tenant)
            keep = with_progress(keep, keep_p)  # (None exactly when keep was: the same group)
            return _EventsResponse(self, group, keep, progress=True)
        return _EventsResponse(self, group, keep)

    # -- admin --------------------------------------------------------------------------------

    @_handler
    async def snapshot(self, request: Request) -> Response:
        principal = self.auth(request, Action.SNAPSHOT)
        msg = await self.app.snapshot_msg(principal)
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
                raise bad_request(
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
    async def resource_keys(self, request: Request) -> Response:
        """``GET /v1/resources/{name}/keys?top=N``: the busiest keys of a keyed resource."""
        self.auth(request, Action.SNAPSHOT)
        name = path_segment(request, "name", "resource name")
        msg = await self.app.resource_keys(name, self.top_of(request))
        return json_response(message_json(msg))

    @staticmethod
    def top_of(request: Request) -> int:
        """The ``top`` query parameter of ``/v1/resources/{name}/keys`` (default 10)."""
        raw = request.query_params.get("top") or "10"
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_TOP:
            raise bad_request(f"query parameter top must be an integer from 1 to {MAX_TOP} (got {raw!r})")
        return int(raw)

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
    async def get_recurring(self, request: Request) -> Response:
        """``GET /v1/recurring/{name}``."""
        name = path_segment(request, "name", "schedule name")
        principal = self.auth(request, Action.LIST_RECURRING)
        for info in await self.app.list_recurring(principal):
            if info.name == name:
                return json_response(recurring_json(self.app, info))
        raise HttpError(404, f"unknown recurring schedule '{name}'", "not_found")

    @_handler
    async def delete_recurring(self, request: Request) -> Response:
        """``DELETE /v1/recurring/{name}``."""
        name = path_segment(request, "name", "schedule name")
        principal = self.auth(request, Action.REMOVE_RECURRING)
        if principal is not None and principal.pools is not None:
            for info in await self.app.list_recurring(None):
                if info.name == name and info.pool not in principal.pools:
                    return json_response({"removed": False})  # (as a missing one: no oracle)
        removed = await self.app.remove_recurring(principal, name)
        return json_response({"removed": removed})

    @_handler
    async def put_recurring(self, request: Request) -> Response:
        """``PUT /v1/recurring/{name}``: add or replace the schedule."""
        name = path_segment(request, "name", "schedule name")
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


# ---------------------------------------------------------------------------------------------
# assembly


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Routing errors (no such route, wrong method) as JSON error bodies."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        hint = ""
        if request.url.path.startswith("/v1/tasks/"):
            hint = " (a key containing '/' must be URL-encoded as %2F)"
        elif request.url.path.startswith(RAW_PREFIXES):
            hint = " (a name containing '/' must be URL-encoded as %2F)"
        return error_response(404, f"no such route: {request.method} {request.url.path}{hint}", "not_found")
    if exc.status_code == 405:
        return error_response(
            405,
            f"method {request.method} not allowed on {request.url.path}",
            "unimplemented",
            headers=exc.headers,
        )
    return error_response(exc.status_code, str(exc.detail), "invalid_argument", headers=exc.headers)


def api_routes(api: HttpApi) -> list[BaseRoute]:
    """The routes of the API, one per path and method (docs/reference/http.md)."""
    return [
        Route("/metrics", api.metrics, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        Route("/v1/tasks", api.submit, methods=["POST"]),
        Route("/v1/tasks", api.list_tasks, methods=["GET"]),
        Route("/v1/tasks:batch", api.submit_batch, methods=["POST"]),
        Route("/v1/tasks:replay", api.replay_where, methods=["POST"]),
        Route("/v1/tasks:cancel", api.cancel_where, methods=["POST"]),
        RawPathRoute(TASK, api.get_task, methods=["GET"]),
        RawPathRoute(TASK + "/result", api.task_result, methods=["GET"]),
        RawPathRoute(TASK + "/cancel", api.cancel_task, methods=["POST"]),
        RawPathRoute(TASK + "/replay", api.replay_task, methods=["POST"]),
        Route("/v1/events", api.events, methods=["GET"]),
        Route("/v1/snapshot", api.snapshot, methods=["GET"]),
        Route("/v1/history", api.history, methods=["GET"]),
        Route("/v1/workers", api.workers, methods=["GET"]),
        RawPathRoute(RESOURCE + "/keys", api.resource_keys, methods=["GET"]),
        Route("/v1/recurring", api.list_recurring, methods=["GET"]),
        RawPathRoute(RECURRING, api.get_recurring, methods=["GET"]),
        RawPathRoute(RECURRING, api.put_recurring, methods=["PUT"]),
        RawPathRoute(RECURRING, api.delete_recurring, methods=["DELETE"]),
        RawPathRoute(RECURRING + "/pause", api.pause_recurring, methods=["POST"]),
        RawPathRoute(RECURRING + "/resume", api.resume_recurring, methods=["POST"]),
        RawPathRoute(RECURRING + "/run", api.run_recurring, methods=["POST"]),
        RawPathRoute(POOL + "/pause", api.pause_pool, methods=["POST"]),
        RawPathRoute(POOL + "/resume", api.resume_pool, methods=["POST"]),
        RawPathRoute(SIGNAL, api.signal, methods=["POST"]),
    ]


#: Layers the API routes pass through, in order: ``layer(api, routes)`` returns the routes to
#: serve.  A layer registers itself (:func:`add_route_layer`; the shard router's HTTP routes,
#: docs/how-to/shards.md, when the app has shards), so this module imports none of them.
ROUTE_LAYERS: list[Callable[[HttpApi, list[BaseRoute]], list[BaseRoute]]] = []


def add_route_layer(layer: Callable[[HttpApi, list[BaseRoute]], list[BaseRoute]]) -> None:
    """Put ``layer`` over the routes of the HTTP apps created from now on (once)."""
    if layer not in ROUTE_LAYERS:
        ROUTE_LAYERS.append(layer)


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
        routes += api_routes(api)
        routes += dashboard_routes()
        for layer in ROUTE_LAYERS:
            routes = layer(api, routes)
        routes = with_query_check(routes)
    star = Starlette(routes=routes, exception_handlers={HTTPException: _http_exception})
    star.state.cronoq_app = app
    star.state.http_api = api
    star.add_middleware(http_guard.GuardMiddleware, server=app, listen_addr=listen_addr)
    grpc_web = app.config.server.grpc_web
    if grpc_web is not None and not metrics_only:  # outermost: before the guard (grpc_web.py)
        from cronoq.server.grpc_web import GrpcWebMiddleware

        star.add_middleware(
            GrpcWebMiddleware, api=app, listen_addr=listen_addr, origins=grpc_web.allowed_origins
        )
    return star


def create_metrics_app(app: ServerApp, *, listen_addr: str | None = None) -> Starlette:
    """The app of ``metrics_addr``: unauthenticated ``/metrics``, ``/healthz``, ``/readyz``."""
    return create_http_app(app, metrics_only=True, listen_addr=listen_addr)
