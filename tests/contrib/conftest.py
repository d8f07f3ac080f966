"""Fixtures of the framework integration tests: one real ``cronoq serve`` for the session, and
the temporary Django project with its worker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.server.procs import ServerProc, child_env, start_server, start_worker, stop_worker

HERE = Path(__file__).resolve().parent

#: the pools of the shared server: one per integration (each served by its own worker)
SERVER_TOML = """
[[pools]]
name = "default"
max = 4
retry = {max_attempts = 1}

[[pools]]
name = "web"
max = 4
retry = {max_attempts = 1}

[[pools]]
name = "flask"
max = 4
retry = {max_attempts = 1}

[[pools]]
name = "django"
max = 4
retry = {max_attempts = 2, initial_backoff_s = 0.05, max_backoff_s = 0.1}

[[pools]]
name = "django_low"
max = 2
retry = {max_attempts = 1}

[[pools]]
name = "django_proc"
max = 2
retry = {max_attempts = 1}
"""


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("contrib"), SERVER_TOML, name="contrib")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


@dataclass
class DjangoProject:
    """The temporary Django project (a copy of djproject/), set up in this process, and its
    ``manage.py cronoq_worker --pool django --slots 1`` subprocess."""

    root: Path
    worker: subprocess.Popen[bytes]
    log: Path
    #: the environment of the project's processes (its settings read DJANGO_DB and CRONOQ_SERVER)
    env: dict[str, str]


@pytest.fixture(scope="session")
def django_project(server: ServerProc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DjangoProject]:
    django = pytest.importorskip("django")
    pytest.importorskip("django_tasks")
    from django.core.management import call_command

    tmp = tmp_path_factory.mktemp("django")
    root = tmp / "site"
    shutil.copytree(HERE / "djproject", root)
    project_env = {
        "DJANGO_DB": str(tmp / "db.sqlite3"),
        "CRONOQ_SERVER": server.grpc,
        "DJANGO_SETTINGS_MODULE": "proj.settings",
    }
    os.environ.update(project_env)
    sys.path.insert(0, str(root))
    django.setup()
    call_command("migrate", run_syncdb=True, verbosity=0)
    env = dict(child_env(), **project_env, SHOP_WORKER_SIDE="1")
    log = tmp / "worker.log"
    argv = [sys.executable, "manage.py", "cronoq_worker", "--pool", "django", "--slots", "1", "--grace", "5"]
    worker = start_worker(log, argv, cwd=root, env=env)
    try:
        yield DjangoProject(root, worker, log, dict(child_env(), **project_env))
    finally:
        stop_worker(worker, log)
