"""A finished task after the engine's retention, read back from the durable store's history.

Theory of operation
-------------------
The engine keeps a finished task for ``limits.key_retention_s`` (an hour by default): its key,
its late dependents and its lookups.  A durable store keeps the task's row, with its output,
for ``store.keep_finished_s`` (seven days by default), pruned about once a minute by the
leader (``store.base.keep_leading``: one indexed ``DELETE`` of what finished before the
window, a minute's worth of rows, except the rows live state still refers to:
``store._records.prune_refs``).  When a lookup by id misses the engine, the HTTP routes
``GET /v1/tasks/{id}`` and ``GET /v1/tasks/{id}/result`` and gRPC ``Get`` and ``Wait`` read that row
(:func:`finished_from_store`: one primary-key read, ``load_finished`` of the SQLite and
PostgreSQL stores) and answer from it, with the visibility rules of a live task (another
tenant's or pool's task stays "unknown").  A lookup by key reads the newest finished row of
that key and tenant (``load_finished_key``: an index lookup on ``cronoq_tasks_key``, a partial
index of the keyed rows, at most ``KEY_HISTORY_ROWS`` rows read since a key is reused once
the engine forgets it and the tenant lives in the definition); a key a live or retained task
holds is answered by the engine first, as always.  A replay (``ops.replay``) rebuilds the
task from the same row.  The answer carries what the row records: status,
attempt, times, message, output, and from the task's definition its tags, name and
max_attempts; not the edges, the progress or the attempt log, which only the engine kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cronoq.engine.model import STATUS_NAMES
from cronoq.engine.replay import REPLAY_TAG
from cronoq.errors import SchedulerError
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server.app import store_read_failure
from cronoq.server.convert import DEFAULT_KIND
from cronoq.server.workers import Blob
from cronoq.spec import json_shapes

if TYPE_CHECKING:
    from cronoq.engine.mutations import RecoveredTerminal
    from cronoq.server.app import ServerApp
    from cronoq.server.auth import Principal

__all__ = ["finished_from_store", "history_info", "history_result", "history_task_result"]


async def finished_from_store(
    app: ServerApp, principal: Principal | None, ref: int | str, codec: Any, tenant: str | None = None
) -> RecoveredTerminal | None:
    """The caller's finished task ``ref`` (an id, or a key of the caller's tenant, else of
    ``tenant``) from the store's history; None when there is no durable store, no such row, or
    the caller may not see it.  A failed read is ``app.store_read_failure``'s ApiError."""
    store = app.require_leader().seam.store
    rec: RecoveredTerminal | None
    try:
        if isinstance(ref, int):
            load = getattr(store, "load_finished", None)
            if load is None:
                return None
            rec = await load(ref, codec)
        else:
            load_key = getattr(store, "load_finished_key", None)
            if load_key is None:
                return None
            if principal is not None and principal.tenant is not None:
                tenant = principal.tenant
            rec = await load_key(ref, tenant or None, codec)
    except SchedulerError as e:  # (a read: nothing changed, and the answer says so)
        raise store_read_failure(e) from None
    if rec is None or principal is None:
        return rec
    if principal.pools is not None and rec.pool not in principal.pools:
        return None
    if principal.tenant is not None and rec.tenant != principal.tenant:
        return None
    return rec


def history_info(app: ServerApp, rec: RecoveredTerminal) -> pb.TaskInfo:
    """The ``TaskInfo`` of a task from its stored row (times are Unix ns already), with what
    its definition records as a retained task's answer has it: tags, name and max_attempts
    (its own retry policy, else its pool's)."""
    info = pb.TaskInfo(
        id=rec.id,
        status=enums.STATUS_TO_WIRE[STATUS_NAMES.index(rec.status)],  # type: ignore[arg-type]
        pool=rec.pool,
        key=rec.key or "",
        kind=rec.kind,
        attempt=rec.attempt,
        message=rec.message or "",
        output_available=isinstance(rec.output, Blob),
        tenant=rec.tenant or "",
        priority=enums.PRIORITY_TO_WIRE[rec.priority],  # type: ignore[arg-type]
        created_unix_ns=rec.arrival,
        finished_unix_ns=rec.finished,
    )
    if rec.started is not None:
        info.started_unix_ns = rec.started
    if rec.replay_of is not None:
        info.replay_of = rec.replay_of
    opts = None if rec.spec is None else rec.spec.options()
    if opts is not None and opts.tags:
        info.tags.update(opts.tags)
    elif opts is None and rec.replay_of is not None:
        info.tags[REPLAY_TAG] = str(rec.replay_of)
    retry = None if opts is None else opts.retry
    pools = app.require_leader().pools
    if retry is None and rec.pool in pools:
        retry = app.require_leader().seam.pool_at(pools.index(rec.pool)).config.retry
    if retry is not None:
        info.max_attempts = retry.max_attempts
    if rec.kind and rec.kind != DEFAULT_KIND:  # a named task's kind is its name (convert.add_extras)
        info.name = rec.kind
    return info


def history_task_result(rec: RecoveredTerminal) -> pb.TaskResult:
    """The gRPC ``Wait`` answer of a task from its stored row."""
    status = enums.STATUS_TO_WIRE[STATUS_NAMES.index(rec.status)]
    res = pb.TaskResult(id=rec.id, status=status, message=rec.message or "")  # type: ignore[arg-type]
    if rec.status == "succeeded" and isinstance(rec.output, Blob):
        res.output = rec.output.data
        res.output_available = True
    return res


def history_result(rec: RecoveredTerminal) -> dict[str, Any]:
    """The ``/result`` body of a task from its stored row."""
    out = rec.output if isinstance(rec.output, Blob) and rec.status == "succeeded" else None
    return json_shapes.result_json(
        rec.id,
        rec.status,
        output=None if out is None else out.data,
        content_type="" if out is None else out.content_type,
        message=rec.message or "",
    )
