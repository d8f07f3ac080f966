"""An independent shadow model of the engine, checked after every engine call.

The shadow is built only from what a shell can see: the inputs it gave the engine (submitted
specs, reports, cancels, capacity changes, the clock) and the actions the engine returned
(``Publish`` events with ``emit_transitions=True``, ``Dispatch``, ``Abort``, ``Resolve``,
``SpaceAvailable``).  Lifecycle rules, messages, retry timing, retention and overflow are
written down here from docs/reference/behaviour.md#ids-keys-retention, docs/reference/behaviour.md#lifecycle,
docs/reference/behaviour.md#ordering, docs/reference/behaviour.md#reliability,
docs/reference/behaviour.md#overload, docs/reference/behaviour.md#metrics, not imported from the engine.  The
engine's state is read only to *compare* against the shadow (counters, totals, task table, keys, leases) and,
for the priority check, through the public ``Core.score``.

Invariants (each violation names one of these):

``lifecycle``      every Publish is a legal docs/reference/behaviour.md#lifecycle transition of a known task,
                   with the right pool/key/attempt/time; new tasks publish ``blocked`` then ``ready``.
``one-terminal``   exactly one terminal status per task: nothing after it, one Resolve.
``cause``          every transition has its cause: ``succeeded`` only from a successful report,
                   ``failed`` from a Permanent report, ``retrying``/``dead_lettered`` from a
                   retryable report, timeout or lost lease (dead-lettered iff attempts are used
                   up), ``cancelled`` from a cancel, ``shed`` from an overflowing submit; with
                   the documented messages.
``ids``            ids are ``seq`` 1, 2, 3 ... (epoch 0), strictly increasing, never reused; a
                   duplicate consumes none.
``keys``           a key maps to one id while that task is live or retained
                   (docs/reference/behaviour.md#ids-keys-retention); the duplicate answer is predicted
                   exactly, including after retention frees it.
``submit``         the outcome of every submit/batch is predicted: id, duplicate, or the error
                   code (``unknown_pool``, ``duplicate_key_in_batch``, ``full``, ``overloaded``)
                   and the shed victim (docs/reference/behaviour.md#overload).
``reports``        complete/fail/heartbeat/cancel return True iff the lease/task is current;
                   stale reports change nothing and are counted.
``capacity``       a Dispatch happens only while running < capacity (per pool).
``leases``         lease ids are unique and increasing; Abort only for a current lease.
``timers``         retries become ready inside the backoff window (exactly at ``retry_after``),
                   timeouts/lease expiries fire exactly when due, never early, never late; after
                   a tick ``next_wakeup`` is in the future and not after the earliest obligation.
``work-conserving`` after a tick no pool has both a free slot and a ready task.
``priority``       see :meth:`Shadow._check_priority`.
``counters``       pool busy/pending/ready/pending_by_class, live, running and totals equal the
                   shadow's (every call); the task table, keys and leases (periodically).
``metrics``        snapshot window figures (dispatched, succeeded, failed, retried,
                   priority_adherence) equal the shadow's (periodically).
``liveness``       checked by the simulator: once faults stop every task ends terminal and no
                   submitter waits forever.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from cronoq.engine.actions import Abort, Dispatch, Publish, Resolve, SpaceAvailable
from cronoq.engine.config import CoreConfig
from cronoq.engine.core import Core
from cronoq.engine.model import RETRYING, RUNNING, SCHEDULED
from cronoq.engine.time import NS
from cronoq.engine.timers import T_LEASE, T_RETRY, T_START, T_TIMEOUT
from cronoq.errors import SubmitError

from .workload import TaskSpec


class InvariantViolation(AssertionError):
    """An invariant failed; ``invariant`` names it (see the module docstring)."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"[{invariant}] {detail}")
        self.invariant = invariant
        self.detail = detail


# docs/reference/behaviour.md#lifecycle, written down from the table (deliberately not imported from
# cronoq.engine.model)
LEGAL: dict[str, frozenset[str]] = {
    "blocked": frozenset({"ready", "scheduled", "skipped", "cancelled", "shed"}),
    "scheduled": frozenset({"ready", "missed", "failed", "cancelled", "shed"}),
    "ready": frozenset({"running", "missed", "failed", "cancelled", "shed"}),
    "running": frozenset({"succeeded", "failed", "retrying", "dead_lettered", "cancelled"}),
    "retrying": frozenset({"ready", "cancelled", "shed"}),
}
TERMINAL = frozenset({"succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed"})
PENDING = frozenset({"blocked", "scheduled", "ready", "retrying"})
NUM_CLASSES = 4
MSG_TIMEOUT = "attempt timed out"  # docs/reference/behaviour.md#lifecycle
MSG_CANCELLED = "cancelled"  # docs/reference/behaviour.md#lifecycle
MSG_SHED = "shed under overload"  # docs/reference/behaviour.md#lifecycle
# ours (docs/reference/behaviour.md#reliability names no message for a lost lease)
MSG_LEASE = "lease expired"
EWMA_ALPHA = 0.2  # docs/reference/behaviour.md#expected-duration
TRACKED_TOTALS = (
    "submitted",
    "dispatched",
    "succeeded",
    "failed",
    "dead_lettered",
    "cancelled",
    "skipped",
    "missed",
    "shed",
    "retries",
    "timeouts",
    "lease_expiries",
    "stale_completions",
    "recurring_conflicts",
    "recurring_rejected",
    "recurring_invalid",
)
#: docs/reference/behaviour.md#overload: shed_lowest/shed_oldest evict a *queued* task.  The engine picks
#: victims among ``ready`` tasks only (its lanes); see docs/architecture/testing.md.  Widen this set to check
#: the broader reading of "queued" (all not-yet-running statuses).
SHED_CANDIDATE_STATUSES = frozenset({"ready"})
#: the informational full scan for lane inversions is skipped above this many ready tasks
FULL_SCAN_MAX = 256


