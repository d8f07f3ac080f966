"""``AppScheduler``: an ordinary :class:`~cronoq.Scheduler` that runs an app's named tasks.

Built by ``app.scheduler(pools=..., **scheduler options)``. Its pools' executor is the app's
:class:`~cronoq.tasks.dispatch.TaskExecutor` (dispatch by name); on ``start()`` it creates the
app's recurring schedules and becomes the app's target (``t.submit(...)`` goes here) until
``shutdown()``, when the previous target (a bound client, another scheduler) is back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cronoq.runtime.pool import Pool
from cronoq.runtime.scheduler import Scheduler
from cronoq.tasks.targets import SchedulerTarget

if TYPE_CHECKING:
    from cronoq.app import App

__all__ = ["AppScheduler"]


class AppScheduler(Scheduler):
    """A :class:`~cronoq.Scheduler` bound to an :class:`~cronoq.App` (see the module docstring)."""

    def __init__(self, app: App, pools: Sequence[Pool], **options: Any) -> None:
        super().__init__(pools, **options)
        self._app = app
        self._target: SchedulerTarget | None = None

    @property
    def app(self) -> App:
        return self._app

    async def start(self) -> None:
        if self.started:
            return
        await super().start()
        try:
            for schedule in self._app.recurring_schedules:
                await schedule.apply_to_scheduler(self)
        except BaseException:
            await super().shutdown(0)
            raise
        self._target = SchedulerTarget(self)
        self._app.attach(self._target)

    async def shutdown(self, grace: float | None = 5.0) -> None:
        target, self._target = self._target, None
        if target is not None:
            self._app.detach(target)
        await super().shutdown(grace)

    def __repr__(self) -> str:
        return f"<AppScheduler app={self._app.name!r} pools={self.pools} started={self.started}>"
