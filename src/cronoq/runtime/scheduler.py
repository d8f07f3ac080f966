"""``Scheduler``: the asyncio shell around the engine (docs/reference/behaviour.md#scheduler-api).

Theory of operation
-------------------
The scheduler holds its configuration and, while it runs, one
:class:`~cronoq.runtime.started.Started`, made by ``start()`` and dropped by ``shutdown()``: the
:class:`~cronoq.engine.core.Core` fed the time of the scheduler's clock (``clock.monotonic_ns()``
relative to ``start()``; by default the real loop clock, see :mod:`cronoq.runtime.clock`), the
driver (one coalesced ``call_soon`` per loop turn ticks the core and carries out its actions)
and the attempt runner (one dispatch on the pool's executor kind).  Public calls (``submit``,
``enqueue``, ``cancel``, ...) get it with ``_started()`` (``NotStartedError`` without one),
call the core synchronously and then kick the driver.

* ``submit``/``enqueue`` without task fields go straight to ``core.submit`` (no nested
  coroutine); with fields, or when the pool is full, through ``_submit``;
* handles are plain futures resolved by the driver; ``enqueue`` creates none;
* events are built only while someone subscribes;
* the operator actions (pause/resume, replay, bulk actions) are an
  :class:`~cronoq.runtime.operations.Operations` the scheduler holds; its public methods here
  delegate to it.

Everything runs on the loop that called ``start()``; the core is never touched from another
thread (``ctx.heartbeat()`` from an executor thread is marshalled onto the loop).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from cronoq import otel as _otel
from cronoq.engine.admission import BatchItem
from cronoq.engine.attempts import AttemptRecord, TaskExtras
from cronoq.engine.bulk import BulkResult
from cronoq.engine.config import CoreConfig
from cronoq.engine.core import Core
from cronoq.engine.keys import same_tenant
from cronoq.engine.model import STATUS_NAMES, TaskState, check_stored_text
from cronoq.engine.progress import Progress
from cronoq.engine.recurring import CronSchedule, RecurringInfo, RecurringSpec, parse_overlap
from cronoq.engine.resources import ResourceConfig
from cronoq.engine.snapshot import Snapshot
from cronoq.engine.time import check_seconds
from cronoq.engine.waiting import why_not_running
from cronoq.errors import (
    ArgumentTypeError,
    ConfigurationError,
    NotStartedError,
    SchedulerError,
    SubmitError,
)
from cronoq.runtime.clock import Clock
from cronoq.runtime.events import EventStream, ProgressEventStream, _Ring
from cronoq.runtime.gcpause import gc_paused
from cronoq.runtime.handles import TaskHandle
from cronoq.runtime.operations import BulkFilter, Operations
from cronoq.runtime.parking import Signals
from cronoq.runtime.pool import Pool
from cronoq.runtime.processes import Processes, ProcessRegistry, check_processes
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
from cronoq.runtime.started import Started
from cronoq.runtime.submit_payloads import ProcessPayloads
from cronoq.runtime.task import PER_TASK_FIELDS, OptionsCache, Prepared, Task, prepare, refuse_placeholder
from cronoq.spec.submission import Submission

if TYPE_CHECKING:
    from cronoq.engine.keyed import ResourceKey
    from cronoq.store.base import Store
    from cronoq.store.codec import Codec

# submission fields that are not task options: a submission without them takes the fast path
_SPECIAL_FIELDS = PER_TASK_FIELDS


def _prepare(
    cache: OptionsCache, probe: Callable[[], object] | None, fields: dict[str, Any] | Submission
) -> Prepared:
    """A submission's parts for the engine; with something in the OTel context (``probe``), its
    options carry a span's context."""
    prepared = prepare(cache, fields)
    if probe is not None and probe():
        return (_otel.traced_options(prepared[0]), *prepared[1:])
    return prepared


