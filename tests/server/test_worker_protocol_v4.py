"""Worker protocol version 4 against a real ``cronoq serve``: the session speaks the lower of
the two versions; a version-4 session gets several Leases in one ``ServerBatch`` (split at
``max_message_bytes``) and may send its reports as one ``WorkerBatch``; a version-3 worker (the
published one) on the same server never sees a batch and may not send one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cronoq.client import Client, Worker
from cronoq.proto.protocol import PROTOCOL_VERSION

from .procs import Raw, RawWorker, ServerProc, pb, start_server

LIMIT = 64 * 1024  # limits.max_message_bytes of this server

TOML = f"""
[limits]
max_message_bytes = {LIMIT}

[[pools]]
name = "v4"
max = 64

[[pools]]
name = "v3"
max = 64

[[pools]]
name = "big"
max = 64
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("v4"), TOML, name="v4")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


def leases_of(msg: pb.ServerMessage) -> list[pb.Lease]:
    which = msg.WhichOneof("msg")
    if which == "lease":
        return [msg.lease]
    assert which == "batch", msg
    assert all(m.WhichOneof("msg") in ("lease", "abort") for m in msg.batch.messages)
    return [m.lease for m in msg.batch.messages if m.WhichOneof("msg") == "lease"]


async def complete_all(raw: Raw, w: RawWorker, leases: list[pb.Lease]) -> None:
    """Report every lease complete in one ``WorkerBatch``; each task then ends succeeded."""
    complete = [pb.WorkerMessage(complete=pb.Complete(lease=x.lease)) for x in leases]
    w.send(batch=pb.WorkerBatch(messages=complete))
    for x in leases:
        res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=x.task_id), timeout_s=10))
        assert res.status == pb.TASK_STATUS_SUCCEEDED


async def submit_batch(raw: Raw, pool: str, n: int, payload: bytes = b"") -> list[int]:
    resp = await raw.tasks.SubmitBatch(
        pb.SubmitBatchRequest(tasks=[pb.TaskSpec(pool=pool, payload=payload) for _ in range(n)])
    )
    return [t.id for t in resp.tasks]


async def test_version_is_the_lower_of_both(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        for asked, agreed in ((3, 3), (4, 4), (5, 5), (6, 6), (7, 7), (9, 7), (0, 3)):
            w = RawWorker(raw, "v3", version=asked)
            reg = (await w.read()).registered
            assert reg.protocol_version == agreed
            await w.close()
    finally:
        await raw.close()


async def test_v4_session_gets_leases_in_batches_and_reports_in_one(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, "v4", slots=32, version=4)
        assert (await w.read()).registered.protocol_version == 4
        ids = await submit_batch(raw, "v4", 32)
        got: list[pb.Lease] = []
        messages = 0
        while len(got) < 32:
            got += leases_of(await w.read())
            messages += 1
        assert sorted(lease.task_id for lease in got) == ids
        assert messages < 32  # dispatched in one engine step: far fewer messages than leases
        await complete_all(raw, w, got)  # every completion in one message
        await w.close()
    finally:
        await raw.close()


async def test_batches_are_split_at_max_message_bytes(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, "big", slots=0, version=4)  # no slot: the tasks queue up
        await w.read()
        payload = b"p" * (LIMIT // 3)  # three of them never fit one message with framing
        ids = [id_ for _ in range(5) for id_ in await submit_batch(raw, "big", 2, payload)]
        w.send(set_slots=pb.SetSlots(slots=10))  # all ten dispatched in one step
        got: list[pb.Lease] = []
        sizes: list[int] = []
        while len(got) < 10:
            msg = await w.read()
            assert msg.ByteSize() <= LIMIT
            batch = leases_of(msg)
            sizes.append(len(batch))
            got += batch
        assert max(sizes) == 2, sizes  # batched, and split by bytes, not by count
        assert sorted(x.task_id for x in got) == ids and all(x.payload == payload for x in got)
        await complete_all(raw, w, got)  # every completion in one message
        await w.close()
    finally:
        await raw.close()


async def test_v3_worker_beside_v4_never_sees_a_batch(server: ServerProc) -> None:
    """A version-3 session on the same pool as our version-4 Worker: one Lease per message."""
    raw = Raw(server.grpc)
    ran: list[int] = []

    async def handle(lease):  # type: ignore[no-untyped-def]
        ran.append(lease.task_id)
        return b"v4"

    try:
        v3 = RawWorker(raw, "v3", slots=16, version=3)
        assert (await v3.read()).registered.protocol_version == 3
        async with Worker(server.grpc, "v3", handle, slots=16) as ours:
            await ours.wait_registered(10)
            assert ours.server_protocol == PROTOCOL_VERSION
            ids = await submit_batch(raw, "v3", 32)
            v3_ids: list[int] = []

            async def serve_v3() -> None:
                while True:
                    msg = await v3.read()
                    assert msg.WhichOneof("msg") == "lease", msg  # never a batch
                    v3_ids.append(msg.lease.task_id)
                    v3.send(complete=pb.Complete(lease=msg.lease.lease, output=b"v3"))

            reader = asyncio.create_task(serve_v3())
            try:
                for tid in ids:
                    res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=tid), timeout_s=20))
                    assert res.status == pb.TASK_STATUS_SUCCEEDED
            finally:
                reader.cancel()
            assert sorted(v3_ids + ran) == ids and v3_ids and ran
        await v3.close()
    finally:
        await raw.close()


