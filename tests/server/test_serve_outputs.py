"""docs/reference/config.md#outputs: ``[outputs]`` bounds the leader's cache of recent outputs
and finished task records on a real ``cronoq serve``; an evicted output answers as a lost one
(docs/reference/behaviour.md#task-result), and a forgotten record answers from the store's
history (docs/reference/behaviour.md#ids-keys-retention)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronoq.client import Client, ClientError, Worker

from .procs import ServerProc, start_server


@pytest.fixture
def outputs_server(tmp_path: Path) -> Iterator[ServerProc]:
    body = "[outputs]\ncache_entries = 2\ncache_bytes = 1000\ninfo_entries = 4\n"
    sp = start_server(tmp_path, body)
    try:
        yield sp
    finally:
        sp.terminate()


async def echo(lease):  # type: ignore[no-untyped-def]
    return lease.payload


def http_result(sp: ServerProc, tid: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://{sp.http}/v1/tasks/{tid}/result", timeout=10) as r:
        out: dict[str, object] = json.loads(r.read())
        return out


async def test_outputs_are_evicted_oldest_first_by_count_and_bytes(outputs_server: ServerProc) -> None:
    async with Client(outputs_server.grpc) as c, Worker(outputs_server.grpc, "default", echo):
        ids = []
        for payload in (b"one", b"two", b"three"):
            sub = await c.submit(payload, wait=True, wait_timeout=20)
            assert sub.result is not None and sub.result.output == payload
            ids.append(sub.id)
        # cache_entries = 2: the first output is gone, the task is still known
        first = await c.get(ids[0])
        assert first.status == "succeeded" and not first.output_available
        res = await c.wait(ids[0], timeout=5)
        assert res.status == "succeeded" and res.output is None and not res.output_available
        assert http_result(outputs_server, ids[0])["output_available"] is False
        assert "output" not in http_result(outputs_server, ids[0])
        for tid, payload in zip(ids[1:], (b"two", b"three")):
            r = await c.wait(tid, timeout=5)
            assert r.output == payload and r.output_available
        # cache_bytes = 1000: a 960-byte output (+ its 24-byte content type) pushes out the rest
        big = await c.submit(b"x" * 960, wait=True, wait_timeout=20)
        assert big.result is not None and big.result.output == b"x" * 960
        assert not (await c.wait(ids[1], timeout=5)).output_available
        assert not (await c.wait(ids[2], timeout=5)).output_available
        assert (await c.wait(big.id, timeout=5)).output_available
        # info_entries = 4: a fifth finished task makes the server forget the first one
        last = await c.submit(b"five", wait=True, wait_timeout=20)
        assert (await c.wait(last.id, timeout=5)).output == b"five"
        # ... which then answers from the store's history (store.keep_finished_s), without
        # its attempt log, which only the engine kept
        first = await c.get(ids[0])
        assert first.status == "succeeded" and not first.attempts
        second = await c.get(ids[1])  # (still retained: the engine's record, with its attempt)
        assert second.status == "succeeded" and second.attempts
        with pytest.raises(ClientError) as ei:
            await c.get(ids[-1] + 1_000_000)
        assert ei.value.code == "not_found"


async def test_recovered_outputs_are_bounded_too(tmp_path: Path) -> None:
    sp = start_server(tmp_path, "[outputs]\ncache_entries = 10\n")
    try:
        async with Client(sp.grpc) as c, Worker(sp.grpc, "default", echo):
            ids = [(await c.submit(p, wait=True, wait_timeout=20)).id for p in (b"a", b"b", b"c")]
    finally:
        assert sp.terminate() == 0, sp.log()
    # the next leader reads the outputs back from the store, under its own bounds (oldest out)
    sp = start_server(tmp_path, "[outputs]\ncache_entries = 2\n", db_path=sp.db_path)
    try:
        async with Client(sp.grpc) as c:
            got = [await c.wait(tid, timeout=5) for tid in ids]
        assert [r.status for r in got] == ["succeeded"] * 3
        assert [r.output for r in got] == [None, b"b", b"c"]
    finally:
        assert sp.terminate() == 0, sp.log()
