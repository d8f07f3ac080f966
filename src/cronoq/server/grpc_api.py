"""gRPC front end of ``cronoq serve``: the ``Tasks`` and ``Admin`` services (docs/reference/grpc.md#services,
docs/reference/behaviour.md#server-details).

Theory of operation
-------------------
Every operation is delegated to :class:`~cronoq.server.app.ServerApp`, which raises
:class:`~cronoq.server.app.ApiError` with a lower-case gRPC status name; :func:`_status` maps
it (and the auth errors) to a :class:`grpc.StatusCode`.  A standby or stopping server answers
UNAVAILABLE (``ServerApp.require_leader``).  Every unary handler is written under :func:`rpc`,
which derives the caller's principal and maps whatever the handler raises (the one error block).

Auth happens twice, on purpose:

* :class:`AuthInterceptor` runs when the call's headers arrive, *before the request body is
  read*: it authenticates the bearer token and checks the role against
  :data:`~cronoq.server.auth.GRPC_METHOD_ACTIONS` (UNAUTHENTICATED / PERMISSION_DENIED).  A
  rejected call is answered by a streaming handler that aborts without reading the request.
* the handlers re-derive the caller's :class:`~cronoq.server.auth.Principal` from the same
  metadata (cheap: one SHA-256) and enforce what depends on the body: the token's pools
  (PERMISSION_DENIED) and tenant (stamped on submissions, enforced on existing tasks).

Certificate principals (``[[auth.certs]]``): the interceptor sees only the metadata, not the
connection, so a call *without* a bearer token is checked one step later, by
:func:`_cert_checked`, which wraps the method's handler: it reads the verified peer
certificate's DNS names (:func:`peer_dns`, the ``peer_dns`` auth property of the TLS
connection) and checks the role before the request is deserialized (the wrapped handler takes
the raw bytes and parses them after the check).  ``Work`` (a client stream) authenticates in
its own handler and is passed through.

``Watch`` joins the front end's shared event fan-out first (``grpc_watch.py``: one
subscription and one message per event for all streams, budgets per token) and then sends the
initial metadata, so a client that waited for the metadata misses nothing submitted
afterwards; a consumer that falls more than the event buffer behind gets DATA_LOSS, and the
end of the leadership UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import grpc
import grpc.aio

from cronoq.engine.model import STATUS_NAMES
from cronoq.errors import NotStartedError, SchedulerError
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc
from cronoq.proto.enums import STATUS_FROM_WIRE
from cronoq.server import convert, ops, task_history
from cronoq.server.app import ApiError, BlobCodec, ServerApp, event_filter, filter_group, store_failure
from cronoq.server.auth import (
    GRPC_METHOD_ACTIONS,
    AuthError,
    Principal,
    allows_pool,
    restrict_pools,
)
from cronoq.server.grpc_watch import WatchFanout
from cronoq.server.principal_shares import Shares, principal_key
from cronoq.server.sse import with_progress
from cronoq.server.task_payload import add_payload

if TYPE_CHECKING:
    from cronoq.engine.recurring import RecurringInfo

__all__ = [
    "AdminServicer",
    "AuthInterceptor",
    "TasksServicer",
    "SERVICE_LAYERS",
    "UnaryBudget",
    "add_generic_only",
    "add_service_layer",
    "grpc_status",
    "peer_dns",
    "register",
]

log = logging.getLogger("cronoq.server.grpc")

#: how long a Watch stream sleeps between checks while nothing happens (it is woken by events)
WATCH_IDLE_S = 30.0


def grpc_status(name: str) -> grpc.StatusCode:
    """A lower-case gRPC status name (``ApiError.status``) as a :class:`grpc.StatusCode`."""
    try:
        return grpc.StatusCode[name.upper()]
    except KeyError:
        return grpc.StatusCode.INTERNAL


def _status(e: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(e, ApiError):
        return grpc_status(e.status), e.message
    if isinstance(e, AuthError):
        return grpc_status(e.code), e.message
    if isinstance(e, NotStartedError):
        return grpc.StatusCode.UNAVAILABLE, f"server is not serving: {e}"
    if isinstance(e, SchedulerError):  # a store failure: retryable, without the store's detail
        return grpc.StatusCode.UNAVAILABLE, store_failure(e).message
    return grpc.StatusCode.INTERNAL, f"internal error: {type(e).__name__}: {e}"


def _auth_header(metadata: Any) -> str | None:
    for k, v in metadata or ():
        if k == "authorization":
            return v if isinstance(v, str) else v.decode("latin-1")
    return None


# ---------------------------------------------------------------------------------------------
# interceptor


#: methods whose requests are a client stream (see :func:`_rejecter`)
_CLIENT_STREAMING = frozenset({"/cronoq.v1.Workers/Work"})
#: how long a rejected client stream may take to deliver its first message
_DRAIN_S = 0.25


def _rejecter(code: grpc.StatusCode, message: str, client_streaming: bool) -> grpc.RpcMethodHandler:
    """A handler that ends the call without parsing the request.

    It is registered as stream-stream without deserializers, so a unary request body is never
    read.  A client stream (``Work``) gets its first message taken off the wire as raw bytes
    and discarded before the status goes out: ending a call while the client's first message
    is still in flight makes the Python client report INTERNAL ("Internal error from Core")
    instead of our status in a fraction of the calls.
    """

    async def reject(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        if client_streaming:
            await drain_first(request_iterator)
        await context.abort(code, message)

    return grpc.stream_stream_rpc_method_handler(reject)


async def drain_first(request_iterator: Any) -> None:
    """Take a client stream's first message off the wire (at most :data:`_DRAIN_S`) before the
    call is refused (see :func:`_rejecter`; also ``grpc_workers``' refusals)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_DRAIN_S):
            await request_iterator.__anext__()


def peer_dns(context: grpc.aio.ServicerContext) -> list[str]:
    """The DNS subject alternative names of the caller's verified client certificate (none
    without mutual TLS)."""
    try:
        names = context.auth_context().get("peer_dns", ())
    except Exception:  # (no security context)
        return []
    return [n.decode("ascii", "replace") if isinstance(n, bytes) else str(n) for n in names]


def _cert_checked(handler: grpc.RpcMethodHandler, app: ServerApp, action: str) -> grpc.RpcMethodHandler:
    """``handler`` authenticating the caller by its client certificate first (module doc)."""
    if handler.request_streaming:
        return handler  # Work: its handler authenticates (grpc_workers.py)

    async def check(context: grpc.aio.ServicerContext) -> None:
        try:
            app.auth.check(None, action, peer_dns=peer_dns(context))
        except AuthError as e:
            await context.abort(*_status(e))

    parse = handler.request_deserializer or (lambda raw: raw)

    async def deserialize(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        try:
            return parse(raw)
        except Exception:  # (what gRPC answers for a request it cannot parse)
            await context.abort(grpc.StatusCode.INTERNAL, "could not deserialize the request")

    if handler.unary_unary is not None:
        uu: Any = handler.unary_unary

        async def unary(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            await check(context)
            return await uu(await deserialize(raw, context), context)

        return grpc.unary_unary_rpc_method_handler(unary, None, handler.response_serializer)
    us: Any = handler.unary_stream

    async def stream(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await check(context)
        async for msg in us(await deserialize(raw, context), context):
            yield msg

    return grpc.unary_stream_rpc_method_handler(stream, None, handler.response_serializer)


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates every call and checks its role before the body is read
    (docs/reference/behaviour.md#auth)."""

    def __init__(self, app: ServerApp) -> None:
        self.app = app

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        action = GRPC_METHOD_ACTIONS.get(handler_call_details.method)
        if action is not None:
            header = _auth_header(handler_call_details.invocation_metadata)
            if header is None and self.app.auth.certs_enabled:
                handler = await continuation(handler_call_details)
                return None if handler is None else _cert_checked(handler, self.app, action)
            try:
                self.app.auth.check(header, action)
            except AuthError as e:
                code, msg = _status(e)
                return _rejecter(code, msg, handler_call_details.method in _CLIENT_STREAMING)
        return await continuation(handler_call_details)


# ---------------------------------------------------------------------------------------------
# helpers


def _principal(app: ServerApp, context: grpc.aio.ServicerContext) -> Principal | None:
    auth = app.auth
    if not auth.auth_enabled:
        return None  # (what authenticate answers without auth; skips copying the metadata)
    header = _auth_header(context.invocation_metadata())
    if header is None and auth.certs_enabled:
        return auth.authenticate(None, peer_dns(context))
    return auth.authenticate(header)


async def _from_history(app: ServerApp, principal: Principal | None, ref: int | str, miss: ApiError) -> Any:
    """The finished task ``ref`` from the store's history (``task_history``), else ``miss``."""
    rec = None
    if miss.code == "not_found":
        rec = await task_history.finished_from_store(app, principal, ref, BlobCodec())
    if rec is None:
        raise miss
    return rec


def _ref(r: pb.TaskRef) -> int | str:
    which = r.WhichOneof("target")
    if which == "id" and r.id > 0:
        return int(r.id)
    if which == "key" and r.key:
        return str(r.key)
    raise ApiError("invalid_argument", "task reference must be an id >= 1 or a non-empty key", "invalid")


def _wait_timeout(request: Any, name: str) -> float | None:
    """An optional wait timeout field: None when unset; negative, NaN or infinite →
    INVALID_ARGUMENT (as HTTP's ``?timeout=``)."""
    if not request.HasField(name):
        return None
    try:
        return convert.wait_timeout(name, getattr(request, name))
    except convert.InvalidArgument as e:
        raise ApiError("invalid_argument", str(e)) from None


def _pools_filter(app: ServerApp, principal: Principal | None, requested: Any) -> list[str]:
    """A ListTasks/Watch pool filter: an unknown pool, or another token's, → NOT_FOUND (the same
    answer: a token cannot tell which pools exist beyond its own)."""
    for p in requested:
        if p not in app.sched.pools or not allows_pool(principal, p):
            raise ApiError("not_found", f"unknown pool '{p}'", "unknown_pool")
    return restrict_pools(principal, requested) or []


def _statuses(values: Any) -> list[str]:
    out = []
    for v in values:
        if v not in STATUS_FROM_WIRE:
            raise ApiError("invalid_argument", f"unknown task status value {v}", "invalid")
        out.append(STATUS_NAMES[STATUS_FROM_WIRE[v]])
    return out


#: trailing metadata of an error whose HTTP ``code`` is not its status name (``unknown_pool``,
#: ``overloaded``, ...): a shard that forwarded the call over HTTP answers with it (ours)
ERROR_CODE_KEY = "cronoq-error-code"


async def _abort(context: grpc.aio.ServicerContext, e: BaseException) -> None:
    code, msg = _status(e)
    if code == grpc.StatusCode.INTERNAL:
        log.exception("internal error in a gRPC handler", exc_info=e)
    if isinstance(e, ApiError) and e.code != e.status:
        await context.abort(code, msg, trailing_metadata=((ERROR_CODE_KEY, e.code),))
    await context.abort(code, msg)


class _Servicer(Protocol):
    app: ServerApp


S = TypeVar("S", bound=_Servicer)
Req = TypeVar("Req")
Resp = TypeVar("Resp")


def rpc(
    method: Callable[[S, Principal | None, Req, grpc.aio.ServicerContext], Awaitable[Resp]],
) -> Callable[[S, Req, grpc.aio.ServicerContext], Awaitable[Resp]]:
    """A unary handler written as ``method(self, principal, request, context)``: the caller's
    principal is derived first (:func:`_principal`), and any exception ends the call with the
    status and message :func:`_abort` maps it to (the one error block of every unary RPC)."""

    @functools.wraps(method)
    async def handler(self: S, request: Req, context: grpc.aio.ServicerContext) -> Resp:
        try:
            return await method(self, _principal(self.app, context), request, context)
        except Exception as e:
            await _abort(context, e)
            raise AssertionError("unreachable") from None

    return handler


# ---------------------------------------------------------------------------------------------
# Tasks


class TasksServicer(pb_grpc.TasksServicer):
    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.watches = WatchFanout(app)

    @rpc
    async def Submit(
        self, principal: Principal | None, request: pb.SubmitRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitResponse:
        app = self.app
        timeout = _wait_timeout(request, "wait_timeout_s")  # (checked before anything is created)
        tid, dup = await app.submit(principal, request.task)
        resp = pb.SubmitResponse(id=tid, duplicate=dup)
        if request.wait:
            t = await app.wait(principal, tid, timeout)
            resp.result.CopyFrom(convert.task_result(t))
        return resp

    @rpc
    async def SubmitMany(
        self, principal: Principal | None, request: pb.SubmitManyRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitManyResponse:
        """Independent submissions in one call (what the client makes of concurrent
        ``submit()`` calls): each item is created or refused on its own, as ``Submit`` would,
        and all of them in one engine step and one store commit."""
        app = self.app
        app.require_leader()
        if len(request.tasks) > app.limits.max_tasks_per_batch:
            raise ApiError(
                "invalid_argument",
                f"SubmitMany larger than limits.max_tasks_per_batch ({app.limits.max_tasks_per_batch})",
                "invalid",
            )
        # in order, without awaiting: every item reaches the engine before the call awaits its
        # one commit, so a key repeated in the call is a duplicate of its first use
        outcomes = await app.submit_many(principal, request.tasks)
        resp = pb.SubmitManyResponse()
        add = resp.results.add
        for outcome in outcomes:
            r = add()
            if isinstance(outcome, Exception):
                code, msg = _status(outcome)
                if code == grpc.StatusCode.INTERNAL:
                    log.error("internal error in SubmitMany", exc_info=outcome)
                r.error.code = code.name.lower()
                r.error.message = msg
            else:
                tid, dup = outcome
                sub = r.submitted
                sub.id = tid
                if dup:
                    sub.duplicate = True
        return resp

    @rpc
    async def SubmitBatch(
        self, principal: Principal | None, request: pb.SubmitBatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitBatchResponse:
        results = await self.app.submit_batch(principal, list(request.tasks))
        resp = pb.SubmitBatchResponse()
        add = resp.tasks.add  # (in place: a third of the cost of building and copying each)
        for i, d in results:
            r = add()
            r.id = i
            if d:
                r.duplicate = True
        return resp

    @rpc
    async def Cancel(
        self, principal: Principal | None, request: pb.CancelRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelResponse:
        ok = await self.app.cancel(principal, _ref(request.task))
        return pb.CancelResponse(cancelled=ok)

    @rpc
    async def Get(
        self, principal: Principal | None, request: pb.GetRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskInfo:
        app = self.app
        ref = _ref(request.task)
        try:
            t = app.get(principal, ref)
        except ApiError as miss:  # after the engine's retention: the store's history
            info = task_history.history_info(app, await _from_history(app, principal, ref, miss))
            held: object = None
        else:
            info, held = app.task_info(t, detail=True), t.payload
        if request.include_payload:
            await add_payload(app, info, held)
        return info

    @rpc
    async def ListTasks(
        self, principal: Principal | None, request: pb.ListTasksRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTasksResponse:
        app = self.app
        pools = _pools_filter(app, principal, request.pools)
        tasks, next_after = app.list_tasks(
            principal,
            pools,
            _statuses(request.statuses),
            request.after,
            request.limit,
            kinds=[k for k in request.kinds if k],
            tags=dict(request.tags),
            created_after_ns=(
                request.created_after_unix_ns if request.HasField("created_after_unix_ns") else None
            ),
            created_before_ns=(
                request.created_before_unix_ns if request.HasField("created_before_unix_ns") else None
            ),
        )
        return pb.ListTasksResponse(tasks=[app.task_info(t) for t in tasks], next_after=next_after)

    @rpc
    async def Wait(
        self, principal: Principal | None, request: pb.WaitRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskResult:
        app = self.app
        timeout = _wait_timeout(request, "timeout_s")
        ref = _ref(request.task)
        try:
            t = await app.wait(principal, ref, timeout)
        except ApiError as miss:  # after the engine's retention: the store's history
            return task_history.history_task_result(await _from_history(app, principal, ref, miss))
        return convert.task_result(t)

    async def Watch(
        self, request: pb.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StatusEvent]:
        app = self.app
        try:
            principal = _principal(app, context)
            app.check_filter(
                items=len(request.ids) + len(request.keys) + len(request.pools), keys=request.keys
            )
            pools = _pools_filter(app, principal, request.pools)
            ids, keys, every = list(request.ids), list(request.keys), request.all_transitions
            keep = event_filter(principal, pools, ids, keys, every, app.task_of_tenant)
            if request.progress:  # docs/how-to/progress.md#event-streams
                keep_p = event_filter(principal, pools, ids, keys, True, app.task_of_tenant)
                keep = with_progress(keep, keep_p)
            group = filter_group(principal, pools, ids, keys, every) if keep is not None else None
            hub, sub = self.watches.subscribe(principal, group, keep, request.progress)
        except Exception as e:
            await _abort(context, e)
            return
        try:
            # the subscription is live (docs/reference/behaviour.md#server-details)
            await context.send_initial_metadata(())
            while True:
                await sub.wait(WATCH_IDLE_S)
                if sub.chunks:  # what was published before an end is still sent
                    for msg in sub.take():
                        yield msg
                elif sub.end is not None:
                    break
            err = sub.end
        finally:
            self.watches.leave(principal, hub, sub)
        await context.abort(grpc_status(err.status), err.message)

    # -- operations (docs/how-to/operations.md) ------------------------------------------------

    @rpc
    async def Replay(
        self, principal: Principal | None, request: pb.ReplayRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitResponse:
        tid = await ops.replay(self.app, principal, _ref(request.task), request.force)
        return pb.SubmitResponse(id=tid)

    @rpc
    async def ReplayWhere(
        self, principal: Principal | None, request: pb.BulkRequest, context: grpc.aio.ServicerContext
    ) -> pb.BulkResponse:
        return await self._bulk("replay", principal, request)

    @rpc
    async def CancelWhere(
        self, principal: Principal | None, request: pb.BulkRequest, context: grpc.aio.ServicerContext
    ) -> pb.BulkResponse:
        return await self._bulk("cancel", principal, request)

    @rpc
    async def Signal(
        self, principal: Principal | None, request: pb.SignalRequest, context: grpc.aio.ServicerContext
    ) -> pb.SignalResponse:
        from cronoq.server.signals import payload_of, send_signal

        payload = payload_of(request.payload_json)
        dup = await send_signal(self.app, principal, request.name, payload)
        return pb.SignalResponse(duplicate=dup)

    async def _bulk(
        self, action: str, principal: Principal | None, request: pb.BulkRequest
    ) -> pb.BulkResponse:
        filt = ops.filter_from_msg(request.filter)
        res = await ops.bulk(self.app, principal, action, filt, request.request_key, request.force)
        return pb.BulkResponse(matched=res.matched, acted=res.acted, resumed=res.resumed)


# ---------------------------------------------------------------------------------------------
# Admin


def _recurring_info(app: ServerApp, info: RecurringInfo) -> pb.RecurringInfo:
    return convert.recurring_msg(info)


def _pause_rpc(kind: str, field: str, paused: bool) -> Any:
    """The handler that pauses (or resumes) the ``kind`` named by the request's ``field``."""

    async def pause(
        self: _Servicer, principal: Principal | None, request: Any, context: grpc.aio.ServicerContext
    ) -> pb.PauseResponse:
        changed = await ops.set_paused(self.app, principal, kind, getattr(request, field), paused)
        return pb.PauseResponse(changed=changed)

    pause.__name__ = pause.__qualname__ = f"{'Pause' if paused else 'Resume'}{kind.capitalize()}"
    return rpc(pause)


class _OpsAdmin:
    """The operations RPCs of the Admin service (docs/how-to/operations.md), admin only."""

    app: ServerApp

    PausePool = _pause_rpc("pool", "pool", True)
    ResumePool = _pause_rpc("pool", "pool", False)
    PauseRecurring = _pause_rpc("recurring", "name", True)
    ResumeRecurring = _pause_rpc("recurring", "name", False)

    @rpc
    async def TriggerRecurring(
        self, principal: Principal | None, request: pb.RecurringNameRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitResponse:
        tid = await ops.trigger(self.app, principal, request.name)
        return pb.SubmitResponse(id=tid)


class AdminServicer(_OpsAdmin, pb_grpc.AdminServicer):
    def __init__(self, app: ServerApp) -> None:
        self.app = app

    @rpc
    async def Snapshot(
        self, principal: Principal | None, request: pb.Empty, context: grpc.aio.ServicerContext
    ) -> pb.SnapshotResponse:
        msg: pb.SnapshotResponse = await self.app.snapshot_msg(principal)
        return msg

    @rpc
    async def ListResourceKeys(
        self, principal: Principal | None, request: pb.ResourceKeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResourceKeysResponse:
        msg: pb.ResourceKeysResponse = await self.app.resource_keys(request.resource, request.top)
        return msg

    @rpc
    async def AddRecurring(
        self, principal: Principal | None, request: pb.RecurringRequest, context: grpc.aio.ServicerContext
    ) -> pb.Empty:
        if not request.name:
            raise ApiError("invalid_argument", "recurring schedule name must not be empty", "invalid")
        if not request.cron.strip():
            raise ApiError("invalid_argument", "cron expression must not be empty", "invalid")
        await self.app.add_recurring(principal, request)
        return pb.Empty()

    @rpc
    async def RemoveRecurring(
        self,
        principal: Principal | None,
        request: pb.RemoveRecurringRequest,
        context: grpc.aio.ServicerContext,
    ) -> pb.RemoveRecurringResponse:
        app = self.app
        if principal is not None and principal.pools is not None:
            infos = {i.name: i for i in await app.list_recurring(None)}
            info = infos.get(request.name)
            if info is not None and info.pool not in principal.pools:
                return pb.RemoveRecurringResponse(removed=False)  # (as a missing one: no oracle)
        removed = await app.remove_recurring(principal, request.name)
        return pb.RemoveRecurringResponse(removed=removed)

    @rpc
    async def ListWorkers(
        self, principal: Principal | None, request: pb.Empty, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkersResponse:
        sessions = self.app.list_workers(principal)
        return pb.ListWorkersResponse(
            workers=[convert.worker_info(s) for s in sorted(sessions, key=lambda s: s.id)]
        )

    @rpc
    async def ListRecurring(
        self, principal: Principal | None, request: pb.Empty, context: grpc.aio.ServicerContext
    ) -> pb.ListRecurringResponse:
        app = self.app
        infos = await app.list_recurring(principal)
        return pb.ListRecurringResponse(
            schedules=[_recurring_info(app, i) for i in sorted(infos, key=lambda i: i.name)]
        )


class _GenericOnly:
    """A stand-in for the server given to a generated ``add_*Servicer_to_server``: it passes
    the service's generic handler on and drops its *registered* method handlers."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.generic = False

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.generic = True
        self.server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        if not self.generic:  # (stubs that only register methods: serve them generically)
            self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))


def add_generic_only(add: Callable[[Any, Any], None], servicer: Any, server: Any) -> None:
    """``add(servicer, server)`` (a generated ``add_*Servicer_to_server``) with generic handlers only.

    Performance: ``grpc.aio``'s server keeps one pending call request per *registered* method
    and, for every call it accepts, waits on all of them (``asyncio.wait`` over the set, adding
    and removing a done callback on each); with only generic handlers it waits on one.  With
    our ~15 methods that is a measurable share of a unary call's server CPU.  Clients see no
    difference: the methods, paths and (de)serializers are the same.
    """
    add(servicer, _GenericOnly(server))


class UnaryBudget:
    """``limits.max_concurrent_requests``: the unary calls in progress on the gRPC listener.

    The listener's global limit is the sum of three budgets (unary calls, Watch streams, worker
    sessions); each is enforced by its own handlers, so a flood of one kind (e.g. thousands of
    long ``Wait`` calls) is refused with RESOURCE_EXHAUSTED before it can take the others'
    share, and clients never lock workers out.  With auth on, one token or certificate
    principal holds at most ``limits.max_requests_per_principal`` of it (principal_shares.py),
    so one tenant's long ``Wait`` calls never lock the others out.
    """

    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.inflight = 0
        self.shares = Shares()

    def _key(self, context: grpc.aio.ServicerContext) -> str | None:
        """The caller's share key (None: no shares, auth is off)."""
        if not self.app.auth.auth_enabled:
            return None
        md = dict(context.invocation_metadata() or ())
        token = md.get("authorization")
        names = () if token else peer_dns(context)
        return principal_key(token if isinstance(token, str) else None, names)

    def wrap(self, method: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]) -> Any:
        async def budgeted(request: Any, context: grpc.aio.ServicerContext) -> Any:
            lim = self.app.limits
            if self.inflight >= lim.max_concurrent_requests:
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "too many concurrent requests "
                    f"(limits.max_concurrent_requests {lim.max_concurrent_requests})",
                )
            key = self._key(context)
            if key is not None and not self.shares.take(key, lim.max_requests_per_principal):
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "too many concurrent requests for this token "
                    f"(limits.max_requests_per_principal {lim.max_requests_per_principal})",
                )
            self.inflight += 1
            try:
                return await method(request, context)
            finally:
                self.inflight -= 1
                if key is not None:
                    self.shares.give(key)

        return budgeted


def _budget_unary(servicer: Any, service: str, budget: UnaryBudget) -> Any:
    """Wrap every unary-unary method of ``servicer`` (read from the compiled contract) in
    ``budget``; streaming methods keep their own budgets."""
    for m in pb.DESCRIPTOR.services_by_name[service].methods:
        if not (m.client_streaming or m.server_streaming):
            setattr(servicer, m.name, budget.wrap(getattr(servicer, m.name)))
    return servicer


#: Layers the Tasks and Admin servicers pass through before they are registered, in order:
#: ``layer(app, servicer, service)`` returns the servicer to use.  A layer registers itself
#: (:func:`add_service_layer`; the shard router, docs/how-to/shards.md, when the app has shards),
#: so this module imports none of them.
SERVICE_LAYERS: list[Callable[[ServerApp, Any, str], Any]] = []


def add_service_layer(layer: Callable[[ServerApp, Any, str], Any]) -> None:
    """Put ``layer`` in front of the Tasks and Admin servicers registered from now on (once)."""
    if layer not in SERVICE_LAYERS:
        SERVICE_LAYERS.append(layer)


def register(server: Any, app: ServerApp) -> UnaryBudget:
    """Add the Tasks and Admin services to a ``grpc.aio`` server (see :func:`add_generic_only`),
    behind the :data:`SERVICE_LAYERS`, their unary calls under one :class:`UnaryBudget` (returned)."""
    budget = UnaryBudget(app)
    tasks: Any = TasksServicer(app)
    admin: Any = AdminServicer(app)
    for layer in SERVICE_LAYERS:
        tasks, admin = layer(app, tasks, "Tasks"), layer(app, admin, "Admin")
    tasks = _budget_unary(tasks, "Tasks", budget)
    admin = _budget_unary(admin, "Admin", budget)
    add_generic_only(pb_grpc.add_TasksServicer_to_server, tasks, server)
    add_generic_only(pb_grpc.add_AdminServicer_to_server, admin, server)
    return budget
