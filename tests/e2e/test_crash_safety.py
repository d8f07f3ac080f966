"""No acknowledged submission is lost by a crash (docs/reference/behaviour.md#reliability,
docs/reference/behaviour.md#durable-state) — SIGKILL, for real.

A child process (``child_scheduler.py``) runs a Scheduler on a durable store and submits
tasks with unique keys from 8 concurrent coroutines, printing each key once ``await submit``
returned (acknowledged).  The parent SIGKILLs it at a random moment (seeded: some rounds during
start-up/recovery, most while submitting and running), then starts the next round on the same
store; each round first re-submits keys around the previous round's last acknowledgement
(acknowledged ones must come back as duplicates with the same id; in-flight ones may or may
not exist, never twice).  After 20 rounds a last process submits nothing and runs until every
task is terminal.  Then the store must hold every acknowledged key exactly once, with the
acknowledged id, ``succeeded``; no key twice; ids unique, each from an epoch a leader was
given, epochs strictly increasing from round to round.

``CRONOQ_CRASH_SEED`` and ``CRONOQ_CRASH_ROUNDS`` override the seed (default 1517) and rounds (20).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from services import missing_service

from .harness import Child, PostgresTarget, SqliteTarget, check_store, children, epoch_of, pg_unreachable

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("CRONOQ_CRASH_SEED", "1517"))
ROUNDS = int(os.environ.get("CRONOQ_CRASH_ROUNDS", "20"))


def crash_rounds(target: Any, seed: int, rounds: int) -> dict[str, Any]:
    rng = random.Random(seed)
    acked: dict[str, int] = {}
    epochs: set[int] = set()
    last_epoch = 0
    resubmit: list[str] = []
    stats = {"rounds": rounds, "killed_before_leader": 0, "dup_acks": 0}
    t_start = time.monotonic()
    with children() as kids:
        for r in range(rounds):
            args = [*target.args(f"r{r}"), "--prefix", f"r{r}", "--exec-ms", "6"]
            if resubmit:
                args += ["--resubmit", ",".join(resubmit)]
            child = Child(args)
            kids.append(child)
            early = rng.random() < 0.2  # kill during start-up / acquire / recovery
            if early:
                child.wait_for("START", 30)
                time.sleep(rng.uniform(0.0, 0.5))
            else:
                child.wait_for("LEADER", 30)
                time.sleep(rng.uniform(0.05, 0.6))
            child.kill()
            assert not child.of("ERR"), f"round {r}: a submit failed: {child.describe()}"
            leader = child.of("LEADER")
            if leader:
                epoch = int(leader[0][1])
                assert epoch > last_epoch, f"round {r}: epoch {epoch} after {last_epoch}"
                last_epoch = epoch
                epochs.add(epoch)
            else:
                stats["killed_before_leader"] += 1
            numbers: list[int] = []
            for key, tid, dup in child.acks():
                if dup:
                    stats["dup_acks"] += 1
                    if key in acked:
                        assert tid == acked[key], f"round {r}: {key} came back as {tid}, not {acked[key]}"
                else:
                    assert key not in acked, f"round {r}: acknowledged key {key} got a second task {tid}"
                    assert epoch_of(tid) == last_epoch, f"round {r}: new id {tid:#x}, epoch {last_epoch}"
                acked.setdefault(key, tid)
                if key.startswith(f"r{r}-"):
                    numbers.append(int(key.split("-")[1]))
            if numbers:  # next round: the last acknowledged keys and the ones in flight at the kill
                top = max(numbers)
                resubmit = [f"r{r}-{n}" for n in range(max(0, top - 3), top + 9)]
        final = Child([*target.args("final"), "--idle", "--resubmit", ",".join(resubmit)])
        kids.append(final)
        assert final.finish(60) == 0, final.describe()
        leader = final.of("LEADER")
        assert leader and int(leader[0][1]) > last_epoch
        epochs.add(int(leader[0][1]))
        for key, tid, dup in final.acks():
            assert key not in acked or (dup and tid == acked[key]), (key, tid, dup)
    stats.update(check_store(target.rows(), acked, epochs))
    stats["final_epoch"] = target.epoch()
    stats["seconds"] = round(time.monotonic() - t_start, 1)
    assert stats["acked"] >= rounds * 10, f"too few acknowledgements to prove anything: {stats}"
    print(f"\n{target.name} crash safety (seed {seed}): {stats}")
    return stats


def test_sqlite_survives_sigkill(tmp_path: Path) -> None:
    crash_rounds(SqliteTarget(tmp_path / "crash.db"), SEED, ROUNDS)


def test_postgres_survives_sigkill() -> None:
    why = pg_unreachable()
    if why:
        missing_service("PostgreSQL", why)
    target = PostgresTarget()
    try:
        crash_rounds(target, SEED, ROUNDS)
    finally:
        target.drop()
