"""The ``cronoq`` command line (docs/reference/behaviour.md#cli).

Structure: :data:`cli` is a click group; each subcommand is a function decorated with
``@cli.command()``:

* ``serve`` — the server (docs/reference/behaviour.md#server);
* ``worker`` — serve a pool with a Python function (``MODULE:FUNCTION``) or every task of an
  app (``MODULE:APP``, a :class:`cronoq.App`) as a remote worker;
* ``submit``, ``get``, ``wait``, ``cancel`` — one task (``submit --task NAME`` a named one);
* ``pause``, ``resume`` — a pool; ``replay`` — one task, or (as ``cancel``) every task matching
  filter options, after a confirmation prompt (docs/how-to/operations.md);
* ``tasks`` — list an app's tasks (``--apply-recurring``: create its schedules on the server);
* ``watch`` — live tail of status events; ``top`` — live per-pool table;
* ``bench`` — a throughput benchmark (no-op tasks, an in-process remote worker).

Shared conventions:

* errors are reported with :func:`fail` (a clear one-line message on stderr, non-zero exit);
  usage errors are click's (exit 2); the exit codes are :data:`EXIT_CODES` (``cronoq --help``);
* human output goes through :data:`console` (rich); ``--json`` output is plain ``json.dumps``
  on stdout in the shapes of the HTTP/JSON API (docs/reference/http.md#conventions,
  docs/reference/behaviour.md#server-details; the ``to_json()`` of the client's types,
  :mod:`cronoq.client.json_shapes`): ids as strings, proto field names — ``submit`` like ``POST /v1/tasks``,
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

``python -m cronoq.cli`` runs the same CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as _dt
import importlib
import inspect
import json
import logging
import math
import mimetypes
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from importlib import resources
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from cronoq.engine.model import CLASS_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from rich.table import Table

    from cronoq.app import App
    from cronoq.client import Client, Event, Lease, Result, Snapshot

__all__ = ["EXIT_CODES", "cli", "client_options", "console", "err_console", "fail", "main"]

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

DEFAULT_SERVER = "127.0.0.1:7070"

#: Exit codes of the client subcommands.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_TIMEOUT = 4
EXIT_TASK_FAILED = 5
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "error (server unreachable, rejected, unauthenticated, ...)",
    EXIT_USAGE: "usage error (bad option or argument)",
    EXIT_NOT_FOUND: "not found (unknown task, pool or dependency)",
    EXIT_TIMEOUT: "timed out (wait --timeout, submit --wait-timeout, bench --timeout)",
    EXIT_TASK_FAILED: "the task ended but did not succeed (wait, submit --wait)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C) while waiting",
}

#: Deadline of one unary call (not of waits), so an unreachable host never hangs a command.
CALL_TIMEOUT = 30.0

_STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "dead_lettered": "bold red",
    "cancelled": "yellow",
    "skipped": "yellow",
    "missed": "yellow",
    "shed": "magenta",
    "retrying": "dark_orange",
    "running": "cyan",
    "ready": "blue",
    "scheduled": "blue",
    "blocked": "dim",
}

_PRIORITIES = CLASS_NAMES


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _note(line: str) -> None:
    """A progress line on stderr (flushed at once: tests and scripts read it)."""
    click.echo(line, err=True)
    sys.stderr.flush()


@dataclasses.dataclass
class GroupOptions:
    """The client options given on the group (``cronoq --token T get 1``): ``ctx.obj``.

    Only what was given on the command line is kept; a subcommand's own ``--server`` /
    ``--token`` / ``--tls`` wins over these, and these win over the environment.
    """

    given: dict[str, Any] = dataclasses.field(default_factory=dict)


def _group_default(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A subcommand's client option: its own command-line value, else the group's, else
    the environment variable or the default (see :class:`GroupOptions`)."""
    name = param.name
    if name is None or ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
        return value
    group = ctx.find_object(GroupOptions)
    if group is not None and name in group.given:
        return group.given[name]
    return value


def client_options(f: F) -> F:
    """``--server`` (env ``CRONOQ_SERVER``), ``--token`` (env ``CRONOQ_TOKEN``) and ``--tls``
    for subcommands that call a server (also accepted before the subcommand: :func:`cli`)."""
    f = click.option(
        "--tls",
        is_flag=True,
        envvar="CRONOQ_TLS",
        callback=_group_default,
        help="Connect with TLS (system root certificates; env CRONOQ_TLS).",
    )(f)
    f = click.option(
        "--token",
        envvar="CRONOQ_TOKEN",
        default=None,
        callback=_group_default,
        help="Bearer token (env CRONOQ_TOKEN).",
    )(f)
    f = click.option(
        "--server",
        "server",
        default=DEFAULT_SERVER,
        show_default=True,
        envvar="CRONOQ_SERVER",
        callback=_group_default,
        help="gRPC address of the server (env CRONOQ_SERVER).",
    )(f)
    return f


def app_dir_option(
    help: str = "Directory put first on sys.path before importing MODULE.",
) -> Callable[[F], F]:
    """``--app-dir``: where ``MODULE`` of a ``MODULE:ATTR`` reference is imported from."""
    return click.option(
        "--app-dir", default=".", show_default=True, type=click.Path(file_okay=False), help=help
    )


def json_option(f: F) -> F:
    """``--json``: machine-readable output on stdout."""
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")(f)


def _setup_logging(level: str) -> None:
    from rich.logging import RichHandler

    handler = RichHandler(console=err_console, show_path=False, rich_tracebacks=False)
    logging.basicConfig(level=level.upper(), format="%(message)s", datefmt="[%X]", handlers=[handler])


# ---------------------------------------------------------------------------------------------
# parameter types and parsing helpers


_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class DurationType(click.ParamType):
    """Seconds: ``1.5``, ``250ms``, ``30s``, ``5m``, ``2h``, ``1d``."""

    name = "duration"
    _RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            m = self._RE.match(str(value))
            if m is None:
                self.fail(f"{value!r} is not a duration (e.g. 1.5, 250ms, 30s, 5m, 2h)", param, ctx)
            seconds = float(m.group(1)) * _UNITS[m.group(2)]
        if not math.isfinite(seconds) or seconds < 0:
            self.fail(f"{value!r} is not a non-negative duration", param, ctx)
        return seconds


DURATION = DurationType()


