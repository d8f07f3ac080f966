"""The Flask extension: a Flask app's test client submitting through a real ``cronoq serve``
to a real ``cronoq worker flask_site:tasks`` subprocess, whose tasks run inside the Flask app's
context."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.server.procs import ServerProc, child_env, start_worker, stop_worker

from cronoq import App

flask = pytest.importorskip("flask")

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def site(server: ServerProc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    previous = os.environ.get("CRONOQ_SERVER")
    os.environ["CRONOQ_SERVER"] = server.grpc  # (flask_site reads it at import)
    module = importlib.import_module("flask_site")
    log = tmp_path_factory.mktemp("flask") / "worker.log"
    argv = [
        sys.executable,
        "-m",
        "cronoq.cli",
        "worker",
        "flask_site:tasks",
        "--pool",
        "flask",
        "--slots",
        "4",
    ]
    env = dict(child_env(), CRONOQ_SERVER=server.grpc)
    proc = start_worker(log, [*argv, "--app-dir", str(HERE), "--server", server.grpc], env=env)
    try:
        yield module
    finally:
        stop_worker(proc, log)
        module.ext.close()
        if previous is None:
            del os.environ["CRONOQ_SERVER"]
        else:
            os.environ["CRONOQ_SERVER"] = previous


def test_a_view_submits_and_the_task_runs_in_the_app_context(site: ModuleType) -> None:
    assert site.site.extensions["cronoq"] is site.ext
    r = site.site.test_client().post("/config/GREETING")
    assert r.status_code == 200, r.text
    assert r.json["value"] == "bonjour"  # read through flask.current_app on the worker
    assert site.app_name.submit_sync().result(timeout=30) == "flask_site"


def test_configuration_errors() -> None:
    from cronoq.contrib.flask import Cronoq

    with pytest.raises(ValueError, match="CRONOQ_SERVER"):
        Cronoq(flask.Flask("x"), App("x"))
    with pytest.raises(ValueError, match=r"cronoq\.App"):
        Cronoq(flask.Flask("y"))
    site = flask.Flask("z")
    site.config.update(CRONOQ_SERVER="127.0.0.1:1", CRONOQ_TLS="false")
    with pytest.raises(ValueError, match=r"CRONOQ_TLS must be True or False \(got 'false'\)"):
        Cronoq(site, App("z"))
    site.config.update(CRONOQ_TLS=False, CRONOQ_TOKEN=123)
    with pytest.raises(ValueError, match="CRONOQ_TOKEN must be a string"):
        Cronoq(site, App("z"))


def test_an_app_factory_called_again_replaces_the_flask_app() -> None:
    """``init_app`` for a new Flask app (an application factory called once per test, say)
    runs the tasks in that app's context only: the previous app's context is not pushed as
    well, nor kept alive by the cronoq app; the previous client is closed."""
    import asyncio

    import cronoq.testing
    from cronoq.client import ClientError
    from cronoq.contrib.flask import Cronoq

    tasks = App("factory")
    seen: list[str] = []
    popped: list[str] = []

    @tasks.task(name="factory.current")
    def current() -> None:
        seen.append(flask.current_app.name)

    def flask_app(name: str) -> Any:
        app = flask.Flask(name)
        app.teardown_appcontext(lambda exc: popped.append(name))
        return app

    ext = Cronoq(tasks_app=tasks, server="127.0.0.1:1")
    ext.init_app(flask_app("first"))
    first_client = ext.client
    ext.init_app(flask_app("second"))
    Cronoq(flask_app("third"), tasks, server="127.0.0.1:1")  # another extension, same cronoq app
    assert len(tasks.call_hooks) == 1
    with pytest.raises(ClientError, match="closed"):
        first_client.get(1)  # type: ignore[union-attr]

    async def run() -> None:
        async with cronoq.testing.run(tasks):
            await (await current.submit())

    asyncio.run(run())
    assert (seen, popped) == (["third"], ["third"])
