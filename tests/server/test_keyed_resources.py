"""Keyed resources on a real ``cronoq serve`` (docs/concepts/resources.md#keyed-resources): the
wire keeps its ``resources`` map, so raw protobuf and the published client ask for
``"customer:42"`` unchanged; key state is rebuilt from the tasks after a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cronoq.client import Client, Worker

from .procs import Raw, ServerProc, pb, start_server

KEYED_TOML = """
[[pools]]
name = "work"
max = 8

[[pools]]
name = "idle"
max = 4

[[resources]]
name = "customer"
kind = "semaphore"
permits = 1
per_key = true

[[resources]]
name = "job"
kind = "semaphore"
permits = 1
per_key = true
on_limit = "cancel_newest"
"""


async def _status(raw: Raw, tid: int) -> pb.TaskInfo:
    return await raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=tid)))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProc]:
    sp = start_server(tmp_path, KEYED_TOML, name="keyed")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_the_published_client_runs_one_task_per_customer_at_once(server: ServerProc) -> None:
    running: dict[str, int] = {}
    peak: dict[str, int] = {}

    async def handler(lease):  # type: ignore[no-untyped-def]
        c = lease.payload.decode()
        running[c] = running.get(c, 0) + 1
        peak[c] = max(peak.get(c, 0), running[c])
        await asyncio.sleep(0.05)
        running[c] -= 1

    async with Client(server.grpc) as client, Worker(server.grpc, "work", handler, slots=6):
        subs = [
            await client.submit(c.encode(), pool="work", resources={f"customer:{c}": 1}) for c in "aaabbbc"
        ]
        for s in subs:
            assert (await client.wait(s.id, timeout=30)).status == "succeeded"
    assert peak == {"a": 1, "b": 1, "c": 1}


async def test_raw_protobuf_keys_policies_and_bad_asks(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        spec = pb.TaskSpec(pool="idle", resources={"job:nightly": 1})
        first = await raw.tasks.Submit(pb.SubmitRequest(task=spec))
        second = await raw.tasks.Submit(pb.SubmitRequest(task=spec))
        info = await _status(raw, second.id)
        assert info.status == pb.TASK_STATUS_CANCELLED
        assert "job:nightly" in info.message and "cancel_newest" in info.message
        assert (await _status(raw, first.id)).status == pb.TASK_STATUS_READY
        for bad in ("job", "job:", "nope:1"):
            with pytest.raises(grpc.aio.AioRpcError) as ei:
                await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="idle", resources={bad: 1})))
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert bad.partition(":")[0] in (ei.value.details() or "")
    finally:
        await raw.close()


async def test_key_state_is_rebuilt_after_a_restart(tmp_path: Path) -> None:
    sp = start_server(tmp_path, KEYED_TOML, name="keyed")
    raw = Raw(sp.grpc)
    try:
        spec = pb.TaskSpec(pool="idle", resources={"job:sync": 1})
        kept = (await raw.tasks.Submit(pb.SubmitRequest(task=spec))).id
    finally:
        await raw.close()
        assert sp.terminate() == 0, sp.log()
    sp = start_server(tmp_path, KEYED_TOML, name="keyed")
    raw = Raw(sp.grpc)
    try:
        spec = pb.TaskSpec(pool="idle", resources={"job:sync": 1})
        again = (await raw.tasks.Submit(pb.SubmitRequest(task=spec))).id
        assert (await _status(raw, again)).status == pb.TASK_STATUS_CANCELLED, "the recovered task holds it"
        assert (await _status(raw, kept)).status == pb.TASK_STATUS_READY
    finally:
        await raw.close()
        assert sp.terminate() == 0, sp.log()
