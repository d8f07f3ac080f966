"""A Hypothesis state machine over parking (engine/parking.py).

Random parents spawn children, park on them, sleep, wait for signals (with and without a
timeout), get cancelled; children complete or fail; signals are sent (twice, too); time moves
and the engine ticks; with a durable store the engine crashes and recovers from what was
persisted.  After every step: a parked task holds no slot and no lease, the busy counters are
the leases, a parked task is blocked or scheduled with a journal, a spawn's children exist
once (no id in two spawn records, no spawn record lost or repeated across a recovery), and a
task's attempt counter only counts failures.  Teardown drives the engine until nothing is
parked (liveness: every wait ends).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cronoq.engine.actions import Dispatch, Persist
from cronoq.engine.admission import BatchItem
from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import BLOCKED, FIRST_TERMINAL, RUNNING, SCHEDULED, TaskOptions
from cronoq.engine.time import NS
from cronoq.store._journal import journals_from_rows, signals_from_rows
from cronoq.store._records import fold

from .featsim import RowStore


class JournalRowStore(RowStore):
    """``RowStore`` plus the journal and signal tables (store/_journal.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.journal: dict[tuple[int, int], tuple[str, int]] = {}
        self.signals: dict[str, tuple[str, int]] = {}

    def commit(self, mutations: list[Any]) -> None:
        super().commit(mutations)
        batch = fold(mutations, self.codec)
        for op in batch.journal_ops:
            if op[0] == "put":
                self.journal[(op[1], op[2])] = (op[3], op[4])
            else:
                for k in [k for k in self.journal if k[0] == op[1]]:
                    del self.journal[k]
        for name, payload, at in batch.signal_ops:
            self.signals[name] = (payload, at)

    def recovered(self) -> Any:
        rec = super().recovered()
        rows = [(t, i, r, n) for (t, i), (r, n) in sorted(self.journal.items())]
        rec.journals = journals_from_rows(rows)
        rec.signals = signals_from_rows((n, p, at) for n, (p, at) in self.signals.items())
        return rec


SIGNALS = st.sampled_from(["a", "b", "c"])


class ParkingMachine(RuleBasedStateMachine):
    @initialize(cap=st.integers(1, 3), durable=st.booleans())
    def setup(self, cap: int, durable: bool) -> None:
        pools = [PoolConfig("default", min=0, max=4, initial=cap, autoscale=False)]
        self.config = CoreConfig(pools, seed=1, persist=durable, retention=10**6, time_base=10**18)
        self.core = Core(self.config, now=0)
        self.durable = durable
        self.store = JournalRowStore()
        self.uncommitted: list[Any] = []
        self.epoch = 0
        self.now = 0
        self.parents: list[int] = []
        self.spawned: dict[int, list[int]] = {}  # parent -> every child id it was given

    def _drain(self) -> None:
        acts = self.core.drain_actions()
        for a in acts:
            if isinstance(a, Persist):
                assert self.durable
                self.uncommitted.append(a.mutation)

    @precondition(lambda self: getattr(self, "durable", False))
    @rule(cut=st.integers(0, 50))
    def commit(self, cut: int) -> None:
        """A group commit of the oldest mutations (a commit may end anywhere between two)."""
        n = min(cut, len(self.uncommitted))
        self.store.commit(self.uncommitted[:n])
        del self.uncommitted[:n]

    @precondition(lambda self: getattr(self, "durable", False))
    @rule()
    def crash(self) -> None:
        """Lose the engine and what was not committed; recover from the store."""
        self.uncommitted = []
        self.epoch += 1
        self.core = Core(self.config, now=self.now, epoch=self.epoch)
        self.core.recover(self.now, self.store.recovered())
        self._drain()
        self.parents = [p for p in self.parents if p in self.core.tasks]

    def _running(self) -> list[int]:
        return sorted(t.id for t in self.core.leases.values())

    def _lease(self, i: int) -> int | None:
        run = [t for t in self.core.leases.values() if t.id in self.parents]
        if not run:
            return None
        return run[i % len(run)].lease

    @rule()
    def submit_parent(self) -> None:
        tid, _ = self.core.submit(self.now, TaskOptions(), None)
        self.parents.append(tid)
        self._drain()

    @rule()
    def tick(self) -> None:
        self.core.tick(self.now)
        self._drain()

    @rule(dt=st.sampled_from([1, NS, 5 * NS, 60 * NS]))
    def advance(self, dt: int) -> None:
        self.now += dt
        self.core.tick(self.now)
        self._drain()

    @rule(i=st.integers(0, 5), n=st.integers(1, 3), detached=st.booleans())
    def spawn(self, i: int, n: int, detached: bool) -> None:
        lease = self._lease(i)
        if lease is None:
            return
        pid = self.core.leases[lease].id
        blob = self.store.codec.encode(["child", pid])  # (the shell encodes payloads for a store)
        items = [BatchItem(TaskOptions(), ["child", pid], None, None, None, None, blob) for _ in range(n)]
        ids = self.core.parking.spawn(self.now, lease, items, "fp", detached)
        self.spawned.setdefault(pid, []).extend(ids)
        self._drain()

    @rule(i=st.integers(0, 5))
    def wait_children(self, i: int) -> None:
        lease = self._lease(i)
        if lease is None:
            return
        pid = self.core.leases[lease].id
        ids = self.spawned.get(pid, [])
        self.core.parking.wait_tasks(self.now, lease, ids)
        self._drain()

    @rule(i=st.integers(0, 5), dt=st.sampled_from([NS, 10 * NS]))
    def sleep(self, i: int, dt: int) -> None:
        lease = self._lease(i)
        if lease is not None:
            self.core.parking.sleep(self.now, lease, self.now + dt)
            self._drain()

    @rule(i=st.integers(0, 5), name=SIGNALS, timeout=st.sampled_from([None, NS, 30 * NS]))
    def wait_signal(self, i: int, name: str, timeout: int | None) -> None:
        lease = self._lease(i)
        if lease is None:
            return
        pk = self.core.parking
        until = None if timeout is None else self.now + timeout
        deadline = None if until is None else self.config.time_base + until
        idx = pk.record(lease, ["signal", name, [deadline, 0, None]])
        pk.wait_signal(self.now, lease, name, idx, until)
        self._drain()

    @rule(name=SIGNALS, payload=st.integers(0, 3))
    def signal(self, name: str, payload: int) -> None:
        had = self.core.parking.signal(name, self.now) is not None
        assert self.core.parking.send(self.now, name, payload) is had
        self._drain()

    @rule(i=st.integers(0, 10), ok=st.booleans())
    def finish_any(self, i: int, ok: bool) -> None:
        leases = sorted(self.core.leases)
        if not leases:
            return
        lease = leases[i % len(leases)]
        if ok:
            self.core.complete(self.now, lease, None)
        else:
            self.core.fail(self.now, lease, "boom", permanent=i % 2 == 0)
        self._drain()

    @rule(i=st.integers(0, 10))
    def cancel(self, i: int) -> None:
        if self.parents:
            self.core.cancel(self.now, self.parents[i % len(self.parents)])
            self._drain()

    @invariant()
    def parked_tasks_hold_nothing(self) -> None:
        if not hasattr(self, "core"):
            return
        core = self.core
        assert core.running == len(core.leases)
        assert sum(p.busy for p in core.pools) == len(core.leases)
        for tid, j in core.parking.journals.items():
            t = core.tasks[tid]
            assert t.status < FIRST_TERMINAL  # dropped when the task ends
            if j.kind:
                assert t.status in (BLOCKED, SCHEDULED), (t, j.kind)
                assert t.group is None and core.leases.get(t.lease) is not t
        for t in core.leases.values():
            assert t.status == RUNNING

    @invariant()
    def spawns_are_applied_once(self) -> None:
        if not hasattr(self, "core"):
            return
        seen: set[int] = set()
        for j in self.core.parking.journals.values():
            for rec in j.records:
                if rec[0] == "spawn":
                    assert not seen & set(rec[2])
                    seen.update(rec[2])
        all_kids = [k for ks in self.spawned.values() for k in ks]
        assert len(all_kids) == len(set(all_kids))

    @invariant()
    def no_spawn_lost_or_repeated(self) -> None:
        """Each live parent's children are exactly those its spawn records name (a recovery
        brings back both or neither; never a child twice, never a recorded child missing)."""
        if not hasattr(self, "core"):
            return
        core = self.core
        kids: dict[int, set[int]] = {}
        for t in core.tasks.values():
            p = t.payload
            if isinstance(p, (list, tuple)) and len(p) == 2 and p[0] == "child":
                kids.setdefault(p[1], set()).add(t.id)
        for pid, j in core.parking.journals.items():
            recorded = [i for rec in j.records if rec[0] == "spawn" for i in rec[2]]
            assert len(recorded) == len(set(recorded))
            assert set(recorded) == kids.get(pid, set()), (pid, recorded, kids.get(pid))

    @invariant()
    def attempts_count_only_failures(self) -> None:
        if not hasattr(self, "core"):
            return
        for t in self.core.leases.values():
            assert t.attempt >= 1

    def teardown(self) -> None:
        if not hasattr(self, "core"):
            return
        core = self.core
        if self.durable:
            self.commit(10**9)
        for _ in range(400):
            for name in ("a", "b", "c"):
                core.parking.send(self.now, name, None)
            for lease in sorted(core.leases):
                core.complete(self.now, lease, None)
            self.now += 30 * NS
            core.tick(self.now)
            acts = core.drain_actions()
            if (
                not core.parking.journals
                and core.live == 0
                and not any(isinstance(a, Dispatch) for a in acts)
            ):
                break
        assert core.live == 0, [t for t in core.tasks.values() if t.status < FIRST_TERMINAL]
        assert not core.parking.journals and not core.parking.watch and not core.parking.signal_waiters


ParkingMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestParkingMachine = ParkingMachine.TestCase
