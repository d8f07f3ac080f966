"""``cronoq worker``: serve a pool from this process as a remote worker.

``MODULE:FUNCTION`` is loaded with :func:`load_handler` (a sync function runs in a thread, or
with ``--run-in process`` any function in a child process) and
``MODULE:APP`` (a :class:`cronoq.App`) serves every task of the app by name, inside the app's
``@app.lifespan`` (entered once, around the worker's life);
:func:`load_object` and :func:`load_app` are shared with ``submit --app`` and ``tasks``. The
command starts a :class:`cronoq.client.Worker`, waits until it registered (a progress line on
stderr says so) and runs it until SIGINT/SIGTERM, which drains the running leases.

With ``MODULE:APP``, the app's calls (``t.submit(...)`` inside a task) go through the worker's
own server connection: an app bound to nothing else is bound to a
:class:`~cronoq.client.Client` of the same server (``--submit-token``, else ``--token``) while
the worker runs (:func:`_bind_app`).

A handler still running when the grace ends is cancelled and reported to the server as a
retryable failure; a plain function in a thread cannot be interrupted, so then the process
names the tasks it abandons and ends at once (exit code ``EXIT_ABANDONED``) rather than wait for
threads that may never return (:func:`_exit_abandoning`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # pragma: no cover
    from cronoq.client import Lease, Worker
    from cronoq.tasks.app import App


from cronoq.cli.common import (
    DURATION,
    EPILOG,
    EXIT_ABANDONED,
    _describe,
    _key_values,
    _need_client,
    _note,
    _setup_logging,
    app_dir_option,
    cli,
    client_options,
    fail,
    log_level_option,
    tune_gc,
)

Handler = Callable[["Lease"], Awaitable[object]]


def load_object(ref: str, app_dir: str | None = ".", what: str = "MODULE:FUNCTION") -> Any:
    """The object ``MODULE:ATTR`` (ATTR may be dotted) names.

    ``app_dir`` is put first on ``sys.path`` (default: the working directory, as for
    ``python -m``). Raises ``click.BadParameter`` for a malformed reference or a missing
    module/attribute.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter(f"expected {what}, got {ref!r}", param_hint=what)
    if app_dir is not None:
        path = os.path.abspath(app_dir)
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise click.BadParameter(
                f"no module named {module_name!r} (looked in {app_dir or 'sys.path'}; see --app-dir)",
                param_hint=what,
            ) from None
        raise
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise click.BadParameter(
                f"module {module_name!r} has no attribute {attr!r}", param_hint=what
            ) from None
    return obj


def load_app(ref: str, app_dir: str | None = ".") -> App:
    """``MODULE:APP`` → the :class:`cronoq.App` it names (``click.BadParameter`` otherwise)."""
    from cronoq.tasks.app import App

    obj = load_object(ref, app_dir, "MODULE:APP")
    if not isinstance(obj, App):
        raise click.BadParameter(
            f"{ref} is not a cronoq.App (got {type(obj).__name__})", param_hint="MODULE:APP"
        )
    return obj


def load_handler(ref: str, app_dir: str | None = ".", run_in: str | None = None) -> Handler:
    """``MODULE:FUNCTION`` (FUNCTION may be dotted) → an async handler taking the lease;
    ``MODULE:APP`` (a :class:`cronoq.App`) → the app's handler, dispatching by task name.

    ``app_dir`` is put first on ``sys.path`` (default: the working directory, as for
    ``python -m``). A sync function runs in a thread (``asyncio.to_thread``) so it never
    blocks heartbeats; note that a thread cannot be interrupted when the lease is aborted.
    ``run_in`` (``--run-in``): ``"process"`` runs the function in a child process
    (docs/how-to/processes.md); ``"loop"``/``"thread"`` insist on an async/plain function.
    Raises ``click.BadParameter`` for a malformed reference or a missing module/function.
    """
    from cronoq.runtime.processes import check_run_in, lease_handler
    from cronoq.tasks.app import App

    obj = load_object(ref, app_dir)
    if isinstance(obj, App):
        if run_in is not None:
            raise click.BadParameter(
                "--run-in applies to a MODULE:FUNCTION handler; an app's tasks say where they run"
                " with @app.task(run_in=...)",
                param_hint="--run-in",
            )
        return obj.handler()
    if not callable(obj):
        raise click.BadParameter(f"{ref} is not callable", param_hint="MODULE:FUNCTION")
    fn = obj
    try:
        where = check_run_in(fn, run_in, ref)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--run-in") from None
    if where == "process":
        process_handler: Handler = lease_handler(fn)
        return process_handler
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        handler: Handler = fn
        return handler

    async def run_sync(lease: Lease) -> object:
        result = await asyncio.to_thread(fn, lease)
        if inspect.isawaitable(result):
            result = await result
        return result

    run_sync.__name__ = getattr(fn, "__name__", "handler")
    return run_sync


