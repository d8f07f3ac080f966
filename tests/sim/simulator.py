"""A seeded, deterministic simulator for the engine.

``Simulator(seed, steps).run()`` derives a :class:`~tests.sim.workload.Scenario` from the seed,
then runs ``steps`` steps with faults on, then a *quiesce* phase with faults off that must drive
every task terminal.  Everything random comes from one ``random.Random(seed)``, consumed in the
same order whatever the checks do, so a seed and a step count replay a run exactly:
``python -m tests.sim --seed S --steps N -v``.

A step is one client or worker input to the engine (submit, batch, cancel, set_capacity, a
worker report or heartbeat, a stale report), or a clock advance; most steps end with
``tick(now)`` (always after a clock advance).  The clock only moves forward, and never past
``core.next_wakeup()`` or the next worker event, so timers fire exactly when due.

Simulated workers: each ``Dispatch`` starts an attempt with a random run time that ends in
success, a retryable failure (sometimes with ``retry_after``) or a ``Permanent`` failure, or
hangs (never reports: a timeout or lease expiry must reclaim it), runs past its timeout, stops
heartbeating (lost lease), or reports twice.  An ``Abort`` kills the attempt, but a *zombie*
may still report afterwards (a stale completion).  Submitters told ``full`` wait and retry on
``SpaceAvailable`` (like the asyncio runtime), or give up.

All invariants live in :mod:`tests.sim.invariants` and run inside :class:`~tests.sim.harness.Harness`
after every engine call; periodically the full task table and the snapshot are compared too.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from cronoq.engine.actions import Abort, Dispatch, SpaceAvailable
from cronoq.engine.time import MS, NS

from .harness import Harness, SubmitOutcome
from .invariants import TERMINAL, InvariantViolation
from .workload import Scenario, TaskSpec, Workload, make_scenario

# agenda item kinds
W_REPORT = 0
W_HEARTBEAT = 1


class SimFailure(AssertionError):
    """A run failed: carries everything needed to replay it."""

    def __init__(self, seed: int, steps: int, step: int, phase: str, cause: BaseException, trace: list[str]):
        self.seed = seed
        self.steps = steps
        self.step = step
        self.phase = phase
        self.cause = cause
        self.trace = trace
        inv = getattr(cause, "invariant", type(cause).__name__)
        lines = [
            f"simulation failed: seed={seed} step={step} ({phase}), invariant {inv}",
            f"  {cause}",
            f"  replay: python -m tests.sim --seed {seed} --steps {steps} -v",
            "  last calls (step, t[s], call, args -> result | actions):",
            *("    " + x for x in trace),
        ]
        super().__init__("\n".join(lines))


@dataclass
class SimStats:
    seed: int
    kind: str = "base"
    steps: int = 0
    quiesce_steps: int = 0
    calls: int = 0
    submitted: int = 0
    sim_seconds: float = 0.0
    wall_seconds: float = 0.0
    shadow: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def total_steps(self) -> int:
        return self.steps + self.quiesce_steps


class Attempt:
    __slots__ = ("aborted", "lease", "pool", "task_id", "zombie")

    def __init__(self, lease: int, task_id: int, pool: int) -> None:
        self.lease = lease
        self.task_id = task_id
        self.pool = pool
        self.aborted = False
        self.zombie = False  # aborted but still running: will report (stale)


class Simulator:
    def __init__(
        self,
        seed: int,
        steps: int = 2000,
        *,
        verbose: bool = False,
        full_check_every: int = 200,
        snapshot_every: int = 500,
        trace_len: int = 40,
        quiesce_limit: int | None = None,
        full_scan_priority: bool = True,
    ) -> None:
        self.seed = seed
        self.steps = steps
        self.verbose = verbose
        self.full_check_every = full_check_every
        self.snapshot_every = snapshot_every
        self.rng = random.Random(seed)
        self.sc: Scenario = make_scenario(self.rng)
        self.workload = Workload(self.sc, self.rng)
        self.h = Harness(self.sc.config, full_scan_priority=full_scan_priority)
        self.h.listener = self._on_call
        self.trace: deque[tuple[Any, ...]] = deque(maxlen=trace_len)
        self.quiesce_limit = quiesce_limit if quiesce_limit is not None else 20_000
        self.faults = True
        self.step = 0
        self.phase = "faults"
        self.agenda: list[tuple[int, int, int, int, Any]] = []
        self.agenda_n = 0
        self.attempts: dict[int, Attempt] = {}
        self.finished_leases: deque[int] = deque(maxlen=64)
        self.recent_ids: deque[int] = deque(maxlen=256)
        self.acked: set[int] = set()
        self.waiters: dict[int, list[tuple[list[TaskSpec], bool]]] = {}
        self.wake: deque[tuple[list[TaskSpec], bool]] = deque()
        ops = self.sc.op_weights
        self.op_names = list(ops)
        self.op_cum = []
        acc = 0.0
        for k in self.op_names:
            acc += ops[k]
            self.op_cum.append(acc)

    # ------------------------------------------------------------------------ tracing

    def _on_call(self, call: str, args: tuple[Any, ...], result: object, actions: list[Any]) -> None:
        self.trace.append((self.step, self.h.now, call, args, result, actions))
        if self.verbose:
            print(self._fmt(self.trace[-1]))

    @staticmethod
    def _fmt(entry: tuple[Any, ...]) -> str:
        step, now, call, args, result, actions = entry
        a = ", ".join(x.short() if isinstance(x, TaskSpec) else repr(x) for x in args)
        acts = "; ".join(repr(x) for x in actions)
        res = "" if result is None else f" -> {result!r}"
        return f"{step:>6} {now / NS:>12.6f} {call}({a}){res}" + (f" | {acts}" if acts else "")

    # ------------------------------------------------------------------------ running

    def run(self) -> SimStats:
        t0 = time.perf_counter()
        try:
            for step in range(self.steps):
                self.step = step
                self._step()
                self._periodic(step)
            self._quiesce()
        except (InvariantViolation, AssertionError, Exception) as e:
            if isinstance(e, SimFailure):
                raise
            raise SimFailure(
                self.seed, self.steps, self.step, self.phase, e, [self._fmt(x) for x in self.trace]
            ) from e
        stats = SimStats(seed=self.seed)
        stats.steps = self.steps
        stats.quiesce_steps = self.step - self.steps
        stats.calls = self.h.calls
        stats.submitted = self.h.shadow.totals["submitted"]
        stats.sim_seconds = self.h.now / NS
        stats.wall_seconds = time.perf_counter() - t0
        stats.shadow = dict(self.h.shadow.stats)
        stats.totals = dict(self.h.core.totals)
        return stats

    def _periodic(self, step: int) -> None:
        if self.full_check_every and step % self.full_check_every == self.full_check_every - 1:
            self.h.check_full()
        if self.snapshot_every and step % self.snapshot_every == self.snapshot_every - 1:
            self.h.check_snapshot()

    def _step(self) -> None:
        rng = self.rng
        if self.wake and rng.random() < 0.8:
            self._retry_waiter()
        elif self.agenda and self.agenda[0][0] <= self.h.now and rng.random() < 0.7:
            self._worker_event()
        else:
            r = rng.random() * self.op_cum[-1]
            op = self.op_names[next(i for i, c in enumerate(self.op_cum) if r < c)]
            if op == "advance":
                self._advance()
                return
            getattr(self, "_op_" + op)()
        if rng.random() < 0.8:
            self._react(self.h.tick())

    def _quiesce(self) -> None:
        """Faults off: no new work, capacity back, workers healthy.  Every task must end."""
        self.phase = "quiesce"
        self.faults = False
        h = self.h
        for pool in h.shadow.pools:
            if pool.capacity == 0:
                h.set_capacity(pool.name, self.rng.randint(1, self.sc.max_capacity))
        # Liveness is judged by progress: every task must end, and some task must be
        # dispatched or end at least every ``quiesce_limit`` steps (a hard cap bounds the run).
        progress_at = self.step
        last_progress: tuple[int, int, int] = (-1, -1, -1)
        hard_cap = self.steps + 50 * self.quiesce_limit
        self._react(h.tick())
        while h.shadow.live or self.wake or any(self.waiters.values()):
            self.step += 1
            totals = h.shadow.totals
            progress = (totals["dispatched"], h.shadow.live, totals["submitted"])
            if progress != last_progress:
                last_progress, progress_at = progress, self.step
            if self.step - progress_at > self.quiesce_limit or self.step > hard_cap:
                live = [t for t in h.shadow.tasks.values() if t.status not in TERMINAL]
                raise InvariantViolation(
                    "liveness",
                    f"no progress for {self.step - progress_at} quiesce steps: live={h.shadow.live} "
                    f"waiters={sum(map(len, self.waiters.values()))} e.g. {live[:5]}",
                )
            if self.wake:
                self._retry_waiter()
            elif self.agenda and self.agenda[0][0] <= h.now:
                self._worker_event()
            else:
                nw = h.core.next_wakeup()
                na = self.agenda[0][0] if self.agenda else None
                cands = [x for x in (nw, na) if x is not None]
                if not cands:
                    stuck = [t for t in h.shadow.tasks.values() if t.status not in TERMINAL]
                    raise InvariantViolation(
                        "liveness",
                        f"stuck: live={h.shadow.live}, no timers and no worker events; "
                        f"waiters={sum(map(len, self.waiters.values()))}; e.g. {stuck[:5]}",
                    )
                h.advance_to(max(h.now, min(cands)))
            self._react(h.tick())
        h.check_full()
        h.check_snapshot()
        h.shadow.check_terminal_all(self.acked)

    # ------------------------------------------------------------------------ client ops

    def _record(self, out: SubmitOutcome, specs: list[TaskSpec], batch: bool) -> None:
        if out.items is not None:
            for tid, _dup in out.items:
                self.acked.add(tid)
                self.recent_ids.append(tid)
        elif out.error is not None and out.error.code == "full":
            assert out.full_pool is not None
            self.waiters.setdefault(out.full_pool, []).append((specs, batch))

    def _op_submit(self) -> None:
        spec = self.workload.task(self.h.now)
        out, actions = self.h.submit(spec)
        if out.error is not None and out.error.code == "full" and self.rng.random() >= self.sc.p_wait:
            out.error = None  # the submitter gives up
        self._record(out, [spec], False)
        self._react(actions)

    def _op_batch(self) -> None:
        specs = self.workload.batch(self.h.now)
        out, actions = self.h.submit_batch(specs)
        if out.error is not None and out.error.code == "full" and self.rng.random() >= self.sc.p_wait:
            out.error = None
        self._record(out, specs, True)
        self._react(actions)

    def _retry_waiter(self) -> None:
        specs, batch = self.wake.popleft()
        if batch:
            out, actions = self.h.submit_batch(specs)
        else:
            out, actions = self.h.submit(specs[0])
        self._record(out, specs, batch)
        self._react(actions)

    def _op_cancel(self) -> None:
        rng = self.rng
        r = rng.random()
        ref: int | str
        if r < 0.55 and self.recent_ids:
            ref = rng.choice(self.recent_ids)
        elif r < 0.75 and self.attempts:
            ref = rng.choice(list(self.attempts.values())).task_id
        elif r < 0.9:
            ref = f"k{rng.randrange(self.sc.key_space)}"
        else:
            ref = rng.choice((10**9, self.h.shadow.next_seq, "no-such-key"))
        _, actions = self.h.cancel(ref)
        self._react(actions)

    def _op_capacity(self) -> None:
        rng = self.rng
        pool = rng.choice(self.sc.pool_names)
        n = 0 if rng.random() < 0.2 else rng.randint(1, self.sc.max_capacity)
        self._react(self.h.set_capacity(pool, n))

    def _op_stale(self) -> None:
        """A report for a lease that is not current (finished, aborted, or never issued)."""
        rng = self.rng
        if self.finished_leases and rng.random() < 0.8:
            lease = rng.choice(self.finished_leases)
        else:
            lease = self.h.shadow.last_lease + rng.randint(1, 1000)
        r = rng.random()
        if r < 0.4:
            _, actions = self.h.complete(lease)
        elif r < 0.8:
            _, actions = self.h.fail(lease, "stale failure", permanent=rng.random() < 0.5)
        else:
            _, actions = self.h.heartbeat(lease)
        self._react(actions)

    def _advance(self) -> None:
        """Move the clock: never past the next engine timer or worker event."""
        rng = self.rng
        h = self.h
        nw = h.core.next_wakeup()
        na = self.agenda[0][0] if self.agenda else None
        r = rng.random()
        if r < 0.6:
            target = h.now + int(rng.expovariate(5.0) * NS)
            cands = [x for x in (nw, na) if x is not None]
            if cands:
                target = min(cands)
        elif r < 0.9:
            target = h.now + int(rng.expovariate(2.0) * NS)
        else:
            target = h.now + rng.choice((0, 1, 1000, MS))
        for bound in (nw, na):
            if bound is not None and bound < target:
                target = bound
        h.advance_to(max(h.now, target))
        self._react(h.tick())

    # ------------------------------------------------------------------------ workers

    def _schedule(self, at: int, kind: int, lease: int, data: Any = None) -> None:
        self.agenda_n += 1
        heapq.heappush(self.agenda, (at, self.agenda_n, kind, lease, data))

    def _react(self, actions: list[Any]) -> None:
        for a in actions:
            tp = type(a)
            if tp is Dispatch:
                self._start(a)
            elif tp is Abort:
                self._abort(a)
            elif tp is SpaceAvailable:
                idx = self.h.shadow.pool_by_name[a.pool].idx
                self.wake.extend(self.waiters.pop(idx, ()))

    def _start(self, d: Dispatch) -> None:
        rng = self.rng
        sc = self.sc
        now = self.h.now
        t = d.task
        pool = t.opts.pool_index
        ttl = sc.config.pools[pool].lease_ttl
        timeout = t.opts.timeout
        att = Attempt(d.lease, t.id, pool)
        self.attempts[d.lease] = att
        run = 0 if rng.random() < 0.05 else int(rng.expovariate(1.0 / sc.mean_run) * NS)
        f = self.faults
        r = rng.random()
        lost = False
        if f and r < sc.p_hang and (timeout is not None or ttl is not None):
            return  # hangs: never reports, never heartbeats
        if f and r < sc.p_hang + sc.p_slow and timeout is not None:
            run = timeout + 1 + int(rng.uniform(0, 2) * NS)  # overruns its timeout
        if not f and timeout is not None:
            run = min(run, timeout // 2)
        if f and ttl is not None and rng.random() < sc.p_lose_lease:
            lost = True  # keeps working but stops heartbeating
        if f and rng.random() < sc.p_fail:
            if rng.random() < sc.p_permanent:
                outcome: tuple[Any, ...] = ("permanent", "boom")
            else:
                ra = None
                if rng.random() < sc.p_retry_after:
                    ra = rng.choice((0, 10 * MS, 500 * MS, 2 * NS))
                outcome = ("retry", f"flaky #{rng.randrange(10)}", ra)
        else:
            outcome = ("ok",)
        self._schedule(now + run, W_REPORT, d.lease, (outcome, False))
        if f and rng.random() < sc.p_dup_report:  # the worker reports twice: the 2nd is stale
            self._schedule(now + run + int(rng.uniform(0, 1) * NS), W_REPORT, d.lease, (outcome, True))
        if ttl is not None and not lost:
            self._schedule(now + int(ttl * rng.uniform(0.2, 0.7)), W_HEARTBEAT, d.lease)

    def _abort(self, a: Abort) -> None:
        att = self.attempts.pop(a.lease, None)
        if att is None:
            return
        att.aborted = True
        att.zombie = self.rng.random() < self.sc.p_zombie
        if att.zombie:
            self.attempts[a.lease] = att  # keeps running; its report will be stale
        self.finished_leases.append(a.lease)

    def _worker_event(self) -> None:
        """Process the next due worker event (skipping those of killed attempts)."""
        h = self.h
        while self.agenda and self.agenda[0][0] <= h.now:
            _, _, kind, lease, data = heapq.heappop(self.agenda)
            att = self.attempts.get(lease)
            if kind == W_HEARTBEAT:
                if att is None or att.aborted:
                    continue
                ok, actions = h.heartbeat(lease)
                ttl = self.sc.config.pools[att.pool].lease_ttl
                assert ttl is not None
                self._schedule(h.now + int(ttl * self.rng.uniform(0.2, 0.7)), W_HEARTBEAT, lease)
                self._react(actions)
                return
            outcome, forced = data
            if att is None and not forced:
                continue  # killed by an Abort (and not a zombie)
            self.attempts.pop(lease, None)
            if outcome[0] == "ok":
                ok, actions = h.complete(lease, output=lease)
            elif outcome[0] == "permanent":
                ok, actions = h.fail(lease, outcome[1], permanent=True)
            else:
                ok, actions = h.fail(lease, outcome[1], retry_after=outcome[2])
            if ok:
                self.finished_leases.append(lease)
            self._react(actions)
            return
