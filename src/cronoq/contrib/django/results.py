"""Between cronoq's task records and Django's ``TaskResult``: statuses, timestamps, errors.

Theory of operation
-------------------
**Statuses.** ``running`` is ``RUNNING``; ``succeeded`` is ``SUCCESSFUL``; every other terminal
status (``failed``, ``dead_lettered``, ``cancelled``, ``skipped``, ``missed``, ``shed``) is
``FAILED``; anything else (waiting for its start, its dependencies, a slot or a retry) is
``READY``, which Django defines as "enqueued, or ready to be executed again".

**Timestamps.** ``enqueued_at`` is the task's creation, ``started_at`` its first attempt's
start, ``last_attempted_at`` its latest attempt's start, ``finished_at`` its end (aware UTC
datetimes). ``worker_ids`` has one entry per attempt (the worker's name), so Django's
``attempts`` (and a context's ``attempt``) is the attempt count.

**Errors.** The worker (:mod:`cronoq.contrib.django.execute`) reports a failed attempt's message
as the exception's class path on the first line and its formatted traceback below it
(:func:`error_message`); :func:`task_errors` turns each failed attempt back into a
``TaskError``. A failure the worker did not describe (a timeout, a lost lease, a cancel) becomes
a ``TaskError`` of ``cronoq.errors.TaskFailed`` whose traceback is cronoq's message.
"""

from __future__ import annotations

import datetime as dt
import re
import traceback
from typing import Any

from cronoq.client.types import TERMINAL_STATUSES, TaskInfo
from cronoq.contrib.django.compat import TaskError, TaskResultStatus

__all__ = ["django_status", "error_message", "task_errors", "timestamps"]

#: the longest traceback kept in a failure message (the start and the end are kept)
MAX_TRACEBACK = 16_000
_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*$")
TASK_FAILED = "cronoq.errors.TaskFailed"


def django_status(status: str) -> Any:
    """cronoq's status → Django's ``TaskResultStatus``."""
    if status == "running":
        return TaskResultStatus.RUNNING
    if status == "succeeded":
        return TaskResultStatus.SUCCESSFUL
    if status in TERMINAL_STATUSES:
        return TaskResultStatus.FAILED
    return TaskResultStatus.READY


def error_message(exc: BaseException) -> str:
    """A failed attempt's message: the exception's class path, then its traceback."""
    cls = type(exc)
    text = "".join(traceback.format_exception(exc))
    if len(text) > MAX_TRACEBACK:
        half = MAX_TRACEBACK // 2
        text = f"{text[:half]}\n[... {len(text) - MAX_TRACEBACK} characters left out ...]\n{text[-half:]}"
    return f"{cls.__module__}.{cls.__qualname__}\n{text}"


def _error(message: str) -> Any:
    first, _, rest = message.partition("\n")
    if rest and _CLASS_PATH.match(first):
        return TaskError(exception_class_path=first, traceback=rest)
    return TaskError(exception_class_path=TASK_FAILED, traceback=message)


def task_errors(info: TaskInfo) -> list[Any]:
    """One ``TaskError`` per failed attempt (or for the task's own failure message)."""
    errors = [_error(a.message) for a in info.attempts if a.outcome != "succeeded" and a.message]
    if not errors and django_status(info.status) == TaskResultStatus.FAILED:
        errors.append(_error(info.message or info.status))
    return errors


def _aware(seconds: float | None) -> dt.datetime | None:
    return None if seconds is None else dt.datetime.fromtimestamp(seconds, dt.UTC)


def timestamps(info: TaskInfo) -> dict[str, dt.datetime | None]:
    """Django's ``enqueued_at`` / ``started_at`` / ``last_attempted_at`` / ``finished_at``."""
    starts = [a.started_at for a in info.attempts if a.started_at is not None]
    return {
        "enqueued_at": _aware(info.created_at),
        "started_at": _aware(starts[0] if starts else info.started_at),
        "last_attempted_at": _aware(starts[-1] if starts else info.started_at),
        "finished_at": _aware(info.finished_at),
    }


def worker_ids(info: TaskInfo) -> list[str]:
    """One entry per attempt: the worker that ran it."""
    if info.attempts:
        return [a.worker or "cronoq" for a in info.attempts]
    return ["cronoq"] * info.attempt
