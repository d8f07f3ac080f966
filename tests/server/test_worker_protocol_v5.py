"""Worker protocol version 5 against a real ``cronoq serve`` (docs/how-to/progress.md): a
version-5 worker's ``ProgressReport`` (alone or inside a ``WorkerBatch``) shows in ``Get``
(gRPC and HTTP), in a ``Watch`` that asks for progress and on ``/v1/events?progress=1``; streams
that do not ask never see it; a version-3 or -4 session may not send one; bad values are
dropped; the attempt timeline names the worker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from cronoq.proto.protocol import PROTOCOL_VERSION

from .procs import Raw, RawWorker, ServerProc, pb, start_server

TOML = """
[[pools]]
name = "p"
max = 8
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("v5"), TOML, name="v5")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


async def lease_one(raw: Raw, w: RawWorker) -> pb.Lease:
    await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="p")))
    while True:
        msg = await w.read()
        if msg.WhichOneof("msg") == "lease":
            return msg.lease


def progress(lease: int, done: float, total: float | None = None, message: str = "") -> pb.ProgressReport:
    p = pb.ProgressReport(lease=lease, done=done, message=message)
    if total is not None:
        p.total = total
    return p


async def get_until(raw: Raw, tid: int, pred: Any, timeout: float = 10.0) -> pb.TaskInfo:
    """Poll Get until ``pred(info)`` (the server handles the report on its own loop turn)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        info = await raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=tid)))
        if pred(info):
            return info
        assert loop.time() < end, info
        await asyncio.sleep(0.02)


class SSE:
    def __init__(self, resp: httpx.Response) -> None:
        self.it = resp.aiter_text()
        self.buf = ""

    async def next(self, timeout: float = 10.0) -> tuple[str, Any]:
        async def one() -> tuple[str, Any]:
            while True:
                while "\n\n" in self.buf:
                    block, self.buf = self.buf.split("\n\n", 1)
                    lines = block.split("\n")
                    ev = [x[7:] for x in lines if x.startswith("event: ")]
                    data = [x[6:] for x in lines if x.startswith("data: ")]
                    if ev and data:
                        return ev[0], json.loads("\n".join(data))
                    if block.startswith(": live"):
                        return "live", None
                self.buf += await self.it.__anext__()

        return await asyncio.wait_for(one(), timeout)


async def test_v5_progress_in_get_watch_and_sse(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, "p", slots=2, version=5)
        reg = (await w.read()).registered
        assert reg.protocol_version == 5
        watch = raw.tasks.Watch(pb.WatchRequest(pools=["p"], progress=True))
        plain = raw.tasks.Watch(pb.WatchRequest(pools=["p"], all_transitions=True))
        await watch.initial_metadata()
        await plain.initial_metadata()
        async with (
            httpx.AsyncClient(base_url=f"http://{server.http}", timeout=10) as c,
            c.stream("GET", "/v1/events", params={"progress": "1", "pool": "p"}) as resp,
        ):
            sse = SSE(resp)
            assert (await sse.next())[0] == "live"
            lease = await lease_one(raw, w)
            w.send(progress=progress(lease.lease, 3, 10, "three"))
            info = await get_until(raw, lease.task_id, lambda i: i.HasField("progress"))
            p = info.progress
            assert (p.done, p.total, p.message, p.attempt) == (3.0, 10.0, "three", 1) and p.at_unix_ns > 0
            [att] = info.attempts
            assert (att.number, att.outcome, att.worker) == (1, "running", f"worker {reg.worker_id}")
            assert not att.HasField("ended_unix_ns")
            # a batch may carry progress too; the newest wins
            both = [
                pb.WorkerMessage(progress=progress(lease.lease, n, 10, m)) for n, m in ((4, ""), (5, "five"))
            ]
            w.send(batch=pb.WorkerBatch(messages=both))
            await get_until(raw, lease.task_id, lambda i: i.progress.done == 5.0)
            # bad values are dropped, the session goes on
            w.send(progress=progress(lease.lease, 11, 10))
            # HTTP Get: the same fields, proto names
            body = (await c.get(f"/v1/tasks/{lease.task_id}")).json()
            assert body["progress"]["done"] == 5.0 and body["progress"]["message"] == "five"
            assert (
                body["attempts"][0]["outcome"] == "running" and body["parents"] == [] and body["name"] == ""
            )
            # Watch with progress: progress updates (status running) beside status events
            seen: list[pb.StatusEvent] = []
            while not any(e.HasField("progress") and e.progress.done == 5.0 for e in seen):
                seen.append(await asyncio.wait_for(watch.read(), 10))
            ups = [e for e in seen if e.HasField("progress")]
            assert ups[0].progress.done == 3.0 and ups[0].status == pb.TASK_STATUS_RUNNING
            assert ups[0].id == lease.task_id and ups[0].attempt == 1
            # SSE with progress=1: `event: progress` frames
            frames: list[tuple[str, Any]] = []
            while not any(e == "progress" and d["done"] == 5.0 for e, d in frames):
                frames.append(await sse.next())
            first = next(d for e, d in frames if e == "progress")
            assert first == {
                "id": str(lease.task_id),
                "pool": "p",
                "key": "",
                "attempt": 1,
                "done": 3.0,
                "total": 10.0,
                "message": "three",
                "at": first["at"],
            }
            w.send(complete=pb.Complete(lease=lease.lease))
            res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=lease.task_id), timeout_s=10))
            assert res.status == pb.TASK_STATUS_SUCCEEDED
            # a plain Watch saw status events only
            got: list[pb.StatusEvent] = []
            while not got or got[-1].status != pb.TASK_STATUS_SUCCEEDED:
                got.append(await asyncio.wait_for(plain.read(), 10))
            assert not any(e.HasField("progress") for e in got)
            info = await raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=lease.task_id)))
            assert info.progress.done == 5.0  # the last value stays with the retained task
            assert [a.outcome for a in info.attempts] == ["succeeded"] and info.attempts[0].HasField(
                "ended_unix_ns"
            )
        watch.cancel()
        plain.cancel()
        await w.close()
    finally:
        await raw.close()


@pytest.mark.parametrize("version", [3, 4])
async def test_older_sessions_may_not_send_progress(server: ServerProc, version: int) -> None:
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, "p", version=version)
        assert (await w.read()).registered.protocol_version == version
        lease = await lease_one(raw, w)
        w.send(progress=progress(lease.lease, 1))
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            while True:
                await w.read()
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "version 5" in (ei.value.details() or "")
        # the attempt was failed retryably by the disconnect; a v4 worker still works normally
        w2 = RawWorker(raw, "p", version=version)
        await w2.read()
        while True:
            msg = await w2.read()
            if msg.WhichOneof("msg") == "lease":
                break
        w2.send(complete=pb.Complete(lease=msg.lease.lease))
        res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=msg.lease.task_id), timeout_s=10))
        assert res.status == pb.TASK_STATUS_SUCCEEDED
        await w2.close()
    finally:
        await raw.close()


async def test_python_worker_and_client_end_to_end(server: ServerProc) -> None:
    """cronoq.client.Worker's lease.progress → Client.get and Client.watch(progress=True)."""
    from cronoq.client import Client, Lease, Worker

    step = asyncio.Event()
    finish = asyncio.Event()

    async def handle(lease: Lease) -> object:
        await lease.progress(1, 4, "one")
        step.set()
        await finish.wait()
        return "ok"

    async with Client(server.grpc) as client, Worker(server.grpc, "p", handle, name="py-w5") as w:
        await w.wait_registered(10)
        assert w.server_protocol == PROTOCOL_VERSION
        async with client.watch(pools=["p"], progress=True) as events:
            h = await client.submit(b"", pool="p")
            await asyncio.wait_for(step.wait(), 10)
            ev = await asyncio.wait_for(events.__anext__(), 10)
            while ev.progress is None:
                ev = await asyncio.wait_for(events.__anext__(), 10)
            assert ev.id == h.id and ev.status == "running" and ev.progress.done == 1
            assert (ev.progress.total, ev.progress.message, ev.progress.attempt) == (4, "one", 1)
            info = await client.get(h.id)
            assert info.progress is not None and info.progress.message == "one"
            assert [(a.number, a.outcome, a.worker) for a in info.attempts] == [(1, "running", "py-w5")]
            finish.set()
            res = await client.wait(h.id, timeout=10)
            assert res.status == "succeeded"
            info = await client.get(h.id)
            assert [a.outcome for a in info.attempts] == ["succeeded"] and info.attempts[0].ended_at
