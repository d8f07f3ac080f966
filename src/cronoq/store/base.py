"""The store protocol: durable state and leadership behind one interface
(docs/reference/behaviour.md#durable-state, docs/reference/behaviour.md#high-availability).

Theory of operation
===================

The engine is sans-IO.  With ``CoreConfig(persist=True, time_base=<Unix ns at engine zero>)``
it emits ``Persist(mutation)`` actions (docs/reference/behaviour.md#mutations) — ``Submitted``,
``StatusChange``, ``RecurringUpsert``/``RecurringRemove``/``RecurringNext`` — with every time already in Unix
nanoseconds.  A store turns those mutations into rows and turns rows back into a
:class:`~cronoq.engine.mutations.Recovered` for ``Core.recover``.  The store keeps *state*,
not a log: one row per task (its definition, encoded payload, last persisted status and
attempt, first start, finish time, message and encoded output) and one row per schedule
(definition, next start, last occurrence id).  ``blocked``/``ready``/``scheduled`` are never
stored; recovery derives them.

Life cycle, as the runtime drives it::

    await store.open()                 # connect, create the schema, check the file/database
    epoch = await store.acquire()      # become leader; a standby blocks here until it can
    rec = await store.load(codec, key_retention, key_retention_max)  # live + retained + schedules
    core = Core(CoreConfig(persist=True, time_base=...), epoch=epoch)
    core.recover(now, rec)             # its own Persist actions go to the store like any other
    ...                                # group commit: await store.commit(batch, epoch, codec)
    await store.release()              # clean shutdown: a standby takes over at once
    await store.close()

Leadership and fencing.  Several processes may share one store; exactly one leads.
:meth:`Store.acquire` makes the caller leader and returns a new *fencing epoch*, strictly
greater than every epoch handed out before on that store (it also becomes the high bits of
new task ids: ``id = (epoch << 48) | seq``).  Leadership is kept alive by a background task
the store starts in ``acquire`` (SQLite: a renewed lease row; PostgreSQL: a session advisory
lock on a dedicated connection, checked by a keep-alive, whose session the database ends after
``lease_ttl`` seconds without a ping).

The lease rule (readiness).  A leader knows the earliest moment another instance could take
over: ``lease_ttl`` after the *start* of its last successful renewal (SQLite: the renewed row
lapses ``lease_ttl`` after the renewal ran, which is later; PostgreSQL: the database ends a
lock session idle for ``lease_ttl``, and that session was last busy after the ping was sent).
Both stores keep that instant as ``lease_until`` (monotonic seconds), updated by
:func:`keep_leading` and ``acquire``; :func:`lease_left` is what remains of it.  An instance
whose lease may have lapsed — its event loop froze, the database went silent — must not
claim to lead even before the renewer notices: the server answers ``/readyz`` 200 only while
``lease_left`` exceeds a margin, so two servers are never ready at once.  Losing it never lets a stale
leader write: every :meth:`Store.commit` re-checks, *inside its write transaction*, that the
stored epoch is still the caller's and raises :class:`cronoq.errors.Fenced` otherwise.  The
check and the takeover's epoch bump serialize on the same row (SQLite: the database write
lock; PostgreSQL: ``FOR SHARE`` against the bump's ``UPDATE``), so a new leader's ``load``
sees every commit of the old term that will ever succeed; a PostgreSQL prune checks the same
way (:meth:`Store.prune`).  When the background task notices the loss first it calls
``store.on_lost()`` (if set) so the runtime can step down early.

Commits.  One :meth:`Store.commit` call is one transaction (the runtime's group commit).
Within a batch, changes to one task are folded into a single row write.  Outputs
(``StatusChange.output`` with ``has_output``) are encoded with the codec here; an output the
codec refuses is not stored (the row keeps its status, ``has_output`` false, and a message
saying why) — a commit never fails because of one value; a NUL character of a message, and
a lone surrogate, is stored as U+FFFD (``_records.storable_message``: PostgreSQL's text holds
no NUL, and a surrogate has no UTF-8 form).  Payloads
arrive already encoded (``TaskRecord.payload`` bytes, encoded by the runtime at submission,
where an unencodable payload is ``SubmitError("invalid")``); a non-bytes payload is encoded
here as a fallback.

Recovery (``load``).  Live rows come back as ``RecoveredTask`` (status ``"submitted"`` if
it never ran, else ``"running"``/``"retrying"`` with the attempt number), terminal rows
finished within the ``window`` the runtime passes, the newest ``limit`` of them (the engine's
retention, ``key_retention`` and ``key_retention_max``: what the engine keeps; never more than
the store's ``retention``) as ``RecoveredTerminal`` (with decoded outputs), schedules as
``RecoveredSchedule``.  Older terminal rows stay in the table, read on demand
(``load_finished``: the store's history), except those the loaded state still refers to,
whatever their age: the parents of live tasks (by id, or by a key no loaded row holds: its
newest holder), the tasks live journals spawned or wait for and each schedule's last
occurrence (``_records.history_refs``; a prune keeps the same rows, ``_records.prune_refs``,
both from ``_records.referenced``).  So a start reads what the engine will hold, not the
whole history (docs/reference/behaviour.md#recovery-window).  A row whose definition, payload
or output cannot be decoded is not returned as a task: its ``(id, reason)`` goes to
``Recovered.quarantined`` and the engine records it as ``failed`` with that message (which
the store then persists) — recovery never crashes on bad data.  A schedule whose definition
cannot be decoded is skipped and logged.  Recovered schedule templates carry the *decoded*
payload in ``template.payload`` (the engine hands that object to the executor for later
occurrences).

Errors.  Every store error is a :class:`cronoq.errors.SchedulerError` with a clear message
(missing directory, read-only or corrupt file, locked database, unreachable server).
:class:`TransientStoreError` marks the ones worth retrying (busy/locked database, dropped
connection); :class:`cronoq.errors.Fenced` is never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from cronoq.engine.mutations import Mutation, Recovered
from cronoq.errors import Fenced, SchedulerError
from cronoq.store.codec import Codec

__all__ = [
    "CommitDeadline",
    "Store",
    "StoreReadError",
    "TransientStoreError",
    "TERMINAL_STATUSES",
    "bounded",
    "lease_left",
]

#: Terminal status names (docs/reference/behaviour.md#lifecycle); a row with one of these has ``finished``
#: set.
TERMINAL_STATUSES = frozenset(
    {"succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed"}
)


class TransientStoreError(SchedulerError):
    """A store operation failed for a reason that may pass (busy database, lost connection).

    Retrying the same call is safe: commits are idempotent (rows are upserted by id/name).
    """


class StoreReadError(SchedulerError):
    """A read of the store failed (a finished task's row or payload, read for a replay or a
    lookup the engine missed): nothing was changed, and a retry is safe.  The server answers it
    "the store could not be read: retry" (``server.app.store_read_failure``), not as a commit."""


class ShardMismatch(SchedulerError):
    """The store belongs to another shard (docs/how-to/shards.md): its ``cronoq_meta`` row
    ``shard`` names a different shard than the server opening it.  Never retried."""


def check_shard(where: str, stored: str | None, own: str | None) -> bool:
    """Whether the store's recorded shard must be written (``own`` set, none recorded yet);
    raises :class:`ShardMismatch` when it names another shard."""
    if own is None:
        return False
    if stored is None:
        return True
    if stored != own:
        raise ShardMismatch(
            f"{where} belongs to shard {stored!r}, not {own!r}: every shard needs its own store "
            "(use the {shard} placeholder in store.schema / store.path)"
        )
    return False


class CommitDeadline(Fenced):
    """A commit did not finish within the store's ``commit_timeout``: the instance cannot show
    it still leads, so it steps down like a fenced one (its waiters are not acknowledged and
    get UNAVAILABLE; a retried keyed submission finds the task if the commit did land)."""


class LeasedStore(Protocol):
    """What the leadership helpers below use of the SQL stores (a lease, renewed while leading)."""

    _leading: bool
    lease_ttl: float
    lease_until: float
    commit_timeout: float | None
    on_lost: Callable[[], None] | None

    async def prune(self, now_unix_ns: int, limit: int | None = None) -> int: ...


async def bounded(store: LeasedStore, aw: Awaitable[object], what: str) -> None:
    """Await a commit of ``store``, at most ``store.commit_timeout`` seconds (None: no bound).

    Past it the store stops leading at once (``store.on_lost``, so the server stops answering
    ready and sends its workers away before the step-down has finished) and the commit raises
    :class:`CommitDeadline`.

    No task is made for the commit: under load each task step is a loop turn more between the
    committer and the database.  ``aw`` may be a future (the SQLite store's executor future):
    it is awaited as it is, with a timer that cancels it, not wrapped in a task as
    ``asyncio.wait_for`` does.  A coroutine (the PostgreSQL store's commit) runs in the
    caller's task under ``asyncio.timeout``, which cancels that task at the deadline: a task
    of its own would start the commit one loop turn late (its statement is sent a turn after
    the committer took the batch) and wake the committer one turn late after it ended."""
    timeout = store.commit_timeout
    if timeout is None:
        await aw
        return
    if not asyncio.isfuture(aw):
        cm = asyncio.timeout(timeout)
        try:
            async with cm:
                await aw
            return
        except TimeoutError:
            if not cm.expired():
                raise  # the commit's own TimeoutError, not the deadline
        raise stepped_down(store, what, timeout) from None
    fut = asyncio.ensure_future(aw)
    late = False

    def expire() -> None:
        nonlocal late
        late = fut.cancel()

    timer = fut.get_loop().call_later(timeout, expire)
    try:
        await fut
    except asyncio.CancelledError:
        if not late:
            raise
        raise stepped_down(store, what, timeout) from None
    finally:
        timer.cancel()


def stepped_down(store: LeasedStore, what: str, timeout: float) -> CommitDeadline:
    """A commit of ``store`` outlasted ``timeout``: the store stops leading at once
    (``store.on_lost``) and this is the error its waiters get."""
    store._leading = False
    cb = store.on_lost
    if cb is not None:
        cb()
    return CommitDeadline(f"{what}: commit did not finish within {timeout:g} s; stepping down")


@runtime_checkable
class Store(Protocol):
    """A durable store with leader election.  All methods are called from one event loop."""

    #: False for :class:`~cronoq.store.memory.MemoryStore`: the runtime then runs the engine
    #: with ``persist=False`` and epoch 0 (ids 1, 2, 3 …).
    durable: bool
    #: Called (no arguments, on the event loop) when the store notices it lost leadership.
    on_lost: Callable[[], None] | None

    @property
    def epoch(self) -> int:
        """The fencing epoch of the current term (0 before the first ``acquire``)."""
        ...

    async def open(self) -> None:
        """Connect and create the schema; raises SchedulerError if the store is unusable."""
        ...

    async def acquire(self, *, wait: bool = True) -> int:
        """Become leader and return the new fencing epoch (strictly increasing across terms).

        With ``wait`` a standby blocks until the leader's lease/lock ends or it releases;
        without, raises SchedulerError at once if another instance leads.
        """
        ...

    async def is_leader(self) -> bool:
        """Whether this instance still holds leadership (checked against the store)."""
        ...

    async def load(self, codec: Codec, window: float | None = None, limit: int | None = None) -> Recovered:
        """Read back live tasks, the newest ``limit`` terminal tasks finished within ``window``
        seconds (the engine's retention and ``retention_max``; None: the store's retention, no
        limit) and the older ones live state refers to, schedules and quarantined rows."""
        ...

    async def commit(self, mutations: list[Mutation], epoch: int, codec: Codec) -> None:
        """Write ``mutations`` in ONE transaction that first checks ``epoch`` is current.

        Raises Fenced if another instance took over, TransientStoreError when a retry may
        succeed, SchedulerError otherwise.
        """
        ...

    # Optional: ``async def load_payload(task_id) -> bytes | None``, the stored payload of a
    # task, read for a replay (docs/how-to/operations.md#replay); the SQL stores have it.

    async def prune(self, now_unix_ns: int, limit: int | None = None) -> int:
        """Delete terminal rows finished more than ``retention`` before ``now_unix_ns``, the
        oldest first, at most ``limit`` of them (None: all), except those the live state still
        refers to, whatever their age (``_records.prune_refs``: what ``load`` reads back past
        its window); how many were deleted.  PostgresStore raises Fenced, deleting nothing,
        when its epoch is no longer current (its references and its delete are several
        statements: a new leader's commit must not land between them); SqliteStore's is one
        transaction under the write lock, which no commit can land inside."""
        ...

    async def release(self) -> None:
        """Give up leadership now (clean shutdown) so a standby takes over at once."""
        ...

    async def close(self) -> None:
        """Release (if leading) and free connections/threads.  Idempotent."""
        ...


PRUNE_EVERY = 60.0  # seconds between automatic retention prunes by the leader
#: rows one automatic prune deletes at most: the store's history is pruned with bounded cost
#: (one short statement, commits interleave); a backlog (after an outage, or a shortened
#: window) goes on at the next lease renewal instead of waiting PRUNE_EVERY
PRUNE_BATCH = 10_000


async def keep_leading(
    store: LeasedStore,
    interval: float,
    still_leading: Callable[[], Awaitable[bool | None]],
) -> None:
    """A leader's background task, shared by the SQL stores: every ``interval`` s ask
    ``still_leading()`` (True: go on; None: transient, ask again; False: lost).  On loss mark the
    store as not leading and call ``store.on_lost``; while leading, prune about once a minute,
    :data:`PRUNE_BATCH` rows at most each time (every renewal while a backlog remains)."""
    last_prune = time.monotonic()
    backlog = False
    while True:
        await asyncio.sleep(interval)
        started = time.monotonic()
        ok = await still_leading()
        if ok is None:
            continue
        if ok:
            store.lease_until = started + store.lease_ttl
        if not ok:
            store._leading = False
            cb = store.on_lost
            if cb is not None:
                cb()
            return
        if backlog or time.monotonic() - last_prune >= PRUNE_EVERY:
            last_prune = time.monotonic()
            backlog = False
            with contextlib.suppress(SchedulerError):
                backlog = await store.prune(time.time_ns(), PRUNE_BATCH) >= PRUNE_BATCH


def lease_left(store: object) -> float | None:
    """Seconds until the leadership lease of ``store`` may lapse (the lease rule above):
    negative once it may have; None for a store without leadership (memory) or not leading."""
    if store is None or not getattr(store, "leading", False):
        return None
    until = getattr(store, "lease_until", None)
    return None if until is None else until - time.monotonic()


async def stop_task(task: asyncio.Task[Any] | None, again: float = 1.0) -> None:
    """Cancel a background task and wait until it is gone (an error it ends with is raised).

    The cancel is repeated every ``again`` seconds while the task runs on: a task that drops
    a cancellation (a library's ``asyncio.wait_for`` on Python 3.11 does when its awaitable
    finishes as the cancel arrives) would otherwise go on looping, and this wait, and the
    shutdown behind it, would never end.  ``again`` is long enough for the cleanup a cancel
    starts (a transaction's rollback, a connection's close) not to be cancelled in turn."""
    if task is None or task.done():
        return
    while not task.done():
        task.cancel()
        await asyncio.wait((task,), timeout=again)
    with contextlib.suppress(asyncio.CancelledError):
        await task


def check_retention(retention: float) -> float:
    import math

    if not isinstance(retention, int | float) or not math.isfinite(retention) or retention < 0:
        raise ValueError(f"retention must be a finite, non-negative number of seconds (got {retention!r})")
    return float(retention)


def load_window(retention: float, window: float | None) -> float:
    """The seconds of finished tasks a ``load`` reads: ``window`` (the engine's retention),
    never more than the store keeps (``retention``); None: all the store keeps."""
    if window is None:
        return retention
    return min(retention, check_retention(window))
