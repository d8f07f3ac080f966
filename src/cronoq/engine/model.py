"""The task model: priorities, statuses, the lifecycle transition table, retry policies,
task options and the per-task state record.

Theory of operation
-------------------
* Statuses and lifecycle events are small ints on the hot path; their lower-case names are
  the public spelling (``STATUS_NAMES``).
* :data:`TRANSITIONS` is *the* lifecycle (docs/reference/behaviour.md#lifecycle):
  ``(from_status, event) -> to_status``. The core moves a task only through :func:`next_status`, which raises
  :class:`IllegalTransition` (a bug, never user error) for anything not in the table.
* :class:`TaskOptions` holds everything about a task that submissions commonly share
  (pool, kind, priority, timeout, retry, ...).  It is validated once and may be reused by any
  number of tasks; the per-task record :class:`TaskState` only keeps what differs per task.
  This keeps validation off the per-task path and a pending task small.
* A name or key that a store keeps as text (key, kind, pool, tenant, a recurring schedule's,
  a signal's, a resource's, a bulk ``request_key``) must not contain a NUL character, which
  PostgreSQL's ``text`` cannot hold, nor a lone surrogate, which has no UTF-8 form (tags and
  labels neither: :func:`check_utf8`), so :func:`check_stored_text` refuses one at every edge
  rather than letting one write fail a whole group commit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Final

from cronoq.engine.time import NS, check_seconds, show_number
from cronoq.errors import ArgumentTypeError, InvalidSubmission

if TYPE_CHECKING:
    import random

    from cronoq.engine.pools import Group

# ---------------------------------------------------------------------------------------------
# Priority


class Priority(IntEnum):
    """Priority class; a lower value is more important (CRITICAL=0 .. LOW=3)."""

    CRITICAL = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3

    def __repr__(self) -> str:
        return f"Priority.{self.name}"  # as the published implementation prints it

    __str__ = __repr__  # (``format()``/f-strings still give the int, as an IntEnum's)

    @classmethod
    def parse(cls, value: object) -> Priority:
        """Accept a Priority, an int 0..3 or a (case-insensitive) name."""
        if isinstance(value, Priority):
            return value
        if isinstance(value, bool):
            raise ValueError(f"unknown priority {value!r}")
        if isinstance(value, int):
            if 0 <= value <= 3:
                return _PRIORITIES[value]
            raise ValueError("priority must be 0..=3")
        if isinstance(value, str):
            p = _PRIORITY_NAMES.get(value.lower())
            if p is None:
                raise ValueError(f"unknown priority '{value}'")
            return p
        raise ValueError(f"unknown priority {value!r}")


_PRIORITIES: Final = tuple(Priority)
_PRIORITY_NAMES: Final = {p.name.lower(): p for p in Priority}
NUM_CLASSES: Final = 4
CLASS_NAMES: Final = ("critical", "high", "normal", "low")

# ---------------------------------------------------------------------------------------------
# Statuses

BLOCKED: Final = 0
SCHEDULED: Final = 1
READY: Final = 2
RUNNING: Final = 3
RETRYING: Final = 4
SUCCEEDED: Final = 5
FAILED: Final = 6
DEAD_LETTERED: Final = 7
CANCELLED: Final = 8
SKIPPED: Final = 9
MISSED: Final = 10
SHED: Final = 11

STATUS_NAMES: Final = (
    "blocked",
    "scheduled",
    "ready",
    "running",
    "retrying",
    "succeeded",
    "failed",
    "dead_lettered",
    "cancelled",
    "skipped",
    "missed",
    "shed",
)
STATUS_BY_NAME: Final = {n: i for i, n in enumerate(STATUS_NAMES)}
FIRST_TERMINAL: Final = SUCCEEDED


def is_terminal(status: int) -> bool:
    return status >= FIRST_TERMINAL


# ---------------------------------------------------------------------------------------------
# Lifecycle events and the transition table (docs/reference/behaviour.md#lifecycle)

EV_UNBLOCK: Final = 0  # all edges satisfied, no fixed start (or start already due)
EV_UNBLOCK_LATER: Final = 1  # all edges satisfied, fixed start in the future
EV_EDGE_BROKEN: Final = 2  # an edge can no longer be satisfied / awaited key timed out
EV_START_DUE: Final = 3  # fixed start time reached
EV_MISS_SKIP: Final = 4  # not started by start + tolerance, on_miss=skip
EV_MISS_FAIL: Final = 5  # not started by start + tolerance, on_miss=fail
EV_DISPATCH: Final = 6
EV_SUCCEED: Final = 7
EV_PERMANENT: Final = 8
EV_RETRY: Final = 9  # retryable failure / timeout / lost lease, attempts left
EV_EXHAUSTED: Final = 10  # retryable failure / timeout / lost lease, no attempts left
EV_BACKOFF_DONE: Final = 11
EV_CANCEL: Final = 12
EV_SHED: Final = 13
EV_OCCURRENCE_SKIP: Final = 14  # recurring overlap=skip: the new occurrence is skipped
EV_PARK: Final = 15  # the attempt parked (engine/parking.py): waits without a slot, not an attempt

EVENT_NAMES: Final = (
    "unblock",
    "unblock_later",
    "edge_broken",
    "start_due",
    "miss_skip",
    "miss_fail",
    "dispatch",
    "succeed",
    "permanent",
    "retry",
    "exhausted",
    "backoff_done",
    "cancel",
    "shed",
    "occurrence_skip",
    "park",
)

_NON_TERMINAL = (BLOCKED, SCHEDULED, READY, RUNNING, RETRYING)
_NOT_RUNNING = (BLOCKED, SCHEDULED, READY, RETRYING)

#: The whole lifecycle: (from, event) -> to.  Nothing else moves a task.
TRANSITIONS: Final[dict[tuple[int, int], int]] = {
    (BLOCKED, EV_UNBLOCK): READY,
    (BLOCKED, EV_UNBLOCK_LATER): SCHEDULED,
    (BLOCKED, EV_EDGE_BROKEN): SKIPPED,
    (BLOCKED, EV_OCCURRENCE_SKIP): SKIPPED,
    (SCHEDULED, EV_START_DUE): READY,
    (SCHEDULED, EV_OCCURRENCE_SKIP): SKIPPED,
    (SCHEDULED, EV_MISS_SKIP): MISSED,
    (SCHEDULED, EV_MISS_FAIL): FAILED,
    (READY, EV_MISS_SKIP): MISSED,
    (READY, EV_MISS_FAIL): FAILED,
    (READY, EV_DISPATCH): RUNNING,
    (RUNNING, EV_SUCCEED): SUCCEEDED,
    (RUNNING, EV_PERMANENT): FAILED,
    (RUNNING, EV_RETRY): RETRYING,
    (RUNNING, EV_EXHAUSTED): DEAD_LETTERED,
    (RUNNING, EV_PARK): BLOCKED,
    (RETRYING, EV_BACKOFF_DONE): READY,
    **{(s, EV_CANCEL): CANCELLED for s in _NON_TERMINAL},
    **{(s, EV_SHED): SHED for s in _NOT_RUNNING},
}
# Flattened for the hot path: index = from * 16 + event.
_FLAT: Final[list[int]] = [-1] * (16 * 16)
for (_f, _e), _t in TRANSITIONS.items():
    _FLAT[_f * 16 + _e] = _t


#: The table flattened for hot paths: ``FLAT_TRANSITIONS[from * 16 + event]`` (-1 = illegal).
FLAT_TRANSITIONS: Final = _FLAT


class IllegalTransition(AssertionError):
    """A transition not in :data:`TRANSITIONS` was attempted: an engine bug."""


def next_status(current: int, event: int) -> int:
    to = _FLAT[current * 16 + event]
    if to < 0:
        raise IllegalTransition(f"illegal transition: {STATUS_NAMES[current]} --{EVENT_NAMES[event]}-->")
    return to


# ---------------------------------------------------------------------------------------------
# Retry policy


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry behaviour for retryable failures (docs/reference/behaviour.md#reliability).

    Delay after attempt n: ``min(initial_backoff * multiplier**(n-1), max_backoff)``; with
    jitter a seeded uniform draw in ``[delay/2, delay]``.  Immutable; validated (and durations
    normalized to float seconds) when built.
    """

    max_attempts: int = 3
    initial_backoff: float = 1.0
    multiplier: float = 2.0
    max_backoff: float = 60.0
    jitter: bool = True

    def __post_init__(self) -> None:
        max_attempts, multiplier = self.max_attempts, self.multiplier
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1 (got {max_attempts!r})")
        ib = check_seconds("initial_backoff", self.initial_backoff)
        mb = check_seconds("max_backoff", self.max_backoff)
        if (
            isinstance(multiplier, bool)
            or not isinstance(multiplier, (int, float))
            or not math.isfinite(multiplier)
            or multiplier <= 0
        ):
            raise ValueError(f"multiplier must be finite and > 0 (got {show_number(multiplier)})")
        object.__setattr__(self, "initial_backoff", ib)
        object.__setattr__(self, "multiplier", float(multiplier))
        object.__setattr__(self, "max_backoff", mb)
        object.__setattr__(self, "jitter", bool(self.jitter))

    @classmethod
    def none(cls) -> RetryPolicy:
        """A single attempt, no retries."""
        return cls(max_attempts=1)

    def __reduce__(self) -> tuple[Any, ...]:
        # (by the constructor, as before the dataclass: old pickles and new ones alike)
        return (
            RetryPolicy,
            (self.max_attempts, self.initial_backoff, self.multiplier, self.max_backoff, self.jitter),
        )

    def base_delay(self, attempt: int) -> float:
        """The un-jittered delay (seconds) after ``attempt`` (numbered from 1)."""
        try:
            d = self.initial_backoff * self.multiplier ** (attempt - 1)
        except OverflowError:
            return self.max_backoff
        return min(d, self.max_backoff)

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The delay (seconds) before the retry after ``attempt``: the base delay, with jitter
        a draw from ``rng`` (the engine's seeded generator) in ``[base/2, base]``."""
        d = self.base_delay(attempt)
        if self.jitter and d > 0:
            d = rng.uniform(d / 2, d)
        return d


DEFAULT_RETRY: Final = RetryPolicy()

# ---------------------------------------------------------------------------------------------
# Miss policies

RUN_LATE: Final = 0
SKIP: Final = 1
FAIL: Final = 2
MISS_POLICIES: Final = ("run_late", "skip", "fail")


#: A lone surrogate: a code point of a str that has no UTF-8 form (``os.fsdecode`` of bytes
#: that are not UTF-8 gives them), which neither store can write (the stores use it too)
LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def check_utf8(what: str, value: str, error: type[ValueError] = InvalidSubmission) -> str:
    """``value``, unless it contains a lone surrogate: then ``error`` naming ``what`` (a store
    writes text as UTF-8).  O(1) for ASCII text, a regular expression otherwise."""
    if not value.isascii() and LONE_SURROGATE.search(value) is not None:
        raise error(f"{what} must not contain a lone surrogate (U+D800..U+DFFF): it has no UTF-8 form")
    return value


def check_stored_text(what: str, value: str, error: type[ValueError] = InvalidSubmission) -> str:
    """``value``, unless it contains a NUL character (U+0000) or a lone surrogate: then
    ``error`` naming ``what`` (docs/reference/behaviour.md#task-fields: a store's text cannot
    hold either).  A C scan (and :func:`check_utf8`)."""
    if "\x00" in value:
        raise error(f"{what} must not contain a NUL character (U+0000)")
    return check_utf8(what, value, error)


def parse_on_miss(value: object) -> int:
    if isinstance(value, str) and value in MISS_POLICIES:
        return MISS_POLICIES.index(value)
    raise ValueError(f"on_miss must be 'run_late', 'skip' or 'fail' (got {value!r})")


# ---------------------------------------------------------------------------------------------
# Dependencies

ON_SUCCESS: Final = 0
ON_FAILURE: Final = 1
ON_COMPLETE: Final = 2
COND_NAMES: Final = ("success", "failure", "complete")
_COND_PARSE: Final = {
    "success": ON_SUCCESS,
    "on_success": ON_SUCCESS,
    "failure": ON_FAILURE,
    "on_failure": ON_FAILURE,
    "complete": ON_COMPLETE,
    "on_complete": ON_COMPLETE,
}


@dataclass(frozen=True, slots=True)
class Dep:
    """A dependency edge: ``Dep(target, on="success")`` with target an id (int) or key (str).

    ``on`` is normalized (``"on_failure"`` → ``"failure"``); ``cond`` is the same condition as
    the engine's number (``ON_SUCCESS``, ``ON_FAILURE``, ``ON_COMPLETE``).
    """

    target: int | str
    on: str = "success"
    cond: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        target, on = self.target, self.on
        if isinstance(target, bool) or not isinstance(target, (int, str)):
            raise ArgumentTypeError(f"dependency target must be a task id or key (got {target!r})")
        if isinstance(target, int) and target < 1:
            raise ValueError(f"dependency target must be a task id >= 1 (got {target})")
        if isinstance(target, str):
            check_stored_text("dependency target", target)
        cond = _COND_PARSE.get(on) if isinstance(on, str) else None
        if cond is None:
            raise ValueError(f"on must be 'success', 'failure' or 'complete' (got {on!r})")
        object.__setattr__(self, "on", COND_NAMES[cond])
        object.__setattr__(self, "cond", cond)

    def __repr__(self) -> str:
        return f"Dep({self.target!r}, on={self.on!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Dep, (self.target, self.on))


def edge_satisfied(cond: int, parent_status: int) -> bool:
    """Whether a terminal parent status satisfies an edge condition."""
    if cond == ON_COMPLETE:
        return True
    if cond == ON_SUCCESS:
        return parent_status == SUCCEEDED
    return parent_status != SUCCEEDED


# ---------------------------------------------------------------------------------------------
# Task options and state


class TaskOptions:
    """Validated scheduling options that many tasks may share (immutable once built).

    Durations are ns.  ``pool_index`` (and ``stats_key``) are resolved by the core on first use
    and hold for that core only (``resolver``): options shared by several schedulers are
    resolved again by each; the core also checks the resources there, once.
    """

    __slots__ = (
        "duration_hint",
        "kind",
        "labels",
        "on_miss",
        "pool",
        "pool_index",
        "priority",
        "resolver",
        "resources",
        "retry",
        "single",
        "stats_key",
        "tags",
        "tenant",
        "timeout",
        "tolerance",
        "tracked",
        "units",
    )

    def __init__(
        self,
        pool: str | None = None,
        kind: str = "default",
        priority: int = 2,
        timeout: int | None = None,
        retry: RetryPolicy | None = None,
        duration_hint: int | None = None,
        tolerance: int = NS,
        on_miss: int = RUN_LATE,
        tags: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        tenant: str | None = None,
        resources: dict[str, int] | None = None,
    ) -> None:
        self.pool = pool
        self.kind = kind
        self.priority = priority
        self.timeout = timeout
        self.retry = retry
        self.duration_hint = duration_hint
        self.tolerance = tolerance
        self.on_miss = on_miss
        self.tags = tags
        self.labels = labels
        self.tenant = tenant
        self.resources = resources
        self.pool_index = -1
        self.stats_key: object = None
        self.resolver: object = None  # the core pool_index and stats_key belong to
        # (unit, name, units, tracked resource or None) per resource (engine/resources.py Entry)
        self.units: tuple[Any, ...] | None = None
        self.tracked: tuple[Any, ...] | None = None  # the entries of its tracked resources
        self.single: tuple[Any, str, int, Any] | None = None  # its one entry, if it has one

    def unresolved(self) -> TaskOptions:
        """A copy that no core has resolved yet."""
        out = TaskOptions.__new__(TaskOptions)
        for name in TaskOptions.__slots__:
            setattr(out, name, getattr(self, name))
        out.pool_index = -1
        out.stats_key = None
        out.resolver = None
        out.tracked = None
        out.units = None
        out.single = None
        return out


class _OutputLost:
    """``TaskState.output`` of a succeeded task whose output is no longer available (a store
    that could not keep it, or dropped it): awaiting it raises instead of giving None."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OUTPUT_LOST"


OUTPUT_LOST: Final = _OutputLost()


class _Rare:
    """The fields of :class:`TaskState` that most tasks never set, in one object made when
    one of them first gets a value other than its default (see ``TaskState``)."""

    __slots__ = ("awaiting", "dep_conds", "fixed", "latest_start", "message", "replayed_by")

    def __init__(self) -> None:
        self.awaiting = 0
        self.dep_conds: list[int] | None = None
        self.fixed: Any = None
        self.latest_start = 0
        self.message: str | None = None
        self.replayed_by: int | None = None


class TaskState:
    """Everything the engine knows about one task.  Mutated only by the core.

    Times are engine ns.  ``lane_token`` invalidates stale queue entries (lazy deletion).

    A pending task is the engine's per-task memory, so the record is lean: slots only; the
    fields most tasks never set (``awaiting``, ``dep_conds``, ``fixed``, ``latest_start``,
    ``message``, ``replayed_by``) live in a :class:`_Rare` object made on the first
    non-default value and read through properties of the same names (a default value with
    none made); ``id`` and ``seq`` are one int object when the id has no high bits.
    """

    __slots__ = (
        "_rare",
        "attempt",
        "attempt_started",
        "created_at",
        "deadline",
        "dependents",
        "finished_at",
        "group",
        "id",
        "key",
        "lane_token",
        "lease",
        "lease_expires",
        "opts",
        "output",
        "parents",
        "payload",
        "ready_at",
        "seq",
        "started_at",
        "status",
        "unmet",
    )

    def __init__(
        self,
        id: int,
        seq: int,
        opts: TaskOptions,
        payload: object,
        key: str | None,
        now: int,
        status: int = BLOCKED,
    ) -> None:
        self.id = id
        self.seq = id if id == seq else seq  # (one int object for both when they are equal)
        self.opts = opts
        self.payload = payload
        self.key = key
        # its first status: ``blocked`` (new), or the terminal one a store recorded; from here
        # on only Core.move and the hot paths its docstring names change it
        self.status = status
        self.attempt = 0
        self.lease = 0
        self.created_at = now
        self.ready_at = now
        self.started_at: int | None = None
        self.finished_at: int | None = None
        self.attempt_started = 0
        self.deadline: int | None = None
        self.output: object = None
        self.lane_token = 0
        self.unmet = 0
        # outgoing edges: the dependent tasks, and their conditions in parallel (``dep_conds``)
        # - or None when every edge is ON_SUCCESS, the common case (no per-edge tuple, a
        # cheaper propagation)
        self.dependents: list[TaskState] | None = None
        # incoming edges, in the order given: the parents' records (engine/parents.py), or None
        self.parents: tuple[Any, ...] | None = None
        self.group: Group | None = None  # the worker group of the running attempt
        self.lease_expires = 0
        self._rare: _Rare | None = None

    def _more(self) -> _Rare:
        r = self._rare
        if r is None:
            r = self._rare = _Rare()
        return r

    @property
    def message(self) -> str | None:
        r = self._rare
        return None if r is None else r.message

    @message.setter
    def message(self, value: str | None) -> None:
        if value is not None or self._rare is not None:
            self._more().message = value

    @property
    def fixed(self) -> Any:
        """The ``reservations.FixedStart`` of a fixed-start task, else None."""
        r = self._rare
        return None if r is None else r.fixed

    @fixed.setter
    def fixed(self, value: Any) -> None:
        if value is not None or self._rare is not None:
            self._more().fixed = value

    @property
    def dep_conds(self) -> list[int] | None:
        r = self._rare
        return None if r is None else r.dep_conds

    @dep_conds.setter
    def dep_conds(self, value: list[int] | None) -> None:
        if value is not None or self._rare is not None:
            self._more().dep_conds = value

    @property
    def awaiting(self) -> int:
        """Edges waiting for a key that does not exist yet."""
        r = self._rare
        return 0 if r is None else r.awaiting

    @awaiting.setter
    def awaiting(self, value: int) -> None:
        if value or self._rare is not None:
            self._more().awaiting = value

    @property
    def latest_start(self) -> int:
        r = self._rare
        return 0 if r is None else r.latest_start

    @latest_start.setter
    def latest_start(self, value: int) -> None:
        if value or self._rare is not None:
            self._more().latest_start = value

    @property
    def replayed_by(self) -> int | None:
        """The id of this task's latest replay (engine/replay.py), else None."""
        r = self._rare
        return None if r is None else r.replayed_by

    @replayed_by.setter
    def replayed_by(self, value: int | None) -> None:
        if value is not None or self._rare is not None:
            self._more().replayed_by = value

    @property
    def status_name(self) -> str:
        return STATUS_NAMES[self.status]

    def edges(self) -> list[tuple[TaskState, int]]:
        """The outgoing dependency edges as ``(dependent, condition)`` pairs."""
        kids = self.dependents or []
        conds = self.dep_conds
        return list(zip(kids, conds)) if conds is not None else [(k, ON_SUCCESS) for k in kids]

    def __repr__(self) -> str:
        return f"<TaskState id={self.id} {STATUS_NAMES[self.status]} attempt={self.attempt}>"


@dataclass(slots=True, repr=False)
class StatusEvent:
    """A status transition as published to subscribers (docs/reference/behaviour.md#lifecycle). ``at`` is Unix
    seconds.  One event is shared by every subscriber: treat it as read-only.

    (Slotted but deliberately not ``frozen``: the core makes one per transition while anyone
    watches, and a frozen dataclass's ``object.__setattr__`` per field made that about twice as
    dear, costing the watched engine loop ~19 % in paired runs.)"""

    id: int
    pool: str
    key: str | None
    status: str
    attempt: int
    at: float
    message: str | None

    def __repr__(self) -> str:
        return (
            f"StatusEvent(id={self.id}, pool={self.pool!r}, key={self.key!r}, status={self.status!r},"
            f" attempt={self.attempt}, at={self.at:.6f}, message={self.message!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # (by the constructor, as before the dataclass: old pickles and new ones alike)
        return (StatusEvent, (self.id, self.pool, self.key, self.status, self.attempt, self.at, self.message))


# the messages the engine gives the statuses it decides (docs/reference/behaviour.md#lifecycle)
MSG_TIMEOUT: Final = "attempt timed out"
MSG_LEASE_LOST: Final = "lease expired"
MSG_CANCELLED: Final = "cancelled"
MSG_SHED: Final = "shed under overload"
MSG_MISSED: Final = "fixed start missed"
MSG_ALREADY_FINISHED: Final = "task already finished"
MSG_AWAIT_TIMEOUT: Final = "timed out awaiting unknown dependency"
MSG_PREVIOUS_RUNNING: Final = "previous occurrence still running"
MSG_INTERRUPTED: Final = "attempt interrupted by a restart"
