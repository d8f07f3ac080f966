"""Checked by mypy (pyproject ``[tool.mypy] files``), never run: named tasks are typed.

``t.submit(...)`` takes the function's parameters (without the TaskContext one) and the handle
resolves to its return type; tests/typechecks/test_typing.py shows that a wrong call fails.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, assert_type

import cronoq
from cronoq import App, TaskContext, TaskHandle
from cronoq.tasks import NamedTask, TaskCall, TaskDefinition

app = App("typing")


@app.task
async def add(x: int, y: int = 1) -> int:
    return x + y


@app.task(name="typing.greet", priority="high")
def greet(ctx: TaskContext, who: str) -> str:
    return f"hi {who} ({ctx.attempt})"


@app.recurring("0 3 * * *", args=[dt.date(2026, 1, 1)])
@app.task(name="typing.report")
async def report(ctx: TaskContext, day: dt.date, *, dry_run: bool = False) -> dict[str, int]:
    return {"rows": 1}


async def calls() -> None:
    definition: TaskDefinition[..., int] = add
    assert definition.name.endswith(".add")
    h = await add.submit(1, y=2)
    assert_type(h, TaskHandle[int])
    assert_type(await h, int)
    assert_type(await (await greet.submit("bob")), str)
    assert_type(await greet.enqueue(who="ann"), int)
    later = report.options(start_in=60, key="r-1")
    call: TaskCall[..., dict[str, int]] = later
    assert call.fields["key"] == "r-1"
    assert_type(await (await later.submit(dt.date(2026, 1, 2), dry_run=True)), dict[str, int])
    assert_type(add.spec(1), NamedTask[int])
    # a placeholder is typed as its task's return value: it fits a parameter of that type
    total = add.spec(add.spec(1).output, y=report.spec(dt.date(2026, 1, 1)).output["rows"])
    assert_type(add.spec(1).output, int)
    assert_type(report.spec(dt.date(2026, 1, 1)).output, dict[str, int])
    assert_type(cronoq.outcome_of(total), cronoq.Outcome)
    assert_type(cronoq.output_of(h), int)  # (a handle's type, as a spec's)
    assert_type(cronoq.output_of(add.spec(2)), int)
    assert_type(cronoq.output_of("a-key"), Any)
    assert_type(await app.submit_batch([add.spec(1), greet.spec("x")]), list[TaskHandle[Any]])
