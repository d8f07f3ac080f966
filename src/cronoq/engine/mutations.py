"""Durable mutations (docs/reference/behaviour.md#mutations) and the state a store hands back on recovery
(docs/reference/behaviour.md#recovery).

With ``CoreConfig(persist=True)`` the core emits a :class:`~cronoq.engine.actions.Persist`
action carrying one of these records for every durable change:

* :class:`Submitted` — a new task, with everything needed to rebuild it (:class:`TaskRecord`);
* :class:`StatusChange` — the task moved to ``running`` (attempt started), ``retrying`` or a
  terminal status (with message and, on success, the output object);
* :class:`RecurringUpsert` / :class:`RecurringRemove` / :class:`RecurringNext` — schedules;
* :class:`PauseChange` — a pool or a recurring schedule was paused or resumed
  (docs/how-to/operations.md): stores keep the set of paused names, recovery restores it;
* :class:`BulkKeyChange` — the progress of a bulk action called with a ``request_key``
  (docs/how-to/operations.md#bulk-actions): stores keep the latest of each key (the newest
  :data:`BULK_KEYS` keys), recovery hands them to the shell, so a retry after a restart or a
  failover answers (or finishes) the first call instead of acting twice.

``blocked``/``ready``/``scheduled`` are not persisted: recovery derives them from the
dependency edges and start times.  Times in records are Unix nanoseconds, so a record means
the same thing to any later leader whatever its engine epoch.  Payloads travel as the bytes
the shell encoded at submission (``TaskRecord.payload``); outputs as objects the shell encodes
at commit.

The records are plain slotted classes with ``__eq__`` so tests can compare round trips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from cronoq.engine.model import STATUS_NAMES, RetryPolicy, TaskOptions, TaskState
from cronoq.engine.time import NS


class _Record:
    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def as_dict(self) -> dict[str, Any]:
        return {s: getattr(self, s) for s in self.__slots__}


class TaskRecord(_Record):
    """Everything durable about a task's definition (the ``spec`` of
    docs/reference/behaviour.md#mutations)."""

    __slots__ = (
        "pool",
        "kind",
        "priority",
        "key",
        "deadline",
        "start",
        "tolerance",
        "on_miss",
        "duration_hint",
        "timeout",
        "retry",
        "deps",
        "resources",
        "tags",
        "labels",
        "tenant",
        "payload",
        "recurring",
    )

    def __init__(
        self,
        pool: str,
        kind: str = "default",
        priority: int = 2,
        key: str | None = None,
        deadline: int | None = None,
        start: int | None = None,
        tolerance: int = NS,
        on_miss: int = 0,
        duration_hint: int | None = None,
        timeout: int | None = None,
        retry: tuple[int, float, float, float, bool] | None = None,
        deps: list[tuple[int | str, int]] | None = None,
        resources: dict[str, int] | None = None,
        tags: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        tenant: str | None = None,
        payload: bytes | None = None,
        recurring: str | None = None,
    ) -> None:
        self.pool = pool
        self.kind = kind
        self.priority = priority
        self.key = key
        self.deadline = deadline  # Unix ns
        self.start = start  # Unix ns
        self.tolerance = tolerance
        self.on_miss = on_miss
        self.duration_hint = duration_hint
        self.timeout = timeout
        self.retry = retry
        self.deps = deps
        self.resources = resources
        self.tags = tags
        self.labels = labels
        self.tenant = tenant
        self.payload = payload
        self.recurring = recurring

    def options(self) -> TaskOptions:
        """The TaskOptions this record describes (pool by name; the core resolves it)."""
        retry = None if self.retry is None else RetryPolicy(*self.retry)
        return TaskOptions(
            pool=self.pool,
            kind=self.kind,
            priority=self.priority,
            timeout=self.timeout,
            retry=retry,
            duration_hint=self.duration_hint,
            tolerance=self.tolerance,
            on_miss=self.on_miss,
            tags=self.tags,
            labels=self.labels,
            tenant=self.tenant,
            resources=self.resources,
        )


def retry_tuple(policy: RetryPolicy | None) -> tuple[int, float, float, float, bool] | None:
    if policy is None:
        return None
    return (policy.max_attempts, policy.initial_backoff, policy.multiplier, policy.max_backoff, policy.jitter)


