"""The shard router registers itself with the front ends (docs/how-to/shards.md): the gRPC and
HTTP front ends import nothing of ``cronoq.server.shards`` (no import cycle between them and
the router, which imports them), and a server with shards has the router's layers in place."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "src" / "cronoq" / "server"


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_front_ends_import_nothing_of_the_shards() -> None:
    for name in ("grpc_api.py", "http_api.py"):
        assert not [m for m in _imports(SERVER / name) if m.startswith("cronoq.server.shards")], name


def test_the_router_registers_its_layers() -> None:
    from cronoq.server import grpc_api, http_api
    from cronoq.server.shards import http_routes, router

    assert router.routed in grpc_api.SERVICE_LAYERS
    assert http_routes.sharded_routes in http_api.ROUTE_LAYERS
