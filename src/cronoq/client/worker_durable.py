"""Durable calls of a remote worker's lease (worker protocol version 7,
docs/how-to/durable.md#remote-workers): ``lease.spawn``, ``lease.wait_for``,
``lease.sleep_for`` / ``lease.sleep_until``, ``lease.wait_signal``, ``lease.step`` (an app's
task functions reach them as ``ctx.spawn`` ... through ``LeaseContext``).

Theory of operation
-------------------
The server keeps the task's journal and carries every call out on its own context of the
attempt (server/worker_durable.py), so the worker is thin: each call is a ``DurableCall``
(a call number unique in the session, the operation, JSON arguments, a spawn's ``TaskSpec``
list) queued on the session like a report, and the handler awaits the future that the
``DurableReply`` with that number resolves (:func:`on_reply`, called by the session's reader).
The reply's error, if any, is raised with its type (``error_kind``); a non-deterministic
replay is a :class:`~cronoq.errors.Permanent`.

A reply that says the attempt *parked* is handled by the reader at once: the lease leaves the
session's running set (its slot is free: the server may already be sending the next lease),
is marked gone, and the call raises :class:`LeaseParked` (a ``CancelledError``), which
unwinds the handler; nothing is reported for the lease.  The task runs again from the top,
under a new lease, when its wait is over, and its calls replay from the journal on the server.

A step runs its function here: ``step`` asks whether it is recorded (then its result is
returned), else the function runs and ``step_done`` records its JSON result.  A resumed task's
lease carries the journal's steps (``Lease.journal_json``, when it fits): a step that matches the
record under the worker's position is answered here without a round trip, and the next call
tells the server how many it replayed (``replayed``) so it moves past them first; every reply
carries the position (``cursor``). Anything else (another name, another call) goes to the
server, which checks it against the journal as in process.

In a session of an older version (the published server) every call raises
:class:`~cronoq.errors.Permanent` saying so.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import inspect
import itertools
import json
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cronoq.client.encoding import decode_payload, spec_of
from cronoq.errors import ArgumentTypeError, Permanent, SchedulerError
from cronoq.outcome import Outcome
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.protocol import DURABLE_VERSION

if TYPE_CHECKING:
    from cronoq.client.worker import Lease, _Session

__all__ = ["DurableCalls", "LeaseParked", "lingers", "on_reply"]


class LeaseParked(asyncio.CancelledError):
    """Unwinds a handler whose attempt parked (not an error: never catch it)."""


_ERRORS: dict[str, type[Exception]] = {
    "permanent": Permanent,
    "timeout": TimeoutError,
    "type": ArgumentTypeError,
    "lookup": LookupError,
    "value": ValueError,
}


class DurableCalls:
    """The durable calls of :class:`~cronoq.client.worker.Lease` (a mixin)."""

    __slots__ = ("_cursor", "_journal", "_replayed", "_resumes")

    def _init_durable(self, msg: pb.Lease) -> None:
        self._resumes: int = msg.resumes
        #: the journal's steps ([name, result], None for other calls) or None (Lease.journal_json)
        self._journal: list[Any] | None = json.loads(msg.journal_json) if msg.journal_json else None
        self._cursor = 0  # the record the next call meets
        self._replayed = 0  # steps replayed here since the last call (DurableCall.replayed)

    @property
    def resumes(self) -> int:
        """How many times the task ran again after a park (0 from an older server)."""
        return self._resumes

    async def spawn(self, specs: object, *, detached: bool = False) -> list[int]:
        """Submit child tasks (a ``task(...)`` spec, a mapping of task fields, or a list of
        them) atomically; their ids (the same ids when the task runs again)."""
        return await spawn(self._lease(), specs, detached)

    async def wait_for(self, ids: Iterable[int]) -> list[Outcome]:
        """How those tasks ended, in order; parks the attempt until they have."""
        return await wait_for(self._lease(), ids)

    async def sleep_for(self, seconds: float) -> None:
        """A durable sleep (the attempt parks)."""
        await sleep_for(self._lease(), seconds)

    async def sleep_until(self, when: float | _dt.datetime) -> None:
        """A durable sleep until ``when`` (Unix seconds or an aware datetime)."""
        await sleep_until(self._lease(), when)

    async def wait_signal(self, name: str, timeout: float | None = None) -> Any:
        """The payload of signal ``name`` (parks until it comes; TimeoutError after ``timeout``)."""
        return await wait_signal(self._lease(), name, timeout)

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` once and record its JSON result; a later run returns the record."""
        return await step(self._lease(), name, fn, *args, **kwargs)

    def _lease(self) -> Lease:
        return self  # type: ignore[return-value]


class _Calls:
    """A session's durable calls awaiting their reply, by call number."""

    __slots__ = ("numbers", "waiting")

    def __init__(self) -> None:
        self.numbers = itertools.count(1)
        self.waiting: dict[int, tuple[Lease, asyncio.Future[pb.DurableReply]]] = {}


_CALLS: weakref.WeakKeyDictionary[_Session, _Calls] = weakref.WeakKeyDictionary()


