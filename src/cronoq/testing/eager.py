"""``cronoq.testing.eager(app)``: calls run inline, for unit tests that only want the result.

Theory of operation
-------------------
While the context is open the app's calls go to an :class:`EagerTarget` (it is attached like a
scheduler, so it takes precedence over a bound client). ``await t.submit(...)`` still binds and
encodes the arguments (so bad calls fail exactly as they would for real), then decodes the
payload as a worker would, runs the function once — an ``async def`` inline, a plain ``def`` (or
a ``run_in="process"`` task) in the loop's thread pool — and returns an already resolved
:class:`EagerHandle`: its ``await`` gives the return value (through JSON and back, like a real
round trip), or raises :class:`~cronoq.TaskFailed` with the error's message (status ``failed``;
``SystemExit`` too, as a real attempt's failure; the caller's cancel and ``KeyboardInterrupt``
propagate, the call runs in the caller's task).

There is no scheduler: no retries, priorities, fixed starts, dependencies or schedules (task
fields are accepted and ignored). For those, use :func:`cronoq.testing.run`. What cannot be
ignored says so: a call holding a placeholder (``.output``, ``output_of``, ``outcome_of``)
raises :class:`~cronoq.SchedulerError` when submitted, and in a task ``ctx.spawn``,
``ctx.wait_for`` and ``ctx.wait_signal`` raise it (the attempt fails with its message). The
durable calls that need no scheduler work: ``ctx.sleep_for`` / ``ctx.sleep_until`` return at
once (no time passes, as for ``ctx.sleep``) and ``ctx.step`` calls its function and
returns its result as JSON reads it back, as a recorded step does.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from cronoq.engine.progress import check_progress
from cronoq.errors import CronoqError, Permanent, Retryable, SchedulerError, TaskFailed
from cronoq.runtime.handles import TaskHandle
from cronoq.runtime.parking import json_value
from cronoq.runtime.processes import CURRENT, IN_THREADS
from cronoq.tasks.app import App
from cronoq.tasks.placeholders import has_marker

if TYPE_CHECKING:
    from cronoq.tasks.binding import Binding, Payload
    from cronoq.tasks.targets import NamedTask

__all__ = ["EagerContext", "EagerHandle", "EagerTarget", "eager"]

_NEEDS_SCHEDULER = (
    "{what} needs a scheduler: cronoq.testing.eager runs each call inline, with no dependencies "
    "or waits (use cronoq.testing.run(app), the real scheduler on virtual time)"
)

R = TypeVar("R")


class EagerHandle(TaskHandle[R]):
    """The outcome of an eager call, known when ``submit`` returns."""

    __slots__ = ("_error", "_value")

    def __init__(self, task_id: int, value: Any = None, error: TaskFailed | None = None) -> None:
        self.id = task_id
        self.duplicate = False
        self._value = value
        self._error = error

    def _get(self) -> R:
        if self._error is not None:
            raise self._error
        value: R = self._value
        return value

    def __await__(self) -> Generator[Any, None, R]:
        return self._get()
        yield  # pragma: no cover - makes this a generator

    def result(self) -> asyncio.Future[R]:
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        if self._error is not None:
            fut.set_exception(self._error)
        else:
            fut.set_result(self._value)
        return fut

    def done(self) -> bool:
        return True

    def cancel(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<EagerHandle id={self.id} {'failed' if self._error else 'succeeded'}>"


class EagerContext:
    """What a task's ``TaskContext`` parameter gets in eager mode: attempt 1, never cancelled."""

    __slots__ = ("id", "kind", "state")

    attempt = 1
    key = None
    pool = ""
    timeout = None
    deadline = None

    def __init__(self, task_id: int, kind: str, state: Any = None) -> None:
        self.id = task_id
        self.kind = kind
        #: what the app's lifespan yielded, when one runs (``async with app.lifespan_context()``)
        self.state = state

    @property
    def tags(self) -> dict[str, str]:
        return {}

    def is_cancelled(self) -> bool:
        return False

    def heartbeat(self) -> None:
        pass

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Checked as ``TaskContext.progress`` checks it; nothing records it in eager mode."""
        check_progress(done, total, message)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)  # eager: no time passes

    # the durable calls (docs/how-to/durable.md): those that need no scheduler work, the others
    # say what to use instead

    resumes = 0

    async def sleep_for(self, seconds: float) -> None:
        await asyncio.sleep(0)  # eager: no time passes

    async def sleep_until(self, when: Any) -> None:
        await asyncio.sleep(0)

    async def step(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        # as it reads back from its record (a tuple as a list; not JSON: the attempt fails)
        return json_value(result, f"the result of step '{name}'")

    async def spawn(self, specs: Any, *, detached: bool = False) -> list[int]:
        raise SchedulerError(_NEEDS_SCHEDULER.format(what="ctx.spawn()"))

    async def wait_for(self, ids: Any) -> list[Any]:
        raise SchedulerError(_NEEDS_SCHEDULER.format(what="ctx.wait_for()"))

    async def wait_signal(self, name: str, timeout: float | None = None) -> Any:
        raise SchedulerError(_NEEDS_SCHEDULER.format(what="ctx.wait_signal()"))


def _message(exc: BaseException) -> str:
    if isinstance(exc, (Permanent, Retryable)):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, CronoqError) else str(exc)


def _no_placeholders(binding: Binding, payload: object) -> None:
    if has_marker(payload):
        raise SchedulerError(_NEEDS_SCHEDULER.format(what=f"a placeholder argument of '{binding.name}'"))


class EagerTarget:
    """Runs each call inline (see the module docstring)."""

    #: blocking calls (``t.submit_sync``) may run it with asyncio.run in the calling thread
    inline = True

    def __init__(self, app: App) -> None:
        self._app = app
        self._ids = itertools.count(1)

    async def _run(self, binding: Binding, payload: Payload, fields: dict[str, Any]) -> EagerHandle[Any]:
        _no_placeholders(binding, payload)
        task_id = next(self._ids)
        kind = fields["kind"]
        defn = self._app.tasks[binding.name]
        threads = CURRENT.set(IN_THREADS)  # run_in="process": in a thread, as the test kit does
        try:
            output = await defn.invoke(EagerContext(task_id, kind, self._app.state), payload)
        except (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit):
            raise  # the caller's own cancel, Ctrl-C, or its coroutine's close
        except BaseException as exc:  # SystemExit too: the task's failure, as for real
            return EagerHandle(task_id, error=TaskFailed("failed", _message(exc), task_id))
        finally:
            CURRENT.reset(threads)
        return EagerHandle(task_id, binding.result_from_wire(output))

    async def submit(self, binding: Binding, payload: Payload, fields: dict[str, Any]) -> TaskHandle[Any]:
        return await self._run(binding, payload, fields)

    async def enqueue(self, payload: Payload, fields: dict[str, Any]) -> int:
        kind = fields["kind"]
        defn = next(d for d in self._app.tasks.values() if d.kind == kind)
        return (await self._run(defn.binding, payload, fields)).id

    async def submit_batch(self, tasks: Sequence[NamedTask]) -> list[TaskHandle[Any]]:
        for t in tasks:  # (all or none: checked before any runs)
            _no_placeholders(t.binding, t.payload)
        return [await self._run(t.binding, t.payload, t.fields) for t in tasks]  # type: ignore[arg-type]


@contextlib.contextmanager
def eager(app: App) -> Iterator[EagerTarget]:
    """``with cronoq.testing.eager(app):`` — the app's calls run inline (module docstring)."""
    if not isinstance(app, App):
        raise ValueError(f"eager takes a cronoq.App (got {app!r})")
    target = EagerTarget(app)
    app.attach(target)
    try:
        yield target
    finally:
        app.detach(target)