def task_record(
    pool: str,
    o: TaskOptions,
    key: str | None,
    payload: bytes | None,
    deadline: int | None = None,
    start: int | None = None,
    deps: list[tuple[int | str, int]] | None = None,
    recurring: str | None = None,
) -> TaskRecord:
    """The durable definition of a task (or a schedule's template) with options ``o`` in
    ``pool``; ``deadline`` / ``start`` are Unix ns, ``payload`` the encoded payload."""
    # (positional, in TaskRecord's parameter order: built once per durable submission, and
    # 18 keyword arguments cost twice the rest of the call, issue #33)
    return TaskRecord(
        pool,
        o.kind,
        o.priority,
        key,
        deadline,
        start,
        o.tolerance,
        o.on_miss,
        o.duration_hint,
        o.timeout,
        retry_tuple(o.retry),
        deps,
        o.resources,
        o.tags,
        o.labels,
        o.tenant,
        payload,
        recurring,
    )


class Submitted(_Record):
    __slots__ = ("id", "seq", "arrival", "spec")

    def __init__(self, id: int, seq: int, arrival: int, spec: TaskRecord) -> None:
        self.id = id
        self.seq = seq
        self.arrival = arrival  # Unix ns
        self.spec = spec

    @classmethod
    def of(
        cls,
        t: TaskState,
        pool: str,
        tb: int,
        deadline: int | None,
        start_at: int | None,
        deps: Sequence[tuple[int | str, int]] | None,
        blob: bytes | None,
    ) -> Submitted:
        """The record of new task ``t`` in ``pool`` (``deadline`` / ``start_at``: engine ns,
        ``tb``: the engine's time base; ``blob``: the encoded payload)."""
        fixed = t.fixed
        rec = task_record(
            pool,
            t.opts,
            t.key,
            blob,
            None if deadline is None else tb + deadline,
            None if start_at is None else tb + start_at,
            None if not deps else list(deps),
            None if fixed is None else fixed.recurring,
        )
        return cls(t.id, t.seq, tb + t.created_at, rec)


class StatusChange(_Record):
    """``Status{id, status, attempt, at, message, output?}``: status is a lower-case name."""

    __slots__ = ("id", "status", "attempt", "at", "message", "output", "has_output")

    def __init__(
        self,
        id: int,
        status: str,
        attempt: int,
        at: int,
        message: str | None = None,
        output: object = None,
        has_output: bool = False,
    ) -> None:
        self.id = id
        self.status = status
        self.attempt = attempt
        self.at = at  # Unix ns
        self.message = message
        self.output = output
        self.has_output = has_output

    @classmethod
    def of(cls, t: TaskState, at: int, output: object = None, has_output: bool = False) -> StatusChange:
        """The status ``t`` is in now, reached at Unix ns ``at``, with its message."""
        return cls(t.id, STATUS_NAMES[t.status], t.attempt, at, t.message, output, has_output)


class RecurringRecord(_Record):
    """A schedule's durable definition."""

    __slots__ = ("name", "cron", "tz", "overlap", "template", "deadline_rel")

    def __init__(
        self,
        name: str,
        cron: str,
        tz: str | None,
        overlap: int,
        template: TaskRecord,
        deadline_rel: int | None = None,
    ) -> None:
        self.name = name
        self.cron = cron
        self.tz = tz
        self.overlap = overlap
        self.template = template  # key = the template key; start/deadline unused
        self.deadline_rel = deadline_rel


class RecurringUpsert(_Record):
    __slots__ = ("spec",)

    def __init__(self, spec: RecurringRecord) -> None:
        self.spec = spec


class RecurringRemove(_Record):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class RecurringNext(_Record):
    """The occurrence materialized ahead: its start (Unix ns, None if none) and task id."""

    __slots__ = ("name", "next", "last")

    def __init__(self, name: str, next: int | None, last: int) -> None:
        self.name = name
        self.next = next
        self.last = last


class PauseChange(_Record):
    """Pool or recurring schedule ``name`` (``kind`` ``"pool"`` / ``"recurring"``) is now
    ``paused`` (True) or running again (False)."""

    __slots__ = ("kind", "name", "paused")

    def __init__(self, kind: str, name: str, paused: bool) -> None:
        self.kind = kind
        self.name = name
        self.paused = paused


#: how many bulk request keys a store keeps (the newest; the shell remembers as many)
BULK_KEYS: Final = 1024


class BulkKeyChange(_Record):
    """Bulk action ``action`` (``"cancel"`` / ``"replay"``) called by ``tenant`` with
    ``request_key`` ``key`` has so far ``matched`` and ``acted`` on that many tasks; ``done``
    once it finished (not done: it is running, or was interrupted).  ``at``: Unix ns."""

    __slots__ = ("action", "tenant", "key", "matched", "acted", "done", "at")

    def __init__(
        self, action: str, tenant: str | None, key: str, matched: int, acted: int, done: bool, at: int
    ) -> None:
        self.action = action
        self.tenant = tenant
        self.key = key
        self.matched = matched
        self.acted = acted
        self.done = done
        self.at = at


