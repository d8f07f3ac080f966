"""The HTTP routes of a sharded server (docs/how-to/shards.md#http).

Theory of operation
-------------------
:func:`sharded_routes` swaps the endpoints of the task and admin routes of
``http_api.create_http_app`` for the ones here.  A request this shard owns goes to the usual
handler unchanged (its body, already read to find the owner, is replayed); anything else goes
through the gRPC :class:`~cronoq.server.shards.router.Router` as the equivalent request message
(forwarded over the peer's gRPC endpoint, the only address of a peer the configuration has,
with the caller's ``authorization`` header), and the answer is rendered as the usual JSON.
Lists, the snapshot and workers always fan out, their JSON gaining ``unavailable_shards``;
so do the bulk actions (``/v1/tasks:replay``, ``/v1/tasks:cancel``) unless their pools are all
ours.  A pool's pause/resume goes to its shard, a schedule's pause/resume/run to the shard that
has it, a task's replay to its task's shard, a resource's busiest keys
(``/v1/resources/{name}/keys``) to the resource's shard.  ``/v1/history`` stays local (this shard's pools).

Errors: a refusal is 421 ``{"error", "code": "wrong_shard", "shard", "endpoint"}``, an
unreachable peer 503 ``unavailable``, a peer's error the status of its gRPC code.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cronoq.engine.model import STATUS_BY_NAME, STATUS_NAMES
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server import convert, ops
from cronoq.server.app import ApiError
from cronoq.server.auth import Action, AuthError
from cronoq.server.grpc_api import ERROR_CODE_KEY
from cronoq.server.http_api import (
    POOL,
    RECURRING,
    RESOURCE,
    SIGNAL,
    TASK,
    HttpApi,
    add_route_layer,
    path_segment,
)
from cronoq.server.http_bodies import ReplayRequest
from cronoq.server.http_guard import read_optional_json
from cronoq.server.http_json import (
    HttpError,
    error_response,
    http_error_of,
    json_response,
    query_bool,
    query_float,
    query_int,
    query_list,
    query_tags,
    query_time,
    recurring_request_from_json,
    task_spec_from_json,
)
from cronoq.server.shards.peers import PeerError, Unreachable
from cronoq.server.shards.router import Router, check_task, grpc_error
from cronoq.server.shards.topology import WrongShard
from cronoq.spec import json_shapes
from cronoq.spec.json_shapes import message_json

__all__ = ["sharded_routes"]

UINT64_MAX = 2**64 - 1
UINT32_MAX = 2**32 - 1

Endpoint = Callable[[Request], Awaitable[Response]]


def _error(e: BaseException) -> Response:
    if isinstance(e, WrongShard):
        return error_response(421, e.message, "wrong_shard", {"shard": e.shard.name, "endpoint": e.endpoint})
    if isinstance(e, Unreachable):
        return error_response(503, e.message, "unavailable")
    if isinstance(e, PeerError):
        if isinstance(e.cause, (ApiError, AuthError, HttpError)):
            return _error(e.cause)
        name = e.code.name.lower()
        code = dict(e.trailing).get(ERROR_CODE_KEY) or name  # (the peer's SubmitError code)
        return error_response(convert.HTTP_STATUS.get(name, 500), e.details, code)
    he = http_error_of(e)
    return error_response(he.status, he.message, he.code, he.extra, he.headers)


def _has_edges(body: Any) -> bool:
    """Whether a task's JSON names dependencies (``after`` or ``deps``)."""
    return isinstance(body, dict) and bool(body.get("after") or body.get("deps"))


def _replay(request: Request, body: Any) -> Request:
    """``request`` again, its body (read to find the owner) replayed for the local handler."""
    data = json.dumps(body).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": data, "more_body": False}

    scope = dict(request.scope)
    scope["headers"] = [(k, v) for k, v in request.scope["headers"] if k.lower() != b"content-length"]
    return Request(scope, receive)


def _result_json(r: pb.TaskResult) -> dict[str, Any]:
    return json_shapes.result_json(
        r.id,
        STATUS_NAMES[r.status - 1],
        output=r.output if r.HasField("output") else None,
        content_type="",  # (the wire's TaskResult carries no content type)
        message=r.message,
    )