class Scheduler(Signals):
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
        #: the started state (start() makes it, shutdown() drops it: runtime/started.py)
        self._run: Started | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # (the last start's, for the seam)
        self._loop_thread = 0
        self._time_base = 0  # Unix ns of engine time 0 (the last start's)
        self._next_seq = 1
        self._streams: set[_Ring[Any]] = set()
        self._pstreams: set[ProgressEventStream] = set()  # (also in _streams) asked for progress
        self._opts = OptionsCache()
        # OpenTelemetry (cronoq.otel): None without it, so every trace hook is one `is None` test
        self._otel_probe = _otel.context_probe()
        self._otel_all = False  # set by otel.instrument(): every attempt runs in a span
        self._otel_tracer: Any = None  # the tracer of those spans (None: the global one)
        self._seam = SchedulerSeam(self)
        self._ops = Operations(self)
        probe = CoreConfig([p.config for p in pool_list], resources=res_list)
        self._default_pool = pool_list[probe.default_pool_index()].name

    # ------------------------------------------------------------------ properties

    @property
    def started(self) -> bool:
        return self._run is not None

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
        if self._run is not None:
            return
        store, codec = self._store, self._codec
        epoch = 0
        recovered = None
        if store is not None:
            assert codec is not None  # (a store always has one: check_store_and_codec)
            await store.open()
            epoch = await store.acquire()
            # (finished tasks within the engine's retention, and those live ones need: base.py)
            recovered = await store.load(codec, self._key_retention, self._key_retention_max)
            if self._run is not None:  # started concurrently while we waited
                return
        t0 = self._mono()
        self._time_base = time_base = self._clock.time_ns()
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        config = CoreConfig(
            [p.config for p in self._pools],
            emit_transitions=self._emit_transitions,
            time_base=time_base,
            resources=self._resources,
            seed=time_base & 0xFFFFFFFF,
            persist=store is not None,
            retention=self._key_retention,
            retention_max=self._key_retention_max,
            keep_payloads=self._keep_payloads,
        )
        if store is None:
            core = Core(config, now=0, first_seq=self._next_seq, shard=self.id_shard)
            run = self._run = Started(self, core, t0, time_base, None)
            run.arm()  # timers from the start (a pool above its floor is evaluated at once)
        else:
            from cronoq.runtime.durable import Committer

            assert codec is not None and recovered is not None
            core = Core(config, now=0, epoch=epoch, shard=self.id_shard)
            run = self._run = Started(self, core, t0, time_base, None)
            # a commit that failed for good leaves the engine ahead of the store: step down (and, on
            # the server, lead again from what the store has), so nothing unacknowledged can later
            # be answered as a duplicate
            run.committer = Committer(store, codec, epoch, on_fenced=run.on_fenced, on_error=run.on_fenced)
            if hasattr(store, "on_lost"):
                store.on_lost = run.on_lost
            core.recover(0, recovered)
            self._ops._restore_bulk_keys(recovered.bulk_keys)
            run.apply()
            run.kick()
        run.accepting = True

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
        run = self._run
        if run is None:
            return
        g = self._shutdown_grace if grace is None else check_seconds("grace", grace)
        await run.drain(g)
        if self._run is not run:
            return  # (shut down concurrently while the attempts drained)
        self._next_seq = run.core.next_seq
        self._run = None
        await run.close()

    # ------------------------------------------------------------------ submission

    def _started(self) -> Started:
        """The started state, accepting calls; else ``NotStartedError``."""
        run = self._run
        if run is None or not run.accepting:
            raise NotStartedError()
        return run

    def _require(self) -> Core:
        """The engine of the started scheduler (``NotStartedError`` when not started)."""
        return self._started().core

    def _handle_for(self, tid: int, dup: bool) -> TaskHandle:
        """A handle to task ``tid`` (made by the current start; ``NotStartedError`` after shutdown)."""
        run = self._run
        if run is None:
            raise NotStartedError()
        return run.handle_for(tid, dup)

    async def _submit(self, payload: object, fields: dict[str, Any] | Submission) -> tuple[int, bool]:
        result = self._submit_now(payload, fields)
        if not isinstance(result, tuple):
            result = await result  # (its pool was full: it waited for space)
        run = self._run
        if run is not None and run.committer is not None:
            await run.durable()
        return result

    def _submit_now(
        self, payload: object, fields: dict[str, Any] | Submission
    ) -> tuple[int, bool] | Awaitable[tuple[int, bool]]:
        """The engine step of a submission, on the loop without awaiting: ``(id, duplicate)``
        once the task is in the engine (kicked; not yet committed), or, when its pool is full
        and the scheduler waits for space, an awaitable that waits and then makes that step."""
        run = self._started()
        opts, key, dl, st, deps = _prepare(self._opts, self._otel_probe, fields)
        self._process_payloads.check(run.core, opts, payload)
        # (core.submit resolves the pool after the key: a duplicate's other fields are not
        # looked at, docs/reference/behaviour.md#ids-keys-retention)
        blob = run.blob(payload)

        def step(run: Started) -> tuple[int, bool] | None:
            now = run.now()
            deadline = None if dl is None else dl.resolve(now, self._time_base)
            start = None if st is None else st.resolve(now, self._time_base)
            try:
                tid, dup = run.core.submit(now, opts, payload, key, deadline, start, deps, blob)
            except SubmitError as e:
                if e.code != "full" or self._nowait:
                    raise
                return None
            if not dup:
                run.kick()
            return tid, dup

        result = step(run)
        if result is not None:
            return result

        async def after_space(run: Started) -> tuple[int, bool]:
            while True:
                await run.wait_space(opts)
                run = self._started()
                result = step(run)
                if result is not None:
                    return result

        return after_space(run)

    def _submit_plain(self, payload: object, fields: dict[str, Any] | None = None) -> int | None:
        """Fast path for a submission with option fields only (no key, times or edges): its id,
        or None if the pool is full or the store is durable (the slow path then does it).

        Must stay equivalent to ``_submit`` with such ``fields`` (keep the two in step).
        """
        run = self._started()
        core = run.core
        if run.committer is not None:
            return None  # durable: the slow path encodes and awaits the commit
        opts = self._opts.get(fields) if fields else self._opts.default
        probe = self._otel_probe
        if probe is not None and probe():  # something in the OTel context: carry a span's context
            opts = _otel.traced_options(opts)
        if opts.resolver is not core:
            core.resolve_pool(opts)
        self._process_payloads.check(core, opts, payload)
        try:
            tid, _ = core.submit(run.now(), opts, payload)  # no key: never a duplicate
        except SubmitError as e:
            if e.code != "full":
                raise
            return None  # the slow path waits for space
        run.kick()
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
        run = self._started()
        core = run.core
        if not batch:
            return []
        for t in batch:
            if t._opts.resolver not in (None, core):
                # resolved by another scheduler, whose tasks keep using those options:
                # resolve a copy here (a pool's index differs between schedulers)
                t._opts = t._opts.unresolved()
            self._process_payloads.check(core, t._opts, t._sub.payload)
        blobs = [run.blob(t._sub.payload) for t in batch] if run.committer is not None else None
        probe = self._otel_probe
        trace = _otel.trace_tags() if probe is not None and probe() else None
        while True:
            now = run.now()
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
            await run.wait_space(full_pool)
            run = self._started()
            core = run.core
        run.kick()
        if run.committer is not None:
            await run.durable()
        return results

    # ------------------------------------------------------------------ control and queries

    def _find(self, ref: object, tenant: object) -> TaskState | None:
        """The task ``ref`` names for ``tenant``: keys are scoped by tenant, and with a tenant
        given, another tenant's task (by id too) is as unknown as a missing one."""
        check_ref(ref)
        if tenant is not None and not isinstance(tenant, str):
            raise ArgumentTypeError(f"tenant must be a string (got {tenant!r})")
        run = self._started()
        core = run.core
        t = core.lookup(run.now(), ref, tenant)  # type: ignore[arg-type]
        if t is not None and tenant is not None and not same_tenant(t.opts.tenant, tenant):
            return None
        return t

    async def cancel(self, ref: int | str, *, tenant: str | None = None) -> bool:
        """Cancel a task by id or key (a key of ``tenant``'s tasks); False if unknown or
        already terminal.  Durable with a durable store: returns once committed."""
        t = self._find(ref, tenant)
        if t is None:
            return False
        run = self._started()
        ok = run.cancel(t.id)
        if run.committer is not None:
            await run.durable()
        return ok

    async def status(self, ref: int | str, *, tenant: str | None = None) -> str | None:
        """The task's status name, or None if unknown (or no longer retained, by the engine or
        a durable store's history). Keys: ``tenant``'s tasks (docs/reference/behaviour.md#auth)."""
        t = await self._ops._find_or_history(ref, tenant)
        return None if t is None else STATUS_NAMES[t.status]

    async def handle(self, ref: int | str, *, tenant: str | None = None) -> TaskHandle | None:
        """A handle to an existing task of ``tenant`` (live, retained, or finished in a durable
        store's history), or None."""
        return await self._ops._handle_of(ref, tenant)

    async def snapshot(self) -> Snapshot:
        run = self._started()
        core = run.core
        return core.snapshot(run.now())

    async def set_capacity(self, pool: str, n: int) -> None:
        """Set a pool's capacity (worker slots) directly; not clamped to min/max."""
        run = self._started()
        core = run.core
        core.set_capacity(run.now(), pool, n)
        run.kick()

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

        Invalid cron, time zone or pool: :class:`~cronoq.errors.ConfigurationError` (a
        SchedulerError) ``"configuration error: ..."``, e.g.
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
        run = self._started()
        core = run.core
        if not isinstance(name, str) or not name:
            raise ValueError(f"recurring schedule name must be a non-empty string (got {name!r})")
        check_stored_text("recurring schedule name", name, ValueError)
        ov = parse_overlap(overlap)
        try:
            schedule = CronSchedule(cron, tz)
        except ValueError as e:
            raise ConfigurationError(f"configuration error: {e}") from None
        dl = None if sub.deadline is None else sub.deadline.relative
        opts = sub.options()
        self._process_payloads.check(core, opts, sub.payload)  # (else every occurrence would fail)
        spec = RecurringSpec(name, schedule, ov, opts, sub.payload, sub.key, dl)
        spec.blob = run.blob(sub.payload)
        try:
            info = core.add_recurring(run.now(), spec)
        except SubmitError as e:
            raise ConfigurationError(f"configuration error: {e.message}", e.code) from None
        run.settle()
        if run.committer is not None:
            await run.durable()
        return info

    async def remove_recurring(self, name: str) -> bool:
        """Remove a schedule (its already-materialized occurrence still runs).  Durable with a
        durable store: returns once committed."""
        run = self._started()
        removed = run.core.remove_recurring(run.now(), name)
        await run.done()
        return removed

    async def list_recurring(self) -> list[RecurringInfo]:
        """The schedules with their next occurrence."""
        return self._require().list_recurring()

    async def set_group_capacity(self, pool: str, labels: dict[str, str] | None, n: int) -> None:
        """Size the worker group of ``pool`` with ``labels`` (``n = 0`` removes a labelled group)."""
        run = self._started()
        core = run.core
        if labels is not None and not isinstance(labels, dict):
            raise ValueError(f"labels must be a dict of str to str (got {labels!r})")
        core.set_group_capacity(run.now(), pool, labels, n)
        run.settle()

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
        run = self._started()
        core = run.core
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
        run = self._run
        if run is not None:
            if not self._streams:
                run.core.publish = False
            if not self._pstreams:
                run.core.progress.publish = False

    # ------------------------------------------------------------------ progress and attempts

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
        run = self._run
        if run is None:
            return TaskExtras(None, [], [], [])
        core = run.core
        why = why_not_running(core, t, run.now())
        if not full:
            return TaskExtras(core.progress.latest(t), [], [], [], why)
        att = core.attempts
        return TaskExtras(core.progress.latest(t), att.timeline(t), att.parents(t), att.children(t), why)

    # ------------------------------------------------------------------ operator actions (Operations)

    async def resource_keys(self, resource: str, top: int = 10) -> list[ResourceKey]:
        """The ``top`` (1..1000) busiest keys of keyed resource ``resource`` by waiting units
        (docs/concepts/resources.md#keyed-resources).  ValueError: not a keyed resource."""
        return await self._ops.resource_keys(resource, top)

    async def pause(self, pool: str) -> bool:
        """Pause ``pool``: it dispatches nothing new (running attempts finish, submissions are
        still accepted) until :meth:`resume`.  True when its state changed; durable with a
        durable store.  ValueError ``unknown pool 'x'``."""
        return await self._ops.pause(pool)

    async def resume(self, pool: str) -> bool:
        """Resume a paused ``pool``: its backlog dispatches at once.  True when its state changed."""
        return await self._ops.resume(pool)

    async def pause_recurring(self, name: str) -> bool:
        """Pause recurring schedule ``name``: occurrences coming due while it is paused are
        skipped and counted (``RecurringInfo.skipped_paused``).  True when its state changed.
        ValueError ``unknown recurring schedule 'x'``."""
        return await self._ops.pause_recurring(name)

    async def resume_recurring(self, name: str) -> bool:
        """Resume a paused recurring schedule.  True when its state changed."""
        return await self._ops.resume_recurring(name)

    async def trigger_recurring(self, name: str) -> TaskHandle:
        """ "Run now": submit one occurrence of schedule ``name`` at once (its options, tag
        ``cronoq.recurring``, payload; no key; no overlap check, also while paused)."""
        return await self._ops.trigger_recurring(name)

    async def replay(self, ref: int | str, *, force: bool = False, tenant: str | None = None) -> TaskHandle:
        """Replay a finished task that did not succeed (``force=True``: also a succeeded one):
        a new task with the same options and payload, a new id and the tag
        ``cronoq.replay_of=<id>``; the original's key moves to it.  Returns the new task's
        handle.  ReplayError ``unknown_task`` / ``not_finished`` / ``succeeded`` /
        ``payload_unavailable``."""
        return await self._ops.replay(ref, force=force, tenant=tenant)

    async def cancel_where(
        self, *, request_key: str | None = None, **filter: Unpack[BulkFilter]
    ) -> BulkResult:
        """Cancel every not-finished task matching the filter (:class:`BulkFilter`: every given
        criterion must hold, and at least one must be given), in pages;
        ``BulkResult(matched, acted)``.  Idempotent by ``request_key``."""
        return await self._ops.cancel_where(request_key=request_key, **filter)

    async def replay_where(
        self, *, force: bool = False, request_key: str | None = None, **filter: Unpack[BulkFilter]
    ) -> BulkResult:
        """Replay every finished task matching the filter (:class:`BulkFilter`) that did not
        succeed and has no replay yet (with ``force``, succeeded ones and replayed ones too), in
        pages; ``BulkResult(matched, acted)`` (a task whose payload is no longer retained is
        matched, not acted on).  Idempotent by ``request_key``, durably with a durable store."""
        return await self._ops.replay_where(force=force, request_key=request_key, **filter)

    def __repr__(self) -> str:
        return f"<Scheduler pools={self._pool_names} started={self.started}>"


__all__ = ["Scheduler", "SchedulerError"]
