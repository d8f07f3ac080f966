"""The asyncio gRPC client of a cronoq server (docs/reference/grpc.md#services,
docs/reference/behaviour.md#client-worker).

Theory of operation
-------------------
* One ``grpc.aio`` channel per server address, opened lazily on first use (so a ``Client``
  may be built outside a running loop) and closed by :meth:`Client.close` / ``async with``.
* Failover: ``Client(["a:7070", "b:7070"])``. A call that fails with a retryable status
  (``unavailable``, ``resource_exhausted``) is tried once against each next address; the
  address that answered becomes the first choice for later calls.  A standby server answers
  UNAVAILABLE, so this follows the leader of an active-passive cluster
  (docs/reference/behaviour.md#high-availability).  Note that a submit retried after a dropped connection may
  create the task twice unless it has a key.  A channel that could not connect is replaced at
  once (gRPC would fail every call on it until its reconnect backoff ran out, for seconds after
  the server was back), so the next call connects afresh; a watch that failed ``unavailable``
  replaces it too (a client that only re-opens watches met the same wait).
* Riding through a failover: while *every* address answers ``unavailable`` and at least one
  of them is a live server that does not lead (a standby, one shutting down: the old leader is
  gone or stepping down and the standby does not lead yet) a client with several addresses
  repeats the round, with backoff (50 ms doubling to 1 s, jittered), for up to
  ``failover_wait`` seconds (:data:`FAILOVER_WAIT_S`, longer than a failover takes) and never
  past the call's own timeout; then it raises the last error.  ``resource_exhausted``
  (overload) and any other error end the call at once, and so does every error of a client
  with one address, or a round in which no server answered at all (nothing to wait for).
  ``failover_wait=0`` turns it off.
* Errors: every failed call raises :class:`~cronoq.client.ClientError` (lower-case gRPC status
  name as ``code``); waits that run out of time raise
  :class:`~cronoq.client.WaitTimeout`, which is also a ``TimeoutError``.
* Waiting: ``wait(ref, timeout=None)`` waits as long as it takes; the server bounds one Wait call
  (``limits.max_wait_s``), so the client simply asks again until the task is done or its own
  timeout has passed.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime
from typing import Any

import grpc
import grpc.aio

from cronoq.client._channel import auth_metadata, make_channel, normalize_targets
from cronoq.client.coalescing import SubmitCoalescer
from cronoq.client.encoding import (
    build_spec,
    overlap_to_wire,
    seconds_or_none,
    spec_of,
    status_to_wire,
    str_list,
    task_ref,
    uint64_list,
)
from cronoq.client.errors import ClientError, WaitTimeout, from_rpc_error
from cronoq.client.types import (
    BulkResult,
    Event,
    RecurringInfo,
    Result,
    Snapshot,
    Submitted,
    TaskInfo,
    TaskPage,
    WorkerInfo,
)
from cronoq.outcome import SignalResult
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc
from cronoq.proto.protocol import NOT_LEADING_MESSAGES

__all__ = ["Client", "Watch"]

#: how long a call of a client with several addresses keeps trying while every address answers
#: ``unavailable`` (``Client(failover_wait=...)``): longer than a failover takes (PostgreSQL:
#: about a second; SQLite: up to its lease ttl, 10 s, after a leader was killed)
FAILOVER_WAIT_S = 15.0
#: the pause between two rounds over the addresses doubles from the first to the second
_ROUND_BACKOFF_MIN = 0.05
_ROUND_BACKOFF_MAX = 1.0

# Extra time given to a waiting call beyond the server-side wait, so that the server's
# DEADLINE_EXCEEDED (or the result) arrives before the client's own deadline.
_WAIT_GRACE = 5.0


def _instant_ns(name: str, v: object) -> int:
    """An aware ``datetime`` or Unix seconds as Unix ns (ValueError naming ``name``)."""
    if isinstance(v, datetime):
        if v.tzinfo is None:
            raise ValueError(f"{name} must be an aware datetime (got a naive one: {v})")
        return round(v.timestamp() * 1e6) * 1000
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{name} must be an aware datetime or Unix seconds (got {v!r})")
    return round(v * 1e9)


class Client:
    """Client of a cronoq server: tasks (submit, cancel, get, list, wait, watch) and admin
    (snapshot, recurring schedules, workers).

    ``target`` is ``"host:port"`` or a list of them (failover). ``token`` is sent as
    ``authorization: Bearer <token>``; ``tls=True`` uses TLS with the system roots,
    ``credentials`` (``grpc.ChannelCredentials``) any other TLS setup; ``options`` are gRPC
    channel options. With several addresses, a call that every address answers ``unavailable``
    is tried again in rounds for up to ``failover_wait`` seconds (a failover in progress;
    0: each address once).
    """

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        token: str | None = None,
        tls: bool = False,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] | None = None,
        coalesce_submits: bool = True,
        failover_wait: float = FAILOVER_WAIT_S,
    ) -> None:
        self._targets = normalize_targets(target)
        wait_s = seconds_or_none("failover_wait", failover_wait)
        if wait_s is None:
            raise ValueError("failover_wait must be a number of seconds (0: try each address once)")
        self._failover_wait = wait_s
        self._metadata = auth_metadata(token)
        self._tls = tls
        self._credentials = credentials
        self._options = list(options or ())
        self._channels: dict[int, grpc.aio.Channel] = {}
        #: channels replaced because they could not connect, closing (see _renew_if_failing)
        self._retired: dict[grpc.aio.Channel, asyncio.Task[None]] = {}
        # stubs per (service, address index): a stub builds a callable per method, so build it
        # once per channel rather than once per call
        self._stubs: dict[tuple[str, int], Any] = {}
        self._preferred = 0
        self._closed = False
        # concurrent submit() calls of one loop turn → one SubmitMany call
        self._coalescer = SubmitCoalescer(self._tasks_call) if coalesce_submits else None

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def targets(self) -> list[str]:
        """The server addresses, in failover order."""
        return list(self._targets)

    @property
    def target(self) -> str:
        """The address calls go to first (the last one that answered)."""
        return self._targets[self._preferred]

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every channel; in-flight calls are cancelled. Idempotent."""
        self._closed = True
        channels, self._channels = list(self._channels.values()), {}
        self._stubs = {}
        for ch in [*channels, *self._retired]:
            await ch.close()

    def _channel(self, index: int) -> grpc.aio.Channel:
        if self._closed:
            raise ClientError("cancelled", "client is closed")
        ch = self._channels.get(index)
        if ch is None:
            ch = make_channel(
                self._targets[index], tls=self._tls, credentials=self._credentials, options=self._options
            )
            self._channels[index] = ch
        return ch

    async def _renew_if_failing(self, index: int) -> None:
        """Replace the channel to address ``index`` when it could not connect: gRPC keeps such
        a channel failing every call at once ("failed to connect to all addresses") until its
        reconnect backoff, 1 s growing to 2 min, has run out, so a server back after a restart
        or a failover stayed unreachable through it for seconds (8 s after a 15 s outage); the
        next call on a new channel connects at once."""
        ch = self._channels.get(index)
        if ch is None or ch.get_state() != grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            return
        del self._channels[index]
        for key in [k for k in self._stubs if k[1] == index]:
            del self._stubs[key]
        # closed with a grace: other calls still on it end with their own error (closing it
        # at once cancelled them, and their callers got a CancelledError instead)
        self._retired[ch] = asyncio.get_running_loop().create_task(ch.close(_RETIRE_GRACE_S))
        self._retired[ch].add_done_callback(lambda _t: self._retired.pop(ch, None))

    def _stub(self, service: str, index: int) -> Any:
        stub = self._stubs.get((service, index))
        if stub is None:
            ch = self._channel(index)
            stub = pb_grpc.TasksStub(ch) if service == "tasks" else pb_grpc.AdminStub(ch)
            self._stubs[(service, index)] = stub
        return stub

    def _order(self) -> list[int]:
        n = len(self._targets)
        return [(self._preferred + k) % n for k in range(n)]

    async def _call(
        self,
        service: str,
        method: str,
        request: Any,
        *,
        timeout: float | None = None,
        wait: bool = False,
    ) -> Any:
        """One unary call with failover over the addresses on retryable errors; while every
        address answers ``unavailable`` (a failover in progress) the round is repeated with
        backoff for up to ``failover_wait`` seconds (and never past ``timeout``)."""
        start = time.monotonic()
        ride = self._failover_wait if len(self._targets) > 1 else 0.0
        end = start + ride if timeout is None else start + min(ride, timeout)
        deadline = None if timeout is None else start + timeout
        delay = _ROUND_BACKOFF_MIN
        while True:
            seen: list[ClientError] = []
            try:
                return await self._round(service, method, request, deadline, wait, seen)
            except ClientError as err:
                left = end - time.monotonic()
                if err.code != "unavailable" or left <= 0 or not _a_server_waits(seen):
                    raise
            await asyncio.sleep(min(left, delay * random.uniform(0.5, 1.0)))
            delay = min(delay * 2, _ROUND_BACKOFF_MAX)

    async def _round(
        self,
        service: str,
        method: str,
        request: Any,
        deadline: float | None,
        wait: bool,
        seen: list[ClientError],
    ) -> Any:
        """Each address once, the preferred first, until one answers or fails for good; the
        errors met on the way are appended to ``seen``."""
        order = self._order()
        for n, index in enumerate(order):
            stub = self._stub(service, index)
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                response = await getattr(stub, method)(request, timeout=timeout, metadata=self._metadata)
            except grpc.RpcError as exc:
                err = from_rpc_error(exc, wait=wait)
                seen.append(err)
                if err.code == "unavailable":
                    await self._renew_if_failing(index)
                if err.retryable and n + 1 < len(order):
                    continue
                raise err from None
            self._preferred = index
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def _tasks_call(self, method: str, request: Any) -> Any:
        return await self._call("tasks", method, request)

    # -- tasks --------------------------------------------------------------------------------

    async def submit(
        self,
        payload: object = None,
        *,
        wait: bool = False,
        wait_timeout: float | None = None,
        call_timeout: float | None = None,
        **fields: Any,
    ) -> Submitted:
        """Submit one task (task fields as in docs/reference/behaviour.md#task-fields). With ``wait=True`` the
        answer carries the outcome in ``.result``; a wait that runs out raises :class:`WaitTimeout`.

        Concurrent calls (without ``wait`` or ``call_timeout``) are sent together as one
        ``SubmitMany`` call, each caller still getting its own answer or error; see
        :mod:`cronoq.client.coalescing` (``Client(coalesce_submits=False)`` turns it off)."""
        wt = seconds_or_none("wait_timeout", wait_timeout)
        if wt is not None and not wait:
            raise ValueError("wait_timeout needs wait=True (without it submit does not wait)")
        spec = build_spec(payload, **fields)
        if not wait and call_timeout is None and self._coalescer is not None:
            if self._closed:
                raise ClientError("cancelled", "client is closed")
            return Submitted.from_wire(await self._coalescer.submit(spec))
        request = pb.SubmitRequest(task=spec, wait=bool(wait))
        if wt is not None:
            request.wait_timeout_s = wt
        timeout = seconds_or_none("call_timeout", call_timeout)
        response = await self._call("tasks", "Submit", request, timeout=timeout, wait=bool(wait))
        return Submitted.from_wire(response)

    async def submit_batch(
        self, tasks: Iterable[object], *, call_timeout: float | None = None
    ) -> list[Submitted]:
        """Submit tasks atomically (all or nothing). Members are :func:`task` specs or mappings
        of task fields (with an optional ``payload``). An empty batch returns ``[]``."""
        specs = [spec_of(t) for t in tasks]
        request = pb.SubmitBatchRequest(tasks=specs)
        timeout = seconds_or_none("call_timeout", call_timeout)
        response = await self._call("tasks", "SubmitBatch", request, timeout=timeout)
        return [Submitted.from_wire(r) for r in response.tasks]

    async def cancel(self, ref: object, *, call_timeout: float | None = None) -> bool:
        """Cancel a task (id, key, or an object with ``.id``): False when it had already
        finished; an unknown task raises ``ClientError('not_found')``."""
        request = pb.CancelRequest(task=task_ref(ref))
        timeout = seconds_or_none("call_timeout", call_timeout)
        response = await self._call("tasks", "Cancel", request, timeout=timeout)
        return bool(response.cancelled)

    async def get(self, ref: object, *, payload: bool = False, call_timeout: float | None = None) -> TaskInfo:
        """The current state of a live or retained task. With ``payload=True`` the answer also
        carries the task's payload (``TaskInfo.payload``, ``payload_available``) while the server
        has it: the engine's while the task is live, a durable store's after it ended."""
        if not isinstance(payload, bool):
            raise TypeError(f"payload must be a bool (got {payload!r})")
        request = pb.GetRequest(task=task_ref(ref), include_payload=payload)
        timeout = seconds_or_none("call_timeout", call_timeout)
        return TaskInfo.from_wire(await self._call("tasks", "Get", request, timeout=timeout))

    async def list_tasks(
        self,
        pools: Iterable[str] | str | None = None,
        statuses: Iterable[object] | str | None = None,
        after: int | None = 0,
        limit: int = 0,
        *,
        kinds: Iterable[str] | str | None = None,
        tags: dict[str, str] | None = None,
        created_after: datetime | float | None = None,
        created_before: datetime | float | None = None,
        call_timeout: float | None = None,
    ) -> TaskPage:
        """One page of live and retained tasks in ascending id order with ids > ``after``
        (``limit`` 0 = the server default, 100). Pass ``page.next_after`` as ``after`` for the
        next page; it is None when no more may follow (``after=None`` is 0).

        ``kinds`` (any of), ``tags`` (all must be equal) and the creation range
        ``created_after`` (inclusive) / ``created_before`` (exclusive), each an aware
        ``datetime`` or Unix seconds, narrow the page (a server without these filters ignores
        them)."""
        if isinstance(statuses, str):
            statuses = [statuses]
        if after is None:
            after = 0
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ValueError(f"after must be a task id >= 0 (got {after!r})")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit < 2**32:
            raise ValueError(f"limit must be an int >= 0 (got {limit!r})")
        request = pb.ListTasksRequest(
            pools=str_list("pools", pools),
            statuses=[status_to_wire(s) for s in statuses or ()],  # type: ignore[misc]
            after=after,
            limit=limit,
            kinds=str_list("kinds", kinds),
        )
        if tags is not None:
            if not isinstance(tags, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in tags.items()
            ):
                raise ValueError(f"tags must be a dict of str to str (got {tags!r})")
            request.tags.update(tags)
        if created_after is not None:
            request.created_after_unix_ns = _instant_ns("created_after", created_after)
        if created_before is not None:
            request.created_before_unix_ns = _instant_ns("created_before", created_before)
        timeout = seconds_or_none("call_timeout", call_timeout)
        return TaskPage.from_wire(await self._call("tasks", "ListTasks", request, timeout=timeout))

    async def iter_tasks(
        self,
        pools: Iterable[str] | str | None = None,
        statuses: Iterable[object] | str | None = None,
        after: int = 0,
        limit: int = 0,
        *,
        page_size: int | None = None,
        kinds: Iterable[str] | str | None = None,
        tags: dict[str, str] | None = None,
        created_after: datetime | float | None = None,
        created_before: datetime | float | None = None,
    ) -> AsyncIterator[TaskInfo]:
        """Every matching task, fetching pages of ``limit`` (0 = server default) as needed;
        ``page_size`` is the published client's name for ``limit``; the filters are those of
        :meth:`list_tasks`."""
        if page_size is not None:
            limit = page_size
        while True:
            page = await self.list_tasks(
                pools,
                statuses,
                after,
                limit,
                kinds=kinds,
                tags=tags,
                created_after=created_after,
                created_before=created_before,
            )
            for info in page.tasks:
                yield info
            if not page.next_after or not page.tasks:
                return
            after = page.next_after

    async def wait(self, ref: object, timeout: float | None = None) -> Result:
        """The outcome of a task once it is terminal. ``timeout`` None waits as long as it
        takes; otherwise :class:`WaitTimeout` (a ``TimeoutError``) after ``timeout`` seconds."""
        tref = task_ref(ref)
        limit = seconds_or_none("timeout", timeout)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            request = pb.WaitRequest(task=tref)
            remaining: float | None = None
            if deadline is not None:
                remaining = max(0.0, deadline - time.monotonic())
                request.timeout_s = remaining
            started = time.monotonic()
            call_timeout = None if remaining is None else remaining + _WAIT_GRACE
            try:
                response = await self._call("tasks", "Wait", request, timeout=call_timeout, wait=True)
            except WaitTimeout:
                # The server bounds each Wait (limits.max_wait_s): ask again while time is left.
                if deadline is not None and deadline - time.monotonic() <= 0.001:
                    raise
                if time.monotonic() - started < 0.05:
                    await asyncio.sleep(0.05)  # never spin on a server that answers at once
                continue
            return Result.from_wire(response)

    def watch(
        self,
        pools: Iterable[str] | str | None = None,
        ids: Iterable[int] | None = None,
        keys: Iterable[str] | str | None = None,
        all_transitions: bool = False,
        progress: bool = False,
    ) -> Watch:
        """Status events as an async iterator (terminal transitions only unless
        ``all_transitions``). ``pools`` restricts; with ``ids``/``keys`` an event passes if its
        id or key is listed. ``async with client.watch(...) as events:`` returns once the
        subscription is live, so nothing submitted afterwards is missed. With ``progress``,
        progress updates come too (events whose ``progress`` is set; docs/how-to/progress.md)."""
        request = pb.WatchRequest(
            pools=str_list("pools", pools),
            ids=uint64_list("ids", ids),
            keys=str_list("keys", keys),
            all_transitions=bool(all_transitions),
            progress=bool(progress),
        )
        return Watch(self, request)

    # -- admin --------------------------------------------------------------------------------

    async def snapshot(self, *, call_timeout: float | None = None) -> Snapshot:
        """Per-pool figures, counts and totals of the server (docs/reference/behaviour.md#metrics)."""
        timeout = seconds_or_none("call_timeout", call_timeout)
        return Snapshot.from_wire(await self._call("admin", "Snapshot", pb.Empty(), timeout=timeout))

    async def add_recurring(
        self,
        name: str,
        cron: str,
        payload: object = None,
        *,
        tz: str | None = None,
        overlap: str = "skip",
        call_timeout: float | None = None,
        **fields: Any,
    ) -> None:
        """Create or replace (same name) a cron schedule whose occurrences are tasks built from
        ``payload`` and the task fields (``tolerance``, ``on_miss``, ``key`` … apply to each
        occurrence), or from a prebuilt spec: ``add_recurring(name, cron, task(payload, ...))``
        (then no other task field may be given). A bad cron or tz raises
        ``ClientError('invalid_argument')``, an unknown pool ``ClientError('not_found')``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string (got {name!r})")
        if not isinstance(cron, str) or not cron.strip():
            raise ValueError(f"cron must be a non-empty string (got {cron!r})")
        if tz is not None and not isinstance(tz, str):
            raise ValueError(f"tz must be an IANA time zone name (got {tz!r})")
        request = pb.RecurringRequest(
            name=name,
            cron=cron,
            tz=tz or "",
            template=_template(payload, fields),
            overlap=overlap_to_wire(overlap),  # type: ignore[arg-type]
        )
        timeout = seconds_or_none("call_timeout", call_timeout)
        await self._call("admin", "AddRecurring", request, timeout=timeout)

    async def remove_recurring(self, name: str, *, call_timeout: float | None = None) -> bool:
        """Remove a schedule; False when there was none of that name."""
        if not isinstance(name, str):
            raise ValueError(f"name must be a string (got {name!r})")
        timeout = seconds_or_none("call_timeout", call_timeout)
        request = pb.RemoveRecurringRequest(name=name)
        response = await self._call("admin", "RemoveRecurring", request, timeout=timeout)
        return bool(response.removed)

    async def list_workers(self, *, call_timeout: float | None = None) -> list[WorkerInfo]:
        """The connected remote workers."""
        timeout = seconds_or_none("call_timeout", call_timeout)
        response = await self._call("admin", "ListWorkers", pb.Empty(), timeout=timeout)
        return [WorkerInfo.from_wire(w) for w in response.workers]

    async def list_recurring(self, *, call_timeout: float | None = None) -> list[RecurringInfo]:
        """The recurring schedules."""
        timeout = seconds_or_none("call_timeout", call_timeout)
        response = await self._call("admin", "ListRecurring", pb.Empty(), timeout=timeout)
        return [RecurringInfo.from_wire(r) for r in response.schedules]

    # -- operations (docs/how-to/operations.md) -----------------------------------------------

    async def _admin_changed(self, method: str, request: Any, call_timeout: float | None) -> bool:
        timeout = seconds_or_none("call_timeout", call_timeout)
        response = await self._call("admin", method, request, timeout=timeout)
        return bool(response.changed)

    async def pause(self, pool: str, *, call_timeout: float | None = None) -> bool:
        """Pause ``pool`` (admin): it dispatches nothing new until resumed; True if changed."""
        return await self._admin_changed("PausePool", pb.PoolRequest(pool=_name("pool", pool)), call_timeout)

    async def resume(self, pool: str, *, call_timeout: float | None = None) -> bool:
        """Resume a paused ``pool`` (admin); True if changed."""
        return await self._admin_changed("ResumePool", pb.PoolRequest(pool=_name("pool", pool)), call_timeout)

    async def pause_recurring(self, name: str, *, call_timeout: float | None = None) -> bool:
        """Pause a recurring schedule (admin): occurrences due meanwhile are skipped."""
        request = pb.RecurringNameRequest(name=_name("name", name))
        return await self._admin_changed("PauseRecurring", request, call_timeout)

    async def resume_recurring(self, name: str, *, call_timeout: float | None = None) -> bool:
        """Resume a paused recurring schedule (admin)."""
        request = pb.RecurringNameRequest(name=_name("name", name))
        return await self._admin_changed("ResumeRecurring", request, call_timeout)

    async def trigger_recurring(self, name: str, *, call_timeout: float | None = None) -> Submitted:
        """ "Run now": one occurrence of schedule ``name`` at once (admin)."""
        timeout = seconds_or_none("call_timeout", call_timeout)
        request = pb.RecurringNameRequest(name=_name("name", name))
        return Submitted.from_wire(await self._call("admin", "TriggerRecurring", request, timeout=timeout))

    async def replay(
        self, ref: object, *, force: bool = False, call_timeout: float | None = None
    ) -> Submitted:
        """Replay a finished task that did not succeed (``force``: also a succeeded one) as a new
        task; ``ClientError('not_found')`` / ``('failed_precondition')`` when refused."""
        timeout = seconds_or_none("call_timeout", call_timeout)
        request = pb.ReplayRequest(task=task_ref(ref), force=bool(force))
        return Submitted.from_wire(await self._call("tasks", "Replay", request, timeout=timeout))

    async def replay_where(
        self, *, force: bool = False, request_key: str = "", call_timeout: float | None = None, **filter: Any
    ) -> BulkResult:
        """Replay every finished, not succeeded task matching ``filter`` (keywords as
        ``Scheduler.replay_where``: pools, statuses, kinds, tags, tenant, created_after,
        created_before, finished_after, finished_before, limit)."""
        return await self._bulk("ReplayWhere", filter, request_key, force, call_timeout)

    async def signal(
        self, name: str, payload: Any = None, *, call_timeout: float | None = None
    ) -> SignalResult:
        """Send signal ``name`` with a JSON ``payload`` (docs/how-to/durable.md#signals): tasks
        waiting in ``ctx.wait_signal(name)``, and those that wait later while it is retained,
        get it. Write-once: a second signal of the name reports ``duplicate=True``."""
        import json

        timeout = seconds_or_none("call_timeout", call_timeout)
        try:
            text = json.dumps(payload, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"the payload of signal {name!r} is not JSON: {e}") from None
        request = pb.SignalRequest(name=_name("name", name), payload_json=text)
        response = await self._call("tasks", "Signal", request, timeout=timeout)
        return SignalResult(name, bool(response.duplicate))

    async def cancel_where(
        self, *, request_key: str = "", call_timeout: float | None = None, **filter: Any
    ) -> BulkResult:
        """Cancel every not finished task matching ``filter`` (as :meth:`replay_where`)."""
        return await self._bulk("CancelWhere", filter, request_key, False, call_timeout)

    async def _bulk(
        self, method: str, filter: dict[str, Any], request_key: str, force: bool, call_timeout: float | None
    ) -> BulkResult:
        timeout = seconds_or_none("call_timeout", call_timeout)
        request = pb.BulkRequest(filter=task_filter(filter), request_key=request_key or "", force=bool(force))
        response = await self._call("tasks", method, request, timeout=timeout)
        return BulkResult(
            int(response.matched),
            int(response.acted),
            tuple(response.unavailable_shards),
            bool(response.resumed),
        )


#: seconds a replaced channel's calls still in flight may take before it is closed under them
_RETIRE_GRACE_S = 10.0


def _a_server_waits(errors: Sequence[ClientError]) -> bool:
    """Whether a round met a live server that does not lead (so a leader may come soon), not
    only addresses where nothing answers."""
    return any(e.code == "unavailable" and e.message.startswith(NOT_LEADING_MESSAGES) for e in errors)


def _name(what: str, v: object) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"{what} must be a non-empty string (got {v!r})")
    return v


def task_filter(kw: dict[str, Any]) -> pb.TaskFilter:
    """Bulk filter keywords as a ``TaskFilter`` message (times: aware datetimes or Unix s)."""
    import datetime as _dt

    f = pb.TaskFilter()
    for k, v in kw.items():
        if v is None:
            continue
        if k in ("pools", "kinds", "statuses"):
            names = [v] if isinstance(v, str) else list(v)
            if not names:  # (the wire cannot tell an empty list from none: it would match any)
                raise ValueError(f"{k} must not be empty (leave it out to match any)")
            if k == "statuses":
                f.statuses.extend(status_to_wire(s) for s in names)  # type: ignore[misc]
            else:
                getattr(f, k).extend(names)
        elif k == "tags":
            f.tags.update(dict(v))
        elif k == "tenant":
            f.tenant = v
        elif k in ("created_after", "created_before", "finished_after", "finished_before"):
            if isinstance(v, _dt.datetime):
                if v.tzinfo is None:
                    raise ValueError(f"{k} must be an aware datetime")
                v = v.timestamp()
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"{k} must be an aware datetime or Unix seconds (got {v!r})")
            if not math.isfinite(v * 1e9):
                raise ValueError(f"{k} must be finite (got {v!r})")
            setattr(f, f"{k}_unix_ns", round(v * 1e9))
        elif k == "limit":
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"limit must be an int >= 1 (got {v!r})")
            f.limit = v
        else:
            raise ValueError(f"unknown filter keyword '{k}'")
    return f


class Watch:
    """An open ``Tasks.Watch`` subscription: an async iterator of :class:`Event`.

    Iterating starts the call lazily; ``await watch.start()`` (or ``async with``) starts it and
    returns once the server confirmed the subscription (initial metadata), trying the next
    address on a retryable error. Iteration ends when the server ends the stream or after
    :meth:`aclose`; any other end raises :class:`ClientError` (``data_loss`` when the consumer
    fell too far behind).
    """

    def __init__(self, client: Client, request: pb.WatchRequest) -> None:
        self._client = client
        self._request = request
        self._call: Any = None
        self._tried = 0
        self._received = 0
        self._closed = False

    async def __aenter__(self) -> Watch:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> Watch:
        return self

    @property
    def closed(self) -> bool:
        return self._closed

    def _open(self) -> Any:
        order = self._client._order()
        index = order[self._tried % len(order)]
        self._tried += 1
        stub = self._client._stub("tasks", index)
        self._call = stub.Watch(self._request, metadata=self._client._metadata)
        self._index = index
        return self._call

    def _can_fail_over(self, err: ClientError) -> bool:
        return err.retryable and self._received == 0 and self._tried < len(self._client._targets)

    async def start(self) -> Watch:
        """Open the subscription and wait until it is live."""
        if self._closed:
            raise ClientError("cancelled", "watch is closed")
        while self._call is None:
            call = self._open()
            await call.initial_metadata()
            if call.done():
                code = await call.code()
                if code != grpc.StatusCode.OK:
                    err = ClientError(code.name.lower(), await call.details() or "")
                    if err.code == "unavailable":  # (a channel that could not connect: replaced)
                        await self._client._renew_if_failing(self._index)
                    if self._can_fail_over(err):
                        self._call = None
                        continue
                    self._closed = True
                    raise err
            self._client._preferred = self._index
        return self

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        while True:
            if self._call is None:
                self._open()
            try:
                msg = await self._call.read()
            except asyncio.CancelledError:
                if self._closed:
                    raise StopAsyncIteration from None
                raise
            except grpc.RpcError as exc:
                err = from_rpc_error(exc)
                if self._closed or err.code == "cancelled":
                    self._closed = True
                    raise StopAsyncIteration from None
                if err.code == "unavailable":
                    await self._client._renew_if_failing(self._index)
                if self._can_fail_over(err):
                    self._call = None
                    continue
                self._closed = True
                raise err from None
            if msg is grpc.aio.EOF:
                self._closed = True
                raise StopAsyncIteration
            self._received += 1
            return Event.from_wire(msg)

    async def aclose(self) -> None:
        """Cancel the subscription; iteration ends."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def close(self) -> None:
        """Cancel the subscription (non-async)."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()


def _template(payload: object, fields: dict[str, Any]) -> pb.TaskSpec:
    """A recurring schedule's template: a prebuilt spec (from :func:`task`) as it is, or one
    built from ``payload`` and the task fields."""
    if isinstance(payload, pb.TaskSpec):
        if fields:
            raise ValueError(
                f"give task fields either in the prebuilt spec or as keywords, not both "
                f"(got {', '.join(sorted(fields))})"
            )
        return payload
    return build_spec(payload, **fields)