def _filter_msg(filt: dict[str, Any]) -> pb.TaskFilter:
    """Bulk filter keywords (``ops.bulk_from_json``) as a ``TaskFilter`` message."""
    f = pb.TaskFilter(
        pools=filt.get("pools") or (),
        kinds=filt.get("kinds") or (),
        tags=filt.get("tags") or {},
        tenant=filt.get("tenant") or "",
        limit=filt.get("limit") or 0,
    )
    for name in filt.get("statuses") or ():
        n = STATUS_BY_NAME.get(name)
        if n is None:
            raise HttpError(400, f"statuses: unknown status '{name}'", "invalid_argument")
        f.statuses.append(n + 1)  # type: ignore[arg-type]
    for name in ("created_after", "created_before", "finished_after", "finished_before"):
        if filt.get(name) is not None:
            setattr(f, f"{name}_unix_ns", round(filt[name] * 1e9))
    return f


class ShardedHttp:
    """The sharded endpoints over one :class:`HttpApi` and the :class:`Router`."""

    def __init__(self, api: HttpApi, router: Router) -> None:
        self.api = api
        self.router = router
        self.top = router.top

    def _auth(self, request: Request) -> str | None:
        return request.headers.get("authorization")

    async def _call(self, request: Request, path: str, msg: Any) -> Any:
        return await self.router.call(f"/cronoq.v1.{path}", msg, self._auth(request))

    async def _ask(self, request: Request, path: str, msg: Any, shard: Any, refusal: WrongShard) -> Any:
        """``msg`` forwarded to ``shard`` (a peer), or ``refusal`` when that is not allowed."""
        if not self.router.may_forward(shard, self._auth(request)):
            raise refusal
        p = f"/cronoq.v1.{path}"
        return await self.router.peers.unary(
            shard, p, msg, self.router.response_cls(p), self._auth(request), self.router.timeout(msg)
        )

    # -- tasks --------------------------------------------------------------------------------

    async def submit(self, request: Request) -> Response:
        self.api.auth(request, Action.SUBMIT)
        body = await self.api.read_json(request)
        pool = body.get("pool") if isinstance(body.get("pool"), str) else ""
        shard = self.top.of_pool(pool or "")
        if self.top.is_local(shard):
            if _has_edges(body):  # a dependency on another shard's task names both shards
                check_task(self.top, task_spec_from_json(body, limits=self.api.app.limits), shard)
            return await self.api.submit(_replay(request, body))
        spec = task_spec_from_json(body, limits=self.api.app.limits)
        msg = pb.SubmitRequest(task=spec, wait=query_bool(request, "wait"))
        timeout = query_float(request, "timeout")
        if timeout is not None:
            msg.wait_timeout_s = timeout
        resp = await self._ask(request, "Tasks/Submit", msg, shard, self.top.pool_refusal(pool, shard))  # type: ignore[arg-type]
        out: dict[str, Any] = {"id": str(resp.id), "duplicate": resp.duplicate}
        if msg.wait:
            out["result"] = _result_json(resp.result)
        return json_response(out)

    async def submit_batch(self, request: Request) -> Response:
        self.api.auth(request, Action.SUBMIT_BATCH)
        body = await self.api.read_json(request)
        tasks = body.get("tasks")
        if isinstance(tasks, list):
            pools = {t.get("pool") or "" for t in tasks if isinstance(t, dict)}
            owners = {self.top.of_pool(p if isinstance(p, str) else "") for p in pools}
            if len(owners) > 1 or not all(self.top.is_local(s) for s in owners):
                specs = [
                    task_spec_from_json(t, f"tasks[{i}]", self.api.app.limits) for i, t in enumerate(tasks)
                ]
                resp = await self._call(request, "Tasks/SubmitBatch", pb.SubmitBatchRequest(tasks=specs))
                return json_response(
                    {"tasks": [{"id": str(t.id), "duplicate": t.duplicate} for t in resp.tasks]}
                )
            for i, t in enumerate(tasks):  # (all local) a dependency on another shard's task
                if _has_edges(t):
                    spec = task_spec_from_json(t, f"tasks[{i}]", self.api.app.limits)
                    check_task(self.top, spec, self.top.of_pool(spec.pool))
        return await self.api.submit_batch(_replay(request, body))

    async def list_tasks(self, request: Request) -> Response:
        self.api.auth(request, Action.LIST_TASKS)
        statuses = list(dict.fromkeys(s.lower() for s in query_list(request, "status")))
        for s in statuses:
            if s not in STATUS_BY_NAME:
                raise HttpError(
                    400, f"unknown status {s!r} (one of {', '.join(STATUS_NAMES)})", "invalid_argument"
                )
        msg = pb.ListTasksRequest(
            pools=query_list(request, "pool"),
            statuses=[STATUS_BY_NAME[s] + 1 for s in statuses],  # type: ignore[misc]
            after=query_int(request, "after", UINT64_MAX),
            limit=query_int(request, "limit", UINT32_MAX),
            kinds=query_list(request, "kind"),
            tags=query_tags(request),
        )
        for bound in ("created_after", "created_before"):
            ns = query_time(request, bound)
            if ns is not None:
                setattr(msg, f"{bound}_unix_ns", ns)
        resp = await self._call(request, "Tasks/ListTasks", msg)
        return json_response(
            {
                "tasks": [message_json(t) for t in resp.tasks],
                "next_after": str(resp.next_after),
                "unavailable_shards": list(resp.unavailable_shards),
            }
        )

    def _remote(self, request: Request) -> pb.TaskRef | None:
        """The task of a ``/v1/tasks/{ref}...`` request as a ``TaskRef`` when another shard may
        have it, None when this shard answers (its id is ours, or a tenant's key: looked up here)."""
        ref = self.api.task_ref_of(request)
        if request.query_params.get("tenant"):
            return None
        if isinstance(ref, int) and self.top.is_local(self.top.of_id(ref)):
            return None
        return pb.TaskRef(id=ref) if isinstance(ref, int) else pb.TaskRef(key=ref)

    async def get_task(self, request: Request) -> Response:
        tref = self._remote(request)
        if tref is None:
            return await self.api.get_task(request)
        self.api.auth(request, Action.GET)
        info = await self._call(request, "Tasks/Get", pb.GetRequest(task=tref))
        return json_response(message_json(info))

    async def task_result(self, request: Request) -> Response:
        tref = self._remote(request)
        if tref is None:
            return await self.api.task_result(request)
        self.api.auth(request, Action.WAIT)
        wait = pb.WaitRequest(task=tref)
        timeout = query_float(request, "timeout")
        if timeout is not None:
            wait.timeout_s = timeout
        res = await self._call(request, "Tasks/Wait", wait)
        return json_response(_result_json(res))

    async def cancel_task(self, request: Request) -> Response:
        tref = self._remote(request)
        if tref is None:
            return await self.api.cancel_task(request)
        self.api.auth(request, Action.CANCEL)
        out = await self._call(request, "Tasks/Cancel", pb.CancelRequest(task=tref))
        return json_response({"cancelled": out.cancelled})

    async def replay_task(self, request: Request) -> Response:
        tref = self._remote(request)
        if tref is None:
            return await self.api.replay_task(request)
        self.api.auth(request, Action.REPLAY)
        body = await read_optional_json(self.api.app, request)
        for k in body:
            if k not in ReplayRequest.model_fields:
                raise HttpError(400, f"unknown field '{k}' (expected force)", "invalid_argument")
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise HttpError(400, "force must be true or false", "invalid_argument")
        resp = await self._call(request, "Tasks/Replay", pb.ReplayRequest(task=tref, force=force))
        return json_response({"id": str(resp.id), "duplicate": False})

    async def _bulk(self, request: Request, action: str) -> Response:
        """``POST /v1/tasks:replay`` / ``POST /v1/tasks:cancel`` on every involved shard."""
        self.api.auth(request, Action.REPLAY_WHERE if action == "replay" else Action.CANCEL_WHERE)
        body = await self.api.read_json(request)
        local = self.api.replay_where if action == "replay" else self.api.cancel_where
        filt, key, force = ops.bulk_from_json(body)
        ops.check_criteria(filt)  # (before the wire, where an empty list is none)
        owners = {self.top.of_pool(p) for p in filt.get("pools") or ()}
        if owners and all(self.top.is_local(s) for s in owners):
            return await local(_replay(request, body))
        msg = pb.BulkRequest(filter=_filter_msg(filt), request_key=key, force=force)
        method = "Tasks/ReplayWhere" if action == "replay" else "Tasks/CancelWhere"
        resp = await self._call(request, method, msg)
        return json_response(
            json_shapes.bulk_json(resp.matched, resp.acted, list(resp.unavailable_shards), resp.resumed)
        )

    async def replay_where(self, request: Request) -> Response:
        return await self._bulk(request, "replay")

    async def cancel_where(self, request: Request) -> Response:
        return await self._bulk(request, "cancel")

    async def events(self, request: Request) -> Response:
        self.api.auth(request, Action.WATCH)
        pools = query_list(request, "pool")
        owners = {self.top.of_pool(p) for p in pools}
        if pools and all(self.top.is_local(s) for s in owners):
            return await self.api.events(request)
        ids: list[int] = []
        for v in query_list(request, "id"):
            if not (v.isascii() and v.isdigit()) or not 1 <= int(v) <= UINT64_MAX:
                raise HttpError(400, f"query parameter id must be a task id (got {v!r})", "invalid_argument")
            ids.append(int(v))
        msg = pb.WatchRequest(
            pools=pools,
            ids=ids,
            keys=query_list(request, "key"),
            all_transitions=query_bool(request, "all_transitions"),
            progress=query_bool(request, "progress"),
        )
        self.api.app.require_leader()  # standby → 503 before the stream starts
        return MergedEvents(self.router, msg, self._auth(request))

    # -- admin --------------------------------------------------------------------------------

    async def snapshot(self, request: Request) -> Response:
        self.api.auth(request, Action.SNAPSHOT)
        return json_response(message_json(await self._call(request, "Admin/Snapshot", pb.Empty())))

    async def workers(self, request: Request) -> Response:
        self.api.auth(request, Action.LIST_WORKERS)
        resp = await self._call(request, "Admin/ListWorkers", pb.Empty())
        return json_response(
            {
                "workers": [message_json(w) for w in resp.workers],
                "unavailable_shards": list(resp.unavailable_shards),
            }
        )

    async def resource_keys(self, request: Request) -> Response:
        """``GET /v1/resources/{name}/keys``: the busiest keys of a keyed resource, answered by
        the shard owning the resource (a resource belongs to one shard, so its answer is the
        union across shards); an unknown resource is the local 404."""
        name = request.path_params["name"]
        if self.top.is_local(self.top.of_resource(name) if name else None):
            return await self.api.resource_keys(request)
        self.api.auth(request, Action.SNAPSHOT)
        msg = pb.ResourceKeysRequest(resource=name, top=self.api.top_of(request))
        resp = await self._call(request, "Admin/ListResourceKeys", msg)
        return json_response(message_json(resp))

    async def _pool_paused(self, request: Request, paused: bool) -> Response:
        """``POST /v1/pools/{name}/pause|resume`` on the pool's shard."""
        name = path_segment(request, "name", "pool name")
        shard = self.top.of_pool(name) if name else None
        if self.top.is_local(shard):
            return await (self.api.pause_pool if paused else self.api.resume_pool)(request)
        self.api.auth(request, Action.PAUSE_POOL if paused else Action.RESUME_POOL)
        method = "Admin/PausePool" if paused else "Admin/ResumePool"
        resp = await self._call(request, method, pb.PoolRequest(pool=name))
        return json_response({"changed": resp.changed})

    async def signal(self, request: Request) -> Response:
        """``POST /v1/signals/{name}`` on every shard (router ``signal``)."""
        import json

        from cronoq.server import http_guard

        self.api.auth(request, Action.SIGNAL)
        body = await http_guard.read_optional_json(self.api.app, request)
        name = path_segment(request, "name", "signal name")
        msg = pb.SignalRequest(name=name, payload_json=json.dumps(body.get("payload")))
        resp = await self._call(request, "Tasks/Signal", msg)
        out: dict[str, Any] = {"name": name, "duplicate": resp.duplicate}
        if resp.unavailable_shards:
            out["unavailable_shards"] = list(resp.unavailable_shards)
        return json_response(out)

    async def pause_pool(self, request: Request) -> Response:
        return await self._pool_paused(request, True)

    async def resume_pool(self, request: Request) -> Response:
        return await self._pool_paused(request, False)

    async def _recurring_op(self, request: Request, action: Action, method: str) -> Any:
        """A schedule's pause/resume/run on the shard that has the schedule."""
        self.api.auth(request, action)
        return await self._call(
            request, method, pb.RecurringNameRequest(name=path_segment(request, "name", "schedule name"))
        )

    async def pause_recurring(self, request: Request) -> Response:
        resp = await self._recurring_op(request, Action.PAUSE_RECURRING, "Admin/PauseRecurring")
        return json_response({"changed": resp.changed})

    async def resume_recurring(self, request: Request) -> Response:
        resp = await self._recurring_op(request, Action.RESUME_RECURRING, "Admin/ResumeRecurring")
        return json_response({"changed": resp.changed})

    async def run_recurring(self, request: Request) -> Response:
        resp = await self._recurring_op(request, Action.TRIGGER_RECURRING, "Admin/TriggerRecurring")
        return json_response({"id": str(resp.id), "duplicate": False})

    async def _schedules(self, request: Request) -> Any:
        return await self._call(request, "Admin/ListRecurring", pb.Empty())

    async def list_recurring(self, request: Request) -> Response:
        self.api.auth(request, Action.LIST_RECURRING)
        resp = await self._schedules(request)
        return json_response(
            {
                "schedules": [message_json(s) for s in resp.schedules],
                "unavailable_shards": list(resp.unavailable_shards),
            }
        )

    async def get_recurring(self, request: Request) -> Response:
        name = path_segment(request, "name", "schedule name")
        self.api.auth(request, Action.LIST_RECURRING)
        for s in (await self._schedules(request)).schedules:
            if s.name == name:
                return json_response(message_json(s))
        raise HttpError(404, f"unknown recurring schedule '{name}'", "not_found")

    async def delete_recurring(self, request: Request) -> Response:
        name = path_segment(request, "name", "schedule name")
        self.api.auth(request, Action.REMOVE_RECURRING)
        out = await self._call(request, "Admin/RemoveRecurring", pb.RemoveRecurringRequest(name=name))
        return json_response({"removed": out.removed, "unavailable_shards": list(out.unavailable_shards)})

    async def put_recurring(self, request: Request) -> Response:
        name = path_segment(request, "name", "schedule name")
        self.api.auth(request, Action.ADD_RECURRING)
        body = await self.api.read_json(request)
        task = body.get("task")
        pool = task.get("pool") if isinstance(task, dict) and isinstance(task.get("pool"), str) else ""
        shard = self.top.of_pool(pool or "")
        if self.top.is_local(shard):
            return await self.api.put_recurring(_replay(request, body))
        req = recurring_request_from_json(name, body, self.api.app.limits)
        await self._ask(request, "Admin/AddRecurring", req, shard, self.top.pool_refusal(pool, shard))  # type: ignore[arg-type]
        for s in (await self._schedules(request)).schedules:
            if s.name == name:
                return json_response(message_json(s))
        raise HttpError(503, "the schedule vanished while it was added", "unavailable")  # pragma: no cover


