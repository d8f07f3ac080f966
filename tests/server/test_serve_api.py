"""Tasks and Admin services of a real ``cronoq serve`` process (docs/reference/grpc.md#services,
docs/reference/behaviour.md#server-details)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import grpc
import pytest

from cronoq.client import Client, ClientError, Worker, task

from .procs import Raw, ServerProc, code_of, pb, pb_grpc


async def echo(lease):  # type: ignore[no-untyped-def]
    return lease.payload


async def wait_for(pred, timeout: float = 10.0, interval: float = 0.05) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        r = pred()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


async def status_of(coro: object) -> tuple[grpc.StatusCode, str]:
    try:
        await coro  # type: ignore[misc]
    except grpc.aio.AioRpcError as e:
        return e.code(), e.details() or ""
    return grpc.StatusCode.OK, ""


# ---------------------------------------------------------------------------------------------
# submit / wait / get / batch / cancel / list / watch


async def test_submit_wait_roundtrip(api_server: ServerProc, client: Client) -> None:
    async with Worker(api_server.grpc, "work", echo, slots=2):
        sub = await client.submit({"n": 1}, pool="work", kind="echo", key="rt-1")
        assert sub.id > 0 and not sub.duplicate and sub.result is None
        res = await client.wait(sub.id, timeout=20)
        assert res.status == "succeeded"
        assert res.output_available and res.json() == {"n": 1}
        info = await client.get("rt-1")
        assert info.id == sub.id and info.status == "succeeded" and info.kind == "echo"
        assert info.attempt == 1 and info.max_attempts == 3 and info.pool == "work"
        assert info.started_at is not None and info.finished_at is not None and info.message == ""
        dup = await client.submit({"n": 2}, pool="work", key="rt-1")
        assert dup.duplicate and dup.id == sub.id


async def test_submit_with_wait(api_server: ServerProc, client: Client) -> None:
    async with Worker(api_server.grpc, "work", echo):
        sub = await client.submit("hello", pool="work", wait=True, wait_timeout=20)
        assert sub.result is not None and sub.result.status == "succeeded"
        assert sub.result.output == b"hello"


async def test_none_output_and_default_kind(api_server: ServerProc, client: Client) -> None:
    async def nothing(lease):  # type: ignore[no-untyped-def]
        return None

    async with Worker(api_server.grpc, "work", nothing):
        sub = await client.submit(pool="work", wait=True, wait_timeout=20)
        assert sub.result is not None and sub.result.status == "succeeded"
        assert sub.result.output_available and sub.result.output == b""
        info = await client.get(sub.id)
        assert info.kind == "default"


async def test_failure_message_stored_as_sent(api_server: ServerProc, client: Client) -> None:
    from cronoq.client import Permanent

    async def boom(lease):  # type: ignore[no-untyped-def]
        raise Permanent("exactly this")

    async with Worker(api_server.grpc, "work", boom):
        sub = await client.submit(pool="work")
        res = await client.wait(sub.id, timeout=20)
        assert res.status == "failed" and res.message == "exactly this"
        assert not res.output_available
        info = await client.get(sub.id)
        assert info.message == "exactly this" and not info.output_available


async def test_get_before_dispatch(client: Client) -> None:
    sub = await client.submit(b"x", pool="idle", priority="high", tenant="acme")
    info = await client.get(sub.id)
    assert info.status == "ready" and info.attempt == 0
    assert info.started_at is None and info.finished_at is None and info.created_at is not None
    assert info.priority == "high" and info.tenant == "acme"
    assert await client.cancel(sub.id) is True


async def test_get_with_payload_live_and_after_the_end(api_server: ServerProc, client: Client) -> None:
    """``get(ref, payload=True)``: the engine's payload while live, the store's once ended."""
    sub = await client.submit({"args": [1], "kwargs": {"a": "b"}}, pool="idle", key="pl-1")
    live = await client.get(sub.id, payload=True)
    assert live.payload_available and live.payload == {"args": [1], "kwargs": {"a": "b"}}
    plain = await client.get(sub.id)
    assert not plain.payload_available and plain.payload is None  # only when asked for
    assert await client.cancel(sub.id) is True
    ended = await client.get("pl-1", payload=True)  # the engine dropped it: the SQLite row's
    assert ended.status == "cancelled" and ended.payload == {"args": [1], "kwargs": {"a": "b"}}
    async with Worker(api_server.grpc, "work", echo):
        raw = await client.submit(b"\x00raw", pool="work", wait=True, wait_timeout=20)
    got = await client.get(raw.id, payload=True)
    assert got.status == "succeeded" and got.payload == b"\x00raw"
    with pytest.raises(TypeError):
        await client.get(sub.id, payload=1)  # type: ignore[arg-type]


async def test_batch_atomic_and_in_order(client: Client) -> None:
    subs = await client.submit_batch(
        [
            task(1, pool="idle", key="b-parent"),
            task(2, pool="idle", key="b-child", after=["b-parent"]),
            {"payload": 3, "pool": "idle"},
        ]
    )
    assert len(subs) == 3 and subs[0].id < subs[1].id < subs[2].id
    assert (await client.get("b-child")).status == "blocked"
    # all or nothing: the second member names an unknown pool → nothing is created
    page_before = await client.list_tasks(pools=["idle"], limit=1000)
    with pytest.raises(ClientError) as ei:
        await client.submit_batch([task(1, pool="idle", key="b-x"), task(2, pool="nope")])
    assert ei.value.code == "not_found"
    page_after = await client.list_tasks(pools=["idle"], limit=1000)
    assert len(page_after.tasks) == len(page_before.tasks)
    with pytest.raises(ClientError):
        await client.get("b-x")
    for s in subs:
        await client.cancel(s.id)


async def test_cancel(client: Client) -> None:
    sub = await client.submit(pool="idle")
    assert await client.cancel(sub.id) is True
    assert (await client.get(sub.id)).status == "cancelled"
    assert await client.cancel(sub.id) is False  # finished → cancelled=false
    with pytest.raises(ClientError) as ei:
        await client.cancel(987654321)
    assert ei.value.code == "not_found"
    res = await client.wait(sub.id, timeout=5)
    assert res.status == "cancelled" and not res.output_available


async def test_list_tasks_paging(client: Client) -> None:
    subs = await client.submit_batch([task(i, pool="idle", kind="page") for i in range(7)])
    ids = [s.id for s in subs]
    page = await client.list_tasks(pools=["idle"], statuses=["ready"], after=ids[0] - 1, limit=3)
    assert [t.id for t in page.tasks] == ids[:3] and page.next_after == ids[2]
    seen = []
    async for info in client.iter_tasks(pools="idle", statuses="ready", after=ids[0] - 1, limit=3):
        seen.append(info.id)
    assert seen[:7] == ids
    # the last page: next_after 0
    page = await client.list_tasks(pools=["idle"], after=ids[-1], limit=3)
    assert all(t.id > ids[-1] for t in page.tasks)
    # statuses filter
    await client.cancel(ids[0])
    page = await client.list_tasks(pools=["idle"], statuses=["cancelled"], after=ids[0] - 1, limit=1000)
    assert ids[0] in [t.id for t in page.tasks]
    assert all(t.status == "cancelled" for t in page.tasks)
    # an unknown pool in the filter
    with pytest.raises(ClientError) as ei:
        await client.list_tasks(pools=["no-such-pool"])
    assert ei.value.code == "not_found"
    # limit 0 → 100; capped by max_list
    page = await client.list_tasks(limit=0)
    assert len(page.tasks) <= 100
    for i in ids:
        await client.cancel(i)


async def test_wait_deadline_exceeded(client: Client, raw: Raw) -> None:
    sub = await client.submit(pool="idle")
    with pytest.raises(TimeoutError):
        await client.wait(sub.id, timeout=0.3)
    req = pb.WaitRequest(task=pb.TaskRef(id=sub.id), timeout_s=0.2)
    assert await code_of(raw.tasks.Wait(req)) == grpc.StatusCode.DEADLINE_EXCEEDED
    req2 = pb.SubmitRequest(task=pb.TaskSpec(pool="idle"), wait=True, wait_timeout_s=0.2)
    assert await code_of(raw.tasks.Submit(req2)) == grpc.StatusCode.DEADLINE_EXCEEDED
    await client.cancel(sub.id)


async def test_negative_or_non_finite_durations_are_invalid_argument_and_create_nothing(
    client: Client, raw: Raw
) -> None:
    """Wait.timeout_s, Submit.wait_timeout_s and every TaskSpec/RetryPolicy duration: negative,
    NaN or infinite → INVALID_ARGUMENT before anything is created (as HTTP's 400)."""
    inv = grpc.StatusCode.INVALID_ARGUMENT
    bad_values = (-1.0, -1e-9, math.nan, math.inf, -math.inf)
    sub = await client.submit(pool="idle", key=f"neg-wait-{time.time_ns()}")
    for v in bad_values:
        code, msg = await status_of(raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=sub.id), timeout_s=v)))
        assert code == inv and "timeout_s" in msg, (v, code, msg)
    # a zero timeout is fine: the wait ends at once
    req = pb.WaitRequest(task=pb.TaskRef(id=sub.id), timeout_s=0.0)
    assert await code_of(raw.tasks.Wait(req)) == grpc.StatusCode.DEADLINE_EXCEEDED
    await client.cancel(sub.id)

    def created(key: str) -> Any:
        return code_of(raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(key=key))))

    n = 0
    for v in bad_values:
        for wait in (True, False):
            n += 1
            key = f"neg-submit-{time.time_ns()}-{n}"
            req2 = pb.SubmitRequest(task=pb.TaskSpec(pool="idle", key=key), wait=wait, wait_timeout_s=v)
            code, msg = await status_of(raw.tasks.Submit(req2))
            assert code == inv and "wait_timeout_s" in msg, (v, wait, code, msg)
            assert await created(key) == grpc.StatusCode.NOT_FOUND, (v, wait)
        for field in ("deadline_in_s", "start_in_s", "tolerance_s", "duration_hint_s", "timeout_s"):
            n += 1
            key = f"neg-spec-{time.time_ns()}-{n}"
            spec = pb.TaskSpec(pool="idle", key=key)
            setattr(spec, field, v)
            code, msg = await status_of(raw.tasks.Submit(pb.SubmitRequest(task=spec)))
            assert code == inv and field in msg, (field, v, code, msg)
            assert await created(key) == grpc.StatusCode.NOT_FOUND, (field, v)
            batch = pb.SubmitBatchRequest(tasks=[pb.TaskSpec(pool="idle", key=key + "-ok"), spec])
            assert await code_of(raw.tasks.SubmitBatch(batch)) == inv, (field, v)
            assert await created(key + "-ok") == grpc.StatusCode.NOT_FOUND, (field, v)
            req3 = pb.RecurringRequest(name=key, cron="* * * * *", template=pb.TaskSpec(pool="idle"))
            setattr(req3.template, field, v)
            assert await code_of(raw.admin.AddRecurring(req3)) == inv, (field, v)
        for field in ("initial_backoff_s", "multiplier", "max_backoff_s"):
            n += 1
            key = f"neg-retry-{time.time_ns()}-{n}"
            spec = pb.TaskSpec(pool="idle", key=key)
            setattr(spec.retry, field, v)
            assert await code_of(raw.tasks.Submit(pb.SubmitRequest(task=spec))) == inv, (field, v)
            assert await created(key) == grpc.StatusCode.NOT_FOUND, (field, v)
    names = {r.name for r in await client.list_recurring()}
    assert not any(name.startswith("neg-") for name in names)


