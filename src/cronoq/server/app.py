"""``cronoq serve``: assembles configuration, store, leadership, scheduler and listeners.

Theory of operation
-------------------
The server is the library's :class:`~cronoq.runtime.scheduler.Scheduler` with remote
executors (``workers.py``): every server pool's executor sends attempts to connected
workers, and its capacity is the granted slots of those workers (``ExternalScaler``: the
autoscaler's ``desired`` figure is only published, for KEDA/HPA or a webhook).  Payloads and
outputs are :class:`~cronoq.server.workers.Blob` values (bytes + content type) stored with
:class:`BlobCodec`.

:class:`ServerApp` holds the transport-independent operations (submit, get, list, wait,
cancel, watch, snapshot, recurring, workers) used by both the gRPC (``grpc_api.py``) and the
HTTP (``http_api.py``) front ends; they raise :class:`ApiError` with a lower-case gRPC status
name, which each front end maps to its own status codes.

Leadership: listeners come up at once; the scheduler's ``start()`` blocks while another
instance leads the durable store (standby: API calls answer ``unavailable``, ``/readyz``
503).  When this instance is fenced off it announces ``Shutdown{not_leader}`` to its workers
and goes back to standby.  SIGTERM/SIGINT: stop accepting, ``Shutdown`` to workers, wait
``shutdown_grace_s`` for running attempts, release the leadership at once, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from cronoq.engine.model import FIRST_TERMINAL, READY, STATUS_BY_NAME, TaskState
from cronoq.errors import ConfigurationError, Fenced, SchedulerError, SubmitError
from cronoq.proto import enums
from cronoq.runtime.events import EventStream
from cronoq.runtime.pool import Pool
from cronoq.runtime.scalers import ExternalScaler
from cronoq.runtime.scheduler import Scheduler
from cronoq.runtime.task import Task
from cronoq.server import convert, request_limits
from cronoq.server.auth import Authenticator, Principal, allows_pool, check_tenant, stamp_tenant
from cronoq.server.config import ServerConfig, pool_config, resource_configs
from cronoq.server.history import HistoryRing, run_sampler
from cronoq.server.outputs import OutputCache
from cronoq.server.payload_budget import PayloadBudget
from cronoq.server.substitute import add_arguments, for_replay
from cronoq.server.worker_durable import WorkerDurable
from cronoq.server.workers import Blob, RemoteExecutor, WorkerRegistry
from cronoq.spec.submission import Submission
from cronoq.store.base import ShardMismatch, StoreReadError, lease_left, stop_task

if TYPE_CHECKING:
    from cronoq.server.shards.router import Router
    from cronoq.store.base import Store

log = logging.getLogger("cronoq.server")

#: ``/readyz`` says not ready this long before the leadership lease could lapse
READY_MARGIN_S = 1.0
#: the engine's reasons (engine/waiting.py) a kind no connected worker serves explains better
_CAPACITY_REASONS = ("waiting for capacity", "no worker serves task")
#: the longest a request's conversion holds the event loop before it lets other work run
SLICE_S = 0.004


class Slices:
    """Long conversions in slices: :meth:`step` yields to the event loop once the current slice
    has run ``SLICE_S`` (a 1000-task batch of 256 dependencies each takes a second to convert;
    health checks, heartbeats and the leader lease go on meanwhile)."""

    __slots__ = ("t0",)

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    async def step(self) -> None:
        if time.perf_counter() - self.t0 >= SLICE_S:
            await asyncio.sleep(0)
            self.t0 = time.perf_counter()


class ApiError(Exception):
    """A request failed: ``status`` is the lower-case gRPC status name.

    ``code`` is what the HTTP error body carries: the SubmitError code for submit errors,
    else the status name (docs/reference/behaviour.md#server-details).
    """

    def __init__(self, status: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or status

    @classmethod
    def from_submit(cls, e: SubmitError) -> ApiError:
        return cls(convert.submit_error_status(e.code), e.message, e.code)


class BlobCodec:
    """Stores ``Blob`` values: 2-byte content-type length, content type, bytes."""

    #: content type -> its stored prefix (length and UTF-8 bytes), for the few types in use:
    #: every payload and output is encoded, and building the prefix was most of it (issue #33)
    _HEADERS_MAX = 64

    def __init__(self) -> None:
        self._headers: dict[str, bytes] = {}

    def encode(self, obj: object) -> bytes:
        if isinstance(obj, Blob):
            ct = obj.content_type
            head = self._headers.get(ct)
            if head is None:
                b = ct.encode()
                head = struct.pack(">H", len(b)) + b
                if len(self._headers) >= self._HEADERS_MAX:
                    self._headers.clear()
                self._headers[ct] = head
            return head + obj.data
        if obj is None:
            return struct.pack(">H", 0)
        if isinstance(obj, (bytes, bytearray)):
            return struct.pack(">H", 0) + bytes(obj)
        raise TypeError(f"server payloads are bytes, not {type(obj).__name__}")

    def decode(self, data: bytes) -> Blob:
        if len(data) < 2:
            raise ValueError("truncated blob")
        (n,) = struct.unpack(">H", data[:2])
        if len(data) < 2 + n:
            raise ValueError("truncated blob content type")
        return Blob(bytes(data[2 + n :]), data[2 : 2 + n].decode())


def make_store(config: ServerConfig) -> Store | None:
    st = config.store
    if st.kind == "memory":
        return None
    retention = max(st.keep_finished_s, config.limits.key_retention_s)
    if st.kind == "sqlite":
        from cronoq.store.sqlite import SqliteStore

        return SqliteStore(
            st.path,
            retention=retention,
            commit_timeout=st.commit_timeout_s,
            shard=config.server.shard,
            full_sync=st.sqlite_sync == "full",
        )
    from cronoq.store.postgres import PostgresStore

    if not st.url:
        raise SchedulerError("configuration error: store.url (or its url_env) is required for postgres")
    return PostgresStore(
        st.url,
        schema=st.schema,
        retention=retention,
        commit_timeout=st.commit_timeout_s,
        statement_timeout=st.statement_timeout_s,
        connect_timeout=st.connect_timeout_s,
        shard=config.server.shard,
    )


class ServerApp:
    """One ``cronoq serve`` process (see the module docstring)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.auth = Authenticator(config)
        self.limits = config.limits
        self.leading = False
        self.stopping = False
        self._leader_event: asyncio.Event | None = None
        self._stop_event: asyncio.Event | None = None
        # the registry outlives schedulers (a new one per leadership term): it is created first and
        # pointed at each new scheduler; the pools' remote executors send attempts through it
        self.registry = WorkerRegistry(
            None,  # type: ignore[arg-type]  # set just below
            max_slots_per_worker=config.limits.max_slots_per_worker,
            pool_max_slots={p.name: p.max_slots_per_worker for p in config.pools},
            pool_max={p.name: p.max for p in config.pools},
            lease_ttl_s={p.name: p.lease_ttl_s for p in config.pools},
            max_message_bytes=config.limits.max_message_bytes,
            max_report_message_len=config.limits.max_report_message_len,
        )
        self.outputs = self._output_cache()
        self.sched = self._make_scheduler()
        self.registry.durable = WorkerDurable(self)  # durable calls of remote workers (protocol 7)
        self.payloads = PayloadBudget(config.limits.max_pending_bytes)
        # per-second pool figures of the last 30 min (GET /v1/history), filled while leading
        self.history = HistoryRing()
        self._history_task: asyncio.Task[None] | None = None
        #: the shard router (``shards.router.Router``), set when the gRPC services are registered
        self.router: Router | None = None
        if config.shards:  # the router's layers register themselves with the front ends
            import cronoq.server.shards.http_routes
            import cronoq.server.shards.router  # noqa: F401

    def _output_cache(self) -> OutputCache:
        """The ``[outputs]`` cache of one leadership term (cronoq.server.outputs)."""
        oc = self.config.outputs

        def drop(task_id: int, blob: Blob) -> None:
            self.sched.seam.forget_output(task_id, blob)

        def held(task_id: int, blob: Blob) -> bool:
            t = self.sched.seam.tasks.get(task_id)
            return t is not None and t.output is blob

        return OutputCache(oc.cache_entries, oc.cache_bytes, drop, held)

    def _note_output(self, task_id: int, blob: Blob) -> None:
        """Every output a worker returns goes to the output cache."""
        self.outputs.note(task_id, blob)

    def _make_scheduler(self) -> Scheduler:
        """A scheduler for one leadership term, its pools run by remote workers via the registry."""
        cfg = self.config
        pools = [
            Pool.from_config(
                pool_config(p),
                RemoteExecutor(self.registry, p.name, self._note_output),
                scaler=ExternalScaler(),
            )
            for p in cfg.local_pools  # (with shards: this shard's pools only)
        ]
        sched = Scheduler(
            pools,
            resources=resource_configs(cfg),
            emit_transitions=True,
            shutdown_grace=cfg.server.shutdown_grace_s,
            event_capacity=16384,  # per subscriber: a 1000-task batch makes ~3000 events (ours)
            store=make_store(cfg),
            codec=BlobCodec(),
            key_retention=cfg.limits.key_retention_s,
            # finished task records: the smaller of the key retention and [outputs].info_entries
            key_retention_max=min(cfg.limits.key_retention_max, cfg.outputs.info_entries),
            wait_for_space=False,  # a request never waits for space: a full pool answers `full`
            # ended tasks' payloads are not kept in memory (the payload budget stays honest): a
            # durable store reads them back for a replay; the memory store answers
            # payload_unavailable (docs/how-to/operations.md#replay)
            keep_payloads=False,
            id_shard=cfg.own_shard.number if cfg.own_shard is not None else 0,
        )
        sched.on_fenced = self._fenced
        sched.seam.fill_replays_with(for_replay(cfg.limits.max_message_bytes))
        self.registry.sched = sched
        return sched

    # ------------------------------------------------------------------ lifecycle

    async def lead(self) -> None:
        """Become leader (blocks as a standby while another instance leads), then serve."""
        self._leader_event = self._leader_event or asyncio.Event()
        while not self.stopping:
            try:
                await self.sched.start()
            except ShardMismatch:
                raise  # (a configuration error: never retried)
            except SchedulerError as e:
                log.error("cannot start the scheduler: %s; retrying", e)
                await asyncio.sleep(1.0)
                continue
            seam = self.sched.seam
            self.payloads = PayloadBudget(self.limits.max_pending_bytes)
            self.outputs = self._output_cache()
            # what recovery brought back is held too
            self.payloads.hold_recovered(t.payload for t in seam.tasks.values())
            done = sorted(seam.tasks.values(), key=lambda t: (t.finished_at or 0, t.id))
            self.outputs.note_recovered((t.id, t.output) for t in done if isinstance(t.output, Blob))
            self.leading = True
            self._leader_event.set()
            self._watch_lost()
            if self._history_task is None:
                self._history_task = asyncio.get_running_loop().create_task(run_sampler(self, self.history))
            epoch = seam.epoch
            log.info("leading (epoch %s)", "?" if epoch is None else epoch)
            return

    def _watch_lost(self) -> None:
        """Stop serving at once when the store reports the lock/lease lost.

        The scheduler's own step-down (then :meth:`_fenced`) may first spend a while flushing
        to an unreachable store; meanwhile this instance must not look like the leader: it
        answers ``unavailable`` and sends its workers ``Shutdown{not_leader}`` right away, so
        they move to the new leader.
        """
        store = self.sched.seam.store
        inner = getattr(store, "on_lost", None)
        if store is None or inner is None:
            return
        sched = self.sched

        def lost() -> None:
            inner()
            if self.sched is sched and self.leading:
                log.error("leadership of the store lost: standing by")
                self.leading = False
                if self._leader_event is not None:
                    self._leader_event.clear()
                self.registry.shutdown_all("not the leader any more", not_leader=True)

        store.on_lost = lost

    async def _fenced(self, err: BaseException) -> None:
        """Another instance took over: tell workers, stand by, try to lead again."""
        self.leading = False
        if self._leader_event is not None:
            self._leader_event.clear()
        self.registry.shutdown_all("not the leader any more", not_leader=True)
        for s in list(self.registry.sessions.values()):
            self.registry.disconnect(s, "not the leader any more")
        if not self.stopping:
            self.sched = self._make_scheduler()
            asyncio.get_running_loop().create_task(self.lead())

    async def stop(self) -> None:
        """Graceful stop: Shutdown to workers, grace for running attempts, release leadership."""
        self.stopping = True
        await stop_task(self._history_task)  # (reads the store: cancelled until it is gone)
        self.registry.shutdown_all("server shutting down")
        if self.leading or self.sched.started:
            self.leading = False
            await self.sched.shutdown(self.config.server.shutdown_grace_s)
        for s in list(self.registry.sessions.values()):
            self.registry.disconnect(s, "server shut down")

    # ------------------------------------------------------------------ helpers

    def require_leader(self) -> Scheduler:
        if self.stopping:
            raise ApiError("unavailable", "server is shutting down")
        if not self.leading or not self.sched.started:
            raise ApiError("unavailable", "this server is a standby (not the leader)")
        return self.sched

    def ready(self) -> bool:
        """Whether ``/readyz`` answers 200: leading, started, and the leadership lease cannot
        lapse within :data:`READY_MARGIN_S` (``store.base.lease_left``): a leader whose loop
        froze or whose store went silent stops answering ready *before* a standby can take
        over, so two servers are never ready at once."""
        if self.stopping or not self.leading or not self.sched.started:
            return False
        left = lease_left(self.sched.seam.store)
        return left is None or left > READY_MARGIN_S

    def pool_of(self, t: TaskState) -> str:
        return self.sched.seam.pool_at(t.opts.pool_index).name

    def max_attempts(self, t: TaskState) -> int:
        policy = t.opts.retry or self.sched.seam.pool_at(t.opts.pool_index).config.retry
        return policy.max_attempts

    def lookup(self, ref: int | str, tenant: str | None = None) -> TaskState | None:
        """A task by id, or by key among ``tenant``'s tasks (keys are scoped by tenant)."""
        return self.require_leader().seam.lookup(ref, tenant)

    def visible(self, principal: Principal | None, t: TaskState) -> bool:
        if principal is None:
            return True
        if principal.pools is not None and self.pool_of(t) not in principal.pools:
            return False
        return principal.tenant is None or t.opts.tenant == principal.tenant

    def get(self, principal: Principal | None, ref: int | str, tenant: str | None = None) -> TaskState:
        """The caller's task ``ref``.  Another tenant's task, or one in a pool the token may not
        use, answers exactly as a task that does not exist (NOT_FOUND ``unknown task``): the
        answer never tells whether someone else's task is there.

        A key is looked up among the tasks of the token's tenant; a caller whose token has no
        tenant names one with ``tenant`` (HTTP ``?tenant=``), else gets the tasks without one.
        """
        if principal is not None and principal.tenant is not None:
            tenant = principal.tenant
        t = self.lookup(ref, tenant or None)
        if t is None or not self.visible(principal, t):
            raise ApiError("not_found", self.unknown_task_message(ref))
        return t

    def unknown_task_message(self, ref: int | str) -> str:
        """NOT_FOUND for a task: the same for one that never existed, one no longer retained and
        one the caller may not see (no existence oracle), naming the setting that decides how
        long a finished task stays (docs/reference/behaviour.md#ids-keys-retention)."""
        kept = f"kept for limits.key_retention_s, {self.limits.key_retention_s:g} s"
        if self.config.store.kind != "memory":
            history = self.config.store.keep_finished_s
            kept += f", and in the store's history for store.keep_finished_s, {history:g} s"
        return f"unknown task '{ref}': not live, and not retained if it existed (a finished task is {kept})"

    def _own_duplicate(self, principal: Principal | None, tid: int) -> None:
        """A duplicate answer only ever returns the caller's own task: keys are scoped by tenant,
        but the pools of a tenant share its namespace, so the existing task may be in a pool the
        token may not use (then PERMISSION_DENIED, without its id)."""
        if principal is None or principal.pools is None:
            return
        t = self.sched.seam.tasks.get(tid)
        if t is None or not self.visible(principal, t):
            raise ApiError(
                "permission_denied", "this key is taken by a task in a pool this token may not use"
            )

    def task_info(self, t: TaskState, detail: bool = False) -> Any:
        """``TaskInfo`` of ``t`` with its progress; ``detail`` (GetTask): also its attempts and
        dependency links (docs/how-to/progress.md)."""
        info = convert.task_info(t, self.pool_of(t), self.max_attempts(t), self.sched.seam.time_base)
        if detail and t.parents is not None and isinstance(t.payload, Blob):
            add_arguments(info, t.payload, self.sched.seam.parent_ids(t))
        info = convert.add_extras(info, self.sched.task_extras(t, detail))
        info.waiting = self.waiting_reason(t, info.waiting)
        if detail:
            convert.add_parent_outcomes(info, self.sched.seam.parent_outcomes(t))
            convert.count_statuses(info.parent_statuses, info.parents, self.sched.seam.lookup)
            convert.count_statuses(info.child_statuses, info.children, self.sched.seam.lookup)
        return info

    def waiting_reason(self, t: TaskState, engine_reason: str) -> str:
        """Why ``t`` is not running, for ``TaskInfo.waiting``: the engine's reason
        (engine/waiting.py); the place for the server's own reasons that go first (a ready
        task whose kind no connected worker serves, docs/how-to/deploys.md, before "waiting for
        capacity"; a paused pool, a resource or labels still come first)."""
        if (
            t.status == READY
            and engine_reason.startswith(_CAPACITY_REASONS)
            and not self.registry.serving(self.pool_of(t), t.opts.kind)
        ):
            return f"no connected worker serves task '{t.opts.kind}'"
        return engine_reason

    # ------------------------------------------------------------------ operations

    def _prepare(self, principal: Principal | None, spec: Any) -> Submission:
        """The task of a wire ``TaskSpec`` (one Submission), checked against the limits and the
        caller's pools, its tenant stamped."""
        try:
            sub = convert.submission(spec, self.limits)
        except ValueError as e:  # (InvalidArgument: a limit; InvalidSubmission: a field)
            raise ApiError("invalid_argument", str(e), "invalid") from None
        pool = sub.pool or self.config.default_pool
        if pool not in self.sched.pools or not allows_pool(principal, pool):  # (no oracle)
            raise ApiError("not_found", f"unknown pool '{pool}'", "unknown_pool")
        self.auth.authorize(principal, "submit", pool)
        if principal is not None and principal.tenant is not None:
            sub = sub._replace(tenant=stamp_tenant(principal, sub.tenant))
        return sub

    def _check_total(self, n: int, payloads: list[Blob] | None = None) -> None:
        if payloads is not None and not self.payloads.fits(len(p.data) for p in payloads):
            raise ApiError(
                "resource_exhausted",
                f"too many pending payload bytes (limits.max_pending_bytes {self.limits.max_pending_bytes})",
                "overloaded",
            )
        if self.sched.started:
            pending = self.sched.seam.pending_total()
            if pending + n > self.limits.max_pending_total:
                raise ApiError(
                    "resource_exhausted",
                    f"too many pending tasks (limits.max_pending_total {self.limits.max_pending_total})",
                    "overloaded",
                )

    def _enter(
        self, principal: Principal | None, spec: Any
    ) -> tuple[int, bool] | Awaitable[tuple[int, bool]]:
        """One submission checked and put in the engine now, without awaiting (its payload
        held): ``(id, duplicate)``, not yet committed and not yet checked as the caller's own
        (:meth:`_answer`), or, if its pool is full and the scheduler waits for space, an
        awaitable of that; an ``ApiError`` if refused."""
        sched = self.require_leader()
        sub = self._prepare(principal, spec)
        payload: Blob = sub.payload  # type: ignore[assignment]
        # a duplicate holds nothing new, but whether it is one matters only when its payload
        # would not fit: only then is the key looked up here (the engine looks it up anyway)
        known = (
            sub.key is not None
            and not self.payloads.fits((len(payload.data),))
            and self.lookup(sub.key, sub.tenant) is not None
        )
        self._check_total(1, None if known else [payload])
        try:
            entered = sched.seam.submit_now(sub)
        except Exception as e:
            raise _submit_failure(e) from None
        if isinstance(entered, tuple):
            if not entered[1]:
                self.payloads.hold(payload)
            return entered
        return self._enter_later(entered, payload)

    async def _enter_later(self, entered: Awaitable[tuple[int, bool]], payload: Blob) -> tuple[int, bool]:
        try:
            tid, dup = await entered
        except Exception as e:
            raise _submit_failure(e) from None
        if not dup:
            self.payloads.hold(payload)
        return tid, dup

    async def _commit(self, sched: Scheduler) -> None:
        """Wait until ``sched``'s changes so far are committed (a failure as ``store_failure``)."""
        try:
            await sched.seam.commit()
        except SchedulerError as e:
            raise store_failure(e) from None

    def _answer(self, principal: Principal | None, entered: tuple[int, bool]) -> tuple[int, bool]:
        """A committed submission's answer: a duplicate only ever returns the caller's own task."""
        if entered[1]:
            self._own_duplicate(principal, entered[0])
        return entered

    async def submit(self, principal: Principal | None, spec: Any) -> tuple[int, bool]:
        sched = self.require_leader()
        entered = self._enter(principal, spec)
        if not isinstance(entered, tuple):
            entered = await entered
        await self._commit(sched)
        return self._answer(principal, entered)

    async def submit_many(
        self, principal: Principal | None, specs: Sequence[Any]
    ) -> list[tuple[int, bool] | Exception]:
        """Independent submissions (``SubmitMany``): each created or refused on its own, as by
        :meth:`submit`, in order and without awaiting, so every item reaches the engine before
        any answer and a key repeated in the call is a duplicate of its first use; then one
        commit barrier for them all, and the answers, ``(id, duplicate)`` or the error, per
        item.  An item whose pool is full while the scheduler waits for space waits on its own
        (the others are in the engine meanwhile; the server's scheduler answers ``full``)."""
        sched = self.require_leader()
        outcomes: list[tuple[int, bool] | Exception] = []
        later: list[tuple[int, Awaitable[tuple[int, bool]]]] = []
        for spec in specs:
            try:
                entered = self._enter(principal, spec)
            except Exception as e:  # (refused on its own; the next items still go in)
                outcomes.append(e)
                continue
            if not isinstance(entered, tuple):
                later.append((len(outcomes), entered))
                entered = (0, False)  # (its place, filled below)
            outcomes.append(entered)
        if later:
            waited = await asyncio.gather(*(w for _, w in later), return_exceptions=True)
            for (i, _), w in zip(later, waited, strict=True):
                if isinstance(w, BaseException) and not isinstance(w, Exception):
                    raise w  # (cancelled)
                outcomes[i] = w
        try:
            await self._commit(sched)
        except ApiError as e:  # (the items in the engine are not acknowledged)
            return [e if isinstance(o, tuple) else o for o in outcomes]
        for i, o in enumerate(outcomes):
            if isinstance(o, tuple):
                try:
                    self._answer(principal, o)
                except ApiError as e:
                    outcomes[i] = e
        return outcomes

    async def submit_batch(self, principal: Principal | None, specs: list[Any]) -> list[tuple[int, bool]]:
        sched = self.require_leader()
        try:
            request_limits.check_batch(self.limits, len(specs))
        except request_limits.InvalidArgument as e:
            raise ApiError("invalid_argument", str(e), "invalid") from None
        tasks = []
        blobs: list[Blob] = []
        slices = Slices()
        for spec in specs:
            sub = self._prepare(principal, spec)
            blobs.append(sub.payload)  # type: ignore[arg-type]
            key = sub.key
            if key is not None and principal is not None and principal.pools is not None:
                existing = self.lookup(key, sub.tenant)
                if existing is not None:  # (refused before anything of the batch is created)
                    self._own_duplicate(principal, existing.id)
            tasks.append(Task.of(sub))
            await slices.step()
        sched = self.require_leader()  # (it may have stepped down meanwhile)
        self._check_total(len(tasks), blobs)
        try:
            results = await sched.seam.submit_batch(tasks)  # (ids only: no handle, no future)
        except SubmitError as e:
            raise ApiError.from_submit(e) from None
        except SchedulerError as e:
            raise store_failure(e) from None
        for (tid, dup), blob in zip(results, blobs, strict=True):
            if dup:
                self._own_duplicate(principal, tid)
            else:
                self.payloads.hold(blob)
        return results

    async def cancel(self, principal: Principal | None, ref: int | str, tenant: str | None = None) -> bool:
        sched = self.require_leader()
        t = self.get(principal, ref, tenant)
        self.auth.authorize(principal, "cancel", self.pool_of(t))
        ok = sched.seam.cancel(t.id)
        if sched.seam.durable:
            try:
                await sched.seam.commit()
            except SchedulerError as e:
                raise store_failure(e) from None
        return ok

    async def wait(
        self, principal: Principal | None, ref: int | str, timeout: float | None, tenant: str | None = None
    ) -> TaskState:
        """Wait until the task is terminal; ``deadline_exceeded`` after ``timeout`` s (finite,
        >= 0: else ``invalid_argument``).  With a store the outcome is answered only once it is
        committed: a completion is a mutation nobody waits for (it may wait a few ms for the
        next group commit), and an answer sent before it would tell the caller "succeeded"
        about a task that a crash of this leader then runs again (a fenced or failed commit
        answers ``unavailable`` instead)."""
        sched = self.require_leader()
        try:
            timeout = convert.wait_timeout("timeout_s", timeout)
        except convert.InvalidArgument as e:
            raise ApiError("invalid_argument", str(e)) from None
        t = self.get(principal, ref, tenant)
        if t.status >= FIRST_TERMINAL:
            await self._commit(sched)
            return t
        limit = self.limits.max_wait_s
        timeout = limit if timeout is None else min(timeout, limit)
        h = sched.seam.handle(t.id)
        try:
            async with asyncio.timeout(timeout):
                await h.result()
        except TimeoutError:
            raise ApiError("deadline_exceeded", f"task {t.id} did not finish within {timeout:g} s") from None
        except Exception:
            pass  # a failed task is still a result
        t2 = self.lookup(t.id)
        if t2 is None:
            raise ApiError("not_found", f"task {t.id} is no longer retained")
        if t2.status < FIRST_TERMINAL:  # scheduler shut down under us
            raise ApiError("unavailable", "scheduler shut down")
        await self._commit(sched)
        return t2

    def check_filter(self, **kw: Any) -> None:
        """``request_limits.check_filter`` with this server's limits; 400 ``invalid``."""
        try:
            request_limits.check_filter(self.limits, **kw)
        except request_limits.InvalidArgument as e:
            raise ApiError("invalid_argument", str(e), "invalid") from None

    def list_tasks(
        self,
        principal: Principal | None,
        pools: list[str],
        statuses: list[str],
        after: int,
        limit: int,
        *,
        kinds: list[str] | None = None,
        tags: dict[str, str] | None = None,
        created_after_ns: int | None = None,
        created_before_ns: int | None = None,
    ) -> tuple[list[TaskState], int]:
        """One page of the caller's tasks with ids > ``after``; ``kinds``, ``tags`` (all must
        match) and the creation range (Unix ns: at or after / strictly before) narrow it."""
        n_tags = len(tags) if tags else 0
        self.check_filter(
            items=len(pools) + len(statuses) + len(kinds or ()) + n_tags, kinds=kinds or (), tags=tags
        )
        sched = self.require_leader()
        tasks = sched.seam.retained_tasks()
        allowed = set(pools) if pools else None
        if principal is not None and principal.pools is not None:
            allowed = (allowed & principal.pools) if allowed is not None else set(principal.pools)
        want = {STATUS_BY_NAME[s] for s in statuses} if statuses else None
        want_kinds = set(kinds) if kinds else None
        want_tags = list(tags.items()) if tags else None
        base = sched.seam.time_base
        lo = None if created_after_ns is None else created_after_ns - base
        hi = None if created_before_ns is None else created_before_ns - base
        cap = self.limits.max_list
        n = min(100 if limit <= 0 else limit, cap)
        out: list[TaskState] = []
        more = False
        for tid in sorted(i for i in tasks if i > after):
            t = tasks[tid]
            if allowed is not None and self.pool_of(t) not in allowed:
                continue
            if want is not None and t.status not in want:
                continue
            if want_kinds is not None and t.opts.kind not in want_kinds:
                continue
            if lo is not None and t.created_at < lo:
                continue
            if hi is not None and t.created_at >= hi:
                continue
            if want_tags is not None:
                have = t.opts.tags or {}
                if any(have.get(k) != v for k, v in want_tags):
                    continue
            if principal is not None and principal.tenant is not None and t.opts.tenant != principal.tenant:
                continue
            if len(out) == n:
                more = True
                break
            out.append(t)
        return out, (out[-1].id if more and out else 0)

    def events(self) -> EventStream:
        sched = self.require_leader()
        return sched.events()

    async def snapshot(self) -> Any:
        sched = self.require_leader()
        snap = await sched.snapshot()
        by_pool = {name: self.registry.connected(name) for name in sched.pools}
        return snap, by_pool

    async def snapshot_msg(self, principal: Principal | None) -> Any:
        """The ``SnapshotResponse`` both front ends answer: a principal bound to some pools sees
        those pools only, and the workers connected to them."""
        snap, by_pool = await self.snapshot()
        msg = convert.snapshot_msg(snap, by_pool)
        if principal is not None and principal.pools is not None:
            keep = [p for p in msg.pools if p.name in principal.pools]
            del msg.pools[:]
            msg.pools.extend(keep)
            msg.workers_connected = sum(p.workers_connected for p in keep)
        return msg

    async def resource_keys(self, resource: str, top: int) -> Any:
        """The busiest keys of keyed resource ``resource`` (``not_found``: not a keyed one)."""
        sched = self.require_leader()
        try:
            keys = await sched.resource_keys(resource, top or 10)
        except ValueError as e:
            raise ApiError("not_found", str(e), "unknown_resource") from None
        return convert.resource_keys_msg(resource, keys)

    async def add_recurring(self, principal: Principal | None, req: Any) -> None:
        """Add schedule ``req.name``, or replace the one of that name: a token restricted to
        some pools replaces only a schedule of its pools (another pool's is refused, 409
        ``failed_precondition``: names are one namespace, so it cannot be created either)."""
        sched = self.require_leader()
        sub = self._prepare(principal, req.template)
        pool = sub.pool or self.config.default_pool
        self.auth.authorize(principal, "add_recurring", pool)
        if principal is not None and principal.pools is not None:
            for info in await sched.list_recurring():
                if info.name == req.name and not allows_pool(principal, info.pool):
                    raise ApiError(
                        "failed_precondition",
                        f"recurring schedule '{req.name}' belongs to a pool this token may not use:"
                        " it cannot be replaced (choose another name)",
                    )
        dl = sub.deadline  # (a schedule has no start, absolute deadline nor edges: not taken)
        relative = dl if dl is not None and dl.relative is not None else None
        sub = sub._replace(start=None, deps=None, deadline=relative)
        overlap = enums.OVERLAP.names.get(req.overlap, "skip")
        try:
            await sched.seam.add_recurring(req.name, req.cron, sub, tz=req.tz or None, overlap=overlap)
        except ConfigurationError as e:  # (any other SchedulerError: its commit failed, or the
            # leader stepped down: unavailable, store_failure)
            msg = str(e)
            if e.code == "unknown_pool":
                raise ApiError("not_found", msg, "unknown_pool") from None
            # not a SubmitError: the body's code is the status name
            # (docs/reference/behaviour.md#server-details)
            raise ApiError("invalid_argument", msg) from None
        except ValueError as e:
            raise ApiError("invalid_argument", str(e), "invalid") from None

    async def remove_recurring(self, principal: Principal | None, name: str) -> bool:
        sched = self.require_leader()
        self.auth.authorize(principal, "remove_recurring")
        return await sched.remove_recurring(name)

    async def list_recurring(self, principal: Principal | None) -> list[Any]:
        sched = self.require_leader()
        infos = await sched.list_recurring()
        if principal is not None and principal.pools is not None:
            infos = [i for i in infos if i.pool in principal.pools]
        return infos

    def list_workers(self, principal: Principal | None) -> list[Any]:
        self.require_leader()
        pools = None if principal is None or principal.pools is None else set(principal.pools)
        return self.registry.workers(pools)

    def check_task_tenant(self, principal: Principal | None, t: TaskState) -> None:
        if principal is not None:
            check_tenant(principal, t.opts.tenant)

    def task_of_tenant(self, tid: int, tenant: str) -> bool:
        """Whether task ``tid`` belongs to ``tenant`` (a watch's tenant check,
        docs/reference/behaviour.md#auth).

        A task this server no longer knows (pruned, or another leadership term) does not:
        its event is withheld from tenant-scoped watchers (fail closed).
        """
        t = self.sched.seam.tasks.get(tid)
        return t is not None and t.opts.tenant == tenant


def event_filter(
    principal: Principal | None,
    pools: list[str],
    ids: list[int],
    keys: list[str],
    all_transitions: bool,
    task_of_tenant: Callable[[int, str], bool] | None = None,
) -> Callable[[Any], bool] | None:
    """Which StatusEvents a watch passes on (docs/reference/behaviour.md#server-details ``Watch``); None when
    every event does.

    ``pools`` restricts (and the principal's pools, when it has a restriction); when ``ids`` or
    ``keys`` are given an event passes if its id is in ``ids`` or its key is in ``keys``;
    without ``all_transitions`` only terminal transitions pass.  A principal with a tenant
    sees only events of that tenant's tasks (docs/reference/behaviour.md#auth), as
    ``task_of_tenant(id, tenant)`` tells (:meth:`ServerApp.task_of_tenant`; without it such a principal sees
    no event).
    """
    allowed = set(pools) if pools else None
    if principal is not None and principal.pools is not None:
        allowed = (allowed & principal.pools) if allowed is not None else set(principal.pools)
    idset, keyset = set(ids), set(keys)
    tenant = principal.tenant if principal is not None else None
    if all_transitions and allowed is None and not idset and not keyset and tenant is None:
        return None

    def keep(ev: Any) -> bool:
        if not all_transitions and STATUS_BY_NAME[ev.status] < FIRST_TERMINAL:
            return False
        if allowed is not None and ev.pool not in allowed:
            return False
        if (idset or keyset) and ev.id not in idset and (ev.key is None or ev.key not in keyset):
            return False
        # last: the only check that looks the task up
        return tenant is None or (task_of_tenant is not None and task_of_tenant(ev.id, tenant))

    return keep


def _submit_failure(e: Exception) -> Exception:
    """A submission's engine step refused or failed, as the client sees it (anything else
    unchanged: an internal error)."""
    if isinstance(e, SubmitError):
        return ApiError.from_submit(e)
    if isinstance(e, ValueError):
        return ApiError("invalid_argument", str(e), "invalid")
    if isinstance(e, SchedulerError):
        return store_failure(e)
    return e


def store_failure(e: SchedulerError) -> ApiError:
    """A commit that failed (or a leader that stepped down under it) as the client sees it:
    UNAVAILABLE / 503, retryable (a keyed submission retried finds its task if the commit did
    land), with no store detail (paths, hosts) in the message; the detail goes to the log.  A
    read the engine's calls made (``StoreReadError``: a replay's payload or history rows) is
    :func:`store_read_failure`'s: it changed nothing."""
    if isinstance(e, StoreReadError):
        return store_read_failure(e)
    if isinstance(e, Fenced):
        log.warning("a change was not acknowledged: this server stopped leading (%s)", e)
        return ApiError("unavailable", "not the leader any more: retry (the new leader takes the request)")
    log.warning("a change was not acknowledged: the store commit failed (%s)", e)
    return ApiError("unavailable", "the store could not commit this change: retry")


def store_read_failure(e: SchedulerError) -> ApiError:
    """A read of the store that failed (a finished task's row or payload from its history,
    ``task_history`` / ``task_payload``, or a replay's ``StoreReadError``) as the client sees
    it: UNAVAILABLE / 503, retryable, and it changed nothing; no store detail in the message, as
    :func:`store_failure`.  The read paths convert their own failures, and the engine's calls
    mark theirs (``StoreReadError``), which :func:`store_failure` hands here."""
    log.warning("a read of the store failed (%s)", e)
    return ApiError("unavailable", "the store could not be read: retry")


def filter_group(
    principal: Principal | None, pools: list[str], ids: list[int], keys: list[str], all_transitions: bool
) -> Hashable:
    """What identifies an :func:`event_filter`: streams with equal groups pass the same events,
    so a fan-out (``sse.EventHub``) encodes and hands them out once for all of them."""
    restricted = None if principal is None or principal.pools is None else frozenset(principal.pools)
    # the tenant is part of the filter (docs/reference/behaviour.md#auth)
    tenant = None if principal is None else principal.tenant
    return (all_transitions, frozenset(pools), restricted, frozenset(ids), frozenset(keys), tenant)


def data_loss(stream: EventStream) -> ApiError:
    """The error that ends a watch whose consumer fell more than the event buffer behind."""
    return ApiError("data_loss", f"watch consumer too far behind ({stream.lagged} events lost)")


async def wait_forever(event: asyncio.Event) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await event.wait()
