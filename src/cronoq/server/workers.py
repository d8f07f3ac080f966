"""Remote workers: sessions, slot grants, and the executor that sends attempts to them.

Theory of operation
-------------------
The server runs the same :class:`~cronoq.runtime.scheduler.Scheduler` as the library.  Each
server pool's executor is a :class:`RemoteExecutor`: when the engine dispatches an attempt
(having already chosen a worker *group*, i.e. a label set with a free slot), the executor
picks a connected worker of that group with a free granted slot, queues a ``Lease`` message
on the worker's session and awaits the worker's report:

* ``Complete`` → the attempt completes with a :class:`Blob` (output bytes + content type);
* ``Fail`` → the attempt fails, permanently or retryably
  (with ``retry_after``; its message, as a ``Nack``'s reason, cut to
  ``limits.max_report_message_len`` characters: it is kept with the task and stored);
* ``Nack`` → the lease is offered to another worker with a free slot within the same attempt:
  of the same group first, else of another group whose labels suit the task (the engine then
  moves the attempt onto that group's slot: :meth:`Core.move_attempt`); if none, the attempt
  fails retryably (``no worker accepted the lease: …``);
* ``Cancelled`` → the task is cancelled through the scheduler;
* ``ProgressReport`` (protocol version 5) → the attempt's context reports it
  (``TaskContext.progress``); a report with bad values is dropped and counted, and logged at
  most once per interval with counts per worker (:class:`~cronoq.server.log_summary.LogSummary`:
  one line per report would let one batch flood the log and hold the loop), a stale one
  counted like any stale report;
* ``DurableCall`` (protocol version 7) → the registry's ``durable`` handler carries it out
  for the attempt's context and queues the ``DurableReply`` (server/worker_durable.py); when
  the call parks the attempt, the lease leaves the session (its slot is free) and the parked
  reply is queued before any lease the freed slot gets;
* a disconnect → the attempt fails retryably (``worker disconnected``).

The executor is of kind ``REMOTE`` (:mod:`cronoq.runtime.executors`): it queues the lease and
returns; the reports above come back as values, calls on the attempt's context
(``ctx.complete(output)``, ``ctx.fail(message, permanent=, retry_after=)``, ``ctx.abort()``;
:class:`Attempt`), so an attempt costs no asyncio task, no future and no loop turn of its own.
When the engine aborts an attempt (timeout, cancel, lease expiry, shutdown) it calls
``ctx.on_abort`` and ``Abort{lease, reason}`` goes to the worker.  Heartbeats renew
the engine lease through the attempt's context.  Reports for leases a session does not hold
are ignored and counted as stale.

Capacity: a pool's capacity is the sum of the granted slots of its connected workers, per
label set and set of served task kinds (engine worker groups).  A worker serving an app
registers its task kinds and gets leases of those kinds only; one that registers none (a
plain handler, a published worker) serves any kind (docs/how-to/deploys.md).  The registry
recomputes a group's capacity on every register, disconnect and ``SetSlots`` and pushes it
into the scheduler at once.

Nothing here speaks gRPC: sessions exchange plain message objects with the transport layer
through an outbound queue (:meth:`WorkerSession.outbox`); a worker that stops reading (queue
full) is disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from cronoq.errors import Permanent, Retryable
from cronoq.runtime.executors import ExecutorKind

if TYPE_CHECKING:
    from cronoq.engine.model import TaskState
    from cronoq.runtime.context import TaskContext
    from cronoq.runtime.scheduler import Scheduler

from cronoq.proto.flush import FlushQueue
from cronoq.proto.protocol import DEFAULT_MAX_MESSAGE_BYTES, DURABLE_VERSION, PARENTS_VERSION, session_version
from cronoq.server.log_summary import LogSummary

_log = logging.getLogger("cronoq.server.workers")


@dataclass(frozen=True, slots=True, weakref_slot=True)  # (weakref: payload_budget.py)
class Blob:
    """Opaque payload or output bytes with their content type (server mode)."""

    data: bytes = b""
    content_type: str = ""

    def fingerprint(self) -> str:
        """What a spawn's determinism check compares (runtime/parking.py): a digest, not the bytes."""
        return f"{self.content_type}:{hashlib.sha256(self.data).hexdigest()[:16]}"


