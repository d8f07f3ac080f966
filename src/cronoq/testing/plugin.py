"""The pytest plugin of cronoq's test kit (entry point ``pytest11``: ``cronoq``).

Fixtures:

* ``cronoq_app`` — override it to return what the environment runs: an :class:`~cronoq.App`
  or a list of pools (the default fails, saying so);
* ``cronoq_env_options`` — override it to return keyword arguments for
  :func:`cronoq.testing.run` (``start``, ``autojump``, ``store``, ...; default none);
* ``cronoq_env`` — an :class:`~cronoq.testing.Environment` running ``cronoq_app`` on virtual
  time for the test (an async fixture: needs pytest-asyncio).

Loading the plugin imports nothing but cronoq's light top level and pytest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cronoq.testing.env import Environment, run

__all__ = ["cronoq_app", "cronoq_env", "cronoq_env_options"]


@pytest.fixture
def cronoq_app() -> Any:
    """What ``cronoq_env`` runs: override this fixture to return your App (or pools)."""
    pytest.fail(
        "the cronoq_env fixture needs a `cronoq_app` fixture that returns your cronoq.App (or a list of "
        "cronoq.Pool): define one in your conftest.py"
    )


@pytest.fixture
def cronoq_env_options() -> dict[str, Any]:
    """Keyword arguments for cronoq.testing.run (override to set start=, autojump=, ...)."""
    return {}


async def _environment(cronoq_app: Any, cronoq_env_options: dict[str, Any]) -> AsyncIterator[Environment]:
    """The real Scheduler of ``cronoq_app`` on virtual time, with autojump."""
    async with run(cronoq_app, **cronoq_env_options) as env:
        yield env


def _needs_pytest_asyncio() -> Any:  # pragma: no cover - exercised only without pytest-asyncio
    pytest.fail("the cronoq_env fixture is async: install pytest-asyncio (or use cronoq.testing.run)")


cronoq_env: Any
try:
    import pytest_asyncio
except ImportError:  # pragma: no cover
    cronoq_env = pytest.fixture(name="cronoq_env")(_needs_pytest_asyncio)
else:
    cronoq_env = pytest_asyncio.fixture(name="cronoq_env")(_environment)