async def test_watch_filters_and_initial_metadata(api_server: ServerProc, client: Client) -> None:
    async with (
        client.watch(pools=["work"], keys=["w-1"]) as events,
        client.watch(pools=["work"], all_transitions=True) as all_events,
    ):
        async with Worker(api_server.grpc, "work", echo):
            s1 = await client.submit(1, pool="work", key="w-1")
            s2 = await client.submit(2, pool="work")
            await client.wait(s1.id, timeout=20)
            await client.wait(s2.id, timeout=20)
        ev = await asyncio.wait_for(events.__anext__(), 10)
        assert ev.id == s1.id and ev.key == "w-1" and ev.status == "succeeded" and ev.pool == "work"
        assert ev.attempt == 1 and ev.at > 0
        statuses: dict[int, list[str]] = {}
        while len(statuses.get(s2.id, [])) < 1 or statuses[s2.id][-1] != "succeeded":
            e = await asyncio.wait_for(all_events.__anext__(), 10)
            statuses.setdefault(e.id, []).append(e.status)
        assert "running" in statuses[s2.id]
        # nothing for s2 on the filtered watch
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(events.__anext__(), 0.3)


async def test_watch_ids_filter(client: Client) -> None:
    a = await client.submit(pool="idle")
    b = await client.submit(pool="idle")
    async with client.watch(ids=[b.id]) as events:
        await client.cancel(a.id)
        await client.cancel(b.id)
        ev = await asyncio.wait_for(events.__anext__(), 10)
        assert ev.id == b.id and ev.status == "cancelled"