def _to_ns(seconds: float) -> int:
    return round(seconds * NS)


class TaskRec:
    """The shadow's view of one task."""

    __slots__ = (
        "aborted",
        "attempt",
        "await_dispatch",
        "await_resolve",
        "cause",
        "cls",
        "deadline",
        "dispatched_at",
        "finished_at",
        "hint",
        "id",
        "key",
        "kind",
        "latest_start",
        "lease",
        "max_attempts",
        "pool",
        "pruned",
        "ready_at",
        "ready_gen",
        "renewed_at",
        "resolved",
        "retry",
        "retry_hi",
        "retry_lo",
        "seq",
        "spec",
        "status",
        "submitted_at",
        "timeout",
    )

    def __init__(self, tid: int, seq: int, pool: int, spec: TaskSpec, retry: Any, now: int) -> None:
        self.id = tid
        self.seq = seq
        self.pool = pool
        self.spec = spec
        self.cls = spec.priority
        self.key = spec.key
        self.kind = spec.kind
        self.deadline = spec.deadline
        self.timeout = spec.timeout
        self.hint = spec.hint
        self.retry = retry
        self.max_attempts = retry.max_attempts
        self.status = "blocked"
        self.attempt = 0
        self.lease: int | None = None
        self.dispatched_at = 0
        self.renewed_at = 0
        self.ready_at = now
        self.ready_gen = 0
        self.latest_start = 0
        self.finished_at: int | None = None
        self.submitted_at = now
        self.cause: tuple[Any, ...] | None = None
        self.aborted = False
        self.await_dispatch = False
        self.await_resolve = False
        self.resolved = 0
        self.pruned = False
        self.retry_lo = 0
        self.retry_hi = 0

    def __repr__(self) -> str:
        return f"<task {self.id} {self.status} p{self.cls} attempt={self.attempt} key={self.key}>"


class PoolShadow:
    __slots__ = (
        "capacity",
        "cfg",
        "dl",
        "fifo",
        "idx",
        "name",
        "pending_by_class",
        "ready",
        "ready_by_class",
        "running",
        "waiting_full",
        "window",
    )

    def __init__(self, idx: int, cfg: Any) -> None:
        self.idx = idx
        self.cfg = cfg
        self.name = cfg.name
        self.capacity = cfg.initial_capacity
        self.running: set[int] = set()  # leases
        self.ready: set[int] = set()  # task ids
        self.pending_by_class = [0] * NUM_CLASSES
        self.ready_by_class = [0] * NUM_CLASSES
        # the shadow's own head finders, lazily invalidated by ready_gen:
        # no-deadline tasks by seq; deadline tasks by (latest start, seq)
        self.fifo: list[list[tuple[int, int, int]]] = [[] for _ in range(NUM_CLASSES)]
        self.dl: list[list[tuple[int, int, int, int]]] = [[] for _ in range(NUM_CLASSES)]
        self.waiting_full = False
        # second -> [dispatched, succeeded, failed attempts, retried, jumped]
        self.window: dict[int, list[int]] = {}

    @property
    def pending(self) -> int:
        return sum(self.pending_by_class)

    def slot(self, now: int) -> list[int]:
        sec = now // NS
        s = self.window.get(sec)
        if s is None:
            s = self.window[sec] = [0, 0, 0, 0, 0]
        return s


class SubmitPrediction:
    """What the shadow expects a submit/batch to answer."""

    __slots__ = ("code", "full_pool", "items", "victim")

    def __init__(self) -> None:
        self.code: str | None = None  # expected SubmitError code, None for success
        self.full_pool: int | None = None  # pool whose waiting flag a "full" answer sets
        self.items: list[tuple[int, bool]] = []  # expected (id, duplicate) per item
        self.victim: int | None = None  # shed victim id


