"""The remote Worker's protocol state machine against the fake server (tests/client/conftest.py):
register → lease → heartbeat → complete/fail/nack/cancelled; abort; reconnect; stop/drain."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from cronoq import Permanent, Retryable
from cronoq.client import CancelTask, ClientError, Lease, Reject, Worker
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.protocol import PROTOCOL_VERSION


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(worker.run())
    try:
        yield task
    finally:
        if not task.done():
            await asyncio.wait_for(worker.stop(grace=0.5), 10)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)


async def _connect(fake: Any, **reg: Any) -> Any:
    conn = await fake.next_conn()
    first = await conn.recv_kind("register")
    conn.register_ok(**reg)
    return conn, first


async def echo(lease: Lease) -> object:
    return lease.value()


async def test_register_and_complete(fake: Any) -> None:
    w = Worker(fake.target, "gpu", echo, slots=3, token="worker-token-0123456789", name="w1", labels={"z": 1})
    async with running(w):
        conn = await fake.next_conn()
        reg = await conn.recv_kind("register")
        assert (reg.pool, reg.slots, reg.worker_name) == ("gpu", 3, "w1")
        assert reg.protocol_version == PROTOCOL_VERSION
        assert dict(reg.labels) == {"z": "1"}
        assert conn.metadata["authorization"] == "Bearer worker-token-0123456789"
        assert not w.registered
        conn.register_ok(worker_id=42, slots=2)
        assert await w.wait_registered(5) == 42
        assert w.registered and w.granted_slots == 2 and w.lease_ttl is None

        conn.lease(1, payload=b'{"a":1}', content_type="application/json")
        done = await conn.recv_kind("complete")
        assert (done.lease, done.output, done.content_type) == (1, b'{"a":1}', "application/json")
        conn.lease(2, payload="hé".encode(), content_type="text/plain; charset=utf-8")
        done = await conn.recv_kind("complete")
        assert (done.output, done.content_type) == ("hé".encode(), "text/plain; charset=utf-8")
        conn.lease(3, payload=b"\x00", content_type="application/octet-stream")
        done = await conn.recv_kind("complete")
        assert (done.output, done.content_type) == (b"\x00", "application/octet-stream")


async def test_handler_returning_none_completes_empty(fake: Any) -> None:
    async def handle(lease: Lease) -> None:
        return None

    async with running(Worker(fake.target, "p", handle)):
        conn, _ = await _connect(fake)
        conn.lease(1, payload=b"x")
        done = await conn.recv_kind("complete")
        assert done.output == b"" and done.content_type == ""


async def test_output_too_large_for_the_server_fails_permanently(fake: Any) -> None:
    """An output the server's clients could not receive (over max_message_bytes less the
    margin) fails the attempt permanently instead of being sent (as the published worker)."""
    limit = 4 << 20

    async def handle(lease: Lease) -> bytes:
        return b"x" * (limit - 1024 + lease.attempt - 1)  # attempt 1 fits exactly; 2 is 1 over

    async with running(Worker(fake.target, "p", handle)):
        conn, _ = await _connect(fake)
        conn.lease(1, attempt=1)
        done = await conn.recv_kind("complete")
        assert len(done.output) == limit - 1024
        conn.lease(2, attempt=2)
        fail = await conn.recv_kind("fail")
        assert fail.lease == 2 and fail.permanent
        over = limit - 1023
        assert fail.message == f"output of {over} bytes exceeds the server's message limit of {limit} bytes"


async def test_sync_handler_is_accepted(fake: Any) -> None:
    def handle(lease: Lease) -> dict[str, int]:
        return {"attempt": lease.attempt}

    async with running(Worker(fake.target, "p", handle)):
        conn, _ = await _connect(fake)
        conn.lease(1, attempt=2)
        done = await conn.recv_kind("complete")
        assert done.output == b'{"attempt":2}' and done.content_type == "application/json"


async def test_lease_fields(fake: Any) -> None:
    seen: list[Lease] = []

    async def handle(lease: Lease) -> None:
        seen.append(lease)

    async with running(Worker(fake.target, "p", handle)):
        conn, _ = await _connect(fake, lease_ttl=30.0)
        conn.lease(
            9,
            task_id=77,
            payload=b'{"x":[1,2]}',
            content_type="application/json",
            kind="render",
            key="job-1",
            tags={"traceparent": "00-1"},
            timeout_s=12.5,
            deadline_unix_ns=1_700_000_000_500_000_000,
            pool="p",
            priority=pb.PRIORITY_HIGH,
            attempt=3,
        )
        await conn.recv_kind("complete")
        conn.lease(10)
        await conn.recv_kind("complete")
    lease, bare = seen
    assert (lease.id, lease.task_id, lease.attempt, lease.pool) == (9, 77, 3, "p")
    assert (
        lease.payload == b'{"x":[1,2]}' and lease.json() == {"x": [1, 2]} and lease.value() == {"x": [1, 2]}
    )
    assert lease.text() == '{"x":[1,2]}' and lease.content_type == "application/json"
    assert (lease.kind, lease.key, lease.tags, lease.priority) == (
        "render",
        "job-1",
        {"traceparent": "00-1"},
        "high",
    )
    assert lease.timeout == 12.5 and lease.deadline == 1_700_000_000.5 and lease.lease_ttl == 30.0
    assert not lease.cancelled and not lease.cancelled.is_set()
    assert bare.kind == "default" and bare.key is None and bare.tags == {} and bare.timeout is None
    assert (
        bare.deadline is None and bare.json() is None and bare.value() is None and bare.priority == "normal"
    )


class Halt(BaseException):
    """A user-defined BaseException."""


@pytest.mark.parametrize(
    ("exc", "kind", "expect"),
    [
        (Permanent("bad input"), "fail", {"message": "bad input", "permanent": True, "retry_after_s": None}),
        (
            Retryable("later", retry_after=2.5),
            "fail",
            {"message": "later", "permanent": False, "retry_after_s": 2.5},
        ),
        (Retryable("again"), "fail", {"message": "again", "permanent": False, "retry_after_s": None}),
        (
            ValueError("nope"),
            "fail",
            {"message": "ValueError: nope", "permanent": False, "retry_after_s": None},
        ),
        (KeyError("k"), "fail", {"message": "KeyError: 'k'", "permanent": False, "retry_after_s": None}),
        (asyncio.CancelledError(), "fail", {"message": "CancelledError: ", "permanent": False}),
        # a BaseException but KeyboardInterrupt is the task's failure, not the worker's end
        (SystemExit(3), "fail", {"message": "SystemExit: 3", "permanent": False, "retry_after_s": None}),
        (Halt("now"), "fail", {"message": "Halt: now", "permanent": False}),
        (GeneratorExit("mine"), "fail", {"message": "GeneratorExit: mine", "permanent": False}),
        (Reject("busy"), "nack", {"reason": "busy"}),
        (CancelTask("stop it"), "cancelled", {}),
    ],
)
@pytest.mark.parametrize("plain", [False, True], ids=["async", "plain"])
async def test_handler_outcomes(
    fake: Any, exc: BaseException, kind: str, expect: dict[str, Any], plain: bool
) -> None:
    async def handle(lease: Lease) -> None:
        raise exc

    def handle_plain(lease: Lease) -> None:  # runs inline as the lease is read: same reports
        raise exc

    async with running(Worker(fake.target, "p", handle_plain if plain else handle)):
        conn, _ = await _connect(fake)
        conn.lease(5)
        msg = await conn.recv_kind(kind)
        assert msg.lease == 5
        for name, value in expect.items():
            if name == "retry_after_s":
                assert (msg.retry_after_s if msg.HasField("retry_after_s") else None) == value
            else:
                assert getattr(msg, name) == value


@pytest.mark.parametrize("plain", [False, True], ids=["async", "plain"])
async def test_unencodable_output_fails(fake: Any, plain: bool) -> None:
    async def handle(lease: Lease) -> object:
        return object()

    def handle_plain(lease: Lease) -> object:
        return object()

    async with running(Worker(fake.target, "p", handle_plain if plain else handle)):
        conn, _ = await _connect(fake)
        conn.lease(1)
        fail = await conn.recv_kind("fail")
        assert fail.message.startswith("ValueError: payload of type object cannot be encoded as JSON")


async def test_plain_handler_returning_an_awaitable_is_awaited(fake: Any) -> None:
    release, both = asyncio.Event(), asyncio.Event()
    seen: list[int] = []

    async def later(lease: Lease) -> str:
        await release.wait()
        return f"done {lease.id}"

    def handle(lease: Lease) -> object:  # a plain function handing back a coroutine
        seen.append(lease.id)
        if len(seen) == 2:
            both.set()
        return later(lease)

    w = Worker(fake.target, "p", handle, slots=2)
    async with running(w):
        conn, _ = await _connect(fake, slots=2)
        conn.lease(1)
        conn.lease(2)
        await asyncio.wait_for(both.wait(), 10)
        assert w.active == 2  # both are awaited in their own tasks, holding their slots
        conn.lease(3)
        nack = await conn.recv_kind("nack")
        assert (nack.lease, nack.reason) == (3, "no free slot")
        release.set()
        outputs = {(await conn.recv_kind("complete")).output for _ in range(2)}
        assert outputs == {b"done 1", b"done 2"}
        assert w.active == 0


@pytest.mark.parametrize("how", ["async", "plain", "awaitable"])
async def test_a_handler_calling_sys_exit_fails_its_lease_and_the_worker_serves_on(
    fake: Any, how: str
) -> None:
    async def later(lease: Lease) -> str:
        await asyncio.sleep(0)
        return handle_plain(lease)

    async def handle(lease: Lease) -> str:
        return await later(lease)

    def handle_plain(lease: Lease) -> str:
        if lease.text() == "exit":
            sys.exit(3)
        return f"done {lease.id}"

    def handle_awaitable(lease: Lease) -> object:
        return later(lease)

    run = {"async": handle, "plain": handle_plain, "awaitable": handle_awaitable}[how]
    w = Worker(fake.target, "p", run)
    async with running(w) as task:
        conn, _ = await _connect(fake)
        conn.lease(1, payload=b"exit")
        fail = await conn.recv_kind("fail")
        assert (fail.lease, fail.message, fail.permanent) == (1, "SystemExit: 3", False)
        conn.lease(2, payload=b"next")
        done = await conn.recv_kind("complete")
        assert (done.lease, done.output) == (2, b"done 2")
        assert not task.done() and w.active == 0


def _eager_lease_tasks(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Future[Any]:
    """A task factory that starts the worker's lease tasks eagerly, as Python 3.12's
    ``asyncio.eager_task_factory`` does (their first step runs inside ``create_task``); every
    other task (gRPC's) as usual.  On 3.11 the eager start is made by hand: the first step
    runs now, in the task (the caller's task set aside), and the step ``Task.__init__``
    scheduled is skipped."""
    if getattr(getattr(coro, "cr_code", None), "co_name", "") != "_run_lease":
        return asyncio.Task(coro, loop=loop, **kw)
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, eager_start=True, **kw)  # type: ignore[call-arg,unused-ignore]
    return _EagerTask(coro, loop=loop, **kw)


class _EagerTask(asyncio.tasks._PyTask):  # type: ignore[name-defined,misc]
    """(3.11) A task whose first step runs in its constructor (see ``_eager_lease_tasks``)."""

    def __init__(self, coro: Any, **kw: Any) -> None:
        super().__init__(coro, **kw)
        self._skip = True  # the step __init__ scheduled: it ran now instead
        caller = asyncio.current_task(self._loop)
        if caller is not None:
            asyncio.tasks._leave_task(self._loop, caller)
        try:
            super()._Task__step()
        finally:
            if caller is not None:
                asyncio.tasks._enter_task(self._loop, caller)

    def _Task__step(self, exc: BaseException | None = None) -> None:
        if self._skip:
            self._skip = False
            return
        super()._Task__step(exc)


async def test_a_lease_task_done_at_its_eager_start_frees_its_slot(fake: Any) -> None:
    """Under an eager task factory a handler that never suspends ends inside ``create_task``:
    its lease must not stay counted as running (it would hold a slot for ever, and once all
    were held every lease would be nacked "no free slot")."""

    async def quick(lease: Lease) -> str:
        return f"done {lease.id}"

    def plain(lease: Lease) -> object:
        return quick(lease)  # (an awaitable: awaited by a lease task too)

    loop = asyncio.get_running_loop()
    loop.set_task_factory(_eager_lease_tasks)
    try:
        for handler in (quick, plain):
            w = Worker(fake.target, "p", handler, slots=1)
            async with running(w):
                conn, _ = await _connect(fake)
                for lease in (1, 2, 3):
                    conn.lease(lease)
                    done = await conn.recv_kind("complete")
                    assert (done.lease, done.output) == (lease, f"done {lease}".encode())
                assert w.active == 0
    finally:
        loop.set_task_factory(None)


async def test_heartbeats_every_third_of_the_ttl(fake: Any) -> None:
    # Each lease is held until the test has seen enough heartbeats, instead of for a fixed time
    # (on a loaded machine fewer heartbeats fit in one). Each heartbeat follows a sleep of ttl/3,
    # so "not sooner than n * ttl/3" is exact; each upper bound is the least time a too long
    # interval would need, which leaves a slow loop hundreds of milliseconds per heartbeat.
    release = {1: asyncio.Event(), 2: asyncio.Event()}

    async def handle(lease: Lease) -> str:
        await release[lease.id].wait()
        return "done"

    async def heartbeats(conn: Any, lease: int, n: int) -> None:
        for _ in range(n):
            msg = await conn.recv()
            assert msg.WhichOneof("msg") == "heartbeat" and msg.heartbeat.lease == lease, msg

    async with running(Worker(fake.target, "p", handle)):
        conn, _ = await _connect(fake, lease_ttl=0.9)
        t0 = time.monotonic()
        conn.lease(1)
        await heartbeats(conn, 1, 3)
        took = time.monotonic() - t0
        # every 0.3 s: three take 0.9 s; every 2/3 ttl would take >= 1.8 s
        assert 0.9 - 0.01 <= took < 1.8
        release[1].set()
        assert (await conn.recv_kind("complete")).lease == 1
        # a lease's own ttl wins over the registration's (every 0.02 s instead of 0.3 s) ...
        t0 = time.monotonic()
        conn.lease(2, lease_ttl_s=0.06)
        await heartbeats(conn, 2, 7)
        took = time.monotonic() - t0
        # seven take 0.14 s; at the registration's interval they would take >= 2.1 s
        assert 0.14 - 0.01 <= took < 2.1
        release[2].set()
        assert (await conn.recv_kind("complete")).lease == 2
        # ... and heartbeats stop after the report (15 of its intervals)
        with pytest.raises(TimeoutError):
            await conn.recv(timeout=0.3)


async def test_no_heartbeats_without_ttl(fake: Any) -> None:
    async def handle(lease: Lease) -> None:
        await asyncio.sleep(0.2)

    async with running(Worker(fake.target, "p", handle)):
        conn, _ = await _connect(fake)
        conn.lease(1)
        msg = await conn.recv()
        assert msg.WhichOneof("msg") == "complete"


async def test_abort_cancels_the_handler(fake: Any) -> None:
    started = asyncio.Event()
    leases: list[Lease] = []
    cancelled = asyncio.Event()

    async def handle(lease: Lease) -> str:
        if lease.id == 1:
            leases.append(lease)
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return "second"

    w = Worker(fake.target, "p", handle)
    async with running(w):
        conn, _ = await _connect(fake, lease_ttl=0.3)
        conn.lease(1)
        await asyncio.wait_for(started.wait(), 5)
        assert w.active == 1 and w.running == 1  # (the published client's name)
        assert w.server_protocol == w.server_protocol_version == 3 and w.connections == w.sessions == 1
        conn.send(abort=pb.Abort(lease=1, reason="attempt timed out"))
        await asyncio.wait_for(cancelled.wait(), 5)
        assert leases[0].cancelled and leases[0].cancel_reason == "attempt timed out"
        # also an asyncio.Event, as in the published client
        assert leases[0].cancelled.is_set()
        await asyncio.wait_for(leases[0].cancelled.wait(), 5)
        # nothing is reported for the aborted lease: the next report is the next lease's
        conn.lease(2)
        done = await conn.recv_kind("complete")
        assert done.lease == 2 and done.output == b"second"
        assert w.active == 0
        conn.send(abort=pb.Abort(lease=99, reason="unknown leases are ignored"))
        conn.lease(3)
        assert (await conn.recv_kind("complete")).lease == 3


async def test_slots_limit_concurrency_and_extra_leases_are_nacked(fake: Any) -> None:
    release = asyncio.Event()
    active = 0
    peak = 0

    async def handle(lease: Lease) -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await release.wait()
        active -= 1
        return lease.id

    async with running(Worker(fake.target, "p", handle, slots=2)):
        conn, _ = await _connect(fake, slots=2)
        conn.lease(1)
        conn.lease(2)
        conn.lease(3)
        nack = await conn.recv_kind("nack")
        assert nack.lease == 3 and nack.reason == "no free slot"
        release.set()
        done = {(await conn.recv_kind("complete")).lease, (await conn.recv_kind("complete")).lease}
        assert done == {1, 2} and peak == 2


async def test_set_slots(fake: Any) -> None:
    w = Worker(fake.target, "p", echo, slots=1)
    async with running(w):
        conn, _ = await _connect(fake, slots=1)
        await w.wait_registered(5)
        w.set_slots(0)
        assert (await conn.recv_kind("set_slots")).slots == 0
        conn.lease(1)
        assert (await conn.recv_kind("nack")).reason == "no free slot"
        w.set_slots(3)
        assert (await conn.recv_kind("set_slots")).slots == 3
        with pytest.raises(ValueError):
            w.set_slots(-1)


async def test_reconnects_at_once_after_not_leader(fake: Any) -> None:
    started = asyncio.Event()
    leases: list[Lease] = []

    async def handle(lease: Lease) -> None:
        leases.append(lease)
        started.set()
        await asyncio.sleep(30)

    # a 30 s backoff, far above the bound below (which then leaves a slow machine seconds)
    w = Worker(fake.target, "p", handle, backoff=(30.0, 30.0))
    async with running(w):
        conn, _ = await _connect(fake, worker_id=1)
        await w.wait_registered(5)
        conn.lease(1)
        await asyncio.wait_for(started.wait(), 5)
        t0 = time.monotonic()
        conn.send(shutdown=pb.Shutdown(reason="lost leadership", not_leader=True))
        conn2 = await fake.next_conn(10)
        reg = await conn2.recv_kind("register")
        assert time.monotonic() - t0 < 10.0  # not the 30 s backoff
        assert reg.pool == "p"
        assert leases[0].cancelled  # the old leader's lease is gone
        conn2.register_ok(worker_id=2)
        assert await w.wait_registered(5) == 2
        assert w.sessions == 2
        assert conn.closed_by_worker.is_set() or await asyncio.wait_for(conn.finished.wait(), 5)


async def test_not_leader_moves_to_the_next_address(fake: Any, fake2: Any) -> None:
    w = Worker([fake.target, fake2.target], "p", echo, backoff=(3.0, 3.0))
    async with running(w):
        conn, _ = await _connect(fake)
        await w.wait_registered(5)
        conn.send(shutdown=pb.Shutdown(reason="standby now", not_leader=True))
        conn2 = await fake2.next_conn()
        await conn2.recv_kind("register")
        conn2.register_ok(worker_id=9)
        assert await w.wait_registered(5) == 9
        assert w.target == fake2.target


async def test_reconnects_with_backoff_after_errors(fake: Any) -> None:
    w = Worker(fake.target, "p", echo, backoff=(0.2, 0.4))
    async with running(w):
        conn, _ = await _connect(fake)
        await w.wait_registered(5)
        t0 = time.monotonic()
        conn.abort(grpc.StatusCode.UNAVAILABLE, "going away")
        conn2 = await fake.next_conn()
        await conn2.recv_kind("register")
        t1 = time.monotonic()
        assert t1 - t0 >= 0.15  # waited backoff[0]
        # a session that fails before registering doubles the delay, capped at backoff[1]
        conn2.abort(grpc.StatusCode.UNAVAILABLE, "still going")
        conn3 = await fake.next_conn()
        await conn3.recv_kind("register")
        t2 = time.monotonic()
        assert 0.15 <= t2 - t1 < 2.0
        conn3.register_ok(worker_id=3)
        assert await w.wait_registered(5) == 3


async def test_reconnects_while_the_server_is_down(fake: Any) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    w = Worker(f"127.0.0.1:{port}", "p", echo, backoff=(0.05, 0.1))
    task = asyncio.create_task(w.run())

    async def reconnected() -> None:  # polled: how long a refused connection takes varies
        while w.sessions < 3:
            assert not task.done()
            await asyncio.sleep(0.01)

    await asyncio.wait_for(reconnected(), 10)
    assert not task.done() and w.sessions >= 3 and not w.registered
    await asyncio.wait_for(w.stop(), 5)
    await asyncio.wait_for(task, 5)


async def test_fatal_errors_are_raised(fake: Any) -> None:
    w = Worker(fake.target, "p", echo)
    task = asyncio.create_task(w.run())
    conn = await fake.next_conn()
    await conn.recv_kind("register")
    conn.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
    with pytest.raises(ClientError) as exc:
        await asyncio.wait_for(task, 5)
    assert exc.value.code == "unauthenticated" and exc.value.message == "bad token"


async def test_protocol_violation_from_server(fake: Any) -> None:
    w = Worker(fake.target, "p", echo, reconnect=False)
    task = asyncio.create_task(w.run())
    conn = await fake.next_conn()
    await conn.recv_kind("register")
    conn.lease(1)  # a Lease before Registered
    with pytest.raises(ClientError) as exc:
        await asyncio.wait_for(task, 5)
    assert "expected Registered" in exc.value.message


async def test_without_reconnect_run_returns_when_the_stream_ends(fake: Any) -> None:
    w = Worker(fake.target, "p", echo, reconnect=False)
    task = asyncio.create_task(w.run())
    conn, _ = await _connect(fake)
    await w.wait_registered(5)
    conn.send(shutdown=pb.Shutdown(reason="bye"))
    conn.lease(1)  # still served after a plain Shutdown
    assert (await conn.recv_kind("complete")).lease == 1
    conn.end()
    await asyncio.wait_for(task, 5)
    assert not w.registered and w.sessions == 1


async def test_stop_drains_running_handlers(fake: Any) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def handle(lease: Lease) -> str:
        started.set()
        await release.wait()  # set once the drain has answered lease 2 (not after a fixed time)
        return "finished"

    w = Worker(fake.target, "p", handle)
    task = asyncio.create_task(w.run())
    conn, _ = await _connect(fake)
    conn.lease(1)
    await asyncio.wait_for(started.wait(), 5)

    async def server_side() -> list[str]:
        seen = []
        while True:
            msg = await conn.recv()
            if msg is None:  # the worker half-closed
                conn.end()
                return seen
            seen.append(msg.WhichOneof("msg"))
            if seen[-1] == "set_slots":
                assert msg.set_slots.slots == 0
                conn.lease(2)  # raced with the drain: handed back
            elif seen[-1] == "nack":
                release.set()

    server = asyncio.create_task(server_side())
    await asyncio.wait_for(w.stop(grace=5), 10)
    await asyncio.wait_for(task, 5)
    seen = await asyncio.wait_for(server, 5)
    assert seen == ["set_slots", "nack", "complete"]


async def test_stop_cancels_handlers_after_grace(fake: Any) -> None:
    started = asyncio.Event()
    leases: list[Lease] = []

    async def handle(lease: Lease) -> None:
        leases.append(lease)
        started.set()
        await asyncio.sleep(30)

    w = Worker(fake.target, "p", handle, grace=0.1)
    task = asyncio.create_task(w.run())
    conn, _ = await _connect(fake)
    conn.lease(1)
    await asyncio.wait_for(started.wait(), 5)
    t0 = time.monotonic()
    stopper = asyncio.create_task(w.stop())
    assert (await conn.recv_kind("set_slots")).slots == 0
    fail = await conn.recv_kind("fail")
    assert fail.lease == 1 and fail.message == "worker stopped" and not fail.permanent
    assert await conn.recv() is None  # half-closed
    conn.end()
    await asyncio.wait_for(stopper, 5)
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - t0 < 3
    assert not leases[0].cancelled


async def test_stop_before_registration_and_idle(fake: Any) -> None:
    w = Worker(fake.target, "p", echo)
    await asyncio.wait_for(w.stop(), 5)  # never ran: nothing to do
    task = asyncio.create_task(w.run())
    conn = await fake.next_conn()
    await conn.recv_kind("register")
    stopper = asyncio.create_task(w.stop())
    conn.register_ok()
    msgs = []
    while (msg := await conn.recv()) is not None:
        msgs.append(msg.WhichOneof("msg"))
    conn.end()
    await asyncio.wait_for(stopper, 5)
    await asyncio.wait_for(task, 5)
    assert set(msgs) <= {"set_slots"}


async def test_async_with_runs_in_background(fake: Any) -> None:
    async with Worker(fake.target, "p", echo) as w:
        conn, _ = await _connect(fake)
        await w.wait_registered(5)
        conn.lease(1, payload=b"x")
        await conn.recv_kind("complete")

        async def close_on_half_close() -> None:
            while await conn.recv() is not None:
                pass
            conn.end()

        closer = asyncio.create_task(close_on_half_close())
    await asyncio.wait_for(closer, 5)
    assert not w.registered


async def test_run_twice_is_an_error(fake: Any) -> None:
    w = Worker(fake.target, "p", echo)
    async with running(w):
        await _connect(fake)
        await w.wait_registered(5)
        with pytest.raises(RuntimeError, match="already running"):
            await w.run()


def test_worker_argument_validation() -> None:
    with pytest.raises(ValueError, match="pool"):
        Worker("a:1", "", echo)
    with pytest.raises(ValueError, match="slots"):
        Worker("a:1", "p", echo, slots=0)
    with pytest.raises(ValueError, match="handler"):
        Worker("a:1", "p", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backoff"):
        Worker("a:1", "p", echo, backoff=(2.0, 1.0))
    with pytest.raises(ValueError, match="grace"):
        Worker("a:1", "p", echo, grace=-1)