# ---------------------------------------------------------------------------------------------
# Messages between sessions and the transport (plain objects; the gRPC layer converts them)


@dataclass(slots=True)
class LeaseMsg:
    lease: int
    task_id: int
    attempt: int
    payload: bytes
    content_type: str
    kind: str
    key: str
    tags: dict[str, str]
    timeout_s: float | None
    deadline_unix_ns: int | None
    pool: str
    priority: int  # engine class 0..3
    lease_ttl_s: float | None
    #: how each parent ended (cronoq.Outcome, outputs as Blobs): sent from protocol version 6
    parents: tuple[Any, ...] = ()
    #: runs of the task after a park (``ctx.resumes``): sent from protocol version 7
    resumes: int = 0
    #: its journal's steps as JSON (``Lease.journal_json``): sent from protocol version 7
    journal_json: str = ""


@dataclass(slots=True)
class AbortMsg:
    lease: int
    reason: str


@dataclass(slots=True)
class ShutdownMsg:
    reason: str
    not_leader: bool = False


@dataclass(slots=True)
class RegisteredMsg:
    worker_id: int
    lease_ttl_s: float | None
    slots: int
    protocol_version: int
    max_message_bytes: int


@dataclass(slots=True)
class DurableCallMsg:
    """A durable call of the task under ``lease`` (protocol version 7; ``args`` from JSON,
    ``specs`` the children of a spawn as wire ``TaskSpec`` messages)."""

    lease: int
    call: int
    op: str
    args: dict[str, Any]
    specs: list[Any] = field(default_factory=list)
    #: steps the worker replayed itself since its previous call (``Lease.journal_json``)
    replayed: int = 0


@dataclass(slots=True)
class DurableReplyMsg:
    """The answer to a :class:`DurableCallMsg` (``outcomes``: cronoq.Outcome, outputs as Blobs)."""

    call: int
    parked: bool = False
    result: Any = None
    outcomes: tuple[Any, ...] = ()
    error: str = ""
    error_kind: str = ""
    cursor: int = 0


ServerMsg = LeaseMsg | AbortMsg | ShutdownMsg | RegisteredMsg | DurableReplyMsg