async def test_a_trickle_of_submits_shares_messages_with_v4_only(server: ServerProc) -> None:
    """Per-task Submits from 8 sequential submitters, split over a v4 and a v3 session (one
    pool each): the v4 session's writer lingers for company (fewer messages than leases), the v3
    session gets one Lease per message. (How much a trickle coalesces depends on how fast the
    machine submits: the precise claims are in tests/server/test_grpc_workers_outbound.py.)"""
    raw = Raw(server.grpc)
    try:
        v4 = RawWorker(raw, "v4", slots=64, version=4)
        v3 = RawWorker(raw, "v3", slots=64, version=3)
        assert (await v4.read()).registered.protocol_version == 4
        assert (await v3.read()).registered.protocol_version == 3

        async def submitter(k: int) -> None:
            for i in range(k):
                pool = ("v4", "v3")[i % 2]
                await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool=pool)))

        await asyncio.gather(*(submitter(16) for _ in range(8)))  # 64 tasks per pool
        got4: list[pb.Lease] = []
        messages = 0
        while len(got4) < 64:
            got4 += leases_of(await v4.read())
            messages += 1
        assert messages < 64
        got3: list[pb.Lease] = []
        while len(got3) < 64:
            msg = await v3.read()
            assert msg.WhichOneof("msg") == "lease", msg  # never a batch
            got3.append(msg.lease)
        await complete_all(raw, v4, got4)
        for x in got3:
            v3.send(complete=pb.Complete(lease=x.lease))
        for x in got3:
            res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=x.task_id), timeout_s=10))
            assert res.status == pb.TASK_STATUS_SUCCEEDED
        await v4.close()
        await v3.close()
    finally:
        await raw.close()


async def test_v3_session_may_not_send_a_batch(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, "v3", version=3)
        await w.read()
        w.send(batch=pb.WorkerBatch(messages=[pb.WorkerMessage(heartbeat=pb.Heartbeat(lease=1))]))
        assert await asyncio.wait_for(w.call.code(), 10) == grpc.StatusCode.INVALID_ARGUMENT
        assert "WorkerBatch needs worker protocol version 4" in (await w.call.details() or "")
        w4 = RawWorker(raw, "v4", version=4)
        await w4.read()
        inner = pb.WorkerMessage(batch=pb.WorkerBatch())
        w4.send(batch=pb.WorkerBatch(messages=[inner]))
        assert await asyncio.wait_for(w4.call.code(), 10) == grpc.StatusCode.INVALID_ARGUMENT
        assert "may not contain another batch" in (await w4.call.details() or "")
    finally:
        await raw.close()


async def test_our_worker_end_to_end_on_v4(server: ServerProc, tmp_path: Path) -> None:
    async def handle(lease):  # type: ignore[no-untyped-def]
        return {"n": lease.json()["n"] * 2}

    async with Client(server.grpc) as client, Worker(server.grpc, "v4", handle, slots=8) as w:
        await w.wait_registered(10)
        subs = await client.submit_batch([{"pool": "v4", "payload": {"n": i}} for i in range(200)])
        results = [await client.wait(s.id, timeout=30) for s in subs]
        assert [r.status for r in results] == ["succeeded"] * 200
        assert [r.json() for r in results] == [{"n": 2 * i} for i in range(200)]
