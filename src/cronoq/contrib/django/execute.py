"""The worker side: running Django tasks and the project's cronoq tasks with Django's database
connections kept healthy (what ``manage.py cronoq_worker`` serves).

Theory of operation
-------------------
:class:`WorkerHandler` is the remote worker's handler. A lease whose kind is a task of one of
the project's cronoq apps (``settings.CRONOQ["APPS"]``) goes to that app's handler; any other
kind is a Django task's import path (what :class:`~cronoq.contrib.django.CronoqBackend`
submits): it is imported (a path that cannot be imported, or that is not a ``@task``, fails
the task permanently saying so) and called with the payload's ``args``/``kwargs`` — with a
``TaskContext`` first when the task ``takes_context`` (its ``attempt`` is cronoq's attempt
number).

**Connection hygiene** (:class:`ConnectionHygiene`, also added to every cronoq app as a call
hook): ``close_old_connections()`` runs before and after every task, in the thread that uses
the connections — a plain function's own thread, or for ``async def`` tasks asgiref's
thread-sensitive thread, where Django's async ORM calls run — so a connection that a task
broke, left in a transaction, or that outlived ``CONN_MAX_AGE`` is closed and the next task
opens a fresh one, as Django does around each request. Plain functions run in a thread pool
of ``slots`` threads.

Django's ``task_started`` and ``task_finished`` signals (sender: the task's backend class) are
sent around each attempt, in the thread where the task's ORM calls run, inside the connection
hygiene: ``task_finished`` carries the attempt's ``RUNNING`` result turned ``SUCCESSFUL`` (with
its return value) or ``FAILED`` (with this attempt's ``TaskError``), sent robustly (a receiver
that raises is logged and changes nothing); a receiver of ``task_started`` that raises fails
the attempt like the task would.

A Django task that raises fails its attempt with the exception's class path and traceback as
the message (:func:`cronoq.contrib.django.results.error_message`), retryable as the pool's
retry policy says — any ``BaseException`` but ``KeyboardInterrupt`` and the worker's own
cancel, as Django's backends record them: a task calling ``sys.exit()`` fails, the worker goes
on. The return value is the output (JSON, as Django normalizes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.utils.module_loading import import_string

from cronoq.contrib.django.compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    set_field,
    task_finished,
    task_started,
)
from cronoq.contrib.django.results import TASK_FAILED, error_message
from cronoq.errors import Permanent, Retryable

if TYPE_CHECKING:
    from cronoq.client import Lease
    from cronoq.tasks.app import App

__all__ = ["ConnectionHygiene", "WorkerHandler", "serving_apps"]


class ConnectionHygiene:
    """A call hook: ``close_old_connections()`` before and after each task function."""

    @contextlib.contextmanager
    def sync_context(self) -> Iterator[None]:
        close_old_connections()
        try:
            yield
        finally:
            close_old_connections()

    @contextlib.asynccontextmanager
    async def async_context(self) -> AsyncIterator[None]:
        await sync_to_async(close_old_connections)()
        try:
            yield
        finally:
            await sync_to_async(close_old_connections)()


def serving_apps() -> list[App]:
    """The project's cronoq apps (``settings.CRONOQ["APPS"]``), each with :class:`ConnectionHygiene`
    as a call hook: what a worker (or a ``--run-in process`` worker's child) serves."""
    from django.apps import apps as django_apps

    config = django_apps.get_app_config("cronoq")
    apps: list[App] = list(getattr(config, "cronoq_apps", []))
    for app in apps:
        app.add_call_hook(ConnectionHygiene())
    return apps


class _Attempt:
    """One attempt of a Django task: its running ``TaskResult`` (what a ``takes_context`` task
    sees) and Django's ``task_started`` / ``task_finished`` signals around the call, sent in the
    thread where the task's ORM calls run (inside :class:`ConnectionHygiene`)."""

    def __init__(self, task: Any, result: Any) -> None:
        self.task = task
        self.result = result
        self.sender = type(task.get_backend())

    def started(self) -> None:
        task_started.send(self.sender, task_result=self.result)

    def _finished(self, status: Any) -> None:
        set_field(self.result, "status", status)
        set_field(self.result, "finished_at", dt.datetime.now(dt.UTC))
        # (robust: a receiver that raises is logged by Django; the attempt's outcome stands)
        task_finished.send_robust(self.sender, task_result=self.result)

    def failed(self, exc: BaseException) -> Retryable:
        """The attempt failed with ``exc``: ``task_finished`` (FAILED, its ``TaskError``), and
        the failure to report (the class path and traceback)."""
        message = error_message(exc)
        path, _, text = message.partition("\n")
        self.result.errors.append(TaskError(exception_class_path=path, traceback=text))
        self._finished(TaskResultStatus.FAILED)
        return Retryable(message)

    def succeeded(self, value: Any) -> bytes:
        """The attempt returned ``value``: its output, always JSON bytes (a str result stays a
        JSON string, as get_result reads it); a value Django cannot serialize fails it for
        good."""
        try:
            normalized = normalize_json(value)
            output = json.dumps(normalized, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as e:
            message = f"task '{self.task.module_path}': the return value is not JSON-serializable: {e}"
            self.result.errors.append(TaskError(exception_class_path=TASK_FAILED, traceback=message))
            self._finished(TaskResultStatus.FAILED)
            raise Permanent(message) from None
        set_field(self.result, "_return_value", normalized)
        self._finished(TaskResultStatus.SUCCESSFUL)
        return output


def _call_sync(fn: Any, args: list[Any], kwargs: dict[str, Any], attempt: _Attempt) -> bytes:
    with ConnectionHygiene().sync_context():
        try:
            attempt.started()
            value = fn(*args, **kwargs)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: the task's failure, not the worker's
            raise attempt.failed(exc) from exc
        return attempt.succeeded(value)


async def _call_async(fn: Any, args: list[Any], kwargs: dict[str, Any], attempt: _Attempt) -> bytes:
    async with ConnectionHygiene().async_context():
        try:
            await sync_to_async(attempt.started)()
            value = await fn(*args, **kwargs)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise  # the worker's own cancel (a timeout, a stop), or the operator's Ctrl-C
        except BaseException as exc:
            raise await sync_to_async(attempt.failed)(exc) from exc
        return await sync_to_async(attempt.succeeded)(value)


class WorkerHandler:
    """The handler of ``manage.py cronoq_worker`` (see the module docstring)."""

    def __init__(self, apps: Sequence[App], worker_name: str, slots: int) -> None:
        self.apps = list(apps)
        self.worker_name = worker_name
        self._by_kind = {}
        for app in self.apps:
            handler = app.handler()
            for defn in app.tasks.values():
                self._by_kind[defn.kind] = handler
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="cronoq-django")

        #: what ``cronoq worker`` enters around the worker's life: every app's ``@app.lifespan``
        self.lifespan = self

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Every cronoq app's lifespan, entered in order (left in reverse); the thread pool is
        shut down at the end."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                for app in self.apps:
                    await stack.enter_async_context(app.lifespan_context())
                yield
        finally:
            self._pool.shutdown(wait=True)

    async def __call__(self, lease: Lease) -> object:
        handler = self._by_kind.get(lease.kind)
        if handler is not None:
            return await handler(lease)
        task = _import_task(lease.kind)
        args, kwargs = _arguments(lease)
        attempt = _Attempt(task, self._running_result(task, lease, args, kwargs))
        if task.takes_context:
            args.insert(0, TaskContext(task_result=attempt.result))
        if inspect.iscoroutinefunction(task.func):
            return await _call_async(task.func, args, kwargs, attempt)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, _call_sync, task.func, args, kwargs, attempt)

    def _running_result(self, task: Any, lease: Lease, args: list[Any], kwargs: dict[str, Any]) -> Any:
        now = dt.datetime.now(dt.UTC)
        return TaskResult(
            task=task,
            id=str(lease.task_id),
            status=TaskResultStatus.RUNNING,
            enqueued_at=None,
            started_at=now,
            last_attempted_at=now,
            finished_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=task.backend,
            errors=[],
            worker_ids=[self.worker_name] * max(1, int(lease.attempt)),
        )


def _import_task(kind: str) -> Any:
    try:
        task = import_string(kind)
    except ImportError as e:
        raise Permanent(f"cannot import the Django task {kind!r}: {type(e).__name__}: {e}") from None
    except Exception as e:  # the task's module raised while being imported
        raise Permanent(f"importing the Django task {kind!r} failed: {type(e).__name__}: {e}") from None
    if not isinstance(task, Task):
        raise Permanent(f"{kind!r} is not a Django task (decorate it with @task)")
    return task


def _arguments(lease: Lease) -> tuple[list[Any], dict[str, Any]]:
    try:
        payload = json.loads(lease.payload) if lease.payload else {}
        args, kwargs = list(payload.get("args", [])), dict(payload.get("kwargs", {}))
    except (ValueError, AttributeError, TypeError) as e:
        raise Permanent(
            f"task {lease.kind!r}: the payload is not {{'args': [...], 'kwargs': {{...}}}}: {e}"
        ) from None
    return args, kwargs