Mutation = (
    Submitted | StatusChange | RecurringUpsert | RecurringRemove | RecurringNext | PauseChange | BulkKeyChange
)


# ---------------------------------------------------------------------------------------------
# Recovery input


class RecoveredTask(_Record):
    """A non-terminal task read back from the store."""

    __slots__ = ("id", "seq", "arrival", "spec", "payload", "status", "attempt", "started", "message")

    def __init__(
        self,
        id: int,
        seq: int,
        arrival: int,
        spec: TaskRecord,
        payload: object,
        status: str,
        attempt: int,
        started: int | None = None,
        message: str | None = None,
    ) -> None:
        self.id = id
        self.seq = seq
        self.arrival = arrival
        self.spec = spec
        self.payload = payload  # decoded
        self.status = status  # last persisted: "submitted" (never ran), "running" or "retrying"
        self.attempt = attempt
        self.started = started
        self.message = message


class RecoveredTerminal(_Record):
    """A recently finished task, for lookups, key dedup, dependents, outputs, filters and
    replays (with its ``spec``, a replay after a restart keeps the original's options)."""

    __slots__ = (
        "id",
        "seq",
        "pool",
        "kind",
        "key",
        "status",
        "attempt",
        "arrival",
        "started",
        "finished",
        "message",
        "output",
        "has_output",
        "priority",
        "tenant",
        "replay_of",
        "spec",
    )

    def __init__(
        self,
        id: int,
        seq: int,
        pool: str,
        kind: str,
        key: str | None,
        status: str,
        attempt: int,
        arrival: int,
        started: int | None,
        finished: int,
        message: str | None,
        output: object = None,
        has_output: bool = False,
        priority: int = 2,
        tenant: str | None = None,
        replay_of: int | None = None,
        spec: TaskRecord | None = None,
    ) -> None:
        self.replay_of = replay_of  # the task it replays (its ``cronoq.replay_of`` tag), if any
        # its whole definition (options: retry, timeout, labels, tags, resources ...) when the
        # store could decode it; None: only the fields above are known
        self.spec = spec
        self.id = id
        self.seq = seq
        self.pool = pool
        self.kind = kind
        self.key = key
        self.status = status
        self.attempt = attempt
        self.arrival = arrival
        self.started = started
        self.finished = finished
        self.message = message
        self.output = output
        self.has_output = has_output
        self.priority = priority
        self.tenant = tenant


class RecoveredSchedule(_Record):
    __slots__ = ("spec", "next", "last")

    def __init__(self, spec: RecurringRecord, next: int | None, last: int) -> None:
        self.spec = spec
        self.next = next
        self.last = last


class Recovered(_Record):
    """Engine state restored from durable storage, passed to ``Core.recover``."""

    __slots__ = (
        "tasks",
        "terminal",
        "schedules",
        "quarantined",
        "quarantined_rows",
        "paused",
        "bulk_keys",
        "journals",
        "signals",
    )

    def __init__(
        self,
        tasks: list[RecoveredTask] | None = None,
        terminal: list[RecoveredTerminal] | None = None,
        schedules: list[RecoveredSchedule] | None = None,
        quarantined: list[tuple[int, str]] | None = None,
        quarantined_rows: dict[int, RecoveredTerminal] | None = None,
        paused: list[tuple[str, str]] | None = None,
        bulk_keys: list[BulkKeyChange] | None = None,
        journals: dict[int, tuple[list[list[Any]], int, int | None]] | None = None,
        signals: list[tuple[str, object, int]] | None = None,
    ) -> None:
        self.tasks = tasks or []
        self.terminal = terminal or []
        self.schedules = schedules or []
        self.quarantined = quarantined or []  # (id, reason): rows the store could not decode
        # what the store could still read of a quarantined row (id, key, pool, times): the
        # engine keeps it as a retained failed task, so lookups answer and its key stays taken
        self.quarantined_rows = quarantined_rows or {}
        # (kind, name) of the paused pools ("pool") and recurring schedules ("recurring")
        self.paused = paused or []
        # the latest progress of the newest bulk request keys, oldest first (for the shell)
        self.bulk_keys = bulk_keys or []
        # task id -> (journal records, resumes, attempt when parked or None): engine/parking.py
        self.journals = journals or {}
        # (name, payload, sent at Unix ns) of the signals (engine/parking.py)
        self.signals = signals or []