@dataclass(eq=False)
class Attempt:
    """One lease handed to a worker (possibly re-offered after a Nack): its session's reports
    become the attempt's outcome, reported as values on its context (``ctx.complete``,
    ``ctx.fail``, ``ctx.abort``); ``waiter`` instead when the attempt is awaited
    (:meth:`RemoteExecutor.__call__`, inside a tracing span)."""

    lease: int
    ctx: TaskContext
    msg: LeaseMsg
    executor: RemoteExecutor
    group: dict[str, str]  # the engine worker group it runs in (labels)
    kinds: frozenset[str] | None = None  # ... and the task kinds that group serves (None: any)
    session: WorkerSession | None = None
    refused_by: set[int] = field(default_factory=set)
    #: set once the attempt ended (reported, aborted by the engine, parked): later reports are stale
    done: bool = False
    waiter: asyncio.Future[Blob] | None = None

    def _end(self) -> None:
        """Mark the attempt ended and drop the context's hold on it: ``ctx.on_abort`` (this
        attempt's bound ``aborted``, a no-op once ended) made a reference cycle, attempt →
        context → bound method → attempt, that only the cyclic collector freed: five
        objects a task, about half of what triggered its collections
        (docs/architecture/durability.md#garbage-collection).  ``ctx.on_park`` (set by a
        durable call, server/worker_durable.py; an ended attempt parks no more) held it too."""
        self.done = True
        ctx = self.ctx
        if ctx.on_abort is not None:
            ctx.on_abort = None
        if ctx.on_park is not None:
            ctx.on_park = None

    def complete(self, output: Blob) -> None:
        if not self.done:
            self._end()
            note = self.executor.on_output
            if note is not None:
                note(self.msg.task_id, output)
            if self.waiter is None:
                self.ctx.complete(output)
            elif not self.waiter.done():
                self.waiter.set_result(output)

    def fail(self, message: str, permanent: bool, retry_after: float | None) -> None:
        if not self.done:
            self._end()
            if self.waiter is None:
                self.ctx.fail(message, permanent=permanent, retry_after=retry_after)
            elif not self.waiter.done():  # (the awaited form: the error the executor raises)
                self.waiter.set_exception(
                    Permanent(message) if permanent else Retryable(message, retry_after=retry_after)
                )

    def nack(self, reason: str) -> None:
        """Refused: offered to another worker within the same attempt."""
        if not self.done:
            self.executor.offer(self, reason or "rejected")

    def cancelled(self) -> None:
        """Cancelled by the worker: the task ends cancelled (the engine aborts the attempt)."""
        if not self.done:
            self.executor.registry.sched.seam.cancel(self.msg.task_id)
            if not self.done:  # (a task the cancel did not end: a retryable failure)
                self._end()
                if self.waiter is None:
                    self.ctx.abort()
                else:
                    self.waiter.cancel()

    def gone(self, reason: str) -> None:
        self.fail(reason or "worker disconnected", False, None)

    def parked(self) -> None:
        """Parked in a durable call: ended without a report (the engine already knows)."""
        self._end()
        if self.waiter is not None:
            self.waiter.cancel()

    def aborted(self) -> None:
        """The engine aborted the attempt (timeout, cancel, lease expiry, shutdown): the worker
        holding the lease is told so."""
        if self.done:
            return
        self._end()
        session = self.session
        if session is not None and session.attempts.pop(self.lease, None) is not None:
            session.send(AbortMsg(self.lease, self.ctx.abort_reason or "aborted"))

    def waited(self, fut: asyncio.Future[Blob]) -> None:
        """The awaited form's done callback: a cancelled wait is the engine's abort."""
        if fut.cancelled():
            self.aborted()


K = TypeVar("K")

#: A worker group as the registry indexes it: (pool, labels as a frozenset of items, kinds).
GroupKey = tuple[str, frozenset[tuple[str, str]], frozenset[str] | None]


def group_key(pool: str, labels: Mapping[str, str], kinds: frozenset[str] | None) -> GroupKey:
    """The index key of the worker group (``pool``, ``labels``, ``kinds``)."""
    return (pool, frozenset(labels.items()), kinds)


