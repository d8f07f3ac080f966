"""Durable calls on a remote worker (worker protocol version 7, docs/how-to/durable.md#remote-workers):
a real ``cronoq serve`` and a real one-slot ``cronoq worker durable_app:app``, a sleep across a
server restart (SQLite), spawns bounded by the worker's token; and a version-6
worker still served (it never parks, and may not send durable calls)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from cronoq import TaskFailed
from cronoq.client import Client, Lease, TaskInfo, Worker, task

from .durable_app import app, approval, fanout, fickle, fickle_spawn, napper, stepper
from .procs import AUTH_TOML, TOKENS, Raw, RawWorker, ServerProc, pb, serving_app, start_server

HERE = Path(__file__).resolve().parent
CLI = (sys.executable, "-m", "cronoq.cli")

SERVER_TOML = """
[[pools]]
name = "default"

[[pools]]
name = "old"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    directory = tmp_path_factory.mktemp("durable")
    with serving_app(
        directory, SERVER_TOML, name="durable", app_ref="durable_app:app", app_dir=HERE, slots=1
    ) as (sp, _):
        yield sp


@pytest.fixture
async def client(server: ServerProc) -> AsyncIterator[Client]:
    async with Client(server.grpc) as c:
        app.bind(c)
        try:
            yield c
        finally:
            app.bind(None)


