"""Blocking named-task calls: ``t.submit_sync(...)`` and ``t.enqueue_sync(...)``
(docs/how-to/sync-code.md).

Theory of operation
-------------------
A named task's call is a coroutine of the app's current *target*, which lives on one event
loop: the loop thread of a :class:`cronoq.client.BlockingClient` (``app.bind(blocking)``), or
the loop that was running when the target was made (``app.bind(client)`` inside an async web
app, a running ``app.scheduler(...)``). A blocking call checks its arguments in the calling
thread (bad ones raise before anything is sent), hands the coroutine to that loop with
``asyncio.run_coroutine_threadsafe`` and waits, so it works from any number of threads at
once — a Flask or Django view, a FastAPI ``def`` endpoint's worker thread, a script.

Called on the target's own loop thread it would deadlock, so it raises and says to ``await``
instead; a target without a loop (a client bound outside any loop) raises and says to bind a
``BlockingClient``. The test kit's eager target runs calls inline: there a blocking call runs
the coroutine with ``asyncio.run`` when no loop is running in the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

from cronoq.errors import SchedulerError
from cronoq.runtime.handles import TaskHandle

__all__ = ["BlockingTaskHandle", "run_on_target"]

R = TypeVar("R")

_NO_LOOP = (
    "{what} cannot reach the app's target from this thread: it was bound outside a running event "
    "loop. Bind a cronoq.client.BlockingClient (app.bind(BlockingClient(...))) for blocking calls"
)


def _loop_thread_of(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def run_on_target(target: object, coro: Coroutine[Any, Any, R], what: str, timeout: float | None = None) -> R:
    """Run ``coro`` (a call of ``target``) on the target's loop from this thread and wait."""
    loop: asyncio.AbstractEventLoop | None = getattr(target, "loop", None)
    if loop is None and getattr(target, "inline", False):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        coro.close()
        raise SchedulerError(f"{what} called inside a running event loop: await the async call instead")
    if loop is None or loop.is_closed() or not loop.is_running():
        coro.close()
        raise SchedulerError(_NO_LOOP.format(what=what))
    if _loop_thread_of(loop):
        coro.close()
        raise SchedulerError(
            f"{what} called on the event loop's own thread would block it: await the async call instead"
        )
    fut = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        fut.cancel()
        raise TimeoutError(f"{what}: no answer within {timeout}s") from None


class BlockingTaskHandle(Generic[R]):
    """What ``t.submit_sync(...)`` returns: the task's ``id``, ``duplicate``, and
    :meth:`result` (blocks until the outcome; the return value or
    :class:`~cronoq.TaskFailed`)."""

    __slots__ = ("_handle", "_lock", "_target")

    def __init__(self, handle: TaskHandle[R], target: object) -> None:
        self._handle = handle
        self._target = target
        self._lock = threading.Lock()

    @property
    def id(self) -> int:
        return self._handle.id

    @property
    def duplicate(self) -> bool:
        return self._handle.duplicate

    @property
    def handle(self) -> TaskHandle[R]:
        """The async handle (await it on the target's loop)."""
        return self._handle

    def result(self, timeout: float | None = None) -> R:
        """Wait for the outcome (``TimeoutError`` after ``timeout`` seconds)."""

        async def outcome() -> R:
            return await self._handle

        with self._lock:
            return run_on_target(self._target, outcome(), "handle.result()", timeout)

    def done(self) -> bool:
        return self._handle.done()

    def cancel(self) -> bool:
        """Ask for the task to be cancelled."""

        async def cancel() -> bool:
            return self._handle.cancel()

        return run_on_target(self._target, cancel(), "handle.cancel()")

    def __repr__(self) -> str:
        return f"<BlockingTaskHandle id={self.id}>"