class WorkerSession:
    """One connected worker (one ``Workers.Work`` stream)."""

    def __init__(
        self,
        registry: WorkerRegistry,
        wid: int,
        pool: str,
        name: str,
        labels: dict[str, str],
        slots: int,
        outbox_size: int,
        version: int = 3,
        kinds: frozenset[str] | None = None,
    ) -> None:
        self.registry = registry
        #: the worker protocol version of this session (4: messages may be batched both ways)
        self.version = version
        self.id = wid
        self.pool = pool
        self.name = name
        self.labels = labels
        #: the task kinds this worker serves (None: any, a plain handler)
        self.kinds = kinds
        #: the registry's index key of this worker's group (pool, labels, kinds)
        self.group_key: GroupKey = group_key(pool, labels, kinds)
        self.slots = slots
        self.connected_unix_ns = time.time_ns()
        self.attempts: dict[int, Attempt] = {}
        self.outbox: FlushQueue[ServerMsg] = FlushQueue(maxsize=outbox_size)
        self.closed = False
        self.close_reason = ""
        #: who the worker authenticated as (None: no auth): bounds what its tasks may spawn
        self.principal: Any = None

    @property
    def busy(self) -> int:
        return len(self.attempts)

    @property
    def free(self) -> int:
        return self.slots - len(self.attempts)

    def send(self, msg: ServerMsg) -> bool:
        """Queue a message; a worker that stopped reading (queue full) is disconnected."""
        if self.closed:
            return False
        try:
            self.outbox.put_nowait(msg)
        except asyncio.QueueFull:
            self.registry.disconnect(self, "worker is not reading (outbound queue full)")
            return False
        return True

    # -- reports from the worker -------------------------------------------------------------

    def _take(self, lease: int) -> Attempt | None:
        att = self.attempts.pop(lease, None)
        if att is None:
            self.registry.sched.seam.count_stale()
        return att

    def _cut(self, text: str) -> str:
        """A worker's text as kept: at most ``max_report_message_len`` characters."""
        n = self.registry.max_report_message_len
        return text if len(text) <= n else f"{text[:n]}… (cut at {n} characters)"

    def heartbeat(self, lease: int) -> None:
        att = self.attempts.get(lease)
        if att is None:
            self.registry.sched.seam.count_stale()
            return
        att.ctx.heartbeat()

    def progress(self, lease: int, done: float, total: float | None, message: str | None) -> None:
        att = self.attempts.get(lease)
        if att is None:
            self.registry.sched.seam.count_stale()
            return
        try:
            att.ctx.progress(done, total, message)
        except ValueError as e:
            self.registry.dropped_progress.note(f"worker {self.id} '{self.name}'", f"lease {lease}: {e}")

    def complete(self, lease: int, output: bytes, content_type: str) -> None:
        att = self._take(lease)
        if att is not None:
            att.complete(Blob(output, content_type))
        self.registry._slot_freed(self)

    def fail(self, lease: int, message: str, permanent: bool, retry_after: float | None) -> None:
        att = self._take(lease)
        if att is not None:
            att.fail(self._cut(message), permanent, retry_after)
        self.registry._slot_freed(self)

    def nack(self, lease: int, reason: str) -> None:
        att = self._take(lease)
        if att is not None and not att.done:
            att.refused_by.add(self.id)
            att.nack(self._cut(reason))
        self.registry._slot_freed(self)

    def cancelled(self, lease: int) -> None:
        att = self._take(lease)
        if att is not None:
            att.cancelled()
        self.registry._slot_freed(self)

    def durable(self, call: DurableCallMsg) -> None:
        """A durable call (protocol version 7) for one of this worker's leases."""
        att = self.attempts.get(call.lease)
        handler = self.registry.durable
        if att is None or handler is None:
            if att is None:
                self.registry.sched.seam.count_stale()
            why = "the lease is no longer held" if att is None else "durable calls are not served here"
            self.send(DurableReplyMsg(call.call, error=why, error_kind="scheduler"))
            return
        handler(self, att, call)

    def parked(self, att: Attempt, call: int) -> None:
        """``att`` parked in durable call ``call``: it leaves the session (the slot is free),
        the worker is told first, and the attempt ends without a report."""
        if self.attempts.get(att.lease) is att:
            del self.attempts[att.lease]
        self.send(DurableReplyMsg(call, parked=True))
        att.parked()  # (not in attempts: no Abort; the scheduler already dropped it)
        self.registry._slot_freed(self)

    def set_slots(self, slots: int) -> int:
        granted = self.registry.grant(self.pool, slots)
        self.slots = granted
        self.registry._resize(self.pool, self.labels, self.kinds)
        return granted

    def serves(self, kind: str) -> bool:
        """Whether this worker runs tasks of ``kind``."""
        return self.kinds is None or kind in self.kinds


