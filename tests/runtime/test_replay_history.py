"""Replay from the store's history (issue #34): a task the engine has forgotten (finished longer
ago than ``key_retention``) but a durable store still keeps is replayed in process, on SQLite
and on PostgreSQL, with its whole definition, its payload and the ``replay_of`` link; its key
moves to the replay when free; without a store row the refusal names both settings."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from cronoq import (
    App,
    BulkResult,
    Permanent,
    Pool,
    ReplayError,
    Retryable,
    RetryPolicy,
    Scheduler,
    TaskFailed,
    TaskHandle,
)

from .conftest import SAFETY, wait


async def forgotten(s: Scheduler, *refs: int | str) -> None:
    """Until the engine no longer retains ``refs`` (its retention is 0.5 s; ``status`` would
    still answer from the store's history)."""
    deadline = asyncio.get_running_loop().time() + SAFETY
    while any(s.seam.lookup(r) is not None for r in refs):
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)


async def test_replay_after_the_engines_retention_reads_the_store(make_store: Callable[[], Any]) -> None:
    calls: list[tuple[Any, int]] = []

    async def flaky(ctx: Any, payload: Any) -> Any:
        calls.append((payload, ctx.attempt))
        raise Retryable("upstream down")

    retry = RetryPolicy(max_attempts=2, initial_backoff=0.01, max_backoff=0.01, jitter=False)
    pools = [Pool("default", flaky, max=2, autoscale=False)]
    async with Scheduler(pools, store=make_store(), key_retention=0.5) as s:
        h = await s.submit({"n": 3}, key="report-3am", retry=retry, tags={"team": "ops"}, kind="report")
        with pytest.raises(TaskFailed):
            await wait(h)
        await forgotten(s, h.id, "report-3am")
        calls.clear()
        r = await s.replay(h.id)  # from the store's history: definition and payload
        with pytest.raises(TaskFailed, match="upstream down"):
            await wait(r)
        assert calls == [({"n": 3}, 1), ({"n": 3}, 2)]  # the original's retry policy
        t = s.seam.tasks[r.id]
        assert t.opts.kind == "report" and t.opts.tags == {"team": "ops", "cronoq.replay_of": str(h.id)}
        assert (await s.handle("report-3am")).id == r.id  # type: ignore[union-attr]  # the key moved
        again = await s.replay(h.id)  # a failed task may be replayed again (the key stays put)
        assert (await s.handle("report-3am")).id == r.id  # type: ignore[union-attr]
        with pytest.raises(TaskFailed):
            await wait(again)
        other = await s.submit({"n": 4}, key="report-4am", retry=retry)
        with pytest.raises(TaskFailed):
            await wait(other)
        await forgotten(s, other.id, "report-4am")
        by_key = await s.replay("report-4am")  # by key: the newest finished row of that key
        assert s.seam.tasks[by_key.id].opts.tags == {"cronoq.replay_of": str(other.id)}
        with pytest.raises(ReplayError) as e:
            await s.replay(h.id, tenant="acme")  # another tenant's: unknown, in the history too
        assert e.value.code == "unknown_task"
        with pytest.raises(ReplayError) as e:
            await s.replay(10**9)
        assert e.value.code == "unknown_task"
        assert "key_retention, 0.5 s, and by the store for its retention, 3600 s" in str(e.value)


async def test_status_and_handle_read_the_store_after_the_engines_retention(
    make_store: Callable[[], Any],
) -> None:
    """In process too, ``status`` and ``handle`` answer from the store's history once the engine
    has forgotten a task: its status, its output or its failure (issue #34)."""

    async def run(ctx: Any, payload: Any) -> Any:
        if payload == "bad":
            raise Permanent("no good")
        return {"echo": payload}

    async with Scheduler([Pool("default", run, max=2)], store=make_store(), key_retention=0.3) as s:
        ok = await s.submit("fine", key="ok-1")
        bad = await s.submit("bad", key="bad-1")
        assert await wait(ok) == {"echo": "fine"}
        with pytest.raises(TaskFailed):
            await wait(bad)
        await forgotten(s, ok.id, bad.id, "ok-1", "bad-1")
        assert await s.status(ok.id) == "succeeded" and await s.status("ok-1") == "succeeded"
        assert await s.status(bad.id) == "failed"  # (Permanent: failed, not dead-lettered)
        h = await s.handle("ok-1")
        assert h is not None and h.id == ok.id and await wait(h) == {"echo": "fine"}
        hb = await s.handle(bad.id)
        assert hb is not None
        with pytest.raises(TaskFailed, match="no good"):
            await wait(hb)
        assert await s.status(ok.id, tenant="acme") is None  # another tenant's: unknown there too
        assert await s.status(10**9) is None and await s.handle("never") is None


