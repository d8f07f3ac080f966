"""``manage.py cronoq_worker --run-in process``: what the worker's process children run.

Theory of operation
-------------------
With ``--run-in process`` the worker hands every lease to a child process
(docs/how-to/processes.md) through a :class:`ChildHandler`: a callable pickled by value (the
project's settings module and the worker's name), so a child started by the forkserver — a
fresh interpreter that has not run ``manage.py`` — can rebuild it. Unpickling it in the child
sets Django up first: ``DJANGO_SETTINGS_MODULE`` set to the worker's settings module, then
``django.setup()``, in the child's main thread before any event loop runs, as ``manage.py``
does.

It is the *owner* of its jobs (:mod:`cronoq.runtime.processes.lifespans`): its
``lifespan_context()``, entered once per child before the first lease, builds the handler of
``manage.py cronoq_worker`` (:class:`~cronoq.contrib.django.execute.WorkerHandler`: the
project's cronoq apps with ``close_old_connections()`` as a call hook, one thread since a child
runs one task at a time) and enters every app's ``@app.lifespan``, left when the child stops.
Each lease then runs exactly as in a worker without ``--run-in``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["ChildHandler"]


class ChildHandler:
    """The handler a ``--run-in process`` Django worker sends to its children (see above)."""

    def __init__(self, settings_module: str, worker_name: str) -> None:
        self.settings_module = settings_module
        self.worker_name = worker_name
        self._handler: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_in_child, (self.settings_module, self.worker_name))

    @contextlib.asynccontextmanager
    async def lifespan_context(self) -> AsyncIterator[None]:
        """The worker's handler and every cronoq app's lifespan, once per child."""
        from cronoq.contrib.django.execute import WorkerHandler, serving_apps

        handler = WorkerHandler(serving_apps(), self.worker_name, 1)
        async with handler.running():
            self._handler = handler
            try:
                yield None
            finally:
                self._handler = None

    async def __call__(self, lease: Any) -> object:
        if self._handler is None:
            raise RuntimeError("ChildHandler runs inside a process child, after its lifespan_context()")
        return await self._handler(lease)

    def __repr__(self) -> str:
        return f"ChildHandler({self.settings_module!r})"


def _in_child(settings_module: str, worker_name: str) -> ChildHandler:
    """Unpickling a :class:`ChildHandler` (in the child): set Django up, then rebuild it."""
    import django

    os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
    django.setup()
    return ChildHandler(settings_module, worker_name)
