"""The pytest plugin (entry point pytest11 'cronoq'): the cronoq_env fixture."""

from __future__ import annotations

import datetime as dt
from importlib.metadata import entry_points
from typing import Any

import pytest

import cronoq.testing
from cronoq import App, TaskContext

START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
app = App("plugin-test")


@app.task(name="wait_a_day")
async def wait_a_day(ctx: TaskContext, n: int) -> int:
    await ctx.sleep(86_400)
    return n + 1


@pytest.fixture
def cronoq_app() -> App:
    return app


@pytest.fixture
def cronoq_env_options() -> dict[str, Any]:
    return {"start": START}


async def test_the_fixture_runs_the_app_on_virtual_time(cronoq_env: cronoq.testing.Environment) -> None:
    assert await (await wait_a_day.submit(1)) == 2
    assert cronoq_env.now == START + dt.timedelta(days=1)


async def test_each_test_gets_a_fresh_environment(cronoq_env: cronoq.testing.Environment) -> None:
    assert cronoq_env.now == START and cronoq_env.events == []


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    (ep,) = [e for e in entry_points(group="pytest11") if e.name == "cronoq"]
    assert ep.value == "cronoq.testing.plugin"
