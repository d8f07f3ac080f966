"""Durable calls of remote workers (worker protocol version 7, docs/how-to/durable.md#remote-workers).

Theory of operation
-------------------
A task running on a remote worker makes its durable calls (``ctx.spawn``, ``ctx.wait_for``,
``ctx.sleep_for`` / ``ctx.sleep_until``, ``ctx.wait_signal``, ``ctx.step``) as
``DurableCall`` messages on the worker's stream.  The server's attempt of that task has an
in-process :class:`~cronoq.runtime.context.TaskContext` (the remote executor's ``ctx``), and
each call is carried out on it by the same functions as in process
(:mod:`cronoq.runtime.parking`): the journal, its replay and the determinism check, the atomic
spawn, the commit to the store, and parking all live on the server.  A spawn's children are
bounded by the worker's token as a submission would be (pools it may use, its tenant).  The
worker only sends the call and raises or returns what the ``DurableReply`` says; it never sees
the journal (a replay costs one round trip per call).

A step is two calls: ``step`` answers whether the step is recorded (and its result), and, when
it is not, the worker runs the function and sends ``step_done`` with the result to record.

Each call runs in its own asyncio task (a spawn or a record waits for the store's commit),
which sets ``ctx.on_park`` unless the attempt ended before the task ran (its end drops that
hold, ``Attempt._end``; an ended attempt cannot park).  When a call parks the attempt, the
runtime calls ``ctx.on_park`` before the scheduler dispatches anything:
:meth:`WorkerSession.parked` takes the lease off the session (so the freed slot is free on the
worker too) and queues the parked reply, which therefore reaches the worker before any lease
that slot gets.  The worker unwinds the task and reports nothing.

An error of a call is raised in the task on the worker with the same type
(:data:`ERROR_KINDS`); a non-deterministic replay is a ``Permanent`` failure there as here.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Any

import cronoq.runtime.parking as parking
from cronoq.errors import ArgumentTypeError, Permanent
from cronoq.outcome import Outcome
from cronoq.runtime.task import Task
from cronoq.server import convert, request_limits
from cronoq.server.auth import PermissionDenied, Principal, allows_pool, stamp_tenant
from cronoq.server.workers import Attempt, Blob, DurableCallMsg, DurableReplyMsg, WorkerSession

if TYPE_CHECKING:
    from cronoq.runtime.context import TaskContext
    from cronoq.server.app import ServerApp

__all__ = ["ERROR_KINDS", "WorkerDurable", "error_kind"]

#: The error kinds a ``DurableReply`` names, most specific first (the worker raises the same).
ERROR_KINDS: tuple[tuple[str, type[BaseException]], ...] = (
    ("permanent", Permanent),
    ("timeout", TimeoutError),
    ("type", ArgumentTypeError),
    ("lookup", LookupError),
    ("value", ValueError),
    ("type", TypeError),
)

#: Bytes of a reply kept free for its framing and the fields not counted.
_MARGIN = 4096


def error_kind(exc: BaseException) -> str:
    """The ``DurableReply.error_kind`` of ``exc`` ("scheduler" for anything else)."""
    for kind, tp in ERROR_KINDS:
        if isinstance(exc, tp):
            return kind
    return "scheduler"


class WorkerDurable:
    """The registry's ``durable`` handler: carries out one worker's durable call."""

    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self._calls: set[asyncio.Task[None]] = set()

    def __call__(self, session: WorkerSession, att: Attempt, call: DurableCallMsg) -> None:
        task = asyncio.get_running_loop().create_task(self._run(session, att, call))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _run(self, session: WorkerSession, att: Attempt, call: DurableCallMsg) -> None:
        ctx = att.ctx
        if not att.done:  # (an attempt that ended before this task ran parks no more, and
            # its end already dropped on_park: setting it now would hold the attempt in a cycle)
            ctx.on_park = partial(session.parked, att, call.call)
        try:
            if call.replayed:
                parking.skip_steps(ctx, call.replayed)
            reply = await self._do(session, ctx, call)
            reply.cursor = parking.cursor(ctx)
        except parking.Parked:
            return  # (the parked reply went out from on_park)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            reply = DurableReplyMsg(call.call, error=str(e) or type(e).__name__, error_kind=error_kind(e))
        session.send(reply)

    async def _do(self, session: WorkerSession, ctx: TaskContext, call: DurableCallMsg) -> DurableReplyMsg:
        op, args = call.op, call.args
        if op == "spawn":
            try:
                request_limits.check_batch(self.app.limits, len(call.specs))
            except request_limits.InvalidArgument as e:
                raise ValueError(f"ctx.spawn(): {e}") from None
            children = [self._child(session.principal, spec) for spec in call.specs]
            tasks = [t for t, _ in children]
            ids = await parking.spawn(ctx, tasks, bool(args.get("detached", False)))
            for _, blob in children:
                self.app.payloads.hold(blob)
            return DurableReplyMsg(call.call, result=ids)
        if op == "wait_for":
            outcomes = await parking.wait_for(ctx, _list(args.get("ids"), "ctx.wait_for() ids"))
            return DurableReplyMsg(call.call, outcomes=self._fit(outcomes))
        if op == "sleep_for":
            await parking.sleep_for(ctx, args.get("seconds"))  # type: ignore[arg-type]
            return DurableReplyMsg(call.call)
        if op == "sleep_until":
            await parking.sleep_until(ctx, args.get("unix"))  # type: ignore[arg-type]
            return DurableReplyMsg(call.call)
        if op == "wait_signal":
            timeout = args.get("timeout")
            payload = await parking.wait_signal(ctx, args.get("name"), timeout)  # type: ignore[arg-type]
            return DurableReplyMsg(call.call, result=payload)
        if op == "step":
            recorded, value = parking.step_replay(ctx, args.get("name"))  # type: ignore[arg-type]
            return DurableReplyMsg(call.call, result={"recorded": recorded, "value": value})
        if op == "step_done":
            value = await parking.step_record(ctx, str(args.get("name")), args.get("value"))
            return DurableReplyMsg(call.call, result={"recorded": True, "value": value})
        raise ValueError(f"unknown durable call '{op}'")

    def _child(self, principal: Principal | None, spec: Any) -> tuple[Task, Blob]:
        """A spawned child from its wire spec (checked as SubmitBatch checks one). The worker's
        token bounds it as it would a submission: a pool it may use, its tenant."""
        app = self.app
        try:
            sub = convert.submission(spec, app.limits)
        except ValueError as e:  # (InvalidArgument: a limit; InvalidSubmission: a field)
            raise ValueError(f"ctx.spawn(): {e}") from None
        pool = sub.pool or app.config.default_pool
        if pool not in app.sched.pools or not allows_pool(principal, pool):  # (no oracle)
            raise LookupError(f"ctx.spawn(): unknown pool '{pool}'")
        if principal is not None and principal.tenant is not None:
            try:
                sub = sub._replace(tenant=stamp_tenant(principal, sub.tenant))
            except PermissionDenied as e:
                raise ValueError(f"ctx.spawn(): {e}") from None
        payload: Blob = sub.payload  # type: ignore[assignment]
        return Task.of(sub), payload

    def _fit(self, outcomes: list[Outcome]) -> tuple[Outcome, ...]:
        """``outcomes`` with the outputs that fit in one reply (the rest read None, as a lease's
        parents do when they do not fit)."""
        room = self.app.registry.max_message_bytes - _MARGIN
        out = []
        for o in outcomes:
            room -= 64 + len(o.key or "") + len(o.message or "")
            if isinstance(o.output, Blob):
                n = len(o.output.data) + len(o.output.content_type)
                if n > room:
                    o = Outcome(o.id, o.key, o.status, None, o.message)
                else:
                    room -= n
            out.append(o)
        return tuple(out)


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ArgumentTypeError(f"{what} must be a list of task ids (got {value!r})")
    return value
