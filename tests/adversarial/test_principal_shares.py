"""Defect (issue 35, defect 7): the budgets were global, not per principal.

One tenant's 1,024 long ``Wait`` calls locked every other tenant out of submitting (gRPC and
HTTP); one token could hold every ``/v1/events`` stream; one client holding thousands of sockets
kept most new connections out.  Now each caller has a share of each budget
(``max_requests_per_principal``, ``max_streams_per_principal``, ``max_connections_per_address``;
cronoq.server.principal_shares).  The probes fill one tenant's share with held calls and check
that its next call is refused at once while another tenant is served, and hold one address's
connections while another address connects.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest

from server.procs import AUTH_TOML, TOKENS, Raw, ServerProc, md, pb

from .conftest import POOLS, running

SHARE = 4
REFUSED = f"too many concurrent requests for this token (limits.max_requests_per_principal {SHARE})"
STREAMS = 2
PER_ADDRESS = 24
LIMITS = (
    "[limits]\nmax_concurrent_requests = 64\nmax_concurrent_streams = 64\n"
    f"max_requests_per_principal = {SHARE}\nmax_streams_per_principal = {STREAMS}\n"
    f"max_connections_per_address = {PER_ADDRESS}\nheader_timeout_s = 30\n"
)
T1, T2 = TOKENS["client_t1"], TOKENS["client_t2"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    with running(tmp_path_factory, LIMITS + POOLS + AUTH_TOML, "shares") as sp:
        yield sp


async def _refused_once_full(call: object, attempts: int = 250) -> grpc.aio.AioRpcError:
    """Call ``call()`` until the server refuses it (the held calls are still arriving)."""
    for _ in range(attempts):
        try:
            await call()  # type: ignore[operator]
        except grpc.aio.AioRpcError as e:
            return e
        await asyncio.sleep(0.02)
    raise AssertionError("never refused: the share was not enforced")


async def test_one_tenants_long_waits_leave_the_others_room_grpc(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    waits: list[grpc.aio.UnaryUnaryCall] = []  # type: ignore[type-arg]
    try:
        spec = pb.TaskSpec(pool="default", start_in_s=3600)
        sub = await raw.tasks.Submit(pb.SubmitRequest(task=spec), metadata=md(T1))
        ref = pb.TaskRef(id=sub.id)
        waits = [
            raw.tasks.Wait(pb.WaitRequest(task=ref, timeout_s=60), metadata=md(T1)) for _ in range(SHARE)
        ]
        e = await _refused_once_full(
            lambda: raw.tasks.Get(pb.GetRequest(task=ref), metadata=md(T1), timeout=10)
        )
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert e.details() == REFUSED
        # the other tenant submits as usual, many at once
        subs = await asyncio.gather(
            *(
                raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="default")), metadata=md(T2))
                for _ in range(SHARE)
            )
        )
        assert all(s.id > 0 for s in subs)
        assert not any(c.done() for c in waits)  # the held calls were never disturbed
    finally:
        for c in waits:
            c.cancel()
        await raw.close()


async def test_one_tenants_long_waits_leave_the_others_room_http(server: ServerProc) -> None:
    async with httpx.AsyncClient(base_url=f"http://{server.http}", timeout=60) as c:
        t1 = {"authorization": f"Bearer {T1}"}
        r = await c.post("/v1/tasks", json={"start_in_s": 3600}, headers=t1)
        tid = r.json()["id"]
        held = [
            asyncio.ensure_future(c.get(f"/v1/tasks/{tid}/result?timeout=60", headers=t1))
            for _ in range(SHARE)
        ]
        try:
            for _ in range(250):  # until the long polls hold the share
                r = await c.get(f"/v1/tasks/{tid}", headers=t1)
                if r.status_code != 200:
                    break
                await asyncio.sleep(0.02)
            assert r.status_code == 429, r.text
            assert r.json() == {
                "error": REFUSED,
                "code": "resource_exhausted",
            }
            t2 = {"authorization": f"Bearer {T2}"}
            answers = await asyncio.gather(*(c.post("/v1/tasks", json={}, headers=t2) for _ in range(SHARE)))
            assert [a.status_code for a in answers] == [200] * SHARE
            assert not any(h.done() for h in held)
        finally:
            for h in held:
                h.cancel()


async def test_one_token_cannot_hold_every_event_stream(server: ServerProc) -> None:
    async with httpx.AsyncClient(base_url=f"http://{server.http}", timeout=30) as c:
        t1 = {"authorization": f"Bearer {T1}"}
        streams = []
        try:
            for _ in range(STREAMS):
                cm = c.stream("GET", "/v1/events", headers=t1)
                resp = await cm.__aenter__()
                assert resp.status_code == 200
                streams.append(cm)
            r = await c.get("/v1/events", headers=t1)
            assert r.status_code == 429 and "max_streams_per_principal 2" in r.json()["error"], r.text
            async with c.stream("GET", "/v1/events", headers={"authorization": f"Bearer {T2}"}) as other:
                assert other.status_code == 200
        finally:
            for cm in streams:
                await cm.__aexit__(None, None, None)


def _connect(addr: str, source: str) -> socket.socket:
    host, _, port = addr.rpartition(":")
    s = socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # a head, never finished
    return s


def _closed_within(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_one_address_cannot_hold_every_connection(server: ServerProc) -> None:
    held = [_connect(server.http, "127.0.0.2") for _ in range(PER_ADDRESS)]
    try:
        extra = _connect(server.http, "127.0.0.2")
        t0 = time.monotonic()
        assert _closed_within(extra, 2.0), "a connection beyond the address's share was kept"
        assert time.monotonic() - t0 < 1.0
        extra.close()
        assert not any(_closed_within(s, 0.05) for s in held)  # the first ones stay open
        host, _, port = server.http.rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)  # from 127.0.0.1
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        for s in held:
            s.close()
