"""The operations simulator: pause/resume of pools and schedules, replays and bulk actions,
with crashes (docs/how-to/operations.md).

``OpsSimulator(seed, steps).run()`` drives one persisting engine with random submissions
(some keyed, some with a fixed start), worker outcomes (success, permanent failure, hangs
that lose their lease), cancels, pauses and resumes of pools and of a cron schedule, single
replays and paged bulk cancels/replays, and crashes that recover a new engine from the
committed rows exactly as the SQL stores do (:func:`cronoq.store._records.fold` and
:func:`~cronoq.store._records.build_recovered`, the paused table included).  It plays the
shell's part of a replay: the payload is read back from the committed row.

Invariants (checked after every call; a violation raises
:class:`~tests.sim.invariants.InvariantViolation`):

* ``paused``: no ``Dispatch`` from a pool that was paused when the call ran;
* ``replay_id``: a replay's id was never used before (across crashes, by any task);
* ``replay_links``: a replay carries ``cronoq.replay_of=<original>``, the original's
  ``replayed_by`` names it, the original's key (when it held it) now finds the replay; after a
  recovery every committed link is back;
* ``durable_pause``: after a recovery exactly the committed paused pools and schedules are;
* ``liveness``: with everything resumed and faults off, every task ends.
"""

from __future__ import annotations

import heapq
import random
from typing import Any

from cronoq.engine import bulk, control, replay
from cronoq.engine.actions import Dispatch
from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import FIRST_TERMINAL, READY, RUN_LATE, SKIP, TaskOptions
from cronoq.engine.recurring import CronSchedule, RecurringSpec
from cronoq.engine.time import NS
from cronoq.errors import ReplayError, SubmitError
from cronoq.store._records import TASK_COLUMNS, build_recovered, fold
from cronoq.store.codec import JsonCodec

from .invariants import InvariantViolation
from .simulator import SimFailure, SimStats

POOLS = ("a", "b", "c")
SCHEDULE = "tick"
_PAYLOAD = TASK_COLUMNS.index("payload")


class PausedRows:
    """The committed rows, tasks and schedules as in ``featsim.RowStore`` (minimal) plus the
    ``cronoq_paused`` table."""

    def __init__(self) -> None:
        self.codec = JsonCodec()
        self.rows: dict[int, list[Any]] = {}
        self.schedules: dict[str, list[Any]] = {}
        self.paused: set[tuple[str, str]] = set()
        self.cols = [TASK_COLUMNS.index(c) for c in ("status", "attempt", "message", "output", "has_output")]

    def commit(self, mutations: list[Any]) -> None:
        batch = fold(mutations, self.codec)
        for row in batch.inserts:
            self.rows[row[0]] = list(row)
        for upd in batch.updates:
            row = self.rows.get(upd[-1])
            if row is None:
                continue
            for i, v in zip(self.cols, upd[:5]):
                row[i] = v
            started, finished = upd[5], upd[6]
            si, fi = TASK_COLUMNS.index("started"), TASK_COLUMNS.index("finished")
            if row[si] is None:
                row[si] = started
            row[fi] = finished
        for op in batch.schedule_ops:
            if op[0] == "upsert":
                self.schedules[op[1]] = [op[2], op[3], None, 0]
            elif op[0] == "remove":
                self.schedules.pop(op[1], None)
            elif op[1] in self.schedules:
                self.schedules[op[1]][2:] = [op[2], op[3]]
        for kind, name, paused in batch.pause_ops:
            (self.paused.add if paused else self.paused.discard)((kind, name))

    def recovered(self) -> Any:
        scheds = [(n, *r) for n, r in sorted(self.schedules.items())]
        rows = [tuple(r) for _, r in sorted(self.rows.items())]
        return build_recovered(rows, scheds, self.codec, 0, sorted(self.paused))


