"""An app's lifespan and call hooks inside a process child (runs in the child only).

Theory of operation
-------------------
A job's function has an *owner* when something must be set up around it in the child: the
:class:`~cronoq.App` of a named task (a :class:`~.jobs.FnRef` to a task definition), or a
pickled callable that has a ``lifespan_context()`` method itself (what ``manage.py
cronoq_worker --run-in process`` runs: it sets Django up and enters the project's apps).

:class:`ChildLifespans` enters an owner's ``lifespan_context()`` on the child's event loop
before the first job that needs it — once per child and owner — and keeps it open for the
child's life; what it yielded is the ``state`` of the child's task context (as ``ctx.state``
in process). :meth:`ChildLifespans.close` leaves them, in reverse order, when the child stops
normally (the supervisor's ``stop``: recycling, capacity, shutdown); a child that is killed
(time limit, cancel) or whose worker died does not run them.

A lifespan that raises fails the job permanently (``Permanent``: "the app's lifespan failed in
the task's process (pid N): <Type>: <message>"); the child stays up, like a task whose module
does not import, so there is no respawn storm, and the next job tries the lifespan again.

:meth:`ChildLifespans.call` runs the function inside the owner's ``call_hooks`` (an app's:
Flask's app context, Django's connection hygiene): a plain function in the sync contexts, in
the child's main thread where it runs; an ``async def`` in the async ones, around its await.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
from typing import Any

from cronoq.errors import Permanent

__all__ = ["ChildLifespans", "call_hooked", "owner_of"]

_log = logging.getLogger("cronoq.processes")


def owner_of(fn: object) -> Any:
    """The owner of a pickled callable (not a :class:`~.jobs.FnRef`): itself when it has a
    ``lifespan_context()`` method, else None."""
    return fn if callable(getattr(fn, "lifespan_context", None)) else None


class ChildLifespans:
    """The owners' lifespans a child entered, and how it calls a function (module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._stack = contextlib.AsyncExitStack()
        self._states: dict[int, Any] = {}
        self._owners: list[Any] = []  # keeps each owner alive while its id is a key

    def state(self, owner: Any) -> Any:
        """What ``owner``'s lifespan yielded, entering it on first use (see the docstring)."""
        if owner is None:
            return None
        key = id(owner)
        if key in self._states:
            return self._states[key]
        try:
            cm = owner.lifespan_context()
            state = self._loop.run_until_complete(self._stack.enter_async_context(cm))
        except Exception as e:
            where = f"the task's process (pid {os.getpid()})"
            raise Permanent(f"the app's lifespan failed in {where}: {type(e).__name__}: {e}") from None
        self._states[key] = state
        self._owners.append(owner)
        return state

    def call(self, owner: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``fn(*args, **kwargs)`` inside ``owner``'s call hooks; an awaitable is run here."""
        result = call_hooked(owner, fn, args, kwargs)
        if inspect.isawaitable(result):
            result = self._loop.run_until_complete(_await(result))
        return result

    def close(self) -> None:
        """Leave every lifespan entered (the child is stopping normally); errors go to stderr."""
        self._states.clear()
        try:
            self._loop.run_until_complete(self._stack.aclose())
        except Exception:
            _log.exception("leaving a lifespan in process %d failed", os.getpid())


def call_hooked(owner: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` inside ``owner``'s call hooks (if any): a plain function in the
    sync contexts, here; an ``async def`` as a coroutine awaiting it inside the async ones."""
    hooks = tuple(getattr(owner, "call_hooks", None) or ())
    if not hooks:
        return fn(*args, **kwargs)
    if inspect.iscoroutinefunction(fn):
        return _in_async_hooks(hooks, fn, args, kwargs)
    from cronoq.tasks.lifespan import call_in_hooks

    return call_in_hooks(hooks, fn, *args, **kwargs)


async def _in_async_hooks(
    hooks: tuple[Any, ...], fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    from cronoq.tasks.lifespan import async_hooks

    async with async_hooks(hooks):
        return await fn(*args, **kwargs)


async def _await(aw: Any) -> Any:
    return await aw