class Shadow:
    """The independent model; the harness feeds it every call and its actions."""

    def __init__(self, config: CoreConfig, core: Core, *, full_scan_priority: bool = True) -> None:
        self.config = config
        self.core = core
        self.pools = [PoolShadow(i, p) for i, p in enumerate(config.pools)]
        self.pool_by_name = {p.name: p for p in self.pools}
        self.default_pool = next((p.idx for p in self.pools if p.name == "default"), 0)
        self.tasks: dict[int, TaskRec] = {}
        self.keys: dict[str, int] = {}
        self.leases: dict[int, TaskRec] = {}
        self.retrying: set[int] = set()
        self.retained: deque[TaskRec] = deque()
        self.next_seq = 1
        self.last_id = 0
        self.live_ids: set[int] = set()
        self.last_lease = 0
        self.live = 0
        self.totals = dict.fromkeys(TRACKED_TOTALS, 0)
        self.ewma: dict[tuple[int, str], float] = {}
        pc = config.priority
        self.base, self.aging, self.age_cap = pc.base, pc.aging_rate, pc.age_cap
        uc = config.urgency
        self.u_max, self.u_window = uc.max, _to_ns(uc.window)
        self.u_rate, self.u_cap = uc.overdue_rate, uc.overdue_cap
        self.full_scan_priority = full_scan_priority
        # call context
        self.now = 0
        self.call = ""
        self.new: dict[int, TaskSpec] = {}
        self.created: list[int] = []
        self.space: list[int] = []  # pools that got SpaceAvailable in the current call
        self.min_pending: dict[int, int] = {}  # lowest pending per pool during the call
        self.victim: int | None = None
        self.cancel_target: TaskRec | None = None
        # statistics (informational)
        self.stats = {
            "events": 0,
            "dispatches": 0,
            "jumps": 0,
            "lane_inversions": 0,
            "priority_checks": 0,
            "stale_reports": 0,
        }

    # ----------------------------------------------------------------------------- helpers

    def fail(self, invariant: str, detail: str) -> None:
        raise InvariantViolation(invariant, f"t={self.now / NS:.9f}s call={self.call}: {detail}")

    def pool_of(self, spec: TaskSpec) -> PoolShadow | None:
        if spec.pool is None:
            return self.pools[self.default_pool]
        return self.pool_by_name.get(spec.pool)

    def prune(self, now: int) -> None:
        """docs/reference/behaviour.md#ids-keys-retention retention: terminal tasks are kept for ``retention``
        and at most ``retention_max`` entries, oldest first.  The surviving set at any instant does not
        depend on when pruning ran, so the shadow may prune eagerly."""
        r = self.retained
        horizon = now - self.config.retention
        cap = self.config.retention_max
        while r and (len(r) > cap or r[0].finished_at <= horizon):  # type: ignore[operator]
            t = r.popleft()
            t.pruned = True
            if t.key is not None and self.keys.get(t.key) == t.id:
                del self.keys[t.key]

    def resolve_ref(self, ref: int | str) -> TaskRec | None:
        if isinstance(ref, str):
            tid = self.keys.get(ref)
            if tid is None:
                return None
            ref = tid
        t = self.tasks.get(ref)
        if t is None or t.pruned:
            return None
        return t

    def expected_duration(self, t: TaskRec) -> int:
        """docs/reference/behaviour.md#expected-duration: hint, else the learned EWMA for (pool, kind), else
        the pool default."""
        if t.hint is not None:
            return t.hint
        v = self.ewma.get((t.pool, t.kind))
        if v is not None:
            return int(v)
        return self.pools[t.pool].cfg.default_duration

    def spec_score(self, t: TaskRec, now: int) -> float:
        """docs/reference/behaviour.md#score, docs/reference/behaviour.md#urgency, computed from the shadow's
        own ready time and latest start."""
        c = t.cls
        wait_s = (now - t.ready_at) / NS
        s = self.base[c] + min(self.aging[c] * wait_s, self.age_cap[c])
        if t.deadline is not None:
            expected = t.deadline - t.latest_start
            w = max(self.u_window, expected)
            slack = t.latest_start - now
            if slack >= w:
                u = 0.0
            elif slack >= 0:
                u = self.u_max * (1.0 - slack / w) if w > 0 else self.u_max
            else:
                u = self.u_max + min(self.u_rate * (-slack / NS), self.u_cap)
            s += u
        return s

    # ----------------------------------------------------------------------------- calls

    def begin(self, now: int, call: str) -> None:
        if now < self.now:
            self.fail("timers", f"clock went backwards ({now} < {self.now})")
        self.now = now
        self.call = call
        self.new = {}
        self.created = []
        self.space = []
        self.min_pending = {}
        self.victim = None
        self.cancel_target = None

    def predict_submit(self, specs: Sequence[TaskSpec], batch: bool) -> SubmitPrediction:
        """docs/reference/behaviour.md#ids-keys-retention, docs/reference/behaviour.md#overload: what
        submit/submit_batch must answer."""
        now = self.now
        self.prune(now)
        pred = SubmitPrediction()
        pools: list[PoolShadow] = []
        seen: set[str] = set()
        need: dict[int, int] = {}
        for spec in specs:
            key = spec.key
            if not batch and key is not None and key in self.keys:
                pred.items = [(self.keys[key], True)]
                return pred
            if key is not None:
                if key in seen:
                    pred.code = "duplicate_key_in_batch"
                    return pred
                seen.add(key)
                if key in self.keys:
                    continue  # a duplicate: its other fields (the pool too) are not looked at
            pool = self.pool_of(spec)
            if pool is None:
                pred.code = "unknown_pool"
                return pred
            pools.append(pool)
            need[pool.idx] = need.get(pool.idx, 0) + 1
        for idx, n in need.items():
            pool = self.pools[idx]
            mp = pool.cfg.max_pending
            if mp is None or pool.pending + n <= mp:
                continue
            policy = pool.cfg.overflow
            if batch and n > mp:
                pred.code = "overloaded"
            elif policy == "wait":
                pred.code = "full"
                pred.full_pool = idx
            elif batch or policy == "reject":
                pred.code = "overloaded"
            else:
                victim = self._shed_victim(pool, specs[0].priority)
                if victim is None:
                    pred.code = "overloaded"
                else:
                    pred.victim = victim.id
            if pred.code is not None:
                return pred
        seq = self.next_seq
        for spec in specs:
            if spec.key is not None and spec.key in self.keys:
                pred.items.append((self.keys[spec.key], True))
            else:
                pred.items.append((seq, False))
                seq += 1
        return pred

    def _shed_victim(self, pool: PoolShadow, new_class: int) -> TaskRec | None:
        """docs/reference/behaviour.md#overload: shed_lowest evicts the newest queued task of the least
        important class present if less important than the new task; shed_oldest the oldest queued Low
        task."""
        ids: Iterable[int] = pool.ready if {"ready"} >= SHED_CANDIDATE_STATUSES else self.live_ids
        cands = [
            t
            for t in (self.tasks[i] for i in ids)
            if t.pool == pool.idx and t.status in SHED_CANDIDATE_STATUSES
        ]
        if pool.cfg.overflow == "shed_lowest":
            for c in range(NUM_CLASSES - 1, new_class, -1):
                in_class = [t for t in cands if t.cls == c]
                if in_class:
                    return max(in_class, key=lambda t: t.seq)
            return None
        low = [t for t in cands if t.cls == NUM_CLASSES - 1]
        return min(low, key=lambda t: t.seq) if low else None

    def after_submit(
        self,
        specs: Sequence[TaskSpec],
        pred: SubmitPrediction,
        result: list[tuple[int, bool]] | None,
        error: SubmitError | None,
        actions: list[Any],
    ) -> None:
        if error is not None:
            if pred.code != error.code:
                self.fail(
                    "submit",
                    f"got SubmitError({error.code!r}, {error.message!r}), expected {pred.code or pred.items}",
                )
            if actions:
                self.fail("submit", f"a rejected submission produced actions {actions}")
            if pred.full_pool is not None:
                self.pools[pred.full_pool].waiting_full = True
            return
        if pred.code is not None:
            self.fail("submit", f"expected SubmitError({pred.code!r}), got {result}")
        assert result is not None
        if list(result) != pred.items:
            self.fail(
                "ids" if any(not d for _, d in result) else "keys", f"got {result}, expected {pred.items}"
            )
        for (tid, dup), spec in zip(result, specs):
            if not dup:
                self.new[tid] = spec
        self.victim = pred.victim
        self.apply(actions)
        for tid in self.new:
            t = self.tasks.get(tid)
            if t is None:
                self.fail("lifecycle", f"new task {tid} published no events")
            elif t.status != "ready":  # no dependencies/fixed starts yet: ready at once
                self.fail("lifecycle", f"new task {tid} is {t.status} after submit, expected ready")
        if self.victim is not None:
            v = self.tasks[self.victim]
            if v.status != "shed":
                self.fail("submit", f"expected task {v.id} to be shed, it is {v.status}")
        self.next_seq += len(self.new)

    def before_report(self, lease: int, cause: tuple[Any, ...]) -> TaskRec | None:
        t = self.leases.get(lease)
        if t is not None:
            t.cause = cause
        return t

    def after_report(self, kind: str, lease: int, t: TaskRec | None, ok: bool, actions: list[Any]) -> None:
        if ok != (t is not None):
            self.fail(
                "reports", f"{kind}(lease={lease}) returned {ok}, the lease is {'current' if t else 'stale'}"
            )
        if t is None:
            if kind != "heartbeat":
                self.totals["stale_completions"] += 1
                self.stats["stale_reports"] += 1
            if actions:
                self.fail("reports", f"stale {kind} produced actions {actions}")
            return
        if kind == "heartbeat":
            if actions:
                self.fail("reports", f"heartbeat produced actions {actions}")
            t.renewed_at = self.now
            return
        self.apply(actions)
        if t.lease == lease:
            self.fail("cause", f"{kind} on current lease {lease} left {t} running")
        if kind == "complete" and t.status != "succeeded":
            self.fail("cause", f"complete left {t}")
        t.cause = None

    def before_cancel(self, ref: int | str) -> TaskRec | None:
        self.prune(self.now)
        t = self.resolve_ref(ref)
        if t is not None and t.status not in TERMINAL:
            t.cause = ("cancel", MSG_CANCELLED)
            self.cancel_target = t
            return t
        return None

    def after_cancel(self, ref: int | str, t: TaskRec | None, ok: bool, actions: list[Any]) -> None:
        if ok != (t is not None):
            self.fail("reports", f"cancel({ref!r}) returned {ok}, expected {t is not None}")
        self.apply(actions)
        if t is not None and t.status != "cancelled":
            self.fail("cause", f"cancel({ref!r}) left {t}")

    def after_set_capacity(self, pool_name: str, n: int, actions: list[Any]) -> None:
        if actions:
            self.fail("capacity", f"set_capacity produced actions {actions}")
        self.pools[self.pool_by_name[pool_name].idx].capacity = n

    def after_tick(self, actions: list[Any]) -> None:
        self.apply(actions)
        now = self.now
        core = self.core
        # timers: nothing overdue survives a tick
        earliest: int | None = None
        for lease, t in self.leases.items():
            pool = self.pools[t.pool]
            if t.timeout is not None:
                due = t.dispatched_at + t.timeout
                # a zero timeout on an attempt dispatched by this very tick is due now: the
                # engine reports it through next_wakeup() == now (the shell re-ticks at once)
                if due < now or (due == now and t.dispatched_at != now):
                    self.fail("timers", f"{t} lease {lease} is past its timeout (due {due})")
                earliest = due if earliest is None or due < earliest else earliest
            ttl = pool.cfg.lease_ttl
            if ttl is not None:
                due = t.renewed_at + ttl
                if due <= now:
                    self.fail("timers", f"{t} lease {lease} expired at {due} but is still running")
                earliest = due if earliest is None or due < earliest else earliest
        for tid in self.retrying:
            t = self.tasks[tid]
            if t.retry_hi <= now:
                self.fail("timers", f"{t} should have become ready by {t.retry_hi}")
            earliest = t.retry_hi if earliest is None or t.retry_hi < earliest else earliest
        nw = core.next_wakeup()
        if nw is not None and nw <= now and earliest != now:
            self.fail("timers", f"next_wakeup {nw} is not in the future after a tick")
        if earliest is not None and (nw is None or nw > earliest):
            self.fail("timers", f"next_wakeup {nw} is later than the earliest due timer {earliest}")
        # work conservation
        if not core.paused:
            for pool in self.pools:
                if pool.ready and len(pool.running) < pool.capacity:
                    self.fail(
                        "work-conserving",
                        f"pool {pool.name}: {len(pool.ready)} ready, {len(pool.running)} running, "
                        f"capacity {pool.capacity} after tick",
                    )

    def after_lookup(self, ref: int | str, found: Any) -> None:
        t = self.resolve_ref(ref)
        if (found is None) != (t is None) or (t is not None and found.id != t.id):
            self.fail("keys", f"lookup({ref!r}) found {found}, the shadow expected {t}")

    # ----------------------------------------------------------------------------- actions

    def apply(self, actions: Iterable[Any]) -> None:
        for a in actions:
            tp = type(a)
            if tp is Publish:
                self._on_event(a.event)
            elif tp is Dispatch:
                self._on_dispatch(a)
            elif tp is Abort:
                self._on_abort(a)
            elif tp is Resolve:
                self._on_resolve(a)
            elif tp is SpaceAvailable:
                self._on_space(a)
            else:
                self.fail("lifecycle", f"unexpected action {a!r}")
        for t in self.tasks_awaiting():
            self.fail("lifecycle", f"{t}: expected a Dispatch/Resolve action that never came")
        if self.space:
            self._check_space()

    def tasks_awaiting(self) -> list[TaskRec]:
        out = []
        for tid in self.created:
            t = self.tasks[tid]
            if t.await_dispatch or t.await_resolve:
                out.append(t)
        self.created = []
        return out

    def _touch(self, t: TaskRec) -> None:
        self.created.append(t.id)

    def _on_event(self, ev: Any) -> None:
        now = self.now
        self.stats["events"] += 1
        t = self.tasks.get(ev.id)
        if t is None:
            spec = self.new.get(ev.id)
            if spec is None:
                self.fail("lifecycle", f"event for unknown task: {ev}")
            if ev.status != "blocked" or ev.attempt != 0:
                self.fail("lifecycle", f"a new task must first publish blocked/attempt 0: {ev}")
            pool = self.pool_of(spec)
            assert pool is not None
            retry = spec.retry or pool.cfg.retry
            if ev.id <= self.last_id:
                self.fail("ids", f"new id {ev.id} not above the last id {self.last_id}")
            self.last_id = ev.id
            self.live_ids.add(ev.id)
            t = TaskRec(ev.id, ev.id, pool.idx, spec, retry, now)
            self.tasks[ev.id] = t
            if spec.key is not None:
                if spec.key in self.keys:
                    self.fail("keys", f"key {spec.key} given to {ev.id} while held by {self.keys[spec.key]}")
                self.keys[spec.key] = ev.id
            self.live += 1
            self.totals["submitted"] += 1
            pool.pending_by_class[t.cls] += 1
            self._check_event_fields(t, ev)
            return
        old, new = t.status, ev.status
        if old in TERMINAL:
            self.fail("one-terminal", f"{t} published {new} after its terminal status {old}")
        if new not in LEGAL[old]:
            self.fail("lifecycle", f"illegal transition {old} -> {new} for task {t.id}")
        pool = self.pools[t.pool]
        if new == "running":
            self._check_priority(t, pool, now)
            t.attempt += 1
        self._check_event_fields(t, ev)
        # leave old
        if old == "ready":
            pool.ready.discard(t.id)
            pool.ready_by_class[t.cls] -= 1
        elif old == "retrying":
            self.retrying.discard(t.id)
            # never early; "never late" is checked after every tick (after_tick)
            if new == "ready" and now < t.retry_lo:
                self.fail(
                    "timers", f"{t} ready at {now}, before its backoff window [{t.retry_lo}, {t.retry_hi}]"
                )
        elif old == "running":
            self._end_lease(t, pool, new)
        if (old in PENDING) != (new in PENDING):
            if old in PENDING:
                pool.pending_by_class[t.cls] -= 1
                p = pool.pending
                low = self.min_pending.get(pool.idx)
                if low is None or p < low:
                    self.min_pending[pool.idx] = p
            else:
                pool.pending_by_class[t.cls] += 1
        t.status = new
        # enter new
        if new == "ready":
            pool.ready.add(t.id)
            pool.ready_by_class[t.cls] += 1
            t.ready_at = now
            t.ready_gen += 1
            if t.deadline is not None:
                t.latest_start = t.deadline - self.expected_duration(t)
                heapq.heappush(pool.dl[t.cls], (t.latest_start, t.seq, t.ready_gen, t.id))
            else:
                heapq.heappush(pool.fifo[t.cls], (t.seq, t.ready_gen, t.id))
        elif new == "running":
            t.await_dispatch = True
            self._touch(t)
        elif new == "retrying":
            self._enter_retrying(t, pool, ev)
        elif new in TERMINAL:
            self._enter_terminal(t, pool, ev, old)

    def _check_event_fields(self, t: TaskRec, ev: Any) -> None:
        if ev.pool != self.pools[t.pool].name or ev.key != t.key:
            self.fail(
                "lifecycle", f"event pool/key {ev.pool}/{ev.key} for {t} (pool {self.pools[t.pool].name})"
            )
        if ev.attempt != t.attempt:
            self.fail("lifecycle", f"event attempt {ev.attempt} for {t}: {ev}")
        if not math.isclose(ev.at, (self.config.time_base + self.now) / NS, rel_tol=0, abs_tol=1e-6):
            self.fail("lifecycle", f"event time {ev.at} at now={self.now}")

    def _end_lease(self, t: TaskRec, pool: PoolShadow, new: str) -> None:
        lease = t.lease
        if lease is None or self.leases.get(lease) is not t:
            self.fail("leases", f"{t} left running without a current lease")
        del self.leases[lease]  # type: ignore[arg-type]
        pool.running.discard(lease)  # type: ignore[arg-type]
        t.lease = None
        slot = pool.slot(self.now)
        if new == "succeeded":
            slot[1] += 1
            run = self.now - t.dispatched_at
            k = (t.pool, t.kind)
            v = self.ewma.get(k)
            self.ewma[k] = float(run) if v is None else v + EWMA_ALPHA * (run - v)
        else:
            slot[2] += 1
        cause = t.cause
        if cause is None:
            self.fail("cause", f"{t} left running ({new}) without a report, timeout, lease loss or cancel")
        assert cause is not None
        kind = cause[0]
        if new == "cancelled":
            if kind != "cancel" or not t.aborted:
                self.fail("cause", f"{t} cancelled while running without Abort(cancelled) (cause {cause})")
        elif kind in ("timeout", "lease") and not t.aborted:
            self.fail("cause", f"{t} lost its attempt ({kind}) without an Abort")
        t.aborted = False

    def _enter_retrying(self, t: TaskRec, pool: PoolShadow, ev: Any) -> None:
        cause = t.cause
        if cause is None or cause[0] not in ("fail_retry", "timeout", "lease"):
            self.fail("cause", f"{t} retrying without a retryable cause ({cause})")
        assert cause is not None
        if ev.message != cause[1]:
            self.fail("cause", f"retrying message {ev.message!r}, expected {cause[1]!r}")
        if t.attempt >= t.max_attempts:
            self.fail("cause", f"{t} retried although attempt {t.attempt} >= max_attempts {t.max_attempts}")
        self.totals["retries"] += 1
        pool.slot(self.now)[3] += 1
        now = self.now
        retry_after = cause[2] if len(cause) > 2 else None
        if retry_after is not None:
            t.retry_lo = t.retry_hi = now + max(retry_after, 0)
        # docs/reference/behaviour.md#reliability: min(initial * multiplier^(n-1), max_backoff),
        # jitter in [d/2, d]
        else:
            p = t.retry
            try:
                d = min(p.initial_backoff * p.multiplier ** (t.attempt - 1), p.max_backoff)
            except OverflowError:
                d = p.max_backoff
            if p.jitter and d > 0:
                t.retry_lo, t.retry_hi = now + _to_ns(d / 2) - 1, now + _to_ns(d) + 1
            else:
                t.retry_lo = t.retry_hi = now + _to_ns(d)
        t.retry_lo = max(t.retry_lo, now)
        self.retrying.add(t.id)

    def _enter_terminal(self, t: TaskRec, pool: PoolShadow, ev: Any, old: str) -> None:
        new = ev.status
        cause = t.cause
        kind = cause[0] if cause else None
        if new == "succeeded":
            ok = kind == "complete" and ev.message is None
        elif new == "failed":
            ok = kind == "fail_perm" and ev.message == cause[1]  # type: ignore[index]
        elif new == "dead_lettered":
            ok = kind in ("fail_retry", "timeout", "lease") and ev.message == cause[1]  # type: ignore[index]
            if ok and t.attempt < t.max_attempts:
                self.fail("cause", f"{t} dead-lettered with attempts left ({t.max_attempts})")
        elif new == "cancelled":
            ok = kind == "cancel" and ev.message == MSG_CANCELLED and self.cancel_target is t
        elif new == "shed":
            ok = self.victim == t.id and ev.message == MSG_SHED and old in PENDING
        else:  # skipped, missed: no feature produces them yet
            ok = False
        if not ok:
            self.fail("cause", f"{t}: {old} -> {new} (message {ev.message!r}) with cause {cause}")
        self.totals[new] += 1
        self.live -= 1
        self.live_ids.discard(t.id)
        t.finished_at = self.now
        t.await_resolve = True
        self._touch(t)
        self.retained.append(t)
        if len(self.retained) > self.config.retention_max:
            self.prune(self.now)

    def _on_dispatch(self, a: Dispatch) -> None:
        t = self.tasks.get(a.task.id)
        if t is None or not t.await_dispatch:
            self.fail("lifecycle", f"Dispatch {a} without a preceding running event")
        assert t is not None
        t.await_dispatch = False
        if a.lease <= self.last_lease or a.lease in self.leases:
            self.fail("leases", f"lease {a.lease} not fresh (last {self.last_lease})")
        pool = self.pools[t.pool]
        if len(pool.running) >= pool.capacity:
            self.fail(
                "capacity",
                f"pool {pool.name}: dispatch with {len(pool.running)} running, capacity {pool.capacity}",
            )
        self.last_lease = a.lease
        t.lease = a.lease
        t.dispatched_at = t.renewed_at = self.now
        t.cause = None
        self.leases[a.lease] = t
        pool.running.add(a.lease)
        self.totals["dispatched"] += 1

    def _on_abort(self, a: Abort) -> None:
        t = self.leases.get(a.lease)
        if t is None or t.id != a.task_id:
            self.fail("leases", f"{a} for a lease that is not current")
        assert t is not None
        now = self.now
        if a.reason == MSG_TIMEOUT:
            ok = self.call == "tick" and t.timeout is not None and t.dispatched_at + t.timeout <= now
            t.cause = ("timeout", MSG_TIMEOUT)
            self.totals["timeouts"] += 1
        elif a.reason == MSG_LEASE:
            ttl = self.pools[t.pool].cfg.lease_ttl
            ok = self.call == "tick" and ttl is not None and t.renewed_at + ttl <= now
            t.cause = ("lease", MSG_LEASE)
            self.totals["lease_expiries"] += 1
        elif a.reason == MSG_CANCELLED:
            ok = self.cancel_target is t
        else:
            ok = False
        if not ok:
            self.fail("timers" if self.call == "tick" else "cause", f"unexpected {a} for {t}")
        t.aborted = True

    def _on_resolve(self, a: Resolve) -> None:
        t = self.tasks.get(a.task.id)
        if t is None or not t.await_resolve:
            self.fail("one-terminal", f"{a} for a task that did not just end (resolved {t and t.resolved}x)")
        assert t is not None
        if a.task.status_name != t.status:
            self.fail("one-terminal", f"{a} but the published terminal status is {t.status}")
        t.await_resolve = False
        t.resolved += 1

    def _on_space(self, a: SpaceAvailable) -> None:
        # The engine appends SpaceAvailable *before* the Publish of the transition that freed
        # the space, so the "pending < max_pending" part is checked at the end of the call
        # against the lowest pending count the call reached (_check_space).
        pool = self.pool_by_name.get(a.pool)
        if pool is None or not pool.waiting_full:
            self.fail("submit", f"{a} without a preceding 'full' answer")
        assert pool is not None
        pool.waiting_full = False
        self.space.append(pool.idx)

    def _check_space(self) -> None:
        for idx in self.space:
            pool = self.pools[idx]
            mp = pool.cfg.max_pending
            low = self.min_pending.get(idx)
            if mp is not None and (low is None or low >= mp):
                self.fail(
                    "submit", f"SpaceAvailable({pool.name!r}) but pending never fell below {mp} (low {low})"
                )

    # ----------------------------------------------------------------------------- priority

    def _check_priority(self, d: TaskRec, pool: PoolShadow, now: int) -> None:
        """docs/reference/behaviour.md#dispatch, with the engine's documented lane-head approximation
        (lanes.py).

        Per class the engine looks at two heads only: the FIFO head (lowest sequence among
        ready tasks without a deadline) and the deadline head (lowest (latest start, seq)
        among ready deadline tasks).  Checked exactly:

        1. the dispatched task is the head with the highest ``Core.score`` (ties: lower seq);
           heads are computed here from the shadow's ready set, so this also proves FIFO
           within a class and that the lanes hold exactly the ready tasks;
        2. its ``Core.score`` equals the documented formula computed from the shadow's own ready
           time, deadline and expected duration (docs/reference/behaviour.md#score,
           docs/reference/behaviour.md#urgency, docs/reference/behaviour.md#expected-duration);
        3. a dispatch that passes over a more important class with ready work scores at least
           that class's base (only aging/urgency may lift a task over a class).

        Not a failure, only counted (``lane_inversions``): some non-head ready task scored
        higher (e.g. a retried task re-queued at its old position ages from its re-queue time,
        and deadline heads are ordered by latest start, not by urgency+age).
        """
        core = self.core
        self.stats["priority_checks"] += 1
        heads: dict[tuple[int, bool], TaskRec] = {}
        first_class = NUM_CLASSES
        tasks = self.tasks
        for c in range(NUM_CLASSES):
            if not pool.ready_by_class[c]:
                continue
            if c < first_class:
                first_class = c
            for is_dl, heap in ((False, pool.fifo[c]), (True, pool.dl[c])):
                while heap:
                    e = heap[0]
                    x = tasks[e[-1]]
                    if x.status == "ready" and x.ready_gen == e[-2]:
                        heads[(c, is_dl)] = x
                        break
                    heapq.heappop(heap)
        if d.id not in pool.ready:
            self.fail("priority", f"dispatched {d} is not ready in the shadow")
        states = core.tasks
        best: TaskRec | None = None
        best_key: tuple[float, int] | None = None
        for h in heads.values():
            ts = states.get(h.id)
            if ts is None:
                self.fail("counters", f"ready task {h} missing from the engine")
            if h.deadline is not None and ts.latest_start != h.latest_start:  # type: ignore[union-attr]
                self.fail(
                    "priority",
                    f"{h}: engine latest_start {ts.latest_start} != deadline - expected duration "  # type: ignore[union-attr]
                    f"{h.latest_start} (docs/reference/behaviour.md#expected-duration)",
                )
            k = (core.score(ts, now), -h.seq)  # type: ignore[arg-type]
            if best_key is None or k > best_key:
                best, best_key = h, k
        if best is not d:
            self.fail(
                "priority",
                f"pool {pool.name}: dispatched {d} (score {core.score(states[d.id], now):.6f}) but lane head "
                f"{best} has score {best_key[0] if best_key else None:.6f}; heads: "
                + ", ".join(f"{h.id}:{core.score(states[h.id], now):.3f}" for h in heads.values()),
            )
        assert best_key is not None
        d_score = best_key[0]
        mine = self.spec_score(d, now)
        if not math.isclose(mine, d_score, rel_tol=1e-9, abs_tol=1e-6):
            self.fail("priority", f"{d}: Core.score {d_score!r} != documented score {mine!r}")
        if states[d.id].ready_at != d.ready_at:
            self.fail("priority", f"{d}: engine ready_at {states[d.id].ready_at} != shadow {d.ready_at}")
        if d.cls != first_class:
            self.stats["jumps"] += 1
            pool.slot(now)[4] += 1
            for c in range(first_class, d.cls):
                if any(h.cls == c for h in heads.values()) and d_score < self.base[c]:
                    self.fail("priority", f"{d} (score {d_score}) jumped class {c} (base {self.base[c]})")
        pool.slot(now)[0] += 1
        self.stats["dispatches"] += 1
        if self.full_scan_priority and len(pool.ready) <= FULL_SCAN_MAX:
            for tid in pool.ready:
                if tid != d.id and core.score(states[tid], now) > d_score:
                    self.stats["lane_inversions"] += 1
                    break

    # ----------------------------------------------------------------------------- state checks

    def check_counters(self) -> None:
        """Cheap, after every call: per-pool counters, live/running, totals."""
        core = self.core
        running = 0
        for ps, pool in zip(core.pools, self.pools):
            running += len(pool.running)
            if (
                ps.busy != len(pool.running)
                or ps.ready != len(pool.ready)
                or ps.pending_by_class != pool.pending_by_class
                or ps.pending != pool.pending
                or ps.capacity != pool.capacity
            ):
                self.fail(
                    "counters",
                    f"pool {pool.name}: engine busy={ps.busy} ready={ps.ready} pending={ps.pending} "
                    f"{ps.pending_by_class} capacity={ps.capacity}; shadow busy={len(pool.running)} "
                    f"ready={len(pool.ready)} pending={pool.pending} {pool.pending_by_class} "
                    f"capacity={pool.capacity}",
                )
        if core.live != self.live or core.running != running:
            self.fail(
                "counters", f"engine live={core.live} running={core.running}; shadow {self.live}/{running}"
            )
        if core.next_seq != self.next_seq:
            self.fail("ids", f"engine next seq {core.next_seq} != shadow {self.next_seq}")
        ct = core.totals
        for k in TRACKED_TOTALS:
            if ct[k] != self.totals[k]:
                self.fail("counters", f"totals[{k}] engine {ct[k]} != shadow {self.totals[k]}")

    def check_full(self) -> None:
        """O(tasks): the engine's task table, keys and leases against the shadow."""
        core = self.core
        now = self.now
        core.lookup(now, 0)  # public call; applies the engine's lazy retention pruning
        self.prune(now)
        live_ids = {tid for tid, t in self.tasks.items() if not t.pruned}
        if set(core.tasks) != live_ids:
            extra = sorted(set(core.tasks) - live_ids)[:5]
            missing = sorted(live_ids - set(core.tasks))[:5]
            self.fail("counters", f"task table differs: engine extra {extra}, missing {missing}")
        for tid in live_ids:
            t, ts = self.tasks[tid], core.tasks[tid]
            if ts.status_name != t.status or ts.attempt != t.attempt:
                self.fail("counters", f"engine {ts!r} != shadow {t}")
            if t.status == "running" and ts.lease != t.lease:
                self.fail("leases", f"engine lease {ts.lease} != shadow {t.lease} for {t}")
        if core.keys != self.keys:
            self.fail(
                "keys",
                f"key table differs: engine {sorted(core.keys.items())[:5]} "
                f"vs shadow {sorted(self.keys.items())[:5]}",
            )
        if {k: v.id for k, v in core.leases.items()} != {k: v.id for k, v in self.leases.items()}:
            self.fail("leases", "lease table differs")
        for t in self.tasks.values():
            if t.status in TERMINAL and t.resolved != 1:
                self.fail("one-terminal", f"{t} resolved {t.resolved} times")
        problem = timer_heap_problem(core)
        if problem is not None:
            self.fail("timers", problem)

    def check_snapshot(self) -> None:
        """docs/reference/behaviour.md#metrics window figures and snapshot totals against the shadow (costly:
        periodic)."""
        now = self.now
        snap = self.core.snapshot(now)
        nslots = max(1, -(-self.config.window // NS))
        sec = now // NS
        if snap.live_tasks != self.live or snap.running != len(self.leases):
            self.fail("metrics", f"snapshot live/running {snap.live_tasks}/{snap.running}")
        if snap.pending != sum(p.pending for p in self.pools):
            self.fail("metrics", f"snapshot pending {snap.pending}")
        for ps, pool in zip(snap.pools, self.pools):
            sums = [0, 0, 0, 0, 0]
            for s, v in list(pool.window.items()):
                if s <= sec - nslots:
                    del pool.window[s]
                    continue
                for i in range(5):
                    sums[i] += v[i]
            disp, succ, failed, retried, jumped = sums
            adherence = 1.0 - jumped / disp if disp else 1.0
            got = (ps.dispatched, ps.succeeded, ps.failed, ps.retried)
            if got != (disp, succ, failed, retried) or not math.isclose(ps.priority_adherence, adherence):
                self.fail(
                    "metrics",
                    f"pool {pool.name} window: engine dispatched/succeeded/failed/retried {got} "
                    f"adherence {ps.priority_adherence}; shadow {(disp, succ, failed, retried)} {adherence}",
                )
            if ps.busy != len(pool.running) or ps.pending_by_class != pool.pending_by_class:
                self.fail("metrics", f"pool {pool.name} snapshot busy/pending_by_class differ")

    def check_terminal_all(self, acked: Iterable[int]) -> None:
        """Liveness end state: every acknowledged id is terminal and resolved once."""
        for tid in acked:
            t = self.tasks.get(tid)
            if t is None:
                self.fail("liveness", f"acknowledged task {tid} is unknown to the shadow (lost)")
            elif t.status not in TERMINAL or t.resolved != 1:
                self.fail("liveness", f"{t} not terminal/resolved after quiescence")
        if self.live:
            self.fail("liveness", f"{self.live} tasks still live after quiescence")


def timer_heap_problem(core: Core) -> str | None:
    """The timer heap's own invariants (``engine/timers.py``), or None when they hold.

    * it is a heap of ``(when, n)`` with unique push counters;
    * ``next_wakeup`` is the earliest *live* entry (dropping dead heads never loses one);
    * every task waiting on a timer has a live one: a retrying task its backoff, a running
      task its attempt timeout and lease expiry (when configured), a scheduled task its start.
    """
    timers = core.timers
    heap = timers.heap
    for i in range(1, len(heap)):
        if heap[(i - 1) // 2][:2] > heap[i][:2]:
            return f"timer heap order broken at entry {i}"
    if len({e[1] for e in heap}) != len(heap):
        return "two timer entries share a push counter"
    live = [e for e in heap if timers.live(e[2], e[3], e[4])]
    earliest = min((e[0] for e in live), default=None)
    nw = core.next_wakeup()
    if nw != earliest:
        return f"next_wakeup {nw} != earliest live timer {earliest}"
    armed = {(e[2], e[3].id) for e in live if e[2] in (T_RETRY, T_TIMEOUT, T_LEASE, T_START)}
    for t in core.tasks.values():
        need: list[int] = []
        if t.status == RETRYING:
            need.append(T_RETRY)
        elif t.status == RUNNING:
            if t.opts.timeout is not None:
                need.append(T_TIMEOUT)
            if core.pools[t.opts.pool_index].cfg.lease_ttl is not None:
                need.append(T_LEASE)
        elif t.status == SCHEDULED:
            need.append(T_START)
        for kind in need:
            if (kind, t.id) not in armed:
                return f"task {t.id} ({t.status_name}) has no live timer of kind {kind}"
    return None
