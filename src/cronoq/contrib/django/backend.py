"""``CronoqBackend``: a ``django.tasks`` backend that runs Django tasks on a cronoq server
(docs/getting-started/django.md).

Theory of operation
-------------------
Configured in ``settings.TASKS``::

    TASKS = {"default": {
        "BACKEND": "cronoq.contrib.django.CronoqBackend",
        "QUEUES": ["default", "emails"],           # the pools tasks may name ([]: any)
        "OPTIONS": {"server": "HOST:PORT", "token": None, "tls": False},
    }}

(``server``/``token``/``tls`` default to ``settings.CRONOQ``'s; a backend with neither server, an
unknown ``OPTIONS`` key or a mistyped value raises ``ImproperlyConfigured`` when Django builds
it.)

``enqueue(task, args, kwargs)`` validates the task (Django's rules, ``InvalidTask``), turns
the arguments into JSON (``InvalidTask`` naming the value that does not fit: nothing is sent),
and submits one cronoq task: ``kind`` = the task's import path (what the worker imports),
``pool`` = ``queue_name``, ``priority`` = the class of Django's -100..100 (:func:`priority_class`),
``start_at`` = ``run_after`` (a fixed start), payload ``{"args": [...], "kwargs": {...}}``. A
``queue_name`` the server has no pool for raises ``InvalidTask``. The ``TaskResult`` it returns
has the cronoq task id as ``id``; Django's ``task_enqueued`` signal is sent with it (sender: the
backend's class) once the server has the task (the worker sends ``task_started`` /
``task_finished``: :mod:`cronoq.contrib.django.execute`).

``get_result(id)`` reads the task back (``Client.get``, and its output once it succeeded) into a
``TaskResult`` (:mod:`cronoq.contrib.django.results`); an unknown id, or a task that is not a
Django task, raises ``TaskResultDoesNotExist`` (so does any string that is not an id in the form
``enqueue`` returned it: past the range of ids, ``"042"``, ``" 42"``). Its ``args``/``kwargs``
are the ones the task was enqueued with, read back from the payload
(``Client.get(id, payload=True)``): the server holds it while the task is live and a durable
store keeps it with the task's row afterwards; an in-memory server forgets an ended task's
payload, and the result's ``args``/``kwargs`` are then empty. ``aenqueue`` / ``aget_result``
run the same calls on the client's loop without blocking the caller's.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Coroutine
from typing import Any, TypeVar

from django.utils.module_loading import import_string

from cronoq.client import ClientError, Result, Submitted, TaskInfo
from cronoq.contrib.django import conf
from cronoq.contrib.django.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    set_field,
    task_enqueued,
)
from cronoq.contrib.django.results import django_status, task_errors, timestamps, worker_ids
from cronoq.spec.wire import UINT64_MAX

__all__ = ["CronoqBackend", "InvalidArguments", "priority_class"]

T = TypeVar("T")


class InvalidArguments(InvalidTask, TypeError):
    """Arguments Django cannot serialize to JSON (an ``InvalidTask`` and a ``TypeError``)."""


def priority_class(priority: int) -> str:
    """Django's priority (-100..100, higher first) → cronoq's class: 50..100 ``critical``,
    1..49 ``high``, -49..0 ``normal`` (Django's default 0), -100..-50 ``low``."""
    if priority >= 50:
        return "critical"
    if priority >= 1:
        return "high"
    if priority > -50:
        return "normal"
    return "low"


def _json_args(args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
    try:
        a, kw = normalize_json(list(args)), normalize_json(dict(kwargs))
        json.dumps([a, kw], allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArguments(f"task arguments must be JSON-serializable: {e}") from None
    return a, kw


def _arguments(payload: Any) -> tuple[list[Any], dict[str, Any]]:
    """The ``args``/``kwargs`` of an enqueued payload (``{"args": [...], "kwargs": {...}}``);
    empty when the server no longer has the payload."""
    if not isinstance(payload, dict):
        return [], {}
    args, kwargs = payload.get("args"), payload.get("kwargs")
    return (
        list(args) if isinstance(args, list) else [],
        dict(kwargs) if isinstance(kwargs, dict) else {},
    )


class CronoqBackend(BaseTaskBackend):
    """The ``django.tasks`` backend (see the module docstring)."""

    supports_defer = True  # run_after → a fixed start
    supports_async_task = True  # the worker awaits coroutine functions
    supports_get_result = True  # from any thread or process: the server keeps the record
    supports_priority = True  # four classes (priority_class)

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = conf.backend_options(alias, params.get("OPTIONS"))
        if not options.server:
            raise conf.improperly_configured(
                f"TASKS[{alias!r}]['OPTIONS']['server'] is required (or settings.CRONOQ['SERVER']):"
                " the cronoq server's 'HOST:PORT'"
            )
        self.server = options.server
        self.token: str | None = options.token
        self.tls = options.tls

    @property
    def client(self) -> Any:
        """The process's :class:`~cronoq.client.BlockingClient` for this server."""
        return conf.shared_client(self.server, self.token, self.tls)

    # -- enqueue ------------------------------------------------------------------------------

    def _submission(
        self, task: Any, args: Any, kwargs: Any
    ) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
        self.validate_task(task)
        a, kw = _json_args(args, kwargs)
        fields: dict[str, Any] = {
            "kind": task.module_path,
            "pool": task.queue_name,
            "priority": priority_class(task.priority),
            "tags": {"django.backend": self.alias},
        }
        if task.run_after is not None:
            run_after = task.run_after
            fields["start_at"] = run_after if run_after.tzinfo else run_after.astimezone()
        return fields, a, kw

    def _result(self, task: Any, sub: Submitted, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return TaskResult(
            task=task,
            id=str(sub.id),
            status=TaskResultStatus.READY,
            enqueued_at=dt.datetime.now(dt.UTC),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )

    def _refused(self, task: Any, e: ClientError) -> Exception:
        if e.code == "not_found":
            return InvalidTask(
                f"queue_name {task.queue_name!r} is not a pool of the cronoq server at {self.client.target}"
                f" ({e.message})"
            )
        return e

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        fields, a, kw = self._submission(task, args, kwargs)
        try:
            sub = self.client.submit({"args": a, "kwargs": kw}, **fields)
        except ClientError as e:
            raise self._refused(task, e) from None
        result = self._result(task, sub, a, kw)
        task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        fields, a, kw = self._submission(task, args, kwargs)
        client = self.client
        try:
            sub = await self._on_loop(client.client.submit({"args": a, "kwargs": kw}, **fields))
        except ClientError as e:
            raise self._refused(task, e) from None
        result = self._result(task, sub, a, kw)
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.client.runner.loop))

    # -- results ------------------------------------------------------------------------------

    @staticmethod
    def _task_id(result_id: str) -> int:
        """The task id of a ``TaskResult.id`` (what ``enqueue`` returned: the id in decimal);
        any other string is an id this backend never made (``TaskResultDoesNotExist``)."""
        try:
            task_id = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        canonical = isinstance(result_id, int) and not isinstance(result_id, bool)  # (an int: lenient)
        if not 1 <= task_id <= UINT64_MAX or not (canonical or str(task_id) == result_id):
            raise TaskResultDoesNotExist(result_id)
        return task_id

    def get_result(self, result_id: str) -> Any:
        task_id = self._task_id(result_id)
        try:
            info = self.client.get(task_id, payload=True)
            output = self.client.wait(task_id, timeout=5) if info.status == "succeeded" else None
        except ClientError as e:
            if e.code == "not_found":
                raise TaskResultDoesNotExist(result_id) from None
            raise
        return self._to_result(str(task_id), info, output)

    async def aget_result(self, result_id: str) -> Any:
        task_id = self._task_id(result_id)
        client = self.client.client
        try:
            info = await self._on_loop(client.get(task_id, payload=True))
            output = (
                await self._on_loop(client.wait(task_id, timeout=5)) if info.status == "succeeded" else None
            )
        except ClientError as e:
            if e.code == "not_found":
                raise TaskResultDoesNotExist(result_id) from None
            raise
        return self._to_result(str(task_id), info, output)

    def _to_result(self, result_id: str, info: TaskInfo, output: Result | None) -> Any:
        try:
            task = import_string(info.kind)
        except ImportError:
            task = None
        if not isinstance(task, Task):
            raise TaskResultDoesNotExist(
                f"{result_id} (task {info.id} is of kind {info.kind!r}, not a Django task)"
            )
        args, kwargs = _arguments(info.payload)
        result = TaskResult(
            task=task,
            id=result_id,
            status=django_status(info.status),
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=task_errors(info),
            worker_ids=worker_ids(info),
            **timestamps(info),
        )
        if output is not None and output.output_available:
            set_field(result, "_return_value", output.json())
        return result
