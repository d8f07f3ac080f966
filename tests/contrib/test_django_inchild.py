"""``manage.py cronoq_worker --run-in process``: a real worker subprocess of the test project
whose tasks run in child processes that set Django up themselves and use the ORM."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from tests.contrib.conftest import DjangoProject
from tests.server.procs import start_worker, stop_worker

pytest.importorskip("django")


def test_run_in_process_sets_django_up_in_the_child(django_project: DjangoProject, tmp_path: Any) -> None:
    from shop.models import Note

    from cronoq.contrib.django.conf import default_client

    log = tmp_path / "proc-worker.log"
    argv = [sys.executable, "manage.py", "cronoq_worker", "--pool", "django_proc", "--slots", "1"]
    argv += ["--run-in", "process", "--kill-grace", "0.5"]
    worker = start_worker(log, argv, cwd=django_project.root, env=django_project.env)
    try:
        client = default_client()
        args = {"args": ["from a child"], "kwargs": {}}
        django_task = client.submit(args, pool="django_proc", kind="shop.tasks.note_where").id
        app_task = client.submit({"args": [41], "kwargs": {}}, pool="django_proc", kind="shop.receipt").id
        nested = client.submit(
            {"args": [42], "kwargs": {}}, pool="django_proc", kind="shop.receipt_in_process"
        )
        note_id, pid, autocommit = client.wait(django_task, timeout=30).json()
        receipt_id = client.wait(app_task, timeout=30).json()
        nested_id, nested_pid = client.wait(nested.id, timeout=30).json()
    finally:
        stop_worker(worker, log)
    assert pid != worker.pid and autocommit is True  # a child, with a healthy connection
    assert Note.objects.get(id=note_id).text == "from a child"  # written through the child's ORM
    assert Note.objects.get(id=receipt_id).text == "receipt 41"  # a cronoq app's task too
    # an app task with run_in="process" runs in the child already (in a thread), not a grandchild
    assert nested_pid == pid and Note.objects.get(id=nested_id).text == "receipt 42"
