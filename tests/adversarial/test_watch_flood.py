"""Defect: gRPC Watch streams slowed everything and locked workers out.

1,500 Watch streams of one client token made 200 submissions take 92.8 s instead of 1.1 s, and
at 2,100 streams worker ``Work`` sessions (and every other call) got RESOURCE_EXHAUSTED: the
gRPC server's one global call limit was shared by everything.  Now Watch shares one fan-out
(one subscription, one message per event for every stream), a token's streams are budgeted
(``limits.max_streams_per_principal``), and worker sessions have a budget of their own
(``limits.max_worker_sessions``), so clients can never take the room workers need.

The probe fills the token's stream budget and the listener's, goes past both, and registers a
worker; with the old single limit (requests + streams = 150 here) the worker was refused.
Each stream costs a message write per event (gRPC's per-message cost), so many streams still
slow a busy server down; the budget bounds how much of that one token can cause.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import pytest

from server.procs import Raw, RawWorker, ServerProc, pb, pb_grpc

from .conftest import running

STREAMS = 100
LIMITS = (
    "[limits]\n"
    f"max_streams_per_principal = {STREAMS}\n"
    f"max_concurrent_streams = {STREAMS}\n"
    "max_concurrent_requests = 50\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    with running(tmp_path_factory, LIMITS + '[[pools]]\nname = "default"\n', "watch") as sp:
        yield sp


async def _submits(raw: Raw, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec()), timeout=60)
    return time.perf_counter() - t0


async def test_watch_streams_are_budgeted_and_never_lock_workers_out(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    # its own connection (gRPC shares one between channels of equal arguments): streams nobody
    # reads fill their connection's flow-control window and stall everything else on it
    channel = grpc.aio.insecure_channel(server.grpc, options=[("grpc.use_local_subchannel_pool", 1)])
    flood = pb_grpc.TasksStub(channel)
    calls = []
    try:
        baseline = await _submits(raw, 100)
        calls = [flood.Watch(pb.WatchRequest(all_transitions=True)) for _ in range(STREAMS)]
        await asyncio.wait_for(asyncio.gather(*(c.initial_metadata() for c in calls)), 60)
        # past the budget: refused at once, and the refused ones hold nothing
        # (on another connection: this one is at the per-connection stream limit, same value)
        extra = [raw.tasks.Watch(pb.WatchRequest()) for _ in range(60)]
        codes = await asyncio.wait_for(asyncio.gather(*(c.code() for c in extra)), 30)
        assert set(codes) == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert "max_concurrent_streams" in (await extra[0].details() or "")
        loaded = await _submits(raw, 100)
        # workers are never locked out by clients' streams
        w = RawWorker(raw)
        msg = await w.read(10)
        assert msg.WhichOneof("msg") == "registered"
        w.call.cancel()  # (it holds a lease of the pending tasks: no clean close needed here)
        # every stream got the events of those submissions, each encoded once for all
        got = await asyncio.wait_for(calls[0].read(), 10)
        assert got.status == pb.TASK_STATUS_BLOCKED
    finally:
        for c in calls:
            c.cancel()
        await channel.close()
        await raw.close()
    print(f"100 submissions: {baseline:.2f} s alone, {loaded:.2f} s with {STREAMS} watch streams")