async def test_bulk_replay_reads_the_store_after_the_engines_retention(make_store: Callable[[], Any]) -> None:
    """``replay_where`` also pages through the history: a forgotten task that already has a
    replay is not matched again (unless forced), whether its replay is retained or forgotten,
    failed or succeeded."""
    fixed: set[str] = set()

    async def fail(ctx: Any, payload: Any) -> Any:
        if payload in fixed:
            return payload
        raise Permanent(f"down {payload}")

    pools = [Pool("default", fail, max=4, autoscale=False)]
    async with Scheduler(pools, store=make_store(), key_retention=0.3) as s:
        a, b, d = [await s.submit(p, tags={"batch": "1"}) for p in ("a", "b", "d")]
        other = await s.submit("c", tags={"batch": "2"})
        for h in (a, b, d, other):
            with pytest.raises(TaskFailed):
                await wait(h)
        a2 = await s.replay(a.id)  # a has a replay, which fails too
        fixed.add("d")
        d2 = await s.replay(d.id)  # d has a replay, which succeeds
        with pytest.raises(TaskFailed):
            await wait(a2)
        assert await wait(d2) == "d"
        await forgotten(s, a.id, b.id, d.id, other.id, a2.id, d2.id)
        await s.pause("default")  # (the new replays stay ready: not matched themselves)
        res = await s.replay_where(tags={"batch": "1"}, request_key="k1")
        assert res == BulkResult(2, 2)  # b and a's replay (its tags are a's); not a, not d
        assert {_replay_of(s, t) for t in s.seam.tasks} == {b.id, a2.id}
        assert await s.replay_where(tags={"batch": "1"}, request_key="k1") == BulkResult(2, 2)  # (the key)
        assert await s.replay_where(tags={"batch": "1"}) == BulkResult(0, 0)  # all have a replay
        assert (await s.replay_where(tags={"batch": "1"}, force=True, limit=1)).matched == 1


@contextlib.asynccontextmanager
async def _forty_forgotten(
    make_store: Callable[[], Any], batch: str
) -> AsyncIterator[tuple[Scheduler, list[TaskHandle[Any]]]]:
    """A scheduler and 40 failed tasks tagged ``batch`` that its engine has forgotten (its
    store keeps them); the pool is paused, so their replays stay ready."""

    async def fail(ctx: Any, payload: Any) -> Any:
        raise Permanent(f"down {payload}")

    pools = [Pool("default", fail, max=4, autoscale=False)]
    async with Scheduler(pools, store=make_store(), key_retention=0.3) as s:
        hs = [await s.submit(i, tags={"batch": batch}) for i in range(40)]
        for h in hs:
            with pytest.raises(TaskFailed):
                await wait(h)
        await forgotten(s, *(h.id for h in hs))
        await s.pause("default")
        yield s, hs


async def test_concurrent_bulk_replays_never_replay_a_forgotten_task_twice(
    make_store: Callable[[], Any],
) -> None:
    """Two bulk replays running at once (a retry of a timed-out call without a key, or with
    another key) each page through the history; a task the other call replayed meanwhile
    is not replayed again: every forgotten task gets exactly one replay."""
    async with _forty_forgotten(make_store, "x") as (s, hs):
        one, two = await asyncio.gather(
            s.replay_where(tags={"batch": "x"}), s.replay_where(tags={"batch": "x"}, request_key="k2")
        )
        originals = [_replay_of(s, t) for t in s.seam.tasks]
        replays = [o for o in originals if o is not None]
        assert sorted(replays) == sorted(h.id for h in hs)  # one replay each, none twice
        assert one.acted + two.acted == len(hs)


