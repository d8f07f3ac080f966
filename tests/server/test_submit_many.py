"""``SubmitMany`` (the coalesced submits of one Client) against a real ``cronoq serve`` with a
SQLite store: per-item results and errors in request order, a key repeated in one call, items
acknowledged only after they are durable, and the call's own limits."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from cronoq.client import Client, ClientError

from .procs import Raw, ServerProc, pb


async def test_concurrent_submits_each_get_their_answer(api_server: ServerProc, client: Client) -> None:
    payloads = [{"n": i} for i in range(40)]
    results = await asyncio.gather(
        *(client.submit(p, pool="idle", kind=f"k{p['n']}") for p in payloads),
        client.submit("x", pool="no-such-pool"),
        client.submit("y", pool="idle", priority="critical"),
        return_exceptions=True,
    )
    *subs, unknown, critical = results
    assert isinstance(unknown, ClientError) and unknown.code == "not_found"
    assert unknown.message == "unknown pool 'no-such-pool'"
    assert not isinstance(critical, BaseException)
    assert (await client.get(critical.id)).priority == "critical"
    ids = [s.id for s in subs]  # type: ignore[union-attr]
    assert len(set(ids)) == 40 and ids == sorted(ids)  # created in request order
    for i, sub in enumerate(subs):
        info = await client.get(sub.id)  # type: ignore[union-attr]
        assert (info.status, info.pool, info.kind) == ("ready", "idle", f"k{i}")  # its own spec


async def test_key_twice_in_one_call(api_server: ServerProc, client: Client) -> None:
    a, b = await asyncio.gather(client.submit(1, key="sm-dup"), client.submit(2, key="sm-dup"))
    assert a.id == b.id and not a.duplicate and b.duplicate


async def test_raw_submit_many(api_server: ServerProc, raw: Raw) -> None:
    resp = await raw.tasks.SubmitMany(
        pb.SubmitManyRequest(
            tasks=[pb.TaskSpec(pool="idle"), pb.TaskSpec(pool="nope"), pb.TaskSpec(pool="idle", key="sm-raw")]
        )
    )
    kinds = [r.WhichOneof("outcome") for r in resp.results]
    assert kinds == ["submitted", "error", "submitted"]
    assert (resp.results[1].error.code, resp.results[1].error.message) == ("not_found", "unknown pool 'nope'")
    assert resp.results[0].submitted.id < resp.results[2].submitted.id
    empty = await raw.tasks.SubmitMany(pb.SubmitManyRequest())
    assert list(empty.results) == []


async def test_submit_many_larger_than_the_batch_limit_is_refused(api_server: ServerProc, raw: Raw) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        await raw.tasks.SubmitMany(pb.SubmitManyRequest(tasks=[pb.TaskSpec(pool="idle")] * 1001))
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "limits.max_tasks_per_batch (1000)" in (ei.value.details() or "")
