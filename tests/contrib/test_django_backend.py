"""The ``django.tasks`` backend with a real temporary Django project (SQLite), a real
``cronoq serve`` and a real ``manage.py cronoq_worker`` subprocess (conftest.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from tests.contrib.conftest import DjangoProject

pytest.importorskip("django")


@pytest.fixture(scope="module")
def shop(django_project: DjangoProject) -> Any:
    from shop import tasks

    return tasks


def _client() -> Any:
    from cronoq.contrib.django.conf import default_client

    return default_client()


def _finished(result: Any) -> Any:
    """Wait on the server for the task, then refresh the Django result."""
    _client().wait(int(result.id), timeout=30)
    result.refresh()
    return result


def test_enqueue_get_result_and_refresh(shop: Any) -> None:
    from cronoq.contrib.django.compat import TaskResultStatus

    result = shop.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    assert _client().get(int(result.id)).kind == "shop.tasks.add"  # the id is the cronoq id
    assert result.args == [2, 3] and result.backend == "default"
    _finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.errors == [] and result.attempts == 1
    assert result.enqueued_at <= result.started_at <= result.last_attempted_at <= result.finished_at
    assert result.finished_at.tzinfo is not None
    again = shop.add.get_result(result.id)
    assert (again.status, again.return_value, again.task.func) == (result.status, 5, shop.add.func)
    assert (again.args, again.kwargs) == ([2, 3], {})  # read back from the stored payload


def test_get_result_carries_the_arguments(shop: Any) -> None:
    """``args``/``kwargs`` come back from the server (the payload), while the task waits and
    after it ended, also for a result fetched in another call than ``enqueue``."""
    from cronoq.contrib.django.compat import TaskResultStatus

    gate = shop.wait_for_file.using(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    waiting = gate.enqueue(path="/nonexistent/never")
    got = shop.wait_for_file.get_result(waiting.id)
    assert got.status == TaskResultStatus.READY
    assert (got.args, got.kwargs) == ([], {"path": "/nonexistent/never"})
    _client().cancel(int(waiting.id))
    done = _finished(shop.flaky.enqueue(word="kw"))
    fetched = shop.flaky.get_result(done.id)
    assert (fetched.args, fetched.kwargs) == ([], {"word": "kw"})
    assert (done.args, done.kwargs) == ([], {"word": "kw"})  # refresh() keeps them too


def test_errors_carry_the_class_path_and_traceback(shop: Any) -> None:
    from cronoq.contrib.django.compat import TaskResultStatus

    result = _finished(shop.explode.enqueue("boom"))
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 2  # the django pool retries once
    err = result.errors[-1]
    assert err.exception_class_path == "builtins.KeyError"
    assert err.exception_class is KeyError
    assert "KeyError: 'boom'" in err.traceback and "in explode" in err.traceback
    with pytest.raises(ValueError):
        result.return_value  # noqa: B018 - Django raises for a failed task


def test_a_task_raising_system_exit_fails_and_the_worker_goes_on(shop: Any) -> None:
    """As Django's own backends: a ``BaseException`` (here ``SystemExit``) from a task is the
    task's failure, with its class path; it does not stop the worker serving the pool."""
    for t in (shop.exits, shop.exits_async):
        result = _finished(t.enqueue(3))
        assert result.status == "FAILED", t
        assert [e.exception_class_path for e in result.errors] == ["builtins.SystemExit"] * 2
        assert "SystemExit: 3" in result.errors[-1].traceback
    assert _finished(shop.add.enqueue(1, 2)).return_value == 3  # the same worker still serves


def test_the_task_signals_are_sent(shop: Any) -> None:
    """Django's ``task_enqueued`` where the task is enqueued, ``task_started`` and
    ``task_finished`` on the worker around each attempt, sender the backend's class (the
    receivers in shop/tasks.py write notes)."""
    from shop.models import Note

    ok = _finished(shop.signalled.enqueue(False))
    bad = _finished(shop.signalled.using(queue_name="django").enqueue(fail=True))
    notes = set(Note.objects.filter(text__contains=" CronoqBackend").values_list("text", flat=True))
    assert {
        f"enqueued {ok.id} READY CronoqBackend ",
        f"started {ok.id} RUNNING CronoqBackend ",
        f"finished {ok.id} SUCCESSFUL CronoqBackend  done",
        f"enqueued {bad.id} READY CronoqBackend ",
        f"started {bad.id} RUNNING CronoqBackend ",  # twice: the pool retries once
        f"finished {bad.id} FAILED CronoqBackend builtins.KeyError handling=KeyError",
    } <= notes
    assert Note.objects.filter(text__startswith=f"finished {bad.id} FAILED").count() == 2
    bad_async = _finished(shop.signalled_async.enqueue(fail=True))
    assert Note.objects.filter(
        text=f"finished {bad_async.id} FAILED CronoqBackend builtins.KeyError handling=KeyError"
    ).exists()  # (receivers of an async task's signals see the exception being handled too)


