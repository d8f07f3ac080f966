"""Dispatch by name: the executor of an app's pools and the handler of its remote workers.

Theory of operation
-------------------
Every attempt of a named task carries the task's kind (its name unless set at decoration).
:class:`TaskExecutor` is the executor of the pools an app's scheduler builds: it looks the kind
up in the app's registry (one dict lookup) and runs the definition's ``invoke`` (decode the
``{"args", "kwargs"}`` payload, call the function, encode the result). :class:`LeaseHandler`
does the same for a remote :class:`cronoq.client.Worker`: it parses the lease's JSON payload
and returns the result as JSON bytes (so a string result stays a string).

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

if TYPE_CHECKING:
    from cronoq.tasks.definition import TaskDefinition

__all__ = ["LeaseContext", "LeaseHandler", "TaskExecutor", "unknown_task"]


def unknown_task(kind: str, served: Mapping[str, Any]) -> Permanent:
    names = ", ".join(sorted(served)) or "none"
    return Permanent(f"unknown task '{kind}' (serves: {names})")


class TaskExecutor:
    """The async executor of an app's pools: runs the task registered under ``ctx.kind``."""

    __slots__ = ("_tasks",)

    def __init__(self, tasks: Mapping[str, TaskDefinition[Any, Any]]) -> None:
        self._tasks = tasks  # the app's live registry by kind

    async def __call__(self, ctx: Any, payload: object) -> object:
        kind = ctx.kind
        defn = self._tasks.get(kind)
        if defn is None:
            raise unknown_task(kind, self._tasks)
        return await defn.invoke(ctx, payload)

    def __repr__(self) -> str:
        return f"TaskExecutor({sorted(self._tasks)})"


class LeaseContext:
    """What a task function of a remote worker gets for its ``TaskContext`` parameter."""

    __slots__ = ("_lease",)

    def __init__(self, lease: Any) -> None:
        self._lease = lease

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

    def is_cancelled(self) -> bool:
        return bool(self._lease.cancelled)

    def heartbeat(self) -> None:
        self._lease.heartbeat()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return f"<LeaseContext id={self.id} attempt={self.attempt}>"


class LeaseHandler:
    """The handler of a remote worker serving an app (``cronoq worker MODULE:APP``)."""

    __slots__ = ("_tasks",)

    def __init__(self, tasks: Mapping[str, TaskDefinition[Any, Any]]) -> None:
        self._tasks = tasks

    async def __call__(self, lease: Any) -> bytes:
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
        result = await defn.invoke(LeaseContext(lease), payload)
        return json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()

    def __repr__(self) -> str:
        return f"LeaseHandler({sorted(self._tasks)})"
