"""``cronoq serve`` as a process: the CLI, SIGTERM (Shutdown to workers, grace, exit 0, nothing
lost), restart on the same SQLite file, and a standby taking over
(docs/reference/behaviour.md#server-start-up, docs/reference/behaviour.md#high-availability,
docs/reference/behaviour.md#server-details)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from cronoq.client import Client, ClientError, Worker

from .procs import Raw, RawWorker, make_certs, pb, start_server, tls_toml

POOL_TOML = """
[[pools]]
name = "default"
retry = {max_attempts = 5, initial_backoff_s = 0.1, max_backoff_s = 0.5}
"""

PROTO = Path(__file__).parents[2] / "src" / "cronoq" / "proto" / "cronoq" / "v1" / "cronoq.proto"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    e.pop("CRONOQ_CONFIG", None)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "cronoq.cli", *args], capture_output=True, text=True, timeout=60, env=e
    )


# ---------------------------------------------------------------------------------------------
# CLI


def test_check_and_print_proto(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[[pools]]\nname = "p1"\n')
    r = cli("serve", "--config", str(good), "--check")
    assert r.returncode == 0 and "p1" in r.stdout
    r = cli("serve", "--check", env={"CRONOQ_CONFIG": str(good)})
    assert r.returncode == 0 and "p1" in r.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[pools]]\nname = "p1"\nmax = 0\nbogus = 1\n')
    r = cli("serve", "--config", str(bad), "--check")
    assert r.returncode == 1
    assert "pools[0].max" in r.stderr and "bogus" in r.stderr
    r = cli("serve", "--config", str(tmp_path / "missing.toml"), "--check")
    assert r.returncode == 1 and "not found" in r.stderr
    beyond = tmp_path / "beyond.toml"
    beyond.write_text('[server]\ngrpc_addr = "0.0.0.0:7070"\n')
    assert cli("serve", "--config", str(beyond), "--check").returncode == 1
    assert cli("serve", "--config", str(beyond), "--check", "--insecure-no-auth").returncode == 0
    r = cli("serve", "--print-proto")
    assert r.returncode == 0 and r.stdout == PROTO.read_text(encoding="utf-8")


def test_an_address_in_use_says_what_to_do(tmp_path: Path) -> None:
    """A second ``cronoq serve`` on the defaults is a newcomer's first server error: the message
    names the address and the [server] key that moves it, for gRPC and for HTTP."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        store = f'[store]\nkind = "sqlite"\npath = "{tmp_path / "x.db"}"\n'
        for key, server in [
            ("grpc_addr", f'grpc_addr = "{busy}"\nhttp_addr = "127.0.0.1:0"'),
            ("http_addr", f'grpc_addr = "127.0.0.1:0"\nhttp_addr = "{busy}"'),
        ]:
            cfg = tmp_path / f"{key}.toml"
            cfg.write_text(f"[server]\n{server}\n{store}")
            r = cli("serve", "--config", str(cfg))
            assert r.returncode == 1, r.stderr
            last = r.stderr.strip().splitlines()[-1]
            assert last.startswith(f"error: cannot listen on '{busy}'"), r.stderr
            assert last.endswith(
                f"(another cronoq serve, or another program, listening there? stop it, or set [server] {key})"
            ), r.stderr


def test_an_address_not_of_this_host_is_not_taken_for_one_in_use(tmp_path: Path) -> None:
    """gRPC's bind error names no cause: an address this host does not have (192.0.2.1, a
    documentation address) was answered "another cronoq serve ... listening there?", sending
    the newcomer to look for a process that does not exist.  The message says what the OS
    said instead, as the HTTP listener's does."""
    cfg = tmp_path / "far.toml"
    store = f'[store]\nkind = "sqlite"\npath = "{tmp_path / "x.db"}"\n'
    cfg.write_text(f'[server]\ngrpc_addr = "192.0.2.1:0"\nhttp_addr = "127.0.0.1:0"\n{store}')
    r = cli("serve", "--config", str(cfg), "--insecure-no-auth")
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot listen on '192.0.2.1:0' (gRPC): "), r.stderr
    assert "another cronoq serve" not in last and "ssign" in last, last  # (EADDRNOTAVAIL's words)


