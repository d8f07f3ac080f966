"""Shadow model and invariants for the feature simulator (``tests/sim/featsim.py``).

Covers what the base shadow (:mod:`tests.sim.invariants`) does not: dependencies
(docs/reference/behaviour.md#dependencies), fixed starts and reservations
(docs/reference/behaviour.md#fixed-starts), shared resources (docs/reference/behaviour.md#resources), worker
labels and groups (docs/reference/behaviour.md#labels), tenants (docs/reference/behaviour.md#fairness) and
crash recovery from the mutation log (docs/reference/behaviour.md#durable-state).  Like the base shadow it is
built only from the inputs and the returned actions; the engine's state is read only to compare.

Invariants (each violation names one of these):

``lifecycle``     every Publish is a legal docs/reference/behaviour.md#lifecycle transition with the right
                  pool/key/attempt/time; new tasks publish ``blocked`` first; a ``running`` event is followed
                  by its Dispatch (except the replayed attempt of a recovered task).
``one-terminal``  exactly one terminal status per task, nothing after it, one Resolve in the same
                  call; across crashes: at most one terminal status is ever *committed* per task.
``cause``         succeeded/failed/retrying/dead_lettered/cancelled only from their report,
                  timeout, lease loss, cancel or recovery (message ``attempt interrupted by a
                  restart``); ``shed`` never (no queue bounds here).
``deps``          a dependent never leaves ``blocked`` (and is never dispatched) before every
                  edge is bound and satisfied; it leaves ``blocked`` in the very call the last
                  edge is satisfied; ``skipped`` carries a documented message that is true:
                  ``dependency <id> ended as <status>`` (that parent ended so, breaking the
                  edge), ``task already finished`` (a target was already terminal and unmet), or
                  ``timed out awaiting unknown dependency`` (an edge still awaited, after
                  ``await_timeout``); a broken edge skips the dependent in the same call.
``fixed-start``   never ready/dispatched before the start; ``missed`` (skip) / ``failed`` (fail)
                  only for its policy and only after start + tolerance, and then at once (the
                  tick after); a scheduled task is ready once its start has passed.
``reservations``  ``reservation_conflict`` exactly when ``limit`` unstarted windows of the pool
                  already overlap inside the new one (so accepted windows never exceed it).
``resources``     semaphore permits in use never exceed the permits; a token bucket (simulated
                  exactly here) never dispatches more than ``burst + rate x t`` over any window.
``groups``        running attempts per worker group never exceed its capacity; a labelled task
                  runs only on a group whose labels include its own; the group used is the first
                  (fewest labels, then creation order) that accepts it with a free slot.
``pinned``        a dispatched dependent sees its parents (``engine.parents``) one per edge in the
                  order given, each with the status and, for a succeeded one, the very output it
                  reported (pinned across retention and crashes); the engine pins exactly the
                  parents its live dependents hold.
``submit``        every submit/batch outcome predicted: ids (with the current epoch), duplicates,
                  ``duplicate_key_in_batch``, ``unknown_dependency``, ``cycle``,
                  ``reservation_conflict``.
``ids``/``keys``  ids unique across epochs, new ids carry the current epoch; one id per key.
``recovery``      after a crash every acknowledged task is known (live or retained); committed
                  terminal tasks keep status and output; a committed ``running`` task resumes as
                  ``retrying`` (or ``dead_lettered`` when that was its last attempt) with the
                  attempt counted.
``liveness``      checked by the simulator: after faults stop every acknowledged task ends.
``recurring``     cron schedules: :mod:`tests.sim.recurring_invariants`.
``autoscale``     the autoscaler: :mod:`tests.sim.autoscale_invariants`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from cronoq.engine.actions import Abort, Dispatch, Persist, Publish, Resolve, Scale
from cronoq.engine.config import CoreConfig
from cronoq.engine.core import Core
from cronoq.engine.mutations import StatusChange, Submitted
from cronoq.engine.parents import outcomes
from cronoq.engine.time import NS

from .autoscale_invariants import AutoscaleShadow
from .invariants import LEGAL, TERMINAL, InvariantViolation
from .recurring_invariants import MSG_PREVIOUS_RUNNING, Occ, RecurringShadow
from .workload import TaskSpec

ON_SUCCESS, ON_FAILURE, ON_COMPLETE = 0, 1, 2
MISS_POLICY = {1: "missed", 2: "failed"}  # on_miss -> terminal status (0: run_late)
MSG_MISSED = "fixed start missed"
MSG_ALREADY = "task already finished"
MSG_AWAIT = "timed out awaiting unknown dependency"


def _sk(tenant: str | None, key: Any) -> Any:
    """A key as the engine indexes it: keys are scoped by tenant (untenanted: the plain key)."""
    return key if tenant is None or not isinstance(key, str) else (tenant, key)


# ours (docs/reference/behaviour.md#recovery names no message)
MSG_INTERRUPTED = "attempt interrupted by a restart"
MSG_TIMEOUT = "attempt timed out"
MSG_LEASE = "lease expired"
MSG_CANCELLED = "cancelled"


def satisfied(cond: int, status: str) -> bool:
    """docs/reference/behaviour.md#dependencies: success edges need ``succeeded``, failure edges any other
    terminal status."""
    if cond == ON_COMPLETE:
        return True
    return (status == "succeeded") == (cond == ON_SUCCESS)


def max_overlap(windows: Sequence[tuple[int, int]], lo: int, hi: int) -> int:
    """Most windows overlapping at one instant inside the open interval (lo, hi)
    (docs/reference/behaviour.md#fixed-starts)."""
    pts: list[tuple[int, int]] = []
    for a, b in windows:
        a, b = max(a, lo), min(b, hi)
        if a < b:
            pts += [(a, 1), (b, -1)]
    pts.sort()
    best = cur = 0
    for _, d in pts:
        cur += d
        best = max(best, cur)
    return best


class FTask:
    __slots__ = (
        "attempt",
        "await_dispatch",
        "await_resolve",
        "children",
        "edges",
        "group",
        "id",
        "key",
        "lease",
        "max_attempts",
        "occ",
        "output",
        "pool",
        "pre_broken",
        "recovered",
        "resolved",
        "run_start",
        "spec",
        "status",
        "submitted_at",
    )

    def __init__(self, tid: int, pool: int, spec: TaskSpec, max_attempts: int, now: int) -> None:
        self.id = tid
        self.pool = pool
        self.spec = spec
        self.key = spec.key
        self.max_attempts = max_attempts
        self.status = "blocked"
        self.attempt = 0
        # edges: [parent id or None (awaited), awaited key or None, cond]
        self.edges: list[list[Any]] = []
        self.children: list[int] = []  # bound dependents while this task is not terminal
        self.pre_broken = False  # an edge to an already-terminal task was unmet at submission
        self.lease: int | None = None
        self.group: Group | None = None
        self.output: object = None
        self.resolved = 0
        self.await_dispatch = False
        self.await_resolve = False
        self.recovered: str | None = None  # last committed status when rebuilt after a crash
        self.submitted_at = now
        self.occ: Occ | None = None  # a recurring occurrence (recurring_invariants.py)
        self.run_start = 0  # when the current attempt was dispatched

    def __repr__(self) -> str:
        return f"<task {self.id} {self.status} attempt={self.attempt} key={self.key}>"


class Group:
    __slots__ = ("capacity", "labels", "order", "running")

    def __init__(self, labels: dict[str, str], capacity: int, order: int) -> None:
        self.labels = labels
        self.capacity = capacity
        self.order = order
        self.running = 0

    def accepts(self, need: dict[str, str] | None) -> bool:
        return not need or all(self.labels.get(k) == v for k, v in need.items())


class FeatureShadow:
    def __init__(self, config: CoreConfig, core: Core, epoch: int = 0) -> None:
        self.config = config
        self.tb = config.time_base
        self.pool_by_name = {p.name: i for i, p in enumerate(config.pools)}
        self.default_pool = config.default_pool_index()
        self.tasks: dict[int, FTask] = {}
        self.keys: dict[Any, int] = {}  # by _sk(tenant, key)
        self.awaiting: dict[Any, list[int]] = {}
        self.all_ids: set[int] = set()
        self.committed_terminal: dict[int, str] = {}
        self.watch: list[tuple[int, int, int]] = []  # (due, kind, id): see _watch
        self.now = 0
        self.call = ""
        self.cause: tuple[Any, ...] = ()
        self.stats = {"events": 0, "dispatches": 0, "skipped": 0, "missed": 0, "recoveries": 0, "ended": 0}
        self.persist = config.persist
        self.recur = RecurringShadow(self)
        self.scale = AutoscaleShadow(self)
        self.reset(core, epoch)

    def reset(self, core: Core, epoch: int) -> None:
        """A fresh engine (start or crash): slots, permits, buckets and leases start over.  (The
        shadow's buckets restart full: an upper bound, as recovery charges each bucket with the
        recorded starts; tests/engine/test_keyed_resources.py checks the bound across a restart.)"""
        self.core = core
        self.epoch = epoch
        self.next_seq = 1
        self.scale.reset(self.now)
        self.leases: dict[int, FTask] = {}
        self.groups: list[list[Group]] = [[Group({}, p.initial_capacity, -1)] for p in self.config.pools]
        self.group_order = 0
        self.sem = {r.name: 0 for r in self.config.resources if r.kind == "semaphore"}
        self.bucket = {
            r.name: [float(r.burst), self.now, r.rate, r.burst]
            for r in self.config.resources
            if r.kind != "semaphore"
        }
        self.res_cap = {r.name: r.capacity for r in self.config.resources}
        self.res: list[dict[int, tuple[int, int]]] = [{} for _ in self.config.pools]

    # ------------------------------------------------------------------ helpers

    def fail(self, invariant: str, detail: str) -> None:
        raise InvariantViolation(invariant, f"t={self.now / NS:.9f}s call={self.call}: {detail}")

    def begin(self, now: int, call: str, cause: tuple[Any, ...] = ()) -> None:
        self.now = now
        self.call = call
        self.cause = cause
        self.touched: list[int] = []  # tasks whose blocked/terminal state must be settled
        self.ended: list[FTask] = []
        self.aborted: dict[int, str] = {}
        self.new: dict[int, tuple[TaskSpec, int]] = {}
        self.mutations: list[Any] = []
        self.filling = False  # a tick's dispatch phase began (every timer has fired)
        self.recur.begin()
        self.scale.begin_tick()

    def pool_of(self, spec: TaskSpec) -> int:
        return self.default_pool if spec.pool is None else self.pool_by_name[spec.pool]

    def window(self, spec: TaskSpec) -> tuple[int, int]:
        assert spec.start_at is not None and spec.hint is not None
        return spec.start_at - spec.tolerance, spec.start_at + spec.hint + spec.tolerance

    def edge_state(self, t: FTask) -> str:
        """``ok`` (all edges bound and satisfied), ``broken`` or ``waiting``."""
        if t.pre_broken:
            return "broken"
        st = "ok"
        for pid, _key, cond in t.edges:
            if pid is None:
                st = "waiting"
                continue
            p = self.tasks[pid]
            if p.status in TERMINAL:
                if not satisfied(cond, p.status):
                    return "broken"
            else:
                st = "waiting"
        return st

    def _reaches(self, start: FTask, targets: set[int]) -> bool:
        if start.id in targets:
            return True
        seen = {start.id}
        stack = [start]
        while stack:
            t = stack.pop()
            for c in t.children:
                if c in targets:
                    return True
                if c not in seen:
                    seen.add(c)
                    stack.append(self.tasks[c])
        return False

    # ------------------------------------------------------------------ submissions

    def predict_submit(
        self, specs: Sequence[TaskSpec], batch: bool
    ) -> tuple[str | None, list[tuple[int, bool]]]:
        """docs/reference/behaviour.md#ids-keys-retention, docs/reference/behaviour.md#fixed-starts,
        docs/reference/behaviour.md#dependencies in the engine's validation order: (error code, (id,
        duplicate) items)."""
        keys = self.keys
        n = len(specs)
        if not batch and specs[0].key is not None and _sk(specs[0].tenant, specs[0].key) in keys:
            return None, [(keys[_sk(specs[0].tenant, specs[0].key)], True)]
        dup: list[int | None] = [None] * n
        bkeys: dict[Any, int] = {}
        dkeys: set[Any] = set()
        for i, s in enumerate(specs):
            if s.key is None:
                continue
            sk = _sk(s.tenant, s.key)
            if sk in keys:
                if sk in dkeys:
                    return "duplicate_key_in_batch", []
                dkeys.add(sk)
                dup[i] = keys[sk]
            else:
                if sk in bkeys:
                    return "duplicate_key_in_batch", []
                bkeys[sk] = i
        mparents: list[list[int]] = [[] for _ in range(n)]
        existing: list[list[int]] = [[] for _ in range(n)]
        for i, s in enumerate(specs):
            if dup[i] is not None or not s.deps:
                continue
            for target, _cond in s.deps:
                if isinstance(target, str):
                    if target == s.key:
                        return "cycle", []
                    j = bkeys.get(_sk(s.tenant, target))
                    if j is not None:
                        mparents[i].append(j)
                        continue
                    tid = keys.get(_sk(s.tenant, target))
                else:
                    tid = target
                p = self.tasks.get(tid) if tid is not None else None
                if p is not None and p.spec.tenant != s.tenant:
                    p = None  # another tenant's task: refused as unknown
                if p is None:
                    if (
                        isinstance(target, str)
                        and self.config.pools[self.pool_of(s)].unknown_dependency == "await"
                    ):
                        continue
                    return "unknown_dependency", []
                if p.status not in TERMINAL:
                    existing[i].append(p.id)
        if self._member_cycle(mparents):
            return "cycle", []
        for i in sorted(bkeys.values()):
            key = _sk(specs[i].tenant, specs[i].key)
            waiters = [self.tasks[w] for w in self.awaiting.get(key, ())]
            waiters = [w for w in waiters if w.status == "blocked"]
            if not waiters:
                continue
            targets: set[int] = set()
            seen, stack = {i}, [i]
            while stack:
                m = stack.pop()
                targets.update(existing[m])
                for j in mparents[m]:
                    if j not in seen:
                        seen.add(j)
                        stack.append(j)
            if any(self._reaches(w, targets) for w in waiters):
                return "cycle", []
        added: dict[int, list[tuple[int, int]]] = {}
        for i, s in enumerate(specs):
            if dup[i] is not None or s.start_at is None:
                continue
            pi = self.pool_of(s)
            cfg = self.config.pools[pi]
            limit = max(1, int(cfg.max * cfg.reservable_fraction))
            lo, hi = self.window(s)
            mine = added.setdefault(pi, [])
            if max_overlap([*self.res[pi].values(), *mine], lo, hi) >= limit:
                return "reservation_conflict", []
            mine.append((lo, hi))
        out = []
        seq = self.next_seq
        for i in range(n):
            d = dup[i]
            if d is not None:
                out.append((d, True))
            else:
                out.append(((self.epoch << 48) | seq, False))
                seq += 1
        return None, out

    @staticmethod
    def _member_cycle(parents: list[list[int]]) -> bool:
        state = [0] * len(parents)

        def visit(i: int) -> bool:
            state[i] = 1
            for j in parents[i]:
                if state[j] == 1 or (state[j] == 0 and visit(j)):
                    return True
            state[i] = 2
            return False

        return any(state[i] == 0 and visit(i) for i in range(len(parents)))

    def after_submit(
        self,
        specs: Sequence[TaskSpec],
        pred: tuple[str | None, list[tuple[int, bool]]],
        result: list[tuple[int, bool]] | None,
        code: str | None,
        actions: list[Any],
    ) -> None:
        pcode, items = pred
        if code is not None or pcode is not None:
            if code != pcode:
                self.fail(
                    "submit",
                    f"got {code or result}, expected {pcode or items} for {[s.short() for s in specs]}",
                )
            if actions:
                self.fail("submit", f"a rejected submission produced actions {actions}")
            return
        if result != items:
            self.fail("submit", f"got {result}, expected {items}")
        assert result is not None
        created: dict[Any, int] = {}
        for (tid, dup), spec in zip(result, specs):
            if dup:
                continue
            if tid in self.all_ids:
                self.fail("ids", f"id {tid} issued twice")
            self.new[tid] = (spec, self.pool_of(spec))
            if spec.key is not None:
                created[_sk(spec.tenant, spec.key)] = tid
        # register the new tasks (before their events): edges bound as the engine binds them
        for tid, (spec, pi) in self.new.items():
            self._add_task(tid, pi, spec)
        for tid, (spec, _pi) in self.new.items():
            t = self.tasks[tid]
            self._bind_edges(t, spec.deps or (), created)
            self.touched.append(tid)
            self._watch(t)
        for key, tid in created.items():  # awaited keys this submission provides
            for w in self.awaiting.pop(key, ()):
                wt = self.tasks[w]
                if wt.status == "blocked":
                    for e in wt.edges:
                        if e[0] is None and e[1] == key:
                            e[0] = tid
                            self.tasks[tid].children.append(w)
        self.next_seq += len(self.new)
        self.apply(actions)
        for tid in self.new:
            if self.tasks[tid].status == "new":
                self.fail("lifecycle", f"new task {tid} published no events")

    def _add_task(self, tid: int, pi: int, spec: TaskSpec) -> FTask:
        cfg = self.config.pools[pi]
        retry = spec.retry or cfg.retry
        t = FTask(tid, pi, spec, retry.max_attempts, self.now)
        t.status = "new"
        self.tasks[tid] = t
        self.all_ids.add(tid)
        if spec.key is not None:
            self.keys[_sk(spec.tenant, spec.key)] = tid
        if spec.start_at is not None:
            self.res[pi][tid] = self.window(spec)
        return t

    def register_task(self, tid: int, spec: TaskSpec) -> FTask:
        """A task the engine created on its own (a recurring occurrence), seen at its first event."""
        if tid in self.all_ids:
            self.fail("ids", f"id {tid} issued twice")
        t = self._add_task(tid, self.pool_of(spec), spec)
        self._bind_edges(t, spec.deps or (), {})
        self.touched.append(tid)
        self._watch(t)
        self.next_seq += 1
        return t

    def _bind_edges(self, t: FTask, deps: Sequence[tuple[int | str, int]], created: dict[Any, int]) -> None:
        tenant = t.spec.tenant
        for target, cond in deps:
            sk = _sk(tenant, target)
            tid = created.get(sk) if isinstance(target, str) else None
            if tid is None:
                tid = self.keys.get(sk) if isinstance(target, str) else target  # type: ignore[assignment]
            p = self.tasks.get(tid) if tid is not None else None
            if p is None:  # awaited (validated already)
                t.edges.append([None, sk, cond])
                self.awaiting.setdefault(sk, []).append(t.id)
                continue
            t.edges.append([p.id, None, cond])
            if p.status in TERMINAL:
                if not satisfied(cond, p.status):
                    t.pre_broken = True
            else:
                p.children.append(t.id)

    # ------------------------------------------------------------------ other calls

    def move_attempt(self, lease: int, labels: dict[str, str], ok: bool) -> None:
        """Core.move_attempt: a running attempt takes a free slot of the group with exactly
        ``labels`` if that group accepts the task's labels (its own slot goes back)."""
        t = self.leases.get(lease)
        expect = False
        if t is not None and t.group is not None:
            if t.group.labels == labels:
                expect = True
            else:
                g = next((g for g in self.groups[t.pool] if g.labels == labels), None)
                if g is not None and g.running < g.capacity and g.accepts(t.spec.labels):
                    t.group.running -= 1
                    g.running += 1
                    t.group = g
                    expect = True
        if ok != expect:
            self.fail("groups", f"move_attempt({lease}, {labels}) returned {ok}, expected {expect}")

    def set_group_capacity(self, pool: int, labels: dict[str, str] | None, n: int) -> None:
        groups = self.groups[pool]
        if not labels:
            groups[0].capacity = n
            self.scale.capacity_changed(pool)
        else:
            found = next((g for g in groups[1:] if g.labels == labels), None)
            if found is not None or n:
                self.scale.capacity_changed(pool)  # (removing an unknown group changes nothing)
            if found is None:
                if n:
                    groups.append(Group(dict(labels), n, self.group_order))
                    self.group_order += 1
                    groups[1:] = sorted(groups[1:], key=lambda g: (len(g.labels), g.order))
            elif n == 0:
                groups.remove(found)
            else:
                found.capacity = n
        cap = sum(g.capacity for g in groups)
        if self.core.pools[pool].capacity != cap:
            self.fail("groups", f"pool capacity {self.core.pools[pool].capacity} != sum of groups {cap}")

    # ------------------------------------------------------------------ actions

    def apply(self, actions: list[Any]) -> None:
        for a in actions:
            tp = type(a)
            if tp is Publish:
                self._on_event(a.event)
            elif tp is Dispatch:
                self._on_dispatch(a)
            elif tp is Abort:
                self._on_abort(a)
            elif tp is Resolve:
                t = self.tasks.get(a.task.id)
                if t is None or not t.await_resolve or a.task.status_name != t.status:
                    self.fail("one-terminal", f"{a} for {t} that did not just end")
                assert t is not None
                t.await_resolve = False
                t.resolved += 1
            elif tp is Persist:
                self.mutations.append(a.mutation)
            elif tp is Scale:
                pass  # checked by AutoscaleShadow.after_tick
            else:
                self.fail("lifecycle", f"unexpected action {a!r}")
        self.recur.end_call()
        self._settle()

    def _settle(self) -> None:
        """End of call: Dispatch/Resolve came; dependents and fixed starts are settled."""
        for t in self.ended:
            if t.await_resolve:
                self.fail("one-terminal", f"{t} ended without a Resolve")
            for c in t.children:
                self.touched.append(c)
            t.children = []
        for tid in self.touched:
            t = self.tasks[tid]
            if t.await_dispatch:
                self.fail("lifecycle", f"{t}: running without a Dispatch")
            if t.status == "blocked":
                st = self.edge_state(t)
                if st != "waiting":
                    self.fail("deps", f"{t} still blocked although its edges are {st}: {t.edges}")
        for t in self.ended:
            if t.await_dispatch:
                self.fail("lifecycle", f"{t}: running without a Dispatch")

    def _check_parents(self, t: FTask, state: Any) -> None:
        """``pinned``: the parents a dispatched task sees, against the shadow's edges."""
        seen = outcomes(self.core, state)
        if t.edges and len(seen) != len(t.edges):
            self.fail("pinned", f"{t} sees {len(seen)} parents for its edges {t.edges}")
        for (pid, _key, status, output, _msg), e in zip(seen, t.edges):
            p = self.tasks.get(e[0]) if e[0] is not None else None
            if p is None:
                continue
            if pid != p.id or status != p.status:
                self.fail("pinned", f"{t} sees parent {pid} {status}, expected {p}")
            if status == "succeeded" and output != p.output:
                self.fail("pinned", f"{t} sees output {output!r} of {p}, which returned {p.output!r}")
        held: dict[int, int] = {}
        for x in self.core.tasks.values():
            for e in x.parents or ():
                if hasattr(e, "opts"):
                    held[e.id] = held.get(e.id, 0) + 1
        if held != self.core.pinned:
            self.fail("pinned", f"pinned {self.core.pinned} but live dependents hold {held}")

    def _on_event(self, ev: Any) -> None:
        now = self.now
        self.stats["events"] += 1
        t = self.tasks.get(ev.id)
        if t is None:
            if self.call in ("tick", "recover", "add_recurring") and ev.status == "blocked":
                t = self.recur.on_new(ev)  # a recurring occurrence
            else:
                self.fail("lifecycle", f"event for unknown task: {ev}")
        assert t is not None
        if abs(ev.at - (self.tb + now) / NS) > 1e-6:
            self.fail("lifecycle", f"event time {ev.at} at now={now}")
        if ev.key != t.key or ev.pool != self.config.pools[t.pool].name:
            self.fail("lifecycle", f"event pool/key {ev.pool}/{ev.key} for {t}")
        old, new = t.status, ev.status
        if old == "new":
            if new != "blocked":
                self.fail("lifecycle", f"a new task must first publish blocked: {ev}")
            t.status = "blocked"
            self.scale.created(t.pool)
            self.touched.append(t.id)
            return
        if old in TERMINAL:
            self.fail("one-terminal", f"{t} published {new} after its terminal status {old}")
        occ = t.occ
        # (a tick materializes recurring occurrences after its timers and its fill pass: they are
        # replayed when the engine's first new occurrence shows up, or at the end of the call)
        if new == "running" and self.call == "tick" and not self.filling:
            self.filling = True
            self.scale.evaluate_due()
        overlap_skip = occ is not None and new == "skipped" and ev.message == MSG_PREVIOUS_RUNNING
        if overlap_skip:
            # docs/reference/behaviour.md#cron (scheduled -> skipped is not in the lifecycle table): an
            # occurrence due while the previous one is live; at recovery also blocked -> skipped (it came due)
            if old not in ("scheduled", "blocked") or (old == "blocked") != (self.call == "recover"):
                self.fail("lifecycle", f"{t}: {old} -> skipped for overlap in {self.call}")
            self.recur.check_skip(t, ev)
        elif new not in LEGAL.get(old, ()):
            self.fail("lifecycle", f"illegal transition {old} -> {new} for {t}")
        if new == "ready" and old in ("blocked", "scheduled") and self.call != "recover":
            self.scale.arrival(t.pool)  # new work became ready (not a retry): an arrival
        if occ is not None and new in ("ready", "running") and self.call != "recover":
            self.recur.check_due(t, new)
        spec = t.spec
        if old == "blocked":
            st = self.edge_state(t)
            if new in ("ready", "scheduled") and st != "ok":
                self.fail("deps", f"{t} released to {new} with edges {st}: {t.edges}")
            if new == "skipped" and not overlap_skip:
                self._check_skip(t, ev, st)
            start = spec.start_at
            if new == "scheduled" and (start is None or start <= now):
                self.fail("fixed-start", f"{t} scheduled with start {start}")
            if new == "ready" and start is not None and start > now:
                self.fail("fixed-start", f"{t} ready before its start {start}")
        if old == "scheduled" and new == "ready" and now < spec.start_at:  # type: ignore[operator]
            self.fail("fixed-start", f"{t} ready before its start {spec.start_at}")
        if new in ("missed",) or (new == "failed" and ev.message == MSG_MISSED):
            self._check_miss(t, ev, old)
        if new == "running":
            if self.call == "recover":
                if t.recovered not in ("running", "retrying") and not t.attempt:
                    self.fail("recovery", f"{t} replayed an attempt it never started")
            else:
                t.attempt += 1
                t.await_dispatch = True
                self.touched.append(t.id)
                if t.id in self.res[t.pool]:
                    del self.res[t.pool][t.id]
        if ev.attempt != t.attempt:
            self.fail("lifecycle", f"event attempt {ev.attempt} for {t}")
        if old == "running":
            self._end_attempt(t, new, ev)
        t.status = new
        if new == "retrying" or new == "dead_lettered":
            if new == "dead_lettered" and t.attempt < t.max_attempts:
                self.fail("cause", f"{t} dead-lettered with attempts left")
            if new == "retrying" and t.attempt >= t.max_attempts:
                self.fail("cause", f"{t} retrying after its last attempt")
        if new in TERMINAL:
            if new == "shed":
                self.fail("cause", f"{t} shed without queue bounds")
            if new == "cancelled" and not (self.call == "cancel" and self.cause[1] == t.id):
                self.fail("cause", f"{t} cancelled outside a cancel of it")
            self.res[t.pool].pop(t.id, None)
            t.await_resolve = True
            self.ended.append(t)
            self.stats["ended"] += 1
            if new == "skipped":
                self.stats["skipped"] += 1
            elif new == "missed":
                self.stats["missed"] += 1

    def _check_skip(self, t: FTask, ev: Any, st: str) -> None:
        msg = ev.message or ""
        if msg.startswith("dependency "):
            try:
                pid = int(msg.split()[1])
                pstatus = msg.rsplit(" ", 1)[1]
            except (IndexError, ValueError):
                pid, pstatus = -1, ""
            p = self.tasks.get(pid)
            ok = (
                p is not None
                and p.status == pstatus
                and any(e[0] == pid and not satisfied(e[2], pstatus) for e in t.edges)
            )
        elif msg == MSG_ALREADY:
            ok = st == "broken" and (t.pre_broken or t.recovered is not None)
        elif msg == MSG_AWAIT:
            timeout = self.config.pools[t.pool].await_timeout
            ok = (
                timeout is not None
                and any(e[0] is None for e in t.edges)
                and self.now >= t.submitted_at + timeout
            )
        else:
            ok = False
        if not ok:
            self.fail("deps", f"{t} skipped with message {ev.message!r}; edges {t.edges}")

    def _check_miss(self, t: FTask, ev: Any, old: str) -> None:
        spec = t.spec
        ok = (
            spec.start_at is not None
            and MISS_POLICY.get(spec.on_miss) == ev.status
            and ev.message == MSG_MISSED
            and old in ("scheduled", "ready")
            and self.now > spec.start_at + spec.tolerance
            and self.call == "tick"
        )
        if not ok:
            self.fail("fixed-start", f"{t} {ev.status} ({ev.message!r}) from {old}, spec {spec.short()}")

    def _end_attempt(self, t: FTask, new: str, ev: Any) -> None:
        if self.call == "recover":
            if new not in ("retrying", "dead_lettered") or ev.message != MSG_INTERRUPTED:
                self.fail("recovery", f"recovered attempt of {t} ended {new} ({ev.message!r})")
            self.interrupted.add(t.id)
            return
        lease = t.lease
        if lease is None or self.leases.get(lease) is not t:
            self.fail("lifecycle", f"{t} left running without a current lease")
        assert lease is not None
        del self.leases[lease]
        t.lease = None
        g = t.group
        assert g is not None
        g.running -= 1
        t.group = None
        for name, k in (t.spec.resources or {}).items():
            if name in self.sem:
                self.sem[name] -= k
        cause = self.cause
        kind = cause[0] if cause else ""
        if new == "succeeded":
            ok = kind == "complete" and cause[1] == lease and ev.message is None
            t.output = cause[2] if ok else None
            self.scale.succeeded(t.pool, t.spec.kind, self.now - t.run_start)
        elif new == "failed":
            ok = kind == "fail" and cause[1] == lease and cause[2] and ev.message == cause[3]
        elif new in ("retrying", "dead_lettered"):
            if kind == "fail" and cause[1] == lease:
                ok = not cause[2] and ev.message == cause[3]
            else:
                ok = self.aborted.get(lease) == ev.message and ev.message in (MSG_TIMEOUT, MSG_LEASE)
        elif new == "cancelled":
            ok = kind == "cancel" and self.aborted.get(lease) == MSG_CANCELLED
        else:
            ok = False
        if not ok:
            self.fail("cause", f"{t}: running -> {new} ({ev.message!r}) in {self.call} {cause}")

    def _on_abort(self, a: Abort) -> None:
        t = self.leases.get(a.lease)
        if t is None or t.id != a.task_id:
            self.fail("lifecycle", f"{a} for a lease that is not current")
        self.aborted[a.lease] = a.reason

    def _on_dispatch(self, d: Dispatch) -> None:
        t = self.tasks.get(d.task.id)
        if t is None or not t.await_dispatch:
            self.fail("lifecycle", f"{d} without a preceding running event")
        assert t is not None
        t.await_dispatch = False
        now = self.now
        self.stats["dispatches"] += 1
        if d.lease in self.leases:
            self.fail("lifecycle", f"lease {d.lease} issued twice")
        if self.edge_state(t) != "ok":
            self.fail("deps", f"{t} dispatched with unsatisfied edges {t.edges}")
        self._check_parents(t, d.task)
        spec = t.spec
        if spec.start_at is not None and now < spec.start_at:
            self.fail("fixed-start", f"{t} dispatched before its start {spec.start_at}")
        # placement (docs/reference/behaviour.md#labels): labels, per-group capacity, fewest labels first
        need = spec.labels
        glabels = d.group or {}
        if need and any(glabels.get(k) != v for k, v in need.items()):
            self.fail("groups", f"{t} with labels {need} dispatched on group {glabels}")
        first = next((g for g in self.groups[t.pool] if g.running < g.capacity and g.accepts(need)), None)
        if first is None:
            self.fail("groups", f"{t} dispatched on {glabels} but no group has a free slot for it")
        assert first is not None
        if first.labels != glabels:
            self.fail(
                "groups", f"{t} dispatched on {glabels}, the first free accepting group is {first.labels}"
            )
        first.running += 1
        t.group = first
        # shared resources (docs/reference/behaviour.md#resources), taken atomically at dispatch
        for name, k in (spec.resources or {}).items():
            if name in self.sem:
                self.sem[name] += k
                if self.sem[name] > self.res_cap[name]:
                    self.fail(
                        "resources",
                        f"semaphore {name}: {self.sem[name]} permits in use > {self.res_cap[name]}",
                    )
            else:
                b = self.bucket[name]
                b[0] = min(float(b[3]), b[0] + b[2] * (now - b[1]) / NS)
                b[1] = now
                if b[0] < k - 1e-6:
                    self.fail(
                        "resources",
                        f"token bucket {name}: took {k} with {b[0]:.6f} tokens (rate {b[2]}, burst {b[3]})",
                    )
                b[0] -= k
        t.lease = d.lease
        t.run_start = now
        self.leases[d.lease] = t

    # ------------------------------------------------------------------ after a tick

    def _watch(self, t: FTask) -> None:
        """Timer obligations of a new task: start, miss, await timeout (checked by after_tick)."""
        s = t.spec.start_at
        if s is not None:
            heapq.heappush(self.watch, (s, 0, t.id))
            if t.spec.on_miss:
                heapq.heappush(self.watch, (s + t.spec.tolerance + 1, 1, t.id))
        timeout = self.config.pools[t.pool].await_timeout
        if timeout is not None and any(e[0] is None for e in t.edges):
            heapq.heappush(self.watch, (t.submitted_at + timeout, 2, t.id))

    def after_tick(self) -> None:
        """Timers fire exactly when due: starts, misses, await timeouts - nothing overdue survives a tick."""
        now = self.now
        w = self.watch
        while w and w[0][0] <= now:
            due, kind, tid = heapq.heappop(w)
            t = self.tasks.get(tid)
            if t is None or t.attempt or t.status in TERMINAL:
                continue
            if kind == 0 and t.status == "scheduled":
                self.fail("fixed-start", f"{t} still scheduled after its start {due}")
            elif kind == 1 and t.status in ("scheduled", "ready"):
                self.fail("fixed-start", f"{t} not {MISS_POLICY[t.spec.on_miss]} after start + tolerance")
            elif kind == 2 and t.status == "blocked" and any(e[0] is None for e in t.edges):
                self.fail(
                    "deps", f"{t} still awaits {t.edges} after await_timeout (submitted {t.submitted_at})"
                )

    # ------------------------------------------------------------------ recovery

    def rebuild(self, committed: list[Any]) -> dict[int, tuple[str, int, object, bool]]:
        """The state a crash leaves: exactly what the committed mutations say (own fold).

        Returns id -> (last committed status, attempt, output, has_output)."""
        subs: dict[int, Submitted] = {}
        last: dict[int, tuple[str, int, object, bool]] = {}
        for m in committed:
            if type(m) is Submitted:
                subs[m.id] = m
                last[m.id] = ("submitted", 0, None, False)
            elif type(m) is StatusChange:
                last[m.id] = (m.status, m.attempt, m.output, m.has_output)
        old = self.tasks
        self.interrupted: set[int] = set()
        self.tasks = {}
        self.keys = {}
        self.awaiting = {}
        for tid in subs:
            o = old[tid]
            st, attempt, output, _ = last[tid]
            t = FTask(tid, o.pool, o.spec, o.max_attempts, o.submitted_at)
            t.attempt = attempt
            t.recovered = st
            t.occ = o.occ
            if st in TERMINAL:
                t.status = st
                t.output = output
                t.resolved = 1
            self.tasks[tid] = t
            if t.key is not None:
                self.keys[_sk(t.spec.tenant, t.key)] = tid
        # edges of live tasks that never ran, resolved as at submission (no terminal was pruned)
        for t in self.tasks.values():
            if t.status in TERMINAL or t.recovered != "submitted":
                continue
            for target, cond in t.spec.deps or ():
                sk = _sk(t.spec.tenant, target)
                tid = self.keys.get(sk) if isinstance(target, str) else target
                p = self.tasks.get(tid) if tid is not None else None
                if p is None:
                    t.edges.append([None, sk, cond])
                    self.awaiting.setdefault(sk, []).append(t.id)
                    continue
                t.edges.append([p.id, None, cond])
                if p.status in TERMINAL:
                    if not satisfied(cond, p.status):
                        t.pre_broken = True
                else:
                    p.children.append(t.id)
            if t.spec.start_at is not None:
                self.res[t.pool][t.id] = self.window(t.spec)
            self._watch(t)
        for t in self.tasks.values():
            if t.status not in TERMINAL:
                t.status = "new"
        self.recur.rebuild(committed)
        self.stats["recoveries"] += 1
        return last

    def check_recovered(self, last: dict[int, tuple[str, int, object, bool]], acked: set[int]) -> None:
        core = self.core
        for tid in acked:
            if tid not in core.tasks or tid not in self.tasks:
                self.fail("recovery", f"acknowledged task {tid} lost by the crash")
        for tid, (st, attempt, output, has_output) in last.items():
            ts = core.tasks.get(tid)
            if ts is None:
                self.fail("recovery", f"committed task {tid} ({st}) unknown after recovery")
            assert ts is not None
            t = self.tasks[tid]
            if ts.status_name != t.status:
                self.fail("recovery", f"engine {ts!r} but shadow {t}")
            if st in TERMINAL:
                if ts.status_name != st or (has_output and ts.output != output):
                    self.fail(
                        "recovery", f"terminal {tid} was {st}/{output!r}, now {ts.status_name}/{ts.output!r}"
                    )
            # docs/reference/behaviour.md#recovery: a running task resumes as retrying (its attempt counted),
            # ready at once after a zero backoff, dead-lettered if that was its last attempt
            elif st in ("running", "retrying") and (tid not in self.interrupted or ts.attempt != attempt):
                self.fail("recovery", f"{tid} was {st} (attempt {attempt}), recovered as {ts!r}")
        self.check_full()

    def on_commit(self, muts: list[Any]) -> None:
        self.recur.on_commit(muts)
        for m in muts:
            if type(m) is StatusChange and m.status in TERMINAL:
                prev = self.committed_terminal.get(m.id)
                if prev is not None:
                    self.fail("one-terminal", f"task {m.id} committed terminal {m.status} after {prev}")
                self.committed_terminal[m.id] = m.status

    # ------------------------------------------------------------------ full comparison

    def check_full(self) -> None:
        core = self.core
        if set(core.tasks) != set(self.tasks):
            extra = sorted(set(core.tasks) - set(self.tasks))[:5]
            missing = sorted(set(self.tasks) - set(core.tasks))[:5]
            self.fail("ids", f"task table differs: engine extra {extra}, missing {missing}")
        for tid, t in self.tasks.items():
            ts = core.tasks[tid]
            if ts.status_name != t.status or ts.attempt != t.attempt:
                self.fail("lifecycle", f"engine {ts!r} != shadow {t}")
            if t.status == "succeeded" and ts.output != t.output:
                self.fail("lifecycle", f"{t} output {ts.output!r} != {t.output!r}")
        if core.keys != self.keys:
            self.fail("keys", "key table differs")
        for i, groups in enumerate(self.groups):
            busy = [g.busy for g in core.pools[i].groups]
            if busy != [g.running for g in groups]:
                self.fail("groups", f"pool {i} group busy {busy} != shadow {[g.running for g in groups]}")
        for name, used in self.sem.items():
            if core.resources[name].in_use(self.now) != used:
                self.fail(
                    "resources",
                    f"semaphore {name}: engine in use {core.resources[name].in_use(self.now)} != {used}",
                )

    def check_terminal_all(self, acked: set[int]) -> None:
        for tid in acked:
            t = self.tasks.get(tid)
            if t is None or t.status not in TERMINAL or t.resolved != 1:
                self.fail("liveness", f"acknowledged task {tid} not terminal/resolved once: {t}")
        live = [t for t in self.tasks.values() if t.status not in TERMINAL]
        if live:
            self.fail("liveness", f"{len(live)} tasks still live, e.g. {live[:5]}")
