"""Keyed resources on a real ``cronoq serve`` (docs/concepts/resources.md#keyed-resources): the
wire keeps its ``resources`` map, so raw protobuf and the published client ask for
``"customer:42"`` unchanged; key state is rebuilt from the tasks after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cronoq.client import Client, ClientError, Worker

from .procs import Raw, ServerProc, http_call, pb, postgres_store, start_server

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


async def test_a_key_over_the_label_length_limit_is_refused_on_every_entry(server: ServerProc) -> None:
    """#30: a key is "any non-empty string up to the server's label length limit"
    (``limits.max_label_len``, default 1024): longer, INVALID_ARGUMENT / 400 ``invalid`` naming
    the resource, from raw gRPC, the Client, HTTP and a batch; nothing is submitted."""
    message = "resource 'customer': key is longer than 1024 characters (limits.max_label_len)"
    longest, over = {"customer:" + "k" * 1024: 1}, {"customer:" + "k" * 1025: 1}
    raw = Raw(server.grpc)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="idle", resources=over)))
        assert (ei.value.code(), ei.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
        batch = pb.SubmitBatchRequest(
            tasks=[pb.TaskSpec(pool="idle", key="keyed-ok"), pb.TaskSpec(pool="idle", resources=over)]
        )
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.tasks.SubmitBatch(batch)
        assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in (ei.value.details() or "")
        async with Client(server.grpc) as client:
            with pytest.raises(ClientError) as ce:
                await client.submit(None, pool="idle", resources=over)
            assert ce.value.code == "invalid_argument" and message in str(ce.value)
            with pytest.raises(ClientError) as ce:  # the batch was refused whole
                await client.get("keyed-ok")
            assert ce.value.code == "not_found"
            ok = await client.submit(None, pool="idle", resources=longest)  # the limit itself fits
            assert (await client.get(ok.id)).status == "ready"
    finally:
        await raw.close()
    body = json.dumps({"pool": "idle", "resources": over}).encode()
    status, answer = await asyncio.to_thread(
        http_call, f"http://{server.http}/v1/tasks", body, {"content-type": "application/json"}
    )
    assert (status, answer) == (400, {"error": message, "code": "invalid"})


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


RATED_TOML = """
[[pools]]
name = "work"
max = 4

[[resources]]
name = "api"
kind = "token_bucket"
rate = 0.001
burst = 1
per_key = true
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_keyed_rate_holds_across_a_server_killed_and_restarted(tmp_path: Path, kind: str) -> None:
    """#30: "recovery (key state rebuilt from the tasks after a restart or failover)": a key's
    token, spent before the server was SIGKILLed, is still spent after the restart (one per
    1,000 s here); another key is not held back."""

    async def handler(lease):  # type: ignore[no-untyped-def]
        return lease.payload

    async with contextlib.AsyncExitStack() as stack:
        store = await stack.enter_async_context(postgres_store("cronoq_rate")) if kind == "postgres" else None
        first = start_server(tmp_path, RATED_TOML, name="rated", store=store)
        try:
            async with Client(first.grpc) as client, Worker(first.grpc, "work", handler, slots=2):
                spent = await client.submit(b"1", pool="work", resources={"api:k": 1})
                assert (await client.wait(spent.id, timeout=30)).status == "succeeded"
        finally:
            first.kill()
        second = start_server(tmp_path, RATED_TOML, name="rated", db_path=first.db_path, store=store)
        try:
            async with Client(second.grpc) as client, Worker(second.grpc, "work", handler, slots=2):
                held = await client.submit(b"2", pool="work", resources={"api:k": 1})
                other = await client.submit(b"3", pool="work", resources={"api:other": 1})
                assert (await client.wait(other.id, timeout=30)).status == "succeeded"
                info = await client.get(held.id)  # (submitted first: a full bucket would have run it first)
                assert info.status == "ready", info
                assert "api:k" in (info.waiting or ""), info.waiting
        finally:
            assert second.terminate() == 0, second.log()


def _http_get(sp: ServerProc, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{sp.http}{path}", timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def test_gauges_and_the_busiest_keys_over_http_and_grpc(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        for key, n in (("a", 3), ("b", 1)):
            for _ in range(n):
                spec = pb.TaskSpec(pool="idle", resources={f"customer:{key}": 1})
                await raw.tasks.Submit(pb.SubmitRequest(task=spec))
        status, text = _http_get(server, "/metrics")
        assert status == 200
        assert 'cronoq_resource_keys{resource="customer"} 2.0' in text
        assert 'cronoq_resource_waiting{resource="customer"} 4.0' in text
        assert "customer:a" not in text, "no per-key series"
        status, body = _http_get(server, "/v1/resources/customer/keys?top=1")
        assert status == 200
        assert json.loads(body) == {
            "resource": "customer",
            "keys": [{"key": "a", "running": 0, "waiting": 3, "limit": 1}],
        }
        assert _http_get(server, "/v1/resources/customer/keys?top=0")[0] == 400
        assert _http_get(server, "/v1/resources/nope/keys")[0] == 404
        resp = await raw.admin.ListResourceKeys(pb.ResourceKeysRequest(resource="customer"))
        assert [(k.key, k.waiting) for k in resp.keys] == [("a", 3), ("b", 1)]
        snap = await raw.admin.Snapshot(pb.Empty())
        gauges = {g.name: (g.keys, g.waiting, g.in_use) for g in snap.resources}
        assert gauges["customer"] == (2, 4, 0)
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.admin.ListResourceKeys(pb.ResourceKeysRequest(resource="nope"))
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await raw.close()
