"""The routing layer in front of the local ``Tasks`` / ``Admin`` handlers (docs/how-to/shards.md).

Theory of operation
-------------------
:func:`Router.wrap` replaces every method of a servicer that :data:`ROUTES` names with a
routed one; the table maps a method to its ownership rule, so a new RPC is routed by adding one
line.  Without shards, and for a call that carries ``cronoq-forwarded`` (it was forwarded here
and is never forwarded again), the local handler runs unchanged.  Otherwise the rule decides:

* ``owner``: the shard of the request's pool (or task id, ``id >> 56``) runs it; another shard
  gets the call forwarded (:mod:`.peers`) or, when forwarding is not allowed, the call is
  refused with FAILED_PRECONDITION and ``cronoq-shard`` / ``cronoq-shard-endpoint``;
* a task *key* is looked up on every shard: the local match wins, else the lowest shard
  number's; then the call goes to that shard;
* ``SubmitBatch`` goes whole to its one shard (a batch spanning shards is INVALID_ARGUMENT:
  batches are atomic); ``SubmitMany`` is split per item and put back together in order;
* ``ListTasks``, ``Snapshot``, ``ListWorkers``, ``ListRecurring``, ``RemoveRecurring`` fan
  out and merge; a shard that does not answer is named in ``unavailable_shards``;
* ``Watch`` merges the local stream with every peer's (re-opened when they break);
* operations: ``Replay`` goes to its task's shard, ``PausePool`` / ``ResumePool`` to the
  pool's; a schedule's pause, resume and run go to the shard that knows the name (local
  first, then the peers in number order); ``ReplayWhere`` / ``CancelWhere`` run on each
  involved shard in turn (one ``limit`` across them), counts summed, unreached shards named.

A local part of a merged answer runs the local handler with a :class:`LocalContext`, whose
``abort`` raises instead of ending the call.  The HTTP routes (:mod:`.http_routes`) call
:meth:`Router.call` with a request message and the caller's ``authorization`` header.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
import grpc.aio

from cronoq.engine.time import next_backoff
from cronoq.errors import SubmitError
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server.app import ApiError, ServerApp
from cronoq.server.config import ShardSpec
from cronoq.server.grpc_api import add_service_layer, grpc_status
from cronoq.server.shards.peers import PeerError, Peers, Unreachable
from cronoq.server.shards.topology import (
    FORWARDED_KEY,
    SERVED_BY_KEY,
    TO_SHARD_KEY,
    Topology,
    WrongShard,
    not_this_shard,
)

log = logging.getLogger("cronoq.server.shards")

__all__ = ["ROUTES", "LocalContext", "Routed", "Router", "check_task", "grpc_error", "routed"]

Handler = Callable[[Any, Any], Awaitable[Any]]


def _metadata_value(metadata: Any, key: str) -> str | None:
    for k, v in metadata or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("latin-1")
    return None


class LocalContext:
    """A servicer context for a local handler whose answer is part of a merged one: ``abort``
    raises :class:`PeerError` (with the handler's original exception) instead of ending the
    caller's call; ``send_initial_metadata`` marks a stream as live."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata
        self.live = asyncio.Event()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> NoReturn:
        raise PeerError(code, details, tuple(trailing_metadata or ()), cause=sys.exc_info()[1])

    async def send_initial_metadata(self, metadata: Any) -> None:
        self.live.set()

    def set_trailing_metadata(self, metadata: Any) -> None:
        pass

    def peer(self) -> str:
        return "local"

    def auth_context(self) -> dict[str, Any]:
        return {}


@dataclass
class Routed:
    """One call being routed: its method, request, the caller's context and token, and the
    local handler."""

    router: Router
    path: str
    request: Any
    context: Any
    local: Handler
    authorization: str | None

    @property
    def top(self) -> Topology:
        return self.router.top

    def response_cls(self, path: str | None = None) -> Any:
        return self.router.response_cls(path or self.path)

    async def run_local(self, request: Any, path: str | None = None) -> Any:
        """The local handler's answer for ``request``, its errors as :class:`PeerError`."""
        handler = self.local if path is None or path == self.path else self.router.local[path]
        md: tuple[tuple[str, str], ...] = ()
        if self.authorization:
            md = (("authorization", self.authorization),)
        return await handler(request, LocalContext(md))

    async def ask(self, shard: ShardSpec | None, request: Any, path: str | None = None) -> Any:
        """``request`` answered by ``shard`` (local or forwarded); errors raised as
        :class:`PeerError` / :class:`Unreachable` / :class:`WrongShard`."""
        if self.top.is_local(shard):
            return await self.run_local(request, path)
        assert shard is not None
        if not self.router.may_forward(shard, self.authorization):
            raise WrongShard(f"shard '{shard.name}' is at {shard.endpoint}", shard)
        p = path or self.path
        return await self.router.peers.unary(
            shard, p, request, self.response_cls(p), self.authorization, self.router.timeout(request)
        )

    async def send(self, shard: ShardSpec | None, refusal: Callable[[ShardSpec], WrongShard]) -> Any:
        """The whole call run by ``shard``: locally with the caller's context, else forwarded
        (or refused with ``refusal()`` when forwarding is not allowed)."""
        if self.top.is_local(shard):
            return await self.local(self.request, self.context)
        assert shard is not None
        if not self.router.may_forward(shard, self.authorization):
            raise refusal(shard)
        return await self.router.peers.unary(
            shard,
            self.path,
            self.request,
            self.response_cls(),
            self.authorization,
            self.router.timeout(self.request),
        )


Rule = Callable[[Routed], Awaitable[Any]]


# ---------------------------------------------------------------------------------------------
# checks on submissions


def check_task(top: Topology, spec: pb.TaskSpec, owner: ShardSpec | None) -> None:
    """A dependency or a resource of another shard than the task's pool (DAGs and resources
    stay within a shard)."""
    if owner is None:
        return
    pool = spec.pool or top.config.default_pool
    for dep in spec.deps:
        if dep.target.WhichOneof("target") != "id":
            continue
        other = top.of_id(dep.target.id)
        if other is not None and other is not owner:
            msg = (
                f"dependency on task {dep.target.id} of shard '{other.name}': pool '{pool}' is served "
                f"by shard '{owner.name}' (a task's dependencies must be in its own shard)"
            )
            raise ApiError.from_submit(SubmitError("unknown_dependency", msg))
    for name in spec.resources:
        other = top.of_resource(name)
        if other is not None and other is not owner:
            msg = (
                f"resource '{name}' belongs to shard '{other.name}': pool '{pool}' is served by "
                f"shard '{owner.name}' (a pool may use only its own shard's resources)"
            )
            raise ApiError("invalid_argument", msg, "unknown_resource")


# ---------------------------------------------------------------------------------------------
# rules


def owner_of_pool(get_spec: Callable[[Any], pb.TaskSpec]) -> Rule:
    """The call belongs to the shard of its task's pool."""

    async def rule(c: Routed) -> Any:
        spec = get_spec(c.request)
        shard = c.top.of_pool(spec.pool)
        check_task(c.top, spec, shard)
        return await c.send(shard, lambda s: c.top.pool_refusal(spec.pool, s))

    return rule


async def _find_key(c: Routed, ref: pb.TaskRef) -> tuple[ShardSpec | None, Any]:
    """The shard holding key ``ref`` (local match first, else the lowest shard number's) and
    its ``TaskInfo``; raises the local NOT_FOUND when no shard has it."""
    get = pb.GetRequest(task=ref)
    path = "/cronoq.v1.Tasks/Get"
    try:
        return c.top.own, await c.run_local(get, path)
    except PeerError as e:
        if e.code != grpc.StatusCode.NOT_FOUND:
            raise
        not_found = e
    peers = [s for s in c.top.peers if c.router.may_forward(s, c.authorization)]
    answers = await asyncio.gather(*(c.ask(s, get, path) for s in peers), return_exceptions=True)
    unreachable: Unreachable | None = None
    for shard, a in zip(peers, answers, strict=True):
        if isinstance(a, Unreachable):
            unreachable = unreachable or a
        elif isinstance(a, PeerError) and a.code == grpc.StatusCode.NOT_FOUND:
            continue
        elif isinstance(a, BaseException):
            raise a
        else:
            return shard, a
    if unreachable is not None:
        raise unreachable
    raise not_found


def owner_of_ref(get_ref: Callable[[Any], pb.TaskRef]) -> Rule:
    """The call belongs to the shard of its task: by id (``id >> 56``) or by key (every shard
    asked)."""

    async def rule(c: Routed) -> Any:
        ref = get_ref(c.request)
        if ref.WhichOneof("target") == "id":
            shard = c.top.of_id(ref.id)
            return await c.send(shard, lambda s: c.top.task_refusal(ref.id, s))
        if not ref.key:
            return await c.local(c.request, c.context)
        shard, info = await _find_key(c, ref)
        if c.path == "/cronoq.v1.Tasks/Get":
            if c.top.is_local(shard):
                return await c.local(c.request, c.context)
            return info
        return await c.send(shard, lambda s: c.top.task_refusal(info.id, s))

    return rule


async def submit_batch(c: Routed) -> Any:
    """Whole to its one shard; a batch spanning shards is refused (batches are atomic)."""
    owners: dict[str, ShardSpec] = {}
    first: dict[str, str] = {}
    for spec in c.request.tasks:
        shard = c.top.of_pool(spec.pool)
        if shard is None:
            return await c.local(c.request, c.context)  # (the local handler names the unknown pool)
        check_task(c.top, spec, shard)
        if shard.name not in owners:
            owners[shard.name] = shard
            first[shard.name] = spec.pool or c.top.config.default_pool
    if len(owners) > 1:
        parts = [f"pool '{first[name]}' is served by shard '{name}'" for name in owners]
        raise ApiError(
            "invalid_argument", f"a batch must stay within one shard ({', '.join(parts)})", "invalid"
        )
    if not owners:
        return await c.local(c.request, c.context)
    shard = next(iter(owners.values()))
    return await c.send(shard, lambda s: c.top.pool_refusal(first[s.name], s))


def _item_error(r: Any, e: BaseException) -> None:
    code, msg = grpc_error(e)
    r.error.code = code.name.lower()
    r.error.message = msg


async def submit_many(c: Routed) -> Any:
    """Each item to its shard (one sub-call per shard), answered in the request's order."""
    groups: dict[str | None, list[int]] = {}
    shards: dict[str | None, ShardSpec | None] = {}
    early: dict[int, BaseException] = {}
    for i, spec in enumerate(c.request.tasks):
        shard = c.top.of_pool(spec.pool)
        try:
            check_task(c.top, spec, shard)
        except ApiError as e:
            early[i] = e
            continue
        key = None if c.top.is_local(shard) else shard.name  # type: ignore[union-attr]
        groups.setdefault(key, []).append(i)
        shards[key] = shard
    if not early and list(groups) in ([None], []):
        return await c.local(c.request, c.context)

    async def part(key: str | None, idx: list[int]) -> Any:
        sub = pb.SubmitManyRequest(tasks=[c.request.tasks[i] for i in idx])
        shard = shards[key]
        if (
            shard is not None
            and not c.top.is_local(shard)
            and not c.router.may_forward(shard, c.authorization)
        ):
            raise c.top.pool_refusal(c.request.tasks[idx[0]].pool, shard)
        return await c.ask(shard, sub)

    keys = list(groups)
    answers = await asyncio.gather(*(part(k, groups[k]) for k in keys), return_exceptions=True)
    resp = pb.SubmitManyResponse()
    results: list[Any] = [None] * len(c.request.tasks)
    for i, err in early.items():
        r = pb.SubmitItemResult()
        _item_error(r, err)
        results[i] = r
    for key, a in zip(keys, answers, strict=True):
        for j, i in enumerate(groups[key]):
            if isinstance(a, BaseException):
                r = pb.SubmitItemResult()
                _item_error(r, a)
                results[i] = r
            else:
                results[i] = a.results[j]
    resp.results.extend(results)
    return resp


async def _gather(c: Routed, shards: list[ShardSpec | None], request: Any) -> list[Any]:
    """``request`` asked of every shard at once; each answer or its exception."""
    return await asyncio.gather(*(c.ask(s, request) for s in shards), return_exceptions=True)


def _all_shards(c: Routed) -> list[ShardSpec | None]:
    return list(c.top.shards)


def _fan_error(shard: ShardSpec | None, a: BaseException, unavailable: list[str]) -> None:
    """A shard's failure in a fan-out: unreachable (or not forwardable) shards are named, other
    errors are the answer."""
    if isinstance(a, (Unreachable, WrongShard)) and shard is not None:
        unavailable.append(shard.name)
        return
    raise a


def _shards_of(c: Routed, pools: list[str]) -> list[ShardSpec] | None:
    """The shards serving ``pools`` (every shard when empty), in shard-number order; None when
    a pool is unknown."""
    shards: list[ShardSpec] = []
    for p in pools:
        s = c.top.of_pool(p)
        if s is None:
            return None
        if s not in shards:
            shards.append(s)
    return sorted(shards if pools else c.top.shards, key=lambda s: s.number)


async def list_tasks(c: Routed) -> Any:
    """One ``after``/``limit`` cursor across shards: ids sort by shard, so shards are read in
    number order, each from where the cursor stands."""
    req = c.request
    wanted = list(req.pools)
    shards = _shards_of(c, wanted)
    if shards is None:
        return await c.local(req, c.context)  # (the local handler names the unknown pool)
    cap = c.router.app.limits.max_list
    n = min(100 if req.limit <= 0 else req.limit, cap)
    out = pb.ListTasksResponse()
    unavailable: list[str] = []
    more = False
    for s in shards:
        lo, hi = s.number << 56, (s.number + 1) << 56
        if req.after >= hi - 1:
            continue
        if len(out.tasks) >= n:
            more = True
            break
        sub = pb.ListTasksRequest()
        sub.CopyFrom(req)  # (every filter: statuses, kinds, tags, created range)
        del sub.pools[:]
        sub.pools.extend(p for p in wanted if c.top.of_pool(p) is s)
        sub.after = max(req.after, lo)
        sub.limit = n - len(out.tasks)
        try:
            a = await c.ask(s, sub)
        except (Unreachable, WrongShard, PeerError) as e:
            if isinstance(e, PeerError):
                raise
            unavailable.append(s.name)
            continue
        out.tasks.extend(a.tasks)
        if a.next_after:
            more = True
            break
    out.next_after = out.tasks[-1].id if more and out.tasks else 0
    out.unavailable_shards.extend(unavailable)
    return out


def _add_counts(dst: Any, src: Any) -> None:
    for f in src.DESCRIPTOR.fields:
        if f.type in (f.TYPE_UINT64, f.TYPE_UINT32, f.TYPE_INT64, f.TYPE_INT32):
            setattr(dst, f.name, getattr(dst, f.name) + getattr(src, f.name))


async def snapshot(c: Routed) -> Any:
    """Pools concatenated in config order, totals summed."""
    shards = _all_shards(c)
    answers = await _gather(c, shards, c.request)
    out = pb.SnapshotResponse()
    unavailable: list[str] = []
    pools: list[Any] = []
    for s, a in zip(shards, answers, strict=True):
        if isinstance(a, BaseException):
            _fan_error(s, a, unavailable)
            continue
        pools.extend(a.pools)
        out.resources.extend(a.resources)  # (each resource belongs to one shard)
        _add_counts(out, a)
        _add_counts(out.totals, a.totals)
        unavailable.extend(a.unavailable_shards)
    order = c.top.pool_order
    pools.sort(key=lambda p: order.get(p.name, len(order)))
    out.pools.extend(pools)
    out.unavailable_shards.extend(unavailable)
    return out


def concat(field: str, key: Callable[[Any], Any]) -> Rule:
    """Every shard's ``field`` items in one list (sorted by ``key``)."""

    async def rule(c: Routed) -> Any:
        shards = _all_shards(c)
        answers = await _gather(c, shards, c.request)
        out = c.response_cls()()
        unavailable: list[str] = []
        items: list[Any] = []
        for s, a in zip(shards, answers, strict=True):
            if isinstance(a, BaseException):
                _fan_error(s, a, unavailable)
                continue
            items.extend(getattr(a, field))
        items.sort(key=key)
        getattr(out, field).extend(items)
        out.unavailable_shards.extend(unavailable)
        return out

    return rule


async def signal(c: Routed) -> Any:
    """``Signal`` sent to every shard (a waiting task may be on any of them); a duplicate when
    every shard that answered already had it; unreached shards named (they did not get it)."""
    shards = _all_shards(c)
    answers = await _gather(c, shards, c.request)
    out = pb.SignalResponse()
    unavailable: list[str] = []
    dup = True
    for s, a in zip(shards, answers, strict=True):
        if isinstance(a, BaseException):
            _fan_error(s, a, unavailable)
            continue
        dup = dup and a.duplicate
    out.duplicate = dup and len(unavailable) < len(shards)
    out.unavailable_shards.extend(unavailable)
    return out


async def remove_recurring(c: Routed) -> Any:
    """Removed wherever the schedule is (names are per shard); the shards that did not answer
    are named in ``unavailable_shards`` (the schedule may be on one of them)."""
    shards = _all_shards(c)
    answers = await _gather(c, shards, c.request)
    removed = False
    unavailable: list[str] = []
    for s, a in zip(shards, answers, strict=True):
        if isinstance(a, BaseException):
            _fan_error(s, a, unavailable)
            continue
        removed = removed or a.removed
    return pb.RemoveRecurringResponse(removed=removed, unavailable_shards=unavailable)


def owner_of_named_pool(get_pool: Callable[[Any], str]) -> Rule:
    """The call belongs to the shard of the pool it names (an unknown pool: the local
    handler's NOT_FOUND)."""

    async def rule(c: Routed) -> Any:
        pool = get_pool(c.request)
        shard = c.top.of_pool(pool) if pool else None
        return await c.send(shard, lambda s: c.top.pool_refusal(pool, s))

    return rule


async def owner_of_resource(c: Routed) -> Any:
    """``ListResourceKeys`` belongs to the shard of the resource it names (an unknown one: the
    local handler's NOT_FOUND)."""
    name = c.request.resource
    shard = c.top.of_resource(name) if name else None
    return await c.send(
        shard, lambda s: WrongShard(f"resource '{name}' belongs to shard '{s.name}' at {s.endpoint}", s)
    )


async def named_schedule(c: Routed) -> Any:
    """The shard holding schedule ``request.name`` (it lives on its pool's shard): the local
    shard first, then the peers in shard-number order until one knows it (the first to know
    it acts); the local NOT_FOUND when none does, UNAVAILABLE when a peer that might have it
    was not reached."""
    try:
        return await c.run_local(c.request)
    except PeerError as e:
        if e.code != grpc.StatusCode.NOT_FOUND:
            raise
        not_found = e
    unreachable: Unreachable | None = None
    for shard in sorted(c.top.peers, key=lambda s: s.number):
        if not c.router.may_forward(shard, c.authorization):
            continue
        try:
            return await c.ask(shard, c.request)
        except Unreachable as e:
            unreachable = unreachable or e
        except PeerError as e:
            if e.code != grpc.StatusCode.NOT_FOUND:
                raise
    if unreachable is not None:
        raise unreachable
    raise not_found


async def bulk(c: Routed) -> Any:
    """``ReplayWhere`` / ``CancelWhere`` on the shards of ``filter.pools`` (every shard when
    empty), one after the other in shard-number order, each with the part of ``limit`` still
    left; counts summed, unreached shards named (a partial action still reports what it did).
    Each shard gets the same ``request_key`` (each is idempotent by itself, durably: a retry
    after a shard's failover answers what it did before, ``resumed`` when it finishes it)."""
    req = c.request
    wanted = list(req.filter.pools)
    shards = _shards_of(c, wanted)
    if shards is None:
        return await c.local(req, c.context)  # (the local handler names the unknown pool)
    limit = req.filter.limit
    out = pb.BulkResponse()
    for s in shards:
        if limit and out.matched >= limit:
            break
        sub = pb.BulkRequest()
        sub.CopyFrom(req)
        del sub.filter.pools[:]
        sub.filter.pools.extend(p for p in wanted if c.top.of_pool(p) is s)
        if limit:
            sub.filter.limit = limit - out.matched
        try:
            a = await c.ask(s, sub)
        except (Unreachable, WrongShard):
            out.unavailable_shards.append(s.name)
            continue
        except PeerError as e:
            if e.code != grpc.StatusCode.UNAVAILABLE or c.top.is_local(s):
                raise
            out.unavailable_shards.append(s.name)  # (e.g. a peer between leaders)
            continue
        out.matched += a.matched
        out.acted += a.acted
        out.resumed = out.resumed or a.resumed
    return out


async def watch(c: Routed) -> AsyncIterator[Any]:
    """Every involved shard's events merged; peers' streams re-opened when they break."""
    merge = _WatchMerge(c)
    tasks = merge.start(_watched_shards(c))
    try:
        await merge.until_live()
        await c.context.send_initial_metadata(())
        queue, end = merge.queue, merge.end
        while True:  # the queued events until the merge ends (and the queue is drained)
            if queue.empty() and end.done():
                break
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, end}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        err = end.result()
        if err is not None:
            raise err
    finally:
        for t in tasks:
            t.cancel()


