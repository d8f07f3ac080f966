"""Defect: one worker message froze the leader into a failover (issue #35, defect 2).

A 292 KiB ``WorkerBatch`` of 20,000 invalid progress reports held the leader's loop for 15.6 s
(31 s here) and the standby took over: every report logged a warning and the batch was handled
without yielding.  Now a batch is handled 128 reports per loop turn and dropped reports are
logged as a summary with counts.  The probe sends the batch and meanwhile times ``Get`` (on
the gRPC loop) and ``/healthz`` (from a thread): both answer promptly, measured against a
baseline taken in the same run, and the log holds at most two lines about the reports."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator

import pytest

from server.procs import Raw, RawWorker, ServerProc, pb, start_server

from .probes import HealthSampler

TOML = '[[pools]]\nname = "p"\nmax = 4\n'
N = 20_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("flood"), TOML, name="flood")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


async def _get_latency(raw: Raw, tid: int) -> float:
    t0 = time.perf_counter()
    await raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=tid)))
    return time.perf_counter() - t0


async def test_a_batch_of_invalid_progress_reports_does_not_stall_the_server(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    w = RawWorker(raw, pool="p", slots=1, version=5)
    try:
        await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="p")))
        while (msg := await w.read()).WhichOneof("msg") != "lease":
            pass
        lease, tid = msg.lease.lease, msg.lease.task_id
        baseline = statistics.median([await _get_latency(raw, tid) for _ in range(20)])
        bad = pb.WorkerMessage(progress=pb.ProgressReport(lease=lease, done=11, total=10))
        w.send(batch=pb.WorkerBatch(messages=[bad] * N))
        w.send(progress=pb.ProgressReport(lease=lease, done=7, total=10))  # (marks the end)
        worst = 0.0
        deadline = time.monotonic() + 60
        with HealthSampler(server.http, interval=0.01, limit=60.0) as health:
            while True:  # Get answers promptly all the while the batch is handled
                t0 = time.perf_counter()
                info = await raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=tid)))
                worst = max(worst, time.perf_counter() - t0)
                if info.progress.done == 7.0:
                    break
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
        assert health.worst < 1.0, health.worst
        # the whole batch takes far longer than one chunk: a frozen loop shows as one Get
        # waiting for all of it
        assert worst < max(0.25, 50 * baseline), (worst, baseline)
        lines = [x for x in server.log().splitlines() if "progress reports dropped" in x]
        assert 1 <= len(lines) <= 2, lines  # the first at once, then (within 10 s) a summary
        await w.close()
    finally:
        await raw.close()
