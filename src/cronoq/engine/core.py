"""The engine core: the only place that mutates task state.

Theory of operation
-------------------
``Core`` is a deterministic, sans-IO state machine.  Every public method takes ``now``
(engine ns) and records what the shell must do in ``self.actions`` (see ``actions.py``);
the shell drains them with :meth:`Core.drain_actions` and arms one timer for
:meth:`Core.next_wakeup`.  There is no clock, no I/O, no threads and no randomness except
the jitter generator seeded from the configuration: the same inputs give the same outputs.

* Inputs: ``submit``/``submit_batch`` (new tasks enter ``blocked`` and are released at once
  when nothing holds them), ``cancel``, ``complete``/``fail``/``heartbeat`` (reports for a
  lease), ``set_capacity``, and ``tick`` (fire due timers, then fill free slots).  Dispatch
  happens only in ``tick``, so a shell that submits many tasks in one loop turn and ticks
  once gets batched dispatch decisions.
* Every status change goes through :meth:`move`, which consults the transition table in
  ``model.py`` and keeps the per-pool counters (pending, ready, per class) exact; four hot
  paths inline it for their one transition, named in its docstring (and checked by
  ``tests/architecture/test_engine_port.py``).
* Timers (retry backoff, attempt timeout, lease expiry, fixed starts, recurring wake-ups,
  autoscaler evaluations, bucket refills) live in one heap owned by ``timers.py``, which also
  decides per kind whether an entry that surfaces is still live.  Heartbeats only move
  ``lease_expires``; the expiry timer re-arms itself when it finds the lease renewed.
* Terminal tasks are retained (lookups, key dedup, outputs) for ``retention`` and at most
  ``retention_max`` entries, oldest first; pruning is lazy, done at the start of calls.

This module keeps the hot path: the single-task submit fast path, the lifecycle moves,
dispatch and the reports of running attempts.  Each cold concern owns its state in its own
module and is reached from here: ``admission.py`` (planning and committing submissions
with dependencies, starts or batches; the key index), ``timers.py`` (the timer heap),
``pools.py`` (pool and group state, autoscaler inputs), ``resources.py`` (resources and
the tasks parked on them), ``scoring.py`` (dispatch scores), ``recurring.py`` (schedules),
``starts.py`` (fixed starts: released to ``scheduled``, coming due, missed), ``deps.py``
(settling edges other than all-succeeded ones), ``ids.py`` (the id layout),
``recovery.py`` (rebuilding from a store), ``snapshot.py`` (snapshots), ``progress.py``
(progress reports, their rate-limited events), ``attempts.py`` (attempt timelines, links),
``placement.py`` (a group and resources for a ready task, else parked until they free) and
``parking.py`` (parked tasks, their journals, signals).

The port
--------
The modules change task state only through these operations (marked "Port:"); they never
reach ``Core``'s private names (``tests/architecture/test_engine_port.py``):

* :meth:`move` ``(t, ev, now)`` - one lifecycle transition; :meth:`make_ready` - a move to
  ``ready`` that also queues; :meth:`enqueue` - queue a ready task in its lane;
* :meth:`release` - a blocked task's edges are met; :meth:`terminate` - to a terminal
  status, retained, dependents settled; :meth:`retry` - a failed attempt backs off or
  dead-letters; :meth:`end_attempt` - a running attempt ends unsuccessfully (slot back);
* :meth:`new_task` / :meth:`admit` - a task enters (a new id, or a recovered one);
* :meth:`persist` ``(mutation)`` - the one way a ``Persist`` action is made, here too (the
  record is built only while :attr:`durable`); :meth:`count` - a rare counter;
  :meth:`publish_status` - an event.

Reads go through public attributes (``pools``, ``tasks``, ``timers``, ``res``, ``config``,
``durations.expected``).  The hot paths here (submit fast path, dispatch, ``complete``)
inline what they need instead of calling the port, so the port costs them nothing.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Container, Sequence
from typing import Any

from cronoq.engine.actions import Abort, Dispatch, Persist, Publish, Resolve, Scale, SpaceAvailable
from cronoq.engine.admission import (
    BatchItem,
    KeyIndex,
    bind_awaited,
    check_resources,
    create_members,
    link_members,
    overflow,
    plan_admission,
    resolve_pool,
)
from cronoq.engine.attempts import AttemptLog
from cronoq.engine.config import CoreConfig
from cronoq.engine.deps import settle_edges
from cronoq.engine.groups import move_attempt, resize
from cronoq.engine.ids import id_base, seq_limit
from cronoq.engine.keys import ScopedKey, scoped_key
from cronoq.engine.lanes import IN_FIFO
from cronoq.engine.model import (
    BLOCKED,
    CANCELLED,
    DEAD_LETTERED,
    EV_BACKOFF_DONE,
    EV_CANCEL,
    EV_DISPATCH,
    EV_EDGE_BROKEN,
    EV_EXHAUSTED,
    EV_PERMANENT,
    EV_RETRY,
    EV_SUCCEED,
    EV_UNBLOCK,
    FAILED,
    FIRST_TERMINAL,
    MSG_ALREADY_FINISHED,
    MSG_AWAIT_TIMEOUT,
    MSG_CANCELLED,
    MSG_LEASE_LOST,
    MSG_TIMEOUT,
    NUM_CLASSES,
    READY,
    RETRYING,
    RUNNING,
    SCHEDULED,
    SHED,
    STATUS_NAMES,
    SUCCEEDED,
    StatusEvent,
    TaskOptions,
    TaskState,
    next_status,
)
from cronoq.engine.model import FLAT_TRANSITIONS as FLAT
from cronoq.engine.mutations import Recovered, StatusChange, Submitted
from cronoq.engine.parents import bind_submitted, forget_output, unpin
from cronoq.engine.parking import Parking
from cronoq.engine.placement import park, place, unpark_labels, unpark_resource
from cronoq.engine.pools import Group, Kinds, PoolState
from cronoq.engine.progress import ProgressTracker
from cronoq.engine.recovery import Recovery
from cronoq.engine.recurring import RecurringInfo, RecurringSpec, Schedule, Schedules
from cronoq.engine.resources import Resources, cancel_doomed
from cronoq.engine.scoring import Scorer
from cronoq.engine.snapshot import TOTAL_NAMES, Snapshot, build_snapshot, status_counts
from cronoq.engine.starts import missed, start_due, unblock_fixed
from cronoq.engine.stats import DurationModel
from cronoq.engine.time import NS, to_ns
from cronoq.engine.timers import (
    T_AWAIT,
    T_HOLD,
    T_LEASE,
    T_MISS,
    T_PROGRESS,
    T_RECUR,
    T_REFILL,
    T_RETRY,
    T_SCALE,
    T_START,
    T_TIMEOUT,
    T_WAKE,
    Timers,
    task_timer_live,
)
from cronoq.engine.waiting import resource_use
from cronoq.errors import SubmitError

_PENDING = (True, True, True, False, True) + (False,) * 7  # blocked, scheduled, ready, retrying
#: the classes of a bitmask of classes (bit c: class c), in class order (_fill: no list built)
_CLASSES = tuple(tuple(c for c in range(NUM_CLASSES) if m >> c & 1) for m in range(1 << NUM_CLASSES))


class Core:
    """The sans-IO scheduling engine (see the module docstring)."""

    def __init__(
        self, config: CoreConfig, *, now: int = 0, first_seq: int = 1, epoch: int = 0, shard: int = 0
    ) -> None:
        self.config = config
        self.epoch = epoch
        self.id_base = id_base(epoch, shard)
        self.seq_limit = seq_limit(shard)
        self.seq = first_seq
        self.pools = [PoolState(i, p, now, config.window) for i, p in enumerate(config.pools)]
        self.timers = Timers()
        self.res = Resources(config.resources, now, self.timers)
        self.resources = self.res.by_name  # (the same dicts)
        self.pool_index = {p.name: i for i, p in enumerate(config.pools)}
        self.default_pool = config.default_pool_index()
        self.tasks: dict[int, TaskState] = {}
        self.keys = KeyIndex()
        self.leases: dict[int, TaskState] = {}
        # awaited keys: key -> [(dependent, cond)] for edges to tasks not submitted yet
        self.awaiting: dict[ScopedKey, list[tuple[TaskState, int]]] = {}
        self.pinned: dict[int, int] = {}  # parent id -> live dependents holding it (parents.py)
        self.recurring = Schedules(self)
        self.schedules = self.recurring.by_name  # (the same dict)
        self.next_lease = 1
        self.retained: deque[TaskState] = deque()
        self.lane_token = IN_FIFO  # (tokens of heap entries are above it: lanes.py)
        self.actions: list[Any] = []
        self.counters = dict.fromkeys(TOTAL_NAMES, 0)  # rare counters; hot ones are plain ints
        self._n_submitted = 0
        self._n_dispatched = 0
        self._n_succeeded = 0
        self._retention = config.retention
        self._retention_max = config.retention_max
        self.durations = DurationModel(config.ewma_alpha, [p.default_duration for p in config.pools])
        self._alpha = config.ewma_alpha
        self.rng = random.Random(config.seed)
        self.publish = False  # set by the shell while anyone subscribes to events
        self.resolve_for: Container[int] | None = None  # Resolve only these ids (None: all)
        self.emit_transitions = config.emit_transitions
        self.live = 0
        self.running = 0
        self.paused = False  # while True, tick fires timers but dispatches nothing (shutdown)
        self.durable = config.persist  # emit Persist(mutation) actions for a durable store
        self.keep_payloads = config.keep_payloads  # ended tasks keep payloads (engine/replay.py)
        self.scorer = Scorer(config.priority, config.urgency)
        self.progress = ProgressTracker(self)  # latest progress per task (progress.py)
        self.attempts = AttemptLog(self)  # attempt timelines and links (attempts.py)
        self.parking = Parking(self)  # journals, parked tasks and signals (parking.py)
        # a pool that starts off its floor is evaluated from the start
        # (docs/reference/behaviour.md#autoscaling: every interval): above min it scales down with no work at
        # all, below min (a server pool before workers connect) its desired capacity is min at once; one at
        # min waits for work
        for pool in self.pools:
            if pool.scaler is not None and pool.capacity != pool.scaler.lo:
                pool.arm_scale(self.timers, now)

    # ------------------------------------------------------------------ shell interface

    def drain_actions(self) -> list[Any]:
        a = self.actions
        self.actions = []
        return a

    def next_wakeup(self) -> int | None:
        """The earliest instant at which ``tick`` has timer work to do (None: no timers)."""
        return self.timers.next_due()

    @property
    def totals(self) -> dict[str, int]:
        """Counters since start (docs/reference/behaviour.md#metrics), as a fresh dict."""
        out = dict(self.counters)
        out["submitted"] = self._n_submitted
        out["dispatched"] = self._n_dispatched
        out["succeeded"] = self._n_succeeded
        return out

    @property
    def next_seq(self) -> int:
        return self.seq

    # ------------------------------------------------------------------ submission

    def resolve_pool(self, opts: TaskOptions) -> int:
        """The pool index of ``opts``, its resources checked; both cached on it for this core.

        SubmitError ``unknown_pool`` or one of :meth:`check_resources`.
        """
        if opts.resolver is self:
            return opts.pool_index
        return resolve_pool(self, opts)

    def check_resources(self, opts: TaskOptions) -> None:
        """SubmitError ``unknown_resource`` / ``resource_exceeds_capacity`` / ``invalid``
        (docs/reference/behaviour.md#resources)."""
        check_resources(self.res, opts)

    def submit(
        self,
        now: int,
        opts: TaskOptions,
        payload: object,
        key: str | None = None,
        deadline: int | None = None,
        start_at: int | None = None,
        deps: Sequence[tuple[int | str, int]] | None = None,
        blob: bytes | None = None,
    ) -> tuple[int, bool]:
        """Accept one task.  Returns ``(id, duplicate)``; raises SubmitError.

        ``deadline`` and ``start_at`` are engine instants (ns); ``deps`` are
        ``(target id or key, edge condition)`` pairs.
        """
        r = self.retained
        if r and (r[0].finished_at <= now - self._retention or len(r) > self._retention_max):  # type: ignore[operator]
            self.prune(now)
        sk = None if key is None else scoped_key(opts.tenant, key)  # keys are scoped by tenant
        if sk is not None:
            existing = self.keys.find(sk)
            if existing is not None:
                return existing, True
        pi = opts.pool_index if opts.resolver is self else self.resolve_pool(opts)
        if start_at is not None or deps or (sk is not None and sk in self.awaiting):
            # (an awaited key must bind its waiters, which only _submit_items does)
            return self._submit_items(
                now, [BatchItem(opts, payload, key, deadline, start_at, deps, blob)], single=True
            )[0]
        pool = self.pools[pi]
        mp = pool.cfg.max_pending
        if mp is not None and pool.pending >= mp:
            overflow(self, pool, opts.priority, now)
        tid = self._create(now, pool, opts, payload, key, deadline)
        if self.durable:
            sub = Submitted.of(self.tasks[tid], pool.name, self.config.time_base, deadline, None, None, blob)
            self.persist(sub)
        if self.res.doomed:
            cancel_doomed(self, now)
        return tid, False

    def submit_batch(self, now: int, items: Sequence[BatchItem | tuple[Any, ...]]) -> list[tuple[int, bool]]:
        """Accept a batch atomically: all members are created or none (SubmitError).

        Items are ``(opts, payload, key, deadline, start_at, deps)``; members may reference
        each other's keys (also forward); a member whose key exists returns that task as a
        duplicate while the others are created.
        """
        self.prune(now)
        members = [it if type(it) is BatchItem else BatchItem(*it) for it in items]
        return self._submit_items(now, members, single=False)

    def submit_occurrence(self, now: int, item: BatchItem, schedule: str) -> tuple[int, bool]:
        """Submit one occurrence of recurring ``schedule`` (for ``recurring.py``): as
        :meth:`submit` with a start, the task naming its schedule before it is persisted."""
        self.prune(now)
        return self._submit_items(now, [item], single=True, schedule=schedule)[0]

    def _submit_items(
        self, now: int, items: Sequence[BatchItem], single: bool, schedule: str | None = None
    ) -> list[tuple[int, bool]]:
        """Plan the submission (``admission.py``: nothing changes if it fails), then commit it."""
        plan = plan_admission(self, now, items, single, waits=schedule is None)
        created, out = create_members(self, now, plan, schedule)
        if plan.any_deps:
            link_members(self, plan, created)
            bind_submitted(self, plan, created)
        for i, key in plan.provided:
            provider = created[i]
            if provider is not None:
                bind_awaited(self, key, provider)
        if plan.any_deps or plan.provided:
            self.attempts.link_plan(plan, created)
        release = self.release
        broken = plan.broken
        for i, member in enumerate(created):
            if member is None or member.status != BLOCKED:
                continue
            if broken[i]:
                self.counters["skipped"] += 1
                self.terminate(member, now, EV_EDGE_BROKEN, MSG_ALREADY_FINISHED)
            elif member.unmet == 0:
                release(member, now)
        if self.res.doomed:
            cancel_doomed(self, now)
        return out

    def new_task(
        self,
        now: int,
        pool: PoolState,
        opts: TaskOptions,
        payload: object,
        key: str | None,
        deadline: int | None,
    ) -> TaskState:
        """Port: create a task in ``blocked`` under the next id, admitted and counted; the
        caller links it and releases it (``admission.py``; :meth:`admit` may refuse it,
        ``max_keys``, before anything changed)."""
        seq = self.seq
        if seq > self.seq_limit:  # (never carries into the epoch or shard bits)
            msg = "task ids of this leadership term are exhausted: restart the leader"
            raise SubmitError("overloaded", msg)
        t = TaskState(self.id_base | seq, seq, opts, payload, key, now)
        if deadline is not None:
            t.deadline = deadline
        self.admit(t, pool, now, new=True)
        self.seq = seq + 1
        self._n_submitted += 1
        if self.publish and self.emit_transitions:
            self.publish_status(t, now, None)
        return t

    def admit(self, t: TaskState, pool: PoolState, now: int, new: bool = False) -> None:
        """Port: take a new ``blocked`` task in: indexed (id, key), live, pending in its pool.

        New submissions (:meth:`new_task`) and recovered tasks, which keep their ids, share it.
        """
        if (tracked := t.opts.tracked) is not None:  # (first: it may refuse a new task)
            # the keyed hot paths, Resources.admitted's inline: one or two queue resources, no
            # policy anywhere, each key's unit as noted on the options (no dict lookup) still
            # the key's (live tasks, or not forgotten: ``gone``) and not expired (so none is
            # created, reset or refused)
            u = u1 = None
            n = 0 if self.res.judging else len(tracked)
            if n == 1:
                u, _, k, kr = tracked[0]
            elif n == 2:  # (two stacked: both must pass, else neither is counted here)
                (u, _, k, kr), (u1, _, k1, kr1) = tracked
            if (
                u is not None
                and kr.queue
                and (u.live or (now < kr.next_expiry and not u.gone))
                and (
                    n == 1
                    or (u1 is not None and kr1.queue and (u1.live or (now < kr1.next_expiry and not u1.gone)))
                )
            ):
                u.live += k
                kr.live += k
                if u1 is not None:  # (n == 2)
                    u1.live += k1
                    kr1.live += k1
            else:
                self.res.admitted(t, now, new)  # (and binds its entries to its keys' units)
        self.tasks[t.id] = t
        if t.key is not None:
            self.keys.reserve(scoped_key(t.opts.tenant, t.key), t.id)
        self.live += 1
        pool.pending += 1
        pool.pending_by_class[t.opts.priority] += 1
        if pool.scaler is not None and not pool.scale_armed:
            # (its arrival counts when it becomes ready: release / its start coming due)
            pool.arm_scale(self.timers, now)

    def persist(self, mutation: object) -> None:
        """Port: hand ``mutation`` (``mutations.py``) to the durable store, in order with the
        other actions.  Callers build it only while :attr:`durable` (the store's ``persist``)."""
        self.actions.append(Persist(mutation))

    def count(self, name: str) -> None:
        """Port: add one to the rare counter ``name`` (``snapshot.TOTAL_NAMES``)."""
        self.counters[name] += 1

    def _create(
        self,
        now: int,
        pool: PoolState,
        opts: TaskOptions,
        payload: object,
        key: str | None,
        deadline: int | None,
    ) -> int:
        """Hot path: a task with no dependencies and no fixed start, straight to ``ready``."""
        t = self.new_task(now, pool, opts, payload, key, deadline)
        new = FLAT[BLOCKED * 16 + EV_UNBLOCK]
        t.status = new
        c = opts.priority
        pool.ready += 1
        pool.ready_by_class[c] += 1
        sc = pool.scaler
        if sc is not None:  # an arrival (see PoolState.arrived)
            sc.arrivals += 1
        if self.publish and self.emit_transitions:
            self.publish_status(t, now, None)
        if deadline is not None:
            t.latest_start = deadline - self.durations.expected(opts)
        self.enqueue(t, pool)
        return t.id

    # ------------------------------------------------------------------ lifecycle helpers

    def move(self, t: TaskState, ev: int, now: int, message: str | None = None) -> int:
        """Port: apply lifecycle event ``ev`` to ``t`` through the transition table
        (``model.py``; an illegal one raises) and keep the pool counters exact; publishes and
        persists the change as configured.  Returns the new status.

        This is where a task's status changes, with four hot-path exceptions that inline the
        same bookkeeping for their one transition (each checks it against ``FLAT``):
        :meth:`_create` and :meth:`release` (``blocked -> ready``), :meth:`_dispatch`
        (``ready -> running``) and :meth:`complete` (``running -> succeeded``).  A task gets
        its first status from ``TaskState`` (``blocked``, or a recovered terminal one);
        ``tests/architecture/test_engine_port.py`` fails on any other assignment.
        """
        old = t.status
        new = next_status(old, ev)
        t.status = new
        pool = self.pools[t.opts.pool_index]
        c = t.opts.priority
        if old == READY:
            pool.ready -= 1
            pool.ready_by_class[c] -= 1
            f = None if (r := t._rare) is None else r.fixed  # (hot: no property call)
            if f is not None and f.in_due:
                f.in_due = False  # its due-heap entry is now stale
            elif t.lane_token > 0:
                pool.dequeued(t)
            elif pool.resource_held:  # parked on a resource or labels; that entry is stale from now on
                pool.unhold_for_resource(t)
        elif new == READY:
            pool.ready += 1
            pool.ready_by_class[c] += 1
        if old == RETRYING:
            pool.retrying -= 1
            pool.retrying_by_class[c] -= 1
        elif new == RETRYING:
            pool.retrying += 1
            pool.retrying_by_class[c] += 1
        was, now_p = _PENDING[old], _PENDING[new]
        if was and not now_p:
            pool.pending -= 1
            pool.pending_by_class[c] -= 1
            if pool.waiting_space and pool.space_freed():
                self.actions.append(SpaceAvailable(pool.name))
        elif now_p and not was:
            pool.pending += 1
            pool.pending_by_class[c] += 1
        if self.publish and (self.emit_transitions or new >= FIRST_TERMINAL):
            self.publish_status(t, now, message)
        if self.durable and (new == RETRYING or new >= FIRST_TERMINAL):
            self.persist(StatusChange.of(t, self.config.time_base + now))
        return new

    def publish_status(self, t: TaskState, now: int, message: str | None) -> None:
        """Port: publish ``t``'s current status to event subscribers (callers check
        :attr:`publish`; transitions other than terminal ones only with ``emit_transitions``)."""
        ev = StatusEvent(
            t.id,
            self.pools[t.opts.pool_index].name,
            t.key,
            STATUS_NAMES[t.status],
            t.attempt,
            (self.config.time_base + now) / NS,
            message,
        )
        self.actions.append(Publish(ev))

    def expected_duration(self, t: TaskState) -> int:
        """The expected run time of ``t`` (docs/reference/behaviour.md#expected-duration)."""
        return self.durations.expected(t.opts)

    def make_ready(self, t: TaskState, pool: PoolState, now: int, ev: int) -> None:
        """Port: move ``t`` to ``ready`` by ``ev`` and queue it in its class lane."""
        self.move(t, ev, now)
        t.ready_at = now
        if t.deadline is not None:
            t.latest_start = t.deadline - self.durations.expected(t.opts)
        self.enqueue(t, pool)

    def enqueue(self, t: TaskState, pool: PoolState) -> None:
        """Port: queue a ``ready`` task in its class lane (at its sequence position)."""
        self.lane_token += 1
        c = t.opts.priority
        pool.lanes[c].push(t, self.lane_token)
        pool.lane_ready[c] += 1
        pool.queued += 1

    def release(self, t: TaskState, now: int) -> None:
        """Port: every edge of a ``blocked`` task is satisfied: to ``ready``, or ``scheduled``
        if its fixed start is ahead (``starts.py``)."""
        opts = t.opts
        pool = self.pools[opts.pool_index]
        f = None if (r := t._rare) is None else r.fixed  # (hot: no property call)
        if f is None:
            # blocked -> ready: the hot path of make_ready (move, enqueue); both statuses are
            # pending, and neither is persisted
            new = FLAT[t.status * 16 + EV_UNBLOCK]
            if new != READY:  # pragma: no cover - only blocked tasks are released
                next_status(t.status, EV_UNBLOCK)
            t.status = new
            c = opts.priority
            pool.ready += 1
            pool.ready_by_class[c] += 1
            sc = pool.scaler
            # an arrival for the autoscaler: new work became ready (docs/reference/behaviour.md#autoscaling)
            if sc is not None:
                sc.arrivals += 1
            if self.publish and self.emit_transitions:
                self.publish_status(t, now, None)
            t.ready_at = now
            if t.deadline is not None:
                t.latest_start = t.deadline - self.durations.expected(opts)
            token = self.lane_token + 1
            self.lane_token = token
            pool.lanes[c].push(t, token)
            pool.lane_ready[c] += 1
            pool.queued += 1
            return
        unblock_fixed(self, t, pool, now)

    def terminate(self, t: TaskState, now: int, ev: int, message: str | None, output: object = None) -> None:
        """Port: move ``t`` by ``ev`` to a terminal status (not from ``running``: end its
        attempt first), retain it, and settle its dependents."""
        if message is not None or t._rare is not None:  # (hot: no property call)
            t.message = message
        t.output = output
        t.finished_at = now
        self.move(t, ev, now, message)
        if not self.keep_payloads:
            t.payload = None
        self.live -= 1
        if t.opts.resources is not None:  # (units it was unparked for, untaken: to its waiters)
            for name in self.res.ended(t, now):
                unpark_resource(self, name, now)
        if t.parents is not None:
            unpin(self, t)
        if t._rare is not None and t._rare.fixed is not None:
            self.pools[t.opts.pool_index].release_fixed(t)
        self.retained.append(t)
        if (w := self.resolve_for) is None or t.id in w:
            self.actions.append(Resolve(t))
        if self.parking.journals:
            self.parking.ended(t, now)
        if len(self.retained) > self.config.retention_max:
            self.prune(now)
        if t.dependents:
            self._propagate(t, now)

    def _propagate(self, parent: TaskState, now: int) -> None:
        """A parent ended: satisfy or break its edges; skips cascade along broken edges."""
        release = self.release
        if parent.dep_conds is None and parent.status == SUCCEEDED:  # the hot path: all met
            kids = parent.dependents
            parent.dependents = None
            for child in kids or ():
                if child.status == BLOCKED:
                    u = child.unmet - 1
                    child.unmet = u
                    if not u:
                        release(child, now)
            return
        settle_edges(self, parent, now)

    def prune(self, now: int) -> None:
        """Forget the terminal tasks past retention (age or count) now, oldest first, as
        lookups do."""
        r = self.retained
        if not r or (len(r) <= self.config.retention_max and r[0].finished_at > now - self.config.retention):  # type: ignore[operator]
            return
        horizon = now - self.config.retention
        cap = self.config.retention_max
        tasks = self.tasks
        keys = self.keys
        progress, attempts = self.progress.by_task, self.attempts.by_task  # (mostly empty)
        while r and (len(r) > cap or r[0].finished_at <= horizon):  # type: ignore[operator]
            t = r.popleft()
            tasks.pop(t.id, None)
            if progress:
                progress.pop(t.id, None)
            if attempts:
                attempts.pop(t.id, None)
            if t.key is not None:
                keys.free(scoped_key(t.opts.tenant, t.key), t.id)

    # ------------------------------------------------------------------ dispatch

    def tick(self, now: int) -> None:
        """Fire due timers, then fill free slots of every pool.

        A recurring schedule's next occurrence is created *after* the fill pass
        (docs/reference/behaviour.md#fixed-starts, docs/reference/behaviour.md#cron): the occurrence that just
        came due has then started on its held slot and released its reservation, so it never conflicts with
        its own successor.  (One that could not start keeps its reservation, as any fixed-start task that has
        not started.)  Timers the new occurrences need at once (a hold) fire in the same tick, followed by
        another fill pass.
        """
        timers = self.timers.heap
        recur: list[Schedule] | None = None
        while True:
            while timers and timers[0][0] <= now:
                _when, _, kind, t, token = heapq.heappop(timers)
                if kind == T_RECUR:
                    sched = self.recurring.woken(token)
                    if sched is not None:
                        recur = [] if recur is None else recur
                        recur.append(sched)
                elif kind == T_SCALE:
                    pool = self.pools[token]
                    desired = pool.autoscale(now, self.timers, self.durations.expected)
                    if desired is not None:
                        self.actions.append(Scale(pool.name, desired))
                elif kind == T_REFILL:
                    self.timers.refill_fired(t, _when)
                    unpark_resource(self, t, now)
                elif task_timer_live(kind, t, token):
                    self._fire(kind, t, token, now)
            if not self.paused:
                for pool in self.pools:
                    if (
                        not pool.paused
                        and pool.busy < pool.capacity
                        and (pool.due or (pool.queued and pool.busy + pool.held < pool.capacity))
                    ):
                        self._fill(pool, now)
            if recur is None:
                return
            for sched in recur:
                self.recurring.resume(sched, now)
            recur = None

    def _fill(self, pool: PoolState, now: int) -> None:
        # fixed-start tasks that are due go first, each on the slot held for it
        due = pool.due
        if due:
            waiting = []  # due tasks whose resources, labels or kind are not available yet: retried next tick
            while due and pool.busy < pool.capacity:
                _, _, t = due[0]
                if t.status != READY or not t.fixed.in_due:
                    heapq.heappop(due)
                    continue
                group = place(self, t, pool, now, parkable=False)
                entry = heapq.heappop(due)
                if group is None:
                    waiting.append(entry)  # and the due tasks behind it still go (no head-of-line blocking)
                    continue
                self._dispatch(t, pool, now, False, group)
            for entry in waiting:
                heapq.heappush(due, entry)
        lr = pool.lane_ready
        lanes = pool.lanes
        simple = len(pool.groups) == 1
        g0 = pool.groups[0]
        free = pool.capacity - pool.held - pool.busy
        while free > 0 and pool.queued:
            nonempty = _CLASSES[(lr[0] > 0) | (lr[1] > 0) << 1 | (lr[2] > 0) << 2 | (lr[3] > 0) << 3]
            if (len(nonempty) == 1 and not lanes[nonempty[0]].dl) or (
                len(nonempty) > 1 and self.scorer.head_wins(lanes, nonempty)
            ):
                # fast path: plain FIFO of one class: the only one with ready work, none of it
                # with a deadline, or one whose heads outscore every other class's at any age
                c = nonempty[0]
                lane = lanes[c]
                while free > 0 and lr[c]:
                    head = lane.fifo_head()
                    if head is None:  # pragma: no cover - counters and lanes disagree
                        raise AssertionError("ready counter out of sync with lanes")
                    o = head.opts
                    if simple and o.labels is None and (o.resources is None or not pool.kinded):
                        # (place's outcome for the one group: resources taken at once, or parked;
                        # one resource, the keyed hot path: take_all's first case inline)
                        one = o.single
                        if one is not None:  # (its unit is bound: the task was admitted)
                            u, name, k, _ = one
                            short = None if u.try_take(k, now) else name
                        elif (es := o.units) is not None and len(es) == 2 and not es[0][0].refills:
                            # (two, the first with permits: take_all's stacked case inline)
                            (u, name, k, _), (u1, name1, k1, _) = es
                            if not u.try_take(k, now):
                                short = name
                            elif u1.try_take(k1, now):
                                short = None
                            else:
                                u.give_back(k)  # (the second is short: the first's permits back)
                                short = name1
                        else:
                            short = None if o.resources is None else self.res.take_all(o, now)
                        if short is None:
                            self._dispatch(head, pool, now, False, g0)
                            free -= 1
                        else:
                            park(self, head, pool, short, now)
                        continue
                    group = place(self, head, pool, now)
                    if group is not None:
                        self._dispatch(head, pool, now, False, group)
                        free -= 1
                continue
            best, jumped = self.scorer.pick(pool.lanes, nonempty, now)
            group = place(self, best, pool, now)
            if group is not None:
                self._dispatch(best, pool, now, jumped, group)
                free -= 1

    def score(self, t: TaskState, now: int) -> float:
        """The dispatch score of a ready task (docs/reference/behaviour.md#score), for tests and
        introspection."""
        return self.scorer.score(t, now)

    def _dispatch(self, t: TaskState, pool: PoolState, now: int, jumped: bool, group: Group) -> None:
        new = FLAT[t.status * 16 + EV_DISPATCH]
        if new != RUNNING:  # pragma: no cover - only ready tasks reach here
            next_status(t.status, EV_DISPATCH)
        lease = self.next_lease
        self.next_lease = lease + 1
        t.status = new
        t.lease = lease
        t.attempt += 1
        t.attempt_started = now
        if t.started_at is None:
            t.started_at = now
        self.leases[lease] = t
        self.running += 1
        c = t.opts.priority
        pool.busy += 1
        group.busy += 1
        t.group = group
        pool.ready -= 1
        pool.ready_by_class[c] -= 1
        f = None if (r := t._rare) is None else r.fixed  # (hot: no property call)
        if f is None or not f.in_due:
            pool.lane_ready[c] -= 1
            pool.queued -= 1
            if pool.fair:
                lane = pool.lanes[c]
                lane.removed(t)
                lane.dispatched(t)
        pool.pending -= 1
        pool.pending_by_class[c] -= 1
        if pool.waiting_space and pool.space_freed():
            self.actions.append(SpaceAvailable(pool.name))
        if self.publish and self.emit_transitions:
            self.publish_status(t, now, None)
        self._n_dispatched += 1
        slot = pool.window.cur
        if not (slot.start <= now < slot.end):
            slot = pool.window.slot(now)
        slot.dispatched += 1
        slot.wait.add(now - t.ready_at)
        if jumped:
            slot.jumped += 1
        if f is not None:
            f.in_due = False
            pool.release_fixed(t)
            if not f.counted:
                f.counted = True
                slot.fs_total += 1
                if now <= f.start + t.opts.tolerance:
                    slot.fs_hits += 1
        timeout = t.opts.timeout
        if timeout is not None:
            self.timers.push(now + timeout, T_TIMEOUT, t, lease)
        ttl = pool.cfg.lease_ttl
        if ttl is not None:
            t.lease_expires = now + ttl
            self.timers.push(now + ttl, T_LEASE, t, lease)
        if self.durable:
            self.persist(StatusChange.of(t, self.config.time_base + now))
        self.actions.append(Dispatch(t, lease, group.labels))

    # ------------------------------------------------------------------ timers

    def _fire(self, kind: int, t: TaskState, token: int, now: int) -> None:
        if kind == T_RETRY:
            self.make_ready(t, self.pools[t.opts.pool_index], now, EV_BACKOFF_DONE)
        elif kind == T_TIMEOUT:
            self.counters["timeouts"] += 1
            self._lose(t, now, MSG_TIMEOUT)
        elif kind == T_LEASE:
            if t.lease_expires > now:
                self.timers.push(t.lease_expires, T_LEASE, t, token)
                return
            self.counters["lease_expiries"] += 1
            self._lose(t, now, MSG_LEASE_LOST)
        elif kind == T_START:
            start_due(self, t, now)
        elif kind == T_HOLD:
            self.pools[t.opts.pool_index].hold(t)
        elif kind == T_MISS:
            missed(self, t, now)
        elif kind == T_PROGRESS:
            self.progress.flush(t, now)
        elif kind == T_AWAIT:
            self.counters["skipped"] += 1
            self.terminate(t, now, EV_EDGE_BROKEN, MSG_AWAIT_TIMEOUT)
        elif kind == T_WAKE:
            self.parking.timer(t, now)

    def _lose(self, t: TaskState, now: int, message: str) -> None:
        """The engine takes a running attempt away (timeout, lease loss): abort + retryable."""
        lease = t.lease
        self.actions.append(Abort(lease, t.id, message))
        self.end_attempt(t, now)
        self.retry(t, now, message, retry_after=None)

    # ------------------------------------------------------------------ reports

    def _free_slot(self, t: TaskState, pool: PoolState, now: int) -> None:
        """An attempt ended: its group slot and semaphore permits go back; waiters get a chance."""
        g = t.group
        t.group = None
        if g is not None:
            g.busy -= 1
            if pool.label_waiters and (g.labels or pool.kinded):
                unpark_labels(self, pool)
        if t.opts.resources is not None:
            for name in self.res.give_back_all(t.opts):
                unpark_resource(self, name, now)

    def end_attempt(self, t: TaskState, now: int, failed: bool = True) -> None:
        """Port: the running attempt of ``t`` ends without success (its caller then moves
        ``t``): lease dropped, slot and permits back, its run time busy; a failure unless
        ``failed`` is False (a park: ``parking.py``)."""
        del self.leases[t.lease]
        pool = self.pools[t.opts.pool_index]
        pool.busy -= 1
        self._free_slot(t, pool, now)
        self.running -= 1
        slot = pool.window.slot(now)
        slot.busy_ns += now - t.attempt_started
        if failed:
            slot.failed += 1

    def complete(self, now: int, lease: int, output: object = None) -> bool:
        """The attempt under ``lease`` returned ``output``.  False (and counted) if stale."""
        t = self.leases.pop(lease, None)
        if t is None:
            self.counters["stale_completions"] += 1
            return False
        new = FLAT[t.status * 16 + EV_SUCCEED]
        if new != SUCCEEDED:  # pragma: no cover - only running tasks hold leases
            next_status(t.status, EV_SUCCEED)
        opts = t.opts
        pool = self.pools[opts.pool_index]
        pool.busy -= 1
        g = t.group
        fast = g is not None and not g.labels and not pool.kinded
        if g is not None and fast:  # hot path of _free_slot (+ ended: units back and left at once)
            g.busy -= 1
            t.group = None
            one = opts.single
            if one is not None:  # (one resource: its unit's finish, then its waiters, inline)
                u, name, k, _ = one
                u.finish(t, k, now)
                if name in self.res.waiters:
                    unpark_resource(self, name, now)
            elif (units := opts.units) is not None:  # (several: each unit noted on its options)
                for u, _, k, _ in units:
                    u.finish(t, k, now)
                if self.res.waiters:
                    for name in self.res.parked(units):
                        unpark_resource(self, name, now)
        else:
            self._free_slot(t, pool, now)
        self.running -= 1
        run = now - t.attempt_started
        ew = pool.run_ewma
        pool.run_ewma = float(run) if ew == 0.0 else ew + self._alpha * (run - ew)
        slot = pool.window.cur
        if not (slot.start <= now < slot.end):
            slot = pool.window.slot(now)
        slot.busy_ns += run
        slot.succeeded += 1
        slot.useful_ns += run
        slot.run.add(run)
        ewma = self.durations.values
        prev = ewma.get(opts.stats_key)
        ewma[opts.stats_key] = float(run) if prev is None else prev + self._alpha * (run - prev)
        self._n_succeeded += 1
        # running -> succeeded (hot path of terminate; running is not pending)
        t.status = new
        # docs/reference/behaviour.md#lifecycle: success carries no message (not a retry's leftover)
        if t._rare is not None:
            t.message = None
        t.output = output
        t.finished_at = now
        if not self.keep_payloads:
            t.payload = None
        self.live -= 1
        if opts.tracked is not None and not fast:
            self.res.ended(t, now)
        if t.parents is not None:
            unpin(self, t)
        if self.publish:
            self.publish_status(t, now, None)
        if self.durable:
            self.persist(StatusChange.of(t, self.config.time_base + now, output, True))
        self.retained.append(t)
        if (w := self.resolve_for) is None or t.id in w:
            self.actions.append(Resolve(t))
        if self.parking.journals:
            self.parking.ended(t, now)
        if len(self.retained) > self._retention_max:
            self.prune(now)
        if t.dependents:
            self._propagate(t, now)
        return True

    def fail(
        self,
        now: int,
        lease: int,
        message: str,
        *,
        permanent: bool = False,
        retry_after: int | None = None,
    ) -> bool:
        """The attempt under ``lease`` failed.  False (and counted) if the lease is stale."""
        t = self.leases.get(lease)
        if t is None:
            self.counters["stale_completions"] += 1
            return False
        self.end_attempt(t, now)
        if permanent:
            self.counters["failed"] += 1
            self.terminate(t, now, EV_PERMANENT, message)
        else:
            self.retry(t, now, message, retry_after)
        return True

    def retry(self, t: TaskState, now: int, message: str, retry_after: int | None = None) -> None:
        """Port: the attempt of ``t`` failed retryably (its slot already freed): to ``retrying``
        with its policy's backoff (or ``retry_after``), or ``dead_lettered`` when its attempts
        are spent."""
        policy = t.opts.retry or self.pools[t.opts.pool_index].cfg.retry
        if t.attempt >= policy.max_attempts:
            self.counters["dead_lettered"] += 1
            self.terminate(t, now, EV_EXHAUSTED, message)
            return
        self.counters["retries"] += 1
        pool = self.pools[t.opts.pool_index]
        pool.window.slot(now).retried += 1
        if message is not None or t._rare is not None:
            t.message = message
        self.attempts.ended(t, now, message)
        self.move(t, EV_RETRY, now, message)
        delay = retry_after if retry_after is not None else to_ns(policy.delay(t.attempt, self.rng))
        if delay <= 0:
            self.make_ready(t, pool, now, EV_BACKOFF_DONE)
        else:
            self.timers.push(now + delay, T_RETRY, t, t.attempt)

    def heartbeat(self, now: int, lease: int) -> bool:
        """Renew a lease.  False if the lease is not current (nothing to renew)."""
        t = self.leases.get(lease)
        if t is None:
            return False
        ttl = self.pools[t.opts.pool_index].cfg.lease_ttl
        if ttl is not None:
            t.lease_expires = now + ttl
        return True

    def move_attempt(self, lease: int, labels: dict[str, str], kinds: Kinds = None) -> bool:
        """Move the running attempt under ``lease`` to the worker group with exactly ``labels``
        and ``kinds`` (engine/groups.py: :func:`~cronoq.engine.groups.move_attempt`)."""
        return move_attempt(self, lease, labels, kinds)

    # ------------------------------------------------------------------ control

    def lookup(self, now: int, ref: int | str, tenant: str | None = None) -> TaskState | None:
        """A task by id, or by key among ``tenant``'s tasks (keys are scoped by tenant)."""
        self.prune(now)
        if isinstance(ref, str):
            tid = self.keys.find(scoped_key(tenant, ref))
            if tid is None:
                return None
            return self.tasks.get(tid)
        return self.tasks.get(ref)

    def forget_output(self, task_id: int, output: object) -> bool:
        """Drop a retained task's output for a bounded cache above it (see ``parents.py``)."""
        return forget_output(self, task_id, output)

    def cancel(self, now: int, ref: int | str, message: str = MSG_CANCELLED) -> bool:
        """Cancel a non-terminal task (aborting a running attempt).  False if unknown/terminal."""
        t = self.lookup(now, ref)
        if t is None or t.status >= FIRST_TERMINAL:
            return False
        if t.status == RUNNING:
            self.actions.append(Abort(t.lease, t.id, message))
            self.end_attempt(t, now)
        self.counters["cancelled"] += 1
        self.terminate(t, now, EV_CANCEL, message)
        return True

    def set_capacity(self, now: int, pool_name: str, n: int) -> None:
        """Size a pool's unlabelled group directly (not clamped to min/max)."""
        self.set_group_capacity(now, pool_name, None, n)

    def set_group_capacity(
        self, now: int, pool_name: str, labels: dict[str, str] | None, n: int, kinds: Kinds = None
    ) -> None:
        """Size the worker group of ``pool`` with ``labels`` serving ``kinds`` (None/{} and None:
        the unlabelled group serving any kind; engine/groups.py: :func:`~cronoq.engine.groups.resize`)."""
        resize(self, now, pool_name, labels, n, kinds)

    # ------------------------------------------------------------------ recurring schedules

    def add_recurring(self, now: int, spec: RecurringSpec) -> RecurringInfo:
        """Add or replace a schedule and materialize its first occurrence (see ``recurring.py``)."""
        return self.recurring.add(now, spec)

    def remove_recurring(self, now: int, name: str) -> bool:
        """Remove a schedule; its already-materialized occurrence still runs."""
        return self.recurring.remove(name)

    def list_recurring(self) -> list[RecurringInfo]:
        return self.recurring.infos()

    # ------------------------------------------------------------------ recovery

    def recover(self, now: int, rec: Recovered) -> None:
        """Rebuild state read back from a durable store (docs/reference/behaviour.md#recovery) into this fresh
        core.

        Retained terminal tasks come back for lookups, dedup, dependents and outputs; live tasks
        are re-linked and released (a task that was ``running`` or ``retrying`` resumes as
        ``retrying``: its interrupted attempt counts and it becomes ready after the backoff its
        policy gives for that attempt, counted from now); schedules resume where they were.
        Changes recovery makes (retries, skips, quarantines) are persisted like any other.
        See ``recovery.py``.
        """
        Recovery(self, now).run(rec)

    # ------------------------------------------------------------------ snapshot

    def snapshot(self, now: int) -> Snapshot:
        self.prune(now)
        state = (self.pools, self.leases.values(), self.live, self.running, self.totals)
        return build_snapshot(now, self.config.window, *state, resource_use(self.res, now))

    # ------------------------------------------------------------------ introspection

    def status_counts(self) -> dict[str, int]:
        return status_counts(self.tasks.values())


# fmt: off
__all__ = ["Core", "PoolState", "BLOCKED", "SCHEDULED", "READY", "RUNNING", "RETRYING", "SUCCEEDED",
           "FAILED", "DEAD_LETTERED", "CANCELLED", "SHED"]
# fmt: on
