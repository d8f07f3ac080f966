"""``submit_on_commit`` and the project's cronoq app under ``manage.py cronoq_worker``: a
committed transaction submits, a rolled-back one submits nothing (real Django, SQLite, a
real server and worker: conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.contrib.conftest import DjangoProject

from cronoq.errors import InvalidSubmission

pytest.importorskip("django")


@pytest.fixture(scope="module")
def receipt(django_project: DjangoProject) -> Any:
    from shop.cronoq_tasks import receipt

    return receipt


def _receipts(client: Any) -> list[Any]:
    return client.list_tasks(kinds="shop.receipt", limit=1000).tasks


def test_commit_submits_and_rollback_submits_nothing(receipt: Any) -> None:
    from django.db import transaction
    from shop.models import Note

    from cronoq.contrib.django import submit_on_commit
    from cronoq.contrib.django.conf import default_client

    client = default_client()
    before = len(_receipts(client))
    with transaction.atomic():
        submit_on_commit(receipt, 1)
        assert len(_receipts(client)) == before  # not before the commit
    submitted = _receipts(client)
    assert len(submitted) == before + 1
    result = client.wait(submitted[-1].id, timeout=30)
    assert result.status == "succeeded", result.message
    assert Note.objects.get(id=result.json()).text == "receipt 1"  # ran on the Django worker

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        submit_on_commit(receipt.options(key="rolled-back"), 2)
        raise Rollback
    assert len(_receipts(client)) == before + 1  # nothing more
    with pytest.raises(InvalidSubmission), transaction.atomic():
        submit_on_commit(receipt, "not an int")
    with pytest.raises(ValueError, match="named task"):
        submit_on_commit(print, 1)  # type: ignore[arg-type]
    assert len(_receipts(client)) == before + 1


def test_blocking_calls_from_a_view_thread(receipt: Any) -> None:
    handle = receipt.submit_sync(3)
    from shop.models import Note

    assert Note.objects.get(id=handle.result(timeout=30)).text == "receipt 3"


def test_worker_command_options_and_a_bad_app_module(django_project: DjangoProject) -> None:
    import subprocess
    import sys

    manage = [sys.executable, "manage.py", "cronoq_worker"]
    out = subprocess.run(
        [*manage, "--help"],
        cwd=django_project.root,
        env=django_project.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    for option in ("--pool", "--slots", "--server", "--token", "--tls", "--label", "--grace"):
        assert option in out.stdout  # the options of `cronoq worker`
    bad = subprocess.run(
        [*manage, "--pool", "django"],
        cwd=django_project.root,
        env=dict(django_project.env, SHOP_BAD_APP="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0
    assert "settings.CRONOQ['APPS']: cannot import 'shop.nope'" in bad.stderr


def test_an_unbound_app_is_refused_before_the_commit(receipt: Any) -> None:
    """A task whose app is bound nowhere cannot be submitted: ``submit_on_commit`` says so at
    once, in the transaction, instead of registering a call that fails after the commit."""
    from django.db import transaction
    from shop.models import Note

    from cronoq import App
    from cronoq.contrib.django import submit_on_commit
    from cronoq.errors import SchedulerError

    loose = App("loose")

    @loose.task(name="loose.t", pool="django")
    def t(n: int) -> int:
        return n

    with pytest.raises(SchedulerError, match="loose"), transaction.atomic():
        Note.objects.create(text="never committed")
        submit_on_commit(t, 1)
    assert not Note.objects.filter(text="never committed").exists()  # the error rolled it back


def test_the_server_of_the_tasks_backend_serves_when_cronoq_names_none(
    django_project: DjangoProject, tmp_path: Any
) -> None:
    """Configured as the issue's example is, with the server only in
    ``TASKS[...]["OPTIONS"]``: ``manage.py cronoq_worker`` connects to it, and the project's
    cronoq apps are bound to it (a named task submits from Django code)."""
    import subprocess
    import sys

    from tests.server.procs import start_worker, stop_worker

    from cronoq.contrib.django.conf import default_client

    env = dict(django_project.env)
    env["SHOP_SERVER_IN_TASKS_ONLY"] = env.pop("CRONOQ_SERVER")  # (also cronoq worker's variable)
    log = tmp_path / "worker.log"
    argv = [sys.executable, "manage.py", "cronoq_worker", "--pool", "django_low", "--slots", "1"]
    worker = start_worker(log, argv, cwd=django_project.root, env=env)
    try:
        client = default_client()
        task = client.submit({"args": [40, 2], "kwargs": {}}, pool="django_low", kind="shop.tasks.add").id
        assert client.wait(task, timeout=30).json() == 42
        code = (
            "from shop.cronoq_tasks import receipt; print(receipt.options(pool='django_low').enqueue_sync(7))"
        )
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=django_project.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert client.wait(int(out.stdout.split()[-1]), timeout=30).status == "succeeded"
    finally:
        stop_worker(worker, log)


def test_a_django_task_enqueued_on_commit(django_project: DjangoProject) -> None:
    """The page's way for Django tasks: ``transaction.on_commit(partial(t.enqueue, ...))``
    enqueues once the block commits, and nothing when it rolls back."""
    from functools import partial

    from django.db import transaction
    from shop import tasks

    from cronoq.contrib.django.conf import default_client

    client = default_client()

    def added() -> int:
        return len(client.list_tasks(kinds="shop.tasks.add", limit=1000).tasks)

    before = added()
    with pytest.raises(RuntimeError), transaction.atomic():
        transaction.on_commit(partial(tasks.add.enqueue, 1, 1))
        raise RuntimeError("roll back")
    assert added() == before
    with transaction.atomic():
        transaction.on_commit(partial(tasks.add.enqueue, 2, 2))
        assert added() == before  # not before the commit
    assert added() == before + 1
