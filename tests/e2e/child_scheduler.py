"""A cronoq Scheduler on a durable store, driven as a child process by the e2e tests.

Not a test module: ``tests/e2e/test_crash_safety.py`` and ``test_leader_failover_store.py``
start it with ``python child_scheduler.py ...`` and read its stdout, one event per line,
flushed as it happens::

    START <pid>                     the process is up (before start())
    LEADER <epoch>                  Scheduler.start() returned: this process leads
    ACK <key> <id> <dup 0|1>        ``await submit(..., key=key)`` returned (acknowledged)
    ERR <key> <ExcType> <message>   a submit failed (not acknowledged)
    WRITEERR <ExcType> <message>    a store commit raised (e.g. Fenced)
    FENCED <message>                the scheduler stepped down (``on_fenced`` hook)
    IDLE <live>                     no live task left (``--idle``/``--drain``)
    DONE                            clean shutdown finished

On SIGUSR1 it writes every asyncio task's stack and every thread's to stderr and then
``STACKS`` to stdout: the harness asks for that when a child does not exit in time.

Modes: by default it submits keys ``<prefix>-<n>`` from ``--submitters`` concurrent coroutines
until killed (or ``--count`` keys in all).  ``--resubmit K1,K2`` first submits those keys again
(dedup across restarts).  ``--idle`` submits nothing and exits once every task is terminal.
``--drain`` waits for idle after submitting ``--count`` keys and then keeps leading until
stdin closes.  The executor sleeps ``--exec-ms`` (a random 1..N ms) and returns its payload.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

try:
    import cronoq  # noqa: F401
except ImportError:  # pragma: no cover - not installed: use this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from cronoq import Pool, RetryPolicy, Scheduler
from cronoq.store import PostgresStore, SqliteStore


def out(*parts: object) -> None:
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def make_store(a: argparse.Namespace) -> Any:
    if a.store == "sqlite":
        return SqliteStore(
            a.path,
            lease_ttl=a.lease_ttl,
            lease_renew=a.lease_renew,
            lock_poll=a.lock_poll,
            full_sync=not a.no_full_sync,
        )
    return PostgresStore(a.dsn, schema=a.schema, lock_poll=a.lock_poll, keepalive=a.keepalive)


def dump_stacks() -> None:
    """Every asyncio task's stack and every thread's, to stderr (a hung child's diagnosis)."""
    for task in asyncio.all_tasks():
        print(f"task {task!r}", file=sys.stderr)
        aw: Any = task.get_coro()
        while aw is not None:  # the whole await chain (a task's own stack shows its top frame only)
            frame = getattr(aw, "cr_frame", None) or getattr(aw, "gi_frame", None)
            if frame is None:
                print(f"  awaits {aw!r}", file=sys.stderr)
                break
            print(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}", file=sys.stderr)
            aw = getattr(aw, "cr_await", None) or getattr(aw, "gi_yieldfrom", None)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()
    out("STACKS")


async def main(a: argparse.Namespace) -> int:
    out("START", os.getpid())
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_stacks)
    rng = random.Random(os.getpid())
    exec_s = a.exec_ms / 1000.0

    async def run(ctx: Any, payload: Any) -> Any:
        await asyncio.sleep(rng.uniform(exec_s / 4, exec_s))
        return payload

    pool = Pool(
        "work",
        run,
        min=a.slots,
        max=a.slots,
        retry=RetryPolicy(max_attempts=1000, initial_backoff=0.01, max_backoff=0.05, jitter=False),
    )
    store = make_store(a)
    store_commit = store.commit

    async def commit(mutations: Any, epoch: int, codec: Any) -> None:  # report refused writes
        try:
            await store_commit(mutations, epoch, codec)
        except Exception as e:
            out("WRITEERR", type(e).__name__, str(e).replace("\n", " "))
            raise

    store.commit = commit
    sched = Scheduler([pool], store=store)
    stepped_down = asyncio.Event()

    def on_fenced(err: BaseException) -> None:
        out("FENCED", f"{type(err).__name__}: {err}".replace("\n", " "))
        stepped_down.set()

    sched.on_fenced = on_fenced
    await sched.start()
    out("LEADER", sched._store.epoch)

    async def submit(key: str) -> bool:
        try:
            h = await sched.submit({"key": key}, key=key)
        except Exception as e:
            out("ERR", key, type(e).__name__, str(e).replace("\n", " "))
            return False
        out("ACK", key, h.id, int(h.duplicate))
        return True

    for key in filter(None, a.resubmit.split(",")):
        if not await submit(key):
            await stepped_down.wait()
            return 3

    if not a.idle:
        counter = iter(range(a.count if a.count > 0 else 1 << 62))

        async def submitter() -> None:
            for n in counter:
                if not await submit(f"{a.prefix}-{n}"):
                    return
                if a.pace_ms:
                    await asyncio.sleep(a.pace_ms / 1000.0)

        await asyncio.gather(*(submitter() for _ in range(a.submitters)))
        if stepped_down.is_set() or not sched.started:
            await stepped_down.wait()
            return 3
        if not a.drain:
            await sched.shutdown()
            out("DONE")
            return 0

    while (await sched.snapshot()).live_tasks:  # idle: every task terminal
        await asyncio.sleep(0.02)
        if stepped_down.is_set():
            return 3
    out("IDLE", 0)
    if a.drain:  # keep leading until the parent closes our stdin
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await sched.shutdown()
    out("DONE")
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--store", choices=("sqlite", "postgres"), required=True)
    p.add_argument("--path", default="")
    p.add_argument("--dsn", default="")
    p.add_argument("--schema", default="public")
    p.add_argument("--lease-ttl", type=float, default=0.6)
    p.add_argument("--lease-renew", type=float, default=0.1)
    p.add_argument("--lock-poll", type=float, default=0.02)
    p.add_argument("--keepalive", type=float, default=0.2)
    p.add_argument("--no-full-sync", action="store_true")
    p.add_argument("--prefix", default="k")
    p.add_argument("--submitters", type=int, default=8)
    p.add_argument("--count", type=int, default=0, help="keys in all (0: until killed)")
    p.add_argument("--pace-ms", type=float, default=0.0, help="pause between one submitter's submits")
    p.add_argument("--slots", type=int, default=16)
    p.add_argument("--exec-ms", type=float, default=4.0)
    p.add_argument("--resubmit", default="")
    p.add_argument("--idle", action="store_true")
    p.add_argument("--drain", action="store_true")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
