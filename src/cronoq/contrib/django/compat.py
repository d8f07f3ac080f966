"""The ``django.tasks`` API: Django 6's own, else its reference backport ``django_tasks``
(Django < 6, and Python 3.11 where Django 6 cannot be installed).

Both define the same ``Task`` / ``TaskResult`` / ``TaskContext`` / ``TaskError`` /
``TaskResultStatus`` / ``BaseTaskBackend`` and the signals ``task_enqueued`` / ``task_started``
/ ``task_finished``; only a few names differ (Django 6's ``InvalidTask``
is the backport's ``InvalidTaskError``). Everything in :mod:`cronoq.contrib.django` imports
them from here.
"""

from __future__ import annotations

from typing import Any

try:  # Django >= 6.0
    from django.tasks.backends.base import BaseTaskBackend  # type: ignore[import-not-found,unused-ignore]
    from django.tasks.base import (  # type: ignore[import-not-found,unused-ignore]
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.exceptions import (  # type: ignore[import-not-found,unused-ignore]
        InvalidTask,
        TaskResultDoesNotExist,
    )
    from django.tasks.signals import (  # type: ignore[import-not-found,unused-ignore]
        task_enqueued,
        task_finished,
        task_started,
    )
    from django.utils.json import normalize_json  # type: ignore[import-not-found,unused-ignore]

    TASKS_MODULE = "django.tasks"
except ImportError:  # the backport
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskContext, TaskError, TaskResult, TaskResultStatus
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    TASKS_MODULE = "django_tasks"

MIN_PRIORITY = -100
MAX_PRIORITY = 100

__all__ = [
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "TASKS_MODULE",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "set_field",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def set_field(obj: Any, name: str, value: Any) -> None:
    """Set a field of a frozen ``TaskResult`` (as Django's own backends do)."""
    object.__setattr__(obj, name, value)
