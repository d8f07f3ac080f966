"""Submit a cronoq named task only once the database transaction commits.

``submit_on_commit(t, *args, using=None, **kwargs)`` checks the call now (bad arguments raise
``SubmitError("invalid")`` at once, in the view, and nothing is registered; so does an app bound
nowhere, with ``SchedulerError``, rather than after the commit), then registers it
with Django's ``transaction.on_commit``: when the transaction of ``using`` (the default
database) commits, the task is submitted with ``t.enqueue_sync(...)`` (the app must be bound:
the ``cronoq.contrib.django`` app binds ``settings.CRONOQ["APPS"]``); when it rolls back,
nothing is submitted. Outside a transaction (autocommit) it submits at once. ``t`` may be a
task or a ``t.options(...)`` call (a ``key`` makes a repeated commit hook idempotent).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from cronoq.tasks.definition import TaskCall

__all__ = ["submit_on_commit"]


def submit_on_commit(
    task: TaskCall[Any, Any], /, *args: Any, using: str | None = None, **kwargs: Any
) -> None:
    """Submit ``task(*args, **kwargs)`` when the current transaction commits (see the module
    docstring)."""
    if not isinstance(task, TaskCall):
        raise ValueError(f"submit_on_commit takes a cronoq named task or t.options(...) (got {task!r})")
    task.spec(*args, **kwargs)  # the arguments are checked now, in the caller
    task.app.target()  # and that the app is bound somewhere (SchedulerError now, not after the commit)
    transaction.on_commit(lambda: task.enqueue_sync(*args, **kwargs), using=using)
