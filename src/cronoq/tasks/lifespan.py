"""Worker-level resources (``@app.lifespan``, ``ctx.state``) and call hooks around every task
function (docs/how-to/resources-per-worker.md).

Theory of operation
-------------------
**Lifespan.** ``@app.lifespan`` records one function returning an async context manager (an
``@contextlib.asynccontextmanager`` function, or a bare async generator function, which is
wrapped into one). :meth:`Lifespan.running` is the single hook every place that runs an app's
tasks enters around its life — an ``app.scheduler(...)`` (and so the test kit) in its
``start``/``shutdown``, ``cronoq worker MODULE:APP`` and ``manage.py cronoq_worker`` around
the worker's run, and a process executor's child around its own (it is one async context
manager and needs nothing but the app). Entries are counted per process: the first one enters
the user's context manager and keeps what it yields as :attr:`Lifespan.state`; later, nested
ones share it, and the last one out exits it. Tasks read it as ``ctx.state`` (None when the
app has no lifespan or it is not running).

**Call hooks.** A framework integration (Flask's app context, Django's connection hygiene)
registers a :class:`CallHook`: a context manager factory for plain functions, entered in the
thread that runs the function (a framework's thread-local state is per thread), and one for
``async def`` tasks, entered around the await. They nest in registration order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from cronoq.tasks.convert import TaskDefinitionError

__all__ = ["CallHook", "Lifespan", "call_in_hooks"]


class CallHook(Protocol):
    """What ``app.add_call_hook`` takes: context managers around every task function call."""

    def sync_context(self) -> contextlib.AbstractContextManager[Any]:
        """Entered around a plain function, in the thread it runs in."""
        ...

    def async_context(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Entered around an ``async def`` task's await, on the loop."""
        ...


def call_in_hooks(hooks: Sequence[CallHook], fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the plain function ``fn`` inside every hook's sync context (in this thread)."""
    with contextlib.ExitStack() as stack:
        for hook in hooks:
            stack.enter_context(hook.sync_context())
        return fn(*args, **kwargs)


@contextlib.asynccontextmanager
async def async_hooks(hooks: Sequence[CallHook]) -> AsyncIterator[None]:
    """Every hook's async context, entered around an ``async def`` task's await."""
    async with contextlib.AsyncExitStack() as stack:
        for hook in hooks:
            await stack.enter_async_context(hook.async_context())
        yield


class Lifespan:
    """An app's worker-level resources (see the module docstring)."""

    __slots__ = ("_cm", "_depth", "_lock", "fn", "state")

    def __init__(self) -> None:
        self.fn: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None
        self.state: Any = None
        self._depth = 0
        self._cm: contextlib.AbstractAsyncContextManager[Any] | None = None
        self._lock: asyncio.Lock | None = None

    def set(self, fn: Callable[..., Any], app_name: str) -> None:
        """Record the lifespan function (once per app)."""
        if self.fn is not None:
            raise TaskDefinitionError(
                f"app '{app_name}' already has a lifespan (@app.lifespan goes on one function)"
            )
        if not callable(fn):
            raise TaskDefinitionError(f"@app.lifespan applies to a function (got {fn!r})")
        if inspect.isasyncgenfunction(fn):
            fn = contextlib.asynccontextmanager(fn)
        elif inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn):
            raise TaskDefinitionError(
                f"@app.lifespan takes an async context manager function (@contextlib.asynccontextmanager) or "
                f"an async generator function that yields once (got {getattr(fn, '__qualname__', fn)!r})"
            )
        self.fn = fn

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Any]:
        """Enter the lifespan (once per process: nested entries share it); yields the state."""
        if self.fn is None:
            yield None
            return
        if self._lock is None or (self._depth == 0 and not self._lock.locked()):
            self._lock = asyncio.Lock()  # (a fresh one per life: a lock is tied to one loop)
        async with self._lock:
            if self._depth == 0:
                cm = self.fn()
                if not hasattr(cm, "__aenter__"):
                    raise TypeError(
                        f"the lifespan function must return an async context manager (got {cm!r})"
                    )
                self.state = await cm.__aenter__()
                self._cm = cm
            self._depth += 1
        try:
            yield self.state
        finally:
            await self._leave()

    async def _leave(self) -> None:
        assert self._lock is not None
        async with self._lock:
            self._depth -= 1
            if self._depth or self._cm is None:
                return
            cm, self._cm = self._cm, None
            try:
                await cm.__aexit__(None, None, None)
            finally:
                self.state = None
