"""Durable calls of a running task: ``ctx.spawn``, ``ctx.wait_for``, ``ctx.sleep_for`` /
``ctx.sleep_until``, ``ctx.wait_signal``, ``ctx.step``, and ``sched.signal``
(docs/how-to/durable.md).

Theory of operation
-------------------
The engine keeps each task's journal (``engine/parking.py``); this module walks it.  A
:class:`~cronoq.runtime.context.TaskContext` starts every run at record 0 (``ctx._cursor``).
Each durable call first looks at the record under the cursor:

* there is one: this is a *replay*.  The call must be the one recorded (same operation, same
  name, for a spawn the same specs, for a wait the same ids); then it answers from the record
  (a spawn its ids, a step its result, a sleep its recorded end, a signal wait its payload or
  its timeout) and moves the cursor on.  Anything else fails the task permanently with
  :class:`NonDeterministic` (``non-deterministic replay: ...``, saying what was recorded and
  what came): a task must make its durable calls in the same order on every run;
* there is none: the call is new.  It is carried out and recorded in one engine call (a
  spawn's children and its record are created together), and with a durable store the call
  returns only once that is committed.

A wait that cannot be answered at once *parks* the attempt (the engine frees the slot and the
lease) and unwinds the task function with :class:`Parked`, a ``CancelledError`` marked as the
scheduler's own (``ctx`` is cancelled and ended first), so the runner reports nothing and
code that catches ``Exception`` cannot swallow it.  When the wait is over the task is
dispatched again and its function runs from the top, replaying what is recorded.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import hashlib
import inspect
import json
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from cronoq.engine.admission import BatchItem
from cronoq.engine.keys import same_tenant
from cronoq.engine.model import check_stored_text
from cronoq.engine.parking import S_RECEIVED, S_TIMED_OUT, StaleLease, check_signal_name
from cronoq.engine.time import NS
from cronoq.errors import ArgumentTypeError, Permanent, SchedulerError, SubmitError
from cronoq.outcome import Outcome, SignalResult
from cronoq.runtime.task import Task

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.runtime.context import TaskContext
    from cronoq.runtime.started import Started

__all__ = [
    "NonDeterministic",
    "Parked",
    "SignalResult",
    "Signals",
    "json_value",
    "step_record",
    "step_replay",
]


class Parked(asyncio.CancelledError):
    """Unwinds a task function whose attempt parked (not an error: never catch it)."""


class NonDeterministic(Permanent):
    """A replayed task made a durable call other than the one its journal recorded."""


class Signals:
    """``sched.signal`` (a mixin of :class:`~cronoq.runtime.scheduler.Scheduler`, which has
    ``_started()``)."""

    if TYPE_CHECKING:

        def _started(self) -> Started: ...

    async def signal(self, name: str, payload: object = None, *, tenant: str | None = None) -> SignalResult:
        """Send signal ``name`` with a JSON ``payload``: every task waiting for it
        (``ctx.wait_signal``), and every task that waits for it later while it is retained
        (the retention of finished tasks), gets the payload.  Write-once: a second signal of
        the same name reports ``duplicate=True`` and changes nothing.  Signals are scoped by
        ``tenant`` as keys are: only that tenant's tasks see it."""
        name = check_signal_name(name)
        if tenant:  # (kept with the name as text by a store)
            check_stored_text("tenant", tenant, ValueError)
        payload = json_value(payload, f"the payload of signal '{name}'")
        run = self._started()
        dup = run.core.parking.send(run.now(), name, payload, tenant or None)
        await run.done()
        return SignalResult(name, dup)


# ---------------------------------------------------------------------------------------------
# helpers