class WorkerRegistry:
    """Connected workers per pool; grants; the capacity they give the scheduler."""

    def __init__(
        self,
        sched: Scheduler,
        *,
        max_slots_per_worker: int = 1024,
        pool_max_slots: dict[str, int | None] | None = None,
        pool_max: dict[str, int] | None = None,
        lease_ttl_s: dict[str, float | None] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_report_message_len: int = 4096,
        outbox_size: int = 1024,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.sched = sched
        self.max_slots_per_worker = max_slots_per_worker
        self.pool_max_slots = pool_max_slots or {}
        self.pool_max = pool_max or {}
        self.lease_ttl_s = lease_ttl_s or {}
        self.max_message_bytes = max_message_bytes
        #: a Fail message or Nack reason is cut to this many characters (it is kept, and stored)
        self.max_report_message_len = max_report_message_len
        self.outbox_size = outbox_size
        self.sessions: dict[int, WorkerSession] = {}
        #: the sessions of each worker group and of each pool, by id (what picking a worker
        #: reads: it never scans the sessions of other pools or groups)
        self._groups: dict[GroupKey, dict[int, WorkerSession]] = {}
        self._pools: dict[str, dict[int, WorkerSession]] = {}
        self._ids = itertools.count(1)
        self.on_change = on_change
        #: invalid progress reports: counted, one summary line per interval (log_summary.py)
        self.dropped_progress = LogSummary(_log, "progress reports dropped")
        #: carries out durable calls (protocol version 7): set by the server app
        #: (server/worker_durable.py); None refuses them
        self.durable: Callable[[WorkerSession, Attempt, DurableCallMsg], None] | None = None

    # -- membership --------------------------------------------------------------------------

    def grant(self, pool: str, requested: int) -> int:
        """``min(requested, limits.max_slots_per_worker, pool max_slots_per_worker, pool max)``."""
        g = min(max(0, requested), self.max_slots_per_worker)
        per_pool = self.pool_max_slots.get(pool)
        if per_pool is not None:
            g = min(g, per_pool)
        pmax = self.pool_max.get(pool)
        if pmax is not None:
            g = min(g, pmax)
        return g

    def register(
        self,
        pool: str,
        name: str,
        labels: dict[str, str],
        slots: int,
        version: int = 3,
        kinds: frozenset[str] | None = None,
    ) -> WorkerSession:
        """A worker registered (the caller validated the pool) speaking protocol ``version``
        at most and serving ``kinds`` (None: any kind); returns its session."""
        granted = self.grant(pool, slots)
        agreed = session_version(version)
        s = WorkerSession(
            self, next(self._ids), pool, name, dict(labels), granted, self.outbox_size, agreed, kinds or None
        )
        self.sessions[s.id] = s
        self._groups.setdefault(s.group_key, {})[s.id] = s
        self._pools.setdefault(pool, {})[s.id] = s
        s.send(
            RegisteredMsg(
                worker_id=s.id,
                lease_ttl_s=self.lease_ttl_s.get(pool),
                slots=granted,
                protocol_version=agreed,
                max_message_bytes=self.max_message_bytes,
            )
        )
        self._resize(pool, s.labels, s.kinds)
        return s

    def disconnect(self, s: WorkerSession, reason: str = "worker disconnected") -> None:
        """The session ended: its running attempts fail retryably; capacity shrinks at once."""
        if s.closed:
            return
        s.closed = True
        s.close_reason = reason
        self.sessions.pop(s.id, None)
        _leave(self._groups, s.group_key, s.id)
        _leave(self._pools, s.pool, s.id)
        attempts = list(s.attempts.values())
        s.attempts.clear()
        for att in attempts:
            att.gone(reason)
        with contextlib.suppress(asyncio.QueueFull):
            s.outbox.put_nowait(None)  # wake the writer so the stream ends
        self._resize(s.pool, s.labels, s.kinds)

    def shutdown_all(self, reason: str, not_leader: bool = False) -> None:
        for s in list(self.sessions.values()):
            if not s.send(ShutdownMsg(reason, not_leader)):
                continue

    def workers(self, pools: set[str] | None = None) -> list[WorkerSession]:
        return [s for s in self.sessions.values() if pools is None or s.pool in pools]

    def connected(self, pool: str | None = None) -> int:
        return len(self.sessions) if pool is None else len(self._pools.get(pool, ()))

    def serving(self, pool: str, kind: str) -> bool:
        """Whether a connected worker of ``pool`` serves tasks of ``kind``."""
        return any(s.serves(kind) for s in self._pools.get(pool, {}).values())

    def group(
        self, pool: str, labels: Mapping[str, str], kinds: frozenset[str] | None
    ) -> list[WorkerSession]:
        """The connected workers of one group (``pool``, ``labels``, ``kinds``), by id."""
        return list(self._groups.get(group_key(pool, labels, kinds), {}).values())

    def _resize(self, pool: str, labels: dict[str, str], kinds: frozenset[str] | None) -> None:
        total = sum(s.slots for s in self._groups.get(group_key(pool, labels, kinds), {}).values())
        try:
            self.sched.seam.set_group_capacity(pool, labels or None, total, kinds)
        except Exception:  # pragma: no cover - the pool was validated at registration
            return
        if self.on_change is not None:
            self.on_change()

    def _slot_freed(self, s: WorkerSession) -> None:
        """A slot of ``s`` freed: a Nacked lease waiting for a worker may use it (nothing to do)."""

    # -- attempts ----------------------------------------------------------------------------

    def pick(
        self, pool: str, labels: dict[str, str], kinds: frozenset[str] | None, exclude: set[int]
    ) -> WorkerSession | None:
        """The worker of group (``labels``, ``kinds``) with the most free granted slots, not in
        ``exclude``."""
        best: WorkerSession | None = None
        members = self._groups.get(group_key(pool, labels, kinds))
        if members is None:
            return None
        for s in members.values():
            if s.closed or s.id in exclude:
                continue
            if s.free > 0 and (best is None or s.free > best.free):
                best = s
        return best

    def others(
        self, pool: str, group: tuple[dict[str, str], frozenset[str] | None], t: TaskState, exclude: set[int]
    ) -> list[WorkerSession]:
        """Workers of the pool's groups other than ``group`` (labels, kinds) that could take a
        re-offered lease of task ``t``: a free granted slot, labels that include all of the
        task's, serving its kind, not in ``exclude``; the
        groups with the fewest labels first (the engine's group order, docs/reference/behaviour.md#labels),
        then the most free slots."""
        need, kind = t.opts.labels, t.opts.kind
        out = [
            s
            for s in self._pools.get(pool, {}).values()
            if (s.labels, s.kinds) != group
            and s.serves(kind)
            and not s.closed
            and s.id not in exclude
            and s.free > 0
            and (not need or all(s.labels.get(k) == v for k, v in need.items()))
        ]
        out.sort(key=lambda s: (len(s.labels), -s.free))
        return out


def _leave(index: dict[K, dict[int, WorkerSession]], key: K, sid: int) -> None:
    """Drop session ``sid`` from ``index[key]`` (and the key with its last session)."""
    members = index.get(key)
    if members is not None:
        members.pop(sid, None)
        if not members:
            del index[key]


def _journal_json(ctx: TaskContext, payload_bytes: int, max_message_bytes: int) -> str:
    """``Lease.journal_json`` of ``ctx``'s task: "" without a journal, or when it would take the
    lease over half of ``max_message_bytes`` (the worker then asks the server for each call)."""
    steps = ctx.journal_steps()
    if steps is None:
        return ""
    text = json.dumps(steps, separators=(",", ":"))
    return text if len(text) + payload_bytes <= max_message_bytes // 2 else ""


class RemoteExecutor:
    """The executor of a server pool: runs each attempt on a remote worker.

    Its kind is ``REMOTE`` (:class:`~cronoq.runtime.executors.ExecutorKind`): :meth:`begin`
    sends the lease and returns at once, and the worker's reports come back as calls on the
    attempt's context (:class:`Attempt`: ``ctx.complete``, ``ctx.fail``, ``ctx.abort``), so an
    attempt costs no asyncio task and no future of its own; the engine's abort reaches it as
    ``ctx.on_abort``.  Awaiting the executor (:meth:`__call__`, what a tracing span wraps)
    awaits the outcome instead."""

    executor_kind = ExecutorKind.REMOTE

    def __init__(
        self, registry: WorkerRegistry, pool: str, on_output: Callable[[int, Blob], None] | None = None
    ) -> None:
        self.registry = registry
        self.pool = pool
        #: ``(task id, output)`` of every attempt that completes (the server's output cache)
        self.on_output = on_output

    async def __call__(self, ctx: TaskContext, payload: object) -> Blob:
        """The attempt awaited (inside a tracing span): its output, or the error it ended with
        (:class:`Permanent`, :class:`Retryable`); cancelling the wait aborts it."""
        waiter: asyncio.Future[Blob] = asyncio.get_running_loop().create_future()
        self.begin(ctx, payload, waiter)
        return await waiter

    def begin(self, ctx: TaskContext, payload: object, waiter: asyncio.Future[Blob] | None = None) -> None:
        """Hand the attempt to a worker; its outcome is reported on ``ctx`` (or set on
        ``waiter``, the awaited form)."""
        blob = payload if isinstance(payload, Blob) else Blob(b"", "")
        seam = self.registry.sched.seam
        t = seam.task_of(ctx)
        opts = t.opts
        parents: tuple[Any, ...] = ()
        if t.parents:  # placeholders take their parents' outputs before the lease leaves
            from cronoq.server.substitute import for_lease

            try:
                blob, parents = for_lease(blob, ctx.parents, opts.kind, self.registry.max_message_bytes)
            except Permanent as e:
                if waiter is not None:
                    waiter.set_exception(e)
                else:
                    ctx.fail(e.message, permanent=True)
                return
        deadline = None if t.deadline is None else seam.time_base + t.deadline
        msg = LeaseMsg(
            lease=ctx.lease,
            task_id=t.id,
            attempt=ctx.attempt,
            payload=blob.data,
            content_type=blob.content_type,
            kind=opts.kind,
            key=t.key or "",
            tags=dict(opts.tags) if opts.tags else {},
            timeout_s=None if opts.timeout is None else opts.timeout / 1e9,
            deadline_unix_ns=deadline,
            pool=self.pool,
            priority=opts.priority,
            lease_ttl_s=self.registry.lease_ttl_s.get(self.pool),
            parents=parents,
            resumes=ctx.resumes,
            journal_json=_journal_json(ctx, len(blob.data), self.registry.max_message_bytes),
        )
        kinds = t.group.kinds if t.group is not None else None
        att = Attempt(ctx.lease, ctx, msg, executor=self, group=ctx.group, kinds=kinds, waiter=waiter)
        if waiter is None:
            ctx.on_abort = att.aborted
        else:
            waiter.add_done_callback(att.waited)
        self.offer(att, "no worker available")

    def offer(self, att: Attempt, reason: str) -> None:
        """Queue ``att``'s lease on a worker of its group with a free slot, else (handed back)
        of another group whose labels suit the task, if the engine moves the attempt onto a
        free slot of that group (docs/reference/grpc.md#worker-protocol: "another free
        worker"); with none, the attempt fails retryably."""
        registry, ctx = self.registry, att.ctx
        while True:
            session = registry.pick(self.pool, att.group, att.kinds, att.refused_by)
            if session is None and att.refused_by:
                t = registry.sched.seam.task_of(ctx)
                for other in registry.others(self.pool, (att.group, att.kinds), t, att.refused_by):
                    if registry.sched.seam.move_attempt(ctx, other.labels, other.kinds):
                        session, att.group, att.kinds = other, other.labels, other.kinds
                        break
            if session is None:
                att.fail(f"no worker accepted the lease: {reason}", False, None)
                return
            att.session = session
            session.attempts[att.lease] = att
            ctx.note_worker(session.name or f"worker {session.id}")
            msg = att.msg
            if msg.parents and session.version < PARENTS_VERSION:
                msg = replace(msg, parents=())  # (an older worker: plain arguments only)
            if msg.journal_json and session.version < DURABLE_VERSION:
                msg = replace(msg, journal_json="")
            if session.send(msg):
                return
            session.attempts.pop(att.lease, None)
            att.refused_by.add(session.id)
            reason = "worker disconnected"
