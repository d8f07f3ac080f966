"""Operator actions over the wire: pause/resume, run now, replay and bulk actions, with their
authorization (docs/how-to/operations.md; shared by ``grpc_api.py`` and ``http_api.py``).

Theory of operation
-------------------
The role of each action is checked by the caller's transport (the gRPC interceptor, the HTTP
route) before the request is read; here the *scope* is checked: a pool-restricted token may
pause only its pools and schedules of its pools (others answer as missing ones), replay only
its own tasks (another pool's or tenant's task is as unknown as a missing one), and a bulk
filter is narrowed to the token's pools (a filter naming another token's pool is NOT_FOUND,
as a missing pool: no existence oracle; no pool filter means the token's pools) and to its
tenant.  Engine errors map to wire statuses: an unknown pool, schedule or task is NOT_FOUND, a
bad filter INVALID_ARGUMENT, a refused replay FAILED_PRECONDITION with the
:class:`~cronoq.errors.ReplayError` code, a store failure UNAVAILABLE.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from cronoq.engine.bulk import BulkResult
from cronoq.errors import ArgumentTypeError, ReplayError, SchedulerError, SubmitError
from cronoq.server import task_history
from cronoq.server.app import ApiError, BlobCodec, store_failure
from cronoq.server.auth import PermissionDenied, Principal, allows_pool, restrict_pools

if TYPE_CHECKING:
    from cronoq.server.app import ServerApp

__all__ = [
    "FILTER_FIELDS",
    "bulk",
    "bulk_from_json",
    "filter_from_msg",
    "replay",
    "set_paused",
    "trigger",
]

T = TypeVar("T")

#: the list-valued filter keywords (counted against ``limits.max_filter_items``)
_LISTS = frozenset({"pools", "statuses", "kinds", "tags"})
#: the keyword arguments of a bulk filter (``Scheduler.cancel_where`` / ``replay_where``)
FILTER_FIELDS = (
    "pools",
    "statuses",
    "kinds",
    "tags",
    "tenant",
    "created_after",
    "created_before",
    "finished_after",
    "finished_before",
    "limit",
)


async def _run(aw: Callable[[], Awaitable[T]]) -> T:
    try:
        return await aw()
    except ReplayError as e:
        if e.code == "unknown_task":
            raise ApiError("not_found", e.message, e.code) from None
        raise ApiError("failed_precondition", e.message, e.code) from None
    except SubmitError as e:
        raise ApiError.from_submit(e) from None
    except ValueError as e:
        msg = str(e)
        if msg.startswith(("unknown pool", "unknown recurring schedule")):
            raise ApiError("not_found", msg) from None
        raise ApiError("invalid_argument", msg, "invalid") from None
    except SchedulerError as e:
        raise store_failure(e) from None


async def _schedule_pool(app: ServerApp, name: str) -> str:
    for info in await app.require_leader().list_recurring():
        if info.name == name:
            return str(info.pool)
    raise ApiError("not_found", f"unknown recurring schedule '{name}'")


async def set_paused(app: ServerApp, principal: Principal | None, kind: str, name: str, paused: bool) -> bool:
    """Pause or resume pool (``kind`` "pool") or recurring schedule ``name``; True if changed."""
    sched = app.require_leader()
    if kind == "pool":
        if name not in sched.pools or not allows_pool(principal, name):  # (no oracle)
            raise ApiError("not_found", f"unknown pool '{name}'")
        return await _run(lambda: sched.pause(name) if paused else sched.resume(name))
    if not allows_pool(principal, await _schedule_pool(app, name)):
        raise ApiError("not_found", f"unknown recurring schedule '{name}'")
    return await _run(lambda: sched.pause_recurring(name) if paused else sched.resume_recurring(name))


async def trigger(app: ServerApp, principal: Principal | None, name: str) -> int:
    """ "Run now" schedule ``name``: the new task's id."""
    sched = app.require_leader()
    if not allows_pool(principal, await _schedule_pool(app, name)):  # (no oracle, as set_paused)
        raise ApiError("not_found", f"unknown recurring schedule '{name}'")
    h = await _run(lambda: sched.trigger_recurring(name))
    return h.id


async def replay(
    app: ServerApp, principal: Principal | None, ref: int | str, force: bool, tenant: str | None = None
) -> int:
    """Replay the caller's task ``ref``: the new task's id."""
    sched = app.require_leader()
    try:
        tid = app.get(principal, ref, tenant).id  # (NOT_FOUND for another pool's or tenant's task)
    except ApiError as e:
        if e.status != "not_found":
            raise
        # forgotten by the engine: the store's history may still keep it (task_history.py)
        rec = await task_history.finished_from_store(app, principal, ref, BlobCodec(), tenant)
        if rec is None or (tenant and rec.tenant != tenant):
            raise
        tid = rec.id
    h = await _run(lambda: sched.replay(tid, force=force))
    return h.id


