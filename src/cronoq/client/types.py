"""Plain Python views of the wire messages the client returns (docs/reference/behaviour.md#server-details,
docs/reference/behaviour.md#client-worker).

Statuses, priorities and overlap policies are lower-case names; instants are Unix seconds
(floats, None when unset); ids are ints.  Each type has ``from_wire(message)``.

``to_json()`` (on :class:`Result`, :class:`Submitted`, :class:`TaskInfo`, :class:`Event`,
:class:`Snapshot`) gives the shape the server's HTTP/JSON API uses for the same thing
(docs/reference/http.md#conventions, docs/reference/behaviour.md#server-details: proto field names, ids as
strings; :mod:`cronoq.spec.json_shapes`), built from the wire message the value was read from (kept aside by
``from_wire``; not a dataclass field).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cronoq.client.encoding import (
    decode_payload,
    overlap_from_wire,
    priority_from_wire,
    status_from_wire,
)
from cronoq.engine.attempts import AttemptRecord
from cronoq.engine.bulk import BulkResult
from cronoq.engine.progress import Progress
from cronoq.errors import TaskFailed
from cronoq.outcome import Outcome
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.spec import json_shapes
from cronoq.spec.payloads import parse_json

__all__ = [
    "BulkResult",
    "Event",
    "PoolSnapshot",
    "RecurringInfo",
    "Result",
    "Snapshot",
    "Submitted",
    "TaskInfo",
    "TaskPage",
    "Totals",
    "WorkerGroup",
    "WorkerInfo",
]

TERMINAL_STATUSES = frozenset(
    {"succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed"}
)


def _ns_to_s(ns: int) -> float:
    return ns / 1e9


def _opt_s(msg: Any, name: str) -> float | None:
    return _ns_to_s(getattr(msg, name)) if msg.HasField(name) else None


def _progress(p: pb.Progress) -> Progress:
    total = p.total if p.HasField("total") else None
    return Progress(p.done, total, p.message or None, _ns_to_s(p.at_unix_ns), p.attempt)


def _attempt(a: pb.AttemptInfo) -> AttemptRecord:
    return AttemptRecord(
        a.number,
        _opt_s(a, "started_unix_ns"),
        _opt_s(a, "ended_unix_ns"),
        a.worker,
        a.outcome,
        a.message or None,
    )


def _keep_wire(obj: Any, msg: Any) -> None:
    """Keep the wire message beside a frozen dataclass (for ``to_json``; not a field, so it
    takes no part in equality, ``repr`` or ``dataclasses.asdict``)."""
    object.__setattr__(obj, "_wire", msg)


def _wire_of(obj: Any) -> Any:
    """The wire message ``obj`` was read from (``to_json`` renders it, so the JSON is exactly
    the server's); a value made by hand has none."""
    msg = obj.__dict__.get("_wire")
    if msg is None:
        raise ValueError(f"{type(obj).__name__}.to_json() needs a value read from the server")
    return msg


@dataclass(frozen=True)
class Result:
    """Outcome of a terminal task (wire ``TaskResult``).

    ``output`` is the raw output (None when none is available); ``output_available`` is True
    exactly when the task succeeded and its output is retained. The wire carries no content
    type for outputs: :meth:`json` parses the bytes as JSON, :meth:`text` decodes UTF-8, and
    :meth:`value` gives JSON when the bytes are JSON, else text, else bytes.
    """

    id: int
    status: str
    output: bytes | None = None
    message: str = ""
    output_available: bool = False

    @classmethod
    def from_wire(cls, msg: pb.TaskResult) -> Result:
        return cls(
            id=msg.id,
            status=status_from_wire(msg.status),
            output=msg.output if msg.HasField("output") else None,
            message=msg.message,
            output_available=msg.output_available or msg.HasField("output"),
        )

    def to_json(self) -> dict[str, Any]:
        """The HTTP API's result object ``{id, status, output?, output_base64?, content_type,
        message, output_available}``: ``output`` when the output bytes are JSON, else
        ``output_base64``.  The wire result carries no content type, so ``content_type`` is
        the one a cronoq worker gives such bytes (:func:`~cronoq.spec.json_shapes.guess_content_type`)."""
        data = self.output if self.output_available else None
        return json_shapes.result_json(
            self.id,
            self.status,
            output=data,
            content_type="" if data is None else json_shapes.guess_content_type(data),
            message=self.message,
        )

    @property
    def ok(self) -> bool:
        """True when the task succeeded."""
        return self.status == "succeeded"

    def json(self) -> Any:
        """The output parsed as JSON (None for an empty output; json.JSONDecodeError, saying
        so, for one that is not JSON: :meth:`text`, :meth:`value` read any)."""
        return parse_json(self.output or b"", "output")

    def text(self) -> str:
        """The output decoded as UTF-8 (``""`` for no output)."""
        return (self.output or b"").decode("utf-8")

    def value(self) -> Any:
        """JSON when the output is valid JSON, else text when it is UTF-8, else the bytes;
        None for an empty output."""
        if not self.output:
            return None
        try:
            return json.loads(self.output)
        except ValueError:
            pass
        try:
            return self.output.decode("utf-8")
        except UnicodeDecodeError:
            return self.output

    def raise_for_status(self) -> Result:
        """Return self when the task succeeded, else raise :class:`~cronoq.TaskFailed`."""
        if not self.ok:
            raise TaskFailed(self.status, self.message, self.id)
        return self


@dataclass(frozen=True)
class Submitted:
    """Answer to a submit: the task id, whether the key named an existing task, and (with
    ``wait=True``) the outcome."""

    id: int
    duplicate: bool = False
    result: Result | None = None

    @classmethod
    def from_wire(cls, msg: pb.SubmitResponse) -> Submitted:
        result = Result.from_wire(msg.result) if msg.HasField("result") else None
        return cls(id=msg.id, duplicate=msg.duplicate, result=result)

    def to_json(self) -> dict[str, Any]:
        """The HTTP API's submit answer ``{id, duplicate, result?}``."""
        out: dict[str, Any] = {"id": str(self.id), "duplicate": self.duplicate}
        if self.result is not None:
            out["result"] = self.result.to_json()
        return out


def _payload(msg: pb.TaskInfo) -> Any:
    """``TaskInfo.payload`` decoded (None when the answer does not carry it)."""
    return decode_payload(msg.payload, msg.payload_content_type) if msg.HasField("payload") else None


@dataclass(frozen=True)
class TaskInfo:
    """State of one task (wire ``TaskInfo``); ``key`` is None for a task without a key, times
    are Unix seconds (None until they happen). ``progress`` is the latest attempt's progress
    (None: none reported); ``attempts``, ``parents`` and ``children`` are filled by
    ``Client.get`` (docs/how-to/progress.md), empty in listings; ``name`` is the named task's
    name when the server knows it, else ""; ``waiting`` says why a task that has not finished
    is not running ("" otherwise; docs/getting-started/dashboard.md#why-a-task-waits);
    ``parent_outcomes`` (``Client.get``) says how each parent ended, one per dependency edge in
    edge order (docs/concepts/dependencies.md#outputs-on-edges): the outputs are not carried
    (``output`` None; ``Client.wait(id)`` returns one). ``payload`` is the task's payload as
    submitted (decoded as ``Result.output`` is) when ``Client.get(ref, payload=True)`` asked for it
    and the server still has it (``payload_available``); else None."""

    id: int
    status: str
    pool: str
    key: str | None
    kind: str
    attempt: int
    max_attempts: int
    created_at: float | None
    started_at: float | None
    finished_at: float | None
    message: str
    output_available: bool
    tenant: str | None
    priority: str
    #: the task this one replays, and the latest replay of this one (docs/how-to/operations.md)
    replay_of: int | None = None
    replayed_by: int | None = None
    progress: Progress | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    parents: tuple[int, ...] = ()
    children: tuple[int, ...] = ()
    name: str = ""
    waiting: str = ""
    parent_outcomes: tuple[Outcome, ...] = ()
    payload: Any = None
    payload_available: bool = False

    @classmethod
    def from_wire(cls, msg: pb.TaskInfo) -> TaskInfo:
        info = cls(
            id=msg.id,
            status=status_from_wire(msg.status),
            pool=msg.pool,
            key=msg.key or None,
            kind=msg.kind or "default",
            attempt=msg.attempt,
            max_attempts=msg.max_attempts,
            created_at=_opt_s(msg, "created_unix_ns"),
            started_at=_opt_s(msg, "started_unix_ns"),
            finished_at=_opt_s(msg, "finished_unix_ns"),
            message=msg.message,
            output_available=msg.output_available,
            tenant=msg.tenant or None,
            priority=priority_from_wire(msg.priority),
            replay_of=msg.replay_of if msg.HasField("replay_of") else None,
            replayed_by=msg.replayed_by if msg.HasField("replayed_by") else None,
            progress=_progress(msg.progress) if msg.HasField("progress") else None,
            attempts=tuple(_attempt(a) for a in msg.attempts),
            parents=tuple(msg.parents),
            children=tuple(msg.children),
            name=msg.name,
            waiting=msg.waiting,
            parent_outcomes=tuple(
                Outcome(p.id, p.key or None, p.status, None, p.message or None) for p in msg.parent_outcomes
            ),
            payload=_payload(msg),
            payload_available=msg.HasField("payload"),
        )
        _keep_wire(info, msg)
        return info

    def to_json(self) -> dict[str, Any]:
        """The HTTP API's ``GET /v1/tasks/{ref}`` object (``TaskInfo`` proto names, id as a
        string, lower-case status and priority, unset times null)."""
        return json_shapes.message_json(_wire_of(self))

    @property
    def terminal(self) -> bool:
        """True once the task reached a terminal status."""
        return self.status in TERMINAL_STATUSES

    @property
    def done(self) -> bool:
        """The published client's name for :attr:`terminal`."""
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class TaskPage:
    """One page of ``list_tasks``: ``next_after`` is the id to pass as ``after`` for the next
    page, None when no more may follow (as in the published client)."""

    tasks: list[TaskInfo]
    next_after: int | None = None
    unavailable_shards: list[str] = field(default_factory=list)

    @classmethod
    def from_wire(cls, msg: pb.ListTasksResponse) -> TaskPage:
        return cls(
            tasks=[TaskInfo.from_wire(t) for t in msg.tasks],
            next_after=msg.next_after or None,
            unavailable_shards=list(msg.unavailable_shards),
        )

    def __iter__(self) -> Iterator[TaskInfo]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(frozen=True)
class Event:
    """A status transition (wire ``StatusEvent``); ``at`` in Unix seconds. On a watch with
    ``progress=True``, a progress update has ``progress`` set (``status`` is then running;
    docs/how-to/progress.md#event-streams); None on every status transition."""

    id: int
    pool: str
    key: str | None
    status: str
    attempt: int
    at: float
    message: str
    progress: Progress | None = None

    @classmethod
    def from_wire(cls, msg: pb.StatusEvent) -> Event:
        ev = cls(
            id=msg.id,
            pool=msg.pool,
            key=msg.key or None,
            status=status_from_wire(msg.status),
            attempt=msg.attempt,
            at=_ns_to_s(msg.at_unix_ns),
            message=msg.message,
        )
        if msg.HasField("progress"):
            up = msg.progress
            total = up.total if up.HasField("total") else None
            ev = cls(
                ev.id, ev.pool, ev.key, ev.status, ev.attempt, ev.at, ev.message,
                Progress(up.done, total, up.message or None, ev.at, ev.attempt),
            )  # fmt: skip
        _keep_wire(ev, msg)
        return ev

    def to_json(self) -> dict[str, Any]:
        """The event as ``/v1/events`` sends it: the ``StatusEvent`` fields (id as a string,
        lower-case status) plus ``at`` in Unix seconds."""
        return json_shapes.event_json(_wire_of(self), self.at)

    @property
    def terminal(self) -> bool:
        """True once the task reached a terminal status."""
        return self.status in TERMINAL_STATUSES

    @property
    def done(self) -> bool:
        """The published client's name for :attr:`terminal`."""
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class WorkerGroup:
    labels: dict[str, str]
    capacity: int
    busy: int

    @classmethod
    def from_wire(cls, msg: pb.WorkerGroup) -> WorkerGroup:
        return cls(labels=dict(msg.labels), capacity=msg.capacity, busy=msg.busy)


@dataclass(frozen=True)
class PoolSnapshot:
    """Per-pool figures of a server snapshot (docs/reference/behaviour.md#metrics); ``pending_by_class`` is
    ``[critical, high, normal, low]``."""

    name: str
    capacity: int
    busy: int
    held: int
    desired: int
    pending_by_class: list[int]
    reservations: int
    dispatched: int
    succeeded: int
    failed: int
    priority_adherence: float
    fixed_start_hit_rate: float
    utilization: float
    schedule_efficiency: float
    wait_p50: float
    wait_p90: float
    wait_p99: float
    cost: float
    workers_connected: int
    groups: list[WorkerGroup]
    paused: bool = False  # dispatches nothing new (docs/how-to/operations.md)

    @classmethod
    def from_wire(cls, msg: pb.PoolSnapshot) -> PoolSnapshot:
        return cls(
            name=msg.name,
            capacity=msg.capacity,
            busy=msg.busy,
            held=msg.held,
            desired=msg.desired,
            pending_by_class=list(msg.pending_by_class),
            reservations=msg.reservations,
            dispatched=msg.dispatched,
            succeeded=msg.succeeded,
            failed=msg.failed,
            priority_adherence=msg.priority_adherence,
            fixed_start_hit_rate=msg.fixed_start_hit_rate,
            utilization=msg.utilization,
            schedule_efficiency=msg.schedule_efficiency,
            wait_p50=msg.wait_p50_s,
            wait_p90=msg.wait_p90_s,
            wait_p99=msg.wait_p99_s,
            cost=msg.cost,
            workers_connected=msg.workers_connected,
            groups=[WorkerGroup.from_wire(g) for g in msg.groups],
            paused=msg.paused,
        )

    @property
    def pending(self) -> int:
        return sum(self.pending_by_class)


class Totals(dict[str, int]):
    """Counters since the leader started, by name (``submitted``, ``succeeded``, ``retries``, ...):
    a plain ``dict`` (``totals["succeeded"]``, as in-process) whose counters also read as
    attributes (``totals.succeeded``, as in the published client)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> int:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no counter {name!r} in totals") from None


@dataclass(frozen=True)
class Snapshot:
    """A server snapshot: pools in configuration order, overall counts, ``totals`` by name."""

    pools: list[PoolSnapshot]
    live_tasks: int
    running: int
    pending: int
    totals: Totals
    workers_connected: int
    unavailable_shards: list[str] = field(default_factory=list)

    @classmethod
    def from_wire(cls, msg: pb.SnapshotResponse) -> Snapshot:
        totals = Totals({f.name: getattr(msg.totals, f.name) for f in pb.Totals.DESCRIPTOR.fields})
        snap = cls(
            pools=[PoolSnapshot.from_wire(p) for p in msg.pools],
            live_tasks=msg.live_tasks,
            running=msg.running,
            pending=msg.pending,
            totals=totals,
            workers_connected=msg.workers_connected,
            unavailable_shards=list(msg.unavailable_shards),
        )
        _keep_wire(snap, msg)
        return snap

    def to_json(self) -> dict[str, Any]:
        """The HTTP API's ``GET /v1/snapshot`` object (``SnapshotResponse`` proto names)."""
        return json_shapes.message_json(_wire_of(self))

    def pool(self, name: str) -> PoolSnapshot | None:
        """The named pool's snapshot, or None."""
        for p in self.pools:
            if p.name == name:
                return p
        return None


@dataclass(frozen=True)
class WorkerInfo:
    """A connected remote worker; ``slots`` are the granted slots."""

    id: int
    name: str
    pool: str
    labels: dict[str, str]
    slots: int
    busy: int
    connected_at: float
    #: the task kinds it serves (empty: any kind, a plain handler; docs/how-to/deploys.md)
    kinds: tuple[str, ...] = ()

    @classmethod
    def from_wire(cls, msg: pb.WorkerInfo) -> WorkerInfo:
        return cls(
            id=msg.id,
            name=msg.name,
            pool=msg.pool,
            labels=dict(msg.labels),
            slots=msg.slots,
            busy=msg.busy,
            connected_at=_ns_to_s(msg.connected_unix_ns),
            kinds=tuple(msg.kinds),
        )


@dataclass(frozen=True)
class RecurringInfo:
    """A recurring schedule on the server; ``next_at`` is the start (Unix s) of the occurrence
    materialized ahead, ``last_task_id`` the latest occurrence's id."""

    name: str
    cron: str
    tz: str | None
    pool: str
    kind: str
    overlap: str
    next_at: float | None
    last_task_id: int | None
    paused: bool = False
    skipped_paused: int = 0  # occurrences skipped while paused

    @classmethod
    def from_wire(cls, msg: pb.RecurringInfo) -> RecurringInfo:
        return cls(
            name=msg.name,
            cron=msg.cron,
            tz=msg.tz or None,
            pool=msg.pool,
            kind=msg.kind or "default",
            overlap=overlap_from_wire(msg.overlap),
            next_at=_opt_s(msg, "next_unix_ns"),
            last_task_id=msg.last_task_id if msg.HasField("last_task_id") else None,
            paused=msg.paused,
            skipped_paused=msg.skipped_paused,
        )
