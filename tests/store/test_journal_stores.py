"""Journals and signals in the real SQLite and PostgreSQL stores (store/_journal.py,
docs/how-to/durable.md#durability): records upserted and read back in order, the park
marker, a spawn's children committed with its record, dropped journals, signals within
retention."""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest

from cronoq.engine.mutations import StatusChange, Submitted, TaskRecord
from cronoq.engine.parking import PARK_INDEX, JournalDrop, JournalPut, SignalPut
from cronoq.store import SqliteStore

from .contract import codec, leader
from .test_postgres import make as pg_make  # noqa: F401 (fixture)
from .test_postgres import schema  # noqa: F401 (fixture)


@pytest.fixture
def sqlite_make(tmp_path: pathlib.Path) -> Any:
    def factory(**kw: Any) -> SqliteStore:
        kw.setdefault("lease_ttl", 2.0)
        kw.setdefault("lease_renew", 0.5)
        kw.setdefault("lock_poll", 0.05)
        return SqliteStore(tmp_path / "j.db", **kw)

    return factory


async def check_journals(make: Any) -> None:
    s, ep = await leader(make)
    try:
        t0 = time.time_ns()
        spec = TaskRecord(pool="default", payload=codec.encode("p"))
        child = TaskRecord(pool="default", payload=codec.encode("c"))
        await s.commit([Submitted(1, 1, t0, spec), StatusChange(1, "running", 1, t0 + 1)], ep, codec)
        kids = [
            Submitted(2, 2, t0 + 2, child),
            Submitted(3, 3, t0 + 2, child),
            StatusChange(3, "running", 1, t0 + 3),
        ]
        await s.commit(
            [
                JournalPut(1, 0, ["spawn", "fp", [2, 3], False], 0, kids),
                JournalPut(1, 1, ["wait", "", [2, 3]], 0),
                JournalPut(1, PARK_INDEX, ["park", "", 0], 0),
                SignalPut("approve-1", {"ok": True}, t0),
                SignalPut("old", 1, t0 - 10**15),  # long past retention
                Submitted(4, 4, t0 + 4, spec),
                JournalPut(4, 0, ["step", "a", [1, 2]], 0),
            ],
            ep,
            codec,
        )
        await s.commit([JournalPut(4, 1, ["step", "b", None], 2), JournalDrop(4)], ep, codec)
        rec = await s.load(codec)
        assert {t.id for t in rec.tasks} == {1, 2, 3, 4}
        assert next(t for t in rec.tasks if t.id == 3).status == "running"  # the child's later change
        assert rec.journals == {1: ([["spawn", "fp", [2, 3], False], ["wait", "", [2, 3]]], 0, 0)}
        assert rec.signals == [("approve-1", {"ok": True}, t0)]
        await s.commit(
            [JournalPut(1, PARK_INDEX, ["park", "", None], 1), SignalPut("approve-1", 2, t0 + 5)], ep, codec
        )
        rec = await s.load(codec)
        assert rec.journals[1][1:] == (1, None)
        assert rec.signals == [("approve-1", 2, t0 + 5)]
    finally:
        await s.close()


async def check_spawn_cancels_a_task_started_in_its_group(make: Any) -> None:
    # a spawn's child whose on_limit policy cancels task 2, whose start is in the same group
    # before the spawn (engine/parking.py: the cancellation travels in JournalPut.before):
    # the store keeps the cancellation (it stored task 2 running: run again after a restart)
    s, ep = await leader(make)
    try:
        t0 = time.time_ns()
        spec = TaskRecord(pool="default", payload=codec.encode("p"))
        await s.commit([Submitted(1, 1, t0, spec), Submitted(2, 2, t0, spec)], ep, codec)
        msg = "cancelled: resource key 'k:a' took a newer task in its place"
        before = [Submitted(3, 3, t0 + 2, spec), StatusChange(2, "cancelled", 1, t0 + 2, msg)]
        await s.commit(
            [
                StatusChange(1, "running", 1, t0 + 1),
                StatusChange(2, "running", 1, t0 + 1),
                JournalPut(1, 0, ["spawn", "fp", [3], False], 0, before),
            ],
            ep,
            codec,
        )
        rec = await s.load(codec)
        assert {t.id: t.status for t in rec.tasks} == {1: "running", 3: "submitted"}
        (two,) = (t for t in rec.terminal if t.id == 2)
        assert (two.status, two.message, two.started, two.finished) == ("cancelled", msg, t0 + 1, t0 + 2)
    finally:
        await s.close()


async def test_sqlite_spawn_cancels_a_task_started_in_its_group(sqlite_make: Any) -> None:
    await check_spawn_cancels_a_task_started_in_its_group(sqlite_make)


async def test_postgres_spawn_cancels_a_task_started_in_its_group(pg_make: Any) -> None:  # noqa: F811
    await check_spawn_cancels_a_task_started_in_its_group(pg_make)


async def test_sqlite_journals(sqlite_make: Any) -> None:
    await check_journals(sqlite_make)


async def test_postgres_journals(pg_make: Any) -> None:  # noqa: F811
    await check_journals(pg_make)


async def check_lone_surrogates(make: Any) -> None:
    """A step's result or a signal's payload with a lone surrogate (a file name that is not
    UTF-8, from ``os.fsdecode``) is JSON (``json.dumps`` escapes it), but its text was written
    unescaped, which neither store can encode: the whole commit failed for good and the leader
    stepped down.  It is written escaped, and reads back the same."""
    s, ep = await leader(make)
    try:
        t0 = time.time_ns()
        spec = TaskRecord(pool="default", payload=codec.encode("p"))
        await s.commit([Submitted(1, 1, t0, spec), StatusChange(1, "running", 1, t0 + 1)], ep, codec)
        odd = "name \udcff.txt, caf\u00e9"
        await s.commit(
            [JournalPut(1, 0, ["step", "read", odd], 0), SignalPut("sig", {"p": odd}, t0)], ep, codec
        )
        rec = await s.load(codec)
        assert rec.journals[1][0] == [["step", "read", odd]]
        assert rec.signals == [("sig", {"p": odd}, t0)]
    finally:
        await s.close()


async def test_sqlite_lone_surrogates(sqlite_make: Any) -> None:
    await check_lone_surrogates(sqlite_make)


async def test_postgres_lone_surrogates(pg_make: Any) -> None:  # noqa: F811
    await check_lone_surrogates(pg_make)
