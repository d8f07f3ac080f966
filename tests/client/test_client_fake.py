"""Client calls end to end against the fake in-process gRPC server (tests/client/conftest.py)."""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from cronoq import RetryPolicy
from cronoq.client import Client, ClientError, Event, Submitted, WaitTimeout, task
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb


def _closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


async def test_submit_sends_spec_and_token(fake: Any) -> None:
    async with Client(fake.target, token="s3cret-token-0123456789") as client:
        sub = await client.submit(
            {"n": 1}, pool="p", priority="critical", key="k1", timeout=5, retry=RetryPolicy(max_attempts=2)
        )
        assert sub == Submitted(1, False, None)
        req, md = fake.last("Submit")
        assert md["authorization"] == "Bearer s3cret-token-0123456789"
        assert not req.wait and not req.HasField("wait_timeout_s")
        spec = req.task
        assert spec.payload == b'{"n":1}' and spec.content_type == "application/json"
        assert spec.pool == "p" and spec.priority == pb.PRIORITY_CRITICAL and spec.key == "k1"
        assert spec.timeout_s == 5.0 and spec.retry.max_attempts == 2
        dup = await client.submit("again", key="k1")
        assert dup.id == 1 and dup.duplicate


async def test_no_token_sends_no_authorization(fake: Any) -> None:
    async with Client(fake.target) as client:
        await client.submit(b"x")
    _, md = fake.last("Submit")
    assert "authorization" not in md
    assert fake.last("Submit")[0].task.content_type == "application/octet-stream"


async def test_submit_wait_returns_result(fake: Any) -> None:
    async with Client(fake.target) as client:
        call = asyncio.create_task(client.submit({"a": 1}, wait=True, wait_timeout=5))
        while not fake.tasks:
            await asyncio.sleep(0.01)
        fake.finish(1, output=b'{"ok":true}')
        sub = await call
        assert sub.id == 1 and sub.result is not None
        assert sub.result.ok and sub.result.json() == {"ok": True} and sub.result.output_available
        req, _ = fake.last("Submit")
        assert req.wait and req.wait_timeout_s == 5.0


async def test_submit_wait_timeout_raises_timeout_error(fake: Any) -> None:
    async with Client(fake.target) as client:
        with pytest.raises(TimeoutError) as exc:
            await client.submit(None, wait=True, wait_timeout=0.05)
        assert isinstance(exc.value, WaitTimeout) and exc.value.code == "deadline_exceeded"
        # without wait a deadline is an ordinary ClientError
        fake.fail("Submit", grpc.StatusCode.DEADLINE_EXCEEDED, "slow")
        with pytest.raises(ClientError) as exc2:
            await client.submit(None)
        assert not isinstance(exc2.value, TimeoutError)


async def test_call_timeout_is_the_grpc_deadline(fake: Any) -> None:
    async with Client(fake.target) as client:
        with pytest.raises(WaitTimeout):
            await client.submit(None, wait=True, call_timeout=0.1)


async def test_submit_errors(fake: Any) -> None:
    async with Client(fake.target) as client:
        with pytest.raises(ClientError) as exc:
            await client.submit(None, pool="nope")
        assert exc.value.code == "not_found" and exc.value.message == "unknown pool 'nope'"
        assert not exc.value.retryable
        fake.fail("Submit", grpc.StatusCode.INVALID_ARGUMENT, "cycle")
        with pytest.raises(ClientError, match="invalid_argument: cycle"):
            await client.submit(None)
        with pytest.raises(ValueError, match="unknown priority"):
            await client.submit(None, priority="urgent")
        with pytest.raises(ValueError, match="wait_timeout must be"):
            await client.submit(None, wait=True, wait_timeout=-1)


