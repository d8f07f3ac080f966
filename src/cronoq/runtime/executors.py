"""Executor kinds: how the scheduler runs an executor's attempts, declared by the executor's
class or classified once when its :class:`~cronoq.Pool` is made.

Theory of operation
-------------------
The scheduler dispatches an attempt on its pool's :class:`ExecutorKind` in one place
(:meth:`cronoq.runtime.started.Started.start_attempt`).  The kinds the project's own executors
run as are declared by their classes (``executor_kind``: the process executor, the server's
remote executor); a user's executor is classified by :func:`kind_of` from the documented
protocols (docs/reference/behaviour.md#pool-api): an async callable runs on the loop, a plain
function in a thread, an object with ``start_attempt`` is a *starting* executor.

Outcomes: a loop, thread, starting or process attempt ends with what its coroutine, function or
future returns or raises (an exception is a failure: ``errors.outcome_of``); a remote attempt's
outcome is reported as calls on its context (``ctx.complete(output)``, ``ctx.fail(message,
permanent=, retry_after=)``, ``ctx.abort()``), values that are never raised.
"""

from __future__ import annotations

import enum
import inspect

__all__ = ["ExecutorKind", "is_async_callable", "kind_of"]


class ExecutorKind(enum.Enum):
    """How the scheduler runs an executor's attempts: one dispatch on it
    (:meth:`cronoq.runtime.started.Started.start_attempt`).

    An executor class declares its kind as ``executor_kind`` (the process and the server's
    remote executors do); any other executor is classified by :func:`kind_of`."""

    #: ``async def run(ctx, payload)`` (or an object with an async ``__call__``): awaited by one
    #: runner task per attempt on the loop, cancelled on abort
    LOOP = "loop"
    #: a plain function: runs in the loop's default thread pool (an awaitable it returns is
    #: awaited on the loop); an abort only marks ``ctx``
    THREAD = "thread"
    #: a *starting* executor (docs/reference/behaviour.md#pool-api): ``start_attempt(ctx,
    #: payload)`` returns an ``asyncio.Future`` of the output (or its error); abort cancels it
    STARTING = "starting"
    #: ``run_in="process"``: a starting executor whose future is a child process's result
    PROCESS = "process"
    #: the server's remote executor: ``begin(ctx, payload)`` hands the attempt on and its
    #: outcome comes back as calls on ``ctx`` (``complete``, ``fail``, ``abort``), as values;
    #: an engine abort calls ``ctx.on_abort``
    REMOTE = "remote"


def kind_of(executor: object) -> ExecutorKind:
    """The kind ``executor``'s class declares (``executor_kind``), else: a *starting* executor
    when it has a callable ``start_attempt`` (the documented protocol), a loop one when it is
    async, a thread one otherwise."""
    declared = getattr(type(executor), "executor_kind", None)
    if isinstance(declared, ExecutorKind):
        return declared
    if callable(getattr(executor, "start_attempt", None)):
        return ExecutorKind.STARTING
    return ExecutorKind.LOOP if is_async_callable(executor) else ExecutorKind.THREAD


def is_async_callable(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)