async def test_aenqueue_sends_task_enqueued(shop: Any) -> None:
    from asgiref.sync import sync_to_async
    from shop.models import Note

    result = await shop.signalled.aenqueue(False)
    await asyncio.to_thread(_client().wait, int(result.id), 30)
    assert (
        await sync_to_async(Note.objects.filter(text__startswith=f"enqueued {result.id} READY").count)() == 1
    )


def test_takes_context_sees_the_attempt(shop: Any) -> None:
    result = _finished(shop.flaky.enqueue("hi"))
    assert result.return_value == {"word": "hi", "attempt": 2, "id": result.id}
    assert [e.exception_class_path for e in result.errors] == ["builtins.RuntimeError"]
    assert result.attempts == 2


async def test_aenqueue_and_aget_result(shop: Any) -> None:
    from cronoq.contrib.django.compat import TaskResultStatus

    result = await shop.add.aenqueue(20, 22)
    assert result.status == TaskResultStatus.READY
    await asyncio.to_thread(_client().wait, int(result.id), 30)
    got = await shop.add.aget_result(result.id)
    assert got.status == TaskResultStatus.SUCCESSFUL and got.return_value == 42
    assert (got.args, got.kwargs) == ([20, 22], {})
    await result.arefresh()
    assert result.return_value == 42


def test_priority_orders_the_waiting_tasks(shop: Any) -> None:
    from shop.models import Note

    client = _client()
    client.pause("django")
    try:
        results = [
            shop.note.using(priority=-100).enqueue("low"),
            shop.note.enqueue("normal"),
            shop.note.using(priority=100).enqueue("critical"),
            shop.note.using(priority=20).enqueue("high"),
        ]
        assert [client.get(int(r.id)).priority for r in results] == ["low", "normal", "critical", "high"]
    finally:
        client.resume("django")
    for r in results:
        _finished(r)
    ids = [r.return_value for r in results]
    order = list(Note.objects.filter(id__in=ids).order_by("id").values_list("text", flat=True))
    assert order == ["critical", "high", "normal", "low"]


def test_run_after_is_a_fixed_start(shop: Any) -> None:
    from django.utils import timezone

    run_after = timezone.now() + dt.timedelta(seconds=1)
    result = shop.add.using(run_after=run_after).enqueue(1, 1)
    assert result.status == "READY"
    _finished(result)
    assert result.return_value == 2
    assert result.started_at >= run_after - dt.timedelta(milliseconds=5)


def test_connection_hygiene(shop: Any) -> None:
    broken = _finished(shop.leave_a_transaction_open.enqueue())
    check = _finished(shop.check_connection.enqueue())
    # the same (only) worker thread, yet a clean connection: the open transaction was closed
    assert check.return_value == {"autocommit": True, "uncommitted": 0, "thread": broken.return_value}
    assert _finished(shop.count_notes.enqueue("uncommitted")).return_value == 0  # async task, ORM