async def test_submit_batch(fake: Any) -> None:
    async with Client(fake.target) as client:
        out = await client.submit_batch(
            [task("a", key="a"), task({"b": 2}, key="b", after=["a"]), {"payload": b"c", "pool": "x"}]
        )
        assert [s.id for s in out] == [1, 2, 3] and not any(s.duplicate for s in out)
        req, _ = fake.last("SubmitBatch")
        assert [t.key for t in req.tasks] == ["a", "b", ""]
        assert req.tasks[1].deps[0].target.key == "a" and req.tasks[1].deps[0].cond == pb.EDGE_COND_ON_SUCCESS
        assert req.tasks[2].pool == "x"
        again = await client.submit_batch([task(None, key="a")])
        assert again == [Submitted(1, True, None)]
        assert await client.submit_batch([]) == []


async def test_cancel_get(fake: Any) -> None:
    async with Client(fake.target) as client:
        sub = await client.submit("x", key="job", kind="k", tenant="t", priority="low")
        info = await client.get("job")
        assert info.id == sub.id and info.status == "ready" and info.key == "job" and info.kind == "k"
        assert info.tenant == "t" and info.priority == "low" and info.created_at is not None
        assert (await client.get(sub)).id == sub.id
        assert await client.cancel(sub.id) is True
        assert await client.cancel("job") is False
        assert (await client.get(sub.id)).status == "cancelled"
        with pytest.raises(ClientError) as exc:
            await client.cancel(999)
        assert exc.value.code == "not_found"
        with pytest.raises(ClientError) as exc:
            await client.get("missing")
        assert exc.value.code == "not_found"
        req, _ = fake.last("Get")
        assert req.task.key == "missing"


async def test_list_and_iter_tasks(fake: Any) -> None:
    async with Client(fake.target) as client:
        for i in range(7):
            await client.submit(i, pool="a" if i % 2 else "b")
        fake.finish(1)
        page = await client.list_tasks(limit=3)
        assert [t.id for t in page] == [1, 2, 3] and page.next_after == 3
        page2 = await client.list_tasks(after=page.next_after, limit=3)
        assert [t.id for t in page2] == [4, 5, 6] and page2.next_after == 6
        last = await client.list_tasks(after=6, limit=3)
        assert [t.id for t in last] == [7] and last.next_after is None  # as the published client
        assert [t.id for t in await client.list_tasks(after=last.next_after, limit=1)] == [1]
        assert [t.id async for t in client.iter_tasks(limit=2)] == [1, 2, 3, 4, 5, 6, 7]
        # the published client's spelling of the page size
        assert [t.id async for t in client.iter_tasks(page_size=3)] == [1, 2, 3, 4, 5, 6, 7]
        assert [req.limit for m, req, _ in fake.requests if m == "ListTasks"][-3:] == [3, 3, 3]
        info = await client.get(1)
        assert info.done and info.terminal and not (await client.get(2)).done
        assert [t.id async for t in client.iter_tasks(pools=["a"], limit=2)] == [2, 4, 6]
        done = await client.list_tasks(statuses=["succeeded"])
        assert [t.id for t in done] == [1]
        req, _ = fake.last("ListTasks")
        assert list(req.statuses) == [pb.TASK_STATUS_SUCCEEDED]
        assert [t.id for t in await client.list_tasks(pools="b", statuses="ready")] == [3, 5, 7]
        with pytest.raises(ValueError, match="unknown status"):
            await client.list_tasks(statuses=["done"])
        with pytest.raises(ValueError, match="limit"):
            await client.list_tasks(limit=-1)


async def waits_asked(fake: Any, n: int, timeout: float = 10.0) -> None:
    """Until the fake has received ``n`` Wait calls (a safety timeout, not a sequencing delay)."""

    async def poll() -> None:
        while sum(1 for m, _, _ in fake.requests if m == "Wait") < n:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