# ---------------------------------------------------------------------------------------------
# SIGTERM


async def test_sigterm_shutdown_nothing_lost_and_restart(tmp_path: Path) -> None:
    sp = start_server(tmp_path, POOL_TOML, name="life", grace=10)
    raw = Raw(sp.grpc)
    try:
        w = RawWorker(raw)
        assert (await w.read()).WhichOneof("msg") == "registered"
        async with Client(sp.grpc) as c:
            first = await c.submit(b"first", key="first")
            lease = (await w.read()).lease
            assert lease.task_id == first.id
            queued = [await c.submit(f"q{i}".encode(), key=f"q{i}") for i in range(3)]
            sp.proc.send_signal(15)
            msg = await w.read()
            assert msg.WhichOneof("msg") == "shutdown" and not msg.shutdown.not_leader
            # new calls are refused while the server drains
            with pytest.raises(ClientError) as ei:
                await c.submit(b"late")
            assert ei.value.code == "unavailable"
            # the running attempt may still report within the grace
            w.send(complete=pb.Complete(lease=lease.lease, output=b"ok"))
            loop = asyncio.get_running_loop()
            t0 = time.monotonic()
            code = await loop.run_in_executor(None, sp.proc.wait, 30)
            assert code == 0, sp.log()
            assert time.monotonic() - t0 < 8  # did not sit out the whole grace
            assert "cronoq serve: stopped" in sp.log()
    finally:
        await raw.close()
        sp.kill()

    # restart on the same SQLite file: everything acknowledged is still there
    sp2 = start_server(tmp_path, POOL_TOML, name="life", grace=10)
    try:
        async with Client(sp2.grpc) as c:
            info = await c.get("first")
            assert info.id == first.id and info.status == "succeeded"
            res = await c.wait("first", timeout=5)
            assert res.output == b"ok"
            for q in queued:
                assert (await c.get(q.id)).status == "ready"

            async def handle(lease):  # type: ignore[no-untyped-def]
                return lease.payload

            async with Worker(sp2.grpc, "default", handle, slots=3):
                for i, q in enumerate(queued):
                    r = await c.wait(q.id, timeout=20)
                    assert r.status == "succeeded" and r.output == f"q{i}".encode()
            new = await c.submit(b"new")
            assert new.id >> 48 > first.id >> 48  # a new epoch
    finally:
        assert sp2.terminate() == 0, sp2.log()


async def test_attempt_cut_short_by_shutdown_counts(tmp_path: Path) -> None:
    sp = start_server(tmp_path, POOL_TOML, name="cut", grace=0.5)
    raw = Raw(sp.grpc)
    try:
        w = RawWorker(raw)
        await w.read()
        async with Client(sp.grpc) as c:
            sub = await c.submit(b"x")
            assert (await w.read()).lease.attempt == 1
        code = sp.terminate(30)  # the worker never reports: the grace runs out
        assert code == 0, sp.log()
    finally:
        await raw.close()
        sp.kill()
    sp2 = start_server(tmp_path, POOL_TOML, name="cut", grace=0.5)
    try:
        attempts: list[int] = []

        async def handle(lease):  # type: ignore[no-untyped-def]
            attempts.append(lease.attempt)
            return b"done"

        async with Client(sp2.grpc) as c, Worker(sp2.grpc, "default", handle):
            res = await c.wait(sub.id, timeout=20)
            assert res.status == "succeeded" and attempts == [2]
    finally:
        assert sp2.terminate() == 0, sp2.log()


