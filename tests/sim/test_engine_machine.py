"""A Hypothesis state machine over the engine.

Random submits (single and batch; keys, deadlines, timeouts, retry policies), completions,
retryable/permanent failures (with ``retry_after``), heartbeats, stale reports, cancels,
capacity changes and time steps.  Every rule goes through :class:`~tests.sim.harness.Harness`,
so after every step the shadow model checks: one terminal status per task, never more running
than capacity, nothing lost, ids increasing, keys, FIFO within a class and the lane-head
priority rule (see ``invariants.py``).  Teardown drives the engine to quiescence (liveness).

Derandomized and database-free so CI is stable; ``max_examples`` is modest.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.model import RetryPolicy
from cronoq.engine.time import MS, NS

from .harness import Harness
from .workload import TaskSpec


def _config(variant: int) -> CoreConfig:
    if variant == 0:  # one pool, defaults
        pools = [PoolConfig("default", min=0, max=4, initial=1, autoscale=False)]
    elif variant == 1:  # bounded + shedding + leases, no-jitter retries
        pools = [
            PoolConfig(
                "default",
                min=0,
                max=4,
                initial=2,
                autoscale=False,
                max_pending=4,
                overflow="shed_lowest",
                lease_ttl=1.0,
                retry=RetryPolicy(max_attempts=2, initial_backoff=0.5, jitter=False),
            ),
            PoolConfig("other", min=0, max=4, initial=1, autoscale=False, max_pending=3, overflow="wait"),
        ]
    else:  # tight retention: keys are freed and reused
        pools = [
            PoolConfig(
                "default", min=0, max=4, initial=1, autoscale=False, max_pending=5, overflow="shed_oldest"
            ),
            PoolConfig("b", min=0, max=4, initial=0, autoscale=False, overflow="reject", max_pending=2),
        ]
        return CoreConfig(pools, emit_transitions=True, retention=2.0, retention_max=3, seed=variant)
    return CoreConfig(pools, emit_transitions=True, seed=variant)


KEYS = st.sampled_from([None, None, "a", "b", "c"])
DELTAS = st.sampled_from([0, 1, MS, 100 * MS, NS, 3 * NS, 45 * NS])


@st.composite
def task_specs(draw: st.DrawFn, pools: list[str]) -> TaskSpec:
    return TaskSpec(
        pool=draw(st.sampled_from([None, *pools])),
        priority=draw(st.integers(0, 3)),
        key=draw(KEYS),
        deadline=draw(st.one_of(st.none(), st.integers(0, 20).map(lambda s: s * NS // 2))),
        timeout=draw(st.sampled_from([None, None, 0, 500 * MS, 2 * NS])),
        retry=draw(
            st.sampled_from(
                [None, None, RetryPolicy.none(), RetryPolicy(max_attempts=3, initial_backoff=0.2)]
            )
        ),
        hint=draw(st.sampled_from([None, 100 * MS])),
        kind=draw(st.sampled_from(["a", "b"])),
    )


class EngineMachine(RuleBasedStateMachine):
    h: Harness

    @initialize(variant=st.integers(0, 2))
    def setup(self, variant: int) -> None:
        self.h = Harness(_config(variant))
        self.pools = [p.name for p in self.h.config.pools]
        self.ids: list[int] = []
        self.old_leases: list[int] = []

    # --------------------------------------------------------------- clients

    @rule(data=st.data())
    def submit(self, data: st.DataObject) -> None:
        out, _ = self.h.submit(data.draw(task_specs(self.pools)))
        self.ids.extend(i for i, _ in out.items or ())

    @rule(data=st.data(), n=st.integers(1, 4))
    def submit_batch(self, data: st.DataObject, n: int) -> None:
        out, _ = self.h.submit_batch([data.draw(task_specs(self.pools)) for _ in range(n)])
        self.ids.extend(i for i, _ in out.items or ())

    @precondition(lambda self: self.ids)
    @rule(i=st.integers(0, 10_000), by_key=st.booleans())
    def cancel(self, i: int, by_key: bool) -> None:
        tid = self.ids[i % len(self.ids)]
        t = self.h.shadow.tasks.get(tid)
        ref: int | str = t.key if by_key and t is not None and t.key is not None else tid
        self.h.cancel(ref)

    @rule(pool=st.integers(0, 1), n=st.integers(0, 3))
    def set_capacity(self, pool: int, n: int) -> None:
        self.h.set_capacity(self.pools[pool % len(self.pools)], n)

    # --------------------------------------------------------------- workers

    def _lease(self, i: int) -> int:
        leases = sorted(self.h.shadow.leases)
        return leases[i % len(leases)]

    @precondition(lambda self: self.h.shadow.leases)
    @rule(i=st.integers(0, 100))
    def complete(self, i: int) -> None:
        lease = self._lease(i)
        self.h.complete(lease)
        self.old_leases.append(lease)

    @precondition(lambda self: self.h.shadow.leases)
    @rule(
        i=st.integers(0, 100),
        permanent=st.booleans(),
        retry_after=st.sampled_from([None, None, 0, 300 * MS]),
    )
    def fail(self, i: int, permanent: bool, retry_after: int | None) -> None:
        lease = self._lease(i)
        self.h.fail(lease, "boom", permanent=permanent, retry_after=retry_after)
        self.old_leases.append(lease)

    @precondition(lambda self: self.h.shadow.leases)
    @rule(i=st.integers(0, 100))
    def heartbeat(self, i: int) -> None:
        self.h.heartbeat(self._lease(i))

    @precondition(lambda self: self.old_leases)
    @rule(i=st.integers(0, 100), kind=st.sampled_from(["complete", "fail", "heartbeat"]))
    def stale_report(self, i: int, kind: str) -> None:
        lease = self.old_leases[i % len(self.old_leases)]
        if kind == "complete":
            self.h.complete(lease)
        elif kind == "fail":
            self.h.fail(lease, "late")
        else:
            self.h.heartbeat(lease)

    # --------------------------------------------------------------- time

    @rule()
    def tick(self) -> None:
        self.h.tick()

    @rule(delta=DELTAS)
    def advance(self, delta: int) -> None:
        self.h.advance_to(self.h.now + delta)
        self.h.tick()

    @rule()
    def advance_to_wakeup(self) -> None:
        nw = self.h.core.next_wakeup()
        if nw is not None:
            self.h.advance_to(max(self.h.now, nw))
        self.h.tick()

    # --------------------------------------------------------------- checks

    @invariant()
    def full_state(self) -> None:
        if hasattr(self, "h"):
            self.h.check_full()

    def teardown(self) -> None:
        """Liveness: with healthy workers and capacity, everything ends."""
        if not hasattr(self, "h"):
            return
        h = self.h
        for name in self.pools:
            if h.shadow.pool_by_name[name].capacity == 0:
                h.set_capacity(name, 2)
        for _ in range(10_000):
            if not h.shadow.live:
                break
            if h.shadow.leases:
                h.complete(min(h.shadow.leases))
                continue
            nw = h.core.next_wakeup()
            if nw is not None:
                h.advance_to(max(h.now, nw))
            h.tick()
            if nw is None and not h.shadow.leases and h.shadow.live:
                raise AssertionError(f"stuck with {h.shadow.live} live tasks and no timers")
        h.check_snapshot()
        h.shadow.check_terminal_all(self.ids)


EngineMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestEngineMachine = EngineMachine.TestCase
