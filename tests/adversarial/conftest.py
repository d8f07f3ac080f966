"""Fixtures of the adversarial probes: real ``cronoq serve`` processes on loopback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from server.procs import AUTH_TOML, ServerProc, start_server

#: pools of the servers with tokens (tokens of ``server.procs.AUTH_TOML``: some restricted to "a")
POOLS = '[[pools]]\nname = "default"\n\n[[pools]]\nname = "a"\n\n[[pools]]\nname = "b"\n'


@contextlib.contextmanager
def running(factory: pytest.TempPathFactory, body: str, name: str, **kw: object) -> Iterator[ServerProc]:
    """A server for the duration of the block; it must stop cleanly (exit 0) on SIGTERM."""
    sp = start_server(factory.mktemp(name), body, name=name, **kw)  # type: ignore[arg-type]
    try:
        yield sp
    finally:
        code = sp.terminate()
        assert code == 0, sp.log()


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """A server with no auth on loopback (anyone on the host can reach it) and one pool."""
    with running(tmp_path_factory, '[[pools]]\nname = "default"\n', "adv") as sp:
        yield sp


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """A server with the tokens of ``AUTH_TOML`` and the pools of :data:`POOLS`."""
    with running(tmp_path_factory, POOLS + AUTH_TOML, "auth") as sp:
        yield sp
