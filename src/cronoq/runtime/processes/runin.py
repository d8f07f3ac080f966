"""``run_in``: where a function runs (``"loop"``, ``"thread"`` or ``"process"``), checked early.

Theory of operation
-------------------
``"loop"`` is the default for an ``async def`` and ``"thread"`` for a plain ``def`` (as before);
``"process"`` runs the function in a child process (:mod:`.supervisor`). A child gets the
function by reference (module and qualified name), so it must be a module-level function: a
lambda, a nested function or a bound method of a local object cannot reach it. These are
refused with a ``ValueError`` saying why when the :class:`~cronoq.Pool` is made or the task is
decorated, never at the first attempt. An ``async def`` is accepted for ``"process"``: it runs
on an event loop of the child's own.

:class:`ProcessExecutor` is what a ``Pool(..., run_in="process")`` runs: a *starting* executor
(``start_attempt``; kind ``PROCESS``, :mod:`cronoq.runtime.executors`) whose future is the
child's result, so the scheduler's abort (timeout, cancel, lease loss, shutdown) cancels it and
the child is killed.
"""

from __future__ import annotations

import inspect
import pickle
from typing import Any

from cronoq.runtime.executors import ExecutorKind, is_async_callable
from cronoq.runtime.processes.jobs import CTX_LEASE, CTX_TASK
from cronoq.runtime.processes.registry import run_in_process, start_in_process

__all__ = ["RUN_IN", "ProcessExecutor", "check_run_in", "lease_handler"]

RUN_IN = ("loop", "thread", "process")


def check_run_in(fn: object, run_in: object, where: str, *, by_reference: bool = False) -> str | None:
    """``run_in`` for ``fn`` checked (None: the default for its kind), ValueError saying why.

    ``by_reference``: the function is not bound to its module name yet (a task being
    decorated), so it is checked by its name instead of by pickling it."""
    if run_in is None:
        return None
    if run_in not in RUN_IN:
        raise ValueError(f"{where}: run_in must be 'loop', 'thread' or 'process' (got {run_in!r})")
    is_async = is_async_callable(fn)
    if run_in == "loop" and not is_async:
        raise ValueError(
            f"{where}: run_in='loop' takes an async def (a plain function would block the event loop;"
            " use run_in='thread' or 'process')"
        )
    if run_in == "thread" and is_async:
        raise ValueError(f"{where}: run_in='thread' takes a plain function (an async def runs on the loop)")
    if run_in == "process":
        _check_picklable(fn, where, by_reference)
    return str(run_in)


def _check_picklable(fn: object, where: str, by_reference: bool) -> None:
    name = str(getattr(fn, "__qualname__", ""))
    why = "a child process gets the function by its module and name"
    if getattr(fn, "__name__", None) == "<lambda>":
        raise ValueError(f"{where}: run_in='process' cannot take a lambda ({why}; use a module-level def)")
    if "<locals>" in name:
        raise ValueError(
            f"{where}: run_in='process' cannot take the nested function {name} ({why}; "
            "define it at module level)"
        )
    if by_reference:
        if not inspect.isfunction(fn):
            raise ValueError(f"{where}: run_in='process' takes a module-level function (got {fn!r})")
        return
    try:
        pickle.dumps(fn)
    except Exception as e:
        raise ValueError(
            f"{where}: run_in='process' needs a function that can be pickled ({why}): {type(e).__name__}: {e}"
        ) from None


class ProcessExecutor:
    """The executor of a ``Pool(..., run_in="process")``: runs ``fn(ctx, payload)`` in a child."""

    __slots__ = ("fn",)

    executor_kind = ExecutorKind.PROCESS

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def start_attempt(self, ctx: Any, payload: object) -> Any:
        return start_in_process(ctx, self.fn, (payload,), {}, CTX_TASK)

    async def __call__(self, ctx: Any, payload: object) -> Any:
        return await run_in_process(ctx, self.fn, (payload,), {}, CTX_TASK)

    def __repr__(self) -> str:
        return f"ProcessExecutor({getattr(self.fn, '__qualname__', self.fn)!r})"


def lease_handler(fn: Any) -> Any:
    """A remote worker's handler that runs ``fn(lease)`` in a child process (``cronoq worker
    --run-in process``): the child gets a copy of the lease (fields, payload, ``cancelled``,
    ``heartbeat()``, progress); the worker keeps heartbeating while it runs."""

    async def run_lease(lease: Any) -> Any:
        return await run_in_process(lease, fn, (), {}, CTX_LEASE)

    run_lease.__name__ = getattr(fn, "__name__", "handler")
    return run_lease