def _key_values(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", ctx=ctx, param=param)
        out[k] = v
    return out


def _ref(value: str) -> int | str:
    """A task reference on the command line: decimal digits are an id, anything else a key."""
    return int(value) if value.isdigit() else value


def _ref_arg(ctx: click.Context, param: click.Parameter, value: str) -> int | str:
    if not value:
        raise click.BadParameter("a task id or key is required", ctx=ctx, param=param)
    ref = _ref(value)
    if isinstance(ref, int) and not 1 <= ref < 2**64:
        raise click.BadParameter(f"task id out of range: {value}", ctx=ctx, param=param)
    return ref


def _fmt_time(unix_s: float | None, *, date: bool = True) -> str:
    if unix_s is None:
        return "-"
    t = _dt.datetime.fromtimestamp(unix_s).astimezone()
    return t.isoformat(timespec="milliseconds") if date else t.strftime("%H:%M:%S.%f")[:-3]


def _fmt_seconds(s: float) -> str:
    if s < 1:
        return f"{s * 1000:.0f}ms"
    if s < 120:
        return f"{s:.1f}s"
    return f"{s / 60:.1f}m"


def _status_text(status: str, width: int = 0) -> str:
    """``status`` with its colour as rich markup, padded to ``width`` visible characters."""
    text = f"{status:<{width}}"
    style = _STATUS_STYLE.get(status)
    return f"[{style}]{text}[/{style}]" if style else text


def _dump(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, sort_keys=False))
    sys.stdout.flush()


def _print_result(r: Result) -> None:
    line = f"task {r.id} {_status_text(r.status)}"
    if r.message:
        line += f": {escape(r.message)}"
    console.print(line, highlight=False)
    if not r.output_available:
        return
    value = r.value()
    if value is None:
        console.print("[dim]output: (empty)[/dim]")
    elif isinstance(value, bytes):
        console.print(f"[dim]output: {len(value)} bytes (binary)[/dim]")
    elif isinstance(value, str):
        console.print(value, markup=False, highlight=False)
    else:
        console.print_json(data=value)


async def _until_stopped(main: Coroutine[Any, Any, T]) -> T | None:
    """Run a live command (``watch``, ``top``) until it ends or SIGINT/SIGTERM stops it (None).

    The loop's own handlers, not Python's: a shell runs a background job with SIGINT ignored and
    Python keeps an inherited SIG_IGN, so Ctrl-C sent to such a watch would be lost; SIGTERM (a
    supervisor stopping it) ends it as cleanly as Ctrl-C does.
    """
    loop = asyncio.get_running_loop()
    task = loop.create_task(main)
    stopped: list[int] = []

    def stop(sig: int) -> None:
        stopped.append(sig)
        task.cancel()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop, sig)
            installed.append(sig)
    try:
        return await task
    except asyncio.CancelledError:
        if stopped:
            return None
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def _run(main: Coroutine[Any, Any, T], server: str = "", *, interrupt_ok: bool = False) -> T:
    """Run a command's coroutine; client errors become a message and an exit code.

    ``interrupt_ok``: a live command, which Ctrl-C or SIGTERM ends normally (exit 0).
    """
    from cronoq.client import ClientError, WaitTimeout

    try:
        if interrupt_ok:
            return asyncio.run(_until_stopped(main))  # type: ignore[return-value]
        return asyncio.run(main)
    except KeyboardInterrupt:
        sys.exit(EXIT_OK if interrupt_ok else EXIT_INTERRUPTED)
    except WaitTimeout as e:
        fail(f"timed out: {e.message or 'wait timed out'}", EXIT_TIMEOUT)
    except ClientError as e:
        fail(*_describe(e, server))


def _describe(e: Any, server: str) -> tuple[str, int]:
    """(message, exit code) for a :class:`~cronoq.client.ClientError`."""
    code, msg = e.code, e.message
    if code == "not_found":
        return (msg or "not found"), EXIT_NOT_FOUND
    if code == "deadline_exceeded":
        return f"timed out ({msg or 'deadline exceeded'})", EXIT_TIMEOUT
    if code == "unavailable":
        return f"cannot reach a leading server at {server}: {msg or 'unavailable'}", EXIT_ERROR
    if code == "unauthenticated":
        return f"not authenticated ({msg or 'missing or bad token'}); use --token or CRONOQ_TOKEN", EXIT_ERROR
    if code == "permission_denied":
        return f"permission denied: {msg or 'the token may not do this'}", EXIT_ERROR
    return str(e), EXIT_ERROR


def _need_client() -> None:
    try:
        import grpc  # noqa: F401
    except ModuleNotFoundError:
        fail("this command needs the client extra: pip install 'cronoq[client]'")


def _client(server: str, token: str | None, tls: bool) -> Client:
    from cronoq.client import Client

    try:
        return Client(server, token=token, tls=tls)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--server' / '--token'") from None


def _check_spec(payload: object, fields: dict[str, Any]) -> None:
    """Validate task fields up front: a bad value is a usage error (exit 2)."""
    from cronoq.client import build_spec

    try:
        build_spec(payload, **fields)
    except (ValueError, TypeError) as e:
        raise click.UsageError(str(e)) from None


EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES.items())


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.version_option(package_name="cronoq", prog_name="cronoq")
@click.option(
    "--server",
    "server",
    default=None,
    metavar="ADDR",
    help="gRPC address of the server, for the client commands (a subcommand's --server wins).",
)
@click.option(
    "--token", default=None, help="Bearer token for the client commands (a subcommand's --token wins)."
)
@click.option("--tls", is_flag=True, help="Connect with TLS, for the client commands.")
@click.pass_context
def cli(ctx: click.Context, server: str | None, token: str | None, tls: bool) -> None:
    """cronoq: an elastic, priority-aware task scheduler (server and tools).

    Start a server with `cronoq serve`, serve a pool with `cronoq worker mymod:handle --pool
    default`, then submit work with `cronoq submit '{"n": 1}' --wait`. Client commands talk to
    --server (env CRONOQ_SERVER, default 127.0.0.1:7070) with --token (env CRONOQ_TOKEN),
    given before or after the subcommand.
    """
    given: dict[str, Any] = {}
    for name, value in (("server", server), ("token", token), ("tls", tls)):
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            given[name] = value
    ctx.obj = GroupOptions(given)


def _proto_text() -> str:
    return (
        resources.files("cronoq.proto").joinpath("cronoq", "v1", "cronoq.proto").read_text(encoding="utf-8")
    )


