"""The Django tasks of the test project (django.tasks, or its backport on Django < 6)."""

from __future__ import annotations

import sys
import threading

from django.db import connection, transaction

try:
    from django.tasks import task
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:
    from django_tasks import task
    from django_tasks.signals import task_enqueued, task_finished, task_started

from shop.models import Note


@task(queue_name="django")
def add(x: int, y: int) -> int:
    return x + y


@task(queue_name="django", takes_context=True)
def flaky(context, word: str) -> dict:
    if context.attempt == 1:
        raise RuntimeError("the first attempt fails")
    return {"word": word, "attempt": context.attempt, "id": context.task_result.id}


@task(queue_name="django")
def explode(message: str) -> None:
    raise KeyError(message)


@task(queue_name="django")
def note(text: str) -> int:
    return Note.objects.create(text=text).id


@task(queue_name="django")
def note_where(text: str) -> list:
    """A note, and the process that wrote it (``--run-in process``: a child of the worker)."""
    import os

    return [Note.objects.create(text=text).id, os.getpid(), connection.get_autocommit()]


@task(queue_name="django")
async def count_notes(text: str) -> int:
    return await Note.objects.filter(text=text).acount()


@task(queue_name="django")
def leave_a_transaction_open() -> int:
    """Breaks its connection for whoever comes next: autocommit off, a row never committed."""
    transaction.set_autocommit(False)
    Note.objects.create(text="uncommitted")
    return threading.get_ident()


@task(queue_name="django")
def check_connection() -> dict:
    return {
        "autocommit": connection.get_autocommit(),
        "uncommitted": Note.objects.filter(text="uncommitted").count(),
        "thread": threading.get_ident(),
    }


@task(queue_name="nowhere")
def lost() -> None:
    pass


@task(queue_name="django")
def wait_for_file(path: str) -> str:
    """Runs until the test creates ``path`` (so the test can see it RUNNING)."""
    import os
    import time

    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return "released"


@task(queue_name="django")
def returns_a_set() -> object:
    return {1, 2}


@task(queue_name="django")
def exits(code: int) -> None:
    """Raises ``SystemExit`` (a ``BaseException``): a failed task, not a stopped worker."""
    raise SystemExit(code)


@task(queue_name="django")
async def exits_async(code: int) -> None:
    raise SystemExit(code)


@task(queue_name="django")
def signalled(fail: bool) -> str:
    """Its signals are recorded as notes (:func:`_record`)."""
    if fail:
        raise KeyError("signalled")
    return "done"


@task(queue_name="django")
async def signalled_async(fail: bool) -> str:
    if fail:
        raise KeyError("signalled")
    return "done"


def _record(signal: str):
    def receiver(sender, task_result, **kwargs) -> None:
        if not task_result.task.module_path.startswith("shop.tasks.signalled"):
            return
        errors = ",".join(e.exception_class_path for e in task_result.errors)
        fields = [signal, task_result.id, task_result.status, sender.__name__, errors]
        if task_result.status == "SUCCESSFUL":
            fields.append(task_result.return_value)
        if task_result.status == "FAILED":  # sent while the exception is handled, as Django does
            fields.append(f"handling={getattr(sys.exc_info()[0], '__name__', None)}")
        Note.objects.create(text=" ".join(fields))

    return receiver


# (weak=False: the receivers are closures; each process connects them once, on import)
task_enqueued.connect(_record("enqueued"), weak=False)
task_started.connect(_record("started"), weak=False)
task_finished.connect(_record("finished"), weak=False)
