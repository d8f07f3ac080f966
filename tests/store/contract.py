"""Behaviour every durable store must show (docs/reference/behaviour.md#durable-state), run against each real
backend.

Each ``check_*`` coroutine takes ``make(**kw)``: a factory of *unopened* stores that all share
one database (one SQLite file or one PostgreSQL schema), so several instances model several
processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from cronoq.engine import Core, CoreConfig, PoolConfig, TaskOptions
from cronoq.engine.actions import Dispatch, Persist
from cronoq.engine.mutations import (
    BULK_KEYS,
    BulkKeyChange,
    Mutation,
    RecoveredSchedule,
    RecoveredTask,
    RecoveredTerminal,
    RecurringNext,
    RecurringRecord,
    RecurringRemove,
    RecurringUpsert,
    StatusChange,
    Submitted,
    TaskRecord,
)
from cronoq.engine.recurring import CronSchedule, RecurringSpec
from cronoq.engine.time import NS
from cronoq.errors import Fenced, SchedulerError
from cronoq.store import JsonCodec
from cronoq.store._records import spec_from_json, spec_json

Make = Callable[..., Any]
codec = JsonCodec()
SAFETY = 10.0


def _bare(spec: TaskRecord) -> TaskRecord:
    """``spec`` as recovery returns it: the definition without the encoded payload."""
    return spec_from_json(spec_json(spec), None)


def now_ns() -> int:
    return time.time_ns()


def full_spec(**kw: Any) -> TaskRecord:
    base: dict[str, Any] = dict(
        pool="default",
        kind="report",
        priority=1,
        key="k1",
        deadline=now_ns() + 60 * NS,
        start=None,
        tolerance=2 * NS,
        on_miss=1,
        duration_hint=3 * NS,
        timeout=30 * NS,
        retry=(5, 0.5, 2.0, 10.0, False),
        deps=[(7, 0), ("parent-key", 1)],
        resources={"db": 2},
        tags={"traceparent": "00-abc"},
        labels={"gpu": "yes"},
        tenant="acme",
        payload=codec.encode({"x": [1, 2], "s": "é"}),
        recurring=None,
    )
    base.update(kw)
    return TaskRecord(**base)


async def opened(make: Make, **kw: Any) -> Any:
    s = make(**kw)
    await s.open()
    return s


async def leader(make: Make, **kw: Any) -> tuple[Any, int]:
    s = await opened(make, **kw)
    epoch = await asyncio.wait_for(s.acquire(), SAFETY)
    return s, epoch


# ---------------------------------------------------------------------------------- round trips


async def check_round_trip(make: Make) -> None:
    s, ep = await leader(make)
    try:
        t0 = now_ns()
        spec1 = full_spec()
        spec2 = TaskRecord(pool="default", payload=codec.encode("plain"))
        spec3 = TaskRecord(pool="other", kind="k", key="done", payload=codec.encode(3))
        spec4 = TaskRecord(pool="default", key="bad", payload=codec.encode(None))
        # every mutation kind, across several commits (some folded inside one commit)
        await s.commit(
            [
                Submitted(1, 1, t0, spec1),
                Submitted(2, 2, t0 + 1, spec2),
                Submitted(3, 3, t0 + 2, spec3),
                StatusChange(3, "running", 1, t0 + 10),
            ],
            ep,
            codec,
        )
        await s.commit(
            [
                StatusChange(2, "running", 1, t0 + 20),
                StatusChange(2, "retrying", 1, t0 + 30, "boom"),
                StatusChange(3, "succeeded", 1, t0 + 40, None, {"rows": [1, 2]}, True),
                Submitted(4, 4, t0 + 50, spec4),
                StatusChange(4, "running", 1, t0 + 51),
                StatusChange(4, "failed", 1, t0 + 52, "nope"),
            ],
            ep,
            codec,
        )
        tmpl = TaskRecord(pool="default", kind="cron", key="nightly", payload=codec.encode({"job": 1}))
        rr = RecurringRecord("nightly", "0 3 * * *", "Europe/Paris", 2, tmpl, 5 * NS)
        rr2 = RecurringRecord("gone", "* * * * *", None, 0, TaskRecord(pool="default"))
        await s.commit(
            [
                RecurringUpsert(rr),
                RecurringUpsert(rr2),
                RecurringNext("nightly", t0 + 3600 * NS, 2),
                RecurringNext("gone", None, 0),
                RecurringRemove("gone"),
            ],
            ep,
            codec,
        )
        rec = await s.load(codec)
        assert rec.quarantined == []
        # (recovered definitions come without the encoded payload: only the decoded one is kept)
        assert rec.tasks == [
            RecoveredTask(1, 1, t0, _bare(spec1), {"x": [1, 2], "s": "é"}, "submitted", 0, None, None),
            RecoveredTask(2, 2, t0 + 1, _bare(spec2), "plain", "retrying", 1, t0 + 20, "boom"),
        ]
        assert rec.terminal == [
            RecoveredTerminal(
                3,
                3,
                "other",
                "k",
                "done",
                "succeeded",
                1,
                t0 + 2,
                t0 + 10,
                t0 + 40,
                None,
                {"rows": [1, 2]},
                True,
                2,
                spec=_bare(spec3),  # (the whole definition: a replay keeps its options)
            ),
            RecoveredTerminal(
                4,
                4,
                "default",
                "default",
                "bad",
                "failed",
                1,
                t0 + 50,
                t0 + 51,
                t0 + 52,
                "nope",
                spec=_bare(spec4),
            ),
        ]
        # recovered schedule templates carry the decoded payload (see store/base.py)
        exp_tmpl = TaskRecord(pool="default", kind="cron", key="nightly", payload={"job": 1})
        assert rec.schedules == [
            RecoveredSchedule(
                RecurringRecord("nightly", "0 3 * * *", "Europe/Paris", 2, exp_tmpl, 5 * NS),
                t0 + 3600 * NS,
                2,
            )
        ]
        # re-committing the same batch is harmless (commits are idempotent upserts)
        await s.commit([Submitted(1, 1, t0, spec1)], ep, codec)
        assert (await s.load(codec)).tasks[0].status == "submitted"
        # a retried upsert of a schedule keeps next/last
        await s.commit([RecurringUpsert(rr)], ep, codec)
        assert (await s.load(codec)).schedules[0].next == t0 + 3600 * NS
    finally:
        await s.close()
    # and a second instance reads the same
    s2, _ = await leader(make)
    try:
        rec2 = await s2.load(codec)
        assert [t.id for t in rec2.tasks] == [1, 2]
        assert [t.id for t in rec2.terminal] == [3, 4]
    finally:
        await s2.close()


async def check_bulk_keys(make: Make) -> None:
    """Bulk request keys: upserted per (action, tenant, key), the newest BULK_KEYS kept, read
    back oldest first with their progress (docs/how-to/operations.md#bulk-actions)."""
    s, ep = await leader(make)
    try:
        t0 = now_ns()
        await s.commit([BulkKeyChange("replay", None, "k0", 1000, 990, False, t0)], ep, codec)
        await s.commit([BulkKeyChange("replay", None, "k0", 2500, 2480, True, t0 + 1)], ep, codec)
        await s.commit([BulkKeyChange("cancel", "acme", "k0", 3, 3, True, t0 + 2)], ep, codec)
        more = [BulkKeyChange("cancel", None, f"n{i}", i, i, True, t0 + 10 + i) for i in range(BULK_KEYS - 1)]
        await s.commit(more, ep, codec)
        rec = await s.load(codec)
        assert len(rec.bulk_keys) == BULK_KEYS  # the oldest ("replay", None, "k0") is gone
        assert rec.bulk_keys[0] == BulkKeyChange("cancel", "acme", "k0", 3, 3, True, t0 + 2)
        assert rec.bulk_keys[-1] == more[-1]
        await s.commit([BulkKeyChange("replay", None, "k0", 7, 7, False, t0 + 10**6)], ep, codec)
        assert (await s.load(codec)).bulk_keys[-1] == BulkKeyChange(
            "replay", None, "k0", 7, 7, False, t0 + 10**6
        )
    finally:
        await s.close()


async def check_unencodable_output(make: Make) -> None:
    s, ep = await leader(make)
    try:
        t0 = now_ns()
        await s.commit(
            [
                Submitted(1, 1, t0, TaskRecord(pool="default", payload=b"1")),
                StatusChange(1, "succeeded", 1, t0 + 1, None, object(), True),
            ],
            ep,
            codec,
        )
        (term,) = (await s.load(codec)).terminal
        assert term.status == "succeeded" and not term.has_output and term.output is None
        assert "output not stored" in term.message
    finally:
        await s.close()


async def check_message_with_surrogates(make: Make) -> None:
    """A task's message with a lone surrogate (an exception naming a file whose name is not
    UTF-8: ``os.fsdecode``) has no UTF-8 form, so neither store could write it: the whole
    commit failed for good and the leader stepped down.  It is stored with U+FFFD instead."""
    s, ep = await leader(make)
    try:
        t0 = now_ns()
        await s.commit([Submitted(1, 1, t0, TaskRecord(pool="default"))], ep, codec)
        message = "cannot read \udcff.txt \ud83d\ude00"  # (the last two: a pair split in two)
        await s.commit([StatusChange(1, "failed", 1, t0 + 1, message)], ep, codec)
        (term,) = (await s.load(codec)).terminal
        assert term.message == "cannot read \ufffd.txt \ufffd\ufffd"
    finally:
        await s.close()


async def check_commit_requires_open(make: Make) -> None:
    s = make()
    with pytest.raises(SchedulerError):
        await s.commit([Submitted(1, 1, 0, TaskRecord(pool="default"))], 1, codec)


# ---------------------------------------------------------------------------------- recovery


def _cfg(time_base: int) -> CoreConfig:
    return CoreConfig(
        [PoolConfig("default", min=1, max=1, autoscale=False)], persist=True, time_base=time_base
    )


def _persisted(core: Core) -> tuple[list[Any], list[Mutation]]:
    acts = core.drain_actions()
    return acts, [a.mutation for a in acts if isinstance(a, Persist)]


async def check_recovery_through_core(make: Make) -> None:
    """running -> retrying (attempt counted), terminal retained with output, key dedup, schedules."""
    s, ep = await leader(make)
    tb = now_ns()
    core = Core(_cfg(tb), epoch=ep)
    o = TaskOptions()
    a, _ = core.submit(0, o, "A", key="a", blob=codec.encode("A"))
    b, _ = core.submit(0, o, "B", key="b", deps=[("a", 0)], blob=codec.encode("B"))
    c, _ = core.submit(0, o, "C", key="c", blob=codec.encode("C"))
    # a daily schedule 12 h away, so its reservation never competes for the single slot
    hour = (time.gmtime().tm_hour + 12) % 24
    cron = CronSchedule(f"0 {hour} * * *")
    spec = RecurringSpec("every-min", cron, 0, TaskOptions(), "R", "rk", None, codec.encode("R"))
    core.add_recurring(0, spec)
    core.tick(0)
    acts, muts = _persisted(core)
    await s.commit(muts, ep, codec)
    lease = next(x.lease for x in acts if isinstance(x, Dispatch) and x.task.id == a)
    core.complete(NS, lease, {"out": 1})
    core.tick(NS)  # a succeeded; b dispatched (running) on the single slot
    _, muts = _persisted(core)
    await s.commit(muts, ep, codec)
    assert core.tasks[b].status_name == "running"
    assert a >> 48 == ep and a & ((1 << 48) - 1) == 1
    await s.close()  # a clean stop: b's attempt was in flight and is not finished

    s2, ep2 = await leader(make)
    try:
        assert ep2 > ep
        rec = await s2.load(codec)
        assert {t.id: t.status for t in rec.tasks}[b] == "running"
        assert [t.id for t in rec.terminal] == [a]
        assert rec.terminal[0].output == {"out": 1}
        assert [sch.spec.name for sch in rec.schedules] == ["every-min"]
        later = 2 * NS
        core2 = Core(_cfg(tb), now=later, epoch=ep2)
        core2.recover(later, rec)
        core2.tick(later)
        _, muts2 = _persisted(core2)
        await s2.commit(muts2, ep2, codec)
        assert core2.tasks[b].status_name == "retrying" and core2.tasks[b].attempt == 1
        assert core2.tasks[a].status_name == "succeeded" and core2.tasks[a].output == {"out": 1}
        assert core2.tasks[c].status_name in ("running", "ready")
        # keys dedup after recovery; new ids carry the new epoch
        assert core2.submit(later, o, "A", key="a") == (a, True)
        assert core2.submit(later, o, "B", key="b") == (b, True)
        nid, dup = core2.submit(later, o, "new", blob=codec.encode("new"))
        assert not dup and nid >> 48 == ep2
        # the recovered schedule's occurrence runs with the decoded payload
        occ = [t for t in core2.tasks.values() if t.key and t.key.startswith("rk")]
        assert occ and all(t.payload == "R" for t in occ)
        _, muts3 = _persisted(core2)
        await s2.commit(muts3, ep2, codec)
        # what recovery persisted is read back: b retrying with its attempt
        rec2 = await s2.load(codec)
        row_b = next(t for t in rec2.tasks if t.id == b)
        assert row_b.status == "retrying" and row_b.attempt == 1
        assert "restart" in (row_b.message or "")
        assert any(t.id == nid and t.payload == "new" for t in rec2.tasks)
    finally:
        await s2.close()


async def check_recurring_chain_across_restart(make: Make) -> None:
    """``overlap="queue_on_success"`` across a restart: a chain broken before it stays broken
    after it, however long ago the failure was (days: the new engine's retention forgets the
    failed occurrence at once); the store keeps the schedule's last occurrence, a load reads it
    back and the next occurrence is created with its edge to it, broken."""
    s, ep = await leader(make)
    tb = now_ns() - 3 * 86400 * NS  # engine zero three days ago; retention 1 h
    core = Core(_cfg(tb), epoch=ep)
    blob = codec.encode("R")
    spec = RecurringSpec("hourly", CronSchedule("0 * * * *"), 3, TaskOptions(), "R", "rk", None, blob)
    first = core.add_recurring(0, spec).last_task_id
    start = core.tasks[first].fixed.start  # type: ignore[union-attr]
    core.tick(start)
    acts, muts = _persisted(core)
    second = core.list_recurring()[0].last_task_id
    lease = next(x.lease for x in acts if isinstance(x, Dispatch) and x.task.id == first)
    core.fail(start + 60 * NS, lease, "bad", permanent=True)
    assert core.tasks[second].status_name == "skipped"
    muts += _persisted(core)[1]
    await s.commit(muts, ep, codec)
    assert core.list_recurring()[0].last_task_id == second
    await s.close()

    s2, ep2 = await leader(make)
    try:
        rec = await s2.load(codec, 3600.0)
        assert second in {t.id for t in rec.terminal}  # (older than the window: a reference)
        later = now_ns() - tb
        core2 = Core(_cfg(tb), now=later, epoch=ep2)
        core2.recover(later, rec)
        assert core2.totals["recurring_conflicts"] == 0
        nxt = core2.tasks[core2.list_recurring()[0].last_task_id]
        assert nxt.id != second and nxt.fixed is not None and nxt.fixed.start > later
        assert (nxt.status_name, nxt.message) == ("skipped", "task already finished")
        assert core2.lookup(later, second) is None  # forgotten by the engine
        await s2.commit(_persisted(core2)[1], ep2, codec)
        row = next(t for t in (await s2.load(codec, 3600.0)).terminal if t.id == nxt.id)
        assert row.status == "skipped" and row.spec is not None and row.spec.deps == [(second, 0)]
    finally:
        await s2.close()


async def check_quarantine(make: Make, corrupt: Callable[[int, str, Any], Any]) -> None:
    """Undecodable payload/definition/output rows are quarantined, never crash recovery."""
    s, ep = await leader(make)
    try:
        t0 = now_ns()
        await s.commit(
            [
                Submitted(1, 1, t0, TaskRecord(pool="default", payload=b"\xff\xfe not json")),
                Submitted(2, 2, t0, TaskRecord(pool="default", payload=codec.encode("ok"))),
                Submitted(3, 3, t0, TaskRecord(pool="default", key="q3", payload=codec.encode("ok"))),
                Submitted(4, 4, t0, TaskRecord(pool="default", payload=codec.encode("ok"))),
                StatusChange(4, "succeeded", 1, t0 + 1, None, "fine", True),
            ],
            ep,
            codec,
        )
        await corrupt(3, "spec", "{not json")
        await corrupt(4, "output", b"\x00garbage")
        rec = await s.load(codec)
        assert [t.id for t in rec.tasks] == [2]
        reasons = dict(rec.quarantined)
        assert set(reasons) == {1, 3, 4}
        assert "payload" in reasons[1] and "definition" in reasons[3] and "output" in reasons[4]
        core = Core(_cfg(t0), now=0, epoch=ep)
        core.recover(0, rec)  # must not raise
        _, muts = _persisted(core)
        quarantines = [m for m in muts if isinstance(m, StatusChange) and m.status == "failed"]
        assert {m.id for m in quarantines} == {1, 3, 4}
        # known from now on as failed tasks with the reason: lookups answer, the key stays taken
        for tid in (1, 3, 4):
            t = core.lookup(0, tid)
            assert t is not None and t.status_name == "failed" and t.message == reasons[tid]
            assert t.output is None
        assert core.lookup(0, "q3") is core.lookup(0, 3)
        assert core.totals["failed"] == 3
        await s.commit(muts, ep, codec)
        rec2 = await s.load(codec)
        assert rec2.quarantined == []
        failed = {t.id: t for t in rec2.terminal if t.status == "failed"}
        assert set(failed) == {1, 3, 4}
        assert "payload" in (failed[1].message or "")
    finally:
        await s.close()


# ---------------------------------------------------------------------------------- retention


async def check_retention(make: Make) -> None:
    s, ep = await leader(make, retention=100.0)
    try:
        now = now_ns()
        old, recent = now - 500 * NS, now - 10 * NS
        muts: list[Mutation] = []
        for i, fin in ((1, old), (2, recent), (3, None)):
            muts.append(Submitted(i, i, old - NS, TaskRecord(pool="default", key=f"k{i}", payload=b"1")))
            if fin is not None:
                muts.append(StatusChange(i, "succeeded", 1, fin, None, i, True))
        await s.commit(muts, ep, codec)
        rec = await s.load(codec)  # expired rows are not loaded even before pruning
        assert [t.id for t in rec.terminal] == [2] and [t.id for t in rec.tasks] == [3]
        assert await s.prune(now) == 1
        assert await s.prune(now) == 0
        assert await s.prune(now + 200 * NS) == 1  # now 2 is past retention too; live 3 stays
        rec = await s.load(codec)
        assert rec.terminal == [] and [t.id for t in rec.tasks] == [3]
    finally:
        await s.close()


async def check_load_window(make: Make) -> None:
    """A load with a ``window`` (the engine's retention) reads the live rows and the rows
    finished within it, plus the older finished rows the loaded state refers to whatever their
    age; every other old row stays in the history (``load_finished``), and without a window
    the store's whole retention is read as before."""
    from cronoq.engine.parking import JournalPut

    s, ep = await leader(make, retention=7 * 86400.0)
    try:
        now = now_ns()
        old = now - 2 * 86400 * NS  # beyond the window, within the store's retention

        def done(i: int, fin: int, key: str | None = None, tenant: str | None = None) -> list[Mutation]:
            spec = TaskRecord(pool="default", key=key, tenant=tenant, payload=codec.encode(i))
            return [
                Submitted(i, i, fin - NS, spec),
                StatusChange(i, "succeeded", 1, fin, None, {"v": i}, True),
            ]

        muts: list[Mutation] = []
        for i in range(1, 41):  # the bulk of the history: nothing refers to them
            muts += done(i, old + i, key=f"k{i}")
        muts += done(50, old + 50)  # parent of a live task by id
        muts += done(51, old + 51, key="pk", tenant="acme")  # the newest holder of "pk" for acme
        muts += done(52, old - NS, key="pk", tenant="acme")  # an older holder of it: not needed
        muts += done(53, old + 53, key="pk")  # another tenant's "pk": not needed
        muts += done(54, old + 54)  # spawned by a live task's journal
        muts += done(55, old + 55)  # the last occurrence of a schedule
        muts += done(56, now - 10 * NS, key="recent")  # within the window
        muts.append(
            Submitted(60, 60, now, TaskRecord(pool="default", tenant="acme", deps=[(50, 0), ("pk", 1)]))
        )
        muts.append(Submitted(61, 61, now, TaskRecord(pool="default")))
        muts.append(StatusChange(61, "running", 1, now))
        muts.append(JournalPut(61, 0, ["spawn", "fp", [54], False], 0))
        muts.append(
            RecurringUpsert(RecurringRecord("nightly", "0 3 * * *", None, 2, TaskRecord(pool="default")))
        )
        muts.append(RecurringNext("nightly", now + 3600 * NS, 55))
        await s.commit(muts, ep, codec)

        rec = await s.load(codec, 3600.0)
        assert sorted(t.id for t in rec.tasks) == [60, 61]
        assert [t.id for t in rec.terminal] == [50, 51, 54, 55, 56]
        assert next(t for t in rec.terminal if t.id == 51).output == {"v": 51}  # (decoded: pinned)
        # the rest of the history is still served from the table
        assert (await s.load_finished(7, codec)).output == {"v": 7}
        assert (await s.load_finished_key("k7", None, codec)).id == 7
        # at most the newest ``limit`` of the window (the engine's retention_max), plus references
        assert [t.id for t in (await s.load(codec, 3600.0, 0)).terminal] == [50, 51, 54, 55]
        assert [t.id for t in (await s.load(codec, 30 * 86400.0, 5)).terminal] == [50, 51, 53, 54, 55, 56]
        # a window longer than the store's retention reads the retention; no window: all of it
        assert len((await s.load(codec, 30 * 86400.0)).terminal) == 47
        assert len((await s.load(codec)).terminal) == 47
    finally:
        await s.close()


async def check_prune_in_batches(make: Make) -> None:
    """A bounded prune deletes the oldest expired rows first, at most ``limit`` of them."""
    s, ep = await leader(make, retention=100.0)
    try:
        now = now_ns()
        muts: list[Mutation] = []
        for i in range(1, 6):  # finished 600, 590, ... 560 s ago: all expired, 1 the oldest
            fin = now - (610 - 10 * i) * NS
            muts.append(Submitted(i, i, fin - NS, TaskRecord(pool="default", key=f"k{i}", payload=b"1")))
            muts.append(StatusChange(i, "succeeded", 1, fin, None, i, True))
        muts.append(Submitted(6, 6, now - NS, TaskRecord(pool="default", key="k6", payload=b"1")))
        await s.commit(muts, ep, codec)
        assert await s.prune(now, 2) == 2
        assert await s.load_finished(1, codec) is None and await s.load_finished(2, codec) is None
        assert await s.load_finished(3, codec) is not None  # (the history still has the newer ones)
        assert [await s.prune(now, 2), await s.prune(now, 2), await s.prune(now, 2)] == [2, 1, 0]
        rec = await s.load(codec)
        assert [t.id for t in rec.tasks] == [6]  # the live task is never pruned
    finally:
        await s.close()


async def check_prune_keeps_references(make: Make) -> None:
    """A prune never deletes an expired row that live state still refers to (what a load
    reads back whatever its age): a live task's parent by id, the newest holder of a key it
    names, what a live journal spawned or waits for, a schedule's last occurrence; every other
    expired row goes, in batches too, and a reference goes with the live state that made it."""
    from cronoq.engine.parking import JournalDrop, JournalPut

    s, ep = await leader(make, retention=7 * 86400.0)
    try:
        now = now_ns()
        old = now - 8 * 86400 * NS  # past the store's retention

        def done(
            i: int, fin: int, key: str | None = None, tenant: str | None = None, **kw: Any
        ) -> list[Mutation]:
            spec = TaskRecord(pool="default", key=key, tenant=tenant, payload=codec.encode(i), **kw)
            return [
                Submitted(i, i, fin - NS, spec),
                StatusChange(i, "succeeded", 1, fin, None, {"v": i}, True),
            ]

        muts: list[Mutation] = []
        for i in range(1, 41):  # nothing refers to them
            muts += done(i, old + i, key=f"k{i}")
        muts += done(50, old + 50)  # parent of a live task by id
        muts += done(51, old + 51, key="pk", tenant="acme")  # the newest holder of "pk" for acme
        muts += done(52, old - NS, key="pk", tenant="acme")  # an older holder of it: not needed
        muts += done(53, old + 53, key="pk")  # another tenant's "pk": not needed
        muts += done(54, old + 54)  # spawned by a live task's journal
        muts += done(55, old + 55)  # the last occurrence of a schedule
        muts += done(56, now - 10 * NS, key="recent")  # not expired
        muts += done(57, old + 57)  # awaited by a live task's journal
        muts += done(58, old + 58)  # the parent of a task that has finished: not needed
        muts += done(59, old + 59, deps=[(58, 0)])
        muts.append(
            Submitted(60, 60, now, TaskRecord(pool="default", tenant="acme", deps=[(50, 0), ("pk", 1)]))
        )
        muts.append(Submitted(61, 61, now, TaskRecord(pool="default")))
        muts.append(StatusChange(61, "running", 1, now))
        muts.append(JournalPut(61, 0, ["spawn", "fp", [54], False], 0))
        muts.append(JournalPut(61, 1, ["step", "s", [50, 58]], 0))  # (a step's result names no task)
        muts.append(JournalPut(61, 2, ["wait", "", [57]], 0))
        muts.append(
            RecurringUpsert(RecurringRecord("nightly", "0 3 * * *", None, 2, TaskRecord(pool="default")))
        )
        muts.append(RecurringNext("nightly", now + 3600 * NS, 55))
        await s.commit(muts, ep, codec)

        kept = [50, 51, 54, 55, 57]
        assert [await s.prune(now, 10) for _ in range(5)] == [10, 10, 10, 10, 4]  # 44, the oldest first
        for i in (*kept, 56):
            assert (await s.load_finished(i, codec)).output == {"v": i}, i
        for i in (1, 40, 52, 53, 58, 59):
            assert await s.load_finished(i, codec) is None, i
        rec = await s.load(codec, 3600.0)  # a restart still reads what the live state needs
        assert [t.id for t in rec.terminal] == [50, 51, 54, 55, 56, 57]
        assert sorted(t.id for t in rec.tasks) == [60, 61]

        # once the live state that referred to them is gone, they go like the rest
        await s.commit(
            [
                StatusChange(60, "succeeded", 1, now, None, None, True),
                StatusChange(61, "succeeded", 1, now, None, None, True),
                JournalDrop(61),
                RecurringNext("nightly", now + 3600 * NS, 56),
            ],
            ep,
            codec,
        )
        assert await s.prune(now) == len(kept)
        assert [t.id for t in (await s.load(codec)).terminal] == [56, 60, 61]
    finally:
        await s.close()


async def check_prune_reads_changed_definitions_again(make: Make) -> None:
    """A prune parses only the live definitions with edges it has not seen with the same text
    (the store's ``RefsCache``): one written again under its id with other edges is read anew,
    so the row it named before may go and the one it names now stays."""
    s, ep = await leader(make, retention=100.0)
    try:
        now = now_ns()
        old = now - 500 * NS

        def done(i: int) -> list[Mutation]:
            return [
                Submitted(i, i, old - NS, TaskRecord(pool="default")),
                StatusChange(i, "succeeded", 1, old),
            ]

        muts = done(1) + done(2) + done(3)
        muts.append(Submitted(10, 10, now, TaskRecord(pool="default", deps=[(1, 0)])))
        muts.append(Submitted(11, 11, now, TaskRecord(pool="default", deps=[(2, 0)])))
        await s.commit(muts, ep, codec)
        assert await s.prune(now) == 1  # 3; 1 and 2 are named by live tasks
        assert s._refs.parsed == 2
        await s.commit(done(4), ep, codec)
        assert await s.prune(now) == 1  # 4
        assert s._refs.parsed == 2  # (nothing new to parse)
        rewritten = Submitted(11, 11, now, TaskRecord(pool="default", deps=[(1, 0)]))  # (the same id)
        await s.commit([*done(5), rewritten], ep, codec)
        assert await s.prune(now) == 2  # 5, and 2: 11 names 1 now
        assert s._refs.parsed == 3
        assert await s.load_finished(1, codec) is not None and await s.load_finished(2, codec) is None
    finally:
        await s.close()


# ---------------------------------------------------------------------------------- leadership


async def check_epochs_increase(make: Make) -> None:
    seen: list[int] = []
    a = await opened(make)
    b = await opened(make)
    try:
        seen.append(await a.acquire())
        seen.append(await a.acquire())  # re-acquiring starts a new term
        await a.release()
        seen.append(await b.acquire())
        await b.release()
        seen.append(await a.acquire())
        assert seen == sorted(seen) and len(set(seen)) == len(seen) and seen[0] >= 1
        assert a.epoch == seen[-1]
    finally:
        await a.close()
        await b.close()
    c = await opened(make)  # epochs survive a full close/reopen
    try:
        assert await c.acquire() > seen[-1]
    finally:
        await c.close()


async def check_standby_takes_over_on_release(make: Make) -> None:
    a, ea = await leader(make)
    b = await opened(make, lock_poll=0.05)
    try:
        assert await a.is_leader()
        with pytest.raises(SchedulerError):
            await b.acquire(wait=False)
        waiting = asyncio.ensure_future(b.acquire())
        await asyncio.sleep(0.3)
        assert not waiting.done()  # a standby blocks while the leader lives
        t = time.monotonic()
        await a.release()
        eb = await asyncio.wait_for(waiting, SAFETY)
        assert time.monotonic() - t < 2.0  # at once (within a poll), not after a lease ttl
        assert eb > ea
        assert await b.is_leader() and not await a.is_leader()
        with pytest.raises(Fenced):
            await a.commit([Submitted(9, 9, 0, TaskRecord(pool="default"))], ea, codec)
        await b.commit([Submitted(9, 9, 0, TaskRecord(pool="default"))], eb, codec)
        # the old leader's write never landed; the new leader's did
        assert [t.id for t in (await b.load(codec)).tasks] == [9]
    finally:
        await a.close()
        await b.close()


async def check_standby_takes_over_on_loss(make: Make, lose: Callable[[Any], Any], **kw: Any) -> None:
    """The leader stops renewing (hang/crash): the standby takes over; old commits are Fenced."""
    a, ea = await leader(make, **kw)
    b = await opened(make, lock_poll=0.05, **kw)
    try:
        await a.commit([Submitted(1, 1, 0, TaskRecord(pool="default", payload=b"1"))], ea, codec)
        waiting = asyncio.ensure_future(b.acquire())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await lose(a)
        eb = await asyncio.wait_for(waiting, SAFETY)
        assert eb > ea
        with pytest.raises(Fenced):
            await a.commit([StatusChange(1, "running", 1, 5)], ea, codec)
        rec = await b.load(codec)
        assert [(t.id, t.status) for t in rec.tasks] == [(1, "submitted")]
        assert await b.is_leader() and not await a.is_leader()
    finally:
        await a.close()
        await b.close()


async def check_close_releases(make: Make) -> None:
    a, _ = await leader(make)
    await a.close()
    await a.close()  # idempotent
    b = await opened(make)
    try:
        await asyncio.wait_for(b.acquire(wait=False), SAFETY)  # free at once after close
    finally:
        await b.close()


# ---------------------------------------------------------------------------------- operations


async def check_pause_and_replay_survive_restart(make: Make) -> None:
    """docs/how-to/operations.md: paused pools/schedules and replay links come back on recovery,
    and a replay's payload can be read back (``load_payload``)."""
    from cronoq.engine import control, replay

    s, ep = await leader(make)
    tb = now_ns()
    core = Core(_cfg(tb), epoch=ep)
    o = TaskOptions()
    a, _ = core.submit(0, o, {"p": 1}, key="k", blob=codec.encode({"p": 1}))
    core.cancel(0, a)
    spec = RecurringSpec(
        "nightly", CronSchedule("0 3 * * *"), 0, TaskOptions(), "R", None, None, codec.encode("R")
    )
    core.add_recurring(0, spec)
    control.set_pool_paused(core, 0, "default", True)
    control.set_recurring_paused(core, "nightly", True)
    _, muts = _persisted(core)
    await s.commit(muts, ep, codec)
    blob = await s.load_payload(a)
    assert blob is not None and codec.decode(blob) == {"p": 1}
    assert await s.load_payload(123456789) is None
    r = replay.replay(core, 0, core.tasks[a], codec.decode(blob), blob)
    _, muts = _persisted(core)
    await s.commit(muts, ep, codec)
    await s.close()

    s2, ep2 = await leader(make)
    try:
        rec = await s2.load(codec)
        assert sorted(rec.paused) == [("pool", "default"), ("recurring", "nightly")]
        core2 = Core(_cfg(tb), now=NS, epoch=ep2)
        core2.recover(NS, rec)
        assert core2.pools[0].paused and "nightly" in core2.recurring.paused
        assert replay.replayed_by(core2.tasks[a]) == r and replay.replay_of(core2.tasks[r]) == a
        assert core2.keys.find("k") == r
        core2.tick(NS)
        assert core2.tasks[r].status_name == "ready"  # paused: nothing dispatched
        # resuming is durable too
        control.set_pool_paused(core2, NS, "default", False)
        control.set_recurring_paused(core2, "nightly", False)
        _, muts = _persisted(core2)
        await s2.commit(muts, ep2, codec)
        assert (await s2.load(codec)).paused == []
    finally:
        await s2.close()


async def check_sharded_ids(make: Make) -> None:
    """docs/how-to/shards.md: ids of shard 200 (the sign bit of the signed id column) are stored
    and read back as the same uint64 ids, in id order; deps and a schedule's last id too."""
    s, ep = await leader(make, shard="b")
    tb = now_ns()
    core = Core(_cfg(tb), epoch=ep, shard=200)
    o = TaskOptions()
    a, _ = core.submit(0, o, "A", key="a", blob=codec.encode("A"))
    b, _ = core.submit(0, o, "B", key="b", deps=[("a", 0)], blob=codec.encode("B"))
    assert a >> 56 == 200 and (a >> 40) & 0xFFFF == ep and a & ((1 << 40) - 1) == 1
    assert b == a + 1 and a >= 1 << 63
    core.tick(0)
    _, muts = _persisted(core)
    await s.commit(muts, ep, codec)
    await s.close()
    s2, ep2 = await leader(make, shard="b")
    try:
        rec = await s2.load(codec)
        assert [t.id for t in rec.tasks] == [a, b]
        core2 = Core(_cfg(tb), epoch=ep2, shard=200)
        core2.recover(0, rec)
        assert core2.submit(0, o, "B", key="b") == (b, True)
        nid, _ = core2.submit(0, o, "C", blob=codec.encode("C"))
        assert nid >> 56 == 200 and nid > b
    finally:
        await s2.close()


async def check_store_of_another_shard_refused(make: Make) -> None:
    """docs/how-to/shards.md: a store already used by one shard refuses another shard."""
    from cronoq.store.base import ShardMismatch

    s = await opened(make, shard="a")
    await s.close()
    other = make(shard="b")
    try:
        with pytest.raises(ShardMismatch, match="belongs to shard 'a', not 'b'"):
            await other.open()
    finally:
        await other.close()
    s3 = await opened(make, shard="a")  # its own shard still opens it
    await s3.close()
