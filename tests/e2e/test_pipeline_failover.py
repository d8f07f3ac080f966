"""A parent's output survives a failover for the child that still needs it
(docs/concepts/dependencies.md#outputs-on-edges, docs/reference/behaviour.md#high-availability).

Two real ``cronoq serve`` processes on one PostgreSQL schema (or one SQLite file), with
``[outputs]`` caps of one entry: a parent ends on the leader (an ``ha_worker.py`` echoes it),
more tasks end after it (so, were it not pinned, the cache would drop its output), then the
leader is SIGKILLed. The child's pool has no worker until the standby leads: a raw
version-6 worker then receives the child's payload with the parent's output substituted and
the parent's outcome beside it. Once the child has ended the pin is released: the parent's
record goes the way of the caps (the child still names it, as ``unknown``).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from tests.server.procs import Raw, RawWorker, pb

from services import missing_service

from .cluster import (
    DSN,
    POOL_TOML,
    PgSchema,
    ServerNode,
    WorkerProc,
    http_get,
    http_post,
    pg_store_toml,
    pg_unreachable,
    sqlite_store_toml,
    wait_leader,
)

BODY = (
    POOL_TOML
    + """
[[pools]]
name = "later"
min = 0
max = 2

[outputs]
cache_entries = 1
info_entries = 1
"""
)


def _status(addr: str, ref: str) -> str:
    code, body = http_get(addr, f"/v1/tasks/{ref}")
    return str(body.get("status")) if code == 200 else f"HTTP {code}"


def _until(pred: object, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


async def _run_child(target: str, child: str, parent: str) -> None:
    raw = Raw(target)
    try:
        w = RawWorker(raw, pool="later", version=6)
        msg = await w.read(30)
        while msg.WhichOneof("msg") != "lease":
            msg = await w.read(30)
        lease = msg.lease
        assert lease.task_id == int(child)
        assert json.loads(lease.payload) == {"args": [[{"rows": 3}, 1]], "kwargs": {}}
        (p,) = lease.parents
        got = (p.id, p.key, p.status, json.loads(p.output))
        assert got == (int(parent), "parent", "succeeded", {"rows": 3})
        w.send(complete=pb.Complete(lease=lease.lease, output=b"4", content_type="application/json"))
        res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=int(child)), timeout_s=30))
        assert res.status == pb.TASK_STATUS_SUCCEEDED
        await w.close()
    finally:
        await raw.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["postgres", pytest.param("sqlite", marks=pytest.mark.slow)])
def test_a_pinned_output_survives_a_failover(tmp_path: Path, kind: str) -> None:
    schema: PgSchema | None = None
    if kind == "postgres":
        if why := pg_unreachable():
            missing_service("PostgreSQL", why)
        schema = PgSchema("cronoq_pipe")
    nodes: list[ServerNode] = []
    worker: WorkerProc | None = None
    try:
        for name in ("A", "B"):
            if schema is not None:
                url = DSN + ("&" if "?" in DSN else "?") + f"application_name={schema.app(name)}"
                store = pg_store_toml(schema.schema, url)
            else:
                store = sqlite_store_toml(tmp_path / "ha.db")
            nodes.append(ServerNode(tmp_path, name, store, body=BODY))
        a, b = nodes
        a.start().wait_listening()
        assert wait_leader([a]) is a
        b.start().wait_listening()
        worker = WorkerProc([a.grpc, b.grpc], slots=2, exec_ms=1)
        worker.wait_for("REGISTERED", 30)
        batch = {
            "tasks": [
                {"key": "parent", "payload": {"rows": 3}},
                {
                    "kind": "pipe.total",
                    "key": "child",
                    "pool": "later",
                    "after": ["parent"],
                    "payload": {"args": [[{"$output": 0}, 1]], "kwargs": {}},
                },
            ]
        }
        code, made = http_post(a.http, "/v1/tasks:batch", batch)
        assert code == 200, made
        parent, child = (t["id"] for t in made["tasks"])
        _until(lambda: _status(a.http, parent) == "succeeded", 30, "the parent to succeed")
        for n in range(3):  # newer outputs: a one-entry cache keeps only a pinned one besides
            code, filler = http_post(a.http, "/v1/tasks", {"key": f"filler-{n}", "payload": n})
            assert code == 200, filler
            _until(lambda n=n: _status(a.http, f"filler-{n}") == "succeeded", 30, "a filler to succeed")
        assert _status(a.http, child) == "ready"
        a.kill()
        assert wait_leader(nodes, timeout=60, exclude=a) is b
        asyncio.run(_run_child(b.grpc, child, parent))
        code, detail = http_get(b.http, f"/v1/tasks/{child}")
        assert code == 200 and detail["status"] == "succeeded", detail

        # released after: once the child ended, the one-entry record cap forgets the parent
        def released() -> bool:
            outcomes = http_get(b.http, f"/v1/tasks/{child}")[1]["parent_outcomes"]
            return [(p["id"], p["status"]) for p in outcomes] == [(parent, "unknown")]

        _until(released, 30, "the parent's record to be released")
    finally:
        if worker is not None:
            worker.cleanup()
        for n in nodes:
            n.cleanup()
        if schema is not None:
            schema.drop()