@cli.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    envvar="CRONOQ_CONFIG",
    help="TOML configuration file (env CRONOQ_CONFIG); without one: the defaults.",
)
@click.option("--insecure-no-auth", is_flag=True, help="Allow listening beyond loopback without tokens.")
@click.option(
    "--shard",
    default=None,
    help="This server's shard (a [[shards]] name; wins over server.shard and $CRONOQ_SHARD).",
)
@click.option("--check", is_flag=True, help="Validate the configuration and exit (0 = valid).")
@click.option("--print-proto", is_flag=True, help="Print the bundled gRPC contract (cronoq.proto) and exit.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    envvar="CRONOQ_LOG_LEVEL",
)
def serve(
    config_path: str | None,
    insecure_no_auth: bool,
    shard: str | None,
    check: bool,
    print_proto: bool,
    log_level: str,
) -> None:
    """Run the cronoq server (gRPC + HTTP/JSON API)."""
    if print_proto:
        click.echo(_proto_text(), nl=False)
        return
    from cronoq.server.config import ConfigError, load_config

    try:
        config = load_config(config_path, insecure_no_auth=insecure_no_auth, shard=shard)
    except ConfigError as e:
        fail(f"invalid configuration: {e}")
    if check:
        where = config.source or "defaults"
        own = config.own_shard
        shard = f"shard {own.name} (number {own.number}) of {len(config.shards)}; " if own else ""
        click.echo(
            f"configuration OK ({where}): {shard}pools {', '.join(config.pool_names)}; "
            f"grpc {config.server.grpc_addr}, http {config.server.http_addr}; "
            f"store {config.store.kind}; auth {'on' if config.auth_enabled else 'off'}"
        )
        return
    try:
        import grpc  # noqa: F401
    except ModuleNotFoundError:
        fail("cronoq serve needs the server extra: pip install 'cronoq[server]'")
    _setup_logging(log_level)
    from cronoq.errors import SchedulerError
    from cronoq.server.run import ServeError
    from cronoq.server.run import serve as run_server

    try:
        asyncio.run(run_server(config))
    except (ServeError, SchedulerError) as e:
        fail(str(e))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled inside serve()
        pass


# ---------------------------------------------------------------------------------------------
# worker

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
    from cronoq.app import App

    obj = load_object(ref, app_dir, "MODULE:APP")
    if not isinstance(obj, App):
        raise click.BadParameter(
            f"{ref} is not a cronoq.App (got {type(obj).__name__})", param_hint="MODULE:APP"
        )
    return obj


def load_handler(ref: str, app_dir: str | None = ".") -> Handler:
    """``MODULE:FUNCTION`` (FUNCTION may be dotted) → an async handler taking the lease;
    ``MODULE:APP`` (a :class:`cronoq.App`) → the app's handler, dispatching by task name.

    ``app_dir`` is put first on ``sys.path`` (default: the working directory, as for
    ``python -m``). A sync function runs in a thread (``asyncio.to_thread``) so it never
    blocks heartbeats; note that a thread cannot be interrupted when the lease is aborted.
    Raises ``click.BadParameter`` for a malformed reference or a missing module/function.
    """
    from cronoq.app import App

    obj = load_object(ref, app_dir)
    if isinstance(obj, App):
        return obj.handler()
    if not callable(obj):
        raise click.BadParameter(f"{ref} is not callable", param_hint="MODULE:FUNCTION")
    fn = obj
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


async def _start_worker(w: Any, timeout: float | None) -> asyncio.Task[None]:
    """Start ``w.run()`` and wait until it registered; a fatal session error is raised."""
    run_task: asyncio.Task[None] = asyncio.create_task(w.run())
    reg = asyncio.create_task(w.wait_registered())
    try:
        done, _ = await asyncio.wait({run_task, reg}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not reg.done():
            reg.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reg
    if run_task in done:
        run_task.result()  # raises the session error
        raise RuntimeError("the worker stopped before it registered")
    if not done:
        raise TimeoutError
    return run_task


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
    "--grace",
    type=DURATION,
    default=10.0,
    show_default=True,
    help="On SIGTERM/SIGINT: how long running tasks may finish before they are cut short.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    envvar="CRONOQ_LOG_LEVEL",
)
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
    grace: float,
    log_level: str,
) -> None:
    """Serve POOL with a Python function: `cronoq worker mymodule:handle --pool default`,
    or with every task of a cronoq.App: `cronoq worker shop.tasks:app --pool default` (each
    lease runs the task named by its kind; an unknown name fails permanently).

    The function takes the lease (`lease.json()`, `lease.payload`, `lease.attempt`,
    `lease.tags`, ...) and returns the output (None, bytes, str or anything JSON). It may be
    `async def` or a plain function (run in a thread). Raise `cronoq.Retryable` /
    `cronoq.Permanent` to steer retries, `cronoq.client.Reject` to hand the task back. The
    worker reconnects when the server goes away; SIGTERM/SIGINT drain it gracefully (no new
    tasks, running ones get --grace) and it exits 0.

    On stderr: `cronoq worker: registered id=ID pool=POOL slots=GRANTED server=ADDR` once
    registered, `cronoq worker: stopped` at the end.
    """
    _need_client()
    handler = load_handler(handler_ref, app_dir)
    _setup_logging(log_level)
    from cronoq.client import ClientError, Worker

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
        )
    except ValueError as e:
        raise click.UsageError(str(e)) from None

    async def main() -> None:
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
        try:
            await run_task
        finally:
            ann.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ann
            for t in stopping:
                await t
        _note("cronoq worker: stopped")

    try:
        asyncio.run(main())
    except ClientError as e:
        fail(*_describe(e, server))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled in main()
        pass


# ---------------------------------------------------------------------------------------------
# submit, get, wait, cancel


def _json_option(name: str, text: str | None, kind: type, default: Any) -> Any:
    if text is None:
        return default
    try:
        value = json.loads(text)
    except ValueError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint=f"'{name}'") from None
    if not isinstance(value, kind):
        what = "array" if kind is list else "object"
        raise click.BadParameter(f"must be a JSON {what} (got {text!r})", param_hint=f"'{name}'")
    return value


