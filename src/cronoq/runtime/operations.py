"""Operator actions of the in-process Scheduler: pause/resume, run now, replay and bulk
actions (docs/how-to/operations.md), and the busiest keys of a keyed resource.

Theory of operation
-------------------
:class:`Operations` is held by :class:`~cronoq.runtime.scheduler.Scheduler` (whose public
methods of the same names delegate to it): each method
validates its arguments, makes one engine call (``engine/control.py``, ``engine/replay.py``,
``engine/bulk.py``) at the loop's current instant, carries out the actions it produced
(``_settle``) and, with a durable store, returns only once they are committed.

Bulk actions (:meth:`Operations.cancel_where`, :meth:`Operations.replay_where`) run in pages
of :data:`~cronoq.engine.bulk.PAGE` tasks and sleep between pages for four times as long as
the page took (:data:`BULK_SHARE`): other submissions and reports interleave, the loop is never
held for more than a page, and a concurrent load keeps at least 80 % of its rate (a bulk
action alone takes five times its scheduler time in wall time; bench/bulk.py measures both).
A ``request_key`` makes a bulk call idempotent: the result of the first call with that key (per
action and tenant) is remembered among the last :data:`REQUEST_KEYS` keys and returned again; a
concurrent call with the same key waits for the first one.  With a durable store the key's
progress is persisted after every page (``bulk.note_key``) and read back at start
(:meth:`Operations._restore_bulk_keys`): a retry after a restart or a failover answers the
first call's result, or, when that call was interrupted, finishes it and answers the totals
with ``resumed`` set (the tasks it already replayed have a replay and are not matched again).
A replay with a durable store reads the original payload back from the store
(``store.load_payload``), since the engine drops ended tasks' payloads then.  A replay carries
no edges, so the placeholders of its parents' outputs in its payload (a chord's callback) are
filled when it is made (:meth:`Operations._payload`): from each parent's outcome, or its latest
replay's when that succeeded where the parent did not, read from the store's history when the
engine no longer retains it; the server fills its JSON blobs its own way (``_replay_fill``).

The store's history: a task the engine has forgotten (past ``key_retention``) but the store
still keeps is replayed from its row (``store.load_finished`` / ``load_finished_key``,
rebuilt by ``recovery.terminal_state``), and a bulk replay runs a second pass over the
history's pages, newest first (:meth:`Operations._replay_history`).  A failed read of a
task's row or payload (for a replay, a status or a handle) raises
:class:`~cronoq.store.base.StoreReadError` (:func:`_read`): it changed nothing, and the server
answers it as a read, not as a failed commit.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypedDict, TypeVar, Unpack

from cronoq.engine import bulk, control
from cronoq.engine import replay as _replay
from cronoq.engine.bulk import BulkResult
from cronoq.engine.keys import same_tenant
from cronoq.engine.model import (
    OUTPUT_LOST,
    STATUS_BY_NAME,
    STATUS_NAMES,
    SUCCEEDED,
    TaskState,
    check_stored_text,
)
from cronoq.engine.mutations import BULK_KEYS, BulkKeyChange, RecoveredTerminal
from cronoq.engine.parents import outcomes
from cronoq.engine.recovery import terminal_state
from cronoq.errors import ArgumentTypeError, Permanent, ReplayError, SchedulerError, SubmitError
from cronoq.outcome import Outcome
from cronoq.runtime.handles import TaskHandle, set_outcome
from cronoq.store.base import StoreReadError

if TYPE_CHECKING:
    from cronoq.engine.core import Core
    from cronoq.engine.keyed import ResourceKey
    from cronoq.runtime.scheduler import Scheduler

__all__ = [
    "BULK_SHARE",
    "FILTER_KEYWORDS",
    "REQUEST_KEYS",
    "BulkFilter",
    "BulkResult",
    "Operations",
    "parse_filter",
]

#: how many recent bulk request keys are remembered (idempotency; a durable store keeps as many)
REQUEST_KEYS: Final = BULK_KEYS
#: the most of the loop's time a bulk action takes while it runs (it sleeps between pages)
BULK_SHARE: Final = 0.2

T = TypeVar("T")


async def _read(aw: Awaitable[T]) -> T:
    """``aw``, a read of the store: its failure is a :class:`StoreReadError` (nothing changed)."""
    try:
        return await aw
    except StoreReadError:
        raise
    except SchedulerError as e:
        raise StoreReadError(e.message) from e


class BulkFilter(TypedDict, total=False):
    """The filter of a bulk action (``cancel_where`` / ``replay_where`` of the scheduler, the
    blocking scheduler and the client): every given criterion must hold, and at least one
    must be given (``limit`` counts; none at all is a ValueError, never every task).

    ``pools``, ``statuses``, ``kinds``: a name or names (a status must be one the action
    applies to); ``tags``: all of these tags; ``tenant``: that tenant's tasks only;
    ``created_after`` / ``created_before`` / ``finished_after`` / ``finished_before``: an aware
    datetime or Unix seconds; ``limit``: act on at most this many (>= 1)."""

    pools: str | Iterable[str] | None
    statuses: str | Iterable[str] | None
    kinds: str | Iterable[str] | None
    tags: Mapping[str, str] | None
    tenant: str | None
    created_after: _dt.datetime | float | None
    created_before: _dt.datetime | float | None
    finished_after: _dt.datetime | float | None
    finished_before: _dt.datetime | float | None
    limit: int | None


#: the keywords of :class:`BulkFilter`
FILTER_KEYWORDS: Final = frozenset(BulkFilter.__annotations__)


def _names(what: str, value: object) -> frozenset[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Iterable) or isinstance(items, Mapping):
        raise ArgumentTypeError(f"{what} must be a string or a list of strings (got {value!r})")
    out = []
    for v in items:
        if not isinstance(v, str) or not v:
            raise ArgumentTypeError(f"{what} must be non-empty strings (got {v!r})")
        out.append(v)
    if not out:
        raise ValueError(f"{what} must not be empty (leave it out to match any)")
    return frozenset(out)


def _instant(what: str, value: object, time_base: int) -> int | None:
    """An aware datetime or Unix seconds -> engine ns."""
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{what} must be an aware datetime (got a naive one)")
        secs = value.timestamp()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        secs = float(value)
        if not math.isfinite(secs):
            raise ValueError(f"{what} must be finite (got {value!r})")
    else:
        raise ArgumentTypeError(f"{what} must be an aware datetime or Unix seconds (got {value!r})")
    ns = secs * 1e9
    if not math.isfinite(ns):  # (finite seconds whose nanoseconds overflow a float)
        raise ValueError(f"{what} is out of range (got {value!r})")
    return round(ns) - time_base


def parse_filter(
    core: Core,
    time_base: int,
    eligible: frozenset[int],
    action: str,
    filter: Mapping[str, object],
) -> bulk.TaskFilter:
    """Validate bulk filter keywords (:class:`BulkFilter`; ValueError naming the keyword, a
    TypeError for a keyword it does not know, as Python says it) into an engine filter.  At
    least one criterion must be given (``limit`` counts), as over HTTP and gRPC."""
    unknown = sorted(set(filter) - FILTER_KEYWORDS)
    if unknown:
        raise TypeError(f"{action}_where() got an unexpected keyword argument '{unknown[0]}'")
    pools, statuses, kinds = filter.get("pools"), filter.get("statuses"), filter.get("kinds")
    tags, tenant, limit = filter.get("tags"), filter.get("tenant"), filter.get("limit")
    pool_names = _names("pools", pools)
    pidx = None
    if pool_names is not None:
        for p in sorted(pool_names):
            if p not in core.pool_index:
                raise control.unknown_pool(p)
        pidx = frozenset(core.pool_index[p] for p in pool_names)
    status_names = _names("statuses", statuses)
    if status_names is None:
        st = eligible
    else:
        nums = set()
        for n in sorted(status_names):
            s = STATUS_BY_NAME.get(n)
            if s is None:
                raise ValueError(f"statuses: unknown status '{n}'")
            if s not in eligible:
                raise ValueError(f"statuses: {action} does not apply to '{n}' tasks")
            nums.add(s)
        st = frozenset(nums)
    kind_set = _names("kinds", kinds)
    tag_map = None
    if tags is not None:
        if not isinstance(tags, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in tags.items()
        ):
            raise ArgumentTypeError(f"tags must be a dict of str to str (got {tags!r})")
        tag_map = dict(tags) or None
    if tenant is not None and (not isinstance(tenant, str) or not tenant):
        raise ArgumentTypeError(f"tenant must be a non-empty string (got {tenant!r})")
    times = {}
    for name in ("created_after", "created_before", "finished_after", "finished_before"):
        times[name] = _instant(name, filter.get(name), time_base)
    for lo, hi in (("created_after", "created_before"), ("finished_after", "finished_before")):
        a, b = times[lo], times[hi]
        if a is not None and b is not None and a > b:
            raise ValueError(f"malformed time range: {lo} is later than {hi}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an int >= 1 or None (got {limit!r})")
    if tag_map is None and all(v is None for k, v in filter.items() if k != "tags"):
        # (no criterion, as over HTTP and gRPC: never every task by a forgotten filter)
        raise ValueError("a bulk action needs at least one filter criterion")
    return bulk.TaskFilter(
        st,
        pools=pidx,
        kinds=kind_set,
        tags=tag_map,
        tenant=tenant,
        created_after=times["created_after"],
        created_before=times["created_before"],
        finished_after=times["finished_after"],
        finished_before=times["finished_before"],
        limit=limit,
    )


class Operations:
    """Operator actions of a scheduler (held by it as ``_ops``; see the module docstring)."""

    def __init__(self, sched: Scheduler) -> None:
        self._s = sched
        self._bulk_keys: OrderedDict[tuple[str, str | None, str], _Key] | None = None
        # the running history passes' sets of replayed originals: a replay made by any of them,
        # or by a replay() of a forgotten task, goes into each, so two replays at once never
        # both replay a forgotten task without force
        self._history_passes: list[set[int]] = []

    #: how a replay's payload takes its parents' outputs (``_payload``): None, the named tasks'
    #: placeholders in process; the server sets its own for its JSON blobs (``SchedulerSeam``)
    _replay_fill: Callable[[object, tuple[Outcome, ...], str], object] | None = None

    def _now(self) -> int:
        return self._s._started().now()

    async def _done(self) -> None:
        await self._s._started().done()

    # ------------------------------------------------------------------ pause / resume

    async def resource_keys(self, resource: str, top: int = 10) -> list[ResourceKey]:
        """``Scheduler.resource_keys`` (its docstring says what it does)."""
        return self._s._require().res.busiest(resource, top, self._now())

    async def pause(self, pool: str) -> bool:
        """``Scheduler.pause`` (its docstring says what it does)."""
        core = self._s._require()
        changed = control.set_pool_paused(core, self._now(), pool, True)
        await self._done()
        return changed

    async def resume(self, pool: str) -> bool:
        """``Scheduler.resume`` (its docstring says what it does)."""
        core = self._s._require()
        changed = control.set_pool_paused(core, self._now(), pool, False)
        await self._done()
        return changed

    async def pause_recurring(self, name: str) -> bool:
        """``Scheduler.pause_recurring`` (its docstring says what it does)."""
        changed = control.set_recurring_paused(self._s._require(), name, True)
        await self._done()
        return changed

    async def resume_recurring(self, name: str) -> bool:
        """``Scheduler.resume_recurring`` (its docstring says what it does)."""
        changed = control.set_recurring_paused(self._s._require(), name, False)
        await self._done()
        return changed

    async def trigger_recurring(self, name: str) -> TaskHandle:
        """``Scheduler.trigger_recurring`` (its docstring says what it does)."""
        core = self._s._require()
        tid, dup = control.trigger_recurring(core, self._now(), name)
        await self._done()
        return self._s._handle_for(tid, dup)

    # ------------------------------------------------------------------ replay

    async def _payload(
        self, core: Core, t: TaskState, strict: bool = False
    ) -> tuple[bool, object, bytes | None]:
        """The payload of ``t``'s replay: its own, with the placeholders of its edges filled in
        from its parents' outcomes (a replay carries no edges: engine/replay.py).  ``strict``:
        ReplayError ``payload_unavailable`` when they cannot be (else not ``ok``)."""
        ok, payload, blob = await self._own_payload(core, t)
        if not ok or not t.parents:
            return ok, payload, blob
        parents = await self._parent_outcomes(core, t)
        try:
            filled = (self._replay_fill or _fill_placeholders)(payload, parents, t.opts.kind or "")
        except Permanent as e:
            if strict:
                raise ReplayError("payload_unavailable", f"cannot replay task {t.id}: {e}") from None
            return False, None, None
        if filled is payload:
            return ok, payload, blob
        return True, filled, self._s._started().blob(filled)

    async def _parent_outcomes(self, core: Core, t: TaskState) -> tuple[Outcome, ...]:
        """How each parent of ``t`` ended, for its replay: a parent that did not succeed but
        whose latest replay did counts as that replay; one the engine no longer retains (or
        whose output it dropped) is read from the store's history when it keeps it."""
        out = []
        for tid, key, status, output, message in outcomes(core, t):
            p = core.tasks.get(tid)
            r = core.tasks.get(p.replayed_by) if p is not None and p.replayed_by is not None else None
            if p is not None and p.status != SUCCEEDED and r is not None and r.status == SUCCEEDED:
                p = r
                tid, key, status, output, message = r.id, r.key, STATUS_NAMES[SUCCEEDED], r.output, r.message
            if p is None or p.output is OUTPUT_LOST:
                rec = await self._finished_row(tid, key, t.opts.tenant)
                if rec is not None:
                    tid, key, status, message = rec.id, rec.key, rec.status, rec.message
                    output = rec.output if rec.has_output and status == STATUS_NAMES[SUCCEEDED] else None
            out.append(Outcome(tid, key, status, output, message))
        return tuple(out)

    async def _finished_row(self, tid: int, key: str | None, tenant: str | None) -> RecoveredTerminal | None:
        """The store's history row of parent ``tid`` (or, for a parent named by key and never
        bound, the newest of ``key``), or None."""
        if tid:
            load = getattr(self._s._store, "load_finished", None)
            return None if load is None else await _read(load(tid, self._s._codec))
        load_key = getattr(self._s._store, "load_finished_key", None)
        return None if load_key is None or key is None else await _read(load_key(key, tenant, self._s._codec))

    async def _own_payload(self, core: Core, t: TaskState) -> tuple[bool, object, bytes | None]:
        held, payload = _replay.payload_of(core, t)
        if held:
            return (
                True,
                payload,
                self._s._started().blob(payload),
            )
        load = getattr(self._s._store, "load_payload", None)
        if load is None:
            return False, None, None
        blob = await _read(load(t.id))
        if blob is None:
            return False, None, None
        assert self._s._codec is not None  # (a store always has a codec)
        return True, self._s._codec.decode(blob), blob

    async def replay(self, ref: int | str, *, force: bool = False, tenant: str | None = None) -> TaskHandle:
        """``Scheduler.replay`` (its docstring says what it does)."""
        if not isinstance(force, bool):
            raise ArgumentTypeError(f"force must be a bool (got {force!r})")
        core = self._s._require()
        found = self._s._find(ref, tenant)
        forgotten = found is None
        if found is None:  # forgotten by the engine: the store's history may still keep it
            found = await self._from_history(core, ref, tenant)
        if found is None:  # (maybe finished longer ago than the retention: say which setting)
            raise ReplayError("unknown_task", self._not_retained(ref))
        t = _replay.check(found, ref, force)
        ok, payload, blob = await self._payload(core, t, strict=True)
        core = self._s._require()
        if not forgotten:
            _replay.check(core.tasks.get(t.id), ref, force)  # (still so after the store read)
        if not ok:
            raise ReplayError("payload_unavailable", f"the payload of task {t.id} is no longer retained")
        if forgotten:
            tid = _replay.replay_forgotten(core, self._now(), t, payload, blob)
            self._replayed_forgotten(t.id)  # (a bulk replay's pass reaching it skips it)
        else:
            tid = _replay.replay(core, self._now(), t, payload, blob)
        await self._done()
        return self._s._handle_for(tid, False)

    async def _from_history(self, core: Core, ref: int | str, tenant: str | None) -> TaskState | None:
        """Finished task ``ref`` (an id, or a key: its newest finished row) rebuilt from the
        durable store's history, kept there after the engine's retention
        (docs/how-to/operations.md#replay); None: not there."""
        if isinstance(ref, int):
            load = getattr(self._s._store, "load_finished", None)
            rec = None if load is None or ref in core.tasks else await _read(load(ref, self._s._codec))
        else:
            load_key = getattr(self._s._store, "load_finished_key", None)
            rec = None if load_key is None else await _read(load_key(ref, tenant, self._s._codec))
        if rec is None or (tenant is not None and not same_tenant(rec.tenant, tenant)):
            return None
        if rec.id in self._s._require().tasks:
            return None  # (retained after all: a key reused, or the read raced a recovery)
        return terminal_state(self._s._require(), rec)

    async def _find_or_history(self, ref: int | str, tenant: str | None) -> TaskState | None:
        """A live or retained task (the engine), else a finished one from the durable store's
        history (``status`` and ``handle`` after ``key_retention``; docs/how-to/operations.md#replay)."""
        t = self._s._find(ref, tenant)
        if t is None and self._s._store is not None:
            t = await self._from_history(self._s._require(), ref, tenant)
        return t

    async def _handle_of(self, ref: int | str, tenant: str | None) -> TaskHandle | None:
        """A handle to a live or retained task, or one settled from the store's history."""
        t = self._s._find(ref, tenant)
        if t is not None:
            return self._s._handle_for(t.id, False)
        t = None if self._s._store is None else await self._from_history(self._s._require(), ref, tenant)
        if t is None:
            return None
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        set_outcome(fut, t)  # (finished: its output, or TaskFailed, as for a retained task)
        return TaskHandle(self._s, t.id, False, fut)

    def _not_retained(self, ref: int | str) -> str:
        kept = f"a finished task is kept for key_retention, {self._s._key_retention:g} s"
        history = (
            getattr(self._s._store, "retention", None) if hasattr(self._s._store, "load_finished") else None
        )
        if history is not None:
            kept += f", and by the store for its retention, {history:g} s"
        return f"unknown task {ref!r}: not live, and not retained if it existed ({kept})"

    # ------------------------------------------------------------------ bulk actions

    async def cancel_where(
        self, *, request_key: str | None = None, **filter: Unpack[BulkFilter]
    ) -> BulkResult:
        """``Scheduler.cancel_where`` (its docstring says what it does)."""
        core = self._s._require()
        f = parse_filter(core, self._s._time_base, bulk.CANCELLABLE, "cancel", filter)
        return await self._once("cancel", filter.get("tenant"), request_key, f, False)

    async def replay_where(
        self, *, force: bool = False, request_key: str | None = None, **filter: Unpack[BulkFilter]
    ) -> BulkResult:
        """``Scheduler.replay_where`` (its docstring says what it does)."""
        if not isinstance(force, bool):
            raise ArgumentTypeError(f"force must be a bool (got {force!r})")
        core = self._s._require()
        eligible = bulk.REPLAYABLE_FORCED if force else bulk.REPLAYABLE
        f = parse_filter(core, self._s._time_base, eligible, "replay", filter)
        f.again = force
        return await self._once("replay", filter.get("tenant"), request_key, f, True)

    def _restore_bulk_keys(self, records: list[BulkKeyChange]) -> None:
        """Recovery: the request keys a durable store read back (oldest first)."""
        keys = self._bulk_keys = OrderedDict()
        for r in records[-REQUEST_KEYS:]:
            keys[(r.action, r.tenant, r.key)] = _Key(r.matched, r.acted, r.done)

    async def _once(
        self, action: str, tenant: str | None, request_key: str | None, f: bulk.TaskFilter, replaying: bool
    ) -> BulkResult:
        if request_key is None or request_key == "":
            return await self._bulk(f, replaying, None)
        if not isinstance(request_key, str):
            raise ArgumentTypeError(f"request_key must be a string (got {request_key!r})")
        check_stored_text("request_key", request_key, ValueError)  # (stored as text, as the tenant)
        if tenant:
            check_stored_text("tenant", tenant, ValueError)
        keys = self._bulk_keys
        if keys is None:
            keys = self._bulk_keys = OrderedDict()
        k = (action, tenant, request_key)
        entry = keys.get(k)
        if entry is not None:
            keys.move_to_end(k)
            if entry.fut is not None:
                return await asyncio.shield(entry.fut)
            if entry.done:
                return BulkResult(entry.matched, entry.acted, resumed=entry.resumed)
            entry.resumed = True  # interrupted (a restart, a failover, an error): finish it
        else:
            entry = keys[k] = _Key()
            while len(keys) > REQUEST_KEYS:
                keys.popitem(last=False)
        fut = entry.fut = asyncio.get_running_loop().create_future()
        try:
            result = await self._bulk(f, replaying, (k, entry))
        except BaseException as e:
            entry.fut = None
            if not entry.matched and not entry.resumed:
                keys.pop(k, None)  # nothing was done: a retry with the key runs afresh
            fut.set_exception(e)
            fut.exception()  # (retrieved: no "never retrieved" warning)
            raise
        entry.fut = None
        fut.set_result(result)
        return result

    async def _bulk(
        self, f: bulk.TaskFilter, replaying: bool, key: tuple[tuple[str, str | None, str], _Key] | None
    ) -> BulkResult:
        core = self._s._require()
        ids = bulk.candidates(core)
        entry = None if key is None else key[1]
        # (a resumed call starts from what the interrupted one did)
        matched, acted = (0, 0) if entry is None else (entry.matched, entry.acted)
        limit = f.limit
        started = time.perf_counter()
        for i in range(0, len(ids), bulk.PAGE):
            room = None if limit is None else limit - matched
            if room is not None and room <= 0:
                break
            page = ids[i : i + bulk.PAGE]
            hits = bulk.select(core, page, f, room)
            matched += len(hits)
            if replaying:
                payloads = {t.id: await self._payload(core, t) for t in hits}
                core = self._s._require()
                acted += bulk.replay_all(core, self._now(), hits, _lookup(payloads), f.again)
            else:
                acted += bulk.cancel_all(core, self._now(), hits)
            started = await self._page_done(core, key, bool(hits), matched, acted, started)
            core = self._s._require()
        if replaying and hasattr(self._s._store, "load_finished_page"):
            matched, acted = await self._replay_history(f, key, matched, acted)
            core = self._s._require()
        if key is not None:
            self._note(core, key, matched, acted, True)
        await self._done()
        return BulkResult(matched, acted, resumed=entry is not None and entry.resumed)

    async def _replay_history(
        self,
        f: bulk.TaskFilter,
        key: tuple[tuple[str, str | None, str], _Key] | None,
        matched: int,
        acted: int,
    ) -> tuple[int, int]:
        """The bulk replay's second pass: the finished tasks the engine has forgotten but the
        store's history keeps, in pages of ``bulk.PAGE`` rows, newest first.  Newest first
        because a replay's id is above its original's: by the time a row is reached, every
        replay of it has been seen (in the engine, or earlier in this pass), so a task that
        has a replay is not matched again unless ``f.again``.  A bulk replay running at the same
        time adds its replays to this pass's set too (``_history_passes``), as does a
        ``replay()`` of a forgotten task, and the set is checked again after the payload's
        read: no two calls replay one forgotten task (but two ``replay()`` calls, each asked
        to)."""
        core = self._s._require()
        replayed = {o for t in core.tasks.values() if (o := _replay.replay_of(t)) is not None}
        passes = self._history_passes
        passes.append(replayed)  # (concurrent passes add their replays to it too)
        try:
            return await self._replay_history_pages(f, key, matched, acted, replayed)
        finally:
            passes[:] = [p for p in passes if p is not replayed]

    def _replayed_forgotten(self, tid: int) -> None:
        """Record that forgotten task ``tid`` was replayed, in every running history pass."""
        for seen in self._history_passes:
            seen.add(tid)

    async def _replay_history_pages(
        self,
        f: bulk.TaskFilter,
        key: tuple[tuple[str, str | None, str], _Key] | None,
        matched: int,
        acted: int,
        replayed: set[int],
    ) -> tuple[int, int]:
        core = self._s._require()
        statuses = [STATUS_NAMES[i] for i in sorted(f.statuses)]  # (pre-filtered by the store)
        before, started = (1 << 63) - 1, time.perf_counter()
        while f.limit is None or matched < f.limit:
            rows = await self._s._store.load_finished_page(before, bulk.PAGE, self._s._codec, statuses)  # type: ignore[union-attr]
            if not rows:
                break
            before = rows[-1].id
            core = self._s._require()
            hits = []
            for rec in rows:
                if rec.replay_of is not None:
                    replayed.add(rec.replay_of)
                if rec.id in core.tasks or rec.pool not in core.pool_index:
                    continue  # (the engine's pass saw it; a pool removed since)
                t = terminal_state(core, rec)
                if bulk.matches(t, f) and (f.again or t.id not in replayed):
                    hits.append(t)
                    if f.limit is not None and matched + len(hits) >= f.limit:
                        break
            matched += len(hits)
            for t in hits:
                ok, payload, blob = await self._payload(core, t)
                core = self._s._require()
                if not ok or t.id in core.tasks or (not f.again and t.id in replayed):
                    continue  # (a concurrent bulk replay replayed it while the payload was read)
                try:
                    _replay.replay_forgotten(core, self._now(), t, payload, blob)
                except SubmitError:
                    continue
                self._replayed_forgotten(t.id)
                acted += 1
            started = await self._page_done(core, key, bool(hits), matched, acted, started)
        return matched, acted

    async def _page_done(
        self,
        core: Core,
        key: tuple[tuple[str, str | None, str], _Key] | None,
        hit: bool,
        matched: int,
        acted: int,
        started: float,
    ) -> float:
        """End of a bulk page: note a keyed call's progress, carry out the page's actions, and
        let the loop run long enough that this action takes at most BULK_SHARE of it (other
        submissions keep 1 - BULK_SHARE of their rate); the next page's start."""
        if key is not None and hit:
            self._note(core, key, matched, acted, False)
        self._s._started().settle()
        spent = time.perf_counter() - started
        await asyncio.sleep(spent * (1.0 - BULK_SHARE) / BULK_SHARE)
        return time.perf_counter()

    def _note(
        self, core: Core, key: tuple[tuple[str, str | None, str], _Key], matched: int, acted: int, done: bool
    ) -> None:
        """Record (and with a durable store persist) a keyed bulk call's progress."""
        (action, tenant, request_key), entry = key
        entry.matched, entry.acted, entry.done = matched, acted, done
        bulk.note_key(core, self._now(), BulkKeyChange(action, tenant, request_key, matched, acted, done, 0))


@dataclass(slots=True)
class _Key:
    """A bulk request key: what its call did so far, whether it finished, and (while it runs
    in this process) the future concurrent calls with the same key wait on."""

    matched: int = 0
    acted: int = 0
    done: bool = False
    resumed: bool = False
    fut: asyncio.Future[BulkResult] | None = None


def _lookup(
    payloads: dict[int, tuple[bool, object, bytes | None]],
) -> Callable[[TaskState], tuple[bool, object, bytes | None]]:
    def get(t: TaskState) -> tuple[bool, object, bytes | None]:
        return payloads[t.id]

    return get


def _fill_placeholders(payload: object, parents: tuple[Outcome, ...], kind: str) -> object:
    """In process: a named task's payload with its placeholders (``{"$output": i}``) replaced
    by its parents' outputs (cronoq.tasks.placeholders); any other payload as it is."""
    if not isinstance(payload, dict | list):
        return payload
    from cronoq.tasks.placeholders import substitute

    filled = substitute(payload, parents, kind)
    return payload if filled == payload else filled
