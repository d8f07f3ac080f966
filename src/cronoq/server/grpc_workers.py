"""``Workers.Work``: the bidirectional worker stream (worker protocol versions 3 to 7).

One call is one :class:`~cronoq.server.workers.WorkerSession`.  The first message must be
``Register``; the server answers ``Registered`` (granted slots, lease ttl, limits, and the
session's protocol version: the lower of the worker's and ours) before any ``Lease``.  A reader
task feeds the worker's reports into the session; this coroutine writes whatever the session
queues (``Lease``, ``Abort``, ``Shutdown``).  In a version-4 session it writes every ``Lease``
and ``Abort`` queued by the time it runs as one ``ServerBatch`` (bounded in items and bytes, see
:mod:`cronoq.proto.protocol`); a lone lease in a trickle (the previous write was recent, nothing
else queued, and the worker has a free slot, so more may follow) first lingers up to
``LEASE_LINGER_S`` for company (:mod:`cronoq.proto.flush`), so a trickle costs a message per few
leases while a lone lease on an idle stream, or a burst, goes out at once. The worker's
``WorkerBatch`` reports are handled in order like single ones, :data:`REPORTS_PER_TURN` at a
time with a yield to the loop between chunks: a batch is bounded by the message size, not its
item count, and 20,000 reports in one 300 KiB message must not hold every other call back.
A version-5 session may also send ``ProgressReport`` (alone or inside a batch); an older
session that sends one breaks the protocol.  A version-7 session may send ``DurableCall``
(alone or inside a batch), answered by a ``DurableReply`` (server/worker_durable.py); an older
session that sends one breaks the protocol too.  The stream ends when the worker half-closes,
disconnects, breaks the protocol (INVALID_ARGUMENT), stops reading (its outbound queue fills
up), or the server shuts down or stops leading.  A session refused before registering (bad
credentials, a standby) has its first message read before the refusal is sent (:func:`_refuse`),
so the worker sees the refusal's status rather than grpcio's ``INTERNAL`` for a failed write.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import grpc

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc
from cronoq.proto.enums import PRIORITY_TO_WIRE
from cronoq.proto.flush import FlushQueue, batched
from cronoq.proto.protocol import (
    BATCH_MARGIN_BYTES,
    BATCHING_VERSION,
    DURABLE_VERSION,
    LEASE_LINGER_S,
    MAX_BATCH_ITEMS,
    PROGRESS_VERSION,
)
from cronoq.server.app import ApiError, ServerApp
from cronoq.server.auth import PermissionDenied, Unauthenticated, allows_pool, stamp_labels
from cronoq.server.grpc_api import add_generic_only, drain_first, peer_dns
from cronoq.server.workers import (
    AbortMsg,
    Blob,
    DurableCallMsg,
    DurableReplyMsg,
    LeaseMsg,
    ServerMsg,
    ShutdownMsg,
    WorkerSession,
)

log = logging.getLogger("cronoq.server.workers")

#: reports of one WorkerBatch handled per loop turn (our workers send at most MAX_BATCH_ITEMS)
REPORTS_PER_TURN = 2 * MAX_BATCH_ITEMS


def parents_to_proto(parents: tuple[Any, ...], out: Any) -> None:
    """``Lease.parents`` (protocol version 6) from the attempt's outcomes (outputs as Blobs)."""
    for o in parents:
        p = out.add()
        p.id = o.id
        p.status = o.status
        if o.key:
            p.key = o.key
        if o.message:
            p.message = o.message
        if isinstance(o.output, Blob):
            p.has_output = True
            p.output = o.output.data
            p.content_type = o.output.content_type