async def until(client: Client, tid: int, status: str, timeout: float = 30) -> TaskInfo:
    """The task's info once it has ``status`` (polled: the state lives in another process)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        info = await client.get(tid)
        if info.status == status:
            return info
        assert loop.time() < end, f"task {tid} still {info.status} ({info.waiting})"
        await asyncio.sleep(0.02)


async def test_a_parent_waits_for_its_children_on_a_one_slot_worker(client: Client) -> None:
    h = await fanout.submit(5)
    out = await asyncio.wait_for(h, 60)
    assert out["sum"] == sum(i * i for i in range(5)) and out["statuses"] == ["succeeded"]
    assert out["resumes"] == 1  # parked once, for the children
    info = await client.get(h.id)
    assert sorted(info.children) == sorted(out["ids"]) and info.attempt == 1


async def test_a_step_runs_once_across_resumes(client: Client) -> None:
    out = await asyncio.wait_for(await stepper.submit(3), 60)
    assert out == {"step": 41, "calls": 1, "resumes": 3}


async def test_a_durable_sleep_parks_the_task(client: Client) -> None:
    h = await napper.submit(1.5)
    info = await until(client, h.id, "scheduled")
    assert (info.waiting or "").startswith("sleeping until"), info.waiting
    assert await asyncio.wait_for(h, 60) == 1


async def test_wait_signal_gets_a_signal_sent_with_the_client(client: Client) -> None:
    h = await approval.submit("remote-approve-1")
    info = await until(client, h.id, "blocked")
    assert info.waiting == "signal 'remote-approve-1'"
    assert (await client.signal("remote-approve-1", {"ok": True})).duplicate is False
    assert await asyncio.wait_for(h, 60) == {"payload": {"ok": True}}
    await client.signal("remote-approve-2", [1, 2])  # sent before the wait: returns at once
    assert await asyncio.wait_for(await approval.submit("remote-approve-2"), 60) == {"payload": [1, 2]}
    out = await asyncio.wait_for(await approval.submit("remote-never", timeout=0.1), 60)
    assert out == {"timeout": "signal 'remote-never' did not come within the timeout"}


async def test_a_non_deterministic_replay_fails_the_task(client: Client) -> None:
    h = await fickle.submit()
    with pytest.raises(TaskFailed) as ei:
        await asyncio.wait_for(h, 60)
    info = await client.get(h.id)
    assert info.status == "failed" and info.attempt == 1
    assert (info.message or "").startswith(
        "non-deterministic replay: durable call 1 was recorded as step 's-0'"
    )
    assert "s-1" in (info.message or "") and "non-deterministic" in str(ei.value)
    h = await fickle_spawn.submit()  # the payload of its child changes: so does the fingerprint
    with pytest.raises(TaskFailed):
        await asyncio.wait_for(h, 60)
    info = await client.get(h.id)
    assert (info.message or "").startswith("non-deterministic replay: durable call 1 was recorded as spawn")


async def test_a_version_6_worker_is_still_served_and_may_not_send_durable_calls(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, "old", version=6)
        assert (await w.read()).registered.protocol_version == 6
        sub = await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="old", payload=b"x")))
        msg = await w.read()
        assert msg.lease.task_id == sub.id and msg.lease.resumes == 0
        w.send(complete=pb.Complete(lease=msg.lease.lease, output=b"ok"))
        res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=sub.id), timeout_s=10))
        assert res.status == pb.TASK_STATUS_SUCCEEDED
        # a durable call breaks a version-6 session's protocol
        sub = await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="old")))
        msg = await w.read()
        w.send(
            durable=pb.DurableCall(lease=msg.lease.lease, call=1, op="sleep_for", args_json='{"seconds": 1}')
        )
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            while True:
                await w.read()
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "version 7" in (ei.value.details() or "")
    finally:
        await raw.close()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    toml = '[[pools]]\nname = "default"\n\n[[pools]]\nname = "a"\n' + AUTH_TOML
    sp = start_server(tmp_path_factory.mktemp("durable-auth"), toml, name="durable-auth")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_a_plain_handler_spawns_within_its_tokens_pools(auth_server: ServerProc) -> None:
    seen: list[str] = []

    async def handle(lease: Lease) -> object:
        if lease.value() != "parent":
            return "child"
        with pytest.raises(LookupError, match="unknown pool 'default'"):
            await lease.spawn({"payload": 1, "pool": "default"})  # not a pool of the worker's token
        ids = await lease.spawn([task(2, pool="a")])
        seen.append(f"run {lease.resumes}")
        outs = await lease.wait_for(ids)
        return {"ids": ids, "out": [o.output for o in outs], "resumes": lease.resumes}

    async with (
        Client(auth_server.grpc, token=TOKENS["client_a"]) as c,
        Worker(auth_server.grpc, "a", handle, slots=1, token=TOKENS["worker_a"]) as w,
    ):
        await w.wait_registered(10)
        h = await c.submit("parent", pool="a")
        res = await c.wait(h.id, timeout=60)
        assert res.status == "succeeded", res
        out = res.json()
        assert out["out"] == ["child"] and out["resumes"] == 1, out
        assert seen == ["run 0", "run 1"]  # the spawn replayed: the same ids, no new child
        assert list((await c.get(h.id)).children) == out["ids"]


async def test_a_durable_call_for_a_lease_not_held_is_answered_with_an_error(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        w = RawWorker(raw, "old", version=7)
        assert (await w.read()).registered.protocol_version == 7
        w.send(durable=pb.DurableCall(lease=999, call=5, op="step", args_json='{"name": "s"}'))
        while (msg := await w.read()).WhichOneof("msg") != "durable":
            pass  # (a lease of the test above, retried after its worker broke the protocol)
        reply = msg.durable
        assert (reply.call, reply.parked, reply.error) == (5, False, "the lease is no longer held")
        await w.close()
    finally:
        await raw.close()


async def test_a_remote_durable_sleep_survives_a_server_restart(tmp_path: Path) -> None:
    calls: list[int] = []

    async def handle(lease: Lease) -> object:
        charged = await lease.step("charge", lambda: calls.append(lease.task_id) or "charged")
        await lease.sleep_for(1.5)
        return {"charged": charged, "resumes": lease.resumes}

    toml = '[[pools]]\nname = "default"\n'
    first = start_server(tmp_path, toml, name="first")
    try:
        async with Client(first.grpc) as c, Worker(first.grpc, "default", handle, slots=1) as w:
            await w.wait_registered(10)
            tid = (await c.submit(None)).id
            info = await until(c, tid, "scheduled")
            assert (info.waiting or "").startswith("sleeping until"), info.waiting
    finally:
        assert first.terminate() == 0, first.log()
    second = start_server(tmp_path, toml, name="second", db_path=first.db_path)
    try:
        async with Client(second.grpc) as c, Worker(second.grpc, "default", handle, slots=1) as w:
            await w.wait_registered(10)
            res = await c.wait(tid, timeout=60)
            assert res.status == "succeeded", res
            out = res.json()
            # the run after the restart is a resume (1); when the second server came up before
            # the sleep's end, that run parked again and the run at the end is the second (2)
            assert out["charged"] == "charged" and out["resumes"] in (1, 2), out
            assert calls == [tid]  # the step ran once, before the restart
    finally:
        assert second.terminate() == 0, second.log()
