"""Fixtures of the ``cronoq serve`` tests: real server processes (see ``procs.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from cronoq.client import Client

from .procs import Raw, ServerProc, start_server

#: the pools and resources of the shared API server (module scope)
API_TOML = """
[[pools]]
name = "default"
max = 4
retry = {max_attempts = 3, initial_backoff_s = 0.1, max_backoff_s = 0.5}

[[pools]]
name = "idle"

[[pools]]
name = "small"
max = 2
max_pending = 2

[[pools]]
name = "reject"
max_pending = 1
overflow = "reject"

[[pools]]
name = "resv"
max = 2
reservable_fraction = 0.5

[[pools]]
name = "await"
await_unknown_dependencies_s = 30

[[pools]]
name = "work"
max = 8
retry = {max_attempts = 3, initial_backoff_s = 0.1, max_backoff_s = 0.5}

[[pools]]
name = "leased"
lease_ttl_s = 1.0
retry = {max_attempts = 3, initial_backoff_s = 0.1, max_backoff_s = 0.5}

[[pools]]
name = "nack"
retry = {max_attempts = 2, initial_backoff_s = 0.1, max_backoff_s = 0.5}

[[pools]]
name = "drain"

[[pools]]
name = "floor"
min = 2

[[resources]]
name = "sem"
kind = "semaphore"
permits = 2
"""


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("api"), API_TOML, name="api")
    try:
        yield sp
    finally:
        code = sp.terminate()
        assert code == 0, sp.log()


@pytest.fixture
async def client(api_server: ServerProc) -> AsyncIterator[Client]:
    async with Client(api_server.grpc) as c:
        yield c


@pytest.fixture
async def raw(api_server: ServerProc) -> AsyncIterator[Raw]:
    r = Raw(api_server.grpc)
    try:
        yield r
    finally:
        await r.close()