async def test_wait(fake: Any) -> None:
    async with Client(fake.target) as client:
        sub = await client.submit("x")
        waiter = asyncio.create_task(client.wait(sub.id, timeout=5))
        await waits_asked(fake, 1)  # the task ends while the Wait call is in progress
        fake.finish(sub.id, pb.TASK_STATUS_DEAD_LETTERED, message="boom")
        res = await waiter
        assert res.status == "dead_lettered" and res.message == "boom" and not res.output_available
        assert res.output is None and res.text() == "" and res.json() is None  # no output: None
        assert fake.last("Wait")[0].timeout_s <= 5


async def test_wait_timeout(fake: Any) -> None:
    async with Client(fake.target) as client:
        sub = await client.submit("x")
        with pytest.raises(TimeoutError):
            await client.wait(sub.id, timeout=0.1)
        with pytest.raises(ClientError) as exc:
            await client.wait(12345, timeout=1)
        assert exc.value.code == "not_found"


async def test_wait_without_timeout_outlasts_the_server_cap(fake: Any) -> None:
    fake.wait_cap = 0.1  # every Wait call ends with DEADLINE_EXCEEDED after 0.1 s
    async with Client(fake.target) as client:
        sub = await client.submit("x")
        waiter = asyncio.create_task(client.wait(sub.id))
        # the client asks again each time the cap ends a call: wait for its third call (a fixed
        # 0.35 s assumed three 0.1 s round trips fit in it, which a loaded machine can miss)
        await waits_asked(fake, 3)
        assert not waiter.done()
        fake.finish(sub.id, output=b"42")
        res = await asyncio.wait_for(waiter, 5)
        assert res.json() == 42
        # with a timeout longer than the cap the client also asks again
        sub2 = await client.submit("y")
        with pytest.raises(WaitTimeout):
            await client.wait(sub2.id, timeout=0.25)


async def test_watch(fake: Any) -> None:
    async with Client(fake.target) as client:
        a = await client.submit("a", key="ka", pool="p")
        b = await client.submit("b", pool="p")
        c = await client.submit("c", pool="q")
        async with client.watch(pools=["p"]) as events:
            assert fake.watch_started.is_set()
            fake.finish(c.id)  # other pool
            fake.finish(a.id, output=b"1")
            fake.publish(pb.StatusEvent(id=b.id, pool="p", status=pb.TASK_STATUS_RUNNING))  # not terminal
            fake.finish(b.id, pb.TASK_STATUS_FAILED, message="bad")
            got = [await events.__anext__(), await events.__anext__()]
        assert got[0] == Event(a.id, "p", "ka", "succeeded", 0, 0.0, "")
        assert got[1].id == b.id and got[1].status == "failed" and got[1].key is None
        assert events.closed
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()
        req, _ = fake.last("Watch")
        assert list(req.pools) == ["p"] and not req.all_transitions


async def test_watch_filters_and_iteration(fake: Any) -> None:
    async with Client(fake.target) as client:
        ids = [(await client.submit(i, key=f"k{i}")).id for i in range(4)]
        watch = client.watch(ids=[ids[0]], keys=["k2"], all_transitions=True)
        seen: list[Event] = []

        async def consume() -> None:
            async for ev in watch:
                seen.append(ev)
                if len(seen) == 3:
                    await watch.aclose()

        consumer = asyncio.create_task(consume())
        await asyncio.wait_for(fake.watch_started.wait(), 5)
        fake.publish(pb.StatusEvent(id=ids[0], key="k0", status=pb.TASK_STATUS_RUNNING, attempt=1))
        fake.finish(ids[1])
        fake.finish(ids[2])
        fake.finish(ids[0])
        await asyncio.wait_for(consumer, 5)
        assert [(e.id, e.status, e.attempt) for e in seen] == [
            (ids[0], "running", 1),
            (ids[2], "succeeded", 0),
            (ids[0], "succeeded", 0),
        ]
        req, _ = fake.last("Watch")
        assert list(req.ids) == [ids[0]] and list(req.keys) == ["k2"] and req.all_transitions


