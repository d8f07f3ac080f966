"""The remote-worker simulator: the feature simulator with its workers behind the server's
worker layer (``cronoq.server.workers``), Nacks and disconnects included.

:class:`RemoteSimulator` runs everything :class:`~tests.sim.featsim.FeatureSimulator` does
(dependencies, fixed starts, cron, autoscaling, crashes; own RNG stream
``random.Random(seed ^ 0x2E307E)``), but the engine's attempts go through the production
:class:`~cronoq.server.workers.WorkerRegistry` and :class:`~cronoq.server.workers.RemoteExecutor`
to simulated worker sessions, and pool capacity is what those sessions are granted:

* the registry and executor run unmodified; the simulator stands in for the ``Scheduler``'s
  seam (``sched.seam``: ``set_group_capacity``, ``count_stale``, ``cancel``, ``move_attempt``,
  ``task_of``, ``time_base``, ``loop``) and for the attempt's ``TaskContext``.  The executor
  starts each attempt as the ``Scheduler`` has it do (kind ``REMOTE``: ``begin``, the worker's
  reports come back as ``ctx.complete`` / ``ctx.fail`` / ``ctx.abort``, and the engine's abort
  calls ``ctx.on_abort``); the stand-in loop runs every callback at once instead of on a next
  turn (:class:`_InlineLoop`), so everything stays deterministic.  Outcomes are reported to
  the engine as ``Started.report`` does;
* simulated workers register (random pool, label set and slots), change their slots
  (``SetSlots``, 0 = drain), disconnect and reconnect; they read their session's outbox after
  every step: a ``Lease`` is Nacked (at once or a little later, with or without a reason),
  answered ``Cancelled``, or run as in the feature simulator (success, retryable failure with
  ``retry_after``, ``Permanent``, hang, lost lease, heartbeats every 0.2-0.7 × ttl); an
  ``Abort`` stops it, though a zombie may still report (stale); some reports go to the wrong
  session (stale).

Invariants (``remote``), from docs/reference/grpc.md#worker-protocol,
docs/reference/behaviour.md#server-details, checked against the simulator's own model of the sessions:

* a ``Lease`` goes only into a free granted slot of a connected worker of the attempt's pool
  whose labels are exactly the engine group's, carries the engine's lease and attempt number,
  and no lease is held by two workers;
* the first offer and every re-offer after a ``Nack`` go to the worker the model picks (a
  connected worker of the group with a free slot that has not refused this lease, most free
  slots first); with none, the attempt fails retryably with ``no worker accepted the lease:
  <reason>`` (``rejected`` for an empty reason); the attempt number never changes;
* a disconnect fails the worker's attempts retryably (``worker disconnected``) at once;
* group capacity = granted slots of the connected workers with that label set, after every
  register, ``SetSlots`` and disconnect (grant = min(requested, pool ``max``)); ``Registered``
  carries the grant;
* reports for leases a session does not hold change nothing but ``stale_completions``;
* an engine ``Abort`` reaches the worker holding the lease as ``Abort{lease, reason}``;
* ``Cancelled`` ends the task ``cancelled``; a completed attempt's output bytes reach the engine.

Plus every invariant of the feature simulator (the engine sees the same calls as with local
workers).  Not covered here: the gRPC/HTTP transport (``grpc_workers.py``), outbox overflow,
protocol violations, shutdown/``not_leader``, and real time (heartbeat intervals are simulated).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from contextvars import Context
from typing import Any

from cronoq.engine.actions import Abort, Dispatch
from cronoq.engine.model import TaskState
from cronoq.engine.parents import outcomes
from cronoq.engine.time import NS, to_ns
from cronoq.outcome import Outcome
from cronoq.runtime import parking
from cronoq.server.workers import (
    AbortMsg,
    Blob,
    LeaseMsg,
    RegisteredMsg,
    RemoteExecutor,
    WorkerRegistry,
    WorkerSession,
)

from .featsim import FeatureSimulator
from .invariants import InvariantViolation
from .workload import LABEL_SETS

MSG_GONE = "worker disconnected"
MSG_NO_WORKER = "no worker accepted the lease: "

# agenda kinds (featsim uses 0 report / 1 heartbeat for its local workers)
R_REPORT, R_HEARTBEAT, R_NACK, R_CANCELLED = 10, 11, 12, 13


class _InlineLoop:
    """The loop the executor's futures belong to: ``call_soon`` (how a future runs its done
    callbacks) calls at once, so an abort's ``Abort`` message is queued before the simulator
    looks; nothing else of a loop is used."""

    def __init__(self, sim: RemoteSimulator) -> None:
        self.sim = sim

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)  # type: ignore[arg-type]

    def call_soon(self, callback: Callable[..., object], *args: Any, context: Context | None = None) -> None:
        if context is not None:
            context.run(callback, *args)
        else:
            callback(*args)

    def get_debug(self) -> bool:
        return False

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        self.sim.fail(f"a future's error was never retrieved: {context.get('exception')!r}")


class _Sched:
    """The parts of ``Scheduler`` the worker registry and the remote executor use: its seam
    (``runtime/seam.py``), here the scheduler stand-in itself (``sched.seam is sched``)."""

    def __init__(self, sim: RemoteSimulator) -> None:
        self.sim = sim
        self.seam = self
        self.time_base = sim.sc.config.time_base
        self.loop = _InlineLoop(sim)

    def set_group_capacity(
        self, pool: str, labels: dict[str, str] | None, n: int, kinds: frozenset[str] | None = None
    ) -> None:
        """Routed through the simulator's checked wrapper (the simulator ticks on its own); the
        simulated workers serve any kind (kind groups: tests/engine/test_kinds.py)."""
        assert kinds is None, kinds
        self.sim.set_group_capacity(pool, labels, n)

    def count_stale(self) -> None:
        self.sim.stale_seen += 1
        self.sim.core.counters["stale_completions"] += 1  # as Scheduler's seam.count_stale

    def cancel(self, ref: int | str) -> bool:
        self.sim.cancel(ref)
        return True

    def task_of(self, ctx: _Ctx) -> TaskState:
        return ctx._task

    def move_attempt(self, ctx: _Ctx, labels: dict[str, str], kinds: frozenset[str] | None = None) -> bool:
        assert kinds is None, kinds
        if not self.sim.move_attempt(ctx.lease, labels):
            return False
        ctx.group = dict(labels)
        return True


class _Ctx:
    """The ``TaskContext`` of one attempt, as the remote executor uses it."""

    __slots__ = (
        "_cancelled",
        "_ended",
        "_task",
        "abort_reason",
        "attempt",
        "group",
        "lease",
        "on_abort",
        "on_park",
        "outcome",
        "sim",
    )

    def __init__(self, sim: RemoteSimulator, d: Dispatch) -> None:
        self.sim = sim
        self._task = d.task
        self.lease = d.lease
        self.attempt = d.task.attempt
        self.group = dict(d.group or {})
        self.abort_reason: str | None = None
        self._cancelled = False
        self._ended = False
        self.on_abort: Any = None
        self.on_park: Any = None  # (a durable call's; the simulated tasks make none)
        #: the outcome reported on this context (``complete``/``fail``/``abort``), None until then
        self.outcome: tuple[Any, ...] | None = None

    def _report(self, outcome: tuple[Any, ...]) -> bool:
        if self._ended or self.outcome is not None:
            self.sim.fail(f"attempt {self.lease} reported {outcome} after {self.outcome}")
            return False
        self.outcome = outcome
        return True

    def complete(self, output: object) -> bool:
        return self._report(("ok", output))

    def fail(self, message: str, *, permanent: bool = False, retry_after: float | None = None) -> bool:
        if permanent:
            return self._report(("permanent", message, None))
        return self._report(("retry", message, None if retry_after is None else to_ns(retry_after)))

    def abort(self) -> bool:
        return self._report(("cancelled",))

    @property
    def parents(self) -> tuple[Outcome, ...]:
        """As ``TaskContext.parents``: how each parent of the task ended."""
        return tuple(Outcome(*o) for o in outcomes(self.sim.core, self._task))

    @property
    def resumes(self) -> int:
        """As ``TaskContext.resumes``: runs of the task after a park."""
        j = self.sim.core.parking.journal(self._task.id)
        return 0 if j is None else j.resumes

    def journal_steps(self) -> list[Any] | None:
        """As ``TaskContext.journal_steps``."""
        j = self.sim.core.parking.journal(self._task.id)
        return None if j is None else parking.steps_of(j.records)

    def heartbeat(self) -> None:
        if not (self._ended or self._cancelled):
            self.sim.heartbeat(self.lease)

    def note_worker(self, name: str) -> None:
        # the attempt timeline's worker name (engine/attempts.py): no state the model checks
        if not self._ended:
            self.sim.core.attempts.set_worker(self.lease, name)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if not (self._ended or self._cancelled):
            self.sim.core.progress.report(self.sim.now, self.lease, done, total, message)


class _Attempt:
    __slots__ = ("ctx", "expect", "lease", "pool", "refused", "task_id")

    def __init__(self, ctx: _Ctx, pool: str) -> None:
        self.ctx = ctx
        self.lease = ctx.lease
        self.task_id = ctx._task.id
        self.pool = pool
        self.refused: set[int] = set()
        # what the model expects next: ("offer", session id) or ("fail", message)
        self.expect: tuple[str, Any] | None = None


class _Worker:
    """The simulator's model of one session (independent of WorkerSession's own state)."""

    __slots__ = ("connected", "held", "id", "labels", "pool", "session", "slots")

    def __init__(self, session: WorkerSession, pool: str, labels: dict[str, str], slots: int) -> None:
        self.session = session
        self.id = session.id
        self.pool = pool
        self.labels = labels
        self.slots = slots
        self.held: set[int] = set()
        self.connected = True

    @property
    def free(self) -> int:
        return self.slots - len(self.held)


class RemoteSimulator(FeatureSimulator):
    SEED_SALT = 0x2E307E
    KIND = "remote"

    def _configure(self) -> None:
        for p in self.sc.config.pools:
            p.initial = 0  # a server pool's capacity is what its connected workers are granted
        if self.sc.extra.get("scaler") is not None:
            self.sc.extra["scaler"] = "ignore"  # (an external scaler: workers come and go)
        rng = self.rng
        self.loop = asyncio.new_event_loop()
        self.p_nack = rng.choice((0.05, 0.2, 0.5))
        self.p_worker_cancel = rng.choice((0.0, 0.01))
        self.sc.op_weights["capacity"] = 0.0  # capacity comes from the workers' grants
        self.sc.op_weights["w_register"] = rng.uniform(0.05, 0.3)
        self.sc.op_weights["w_disconnect"] = rng.uniform(0.0, 0.15)
        self.sc.op_weights["w_slots"] = rng.uniform(0.0, 0.3)
        self.sc.op_weights["w_stale"] = rng.uniform(0.0, 0.1)
        self.stale_seen = 0
        self.stale_expected = 0
        self.remote: dict[int, _Attempt] = {}
        self.workers: dict[int, _Worker] = {}
        self.holder: dict[int, int] = {}  # lease -> worker id (model)
        self.gone_leases: list[tuple[int, int]] = []  # (worker id, lease) no longer held
        self.zombies: set[tuple[int, int]] = set()  # aborted attempts that still report
        self.aborts: dict[int, tuple[int, str]] = {}  # lease -> (worker, reason) an Abort must reach
        self.profiles: list[tuple[str, dict[str, str], int]] = []  # who reconnects after a crash
        self.stats_r = {"offers": 0, "nacks": 0, "reoffers": 0, "no_worker": 0, "disconnects": 0, "stale": 0}
        self._new_registry()

    def _new_registry(self) -> None:
        pools = self.sc.config.pools
        self.registry = WorkerRegistry(
            _Sched(self),  # type: ignore[arg-type]
            pool_max={p.name: p.max for p in pools},
            lease_ttl_s={p.name: None if p.lease_ttl is None else p.lease_ttl / NS for p in pools},
        )
        self.executors = {p.name: RemoteExecutor(self.registry, p.name) for p in pools}

    # ------------------------------------------------------------------ running

    def run(self) -> Any:
        async def main() -> Any:
            return super(RemoteSimulator, self).run()

        try:
            st = self.loop.run_until_complete(main())
        finally:
            self.loop.close()
        st.shadow.update({"r_" + k: v for k, v in self.stats_r.items()})
        return st

    def fail(self, detail: str) -> None:
        self.shadow.fail("remote", detail)

    def _setup_capacity(self) -> None:
        rng = self.rng
        for pool in self.pools_all:
            for labels in [{}, *LABEL_SETS]:
                if not labels or rng.random() < 0.5:
                    self.register(pool, dict(labels), rng.randint(0 if labels else 1, 3))

    def _quiesce_capacity(self) -> None:
        self.p_nack = self.p_worker_cancel = 0.0
        for pool in self.pools_all:
            for labels in ({}, LABEL_SETS[-1]):
                mine = [w for w in self.workers.values() if w.pool == pool and w.labels == labels]
                if sum(w.slots for w in mine) == 0:
                    self.register(pool, dict(labels), 2)

    def _drop_workers(self) -> None:
        self.remote = {}
        self.profiles = [(w.pool, w.labels, w.slots) for w in self.workers.values()]
        self.workers = {}
        self.holder = {}
        self.gone_leases = []
        self.zombies = set()
        self.aborts = {}

    def _workers_return(self) -> None:
        """The new leader's registry: the workers reconnect
        (docs/reference/behaviour.md#high-availability)."""
        self._new_registry()
        for pool, labels, slots in self.profiles:
            self.register(pool, labels, slots)

    # ------------------------------------------------------------------ the worker registry

    def register(self, pool: str, labels: dict[str, str], slots: int) -> None:
        self._log("w_register", (pool, labels, slots), None, [])
        s = self.registry.register(pool, f"w{len(self.workers)}", labels, slots)
        grant = min(slots, self.config.pools[self.shadow.pool_by_name[pool]].max)
        w = _Worker(s, pool, dict(labels), grant)
        self.workers[s.id] = w
        msg = s.outbox.get_nowait()
        if type(msg) is not RegisteredMsg or msg.slots != grant or msg.worker_id != s.id:
            self.fail(f"register({pool}, {labels}, {slots}) answered {msg}, grant {grant}")
        self._check_capacity()
        self._pump()

    def disconnect(self, w: _Worker) -> None:
        self._log("w_disconnect", (w.id, sorted(w.held)), None, [])
        self.stats_r["disconnects"] += 1
        w.connected = False
        held = sorted(w.held)
        for lease in held:
            a = self.remote.get(lease)
            if a is not None:
                a.expect = ("fail", MSG_GONE)
            self.holder.pop(lease, None)
            self.gone_leases.append((w.id, lease))
        w.held.clear()
        self.registry.disconnect(w.session)
        del self.workers[w.id]
        self._check_capacity()
        self._pump()
        for lease in held:
            if lease in self.remote:
                self.fail(f"attempt {lease} of disconnected worker {w.id} did not fail at once")

    def set_slots(self, w: _Worker, n: int) -> None:
        self._log("w_set_slots", (w.id, n), None, [])
        granted = w.session.set_slots(n)
        w.slots = min(n, self.config.pools[self.shadow.pool_by_name[w.pool]].max)
        if granted != w.slots:
            self.fail(f"SetSlots({n}) granted {granted}, expected {w.slots}")
        self._check_capacity()
        self._pump()

    def _check_capacity(self) -> None:
        """Group capacity = granted slots of the connected workers with that label set."""
        sh = self.shadow
        for pool in self.pools_all:
            want: dict[tuple[tuple[str, str], ...], int] = {}
            for w in self.workers.values():
                if w.pool == pool:
                    k = tuple(sorted(w.labels.items()))
                    want[k] = want.get(k, 0) + w.slots
            got = {
                tuple(sorted(g.labels.items())): g.capacity
                for g in self.core.pools[sh.pool_by_name[pool]].groups
            }
            want = {k: v for k, v in want.items() if v}
            got = {k: v for k, v in got.items() if v}
            if got != want:
                self.fail(f"pool {pool}: group capacities {got}, connected workers grant {want}")

    def _pick(self, a: _Attempt) -> int | None:
        """The model's choice: a connected worker of the group with a free slot that has not
        refused this lease, most free slots first (then the earliest registered)."""
        best: _Worker | None = None
        for w in self.workers.values():
            if w.pool != a.pool or w.labels != a.ctx.group or w.id in a.refused or w.free <= 0:
                continue
            if best is None or w.free > best.free:
                best = w
        if best is not None or not a.refused:
            return None if best is None else best.id
        # a re-offer after a Nack with no worker of the group free: a worker of another group
        # whose labels suit the task, fewest labels first, then most free slots (then the
        # earliest registered), whose group has a free slot in the model
        # (docs/reference/grpc.md#worker-protocol)
        need = a.ctx._task.opts.labels
        others = [
            w
            for w in self.workers.values()
            if w.pool == a.pool
            and w.labels != a.ctx.group
            and w.id not in a.refused
            and w.free > 0
            and (not need or all(w.labels.get(k) == v for k, v in need.items()))
        ]
        others.sort(key=lambda w: (len(w.labels), -w.free))
        groups = self.shadow.groups[self.shadow.pool_by_name[a.pool]]
        for w in others:
            g = next((g for g in groups if g.labels == w.labels), None)
            if g is not None and g.running < g.capacity:
                return w.id
        return None

    # ------------------------------------------------------------------ attempts

    def _start(self, d: Dispatch) -> None:
        pool = self.config.pools[d.task.opts.pool_index].name
        ctx = _Ctx(self, d)
        a = _Attempt(ctx, pool)
        self.remote[d.lease] = a
        self._expect_offer(a, "no worker available")
        self.executors[pool].begin(ctx, None)  # type: ignore[arg-type]
        if ctx.outcome is not None:
            self._settle(a)
        self._drain()
        if a.lease in self.remote and a.expect is not None:
            self.fail(f"lease {a.lease} was not offered to worker {a.expect[1]}")

    def _expect_offer(self, a: _Attempt, reason: str) -> None:
        wid = self._pick(a)
        a.expect = ("offer", wid) if wid is not None else ("fail", MSG_NO_WORKER + reason)

    def _settle(self, a: _Attempt) -> None:
        """The attempt's outcome was reported on its context: checked and reported."""
        outcome = a.ctx.outcome
        assert outcome is not None
        del self.remote[a.lease]
        a.ctx._ended = True
        if a.ctx._cancelled:
            if outcome[0] != "cancelled":
                self.fail(f"aborted attempt {a.lease} ended {outcome}")
            return  # the engine aborted it (or the worker cancelled the task): nothing to report
        if outcome[0] == "ok":
            blob = outcome[1]
            if not isinstance(blob, Blob) or blob.data != str(a.lease).encode():
                self.fail(f"attempt {a.lease} returned {blob!r}")
            self.report(a.lease, ("ok",))
            return
        exp = a.expect
        if outcome[0] == "retry" and outcome[1].startswith(MSG_NO_WORKER):
            self.stats_r["no_worker"] += 1
        if exp is not None and exp[0] == "fail":
            if outcome != ("retry", exp[1], None):
                self.fail(f"attempt {a.lease} ended {outcome}, expected a retryable {exp[1]!r}")
        elif outcome[0] == "retry" and (outcome[1] == MSG_GONE or outcome[1].startswith(MSG_NO_WORKER)):
            self.fail(f"attempt {a.lease} failed {outcome[1]!r} while the model expects {exp}")
        if outcome[0] == "cancelled":
            self.fail(f"attempt {a.lease} raised CancelledError without an abort")
        self.report(a.lease, outcome)

    def _pump(self) -> None:
        """Report every attempt whose outcome came (lease order), then read outboxes."""
        progress = True
        while progress:
            progress = False
            for lease in sorted(self.remote):
                a = self.remote.get(lease)
                if a is not None and a.ctx.outcome is not None:
                    self._settle(a)
                    progress = True
        self._drain()

    def _react(self, actions: list[Any]) -> None:
        for act in actions:
            if type(act) is Abort:
                a = self.remote.get(act.lease)
                if a is None:
                    continue
                a.ctx._cancelled = True
                a.ctx.abort_reason = act.reason
                holder = self.holder.get(act.lease)
                if holder is not None:
                    self.aborts[act.lease] = (holder, act.reason)
                if a.ctx.on_abort is not None:  # as the Scheduler does (it queues the Abort)
                    a.ctx.on_abort()
                a.ctx.outcome = ("cancelled",)
                self._settle(a)
                self._drain()
                if act.lease in self.aborts:
                    self.fail(f"the engine aborted lease {act.lease}; worker {holder} got no Abort")
            else:
                super()._react([act])

    # ------------------------------------------------------------------ simulated workers

    def _drain(self) -> None:
        """Every worker reads its outbox: leases and aborts."""
        for w in list(self.workers.values()):
            q = w.session.outbox
            while not q.empty():
                msg = q.get_nowait()
                if type(msg) is LeaseMsg:
                    self._on_lease(w, msg)
                elif type(msg) is AbortMsg:
                    self._on_abort_msg(w, msg)
                elif msg is not None:
                    self.fail(f"worker {w.id} got {msg}")

    def _on_lease(self, w: _Worker, msg: LeaseMsg) -> None:
        a = self.remote.get(msg.lease)
        if a is None:
            self.fail(f"worker {w.id} got a lease {msg.lease} with no attempt")
        assert a is not None
        t: TaskState = a.ctx._task
        if a.expect != ("offer", w.id):
            self.fail(f"lease {msg.lease} offered to worker {w.id}, the model expects {a.expect}")
        if (
            msg.attempt != t.attempt
            or msg.attempt != a.ctx.attempt
            or msg.task_id != t.id
            or msg.pool != w.pool
        ):
            self.fail(f"{msg} for task {t.id} attempt {t.attempt} on worker {w.id} ({w.pool})")
        if w.labels != a.ctx.group or not w.connected or w.free <= 0:
            self.fail(f"lease {msg.lease} to worker {w.id} {w.labels} free {w.free}, group {a.ctx.group}")
        if msg.lease in self.holder:
            self.fail(f"lease {msg.lease} held by worker {self.holder[msg.lease]} and offered to {w.id}")
        self.stats_r["offers"] += 1
        if a.refused:
            self.stats_r["reoffers"] += 1
        self.holder[msg.lease] = w.id
        w.held.add(msg.lease)
        a.expect = None
        self._worker_runs(w, msg.lease)

    def _on_abort_msg(self, w: _Worker, msg: AbortMsg) -> None:
        exp = self.aborts.pop(msg.lease, None)
        if exp != (w.id, msg.reason) or self.holder.get(msg.lease) != w.id:
            self.fail(f"{msg} to worker {w.id}, expected {exp} (held by {self.holder.get(msg.lease)})")
        del self.holder[msg.lease]
        w.held.discard(msg.lease)
        self.gone_leases.append((w.id, msg.lease))
        if self.rng.random() < self.sc.p_zombie:  # it still reports later: stale
            self.zombies.add((w.id, msg.lease))
            self._schedule(
                self.now + int(self.rng.uniform(0, 0.5) * NS), R_REPORT, msg.lease, (w.id, ("ok",))
            )

    def _worker_runs(self, w: _Worker, lease: int) -> None:
        rng = self.rng
        if rng.random() < self.p_nack:
            delay = 0 if rng.random() < 0.5 else int(rng.uniform(0, 0.3) * NS)
            self._schedule(self.now + delay, R_NACK, lease, (w.id, rng.choice(("", "busy", "no gpu"))))
            return
        if rng.random() < self.p_worker_cancel:
            self._schedule(self.now + int(rng.uniform(0, 0.5) * NS), R_CANCELLED, lease, (w.id,))
            return
        a = self.remote[lease]
        t = a.ctx._task
        ttl = self.config.pools[t.opts.pool_index].lease_ttl
        fate = self._draw_attempt(ttl, t.opts.timeout, (0.0, 0.01, 0.5))  # (seconds on the wire)
        if fate is None:
            return
        run, lost, outcome = fate
        self._schedule(self.now + run, R_REPORT, lease, (w.id, outcome))
        if ttl is not None and not lost:
            self._schedule(self.now + int(ttl * rng.uniform(0.2, 0.7)), R_HEARTBEAT, lease, (w.id,))

    def _worker_event(self) -> None:
        while self.agenda and self.agenda[0][0] <= self.now:
            _, _, kind, lease, data = heapq.heappop(self.agenda)
            w = self.workers.get(data[0])
            if w is None:
                continue  # disconnected
            holds = self.holder.get(lease) == w.id
            if kind == R_HEARTBEAT:
                if not holds:
                    continue
                self._log("w_heartbeat", (w.id, lease), None, [])
                w.session.heartbeat(lease)
                ttl = self.config.pools[self.shadow.pool_by_name[w.pool]].lease_ttl
                assert ttl is not None
                self._schedule(self.now + int(ttl * self.rng.uniform(0.2, 0.7)), R_HEARTBEAT, lease, (w.id,))
                self._pump()
                return
            if not holds and (w.id, lease) not in self.zombies:
                continue  # (its attempt was aborted or handed back)
            self.zombies.discard((w.id, lease))
            self._report(w, kind, lease, data, holds)
            return

    def _report(self, w: _Worker, kind: int, lease: int, data: tuple[Any, ...], holds: bool) -> None:
        """A worker report through its session; stale unless the session holds the lease."""
        s = w.session
        before = self.stale_seen
        if holds:
            del self.holder[lease]
            w.held.discard(lease)
            self.gone_leases.append((w.id, lease))
        a = self.remote.get(lease)
        if kind == R_NACK:
            self._log("w_nack", (w.id, lease, data[1]), None, [])
            if holds:
                assert a is not None
                self.stats_r["nacks"] += 1
                a.refused.add(w.id)
                self._expect_offer(a, data[1] or "rejected")
            s.nack(lease, data[1])
        elif kind == R_CANCELLED:
            self._log("w_cancelled", (w.id, lease), None, [])
            s.cancelled(lease)
        else:
            outcome = data[1]
            self._log("w_report", (w.id, lease, outcome), None, [])
            if outcome[0] == "ok":
                s.complete(lease, str(lease).encode(), "text/plain")
            else:
                s.fail(lease, outcome[1], outcome[0] == "permanent", outcome[2] if len(outcome) > 2 else None)
        if holds == (self.stale_seen != before):
            self.fail(
                f"report of worker {w.id} for lease {lease}: held {holds}, "
                f"counted stale {self.stale_seen - before}"
            )
        if not holds:
            self.stats_r["stale"] += 1
        self._pump()
        if kind == R_NACK and holds and a is not None and a.lease in self.remote and a.expect is not None:
            self.fail(f"lease {lease} was not re-offered to worker {a.expect[1]} after a Nack")

    # ------------------------------------------------------------------ ops

    def _op_w_register(self) -> None:
        rng = self.rng
        labels = {} if rng.random() < 0.5 else dict(rng.choice(LABEL_SETS))
        self.register(rng.choice(self.pools_all), labels, rng.randint(0, 4))

    def _op_w_disconnect(self) -> None:
        if self.workers:
            self.disconnect(self.workers[self.rng.choice(sorted(self.workers))])

    def _op_w_slots(self) -> None:
        if self.workers:
            w = self.workers[self.rng.choice(sorted(self.workers))]
            self.set_slots(w, self.rng.randint(0, 4))

    def _op_w_stale(self) -> None:
        """A report for a lease the session does not hold (finished, aborted, elsewhere)."""
        if not self.workers:
            return
        w = self.workers[self.rng.choice(sorted(self.workers))]
        if self.gone_leases and self.rng.random() < 0.7:
            lease = self.rng.choice(self.gone_leases[-50:])[1]
        elif self.holder and self.rng.random() < 0.5:
            lease = self.rng.choice(sorted(self.holder))  # held by someone (maybe another worker)
        else:
            lease = self.shadow.core.next_lease + self.rng.randint(0, 100)
        if self.holder.get(lease) == w.id:
            return
        self.gone_leases.append((w.id, lease))
        kind = self.rng.choice((R_REPORT, R_NACK, R_CANCELLED))
        self._report(w, kind, lease, (w.id, ("ok",)) if kind == R_REPORT else (w.id, ""), False)

    def _step(self) -> None:
        super()._step()
        self._pump()

    def _quiesce(self) -> None:
        super()._quiesce()
        if self.remote:
            raise InvariantViolation(
                "liveness", f"executors still running after quiescing: {sorted(self.remote)}"
            )
