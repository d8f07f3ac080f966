"""Parking: tasks that wait without a slot, their journals and the signals they wait for
(docs/how-to/durable.md).

Theory of operation
-------------------
A running attempt may *park* instead of ending: it waits for tasks (``wait_for``), for an
instant (``sleep_for`` / ``sleep_until``) or for a signal (``wait_signal``).  Parking ends
the attempt without failing it: the lease is dropped and the slot (with its resources) goes
back exactly as when an attempt ends, but the attempt is not counted (``TaskState.attempt``
goes back one, so the next run has the same number; the retry policy never sees a park) and
the task moves ``running --park--> blocked`` (the one transition this adds to the table);
a sleep goes on ``blocked --unblock_later--> scheduled`` as a fixed start would.  The wake-up
takes the usual ways back: ``blocked --unblock--> ready`` (:meth:`Core.release`) once every
awaited task has ended or the signal exists, ``scheduled --start_due--> ready`` when the
sleep is over, and the task is dispatched again from the top of its function.

Each task that used one of these calls has a :class:`Journal`, kept *beside* the task record
(``Parking.journals``, keyed by task id, never a slot of ``TaskState``): the ordered records
of its calls, which a run replays so ``spawn`` returns the same ids and ``step`` the recorded
result (the shell walks them; ``runtime/parking.py``), plus what it waits for now.  A record
is a small JSON-able list ``[op, name, data]``:

* ``["spawn", fingerprint, [ids], detached]`` - the children it spawned, created in the same
  engine call as the record (:meth:`Parking.spawn`): a spawn is applied once;
* ``["step", name, result]`` - a memoized step's JSON result;
* ``["wait", "", [ids]]`` - a ``wait_for``;
* ``["sleep", "", until]`` - a durable sleep (``until`` in Unix ns: it survives a restart);
* ``["signal", name, [deadline, state, payload]]`` - a ``wait_signal`` (``deadline`` Unix ns
  or None; ``state`` 0 waiting, 1 received, 2 timed out).

A journal *holds* the records of the tasks its spawns and waits name (``Journal.held``: id ->
``TaskState``, taken when the record is made or restored): retention may forget them (lookups
stop finding them) but the journal's task still reads their outcomes when it replays, however
long it parked or waited for a slot, as a dependent holds its parents (engine/parents.py); a
durable store keeps their rows as long (store/_records.py ``referenced``).
The journal is dropped when the task ends (the end-of-task hook :meth:`Parking.ended`, which
the core calls only while some journal exists); a cancelled task also cancels the unfinished
children it spawned without ``detached``.  Waiting for tasks registers the parked task in
``watch`` (awaited id -> waiting task ids); each end decrements its journal's ``left`` and the
last one wakes it.  Sleeps and signal timeouts arm one ``T_WAKE`` timer, live while the task
is still parked from the same lease.

Signals are write-once per name while retained (the retention of terminal tasks): the first
``signal`` stores the payload and wakes every waiter, a second reports a duplicate and changes
nothing; waiters that come later find it at once.  Signals past retention are forgotten
lazily, oldest first.

Nothing here does I/O; with ``persist`` the changes go out as ``Persist`` actions of
:class:`JournalPut` / :class:`JournalDrop` / :class:`SignalPut` records (engine/mutations.py
describes the others), which a store applies in the same commit as the spawned children.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from cronoq.engine.actions import Persist
from cronoq.engine.admission import BatchItem
from cronoq.engine.model import (
    BLOCKED,
    CANCELLED,
    EV_PARK,
    EV_START_DUE,
    EV_UNBLOCK_LATER,
    FIRST_TERMINAL,
    OUTPUT_LOST,
    SCHEDULED,
    STATUS_NAMES,
    SUCCEEDED,
    TaskState,
    check_stored_text,
)
from cronoq.engine.timers import T_WAKE

if TYPE_CHECKING:
    from cronoq.engine.core import Core

__all__ = [
    "MAX_SIGNAL_NAME",
    "PARK_INDEX",
    "Journal",
    "JournalDrop",
    "JournalPut",
    "Parking",
    "SignalPut",
    "StaleLease",
    "check_signal_name",
    "signal_key",
]

#: the longest signal name (characters)
MAX_SIGNAL_NAME: Final = 256

#: the journal index of the park marker (engine/parking.py JournalPut)
PARK_INDEX: Final = -1

# what a parked task waits for (Journal.kind)
W_NONE: Final = 0
W_TASKS: Final = 1
W_SLEEP: Final = 2
W_SIGNAL: Final = 3

# signal record states
S_WAITING: Final = 0
S_RECEIVED: Final = 1
S_TIMED_OUT: Final = 2


class StaleLease(LookupError):
    """The lease a call named is not current (the attempt ended or was aborted)."""


def signal_key(tenant: str | None, name: str) -> str:
    """The key of signal ``name`` sent within ``tenant`` (signals are scoped by tenant, as keys)."""
    return f"{tenant}\x1f{name}" if tenant else name


def check_signal_name(name: object) -> str:
    """A signal name: a non-empty string of at most :data:`MAX_SIGNAL_NAME` characters, without
    a NUL character (a store keeps it as text)."""
    if not isinstance(name, str):
        raise TypeError(f"a signal name must be a string (got {type(name).__name__})")
    if not name:
        raise ValueError("a signal name must not be empty")
    if len(name) > MAX_SIGNAL_NAME:
        raise ValueError(f"a signal name must be at most {MAX_SIGNAL_NAME} characters (got {len(name)})")
    return check_stored_text("a signal name", name, ValueError)


class JournalPut:
    """Durable: record ``index`` of task ``task_id``'s journal is ``record`` (an upsert), and
    the journal has seen ``resumes`` resumes.  Index :data:`PARK_INDEX` is the park marker
    ``["park", "", attempt]`` (None once woken).  ``before`` are the mutations of a spawn's
    children: one mutation carries them, so a store commits them in the same transaction as
    the record (a group commit never splits them: a spawn is applied once)."""

    __slots__ = ("before", "index", "record", "resumes", "task_id")

    def __init__(
        self, task_id: int, index: int, record: list[Any], resumes: int, before: list[Any] | None = None
    ) -> None:
        self.task_id = task_id
        self.index = index
        self.record = record
        self.resumes = resumes
        self.before = before or []

    def __eq__(self, other: object) -> bool:
        return type(other) is JournalPut and (self.task_id, self.index, self.record, self.resumes) == (
            other.task_id,
            other.index,
            other.record,
            other.resumes,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JournalPut(task_id={self.task_id}, index={self.index}, record={self.record!r})"


class JournalDrop:
    """Durable: task ``task_id`` ended, its journal is gone."""

    __slots__ = ("task_id",)

    def __init__(self, task_id: int) -> None:
        self.task_id = task_id

    def __eq__(self, other: object) -> bool:
        return type(other) is JournalDrop and other.task_id == self.task_id

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JournalDrop(task_id={self.task_id})"


class SignalPut:
    """Durable: signal ``name`` was sent at ``at`` (Unix ns) with ``payload`` (JSON)."""

    __slots__ = ("at", "name", "payload")

    def __init__(self, name: str, payload: object, at: int) -> None:
        self.name = name
        self.payload = payload
        self.at = at

    def __eq__(self, other: object) -> bool:
        return type(other) is SignalPut and (self.name, self.payload, self.at) == (
            other.name,
            other.payload,
            other.at,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SignalPut(name={self.name!r}, at={self.at})"


class Journal:
    """The records of one task's calls and what it waits for now (see the module docstring)."""

    __slots__ = ("held", "kind", "left", "records", "resumes", "until", "waits")

    def __init__(self) -> None:
        self.records: list[list[Any]] = []
        #: the tasks its spawn and wait records name, kept past retention (see the module docstring)
        self.held: dict[int, TaskState] | None = None
        self.resumes = 0
        self.kind = W_NONE
        self.waits: Any = None  # W_TASKS: the awaited ids; W_SIGNAL: the name
        self.left = 0  # W_TASKS: awaited tasks not ended yet
        self.until: int | None = None  # W_SLEEP / W_SIGNAL: the wake-up (engine ns)

    def __repr__(self) -> str:
        return f"<Journal records={len(self.records)} resumes={self.resumes}>"