def to_proto(msg: ServerMsg, out: pb.ServerMessage | None = None) -> pb.ServerMessage:
    """``msg`` as a ``ServerMessage``, built into ``out`` when given (a batch's new item)."""
    if out is None:
        out = pb.ServerMessage()
    if isinstance(msg, LeaseMsg):
        # Built in place: a ``Lease`` built with keywords and copied into a ``ServerMessage``
        # costs about three times as much (1.9 against 0.6 µs), once per task.
        lease = out.lease
        lease.lease = msg.lease
        lease.task_id = msg.task_id
        lease.attempt = msg.attempt
        if msg.payload:
            lease.payload = msg.payload
        if msg.content_type:
            lease.content_type = msg.content_type
        if msg.kind:
            lease.kind = msg.kind
        if msg.key:
            lease.key = msg.key
        if msg.tags:
            lease.tags.update(msg.tags)
        if msg.pool:
            lease.pool = msg.pool
        lease.priority = PRIORITY_TO_WIRE[msg.priority]  # type: ignore[assignment]
        if msg.timeout_s is not None:
            lease.timeout_s = msg.timeout_s
        if msg.deadline_unix_ns is not None:
            lease.deadline_unix_ns = msg.deadline_unix_ns
        if msg.lease_ttl_s is not None:
            lease.lease_ttl_s = msg.lease_ttl_s
        if msg.parents:  # protocol version 6 (workers.py leaves them out for older sessions)
            parents_to_proto(msg.parents, lease.parents)
        if msg.resumes:  # protocol version 7 (an older worker skips the unknown field)
            lease.resumes = msg.resumes
        if msg.journal_json:  # protocol version 7 (workers.py leaves it out for older sessions)
            lease.journal_json = msg.journal_json
        return out
    if isinstance(msg, DurableReplyMsg):
        return durable_reply_to_proto(msg, out)
    if isinstance(msg, AbortMsg):
        out.abort.lease = msg.lease
        out.abort.reason = msg.reason
        return out
    if isinstance(msg, ShutdownMsg):
        out.shutdown.reason = msg.reason
        out.shutdown.not_leader = msg.not_leader
        return out
    reg = pb.Registered(
        worker_id=msg.worker_id,
        slots=msg.slots,
        protocol_version=msg.protocol_version,
        max_message_bytes=msg.max_message_bytes,
    )
    if msg.lease_ttl_s is not None:
        reg.lease_ttl_s = msg.lease_ttl_s
    out.registered.CopyFrom(reg)
    return out


def durable_reply_to_proto(msg: DurableReplyMsg, out: pb.ServerMessage) -> pb.ServerMessage:
    """A ``DurableReply`` (protocol version 7)."""
    r = out.durable
    r.SetInParent()
    r.call = msg.call
    if msg.cursor:
        r.cursor = msg.cursor
    if msg.parked:
        r.parked = True
    if msg.error:
        r.error = msg.error
        r.error_kind = msg.error_kind
        return out
    if msg.result is not None:
        r.result_json = json.dumps(msg.result, allow_nan=False)
    if msg.outcomes:
        parents_to_proto(msg.outcomes, r.outcomes)
    return out


class _Violation(Exception):
    pass


async def _refuse(
    it: AsyncIterator[pb.WorkerMessage],
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    message: str,
) -> None:
    """End a session that is refused before its ``Register`` was read, with ``code``.

    The worker sends ``Register`` as soon as the stream opens.  A status sent before that write
    reached the server makes the write fail on the client, and grpcio's asyncio client then
    reports that failed write as ``INTERNAL: Internal error from Core`` instead of the status
    the server sent (grpc/grpc#36066): a worker would retry a certificate that is not mapped
    for ever rather than stop on ``unauthenticated``.  So the first message is taken off the
    wire (``grpc_api.drain_first``, as the token interceptor's refusals do) before the refusal."""
    await drain_first(it)
    await context.abort(code, message)


def unknown_worker_pool(pool: str) -> str:
    """The refusal of a worker registering on a pool the server does not have (or the token may
    not use: the same words, no existence oracle), with where pools come from: a newcomer's
    first worker for ``--pool emails`` meets a server started without a configuration."""
    return (
        f"unknown pool '{pool}' (a server has the pools its configuration declares under "
        "[[pools]]; started without one, only 'default')"
    )


def _auth_header(context: grpc.aio.ServicerContext) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == "authorization":
            return v if isinstance(v, str) else v.decode()
    return None


