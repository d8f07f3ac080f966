"""A Hypothesis state machine over the engine's outputs on edges (engine/parents.py).

The engine machine (``test_engine_machine.py``) checks scheduling against a shadow model that
has no dependency edges; this one drives a :class:`~cronoq.engine.core.Core` directly with
batches whose members depend on earlier tasks and on each other (by id and by key, under every
edge condition; in one variant an edge to a key not yet submitted awaits it), completions that
each return a distinct output object, retryable and permanent failures, cancels, time steps,
retention pruning (tight retention, so parents are forgotten while their dependents wait) and
the output cap's ``forget_output``.

After every step: a dependent that has not ended sees, for each edge whose parent succeeded,
exactly the object that parent returned (pinned: present whatever retention or the cap did;
only an output the cap dropped before any dependent held it reads as lost),
``Core.pinned`` counts exactly the records live dependents hold, and an ended task holds no
parent record (only ids).  Teardown drives everything to its end: then nothing is pinned.

Derandomized and database-free so CI is stable.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cronoq.engine.actions import Dispatch
from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import (
    FIRST_TERMINAL,
    OUTPUT_LOST,
    RUNNING,
    SUCCEEDED,
    RetryPolicy,
    TaskOptions,
    TaskState,
)
from cronoq.engine.parents import outcomes
from cronoq.engine.time import MS, NS
from cronoq.errors import SubmitError

KEYS = st.sampled_from([None, None, "a", "b", "c"])
CONDS = st.integers(0, 2)  # ON_SUCCESS, ON_FAILURE, ON_COMPLETE
#: an edge's target: ("id", i) an earlier task, ("key", k) a key, ("member", j) an earlier member
TARGETS = st.one_of(
    st.tuples(st.just("id"), st.integers(0, 1000)),
    st.tuples(st.just("key"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("member"), st.integers(0, 3)),
)


def _config(variant: int) -> CoreConfig:
    retry = RetryPolicy(max_attempts=2, initial_backoff=0.2, jitter=False)
    slots = 2 if variant == 0 else 1  # (one slot: succeeded parents wait with their dependents)
    awaits = "reject" if variant == 0 else "await"  # (await: an edge to a key not yet submitted)
    pools = [
        PoolConfig(
            "default",
            min=slots,
            max=slots,
            initial=slots,
            autoscale=False,
            retry=retry,
            unknown_dependency=awaits,
            await_timeout=5.0,
        )
    ]
    if variant == 0:
        return CoreConfig(pools, seed=variant, retention=0.5, retention_max=1)
    return CoreConfig(pools, seed=variant)


class OutputsMachine(RuleBasedStateMachine):
    core: Core

    @initialize(variant=st.integers(0, 1))
    def setup(self, variant: int) -> None:
        self.core = Core(_config(variant), now=0)
        self.now = 0
        self.tasks: dict[int, TaskState] = {}  # every task submitted (held here past retention)
        self.ids: list[int] = []
        self.outputs: dict[int, object] = {}  # what each succeeded task returned
        self.dropped: set[int] = set()  # outputs the cap dropped (while nobody depended on them)

    def _drain(self) -> None:
        for a in self.core.drain_actions():
            if isinstance(a, Dispatch):
                self.tasks[a.task.id] = a.task

    def _running(self) -> list[TaskState]:
        return sorted((t for t in self.tasks.values() if t.status == RUNNING), key=lambda t: t.id)

    # --------------------------------------------------------------- clients

    @rule(
        members=st.lists(
            st.tuples(KEYS, st.lists(st.tuples(TARGETS, CONDS), max_size=3)), min_size=1, max_size=4
        )
    )
    def submit_batch(self, members: list[tuple[str | None, list[tuple[tuple[str, Any], int]]]]) -> None:
        items = []
        for j, (key, edges) in enumerate(members):
            deps: list[tuple[int | str, int]] = []
            for (how, which), cond in edges:
                if how == "id" and self.ids:
                    deps.append((self.ids[which % len(self.ids)], cond))
                elif how == "key":
                    deps.append((which, cond))
                elif how == "member" and j and members[which % j][0] is not None:
                    deps.append((members[which % j][0], cond))  # type: ignore[arg-type]
            items.append((TaskOptions(), None, key, None, None, deps or None))
        try:
            created = self.core.submit_batch(self.now, items)
        except SubmitError:
            created = []  # (a cycle, an unknown dependency, a taken key: nothing submitted)
        for tid, duplicate in created:
            t = self.core.tasks.get(tid)
            if not duplicate and t is not None:
                self.tasks[tid] = t
                self.ids.append(tid)
        self._drain()

    @precondition(lambda self: self.ids)
    @rule(i=st.integers(0, 1000))
    def cancel(self, i: int) -> None:
        self.core.cancel(self.now, self.ids[i % len(self.ids)])
        self._drain()

    # --------------------------------------------------------------- workers

    @precondition(lambda self: self._running())
    @rule(i=st.integers(0, 100))
    def complete(self, i: int) -> None:
        running = self._running()
        t = running[i % len(running)]
        output = object()
        if self.core.complete(self.now, t.lease, output):
            self.outputs[t.id] = output
        self._drain()

    @precondition(lambda self: self._running())
    @rule(i=st.integers(0, 100), permanent=st.booleans())
    def fail(self, i: int, permanent: bool) -> None:
        running = self._running()
        self.core.fail(self.now, running[i % len(running)].lease, "boom", permanent=permanent)
        self._drain()

    @precondition(lambda self: self.outputs)
    @rule(i=st.integers(0, 1000))
    def forget_output(self, i: int) -> None:
        """The output cap asks to drop a succeeded task's output: refused while it is pinned."""
        tid = sorted(self.outputs)[i % len(self.outputs)]
        pinned = tid in self.core.pinned
        dropped = self.core.forget_output(tid, self.outputs[tid])
        assert not (pinned and dropped), f"the pinned output of task {tid} was dropped"
        if dropped:
            self.dropped.add(tid)

    # --------------------------------------------------------------- time

    @rule(delta=st.sampled_from([0, 100 * MS, 300 * MS, NS]))
    def advance(self, delta: int) -> None:
        self.now += delta
        self.core.tick(self.now)
        self._drain()

    @rule()
    def prune(self) -> None:
        self.core.prune(self.now)
        self._drain()

    # --------------------------------------------------------------- checks

    @invariant()
    def pinned_outputs_are_present(self) -> None:
        if not hasattr(self, "core"):
            return
        held: Counter[int] = Counter()
        for t in self.tasks.values():
            entries = t.parents or []
            if t.status >= FIRST_TERMINAL:
                assert not any(type(p) is TaskState for p in entries), f"ended task {t.id} holds a parent"
                continue
            seen = outcomes(self.core, t)
            for n, p in enumerate(entries):
                if type(p) is not TaskState:
                    continue
                held[p.id] += 1
                if p.status == SUCCEEDED and p.id in self.dropped:  # gone before the edge was made
                    assert p.output is OUTPUT_LOST and seen[n][3] is None
                elif p.status == SUCCEEDED:
                    want = self.outputs[p.id]
                    assert p.output is want, f"task {t.id}: the output of edge {n} was lost"
                    assert seen[n][3] is want, f"task {t.id} sees another output on edge {n}"
        assert self.core.pinned == dict(held)

    def teardown(self) -> None:
        """Everything ends (successes, so dependents run); then nothing is pinned."""
        if not hasattr(self, "core"):
            return
        for _ in range(1000):
            self.core.tick(self.now)
            self._drain()
            running = self._running()
            if running:
                output = object()
                if self.core.complete(self.now, running[0].lease, output):
                    self.outputs[running[0].id] = output
                self._drain()
                self.pinned_outputs_are_present()
                continue
            nw = self.core.next_wakeup()
            if nw is None:
                break
            self.now = max(self.now, nw)
        assert all(t.status >= FIRST_TERMINAL for t in self.tasks.values())
        assert self.core.pinned == {}


OutputsMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestOutputsMachine = OutputsMachine.TestCase
