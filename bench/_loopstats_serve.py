"""``cronoq serve`` with event-loop and group-commit counters (a child of ``bench/server.py``
when ``CRONOQ_BENCH_LOOPSTATS=1``; not a benchmark by itself, nothing here is reachable from a
config file).

    python bench/_loopstats_serve.py serve --config PATH

Counts, for the server's event loop: its iterations (one ``select()`` each), the seconds it
spent idle in ``select()``, and of those the seconds while a group commit was in flight
(``runtime.durable.Committer._commit`` running: the loop had nothing else to do while the
store's thread, or the database, worked); the committer's commits, their mutations and
seconds; and the SQLite store's ``_commit_sync`` (the commit's own work, on whichever thread
runs it): its wall and CPU seconds; and the cyclic garbage collector's passes and seconds (on
whichever thread collected).  On SIGUSR2 the process prints ``LOOPSTATS <iterations> <idle s>
<idle in commit s> <commits> <mutations> <commit s> <sync s> <sync CPU s> <syncs> <gc passes>
<gc s>`` to stderr (the server log); ``bench/stores_ab.py`` turns them into per-task figures.
With ``CRONOQ_BENCH_LOOPTRACE=1`` the last 200,000 events (``SubmitMany`` and ``SubmitBatch``
in and answered, the committer's ``add``, commits begun and returned, ``_commit_sync`` begun
and ended, idle spells over 50 us) also go to ``looptrace.json`` in the server's directory at
each SIGUSR2: a timeline of the phases of ack-after-commit.  The counting costs a little (a Python call per
loop iteration and per commit): read the figures as a structure, not as the store's speed.
"""

from __future__ import annotations

import collections
import json
import os
import selectors
import signal
import sys
import time
from typing import Any

from cronoq.runtime.durable import Committer


class _Stats:
    iterations = 0
    idle = 0.0
    idle_commit = 0.0
    commits = 0
    mutations = 0
    commit_s = 0.0
    in_commit = 0
    sync_s = 0.0  # SqliteStore._commit_sync: wall seconds on whichever thread ran it
    sync_cpu = 0.0  # and that thread's CPU seconds in it
    sync_n = 0
    gc_n = 0  # the cyclic garbage collector's passes
    gc_s = 0.0  # and their seconds (on whichever thread collected)


#: ``CRONOQ_BENCH_LOOPTRACE=1``: the last events (perf_counter, what, size) are written to
#: ``looptrace.json`` in the server's directory at each SIGUSR2
TRACE: collections.deque[tuple[float, str, int]] | None = (
    collections.deque(maxlen=200_000) if os.environ.get("CRONOQ_BENCH_LOOPTRACE") else None
)


def _ev(what: str, n: int = 0) -> None:
    if TRACE is not None:
        TRACE.append((time.perf_counter(), what, n))


def _patch() -> None:
    sel = selectors.DefaultSelector
    real_select = sel.select

    def select(self: Any, timeout: float | None = None) -> Any:
        t0 = time.perf_counter()
        try:
            return real_select(self, timeout)
        finally:
            dt = time.perf_counter() - t0
            _Stats.iterations += 1
            if TRACE is not None and dt > 50e-6:
                TRACE.append((t0, "idle", round(dt * 1e6)))
            _Stats.idle += dt
            if _Stats.in_commit:
                _Stats.idle_commit += dt

    sel.select = select  # type: ignore[method-assign]
    real_commit = Committer._commit

    async def commit(self: Committer, batch: list[Any]) -> BaseException | None:
        t0 = time.perf_counter()
        _ev("commit", len(batch))
        _Stats.in_commit += 1
        try:
            return await real_commit(self, batch)
        finally:
            _Stats.in_commit -= 1
            _ev("committed", len(batch))
            _Stats.commit_s += time.perf_counter() - t0
            _Stats.commits += 1
            _Stats.mutations += len(batch)

    Committer._commit = commit  # type: ignore[method-assign]
    if TRACE is not None:
        real_add = Committer.add

        def add(self: Committer, mutations: list[Any]) -> None:
            _ev("add", len(mutations))
            real_add(self, mutations)

        Committer.add = add  # type: ignore[method-assign]
    from cronoq.store.sqlite import SqliteStore

    real_sync = SqliteStore._commit_sync

    def commit_sync(self: Any, *args: Any) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        _ev("sync", len(args[0]))
        try:
            return real_sync(self, *args)
        finally:
            _ev("synced", len(args[0]))
            _Stats.sync_s += time.perf_counter() - t0
            _Stats.sync_cpu += time.thread_time() - c0
            _Stats.sync_n += 1

    SqliteStore._commit_sync = commit_sync  # type: ignore[method-assign]
    from cronoq.server.app import ServerApp

    def traced(method: str, start: str, end: str) -> None:
        """``ServerApp.<method>(principal, specs)`` marked ``start`` and ``end`` on the timeline."""
        real = getattr(ServerApp, method)

        async def call(self: Any, principal: Any, specs: Any) -> Any:
            _ev(start, len(specs))
            try:
                return await real(self, principal, specs)
            finally:
                _ev(end, len(specs))

        setattr(ServerApp, method, call)

    traced("submit_many", "many", "answer")
    traced("submit_batch", "batch", "batched")


def _gc_patch() -> None:
    """Count the cyclic garbage collector's passes and their seconds (``gc.callbacks``)."""
    import gc

    started = [0.0]

    def cb(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            _Stats.gc_n += 1
            _Stats.gc_s += time.perf_counter() - started[0]

    gc.callbacks.append(cb)


def _report(signum: int, frame: object) -> None:
    s = _Stats
    sys.stderr.write(
        f"LOOPSTATS {s.iterations} {s.idle:.6f} {s.idle_commit:.6f} {s.commits} {s.mutations} "
        f"{s.commit_s:.6f} {s.sync_s:.6f} {s.sync_cpu:.6f} {s.sync_n} {s.gc_n} {s.gc_s:.6f}\n"
    )
    sys.stderr.flush()
    if TRACE is not None:
        with open("looptrace.json", "w") as f:
            json.dump(list(TRACE), f)


def main() -> None:
    _patch()
    _gc_patch()
    signal.signal(signal.SIGUSR2, _report)
    from cronoq.cli import main as cli_main

    cli_main(sys.argv[1:])


if __name__ == "__main__":
    main()
