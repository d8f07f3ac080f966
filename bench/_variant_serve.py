"""``cronoq serve`` with a diagnostic stand-in for the SQLite store's commit (a child of
``bench/server.py``, not a benchmark by itself; nothing here is reachable from a config file).

    python bench/_variant_serve.py VARIANT serve --config PATH

``VARIANT`` (``bench/server.py --stores`` names them ``sqlite-<VARIANT>``):

``real``
    The SQLite store as it is, with the commit counters below.
``exec``
    As ``real``, with every commit handed to the store's thread (``SqliteStore.inline_below``
    0: no small commit runs inline on the event loop's thread): the A side of that change.
``nogather``
    As ``real``, with the group commit's ``gather`` wait 0 (``runtime.durable.Committer``: a
    small commit right after the previous one does not wait 1 ms for more).
``delay``
    The store's ``commit()`` only awaits ``asyncio.sleep(D)``: an acknowledgement delayed as long
    as a real commit's, with no thread and no database write (the gRPC / event-loop side of a
    delayed ack alone).
``thread``
    The store's ``commit()`` hands a ``time.sleep(D)`` to the store's own single-thread executor,
    as the real commit hands ``_commit_sync`` to it: the thread hand-off and the GIL traffic of a
    commit thread without its work.
``fold``
    As ``thread``, and the commit thread also builds the rows (``_records.fold``): the Python
    part of a commit's work without SQLite.

``D`` is ``CRONOQ_BENCH_COMMIT_DELAY_MS`` (default 1.5 ms, about a real commit's latency under
the throughput group's load). Everything else (the lease, ``load()``, the queries) is the real
SQLite store's, so the server runs its durable paths (``Persist`` actions, the group commit, the
barriers before every acknowledgement) in every variant.

On SIGUSR2 the process prints ``COMMITSTATS <commits> <mutations> <seconds>`` to stderr (the
server log): the store's commit calls so far, the mutations they carried and the seconds they
took, summed (each from the call to its return, on the event loop).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

from cronoq.runtime.durable import Committer
from cronoq.store import _records
from cronoq.store.sqlite import SqliteStore

VARIANTS = ("real", "exec", "nogather", "delay", "thread", "fold")


class _Stats:
    commits = 0
    mutations = 0
    seconds = 0.0


def _patch(variant: str) -> None:
    delay = float(os.environ.get("CRONOQ_BENCH_COMMIT_DELAY_MS", "1.5")) / 1000.0
    real = SqliteStore.commit
    if variant == "exec":
        SqliteStore.inline_below = 0
        variant = "real"
    elif variant == "nogather":
        init = Committer.__init__

        def no_gather(self: Committer, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            self.gather = 0.0

        Committer.__init__ = no_gather  # type: ignore[method-assign]
        variant = "real"

    async def inner(self: SqliteStore, mutations: list[Any], epoch: int, codec: Any) -> None:
        if variant == "real":
            await real(self, mutations, epoch, codec)
        elif variant == "delay":
            await asyncio.sleep(delay)
        elif variant == "thread":
            await self._submit(time.sleep, delay)
        else:

            def work() -> None:
                _records.fold(mutations, codec)
                time.sleep(delay)

            await self._submit(work)

    async def commit(self: SqliteStore, mutations: list[Any], epoch: int, codec: Any) -> None:
        t0 = time.perf_counter()
        await inner(self, mutations, epoch, codec)
        _Stats.seconds += time.perf_counter() - t0
        _Stats.commits += 1
        _Stats.mutations += len(mutations)

    SqliteStore.commit = commit  # type: ignore[method-assign]


def _report(signum: int, frame: object) -> None:
    sys.stderr.write(f"COMMITSTATS {_Stats.commits} {_Stats.mutations} {_Stats.seconds:.6f}\n")
    sys.stderr.flush()


def main() -> None:
    variant = sys.argv[1]
    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    _patch(variant)
    signal.signal(signal.SIGUSR2, _report)
    from cronoq.cli import main as cli_main

    cli_main(sys.argv[2:])


if __name__ == "__main__":
    main()