async def test_watch_data_loss_when_consumer_lags(api_server: ServerProc, raw: Raw, client: Client) -> None:
    # A watcher that never reads while far more events than the server buffers (16384) happen;
    # tiny HTTP/2 windows on its channel, so the transport cannot absorb them either.
    opts = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
    channel = grpc.aio.insecure_channel(api_server.grpc, options=opts)
    call = pb_grpc.TasksStub(channel).Watch(pb.WatchRequest(all_transitions=True))
    await call.initial_metadata()
    payload = b"x" * 64
    ids: list[int] = []
    for _ in range(7):  # 7 x 1000 tasks x 3 events (blocked, ready, cancelled) > 16384
        subs = await client.submit_batch([task(payload, pool="idle") for _ in range(1000)])
        ids.extend(s.id for s in subs)
        await asyncio.gather(*(client.cancel(i) for i in ids[-1000:]))
    code = None

    async def drain() -> None:
        nonlocal code
        try:
            async for _ in call:
                pass
        except grpc.aio.AioRpcError as e:
            code = e.code()

    try:
        await asyncio.wait_for(drain(), 20)
    finally:
        await channel.close()
    assert code == grpc.StatusCode.DATA_LOSS


# ---------------------------------------------------------------------------------------------
# status codes of docs/reference/grpc.md#services


