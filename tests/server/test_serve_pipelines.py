"""Pipelines that pass data, end to end (docs/concepts/dependencies.md#outputs-on-edges): a
real ``cronoq serve``, a real ``cronoq worker pipeline_app:app`` and the app bound to a Client;
a raw version-3 worker (the published protocol) receives plain arguments - and runs a chain, a
100-way fan-in and a failure mid-chain on them - a version-6 one the parents' outcomes too."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from cronoq import TaskFailed, outcome_of, output_of
from cronoq.client import Client

from .pipeline_app import app, big, count, email_invoice, fetch_order, number, render_invoice, report, total
from .procs import (
    Raw,
    RawWorker,
    ServerProc,
    app_worker_argv,
    child_env,
    pb,
    start_server,
    start_worker,
    stop_worker,
)

HERE = Path(__file__).resolve().parent
LIMIT = 16384

TOML = f"""
[limits]
max_message_bytes = {LIMIT}

[[pools]]
name = "default"
max = 8

[[pools]]
name = "raw"
max = 2
"""


def worker_argv(sp: ServerProc, slots: int = 4) -> list[str]:
    """A real ``cronoq worker pipeline_app:app`` on pool ``default`` of ``sp``."""
    return app_worker_argv(sp, "pipeline_app:app", HERE, slots=slots)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    directory = tmp_path_factory.mktemp("pipes")
    sp = start_server(directory, TOML, name="pipes")
    log_path = directory / "worker.log"
    worker = start_worker(log_path, worker_argv(sp, slots=8))
    try:
        yield sp
    finally:
        stop_worker(worker, log_path)
        assert sp.terminate() == 0, sp.log()


@pytest.fixture
async def client(server: ServerProc) -> AsyncIterator[Client]:
    async with Client(server.grpc) as c:
        app.bind(c)
        try:
            yield c
        finally:
            app.bind(None)


async def test_a_typed_three_step_chain_with_nested_placeholders(client: Client) -> None:
    f = fetch_order.spec(42)
    due = dt.datetime(2026, 1, 12, tzinfo=dt.UTC)
    r = render_invoice.spec(f.output, due)
    e = email_invoice.options(key="mail-42").spec(r.output, cc=["ann", "bob"])
    handles = await app.submit_batch([f, r, e])
    assert await handles[2] == "42:10:ann,bob:['succeeded']"
    info = await client.get(handles[2].id)
    assert info.key == "mail-42"


async def test_a_hundred_way_fan_in(client: Client) -> None:
    parts = [number.spec(n) for n in range(100)]
    handles = await app.submit_batch([*parts, total.spec([p.output for p in parts])])
    assert await handles[-1] == sum(range(100))


async def test_a_failure_mid_chain(client: Client, server: ServerProc) -> None:
    f = fetch_order.spec(-1)
    r = render_invoice.spec(f.output, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    seen = report.spec(outcome_of(f))
    handles = await app.submit_batch([f, r, seen])
    with pytest.raises(TaskFailed) as err:
        await handles[1]
    assert err.value.status == "skipped"
    assert await handles[2] == "failed: no order -1"
    # `cronoq get` shows how the parents ended
    r = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "cronoq.cli", "get", str(handles[2].id), "--server", server.grpc],
        capture_output=True, text=True, env=child_env(), timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"{handles[0].id} failed (no order -1)" in " ".join(r.stdout.split()), r.stdout
    # `cronoq get --json` is the HTTP TaskInfo, the parents' outcomes included (after the end too)
    r = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "cronoq.cli", "get", str(handles[2].id), "--json", "--server", server.grpc],
        capture_output=True, text=True, env=child_env(), timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    async with httpx.AsyncClient(base_url=f"http://{server.http}") as http:
        detail = (await http.get(f"/v1/tasks/{handles[2].id}")).json()
    assert json.loads(r.stdout) == detail
    key = (await client.get(handles[0].id)).key
    failed = {"id": str(handles[0].id), "key": key, "status": "failed", "message": "no order -1"}
    assert detail["parent_outcomes"] == [{**failed, "output_available": False}]


async def test_a_child_over_the_message_limit_fails_alone(client: Client) -> None:
    parent = big.spec(LIMIT * 2 // 3)
    child = count.spec([parent.output, parent.output])
    fine = count.spec([parent.output])
    handles = await app.submit_batch([parent, child, fine])
    with pytest.raises(TaskFailed) as err:
        await handles[1]
    assert err.value.status == "failed"
    assert f"parent(s) {handles[0].id} substituted is" in err.value.message
    assert f"over the server's limits.max_message_bytes ({LIMIT})" in err.value.message
    assert await handles[2] == LIMIT * 2 // 3


async def test_old_and_new_workers_get_plain_arguments(client: Client, server: ServerProc) -> None:
    first = await number.submit(20)
    assert await first == 20
    raw = Raw(server.grpc)
    try:
        for version in (3, 6):
            w = RawWorker(raw, pool="raw", version=version)
            h = await total.options(pool="raw").submit([output_of(first), 22])
            msg = await w.read()
            while msg.WhichOneof("msg") != "lease":
                msg = await w.read()
            lease = msg.lease
            assert json.loads(lease.payload) == {"args": [[20, 22]], "kwargs": {}}
            if version == 3:
                assert not lease.parents
            else:
                (p,) = lease.parents
                assert (p.id, p.status, json.loads(p.output)) == (first.id, "succeeded", 20)
            w.send(complete=pb.Complete(lease=lease.lease, output=b"42", content_type="application/json"))
            assert await h == 42
            await w.close()
    finally:
        await raw.close()


async def test_the_json_placeholder_form_over_http(client: Client, server: ServerProc) -> None:
    body = {
        "tasks": [
            {"kind": "pipe.number", "key": "http-n", "payload": {"args": [5], "kwargs": {}}},
            {"kind": "pipe.fetch_order", "key": "http-bad", "payload": {"args": [-2], "kwargs": {}}},
            {
                "kind": "pipe.total",
                "key": "http-total",
                "after": ["http-n"],
                "payload": {"args": [[{"$output": 0}, {"$output": 0}, 1]], "kwargs": {}},
            },
            {
                "kind": "pipe.report",
                "deps": [{"target": "http-bad", "cond": "complete"}],
                "payload": {"args": [{"$outcome": 0}], "kwargs": {}},
            },
            {  # `after` then `deps`: edge 0 is http-n, edge 1 http-bad
                "kind": "pipe.total",
                "after": ["http-n"],
                "deps": [{"target": "http-bad", "cond": "complete"}],
                "payload": {"args": [[{"$output": 0}, 2]], "kwargs": {}},
            },
        ]
    }
    async with httpx.AsyncClient(base_url=f"http://{server.http}") as http:
        r = await http.post("/v1/tasks:batch", json=body)
        assert r.status_code == 200, r.text
        ids = [t["id"] for t in r.json()["tasks"]]
        res = (await http.get(f"/v1/tasks/{ids[2]}/result", params={"timeout": 30})).json()
        assert res["output"] == 11
        res = (await http.get(f"/v1/tasks/{ids[3]}/result", params={"timeout": 30})).json()
        assert res["output"] == "failed: no order -2"
        res = (await http.get(f"/v1/tasks/{ids[4]}/result", params={"timeout": 30})).json()
        assert res["output"] == 7
        both = (await http.get(f"/v1/tasks/{ids[4]}")).json()["parent_outcomes"]
        assert [(p["key"], p["status"]) for p in both] == [("http-n", "succeeded"), ("http-bad", "failed")]
        # a finished task still says how its parents ended, one per edge, in edge order
        ended = (await http.get(f"/v1/tasks/{ids[2]}")).json()
        n = {"id": ids[0], "key": "http-n", "status": "succeeded", "message": "", "output_available": True}
        assert ended["parent_outcomes"] == [n]
        # a live task's detail says which argument comes from which parent (no worker: it waits)
        waiting = {
            "kind": "pipe.total",
            "pool": "raw",
            "after": ["http-n"],
            "payload": body["tasks"][2]["payload"],
        }
        tid = (await http.post("/v1/tasks", json=waiting)).json()["id"]
        detail = (await http.get(f"/v1/tasks/{tid}")).json()
        path = {"mode": "output", "edge": 0, "task_id": ids[0]}
        assert detail["arguments"] == [{"path": "args[0][0]", **path}, {"path": "args[0][1]", **path}]


async def test_a_marker_naming_no_edge_is_refused_at_submission(client: Client, server: ServerProc) -> None:
    """#29: "a placeholder of a task that does not exist: a clear error at submission, nothing
    half-submitted". In JSON a marker naming no edge (`{"$output": 1}` with one edge) was
    accepted and failed the child when it ran; it is now 400 `invalid` / INVALID_ARGUMENT, on
    HTTP and gRPC, a batch refused whole. Without edges a marker is data, as before."""
    message = "task 'pipe.total': placeholder {'$output': 1} names no dependency edge (it has 1)"
    await client.submit(None, pool="raw", key="edge-n")
    bad = {"kind": "pipe.total", "after": ["edge-n"], "payload": {"args": [[{"$output": 1}]], "kwargs": {}}}
    async with httpx.AsyncClient(base_url=f"http://{server.http}") as http:
        r = await http.post("/v1/tasks", json=bad)
        assert (r.status_code, r.json()) == (400, {"error": message, "code": "invalid"})
        batch = {"tasks": [{"pool": "raw", "key": "edge-first"}, bad]}
        r = await http.post("/v1/tasks:batch", json=batch)
        assert r.status_code == 400 and message in r.json()["error"], r.text
        assert (await http.get("/v1/tasks/edge-first")).status_code == 404  # nothing half-submitted
        negative = {**bad, "payload": {"args": [[{"$outcome": -1}]], "kwargs": {}}}
        r = await http.post("/v1/tasks", json=negative)
        assert r.status_code == 400 and "{'$outcome': -1} names no dependency edge" in r.json()["error"]
        data = {"kind": "pipe.total", "pool": "raw", "payload": {"args": [[{"$output": 1}]], "kwargs": {}}}
        assert (await http.post("/v1/tasks", json=data)).status_code == 200  # (no edge: plain data)
    raw = Raw(server.grpc)
    try:
        dep = pb.Dep(target=pb.TaskRef(key="edge-n"), cond=pb.EDGE_COND_ON_SUCCESS)
        spec = pb.TaskSpec(
            kind="pipe.total", payload=json.dumps(bad["payload"]).encode(), content_type="application/json"
        )
        spec.deps.append(dep)
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.Submit(pb.SubmitRequest(task=spec))
        assert (ei.value.code(), ei.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    finally:
        await raw.close()


async def test_a_restart_between_a_parents_end_and_its_childs_start(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The child's pool has no worker until the server restarted (SQLite): the child then
    receives the output its parent returned before the restart, although the parent finished
    (its row says) two days ago, long past ``limits.key_retention_s``: a start reads the
    finished rows within the engine's retention and, whatever their age, those live tasks
    still need (docs/reference/behaviour.md#recovery)."""
    directory = tmp_path_factory.mktemp("pipes-restart")
    sp = start_server(directory, TOML, name="restart")
    worker = start_worker(directory / "worker.log", worker_argv(sp))
    try:
        async with Client(sp.grpc) as c:
            app.bind(c)
            try:
                parent = number.spec(7)
                parent_h, child_h = await app.submit_batch(
                    [parent, total.options(pool="raw").spec([parent.output, 1])]
                )
                assert await parent_h == 7
            finally:
                app.bind(None)
    finally:
        stop_worker(worker, directory / "worker.log")
        assert sp.terminate() == 0, sp.log()
    with contextlib.closing(sqlite3.connect(sp.db_path)) as conn:
        days = 2 * 86400 * 10**9
        conn.execute("UPDATE cronoq_tasks SET finished = finished - ? WHERE id = ?", (days, parent_h.id))
        conn.commit()
    sp = start_server(directory, TOML, name="restart")
    raw = Raw(sp.grpc)
    try:
        w = RawWorker(raw, pool="raw", version=6)
        msg = await w.read()
        while msg.WhichOneof("msg") != "lease":
            msg = await w.read()
        assert json.loads(msg.lease.payload) == {"args": [[7, 1]], "kwargs": {}}
        (p,) = msg.lease.parents
        assert (p.id, p.status, json.loads(p.output)) == (parent_h.id, "succeeded", 7)
        w.send(complete=pb.Complete(lease=msg.lease.lease, output=b"8", content_type="application/json"))
        res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=child_h.id), timeout_s=20))
        assert res.status == pb.TASK_STATUS_SUCCEEDED
        await w.close()
    finally:
        await raw.close()
        assert sp.terminate() == 0, sp.log()


