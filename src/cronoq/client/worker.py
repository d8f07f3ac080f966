"""Remote worker: serves a server pool with a Python handler over ``Workers.Work``
(docs/reference/grpc.md#worker-protocol).

Theory of operation
-------------------
A *session* is one bidirectional ``Work`` stream. The worker opens it with
``Register{pool, slots, worker_name, protocol_version=7, labels, kinds}`` and waits for
``Registered`` (granted slots, lease ttl, the session's version: 3 with the published server,
7 with ours). Then the server sends:

* ``Lease`` — one attempt; the worker runs ``handler(lease)`` in its own asyncio task (at most
  the granted number at once; a lease beyond that, or while draining, is handed back with
  ``Nack``). While it runs, a ``Heartbeat`` goes out every ``lease_ttl / 3`` (when the pool has
  a ttl). A plain (non-``async``) handler is called right away instead, as the lease is read:
  it holds the loop until it returns either way, so a task would only add a loop turn (if it
  returns an awaitable, that is awaited in a task as above). Its end is reported once: return
  value → ``Complete{output, content_type}`` (encoded
  like payloads; None → empty output and content type); :class:`~cronoq.Permanent` →
  ``Fail{permanent}``; :class:`~cronoq.Retryable` → ``Fail{retry_after_s}``; any other exception
  → ``Fail{"<Type>: <message>"}`` (retryable), ``SystemExit`` and other ``BaseException``
  included (a handler calling ``sys.exit()`` fails its task, the worker goes on; only
  ``KeyboardInterrupt`` and the worker's own cancel propagate); :class:`Reject` → ``Nack``;
  :class:`CancelTask` → ``Cancelled``.
* ``Abort`` — the lease is gone (timeout, cancel, lease loss): ``lease.cancelled`` becomes True
  and the handler task is cancelled; nothing is reported (the server ignores it anyway).
* ``Shutdown`` — the server goes away. ``not_leader`` → reconnect at once (to the next address
  when several are given); otherwise keep working until the server ends the stream.

When a session ends, handlers still running are cancelled (the server fails their attempts
retryably on disconnect). ``run()`` then reconnects with exponential backoff between
``backoff[0]`` and ``backoff[1]`` (reset after each successful registration), unless
``reconnect=False``; a session that registered and then broke (the server died) resets the
backoff and, with several addresses, moves to the next one at once; with several addresses the
backoff sleep comes once per round of failed addresses. Authentication, permission and
protocol errors (``unauthenticated``, ``permission_denied``, ``invalid_argument``,
``not_found``, ``unimplemented``) are raised, not retried.

**Shard redirects.** A server of a sharded cluster refuses a ``Register`` for a pool of another
shard with ``FAILED_PRECONDITION`` and the metadata ``cronoq-shard`` / ``cronoq-shard-endpoint``.
The worker then connects to that endpoint at once, at most :data:`MAX_REDIRECTS` times in a row
(a registration resets the count); it never follows a redirect from TLS to plain ``http://``, nor
to a URL with userinfo or a path, and sends its token over plain ``http://`` only to a loopback
host unless ``insecure_redirect_http=True``. When the shard it was sent to is unavailable it goes
back to its configured target (which redirects it again to the shard's current endpoint). A
``FAILED_PRECONDITION`` without an endpoint is fatal.

``stop(grace)`` drains: ``SetSlots{0}``, waits up to ``grace`` for running handlers, cancels the
rest (reported as retryable ``Fail("worker stopped")``, and listed in ``abandoned``), half-closes
the stream and waits for the server to end it.  A plain function running in a thread cannot be
cancelled: its thread runs on, and only ending the process stops it (``cronoq worker`` does).

All outbound messages of a session go through one queue consumed by the request iterator of
the call, so reports, heartbeats and slot changes never interleave badly. In a version-4
session, whatever queued up while the stream was busy sending goes out as one ``WorkerBatch``
(at most 64 reports and the server's ``max_message_bytes``; see :mod:`cronoq.proto.protocol`);
a lone report in a trickle (the previous write was recent, nothing else queued, and other
leases still running, so more reports may follow) first lingers up to ``FLUSH_LINGER_S`` for
company (:mod:`cronoq.proto.flush`), while a lone report after a quiet spell, the last running
lease's report, or a burst goes out at once. A ``ServerBatch`` of leases is handled like that
many ``Lease`` messages.

**Progress** (version 5). ``await lease.progress(done, total, message)`` (or the synchronous
``lease.report_progress``) sends a ``ProgressReport`` only in a session of version 5 or more
(with an older server it is a no-op, logged at debug level). It is coalesced per lease, newest
wins: the first report goes out at once, later ones at most every :data:`PROGRESS_INTERVAL_S`
seconds (a trailing report with the newest values when the interval ends); a value still held
when the lease ends is dropped. The server rate-limits its events again (4 per second).
Durable calls (``lease.spawn`` ..., version 7): :mod:`cronoq.client.worker_durable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from enum import Enum
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import grpc
import grpc.aio

from cronoq.client import worker_durable as _durable
from cronoq.client._channel import (
    auth_metadata,
    is_loopback_host,
    make_channel,
    normalize_targets,
    split_target,
)
from cronoq.client.encoding import decode_payload, encode_payload, priority_from_wire
from cronoq.client.errors import CancelTask, ClientError, Reject, from_rpc_error
from cronoq.engine.progress import check_progress
from cronoq.engine.time import next_backoff
from cronoq.errors import Permanent, Retryable, closing, outcome_of
from cronoq.outcome import Outcome
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc
from cronoq.proto.flush import FlushQueue, batched
from cronoq.proto.protocol import (
    BATCH_MARGIN_BYTES,
    BATCHING_VERSION,
    DEFAULT_MAX_MESSAGE_BYTES,
    FLUSH_LINGER_S,
    MESSAGE_OVERHEAD,
    MIN_VERSION,
    PROGRESS_VERSION,
    PROTOCOL_VERSION,
)
from cronoq.runtime.processes import CURRENT, Processes, ProcessRegistry, check_processes
from cronoq.spec.payloads import parse_json

__all__ = ["MAX_REDIRECTS", "PROTOCOL_VERSION", "Lease", "Worker"]

log = logging.getLogger("cronoq.client.worker")

#: A lease sends at most one progress report per this many seconds (newest wins).
PROGRESS_INTERVAL_S = 0.25


#: Session errors that reconnecting cannot fix (``failed_precondition`` is a redirect when it
#: names an endpoint, fatal when it does not).
FATAL_CODES = frozenset(
    {
        "unauthenticated",
        "permission_denied",
        "invalid_argument",
        "not_found",
        "unimplemented",
        "failed_precondition",
    }
)

#: Shard redirects a worker follows in a row (without registering in between) before it gives up.
MAX_REDIRECTS = 3

#: The metadata a server of a sharded cluster sends with a refused registration.
SHARD_MD = "cronoq-shard"
SHARD_ENDPOINT_MD = "cronoq-shard-endpoint"

#: How long ``stop()`` waits for the server to end the stream after the half-close.
_CLOSE_TIMEOUT = 5.0

Handler = Callable[["Lease"], Awaitable[object] | object]


class CancelFlag(asyncio.Event):
    """``Lease.cancelled``: an :class:`asyncio.Event` that is also truthy once set, so both
    ``if lease.cancelled:`` and ``await lease.cancelled.wait()`` work."""

    def __bool__(self) -> bool:
        return self.is_set()


class Lease(_durable.DurableCalls):
    """One attempt of a task handed to a worker's handler.

    ``payload`` (bytes) and ``content_type`` as submitted; :meth:`json`, :meth:`text` and
    :meth:`value` decode it. ``cancelled`` turns True when the server aborted the lease (or the
    session ended); ``cancel_reason`` says why. Times: ``timeout`` (seconds per attempt) and
    ``deadline`` (Unix seconds) are None when the task has none. :attr:`parents` says how the
    task's parents ended (worker protocol version 6).
    """

    __slots__ = (
        "_abort",
        "_cancel_flag",
        "_parents",
        "_progress",
        "_session",
        "_stopped",
        "attempt",
        "cancel_reason",
        "content_type",
        "deadline",
        "id",
        "key",
        "kind",
        "lease_ttl",
        "payload",
        "pool",
        "priority",
        "tags",
        "task_id",
        "timeout",
    )

    def __init__(self, msg: pb.Lease, lease_ttl: float | None, session: _Session | None = None) -> None:
        self.id: int = msg.lease
        self.task_id: int = msg.task_id
        self.attempt: int = msg.attempt
        self.payload: bytes = msg.payload
        self.content_type: str = msg.content_type
        self.kind: str = msg.kind or "default"
        self.key: str | None = msg.key or None
        tags = msg.tags
        self.tags: dict[str, str] = dict(tags) if tags else {}
        self.timeout: float | None = msg.timeout_s if msg.HasField("timeout_s") else None
        self.deadline: float | None = msg.deadline_unix_ns / 1e9 if msg.HasField("deadline_unix_ns") else None
        self.pool: str = msg.pool
        self.priority: str = priority_from_wire(msg.priority)
        self.lease_ttl: float | None = msg.lease_ttl_s if msg.HasField("lease_ttl_s") else lease_ttl
        self.cancel_reason: str = ""
        self._abort = False
        self._cancel_flag: CancelFlag | None = None
        self._stopped = False
        self._session = session
        self._progress: _ProgressState | None = None
        self._parents: Any = msg.parents  # (decoded when read)
        self._init_durable(msg)

    @property
    def parents(self) -> tuple[Outcome, ...]:
        """How each parent of the task ended, one :class:`~cronoq.Outcome` per dependency edge
        in the order given, outputs decoded as :meth:`value` decodes a payload (None when the
        server could not include one); ``()`` from a server older than protocol version 6."""
        return tuple(
            Outcome(
                p.id,
                p.key or None,
                p.status,
                decode_payload(p.output, p.content_type) if p.has_output else None,
                p.message or None,
            )
            for p in self._parents
        )

    @property
    def cancelled(self) -> CancelFlag:
        """Truthy once the server aborted this lease or the worker lost it; also an
        :class:`asyncio.Event` (``lease.cancelled.is_set()``, ``await lease.cancelled.wait()``),
        as in the published client."""
        flag = self._cancel_flag
        if flag is None:
            flag = self._cancel_flag = CancelFlag()
            if self._abort:
                flag.set()
        return flag

    def _aborted(self, reason: str) -> None:
        """The lease is gone (server abort, lost session): mark it and wake waiters."""
        self._abort = True
        self.cancel_reason = reason
        if self._cancel_flag is not None:
            self._cancel_flag.set()

    def json(self) -> Any:
        """The payload parsed as JSON (None for an empty payload; json.JSONDecodeError, saying
        so, for one that is not JSON: :meth:`text`, :meth:`value` read any)."""
        return parse_json(self.payload, "payload", self.content_type)

    def text(self) -> str:
        """The payload decoded as UTF-8."""
        return self.payload.decode("utf-8")

    def value(self) -> Any:
        """The payload decoded by its content type: JSON → object, text → str, else bytes
        (None when empty and untyped)."""
        return decode_payload(self.payload, self.content_type)

    def heartbeat(self) -> None:
        """Renew the lease now (heartbeats are also sent automatically every lease_ttl/3)."""
        if self._session is not None and not self._abort:
            self._session.send(pb.WorkerMessage(heartbeat=pb.Heartbeat(lease=self.id)))

    async def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Report how far this attempt is (docs/how-to/progress.md#remote-workers): ``done`` of
        ``total`` (None: unknown) with an optional ``message``; values are checked like
        ``TaskContext.progress`` (ValueError). Coalesced, newest wins (see the module
        docstring); a no-op with a server older than protocol version 5 or once the lease
        is gone."""
        self.report_progress(done, total, message)

    def report_progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """:meth:`progress` without ``await`` (for plain handlers and task contexts)."""
        d, t, m = check_progress(done, total, message)
        sess = self._session
        if sess is None or self._abort or not sess.open:
            return
        if sess.version < PROGRESS_VERSION:
            log.debug("progress of lease %d not sent: the server speaks protocol %d", self.id, sess.version)
            return
        st = self._progress
        if st is None:
            st = self._progress = _ProgressState()
        loop = asyncio.get_running_loop()
        now = loop.time()
        if st.timer is None and now - st.last >= PROGRESS_INTERVAL_S:
            st.last = now
            sess.send(_progress_msg(self.id, d, t, m))
            return
        st.pending = (d, t, m)
        if st.timer is None:
            st.timer = loop.call_at(st.last + PROGRESS_INTERVAL_S, self._flush_progress)

    def _flush_progress(self) -> None:
        st = self._progress
        sess = self._session
        if st is None:
            return
        st.timer = None
        pending, st.pending = st.pending, None
        if pending is None or sess is None or self._abort or self._stopped:
            return
        entry = sess.running.get(self.id)
        if entry is None or entry[0] is not self:  # the lease ended: a late value is dropped
            return
        st.last = asyncio.get_running_loop().time()
        sess.send(_progress_msg(self.id, *pending))

    def __repr__(self) -> str:
        return f"Lease(id={self.id}, task_id={self.task_id}, attempt={self.attempt}, pool={self.pool!r})"