def _watched_shards(c: Routed) -> list[ShardSpec | None]:
    """The shards that own the watched pools (every shard without a pool filter; this one alone
    when a pool is not in the topology: its handler gives the answer)."""
    req = c.request
    if not req.pools:
        return list(c.top.shards)
    involved: list[ShardSpec | None] = []
    for p in req.pools:
        s = c.top.of_pool(p)
        if s is None:
            return [c.top.own]
        if s not in involved:
            involved.append(s)
    return involved


class _WatchMerge:
    """The merged stream of one routed Watch: the local handler's stream and one per peer shard
    feed one queue; ``end`` holds the error that ends the merged stream (None: the local stream
    ended), and each source's ``live`` event is set once its stream is open."""

    def __init__(self, c: Routed) -> None:
        self.c = c
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=4096)
        self.end: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self.local_ctx = LocalContext((("authorization", c.authorization),) if c.authorization else ())
        self.live: list[asyncio.Event] = [self.local_ctx.live]

    def finish(self, e: BaseException | None) -> None:
        if not self.end.done():
            self.end.set_result(e)

    def start(self, involved: list[ShardSpec | None]) -> list[asyncio.Task[None]]:
        """Open the local stream (if this shard is involved) and one per peer the caller may
        reach; the tasks that feed the queue."""
        c = self.c
        tasks: list[asyncio.Task[None]] = []
        if any(c.top.is_local(s) for s in involved):
            tasks.append(asyncio.ensure_future(self.local()))
        else:
            self.local_ctx.live.set()
        for s in involved:
            if s is not None and not c.top.is_local(s) and c.router.may_forward(s, c.authorization):
                ev = asyncio.Event()
                self.live.append(ev)
                tasks.append(asyncio.ensure_future(self.peer(s, ev)))
        return tasks

    async def until_live(self) -> None:
        """Wait (a bounded time) until every stream is open; raise what ended the merge already."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(5.0, self.c.router.app.limits.request_timeout_s)):
                await asyncio.gather(*(e.wait() for e in self.live))
        if self.end.done() and self.end.result() is not None:
            raise self.end.result()  # type: ignore[misc]

    async def local(self) -> None:
        c, req = self.c, self.c.request
        try:
            mine = pb.WatchRequest()
            mine.CopyFrom(req)
            if req.pools:  # (the local handler knows this shard's pools only)
                del mine.pools[:]
                mine.pools.extend(p for p in req.pools if c.top.is_local(c.top.of_pool(p)))
            stream: Any = c.local(mine, self.local_ctx)
            async for msg in stream:
                await self.queue.put(msg)
        except PeerError as e:
            self.finish(e)
        except Exception as e:  # pragma: no cover - defensive
            self.finish(e)
        else:
            self.finish(None)

    async def peer(self, shard: ShardSpec, ready: asyncio.Event) -> None:
        c, req = self.c, self.c.request
        sub = pb.WatchRequest()
        sub.CopyFrom(req)  # (every option: ids, keys, all_transitions, progress)
        del sub.pools[:]
        sub.pools.extend(p for p in req.pools if c.top.of_pool(p) is shard)
        delay = 0.1
        while True:
            try:
                async for msg in c.router.peers.stream(shard, c.path, sub, pb.StatusEvent, c.authorization):
                    if msg is None:
                        ready.set()
                        delay = 0.1
                        continue
                    await self.queue.put(msg)
            except asyncio.CancelledError:
                raise
            except PeerError as e:
                if e.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    self.finish(e)
                    return
            except Exception:
                pass
            ready.set()  # (an unreachable peer does not hold the stream back)
            await asyncio.sleep(delay)
            delay = next_backoff(delay, 0.1, 2.0)


#: method → ownership rule (a method not listed runs locally, as without shards)
ROUTES: dict[str, Rule | Callable[[Routed], AsyncIterator[Any]]] = {
    "/cronoq.v1.Tasks/Submit": owner_of_pool(lambda r: r.task),
    "/cronoq.v1.Tasks/SubmitMany": submit_many,
    "/cronoq.v1.Tasks/SubmitBatch": submit_batch,
    "/cronoq.v1.Tasks/Cancel": owner_of_ref(lambda r: r.task),
    "/cronoq.v1.Tasks/Get": owner_of_ref(lambda r: r.task),
    "/cronoq.v1.Tasks/Wait": owner_of_ref(lambda r: r.task),
    "/cronoq.v1.Tasks/ListTasks": list_tasks,
    "/cronoq.v1.Tasks/Watch": watch,
    "/cronoq.v1.Admin/Snapshot": snapshot,
    "/cronoq.v1.Admin/AddRecurring": owner_of_pool(lambda r: r.template),
    "/cronoq.v1.Admin/RemoveRecurring": remove_recurring,
    "/cronoq.v1.Admin/ListWorkers": concat("workers", lambda w: (w.pool, w.id)),
    "/cronoq.v1.Admin/ListRecurring": concat("schedules", lambda s: s.name),
    "/cronoq.v1.Admin/ListResourceKeys": owner_of_resource,
    # operations (docs/how-to/shards.md#operations-across-shards)
    "/cronoq.v1.Tasks/Replay": owner_of_ref(lambda r: r.task),
    "/cronoq.v1.Tasks/ReplayWhere": bulk,
    "/cronoq.v1.Tasks/CancelWhere": bulk,
    "/cronoq.v1.Tasks/Signal": signal,
    "/cronoq.v1.Admin/PausePool": owner_of_named_pool(lambda r: r.pool),
    "/cronoq.v1.Admin/ResumePool": owner_of_named_pool(lambda r: r.pool),
    "/cronoq.v1.Admin/PauseRecurring": named_schedule,
    "/cronoq.v1.Admin/ResumeRecurring": named_schedule,
    "/cronoq.v1.Admin/TriggerRecurring": named_schedule,
}

#: methods whose requests carry a wait bound (the forwarded call's deadline grows by it)
_WAITS = {"timeout_s", "wait_timeout_s"}


def grpc_error(e: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(e, WrongShard):
        return grpc.StatusCode.FAILED_PRECONDITION, e.message
    if isinstance(e, Unreachable):
        return grpc.StatusCode.UNAVAILABLE, e.message
    if isinstance(e, PeerError):
        return e.code, e.details
    if isinstance(e, ApiError):
        return grpc_status(e.status), e.message
    return grpc.StatusCode.INTERNAL, f"internal error: {type(e).__name__}: {e}"


class Router:
    """Routes the calls of a sharded server (see the module docstring)."""

    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.top = Topology(app.config)
        self.peers = Peers(app.config)
        #: the local (unrouted) handlers by method path
        self.local: dict[str, Handler] = {}
        own = self.top.own
        self.served_by: tuple[tuple[str, str], ...] = ((SERVED_BY_KEY, own.name),) if own else ()
        self._methods = {
            f"/cronoq.v1.{svc.name}/{m.name}": m
            for svc in pb.DESCRIPTOR.services_by_name.values()
            for m in svc.methods
        }

    def response_cls(self, path: str) -> Any:
        return getattr(pb, self._methods[path].output_type.name)

    def timeout(self, request: Any) -> float:
        """A forwarded call's deadline: ``peer_timeout_s``, plus the wait it asks for."""
        limits = self.app.limits
        fields = request.DESCRIPTOR.fields_by_name
        waits = [f for f in _WAITS if f in fields]
        if not waits or ("wait" in fields and not request.wait):
            return limits.peer_timeout_s
        f = waits[0]
        wait = min(getattr(request, f), limits.max_wait_s) if request.HasField(f) else limits.max_wait_s
        return limits.peer_timeout_s + max(wait, 0.0)

    def may_forward(self, shard: ShardSpec, authorization: str | None) -> bool:
        """Forwarding is allowed by the peer rule, and only with a bearer token when auth is on
        (certificate principals are never forwarded)."""
        if self.app.auth.auth_enabled and not authorization:
            return False
        return self.peers.allowed(shard)

    def wrap(self, servicer: Any, service: str) -> Any:
        """Route ``servicer``'s methods that :data:`ROUTES` names (no-op without shards)."""
        if not self.top.sharded:
            return servicer
        for m in pb.DESCRIPTOR.services_by_name[service].methods:
            path = f"/cronoq.v1.{service}/{m.name}"
            rule = ROUTES.get(path)
            if rule is None:
                continue
            original = getattr(servicer, m.name)
            self.local[path] = original
            if m.server_streaming:
                setattr(servicer, m.name, self._streaming(path, original, rule))
            else:
                setattr(servicer, m.name, self._unary(path, original, rule))  # type: ignore[arg-type]
        return servicer

    def _routed(self, path: str, request: Any, context: Any, local: Handler) -> Routed:
        md = context.invocation_metadata()
        return Routed(self, path, request, context, local, _metadata_value(md, "authorization"))

    async def check_forwarded(self, context: Any) -> bool:
        """Whether the call was forwarded by a peer; one meant for another shard than this
        server's is refused before it runs (UNAVAILABLE: the peer tries its next address)."""
        md = context.invocation_metadata()
        if _metadata_value(md, FORWARDED_KEY) is None:
            return False
        wanted = _metadata_value(md, TO_SHARD_KEY)
        own = self.top.own
        if wanted is not None and own is not None and wanted != own.name:
            log.error("refused a call forwarded for shard %r: this server is shard %r", wanted, own.name)
            await context.abort(grpc.StatusCode.UNAVAILABLE, not_this_shard(own.name, wanted))
        return True

    def _unary(self, path: str, original: Handler, rule: Rule) -> Handler:
        async def routed(request: Any, context: Any) -> Any:
            if await self.check_forwarded(context):
                context.set_trailing_metadata(self.served_by)  # (the caller checks who answered)
                return await original(request, context)
            try:
                return await rule(self._routed(path, request, context, original))
            except (WrongShard, Unreachable, PeerError, ApiError) as e:
                await abort(context, e)

        return routed

    def _streaming(self, path: str, original: Any, rule: Any) -> Any:
        async def routed(request: Any, context: Any) -> AsyncIterator[Any]:
            if await self.check_forwarded(context):
                async for msg in original(request, context):
                    yield msg
                return
            try:
                async for msg in rule(self._routed(path, request, context, original)):
                    yield msg
            except (WrongShard, Unreachable, PeerError, ApiError) as e:
                await abort(context, e)

        return routed

    async def call(self, path: str, request: Any, authorization: str | None) -> Any:
        """``path`` routed for a caller that is not a gRPC call (the HTTP routes); errors raised
        as :class:`WrongShard` / :class:`Unreachable` / :class:`PeerError` / ``ApiError``."""
        rule = ROUTES[path]
        md: tuple[tuple[str, str], ...] = (("authorization", authorization),) if authorization else ()
        ctx = LocalContext(md)
        return await rule(Routed(self, path, request, ctx, self.local[path], authorization))  # type: ignore[misc]

    def worker_redirect(self, pool: str) -> WrongShard | None:
        """The refusal of a worker registering for another shard's pool (None: ours or
        unknown): it names the shard's address that led last (a worker sent to a dead one
        comes back here and is sent on to the leader after a failover)."""
        shard = self.top.of_pool(pool) if self.top.sharded and pool else None
        if shard is None or self.top.is_local(shard):
            return None
        return self.top.pool_refusal(pool, shard, self.peers.current(shard))

    def stream(
        self, path: str, request: Any, authorization: str | None
    ) -> tuple[LocalContext, AsyncIterator[Any]]:
        """A routed server stream for a caller that is not a gRPC call (``/v1/events``): the
        context (its ``live`` event is set once every shard's stream is live) and the
        messages; errors raised as for :meth:`call`."""
        rule: Any = ROUTES[path]
        md: tuple[tuple[str, str], ...] = (("authorization", authorization),) if authorization else ()
        ctx = LocalContext(md)
        return ctx, rule(Routed(self, path, request, ctx, self.local[path], authorization))

    async def close(self) -> None:
        await self.peers.close()


def routed(app: Any, servicer: Any, service: str) -> Any:
    """``servicer`` behind the app's :class:`Router` (created with the first service; unchanged
    without shards)."""
    config = getattr(app, "config", None)
    if config is None or not config.shards:
        return servicer
    if app.router is None:
        app.router = Router(app)
    return app.router.wrap(servicer, service)


async def abort(context: Any, e: BaseException) -> NoReturn:
    """End the call with ``e``'s status (a refusal with its shard metadata)."""
    code, msg = grpc_error(e)
    trailing: tuple[tuple[str, str], ...] = ()
    if isinstance(e, WrongShard):
        trailing = e.metadata
    elif isinstance(e, PeerError):
        trailing = tuple((k, v) for k, v in e.trailing if k.startswith("cronoq-") and k != SERVED_BY_KEY)
    await context.abort(code, msg, trailing_metadata=trailing)
    raise AssertionError("unreachable")


add_service_layer(routed)  # (the gRPC front end imports nothing of the shards)
