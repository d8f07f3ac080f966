"""Placeholders of named tasks, in process (docs/concepts/dependencies.md#outputs-on-edges):
``.output`` / ``output_of`` / ``outcome_of`` become edges and arguments, typed values survive,
bad input is refused before anything is submitted."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import pathlib
from typing import Any

import pydantic
import pytest

import cronoq
from cronoq import Outcome, SqliteStore, SubmitError, TaskFailed, outcome_of, output_of
from cronoq.tasks import TaskDefinitionError

app = cronoq.App("shop")
UTC = dt.UTC


@dataclasses.dataclass
class Order:
    id: int
    placed: dt.datetime


class Invoice(pydantic.BaseModel):
    order: int
    total: float


@app.task
async def fetch_order(n: int) -> Order:
    if n < 0:
        raise cronoq.Permanent(f"no order {n}")
    return Order(n, dt.datetime(2026, 1, 2, 3, 4, tzinfo=UTC))


@app.task
async def render_invoice(order: Order) -> Invoice:
    assert isinstance(order.placed, dt.datetime)  # the annotated type, not its JSON
    return Invoice(order=order.id, total=order.id * 1.5)


@app.task
async def email_invoice(invoice: Invoice, to: dict[str, Any]) -> str:
    assert isinstance(invoice, Invoice)
    return f"{to['who']}:{invoice.order}:{invoice.total}"


@app.task
async def total(values: list[int]) -> int:
    return sum(values)


@app.task
async def number(n: int) -> int:
    return n


@app.task
async def report(o: Outcome, extra: list[Outcome]) -> str:
    return f"{o.status}/{o.message}/{[e.status for e in extra]}"


@app.task
async def described(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.id}:{o.key}:{o.status}:{o.output}" for o in outcomes]


@app.task
async def when(at: dt.datetime) -> str:
    return at.isoformat()


async def chain(store: SqliteStore | None) -> None:
    async with app.scheduler(store=store):
        f = fetch_order.spec(42)
        r = render_invoice.spec(f.output)
        e = email_invoice.options(key="mail-42").spec(r.output, to={"who": "ann", "copy": [r.output]})
        handles = await app.submit_batch([f, r, e])
        assert await asyncio.wait_for(handles[2], 10) == "ann:42:63.0"
        assert await handles[1] == Invoice(order=42, total=63.0)


async def test_a_three_step_chain_with_typed_values() -> None:
    await chain(None)


async def test_a_three_step_chain_with_a_store(tmp_path: pathlib.Path) -> None:
    await chain(SqliteStore(tmp_path / "chain.db"))


GATE: dict[str, asyncio.Event] = {}


@app.task(retry=cronoq.RetryPolicy(initial_backoff=0.0, jitter=False))
async def gate(n: int) -> int:
    await GATE["open"].wait()
    return n


async def test_a_restart_between_a_parents_end_and_its_named_childs_start(tmp_path: pathlib.Path) -> None:
    """The child also waits on a gate that opens only after a restart (key retention 0: the
    engine forgets the parent at once): it still receives its parent's typed output."""
    GATE["open"] = asyncio.Event()
    db = tmp_path / "restart.db"
    opts: dict[str, Any] = {"store": SqliteStore(db), "key_retention": 0, "shutdown_grace": 0}
    async with app.scheduler(**opts):
        f = fetch_order.spec(7)
        g = gate.options(key="gate-1").spec(1)
        r = render_invoice.options(key="after-restart", after="gate-1").spec(f.output)
        parent, _, child = await app.submit_batch([f, g, r])
        assert (await asyncio.wait_for(parent, 10)).id == 7
    GATE["open"].set()
    opts["store"] = SqliteStore(db)
    async with app.scheduler(**opts) as sched:
        handle = await sched.handle(child.id)
        assert handle is not None
        assert Invoice.model_validate(await asyncio.wait_for(handle, 10)) == Invoice(order=7, total=10.5)


async def test_a_hundred_way_fan_in() -> None:
    async with app.scheduler():
        parts = [number.spec(n) for n in range(100)]
        fan_in = total.spec([p.output for p in parts])
        handles = await app.submit_batch([*parts, fan_in])
        assert await asyncio.wait_for(handles[-1], 10) == sum(range(100))


async def test_a_failure_mid_chain_skips_output_children_and_feeds_outcome_ones() -> None:
    async with app.scheduler():
        f = fetch_order.spec(-1)
        r = render_invoice.spec(f.output)
        seen = report.spec(outcome_of(f), [outcome_of(f), outcome_of(r)])
        handles = await app.submit_batch([f, r, seen])
        with pytest.raises(TaskFailed) as err:
            await asyncio.wait_for(handles[1], 10)
        assert err.value.status == "skipped" and str(handles[0].id) in err.value.message
        assert await handles[2] == "failed/no order -1/['failed', 'skipped']"