async def bulk(
    app: ServerApp,
    principal: Principal | None,
    action: str,
    filt: Mapping[str, Any],
    request_key: str,
    force: bool,
) -> BulkResult:
    """``action`` ("cancel" / "replay") every task matching ``filt`` (FILTER_FIELDS keywords)
    within the caller's pools and tenant."""
    sched = app.require_leader()
    sizes = [len(v) for k, v in filt.items() if k in _LISTS and isinstance(v, list | tuple | dict)]
    tags = filt.get("tags")
    app.check_filter(
        items=sum(sizes), kinds=filt.get("kinds") or (), tags=tags if isinstance(tags, dict) else None,
        request_key=request_key,
    )  # fmt: skip
    check_criteria(filt)
    kw = dict(filt)
    pools = list(kw.get("pools") or ())
    for p in pools:
        if p not in sched.pools or not allows_pool(principal, p):  # (no oracle)
            raise ApiError("not_found", f"unknown pool '{p}'")
    restricted = restrict_pools(principal, pools)  # (another token's pool was refused above)
    if not pools and restricted is not None:
        # the token's pools, of which a shard has only its own (docs/how-to/shards.md)
        restricted = [p for p in restricted if p in sched.pools]
        if not restricted:
            return BulkResult(0, 0)
    kw["pools"] = restricted
    if principal is not None and principal.tenant is not None:
        asked = kw.get("tenant")
        if asked and asked != principal.tenant:
            raise PermissionDenied(f"token is not allowed to act for tenant '{asked}'")
        kw["tenant"] = principal.tenant
    key = request_key or None
    if key is not None and principal is not None:
        key = f"{principal.name}:{key}"  # (tokens never share a request key)
    if not isinstance(force, bool):
        raise ArgumentTypeError("force must be a bool")
    if action == "replay":
        return await _run(lambda: sched.replay_where(**kw, force=force, request_key=key))
    return await _run(lambda: sched.cancel_where(**kw, request_key=key))


def filter_from_msg(f: Any) -> dict[str, Any]:
    """A ``TaskFilter`` message as bulk filter keywords (unset fields left out)."""
    from cronoq.engine.model import STATUS_NAMES

    kw: dict[str, Any] = {}
    if f.pools:
        kw["pools"] = list(f.pools)
    if f.statuses:
        names = []
        for v in f.statuses:
            if not 1 <= v <= len(STATUS_NAMES):
                raise ApiError("invalid_argument", f"unknown task status value {v}", "invalid")
            names.append(STATUS_NAMES[v - 1])
        kw["statuses"] = names
    if f.kinds:
        kw["kinds"] = list(f.kinds)
    if f.tags:
        kw["tags"] = dict(f.tags)
    if f.tenant:
        kw["tenant"] = f.tenant
    for name in ("created_after", "created_before", "finished_after", "finished_before"):
        field = f"{name}_unix_ns"
        if f.HasField(field):
            kw[name] = getattr(f, field) / 1e9
    if f.limit:
        kw["limit"] = int(f.limit)
    return kw


def _bad(message: str) -> ApiError:
    return ApiError("invalid_argument", message, "invalid_argument")


def check_criteria(filt: Mapping[str, Any]) -> None:
    """A bulk filter (FILTER_FIELDS keywords) has at least one criterion, and no ``pools``,
    ``kinds`` or ``statuses`` given as an empty list: never "any", which is what an empty list
    would become on the wire (the shard router forwards the filter over gRPC)."""
    if not any(v not in (None, (), [], {}) for v in filt.values()):
        raise ApiError("invalid_argument", "a bulk action needs at least one filter criterion", "invalid")
    for k in ("pools", "kinds", "statuses"):
        if filt.get(k) is not None and not filt[k]:  # (a list left empty)
            raise ApiError(
                "invalid_argument", f"{k} must not be empty (leave it out to match any)", "invalid"
            )


def bulk_from_json(body: Mapping[str, Any]) -> tuple[dict[str, Any], str, bool]:
    """``POST /v1/tasks:replay|cancel`` body (``http_bodies.BulkRequest``) -> ``(filter keywords,
    request_key, force)``; the first bad field in the body's order is reported."""
    from pydantic import ValidationError

    from cronoq.server import body_errors
    from cronoq.server.http_bodies import BulkRequest

    for k in body:
        if k not in BulkRequest.model_fields:
            raise _bad(f"unknown field '{k}' (expected filter, request_key, force)")
    f = body.get("filter")
    if not isinstance(f, dict) or not f:
        raise _bad("filter must be an object with at least one criterion")
    try:
        m = BulkRequest.model_validate(body)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        order = list(f)  # (the filter's criteria are checked in their order)
        errors.sort(
            key=lambda x: (
                x["loc"][0] != "filter",
                order.index(x["loc"][1]) if x["loc"][0] == "filter" else 0,
            )
        )
        first = errors[0]
        if first["type"] == "extra_forbidden":
            raise _bad(
                f"unknown filter field '{first['loc'][1]}' (expected {', '.join(FILTER_FIELDS)})"
            ) from None
        raise _bad(f"{body_errors.where_of('', first['loc'])} {first.get('ctx', {})['tail']}") from None
    kw = {k: getattr(m.filter, k) for k in m.filter.model_fields_set}
    if "tenant" in kw:
        kw["tenant"] = kw["tenant"] or None
    return kw, m.request_key, m.force
