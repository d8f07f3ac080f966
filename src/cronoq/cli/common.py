"""What every ``cronoq`` subcommand shares: the click group, options, output, exit codes.

:data:`cli` is the click group; the command modules of this package (``serve_cmd``,
``worker_cmd``, ``task_cmds``, ``operations``, ``live``, ``bench_cmd``) register their
subcommands on it with ``@cli.command()`` when :mod:`cronoq.cli` imports them. This module
imports none of them, so any of them can import it first.

* errors: :func:`fail` (``error: <message>`` on stderr, an exit code of :data:`EXIT_CODES`);
  :func:`_run` runs a command's coroutine and turns a :class:`~cronoq.client.ClientError` into
  its message and exit code (:func:`_describe`); ``watch`` and ``top`` stop on SIGINT/SIGTERM
  with exit 0 (:func:`_until_stopped`);
* options: :func:`client_options` (``--server``/``--token``/``--tls``, also accepted on the
  group: :class:`GroupOptions`), :func:`json_option`, :func:`log_level_option`,
  :func:`app_dir_option`, the
  :data:`DURATION` parameter type and the task-reference callbacks;
* process set-up of the long-running commands: :func:`_setup_logging`, :func:`tune_gc`;
* output: :data:`console` / :data:`err_console` (rich), :func:`_dump` (one JSON document on
  stdout), :func:`_note` (a progress line on stderr), the time, duration and status formatters.

Heavy imports (grpc, the client, the server) happen inside the functions that need them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as _dt
import json
import logging
import math
import re
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from cronoq.engine.model import CLASS_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from cronoq.client import Client, Result


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
EXIT_ABANDONED = 6
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "error (server unreachable, rejected, unauthenticated, ...)",
    EXIT_USAGE: "usage error (bad option or argument)",
    EXIT_NOT_FOUND: "not found (unknown task, pool or dependency)",
    EXIT_TIMEOUT: "timed out (wait --timeout, submit --wait-timeout, bench --timeout)",
    EXIT_TASK_FAILED: "the task ended but did not succeed (wait, submit --wait)",
    EXIT_ABANDONED: "worker stopped with tasks still running after --grace (named on stderr; "
    "the server retries them)",
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
    """The client options given on the group (``cronoq --token T get 1``, ``cronoq --json get
    1``): ``ctx.obj``.

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
    return click.option(
        "--json", "as_json", is_flag=True, callback=_group_default, help="Machine-readable JSON output."
    )(f)


def log_level_option(f: F) -> F:
    """``--log-level`` (env ``CRONOQ_LOG_LEVEL``) of the long-running commands (serve, worker)."""
    return click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
        default="info",
        show_default=True,
        envvar="CRONOQ_LOG_LEVEL",
    )(f)


#: generation-0 threshold of the long-running processes (Python's default is 700): a server
#: allocates a few dozen short-lived, mostly acyclic objects per task, and at 700 the collector
#: ran about once per 80 tasks (5.6 us of server CPU per task in one run of bench/server.py's
#: per-task shape; 2.3 us at this threshold, in pauses of about 2.5 ms every thousand tasks)
GC_GEN0_THRESHOLD = 10_000


def tune_gc() -> None:
    """The collector of a long-running process (serve, worker): what start-up loaded (modules,
    classes, the configuration) frozen out of every later collection (``gc.freeze``), and
    generation 0 collected every :data:`GC_GEN0_THRESHOLD` allocations. Library users keep
    their own settings: only these commands call it."""
    import gc

    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


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
@click.option("--json", "as_json", is_flag=True, help="JSON output, for the commands that have --json.")
@click.pass_context
def cli(ctx: click.Context, server: str | None, token: str | None, tls: bool, as_json: bool) -> None:
    """cronoq: an elastic, priority-aware task scheduler (server and tools).

    Start a server with `cronoq serve`, serve a pool with `cronoq worker mymod:handle --pool
    default`, then submit work with `cronoq submit '{"n": 1}' --wait`. Client commands talk to
    --server (env CRONOQ_SERVER, default 127.0.0.1:7070) with --token (env CRONOQ_TOKEN),
    given before or after the subcommand, like --json.
    """
    given: dict[str, Any] = {}
    for name, value in (("server", server), ("token", token), ("tls", tls), ("as_json", as_json)):
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            given[name] = value
    ctx.obj = GroupOptions(given)