class _ProgressState:
    """A lease's progress coalescing: when it last sent, what it holds, its flush timer."""

    __slots__ = ("last", "pending", "timer")

    def __init__(self) -> None:
        self.last = -PROGRESS_INTERVAL_S * 2
        self.pending: tuple[float, float | None, str | None] | None = None
        self.timer: asyncio.TimerHandle | None = None


def _served_kinds(handler: object, kinds: Iterable[str] | None) -> tuple[str, ...]:
    """The kinds a worker registers: ``kinds``, else its handler's (an app's ``LeaseHandler``),
    else none (any kind).  A kind must be a non-empty string."""
    if kinds is None:
        kinds = getattr(handler, "kinds", None) or ()
    if isinstance(kinds, str):
        raise ValueError(f"kinds must be a list of task kinds, not a string (got {kinds!r})")
    out = tuple(dict.fromkeys(kinds))
    bad = next((k for k in out if not isinstance(k, str) or not k), None)
    if bad is not None:
        raise ValueError(f"kinds must be non-empty strings (got {bad!r})")
    return out


def _progress_msg(lease: int, done: float, total: float | None, message: str | None) -> pb.WorkerMessage:
    out = pb.WorkerMessage()
    p = out.progress
    p.lease = lease
    p.done = done
    if total is not None:
        p.total = total
    if message:
        p.message = message
    return out


