"""``python manage.py cronoq_worker --pool P [--slots N ...]``: a remote worker for the Django
project's tasks (docs/getting-started/django.md).

It takes exactly the options of ``cronoq worker`` (``--pool``, ``--slots``, ``--server``,
``--token``, ``--tls``, ``--label``, ``--name``, ``--grace``, ``--log-level``, and whatever
that command gains), minus the handler reference: with Django set up by ``manage.py``, it
serves the project's Django tasks and its cronoq apps' tasks through
:class:`~cronoq.contrib.django.execute.WorkerHandler` (``close_old_connections()`` around every
task, every app's ``@app.lifespan`` around the worker's life). ``--server`` / ``--token`` /
``--tls`` default to ``settings.CRONOQ``'s, else to the ``OPTIONS`` of the first
``CronoqBackend`` of ``TASKS`` that names a server (``CRONOQ_SERVER`` / ``CRONOQ_TOKEN`` in the
environment still win, as for ``cronoq worker``).

With ``--run-in process`` every task runs in a child process instead
(:class:`~cronoq.contrib.django.inchild.ChildHandler`): each child sets Django up with the
worker's settings module, enters the apps' lifespans once and keeps connection hygiene around
each task; the worker process itself runs no task and enters no lifespan.
"""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

from django.conf import settings as django_settings
from django.core.management.base import BaseCommand, CommandError

from cronoq.contrib.django.execute import WorkerHandler, serving_apps
from cronoq.contrib.django.inchild import ChildHandler

#: the handler ``cronoq worker`` loads (``MODULE:HANDLER``), built by the command before it runs
HANDLER: WorkerHandler | None = None
_REF = f"{__name__}:HANDLER"
#: with ``--run-in process``: what each child runs instead (it sets Django up in the child)
CHILD_HANDLER: ChildHandler | None = None
_CHILD_REF = f"{__name__}:CHILD_HANDLER"


def _prefixed(argv: list[str]) -> argparse.Namespace:
    """The few options the handler needs too (the rest are left to ``cronoq worker``)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--slots", "-n", type=int, default=1)
    parser.add_argument("--name", default="")
    parser.add_argument("--server", "-s", default=None)
    parser.add_argument("--token", default=None)
    parser.add_argument("--run-in", default=None)
    return parser.parse_known_args(argv)[0]


class Command(BaseCommand):
    help = "Serve a pool of the cronoq server with the project's Django and cronoq tasks (see --help)."

    def run_from_argv(self, argv: list[str]) -> None:
        self.serve(argv[2:], prog=f"{os.path.basename(argv[0])} {argv[1]}")

    def handle(self, *args: Any, **options: Any) -> None:  # call_command("cronoq_worker", ...)
        self.serve([str(a) for a in args], prog="cronoq_worker")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs="*")

    def serve(self, argv: list[str], prog: str) -> None:
        from cronoq.cli.worker_cmd import worker
        from cronoq.contrib.django.conf import default_connection

        global CHILD_HANDLER, HANDLER
        known = _prefixed(argv)
        name = known.name or f"{socket.gethostname()}:{os.getpid()}"
        if known.run_in == "process":  # each task in a child, which sets Django up itself
            CHILD_HANDLER = ChildHandler(django_settings.SETTINGS_MODULE, name)
            ref = _CHILD_REF
        else:
            HANDLER = WorkerHandler(serving_apps(), name, max(1, known.slots))
            ref = _REF
        connection = default_connection()
        extra: list[str] = []
        if known.server is None and not os.environ.get("CRONOQ_SERVER"):
            if connection is None:
                raise CommandError(
                    "no cronoq server: pass --server HOST:PORT or set settings.CRONOQ['SERVER']"
                    " (or OPTIONS['server'] of a CronoqBackend in TASKS)"
                )
            extra += ["--server", connection.server[0]]
        if connection is not None:
            if known.token is None and not os.environ.get("CRONOQ_TOKEN") and connection.token:
                extra += ["--token", connection.token]
            if connection.tls and "--tls" not in argv:
                extra.append("--tls")
        worker.main(args=[ref, *argv, *extra], prog_name=prog, standalone_mode=True)
