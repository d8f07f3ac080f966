"""Defect (found after the first fix of the Watch flood): unary calls had no budget of their own.

The gRPC listener's global call limit is the sum of three budgets (unary requests, Watch
streams, worker sessions), but only streams and worker sessions were counted by their
handlers: a flood of long ``Wait`` calls could take the whole limit and lock workers out. Now
every unary method counts against ``limits.max_concurrent_requests`` and is refused with
RESOURCE_EXHAUSTED past it, so workers always find room.

The probe holds the request budget with ``Wait`` calls on tasks nobody runs, sends more (all
refused at once), and registers a worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import pytest

from server.procs import Raw, RawWorker, ServerProc, pb

from .conftest import running

REQUESTS = 20
LIMITS = (
    f"[limits]\nmax_concurrent_requests = {REQUESTS}\n"
    "max_concurrent_streams = 100\n"  # (also the per-connection HTTP/2 stream limit)
    "max_worker_sessions = 4\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    body = LIMITS + '[[pools]]\nname = "default"\n\n[[pools]]\nname = "idle"\n'
    with running(tmp_path_factory, body, "unary") as sp:
        yield sp


async def test_long_waits_never_take_the_workers_room(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    waits: list[grpc.aio.UnaryUnaryCall] = []  # type: ignore[type-arg]
    try:
        sub = await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="idle")))
        ref = pb.TaskRef(id=sub.id)
        waits = [raw.tasks.Wait(pb.WaitRequest(task=ref, timeout_s=60)) for _ in range(REQUESTS)]
        # the budget is full once the server holds them all: one more unary call is refused
        refused = None
        for _ in range(200):
            try:
                await raw.tasks.Get(pb.GetRequest(task=ref), timeout=10)
            except grpc.aio.AioRpcError as e:
                refused = e
                break
            await asyncio.sleep(0.02)  # the Waits are still arriving at the server
        assert refused is not None, "unary calls past max_concurrent_requests were served"
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"max_concurrent_requests {REQUESTS}" in (refused.details() or "")
        more = [raw.tasks.Get(pb.GetRequest(task=ref)) for _ in range(30)]
        codes = {await c.code() for c in more}
        assert codes == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        # a worker still registers: its sessions have their own budget
        w = RawWorker(raw, "default")
        assert (await w.read(10)).WhichOneof("msg") == "registered"
        await w.close()
        assert not any(c.done() for c in waits)  # the held calls were never disturbed
    finally:
        for c in waits:
            c.cancel()
        await raw.close()
