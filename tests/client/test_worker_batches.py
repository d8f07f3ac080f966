"""Worker protocol version 4 on the remote Worker (against the fake server): reports queued
while the stream is busy go out as one ``WorkerBatch`` (bounded by the server's
``max_message_bytes``), a ``ServerBatch`` of leases is run like single leases, and a server
that answers version 3 never gets a batch."""

from __future__ import annotations

import asyncio
from typing import Any

from test_worker_fake import running

from cronoq.client import Lease, Worker
from cronoq.client import worker as worker_mod
from cronoq.proto import flush
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.protocol import MAX_BATCH_ITEMS, PROTOCOL_VERSION


async def noop(lease: Lease) -> object:
    return b"k" * 1000


def lease_batch(ids: range) -> pb.ServerBatch:
    return pb.ServerBatch(
        messages=[pb.ServerMessage(lease=pb.Lease(lease=i, task_id=i, attempt=1)) for i in ids]
    )


async def reports(conn: Any, n: int) -> tuple[list[int], list[int]]:
    """Read until ``n`` completions arrived: (completed leases, items per message)."""
    done: list[int] = []
    sizes: list[int] = []
    while len(done) < n:
        msg = await conn.recv()
        which = msg.WhichOneof("msg")
        if which == "complete":
            done.append(msg.complete.lease)
            sizes.append(1)
        else:
            assert which == "batch", msg
            inner = [m.complete.lease for m in msg.batch.messages if m.WhichOneof("msg") == "complete"]
            assert len(inner) == len(msg.batch.messages)
            done += inner
            sizes.append(len(inner))
    return done, sizes


async def test_v4_server_gets_reports_in_batches(fake: Any) -> None:
    w = Worker(fake.target, "p", noop, slots=16)
    async with running(w):
        conn = await fake.next_conn()
        assert (await conn.recv_kind("register")).protocol_version == PROTOCOL_VERSION
        conn.register_ok(slots=16, version=4)
        await w.wait_registered(5)
        conn.send(batch=lease_batch(range(1, 17)))
        done, sizes = await reports(conn, 16)
        assert sorted(done) == list(range(1, 17))
        assert max(sizes) > 1  # the completions of one loop turn share a message


async def test_batches_stay_within_the_servers_message_limit(fake: Any) -> None:
    w = Worker(fake.target, "p", noop, slots=8)
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        # budget 4096 - 1024 bytes: two 1000-byte outputs fit one message, three do not
        conn.register_ok(slots=8, version=4, max_message_bytes=4096)
        await w.wait_registered(5)
        conn.send(batch=lease_batch(range(1, 9)))
        done, sizes = await reports(conn, 8)
        assert sorted(done) == list(range(1, 9))
        assert max(sizes) == 2, sizes


async def test_v3_server_never_gets_a_batch(fake: Any) -> None:
    w = Worker(fake.target, "p", noop, slots=16)
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=16)  # version 3
        await w.wait_registered(5)
        assert w.server_protocol == 3
        for i in range(1, 17):
            conn.lease(i)
        done, sizes = await reports(conn, 16)
        assert sorted(done) == list(range(1, 17)) and set(sizes) == {1}


# Lingering (cronoq.proto.flush): the bounds are patched, a 60 s bound that only a full batch can
# cut short, and "always busy" / "never busy" where the test must not depend on the machine.
LONG = 60.0


async def test_a_trickle_of_reports_lingers_into_one_batch(fake: Any, monkeypatch: Any) -> None:
    """63 leases run, blocked; lease 0 completes alone, right after a flush, while the others
    still run: its report lingers (60 s bound) until the 63 others are queued: one message."""
    monkeypatch.setattr(worker_mod, "FLUSH_LINGER_S", LONG)
    monkeypatch.setattr(flush, "FLUSH_BUSY_S", LONG)
    gate = asyncio.Event()
    started: list[int] = []
    all_started = asyncio.Event()
    first_done = asyncio.Event()
    n = MAX_BATCH_ITEMS

    async def handle(lease: Lease) -> object:
        if lease.id == 0:
            first_done.set()
            return b""
        started.append(lease.id)
        if len(started) == n - 1:
            all_started.set()
        await gate.wait()
        return b""

    w = Worker(fake.target, "p", handle, slots=n)
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=n, version=4)
        await w.wait_registered(5)
        for i in range(1, n):  # one lease per message: a trickle
            conn.lease(i)
        await asyncio.wait_for(all_started.wait(), 10)
        conn.lease(0)
        await asyncio.wait_for(first_done.wait(), 10)
        gate.set()
        done, sizes = await reports(conn, n)
        assert sorted(done) == list(range(n)) and sizes == [n]


async def test_a_report_on_a_quiet_stream_goes_at_once(fake: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(worker_mod, "FLUSH_LINGER_S", LONG)  # it would wait a minute if it lingered
    monkeypatch.setattr(flush, "FLUSH_BUSY_S", 0.0)
    w = Worker(fake.target, "p", noop, slots=4)
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=4, version=4)
        await w.wait_registered(5)
        conn.lease(1)
        assert await reports(conn, 1) == ([1], [1])


async def test_a_v3_session_never_lingers(fake: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(worker_mod, "FLUSH_LINGER_S", LONG)
    monkeypatch.setattr(flush, "FLUSH_BUSY_S", LONG)
    w = Worker(fake.target, "p", noop, slots=4)
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=4)  # version 3
        await w.wait_registered(5)
        for i in range(1, 5):
            conn.lease(i)
        done, sizes = await reports(conn, 4)
        assert sorted(done) == [1, 2, 3, 4] and sizes == [1, 1, 1, 1]
