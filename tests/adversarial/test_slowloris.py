"""Defect: slowloris without a token.

4,000 half-open HTTP connections (a partial request head, then silence) were held for ever; at
the descriptor limit both listeners stopped answering, workers included.  Now each listener
caps its connections (``limits.max_connections``) and gives a request head, or a gRPC
connection's handshake, ``limits.header_timeout_s`` to arrive.  The probe opens more
half-open connections than the cap on both ports and checks that the excess is closed at
once, the rest within the deadline, and that the server answers again right after.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from server.procs import ServerProc

from .conftest import running
from .probes import HealthSampler

CAP = 40
HEAD_TIMEOUT = 1.0
LIMITS = f"[limits]\nmax_connections = {CAP}\nheader_timeout_s = {HEAD_TIMEOUT}\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    with running(tmp_path_factory, LIMITS + '[[pools]]\nname = "default"\n', "slowloris") as sp:
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
    _probe(server.http, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    with HealthSampler(server.http, limit=5.0) as health:
        time.sleep(0.3)
    assert health.samples and health.worst < 1.0, health.samples


def test_idle_http_connections_without_a_byte_are_timed_out(server: ServerProc) -> None:
    _probe(server.http, b"")


def test_grpc_half_open_connections_are_timed_out(server: ServerProc) -> None:
    _probe(server.grpc, b"PRI * HTTP/2.0\r\n")  # a partial HTTP/2 preface, then silence