async def test_standby_takes_over_when_leader_stops(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    leader = start_server(tmp_path, POOL_TOML, name="leader", db_path=db)
    standby = start_server(tmp_path, POOL_TOML, name="standby", db_path=db, wait_leading=False)
    try:
        async with Client(leader.grpc) as lc, Client(standby.grpc) as sc:
            sub = await lc.submit(b"x", key="ha")
            with pytest.raises(ClientError) as ei:
                await sc.get(sub.id)
            assert ei.value.code == "unavailable"
            assert leader.terminate() == 0
            deadline = time.monotonic() + 30
            while "cronoq serve: leading" not in standby.log():
                assert time.monotonic() < deadline, standby.log()
                await asyncio.sleep(0.1)
            assert (await sc.get("ha")).id == sub.id
        async with Client([leader.grpc, standby.grpc]) as both:
            assert (await both.get(sub.id)).status == "ready"
    finally:
        leader.kill()
        assert standby.terminate() == 0, standby.log()


async def test_calls_in_flight_when_the_leader_is_killed_fail_as_unavailable(tmp_path: Path) -> None:
    """SIGKILL of the server under concurrent calls: each caller gets its retryable
    ``unavailable``, never a ``CancelledError`` (the Client replaces a channel that cannot
    connect; closing it at once cancelled the other calls still on it)."""
    sp = start_server(tmp_path, POOL_TOML)
    try:
        async with Client(sp.grpc) as client:
            tid = (await client.submit(b"")).id  # (no worker: it never ends)
            for _ in range(20):  # (the kill, then calls to the dead address)
                waits = [asyncio.ensure_future(client.wait(tid, timeout=30)) for _ in range(16)]
                await asyncio.sleep(0)  # (every Wait is sent)
                if sp.proc.poll() is None:
                    sp.proc.kill()
                got = await asyncio.gather(*waits, return_exceptions=True)
                assert all(isinstance(e, ClientError) and e.code == "unavailable" for e in got), got
    finally:
        sp.kill()


def _http_get(addr: str, path: str, token: str | None = None) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"http://{addr}{path}")
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


async def test_http_and_metrics_listeners(tmp_path: Path) -> None:
    sp = start_server(tmp_path, POOL_TOML, name="http", server_extra='metrics_addr = "127.0.0.1:0"')
    try:
        assert sp.http != "-" and sp.extra["metrics"] != "-"
        loop = asyncio.get_running_loop()
        for path in ("/healthz", "/readyz"):
            status, _ = await loop.run_in_executor(None, _http_get, sp.http, path)
            assert status == 200, path
        async with Client(sp.grpc) as c:
            sub = await c.submit(b"x")
        status, data = await loop.run_in_executor(None, _http_get, sp.http, f"/v1/tasks/{sub.id}")
        assert status == 200 and str(sub.id).encode() in data
        status, data = await loop.run_in_executor(None, _http_get, sp.extra["metrics"], "/metrics")
        assert status == 200 and b"cronoq_pool_capacity" in data
    finally:
        assert sp.terminate() == 0, sp.log()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make certificates")
async def test_mutual_tls(tmp_path: Path) -> None:
    make_certs(tmp_path, {"client": "IP:127.0.0.1,DNS:localhost"})
    tls = tls_toml(tmp_path)
    sp = start_server(tmp_path, tls + POOL_TOML, name="tls")
    try:
        ca = (tmp_path / "ca.pem").read_bytes()
        good = grpc.ssl_channel_credentials(
            root_certificates=ca,
            private_key=(tmp_path / "client.key").read_bytes(),
            certificate_chain=(tmp_path / "client.pem").read_bytes(),
        )
        async with Client(sp.grpc, credentials=good) as c:
            sub = await c.submit(b"x")
            assert (await c.get(sub.id)).status == "ready"
        # no client certificate → the handshake fails
        async with Client(sp.grpc, credentials=grpc.ssl_channel_credentials(root_certificates=ca)) as c:
            with pytest.raises(ClientError) as ei:
                await c.get(sub.id, call_timeout=5)
            assert ei.value.code in ("unavailable", "deadline_exceeded")
        # plaintext → refused
        async with Client(sp.grpc) as c:
            with pytest.raises(ClientError):
                await c.get(sub.id, call_timeout=5)
    finally:
        assert sp.terminate() == 0, sp.log()