def json_value(value: object, what: str) -> Any:
    """``value`` as it reads back from JSON; TypeError/ValueError when it is not JSON."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise type(e)(f"{what} is not JSON: {e}") from None


def _type_name(o: object) -> str:
    """How a payload that is not JSON counts in a spawn's fingerprint: its ``fingerprint()``
    when it has one (the server's payload bytes), else its type's name."""
    fp = getattr(o, "fingerprint", None)
    if callable(fp):
        return str(fp())
    return type(o).__qualname__


def _fingerprint(tasks: list[Task]) -> str:
    """A stable digest of what a spawn asked for (payloads, keys, fields, edges)."""
    shape = [
        [
            t._sub.payload,
            sorted((k, repr(v)) for k, v in t._sub._asdict().items() if k != "payload" and v is not None),
        ]
        for t in tasks
    ]
    data = json.dumps(shape, sort_keys=True, default=_type_name).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def _describe(rec: list[Any]) -> str:
    op, name = rec[0], rec[1]
    if op == "spawn":
        return f"spawn of {len(rec[2])} task(s) (specs {name})"
    if op == "wait":
        return f"wait_for({rec[2]})"
    if op == "sleep":
        return "sleep"
    return f"{op} '{name}'"


def _running(ctx: TaskContext, call: str) -> tuple[Started, Core]:
    run = ctx._run
    core = run.core
    if ctx._ended or ctx._cancelled or not run.live or core.leases.get(ctx.lease) is not ctx._task:
        raise SchedulerError(f"ctx.{call}() works only inside the running attempt of a task")
    return run, core


def _replay(
    ctx: TaskContext, core: Core, came: list[Any], same: Callable[[list[Any]], bool]
) -> list[Any] | None:
    """The record under ``ctx``'s cursor if there is one (the call ``came`` must match it)."""
    j = core.parking.journal(ctx._task.id)
    n = ctx._cursor
    if j is None or n >= len(j.records):
        return None
    rec = j.records[n]
    if rec[0] != came[0] or rec[1] != came[1] or not same(rec):
        raise NonDeterministic(
            f"non-deterministic replay: durable call {n + 1} was recorded as {_describe(rec)}"
            f" but the task made {_describe(came)}"
        )
    ctx._cursor = n + 1
    return rec


def _record(ctx: TaskContext, core: Core, rec: list[Any]) -> int:
    n = core.parking.record(ctx.lease, rec)
    ctx._cursor = n + 1
    return n


def _park(ctx: TaskContext, run: Started) -> Parked:
    """The engine parked ``ctx``'s attempt: end it here too; the exception to raise."""
    ctx._cancelled = True
    ctx._ended = True
    run.running.pop(ctx.lease, None)
    if ctx.on_park is not None:  # (a remote attempt: its worker's slot frees before the dispatch)
        ctx.on_park()
    run.settle()
    return Parked()


async def _committed(run: Started) -> None:
    await run.done()


# ---------------------------------------------------------------------------------------------
# the calls (TaskContext delegates here)


async def spawn(ctx: TaskContext, specs: Task | Iterable[Task], detached: bool = False) -> list[int]:
    run, core = _running(ctx, "spawn")
    sched = run.sched
    tasks = [specs] if isinstance(specs, Task) else list(specs) if isinstance(specs, Iterable) else None
    if tasks is None or not all(isinstance(t, Task) for t in tasks):
        raise ArgumentTypeError(f"ctx.spawn() takes a cronoq.Task or a list of them (got {specs!r})")
    fp = _fingerprint(tasks)
    rec = _replay(ctx, core, ["spawn", fp, [None] * len(tasks), bool(detached)], lambda r: True)
    if rec is not None:
        return list(rec[2])
    for t in tasks:
        if t._opts.resolver not in (None, core):
            t._opts = t._opts.unresolved()
    blobs = [run.blob(t._sub.payload) for t in tasks] if run.committer is not None else None
    while True:
        now = run.now()
        items = [
            BatchItem(
                t._opts,
                sub.payload,
                sub.key,
                None if sub.deadline is None else sub.deadline.resolve(now, run.time_base),
                None if sub.start is None else sub.start.resolve(now, run.time_base),
                sub.deps,
                None if blobs is None else blobs[i],
            )
            for i, t in enumerate(tasks)
            for sub in (t._sub,)
        ]
        try:
            ids = core.parking.spawn(now, ctx.lease, items, fp, bool(detached))
            break
        except SubmitError as e:
            if e.code != "full" or sched._nowait:
                raise
            full = next((o for o, *_ in items if core.pools[o.pool_index].waiting_space), items[0][0])
        await run.wait_space(full)
        run, core = _running(ctx, "spawn")
    ctx._cursor = len(core.parking.journal(ctx._task.id).records)  # type: ignore[union-attr]
    await _committed(run)
    return ids


async def wait_for(ctx: TaskContext, ids: Iterable[int]) -> list[Outcome]:
    run, core = _running(ctx, "wait_for")
    if isinstance(ids, int) or not isinstance(ids, Iterable):
        raise ArgumentTypeError(f"ctx.wait_for() takes a list of task ids (got {ids!r})")
    wanted = list(ids)
    for i in wanted:
        if isinstance(i, bool) or not isinstance(i, int):
            raise ArgumentTypeError(f"ctx.wait_for() takes task ids (ints), got {i!r}")
    rec = _replay(ctx, core, ["wait", "", wanted], lambda r: r[2] == wanted)
    if rec is None:
        tenant = ctx._task.opts.tenant
        for i in wanted:
            t = core.parking.find(ctx._task.id, i)  # (a spawned child retention forgot too)
            if t is None or not same_tenant(t.opts.tenant, tenant):
                raise LookupError(f"ctx.wait_for(): no task {i}")
            if i == ctx._task.id:
                raise ValueError("ctx.wait_for(): a task cannot wait for itself")
        _record(ctx, core, ["wait", "", wanted])
        await _committed(run)
        run, core = _running(ctx, "wait_for")
    if core.parking.wait_tasks(run.now(), ctx.lease, wanted):
        raise _park(ctx, run)
    return [Outcome(*o) for o in core.parking.outcomes(wanted, ctx._task.id)]


def _seconds(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{what} must be a number of seconds (got {value!r})")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be finite and >= 0 (got {value!r})")
    return float(value)


async def sleep_until_unix_ns(ctx: TaskContext, until: int | None, call: str) -> None:
    run, core = _running(ctx, call)
    rec = _replay(ctx, core, ["sleep", "", until], lambda r: True)
    if rec is None:
        assert until is not None
        _record(ctx, core, ["sleep", "", until])
        await _committed(run)
        run, core = _running(ctx, call)
    else:
        until = rec[2]
    assert until is not None
    if core.parking.sleep(run.now(), ctx.lease, until - run.time_base):
        raise _park(ctx, run)


async def sleep_for(ctx: TaskContext, seconds: float) -> None:
    s = _seconds(seconds, "ctx.sleep_for() seconds")
    run, core = _running(ctx, "sleep_for")
    j = core.parking.journal(ctx._task.id)
    replaying = j is not None and ctx._cursor < len(j.records)
    until = None if replaying else run.time_base + run.now() + round(s * NS)
    await sleep_until_unix_ns(ctx, until, "sleep_for")


async def sleep_until(ctx: TaskContext, when: float | _dt.datetime) -> None:
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            raise ValueError("ctx.sleep_until() needs an aware datetime (with a tzinfo)")
        unix = when.timestamp()
    else:
        unix = _seconds(when, "ctx.sleep_until() when (Unix seconds)")
    await sleep_until_unix_ns(ctx, round(unix * NS), "sleep_until")


async def wait_signal(ctx: TaskContext, name: str, timeout: float | None = None) -> Any:
    name = check_signal_name(name)
    t_out = None if timeout is None else _seconds(timeout, "ctx.wait_signal() timeout")
    run, core = _running(ctx, "wait_signal")
    n = ctx._cursor
    rec = _replay(ctx, core, ["signal", name, None], lambda r: True)
    if rec is None:
        deadline = None if t_out is None else run.time_base + run.now() + round(t_out * NS)
        n = _record(ctx, core, ["signal", name, [deadline, 0, None]])
        await _committed(run)
        run, core = _running(ctx, "wait_signal")
        rec = core.parking.journal(ctx._task.id).records[n]  # type: ignore[union-attr]
    deadline = rec[2][0]
    until = None if deadline is None else deadline - run.time_base
    try:
        parked = core.parking.wait_signal(run.now(), ctx.lease, name, n, until)
    except StaleLease:  # pragma: no cover - checked by _running just before
        raise SchedulerError("ctx.wait_signal() works only inside the running attempt of a task") from None
    if parked:
        raise _park(ctx, run)
    state, payload = rec[2][1], rec[2][2]
    if state == S_RECEIVED:
        return payload
    assert state == S_TIMED_OUT
    raise TimeoutError(f"signal '{name}' did not come within the timeout")


async def step(ctx: TaskContext, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    _step_name(name)
    if not callable(fn):
        raise ArgumentTypeError(f"ctx.step() needs a callable (got {fn!r})")
    recorded, value = step_replay(ctx, name)
    if recorded:
        return value
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return await step_record(ctx, name, result)


def _step_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"ctx.step() needs a non-empty name (got {name!r})")


def step_replay(ctx: TaskContext, name: str) -> tuple[bool, Any]:
    """The first half of ``ctx.step(name, ...)``: ``(True, result)`` when the step is recorded
    (a replay), else ``(False, None)``: run it, then :func:`step_record` (a remote worker runs
    the function between the two)."""
    _step_name(name)
    _run, core = _running(ctx, "step")
    rec = _replay(ctx, core, ["step", name, None], lambda r: True)
    return (False, None) if rec is None else (True, rec[2])


async def step_record(ctx: TaskContext, name: str, result: object) -> Any:
    """The second half of ``ctx.step``: record ``result`` (JSON) for step ``name``; returns it
    as it reads back."""
    value = json_value(result, f"the result of step '{name}'")
    run, core = _running(ctx, "step")
    _record(ctx, core, ["step", name, value])
    await _committed(run)
    return value


def journal_steps(ctx: TaskContext) -> list[Any] | None:
    """The task's journal for a remote worker's own replay: ``[name, result]`` per step record,
    None per other record; None without a journal."""
    run = ctx._run
    j = run.core.parking.journal(ctx._task.id) if run.live else None
    return None if j is None else steps_of(j.records)


def steps_of(records: list[Any]) -> list[Any] | None:
    """Journal ``records`` as :func:`journal_steps` gives them (None when there are none)."""
    return [[r[1], r[2]] if r[0] == "step" else None for r in records] or None


def skip_steps(ctx: TaskContext, n: int) -> None:
    """Move past ``n`` step records a remote worker replayed itself (:func:`journal_steps`)."""
    _run, core = _running(ctx, "step")
    j = core.parking.journal(ctx._task.id)
    records = [] if j is None else j.records
    end = ctx._cursor + n
    if end > len(records) or any(r[0] != "step" for r in records[ctx._cursor : end]):
        raise ValueError(f"{n} replayed step(s) at record {ctx._cursor + 1} are not in the journal")
    ctx._cursor = end


def cursor(ctx: TaskContext) -> int:
    """The journal record the task's next durable call meets."""
    return ctx._cursor


def resumes(ctx: TaskContext) -> int:
    run = ctx._run
    j = run.core.parking.journal(ctx._task.id) if run.live else None
    return 0 if j is None else j.resumes
