"""Remote workers against a real ``cronoq serve`` (docs/reference/grpc.md#worker-protocol,
docs/reference/behaviour.md#server-details): a worker killed mid-attempt, lease expiry, Nack re-offer,
SetSlots(0) drain, tasks too large for one Lease."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

from cronoq.client import Client, Reject, RetryPolicy, Worker
from cronoq.proto.protocol import MESSAGE_OVERHEAD

from .procs import Raw, RawWorker, ServerProc, pb

WORKER_MAIN = Path(__file__).with_name("worker_main.py")


async def read_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 20.0) -> str:
    assert proc.stdout is not None
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout
    while True:
        line = await asyncio.wait_for(
            loop.run_in_executor(None, proc.stdout.readline), deadline - time.monotonic()
        )
        if not line:
            raise AssertionError(f"worker process ended before printing {prefix!r}")
        if line.startswith(prefix):
            return line.strip()


def spawn_worker(target: str, pool: str, mode: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, str(WORKER_MAIN), target, pool, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


async def test_worker_killed_mid_attempt_is_retried_elsewhere(api_server: ServerProc, client: Client) -> None:
    proc = spawn_worker(api_server.grpc, "work", "hang")
    try:
        await read_line(proc, "REGISTERED")
        sub = await client.submit(
            b"payload", pool="work", retry=RetryPolicy(max_attempts=3, initial_backoff=0.1)
        )
        line = await read_line(proc, "STARTED")
        assert line == f"STARTED {sub.id} 1"
        assert (await client.get(sub.id)).status == "running"
        proc.kill()  # SIGKILL: no goodbye, the stream just breaks
        proc.wait()
        seen: list[int] = []

        async def handle(lease):  # type: ignore[no-untyped-def]
            seen.append(lease.attempt)
            return b"second worker"

        async with Worker(api_server.grpc, "work", handle):
            res = await client.wait(sub.id, timeout=30)
        assert res.status == "succeeded" and res.output == b"second worker"
        assert seen == [2]
        assert (await client.get(sub.id)).attempt == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_lease_expiry_without_heartbeats(api_server: ServerProc, client: Client, raw: Raw) -> None:
    w = RawWorker(raw, "leased")
    reg = await w.read()
    assert reg.registered.lease_ttl_s == pytest.approx(1.0)
    sub = await client.submit(b"x", pool="leased")
    msg = await w.read()
    assert msg.WhichOneof("msg") == "lease" and msg.lease.task_id == sub.id and msg.lease.attempt == 1
    assert msg.lease.lease_ttl_s == pytest.approx(1.0)
    # never heartbeat: after lease_ttl_s the server aborts the lease ...
    t0 = time.monotonic()
    abort = await w.read()
    assert abort.WhichOneof("msg") == "abort" and abort.abort.lease == msg.lease.lease
    assert time.monotonic() - t0 < 5
    # ... a late report for it is ignored (stale) ...
    w.send(complete=pb.Complete(lease=msg.lease.lease, output=b"late"))
    # ... and the task is retried (here: on the same, still connected worker) as attempt 2
    again = await w.read()
    assert again.WhichOneof("msg") == "lease" and again.lease.task_id == sub.id and again.lease.attempt == 2
    w.send(heartbeat=pb.Heartbeat(lease=again.lease.lease))
    w.send(complete=pb.Complete(lease=again.lease.lease, output=b"ok"))
    res = await client.wait(sub.id, timeout=10)
    assert res.status == "succeeded" and res.output == b"ok"
    snap = await client.snapshot()
    assert snap.totals["lease_expiries"] >= 1 and snap.totals["stale_completions"] >= 1
    await w.close()


async def test_nack_reoffers_to_another_worker_same_attempt(api_server: ServerProc, client: Client) -> None:
    rejected: list[int] = []
    accepted: list[int] = []

    async def picky(lease):  # type: ignore[no-untyped-def]
        rejected.append(lease.attempt)
        raise Reject("not for me")

    async def happy(lease):  # type: ignore[no-untyped-def]
        accepted.append(lease.attempt)
        return b"done"

    # the picky worker has more free slots, so it is offered the lease first
    async with (
        Worker(api_server.grpc, "nack", picky, slots=4) as w1,
        Worker(api_server.grpc, "nack", happy, slots=1) as w2,
    ):
        await w1.wait_registered(10)
        await w2.wait_registered(10)
        sub = await client.submit(pool="nack")
        res = await client.wait(sub.id, timeout=20)
    assert res.status == "succeeded" and res.output == b"done"
    assert rejected == [1] and accepted == [1]
    assert (await client.get(sub.id)).attempt == 1


async def test_nack_reoffers_to_a_worker_of_another_group(api_server: ServerProc, client: Client) -> None:
    """docs/reference/grpc.md#worker-protocol: a lease handed back goes to "another free worker" - also one
    registered with other labels, when the task requires none of them; same attempt number."""
    accepted: list[tuple[int, str]] = []

    async def picky(lease):  # type: ignore[no-untyped-def]
        raise Reject("not mine")

    async def happy(lease):  # type: ignore[no-untyped-def]
        accepted.append((lease.attempt, lease.pool))
        return b"eu"

    # the task needs no labels: the engine places it on the unlabelled group (fewest labels)
    # first, whose only worker hands it back; the labelled worker has a free slot
    async with (
        Worker(api_server.grpc, "nack", picky, slots=1) as w1,
        Worker(api_server.grpc, "nack", happy, slots=1, labels={"zone": "eu"}) as w2,
    ):
        await w1.wait_registered(10)
        await w2.wait_registered(10)
        sub = await client.submit(pool="nack")
        res = await client.wait(sub.id, timeout=20)
        snap = await client.snapshot()
    assert res.status == "succeeded" and res.output == b"eu"
    assert accepted == [(1, "nack")] and (await client.get(sub.id)).attempt == 1
    pool = snap.pool("nack")
    assert pool is not None and all(g.busy == 0 for g in pool.groups), "slots given back"


async def test_nack_without_another_worker_fails_the_attempt(api_server: ServerProc, client: Client) -> None:
    async def picky(lease):  # type: ignore[no-untyped-def]
        raise Reject("busy elsewhere")

    async with Worker(api_server.grpc, "nack", picky, slots=1) as w:
        await w.wait_registered(10)
        async with client.watch(pools=["nack"], all_transitions=True) as events:
            sub = await client.submit(pool="nack")
            messages = []
            while True:
                ev = await asyncio.wait_for(events.__anext__(), 20)
                if ev.id == sub.id:
                    messages.append((ev.status, ev.message))
                    if ev.status in ("dead_lettered", "failed"):
                        break
    assert ("retrying", "no worker accepted the lease: busy elsewhere") in messages
    info = await client.get(sub.id)
    assert info.status == "dead_lettered" and info.attempt == 2
    assert info.message == "no worker accepted the lease: busy elsewhere"


async def test_set_slots_zero_drains(api_server: ServerProc, client: Client) -> None:
    ran: list[int] = []

    async def handle(lease):  # type: ignore[no-untyped-def]
        ran.append(lease.task_id)
        return b""

    async with Worker(api_server.grpc, "drain", handle, slots=2) as w:
        wid = await w.wait_registered(10)
        w.set_slots(0)
        await _until(lambda: _slots(client, wid, 0))
        snap = await client.snapshot()
        assert {p.name: p for p in snap.pools}["drain"].capacity == 0
        sub = await client.submit(pool="drain")
        await asyncio.sleep(0.5)
        assert (await client.get(sub.id)).status == "ready" and ran == []
        w.set_slots(2)
        res = await client.wait(sub.id, timeout=10)
        assert res.status == "succeeded" and ran == [sub.id]
        assert {p.name: p for p in (await client.snapshot()).pools}["drain"].capacity == 2


async def _slots(client: Client, wid: int, n: int) -> bool:
    return any(w.id == wid and w.slots == n for w in await client.list_workers())


async def _until(pred, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not await pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_task_must_fit_one_lease_for_default_grpc_peers(api_server: ServerProc, raw: Raw) -> None:
    """A Lease never exceeds ``max_message_bytes`` (4 MiB, also gRPC's default receive limit, which
    the published worker keeps): a task whose payload, content type, kind, key and tags do not fit
    with ``MESSAGE_OVERHEAD`` to spare is refused at submission (INVALID_ARGUMENT / 400
    ``invalid``) instead of breaking the worker's stream on every attempt."""
    limit = 4 * 1024 * 1024
    room = limit - MESSAGE_OVERHEAD
    for spec in (
        pb.TaskSpec(payload=b"x" * (room + 1)),
        pb.TaskSpec(payload=b"x" * limit),
        pb.TaskSpec(payload=b"x" * (room - 10), content_type="application/x-eleven"),
        pb.TaskSpec(payload=b"x" * (room - 10), tags={"k": "0123456789"}),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.Submit(pb.SubmitRequest(task=spec))
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "max_message_bytes" in (ei.value.details() or "")
    body = json.dumps({"pool": "idle", "payload": "x" * (room - 1)}).encode()
    req = urllib.request.Request(f"http://{api_server.http}/v1/tasks", data=body, method="POST")
    req.add_header("content-type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as he:
        await asyncio.to_thread(urllib.request.urlopen, req, None, 10)
    assert he.value.code == 400 and json.loads(he.value.read())["code"] == "invalid"

    # the largest task that fits reaches a worker whose channel has gRPC's default limits
    w = RawWorker(raw)
    reg = await w.read()
    assert reg.registered.max_message_bytes == limit
    payload = b"y" * (room - 3)
    sub = await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(payload=payload, key="big")))
    msg = await w.read()
    assert msg.WhichOneof("msg") == "lease" and msg.lease.task_id == sub.id
    assert msg.lease.payload == payload and msg.ByteSize() <= limit
    w.send(complete=pb.Complete(lease=msg.lease.lease, output=b"ok"))
    res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=sub.id), timeout_s=10))
    assert res.status == pb.TASK_STATUS_SUCCEEDED and res.output == b"ok"
    await w.close()
