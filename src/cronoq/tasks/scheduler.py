"""``AppScheduler``: an ordinary :class:`~cronoq.Scheduler` that runs an app's named tasks.

Built by ``app.scheduler(pools=..., **scheduler options)``. Its pools' executor is the app's
:class:`~cronoq.tasks.dispatch.TaskExecutor` (dispatch by name); on ``start()`` it creates the
app's recurring schedules and becomes the app's target (``t.submit(...)`` goes here) until
``shutdown()``, when the previous target (a bound client, another scheduler) is back.

Around its life it enters the app's ``@app.lifespan`` (before the pools start, left after they
stopped); what it yielded is :attr:`AppScheduler.state`, which tasks read as ``ctx.state``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from cronoq.runtime.pool import Pool
from cronoq.runtime.scheduler import Scheduler
from cronoq.tasks.targets import SchedulerTarget

if TYPE_CHECKING:
    from cronoq.tasks.app import App

__all__ = ["AppScheduler"]


class AppScheduler(Scheduler):
    """A :class:`~cronoq.Scheduler` bound to an :class:`~cronoq.App` (see the module docstring)."""

    def __init__(self, app: App, pools: Sequence[Pool], **options: Any) -> None:
        super().__init__(pools, **options)
        self._app = app
        self._target: SchedulerTarget | None = None
        self._lifespan: AbstractAsyncContextManager[Any] | None = None
        #: what the app's lifespan yielded, while this scheduler runs (``ctx.state``)
        self.state: Any = None

    @property
    def app(self) -> App:
        return self._app

    async def start(self) -> None:
        if self.started:
            return
        lifespan = self._app.lifespan_context()
        self.state = await lifespan.__aenter__()
        self._lifespan = lifespan
        try:
            await super().start()
        except BaseException:
            await self._leave_lifespan()
            raise
        try:
            for schedule in self._app.recurring_schedules:
                await schedule.apply_to_scheduler(self)
        except BaseException:
            await super().shutdown(0)
            await self._leave_lifespan()
            raise
        self._target = SchedulerTarget(self)
        self._app.attach(self._target)

    async def shutdown(self, grace: float | None = 5.0) -> None:
        target, self._target = self._target, None
        if target is not None:
            self._app.detach(target)
        try:
            await super().shutdown(grace)
        finally:
            await self._leave_lifespan()

    async def _leave_lifespan(self) -> None:
        lifespan, self._lifespan = self._lifespan, None
        self.state = None
        if lifespan is not None:
            await lifespan.__aexit__(None, None, None)

    def __repr__(self) -> str:
        return f"<AppScheduler app={self._app.name!r} pools={self.pools} started={self.started}>"