class WorkersServicer(pb_grpc.WorkersServicer):
    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.sessions = 0  # Work calls in progress (limits.max_worker_sessions)

    async def Work(
        self, request_iterator: AsyncIterator[pb.WorkerMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerMessage]:
        app = self.app
        if self.sessions >= app.limits.max_worker_sessions:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many worker sessions (limits.max_worker_sessions {app.limits.max_worker_sessions})",
            )
            return
        self.sessions += 1
        try:
            async for out in self._work(request_iterator, context):
                yield out
        finally:
            self.sessions -= 1

    async def _work(
        self, request_iterator: AsyncIterator[pb.WorkerMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerMessage]:
        app = self.app
        it = request_iterator.__aiter__()
        try:
            header = _auth_header(context)
            dns = peer_dns(context) if header is None and app.auth.certs_enabled else ()
            principal = app.auth.check(header, "work", peer_dns=dns)
        except Unauthenticated as e:
            await _refuse(it, context, grpc.StatusCode.UNAUTHENTICATED, str(e))
            return
        except PermissionDenied as e:
            await _refuse(it, context, grpc.StatusCode.PERMISSION_DENIED, str(e))
            return
        try:
            app.require_leader()
        except ApiError as e:
            await _refuse(it, context, grpc.StatusCode.UNAVAILABLE, e.message)
            return
        try:
            async with asyncio.timeout(app.limits.request_timeout_s):
                first = await it.__anext__()
        except (StopAsyncIteration, TimeoutError):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be Register")
            return
        if first.WhichOneof("msg") != "register":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be Register")
            return
        reg = first.register
        # another shard's pool: redirected, never forwarded (docs/how-to/shards.md#workers)
        wrong = app.router.worker_redirect(reg.pool) if app.router is not None else None
        if wrong is not None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, wrong.message, trailing_metadata=wrong.metadata
            )
            return
        if reg.pool not in app.sched.pools or not allows_pool(principal, reg.pool):  # (no oracle)
            await context.abort(grpc.StatusCode.NOT_FOUND, unknown_worker_pool(reg.pool))
            return
        try:
            app.auth.authorize(principal, "work", reg.pool)
            labels = stamp_labels(principal, dict(reg.labels)) if principal is not None else dict(reg.labels)
        except PermissionDenied as e:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(e))
            return
        kinds = frozenset(reg.kinds) or None  # (none: a plain handler, any kind)
        session = app.registry.register(
            reg.pool, reg.worker_name, labels, reg.slots, reg.protocol_version, kinds
        )
        session.principal = principal  # (bounds what its tasks may spawn: server/worker_durable.py)
        log.info(
            "worker %s '%s' registered on pool '%s' with %d slots",
            session.id,
            session.name,
            reg.pool,
            session.slots,
        )
        violation: list[str] = []
        reader = asyncio.get_running_loop().create_task(self._read(it, session, violation))
        budget = app.registry.max_message_bytes - BATCH_MARGIN_BYTES
        batching = session.version >= BATCHING_VERSION
        writes = outbound(session.outbox, batching, budget, lambda: session.free)
        try:
            async with contextlib.aclosing(writes):
                async for out in writes:
                    yield out
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            app.registry.disconnect(session, session.close_reason or "worker disconnected")
            log.info("worker %s disconnected: %s", session.id, session.close_reason)
        if violation:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, violation[0])

    async def _read(
        self, it: AsyncIterator[pb.WorkerMessage], s: WorkerSession, violation: list[str]
    ) -> None:
        app = self.app
        reason = "worker closed the stream"
        try:
            async for m in it:
                if m.WhichOneof("msg") == "batch":
                    if s.version < BATCHING_VERSION:
                        raise _Violation("WorkerBatch needs worker protocol version 4")
                    for i, inner in enumerate(m.batch.messages):
                        if i and not i % REPORTS_PER_TURN:
                            await asyncio.sleep(0)  # (one batch never holds the loop for long)
                        if inner.WhichOneof("msg") == "batch":
                            raise _Violation("a WorkerBatch may not contain another batch")
                        _report(s, inner)
                else:
                    _report(s, m)
        except _Violation as e:
            violation.append(str(e))
            reason = f"protocol violation: {e}"
        except asyncio.CancelledError:
            raise
        except Exception as e:  # transport error: the worker is gone
            reason = f"worker stream failed: {e}"
        app.registry.disconnect(s, reason)