def lifespan_of(handler: object) -> contextlib.AbstractAsyncContextManager[Any]:
    """The app's ``@app.lifespan`` when ``handler`` serves a :class:`cronoq.App` (entered
    around the worker's life), else a no-op context."""
    lifespan = getattr(handler, "lifespan", None)
    running = getattr(lifespan, "running", None)
    if callable(running):
        cm: contextlib.AbstractAsyncContextManager[Any] = running()
        return cm
    return contextlib.nullcontext()


async def _bind_app(app: App | None, server: str, token: str | None, tls: bool) -> Any:
    """Bind ``app`` to a new Client of ``server`` unless it already has somewhere to send its
    calls; the Client, to close at the end (None: nothing was bound)."""
    if app is None:
        return None
    from cronoq.client import Client
    from cronoq.errors import SchedulerError

    try:
        app.target()
        return None  # (bound by its module, or running its own scheduler)
    except SchedulerError:
        pass
    client = Client(server, token=token, tls=tls)
    app.bind(client)
    return client


def _exit_abandoning(leases: list[Lease], grace: float) -> None:
    """Name the tasks cut short at the grace and end the process now: their handlers were
    cancelled and reported (the server retries them), but a plain function's thread runs on,
    and an interpreter exit would wait for it forever."""
    shown = ", ".join(
        f"{lease.task_id} ({lease.kind}{f' key={lease.key}' if lease.key else ''})" for lease in leases[:20]
    )
    more = f" and {len(leases) - 20} more" if len(leases) > 20 else ""
    _note(
        f"cronoq worker: stopped after the grace ({grace:g}s), abandoning {len(leases)} running "
        f"task(s): {shown}{more}"
    )
    logging.shutdown()
    sys.stdout.flush()
    os._exit(EXIT_ABANDONED)


async def _serve(
    w: Worker, pool: str, grace: float, app: App | None, client: tuple[str, str | None, bool]
) -> None:
    """Run ``w`` until SIGTERM/SIGINT drained it (see the module docstring); ``app`` is bound
    to a Client of ``client`` (server, token, tls) meanwhile unless it is bound already."""
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    def on_signal(sig: signal.Signals) -> None:
        if not stopping:
            _note(f"cronoq worker: {sig.name} received, draining (grace {grace:g}s)")
            stopping.append(loop.create_task(w.stop(grace)))

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal, sig)
    run_task: asyncio.Task[None] = loop.create_task(w.run())

    async def announce() -> None:
        wid = await w.wait_registered()
        _note(f"cronoq worker: registered id={wid} pool={pool} slots={w.granted_slots} server={w.target}")

    ann = loop.create_task(announce())
    bound = await _bind_app(app, *client)
    try:
        await run_task
    finally:
        ann.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ann
        for t in stopping:
            await t
        if bound is not None:
            assert app is not None
            app.bind(None)
            await bound.close()
    if w.abandoned:
        _exit_abandoning(w.abandoned, grace)
    _note("cronoq worker: stopped")


