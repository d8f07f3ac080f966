"""Where a named task's calls go: an in-process scheduler or a server, and their handles.

Theory of operation
-------------------
An :class:`~cronoq.App` sends every ``submit`` / ``enqueue`` / batch to its current *target*:

* :class:`SchedulerTarget` — a running :class:`~cronoq.Scheduler` (``app.scheduler(...)``
  pushes one while it runs). The payload (already JSON) and the task fields go straight to
  ``Scheduler.submit``; the handle is the scheduler's own, unless the return annotation needs
  pydantic or is a container, in which case a :class:`ConvertedHandle` turns the JSON output
  back into it (a fresh object for every ``await``).
* :class:`ClientTarget` — a :class:`cronoq.client.Client` (``app.bind(client)``). The payload
  is sent as ``application/json`` with ``kind`` = the task's kind (its name unless ``kind=``
  was given); the handle is a :class:`RemoteHandle` that waits on the server when awaited and
  decodes the JSON output.
  A client lives on one loop (the running one when bound, or a ``BlockingClient``'s own):
  calls awaited on another loop are handed to it (:func:`on_loop`).

Both kinds of handle are :class:`~cronoq.TaskHandle` subclasses: ``await handle`` gives the
task's return value (converted back to its annotated type) or raises
:class:`~cronoq.TaskFailed`. This module imports no gRPC: the client is only used, never
imported, here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from cronoq.engine.model import COND_NAMES, Dep
from cronoq.errors import TaskFailed
from cronoq.runtime.handles import TaskHandle
from cronoq.runtime.task import Task
from cronoq.tasks.placeholders import OUTPUT, Placeholder

if TYPE_CHECKING:
    from cronoq.client.client import Client
    from cronoq.runtime.scheduler import Scheduler
    from cronoq.tasks.binding import Binding, Payload

__all__ = ["ClientTarget", "ConvertedHandle", "NamedTask", "RemoteHandle", "SchedulerTarget", "Target"]

R = TypeVar("R")

#: cancellations sent in the background (referenced until they finish)
_BACKGROUND: set[asyncio.Future[Any]] = set()


class NamedTask(Task, Generic[R]):
    """A named task's call ready for ``submit_batch`` (what ``t.spec(...)`` returns): a
    :class:`cronoq.Task` that also keeps its task fields, so it can go to a server too.

    ``spec.output`` is a placeholder for its return value, to pass to another call
    (docs/concepts/dependencies.md#outputs-on-edges); ``holes`` are the placeholders its own
    arguments hold, which become its last edges when it is submitted."""

    __slots__ = ("_base_deps", "_extra", "binding", "fields", "holes", "submitted_id")

    def __init__(
        self,
        payload: Payload,
        binding: Binding,
        fields: dict[str, Any],
        holes: list[Placeholder] | None = None,
    ) -> None:
        super().__init__(payload, **fields)
        self.binding = binding
        self.fields = dict(fields)
        self.holes = holes or []
        self._base_deps = self._sub.deps
        self._extra: list[tuple[int | str, int]] = []
        self.submitted_id: int | None = None  # its id once submitted (a later placeholder's edge)

    @property
    def output(self) -> R:
        """A placeholder for this call's return value (typed as it, for type checkers)."""
        return Placeholder.of_spec(self, OUTPUT)  # type: ignore[return-value]

    def set_key(self, key: str) -> None:
        """Give a keyless spec a key (a placeholder of it in the same batch needs one)."""
        self._sub = self._sub._replace(key=key)
        self.fields["key"] = key

    def set_edges(self, extra: list[tuple[int | str, int]]) -> None:
        """The edges ``(target, condition)`` of its placeholders, after its own (replacing any
        set before)."""
        self._extra = extra
        self._sub = self._sub._replace(deps=[*(self._base_deps or ()), *extra] or None)

    def call_fields(self) -> dict[str, Any]:
        """Its task fields for a server, the edges of its placeholders included."""
        if not self._extra:
            return self.fields
        extra = [Dep(target, on=COND_NAMES[cond]) for target, cond in self._extra]
        return {**self.fields, "deps": [*(self.fields.get("deps") or ()), *extra]}

    def __repr__(self) -> str:
        return f"NamedTask({self.fields.get('kind')!r}, payload={self.payload!r}, key={self.key!r})"


class ConvertedHandle(TaskHandle[R]):
    """A scheduler's handle whose output is converted (JSON → the annotated return type)."""

    __slots__ = ("_convert", "_inner")

    def __init__(self, inner: TaskHandle[Any], convert: Callable[[object], Any]) -> None:
        self._inner = inner
        self._convert = convert
        self.id = inner.id
        self.duplicate = inner.duplicate

    async def _wait(self) -> R:
        out: R = self._convert(await self._inner)
        return out

    def __await__(self) -> Generator[Any, None, R]:
        return self._wait().__await__()

    def result(self) -> asyncio.Future[R]:
        return asyncio.ensure_future(self._wait())

    def done(self) -> bool:
        return self._inner.done()

    def cancel(self) -> bool:
        return self._inner.cancel()

    def __repr__(self) -> str:
        return f"<ConvertedHandle {self._inner!r}>"


class RemoteHandle(TaskHandle[R]):
    """A task on a server: awaiting it waits for the outcome (``Client.wait``) and gives the
    decoded return value, or raises :class:`~cronoq.TaskFailed`."""

    __slots__ = ("_client", "_convert", "_loop", "_outcome")

    def __init__(
        self,
        client: Client,
        task_id: int,
        duplicate: bool,
        convert: Callable[[object], Any],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._client = client
        self._convert = convert
        self._loop = loop  # the client's loop (calls from another loop hop to it)
        self._outcome: asyncio.Future[R] | None = None
        self.id = task_id
        self.duplicate = duplicate

    async def _fetch(self) -> R:
        r = await on_loop(self._loop, self._client.wait(self.id))
        if r.status != "succeeded":
            raise TaskFailed(r.status, r.message, r.id)
        if not r.output_available:
            raise TaskFailed(
                "succeeded", f"task {r.id} succeeded, but its output is no longer available", r.id
            )
        out: R = self._convert(r.json())
        return out

    def result(self) -> asyncio.Future[R]:
        if self._outcome is None:
            self._outcome = asyncio.ensure_future(self._fetch())
        return asyncio.shield(self._outcome)

    def __await__(self) -> Generator[Any, None, R]:
        return self.result().__await__()

    def done(self) -> bool:
        """True once an awaited outcome has arrived."""
        return self._outcome is not None and self._outcome.done()

    def cancel(self) -> bool:
        """Ask the server to cancel the task (in the background); True once the request is
        sent. ``await client.cancel(handle.id)`` tells whether it was still running."""
        task = asyncio.ensure_future(on_loop(self._loop, self._client.cancel(self.id)))
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)
        return True

    def __repr__(self) -> str:
        return f"<RemoteHandle id={self.id}{' duplicate' if self.duplicate else ''}>"


class Target(Protocol):
    """Where an app's calls go (see the module docstring). Targets may have a ``loop``: the
    event loop their calls run on, where blocking calls (:mod:`cronoq.tasks.sync_calls`) send
    them."""

    def submit(
        self, binding: Binding, payload: Payload, fields: dict[str, Any]
    ) -> Coroutine[Any, Any, TaskHandle[Any]]: ...

    def enqueue(self, payload: Payload, fields: dict[str, Any]) -> Coroutine[Any, Any, int]: ...

    async def submit_batch(self, tasks: Sequence[NamedTask]) -> list[TaskHandle[Any]]: ...


def _converter(binding: Binding) -> Callable[[object], Any] | None:
    return None if binding.result.plain else binding.result_from_wire


async def on_loop(loop: asyncio.AbstractEventLoop | None, coro: Coroutine[Any, Any, R]) -> R:
    """Await ``coro`` on ``loop`` — here when it is the running loop (or None), else handed to
    it (a client's channel belongs to one loop: an async view of another loop reaches a
    ``BlockingClient``'s this way)."""
    if loop is None or loop is asyncio.get_running_loop():
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class SchedulerTarget:
    """Calls go to an in-process :class:`~cronoq.Scheduler`. ``loop`` (the running loop when
    made, if any) is where blocking calls (``t.submit_sync``) run them."""

    __slots__ = ("loop", "scheduler")

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.loop = _running_loop()

    def submit(
        self, binding: Binding, payload: Payload, fields: dict[str, Any]
    ) -> Coroutine[Any, Any, TaskHandle[Any]]:
        if binding.result.plain:  # the scheduler's own coroutine and handle
            return self.scheduler.submit(payload, **fields)
        return self._converted(binding, payload, fields)

    async def _converted(self, binding: Binding, payload: Payload, fields: dict[str, Any]) -> TaskHandle[Any]:
        handle = await self.scheduler.submit(payload, **fields)
        return ConvertedHandle(handle, binding.result_from_wire)

    def enqueue(self, payload: Payload, fields: dict[str, Any]) -> Coroutine[Any, Any, int]:
        return self.scheduler.enqueue(payload, **fields)

    async def submit_batch(self, tasks: Sequence[NamedTask]) -> list[TaskHandle[Any]]:
        handles = await self.scheduler.submit_batch(tasks)
        out: list[TaskHandle[Any]] = []
        for t, h in zip(tasks, handles):
            convert = _converter(t.binding)
            out.append(h if convert is None else ConvertedHandle(h, convert))
        return out


def _identity(value: object) -> object:
    return value


class ClientTarget:
    """Calls go to a cronoq server through a :class:`cronoq.client.Client`. ``loop`` is the
    loop the client lives on (given, else the running loop when made, if any): blocking calls
    (``t.submit_sync``) run there."""

    __slots__ = ("client", "loop")

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.client = client
        self.loop = loop or _running_loop()

    async def submit(self, binding: Binding, payload: Payload, fields: dict[str, Any]) -> TaskHandle[Any]:
        sub = await on_loop(self.loop, self.client.submit(payload, **fields))
        return RemoteHandle(self.client, sub.id, sub.duplicate, _converter(binding) or _identity, self.loop)

    async def enqueue(self, payload: Payload, fields: dict[str, Any]) -> int:
        sub = await on_loop(self.loop, self.client.submit(payload, **fields))
        return int(sub.id)

    async def submit_batch(self, tasks: Sequence[NamedTask]) -> list[TaskHandle[Any]]:
        batch = [{"payload": t.payload, **t.call_fields()} for t in tasks]
        subs = await on_loop(self.loop, self.client.submit_batch(batch))
        return [
            RemoteHandle(self.client, s.id, s.duplicate, _converter(t.binding) or _identity, self.loop)
            for t, s in zip(tasks, subs)
        ]
