"""Shadow model and invariants of recurring schedules (docs/reference/behaviour.md#cron) for the feature
simulator.

The shadow keeps every schedule it added (cron expression, zone, overlap policy, occurrence
template) and predicts each materialization itself: the next occurrence comes from
:class:`~tests.sim.cronmodel.CronModel` (its own reading of the cron fields in the zone, DST
included), the occurrence is a fixed-start submission of the template whose outcome the
:class:`~tests.sim.feature_invariants.FeatureShadow` predicts like any other (new id, duplicate
occurrence key, ``reservation_conflict`` → that occurrence is dropped and counted, and the
schedule wakes up at its instant to try the following one).  Only one thing is taken from the
engine: the instant a spring-forward gap fires at, which the reference leaves open (see
:mod:`tests.sim.cronmodel`); it is checked to lie in the allowed range.

Replacing a schedule whose occurrence for instant T is materialized creates nothing: that
occurrence stays the one ahead (the new schedule's overlap policy does not chain onto it) and
the new schedule's first occurrence, after T, is created when T comes due.  After a crash the
engine knows the occurrence ahead only by the committed ``last``: the recovered chain follows it.

When several things happen in one tick, their order matters (an occurrence that starts, is
skipped for overlap or missed frees its reservation before its successor is created).  The
engine fires all due timers, fills free slots and only then materializes the schedules that
came due, in timer order (instant, push order): the shadow replays those materializations in
that order when the engine's first new occurrence shows up (or at the end of the call), after
the events of the timers and the fill pass.

Invariants (each violation names ``recurring`` unless noted):

* every task the engine creates on its own is the predicted occurrence of a due schedule: id,
  start (a cron instant, never an earlier one skipped without a conflict), occurrence key
  ``<key>@<UTC start ISO-8601 seconds>Z``, template fields, edge to the previous occurrence for
  ``queue`` (complete) / ``queue_on_success`` (success);
* a schedule materializes exactly when its previous occurrence (or the one it dropped for a
  conflict) comes due (at its start, never late, never early), one occurrence per wake-up, and
  nothing after ``remove_recurring`` or a replacement;
* an occurrence is materialized at most once: each occurrence key maps to one id ever (across
  crashes: among committed ``Submitted`` records), and each schedule's starts strictly increase;
* no occurrence is ready or runs before its start (the ``fixed-start`` invariant);
* ``overlap``: with ``skip`` no two occurrences of one schedule are due at once (ready, running
  or retrying); an occurrence is ``skipped`` (``previous occurrence still running``) only while
  an earlier occurrence of its schedule is live; ``queue``/``queue_on_success`` are the
  dependency edges checked by ``deps``;
* ``add_recurring``/``remove_recurring``/``list_recurring`` answers and their ``Recurring*``
  mutations; after a crash the committed schedules come back with their definitions, resume
  from the committed ``next``/``last`` (the engine's rule: a live occurrence ahead keeps its
  wake-up, else the next occurrence after ``max(now, next)`` is created at once; a late
  wake-up resumes from ``now - tolerance``), and the interrupted chain keeps its overlap rule.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from cronoq.engine.mutations import RecurringNext, RecurringRemove, RecurringUpsert, Submitted
from cronoq.engine.recurring import CronSchedule
from cronoq.engine.time import NS

from .cronmodel import CronModel
from .invariants import TERMINAL
from .workload import TaskSpec

if TYPE_CHECKING:
    from .feature_invariants import FeatureShadow, FTask

OVERLAP_NAMES = ("skip", "allow", "queue", "queue_on_success")
SKIP, ALLOW, QUEUE, QUEUE_ON_SUCCESS = 0, 1, 2, 3
MSG_PREVIOUS_RUNNING = "previous occurrence still running"
DUE = frozenset({"ready", "running", "retrying"})


def occurrence_key(template: str, start_unix_ns: int) -> str:
    when = dt.datetime.fromtimestamp(start_unix_ns // NS, dt.UTC)
    return f"{template}@{when:%Y-%m-%dT%H:%M:%S}Z"


class Sched:
    """One ``add_recurring`` (a generation of a schedule name)."""

    __slots__ = (
        "active",
        "armed",
        "at_next",
        "chain",
        "cron",
        "deadline_rel",
        "gen",
        "last_id",
        "name",
        "next_start",
        "occ",
        "order",
        "overlap",
        "starts",
        "template",
    )

    def __init__(
        self,
        gen: int,
        name: str,
        cron: CronModel,
        overlap: int,
        template: TaskSpec,
        deadline_rel: int | None,
    ) -> None:
        self.gen = gen
        self.name = name
        self.cron = cron
        self.overlap = overlap
        self.template = template  # pool, key template, options; start/key/deps per occurrence
        self.deadline_rel = deadline_rel
        self.active = True
        self.armed = False  # a wake-up is pending at next_start
        self.at_next = False  # an occurrence is materialized for next_start (else: dropped)
        self.chain: int | None = None  # the occurrence the next one follows (overlap policy)
        self.next_start: int | None = None  # engine ns of the wake-up
        self.last_id = 0
        self.order = 0  # push order of the wake-up
        self.occ: list[int] = []  # occurrences this generation created
        self.starts: list[int] = []  # their starts (engine ns), strictly increasing

    def __repr__(self) -> str:
        return (
            f"<schedule {self.name}#{self.gen} {self.cron.expr!r} tz={self.cron.tz} "
            f"{OVERLAP_NAMES[self.overlap]} chain={self.chain} next={self.next_start} at_next={self.at_next}>"
        )


class Occ:
    """What the shadow knows about an occurrence task (``FTask.occ``)."""

    __slots__ = ("gen", "prev", "seq", "unlinked")

    def __init__(self, gen: int, prev: int | None, seq: int) -> None:
        self.gen = gen
        self.prev = prev  # the schedule's previous occurrence when this one was created
        self.seq = seq  # push order of its start timer
        # recovered while no overlap=skip schedule of its name was: the engine cannot know
        # its policy any more (it is not persisted), so overlap is not checked for it
        self.unlinked = False


class RecurringShadow:
    def __init__(self, sh: FeatureShadow) -> None:
        self.sh = sh
        self.scheds: dict[str, Sched] = {}  # current generation by name
        self.gens: dict[int, Sched] = {}
        self.next_gen = 1
        self.seq = 0  # push order counter (timers that matter for ordering)
        self.occ_keys: dict[str, int] = {}  # every occurrence key ever created (this epoch line)
        self.committed_keys: dict[str, int] = {}
        self.upsert_gen: dict[int, int] = {}  # id(RecurringUpsert) -> generation
        self.pending: list[tuple[tuple[int, int, int], str, Sched, int]] = []  # (key, kind, sched, after)
        self.recover_pending: list[tuple[tuple[int, int, int], str, Sched, int]] = []
        self.expect_next: list[tuple[str, int | None, int]] = []
        self.stats = {
            "materialized": 0,
            "conflicts": 0,
            "dups": 0,
            "overlap_skips": 0,
            "gaps": 0,
            "adopted": 0,
        }

    # ------------------------------------------------------------------ helpers

    def fail(self, detail: str) -> None:
        self.sh.fail("recurring", detail)

    def _bump(self) -> int:
        self.seq += 1
        return self.seq

    def begin(self) -> None:
        self.pending = []
        self.expect_next = []
        if self.sh.call == "recover":
            self.pending, self.recover_pending = self.recover_pending, []
        elif self.sh.call == "tick":
            now = self.sh.now
            for s in self.scheds.values():
                if s.armed and s.next_start is not None and s.next_start <= now:
                    s.armed = False
                    tol = s.template.tolerance
                    after = self.sh.tb + max(s.next_start, now - tol)
                    self.pending.append(((s.next_start, s.order, 1), "fire", s, after))
            self.pending.sort(key=lambda p: p[0])

    # ------------------------------------------------------------------ client calls

    def add(
        self, name: str, cron: CronModel, overlap: int, template: TaskSpec, deadline_rel: int | None
    ) -> Sched:
        """``add_recurring`` succeeded: the new generation; its first materialization is pending,
        or, when it replaces a schedule with an occurrence materialized for instant T, comes
        when T comes due (that occurrence stays the one ahead, not chained)."""
        old = self.scheds.get(name)
        s = Sched(self.next_gen, name, cron, overlap, template, deadline_rel)
        self.next_gen += 1
        self.gens[s.gen] = s
        self.scheds[name] = s
        if old is not None:
            old.active = False
            old.armed = False
            if old.at_next and old.next_start is not None:
                s.next_start = old.next_start
                s.last_id = old.last_id
                s.at_next = True
                s.armed = True
                s.order = self._bump()
                self.stats["adopted"] += 1
                self.expect_next.append((name, self.sh.tb + s.next_start, s.last_id))
                return s
        self.pending.append(((-1, 0, 0), "add", s, self.sh.tb + self.sh.now))
        return s

    def after_add(self, s: Sched, info: Any) -> None:
        exp_next = None if s.next_start is None else self.sh.tb + s.next_start
        got = (
            info.name,
            info.cron,
            info.tz,
            info.overlap,
            info.next_unix_ns,
            info.last_task_id,
            info.pool,
            info.key,
        )
        want = (
            s.name,
            s.cron.expr,
            s.cron.tz,
            OVERLAP_NAMES[s.overlap],
            exp_next,
            s.last_id,
            s.template.pool,
            s.template.key,
        )
        if got != want:
            self.fail(f"add_recurring returned {got}, expected {want}")
        ups = [m for m in self.sh.mutations if type(m) is RecurringUpsert]
        if self.sh.persist:
            if len(ups) != 1 or ups[0].spec.name != s.name or ups[0].spec.cron != s.cron.expr:
                self.fail(f"add_recurring persisted {ups}")
            rec = ups[0].spec
            t = rec.template
            tmpl = s.template
            if (
                rec.tz != s.cron.tz
                or rec.overlap != s.overlap
                or rec.deadline_rel != s.deadline_rel
                or (t.pool, t.key, t.priority, t.tolerance, t.on_miss, t.duration_hint, t.timeout)
                != (tmpl.pool, tmpl.key, tmpl.priority, tmpl.tolerance, tmpl.on_miss, tmpl.hint, tmpl.timeout)
            ):
                self.fail(f"add_recurring persisted {rec}, the schedule is {s} {tmpl.short()}")
            self.upsert_gen[id(ups[0])] = s.gen

    def remove(self, name: str, result: bool) -> None:
        s = self.scheds.pop(name, None)
        if result != (s is not None):
            self.fail(f"remove_recurring({name!r}) returned {result}, schedule {s}")
        rm = [m for m in self.sh.mutations if type(m) is RecurringRemove]
        if self.sh.persist and len(rm) != int(result):
            self.fail(f"remove_recurring({name!r}) -> {result} persisted {rm}")
        if s is not None:
            s.active = False
            s.armed = False

    def check_list(self, infos: list[Any]) -> None:
        got = {
            i.name: (i.cron, i.tz, i.overlap, i.next_unix_ns, i.last_task_id, i.pool, i.key) for i in infos
        }
        want = {
            s.name: (
                s.cron.expr,
                s.cron.tz,
                OVERLAP_NAMES[s.overlap],
                None if s.next_start is None else self.sh.tb + s.next_start,
                s.last_id,
                s.template.pool,
                s.template.key,
            )
            for s in self.scheds.values()
        }
        if got != want:
            self.fail(f"list_recurring {got} != shadow {want}")

    # ------------------------------------------------------------------ materialization

    def _candidate(self, s: Sched, after: int) -> int | None:
        nat = s.cron.next_after(after)
        if nat is None:
            return None
        gap = s.cron.gap_before(after, nat)
        if gap is None:
            return nat
        # The reference leaves the instant after a spring-forward gap open: take the engine's, check it
        got = CronSchedule(s.cron.expr, s.cron.tz).next_after(after / NS)
        x = None if got is None else round(got)
        if x is None or not (x == nat or gap <= x < nat):
            self.fail(f"{s}: after the DST gap at {gap} fired at {x}, natural next {nat}")
        assert x is not None
        self.stats["gaps"] += 1
        return x

    def _occurrence_spec(self, s: Sched, start: int) -> TaskSpec:
        tm = s.template
        spec = TaskSpec(
            pool=tm.pool,
            priority=tm.priority,
            key=None if tm.key is None else occurrence_key(tm.key, self.sh.tb + start),
            deadline=None if s.deadline_rel is None else start + s.deadline_rel,
            timeout=tm.timeout,
            retry=tm.retry,
            hint=tm.hint,
            kind=tm.kind,
            start_at=start,
            tolerance=tm.tolerance,
            on_miss=tm.on_miss,
            resources=tm.resources,
            labels=tm.labels,
            tenant=tm.tenant,
        )
        prev = s.chain
        if prev is not None:  # (also one retention forgot: the schedule still holds it)
            if s.overlap == QUEUE:
                spec.deps = [(prev, 2)]  # ON_COMPLETE
            elif s.overlap == QUEUE_ON_SUCCESS:
                spec.deps = [(prev, 0)]  # ON_SUCCESS
        return spec

    def _materialize(self, s: Sched, after: int, new_id: int | None) -> FTask | None:
        """Predict one materialization now; ``new_id``: the id the engine just created, if any.

        One occurrence is tried: a conflicting one is dropped (counted) and the schedule wakes
        up at its instant.  Returns the registered occurrence when it is new."""
        sh = self.sh
        x = self._candidate(s, after)
        if x is None:
            s.at_next = False
            s.next_start = None
            s.armed = False
            self.expect_next.append((s.name, None, s.last_id))
            return None
        start = x * NS - sh.tb
        spec = self._occurrence_spec(s, start)
        code, items = sh.predict_submit([spec], False)
        if code == "reservation_conflict":
            self.stats["conflicts"] += 1
            s.at_next = False
        elif code is not None:
            self.fail(f"{s}: occurrence {spec.short()} predicted {code}")
        t = None
        if code is None:
            tid, dup = items[0]
            if dup:
                self.stats["dups"] += 1
            else:
                if new_id != tid:
                    self.fail(f"{s}: expected occurrence {tid} ({spec.short()}), the engine created {new_id}")
                t = sh.register_task(tid, spec)
                t.occ = Occ(s.gen, s.chain, self._bump())
                s.occ.append(tid)
                if s.starts and start <= s.starts[-1]:
                    self.fail(f"{s}: occurrence start {start} not after the previous {s.starts[-1]}")
                s.starts.append(start)
                if spec.key is not None:
                    had = self.occ_keys.get(spec.key)
                    if had is not None and had in sh.tasks:
                        self.fail(f"occurrence key {spec.key} materialized twice: {had} and {tid}")
                    self.occ_keys[spec.key] = tid
                self.stats["materialized"] += 1
            s.chain = tid
            s.at_next = True
            s.last_id = tid
        s.next_start = start
        s.armed = True
        s.order = self._bump()
        self.expect_next.append((s.name, sh.tb + start, s.last_id))
        return t

    def on_new(self, ev: Any) -> FTask:
        """An event for a task nobody submitted: the next due materialization must have made it."""
        while self.pending:
            _, kind, s, after = self.pending.pop(0)
            if kind == "recover":
                after = self._recover_decision(s)
                if after is None:
                    continue
            t = self._materialize(s, after, ev.id)
            if t is not None:
                return t
        self.fail(f"task {ev.id} created by the engine with no schedule due: {ev}")
        raise AssertionError  # unreachable

    def flush_before(self, key: tuple[int, int, int]) -> None:
        """Materializations that fired before the timer with ``key`` (they created nothing)."""
        while self.pending and self.pending[0][0] < key:
            _, kind, s, after = self.pending.pop(0)
            if kind == "recover":
                after = self._recover_decision(s)
                if after is None:
                    continue
            t = self._materialize(s, after, None)
            if t is not None:  # pragma: no cover - _materialize failed already
                self.fail(f"{s} should have created {t} earlier")

    def flush_all(self) -> None:
        self.flush_before((1 << 62, 0, 0))

    def end_call(self) -> None:
        self.flush_all()
        got = [(m.name, m.next, m.last) for m in self.sh.mutations if type(m) is RecurringNext]
        if self.sh.persist and got != self.expect_next:
            self.fail(f"persisted RecurringNext {got}, expected {self.expect_next}")
        self.expect_next = []

    # ------------------------------------------------------------------ overlap

    def _due_others(self, t: FTask) -> list[FTask]:
        occ = t.occ
        assert occ is not None
        s = self.gens.get(occ.gen)
        if s is None:
            return []
        out = []
        for oid in s.occ:
            o = self.sh.tasks.get(oid)
            if o is not None and o is not t and o.status in DUE:
                out.append(o)
        return out

    def check_due(self, t: FTask, new: str) -> None:
        """``t`` (an occurrence) becomes ready or runs: with overlap=skip no sibling is due."""
        occ = t.occ
        assert occ is not None
        s = self.gens.get(occ.gen)
        if s is None or s.overlap != SKIP or occ.unlinked:
            return
        others = self._due_others(t)
        if others:
            self.fail(f"overlap=skip: occurrence {t} became {new} while {others} of {s} are due")

    def check_skip(self, t: FTask, ev: Any) -> None:
        """``t`` was skipped for overlap: an earlier occurrence of its schedule must be live."""
        self.stats["overlap_skips"] += 1
        occ = t.occ
        if occ is None or ev.message != MSG_PREVIOUS_RUNNING or self.sh.call not in ("tick", "recover"):
            self.fail(f"{t} skipped ({ev.message!r}) but it is not an occurrence due now")
        assert occ is not None
        s = self.gens[occ.gen]
        if s.overlap == SKIP:
            seen: set[int] = set()
            p = occ.prev
            while p is not None and p not in seen:  # the chain of earlier occurrences
                seen.add(p)
                pt = self.sh.tasks.get(p)
                if pt is None:
                    break
                if pt.status not in TERMINAL:
                    return
                p = pt.occ.prev if pt.occ is not None else None
        # After a crash the engine knows an occurrence's schedule only by its name (generations
        # are not persisted): the schedule of that name at recovery decides the policy, and any
        # earlier live occurrence of that name counts (docs/reference/behaviour.md#cron does not say how a
        # replaced schedule's occurrences relate to the new one's).
        if self.sh.stats["recoveries"]:
            for o in self.sh.tasks.values():
                live = o.occ is not None and o.id < t.id and o.status not in TERMINAL
                if live and self.gens[o.occ.gen].name == s.name:  # type: ignore[union-attr]
                    return
        self.fail(f"{t} skipped for overlap, but no earlier occurrence of {s} is live")

    # ------------------------------------------------------------------ crashes

    def on_commit(self, muts: list[Any]) -> None:
        for m in muts:
            if type(m) is Submitted and m.spec.recurring is not None and m.spec.key is not None:
                had = self.committed_keys.get(m.spec.key)
                if had is not None and had != m.id:
                    self.fail(f"occurrence key {m.spec.key} committed for {had} and {m.id}")
                self.committed_keys[m.spec.key] = m.id

    def rebuild(self, committed: list[Any]) -> None:
        """After a crash: the schedules the committed log keeps (rows folded as the SQL stores do)."""
        rows: dict[str, list[Any]] = {}  # name -> [gen, next, last]
        for m in committed:
            tp = type(m)
            if tp is RecurringUpsert:
                gen = self.upsert_gen[id(m)]
                row = rows.get(m.spec.name)
                if row is None:
                    rows[m.spec.name] = [gen, None, 0]
                else:
                    row[0] = gen  # ON CONFLICT DO UPDATE SET spec, payload: next/last stay
            elif tp is RecurringRemove:
                rows.pop(m.name, None)
            elif tp is RecurringNext:
                row = rows.get(m.name)
                if row is not None:
                    row[1], row[2] = m.next, m.last
        for s in self.gens.values():
            s.active = False
            s.armed = False
        self.scheds = {}
        sh = self.sh
        # live occurrences are re-released in id order during recovery (their start timers first)
        skip_now = {name for name, row in rows.items() if self.gens[row[0]].overlap == SKIP}
        for tid in sorted(sh.tasks):
            t = sh.tasks[tid]
            if t.occ is not None:
                t.occ.seq = self._bump()
                if self.gens[t.occ.gen].name not in skip_now and t.status not in TERMINAL:
                    t.occ.unlinked = True
        self.recover_pending = []
        for name in sorted(rows):
            gen, nxt, last = rows[name]
            s = self.gens[gen]
            s.active = True
            s.next_start = None if nxt is None else nxt - sh.tb
            s.last_id = last
            s.occ = [o for o in s.occ if o in sh.tasks]
            s.starts = [sh.tasks[o].spec.start_at for o in s.occ]  # type: ignore[misc]
            self.scheds[name] = s
            self.recover_pending.append(((-1, len(self.recover_pending), 0), "recover", s, 0))
        self.occ_keys = {k: v for k, v in self.occ_keys.items() if v in sh.tasks}

    def _recover_decision(self, s: Sched) -> int | None:
        """Core.recover for one schedule: keep the live occurrence ahead, or materialize now
        (returns the ``after`` instant then, else None)."""
        sh = self.sh
        last = s.last_id
        ahead = sh.tasks.get(last) if last else None
        if ahead is not None and ahead.status not in TERMINAL and s.next_start is not None:
            # the wake-up resumes (at the occurrence ahead, or at an instant dropped for a
            # conflict, when ``last`` is the occurrence before it)
            s.chain = ahead.id
            s.at_next = ahead.spec.start_at == s.next_start
            s.armed = True
            s.order = self._bump()
            return None
        s.chain = None if ahead is None else ahead.id
        unix_now = sh.tb + sh.now
        if s.next_start is None:
            return unix_now
        return max(unix_now, sh.tb + s.next_start)
