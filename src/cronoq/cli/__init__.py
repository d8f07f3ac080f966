"""The ``cronoq`` command line (docs/reference/behaviour.md#cli).

Structure: :data:`cli` is a click group (:mod:`cronoq.cli.common`, with what every command
shares); each subcommand is a function decorated with ``@cli.command()`` in the module of its
family, which this package imports so that the group knows them all:

* ``serve`` — the server (docs/reference/behaviour.md#server; :mod:`~cronoq.cli.serve_cmd`);
* ``worker`` — serve a pool with a Python function (``MODULE:FUNCTION``) or every task of an
  app (``MODULE:APP``, a :class:`cronoq.App`) as a remote worker (:mod:`~cronoq.cli.worker_cmd`);
* ``submit``, ``get``, ``wait`` — one task (``submit --task NAME`` a named one); ``tasks`` —
  list an app's tasks (``--apply-recurring``: create its schedules on the server)
  (:mod:`~cronoq.cli.task_cmds`);
* ``pause``, ``resume`` — a pool; ``cancel``, ``replay`` — one task, or every task matching
  filter options, after a confirmation prompt (docs/how-to/operations.md;
  :mod:`~cronoq.cli.operations`); ``signal NAME [JSON]`` — send a signal
  (docs/how-to/durable.md#signals);
* ``watch`` — live tail of status events; ``top`` — live per-pool table (:mod:`~cronoq.cli.live`);
* ``bench`` — a throughput benchmark (no-op tasks, an in-process remote worker); the command
  renders what :mod:`cronoq.benchmark` measures (:mod:`~cronoq.cli.bench_cmd`).

The command modules are named ``*_cmd`` where the command's own name would otherwise shadow
it: ``cronoq.cli.serve`` is the ``serve`` command, re-exported here with the others.

Shared conventions:

* errors are reported with :func:`fail` (a clear one-line message on stderr, non-zero exit);
  usage errors are click's (exit 2); the exit codes are :data:`EXIT_CODES` (``cronoq --help``);
* human output goes through :data:`console` (rich); ``--json`` output is plain ``json.dumps``
  on stdout in the shapes of the HTTP/JSON API (docs/reference/http.md#conventions,
  docs/reference/behaviour.md#server-details; the ``to_json()`` of the client's types,
  :mod:`cronoq.spec.json_shapes`): ids as strings, proto field names — ``submit`` like ``POST /v1/tasks``,
  ``get`` like ``GET /v1/tasks/{ref}``, ``wait`` like ``GET /v1/tasks/{ref}/result``, ``cancel`` like
  ``POST /v1/tasks/{ref}/cancel``, ``watch`` like the ``/v1/events`` data, ``top`` like ``GET /v1/snapshot``
  (``watch --json`` and ``top --json`` write one object a line);
* client subcommands take ``--server`` (env ``CRONOQ_SERVER``, default ``127.0.0.1:7070``),
  ``--token`` (env ``CRONOQ_TOKEN``) and ``--tls``: see :func:`client_options`; they are also
  accepted before the subcommand (``cronoq --token T get 1``; :class:`GroupOptions`);
* machine-readable progress lines go to stderr, prefixed with the command
  (``cronoq worker: registered id=...``, ``cronoq watch: live``);
* heavy imports (grpc, uvicorn, the server) happen inside the command that needs them, so
  ``cronoq --help`` stays fast.

``python -m cronoq.cli`` runs the same CLI (``__main__.py``).
"""

from __future__ import annotations

from cronoq.cli.bench_cmd import bench
from cronoq.cli.common import (
    DURATION,
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_TASK_FAILED,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    app_dir_option,
    cli,
    client_options,
    console,
    err_console,
    fail,
    json_option,
)
from cronoq.cli.live import snapshot_table, top, watch
from cronoq.cli.operations import cancel, pause, replay, resume, signal_cmd
from cronoq.cli.serve_cmd import serve
from cronoq.cli.task_cmds import get, submit, tasks, wait_cmd
from cronoq.cli.worker_cmd import load_app, load_handler, load_object, worker

__all__ = [
    "DURATION",
    "EXIT_CODES",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_TASK_FAILED",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "app_dir_option",
    "bench",
    "cancel",
    "cli",
    "client_options",
    "console",
    "err_console",
    "fail",
    "get",
    "json_option",
    "load_app",
    "load_handler",
    "load_object",
    "main",
    "pause",
    "signal_cmd",
    "replay",
    "resume",
    "serve",
    "snapshot_table",
    "submit",
    "tasks",
    "top",
    "wait_cmd",
    "watch",
    "worker",
]


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``cronoq`` console script."""
    cli.main(args=argv, prog_name="cronoq")
