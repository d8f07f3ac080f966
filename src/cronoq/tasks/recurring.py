"""``RecurringDefinition``: a cron schedule that calls a named task, checked at decoration.

``@app.recurring(cron, ...)`` above ``@app.task(...)`` records one. Everything is validated when
it is written — the cron expression and time zone, the overlap policy, the task fields, and the
arguments bound to the task's signature (the payload is built once, then) — so a schedule that
could not run never reaches a scheduler or a server. It is created when an in-process
scheduler of the app starts (:meth:`apply_to_scheduler`) or, on a server,
with :meth:`apply_to_client` (``add_recurring`` replaces a schedule of the same name, so
applying again changes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cronoq.engine.recurring import CronSchedule, parse_overlap
from cronoq.tasks.convert import TaskDefinitionError

if TYPE_CHECKING:
    from cronoq.client.client import Client
    from cronoq.runtime.scheduler import Scheduler
    from cronoq.tasks.binding import Payload

__all__ = ["RecurringDefinition", "check_schedule"]


def check_schedule(cron: object, tz: object, overlap: object, where: str) -> None:
    """TaskDefinitionError for a bad cron expression, time zone or overlap policy."""
    if not isinstance(cron, str) or not cron.strip():
        raise TaskDefinitionError(f"{where}: cron must be a non-empty string (got {cron!r})")
    if tz is not None and not isinstance(tz, str):
        raise TaskDefinitionError(f"{where}: tz must be an IANA time zone name (got {tz!r})")
    try:
        CronSchedule(cron, tz)
        parse_overlap(overlap)
    except ValueError as e:
        raise TaskDefinitionError(f"{where}: {e}") from None


@dataclass(frozen=True, slots=True)
class RecurringDefinition:
    """One schedule of an app: ``name``, ``cron``, ``tz``, ``overlap``, the task it calls, the
    bound ``payload`` and the task ``fields`` of each occurrence."""

    name: str
    cron: str
    tz: str | None
    overlap: str
    task: str
    payload: Payload
    fields: dict[str, Any]

    async def apply_to_scheduler(self, scheduler: Scheduler) -> None:
        await scheduler.add_recurring(
            self.name, self.cron, self.payload, tz=self.tz, overlap=self.overlap, **self.fields
        )

    async def apply_to_client(self, client: Client) -> None:
        await client.add_recurring(
            self.name, self.cron, self.payload, tz=self.tz, overlap=self.overlap, **self.fields
        )