async def test_watch_data_loss_is_an_error(fake: Any) -> None:
    async with Client(fake.target) as client:
        async with client.watch() as events:
            for _, q in fake.watchers:
                q.put_nowait((grpc.StatusCode.DATA_LOSS, "consumer too far behind"))
            with pytest.raises(ClientError) as exc:
                await events.__anext__()
        assert exc.value.code == "data_loss"


async def test_watch_ends_when_server_ends_stream(fake: Any) -> None:
    async with Client(fake.target) as client, client.watch() as events:
        for _, q in fake.watchers:
            q.put_nowait(None)
        assert [e async for e in events] == []


async def test_admin_calls(fake: Any) -> None:
    fake.snapshot = pb.SnapshotResponse(
        pools=[pb.PoolSnapshot(name="default", capacity=2, desired=3, pending_by_class=[0, 1, 2, 0])],
        live_tasks=3,
        pending=3,
        totals=pb.Totals(submitted=3),
        workers_connected=1,
    )
    fake.workers = [pb.WorkerInfo(id=5, name="w1", pool="default", labels={"gpu": "1"}, slots=4, busy=1)]
    async with Client(fake.target, token="admin-token-0123456789") as client:
        snap = await client.snapshot()
        pool = snap.pool("default")
        assert pool is not None and pool.desired == 3 and pool.pending_by_class == [0, 1, 2, 0]
        assert snap.totals["submitted"] == 3 and snap.workers_connected == 1
        # totals read as a dict and, as in the published client, as attributes
        assert snap.totals.submitted == 3 and snap.totals.succeeded == 0 and isinstance(snap.totals, dict)
        with pytest.raises(AttributeError, match="no counter 'nope'"):
            _ = snap.totals.nope

        await client.add_recurring(
            "nightly", "0 3 * * *", {"job": "x"}, tz="Europe/Paris", overlap="queue", pool="p", tolerance=2
        )
        req, md = fake.last("AddRecurring")
        assert md["authorization"] == "Bearer admin-token-0123456789"
        assert req.name == "nightly" and req.cron == "0 3 * * *" and req.tz == "Europe/Paris"
        assert req.overlap == pb.OVERLAP_QUEUE
        assert req.template.payload == b'{"job":"x"}' and req.template.pool == "p"
        assert req.template.tolerance_s == 2.0
        await client.add_recurring("hourly", "@hourly")
        req, _ = fake.last("AddRecurring")
        assert req.tz == "" and req.overlap == pb.OVERLAP_SKIP and req.template == pb.TaskSpec()

        recs = await client.list_recurring()
        assert [(r.name, r.tz, r.overlap, r.pool) for r in recs] == [
            ("nightly", "Europe/Paris", "queue", "p"),
            ("hourly", None, "skip", "default"),
        ]
        assert recs[0].next_at == 1_800_000_000.0
        assert await client.remove_recurring("nightly") is True
        assert await client.remove_recurring("nightly") is False

        with pytest.raises(ClientError) as exc:
            await client.add_recurring("x", "bad")
        assert exc.value.code == "invalid_argument"
        with pytest.raises(ValueError, match="overlap must be"):
            await client.add_recurring("x", "@daily", overlap="never")

        workers = await client.list_workers()
        assert len(workers) == 1 and workers[0].labels == {"gpu": "1"} and workers[0].slots == 4


async def test_failover_to_the_next_address(fake: Any, fake2: Any) -> None:
    fake.standby = True
    async with Client([fake.target, fake2.target]) as client:
        sub = await client.submit("x")
        assert sub.id == 1 and 1 in fake2.tasks and not fake.tasks
        assert client.target == fake2.target
        # the answering server stays first: the standby is not asked again
        before = len(fake.requests)
        await client.get(sub.id)
        assert len(fake.requests) == before
        # leadership moves back
        fake.standby, fake2.standby = False, True
        sub2 = await client.submit("y")
        assert sub2.id == 1 and 1 in fake.tasks and client.target == fake.target