async def test_placeholders_of_earlier_tasks_by_handle_id_key_and_spec() -> None:
    async with app.scheduler():
        first = await number.options(key="n-7").submit(7)
        spec = number.spec(5)
        (h5,) = await app.submit_batch([spec])
        await asyncio.wait_for(h5, 10)
        h = await total.submit([output_of(first), output_of(first.id), output_of("n-7"), spec.output])
        assert await asyncio.wait_for(h, 10) == 26
        outcomes = [outcome_of(first), outcome_of(first.id), outcome_of("n-7"), outcome_of(spec)]
        seen = await described.submit(outcomes)
        want = [f"{first.id}:n-7:succeeded:7"] * 3 + [f"{h5.id}:{spec.key}:succeeded:5"]
        assert await asyncio.wait_for(seen, 10) == want
        moment = dt.datetime(2026, 5, 6, tzinfo=UTC)
        stamp = await app.submit_batch([when.spec(moment)])
        later = await when.submit(output_of(stamp[0]))  # a str output fits a datetime parameter
        assert await asyncio.wait_for(later, 10) == moment.isoformat()


async def test_placeholders_count_after_the_calls_own_edges() -> None:
    """``.options(after=..., deps=...)`` edges come first; a placeholder's marker names the
    edge after them, in a batch and in a single submit alike."""
    async with app.scheduler():
        first = await number.options(key="own-1").submit(1)
        bad = await fetch_order.options(key="own-bad").submit(-1)
        own = {"after": "own-1", "deps": [cronoq.Dep("own-bad", on="complete")]}
        two = number.spec(2)
        batch = described.options(**own).spec([outcome_of(two), outcome_of("own-1")])
        h2, h = await app.submit_batch([two, batch])
        single = await described.options(**own).submit([outcome_of(bad), outcome_of(first)])
        got = await asyncio.wait_for(h, 10)
        assert got == [f"{h2.id}:{two.key}:succeeded:2", f"{first.id}:own-1:succeeded:1"]
        assert await asyncio.wait_for(single, 10) == [
            f"{bad.id}:own-bad:failed:None",
            f"{first.id}:own-1:succeeded:1",
        ]


async def test_bad_input_is_refused_and_nothing_is_submitted() -> None:
    async with app.scheduler() as sched:
        stray = number.spec(1)
        with pytest.raises(SubmitError) as err:
            await app.submit_batch([number.spec(2), total.spec([stray.output])])
        assert err.value.code == "invalid" and "neither in this batch nor submitted" in err.value.message
        with pytest.raises(SubmitError) as err:
            await app.submit_batch([number.spec(3), total.spec([output_of("no-such-key")])])
        assert err.value.code == "unknown_dependency"
        a = number.options(key="a").spec(output_of("b"))
        b = number.options(key="b").spec(output_of("a"))
        with pytest.raises(SubmitError) as err:
            await app.submit_batch([a, b])
        assert err.value.code == "cycle"
        assert sched.seam.pending_total() == 0  # nothing was half-submitted
        with pytest.raises(TypeError, match="only an argument of a named task's call"):
            bool(stray.output)
        # as text it would have become its repr, sent to the child as data: refused too
        p = stray.output
        uses = (lambda: f"order {p}", lambda: str(p), lambda: format(p, ""), lambda: p + 1, lambda: p["id"])
        for use in (*uses, lambda: p.id, lambda: p < 1):
            with pytest.raises(TypeError, match="only an argument of a named task's call"):
                use()
        assert repr(p).startswith("output_of(") and [p] == [p]  # (repr, identity: as before)
        # a probe of an attribute (a library's duck typing) answers "none", as for any object
        assert not hasattr(p, "model_dump") and getattr(p, "_fields", None) is None
        with pytest.raises(SubmitError, match="is a placeholder: pass it as an argument"):
            cronoq.Task(stray.output)
        for plain in (sched.submit, sched.enqueue):  # a plain task's payload, in process
            with pytest.raises(SubmitError, match="is a placeholder: pass it as an argument") as err:
                await plain(output_of("k"), pool="default")
            assert err.value.code == "invalid"
        with pytest.raises(SubmitError, match="placeholder must otherwise be JSON"):
            total.spec([stray.output, object()])


def test_a_placeholder_in_a_recurring_schedule_is_refused() -> None:
    other = cronoq.App("other")
    with pytest.raises(TaskDefinitionError, match="recurring schedule"):

        @other.recurring("0 3 * * *", args=[output_of("x")])
        @other.task
        async def nightly(n: int) -> int:
            return n


async def test_a_parent_output_that_is_not_json_fails_the_named_child() -> None:
    async def plain(ctx: Any, payload: Any) -> Any:
        return object()

    async with app.scheduler(pools=[app.pool("default"), cronoq.Pool("plain", plain)]) as sched:
        parent = await sched.submit(None, pool="plain")
        child = await number.submit(output_of(parent))
        with pytest.raises(TaskFailed) as err:
            await asyncio.wait_for(child, 10)
        assert err.value.status == "failed"
        assert f"the output of parent {parent.id} is not JSON" in err.value.message
