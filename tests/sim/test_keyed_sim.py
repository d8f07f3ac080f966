"""Keyed resources under a seeded random workload and under Hypothesis
(docs/concepts/resources.md#keyed-resources): the engine is driven through submissions (with
every policy), dispatches, completions, failures, cancellations and time, and after every step:

* per key, the running units never exceed the key's permits (its ``limits`` entry included);
* a per-key token bucket never issues more than ``burst + rate × t`` over any interval ``t``;
* the engine's own key counters equal what the tasks say (live units per key, running units
  per resource), and the snapshot's gauges agree;
* every unit's own count equals the tasks' (a semaphore's free permits are its permits less
  the running units; a bucket's running units), and no bucket holds negative tokens: the
  dispatch and completion fast paths take and give back exactly;
* keys forgotten after ``idle_ttl`` (``idle``) and options objects shared by many tasks (as
  the runtime's options cache shares them) keep all of the above;
* liveness: once submissions stop, completing what runs and following the engine's own
  wake-ups drains every key (no key starves: equal-score tasks of every key all run).
"""

from __future__ import annotations

import random
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronoq.engine.actions import Dispatch
from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import FIRST_TERMINAL, RUNNING, RetryPolicy, TaskOptions
from cronoq.engine.resources import Resource
from cronoq.engine.time import NS
from cronoq.errors import SubmitError

KEYS = ("a", "b", "c", "vip")
RATE, BURST = 2.0, 2
RESOURCES = [
    Resource.semaphore("q", 2, per_key=True, limits={"vip": 3}),
    Resource.semaphore("one", 1, per_key=True, on_limit="cancel_newest"),
    Resource.semaphore("old", 1, per_key=True, on_limit="cancel_oldest"),
    Resource.semaphore("last", 1, per_key=True, on_limit="keep_latest"),
    Resource.token_bucket("api", RATE, BURST, per_key=True, idle_ttl=1e6),
    Resource.token_bucket("drop", RATE, BURST, per_key=True, on_limit="cancel_newest", idle_ttl=1e6),
    Resource.semaphore("idle", 1, per_key=True, idle_ttl=0.5),  # (forgotten between bursts)
    Resource.semaphore("db", 3),
]
CAP = {r.name: r.capacity for r in RESOURCES}


class KeyedSim:
    """One engine, its virtual clock, and the dispatch times of every bucket key."""

    def __init__(self) -> None:
        cfg = CoreConfig(
            [PoolConfig("default", min=6, max=6, initial=6, autoscale=False, retry=RetryPolicy.none())],
            resources=RESOURCES,
        )
        self.core = Core(cfg)
        self.now = 0
        self.issued: dict[str, list[int]] = defaultdict(list)  # bucket key -> dispatch instants
        self.shared: dict[tuple[tuple[str, int], ...], TaskOptions] = {}  # options many tasks use

    def step(self, op: int, a: int, b: int) -> None:
        core, now = self.core, self.now
        if op <= 4:  # submit a task asking 1-2 keyed resources (and maybe db)
            names = sorted({n for n in ("q", "one", "old", "last", "api", "drop") if (a >> len(n)) % 3 == 0})
            need = {f"{n}:{KEYS[(a + i) % len(KEYS)]}": 1 for i, n in enumerate(names or ["q"])}
            if b % 4 == 0:
                need["db"] = 1
            if (b >> 3) % 3 == 0:
                need[f"idle:{KEYS[b % len(KEYS)]}"] = 1
            start = now + (b % 3) * NS // 2 if b % 5 == 0 else None
            opts = TaskOptions(resources=need, priority=2)
            if (b >> 5) % 2:  # one options object for every task of this map
                opts = self.shared.setdefault(tuple(sorted(need.items())), opts)
            before = len(core.tasks)
            try:
                core.submit(now, opts, None, None, None, start)
            except SubmitError:  # (a fixed-start reservation conflict): nothing half-done
                assert len(core.tasks) == before
        elif op <= 6 and core.leases:  # complete or fail a running attempt
            lease = sorted(core.leases)[a % len(core.leases)]
            if b % 3:
                core.complete(now, lease)
            else:
                core.fail(now, lease, "boom")
        elif op == 7:  # cancel a live task
            live = sorted(t.id for t in core.tasks.values() if t.status < FIRST_TERMINAL)
            if live:
                core.cancel(now, live[a % len(live)])
        elif op >= 8:  # time passes
            self.now += (a % 4) * NS // 4
        self.tick()

    def tick(self) -> None:
        self.core.tick(self.now)
        for act in self.core.drain_actions():
            if type(act) is Dispatch:
                for name in act.task.opts.resources or {}:
                    if name.startswith(("api:", "drop:")):
                        self.issued[name].append(self.now)
        self.check()

    def check(self) -> None:
        core, now = self.core, self.now
        running: dict[str, int] = defaultdict(int)
        live: dict[str, int] = defaultdict(int)
        for t in core.tasks.values():
            if t.status >= FIRST_TERMINAL:
                continue
            for name, k in (t.opts.resources or {}).items():
                live[name] += k
                if t.status == RUNNING:
                    running[name] += k
        for name, n in running.items():
            base, _, key = name.partition(":")
            if base in ("q", "one", "old", "last", "idle"):
                cap = 3 if (base, key) == ("q", "vip") else CAP[base]
                assert n <= cap, f"{name}: {n} running > {cap} permits"
        for name, times in self.issued.items():  # burst + rate x t over every interval
            for i in range(len(times)):
                for j in range(i, len(times)):
                    assert j - i + 1 <= BURST + RATE * (times[j] - times[i]) / NS + 1e-9, (name, times)
        for kr in core.res.keyed.values():
            for full, u in kr.keys.items():
                assert u.live == live.get(full, 0), (full, u.live, live.get(full, 0))
                if kr.kind == "semaphore":
                    assert u.available == u.capacity - running.get(full, 0) >= 0, (full, u.available)
                else:
                    assert u.running(full) == running.get(full, 0) and u.tokens(now) >= 0, full
            assert kr.run == sum(running[f] for f in running if f.partition(":")[0] == kr.name)
        db = core.res.by_name["db"]
        assert db.budget(now) == CAP["db"] - running.get("db", 0) >= 0
        for g in core.snapshot(now).resources:
            if g.per_key:
                kr = core.res.keyed[g.name]
                assert (g.in_use, g.waiting, g.keys) == (kr.run, kr.live - kr.run, len(kr.keys))

    def drain(self) -> None:
        """Complete what runs and follow the engine's wake-ups until no task is live."""
        core = self.core
        for _ in range(2_000):
            for lease in sorted(core.leases):
                core.complete(self.now, lease)
            self.tick()
            if not any(t.status < FIRST_TERMINAL for t in core.tasks.values()):
                return
            w = core.next_wakeup()
            if w is not None and not core.leases:
                self.now = max(self.now, w)
        raise AssertionError("keys did not drain: a key starved")


def run_ops(ops: list[tuple[int, int, int]]) -> KeyedSim:
    sim = KeyedSim()
    for op in ops:
        sim.step(*op)
    sim.drain()
    return sim


def test_seeded_workloads_keep_every_invariant() -> None:
    for seed in range(12):
        rng = random.Random(seed)
        ops = [(rng.randrange(10), rng.randrange(1 << 12), rng.randrange(1 << 12)) for _ in range(250)]
        run_ops(ops)


OPS = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 1 << 12), st.integers(0, 1 << 12)), max_size=120)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_hypothesis_keyed_invariants(ops: list[tuple[int, int, int]]) -> None:
    run_ops(ops)