def _report(s: WorkerSession, m: pb.WorkerMessage) -> None:
    """One report of the worker into its session (a protocol breach raises :class:`_Violation`)."""
    which = m.WhichOneof("msg")
    if which == "heartbeat":
        s.heartbeat(m.heartbeat.lease)
    elif which == "complete":
        c = m.complete
        s.complete(c.lease, bytes(c.output), c.content_type)
    elif which == "fail":
        f = m.fail
        ra = f.retry_after_s if f.HasField("retry_after_s") else None
        if ra is not None and (not math.isfinite(ra) or ra < 0):
            raise _Violation("Fail.retry_after_s must be finite and >= 0")
        s.fail(f.lease, f.message, f.permanent, ra)
    elif which == "set_slots":
        s.set_slots(m.set_slots.slots)
    elif which == "nack":
        s.nack(m.nack.lease, m.nack.reason)
    elif which == "cancelled":
        s.cancelled(m.cancelled.lease)
    elif which == "progress":
        if s.version < PROGRESS_VERSION:
            raise _Violation("ProgressReport needs worker protocol version 5")
        p = m.progress
        s.progress(p.lease, p.done, p.total if p.HasField("total") else None, p.message or None)
    elif which == "durable":
        if s.version < DURABLE_VERSION:
            raise _Violation("DurableCall needs worker protocol version 7")
        d = m.durable
        try:
            args = json.loads(d.args_json) if d.args_json else {}
        except ValueError:
            raise _Violation("DurableCall.args_json is not JSON") from None
        if not isinstance(args, dict):
            raise _Violation("DurableCall.args_json must be a JSON object")
        s.durable(DurableCallMsg(d.lease, d.call, d.op, args, list(d.specs), d.replayed))
    elif which == "register":
        raise _Violation("Register may only be sent once, first")
    else:
        raise _Violation("empty or unknown worker message")


def _lease_bytes(msg: ServerMsg) -> int | None:
    """An upper bound of the bytes ``msg`` adds to a batch (counted fields plus framing); None
    for what never joins one (anything but a Lease or Abort)."""
    if isinstance(msg, AbortMsg):
        return len(msg.reason) + 32
    if not isinstance(msg, LeaseMsg):
        return None
    n = len(msg.payload) + len(msg.content_type) + len(msg.kind) + len(msg.key) + len(msg.pool) + 96
    n += len(msg.journal_json)
    for o in msg.parents:
        n += (
            len(o.key or "")
            + len(o.message or "")
            + 48
            + (len(o.output.data) if isinstance(o.output, Blob) else 0)
        )
    if msg.tags:
        n += sum(len(k) + len(v) + 8 for k, v in msg.tags.items())
    return n


def _pack(items: list[ServerMsg]) -> pb.ServerMessage:
    out = pb.ServerMessage()
    messages = out.batch.messages
    for m in items:
        to_proto(m, messages.add())
    return out


def _single(msg: ServerMsg) -> pb.ServerMessage:
    return to_proto(msg)


def _ends_stream(msg: ServerMsg) -> bool:
    return isinstance(msg, ShutdownMsg) and msg.not_leader


def outbound(
    outbox: FlushQueue[ServerMsg],
    batching: bool,
    budget: int,
    room: Callable[[], int] = lambda: MAX_BATCH_ITEMS,
) -> AsyncGenerator[pb.ServerMessage, None]:
    """The session's outbox as stream messages (:func:`cronoq.proto.flush.batched`), until its
    end (``None``) or a not-leader ``Shutdown``. With ``batching`` (version 4 and up), Leases
    and Aborts go out packed into ``ServerBatch`` messages; a lone one lingers up to
    ``LEASE_LINGER_S`` in a trickle while ``room()`` (the worker's free slots) says more leases
    may follow (with every slot taken none can come until the worker reports)."""
    limit = budget if batching else 0
    return batched(
        outbox,
        budget=lambda: limit,
        linger_s=LEASE_LINGER_S,
        room=room,
        size_of=_lease_bytes,
        single=_single,
        pack=_pack,
        last=_ends_stream,
    )


def register(server: Any, app: ServerApp) -> None:
    add_generic_only(pb_grpc.add_WorkersServicer_to_server, WorkersServicer(app), server)