async def test_a_parent_output_that_is_not_json_fails_the_named_child(
    client: Client, server: ServerProc
) -> None:
    """A plain parent (a raw version-3 worker) returns a PNG: the named child that takes its
    output fails permanently before any worker sees it (one attempt), naming the parent; a
    sibling waiting on the same parent by a plain edge runs."""
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, pool="raw", version=3)
        parent = await client.submit(b"draw", pool="raw", key="png-parent")
        child = await number.submit(output_of(parent.id))
        sibling = await number.options(after="png-parent").submit(3)
        msg = await w.read()
        while msg.WhichOneof("msg") != "lease" or msg.lease.task_id != parent.id:
            if msg.WhichOneof("msg") == "lease":  # (a task an earlier test left in this pool)
                done = pb.Complete(lease=msg.lease.lease, output=b"0", content_type="application/json")
                w.send(complete=done)
            msg = await w.read()
        png = b"\x89PNG\r\n\x1a\n\x00"
        w.send(complete=pb.Complete(lease=msg.lease.lease, output=png, content_type="image/png"))
        with pytest.raises(TaskFailed) as err:
            await child
        assert err.value.status == "failed", err.value.message
        assert f"the output of parent {parent.id} is not JSON" in err.value.message
        assert (await client.get(child.id)).attempt == 1  # permanent: not retried
        assert await sibling == 3
        await w.close()
    finally:
        await raw.close()


