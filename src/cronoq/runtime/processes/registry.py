"""Where an attempt's process runs: the supervisors of a scheduler or a remote worker.

Theory of operation
-------------------
Every :class:`~cronoq.Scheduler` owns a :class:`ProcessRegistry` (its ``processes=`` settings,
empty until a process attempt comes), and so does every remote
:class:`cronoq.client.Worker`, which makes it current (a context variable) while it runs. A
registry holds one :class:`~.supervisor.Supervisor` per pool, made on first use with the
pool's own ``processes=`` or else the registry's.

:func:`start_in_process` is the one entry point: given the attempt's context — a
:class:`~cronoq.TaskContext` (in-process scheduler), a remote task's ``LeaseContext`` or a
worker's ``Lease`` —, it finds the registry, the supervisor and the pool's capacity, copies the
attempt's fields the child context shows (its parents' outcomes pickled once, unpickled in the
child only when read), and starts the job. With ``in_threads`` (what the test
kit sets by default) the job runs in the loop's thread pool instead, still through a pickle
round trip of its arguments and result, so virtual time keeps working and pickling mistakes
still show, and a named task's app's call hooks run around it in that thread (the app's
lifespan is the scheduler's, already running).
"""

from __future__ import annotations

import asyncio
import contextvars
import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

from cronoq.runtime.context import TaskContext
from cronoq.runtime.processes.jobs import CTX_LEASE, CTX_NONE, FnRef, pickling_error
from cronoq.runtime.processes.lifespans import call_hooked
from cronoq.runtime.processes.settings import Processes
from cronoq.runtime.processes.supervisor import Supervisor

__all__ = ["CURRENT", "IN_THREADS", "ProcessRegistry", "start_in_process"]


class ProcessRegistry:
    """The process supervisors of one scheduler or worker, by pool name."""

    def __init__(self, settings: Processes | None = None) -> None:
        self.settings = settings if settings is not None else Processes()
        #: run process jobs in the loop's thread pool instead (the test kit's default)
        self.in_threads = False
        #: a remote worker's slots now (None: unknown), which bound its children
        self.capacity: Callable[[], int | None] | None = None
        self._sups: dict[str, Supervisor] = {}

    def supervisor(self, pool: str, settings: Processes | None = None) -> Supervisor:
        """The supervisor of ``pool`` (made on first use); ``settings`` (the pool's own) apply
        to it from now on, else the registry's."""
        sup = self._sups.get(pool)
        if sup is None:
            sup = self._sups[pool] = Supervisor(pool, settings or self.settings)
        elif settings is not None:
            sup.settings = settings
        return sup

    @property
    def supervisors(self) -> dict[str, Supervisor]:
        return dict(self._sups)

    async def close(self) -> None:
        """Stop every child (see :meth:`Supervisor.close`); the registry can be used again."""
        sups, self._sups = list(self._sups.values()), {}
        for sup in sups:
            await sup.close()


#: the registry of the remote worker running the current task (set by ``Worker.run``)
CURRENT: contextvars.ContextVar[ProcessRegistry | None] = contextvars.ContextVar(
    "cronoq_processes", default=None
)
#: the registry of a lease handler run outside a Worker (children exit with this process)
_FALLBACK = ProcessRegistry()
#: a registry whose jobs run in threads (``cronoq.testing.eager`` makes it current)
IN_THREADS = ProcessRegistry()
IN_THREADS.in_threads = True


def _info(ctx: Any) -> dict[str, Any]:
    """The attempt's fields a child context shows (plain values only)."""
    info: dict[str, Any] = {
        "attempt": ctx.attempt,
        "kind": ctx.kind,
        "key": ctx.key,
        "pool": ctx.pool,
        "timeout": ctx.timeout,
        "deadline": ctx.deadline,
        "tags": dict(ctx.tags),
    }
    if hasattr(ctx, "task_id"):  # a worker's Lease
        info.update(
            id=ctx.task_id,
            lease=ctx.id,
            payload=bytes(ctx.payload),
            content_type=ctx.content_type,
            priority=ctx.priority,
            lease_ttl=ctx.lease_ttl,
        )
    else:
        info.update(id=ctx.id, lease=ctx.lease, group=getattr(ctx, "group", None) or {})
    parents = getattr(ctx, "parents", ())
    if parents:
        info["parents"] = _pickled_parents(parents)
    return info


def _pickled_parents(parents: tuple[Any, ...]) -> bytes:
    """``ctx.parents`` for the child (docs/concepts/dependencies.md#outputs-on-edges), pickled
    once here as ``(id, key, status, output, message)`` tuples (the child unpickles them only
    if the attempt reads them); an output that does not pickle goes as None."""
    rows = [(o.id, o.key, o.status, o.output, o.message) for o in parents]
    try:
        return pickle.dumps(rows)
    except Exception:
        safe = []
        for row in rows:
            try:
                pickle.dumps(row[3])
            except Exception:
                row = (*row[:3], None, row[4])
            safe.append(row)
        return pickle.dumps(safe)


def _where(ctx: Any) -> tuple[ProcessRegistry, Supervisor]:
    if isinstance(ctx, TaskContext):
        run = ctx._run
        reg = run.sched._procs
        index = ctx._task.opts.pool_index
        pool = run.pools[index]
        sup = reg.supervisor(pool.name, pool.processes)

        def capacity() -> int | None:
            return run.core.pools[index].capacity if run.live else None

        sup.capacity = capacity
        return reg, sup
    reg = CURRENT.get() or _FALLBACK
    sup = reg.supervisor(getattr(ctx, "pool", "default"))
    if reg.capacity is not None:
        sup.capacity = reg.capacity
    return reg, sup


def start_in_process(
    ctx: Any, fn: object, args: tuple[Any, ...], kwargs: dict[str, Any], ctx_kind: int
) -> asyncio.Future[Any]:
    """Start ``fn`` for the attempt of ``ctx`` in a child process (see the module docstring);
    ``ctx_kind`` says what ``fn`` gets first (:mod:`.jobs`). Cancelling the future kills it."""
    reg, sup = _where(ctx)
    if reg.in_threads:
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, partial(_in_thread, ctx, fn, args, kwargs, ctx_kind))
    if ctx_kind == CTX_LEASE:
        progress, heartbeat = ctx.report_progress, ctx.heartbeat
    else:
        progress, heartbeat = ctx.progress, ctx.heartbeat
    return sup.start(fn, ctx_kind, _info(ctx), args, kwargs, progress, heartbeat)


def _in_thread(ctx: Any, fn: object, args: tuple[Any, ...], kwargs: dict[str, Any], ctx_kind: int) -> Any:
    """A process job run in a thread instead (the test kit): pickled both ways all the same."""
    try:
        args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))
    except Exception as e:
        raise pickling_error("the task's arguments cannot be pickled for its process", e) from None
    owner: Any = None
    if isinstance(fn, FnRef):
        target, owner = (fn.local, fn.owner) if fn.local is not None else fn.target()
    else:
        target = fn
    if ctx_kind != CTX_NONE:
        args = (ctx, *args)
    result = call_hooked(owner, target, args, kwargs)  # a named task's app's call hooks
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    try:
        return pickle.loads(pickle.dumps(result))
    except Exception as e:
        raise pickling_error("the result cannot be pickled", e) from None


async def run_in_process(
    ctx: Any, fn: object, args: tuple[Any, ...], kwargs: dict[str, Any], ctx_kind: int
) -> Any:
    """``await`` form of :func:`start_in_process` (cancelling the caller kills the child)."""
    return await start_in_process(ctx, fn, args, kwargs, ctx_kind)
