"""Actions: what the engine asks its shell to do.

The core appends actions to ``Core.actions`` as it processes inputs; the shell drains that
list after each call (``Core.drain_actions()``) and carries them out in order.  Actions hold
references to engine records (``TaskState``) which the shell must treat as read-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cronoq.engine.model import StatusEvent, TaskState


class Dispatch:
    """Run attempt ``task.attempt`` of ``task`` under ``lease``."""

    __slots__ = ("group", "lease", "task")

    def __init__(self, task: TaskState, lease: int, group: dict[str, str] | None = None) -> None:
        self.task = task
        self.lease = lease
        self.group = group

    def __repr__(self) -> str:
        return f"Dispatch(task={self.task.id}, lease={self.lease}, attempt={self.task.attempt})"


class Abort:
    """Stop the attempt running under ``lease`` (timeout, cancel, lease loss, shed)."""

    __slots__ = ("lease", "reason", "task_id")

    def __init__(self, lease: int, task_id: int, reason: str) -> None:
        self.lease = lease
        self.task_id = task_id
        self.reason = reason

    def __repr__(self) -> str:
        return f"Abort(lease={self.lease}, task={self.task_id}, reason={self.reason!r})"


class Resolve:
    """``task`` reached its terminal status: resolve whoever waits for it."""

    __slots__ = ("task",)

    def __init__(self, task: TaskState) -> None:
        self.task = task

    def __repr__(self) -> str:
        return f"Resolve(task={self.task.id}, status={self.task.status_name})"


class Publish:
    """Deliver a status event to subscribers."""

    __slots__ = ("event",)

    def __init__(self, event: StatusEvent) -> None:
        self.event = event

    def __repr__(self) -> str:
        return f"Publish({self.event!r})"


class SpaceAvailable:
    """A pool that answered ``full`` has room again: retry waiting submitters."""

    __slots__ = ("pool",)

    def __init__(self, pool: str) -> None:
        self.pool = pool

    def __repr__(self) -> str:
        return f"SpaceAvailable({self.pool!r})"


class Scale:
    """The autoscaler wants ``desired`` slots in ``pool``."""

    __slots__ = ("desired", "pool")

    def __init__(self, pool: str, desired: int) -> None:
        self.pool = pool
        self.desired = desired

    def __repr__(self) -> str:
        return f"Scale({self.pool!r}, {self.desired})"


class Persist:
    """A durable mutation to commit before acknowledging this step's submitters."""

    __slots__ = ("mutation",)

    def __init__(self, mutation: object) -> None:
        self.mutation = mutation

    def __repr__(self) -> str:
        return f"Persist({self.mutation!r})"


Action = Dispatch | Abort | Resolve | Publish | SpaceAvailable | Scale | Persist