class SessionEnd(Enum):
    """How one ``Work`` session ended, which decides how :meth:`Worker.run` reconnects."""

    #: it registered, then the stream ended: back off from the start, same address
    REGISTERED = "registered"
    #: it registered, then the stream broke (the server died): the next address at once
    LOST = "lost"
    #: the server is not the leader: the next address, backoff reset
    NOT_LEADER = "not_leader"
    #: it never registered: the next address, one backoff per round over them
    ERROR = "error"


class _Session:
    """State of one ``Work`` stream."""

    def __init__(self) -> None:
        self.queue: FlushQueue[pb.WorkerMessage] = FlushQueue()
        self.running: dict[int, tuple[Lease, asyncio.Task[None]]] = {}
        self.open = True
        self.half_closed = False
        self.draining = False
        self.cancelled_locally = False
        self.call: Any = None
        #: > 0 once the server agreed to protocol version 4: the byte budget of one batch
        self.batch_bytes = 0
        #: the session's protocol version (0 until Registered)
        self.version = 0

    def send(self, msg: pb.WorkerMessage) -> None:
        if self.open and not self.half_closed:
            self.queue.put_nowait(msg)

    def half_close(self) -> None:
        if not self.half_closed:
            self.half_closed = True
            self.queue.put_nowait(None)

    def requests(self) -> AsyncGenerator[pb.WorkerMessage, None]:
        """The stream's messages (:func:`cronoq.proto.flush.batched`). From version 4 on
        (``batch_bytes``), reports queued together go out as one ``WorkerBatch``; a lone one in
        a trickle lingers up to ``FLUSH_LINGER_S`` for company while other leases are running
        (at most one report per running lease can follow)."""
        return batched(
            self.queue,
            budget=lambda: self.batch_bytes,
            linger_s=FLUSH_LINGER_S,
            room=lambda: len(self.running),
            size_of=_report_bytes,
            single=_same,
            pack=_pack,
            lingers=_durable.lingers,  # (a durable call's handler awaits the reply)
        )