async def test_a_bulk_replay_skips_a_forgotten_task_replayed_by_a_single_replay_meanwhile(
    make_store: Callable[[], Any],
) -> None:
    """``replay(id)`` of a forgotten task while a bulk replay pages through the history: the
    bulk replay (without force) does not replay that task again when it reaches it, as it
    would not have, had it started a moment later."""
    async with _forty_forgotten(make_store, "y") as (s, hs):
        bulk = asyncio.ensure_future(s.replay_where(tags={"batch": "y"}))
        await asyncio.sleep(0)  # (it starts: no task is in the engine, so its history pass begins)
        single = await s.replay(hs[0].id)  # the oldest: the bulk pass, newest first, reaches it last
        result = await bulk
        replays = [o for t in s.seam.tasks if (o := _replay_of(s, t)) is not None]
        assert replays.count(hs[0].id) == 1 and _replay_of(s, single.id) == hs[0].id
        assert sorted(replays) == sorted(h.id for h in hs)  # one replay each, none twice
        assert result.acted == len(hs) - 1


def _replay_of(s: Scheduler, tid: int) -> int | None:
    from cronoq.engine.replay import replay_of

    return replay_of(s.seam.tasks[tid])


_chord = App("replay-chord")
_down: set[str] = set()


@_chord.task(name="chord.part")
async def _part(n: int) -> int:
    if f"part-{n}" in _down:
        raise Permanent(f"part {n} down")
    return n * 10


@_chord.task(name="chord.total")
async def _total(values: list[int]) -> int:
    if "total" in _down:
        raise Permanent("database down at 03:00")
    return sum(values)


@pytest.mark.parametrize("after_retention", [False, True], ids=["retained", "from-history"])
async def test_a_replayed_chord_callback_gets_its_parents_outputs(
    make_store: Callable[[], Any], after_retention: bool
) -> None:
    """The nightly chord of issue #34: its callback failed at 03:00 and is replayed at 09:00.
    A replay carries no edges, yet its payload holds the placeholders of its parents' outputs:
    it takes them from the parents (retained, or read from the store's history), and from a
    parent's successful replay where the parent itself had failed."""
    _down.clear()
    _down.update({"total", "part-2"})
    async with _chord.scheduler(store=make_store(), key_retention=0.3) as s:
        parts = [_part.spec(n) for n in range(4)]
        *hp, hc = await _chord.submit_batch(
            [*parts, _total.options(key="nightly").spec([p.output for p in parts])]
        )
        with pytest.raises(TaskFailed):
            await wait(hp[2])
        with pytest.raises(TaskFailed, match="skipped"):
            await wait(hc)  # (part 2 failed: the callback never ran)
        _down.discard("part-2")
        fixed = await s.replay(hp[2].id)
        assert await wait(fixed) == 20
        if after_retention:
            await forgotten(s, hc.id, *(h.id for h in hp), fixed.id)
        r = await s.replay("nightly")
        with pytest.raises(TaskFailed, match="database down"):
            await wait(r)  # (ran: with plain arguments, its own failure)
        _down.clear()
        r2 = await s.replay(r.id)
        assert await wait(r2) == 0 + 10 + 20 + 30


async def test_a_callback_whose_parent_has_no_output_is_not_replayed(make_store: Callable[[], Any]) -> None:
    """Refused, naming the parent, rather than run with a hole in its arguments."""
    _down.clear()
    _down.add("part-1")
    async with _chord.scheduler(store=make_store(), key_retention=0.3) as s:
        parts = [_part.spec(n) for n in range(2)]
        *hp, hc = await _chord.submit_batch([*parts, _total.spec([p.output for p in parts])])
        with pytest.raises(TaskFailed, match="skipped"):
            await wait(hc)
        await forgotten(s, hc.id, *(h.id for h in hp))
        with pytest.raises(ReplayError) as e:
            await s.replay(hc.id)
        assert e.value.code == "payload_unavailable"
        assert f"parent {hp[1].id} ended failed, with no output to pass (replay it first)" in str(e.value)
    _down.clear()
