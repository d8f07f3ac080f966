"""Group commit between the engine's ``Persist`` actions and a durable store
(docs/reference/behaviour.md#mutations).

The scheduler hands every engine step's mutations to :meth:`Committer.add` (cheap, no I/O)
and, for submissions, awaits :meth:`Committer.barrier` before acknowledging: the barrier
resolves once every mutation added before it was committed.  One background task commits:
it takes *everything* pending (up to ``max_batch`` mutations, cut between ``add`` calls: one
call's mutations, a submission's, commit or fail together) and writes it with one
``store.commit`` call (one transaction),
so while a commit is in flight the next batch accumulates and, under load, many tasks share
one transaction.  Under steady load a commit that would follow the previous one at once with
only a few mutations first waits ``gather`` seconds (0.5 ms) for more: back-to-back small
commits cost a transaction each, and a short wait makes fewer, bigger ones (1 ms made about a
third fewer than 0.5 ms for 8 processes' per-task submits on SQLite, but its wait cost those
submitters more than the commits it saved: docs/architecture/durability.md#group-commit).
After an idle spell (no commit in the last ``gather`` × 2) the first commit goes at once, so
an isolated submission pays no extra latency.  Nor does a lone submitter: after ``gather_lone`` (8)
commits in a row that each answered exactly one barrier, small commits go at once, until a
commit answers two barriers or more or a barrier comes while another one still waits
(company: a second submitter).  One client in a closed loop of one submit at a time (it waits
for each answer before its next submit) can never join its own group, so each of its submits
paid the whole gather for nothing; 8 such clients make groups of several barriers, and even
on a loaded machine 8 single-barrier groups in a row among them are rare (commits that answer
no barrier, such as deferred leases, count neither way;
docs/architecture/durability.md#group-commit).  A group somebody already waits for with
``gather_enough`` (64) mutations or more pending does not wait either, and a gather under way
ends when such a barrier arrives: 64 coroutines on one Client send their submissions as one ``SubmitMany``, so
its whole group is there at once and the gather only delayed its acknowledgement (by up to
``gather`` of a wave of about 7 ms; docs/architecture/durability.md#group-commit).
Mutations nobody waits for (a task's lease and completion: no barrier) wait up to ``defer``
seconds (4 ms) for one, so they ride with the next acknowledged group instead of making a
commit of their own that the next group would queue behind; a barrier, ``gather_below``
pending mutations or ``stop`` end that wait.  Either wait only decides when a group is
written: its barriers still resolve after its commit returned.

Errors: a :class:`~cronoq.store.base.TransientStoreError` (or an ``OSError``) is retried with
exponential backoff, up to ``give_up_after`` seconds for one batch.  :class:`~cronoq.errors.
Fenced` is final: ``on_fenced(err)`` is called, every pending and future barrier fails with
``Fenced`` (a SchedulerError), and later mutations are dropped — the instance no longer leads.
Any other error fails the barriers of that batch with a SchedulerError, and every later one
(waiting then, or called afterwards, once the commits up to its mutations ended): a barrier
knows only how many mutations were added before it, not which of them its caller's answer
rests on (a keyed submission answered as a duplicate adds none, and its original may be in
the lost batch), and the engine is now ahead of the store.  The error is reported to
``on_error(err)`` (the scheduler steps down), and committing goes on with the next batch: its
mutations are still written (a later barrier, ``flush`` and ``stop`` too, waits for them as
before), but nobody is acknowledged for them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cronoq.engine.time import next_backoff
from cronoq.errors import Fenced, SchedulerError
from cronoq.store.base import TransientStoreError, stop_task

if TYPE_CHECKING:
    from cronoq.store.base import Store
    from cronoq.store.codec import Codec

__all__ = ["Committer"]


class Committer:
    """Commits mutations to ``store`` under fencing ``epoch`` in groups; see the module doc."""

    def __init__(
        self,
        store: Store,
        codec: Codec,
        epoch: int,
        *,
        on_fenced: Callable[[Fenced], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        max_batch: int = 20_000,
        retry_initial: float = 0.01,
        retry_max: float = 1.0,
        give_up_after: float = 60.0,
        gather: float = 0.0005,
        gather_below: int = 256,
        gather_enough: int = 64,
        gather_lone: int = 8,
        defer: float = 0.004,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if gather < 0:
            raise ValueError("gather must be >= 0")
        if defer < 0:
            raise ValueError("defer must be >= 0")
        if gather_enough < 1:
            raise ValueError("gather_enough must be >= 1")
        if gather_lone < 0:
            raise ValueError("gather_lone must be >= 0")
        self.store = store
        self.codec = codec
        self.epoch = epoch
        self.on_fenced = on_fenced
        self.on_error = on_error
        self.max_batch = max_batch
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.give_up_after = give_up_after
        self.gather = gather  # seconds a small back-to-back commit waits for more mutations
        self.gather_below = gather_below  # "small": fewer pending mutations than this
        #: a barrier that waits on this many pending mutations or more ends a gather at once
        self.gather_enough = gather_enough
        #: after this many commits in a row that answered one barrier each, small commits do
        #: not gather until a commit answers more or a barrier comes while another waits
        #: (0: gather always)
        self.gather_lone = gather_lone
        self._lone = 0  # commits in a row that answered exactly one barrier
        #: counters (diagnostics, tests): gathers waited, and small back-to-back commits that
        #: went at once for a lone submitter
        self.gathers = 0
        self.gathers_skipped = 0
        #: seconds mutations nobody waits for (a barrier) may wait for one before they commit
        self.defer = defer
        #: a barrier waits on the pending group (so it does not wait for one: ``defer``)
        self._waited = False
        self._deferring = False
        self._last_end = -1.0  # monotonic time the last commit ended
        #: counters (diagnostics, benchmarks): commit calls that succeeded, mutations committed,
        #: retries after transient errors, batches that failed for good
        self.commits = 0
        self.committed = 0
        self.retries = 0
        self.failures = 0
        self._pending: list[Any] = []
        #: where each ``add`` still pending ends (its ``_added`` after it): a batch cut at
        #: ``max_batch`` is cut at one of these, so no call's mutations straddle two commits
        self._ends: deque[int] = deque()
        self._added = 0  # mutations ever added
        self._settled = 0  # mutations ever taken out and settled (committed or failed)
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._wake: asyncio.Event | None = None
        #: set while the commit loop gathers: resolved at its end (``_gather``)
        self._gathering: asyncio.Future[None] | None = None
        #: a barrier waits on at least ``gather_enough`` pending mutations: commit them at once
        self._urgent = False
        self._task: asyncio.Task[None] | None = None
        self._fenced: Fenced | None = None
        self._stopped = False
        #: the message of the first batch that failed for good: every later barrier fails (once
        #: the commits up to its mutations ended: a flush still writes everything)
        self._lost: str | None = None

    # ------------------------------------------------------------------ API

    @property
    def fenced(self) -> Fenced | None:
        """The Fenced error that ended this committer, if any."""
        return self._fenced

    @property
    def pending(self) -> int:
        """Mutations added but not yet settled."""
        return self._added - self._settled

    def start(self) -> None:
        """Start the commit loop (``add`` does it lazily; needs a running loop)."""
        if self._task is None or self._task.done():
            if self._wake is None:
                self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="cronoq-committer")

    def add(self, mutations: list[Any]) -> None:
        """Queue mutations for the next commit (no I/O; call from the event loop)."""
        if not mutations or self._fenced is not None:
            return
        if self._stopped:
            raise SchedulerError("the committer is stopped")
        pending = self._pending
        pending.extend(mutations)
        self._added += len(mutations)
        self._ends.append(self._added)
        g = self._gathering
        if g is not None:
            if self._deferring and len(pending) >= self.gather_below:
                _settle(g)  # big enough to write anyway
            return  # (the commit loop is awake)
        if self._task is None or self._task.done():
            self.start()
        assert self._wake is not None
        self._wake.set()

    async def barrier(self) -> None:
        """Wait until every mutation added before this call is committed.

        Raises Fenced if leadership was lost, SchedulerError once a commit failed for good (this
        barrier's, or any before it: see the module doc).
        """
        if self._fenced is not None:
            raise Fenced(self._fenced.message)
        target = self._added
        if self._settled >= target:
            if self._lost is not None:  # mutations added before this call were lost
                raise SchedulerError(self._lost)
            return
        self._waited = True
        if self._waiters:
            self._lone = 0  # another barrier still waits: there is company to gather
        g = self._gathering
        if g is not None and self._deferring:
            _settle(g)  # somebody waits now: deferring ends
        if len(self._pending) >= self.gather_enough:
            self._urgent = True  # someone waits on a group big enough: no gather for it
            if g is not None:
                _settle(g)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        await fut

    async def flush(self) -> None:
        """Commit everything added so far (a barrier that tolerates an idle committer)."""
        await self.barrier()

    async def stop(self) -> None:
        """Flush, then stop the commit loop.  Idempotent; errors of the flush propagate."""
        try:
            if self._fenced is None and not self._stopped:
                await self.flush()
        finally:
            self._stopped = True
            task, self._task = self._task, None
            await stop_task(task)  # (it awaits the store's commit: cancelled until it is gone)
            self._fail_waiters(lambda: SchedulerError("the committer stopped before this commit"), all_=True)

    # ------------------------------------------------------------------ loop

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            await wake.wait()
            wake.clear()
            while self._pending:
                if self.defer > 0 and not self._waited and len(self._pending) < self.gather_below:
                    await self._gather(self.defer, True)  # nobody waits for these yet
                if (
                    self.gather > 0
                    and len(self._pending) < self.gather_below
                    and not self._urgent
                    and time.monotonic() - self._last_end < 2 * self.gather
                ):
                    if self.gather_lone and self._lone >= self.gather_lone:
                        self.gathers_skipped += 1  # a lone submitter: nobody to wait for
                    else:
                        self.gathers += 1
                        await self._gather(self.gather, False)  # steady load: let the group grow
                self._urgent = False
                if len(self._pending) <= self.max_batch:
                    batch, self._pending = self._pending, []
                    self._ends.clear()
                    self._waited = False
                else:
                    batch = self._take_some()
                    self._waited = self._waited and bool(self._waiters)  # (some wait on the rest)
                err = await self._commit(batch)
                self._last_end = time.monotonic()
                self._settled += len(batch)
                if err is None:
                    self.commits += 1
                    self.committed += len(batch)
                    answered = self._resolve()
                    if answered > 1:
                        self._lone = 0
                    elif answered:
                        self._lone += 1
                elif isinstance(err, Fenced):
                    self._die(err)
                    return
                else:
                    self.failures += 1
                    msg = f"store commit failed: {err}"
                    if self._lost is None:
                        self._lost = msg
                    # (those of this batch; one waiting on a later batch fails once that batch's
                    # commit ended, in _resolve: a stop's flush still writes everything)
                    self._fail_waiters(lambda msg=msg: SchedulerError(msg))  # type: ignore[misc]
                    cb = self.on_error
                    if cb is not None:
                        cb(err)

    def _take_some(self) -> list[Any]:
        """The pending mutations of the first whole ``add`` calls that fit in ``max_batch``
        (the first call's alone if it is bigger): a submission's mutations are never split
        over two commits, so a commit that fails for good fails every barrier on a part of
        it (a barrier resolves once the commits up to its mutations ended)."""
        pending, ends = self._pending, self._ends
        start = self._added - len(pending)
        limit = start + self.max_batch
        cut = ends.popleft()
        while ends and ends[0] <= limit:
            cut = ends.popleft()
        batch = pending[: cut - start]
        del pending[: cut - start]
        return batch

    async def _gather(self, seconds: float, deferring: bool) -> None:
        """Wait ``seconds`` for more mutations: a gather, which a barrier on ``gather_enough``
        pending mutations ends early, or (``deferring``) a deferral, which any barrier or
        ``gather_below`` pending mutations end early."""
        loop = asyncio.get_running_loop()
        g = self._gathering = loop.create_future()
        self._deferring = deferring
        timer = loop.call_later(seconds, _settle, g)
        try:
            await g
        finally:
            timer.cancel()
            self._gathering = None
            self._deferring = False

    async def _commit(self, batch: list[Any]) -> BaseException | None:
        delay = self.retry_initial
        started = time.monotonic()
        while True:
            try:
                await self.store.commit(batch, self.epoch, self.codec)
                return None
            except Fenced as e:
                return e
            except (TransientStoreError, OSError) as e:
                if time.monotonic() - started >= self.give_up_after:
                    return e
                self.retries += 1
                await asyncio.sleep(delay)
                delay = next_backoff(delay, 0.0, self.retry_max)
            except Exception as e:
                return e

    def _resolve(self) -> int:
        """Resolve the barriers the commits so far satisfy; how many."""
        done = self._settled
        waiters = self._waiters
        lost = self._lost
        n = 0
        while waiters and waiters[0][0] <= done:
            fut = waiters.popleft()[1]
            n += 1
            if fut.done():
                continue
            if lost is None:
                fut.set_result(None)
            else:  # (it came after a lost mutation: it fails, once its own commit ended)
                fut.set_exception(SchedulerError(lost))
        return n

    def _fail_waiters(self, make: Callable[[], BaseException], all_: bool = False) -> None:
        done = self._settled
        waiters = self._waiters
        while waiters and (all_ or waiters[0][0] <= done):
            fut = waiters.popleft()[1]
            if not fut.done():
                fut.set_exception(make())

    def _die(self, err: Fenced) -> None:
        self._fenced = err
        dropped = len(self._pending)
        self._pending = []
        self._ends.clear()
        self._settled += dropped
        msg = err.message
        self._fail_waiters(lambda: Fenced(msg), all_=True)
        cb = self.on_fenced
        if cb is not None:
            cb(err)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