class Worker:
    """Serve ``pool`` of a cronoq server with ``handler`` (``async def handle(lease)``).

    ``slots`` concurrent leases are requested (the server may grant fewer); ``labels`` join a
    labelled worker group; ``kinds`` are the task kinds it serves (default: the handler's
    ``kinds``, an app's task kinds; none: any kind; docs/how-to/deploys.md); ``token``
    authenticates (role ``worker``). ``target`` may be a list of
    addresses: each reconnect moves to the next. Use ``await worker.run()`` (returns after
    :meth:`stop`), or ``async with worker:`` to run it in the background and stop it on exit.
    ``processes`` (a :class:`cronoq.Processes`) sets how the child processes of
    ``run_in="process"`` tasks run (docs/how-to/processes.md); they stop with the worker.
    """

    def __init__(
        self,
        target: str | Sequence[str],
        pool: str,
        handler: Handler,
        *,
        slots: int = 1,
        token: str | None = None,
        name: str = "",
        labels: Mapping[str, str] | None = None,
        kinds: Iterable[str] | None = None,
        reconnect: bool = True,
        backoff: tuple[float, float] = (0.1, 5.0),
        grace: float = 10.0,
        tls: bool = False,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] | None = None,
        insecure_redirect_http: bool = False,
        processes: Processes | None = None,
    ) -> None:
        if not isinstance(pool, str) or not pool:
            raise ValueError(f"pool must be a non-empty string (got {pool!r})")
        if not callable(handler):
            raise ValueError("handler must be callable")
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots < 2**32:
            raise ValueError(f"slots must be an int >= 1 (got {slots!r})")
        if not isinstance(name, str):
            raise ValueError(f"name must be a string (got {name!r})")
        lo, hi = backoff
        if not (0 <= lo <= hi):
            raise ValueError(f"backoff must be (min, max) with 0 <= min <= max (got {backoff!r})")
        if grace < 0:
            raise ValueError(f"grace must be >= 0 (got {grace!r})")
        #: the child processes of run_in="process" tasks (docs/how-to/processes.md)
        self._procs = ProcessRegistry(check_processes(processes))
        self._procs.capacity = lambda: self._capacity() or None  # (its slots bound its children)
        self._targets = normalize_targets(target)
        self._pool = pool
        self._handler = handler
        # a plain function runs inline as its lease is read (see the module docstring)
        self._plain = not (
            inspect.iscoroutinefunction(handler)
            or inspect.iscoroutinefunction(getattr(handler, "__call__", None))  # noqa: B004
        )
        self._slots = slots
        self._metadata = auth_metadata(token)
        self._name = name
        self._labels = {str(k): str(v) for k, v in (labels or {}).items()}
        self._kinds = _served_kinds(handler, kinds)
        self._reconnect = reconnect
        self._backoff = (float(lo), float(hi))
        self._grace = float(grace)
        self._tls = tls
        self._credentials = credentials
        self._options = list(options or ())
        self._token = token is not None
        self.insecure_redirect_http = bool(insecure_redirect_http)
        #: where the last shard redirect sent this worker: (address, tls), until it is unavailable
        self._redirect: tuple[str, bool] | None = None
        #: the reason of the last ``Shutdown`` the server sent (None before any)
        self.last_shutdown: str | None = None

        self._session: _Session | None = None
        self._registered: asyncio.Event | None = None
        self._wakeup: asyncio.Event | None = None
        self._done: asyncio.Event | None = None
        self._stop_requested = False
        self._running = False
        self._bg: asyncio.Task[None] | None = None
        self._target_index = 0
        self._session_registered = False
        self._limit: int | None = None
        self.worker_id: int | None = None
        self.granted_slots: int = 0
        self.lease_ttl: float | None = None
        self.server_protocol_version: int = 0
        self.max_message_bytes: int = 0
        self.sessions: int = 0
        #: the leases the last :meth:`stop` cut short at its grace (their handlers were cancelled;
        #: a plain function's thread may still be running: only the process can end it)
        self.abandoned: list[Lease] = []

    # -- public -------------------------------------------------------------------------------

    @property
    def pool(self) -> str:
        return self._pool

    @property
    def slots(self) -> int:
        """The slots this worker asks for at registration."""
        return self._slots

    @property
    def labels(self) -> dict[str, str]:
        """The labels this worker registers with (its worker group)."""
        return dict(self._labels)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The task kinds this worker registers (``()``: it serves any kind)."""
        return self._kinds

    @property
    def name(self) -> str:
        return self._name

    @property
    def handler(self) -> Handler:
        return self._handler

    @property
    def reconnect(self) -> bool:
        return self._reconnect

    @property
    def backoff(self) -> tuple[float, float]:
        """(first, longest) delay between reconnects, seconds."""
        return self._backoff

    @property
    def grace(self) -> float:
        """Default seconds :meth:`stop` waits for running handlers."""
        return self._grace

    @property
    def registered(self) -> bool:
        return self._registered is not None and self._registered.is_set()

    @property
    def active(self) -> int:
        """Handlers running now."""
        return len(self._session.running) if self._session is not None else 0

    @property
    def running(self) -> int:
        """Handlers running now (the published client's name for :attr:`active`)."""
        return self.active

    @property
    def server_protocol(self) -> int:
        """The worker protocol version the server speaks (published client's name)."""
        return self.server_protocol_version

    @property
    def connections(self) -> int:
        """Sessions opened so far (published client's name for :attr:`sessions`)."""
        return self.sessions

    @property
    def target(self) -> str:
        """The address the next session goes to: a shard redirect's, else the configured one."""
        if self._redirect is not None:
            return self._redirect[0]
        return self._targets[self._target_index % len(self._targets)]

    def _events(self) -> tuple[asyncio.Event, asyncio.Event, asyncio.Event]:
        if self._registered is None or self._wakeup is None or self._done is None:
            self._registered, self._wakeup, self._done = asyncio.Event(), asyncio.Event(), asyncio.Event()
        return self._registered, self._wakeup, self._done

    async def wait_registered(self, timeout: float | None = None) -> int:
        """Wait until the current session is registered; return the worker id. Raises
        ``TimeoutError`` after ``timeout`` seconds."""
        registered, _, _ = self._events()
        async with asyncio.timeout(timeout):
            await registered.wait()
        assert self.worker_id is not None
        return self.worker_id

    async def __aenter__(self) -> Worker:
        self._bg = asyncio.create_task(self.run(), name=f"cronoq-worker-{self._pool}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        if self._bg is not None:
            bg, self._bg = self._bg, None
            with contextlib.suppress(asyncio.CancelledError, ClientError):
                await bg

    def set_slots(self, slots: int) -> None:
        """Ask for a different number of concurrent leases (0 = pause: no new leases). Applies
        to the current session and to later registrations."""
        if isinstance(slots, bool) or not isinstance(slots, int) or not 0 <= slots < 2**32:
            raise ValueError(f"slots must be an int >= 0 (got {slots!r})")
        self._limit = slots
        if slots >= 1:
            self._slots = slots
        sess = self._session
        if sess is not None:
            sess.send(pb.WorkerMessage(set_slots=pb.SetSlots(slots=slots)))

    def _capacity(self) -> int:
        """Leases this worker accepts at once: the grant, or what ``set_slots`` asked since
        (the server may grant more after a SetSlots; it never sends more than it granted)."""
        return self.granted_slots if self._limit is None else self._limit

    async def run(self) -> None:
        """Serve until :meth:`stop` (or, with ``reconnect=False``, until the session ends).
        Raises :class:`ClientError` on an error reconnecting cannot fix."""
        if self._running:
            raise RuntimeError("worker is already running")
        registered, wakeup, done = self._events()
        self._running = True
        self._stop_requested = False
        done.clear()
        procs = CURRENT.set(self._procs)  # process tasks of this worker's handlers run here
        delay = self._backoff[0]
        failed = 0  # consecutive attempts that did not register
        redirects = 0  # consecutive shard redirects
        try:
            while not self._stop_requested:
                target = self.target
                self.sessions += 1
                self._session_registered = False
                try:
                    outcome = await self._run_session(target, registered)
                except _Redirect as r:
                    redirects += 1
                    if redirects > MAX_REDIRECTS:
                        raise ClientError(
                            "failed_precondition",
                            f"worker redirected {redirects} times in a row, more than the "
                            f"{MAX_REDIRECTS} it follows: {r.message}",
                        ) from None
                    self._redirect = self._follow(r)
                    log.info(
                        "pool %r is served by shard %r at %s: reconnecting there",
                        self._pool,
                        r.shard,
                        r.endpoint,
                    )
                    continue
                except ClientError as err:
                    if err.code in FATAL_CODES or not self._reconnect:
                        raise
                    if self._redirect is not None and err.code == "unavailable":
                        # the shard it was sent to is down: back to the configured target, and
                        # the redirects are no longer "in a row" (a failover of that shard must
                        # not end the worker: it backs off and is redirected again)
                        self._redirect = None
                        redirects = 0
                    # a registered session that broke (e.g. the server died) still resets the backoff
                    outcome = SessionEnd.LOST if self._session_registered else SessionEnd.ERROR
                    log.info("worker session with %s ended: %s; reconnecting", target, err)
                if self._session_registered:
                    redirects = 0
                if self._stop_requested or not self._reconnect:
                    return
                several = len(self._targets) > 1
                if outcome in (SessionEnd.REGISTERED, SessionEnd.LOST):
                    delay, failed = self._backoff[0], 0
                    self._target_index += 1 if several else 0
                    if not (
                        several and outcome is SessionEnd.LOST
                    ):  # a dead server: try the next one at once
                        await self._sleep(wakeup, delay)
                        delay = next_backoff(delay, *self._backoff)
                elif outcome is SessionEnd.NOT_LEADER:
                    delay, failed = self._backoff[0], 0
                    self._target_index += 1
                else:
                    failed += 1
                    self._target_index += 1
                    # back off once per round over the addresses (a standby or a dead address
                    # says nothing about the next one, which may be the new leader)
                    if failed % len(self._targets) == 0:
                        await self._sleep(wakeup, delay)
                        delay = next_backoff(delay, *self._backoff)
        finally:
            CURRENT.reset(procs)
            await self._procs.close()  # no child outlives the worker
            self._running = False
            registered.clear()
            done.set()

    async def stop(self, grace: float | None = None) -> None:
        """Drain and stop: ``SetSlots 0``, wait up to ``grace`` (default: the constructor's)
        for running handlers, cancel the rest, half-close and wait for :meth:`run` to end."""
        grace = self._grace if grace is None else float(grace)
        _, wakeup, done = self._events()
        self._stop_requested = True
        wakeup.set()
        sess = self._session
        if sess is not None and sess.open:
            sess.draining = True
            sess.send(pb.WorkerMessage(set_slots=pb.SetSlots(slots=0)))
            tasks = [t for _, t in sess.running.values()]
            if tasks:
                await asyncio.wait(tasks, timeout=grace)
            left = list(sess.running.values())
            self.abandoned = [lease for lease, _ in left]
            for lease, t in left:
                lease._stopped = True
                t.cancel()
            if left:
                await asyncio.wait([t for _, t in left])
            sess.half_close()
        if self._running:
            try:
                async with asyncio.timeout(_CLOSE_TIMEOUT):
                    await done.wait()
            except TimeoutError:
                sess = self._session
                if sess is not None and sess.call is not None:
                    sess.cancelled_locally = True
                    sess.call.cancel()
                await done.wait()

    def _follow(self, r: _Redirect) -> tuple[str, bool]:
        """Check a redirect against the rules (module docstring); its (address, tls)."""
        here_tls = self._tls or self._credentials is not None or split_target(self.target)[1]
        try:
            url = urlsplit(r.endpoint)
            port = url.port
        except ValueError:
            url, port = None, None
        if url is None or url.scheme not in ("http", "https") or not url.hostname or port is None:
            raise ClientError(
                "failed_precondition", f"worker redirected to an invalid endpoint {r.endpoint!r}: {r.message}"
            )
        if "@" in url.netloc:
            raise ClientError(
                "failed_precondition", f"worker refuses a redirect to a URL with userinfo: {r.message}"
            )
        if url.path not in ("", "/") or url.query or url.fragment:
            raise ClientError(
                "failed_precondition",
                f"worker redirected to an endpoint with a path {r.endpoint!r}: {r.message}",
            )
        tls = url.scheme == "https"
        if here_tls and not tls:
            raise ClientError(
                "failed_precondition",
                f"worker refuses a redirect from TLS to plain http ({r.endpoint}): {r.message}",
            )
        if not tls and self._token and not self.insecure_redirect_http and not is_loopback_host(url.hostname):
            raise ClientError(
                "failed_precondition",
                f"worker refuses to send its token over plain http to {r.endpoint} (not a loopback "
                f"host; insecure_redirect_http=True allows it): {r.message}",
            )
        return url.netloc, tls

    # -- session ------------------------------------------------------------------------------

    async def _sleep(self, wakeup: asyncio.Event, delay: float) -> None:
        wakeup.clear()
        if self._stop_requested or delay <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await wakeup.wait()

    async def _run_session(self, target: str, registered: asyncio.Event) -> SessionEnd:
        """One Work stream; returns ``REGISTERED`` (ended after registering) or
        ``NOT_LEADER``, or raises :class:`ClientError`."""
        tls = self._tls or (self._redirect is not None and self._redirect[1])
        channel = make_channel(target, tls=tls, credentials=self._credentials, options=self._options)
        sess = _Session()
        self._session = sess
        outcome = SessionEnd.ERROR
        try:
            sess.send(
                pb.WorkerMessage(
                    register=pb.Register(
                        pool=self._pool,
                        slots=self._slots,
                        worker_name=self._name,
                        protocol_version=PROTOCOL_VERSION,
                        labels=self._labels,
                        kinds=self._kinds,
                    )
                )
            )
            stub = pb_grpc.WorkersStub(channel)
            sess.call = stub.Work(sess.requests(), metadata=self._metadata)
            first = await self._read(sess)
            if first is None:
                raise ClientError("unavailable", "stream ended before Registered")
            if first.WhichOneof("msg") != "registered":
                raise ClientError("internal", f"expected Registered, got {first.WhichOneof('msg')}")
            reg = first.registered
            self.worker_id = reg.worker_id
            self.granted_slots = reg.slots
            self.lease_ttl = reg.lease_ttl_s if reg.HasField("lease_ttl_s") else None
            self.server_protocol_version = reg.protocol_version
            self.max_message_bytes = reg.max_message_bytes
            if reg.protocol_version and not MIN_VERSION <= reg.protocol_version <= PROTOCOL_VERSION:
                log.warning(
                    "server speaks worker protocol %d (this worker: %d to %d)",
                    reg.protocol_version,
                    MIN_VERSION,
                    PROTOCOL_VERSION,
                )
            sess.version = reg.protocol_version or MIN_VERSION
            if reg.protocol_version >= BATCHING_VERSION:
                limit = reg.max_message_bytes or DEFAULT_MAX_MESSAGE_BYTES
                sess.batch_bytes = max(limit - BATCH_MARGIN_BYTES, 1)
            outcome = SessionEnd.REGISTERED
            self._session_registered = True
            if self._limit == 0:
                sess.send(pb.WorkerMessage(set_slots=pb.SetSlots(slots=0)))
            else:
                self._limit = None
            registered.set()
            log.debug("worker %d registered on %s (%d slots)", reg.worker_id, target, reg.slots)
            if self._stop_requested:
                sess.half_close()
            while True:
                msg = await self._read(sess)
                if msg is None:
                    return outcome
                which = msg.WhichOneof("msg")
                if which == "lease":
                    self._on_lease(sess, msg.lease)
                elif which == "abort":
                    self._on_abort(sess, msg.abort)
                elif which == "batch":
                    for inner in msg.batch.messages:
                        kind = inner.WhichOneof("msg")
                        if kind == "lease":
                            self._on_lease(sess, inner.lease)
                        elif kind == "abort":
                            self._on_abort(sess, inner.abort)
                elif which == "durable":
                    _durable.on_reply(sess, msg.durable)
                elif which == "shutdown":
                    self.last_shutdown = msg.shutdown.reason
                    log.info(
                        "server shutdown (%s, not_leader=%s)", msg.shutdown.reason, msg.shutdown.not_leader
                    )
                    if msg.shutdown.not_leader:
                        return SessionEnd.NOT_LEADER
                # a second Registered or an unknown message: ignored (forward compatibility)
        finally:
            registered.clear()
            sess.open = False
            await self._end_session(sess)
            if sess.call is not None:
                sess.call.cancel()
            await channel.close()
            if self._session is sess:
                self._session = None

    async def _read(self, sess: _Session) -> pb.ServerMessage | None:
        try:
            msg = await sess.call.read()
        except asyncio.CancelledError:
            if sess.cancelled_locally:  # stop() gave up waiting for the server to end the stream
                return None
            raise
        except grpc.RpcError as exc:
            err = from_rpc_error(exc)
            if err.code == "cancelled" and self._stop_requested:
                return None
            if err.code == "failed_precondition":
                md = _metadata_of(exc)
                endpoint = md.get(SHARD_ENDPOINT_MD)
                if endpoint:
                    raise _Redirect(endpoint, md.get(SHARD_MD, ""), err.message) from None
            raise err from None
        if msg is grpc.aio.EOF:
            return None
        return msg

    async def _end_session(self, sess: _Session) -> None:
        """Cancel handlers still running when a session ends (their leases are lost)."""
        left = list(sess.running.values())
        for lease, task in left:
            lease._aborted(lease.cancel_reason or "disconnected")
            task.cancel()
        if left:
            await asyncio.wait([t for _, t in left])

    def _on_lease(self, sess: _Session, msg: pb.Lease) -> None:
        if sess.draining or self._stop_requested:
            sess.send(pb.WorkerMessage(nack=pb.Nack(lease=msg.lease, reason="worker draining")))
            return
        if msg.lease in sess.running or len(sess.running) >= self._capacity():
            sess.send(pb.WorkerMessage(nack=pb.Nack(lease=msg.lease, reason="no free slot")))
            return
        lease = Lease(msg, self.lease_ttl, sess)
        if self._plain:
            try:
                result = self._handler(lease)
            except KeyboardInterrupt:
                raise  # the operator's Ctrl-C stops the worker, as anywhere else
            except BaseException as exc:  # SystemExit too: the task's failure, not the worker's
                report = _failure(lease, exc)
            else:
                if inspect.isawaitable(result):  # a plain function that returned an awaitable
                    task = asyncio.create_task(
                        self._run_lease(sess, lease, result), name=f"cronoq-lease-{lease.id}"
                    )
                    if inspect.iscoroutine(result):  # (never awaited if cancelled before it starts)
                        task.add_done_callback(partial(_close, result))
                    if not task.done():  # (an eager task factory may already have finished it)
                        sess.running[lease.id] = (lease, task)
                    return
                report = _success(lease, result, self.max_message_bytes)
            if report is not None:
                sess.send(report)
            return
        task = asyncio.create_task(self._run_lease(sess, lease), name=f"cronoq-lease-{lease.id}")
        if not task.done():  # (an eager task factory may already have finished it)
            sess.running[lease.id] = (lease, task)

    def _on_abort(self, sess: _Session, msg: pb.Abort) -> None:
        entry = sess.running.pop(msg.lease, None)
        if entry is None:
            return
        lease, task = entry
        lease._aborted(msg.reason)
        task.cancel()

    async def _heartbeats(self, sess: _Session, lease: Lease) -> None:
        assert lease.lease_ttl is not None
        interval = lease.lease_ttl / 3
        while True:
            await asyncio.sleep(interval)
            lease.heartbeat()

    async def _run_lease(self, sess: _Session, lease: Lease, pending: object = None) -> None:
        """Run the handler on ``lease`` (or await ``pending``, what a plain handler returned)
        and report the outcome."""
        hb = None
        if lease.lease_ttl is not None and lease.lease_ttl > 0:
            hb = asyncio.create_task(self._heartbeats(sess, lease))
        report: pb.WorkerMessage | None = None
        try:
            try:
                result = self._handler(lease) if pending is None else pending
                if inspect.isawaitable(result):
                    result = await result
            except KeyboardInterrupt:
                raise  # the operator's Ctrl-C stops the worker, as anywhere else
            except BaseException as exc:  # SystemExit too: the task's failure, not the worker's
                if isinstance(exc, GeneratorExit) and closing(inspect.currentframe()):
                    raise  # this coroutine is being closed (its task destroyed): report nothing
                report = _failure(lease, exc)
            else:
                report = _success(lease, result, self.max_message_bytes)
        finally:
            if hb is not None:
                hb.cancel()
            sess.running.pop(lease.id, None)
        if report is not None and not lease._abort:
            sess.send(report)


# Reports are built in place: ``WorkerMessage(complete=Complete(...))`` (a message built with
# keywords, then copied into another) costs about twice as much, once per task.


def _close(coro: Any, _task: object) -> None:
    coro.close()  # (a no-op once it ran to its end)


def _success(lease: Lease, result: object, limit: int = 0) -> pb.WorkerMessage:
    """``Complete`` with the encoded result.  An unencodable result fails the attempt; so does
    one larger than the server's ``max_message_bytes`` (``limit``, 0: unknown) less
    :data:`MESSAGE_OVERHEAD`, permanently: clients could not receive it (as the published
    worker does)."""
    try:
        data, ctype = encode_payload(result)
    except Exception as exc:
        failed = _failure(lease, exc)
        assert failed is not None  # (None only for a CancelledError)
        return failed
    if limit and len(data) + MESSAGE_OVERHEAD > limit:
        return _fail(
            lease.id,
            f"output of {len(data)} bytes exceeds the server's message limit of {limit} bytes",
            permanent=True,
        )
    m = pb.WorkerMessage()
    c = m.complete
    c.SetInParent()
    c.lease = lease.id
    if data:
        c.output = data
    if ctype:
        c.content_type = ctype
    return m


def _failure(lease: Lease, exc: BaseException) -> pb.WorkerMessage | None:
    """The report for a handler that raised ``exc`` (None: the lease was aborted)."""
    if isinstance(exc, asyncio.CancelledError):
        if lease._abort:
            return None  # aborted or disconnected: the server no longer wants a report
        if lease._stopped:
            return _fail(lease.id, "worker stopped")
        return _fail(lease.id, "CancelledError: ")  # raised by the handler on its own: retryable
    if isinstance(exc, Reject):
        m = pb.WorkerMessage()
        m.nack.lease = lease.id
        m.nack.reason = exc.reason
        m.nack.SetInParent()
        return m
    if isinstance(exc, CancelTask):
        m = pb.WorkerMessage()
        m.cancelled.lease = lease.id
        m.cancelled.SetInParent()
        return m
    if not isinstance(exc, (Permanent, Retryable)):
        log.warning("handler failed on task %d (attempt %d)", lease.task_id, lease.attempt, exc_info=exc)
    o = outcome_of(exc)
    return _fail(lease.id, o.message, permanent=o.permanent, retry_after=o.retry_after)


def _fail(
    lease: int, message: str, *, permanent: bool = False, retry_after: float | None = None
) -> pb.WorkerMessage:
    m = pb.WorkerMessage()
    fail = m.fail
    fail.SetInParent()
    fail.lease = lease
    fail.message = message
    if permanent:
        fail.permanent = True
    if retry_after is not None:
        fail.retry_after_s = retry_after
    return m


class _Redirect(Exception):
    """A registration refused by a server of another shard, naming the shard's endpoint."""

    def __init__(self, endpoint: str, shard: str, message: str) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.shard = shard
        self.message = message


def _metadata_of(exc: grpc.RpcError) -> dict[str, str]:
    """The initial and trailing metadata of a failed call (either may carry the redirect)."""
    out: dict[str, str] = {}
    for getter in ("initial_metadata", "trailing_metadata"):
        with contextlib.suppress(Exception):
            for k, v in getattr(exc, getter)() or ():
                out.setdefault(k, v if isinstance(v, str) else v.decode("utf-8", "replace"))
    return out


def _report_bytes(m: pb.WorkerMessage) -> int:
    """An upper bound of the bytes report ``m`` adds to a batch (its variable fields + framing)."""
    which = m.WhichOneof("msg")
    if which == "complete":
        return len(m.complete.output) + len(m.complete.content_type) + 32
    if which == "fail":
        return len(m.fail.message.encode()) + 48
    if which == "nack":
        return len(m.nack.reason.encode()) + 32
    if which == "progress":
        return len(m.progress.message.encode()) + 48
    return m.ByteSize() + 32  # (a heartbeat, a durable call)


def _same(m: pb.WorkerMessage) -> pb.WorkerMessage:
    return m


def _pack(items: list[pb.WorkerMessage]) -> pb.WorkerMessage:
    out = pb.WorkerMessage()
    out.batch.messages.extend(items)
    return out