_V3_TASKS = {
    "pipe.number": lambda args: args[0],
    "pipe.total": lambda args: sum(args[0]),
    "pipe.report": lambda args: f"{args[0]['status']}: {args[0]['message']}",
    "pipe.fetch_order": lambda args: {"id": args[0], "placed": "2026-01-02T00:00:00Z"},
}


async def _serve_v3(w: RawWorker, seen: list[bytes]) -> None:
    """A published (version-3) worker: no parents in the lease, plain JSON arguments only."""
    while True:
        msg = await w.read(60)
        if msg.WhichOneof("msg") != "lease":
            continue
        lease = msg.lease
        seen.append(lease.payload)
        assert not lease.parents
        args = json.loads(lease.payload)["args"]
        if lease.kind == "pipe.fetch_order" and args[0] < 0:
            w.send(fail=pb.Fail(lease=lease.lease, message=f"no order {args[0]}", permanent=True))
            continue
        out = _V3_TASKS[lease.kind](args)
        w.send(complete=pb.Complete(lease=lease.lease, output=json.dumps(out).encode(), content_type=""))


async def test_pipelines_through_a_published_worker(client: Client, server: ServerProc) -> None:
    """The published protocol (version 3) runs a 3-step chain with nested placeholders, a
    100-way fan-in and a failure mid-chain: every lease holds plain arguments."""
    raw = Raw(server.grpc)
    seen: list[bytes] = []
    w = RawWorker(raw, pool="raw", slots=2, version=3)
    serving = asyncio.create_task(_serve_v3(w, seen))
    try:
        raw_pool = {"pool": "raw"}
        a = number.options(**raw_pool).spec(2)
        b = total.options(**raw_pool).spec([a.output, a.output, 1])
        c = total.options(**raw_pool, key="v3-chain").spec([b.output, 10])
        *_, end = await app.submit_batch([a, b, c])
        assert await asyncio.wait_for(end, 60) == 15
        parts = [number.options(**raw_pool).spec(n) for n in range(100)]
        fan = total.options(**raw_pool).spec([p.output for p in parts])
        *_, fan_in = await app.submit_batch([*parts, fan])
        assert await asyncio.wait_for(fan_in, 60) == sum(range(100))
        f = fetch_order.options(**raw_pool).spec(-1)
        due = dt.datetime(2026, 1, 12, tzinfo=dt.UTC)
        r = render_invoice.options(**raw_pool).spec(f.output, due)
        seen_by = report.options(**raw_pool).spec(outcome_of(f))
        _, skipped, reported = await app.submit_batch([f, r, seen_by])
        with pytest.raises(TaskFailed) as err:
            await asyncio.wait_for(skipped, 60)
        assert err.value.status == "skipped"
        assert await asyncio.wait_for(reported, 60) == "failed: no order -1"
        assert len(seen) >= 3 + 101 + 2  # (and any task an earlier test left in this pool)
        assert not [p for p in seen if b'"$output"' in p or b'"$outcome"' in p]
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await w.close()
        await raw.close()