async def test_not_found_codes(client: Client, raw: Raw) -> None:
    assert (
        await code_of(raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=424242424))))
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        await code_of(raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(key="no-such"))))
        == grpc.StatusCode.NOT_FOUND
    )
    req = pb.SubmitRequest(task=pb.TaskSpec(pool="no-such-pool"))
    assert await code_of(raw.tasks.Submit(req)) == grpc.StatusCode.NOT_FOUND
    dep = pb.Dep(target=pb.TaskRef(key="never-submitted"))
    req = pb.SubmitRequest(task=pb.TaskSpec(pool="idle", deps=[dep]))
    assert await code_of(raw.tasks.Submit(req)) == grpc.StatusCode.NOT_FOUND
    dep = pb.Dep(target=pb.TaskRef(id=999999999))
    req = pb.SubmitRequest(task=pb.TaskSpec(pool="idle", deps=[dep]))
    assert await code_of(raw.tasks.Submit(req)) == grpc.StatusCode.NOT_FOUND
    assert (
        await code_of(raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=424242424))))
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        await code_of(raw.tasks.Cancel(pb.CancelRequest(task=pb.TaskRef(id=424242424))))
        == grpc.StatusCode.NOT_FOUND
    )
    # a pool with await_unknown_dependencies_s waits instead
    req = pb.SubmitRequest(task=pb.TaskSpec(pool="await", deps=[pb.Dep(target=pb.TaskRef(key="later"))]))
    resp = await raw.tasks.Submit(req)
    assert (await client.get(resp.id)).status == "blocked"
    await client.cancel(resp.id)


