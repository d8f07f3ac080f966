"""Dispatch by name: the executor of an app's pools and the handler of its remote workers.

Theory of operation
-------------------
Every attempt of a named task carries the task's kind (its name unless set at decoration).
:class:`TaskExecutor` is the executor of the pools an app's scheduler builds: it looks the kind
up in the app's registry (one dict lookup) and runs the definition's ``invoke`` (decode the
``{"args", "kwargs"}`` payload, call the function, encode the result). :class:`LeaseHandler`
does the same for a remote :class:`cronoq.client.Worker`: it parses the lease's JSON payload
and returns the result as JSON bytes (so a string result stays a string), typed
``application/json`` (:class:`JsonOutput`).

A kind the app does not know fails the attempt permanently with ``unknown task '<name>'`` and
the names served; arguments that do not validate fail it permanently with the validation
message (both :class:`~cronoq.Permanent`: retrying cannot fix them).

A remote attempt's task function gets a :class:`LeaseContext` for its
:class:`~cronoq.TaskContext` parameter: the same fields and calls, backed by the lease.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cronoq.errors import Permanent
from cronoq.tasks.lifespan import Lifespan
from cronoq.tasks.placeholders import substitute
from cronoq.tasks.targets import NamedTask

if TYPE_CHECKING:
    from cronoq.tasks.definition import TaskDefinition

__all__ = ["JsonOutput", "LeaseContext", "LeaseHandler", "TaskExecutor", "unknown_task"]


class JsonOutput(bytes):
    """Output bytes that are JSON: a worker sends them as ``application/json`` (its
    ``encode_payload`` reads ``content_type``), so ``GET /v1/tasks/{ref}/result`` says so."""

    content_type = "application/json"


def unknown_task(kind: str, served: Mapping[str, Any]) -> Permanent:
    names = ", ".join(sorted(served)) or "none"
    return Permanent(f"unknown task '{kind}' (serves: {names})")


class TaskExecutor:
    """The async executor of an app's pools: runs the task registered under ``ctx.kind``.

    The hot path — an ``async def`` whose arguments pass the native checks and whose result is
    native — runs inline here (one coroutine frame per attempt, checks without calls for
    int/str/bool); anything else goes through :meth:`TaskDefinition.invoke`.
    """

    __slots__ = ("_hot", "_tasks")

    def __init__(self, tasks: Mapping[str, TaskDefinition[Any, Any]]) -> None:
        self._tasks = tasks  # the app's live registry by kind (append-only)
        self._hot: dict[str, _Entry] = {}

    def _entry(self, kind: str) -> _Entry:
        defn = self._tasks.get(kind)
        if defn is None:
            raise unknown_task(kind, self._tasks)
        b = defn.binding
        hot = (
            defn.is_async and defn.run_in == "loop" and b.result.check is not None and not defn.app.call_hooks
        )
        # a container result goes through result_to_wire (a copy: the caller gets its own)
        result_check = b.result.check if b.result.load is None else _never
        entry: _Entry = (defn, defn.fn if hot else None, b.fast_args, result_check, b.takes_context)
        self._hot[kind] = entry
        return entry

    async def __call__(self, ctx: Any, payload: object) -> object:
        kind = ctx.kind
        entry = self._hot.get(kind)
        if entry is None:
            entry = self._entry(kind)
        defn, fn, fast_args, result_check, takes_ctx = entry
        parents = ctx.parents
        if parents:  # placeholders take their parents' outputs (tasks/placeholders.py)
            payload = substitute(payload, parents, kind)
        if fn is None:
            return await defn.invoke(ctx, payload)
        args = fast_args(payload)
        if args is None:  # keywords, defaults, pydantic arguments or bad ones: the full decode
            a, kw = defn.binding.decode(payload)
            result = await (fn(ctx, *a, **kw) if takes_ctx else fn(*a, **kw))
        else:
            result = await (fn(ctx, *args) if takes_ctx else fn(*args))
        return result if result_check(result) else defn.binding.result_to_wire(result)

    def __repr__(self) -> str:
        return f"TaskExecutor({sorted(self._tasks)})"


def _never(value: object) -> bool:
    return False


#: (definition, the async function when on the hot path else None, fast_args, result check,
#: takes the context)
_Entry = tuple[Any, Any, Any, Any, bool]


class LeaseContext:
    """What a task function of a remote worker gets for its ``TaskContext`` parameter."""

    __slots__ = ("_lease", "state")

    def __init__(self, lease: Any, state: Any = None) -> None:
        self._lease = lease
        #: what the app's ``@app.lifespan`` yielded (None without one)
        self.state = state

    @property
    def id(self) -> int:
        return int(self._lease.task_id)

    @property
    def attempt(self) -> int:
        return int(self._lease.attempt)

    @property
    def lease(self) -> int:
        return int(self._lease.id)

    @property
    def kind(self) -> str:
        return str(self._lease.kind)

    @property
    def key(self) -> str | None:
        key: str | None = self._lease.key
        return key

    @property
    def pool(self) -> str:
        return str(self._lease.pool)

    @property
    def tags(self) -> dict[str, str]:
        return dict(self._lease.tags)

    @property
    def timeout(self) -> float | None:
        t: float | None = self._lease.timeout
        return t

    @property
    def deadline(self) -> float | None:
        d: float | None = self._lease.deadline
        return d

    @property
    def parents(self) -> tuple[Any, ...]:
        """How each parent ended (``Lease.parents``: worker protocol version 6)."""
        return tuple(getattr(self._lease, "parents", ()))

    def is_cancelled(self) -> bool:
        return bool(self._lease.cancelled)

    def heartbeat(self) -> None:
        self._lease.heartbeat()

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        self._lease.report_progress(done, total, message)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    # durable calls (docs/how-to/durable.md#remote-workers): carried by worker protocol
    # version 7 (the lease's own calls, client/worker_durable.py); a lease without them (a
    # test double) refuses them clearly (a Permanent failure) instead of lacking the name

    @property
    def resumes(self) -> int:
        return int(getattr(self._lease, "resumes", 0))

    def _durable(self, call: str) -> Any:
        fn = getattr(self._lease, call, None)
        if fn is None:
            raise Permanent(
                f"ctx.{call}() is not available on this worker: its lease carries no durable "
                "calls (docs/how-to/durable.md#remote-workers)"
            )
        return fn

    async def spawn(self, specs: Any, *, detached: bool = False) -> list[int]:
        """Named tasks' ``.spec(...)`` go to the server as their payload and task fields."""
        fn = self._durable("spawn")
        one = isinstance(specs, NamedTask)
        items = [specs] if one else specs
        if isinstance(items, (list, tuple)):
            items = [
                {"payload": t.payload, **t.call_fields()} if isinstance(t, NamedTask) else t for t in items
            ]
        result: list[int] = await fn(items, detached=detached)
        return result

    async def wait_for(self, ids: Any) -> list[Any]:
        result: list[Any] = await self._durable("wait_for")(ids)
        return result

    async def sleep_for(self, seconds: float) -> None:
        await self._durable("sleep_for")(seconds)

    async def sleep_until(self, when: Any) -> None:
        await self._durable("sleep_until")(when)

    async def wait_signal(self, name: str, timeout: float | None = None) -> Any:
        return await self._durable("wait_signal")(name, timeout)

    async def step(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._durable("step")(name, fn, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<LeaseContext id={self.id} attempt={self.attempt}>"


def _wire_spec(t: object) -> object:
    """A named task's ``.spec(...)`` as a server takes it (payload and task fields)."""
    return {"payload": t.payload, **t.call_fields()} if isinstance(t, NamedTask) else t


class LeaseHandler:
    """The handler of a remote worker serving an app (``cronoq worker MODULE:APP``)."""

    __slots__ = ("_tasks", "lifespan")

    def __init__(
        self, tasks: Mapping[str, TaskDefinition[Any, Any]], lifespan: Lifespan | None = None
    ) -> None:
        self._tasks = tasks
        #: the app's worker resources: enter ``lifespan.running()`` around the worker's life
        self.lifespan = lifespan or Lifespan()

    @property
    def kinds(self) -> tuple[str, ...]:
        """The task kinds served: a remote worker registers them and is leased only those
        (docs/how-to/deploys.md)."""
        return tuple(self._tasks)

    async def __call__(self, lease: Any) -> JsonOutput:
        kind = lease.kind
        defn = self._tasks.get(kind)
        if defn is None:
            raise unknown_task(kind, self._tasks)
        data = lease.payload
        payload: object = None
        if data:
            try:
                payload = json.loads(data)
            except ValueError as e:
                raise Permanent(
                    f"task '{kind}': the payload is not JSON ({lease.content_type or 'untyped'}): {e}"
                ) from None
        result = await defn.invoke(LeaseContext(lease, self.lifespan.state), payload)
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return JsonOutput(text.encode())

    def __repr__(self) -> str:
        return f"LeaseHandler({sorted(self._tasks)})"
