"""Fixtures of the framework integration tests: one real ``cronoq serve`` for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.server.procs import ServerProc, start_server

#: the pools of the shared server: one per integration (each served by its own worker)
SERVER_TOML = """
[[pools]]
name = "default"
max = 4
retry = {max_attempts = 1}

[[pools]]
name = "web"
max = 4
retry = {max_attempts = 1}

[[pools]]
name = "flask"
max = 4
retry = {max_attempts = 1}

[[pools]]
name = "django"
max = 4
retry = {max_attempts = 2, initial_backoff_s = 0.05, max_backoff_s = 0.1}

[[pools]]
name = "django_low"
max = 2
retry = {max_attempts = 1}
"""


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("contrib"), SERVER_TOML, name="contrib")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()
