"""Defect: slowloris without a token.

4,000 half-open HTTP connections (a partial request head, then silence) were held for ever; at
the descriptor limit both listeners stopped answering, workers included.  Now each listener
caps its connections (``limits.max_connections``) and gives a request head, or a gRPC
connection's handshake, ``limits.header_timeout_s`` to arrive.

Two probes per listener:

* the cap (a server whose head timeout is long enough to hold connections): with one
  keep-alive client connected, fill the rest of the cap with half-open connections; every
  connection beyond it is refused at once (closed by the server well inside a second) while the
  first ones stay open, and the admitted client is still served quickly while they are held;
* the head timeout: more half-open connections than the cap all end within the deadline, and
  the server answers again right after.
"""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator

import grpc
import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc
from server.procs import ServerProc

from .conftest import running
from .probes import HealthSampler

CAP = 40
HEAD_TIMEOUT = 1.0
LIMITS = f"[limits]\nmax_connections = {CAP}\nheader_timeout_s = {HEAD_TIMEOUT}\n"
#: the cap probe's server: connections are held well past the probe's duration
HOLD_TIMEOUT = 30.0
#: how soon a connection beyond the cap must be closed by the server
REFUSED_WITHIN = 1.0
HTTP_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
GRPC_HEAD = b"PRI * HTTP/2.0\r\n"  # a partial HTTP/2 preface, then silence


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    with running(tmp_path_factory, LIMITS + '[[pools]]\nname = "default"\n', "slowloris") as sp:
        yield sp


@pytest.fixture(scope="module")
def holding_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    limits = f"[limits]\nmax_connections = {CAP}\nheader_timeout_s = {HOLD_TIMEOUT}\n"
    with running(tmp_path_factory, limits + '[[pools]]\nname = "default"\n', "holding") as sp:
        yield sp


def _open(addr: str, n: int, head: bytes) -> list[socket.socket]:
    host, _, port = addr.rpartition(":")
    out = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=5)
        if head:
            s.sendall(head)
        out.append(s)
    return out


def _closed_by_server(s: socket.socket, within: float) -> bool:
    """Whether the server closes ``s`` within ``within`` seconds (reads until EOF or timeout)."""
    s.settimeout(within)
    end = time.monotonic() + within
    try:
        while time.monotonic() < end:
            data = s.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except OSError:
        return True  # reset
    return False


def _still_open(s: socket.socket) -> bool:
    """Whether ``s`` is open and silent (a non-blocking read finds no EOF, no reset)."""
    s.setblocking(False)
    try:
        return bool(s.recv(1, socket.MSG_PEEK))  # data: open (not expected from a held socket)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def _probe_cap(addr: str, head: bytes, served: object) -> None:
    """Hold the cap, less the admitted client ``served()`` (a callable timing one call on its
    own connection), with half-open connections; the excess is refused at once."""
    assert callable(served)
    first = served()  # admitted: its connection is one of the CAP
    held = _open(addr, CAP - 1, head)
    try:
        assert served() < 1.0, "the admitted client is not served while the cap is held"
        excess = _open(addr, CAP, head)
        try:
            t0 = time.monotonic()
            refused = [_closed_by_server(s, REFUSED_WITHIN) for s in excess]
            took = time.monotonic() - t0
        finally:
            for s in excess:
                s.close()
        assert all(refused), f"{refused.count(False)} of {CAP} connections beyond the cap were kept"
        assert took < REFUSED_WITHIN * 3, f"refusing {CAP} connections took {took:.2f} s"
        open_now = [_still_open(s) for s in held]
        assert all(open_now), f"{open_now.count(False)} of the first {CAP - 1} connections were closed"
        samples = [served() for _ in range(5)]
        assert max(samples) < 1.0, samples
    finally:
        for s in held:
            s.close()
    assert first < 5.0


def test_http_connections_beyond_the_cap_are_refused_at_once(holding_server: ServerProc) -> None:
    host, _, port = holding_server.http.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)  # keep-alive: one connection

    def healthz() -> float:
        t0 = time.perf_counter()
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
        return time.perf_counter() - t0

    try:
        _probe_cap(holding_server.http, HTTP_HEAD, healthz)
    finally:
        conn.close()


def test_grpc_connections_beyond_the_cap_are_refused_at_once(holding_server: ServerProc) -> None:
    channel = grpc.insecure_channel(holding_server.grpc, options=[("grpc.use_local_subchannel_pool", 1)])
    stub = pb_grpc.TasksStub(channel)

    def get() -> float:
        t0 = time.perf_counter()
        with pytest.raises(grpc.RpcError) as err:
            stub.Get(pb.GetRequest(task=pb.TaskRef(key="nope")), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND, err.value
        return time.perf_counter() - t0

    try:
        _probe_cap(holding_server.grpc, GRPC_HEAD, get)
    finally:
        channel.close()


def _probe(addr: str, head: bytes) -> None:
    socks = _open(addr, CAP * 3, head)
    try:
        t0 = time.monotonic()
        closed = [_closed_by_server(s, HEAD_TIMEOUT * 4 + 2) for s in socks]
        took = time.monotonic() - t0
        assert all(closed), f"{closed.count(False)} of {len(socks)} half-open connections still open"
        assert took < HEAD_TIMEOUT * 4 + 5, took
    finally:
        for s in socks:
            s.close()


def test_http_half_open_connections_are_capped_and_timed_out(server: ServerProc) -> None:
    _probe(server.http, HTTP_HEAD)
    with HealthSampler(server.http, limit=5.0) as health:
        time.sleep(0.3)
    assert health.samples and health.worst < 1.0, health.samples


def test_idle_http_connections_without_a_byte_are_timed_out(server: ServerProc) -> None:
    _probe(server.http, b"")


def test_grpc_half_open_connections_are_timed_out(server: ServerProc) -> None:
    _probe(server.grpc, GRPC_HEAD)