@cli.command(epilog=EPILOG)
@click.argument("handler_ref", metavar="MODULE:FUNCTION|MODULE:APP")
@click.option("--pool", "-p", required=True, help="Pool to serve.")
@click.option(
    "--slots",
    "-n",
    type=click.IntRange(1, 2**32 - 1),
    default=1,
    show_default=True,
    help="Concurrent tasks requested (the server may grant fewer).",
)
@client_options
@click.option(
    "--label",
    "labels",
    multiple=True,
    callback=_key_values,
    metavar="KEY=VALUE",
    help="Worker label (repeatable): joins a labelled worker group.",
)
@click.option("--name", default="", help="Worker name shown by the server (default: host:pid).")
@app_dir_option()
@click.option(
    "--submit-token",
    envvar="CRONOQ_SUBMIT_TOKEN",
    default=None,
    help="MODULE:APP: the token of the app's own calls (a task submitting tasks; a worker "
    "token may not submit; default --token; env CRONOQ_SUBMIT_TOKEN).",
)
@click.option(
    "--grace",
    type=DURATION,
    default=10.0,
    show_default=True,
    help="On SIGTERM/SIGINT: how long running tasks may finish before they are cut short.",
)
@click.option(
    "--run-in",
    type=click.Choice(["loop", "thread", "process"]),
    default=None,
    help="Where a MODULE:FUNCTION handler runs: the event loop (async def), a thread (plain def)"
    " or a child process with a hard time limit (default: by the function's kind).",
)
@click.option(
    "--max-tasks-per-child",
    type=click.IntRange(1),
    default=None,
    help="With process tasks: replace a child process after this many tasks.",
)
@click.option(
    "--max-memory-per-child",
    default=None,
    metavar="SIZE",
    help="With process tasks: replace a child whose RSS after a task exceeds SIZE (bytes or e.g. 512MiB).",
)
@click.option(
    "--kill-grace",
    type=DURATION,
    default=5.0,
    show_default=True,
    help="With process tasks: seconds between SIGTERM and SIGKILL of a child cut short.",
)
@log_level_option
def worker(
    handler_ref: str,
    pool: str,
    slots: int,
    server: str,
    token: str | None,
    tls: bool,
    labels: dict[str, str],
    name: str,
    app_dir: str,
    submit_token: str | None,
    grace: float,
    run_in: str | None,
    max_tasks_per_child: int | None,
    max_memory_per_child: str | None,
    kill_grace: float,
    log_level: str,
) -> None:
    """Serve POOL with a Python function: `cronoq worker mymodule:handle --pool default`,
    or with every task of a cronoq.App: `cronoq worker shop.tasks:app --pool default` (each
    lease runs the task named by its kind; the worker registers the app's task names and is
    given only those; a task may submit tasks: the app is bound to this server unless its
    module bound it).

    The function takes the lease (`lease.json()`, `lease.payload`, `lease.attempt`,
    `lease.tags`, ...) and returns the output (None, bytes, str or anything JSON). It may be
    `async def` or a plain function (run in a thread). Raise `cronoq.Retryable` /
    `cronoq.Permanent` to steer retries, `cronoq.client.Reject` to hand the task back. The
    worker reconnects when the server goes away; SIGTERM/SIGINT drain it gracefully (no new
    tasks, running ones get --grace) and it exits 0; tasks still running after the grace are
    cut short (the server retries them), named on stderr, and it exits 6 at once (a plain
    function stuck in its thread cannot stop the process).

    On stderr: `cronoq worker: registered id=ID pool=POOL slots=GRANTED server=ADDR` once
    registered, `cronoq worker: stopped` at the end.
    """
    _need_client()
    handler = load_handler(handler_ref, app_dir, run_in)
    from cronoq.tasks.app import App

    served = load_object(handler_ref, app_dir)  # (imported already)
    served_app = served if isinstance(served, App) else None
    _setup_logging(log_level)
    from cronoq.client import ClientError, Worker
    from cronoq.runtime.processes import Processes

    try:
        processes = Processes(max_tasks_per_child, max_memory_per_child, kill_grace)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--max-memory-per-child") from None

    worker_name = name or f"{socket.gethostname()}:{os.getpid()}"
    try:
        w = Worker(
            server,
            pool,
            handler,
            slots=slots,
            token=token,
            name=worker_name,
            labels=labels,
            grace=grace,
            tls=tls,
            processes=processes,
        )
    except ValueError as e:
        raise click.UsageError(str(e)) from None

    async def with_lifespan() -> None:
        async with lifespan_of(handler):  # the app's @app.lifespan, once for this process
            await _serve(w, pool, grace, served_app, (server, submit_token or token, tls))

    try:
        tune_gc()
        asyncio.run(with_lifespan())
    except ClientError as e:
        fail(*_describe(e, server))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled in main()
        pass
