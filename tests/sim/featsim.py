"""The feature simulator: dependencies, fixed starts, cron schedules, autoscaling, resources,
labels, tenants, crashes.

``FeatureSimulator(seed, steps).run()`` works like :class:`~tests.sim.simulator.Simulator`
(one ``random.Random``, a fault phase, then quiescence that must end every task) but drives an
engine configured with the later features and checks them with
:class:`~tests.sim.feature_invariants.FeatureShadow`.

Crash recovery (docs/reference/behaviour.md#durable-state): with ``CoreConfig(persist=True)`` every engine
call's ``Persist`` mutations are buffered; at the end of a step they are *committed* (group commit, with
probability ``p_commit``, else they wait for a later step) into a row table folded exactly as
the SQL stores fold them (:func:`cronoq.store._records.fold`), and only then are that step's
submitters acknowledged.  A crash (random, during the fault phase) drops the engine, the
uncommitted mutations and every in-flight worker; a new ``Core`` with the next epoch recovers
from :func:`cronoq.store._records.build_recovered` over the committed rows - the same recovery
path as ``SqliteStore``/``PostgresStore`` - and the shadow is rebuilt from the committed log.

Cron schedules (their own pool ``cron``, a clock starting near a DST transition) are checked by
:mod:`tests.sim.recurring_invariants`, autoscaling (the simulator plays the pools' scaler) by
:mod:`tests.sim.autoscale_invariants`; :mod:`tests.sim.remotesim` reuses all of this with the
server's worker registry in place of the local workers.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import deque
from typing import Any

from cronoq.engine.actions import Abort, Dispatch, Scale
from cronoq.engine.core import Core
from cronoq.engine.recurring import CronSchedule, RecurringSpec
from cronoq.engine.time import MS, NS
from cronoq.errors import SubmitError
from cronoq.store._records import TASK_COLUMNS, build_recovered, fold
from cronoq.store.codec import JsonCodec

from .cronmodel import CronModel, random_cron
from .feature_invariants import TERMINAL, FeatureShadow
from .invariants import InvariantViolation
from .simulator import SimFailure, SimStats
from .workload import (
    CRON_POOL,
    FEATURE_TASK_FEATURES,
    LABEL_SETS,
    TaskSpec,
    Workload,
    make_feature_scenario,
    recurring_template,
    structure,
)

_STARTED = TASK_COLUMNS.index("started")
_UPDATE_COLS = ("status", "attempt", "message", "output", "has_output", "started", "finished")


class RowStore:
    """The committed state, as a SQL store keeps it (rows written by ``fold``)."""

    def __init__(self) -> None:
        self.rows: dict[int, list[Any]] = {}
        self.schedules: dict[str, list[Any]] = {}  # name -> [spec json, payload, next, last]
        self.codec = JsonCodec()
        self.log: list[Any] = []

    def commit(self, mutations: list[Any]) -> None:
        self.log.extend(mutations)
        batch = fold(mutations, self.codec)
        for row in batch.inserts:  # INSERT ... ON CONFLICT (id) DO UPDATE SET every column
            self.rows[row[0]] = list(row)
        idx = [TASK_COLUMNS.index(c) for c in _UPDATE_COLS]
        for upd in batch.updates:  # UPDATE ... started = COALESCE(started, ?) ... WHERE id = ?
            row = self.rows.get(upd[-1])
            if row is None:
                continue
            for i, v in zip(idx, upd[:-1]):
                if i == _STARTED and row[i] is not None:
                    continue
                row[i] = v
        for op in batch.schedule_ops:
            if op[0] == "upsert":  # INSERT ... ON CONFLICT (name) DO UPDATE SET spec, payload
                srow = self.schedules.get(op[1])
                if srow is None:
                    self.schedules[op[1]] = [op[2], op[3], None, 0]
                else:
                    srow[0], srow[1] = op[2], op[3]
            elif op[0] == "remove":
                self.schedules.pop(op[1], None)
            else:  # UPDATE ... SET next, last WHERE name
                srow = self.schedules.get(op[1])
                if srow is not None:
                    srow[2], srow[3] = op[2], op[3]

    def recovered(self) -> Any:
        scheds = [(name, *r) for name, r in sorted(self.schedules.items())]  # ORDER BY name
        return build_recovered([tuple(r) for _, r in sorted(self.rows.items())], scheds, self.codec, 0)


class FeatureSimulator:
    SEED_SALT = 0x5EED_F00D  # this simulator's RNG stream: random.Random(seed ^ SEED_SALT)
    KIND = "features"

    def __init__(self, seed: int, steps: int = 2000, *, verbose: bool = False, trace_len: int = 40) -> None:
        self.seed = seed
        self.steps = steps
        self.verbose = verbose
        self.rng = random.Random(seed ^ self.SEED_SALT)
        self.sc = make_feature_scenario(self.rng)
        self._configure()
        self.workload = Workload(self.sc, self.rng, FEATURE_TASK_FEATURES)
        self.config = self.sc.config
        self.epoch = 0
        self.now = 0
        self.core = Core(self.config, now=0, epoch=0)
        self.core.publish = True
        self.shadow = FeatureShadow(self.config, self.core)
        self.store = RowStore()
        self.uncommitted: list[Any] = []
        self.pending_acks: list[int] = []
        self.acked: set[int] = set()
        self.trace: deque[tuple[Any, ...]] = deque(maxlen=trace_len)
        self.step = 0
        self.phase = "faults"
        self.faults = True
        self.calls = 0
        self.crashes = 0
        self.agenda: list[tuple[int, int, int, int, Any]] = []
        self.agenda_n = 0
        self.attempts: dict[int, int] = {}  # lease -> pool
        self.recent: list[int] = self.sc.extra["recent_ids"]  # type: ignore[assignment]
        self.recurring = bool(self.sc.extra.get("recurring"))
        self.scaler: str | None = self.sc.extra.get("scaler")  # type: ignore[assignment]
        self.quota: dict[str, int] = self.sc.extra.get("quota", {})  # type: ignore[assignment]
        self.scale_agenda: list[tuple[int, int, str, int]] = []  # lagging scaler: (at, n, pool, n)
        self.pools_all = self.sc.pool_names + ([CRON_POOL] if self.recurring else [])
        ops = self.sc.op_weights
        self.op_names = list(ops)
        self.op_cum: list[float] = []
        acc = 0.0
        for k in self.op_names:
            acc += ops[k]
            self.op_cum.append(acc)

    # ------------------------------------------------------------------ engine calls

    def _log(self, call: str, args: tuple[Any, ...], result: object, actions: list[Any]) -> None:
        self.trace.append((self.step, self.now, call, args, result, actions))
        if self.verbose:
            print(self._fmt(self.trace[-1]))

    @staticmethod
    def _fmt(entry: tuple[Any, ...]) -> str:
        step, now, call, args, result, actions = entry
        a = ", ".join(x.short() if isinstance(x, TaskSpec) else repr(x) for x in args)
        acts = "; ".join(repr(x) for x in actions if type(x).__name__ != "Persist")
        res = "" if result is None else f" -> {result!r}"
        return f"{step:>6} {now / NS:>12.6f} {call}({a}){res}" + (f" | {acts}" if acts else "")

    def _finish(self, call: str, args: tuple[Any, ...], result: object) -> list[Any]:
        actions = self.core.drain_actions()
        self._log(call, args, result, actions)
        return actions

    def _after(self, actions: list[Any]) -> None:
        self.uncommitted.extend(self.shadow.mutations)
        self._react(actions)

    def submit(self, specs: list[TaskSpec], batch: bool) -> None:
        self.calls += 1
        sh = self.shadow
        sh.begin(self.now, "submit_batch" if batch else "submit")
        pred = sh.predict_submit(specs, batch)
        result: list[tuple[int, bool]] | None = None
        code = None
        try:
            if batch:
                result = self.core.submit_batch(self.now, [s.batch_item() for s in specs])
            else:
                s = specs[0]
                result = [
                    self.core.submit(self.now, s.options(), None, s.key, s.deadline, s.start_at, s.deps)
                ]
        except SubmitError as e:
            code = e.code
        actions = self._finish(sh.call, tuple(specs), code or result)
        sh.after_submit(specs, pred, result, code, actions)
        if result is not None:
            self.pending_acks.extend(tid for tid, _ in result)
        self._after(actions)

    def report(self, lease: int, outcome: tuple[Any, ...]) -> None:
        self.calls += 1
        sh = self.shadow
        if outcome[0] == "ok":
            sh.begin(self.now, "complete", ("complete", lease, lease))
            ok = self.core.complete(self.now, lease, lease)
        else:
            perm = outcome[0] == "permanent"
            sh.begin(self.now, "fail", ("fail", lease, perm, outcome[1]))
            ok = self.core.fail(self.now, lease, outcome[1], permanent=perm, retry_after=outcome[2])
        actions = self._finish(sh.call, (lease, outcome), ok)
        if ok != (lease in sh.leases):
            sh.fail("reports", f"report for lease {lease} returned {ok}")
        sh.apply(actions)
        self._after(actions)

    def heartbeat(self, lease: int) -> None:
        self.calls += 1
        self.shadow.begin(self.now, "heartbeat")
        ok = self.core.heartbeat(self.now, lease)
        actions = self._finish("heartbeat", (lease,), ok)
        if ok != (lease in self.shadow.leases) or actions:
            self.shadow.fail("reports", f"heartbeat({lease}) -> {ok} {actions}")

    def cancel(self, ref: int | str) -> None:
        self.calls += 1
        sh = self.shadow
        tid = sh.keys.get(ref) if isinstance(ref, str) else ref
        t = sh.tasks.get(tid) if tid is not None else None
        live = t is not None and t.status not in TERMINAL
        sh.begin(self.now, "cancel", ("cancel", tid))
        ok = self.core.cancel(self.now, ref)
        actions = self._finish("cancel", (ref,), ok)
        if ok != live:
            sh.fail("reports", f"cancel({ref!r}) returned {ok}, the task is {t}")
        sh.apply(actions)
        if live and t is not None and t.status != "cancelled":
            sh.fail("cause", f"cancel({ref!r}) left {t}")
        self._after(actions)

    def move_attempt(self, lease: int, labels: dict[str, str]) -> bool:
        """A Nacked remote lease re-offered to a worker of another group
        (docs/reference/grpc.md#worker-protocol)."""
        self.calls += 1
        sh = self.shadow
        sh.begin(self.now, "move_attempt")
        ok = self.core.move_attempt(lease, labels)
        actions = self._finish("move_attempt", (lease, labels), ok)
        if actions:
            sh.fail("groups", f"move_attempt produced actions {actions}")
        sh.move_attempt(lease, labels, ok)
        return ok

    def set_group_capacity(self, pool: str, labels: dict[str, str] | None, n: int) -> None:
        self.calls += 1
        self.shadow.begin(self.now, "set_group_capacity")
        self.core.set_group_capacity(self.now, pool, labels, n)
        actions = self._finish("set_group_capacity", (pool, labels, n), None)
        if actions:
            self.shadow.fail("groups", f"set_group_capacity produced actions {actions}")
        self.shadow.set_group_capacity(self.shadow.pool_by_name[pool], labels, n)

    def add_recurring(
        self, name: str, cron: CronModel, overlap: int, template: TaskSpec, deadline_rel: int | None
    ) -> None:
        self.calls += 1
        sh = self.shadow
        sh.begin(self.now, "add_recurring", ("add_recurring", name))
        spec = RecurringSpec(
            name,
            CronSchedule(cron.expr, cron.tz),
            overlap,
            template.options(),
            None,
            template.key,
            deadline_rel,
        )
        args = (name, cron.expr, cron.tz, overlap, template, deadline_rel)
        try:
            info = self.core.add_recurring(self.now, spec)
        except SubmitError as e:
            actions = self._finish("add_recurring", args, e.code)
            if actions or template.pool in sh.pool_by_name or e.code != "unknown_pool":
                sh.fail("recurring", f"add_recurring raised {e.code} for pool {template.pool} ({actions})")
            return
        sched = sh.recur.add(name, cron, overlap, template, deadline_rel)
        actions = self._finish("add_recurring", args, info.next_unix_ns)
        sh.apply(actions)
        sh.recur.after_add(sched, info)
        self._after(actions)

    def remove_recurring(self, name: str) -> None:
        self.calls += 1
        sh = self.shadow
        sh.begin(self.now, "remove_recurring", ("remove_recurring", name))
        ok = self.core.remove_recurring(self.now, name)
        actions = self._finish("remove_recurring", (name,), ok)
        sh.apply(actions)
        sh.recur.remove(name, ok)
        self._after(actions)

    def check_recurring(self) -> None:
        self.shadow.recur.check_list(self.core.list_recurring())

    def tick(self) -> None:
        self.calls += 1
        sh = self.shadow
        sh.begin(self.now, "tick")
        self.core.tick(self.now)
        actions = self._finish("tick", (), None)
        sh.apply(actions)
        sh.after_tick()
        sh.scale.after_tick(actions)
        self._after(actions)

    def advance_to(self, t: int) -> None:
        assert t >= self.now
        self.now = t

    # ------------------------------------------------------------------ commits and crashes

    def _commit(self) -> None:
        if self.uncommitted:
            self.shadow.on_commit(self.uncommitted)
            self.store.commit(self.uncommitted)
            self.uncommitted = []
        for tid in self.pending_acks:
            if tid not in self.acked:
                self.acked.add(tid)
                self.recent.append(tid)
        self.pending_acks = []
        if len(self.recent) > 200:
            del self.recent[:100]

    def _crash(self) -> None:
        """Drop the engine, the uncommitted mutations and every worker; recover from the store."""
        self.crashes += 1
        self._drop_workers()
        self.uncommitted = []
        self.pending_acks = []  # never acknowledged: the submitters got no answer
        self.agenda = []
        self.scale_agenda = []  # (the scaler's pending requests die with the shell)
        self.attempts = {}
        self.epoch += 1
        self._log("crash", (self.epoch,), None, [])
        core = Core(self.config, now=self.now, epoch=self.epoch)
        core.publish = True
        self.core = core
        sh = self.shadow
        sh.now = self.now
        sh.reset(core, self.epoch)
        rec = self.store.recovered()
        last = sh.rebuild(self.store.log)
        self.calls += 1
        sh.begin(self.now, "recover", ("recover",))
        core.recover(self.now, rec)
        actions = self._finish("recover", (len(rec.tasks), len(rec.terminal)), None)
        sh.apply(actions)
        for tid, t in sh.tasks.items():
            if t.status == "new":
                sh.fail("recovery", f"recovered live task {tid} published no events")
        sh.check_recovered(last, self.acked)
        self._after(actions)
        self.recent[:] = [tid for tid in self.recent if tid in sh.tasks]
        self._workers_return()

    # ------------------------------------------------------------------ hooks (remotesim.py)

    def _configure(self) -> None:
        """Adjust the scenario before the engine is built."""

    def _setup_capacity(self) -> None:
        for pool in self.pools_all:  # labelled worker groups register
            for labels in LABEL_SETS:
                if self.rng.random() < 0.6:
                    self.set_group_capacity(pool, labels, self.rng.randint(1, 2))

    def _quiesce_capacity(self) -> None:
        sh = self.shadow
        for name in self.pools_all:
            pi = sh.pool_by_name[name]
            # an autoscaled pool whose scaler follows gets its capacity from the autoscaler
            scaled = pi in sh.scale.pools and self.scaler != "ignore"
            if sh.groups[pi][0].capacity == 0 and not scaled:
                self.set_group_capacity(name, None, self.rng.randint(1, self.sc.max_capacity))
            self.set_group_capacity(name, LABEL_SETS[-1], 2)  # accepts every task label set

    def _drop_workers(self) -> None:
        """A crash: in-flight attempts die with the shell."""

    def _workers_return(self) -> None:
        """After a recovery."""

    # ------------------------------------------------------------------ running

    def run(self) -> SimStats:
        t0 = time.perf_counter()
        try:
            self._setup_capacity()
            for step in range(self.steps):
                self.step = step
                self._step()
                if self.rng.random() < float(self.sc.extra["p_crash"]):  # type: ignore[arg-type]
                    self._crash()
                elif self.rng.random() < float(self.sc.extra["p_commit"]):  # type: ignore[arg-type]
                    self._commit()
                if step % 250 == 249:
                    self.shadow.check_full()
                    if self.recurring:
                        self.check_recurring()
            self._commit()
            self._quiesce()
        except Exception as e:
            if isinstance(e, SimFailure):
                raise
            raise SimFailure(
                self.seed,
                self.steps,
                self.step,
                f"{self.KIND}/{self.phase}",
                e,
                [self._fmt(x) for x in self.trace],
            ) from e
        st = SimStats(seed=self.seed, kind=self.KIND)
        st.steps = self.steps
        st.quiesce_steps = self.step - self.steps
        st.calls = self.calls
        st.submitted = len(self.shadow.all_ids)
        st.sim_seconds = self.now / NS
        st.wall_seconds = time.perf_counter() - t0
        st.shadow = dict(self.shadow.stats, crashes=self.crashes)
        if self.recurring:
            st.shadow.update({"recur_" + k: v for k, v in self.shadow.recur.stats.items()})
        if self.shadow.scale.pools:
            st.shadow.update({"scale_" + k: v for k, v in self.shadow.scale.stats.items()})
        st.totals = dict(self.core.totals)
        return st

    def _next_event(self) -> int | None:
        """The next worker or scaler event (the clock never passes it)."""
        cands = [q[0][0] for q in (self.agenda, self.scale_agenda) if q]
        return min(cands) if cands else None

    def _step(self) -> None:
        rng = self.rng
        if self.scale_agenda and self.scale_agenda[0][0] <= self.now and rng.random() < 0.7:
            self._scale_event()
        elif self.agenda and self.agenda[0][0] <= self.now and rng.random() < 0.7:
            self._worker_event()
        else:
            r = rng.random() * self.op_cum[-1]
            op = self.op_names[next(i for i, c in enumerate(self.op_cum) if r < c)]
            if op == "advance":
                self._advance()
                return
            getattr(self, "_op_" + op)()
        if rng.random() < 0.8:
            self.tick()

    def _quiesce(self) -> None:
        """Faults off, no crashes, capacity and groups back, awaited keys provided: all must end."""
        self.phase = "quiesce"
        self.faults = False
        sh = self.shadow
        if self.recurring:  # schedules end; their materialized occurrences still run
            self.check_recurring()
            for name in sorted(sh.recur.scheds):
                self.remove_recurring(name)
            self.check_recurring()
            # an occurrence far ahead (an hour-restricted cron's next day) would make quiescence
            # tick through hours of autoscaler evaluations: cancel those (nearer ones still run)
            for t in list(sh.tasks.values()):
                start = t.spec.start_at
                ahead = start is not None and start > self.now + 120 * NS
                if t.occ is not None and t.status not in TERMINAL and ahead:
                    self.cancel(t.id)
        self._quiesce_capacity()
        for key in sorted((k for k, ws in sh.awaiting.items() if ws and k not in sh.keys), key=str):
            # (keys are scoped by tenant: a tenant's awaited key is provided by that tenant)
            tenant, plain = (None, key) if isinstance(key, str) else key
            self.submit([TaskSpec(key=plain, tenant=tenant)], False)
        self._commit()
        self.tick()
        last = (-1, -1)
        progress_at = self.step
        while self.core.live or self.agenda:  # (the shadow's view is checked at the end)
            self.step += 1
            prog = (sh.stats["dispatches"], sh.stats["ended"])
            if prog != last:
                last, progress_at = prog, self.step
            if self.step - progress_at > 5000:
                live = [t for t in sh.tasks.values() if t.status not in TERMINAL]
                raise InvariantViolation("liveness", f"no progress for 5000 quiesce steps: {live[:5]}")
            if self.scale_agenda and self.scale_agenda[0][0] <= self.now:
                self._scale_event()
            elif self.agenda and self.agenda[0][0] <= self.now:
                self._worker_event()
            else:
                cands = [x for x in (self.core.next_wakeup(), self._next_event()) if x is not None]
                if not cands:
                    live = [t for t in sh.tasks.values() if t.status not in TERMINAL]
                    raise InvariantViolation(
                        "liveness", f"stuck: no timers, no worker events; e.g. {live[:5]}"
                    )
                self.advance_to(max(self.now, min(cands)))
            self.tick()
            self._commit()
        sh.check_full()
        sh.check_terminal_all(self.acked)

    # ------------------------------------------------------------------ client ops

    def _op_submit(self) -> None:
        self.submit([self.workload.task(self.now)], False)

    def _op_structure(self) -> None:
        specs, as_batch = structure(self.workload, self.now)
        if as_batch:
            self.submit(specs, True)
        else:
            for s in specs:
                self.submit([s], False)

    def _op_cancel(self) -> None:
        rng = self.rng
        if self.recent and rng.random() < 0.7:
            ref: int | str = rng.choice(self.recent[-60:])
        else:
            ref = f"k{rng.randrange(self.sc.key_space)}"
        self.cancel(ref)

    def _op_capacity(self) -> None:
        rng = self.rng
        pool = rng.choice(self.pools_all)
        n = 0 if rng.random() < 0.2 else rng.randint(1, self.sc.max_capacity)
        labels = None if rng.random() < 0.5 else rng.choice(LABEL_SETS)
        self.set_group_capacity(pool, labels, n)

    def _op_recur_add(self) -> None:
        rng, sc = self.rng, self.sc
        name = f"r{rng.randrange(int(sc.extra['recur_names']))}"  # type: ignore[call-overload]
        tz = rng.choice((sc.extra["tz"], sc.extra["tz"], None, "Asia/Kolkata"))
        cron = random_cron(rng, tz, (self.config.time_base + self.now) // NS)  # type: ignore[arg-type]
        overlap = rng.choices(range(4), weights=sc.extra["overlap_weights"])[0]  # type: ignore[arg-type]
        template = recurring_template(rng, sc, name)
        if rng.random() < 0.02:
            template.pool = "no-such-pool"
        deadline_rel = rng.choice((None, None, 2 * NS))
        self.add_recurring(name, cron, overlap, template, deadline_rel)

    def _op_recur_remove(self) -> None:
        names = sorted(self.shadow.recur.scheds)
        if names and self.rng.random() < 0.9:
            self.remove_recurring(self.rng.choice(names))
        else:
            self.remove_recurring(f"r{self.rng.randrange(20)}")

    def _op_recur_cancel(self) -> None:
        """Cancel a live occurrence (by id or occurrence key)."""
        sh = self.shadow
        live = [t for s in sh.recur.scheds.values() for t in (sh.tasks.get(i) for i in s.occ[-3:]) if t]
        live = [t for t in live if t.status not in TERMINAL]
        if not live:
            return
        t = self.rng.choice(live)
        self.cancel(t.key if t.key is not None and self.rng.random() < 0.5 else t.id)

    def _op_recur_list(self) -> None:
        self.check_recurring()

    def _advance(self) -> None:
        rng = self.rng
        nw = self.core.next_wakeup()
        na = self._next_event()
        r = rng.random()
        if r < 0.6:
            target = self.now + int(rng.expovariate(5.0) * NS)
            cands = [x for x in (nw, na) if x is not None]
            if cands:
                target = min(cands)
        else:
            target = self.now + int(rng.expovariate(2.0) * NS)
        for bound in (nw, na):
            if bound is not None and bound < target:
                target = bound
        self.advance_to(max(self.now, target))
        self.tick()

    # ------------------------------------------------------------------ workers

    def _schedule(self, at: int, kind: int, lease: int, data: Any = None) -> None:
        self.agenda_n += 1
        heapq.heappush(self.agenda, (at, self.agenda_n, kind, lease, data))

    def _react(self, actions: list[Any]) -> None:
        for a in actions:
            if type(a) is Dispatch:
                self._start(a)
            elif type(a) is Abort:
                self.attempts.pop(a.lease, None)
            elif type(a) is Scale:
                self._scale(a)

    # ------------------------------------------------------------------ the pools' scaler

    def _scale(self, a: Scale) -> None:
        """Play the pool's Scaler (docs/reference/behaviour.md#autoscaling): follow at once (SlotScaler),
        later and in request order (a slow external scaler), up to a quota, or never (capacity managed
        elsewhere)."""
        mode = self.scaler
        n = a.desired
        if mode == "ignore":
            return
        if mode == "quota":
            n = min(n, self.quota[a.pool])
        if self.phase == "quiesce":
            # docs/reference/behaviour.md#autoscaling may ask for 0 slots with a small backlog:
            # the scaler floors it
            n = max(n, 1)
        if mode == "lag":
            at = self.now + int(self.rng.uniform(0.0, 1.5) * NS)
            if self.scale_agenda:
                at = max(at, max(e[0] for e in self.scale_agenda))  # applied in request order
            self.agenda_n += 1
            heapq.heappush(self.scale_agenda, (at, self.agenda_n, a.pool, n))
            return
        self.set_group_capacity(a.pool, None, n)

    def _scale_event(self) -> None:
        _, _, pool, n = heapq.heappop(self.scale_agenda)
        self.set_group_capacity(pool, None, n)

    def _draw_attempt(
        self, ttl: int | None, timeout: int | None, retry_afters: tuple[Any, ...]
    ) -> tuple[int, bool, tuple[Any, ...]] | None:
        """A started attempt's simulated fate: ``(run ns, lease lost, outcome)``, or None when
        it hangs.  Outcomes: ``("ok",)``, ``("permanent", message, None)`` or ``("retry",
        message, retry_after)`` with ``retry_after`` one of ``retry_afters`` or None.  Faults
        only while ``self.faults``; without them an attempt with a timeout ends well inside it.
        (Shared with the remote simulator: the draws, and their order, are the same.)"""
        rng, sc = self.rng, self.sc
        run = int(rng.expovariate(1.0 / sc.mean_run) * NS)
        f = self.faults
        if not f and timeout is not None:
            run = min(run, timeout // 2)
        if f and rng.random() < sc.p_hang and (timeout is not None or ttl is not None):
            return None
        lost = bool(f and ttl is not None and rng.random() < sc.p_lose_lease)
        outcome: tuple[Any, ...]
        if f and rng.random() < sc.p_fail:
            if rng.random() < sc.p_permanent:
                outcome = ("permanent", "boom", None)
            else:
                ra = rng.choice(retry_afters) if rng.random() < sc.p_retry_after else None
                outcome = ("retry", f"flaky #{rng.randrange(10)}", ra)
        else:
            outcome = ("ok",)
        return run, lost, outcome

    def _start(self, d: Dispatch) -> None:
        t = d.task
        pool = t.opts.pool_index
        ttl = self.config.pools[pool].lease_ttl
        self.attempts[d.lease] = pool
        fate = self._draw_attempt(ttl, t.opts.timeout, (0, 10 * MS, 500 * MS))
        if fate is None:
            return
        run, lost, outcome = fate
        self._schedule(self.now + run, 0, d.lease, outcome)
        if ttl is not None and not lost:
            self._schedule(self.now + int(ttl * NS * self.rng.uniform(0.2, 0.7) / NS), 1, d.lease)

    def _worker_event(self) -> None:
        while self.agenda and self.agenda[0][0] <= self.now:
            _, _, kind, lease, data = heapq.heappop(self.agenda)
            pool = self.attempts.get(lease)
            if pool is None:
                continue  # aborted or finished
            if kind == 1:
                self.heartbeat(lease)
                ttl = self.config.pools[pool].lease_ttl
                assert ttl is not None
                self._schedule(self.now + int(ttl * self.rng.uniform(0.2, 0.7)), 1, lease)
                return
            del self.attempts[lease]
            self.report(lease, data)
            return
