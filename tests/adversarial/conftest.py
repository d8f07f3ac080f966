"""Fixtures of the adversarial probes: real ``cronoq serve`` processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.procs import ServerProc, start_server


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """A server with no auth on loopback (anyone on the host can reach it) and one pool."""
    sp = start_server(tmp_path_factory.mktemp("adv"), '[[pools]]\nname = "default"\n', name="adv")
    try:
        yield sp
    finally:
        code = sp.terminate()
        assert code == 0, sp.log()