class OpsSimulator:
    SEED_SALT = 0x0FE7_A710
    KIND = "ops"

    def __init__(self, seed: int, steps: int = 1500) -> None:
        self.seed = seed
        self.steps = steps
        self.rng = random.Random(seed ^ self.SEED_SALT)
        self.cfg = CoreConfig(
            [PoolConfig(p, min=2, max=2, initial=2, autoscale=False, lease_ttl=2.0) for p in POOLS],
            persist=True,
            retention=3600.0,
        )
        self.epoch = 0
        self.now = 0
        self.core = Core(self.cfg, epoch=0)
        self.store = PausedRows()
        self.uncommitted: list[Any] = []
        self.agenda: list[tuple[int, int, int, str]] = []  # (at, n, lease, outcome)
        self.n = 0
        self.ids: set[int] = set()
        self.links: dict[int, int] = {}  # replay -> original (acknowledged)
        self.step = 0
        self.crashes = 0
        self.stats = {"replays": 0, "bulk": 0, "pauses": 0, "dispatches": 0}
        self.trace: list[str] = []
        spec = RecurringSpec(SCHEDULE, CronSchedule("*/20 * * * * *"), 1, TaskOptions(pool="c"), {"cron": 1})
        spec.blob = self.store.codec.encode({"cron": 1})
        self._call("add_recurring", lambda: self.core.add_recurring(self.now, spec))

    # ------------------------------------------------------------------ plumbing

    def _call(self, name: str, fn: Any) -> Any:
        paused = {p.name for p in self.core.pools if p.paused}
        result = fn()
        actions = self.core.drain_actions()
        self.trace.append(f"{self.step} {self.now / NS:.3f} {name} -> {result!r}")
        del self.trace[:-30]
        for a in actions:
            tp = type(a).__name__
            if tp == "Persist":
                self.uncommitted.append(a.mutation)
            elif tp == "Dispatch":
                self._dispatched(a, paused)
            elif tp == "Abort":
                pass
        for t in self.core.tasks.values():
            self.ids.add(t.id)
        return result

    def _dispatched(self, d: Dispatch, paused: set[str]) -> None:
        pool = self.core.pools[d.task.opts.pool_index].name
        if pool in paused:
            raise InvariantViolation("paused", f"task {d.task.id} dispatched from paused pool {pool}")
        self.stats["dispatches"] += 1
        r = self.rng.random()
        if r < 0.1:
            return  # hangs: its lease expires
        self.n += 1
        at = self.now + int(self.rng.expovariate(2.0) * NS)
        heapq.heappush(self.agenda, (at, self.n, d.lease, "fail" if r < 0.4 else "ok"))

    def _commit(self) -> None:
        if self.uncommitted:
            self.store.commit(self.uncommitted)
            self.uncommitted = []

    def _crash(self) -> None:
        self.crashes += 1
        self.agenda.clear()
        self.uncommitted = []
        self.epoch += 1
        self.core = Core(self.cfg, now=self.now, epoch=self.epoch)
        rec = self.store.recovered()
        self._call("recover", lambda: self.core.recover(self.now, rec))
        got = {("pool", p.name) for p in self.core.pools if p.paused} | {
            ("recurring", n) for n in self.core.recurring.paused
        }
        if got != self.store.paused:
            raise InvariantViolation("durable_pause", f"recovered {got}, committed {self.store.paused}")
        for new, orig in self.links.items():
            t, o = self.core.tasks.get(new), self.core.tasks.get(orig)
            by = None if o is None else replay.replayed_by(o)
            if t is not None and o is not None and (by is None or by < new):
                raise InvariantViolation("replay_links", f"recovered {orig}.replayed_by = {by}, not {new}")

    # ------------------------------------------------------------------ ops

    def _submit(self) -> None:
        rng = self.rng
        pool = rng.choice(POOLS)
        key = f"k{rng.randrange(30)}" if rng.random() < 0.4 else None
        start = self.now + int(rng.uniform(0.1, 3.0) * NS) if rng.random() < 0.15 else None
        opts = TaskOptions(pool=pool, on_miss=rng.choice((SKIP, RUN_LATE)))
        payload = {"n": rng.randrange(1000)}
        blob = self.store.codec.encode(payload)
        try:
            self._call(
                "submit", lambda: self.core.submit(self.now, opts, payload, key, None, start, None, blob)
            )
        except SubmitError:
            self.core.drain_actions()

    def _pause(self) -> None:
        rng = self.rng
        paused = rng.random() < 0.5
        if rng.random() < 0.8:
            pool = rng.choice(POOLS)
            self._call(
                f"pause({pool}, {paused})", lambda: control.set_pool_paused(self.core, self.now, pool, paused)
            )
        else:
            self._call(
                f"pause_recurring({paused})",
                lambda: control.set_recurring_paused(self.core, SCHEDULE, paused),
            )
        self.stats["pauses"] += 1

    def _payload(self, tid: int) -> tuple[bool, object, bytes | None]:
        row = self.store.rows.get(tid)
        blob = None if row is None else row[_PAYLOAD]
        if blob is None:
            return False, None, None
        return True, self.store.codec.decode(blob), blob

    def _check_replay(self, orig_id: int, new: int, known: set[int]) -> None:
        if new in known:
            raise InvariantViolation("replay_id", f"replay of {orig_id} reused id {new}")
        core = self.core
        t, o = core.tasks[new], core.tasks[orig_id]
        if replay.replay_of(t) != orig_id or replay.replayed_by(o) != new:
            raise InvariantViolation("replay_links", f"replay {new} of {orig_id}: {t.opts.tags}")
        if t.key is not None and core.lookup(self.now, t.key, t.opts.tenant) is not t:
            raise InvariantViolation("replay_links", f"key {t.key!r} does not find replay {new}")
        self.links[new] = orig_id
        self.stats["replays"] += 1

    def _replay(self) -> None:
        done = [t for t in self.core.tasks.values() if t.status >= FIRST_TERMINAL]
        if not done:
            return
        t = self.rng.choice(done)
        ok, payload, blob = self._payload(t.id)
        try:
            replay.check(t, t.id, force=True)
        except ReplayError:
            return
        if not ok:
            return
        known = set(self.ids)
        try:
            new = self._call("replay", lambda: replay.replay(self.core, self.now, t, payload, blob))
        except SubmitError:
            self.core.drain_actions()
            return
        self._check_replay(t.id, new, known)

    def _bulk(self) -> None:
        rng = self.rng
        pools = frozenset({rng.randrange(len(POOLS))})
        core = self.core
        ids = bulk.candidates(core)
        if rng.random() < 0.5:
            f = bulk.TaskFilter(frozenset({READY}), pools=pools, limit=rng.randrange(1, 20))
            for i in range(0, len(ids), 7):  # small pages
                hits = bulk.select(core, ids[i : i + 7], f, None)
                self._call("cancel_all", lambda h=hits: bulk.cancel_all(core, self.now, h))
        else:
            f = bulk.TaskFilter(bulk.REPLAYABLE, pools=pools)
            hits = bulk.select(core, ids, f, 5)
            known = set(self.ids)
            self._call(
                "replay_all", lambda: bulk.replay_all(core, self.now, hits, lambda t: self._payload(t.id))
            )
            for h in hits:
                new = replay.replayed_by(h)
                if new is not None and new not in self.links:
                    self._check_replay(h.id, new, known)
        self.stats["bulk"] += 1

    def _cancel(self) -> None:
        live = [t.id for t in self.core.tasks.values() if t.status < FIRST_TERMINAL]
        if live:
            tid = self.rng.choice(live)
            self._call("cancel", lambda: self.core.cancel(self.now, tid))

    def _worker(self) -> None:
        _, _, lease, outcome = heapq.heappop(self.agenda)
        if outcome == "ok":
            self._call("complete", lambda: self.core.complete(self.now, lease, None))
        else:
            self._call("fail", lambda: self.core.fail(self.now, lease, "upstream down", permanent=True))

    def _tick(self) -> None:
        self._call("tick", lambda: self.core.tick(self.now))

    def _advance(self) -> None:
        nxt = [
            x for x in (self.core.next_wakeup(), self.agenda[0][0] if self.agenda else None) if x is not None
        ]
        target = self.now + int(self.rng.expovariate(4.0) * NS)
        if nxt and min(nxt) < target:
            target = min(nxt)
        self.now = max(self.now, target)

    # ------------------------------------------------------------------ run

    def run(self) -> SimStats:
        ops = [
            (self._submit, 5),
            (self._pause, 1),
            (self._replay, 1),
            (self._bulk, 0.3),
            (self._cancel, 0.5),
            (self._advance, 3),
        ]
        fns, weights = zip(*ops)
        try:
            for step in range(self.steps):
                self.step = step
                if self.agenda and self.agenda[0][0] <= self.now and self.rng.random() < 0.7:
                    self._worker()
                else:
                    self.rng.choices(fns, weights)[0]()
                self._tick()
                if self.rng.random() < 0.3:
                    self._commit()
                if self.rng.random() < 0.004:
                    self._crash()
            self._quiesce()
        except Exception as e:
            raise SimFailure(self.seed, self.steps, self.step, self.KIND, e, self.trace) from e
        st = SimStats(seed=self.seed, kind=self.KIND)
        st.steps = self.steps
        st.submitted = len(self.ids)
        st.sim_seconds = self.now / NS
        st.shadow = dict(self.stats, crashes=self.crashes)
        st.totals = dict(self.core.totals)
        return st

    def _quiesce(self) -> None:
        self._commit()
        for p in POOLS:
            self._call("resume", lambda p=p: control.set_pool_paused(self.core, self.now, p, False))
        self._call("remove_recurring", lambda: self.core.remove_recurring(self.now, SCHEDULE))
        for _ in range(200_000):
            self.step += 1
            if not self.core.live:
                return
            if self.agenda:
                self.now = max(self.now, self.agenda[0][0])
                self._worker()
            else:
                w = self.core.next_wakeup()
                if w is None:
                    live = [t for t in self.core.tasks.values() if t.status < FIRST_TERMINAL]
                    raise InvariantViolation("liveness", f"stuck with live tasks {live[:5]}")
                self.now = max(self.now, w)
            self._tick()
        raise InvariantViolation("liveness", "tasks never ended")