def test_bad_input_is_refused_before_anything_is_sent(shop: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from cronoq.contrib.django import CronoqBackend
    from cronoq.contrib.django.compat import InvalidTask

    client = _client()
    before = client.list_tasks(pools="django", limit=1000).tasks
    with pytest.raises(InvalidTask, match="JSON"):
        shop.add.enqueue(object(), 1)
    with pytest.raises(TypeError):  # (it is a TypeError too, as Django's own serialization raises)
        shop.add.enqueue({1, 2}, 1)
    with pytest.raises(InvalidTask, match="priority"):
        shop.add.using(priority=101)
    with pytest.raises(InvalidTask, match="other"):
        shop.add.using(queue_name="other")
    with pytest.raises(InvalidTask, match="'nowhere' is not a pool"):
        shop.lost.enqueue()
    assert client.list_tasks(pools="django", limit=1000).tasks == before
    assert client.list_tasks(kinds="shop.tasks.lost").tasks == []
    with override_settings(CRONOQ={}), pytest.raises(ImproperlyConfigured, match=r"OPTIONS.*server"):
        CronoqBackend("nowhere", {"OPTIONS": {}})
    from cronoq.contrib.django.compat import TaskResultDoesNotExist

    with pytest.raises(TaskResultDoesNotExist):
        shop.add.get_result("not-an-id")
    with pytest.raises(TaskResultDoesNotExist):
        shop.add.get_result("987654321")


def test_backend_options_are_checked(shop: Any) -> None:
    """A misspelt or mistyped ``OPTIONS`` key is ``ImproperlyConfigured`` naming it, not
    silently replaced by ``settings.CRONOQ``'s value."""
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from cronoq.contrib.django import CronoqBackend
    from cronoq.contrib.django.conf import settings

    server = _client().target
    bad = [
        (
            {"servr": "10.0.0.1:7070"},
            r"TASKS\['x'\]\['OPTIONS'\]: unknown key 'servr' \(keys: server, tls, token\)",
        ),
        ({"server": server, "token": 5}, r"TASKS\['x'\]\['OPTIONS'\]\['token'\] must be a string or None"),
        ({"server": server, "tls": "no"}, r"TASKS\['x'\]\['OPTIONS'\]\['tls'\] must be True or False"),
        ("127.0.0.1:7070", r"TASKS\['x'\]\['OPTIONS'\] must be a dict"),
    ]
    for options, message in bad:
        with pytest.raises(ImproperlyConfigured, match=message):
            CronoqBackend("x", {"OPTIONS": options})
    assert CronoqBackend("x", {"OPTIONS": {"server": server, "tls": False, "token": None}}).server == (
        server,
    )
    with (
        override_settings(CRONOQ={"SERVER": server, "TLS": "false"}),
        pytest.raises(ImproperlyConfigured, match=r"settings.CRONOQ\['TLS'\] must be True or False"),
    ):
        settings()


def test_get_result_of_an_id_the_backend_never_made(shop: Any) -> None:
    """Any string that is not an id this backend returned is ``TaskResultDoesNotExist``, as
    Django's contract says: past the range of task ids, or another spelling of a real one."""
    from cronoq.contrib.django.compat import TaskResultDoesNotExist

    real = _finished(shop.add.enqueue(1, 1)).id
    for other in ("99999999999999999999999", f"0{real}", f"+{real}", f" {real}", f"{real[0]}_{real[1:]}"):
        with pytest.raises(TaskResultDoesNotExist):
            shop.add.get_result(other)
    assert shop.add.get_result(real).return_value == 2
    assert shop.add.get_result(int(real)).id == real  # (an int, though Django's ids are str)
    with pytest.raises(TaskResultDoesNotExist):
        shop.add.get_result(True)


def test_a_task_module_the_worker_cannot_import(shop: Any) -> None:
    from shop import web_only

    result = _finished(web_only.render_pdf.enqueue(7))
    assert result.status == "FAILED"
    assert len(result.errors) == 1  # permanent: not retried
    assert result.errors[0].exception_class_path == "cronoq.errors.TaskFailed"
    assert "cannot import the Django task 'shop.web_only.render_pdf'" in result.errors[0].traceback


def test_a_running_task_reads_running(shop: Any, tmp_path: Any) -> None:
    import time

    from cronoq.contrib.django.compat import TaskResultStatus

    release = tmp_path / "release"
    result = shop.wait_for_file.enqueue(str(release))
    deadline = time.monotonic() + 30
    while result.status != TaskResultStatus.RUNNING:
        assert time.monotonic() < deadline, result.status
        time.sleep(0.02)
        result.refresh()
    assert result.started_at is not None and result.finished_at is None
    with pytest.raises(ValueError):
        result.return_value  # noqa: B018 - not finished yet
    release.touch()
    assert _finished(result).return_value == "released"


def test_a_return_value_django_cannot_serialize_fails_the_task(shop: Any) -> None:
    result = _finished(shop.returns_a_set.enqueue())
    assert result.status == "FAILED" and len(result.errors) == 1  # permanent: not retried
    assert "the return value is not JSON-serializable" in result.errors[0].traceback
