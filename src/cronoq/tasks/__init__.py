"""Named, typed tasks: the layer under :class:`cronoq.App` (definitions, payloads, dispatch).

Modules, each with one job:

* :mod:`~cronoq.tasks.convert` — annotation → JSON converter (native checks, pydantic lazily);
* :mod:`~cronoq.tasks.binding` — a function's signature ↔ the ``{"args", "kwargs"}`` payload;
* :mod:`~cronoq.tasks.fields` — which task fields go where, validated when written;
* :mod:`~cronoq.tasks.definition` — :class:`TaskDefinition` / :class:`TaskCall`;
* :mod:`~cronoq.tasks.recurring` — :class:`RecurringDefinition`;
* :mod:`~cronoq.tasks.targets` — where calls go (scheduler, server) and their handles;
* :mod:`~cronoq.tasks.dispatch` — dispatch by name (pool executor, remote-worker handler);
* :mod:`~cronoq.tasks.scheduler` — :class:`AppScheduler`;
* :mod:`~cronoq.tasks.app` — :class:`cronoq.App`, the registry built on all of these (re-exported
  as ``cronoq.App`` and ``cronoq.app.App``).

Nothing here imports pydantic or gRPC at import time.
"""

from cronoq.tasks.convert import TaskDefinitionError
from cronoq.tasks.definition import TaskCall, TaskDefinition
from cronoq.tasks.dispatch import LeaseContext, LeaseHandler, TaskExecutor
from cronoq.tasks.recurring import RecurringDefinition
from cronoq.tasks.scheduler import AppScheduler
from cronoq.tasks.targets import ConvertedHandle, NamedTask, RemoteHandle

__all__ = [
    "AppScheduler",
    "ConvertedHandle",
    "LeaseContext",
    "LeaseHandler",
    "NamedTask",
    "RecurringDefinition",
    "RemoteHandle",
    "TaskCall",
    "TaskDefinition",
    "TaskDefinitionError",
    "TaskExecutor",
]
