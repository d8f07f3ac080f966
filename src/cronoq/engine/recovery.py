"""Recovery: rebuild a fresh core from what a durable store read back (docs/reference/behaviour.md#recovery).

Theory of operation
-------------------
A :class:`Recovery` runs once, on a core that has done nothing yet, in four passes:

1. *Retain* the terminal tasks (oldest first), so lookups, key dedup, outputs and the edges
   of live dependents see them, with the whole definition the store read back (retry policy,
   timeout, labels, tags, resources): a replay after a restart keeps the original's options
   and a filter by tag finds it, as before the restart.  They cost what they cost before it:
   their number is bounded by the retention (``retention_max``; a server's
   ``outputs.info_entries``) and each definition by the request limits it was accepted under.
   The store reads no more than that (``Store.load``'s window and limit are this retention),
   plus the older terminal tasks the live ones still refer to (parents, spawned children, a
   schedule's last occurrence), which are retained here like the others (so edges settle and
   outputs are pinned) and forgotten by the next prune: the dependents and the journals
   (engine/parking.py) still hold theirs.
2. *Rebuild* every live task in id order under its own id, sequence and arrival: the core
   admits it as it admits a new submission (indexed, live, pending) but it is neither counted
   as submitted again nor given a new id, so nothing is undone afterwards.  A task whose pool
   or resources no longer exist is quarantined: a retained ``failed`` task with the reason.
3. *Re-link* the dependencies of the tasks that never started (parents come first in id
   order): to live parents, to awaited keys (their timeout counted from the submission), or
   settled at once against a terminal parent; a broken edge marks the task for skipping.
4. *Release* in id order: an interrupted attempt (``running`` / ``retrying``) counts and
   the task resumes as ``retrying``, ready after the backoff its policy gives for that
   attempt, counted from the recovery; a broken task is skipped; a free one is released as at
   submission; a task that was parked (engine/parking.py) is released with its journal and
   its attempt as parked: it runs again, replays, and parks again if it must.  Occurrences
   of ``overlap=skip`` schedules are chained to the latest live one before them (that link
   is not persisted), and the schedules resume where they stood.

Every change recovery makes (retries, skips, quarantines) is persisted like any other.  The
work recovered is not new work: the autoscalers' arrival counts are reset at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cronoq.engine.admission import await_key
from cronoq.engine.control import restore_paused
from cronoq.engine.deps import link
from cronoq.engine.keys import scoped_key
from cronoq.engine.model import (
    BLOCKED,
    EV_DISPATCH,
    EV_EDGE_BROKEN,
    EV_OCCURRENCE_SKIP,
    EV_UNBLOCK,
    FAILED,
    FIRST_TERMINAL,
    MSG_ALREADY_FINISHED,
    MSG_INTERRUPTED,
    MSG_PREVIOUS_RUNNING,
    ON_COMPLETE,
    OUTPUT_LOST,
    STATUS_BY_NAME,
    SUCCEEDED,
    TaskOptions,
    TaskState,
    edge_satisfied,
)
from cronoq.engine.mutations import Recovered, RecoveredTask, RecoveredTerminal, StatusChange
from cronoq.engine.parents import bind_recovered, ended_entries
from cronoq.engine.recurring import OVERLAP_SKIP
from cronoq.engine.replay import REPLAY_TAG, link_replays
from cronoq.engine.reservations import FixedStart
from cronoq.engine.resources import recharge
from cronoq.errors import SubmitError

if TYPE_CHECKING:
    from cronoq.engine.core import Core

BROKEN = -1  # ``unmet`` of a task with a broken edge, until it is skipped


class Recovery:
    """One recovery of ``core`` at engine instant ``now`` (see the module docstring)."""

    __slots__ = ("core", "now", "parked", "tb")

    def __init__(self, core: Core, now: int) -> None:
        self.core = core
        self.now = now
        self.tb = core.config.time_base
        self.parked: dict[int, int] = {}  # parked tasks (engine/parking.py): id -> attempt

    def run(self, rec: Recovered) -> None:
        core = self.core
        self.parked = {tid: a for tid, (_, _, a) in rec.journals.items() if a is not None}
        for term in sorted(rec.terminal, key=lambda x: (x.finished, x.id)):
            self.retain(term)
        live: list[tuple[TaskState, RecoveredTask]] = []
        for r in sorted(rec.tasks, key=lambda x: x.id):
            t = self.rebuild(r, rec)
            if t is not None:
                live.append((t, r))
        for qid, reason in rec.quarantined:
            self.quarantine(qid, reason, rec.quarantined_rows.get(qid))
        if core.res.buckets:  # the tokens taken before the restart stay taken
            recharge(core.res, core.tasks.values(), self.now)
        for t, r in live:
            bind_recovered(core, t, r.spec.deps)  # (their outputs stay pinned: parents.py)
            if t.id in self.parked:  # it ran, so its edges were met; its park was no attempt
                t.attempt = self.parked[t.id]
            elif not _interrupted(r):
                self.relink(t, r)
        core.parking.restore(rec.journals, rec.signals, self.now)
        last_occ = self.release_all(live, rec)
        for rs in rec.schedules:
            core.recurring.recover(rs, self.now, last_occ.get(rs.spec.name))
        restore_paused(core, rec.paused)
        link_replays(core, rec)
        for pool in core.pools:
            if pool.scaler is not None:
                pool.scaler.arrivals = 0

    def rebuild(self, r: RecoveredTask, rec: Recovered) -> TaskState | None:
        """The live task of row ``r`` under its own id, blocked; None: quarantined instead."""
        core, tb, now = self.core, self.tb, self.now
        spec = r.spec
        opts = spec.options()
        try:
            pool = core.pools[core.resolve_pool(opts)]
        except SubmitError as e:
            reason = f"cannot recover task: {e.message}"
            rec.quarantined.append((r.id, reason))
            rec.quarantined_rows[r.id] = RecoveredTerminal(
                r.id, r.seq, spec.pool or "", spec.kind, spec.key, "failed", r.attempt, r.arrival,
                r.started, r.arrival, reason, None, False, int(spec.priority),
            )  # fmt: skip
            return None
        t = TaskState(r.id, r.seq, opts, r.payload, spec.key, now)
        t.created_at = r.arrival - tb
        core.admit(t, pool, now)  # (counted as submitted when it first was)
        t.attempt = r.attempt
        if core.publish and core.emit_transitions:
            core.publish_status(t, now, None)
        t.started_at = None if r.started is None else r.started - tb
        t.message = r.message
        if spec.deadline is not None:
            t.deadline = spec.deadline - tb
        if spec.start is not None and r.attempt == 0:
            start = spec.start - tb
            lo = start - opts.tolerance
            hi = start + core.durations.expected(opts) + opts.tolerance
            f = FixedStart(start, lo, hi)
            f.reserved = True
            f.recurring = spec.recurring
            pool.res[t.id] = (lo, hi)
            t.fixed = f
        return t

    def relink(self, t: TaskState, r: RecoveredTask) -> None:
        """The dependency edges of a task that never started (its parents are rebuilt)."""
        core = self.core
        tenant = t.opts.tenant
        for target, cond in r.spec.deps or ():
            tid: int | None
            if isinstance(target, str):
                sk = scoped_key(tenant, target)
                tid = core.keys.find(sk)
            else:
                sk, tid = None, target
            parent = core.tasks.get(tid) if tid is not None else None
            if parent is None:
                cfg = core.pools[t.opts.pool_index].cfg
                if sk is not None and cfg.unknown_dependency == "await":
                    await_key(core, t, sk, cond)
                elif cond != ON_COMPLETE:
                    t.message = MSG_ALREADY_FINISHED
                    t.unmet = BROKEN
                    return
            elif parent.status >= FIRST_TERMINAL:
                if not edge_satisfied(cond, parent.status):
                    t.unmet = BROKEN
                    return
            else:
                link(parent, t, cond)

    def release_all(
        self, live: list[tuple[TaskState, RecoveredTask]], rec: Recovered
    ) -> dict[str, TaskState]:
        """Resume, skip or release every rebuilt task in id order; returns the latest live
        occurrence of each ``overlap=skip`` schedule."""
        core, now = self.core, self.now
        # overlap=skip: FixedStart.prev is not persisted; link each occurrence to the latest
        # live one before it (id order), so the start check still sees an interrupted run
        skip = {rs.spec.name for rs in rec.schedules if rs.spec.overlap == OVERLAP_SKIP}
        last_occ: dict[str, TaskState] = {}
        for t, r in live:
            if t.status != BLOCKED:
                continue
            name = r.spec.recurring if r.spec.recurring in skip else None
            if _interrupted(r) and t.id not in self.parked:
                self.resume_attempt(t)
            elif t.unmet < 0:
                t.unmet = 0
                core.count("skipped")
                core.terminate(t, now, EV_EDGE_BROKEN, MSG_ALREADY_FINISHED)
            elif t.unmet == 0:
                prev = last_occ.get(name) if name is not None else None
                if prev is not None and prev.status < FIRST_TERMINAL and t.fixed is not None:
                    if t.fixed.start <= now:  # came due while the previous one is live
                        core.count("skipped")
                        core.terminate(t, now, EV_OCCURRENCE_SKIP, MSG_PREVIOUS_RUNNING)
                        continue
                    t.fixed.prev = prev
                core.release(t, now)
            if name is not None and t.status < FIRST_TERMINAL:
                last_occ[name] = t
        return last_occ

    def resume_attempt(self, t: TaskState) -> None:
        """A task interrupted by the restart: its attempt counts; retry after its backoff."""
        # blocked -> ready -> running were never persisted for this term: replay them through
        # the table (no slot is taken), then fail the interrupted attempt retryably.
        core, now = self.core, self.now
        core.move(t, EV_UNBLOCK, now)
        core.move(t, EV_DISPATCH, now)
        core.retry(t, now, MSG_INTERRUPTED, None)

    def retain(self, r0: RecoveredTerminal) -> TaskState:
        """A terminal task read back from the store: retained for lookups, dedup, outputs,
        filters and replays, with its whole definition when the store could decode it."""
        core = self.core
        t = terminal_state(core, r0)
        core.tasks[t.id] = t
        if t.key is not None:
            core.keys.reserve(scoped_key(r0.tenant, t.key), t.id)
        core.retained.append(t)
        return t

    def quarantine(self, tid: int, reason: str, row: RecoveredTerminal | None = None) -> None:
        """A row the store could not decode: a failed task from now on, never a crash
        (docs/reference/behaviour.md#recovery).

        With what the store could still read of the row, the task stays known as a retained
        ``failed`` task with the reason as its message: lookups and handles answer, dependents
        see a failed parent, and its key stays taken for the retention period.
        """
        core = self.core
        if core.durable:
            core.persist(StatusChange(tid, "failed", 0, self.tb + self.now, reason))
        core.count("failed")
        if row is not None and tid not in core.tasks:
            row.status = "failed"
            row.message = reason
            row.output, row.has_output = None, False
            row.finished = self.tb + self.now
            if row.key is not None and core.keys.find(scoped_key(row.tenant, row.key)) is not None:
                row.key = None  # another task holds the key: that one keeps it
            self.retain(row)


def _interrupted(r: RecoveredTask) -> bool:
    """The row's task had started an attempt: it resumes as ``retrying``."""
    return r.status in ("running", "retrying") or r.attempt > 0


def terminal_state(core: Core, r0: RecoveredTerminal) -> TaskState:
    """The finished task a store row records, as a ``TaskState`` of ``core`` (not inserted:
    recovery retains it; a replay from the store's history replays it), with its whole
    definition when the store could decode it."""
    tb = core.config.time_base
    pidx = core.pool_index.get(r0.pool, core.default_pool)
    if r0.spec is not None:
        opts = r0.spec.options()
        opts.pool = core.pools[pidx].name  # (a pool removed since: the default one)
    else:
        tags = None if r0.replay_of is None else {REPLAY_TAG: str(r0.replay_of)}
        opts = TaskOptions(
            pool=core.pools[pidx].name, kind=r0.kind, priority=r0.priority, tenant=r0.tenant, tags=tags
        )
    opts.pool_index = pidx
    opts.stats_key = core.durations.key(pidx, r0.kind)
    opts.resolver = core
    t = TaskState(r0.id, r0.seq, opts, None, r0.key, r0.arrival - tb, STATUS_BY_NAME.get(r0.status, FAILED))
    t.attempt = r0.attempt
    t.started_at = None if r0.started is None else r0.started - tb
    t.finished_at = r0.finished - tb
    t.message = r0.message
    if r0.spec is not None and r0.spec.deps:
        t.parents = ended_entries(opts.tenant, r0.spec.deps)  # (whom it read: a replay reads them too)
    if r0.has_output:
        t.output = r0.output
    elif t.status == SUCCEEDED:
        # awaiting it raises TaskFailed, not a silent None
        # (docs/reference/behaviour.md#ids-keys-retention)
        t.output = OUTPUT_LOST
    return t