async def test_failover_on_resource_exhausted_and_unreachable(fake: Any) -> None:
    async with Client([_closed_port(), fake.target]) as client:
        assert (await client.submit("x")).id == 1
    other = await type(fake)().start()
    try:
        other.fail("Submit", grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded")
        async with Client([other.target, fake.target]) as client:
            assert (await client.submit("y")).id == 2
    finally:
        await other.stop()


async def test_no_failover_for_non_retryable_errors(fake: Any, fake2: Any) -> None:
    fake.fail("Submit", grpc.StatusCode.INVALID_ARGUMENT, "invalid")
    async with Client([fake.target, fake2.target]) as client:
        with pytest.raises(ClientError) as exc:
            await client.submit("x")
        assert exc.value.code == "invalid_argument"
    assert not fake2.requests


async def test_all_addresses_unavailable(fake: Any, fake2: Any) -> None:
    fake.standby = fake2.standby = True
    async with Client([fake.target, fake2.target], failover_wait=0) as client:
        with pytest.raises(ClientError) as exc:
            await client.snapshot()
        assert exc.value.code == "unavailable" and exc.value.retryable
        assert len(fake.requests) == 1 and len(fake2.requests) == 1


async def test_a_failover_in_progress_is_ridden_through(fake: Any, fake2: Any) -> None:
    """Every address answers UNAVAILABLE for a while (the old leader gone, the standby not yet
    leading): the call tries again in rounds with backoff instead of failing at once."""
    for _ in range(3):
        fake.fail("Snapshot", grpc.StatusCode.UNAVAILABLE, "this server is a standby (not the leader)")
        fake2.fail("Snapshot", grpc.StatusCode.UNAVAILABLE, "this server is a standby (not the leader)")
    async with Client([fake.target, fake2.target]) as client:
        await client.snapshot()
    assert [m for m, _, _ in fake.requests] == ["Snapshot"] * 4  # the 4th round is answered
    assert [m for m, _, _ in fake2.requests] == ["Snapshot"] * 3


async def test_riding_through_is_bounded(fake: Any, fake2: Any) -> None:
    fake.standby = fake2.standby = True
    async with Client([fake.target, fake2.target], failover_wait=0.3) as client:
        t0 = time.monotonic()
        with pytest.raises(ClientError) as exc:
            await client.snapshot()
        took = time.monotonic() - t0
        assert exc.value.code == "unavailable" and 0.3 <= took < 5
        assert len(fake.requests) > 1 and len(fake2.requests) > 1
        n = len(fake.requests)
        t0 = time.monotonic()
        with pytest.raises(ClientError):  # the call's own timeout bounds it too
            await client.get(1, call_timeout=0.2)
        assert time.monotonic() - t0 < 0.3 + 5 and len(fake.requests) > n
    with pytest.raises(ValueError, match="failover_wait"):
        Client([fake.target], failover_wait=-1)


async def test_no_riding_through_for_overload_or_one_address(fake: Any, fake2: Any) -> None:
    fake.fail("Snapshot", grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded")
    fake2.fail("Snapshot", grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded")
    async with Client([fake.target, fake2.target]) as client:
        with pytest.raises(ClientError) as exc:
            await client.snapshot()
        assert exc.value.code == "resource_exhausted"
    assert len(fake.requests) == 1 and len(fake2.requests) == 1
    fake.standby = True
    async with Client(fake.target) as client:  # one address: its answer at once
        with pytest.raises(ClientError):
            await client.snapshot()
    assert len(fake.requests) == 2


async def test_watch_fails_over_at_start(fake: Any, fake2: Any) -> None:
    fake.standby = True
    async with Client([fake.target, fake2.target]) as client:
        sub = await client.submit("x")
        async with client.watch() as events:
            assert fake2.watch_started.is_set()
            fake2.finish(sub.id)
            ev = await asyncio.wait_for(events.__anext__(), 5)
        assert ev.id == sub.id


async def test_closed_client_and_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one server address"):
        Client([])
    with pytest.raises(ValueError, match="token must be a non-empty string"):
        Client("127.0.0.1:1", token="")
    client = Client("127.0.0.1:1")
    await client.close()
    with pytest.raises(ClientError) as exc:
        await client.get(1)
    assert exc.value.code == "cancelled"


async def test_unreachable_server_is_unavailable() -> None:
    async with Client(_closed_port()) as client:
        with pytest.raises(ClientError) as exc:
            await client.get(1, call_timeout=5)
        assert exc.value.code == "unavailable" and exc.value.retryable


async def test_a_server_back_on_its_address_is_reached_at_once(fake: Any) -> None:
    """A channel that could not connect is replaced: gRPC's own reconnect backoff (1 s and
    growing) used to fail every call at once for seconds after the server was back (a failover
    to a restarted standby, a Service address whose pod came back)."""
    target = _closed_port()
    async with Client(target) as client:
        for _ in range(3):
            with pytest.raises(ClientError) as exc:
                await client.get(1, call_timeout=5)
            assert exc.value.code == "unavailable"
        server = await type(fake)().start(port=int(target.rsplit(":", 1)[1]))  # (a FakeServer)
        try:
            with pytest.raises(ClientError) as exc:
                await client.get(1, call_timeout=5)
            assert exc.value.code == "not_found", exc.value  # (the server's answer: reached)
        finally:
            await server.stop()


async def test_a_watch_reaches_a_server_back_on_its_address_at_once(fake: Any) -> None:
    """A watch that could not connect replaces its channel as a unary call does: a client that
    re-opens its watch after an outage (only watches, no other call) used to fail every time
    until gRPC's reconnect backoff of that channel ran out, for seconds after the server was
    back."""
    target = _closed_port()
    async with Client(target) as client:
        for _ in range(3):
            with pytest.raises(ClientError) as exc:
                await client.watch().start()
            assert exc.value.code == "unavailable"
        server = await type(fake)().start(port=int(target.rsplit(":", 1)[1]))  # (a FakeServer)
        try:
            async with client.watch() as events:
                assert not events.closed  # (live: the server confirmed the subscription)
        finally:
            await server.stop()


async def test_list_tasks_filters_on_the_wire(fake: Any) -> None:
    """kinds, tags and the creation range reach ListTasksRequest (datetime or Unix seconds)."""
    async with Client(fake.target) as client:
        after = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
        await client.list_tasks(kinds="mail", tags={"team": "a"}, created_after=after, created_before=1.5)
        req, _ = fake.last("ListTasks")
        assert list(req.kinds) == ["mail"] and dict(req.tags) == {"team": "a"}
        assert req.created_after_unix_ns == int(after.timestamp()) * 10**9
        assert req.created_before_unix_ns == 1_500_000_000
        await client.list_tasks()
        req, _ = fake.last("ListTasks")
        assert not req.HasField("created_after_unix_ns") and not req.kinds and not req.tags
        with pytest.raises(ValueError, match="created_before must be an aware datetime or Unix seconds"):
            await client.list_tasks(created_before="yesterday")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="kinds must contain strings"):
            await client.list_tasks(kinds=[1])  # type: ignore[list-item]


async def test_no_server_at_any_address_fails_at_once() -> None:
    """Nothing listens at either address: no failover is in progress, so the call fails at
    once instead of riding through for ``failover_wait`` seconds."""
    import socket

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    async with Client([f"127.0.0.1:{p}" for p in ports], failover_wait=30) as client:
        t0 = time.monotonic()
        with pytest.raises(ClientError) as exc:
            await client.snapshot()
        assert exc.value.code == "unavailable"
        assert time.monotonic() - t0 < 10  # well under failover_wait