def on_reply(sess: _Session, msg: pb.DurableReply) -> None:
    """A ``DurableReply`` read from the stream: resolve its call (a parked one frees the slot now)."""
    calls = _CALLS.get(sess)
    entry = None if calls is None else calls.waiting.pop(msg.call, None)
    if entry is None:
        return  # (the lease ended meanwhile: nobody waits for it)
    lease, fut = entry
    if msg.parked:
        held = sess.running.get(lease.id)
        if held is not None and held[0] is lease:
            del sess.running[lease.id]
        lease._aborted("parked")
    if not fut.done():
        fut.set_result(msg)


async def call(
    lease: Lease, op: str, args: dict[str, Any], specs: Iterable[pb.TaskSpec] = ()
) -> pb.DurableReply:
    """Send durable call ``op`` for ``lease`` and await its reply (raising its error)."""
    sess = lease._session
    name = "step" if op == "step_done" else op
    if sess is None or sess.version < DURABLE_VERSION:
        v = 0 if sess is None else sess.version
        raise Permanent(
            f"ctx.{name}() needs worker protocol version {DURABLE_VERSION} (this session speaks {v}): "
            "run the task with a newer server or in process (docs/how-to/durable.md#remote-workers)"
        )
    if lease._abort or not sess.open:
        raise SchedulerError(f"ctx.{name}() works only inside the running attempt of a task")
    calls = _CALLS.get(sess)
    if calls is None:
        calls = _CALLS[sess] = _Calls()
    n = next(calls.numbers)
    m = pb.WorkerMessage()
    d = m.durable
    d.lease = lease.id
    d.call = n
    d.op = op
    d.args_json = json.dumps(args, allow_nan=False)
    d.specs.extend(specs)
    if lease._replayed:
        d.replayed = lease._replayed
        lease._replayed = 0
    fut: asyncio.Future[pb.DurableReply] = asyncio.get_running_loop().create_future()
    calls.waiting[n] = (lease, fut)
    try:
        sess.send(m)
        reply = await fut
    finally:
        calls.waiting.pop(n, None)
    if reply.parked:
        raise LeaseParked()
    if reply.error:
        raise _ERRORS.get(reply.error_kind, SchedulerError)(reply.error)
    lease._cursor = reply.cursor
    return reply


def lingers(m: pb.WorkerMessage) -> bool:
    """Whether a lone report ``m`` may linger for company (cronoq.proto.flush): not a durable
    call, whose handler awaits the reply (a linger would add up to FLUSH_LINGER_S per call)."""
    return m.WhichOneof("msg") != "durable"


def _result(reply: pb.DurableReply) -> Any:
    return json.loads(reply.result_json) if reply.result_json else None


async def spawn(lease: Lease, specs: object, detached: bool = False) -> list[int]:
    if isinstance(specs, (pb.TaskSpec, Mapping)):
        items: list[object] = [specs]
    elif isinstance(specs, Iterable) and not isinstance(specs, (str, bytes)):
        items = list(specs)
    else:
        raise ArgumentTypeError(
            f"ctx.spawn() takes a task(...) spec, a mapping of task fields or a list of them (got {specs!r})"
        )
    wire = [spec_of(s) for s in items]
    return [int(i) for i in _result(await call(lease, "spawn", {"detached": bool(detached)}, wire))]


async def wait_for(lease: Lease, ids: object) -> list[Outcome]:
    if isinstance(ids, (int, str, bytes)) or not isinstance(ids, Iterable):
        raise ArgumentTypeError(f"ctx.wait_for() takes a list of task ids (got {ids!r})")
    reply = await call(lease, "wait_for", {"ids": list(ids)})
    return [
        Outcome(
            o.id,
            o.key or None,
            o.status,
            decode_payload(o.output, o.content_type) if o.has_output else None,
            o.message or None,
        )
        for o in reply.outcomes
    ]


async def sleep_for(lease: Lease, seconds: float) -> None:
    await call(lease, "sleep_for", {"seconds": seconds})


async def sleep_until(lease: Lease, when: float | _dt.datetime) -> None:
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            raise ValueError("ctx.sleep_until() needs an aware datetime (with a tzinfo)")
        when = when.timestamp()
    await call(lease, "sleep_until", {"unix": when})


async def wait_signal(lease: Lease, name: str, timeout: float | None = None) -> Any:
    return _result(await call(lease, "wait_signal", {"name": name, "timeout": timeout}))


async def step(lease: Lease, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if not isinstance(name, str) or not name:
        raise ValueError(f"ctx.step() needs a non-empty name (got {name!r})")
    if not callable(fn):
        raise ArgumentTypeError(f"ctx.step() needs a callable (got {fn!r})")
    j, n = lease._journal, lease._cursor
    if j is not None and n < len(j) and j[n] is not None and j[n][0] == name:
        lease._cursor = n + 1  # replayed here: the server moves past it with the next call
        lease._replayed += 1
        return j[n][1]
    got = _result(await call(lease, "step", {"name": name}))
    if got["recorded"]:
        return got["value"]
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    try:
        value = json.loads(json.dumps(result, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise type(e)(f"the result of step '{name}' is not JSON: {e}") from None
    return _result(await call(lease, "step_done", {"name": name, "value": value}))["value"]
