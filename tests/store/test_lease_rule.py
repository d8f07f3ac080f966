"""The lease rule: a leader knows, without asking the store, when its lease may lapse.

``lease_left(store)`` is ``lease_ttl`` from the start of the last successful renewal, less the
time since: a leader whose event loop froze (or whose store went silent) sees it at or below
zero the moment it runs again, *before* its renewer could notice anything, and never later
than a standby could have taken over.  The server answers ``/readyz`` 200 only while it is
above a margin (``ServerApp.ready``), so two servers are never ready at once.  The freezes
below are deliberate: ``time.sleep`` on the leader's loop *is* the fault being probed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from cronoq.store import SqliteStore
from cronoq.store.base import lease_left

from .test_postgres import DSN, make, schema  # noqa: F401  (fixtures)


def _standby_in_thread(make_store: Any) -> tuple[threading.Thread, threading.Event]:
    """A second instance in its own thread and loop, blocking in ``acquire`` until it leads."""
    took = threading.Event()

    async def run() -> None:
        s = make_store()
        await s.open()
        try:
            await asyncio.wait_for(s.acquire(), 30)
            took.set()
        finally:
            await s.close()

    t = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    t.start()
    return t, took


async def test_sqlite_healthy_leader_keeps_its_lease(tmp_path: Path) -> None:
    a = SqliteStore(tmp_path / "db", lease_ttl=1.0, lease_renew=0.1)
    await a.open()
    try:
        assert lease_left(a) is None  # not leading yet
        await a.acquire()
        for _ in range(5):
            await asyncio.sleep(0.1)
            left = lease_left(a)
            assert left is not None and left > 0.5
    finally:
        await a.close()
    assert lease_left(a) is None


async def test_sqlite_frozen_leader_knows_its_lease_lapsed(tmp_path: Path) -> None:
    path = tmp_path / "db"
    a = SqliteStore(path, lease_ttl=1.0, lease_renew=0.2, lock_poll=0.05)
    await a.open()
    await a.acquire()
    thread, took = _standby_in_thread(
        lambda: SqliteStore(path, lease_ttl=1.0, lease_renew=0.2, lock_poll=0.05)
    )
    try:
        # the leader's loop freezes (a blocking wait) until the standby has taken over
        assert took.wait(30), "the standby did not take over during the freeze"
        # the first thing the old leader runs after the freeze: its renewer has not run yet
        assert a.leading
        left = lease_left(a)
        assert left is not None and left <= 0
    finally:
        thread.join(30)
        await a.close()


async def test_postgres_silent_leader_loses_the_lock_on_schedule(make: Any) -> None:  # noqa: F811
    """The lock session runs with ``idle_session_timeout = lease_ttl``: a leader whose pings
    stop (frozen loop, silent network) loses the lock then, and knows it by then."""
    a = make(lease_ttl=2.0, keepalive=0.2, lock_poll=0.05)
    await a.open()
    await a.acquire()
    thread, took = _standby_in_thread(lambda: make(lease_ttl=2.0, keepalive=0.2, lock_poll=0.05))
    try:
        # the leader's loop freezes (blocking waits): no ping reaches the database
        t0 = time.monotonic()
        assert not took.wait(1.0), "the lock lapsed before lease_ttl"
        left = lease_left(a)
        assert left is not None and left > 0
        # past lease_ttl without a ping the database ends the lock session; the standby gets it
        assert took.wait(30), "the standby did not get the lock after lease_ttl"
        assert time.monotonic() - t0 >= 2.0 - 0.2 - 0.1, "the lock lapsed before lease_ttl"
        left = lease_left(a)
        assert left is not None and left <= 0
    finally:
        thread.join(30)
        await a.close()