def _event_frame(ev: pb.StatusEvent) -> bytes:
    """The SSE frame of a merged event: ``event: status``, or ``event: progress`` for a
    progress update (the frames of ``server/sse.py``)."""
    if ev.HasField("progress"):
        p = ev.progress
        obj: dict[str, Any] = {
            "id": str(ev.id),
            "pool": ev.pool,
            "key": ev.key,
            "attempt": ev.attempt,
            "done": p.done,
            "total": p.total if p.HasField("total") else None,
            "message": p.message,
            "at": ev.at_unix_ns / 1e9,
        }
        name = b"progress"
    else:
        obj, name = json_shapes.event_json(ev), b"status"
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return b"event: " + name + b"\ndata: " + data.encode() + b"\n\n"


#: a comment line this often while a merged event stream is idle
KEEPALIVE_S = 15.0
KEEPALIVE = b": keepalive\n\n"


class MergedEvents(Response):
    """``/v1/events`` merged over shards: ``: live`` once every shard's stream is live, then
    ``event: status`` frames, ``: keepalive`` while idle, a final ``event: error``."""

    media_type = "text/event-stream"

    def __init__(self, router: Router, msg: pb.WatchRequest, authorization: str | None) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-cache", "x-accel-buffering": "no"})
        self.router = router
        self.msg = msg
        self.authorization = authorization

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        ctx, events = self.router.stream("/cronoq.v1.Tasks/Watch", self.msg, self.authorization)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for ev in events:
                    queue.put_nowait(_event_frame(ev))
            except Exception as e:
                code, message = grpc_error(e)
                name = "wrong_shard" if isinstance(e, WrongShard) else code.name.lower()
                body = json.dumps({"error": message, "code": name}, separators=(",", ":")).encode()
                queue.put_nowait(b"event: error\ndata: " + body + b"\n\n")
            queue.put_nowait(None)

        async def until_disconnect() -> None:
            try:
                while (await receive())["type"] != "http.disconnect":
                    pass
            finally:
                queue.put_nowait(None)

        pumper = asyncio.ensure_future(pump())
        watcher = asyncio.ensure_future(until_disconnect())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            live = asyncio.ensure_future(ctx.live.wait())
            await asyncio.wait({live, pumper, watcher}, return_when=asyncio.FIRST_COMPLETED)
            live.cancel()
            await send({"type": "http.response.body", "body": b": live\n\n", "more_body": True})
            while True:
                try:
                    async with asyncio.timeout(KEEPALIVE_S):
                        chunk = await queue.get()
                except TimeoutError:
                    await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                    continue
                if chunk is None:
                    if not watcher.done():
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            for t in (pumper, watcher):
                t.cancel()
            await asyncio.gather(pumper, watcher, return_exceptions=True)


