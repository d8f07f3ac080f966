"""Defect: one HTTP body froze the server (and forced a failover).

``POST /v1/tasks`` with ``{"after": [1, 1, ...]}`` of two million entries blocked the event loop
for 16-19 s before its 400: every ``Dep`` was built before ``max_deps`` was checked.  Now every
count and length is checked before anything is converted (``cronoq.server.request_limits``),
on HTTP and gRPC alike.  The probe sends the worst bodies that fit in the 4 MiB limits (too
many deps, after, tags, labels, resources, a long tenant, a batch of 1,000 tasks of 2,000 deps
each, a batch one task too large) and times ``/healthz`` meanwhile: its slowest answer stays
far below the lease TTL (it was 16 s), and each body gets its 400 with the limit's message.
"""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest

from server.procs import Raw, ServerProc, pb

from .probes import HealthSampler, post_raw

#: the slowest /healthz answer tolerated while the bodies are sent (JSON decoding of a 4 MiB
#: body alone takes ~0.1-0.5 s on a loaded CI machine; the loop must never stall for longer)
WORST_HEALTHZ_S = 1.5
BODY = 4 * 1024 * 1024 - 4096  # just under max_http_body_bytes


N_AFTER = (BODY - 16) // 2  # "1," per entry
N_MAP = (BODY - 16) // 16  # '"k1234567":"x",'

WORST_BODIES: list[tuple[str, str, bytes, str]] = [
    ("after", "/v1/tasks", b'{"after":[' + b",".join([b"1"] * N_AFTER) + b"]}", "too many dependencies"),
    ("deps", "/v1/tasks", b'{"deps":[' + b",".join([b"1"] * N_AFTER) + b"]}", "too many dependencies"),
    (
        "tags",
        "/v1/tasks",
        json.dumps({"tags": {f"k{i:07d}": "x" for i in range(N_MAP)}}, separators=(",", ":")).encode(),
        "too many tags",
    ),
    (
        "labels",
        "/v1/tasks",
        json.dumps({"labels": {f"k{i:07d}": "x" for i in range(N_MAP)}}, separators=(",", ":")).encode(),
        "too many labels",
    ),
    (
        "resources",
        "/v1/tasks",
        json.dumps({"resources": {f"r{i:07d}": 1 for i in range(N_MAP)}}, separators=(",", ":")).encode(),
        "too many resources",
    ),
    ("tenant", "/v1/tasks", json.dumps({"tenant": "t" * (BODY - 32)}).encode(), "tenant is longer than"),
    (
        "batch of deps",
        "/v1/tasks:batch",
        json.dumps({"tasks": [{"after": [1] * 2000}] * 1000}, separators=(",", ":")).encode(),
        "too many dependencies",
    ),
    ("batch size", "/v1/tasks:batch", json.dumps({"tasks": [{}] * 1001}).encode(), "max_tasks_per_batch"),
]


@pytest.mark.parametrize(("name", "path", "body", "message"), WORST_BODIES, ids=[b[0] for b in WORST_BODIES])
def test_worst_bodies_do_not_stall_the_loop(
    plain_server: ServerProc, name: str, path: str, body: bytes, message: str
) -> None:
    assert len(body) <= 4 * 1024 * 1024
    with HealthSampler(plain_server.http, limit=60.0) as health:
        t0 = time.perf_counter()
        status, reply = post_raw(plain_server.http, path, body)
        took = time.perf_counter() - t0
        time.sleep(0.1)  # one more sample after the answer
    assert status == 400, reply
    assert reply["code"] == "invalid" and message in reply["error"], reply
    assert health.worst < WORST_HEALTHZ_S, (name, health.worst, took)


async def test_grpc_worst_submit_is_refused_by_count(plain_server: ServerProc) -> None:
    """The same limits over gRPC, with the same message; the loop stays free meanwhile."""
    n = (4 * 1024 * 1024 - 4096) // 8  # Dep{target{id: 1}} takes 7 bytes on the wire
    spec = pb.TaskSpec(deps=[pb.Dep(target=pb.TaskRef(id=1))] * n)
    labels = pb.TaskSpec(labels={f"k{i:07d}": "x" for i in range(200_000)})
    raw = Raw(plain_server.grpc)
    try:
        with HealthSampler(plain_server.http, limit=60.0) as health:
            for task, message in ((spec, "too many dependencies"), (labels, "too many labels")):
                with pytest.raises(grpc.aio.AioRpcError) as ei:
                    await raw.tasks.Submit(pb.SubmitRequest(task=task), timeout=60)
                assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert message in (ei.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as ei:
                await raw.tasks.SubmitBatch(pb.SubmitBatchRequest(tasks=[spec] * 1), timeout=60)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            await asyncio.sleep(0.1)
        assert health.worst < WORST_HEALTHZ_S, health.worst
    finally:
        await raw.close()
