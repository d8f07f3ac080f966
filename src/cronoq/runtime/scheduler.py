"""``Scheduler``: the asyncio shell around the engine (docs/reference/behaviour.md#scheduler-api).

Theory of operation
-------------------
The scheduler owns one :class:`~cronoq.engine.core.Core` and feeds it the time of its clock
(``clock.monotonic_ns()`` relative to ``start()``; by default the real loop clock, see
:mod:`cronoq.runtime.clock`).  Public calls (``submit``, ``enqueue``,
``cancel``, ...) call the core synchronously and then *kick* the driver: one coalesced
``call_soon`` per loop turn.  The driver ticks the core (timers + dispatch decisions for
everything submitted this turn), carries out the resulting actions and arms a single
``clock.call_at`` timer for ``core.next_wakeup()``.  There are no per-task timers:

* an attempt of an async executor is one ``loop.create_task`` of a small runner coroutine
  (``_attempt``) that calls the executor, awaits it and reports the outcome to the core
  itself when it returns (no done callback, no extra loop turn: a freed slot reaches the
  driver one turn after the attempt ends, and the next attempt starts one turn later).
  An abort (timeout, cancel, lease loss, shutdown) marks ``ctx`` cancelled, drops the lease
  from ``_running`` and cancels that task; the runner then reports nothing.  A
  ``CancelledError`` the executor raises on its own (``ctx`` not marked) is reported as a
  retryable failure;
* a *starting* executor (``Pool.start_attempt``, the server's remote one) begins the
  attempt and returns its future, watched by ``_on_done`` like a thread's (but an abort
  cancels it): no task, no loop turn of its own;
* a plain function runs in the loop's default thread pool; its future has one
  ``add_done_callback`` (``_on_done``) that reports the outcome, or, if the function returned
  an awaitable, awaits that under the same lease.  A thread cannot be interrupted: an engine
  abort marks ``ctx`` and leaves the future alone (a function not yet picked up by a pool
  thread is then skipped), so its late outcome still reaches ``_on_done``;
* an executor that returns or raises after the engine aborted its attempt (a thread still
  running at a timeout or lease loss, a coroutine that swallowed the cancellation) made a
  report for a lease that is no longer current: it is ignored and counted
  (``stale_completions``, docs/reference/behaviour.md#reliability), unless the scheduler shut down (or
  restarted) since;
* ``submit``/``enqueue`` without task fields go straight to ``core.submit`` (no nested
  coroutine); with fields, or when the pool is full, through ``_submit``;
* handles are plain futures resolved by the driver; ``enqueue`` creates none;
* events are built only while someone subscribes.

Everything runs on the loop that called ``start()``; the core is never touched from another
thread (``ctx.heartbeat()`` from an executor thread is marshalled onto the loop).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, overload

from cronoq import otel as _otel
from cronoq.engine.actions import Abort, Dispatch, Persist, Publish, Resolve, Scale, SpaceAvailable
from cronoq.engine.admission import BatchItem
from cronoq.engine.attempts import AttemptRecord, TaskExtras
from cronoq.engine.config import CoreConfig
from cronoq.engine.core import Core
from cronoq.engine.keys import same_tenant
from cronoq.engine.model import FIRST_TERMINAL, STATUS_NAMES, TaskOptions, TaskState
from cronoq.engine.pools import Kinds
from cronoq.engine.progress import Progress, PublishProgress
from cronoq.engine.recurring import CronSchedule, RecurringInfo, RecurringSpec, parse_overlap
from cronoq.engine.resources import ResourceConfig
from cronoq.engine.snapshot import Snapshot
from cronoq.engine.time import check_seconds, to_ns
from cronoq.engine.waiting import why_not_running
from cronoq.errors import (
    ArgumentTypeError,
    NotStartedError,
    SchedulerError,
    SubmitError,
    TaskFailed,
    outcome_of,
)
from cronoq.runtime.clock import Clock, TimerHandle
from cronoq.runtime.context import TaskContext
from cronoq.runtime.events import EventStream, ProgressEventStream, _Ring
from cronoq.runtime.gcpause import gc_paused
from cronoq.runtime.handles import TaskHandle, set_outcome
from cronoq.runtime.operations import Operations
from cronoq.runtime.parking import Signals
from cronoq.runtime.pool import Executor, Pool
from cronoq.runtime.processes import Processes, ProcessRegistry, check_processes
from cronoq.runtime.scalers import Scaler, SlotScaler
from cronoq.runtime.scheduler_args import (
    check_clock,
    check_event_capacity,
    check_id_shard,
    check_keep_payloads,
    check_key_retention_max,
    check_pools,
    check_ref,
    check_resources,
    check_store_and_codec,
)
from cronoq.runtime.seam import SchedulerSeam
from cronoq.runtime.submit_payloads import ProcessPayloads, encode_payload
from cronoq.runtime.task import PER_TASK_FIELDS, OptionsCache, Prepared, Task, prepare, refuse_placeholder
from cronoq.spec.submission import Submission

if TYPE_CHECKING:
    from cronoq.runtime.durable import Committer
    from cronoq.store.base import Store
    from cronoq.store.codec import Codec

SHUTDOWN_MESSAGE = "scheduler shut down"
_log = logging.getLogger("cronoq")


#: what a plain function's thread returns when its attempt was aborted before the thread began
_SKIPPED = object()


def _run_in_thread(executor: Executor, ctx: TaskContext, payload: object) -> Any:
    """Run a plain executor in a pool thread, unless its attempt was aborted meanwhile."""
    if ctx._cancelled:
        return _SKIPPED
    return executor(ctx, payload)


# submission fields that are not task options: a submission without them takes the fast path
_SPECIAL_FIELDS = PER_TASK_FIELDS


class Scheduler(Operations, Signals):
    """An elastic, priority-aware asyncio task scheduler: pools of worker slots around the engine.

    ```python
    async with Scheduler([Pool("default", run, max=8)]) as sched:
        handle = await sched.submit({"n": 1}, priority="high", deadline_in=5.0)
        print(await handle)
    ```

    At least one pool is required, with unique names. The scheduler is bound to the event loop
    that starts it; calls before ``start()`` or after ``shutdown()`` raise ``SchedulerError``.
    ``store`` (default: a ``MemoryStore``) makes the state durable and ``codec`` (default:
    ``JsonCodec``) encodes payloads and outputs for it; ``emit_transitions`` publishes every
    transition, not only terminal ones; ``event_capacity`` is each event subscriber's buffer.
    ``key_retention`` (s) and ``key_retention_max`` bound how long and how many finished tasks
    stay retained (docs/reference/behaviour.md#retention); ``wait_for_space=False`` makes a
    submission to a full pool fail with ``SubmitError("full")`` instead of waiting (the server's
    choice: a request never waits for space); ``keep_payloads`` says whether finished tasks keep
    their payloads in memory so they can be replayed (default ``None``: yes, unless the store is
    durable, which holds them; docs/how-to/operations.md#replay); ``id_shard`` (1..255) puts a
    shard number in the task ids, which then read ``shard << 56 | epoch << 40 | seq``; 0, the
    default, is not sharded and ids read ``epoch << 48 | seq`` (cronoq.engine.ids,
    docs/how-to/shards.md); ``processes`` (a :class:`cronoq.Processes`) sets how the child
    processes of ``run_in="process"`` work run, for pools without their own (docs/how-to/processes.md).
    """

    def __init__(
        self,
        pools: Sequence[Pool] | Iterable[Pool],
        resources: Sequence[ResourceConfig] | None = None,
        emit_transitions: bool = False,
        *,
        shutdown_grace: float = 5.0,
        event_capacity: int = 1024,
        store: Store | None = None,
        codec: Codec | None = None,
        clock: Clock | None = None,
        key_retention: float = 3600.0,
        key_retention_max: int = 1_000_000,
        wait_for_space: bool = True,
        keep_payloads: bool | None = None,
        id_shard: int = 0,
        processes: Processes | None = None,
    ) -> None:
        pool_list = check_pools(pools)
        self._procs = ProcessRegistry(check_processes(processes))  # run_in="process" children
        res_list = check_resources(resources)
        self._resources = res_list
        self._codec = check_store_and_codec(store, codec)
        self._clock = check_clock(clock)
        self._mono = self._clock.monotonic_ns
        self._store = store
        self._committer: Committer | None = None
        self._fenced: BaseException | None = None
        #: called (with the error) when a durable store fences this scheduler off (server hook)
        self.on_fenced: Callable[[BaseException], Awaitable[None] | None] | None = None
        # key retention (docs/reference/behaviour.md#retention); the server passes limits.key_retention_*
        self._key_retention = check_seconds("key_retention", key_retention)
        self._key_retention_max = check_key_retention_max(key_retention_max)
        # whether ended tasks keep their payloads in memory, for replays (None: unless the store
        # is durable, which holds them; docs/how-to/operations.md#replay)
        self._keep_payloads = check_keep_payloads(keep_payloads)
        #: wait_for_space=False (the server): a full pool answers SubmitError('full') at once
        self._nowait = not wait_for_space
        #: the shard number carried in task ids (docs/how-to/shards.md); 0 = not sharded
        self.id_shard = check_id_shard(id_shard)
        self._shutdown_grace = check_seconds("shutdown_grace", shutdown_grace)
        self._event_capacity = check_event_capacity(event_capacity)
        self._emit_transitions = bool(emit_transitions)
        self._pools = pool_list
        self._process_payloads = ProcessPayloads(pool_list)
        self._pool_names = [p.name for p in pool_list]
        self._core: Core | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._t0 = 0
        self._time_base = 0
        self._next_seq = 1
        self._accepting = False
        self._kick_pending = False
        self._timer: TimerHandle | None = None
        self._timer_at = -1
        self._running: dict[int, tuple[asyncio.Future[Any], TaskContext]] = {}
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._streams: set[_Ring[Any]] = set()
        self._pstreams: set[ProgressEventStream] = set()  # (also in _streams) asked for progress
        self._space: dict[str, asyncio.Future[None]] = {}
        self._opts = OptionsCache()
        # OpenTelemetry (cronoq.otel): None without it, so every trace hook is one `is None` test
        self._otel_probe = _otel.context_probe()
        self._otel_all = False  # set by otel.instrument(): every attempt runs in a span
        self._otel_tracer: Any = None  # the tracer of those spans (None: the global one)
        self._scaling: dict[str, asyncio.Task[None]] = {}
        self._seam = SchedulerSeam(self)
        probe = CoreConfig([p.config for p in pool_list], resources=res_list)
        self._default_pool = pool_list[probe.default_pool_index()].name

    # ------------------------------------------------------------------ properties

    @property
    def started(self) -> bool:
        return self._core is not None

    @property
    def pools(self) -> list[str]:
        return list(self._pool_names)

    @property
    def default_pool(self) -> str:
        return self._default_pool

    @property
    def clock(self) -> Clock:
        """The clock this scheduler runs on (see :mod:`cronoq.runtime.clock`)."""
        return self._clock

    @property
    def seam(self) -> SchedulerSeam:
        """What shells built on this scheduler (the server, ``cronoq.otel``) use of it; not for
        applications (see :mod:`cronoq.runtime.seam`)."""
        return self._seam

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Bind to the running loop and begin scheduling.  A no-op if already started."""
        if self._core is not None:
            return
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.get_ident()
        store, codec = self._store, self._codec
        epoch = 0
        recovered = None
        if store is not None:
            assert codec is not None  # (a store always has one: check_store_and_codec)
            await store.open()
            epoch = await store.acquire()
            recovered = await store.load(codec)
            if self._core is not None:  # started concurrently while we waited
                return
        self._t0 = self._mono()
        self._time_base = self._clock.time_ns()
        config = CoreConfig(
            [p.config for p in self._pools],
            emit_transitions=self._emit_transitions,
            time_base=self._time_base,
            resources=self._resources,
            seed=self._time_base & 0xFFFFFFFF,
            persist=store is not None,
            retention=self._key_retention,
            retention_max=self._key_retention_max,
            keep_payloads=self._keep_payloads,
        )
        self._fenced = None
        if store is None:
            self._core = Core(config, now=0, first_seq=self._next_seq, shard=self.id_shard)
            self._arm()  # timers from the start (a pool above its floor is evaluated at once)
        else:
            from cronoq.runtime.durable import Committer

            # a commit that failed for good leaves the engine ahead of the store: step down (and, on
            # the server, lead again from what the store has), so nothing unacknowledged can later
            # be answered as a duplicate
            assert codec is not None
            self._committer = Committer(
                store, codec, epoch, on_fenced=self._on_fenced, on_error=self._on_fenced
            )
            if hasattr(store, "on_lost"):
                store.on_lost = self._on_lost
            core = Core(config, now=0, epoch=epoch, shard=self.id_shard)
            self._core = core
            assert recovered is not None
            core.recover(0, recovered)
            self._restore_bulk_keys(recovered.bulk_keys)
            self._apply()
            self._kick()
        self._accepting = True

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown(self._shutdown_grace)

    async def shutdown(self, grace: float | None = 5.0) -> None:
        """Stop accepting, wait up to ``grace`` s for running attempts, cancel the rest.

        ``grace`` defaults to 5.0 s (docs/reference/behaviour.md#scheduler-api); ``None`` means the
        scheduler's ``shutdown_grace`` (what ``async with`` uses).  Every unfinished handle fails with
        ``TaskFailed(status="shutdown")``.  Idempotent.
        """
        core = self._core
        if core is None:
            return
        g = self._shutdown_grace if grace is None else check_seconds("grace", grace)
        self._accepting = False
        core.paused = True
        if self._running:
            # Loop: an attempt's future may be replaced while we wait (a plain function that
            # returned an awaitable continues as a new future under the same lease).
            loop = asyncio.get_running_loop()
            end = loop.time() + g
            while True:
                await asyncio.sleep(0)  # let the done callbacks of finished attempts report
                pending = [f for f, _ in self._running.values() if not f.done()]
                remaining = end - loop.time()
                if not pending or remaining <= 0:
                    break
                await asyncio.wait(pending, timeout=remaining)
        self._drive()
        for fut, ctx in self._running.values():
            ctx._cancelled = True
            ctx._ended = True
            fut.cancel()
        self._running.clear()
        await self._procs.close()  # (the cancels above started the hard kills of running children)
        if core.actions:
            self._apply()  # the last status changes go to the store too
        self._next_seq = core.next_seq
        self._core = None
        committer, self._committer = self._committer, None
        if committer is not None:
            try:
                await committer.stop()  # flushes (a fenced store refuses: that is fine), then stops
            except Exception as e:
                if self._fenced is None:
                    _log.exception("could not flush the store at shutdown")
                else:
                    _log.info("store not flushed after losing leadership: %s", e)
            store = self._store
            assert store is not None  # (a committer is made for a store only)
            try:
                if self._fenced is None:
                    await store.release()
                await store.close()
            except Exception:
                _log.exception("could not release the store at shutdown")
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = -1
        for tid, fut in self._waiters.items():
            if not fut.done():
                fut.set_exception(TaskFailed("shutdown", SHUTDOWN_MESSAGE, tid))
                fut.exception()  # mark retrieved: nobody may be awaiting this handle
        self._waiters.clear()
        for sf in self._space.values():
            if not sf.done():
                sf.set_result(None)
        self._space.clear()
        for s in list(self._streams):
            s._end()
        self._streams.clear()
        self._pstreams.clear()

    # ------------------------------------------------------------------ driver

    def _now(self) -> int:
        return self._mono() - self._t0

    def _kick(self) -> None:
        if not self._kick_pending:
            self._kick_pending = True
            self._loop.call_soon(self._drive)  # type: ignore[union-attr]

    def _drive(self) -> None:
        self._kick_pending = False
        core = self._core
        if core is None:
            return
        core.tick(self._now())
        if core.actions:
            self._apply()
        self._arm()

    def _arm(self) -> None:
        core = self._core
        if core is None:
            return
        w = core.next_wakeup()
        if w is None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
                self._timer_at = -1
            return
        if w == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = w
        self._timer = self._clock.call_at(self._t0 + w, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = -1
        self._drive()

    def _apply(self) -> None:
        """Carry out the core's pending actions (and any they cause), in order."""
        core = self._core
        assert core is not None
        persist: list[Any] = []
        while core.actions:
            actions = core.actions
            core.actions = []
            for a in actions:
                tp = type(a)
                if tp is Persist:
                    persist.append(a.mutation)
                elif tp is Dispatch:
                    self._start_attempt(a.task, a.lease)
                elif tp is Resolve:
                    fut = self._waiters.pop(a.task.id, None)
                    if fut is not None:
                        set_outcome(fut, a.task)
                elif tp is Publish:
                    for s in self._streams:
                        s._push(a.event)
                elif tp is Abort:
                    entry = self._running.pop(a.lease, None)
                    if entry is not None:
                        fut, ctx = entry
                        ctx._cancelled = True
                        ctx._ended = True
                        ctx.abort_reason = a.reason
                        # a later report from it is stale (docs/reference/behaviour.md#reliability)
                        ctx._aborted_by = core
                        if not ctx._in_thread:
                            fut.cancel()
                        # else: a thread cannot be interrupted; its outcome, when it comes, is a
                        # stale report (_on_done), and one not yet started is skipped
                elif tp is PublishProgress:
                    for ps in self._pstreams:
                        ps._push(a.event)
                elif tp is SpaceAvailable:
                    sf = self._space.pop(a.pool, None)
                    if sf is not None and not sf.done():
                        sf.set_result(None)
                elif tp is Scale:
                    self._scale(a.pool, a.desired)
        if persist and self._committer is not None:
            self._committer.add(persist)

    # ------------------------------------------------------------------ attempts

    def _start_attempt(self, t: TaskState, lease: int) -> None:
        pool = self._pools[t.opts.pool_index]
        ctx = TaskContext(self, t, lease)
        loop = self._loop
        assert loop is not None
        executor = pool.executor
        if self._otel_probe is not None and (
            self._otel_all or ((tags := t.opts.tags) is not None and _otel.TRACEPARENT in tags)
        ):  # the attempt runs in a span continuing the submitter's (cronoq.otel)
            executor = _otel.traced_executor(executor, ctx, pool.is_async, self._otel_tracer)
        elif pool.start_attempt is not None:
            try:
                fut = pool.start_attempt(ctx, t.payload)
            except Exception as exc:
                return self._not_started(lease, ctx, exc)
            self._running[lease] = (fut, ctx)
            fut.add_done_callback(partial(self._on_done, lease, ctx, output=True))
            return
        if pool.is_async:
            # The executor is called inside _attempt, which reports the outcome itself when it
            # returns: no done callback, no extra loop turn.  If this task is cancelled before
            # its first step the executor is never called (no coroutine is left unawaited).
            coro = self._attempt(lease, ctx, executor, t.payload)
            try:
                task = loop.create_task(coro)
            except Exception as exc:
                coro.close()
                return self._not_started(lease, ctx, exc)
            if not ctx._ended:  # (an eager task factory may already have finished it)
                self._running[lease] = (task, ctx)
            return
        try:
            fut = loop.run_in_executor(None, _run_in_thread, executor, ctx, t.payload)
        except Exception as exc:  # the executor could not even be started
            return self._not_started(lease, ctx, exc)
        ctx._in_thread = True
        self._running[lease] = (fut, ctx)
        fut.add_done_callback(partial(self._on_done, lease, ctx))

    def _not_started(self, lease: int, ctx: TaskContext, exc: Exception) -> None:
        """The executor could not even start the attempt: it failed (``outcome_of``), and a
        retry due at once is dispatched on the next turn."""
        ctx._ended = True
        self._fail_attempt(self._core, lease, exc)  # type: ignore[arg-type]
        self._kick()

    async def _attempt(self, lease: int, ctx: TaskContext, executor: Executor, payload: object) -> None:
        """Run one attempt of an async executor and report its outcome
        (docs/reference/behaviour.md#reliability).

        An abort by the engine (timeout, cancel, lease loss) or by shutdown sets
        ``ctx._cancelled`` *before* cancelling this task, and such an attempt reports nothing
        (an executor that swallows the cancellation and returns or raises anyway made a stale
        report: counted after an engine abort); a ``CancelledError`` the executor raises on
        its own (``ctx._cancelled`` still False) is a retryable failure.
        """
        try:
            result = await executor(ctx, payload)
        except asyncio.CancelledError as exc:
            if ctx._cancelled:
                raise  # our abort: the lease is gone, report nothing; end as cancelled
            self._report_error(lease, ctx, exc)
        except Exception as exc:
            if ctx._cancelled:
                self._late_report(ctx)
            else:
                self._report_error(lease, ctx, exc)
        else:
            if ctx._cancelled:
                self._late_report(ctx)
            else:
                self._running.pop(lease, None)
                ctx._ended = True
                core = self._core
                if core is not None:
                    core.complete(self._now(), lease, result)
                    self._kick()

    def _report_error(self, lease: int, ctx: TaskContext, exc: BaseException) -> None:
        """Report a failed attempt: ``Permanent`` → failed, anything else → retryable."""
        self._running.pop(lease, None)
        ctx._ended = True
        core = self._core
        if core is None:
            return
        self._fail_attempt(core, lease, exc)
        self._kick()

    def _fail_attempt(self, core: Core, lease: int, exc: BaseException) -> None:
        """Report the attempt under ``lease`` failed with ``exc`` (see ``errors.outcome_of``)."""
        o = outcome_of(exc)
        ra = None if o.retry_after is None else to_ns(o.retry_after)
        core.fail(self._now(), lease, o.message, permanent=o.permanent, retry_after=ra)

    def _on_done(self, lease: int, ctx: TaskContext, fut: asyncio.Future[Any], output: bool = False) -> None:
        """An attempt's future is done (``output``: its result is the output as it is)."""
        entry = self._running.get(lease)
        if entry is None or entry[0] is not fut:
            # aborted by the engine (timeout, cancel, lease loss) or shut down; an outcome that
            # arrives anyway (a thread that ran on, an awaitable that ignored its cancellation)
            # is a stale report
            if not fut.cancelled():
                exc = fut.exception()  # (retrieved: never logged as unhandled)
                result = fut.result() if exc is None else None
                if result is not _SKIPPED:
                    if inspect.iscoroutine(result):
                        result.close()  # a late plain function's coroutine is never run
                    self._late_report(ctx)
            return
        core = self._core
        if core is None:
            return
        try:
            result = fut.result()
        except (asyncio.CancelledError, Exception) as exc:  # (cancelled by itself: retryable)
            del self._running[lease]
            entry[1]._ended = True
            self._fail_attempt(core, lease, exc)
        else:
            if not output and not isinstance(fut, asyncio.Task) and inspect.isawaitable(result):
                # a plain function returned an awaitable: await it within the same attempt
                try:
                    inner = asyncio.ensure_future(result)
                except Exception as exc:
                    del self._running[lease]
                    return self._not_started(lease, entry[1], exc)
                entry[1]._in_thread = False  # the rest runs on the loop: abort cancels it
                self._running[lease] = (inner, entry[1])
                inner.add_done_callback(partial(self._on_done, lease, entry[1]))
                return
            del self._running[lease]
            entry[1]._ended = True
            core.complete(self._now(), lease, result)
        self._kick()

    def _count_stale(self) -> None:
        """A report arrived for a lease that is no longer current (remote workers)."""
        core = self._core
        if core is not None:
            core.counters["stale_completions"] += 1

    def _late_report(self, ctx: TaskContext) -> None:
        """An in-process attempt ended after the engine aborted it: a stale report
        (docs/reference/behaviour.md#reliability).

        Not counted when shutdown aborted it or the scheduler shut down (or restarted) since.
        """
        core = ctx._aborted_by
        if core is not None and core is self._core:
            self._count_stale()

    def _heartbeat(self, lease: int) -> None:
        core = self._core
        if core is not None:
            core.heartbeat(self._now(), lease)

    # ------------------------------------------------------------------ submission

    def _require(self) -> Core:
        core = self._core
        if core is None or not self._accepting:
            raise NotStartedError()
        return core

    def _prepare(self, fields: dict[str, Any] | Submission) -> Prepared:
        prepared = prepare(self._opts, fields)
        probe = self._otel_probe
        if probe is not None and probe():  # something in the OTel context: carry a span's context
            return (_otel.traced_options(prepared[0]), *prepared[1:])
        return prepared

    async def _wait_space(self, opts: TaskOptions) -> None:
        core = self._require()
        name = core.pools[opts.pool_index].name
        sf = self._space.get(name)
        if sf is None or sf.done():
            sf = self._loop.create_future()  # type: ignore[union-attr]
            self._space[name] = sf
        await asyncio.shield(sf)
        if self._core is not core or not self._accepting:
            # shut down while this submission waited for space: nothing was accepted
            raise SchedulerError(f"{SHUTDOWN_MESSAGE} while the submission waited for space in pool '{name}'")

    async def _submit(self, payload: object, fields: dict[str, Any] | Submission) -> tuple[int, bool]:
        core = self._require()
        opts, key, dl, st, deps = self._prepare(fields)
        self._process_payloads.check(core, opts, payload)
        # (core.submit resolves the pool after the key: a duplicate's other fields are not
        # looked at, docs/reference/behaviour.md#ids-keys-retention)
        blob = self._encode(payload) if self._committer is not None else None
        while True:
            now = self._now()
            deadline = None if dl is None else dl.resolve(now, self._time_base)
            start = None if st is None else st.resolve(now, self._time_base)
            try:
                tid, dup = core.submit(now, opts, payload, key, deadline, start, deps, blob)
                break
            except SubmitError as e:
                if e.code != "full" or self._nowait:
                    raise
            await self._wait_space(opts)
            core = self._require()
        if not dup:
            self._kick()
        if self._committer is not None:
            await self._durable()
        return tid, dup

    def _encode(self, payload: object) -> bytes:
        """Encode a payload for the store at submission: an unencodable one is ``invalid``."""
        return encode_payload(self._codec, payload)

    async def _durable(self) -> None:
        """Acknowledge only after this step's mutations are committed (group commit)."""
        if self._core is not None and self._core.actions:
            self._apply()
        committer = self._committer
        if committer is not None:
            await committer.barrier()

    def _on_fenced(self, err: BaseException) -> None:
        """Another instance took over the store: stop leading at once, without writing."""
        if self._fenced is not None or self._core is None:
            return
        self._fenced = err
        _log.error("lost leadership of the store: %s", err)
        loop = self._loop
        if loop is not None:
            loop.create_task(self._step_down(err))

    def _on_lost(self) -> None:
        from cronoq.errors import Fenced

        self._on_fenced(Fenced("leadership lost"))

    async def _step_down(self, err: BaseException) -> None:
        try:
            await self.shutdown(0.0)
        finally:
            hook = self.on_fenced
            if hook is not None:
                res = hook(err)
                if inspect.isawaitable(res):
                    await res

    def _submit_plain(self, payload: object, fields: dict[str, Any] | None = None) -> int | None:
        """Fast path for a submission with option fields only (no key, times or edges): its id,
        or None if the pool is full or the store is durable (the slow path then does it).

        Must stay equivalent to ``_submit`` with such ``fields`` (keep the two in step).
        """
        core = self._require()
        if self._committer is not None:
            return None  # durable: the slow path encodes and awaits the commit
        opts = self._opts.get(fields) if fields else self._opts.default
        probe = self._otel_probe
        if probe is not None and probe():  # something in the OTel context: carry a span's context
            opts = _otel.traced_options(opts)
        if opts.resolver is not core:
            core.resolve_pool(opts)
        self._process_payloads.check(core, opts, payload)
        try:
            tid, _ = core.submit(self._now(), opts, payload)  # no key: never a duplicate
        except SubmitError as e:
            if e.code != "full":
                raise
            return None  # the slow path waits for space
        self._kick()
        return tid

    async def submit(self, payload: object, **fields: Any) -> TaskHandle:
        """Submit one task (docs/reference/behaviour.md#task-fields fields) and return a handle to its
        outcome."""
        refuse_placeholder(payload)
        if not fields or _SPECIAL_FIELDS.isdisjoint(fields):
            tid = self._submit_plain(payload, fields)
            if tid is not None:
                return self._handle_for(tid, False)
        tid, dup = await self._submit(payload, fields)
        return self._handle_for(tid, dup)

    async def enqueue(self, payload: object, **fields: Any) -> int:
        """Submit one task without a handle (cheaper); returns its id."""
        refuse_placeholder(payload)
        if not fields or _SPECIAL_FIELDS.isdisjoint(fields):
            tid = self._submit_plain(payload, fields)
            if tid is not None:
                return tid
        tid, _ = await self._submit(payload, fields)
        return tid

    async def submit_batch(self, tasks: Iterable[Task]) -> list[TaskHandle]:
        """Submit tasks atomically: all are accepted or none (SubmitError)."""
        results = await self._submit_batch(tasks)
        with gc_paused():
            return [self._handle_for(tid, dup) for tid, dup in results]

    async def _submit_batch(self, tasks: Iterable[Task]) -> list[tuple[int, bool]]:
        batch = list(tasks)
        for t in batch:
            if not isinstance(t, Task):
                raise ArgumentTypeError(f"submit_batch takes Task objects (got {t!r})")
        core = self._require()
        if not batch:
            return []
        for t in batch:
            if t._opts.resolver not in (None, core):
                # resolved by another scheduler, whose tasks keep using those options:
                # resolve a copy here (a pool's index differs between schedulers)
                t._opts = t._opts.unresolved()
            self._process_payloads.check(core, t._opts, t._sub.payload)
        blobs = [self._encode(t._sub.payload) for t in batch] if self._committer is not None else None
        probe = self._otel_probe
        trace = _otel.trace_tags() if probe is not None and probe() else None
        while True:
            now = self._now()
            with gc_paused():  # many long-lived objects at once, no cycles: see gcpause
                items = [
                    BatchItem(
                        t._opts if trace is None else _otel.traced_options(t._opts, trace),
                        sub.payload,
                        sub.key,
                        None if sub.deadline is None else sub.deadline.resolve(now, self._time_base),
                        None if sub.start is None else sub.start.resolve(now, self._time_base),
                        sub.deps,
                        blobs[i] if blobs is not None else None,
                    )
                    for i, t in enumerate(batch)
                    for sub in (t._sub,)
                ]
                try:
                    results = core.submit_batch(now, items)
                    break
                except SubmitError as e:
                    if e.code != "full" or self._nowait:
                        raise
                    full_pool = next(
                        (o for o, *_ in items if core.pools[o.pool_index].waiting_space), items[0][0]
                    )
            await self._wait_space(full_pool)
            core = self._require()
        self._kick()
        if self._committer is not None:
            await self._durable()
        return results

    def _handle_for(self, tid: int, dup: bool) -> TaskHandle:
        fut = self._waiters.get(tid)
        if fut is None:
            fut = self._loop.create_future()  # type: ignore[union-attr]
            t = self._core.tasks.get(tid) if self._core is not None else None
            if t is not None and t.status >= FIRST_TERMINAL:
                set_outcome(fut, t)
            else:
                self._waiters[tid] = fut
        return TaskHandle(self, tid, dup, fut)

    # ------------------------------------------------------------------ control and queries

    def _move_attempt(self, ctx: TaskContext, labels: dict[str, str], kinds: Kinds = None) -> bool:
        """Move ``ctx``'s running attempt to the worker group with ``labels`` and ``kinds`` (a remote
        lease handed back unrun, re-offered: :meth:`Core.move_attempt`); ``ctx.group`` follows."""
        core = self._core
        if core is None or not core.move_attempt(ctx.lease, labels, kinds):
            return False
        ctx._group = ctx._task.group
        self._kick()  # the slot given back may take a parked labelled task
        return True

    def _cancel_now(self, ref: int | str) -> bool:
        core = self._core
        if core is None:
            return False
        ok = core.cancel(self._now(), ref)
        if core.actions:
            self._apply()
        if ok:
            self._kick()
        return ok

    def _find(self, ref: object, tenant: object) -> TaskState | None:
        """The task ``ref`` names for ``tenant``: keys are scoped by tenant, and with a tenant
        given, another tenant's task (by id too) is as unknown as a missing one."""
        check_ref(ref)
        if tenant is not None and not isinstance(tenant, str):
            raise ArgumentTypeError(f"tenant must be a string (got {tenant!r})")
        core = self._require()
        t = core.lookup(self._now(), ref, tenant)  # type: ignore[arg-type]
        if t is not None and tenant is not None and not same_tenant(t.opts.tenant, tenant):
            return None
        return t

    async def cancel(self, ref: int | str, *, tenant: str | None = None) -> bool:
        """Cancel a task by id or key (a key of ``tenant``'s tasks); False if unknown or
        already terminal."""
        t = self._find(ref, tenant)
        return False if t is None else self._cancel_now(t.id)

    async def status(self, ref: int | str, *, tenant: str | None = None) -> str | None:
        """The task's status name, or None if unknown (or no longer retained, by the engine or
        a durable store's history). Keys: ``tenant``'s tasks (docs/reference/behaviour.md#auth)."""
        t = await self._find_or_history(ref, tenant)
        return None if t is None else STATUS_NAMES[t.status]

    async def handle(self, ref: int | str, *, tenant: str | None = None) -> TaskHandle | None:
        """A handle to an existing task of ``tenant`` (live, retained, or finished in a durable
        store's history), or None."""
        return await self._handle_of(ref, tenant)

    async def snapshot(self) -> Snapshot:
        core = self._require()
        return core.snapshot(self._now())

    async def set_capacity(self, pool: str, n: int) -> None:
        """Set a pool's capacity (worker slots) directly; not clamped to min/max."""
        core = self._require()
        core.set_capacity(self._now(), pool, n)
        self._kick()

    async def add_recurring(
        self,
        name: str,
        cron: str,
        payload: object,
        *,
        tz: str | None = None,
        overlap: str = "skip",
        tolerance: float = 1.0,
        on_miss: str = "run_late",
        **fields: Any,
    ) -> RecurringInfo:
        """Add (or replace) a cron schedule whose occurrences are fixed-start tasks
        (docs/reference/behaviour.md#cron).

        Invalid cron, time zone or pool: ``SchedulerError("configuration error: ...")``, e.g.
        ``configuration error: invalid cron '61 * * * *': minute value 61 out of range 0-59``.
        Occurrences are tagged ``cronoq.recurring`` = ``name``.  Replacing a schedule whose
        occurrence for instant T is materialized keeps that occurrence; the new schedule's
        first one comes after T.
        """
        self._require()
        for f in ("start_in", "start_at", "after", "deps", "deadline_at"):
            if f in fields:
                raise ValueError(f"{f} is not supported for recurring schedules")
        sub = Submission.from_kwargs(payload, tolerance=tolerance, on_miss=on_miss, **fields)
        return await self._add_recurring(name, cron, sub, tz, overlap)

    async def _add_recurring(
        self, name: str, cron: str, sub: Submission, tz: str | None, overlap: str
    ) -> RecurringInfo:
        """:meth:`add_recurring` of a validated template (its times and edges are ignored but a
        relative deadline's)."""
        core = self._require()
        if not isinstance(name, str) or not name:
            raise ValueError(f"recurring schedule name must be a non-empty string (got {name!r})")
        ov = parse_overlap(overlap)
        try:
            schedule = CronSchedule(cron, tz)
        except ValueError as e:
            raise SchedulerError(f"configuration error: {e}") from None
        dl = None if sub.deadline is None else sub.deadline.relative
        spec = RecurringSpec(name, schedule, ov, sub.options(), sub.payload, sub.key, dl)
        if self._committer is not None:
            spec.blob = self._encode(sub.payload)
        try:
            info = core.add_recurring(self._now(), spec)
        except SubmitError as e:
            raise SchedulerError(f"configuration error: {e.message}") from None
        self._settle()
        if self._committer is not None:
            await self._durable()
        return info

    async def remove_recurring(self, name: str) -> bool:
        """Remove a schedule (its already-materialized occurrence still runs)."""
        core = self._require()
        return core.remove_recurring(self._now(), name)

    async def list_recurring(self) -> list[RecurringInfo]:
        """The schedules with their next occurrence."""
        return self._require().list_recurring()

    def _settle(self) -> None:
        """Carry out actions a control call produced and let the driver re-arm."""
        if self._core is not None and self._core.actions:
            self._apply()
        self._kick()

    async def set_group_capacity(self, pool: str, labels: dict[str, str] | None, n: int) -> None:
        """Size the worker group of ``pool`` with ``labels`` (``n = 0`` removes a labelled group)."""
        core = self._require()
        if labels is not None and not isinstance(labels, dict):
            raise ValueError(f"labels must be a dict of str to str (got {labels!r})")
        core.set_group_capacity(self._now(), pool, labels, n)
        self._settle()

    def _scale(self, pool: str, desired: int) -> None:
        """Carry out an autoscaler decision through the pool's scaler (in request order)."""
        p = self._pools[self._pool_names.index(pool)]
        scaler = p.scaler
        if type(scaler) is SlotScaler:
            if self._core is not None:
                self._core.set_capacity(self._now(), pool, desired)
                self._kick()
            return
        prev = self._scaling.get(pool)
        self._scaling[pool] = self._loop.create_task(self._run_scaler(prev, scaler, pool, desired))  # type: ignore[union-attr]

    async def _run_scaler(
        self, prev: asyncio.Task[None] | None, scaler: Scaler, pool: str, desired: int
    ) -> None:
        if prev is not None and not prev.done():
            await asyncio.wait([prev])
        try:
            result = scaler.scale_to(pool, desired)
            if inspect.isawaitable(result):
                result = await result
        except Exception:
            _log.exception("scaler %r failed to scale pool '%s' to %d", scaler, pool, desired)
            return
        if result is None or self._core is None:
            return
        if isinstance(result, bool) or not isinstance(result, int) or result < 0:
            _log.error("scaler %r returned an invalid capacity %r for pool '%s'", scaler, result, pool)
            return
        self._core.set_capacity(self._now(), pool, result)
        self._settle()

    @overload
    def events(self, on_lag: str = "skip", *, progress: Literal[False] = False) -> EventStream: ...
    @overload
    def events(self, on_lag: str = "skip", *, progress: Literal[True]) -> ProgressEventStream: ...
    @overload
    def events(self, on_lag: str = "skip", *, progress: bool) -> EventStream | ProgressEventStream: ...
    def events(self, on_lag: str = "skip", *, progress: bool = False) -> EventStream | ProgressEventStream:
        """Subscribe to status events from now on (see :class:`EventStream`).

        With ``progress=True`` the stream also yields
        :class:`~cronoq.engine.progress.ProgressEvent` items (at most 4 per second per task,
        newest wins; docs/how-to/progress.md#event-streams).
        """
        core = self._require()
        stream: EventStream | ProgressEventStream
        if progress:
            stream = ProgressEventStream(self, self._event_capacity, on_lag)
            self._pstreams.add(stream)
            core.progress.publish = True
        else:
            stream = EventStream(self, self._event_capacity, on_lag)
        self._streams.add(stream)
        core.publish = True
        return stream

    def _unsubscribe(self, stream: _Ring[Any]) -> None:
        self._streams.discard(stream)
        if isinstance(stream, ProgressEventStream):
            self._pstreams.discard(stream)
        core = self._core
        if core is not None:
            if not self._streams:
                core.publish = False
            if not self._pstreams:
                core.progress.publish = False

    # ------------------------------------------------------------------ progress and attempts

    def _progress(self, lease: int, done: float, total: float | None, message: str | None) -> None:
        core = self._core
        reported = core is not None and core.progress.report(self._now(), lease, done, total, message)
        if reported and core is not None and (core.actions or core.progress.publish):
            self._kick()  # publish now, or arm the trailing flush

    def _note_worker(self, lease: int, name: str) -> None:
        core = self._core
        if core is not None:
            core.attempts.set_worker(lease, name)

    async def progress(self, ref: int | str, *, tenant: str | None = None) -> Progress | None:
        """The latest progress of the task's latest attempt (docs/how-to/progress.md), or None:
        none reported by that attempt yet, or the task is unknown (or no longer retained).
        In memory only: a restart forgets it."""
        t = self._find(ref, tenant)
        return None if t is None else self._require().progress.latest(t)

    async def attempts(self, ref: int | str, *, tenant: str | None = None) -> list[AttemptRecord]:
        """The task's last 20 attempts, oldest first (docs/how-to/progress.md#attempts); ``[]``
        for an unknown task or one never dispatched.  In memory only: after a restart the
        timeline starts with the latest attempt the store knows."""
        t = self._find(ref, tenant)
        return [] if t is None else self._require().attempts.timeline(t)

    def task_extras(self, t: TaskState, full: bool = True) -> TaskExtras:
        """What the engine keeps beside the task record ``t`` (a record this scheduler's
        lookups returned): its latest progress, why it is not running (engine/waiting.py) and,
        when ``full``, its attempt timeline and dependency links, for a task's detail view (the
        server's ``TaskInfo``).  In memory only."""
        core = self._core
        if core is None:
            return TaskExtras(None, [], [], [])
        why = why_not_running(core, t, self._now())
        if not full:
            return TaskExtras(core.progress.latest(t), [], [], [], why)
        att = core.attempts
        return TaskExtras(core.progress.latest(t), att.timeline(t), att.parents(t), att.children(t), why)

    def __repr__(self) -> str:
        return f"<Scheduler pools={self._pool_names} started={self.started}>"


__all__ = ["Scheduler", "SchedulerError"]
