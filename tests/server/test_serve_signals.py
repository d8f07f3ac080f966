"""Signals through a real server process (docs/how-to/durable.md#signals): ``Client.signal``
(the ``Tasks/Signal`` RPC), ``POST /v1/signals/{name}`` and ``cronoq signal NAME [JSON]``;
write-once, scoped by tenant, client role, bad input refused."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cronoq.client import Client, ClientError

from .procs import AUTH_TOML, TOKENS, Raw, ServerProc, child_env, code_of, md, pb, start_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(
        tmp_path_factory.mktemp("signals"),
        '[[pools]]\nname = "default"\n\n[[pools]]\nname = "a"\n' + AUTH_TOML,
        name="sig",
    )
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


def http(sp: ServerProc, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{sp.http}{path}", data=data, method="POST")
    req.add_header("content-type", "application/json")
    req.add_header("authorization", f"Bearer {TOKENS[token]}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


async def test_signal_over_grpc_is_write_once_and_scoped_by_tenant(srv: ServerProc) -> None:
    async with Client(srv.grpc, token=TOKENS["client"]) as c:
        first = await c.signal("approve-42", {"ok": True})
        assert (first.name, first.duplicate) == ("approve-42", False)
        assert (await c.signal("approve-42", {"ok": False})).duplicate is True
        with pytest.raises(ValueError):
            await c.signal("")
        with pytest.raises(ClientError) as ei:
            await c.signal("x" * 257)
        assert ei.value.code == "invalid_argument"
    async with Client(srv.grpc, token=TOKENS["client_t1"]) as t1:
        assert (await t1.signal("approve-42")).duplicate is False  # another tenant's name
        assert (await t1.signal("approve-42")).duplicate is True


async def test_signal_needs_the_client_role(srv: ServerProc) -> None:
    raw = Raw(srv.grpc)
    try:
        for role in ("worker", "metrics"):
            call = raw.tasks.Signal(pb.SignalRequest(name="n"), metadata=md(TOKENS[role]))
            assert await code_of(call) == grpc.StatusCode.PERMISSION_DENIED
        bad = pb.SignalRequest(name="n", payload_json="{nope")
        assert (
            await code_of(raw.tasks.Signal(bad, metadata=md(TOKENS["client"])))
            == grpc.StatusCode.INVALID_ARGUMENT
        )
    finally:
        await raw.close()


def test_signal_over_http(srv: ServerProc) -> None:
    assert http(srv, "/v1/signals/deploy-7", "client", {"payload": [1, 2]}) == (
        200,
        {"name": "deploy-7", "duplicate": False},
    )
    assert http(srv, "/v1/signals/deploy-7", "client") == (200, {"name": "deploy-7", "duplicate": True})
    status, body = http(srv, "/v1/signals/" + "x" * 300, "client")
    assert status == 400 and "at most 256" in json.dumps(body), body
    assert http(srv, "/v1/signals/deploy-8", "worker")[0] == 403


async def test_a_signal_name_with_a_slash_over_http_is_the_same_signal(srv: ServerProc) -> None:
    """A name gRPC and ``Client.signal`` accept (``approve/7``) is sent over HTTP URL-encoded
    (``%2F``): it was a 404 "no such route"."""
    status, body = await asyncio.to_thread(http, srv, "/v1/signals/approve%2F7", "client", {"payload": 7})
    assert (status, body) == (200, {"name": "approve/7", "duplicate": False})
    async with Client(srv.grpc, token=TOKENS["client"]) as c:
        assert (await c.signal("approve/7", 8)).duplicate is True


def test_cronoq_signal_cli(srv: ServerProc) -> None:
    env = child_env()
    env.pop("CRONOQ_TLS", None)
    env["CRONOQ_SERVER"] = srv.grpc
    env["CRONOQ_TOKEN"] = TOKENS["client"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "cronoq.cli", "signal", *args]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    r = cli("cli-1", '{"by": "ops"}', "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"name": "cli-1", "duplicate": False}
    r = cli("cli-1")
    assert r.returncode == 0 and "duplicate" in r.stdout
    r = cli("cli-2", "{not json")
    assert r.returncode != 0 and "not JSON" in r.stderr
