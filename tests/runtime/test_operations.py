"""docs/how-to/operations.md: Scheduler.pause/resume, replay and the bulk actions in-process,
with the memory store and a durable SQLite one."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from cronoq import BulkResult, Permanent, ReplayError, Scheduler, SqliteStore, TaskFailed
from cronoq.engine.bulk import PAGE

from .conftest import Gate, pool, settle, wait


async def failing(ctx: Any, payload: Any) -> Any:
    if payload.get("fail"):
        raise Permanent("upstream down")
    return payload


async def test_pause_resume_in_process() -> None:
    gate = Gate()
    async with Scheduler([pool("default", gate, max=1)]) as s:
        h1 = await s.submit(1)
        await wait(gate.started(1).wait())
        assert await s.pause("default") and not await s.pause("default")
        h2 = await s.submit(2)
        gate.release_all()
        assert await wait(h1) == 1  # the running attempt finishes
        await settle()
        assert await s.status(h2.id) == "ready"
        assert (await s.snapshot()).pool("default").paused  # type: ignore[union-attr]
        assert await s.resume("default")
        assert await wait(h2) == 2
        with pytest.raises(ValueError, match="unknown pool 'nope'"):
            await s.pause("nope")


async def test_replay_in_process_moves_key_and_tags() -> None:
    async with Scheduler([pool("default", failing, max=2)]) as s:
        h = await s.submit({"fail": True}, key="job-1", tags={"team": "ops"})
        with pytest.raises(TaskFailed):
            await wait(h)
        with pytest.raises(ReplayError) as ei:
            await s.replay(9999)
        assert ei.value.code == "unknown_task"
        r = await s.replay("job-1")
        assert r.id != h.id
        with pytest.raises(TaskFailed):
            await wait(r)
        assert (await s.handle("job-1")).id == r.id  # type: ignore[union-attr]
        ok = await s.submit({"fail": False})
        await wait(ok)
        with pytest.raises(ReplayError) as ei:
            await s.replay(ok.id)
        assert ei.value.code == "succeeded" and "force" in str(ei.value)
        forced = await s.replay(ok.id, force=True)
        assert await wait(forced) == {"fail": False}
        with pytest.raises(ReplayError) as ei:
            await s.replay(h.id, tenant="other")  # another tenant's task is as unknown
        assert ei.value.code == "unknown_task"


async def test_bulk_cancel_and_replay_with_request_keys() -> None:
    async with Scheduler([pool("a", failing, max=1), pool("b", failing, max=1)]) as s:
        await s.pause("a")
        await s.pause("b")
        for i in range(2 * PAGE + 5):
            await s.enqueue({"i": i}, pool="a", kind="bulk")
        await s.enqueue({"i": -1}, pool="b", kind="bulk")
        res = await s.cancel_where(pools=["a"], statuses=["ready"], request_key="deploy-42")
        assert res == BulkResult(2 * PAGE + 5, 2 * PAGE + 5)
        assert await s.cancel_where(pools=["a"], request_key="deploy-42") == res  # not acted twice
        assert await s.cancel_where(pools=["a"]) == BulkResult(0, 0)  # nothing left to cancel
        assert await s.replay_where(pools="a", kinds=["bulk"], limit=10) == BulkResult(10, 10)
        assert await s.cancel_where(tags={"cronoq.replay_of": "1"}) == BulkResult(1, 1)
        since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
        assert (await s.cancel_where(pools="b", created_after=since)).acted == 1


async def test_bulk_cancel_yields_to_the_loop_between_pages() -> None:
    async with Scheduler([pool("default", failing, max=1)]) as s:
        await s.pause("default")
        for i in range(5 * PAGE):
            await s.enqueue({"i": i})
        ticks = 0
        done = False

        async def other() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.get_running_loop().create_task(other())
        res = await s.cancel_where(statuses="ready")
        done = True
        await task
        assert res.acted == 5 * PAGE and ticks >= 4  # it ran between the pages


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"pools": ["nope"]}, "unknown pool 'nope'"),
        ({"statuses": ["succeeded"]}, "statuses: cancel does not apply to 'succeeded'"),
        ({"statuses": ["weird"]}, "statuses: unknown status 'weird'"),
        ({"created_after": 10.0, "created_before": 5.0}, "malformed time range"),
        ({"finished_after": dt.datetime(2026, 1, 1)}, "finished_after must be an aware datetime"),
        ({"limit": 0}, "limit must be an int >= 1"),
        ({"pools": []}, "pools must not be empty"),
        ({"tags": {"a": 1}}, "tags must be a dict of str to str"),
        ({"created_after": float("nan")}, "created_after must be finite"),
        ({"created_after": 1.8e299}, "created_after is out of range"),  # (found by the HTTP fuzz)
        ({"finished_before": -1e300}, "finished_before is out of range"),
    ],
)
async def test_bad_filters_are_value_errors(kw: dict[str, Any], match: str) -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError, match=match):
            await s.cancel_where(**kw)


async def test_an_empty_filter_is_refused_as_over_the_wire() -> None:
    """No criterion at all is refused in process as over HTTP and gRPC, rather than acting on
    every task; ``limit`` alone is a criterion there too."""
    async with Scheduler([pool()]) as s:
        await s.pause("default")  # (it stays ready)
        h = await s.submit("keep me")
        for kw in ({}, {"tags": {}}, {"pools": None, "request_key": "k"}):
            with pytest.raises(ValueError, match=r"^a bulk action needs at least one filter criterion$"):
                await s.cancel_where(**kw)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match=r"^a bulk action needs at least one filter criterion$"):
                await s.replay_where(force=True, **kw)  # type: ignore[arg-type]
        assert await s.status(h.id) == "ready"
        assert await s.cancel_where(limit=1) == BulkResult(1, 1)


async def test_replay_where_refuses_running_statuses() -> None:
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError, match="replay does not apply to 'running'"):
            await s.replay_where(statuses=["running"])
        with pytest.raises(ValueError, match="replay does not apply to 'succeeded'"):
            await s.replay_where(statuses=["succeeded"])
        assert await s.replay_where(statuses=["succeeded"], force=True) == BulkResult(0, 0)


async def test_recurring_pause_and_trigger_in_process() -> None:
    async with Scheduler([pool()]) as s:
        await s.add_recurring("hourly", "0 * * * *", {"n": 1})
        assert await s.pause_recurring("hourly")
        (info,) = await s.list_recurring()
        assert info.paused and info.skipped_paused == 0
        h = await s.trigger_recurring("hourly")
        assert await wait(h) == {"n": 1}
        assert await s.resume_recurring("hourly")
        with pytest.raises(ValueError, match="unknown recurring schedule 'x'"):
            await s.pause_recurring("x")


async def test_durable_pause_and_replay_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "ops.db"
    async with Scheduler([pool("default", failing, max=1)], store=SqliteStore(db)) as s:
        h = await s.submit({"fail": True}, key="k")
        with pytest.raises(TaskFailed):
            await wait(h)
        await s.pause("default")
    async with Scheduler([pool("default", failing, max=1)], store=SqliteStore(db)) as s:
        assert (await s.snapshot()).pool("default").paused  # type: ignore[union-attr]
        r = await s.replay("k")  # the payload is read back from the store
        await settle()
        assert await s.status(r.id) == "ready"  # paused: not dispatched
        assert await s.resume("default")
        with pytest.raises(TaskFailed, match="upstream down"):
            await wait(r)
        rid = r.id
    async with Scheduler([pool("default", failing, max=1)], store=SqliteStore(db)) as s:
        assert not (await s.snapshot()).pool("default").paused  # type: ignore[union-attr]
        assert (await s.handle("k")).id == rid  # type: ignore[union-attr]  # the key moved, durably
        again = await s.replay(h.id)  # the original is still retained, by id
        with pytest.raises(TaskFailed, match="upstream down"):
            await wait(again)


async def test_replay_of_a_payload_no_longer_held_is_refused() -> None:
    """Without a durable store and with ended tasks' payloads not kept (a server's choice, see
    ``Scheduler._keep_payloads``), a replay has nothing to resubmit: payload_unavailable."""
    s = Scheduler([pool("default", failing, max=1)])
    s._keep_payloads = False
    async with s:
        h = await s.submit({"fail": True})
        with pytest.raises(TaskFailed):
            await wait(h)
        with pytest.raises(ReplayError) as ei:
            await s.replay(h.id)
        assert ei.value.code == "payload_unavailable" and "no longer retained" in str(ei.value)
        res = await s.replay_where(statuses="failed")
        assert res == BulkResult(1, 0)  # matched, not acted on: never a silent half-done count


async def test_replay_after_the_retention_names_the_setting() -> None:
    import cronoq.testing
    from cronoq import Pool

    async with cronoq.testing.run(Pool("default", failing), key_retention=60) as env:
        h = await env.scheduler.submit(None, key="nightly-3am")
        with pytest.raises(TaskFailed):
            await h
        assert (await env.scheduler.replay(h.id)).id > h.id  # (retained: replayable)
        h2 = await env.scheduler.submit(None, key="nightly-4am")
        with pytest.raises(TaskFailed):
            await h2
        await env.advance(6 * 3600)  # the morning after: past the engine's retention
        for ref in (h2.id, "nightly-4am"):
            with pytest.raises(ReplayError) as e:
                await env.scheduler.replay(ref)
            assert e.value.code == "unknown_task"
            assert "not retained if it existed" in str(e.value) and "key_retention, 60 s" in str(e.value)
