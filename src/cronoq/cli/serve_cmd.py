"""``cronoq serve``: run the server (docs/reference/behaviour.md#server).

The command loads and validates the configuration (``--check`` stops there), then imports the
server (grpc, uvicorn: only now, so the other commands stay light) and runs it until SIGINT or
SIGTERM; ``--print-proto`` prints the bundled gRPC contract. The module is named ``serve_cmd``
so that ``cronoq.cli.serve`` stays the click command the package re-exports.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # pragma: no cover
    pass


from cronoq.cli.common import _setup_logging, cli, fail, log_level_option, tune_gc


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
@log_level_option
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
        tune_gc()
        asyncio.run(run_server(config))
    except (ServeError, SchedulerError) as e:
        fail(str(e))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled inside serve()
        pass
