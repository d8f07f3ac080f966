"""Conversions between the wire (protobuf / JSON) and the scheduler, shared by gRPC and HTTP.

* :func:`submission` turns a ``TaskSpec`` into the one
  :class:`~cronoq.spec.submission.Submission` the scheduler takes (its payload a ``Blob``),
  enforcing the request limits first (``request_limits.check_spec``, before anything is
  converted; violations are :class:`InvalidArgument`), then :mod:`cronoq.spec.wire`'s checks
  (an :class:`~cronoq.errors.InvalidSubmission`: both are ``ValueError``, INVALID_ARGUMENT).
* :func:`task_info` / :func:`task_result` / :func:`status_event` / :func:`snapshot_msg` build
  the response messages from engine state.
* :func:`submit_error_status` maps SubmitError codes to gRPC status names (docs/reference/grpc.md#services)
  and :data:`HTTP_STATUS` maps status names to HTTP codes (docs/reference/behaviour.md#server-details).

Wire enum numbers come from the proto descriptors, matched to the engine's by name
(:mod:`cronoq.proto.enums`, the one definition; 0 = UNSPECIFIED is "not given").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from cronoq.engine.model import COND_NAMES, FIRST_TERMINAL, STATUS_NAMES, SUCCEEDED, StatusEvent, TaskState
from cronoq.engine.replay import replay_of, replayed_by
from cronoq.engine.snapshot import ResourceSnapshot, Snapshot
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.protocol import MESSAGE_OVERHEAD
from cronoq.server.request_limits import InvalidArgument, check_spec
from cronoq.server.substitute import check_markers
from cronoq.server.workers import Blob, WorkerSession
from cronoq.spec.submission import Submission
from cronoq.spec.wire import from_wire

if TYPE_CHECKING:
    from cronoq.engine.attempts import TaskExtras
    from cronoq.engine.keyed import ResourceKey
    from cronoq.engine.progress import ProgressEvent
    from cronoq.engine.recurring import RecurringInfo
    from cronoq.server.config import LimitsConfig


#: SubmitError code -> gRPC status name (lower case).
SUBMIT_STATUS = {
    "unknown_pool": "not_found",
    "unknown_dependency": "not_found",
    "full": "resource_exhausted",
    "overloaded": "resource_exhausted",
    "reservation_conflict": "failed_precondition",
    "invalid": "invalid_argument",
    "cycle": "invalid_argument",
    "duplicate_key_in_batch": "invalid_argument",
    "resource_exceeds_capacity": "invalid_argument",
    "unknown_resource": "invalid_argument",
}

#: gRPC status name -> HTTP status code (docs/reference/behaviour.md#server-details).
HTTP_STATUS = {
    "invalid_argument": 400,
    "unauthenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "failed_precondition": 409,
    "resource_exhausted": 429,
    "unavailable": 503,
    "deadline_exceeded": 504,
    "data_loss": 500,
    "internal": 500,
}


def _enum(v: int) -> Any:
    """Wire enum values are plain ints (the generated stubs type them as enum wrappers)."""
    return v


def submit_error_status(code: str) -> str:
    return SUBMIT_STATUS.get(code, "invalid_argument")


def _seconds(name: str, v: float) -> float:
    if not math.isfinite(v) or v < 0:
        raise InvalidArgument(f"{name} must be a finite, non-negative number of seconds (got {v})")
    return v


def wait_timeout(name: str, v: float | None) -> float | None:
    """A wait timeout (``Wait.timeout_s``, ``Submit.wait_timeout_s``): None, or finite and
    >= 0 (:class:`InvalidArgument` otherwise, as HTTP's ``?timeout=`` is a 400)."""
    if v is None:
        return None
    return _seconds(name, v)


def _check_message_size(spec: pb.TaskSpec, limit: int) -> None:
    """The ``Lease`` that carries the task to a worker must fit in ``max_message_bytes``.

    gRPC peers receive at most 4 MiB (the default ``max_message_bytes``) unless configured
    otherwise, e.g. the published worker: a larger ``Lease`` would break its stream on every
    attempt (and fail the other attempts it runs), so such a task is refused at submission.
    """
    size = len(spec.payload) + MESSAGE_OVERHEAD
    size += len(spec.content_type.encode()) + len(spec.kind.encode()) + len(spec.key.encode())
    size += len(spec.tenant.encode())
    for m in (spec.tags, spec.labels):
        if m:
            for k, v in m.items():
                size += len(k.encode()) + len(v.encode())
    if size > limit:
        raise InvalidArgument(
            f"task too large: its payload ({len(spec.payload)} bytes), content type, kind, key, "
            f"tenant, tags and labels must fit in limits.max_message_bytes ({limit}) "
            f"less {MESSAGE_OVERHEAD} bytes"
        )


def submission(spec: pb.TaskSpec, limits: LimitsConfig) -> Submission:
    """The :class:`~cronoq.spec.submission.Submission` of a ``TaskSpec`` (its payload a
    :class:`Blob`), within the request limits."""
    check_spec(spec, limits)  # counts and lengths first: nothing below loops over more than they allow
    _check_message_size(spec, limits.max_message_bytes)
    data = bytes(spec.payload)
    if spec.deps and (bad := check_markers(data, spec.content_type, len(spec.deps), spec.kind)):
        raise InvalidArgument(bad)
    return from_wire(spec, Blob(data, spec.content_type))


STATUS_TO_WIRE = enums.STATUS_TO_WIRE


def _ns(tb: int, v: int | None) -> int | None:
    return None if v is None else tb + v


def task_info(t: TaskState, pool: str, max_attempts: int, time_base: int) -> pb.TaskInfo:
    info = pb.TaskInfo(
        id=t.id,
        status=_enum(STATUS_TO_WIRE[t.status]),
        pool=pool,
        key=t.key or "",
        kind=t.opts.kind,
        attempt=t.attempt,
        max_attempts=max_attempts,
        message=t.message or "",
        output_available=t.status == SUCCEEDED and isinstance(t.output, Blob),
        tenant=t.opts.tenant or "",
        priority=_enum(enums.PRIORITY_TO_WIRE[t.opts.priority]),
        tags=t.opts.tags or {},
    )
    info.created_unix_ns = time_base + t.created_at
    if t.started_at is not None:
        info.started_unix_ns = time_base + t.started_at
    if t.finished_at is not None and t.status >= FIRST_TERMINAL:
        info.finished_unix_ns = time_base + t.finished_at
    replay_links(info, t)
    return info


def count_statuses(
    out: MutableMapping[str, int], ids: Iterable[int], lookup: Callable[[int], TaskState | None]
) -> None:
    """``out[status] += 1`` for each of the tasks ``ids`` ("unknown": no longer retained), the
    summary of a wide fan-in (``TaskInfo.parent_statuses`` / ``child_statuses``)."""
    for tid in ids:
        t = lookup(tid)
        name = STATUS_NAMES[t.status] if t is not None else "unknown"
        out[name] = out.get(name, 0) + 1


def replay_links(info: pb.TaskInfo, t: TaskState) -> None:
    """``replay_of`` / ``replayed_by`` of ``t`` on its TaskInfo (docs/how-to/operations.md#replay)."""
    of = replay_of(t)
    if of is not None:
        info.replay_of = of
    by = replayed_by(t)
    if by is not None:
        info.replayed_by = by


#: The kind of a task submitted without one (it has no name).
DEFAULT_KIND = "default"


def _unix_ns(seconds: float) -> int:
    return round(seconds * 1e9)


def add_extras(info: pb.TaskInfo, extras: TaskExtras) -> pb.TaskInfo:
    """``info`` with what the engine keeps beside the task record (docs/how-to/progress.md):
    progress, attempt timeline, dependency links (``TaskInfo`` fields 15 and 18-20), why it is
    not running (48), and the name (21): the kind a task was given (a named task's kind is its
    name), "" for the default kind."""
    p = extras.progress
    if p is not None:
        prog = info.progress
        prog.done = p.done
        if p.total is not None:
            prog.total = p.total
        if p.message:
            prog.message = p.message
        prog.at_unix_ns = _unix_ns(p.at)
        prog.attempt = p.attempt
    for a in extras.attempts:
        ai = info.attempts.add(number=a.number, worker=a.worker, outcome=a.outcome, message=a.message or "")
        if a.started_at is not None:
            ai.started_unix_ns = _unix_ns(a.started_at)
        if a.ended_at is not None:
            ai.ended_unix_ns = _unix_ns(a.ended_at)
    info.parents.extend(extras.parents)
    info.children.extend(extras.children)
    info.waiting = extras.waiting
    if info.kind and info.kind != DEFAULT_KIND:  # a named task's kind is its name
        info.name = info.kind
    return info


def add_parent_outcomes(
    info: pb.TaskInfo, outcomes: Iterable[tuple[int, str | None, str, Any, str | None]]
) -> None:
    """``info.parent_outcomes`` (GetTask): how each parent ended, in edge order (an output is
    available when it is a blob still held: engine/parents.py answers None once it is lost)."""
    for tid, key, status, output, message in outcomes:
        info.parent_outcomes.add(
            id=tid,
            key=key or "",
            status=status,
            message=message or "",
            output_available=isinstance(output, Blob),
        )


def progress_update(ev: ProgressEvent) -> pb.StatusEvent:
    """A progress event as the ``StatusEvent`` a Watch with ``progress`` sends: ``progress`` set,
    ``status`` running (progress is only ever published for a running attempt)."""
    msg = pb.StatusEvent(
        id=ev.id,
        pool=ev.pool,
        key=ev.key or "",
        status=pb.TASK_STATUS_RUNNING,
        attempt=ev.attempt,
        at_unix_ns=_unix_ns(ev.at),
    )
    up = msg.progress
    up.done = ev.done
    if ev.total is not None:
        up.total = ev.total
    if ev.message:
        up.message = ev.message
    return msg


def task_result(t: TaskState) -> pb.TaskResult:
    res = pb.TaskResult(id=t.id, status=_enum(STATUS_TO_WIRE[t.status]), message=t.message or "")
    if t.status == SUCCEEDED and isinstance(t.output, Blob):
        res.output = t.output.data
        res.output_available = True
    return res


def status_event(ev: StatusEvent) -> pb.StatusEvent:
    return pb.StatusEvent(
        id=ev.id,
        pool=ev.pool,
        key=ev.key or "",
        status=_enum(enums.TASK_STATUS.numbers[ev.status]),
        attempt=ev.attempt,
        at_unix_ns=round(ev.at * 1e9),
        message=ev.message or "",
    )


def snapshot_msg(snap: Snapshot, workers_by_pool: dict[str, int]) -> pb.SnapshotResponse:
    pools = []
    for p in snap.pools:
        pools.append(
            pb.PoolSnapshot(
                name=p.name,
                capacity=p.capacity,
                busy=p.busy,
                held=p.held,
                desired=p.desired,
                pending_by_class=list(p.pending_by_class),
                reservations=p.reservations,
                dispatched=p.dispatched,
                succeeded=p.succeeded,
                failed=p.failed,
                priority_adherence=p.priority_adherence,
                fixed_start_hit_rate=p.fixed_start_hit_rate,
                utilization=p.utilization,
                schedule_efficiency=p.schedule_efficiency,
                wait_p50_s=p.wait_p50,
                wait_p90_s=p.wait_p90,
                wait_p99_s=p.wait_p99,
                cost=p.cost,
                workers_connected=workers_by_pool.get(p.name, 0),
                groups=[pb.WorkerGroup(labels=g.labels, capacity=g.capacity, busy=g.busy) for g in p.groups],
                paused=p.paused,
                ready=p.ready,
            )
        )
    tot = snap.totals
    totals = pb.Totals(**{k: tot.get(k, 0) for k in pb.Totals.DESCRIPTOR.fields_by_name})
    return pb.SnapshotResponse(
        pools=pools,
        live_tasks=snap.live_tasks,
        running=snap.running,
        pending=snap.pending,
        totals=totals,
        workers_connected=sum(workers_by_pool.values()),
        resources=[_resource_use(r) for r in snap.resources],
    )


def _resource_use(r: ResourceSnapshot) -> pb.ResourceUse:
    return pb.ResourceUse(
        name=r.name, kind=r.kind, capacity=r.capacity, in_use=r.in_use, waiting=r.waiting,
        per_key=r.per_key, keys=r.keys,
    )  # fmt: skip


def resource_keys_msg(resource: str, keys: list[ResourceKey]) -> pb.ResourceKeysResponse:
    """The busiest keys of a keyed resource (``ListResourceKeys``, ``GET /v1/resources/{name}/keys``)."""
    return pb.ResourceKeysResponse(
        resource=resource,
        keys=[pb.ResourceKeyInfo(key=k, running=r, waiting=w, limit=n) for k, r, w, n in keys],
    )


def worker_info(s: WorkerSession) -> pb.WorkerInfo:
    """A connected worker session as listed (``ListWorkers``, ``GET /v1/workers``)."""
    return pb.WorkerInfo(
        id=s.id,
        name=s.name,
        pool=s.pool,
        labels=s.labels,
        kinds=sorted(s.kinds or ()),
        slots=s.slots,
        busy=s.busy,
        connected_unix_ns=s.connected_unix_ns,
    )


def recurring_msg(info: RecurringInfo) -> pb.RecurringInfo:
    """A schedule as listed (``RecurringInfo``): cron/tz echo what was given
    (docs/reference/behaviour.md#server-details)."""
    msg = pb.RecurringInfo(
        name=info.name,
        cron=info.cron,
        tz=info.tz or "",
        pool=info.pool,
        kind=info.kind,
        overlap=_enum(enums.OVERLAP.numbers.get(info.overlap, 1)),
    )
    if info.next_unix_ns is not None:
        msg.next_unix_ns = info.next_unix_ns
    if info.last_task_id:
        msg.last_task_id = info.last_task_id
    if getattr(info, "paused", False):
        msg.paused = True
    msg.skipped_paused = getattr(info, "skipped_paused", 0)
    return msg


def cond_name(cond: int) -> str:
    return COND_NAMES[cond]