async def test_resource_exhausted_full_and_overloaded(client: Client, raw: Raw) -> None:
    a = await client.submit(pool="small")
    b = await client.submit(pool="small")
    with pytest.raises(ClientError) as ei:
        await client.submit(pool="small")
    assert ei.value.code == "resource_exhausted" and ei.value.retryable
    assert "full" in ei.value.message
    c = await client.submit(pool="reject")
    code, msg = await status_of(raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="reject"))))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "overloaded" in msg
    # a batch larger than max_pending is overloaded
    batch = pb.SubmitBatchRequest(tasks=[pb.TaskSpec(pool="small")] * 3)
    assert await code_of(raw.tasks.SubmitBatch(batch)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    for s in (a, b, c):
        await client.cancel(s.id)


async def test_failed_precondition_reservation_conflict(client: Client) -> None:
    first = await client.submit(pool="resv", start_in=3600, tolerance=1)
    with pytest.raises(ClientError) as ei:
        await client.submit(pool="resv", start_in=3600, tolerance=1)
    assert ei.value.code == "failed_precondition" and "reservation conflict" in ei.value.message
    await client.cancel(first.id)


async def test_invalid_argument_codes(client: Client, raw: Raw) -> None:
    inv = grpc.StatusCode.INVALID_ARGUMENT
    # invalid
    spec = pb.TaskSpec(pool="idle", start_in_s=1.0, start_unix_ns=time.time_ns())
    assert await code_of(raw.tasks.Submit(pb.SubmitRequest(task=spec))) == inv
    spec = pb.TaskSpec(pool="idle", timeout_s=-1.0)
    assert await code_of(raw.tasks.Submit(pb.SubmitRequest(task=spec))) == inv
    spec = pb.TaskSpec(pool="idle", key="k" * 1000)
    assert await code_of(raw.tasks.Submit(pb.SubmitRequest(task=spec))) == inv
    assert await code_of(raw.tasks.Get(pb.GetRequest())) == inv
    # cycle
    cyc = pb.SubmitBatchRequest(
        tasks=[
            pb.TaskSpec(pool="idle", key="cy-a", deps=[pb.Dep(target=pb.TaskRef(key="cy-b"))]),
            pb.TaskSpec(pool="idle", key="cy-b", deps=[pb.Dep(target=pb.TaskRef(key="cy-a"))]),
        ]
    )
    assert await status_of(raw.tasks.SubmitBatch(cyc)) == (inv, "dependency cycle in batch")
    # duplicate_key_in_batch
    dup = pb.SubmitBatchRequest(
        tasks=[pb.TaskSpec(pool="idle", key="dk"), pb.TaskSpec(pool="idle", key="dk")]
    )
    assert await status_of(raw.tasks.SubmitBatch(dup)) == (inv, "duplicate key 'dk' in batch")
    # unknown_resource / resource_exceeds_capacity
    with pytest.raises(ClientError) as ei:
        await client.submit(pool="idle", resources={"no-such-resource": 1})
    assert ei.value.code == "invalid_argument" and "unknown resource" in ei.value.message
    with pytest.raises(ClientError) as ei:
        await client.submit(pool="idle", resources={"sem": 5})
    assert ei.value.code == "invalid_argument" and "capacity is 2" in ei.value.message
    # a list with an unknown status value
    assert await code_of(raw.tasks.ListTasks(pb.ListTasksRequest(statuses=[99]))) == inv  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------
# Admin


async def test_snapshot_and_list_workers(api_server: ServerProc, client: Client) -> None:
    async with Worker(api_server.grpc, "work", echo, slots=3, name="w-snap", labels={"zone": "z1"}) as w:
        wid = await w.wait_registered(10)
        workers = await client.list_workers()
        mine = [x for x in workers if x.id == wid]
        assert len(mine) == 1
        info = mine[0]
        assert info.name == "w-snap" and info.pool == "work" and info.labels == {"zone": "z1"}
        assert info.slots == 3 and info.busy == 0 and abs(info.connected_at - time.time()) < 60
        snap = await client.snapshot()
        pools = {p.name: p for p in snap.pools}
        assert pools["work"].capacity == 3 and pools["work"].workers_connected == 1
        assert snap.workers_connected >= 1
    await wait_for(lambda: _no_worker(client, wid))
    snap = await client.snapshot()
    assert {p.name: p for p in snap.pools}["work"].capacity == 0


async def test_idle_pool_desires_its_min_before_any_worker(client: Client) -> None:
    """docs/reference/behaviour.md#autoscaling, docs/reference/behaviour.md#server-details: min bounds the
    desired capacity exported to scalers (KEDA reads it) - also for a pool nobody has submitted to and no
    worker serves yet."""

    async def floor() -> bool:
        p = {p.name: p for p in (await client.snapshot()).pools}["floor"]
        return p.desired == 2 and p.capacity == 0

    await wait_for(floor)


async def _no_worker(client: Client, wid: int) -> bool:
    return all(w.id != wid for w in await client.list_workers())


async def test_recurring_admin(client: Client, raw: Raw) -> None:
    await client.add_recurring("nightly", "0 3 * * *", {"x": 1}, tz="Europe/Paris", pool="idle", kind="rep")
    await client.add_recurring("utc", "*/5 * * * *", pool="idle")
    infos = {r.name: r for r in await client.list_recurring()}
    n = infos["nightly"]
    assert n.cron == "0 3 * * *" and n.tz == "Europe/Paris" and n.pool == "idle" and n.kind == "rep"
    assert n.overlap == "skip" and n.next_at is not None and n.next_at > time.time()
    assert n.last_task_id is not None and n.last_task_id > 0
    raw_list = await raw.admin.ListRecurring(pb.Empty())
    utc = next(s for s in raw_list.schedules if s.name == "utc")
    assert utc.tz == "" and utc.overlap == pb.OVERLAP_SKIP
    # bad cron / tz → INVALID_ARGUMENT; unknown pool → NOT_FOUND
    for kw in ({"cron": "not a cron"}, {"cron": "0 3 * * *", "tz": "Mars/Olympus"}):
        req = pb.RecurringRequest(
            name="bad", cron=kw["cron"], tz=kw.get("tz", ""), template=pb.TaskSpec(pool="idle")
        )
        assert await code_of(raw.admin.AddRecurring(req)) == grpc.StatusCode.INVALID_ARGUMENT
    req = pb.RecurringRequest(name="bad", cron="0 3 * * *", template=pb.TaskSpec(pool="nope"))
    assert await code_of(raw.admin.AddRecurring(req)) == grpc.StatusCode.NOT_FOUND
    assert await client.remove_recurring("nightly") is True
    assert await client.remove_recurring("nightly") is False
    assert await client.remove_recurring("utc") is True
    assert all(r.name not in ("nightly", "utc") for r in await client.list_recurring())


async def test_uint64_ids(client: Client, raw: Raw) -> None:
    sub = await client.submit(pool="idle")
    # ids carry the epoch in the high bits: (epoch << 48) | seq
    assert sub.id >= 1 << 48
    huge = pb.GetRequest(task=pb.TaskRef(id=2**64 - 1))
    assert await code_of(raw.tasks.Get(huge)) == grpc.StatusCode.NOT_FOUND
    await client.cancel(sub.id)