def _named_task_call(
    name: str, args_text: str | None, kwargs_text: str | None, app_ref: str | None, app_dir: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``{"args", "kwargs"}`` payload of ``submit --task`` and (with ``--app``) the task's
    own fields as defaults; a call that does not fit the app's task is a usage error."""
    args = _json_option("--args", args_text, list, [])
    kwargs = _json_option("--kwargs", kwargs_text, dict, {})
    if app_ref is None:
        return {"args": args, "kwargs": kwargs}, {}
    app = load_app(app_ref, app_dir)
    defn = app.tasks.get(name)
    if defn is None:
        known = ", ".join(sorted(app.tasks)) or "none"
        raise click.BadParameter(
            f"app '{app.name}' has no task '{name}' (tasks: {known})", param_hint="'--task'"
        )
    try:
        payload = defn.binding.encode(tuple(args), kwargs)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    defaults = {k: v for k, v in defn.fields.items() if k != "kind"}
    return payload, defaults


def _read_payload_file(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise click.BadParameter(
            f"cannot read {path!r}: {e.strerror or e}", param_hint="'--payload-file'"
        ) from None


@cli.command(epilog=EPILOG)
@click.argument("payload", required=False)
@client_options
@click.option("--pool", "-p", default=None, help="Target pool (server default: 'default').")
@click.option(
    "--priority",
    type=click.Choice(_PRIORITIES, case_sensitive=False),
    default=None,
    help="Priority class (default normal).",
)
@click.option("--key", default=None, help="Idempotency key: a second submit with it is a duplicate.")
@click.option("--kind", default=None, help="Task kind (for metrics and duration estimates).")
@click.option("--deadline-in", type=DURATION, default=None, help="Deadline from now (e.g. 30s).")
@click.option("--start-in", type=DURATION, default=None, help="Fixed start from now (e.g. 5m).")
@click.option("--timeout", type=DURATION, default=None, help="Per-attempt timeout.")
@click.option("--max-attempts", type=click.IntRange(1), default=None, help="Attempts before giving up.")
@click.option(
    "--after",
    "after",
    multiple=True,
    metavar="REF",
    help="Run after this task (id or key) succeeded (repeatable).",
)
@click.option(
    "--tag", "tags", multiple=True, callback=_key_values, metavar="KEY=VALUE", help="Tag (repeatable)."
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    callback=_key_values,
    metavar="KEY=VALUE",
    help="Required worker label (repeatable).",
)
@click.option("--tenant", default=None, help="Tenant (fair share).")
@click.option(
    "--payload-file",
    type=str,
    default=None,
    metavar="FILE",
    help="Send this file's bytes as the payload ('-' = stdin).",
)
@click.option(
    "--content-type",
    default=None,
    help="Content type of the payload (default: guessed; JSON for a PAYLOAD that parses).",
)
@click.option(
    "--task",
    "task_name",
    default=None,
    metavar="NAME",
    help="Submit the named task NAME (a cronoq.App task).",
)
@click.option(
    "--args",
    "task_args",
    default=None,
    metavar="JSON",
    help="With --task: positional arguments, a JSON array.",
)
@click.option(
    "--kwargs",
    "task_kwargs",
    default=None,
    metavar="JSON",
    help="With --task: keyword arguments, a JSON object.",
)
@click.option(
    "--app",
    "app_ref",
    default=None,
    metavar="MODULE:APP",
    help="With --task: check the arguments against the app's task and use its task fields as defaults.",
)
@app_dir_option("With --app: directory put first on sys.path before importing MODULE.")
@click.option("--wait", is_flag=True, help="Wait for the outcome and print it.")
@click.option(
    "--wait-timeout", type=DURATION, default=None, help="With --wait: give up after this long (exit 4)."
)
@json_option
def submit(
    payload: str | None,
    server: str,
    token: str | None,
    tls: bool,
    pool: str | None,
    priority: str | None,
    key: str | None,
    kind: str | None,
    deadline_in: float | None,
    start_in: float | None,
    timeout: float | None,
    max_attempts: int | None,
    after: tuple[str, ...],
    tags: dict[str, str],
    labels: dict[str, str],
    tenant: str | None,
    payload_file: str | None,
    content_type: str | None,
    task_name: str | None,
    task_args: str | None,
    task_kwargs: str | None,
    app_ref: str | None,
    app_dir: str,
    wait: bool,
    wait_timeout: float | None,
    as_json: bool,
) -> None:
    """Submit one task. PAYLOAD is sent as JSON when it parses as JSON, else as text.
    With --task NAME, a named task: the payload is {"args": [...], "kwargs": {...}} from
    --args and --kwargs, and the kind is NAME.

    \b
    cronoq submit '{"image": 42}' --priority high --deadline-in 30s --wait
    cronoq submit --payload-file report.csv --kind report --after ingest-1
    cronoq submit --task shop.resize --args '[42]' --kwargs '{"size": 128}' --wait
    """
    _need_client()
    from cronoq.client import RetryPolicy

    if payload is not None and payload_file is not None:
        raise click.UsageError("give PAYLOAD or --payload-file, not both")
    value: object = None
    if payload_file is not None:
        value = _read_payload_file(payload_file)
        if content_type is None:
            content_type = mimetypes.guess_type(payload_file)[0] if payload_file != "-" else None
    elif payload is not None:
        try:
            value = json.loads(payload)
        except ValueError:
            value = payload
    if wait_timeout is not None and not wait:
        raise click.UsageError("--wait-timeout needs --wait")
    task_defaults: dict[str, Any] = {}
    if task_name is not None:
        if payload is not None or payload_file is not None or kind is not None or content_type is not None:
            raise click.UsageError(
                "--task takes its payload from --args/--kwargs: no PAYLOAD, --payload-file, --kind"
                " or --content-type"
            )
        value, task_defaults = _named_task_call(task_name, task_args, task_kwargs, app_ref, app_dir)
        kind = task_name
    elif task_args is not None or task_kwargs is not None or app_ref is not None:
        raise click.UsageError("--args, --kwargs and --app go with --task NAME")
    fields: dict[str, Any] = {
        "pool": pool,
        "priority": priority.lower() if priority else None,
        "key": key,
        "kind": kind,
        "deadline_in": deadline_in,
        "start_in": start_in,
        "timeout": timeout,
        "after": [_ref(a) for a in after] or None,
        "tags": tags or None,
        "labels": labels or None,
        "tenant": tenant,
        "content_type": content_type,
    }
    if max_attempts is not None:
        fields["retry"] = RetryPolicy(max_attempts=max_attempts)
    fields = {**task_defaults, **{k: v for k, v in fields.items() if v is not None}}
    _check_spec(value, fields)

    async def main() -> int:
        async with _client(server, token, tls) as client:
            sub = await client.submit(value, call_timeout=CALL_TIMEOUT, **fields)
            if not wait:
                if as_json:
                    _dump(sub.to_json())
                else:
                    dup = " (duplicate: a task with this key exists)" if sub.duplicate else ""
                    console.print(f"submitted task {sub.id}{dup}", highlight=False)
                return EXIT_OK
            if not as_json:
                dup = " (duplicate)" if sub.duplicate else ""
                err_console.print(f"submitted task {sub.id}{dup}; waiting...", highlight=False)
            result = await client.wait(sub.id, timeout=wait_timeout)
            if as_json:
                _dump(dataclasses.replace(sub, result=result).to_json())
            else:
                _print_result(result)
            return EXIT_OK if result.ok else EXIT_TASK_FAILED

    sys.exit(_run(main(), server))


@cli.command(epilog=EPILOG)
@click.argument("app_ref", metavar="MODULE:APP")
@app_dir_option()
@click.option(
    "--apply-recurring",
    is_flag=True,
    help="Create (or replace: applying again changes nothing) the app's recurring schedules on the server.",
)
@client_options
@json_option
def tasks(
    app_ref: str,
    app_dir: str,
    apply_recurring: bool,
    server: str,
    token: str | None,
    tls: bool,
    as_json: bool,
) -> None:
    """List the tasks of a cronoq.App: name, kind, pool, arguments, task fields, schedules.

    \b
    cronoq tasks shop.tasks:app
    cronoq tasks shop.tasks:app --apply-recurring --server cronoq:7070
    """
    app = load_app(app_ref, app_dir)
    rows = app.describe()
    if as_json:
        _dump({"app": app.name, "tasks": rows})
    else:
        from rich import box
        from rich.table import Table

        t = Table(title=f"app {app.name}: {len(rows)} tasks", title_justify="left", box=box.SIMPLE_HEAD)
        aliased = any(r["kind"] != r["name"] for r in rows)  # a kind column only when one differs
        for col in ("task", *(("kind",) if aliased else ()), "pool", "arguments", "fields", "recurring"):
            t.add_column(col, overflow="fold", no_wrap=col == "task")
        for r in rows:
            fields = " ".join(f"{k}={v}" for k, v in r["fields"].items())
            recurring = ", ".join(
                f"{x['name']}: {x['cron']}" + (f" ({x['tz']})" if x["tz"] else "") for x in r["recurring"]
            )
            kind = (r["kind"],) if aliased else ()
            cells = (r["name"], *kind, r["pool"] or "(default)", r["signature"], fields, recurring)
            t.add_row(*(escape(c) for c in cells))
        console.print(t)
    if not apply_recurring:
        return
    _need_client()

    async def main() -> int:
        async with _client(server, token, tls) as client:
            names = await app.apply_recurring(client)
        err_console.print(
            f"cronoq tasks: applied {len(names)} recurring schedules: {', '.join(names) or 'none'}"
        )
        return EXIT_OK

    sys.exit(_run(main(), server))


@cli.command(epilog=EPILOG)
@click.argument("ref", metavar="REF", callback=_ref_arg)
@client_options
@json_option
def get(ref: int | str, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    """Show a task: REF is its id (digits) or its key."""
    _need_client()

    async def main() -> None:
        async with _client(server, token, tls) as client:
            info = await client.get(ref, call_timeout=CALL_TIMEOUT)
        if as_json:
            _dump(info.to_json())
            return
        from rich.table import Table

        t = Table(show_header=False, box=None, pad_edge=False)
        t.add_column(style="bold")
        t.add_column()
        rows = [
            ("id", str(info.id)),
            ("status", _status_text(info.status)),
            ("pool", info.pool),
            ("key", info.key or "-"),
            ("kind", info.kind),
            ("priority", info.priority),
            ("attempt", f"{info.attempt} of {info.max_attempts}"),
            ("tenant", info.tenant or "-"),
            ("created", _fmt_time(info.created_at)),
            ("started", _fmt_time(info.started_at)),
            ("finished", _fmt_time(info.finished_at)),
            ("message", info.message or "-"),
            ("output", "available" if info.output_available else "-"),
            *_detail_rows(info),
        ]
        for k, v in rows:
            t.add_row(k, v if k == "status" else escape(v))
        console.print(t, highlight=False)

    _run(main(), server)


def _progress_text(p: Any) -> str:
    """``3 of 10 (30%) - message`` (``3`` without a total), with the attempt that reported it."""
    done = f"{p.done:g}"
    text = done if p.total is None else f"{done} of {p.total:g} ({100 * p.done / p.total:.0f}%)"
    if p.message:
        text += f" - {p.message}"
    return f"{text} (attempt {p.attempt}, {_fmt_time(p.at)})"


def _detail_rows(info: Any) -> list[tuple[str, str]]:
    """The rows of ``cronoq get`` for progress, named-task name, links and attempts
    (docs/how-to/progress.md)."""
    rows: list[tuple[str, str]] = []
    if info.name:
        rows.append(("name", info.name))
    rows.append(("progress", "-" if info.progress is None else _progress_text(info.progress)))
    if info.parents:
        rows.append(("parents", ", ".join(map(str, info.parents))))
    if info.children:
        rows.append(("children", ", ".join(map(str, info.children))))
    for a in info.attempts:
        ended = "running" if a.ended_at is None else _fmt_time(a.ended_at)
        text = f"{a.outcome}: {_fmt_time(a.started_at)} - {ended}"
        if a.worker:
            text += f" on {a.worker}"
        if a.message:
            text += f" ({a.message})"
        rows.append((f"attempt {a.number}", text))
    return rows


@cli.command("wait", epilog=EPILOG)
@click.argument("ref", metavar="REF", callback=_ref_arg)
@client_options
@click.option(
    "--timeout", type=DURATION, default=None, help="Give up after this long (exit 4). Default: no limit."
)
@json_option
def wait_cmd(
    ref: int | str, server: str, token: str | None, tls: bool, timeout: float | None, as_json: bool
) -> None:
    """Wait until a task has finished and print its outcome (exit 0 if it succeeded, 5 if not)."""
    _need_client()

    async def main() -> int:
        async with _client(server, token, tls) as client:
            result = await client.wait(ref, timeout=timeout)
        if as_json:
            _dump(result.to_json())
        else:
            _print_result(result)
        return EXIT_OK if result.ok else EXIT_TASK_FAILED

    sys.exit(_run(main(), server))


# ---------------------------------------------------------------------------------------------
# operations: pause/resume, replay, bulk cancel/replay (docs/how-to/operations.md)


def _since(value: str | None, what: str) -> float | None:
    """A time on the command line: an ISO 8601 / RFC 3339 time (local time when it names no
    offset), a time of day today (``10:00``), or a duration ago (``30m``)."""
    if value is None:
        return None
    text = value.strip()
    if DurationType._RE.match(text):
        return time.time() - DURATION.convert(text, None, None)
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", text)
    try:
        if m is not None:
            h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
            d = _dt.datetime.now().astimezone().replace(hour=h, minute=mi, second=sec, microsecond=0)
        else:
            d = _dt.datetime.fromisoformat(text)
            if d.tzinfo is None:
                d = d.astimezone()
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a time (e.g. 2026-01-31T10:00:00Z, 10:00 or 30m for 30 minutes ago)",
            param_hint=f"'{what}'",
        ) from None
    return d.timestamp()


def bulk_filter(
    pools: tuple[str, ...],
    statuses: tuple[str, ...],
    kinds: tuple[str, ...],
    tags: dict[str, str],
    tenant: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    *,
    finished: bool,
) -> dict[str, Any]:
    """The bulk filter keywords of ``cancel`` / ``replay`` options (``--since`` / ``--until``
    bound the finish time for a replay, the creation time for a cancel)."""
    lo, hi = ("finished_after", "finished_before") if finished else ("created_after", "created_before")
    kw: dict[str, Any] = {
        "pools": list(pools) or None,
        "statuses": list(statuses) or None,
        "kinds": list(kinds) or None,
        "tags": tags or None,
        "tenant": tenant,
        lo: _since(since, "--since"),
        hi: _since(until, "--until"),
        "limit": limit,
    }
    return {k: v for k, v in kw.items() if v is not None}


def _describe_filter(kw: dict[str, Any]) -> str:
    parts = []
    for k, v in kw.items():
        if isinstance(v, list):
            v = ",".join(v)
        elif isinstance(v, dict):
            v = ",".join(f"{a}={b}" for a, b in v.items())
        elif isinstance(v, float):
            v = _fmt_time(v)
        parts.append(f"{k}={v}")
    return " ".join(parts)


def bulk_options(f: F) -> F:
    """The filter options of a bulk ``cancel`` / ``replay``."""
    for opt in reversed(
        [
            click.option("--pool", "pools", multiple=True, help="Only this pool (repeatable)."),
            click.option("--status", "statuses", multiple=True, help="Only this status (repeatable)."),
            click.option("--kind", "kinds", multiple=True, help="Only this kind (repeatable)."),
            click.option(
                "--tag",
                "tags",
                multiple=True,
                callback=_key_values,
                metavar="KEY=VALUE",
                help="Tag equality (repeatable).",
            ),
            click.option("--tenant", default=None, help="Only this tenant's tasks."),
            click.option("--since", default=None, help="From this time (ISO time, 10:00, or 30m ago)."),
            click.option("--until", default=None, help="Up to this time (same forms as --since)."),
            click.option("--limit", type=click.IntRange(1), default=None, help="Act on at most N tasks."),
            click.option("--request-key", default="", help="Idempotency key: a retry with it acts once."),
            click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
        ]
    ):
        f = opt(f)
    return f


def _run_bulk(
    action: str,
    kw: dict[str, Any],
    server: str,
    token: str | None,
    tls: bool,
    yes: bool,
    request_key: str,
    as_json: bool,
    force: bool = False,
) -> None:
    if not kw:
        raise click.UsageError(
            f"{action} needs a task REF or at least one filter option (--pool, --status, ...)"
        )
    if not yes:
        click.confirm(f"{action} every task matching {_describe_filter(kw)}?", abort=True, err=True)

    async def main() -> None:
        async with _client(server, token, tls) as client:
            if action == "replay":
                res = await client.replay_where(
                    force=force, request_key=request_key, call_timeout=CALL_TIMEOUT, **kw
                )
            else:
                res = await client.cancel_where(request_key=request_key, call_timeout=CALL_TIMEOUT, **kw)
        if as_json:
            _dump({"matched": res.matched, "acted": res.acted})
        else:
            verb = "replayed" if action == "replay" else "cancelled"
            console.print(f"{res.matched} tasks matched, {res.acted} {verb}", highlight=False)

    _run(main(), server)


def _opt_ref_arg(ctx: click.Context, param: click.Parameter, value: str | None) -> int | str | None:
    return None if value is None else _ref_arg(ctx, param, value)


@cli.command(epilog=EPILOG)
@click.argument("pool")
@client_options
@json_option
def pause(pool: str, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    """Pause POOL (admin token): it dispatches nothing new until `cronoq resume POOL`; running
    attempts finish, submissions are still accepted."""
    _pause_cmd(pool, True, server, token, tls, as_json)


@cli.command(epilog=EPILOG)
@click.argument("pool")
@client_options
@json_option
def resume(pool: str, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    """Resume a paused POOL (admin token): its backlog dispatches at once."""
    _pause_cmd(pool, False, server, token, tls, as_json)


def _pause_cmd(pool: str, paused: bool, server: str, token: str | None, tls: bool, as_json: bool) -> None:
    _need_client()

    async def main() -> None:
        async with _client(server, token, tls) as client:
            if paused:
                changed = await client.pause(pool, call_timeout=CALL_TIMEOUT)
            else:
                changed = await client.resume(pool, call_timeout=CALL_TIMEOUT)
        state = "paused" if paused else "resumed"
        if as_json:
            _dump({"changed": changed})
        elif changed:
            console.print(f"pool {pool} {state}", highlight=False)
        else:
            console.print(f"pool {pool} was already {'paused' if paused else 'running'}", highlight=False)

    _run(main(), server)


@cli.command(epilog=EPILOG)
@click.argument("ref", metavar="[REF]", required=False, callback=_opt_ref_arg)
@click.option("--force", is_flag=True, help="Also replay succeeded tasks.")
@bulk_options
@client_options
@json_option
def replay(
    ref: int | str | None,
    force: bool,
    pools: tuple[str, ...],
    statuses: tuple[str, ...],
    kinds: tuple[str, ...],
    tags: dict[str, str],
    tenant: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    request_key: str,
    yes: bool,
    server: str,
    token: str | None,
    tls: bool,
    as_json: bool,
) -> None:
    """Replay a finished task that did not succeed (id or key; --force: also a succeeded one)
    as a new task, or, with filter options instead of REF, every matching one
    (`cronoq replay --pool P --status dead_lettered --since 10:00`; asks first unless --yes;
    --since/--until bound the finish time)."""
    _need_client()
    kw = bulk_filter(pools, statuses, kinds, tags, tenant, since, until, limit, finished=True)
    if ref is not None and kw:
        raise click.UsageError("give a task REF or filter options, not both")
    if ref is None:
        _run_bulk("replay", kw, server, token, tls, yes, request_key, as_json, force)
        return

    async def main() -> None:
        async with _client(server, token, tls) as client:
            sub = await client.replay(ref, force=force, call_timeout=CALL_TIMEOUT)
        if as_json:
            _dump(sub.to_json())
        else:
            console.print(f"replayed task {ref} as task {sub.id}", highlight=False)

    _run(main(), server)


@cli.command(epilog=EPILOG)
@click.argument("ref", metavar="[REF]", required=False, callback=_opt_ref_arg)
@bulk_options
@client_options
@json_option
def cancel(
    ref: int | str | None,
    pools: tuple[str, ...],
    statuses: tuple[str, ...],
    kinds: tuple[str, ...],
    tags: dict[str, str],
    tenant: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    request_key: str,
    yes: bool,
    server: str,
    token: str | None,
    tls: bool,
    as_json: bool,
) -> None:
    """Cancel a task (id or key). Exit 0 also when it had already finished (then nothing changes).
    With filter options instead of REF, cancel every matching task that has not finished
    (`cronoq cancel --pool P --status ready`; asks first unless --yes; --since/--until bound
    the creation time)."""
    _need_client()
    kw = bulk_filter(pools, statuses, kinds, tags, tenant, since, until, limit, finished=False)
    if ref is not None and kw:
        raise click.UsageError("give a task REF or filter options, not both")
    if ref is None:
        _run_bulk("cancel", kw, server, token, tls, yes, request_key, as_json)
        return

    async def main() -> None:
        async with _client(server, token, tls) as client:
            cancelled = await client.cancel(ref, call_timeout=CALL_TIMEOUT)
        if as_json:
            _dump({"cancelled": cancelled})
        elif cancelled:
            console.print(f"cancelled task {ref}", highlight=False)
        else:
            console.print(f"task {ref} had already finished: not cancelled", highlight=False)

    _run(main(), server)


# ---------------------------------------------------------------------------------------------
# watch


def _print_event(ev: Event) -> None:
    parts = [
        f"[dim]{_fmt_time(ev.at, date=False)}[/dim]",
        f"{ev.id:>6}",
        escape(ev.pool),
        _status_text(ev.status, 13),
        f"attempt {ev.attempt}",
    ]
    if ev.key:
        parts.insert(3, f"[bold]{escape(ev.key)}[/bold]")
    line = "  ".join(parts)
    if ev.message:
        line += f"  [dim]{escape(ev.message)}[/dim]"
    console.print(line, highlight=False, soft_wrap=True)


@cli.command(epilog=EPILOG)
@client_options
@click.option("--pool", "-p", "pools", multiple=True, help="Only these pools (repeatable).")
@click.option("--all-transitions", is_flag=True, help="Every status change, not only terminal ones.")
@click.option(
    "--id",
    "ids",
    multiple=True,
    type=click.IntRange(1, 2**64 - 1),
    help="Only this task id (repeatable; with --key: either matches).",
)
@click.option("--key", "keys", multiple=True, help="Only this task key (repeatable).")
@click.option("--limit", type=click.IntRange(1), default=None, help="Stop after this many events.")
@click.option("--duration", type=DURATION, default=None, help="Stop after this long.")
@json_option
def watch(
    server: str,
    token: str | None,
    tls: bool,
    pools: tuple[str, ...],
    all_transitions: bool,
    ids: tuple[int, ...],
    keys: tuple[str, ...],
    limit: int | None,
    duration: float | None,
    as_json: bool,
) -> None:
    """Live tail of task status events (terminal ones unless --all-transitions).

    Runs until Ctrl-C, --limit events or --duration. `--json` writes one event per line.
    `cronoq watch: live` goes to stderr once the subscription is live.
    """
    _need_client()

    async def main() -> None:
        async with _client(server, token, tls) as client:
            events = client.watch(
                pools=list(pools), ids=list(ids), keys=list(keys), all_transitions=all_transitions
            )
            seen = 0

            async def tail() -> None:
                nonlocal seen
                async with events:
                    _note("cronoq watch: live")
                    async for ev in events:
                        if as_json:
                            _dump(ev.to_json())
                        else:
                            _print_event(ev)
                            sys.stdout.flush()
                        seen += 1
                        if limit is not None and seen >= limit:
                            return

            if duration is None:
                await tail()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(tail(), duration)

    _run(main(), server, interrupt_ok=True)


# ---------------------------------------------------------------------------------------------
# top


def snapshot_table(snap: Snapshot, *, title: str | None = None, caption: str | None = None) -> Table:
    """The per-pool table of ``cronoq top`` (also used by examples/demo.py): workers
    connected, capacity (granted slots), desired (autoscaler), busy (+held), pending in total
    and by class (critical/high/normal/low), wait p50/p99, utilization, succeeded, failed."""
    from rich import box
    from rich.table import Table

    t = Table(
        title=title,
        caption=caption,
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        padding=0,
        show_edge=False,
    )
    t.add_column("pool", style="bold", no_wrap=True)
    for col in ("workers", "cap", "desired", "busy", "pending"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("c/h/n/l", justify="right", no_wrap=True)
    for col in ("p50", "p99", "util"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("done", justify="right", style="green", no_wrap=True)
    t.add_column("failed", justify="right", style="red", no_wrap=True)
    for p in snap.pools:
        t.add_row(
            escape(p.name) + (" [yellow]paused[/yellow]" if getattr(p, "paused", False) else ""),
            str(p.workers_connected),
            str(p.capacity),
            str(p.desired),
            str(p.busy) + (f"+{p.held}h" if p.held else ""),
            str(p.pending),
            "/".join(str(n) for n in [*p.pending_by_class, 0, 0, 0, 0][:4]),
            _fmt_seconds(p.wait_p50),
            _fmt_seconds(p.wait_p99),
            f"{p.utilization:.0%}",
            str(p.succeeded),
            str(p.failed),
        )
    return t


def _totals_line(snap: Snapshot) -> str:
    tot = ", ".join(f"{k} {v}" for k, v in snap.totals.items() if v)
    # a sharded cluster's snapshot lacks the shards that did not answer (docs/how-to/shards.md)
    down = getattr(snap, "unavailable_shards", None)
    return (
        f"live {snap.live_tasks} · running {snap.running} · pending {snap.pending} · "
        f"workers {snap.workers_connected}"
        + (f" · totals: {tot}" if tot else "")
        + (f"\n[red]unavailable shards: {escape(', '.join(down))}[/red]" if down else "")
    )


@cli.command(epilog=EPILOG)
@client_options
@click.option("--interval", type=DURATION, default=1.0, show_default=True, help="Refresh interval.")
@click.option("--once", is_flag=True, help="Print one frame and exit.")
@json_option
def top(server: str, token: str | None, tls: bool, interval: float, once: bool, as_json: bool) -> None:
    """Live per-pool table: workers, capacity, desired, busy, pending by class, wait p50/p99,
    utilization (refreshed every --interval until Ctrl-C; --once prints one frame).
    `--json` writes one snapshot per line."""
    _need_client()
    if interval <= 0:
        raise click.BadParameter("must be > 0", param_hint="'--interval'")

    async def main() -> None:
        async with _client(server, token, tls) as client:
            snap = await client.snapshot(call_timeout=CALL_TIMEOUT)
            if as_json:
                _dump(snap.to_json())
                while not once:
                    await asyncio.sleep(interval)
                    _dump((await client.snapshot(call_timeout=CALL_TIMEOUT)).to_json())
                return

            def frame(s: Snapshot, note: str = "") -> Table:
                stamp = _dt.datetime.now().strftime("%H:%M:%S")
                caption = _totals_line(s) + (f"\n[red]{note}[/red]" if note else "")
                return snapshot_table(s, title=f"cronoq top · {server} · {stamp}", caption=caption)

            if once:
                console.print(frame(snap), highlight=False)
                return
            from rich.live import Live

            from cronoq.client import ClientError

            with Live(frame(snap), console=console, refresh_per_second=4, auto_refresh=False) as live:
                while True:
                    await asyncio.sleep(interval)
                    try:
                        snap = await client.snapshot(call_timeout=max(interval, 5.0))
                        live.update(frame(snap), refresh=True)
                    except ClientError as e:
                        live.update(frame(snap, f"stale: {e}"), refresh=True)

    _run(main(), server, interrupt_ok=True)


# ---------------------------------------------------------------------------------------------
# bench


@cli.command(epilog=EPILOG)
@client_options
@click.option("--count", "-n", type=click.IntRange(1), default=2000, show_default=True, help="Tasks to run.")
@click.option("--pool", "-p", default="default", show_default=True, help="Pool to run them on.")
@click.option(
    "--slots",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="Slots the benchmark's worker asks for (the pool's max caps the grant).",
)
@click.option(
    "--batch",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="Tasks per SubmitBatch call.",
)
@click.option(
    "--payload-size", type=click.IntRange(0), default=0, show_default=True, help="Payload bytes per task."
)
@click.option(
    "--timeout", type=DURATION, default=300.0, show_default=True, help="Give up after this long (exit 4)."
)
@json_option
def bench(
    server: str,
    token: str | None,
    tls: bool,
    count: int,
    pool: str,
    slots: int,
    batch: int,
    payload_size: int,
    timeout: float,
    as_json: bool,
) -> None:
    """Throughput benchmark: submit --count no-op tasks in batches to a server and run them
    with an in-process remote worker (this process); report tasks/s end to end.

    Other workers of the pool may take some of the tasks; use an idle pool for clean figures.
    """
    _need_client()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cronoq.client import Client, ClientError, Worker, task

    async def noop(lease: Lease) -> None:
        return None

    payload = b"x" * payload_size if payload_size else None

    async def main() -> int:
        client = Client(server, token=token, tls=tls)
        w = Worker(
            server,
            pool,
            noop,
            slots=slots,
            token=token,
            name=f"cronoq-bench:{os.getpid()}",
            tls=tls,
            reconnect=False,
        )
        async with client:
            try:
                run_task = await _start_worker(w, CALL_TIMEOUT)
            except TimeoutError:
                fail(f"the benchmark worker could not register with {server} within {CALL_TIMEOUT:g}s")
            try:
                return await measure(client, w.granted_slots)
            finally:
                await w.stop(grace=1.0)
                with contextlib.suppress(Exception):
                    await run_task

    async def measure(client: Client, granted: int) -> int:
        submitted: set[int] = set()
        finished: dict[int, str] = {}  # terminal events, possibly before their submit returned
        counted = 0
        progress = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=err_console,
            disable=as_json,
        )
        all_done = asyncio.Event()
        t0 = time.perf_counter()
        submit_s = 0.0
        with progress:
            p_sub = progress.add_task("submitted", total=count, rate="")
            p_done = progress.add_task("completed", total=count, rate="")
            async with client.watch(pools=[pool]) as events:

                async def collect() -> None:
                    nonlocal counted
                    async for ev in events:
                        finished[ev.id] = ev.status
                        if ev.id in submitted:
                            counted += 1
                        if counted >= count and len(submitted) == count:
                            all_done.set()
                            return

                collector = asyncio.create_task(collect())
                last = 0.0
                try:
                    left = count
                    while left:
                        n = min(batch, left)
                        subs = await client.submit_batch(
                            [task(payload, pool=pool, kind="bench") for _ in range(n)],
                            call_timeout=CALL_TIMEOUT,
                        )
                        for s in subs:
                            submitted.add(s.id)
                            if s.id in finished:
                                counted += 1
                        left -= n
                        progress.update(p_sub, completed=count - left)
                        now = time.perf_counter()
                        if now - last > 0.1:
                            last = now
                            progress.update(p_done, completed=counted, rate=f"{counted / (now - t0):,.0f}/s")
                    submit_s = time.perf_counter() - t0
                    progress.update(p_sub, rate=f"{count / submit_s:,.0f}/s")
                    if counted >= count:
                        all_done.set()
                    deadline = t0 + timeout
                    while not all_done.is_set():
                        if collector.done():
                            collector.result()
                            raise ClientError("aborted", "the event stream ended before every task finished")
                        if time.perf_counter() > deadline:
                            fail(
                                f"only {counted} of {count} tasks finished within {timeout:g}s", EXIT_TIMEOUT
                            )
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(all_done.wait(), 0.1)
                        now = time.perf_counter()
                        progress.update(p_done, completed=counted, rate=f"{counted / (now - t0):,.0f}/s")
                finally:
                    collector.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await collector
            total_s = time.perf_counter() - t0
            progress.update(p_done, completed=counted, rate=f"{count / total_s:,.0f}/s")
        statuses: dict[str, int] = {}
        for i in submitted:
            st = finished.get(i, "unknown")
            statuses[st] = statuses.get(st, 0) + 1
        report = {
            "tasks": count,
            "pool": pool,
            "worker_slots": granted,
            "batch": batch,
            "payload_bytes": payload_size,
            "submit_seconds": round(submit_s, 6),
            "submit_per_s": round(count / submit_s, 1) if submit_s else None,
            "seconds": round(total_s, 6),
            "tasks_per_s": round(count / total_s, 1),
            "statuses": statuses,
        }
        if as_json:
            _dump(report)
        else:
            from rich.table import Table

            t = Table(show_header=False, box=None, title="cronoq bench", title_justify="left")
            t.add_column(style="bold")
            t.add_column()
            t.add_row("tasks", f"{count:,} on pool {pool!r} ({granted} worker slots, batches of {batch})")
            t.add_row(
                "submitted in", f"{submit_s:.2f}s ({count / submit_s:,.0f} tasks/s)" if submit_s else "-"
            )
            t.add_row("completed in", f"{total_s:.2f}s")
            t.add_row("throughput", f"[bold green]{count / total_s:,.0f} tasks/s[/bold green] end to end")
            t.add_row("outcomes", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
            console.print(t, highlight=False)
        return EXIT_OK if statuses.get("succeeded", 0) == count else EXIT_ERROR

    sys.exit(_run(main(), server))


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``cronoq`` console script."""
    cli.main(args=argv, prog_name="cronoq")