class Parking:
    """The journals, parked tasks and signals of one core (see the module docstring)."""

    __slots__ = ("core", "journals", "signal_waiters", "signals", "watch")

    def __init__(self, core: Core) -> None:
        self.core = core
        self.journals: dict[int, Journal] = {}
        self.watch: dict[int, list[int]] = {}  # awaited task id -> parked task ids
        self.signals: dict[str, tuple[object, int]] = {}  # name -> (payload, sent at engine ns), oldest first
        self.signal_waiters: dict[str, list[int]] = {}

    # ---------------------------------------------------------------- journals

    def journal(self, task_id: int) -> Journal | None:
        """The journal of ``task_id`` (None: it has not used a durable call)."""
        return self.journals.get(task_id)

    def running(self, lease: int) -> TaskState:
        """The task running under ``lease``; :class:`StaleLease` if it is not current."""
        t = self.core.leases.get(lease)
        if t is None:
            raise StaleLease(f"lease {lease} is not current")
        return t

    def _journal_of(self, t: TaskState) -> Journal:
        j = self.journals.get(t.id)
        if j is None:
            j = self.journals[t.id] = Journal()
        return j

    def _persist(self, t: TaskState, j: Journal, index: int, before: list[Any] | None = None) -> None:
        if self.core.durable:
            self.core.persist(JournalPut(t.id, index, j.records[index], j.resumes, before))

    def _persist_park(self, t: TaskState, j: Journal, attempt: int | None) -> None:
        if self.core.durable:
            self.core.persist(JournalPut(t.id, PARK_INDEX, ["park", "", attempt], j.resumes))

    def _hold(self, j: Journal, rec: list[Any]) -> None:
        """If ``rec`` is a spawn or a wait, ``j`` holds the tasks it names that are known."""
        if rec[0] not in ("spawn", "wait") or len(rec) < 3 or type(rec[2]) is not list:
            return
        tasks = self.core.tasks
        held = j.held
        for i in rec[2]:
            o = tasks.get(i) if type(i) is int else None
            if o is not None:
                if held is None:
                    held = j.held = {}
                held[i] = o

    def find(self, owner: int, task_id: int) -> TaskState | None:
        """Task ``task_id`` as the journal of task ``owner`` sees it: a known task, or one its
        spawn and wait records hold after retention forgot it (None: neither)."""
        o = self.core.tasks.get(task_id)
        if o is None:
            j = self.journals.get(owner)
            if j is not None and j.held is not None:
                o = j.held.get(task_id)
        return o

    def record(self, lease: int, rec: list[Any], before: list[Any] | None = None) -> int:
        """Append ``rec`` to the journal of the task running under ``lease``; its index."""
        t = self.running(lease)
        j = self._journal_of(t)
        j.records.append(rec)
        self._hold(j, rec)
        n = len(j.records) - 1
        self._persist(t, j, n, before)
        return n

    def spawn(
        self, now: int, lease: int, items: Sequence[BatchItem], fingerprint: str, detached: bool
    ) -> list[int]:
        """Submit ``items`` as children of the task running under ``lease``, atomically with
        the journal record that remembers them; their ids (SubmitError: nothing happened)."""
        t = self.running(lease)
        core = self.core
        n0 = len(core.actions)
        ids = [tid for tid, _ in core.submit_batch(now, items)]
        for cid in ids:
            core.attempts.link(t.id, cid)
        before = None
        if core.durable:  # the children's mutations travel inside the record's (JournalPut.before)
            acts = core.actions[n0:]
            before = [a.mutation for a in acts if type(a) is Persist]
            core.actions[n0:] = [a for a in acts if type(a) is not Persist]
        self.record(lease, ["spawn", fingerprint, ids, detached], before)
        return ids

    # ---------------------------------------------------------------- parking

    def _park(self, t: TaskState, now: int) -> None:
        """End the running attempt of ``t`` without counting it, and move it to ``blocked``."""
        core = self.core
        core.end_attempt(t, now, failed=False)
        t.attempt -= 1  # parking is not an attempt: the next run has the same number
        core.move(t, EV_PARK, now)
        self._persist_park(t, self._journal_of(t), t.attempt)

    def wait_tasks(self, now: int, lease: int, ids: Sequence[int]) -> bool:
        """Park the task under ``lease`` until every task of ``ids`` has ended; False (and
        nothing changes) when they all have already."""
        t = self.running(lease)
        tasks = self.core.tasks
        pending = [
            i for i in dict.fromkeys(ids) if (o := tasks.get(i)) is not None and o.status < FIRST_TERMINAL
        ]
        if not pending:
            return False
        j = self._journal_of(t)
        self._park(t, now)
        j.kind, j.waits, j.left, j.until = W_TASKS, list(ids), len(pending), None
        watch = self.watch
        for i in pending:
            w = watch.get(i)
            if w is None:
                watch[i] = [t.id]
            else:
                w.append(t.id)
        return True

    def sleep(self, now: int, lease: int, until: int) -> bool:
        """Park the task under ``lease`` until engine instant ``until``; False when it is due."""
        t = self.running(lease)
        if until <= now:
            return False
        j = self._journal_of(t)
        self._park(t, now)
        j.kind, j.waits, j.left, j.until = W_SLEEP, None, 0, until
        self.core.move(t, EV_UNBLOCK_LATER, now)
        self.core.timers.push(until, T_WAKE, t, t.lease)
        return True

    def wait_signal(self, now: int, lease: int, name: str, index: int, until: int | None) -> bool:
        """Park the task under ``lease`` until signal ``name`` exists (its journal record
        ``index`` is the wait) or ``until`` (engine ns) passes; False when neither needs waiting
        (the record then says which: received or timed out)."""
        t = self.running(lease)
        j = self._journal_of(t)
        if self._settle_signal(t, j, index, now):
            return False
        self._park(t, now)
        key = signal_key(t.opts.tenant, name)
        j.kind, j.waits, j.left, j.until = W_SIGNAL, (key, index, name), 0, until
        self.signal_waiters.setdefault(key, []).append(t.id)
        if until is not None:
            self.core.timers.push(until, T_WAKE, t, t.lease)
        return True

    def _settle_signal(self, t: TaskState, j: Journal, index: int, now: int) -> bool:
        """Write the outcome of the signal wait ``index`` into its record if it has one now."""
        rec = j.records[index]
        data = rec[2]
        if data[1] != S_WAITING:
            return True
        found = self.signal(signal_key(t.opts.tenant, rec[1]), now)
        if found is not None:
            data[1], data[2] = S_RECEIVED, found[0]
        elif data[0] is not None and data[0] <= self.core.config.time_base + now:
            data[1] = S_TIMED_OUT
        else:
            return False
        self._persist(t, j, index)
        return True

    # ---------------------------------------------------------------- waking

    def _wake(self, t: TaskState, now: int) -> None:
        j = self.journals[t.id]
        j.kind, j.waits, j.left, j.until = W_NONE, None, 0, None
        j.resumes += 1
        if t.status == BLOCKED:
            self.core.release(t, now)
        else:  # a sleep
            core = self.core
            core.make_ready(t, core.pools[t.opts.pool_index], now, EV_START_DUE)
        self._persist_park(t, j, None)

    def timer(self, t: TaskState, now: int) -> None:
        """A ``T_WAKE`` timer of parked ``t`` fired: its sleep is over or its signal timed out."""
        j = self.journals.get(t.id)
        if j is None:  # pragma: no cover - a parked task always has its journal
            return
        if j.kind == W_SIGNAL:
            key, index, _ = j.waits
            self._settle_signal(t, j, index, now)
            self._unwait_signal(key, t.id)
        self._wake(t, now)

    def _unwait_signal(self, name: str, tid: int) -> None:
        waiters = self.signal_waiters.get(name)
        if waiters is not None and tid in waiters:
            waiters.remove(tid)
            if not waiters:
                del self.signal_waiters[name]

    def ended(self, t: TaskState, now: int) -> None:
        """``t`` reached a terminal status: wake tasks waiting for it; if it had a journal,
        drop it (a cancelled task cancels its unfinished children not spawned detached)."""
        waiting = self.watch.pop(t.id, None)
        journals = self.journals
        if waiting:
            for pid in waiting:
                pj = journals.get(pid)
                if pj is None or pj.kind != W_TASKS:
                    continue
                pj.left -= 1
                if pj.left == 0:
                    self._wake(self.core.tasks[pid], now)
        j = journals.pop(t.id, None)
        if j is None:
            return
        if j.kind == W_TASKS:
            for i in j.waits:
                w = self.watch.get(i)
                if w is not None and t.id in w:
                    w.remove(t.id)
                    if not w:
                        del self.watch[i]
        elif j.kind == W_SIGNAL:
            self._unwait_signal(j.waits[0], t.id)
        if self.core.durable:
            self.core.persist(JournalDrop(t.id))
        if t.status == CANCELLED:
            for rec in j.records:
                if rec[0] == "spawn" and not rec[3]:
                    for cid in rec[2]:
                        self.core.cancel(now, cid)

    # ---------------------------------------------------------------- signals

    def _expire(self, now: int) -> None:
        sig = self.signals
        if not sig:
            return
        horizon = now - self.core.config.retention
        while sig:
            name, (_, at) = next(iter(sig.items()))
            if at > horizon:
                return
            del sig[name]

    def signal(self, name: str, now: int) -> tuple[object, int] | None:
        """The signal ``name`` (a :func:`signal_key`) while retained: ``(payload, sent at
        engine ns)``, else None."""
        self._expire(now)
        return self.signals.get(name)

    def send(self, now: int, name: str, payload: object, tenant: str | None = None) -> bool:
        """Send signal ``name`` within ``tenant``: True when it already existed (a duplicate:
        nothing changes), else it is stored and every task of ``tenant`` waiting for it wakes."""
        name = signal_key(tenant, name)
        if self.signal(name, now) is not None:
            return True
        self.signals[name] = (payload, now)
        core = self.core
        if core.durable:
            core.persist(SignalPut(name, payload, core.config.time_base + now))
        for tid in self.signal_waiters.pop(name, ()):
            t = core.tasks.get(tid)
            j = self.journals.get(tid)
            if t is None or j is None or j.kind != W_SIGNAL or t.status != BLOCKED:
                continue
            self._settle_signal(t, j, j.waits[1], now)
            self._wake(t, now)
        return False

    # ---------------------------------------------------------------- recovery

    def restore(
        self,
        journals: dict[int, tuple[list[list[Any]], int, int | None]],
        signals: Sequence[tuple[str, object, int]],
        now: int,
    ) -> None:
        """Take the journals of live tasks and the signals still retained back from a store
        (``Recovered.journals`` / ``signals``; times in Unix ns)."""
        tasks = self.core.tasks
        for tid, (records, resumes, parked) in journals.items():
            t = tasks.get(tid)
            if t is None or t.status >= FIRST_TERMINAL:
                continue
            j = self.journals[tid] = Journal()
            j.records = records
            for rec in records:  # (the tasks they name were recovered first, however old)
                self._hold(j, rec)
            # a task parked when the store was written runs again from the top after the
            # restart: that run is a resume like any other (its wake never came to count it)
            j.resumes = resumes + 1 if parked is not None else resumes
        tb = self.core.config.time_base
        horizon = now - self.core.config.retention
        for name, payload, at in sorted(signals, key=lambda s: s[2]):
            if at - tb > horizon:
                self.signals[name] = (payload, at - tb)

    # ---------------------------------------------------------------- reading

    def outcomes(
        self, ids: Sequence[int], owner: int | None = None
    ) -> list[tuple[int, str | None, str, Any, str | None]]:
        """``(id, key, status, output, message)`` of each task of ``ids`` (``"unknown"``: gone),
        as the journal of task ``owner`` sees them (:meth:`find`)."""
        tasks = self.core.tasks
        out: list[tuple[int, str | None, str, Any, str | None]] = []
        for i in ids:
            o = tasks.get(i) if owner is None else self.find(owner, i)
            if o is None:
                out.append((i, None, "unknown", None, "the task's record is no longer available"))
                continue
            output = o.output if o.status == SUCCEEDED and o.output is not OUTPUT_LOST else None
            out.append((o.id, o.key, STATUS_NAMES[o.status], output, o.message))
        return out

    def describe(self, t: TaskState) -> str:
        """What parked ``t`` waits for, for people ("" when it is not parked)."""
        j = self.journals.get(t.id)
        if j is None or t.status not in (BLOCKED, SCHEDULED):
            return ""
        if j.kind == W_TASKS:
            n = len(j.waits)
            return f"children {n - j.left} of {n} done"
        if j.kind == W_SLEEP and j.until is not None:
            return f"sleeping until {_iso(self.core.config.time_base + j.until)}"
        if j.kind == W_SIGNAL:
            name = j.waits[2]
            if j.until is None:
                return f"signal '{name}'"
            return f"signal '{name}' (until {_iso(self.core.config.time_base + j.until)})"
        return ""


def _iso(unix_ns: int) -> str:
    """A Unix-ns instant as ISO 8601 UTC (second precision), without touching a clock."""
    import datetime as _dt

    secs = math.floor(unix_ns / 1e9)
    return _dt.datetime.fromtimestamp(secs, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
