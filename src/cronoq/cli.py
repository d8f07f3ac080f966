"""The ``cronoq`` command line (SPEC §19).

Structure: :data:`cli` is a click group; each subcommand is a function decorated with
``@cli.command()``. Shared conventions for subcommands (to keep when adding ``worker``,
``submit``, ``get``, ``wait``, ``cancel``, ``watch``, ``top``, ``bench``):

* errors are reported with :func:`fail` (a clear one-line message on stderr, non-zero exit);
  usage errors are click's (exit 2);
* human output goes through :data:`console` (rich); ``--json`` output is plain ``json.dumps``
  on stdout;
* client subcommands take ``--server`` (default ``127.0.0.1:7070``) and ``--token`` (env
  ``CRONOQ_TOKEN``): see :func:`client_options`;
* heavy imports (grpc, uvicorn, the server) happen inside the command that needs them, so
  ``cronoq --help`` stays fast.

``python -m cronoq.cli`` runs the same CLI.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

__all__ = ["cli", "client_options", "console", "err_console", "fail", "main"]

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_SERVER = "127.0.0.1:7070"


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def client_options(f: F) -> F:
    """``--server`` and ``--token`` (env ``CRONOQ_TOKEN``) for subcommands that call a server."""
    f = click.option(
        "--token",
        envvar="CRONOQ_TOKEN",
        default=None,
        help="Bearer token (env CRONOQ_TOKEN).",
    )(f)
    f = click.option(
        "--server",
        "server",
        default=DEFAULT_SERVER,
        show_default=True,
        envvar="CRONOQ_SERVER",
        help="gRPC address of the server.",
    )(f)
    return f


def _setup_logging(level: str) -> None:
    from rich.logging import RichHandler

    handler = RichHandler(console=err_console, show_path=False, rich_tracebacks=False)
    logging.basicConfig(level=level.upper(), format="%(message)s", datefmt="[%X]", handlers=[handler])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cronoq", prog_name="cronoq")
def cli() -> None:
    """cronoq: an elastic, priority-aware task scheduler (server and tools)."""


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
    config_path: str | None, insecure_no_auth: bool, check: bool, print_proto: bool, log_level: str
) -> None:
    """Run the cronoq server (gRPC + HTTP/JSON API)."""
    if print_proto:
        click.echo(_proto_text(), nl=False)
        return
    from cronoq.server.config import ConfigError, load_config

    try:
        config = load_config(config_path, insecure_no_auth=insecure_no_auth)
    except ConfigError as e:
        fail(f"invalid configuration: {e}")
    if check:
        where = config.source or "defaults"
        click.echo(
            f"configuration OK ({where}): pools {', '.join(config.pool_names)}; "
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


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``cronoq`` console script."""
    cli.main(args=argv, prog_name="cronoq")


if __name__ == "__main__":
    main()