def _guarded(fn: Endpoint) -> Endpoint:
    @functools.wraps(fn)
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except (WrongShard, Unreachable, PeerError, ApiError, AuthError, HttpError) as e:
            return _error(e)

    return wrapped


def sharded_routes(api: HttpApi, routes: list[BaseRoute]) -> list[BaseRoute]:
    """``routes`` with the task and admin endpoints routed by shard (unchanged without shards
    or before the gRPC services registered the router)."""
    router = api.app.router
    if router is None or not router.top.sharded:
        return routes
    sh = ShardedHttp(api, router)
    table: dict[tuple[str, str], Endpoint] = {
        ("/v1/tasks", "POST"): sh.submit,
        ("/v1/tasks", "GET"): sh.list_tasks,
        ("/v1/tasks:batch", "POST"): sh.submit_batch,
        ("/v1/tasks:replay", "POST"): sh.replay_where,
        ("/v1/tasks:cancel", "POST"): sh.cancel_where,
        (TASK, "GET"): sh.get_task,
        (TASK + "/result", "GET"): sh.task_result,
        (TASK + "/cancel", "POST"): sh.cancel_task,
        (TASK + "/replay", "POST"): sh.replay_task,
        ("/v1/events", "GET"): sh.events,
        ("/v1/snapshot", "GET"): sh.snapshot,
        ("/v1/workers", "GET"): sh.workers,
        ("/v1/recurring", "GET"): sh.list_recurring,
        (RECURRING, "GET"): sh.get_recurring,
        (RECURRING, "PUT"): sh.put_recurring,
        (RECURRING, "DELETE"): sh.delete_recurring,
        (RECURRING + "/pause", "POST"): sh.pause_recurring,
        (RECURRING + "/resume", "POST"): sh.resume_recurring,
        (RECURRING + "/run", "POST"): sh.run_recurring,
        (RESOURCE + "/keys", "GET"): sh.resource_keys,
        (POOL + "/pause", "POST"): sh.pause_pool,
        (POOL + "/resume", "POST"): sh.resume_pool,
        (SIGNAL, "POST"): sh.signal,
    }
    out: list[BaseRoute] = []
    for r in routes:
        if isinstance(r, Route):
            methods = sorted(r.methods or ())
            endpoint = next((table[(r.path, m)] for m in methods if (r.path, m) in table), None)
            if endpoint is not None:
                # (the same class: a task route matches the raw path)
                out.append(type(r)(r.path, _guarded(endpoint), methods=[m for m in methods if m != "HEAD"]))
                continue
        out.append(r)
    return out


add_route_layer(sharded_routes)  # (the HTTP front end imports nothing of the shards)
