"""The server's history ring (``cronoq.server.history``), ``GET /v1/history`` and the list
filters the dashboard uses (``GET /v1/tasks?kind=&tag=&created_after=&created_before=``, the
same through gRPC ``ListTasks`` and ``Client.list_tasks``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

import grpc  # noqa: E402

from cronoq.client import Client  # noqa: E402
from cronoq.engine.snapshot import Snapshot  # noqa: E402
from cronoq.server import grpc_api  # noqa: E402
from cronoq.server.history import HistoryRing, PoolSample, run_sampler  # noqa: E402
from cronoq.server.http_json import parse_instant  # noqa: E402
from cronoq.testing import VirtualClock  # noqa: E402

from .test_http_support import METRICS, SCOPED, TOKENS, bearer, make_app, serve  # noqa: E402


def sample(busy: int = 0, pending: int = 0, paused: bool = False) -> PoolSample:
    return PoolSample(
        busy=busy,
        capacity=4,
        desired=4,
        held=0,
        pending=pending,
        pending_by_class=(0, 0, pending, 0),
        dispatched=0,
        succeeded=0,
        failed=0,
        paused=paused,
    )


# ---------------------------------------------------------------------------------------------
# the ring (no time involved)


def test_ring_keeps_one_point_per_second_bounded() -> None:
    ring = HistoryRing(capacity=3)
    assert ring.latest() is None and ring.since(0) == []
    assert ring.record_sample(100.2, {"a": sample(busy=1)})
    assert ring.record_sample(100.9, {"a": sample(busy=2)})  # same second: replaces
    assert len(ring) == 1 and ring.since(0)[0].pools["a"].busy == 2
    assert not ring.record_sample(99.5, {"a": sample(busy=9)})  # older than the newest: ignored
    for t in (101, 102, 103):
        ring.record_sample(t, {"a": sample(busy=t)})
    assert [p.at for p in ring.points()] == [101, 102, 103]  # the oldest fell out
    assert [p.at for p in ring.since(102)] == [102, 103]
    assert ring.since(104) == []
    point = ring.since(103)[0].as_json()
    assert point == {"at": 103, "pools": {"a": {**point["pools"]["a"], "busy": 103}}}
    assert point["pools"]["a"]["pending_by_class"] == [0, 0, 0, 0]
    assert ring.since(103)[0].as_json(lambda name: name != "a") == {"at": 103, "pools": {}}
    with pytest.raises(ValueError, match="capacity"):
        HistoryRing(capacity=0)


class _Sched:
    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.started = True
        self.calls = 0

    async def snapshot(self) -> Snapshot:
        self.calls += 1
        return Snapshot(pools=[], live_tasks=0, running=0, pending=0, totals={})


class _App:
    def __init__(self, sched: _Sched) -> None:
        self.sched = sched
        self.leading = True
        self.stopping = False


async def test_sampler_records_once_per_second_of_the_servers_clock() -> None:
    clock = VirtualClock(start=1_000.5)
    sched = _Sched(clock)
    app: Any = _App(sched)
    ring = HistoryRing()
    task = asyncio.get_running_loop().create_task(run_sampler(app, ring))
    try:
        await clock.armed()
        assert [p.at for p in ring.points()] == [1000]
        for _ in range(3):
            clock.advance(1.0)
            await clock.armed()
        assert [p.at for p in ring.points()] == [1000, 1001, 1002, 1003]
        app.leading = False  # a standby records nothing
        clock.advance(5.0)
        await clock.armed()
        assert len(ring) == 4
        app.leading = True
        clock.advance(1.0)
        await clock.armed()
        assert ring.since(0)[-1].at == 1009  # 1003.5 + 5 + 1: the next whole second
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# ---------------------------------------------------------------------------------------------
# GET /v1/history


async def test_history_endpoint() -> None:
    async with serve() as (app, c):
        now = app.sched.clock.time_ns() / 1e9
        app.history.record_sample(now + 1, {"default": sample(busy=3), "other": sample(pending=2)})
        r = await c.get("/v1/history")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["interval_s"] == 1
        last = body["points"][-1]
        assert last["pools"]["default"]["busy"] == 3 and last["pools"]["other"]["pending"] == 2
        assert set(last["pools"]["default"]) >= {
            "busy",
            "capacity",
            "pending",
            "dispatched",
            "succeeded",
            "failed",
            "paused",
        }
        assert all(isinstance(p["at"], int) for p in body["points"])
        assert (await c.get("/v1/history?seconds=60")).json()["points"][-1] == last
        for bad in ("0", "1801", "abc", "-5", "1.5"):
            r = await c.get(f"/v1/history?seconds={bad}")
            assert r.status_code == 400, bad
            assert "seconds must be an integer from 1 to 1800" in r.json()["error"]


async def test_history_sampled_by_the_server() -> None:
    async with serve() as (_app, c):

        async def first() -> None:
            while not (await c.get("/v1/history")).json()["points"]:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(first(), 10)  # the sampler runs while the server leads
        point = (await c.get("/v1/history")).json()["points"][-1]
        assert set(point["pools"]) == {"default", "other"}


async def test_history_auth() -> None:
    async with serve(TOKENS) as (app, c):
        app.history.record_sample(app.sched.clock.time_ns() / 1e9, {"default": sample(), "other": sample()})
        assert (await c.get("/v1/history")).status_code == 401
        r = await c.get("/v1/history", headers=bearer(METRICS))
        assert r.status_code == 200 and set(r.json()["points"][-1]["pools"]) == {"default", "other"}
        assert (await c.get("/v1/history", headers=bearer(SCOPED))).status_code == 403  # client role


# ---------------------------------------------------------------------------------------------
# list filters


def test_parse_instant() -> None:
    assert parse_instant("1733133600", "x") == 1_733_133_600 * 10**9
    assert parse_instant("1733133600.5", "x") == 1_733_133_600_500_000_000
    assert parse_instant("2024-12-02T10:00:00Z", "x") == 1_733_133_600 * 10**9
    assert parse_instant("2024-12-02T11:00:00+01:00", "x") == 1_733_133_600 * 10**9
    assert parse_instant("2024-12-02T11:00:00 01:00", "x") == 1_733_133_600 * 10**9  # unencoded +
    for bad in ("yesterday", "2024-12-02T10:00:00", "nan", "1e300"):
        with pytest.raises(Exception, match="x must be an RFC 3339 time"):
            parse_instant(bad, "x")


async def _seed(c: Any) -> list[dict[str, Any]]:
    specs = [
        {"kind": "mail", "tags": {"team": "a", "env": "prod"}},
        {"kind": "report", "tags": {"team": "a"}},
        {"kind": "mail", "tags": {"team": "b"}},
        {"kind": "export"},
    ]
    ids = [(await c.post("/v1/tasks", json={**s, "start_in_s": 3600})).json()["id"] for s in specs]
    return [(await c.get(f"/v1/tasks/{i}")).json() for i in ids]


async def test_list_filters_http() -> None:
    async with serve() as (_app, c):
        infos = await _seed(c)
        ids = [t["id"] for t in infos]

        async def listed(query: str) -> list[str]:
            r = await c.get(f"/v1/tasks?{query}")
            assert r.status_code == 200, r.text
            return [t["id"] for t in r.json()["tasks"]]

        assert await listed("kind=mail") == [ids[0], ids[2]]
        assert await listed("kind=mail,export") == [ids[0], ids[2], ids[3]]
        assert await listed("kind=mail&kind=report") == ids[:3]
        assert await listed("tag=team=a") == ids[:2]
        assert await listed("tag=team=a&tag=env=prod") == [ids[0]]
        assert await listed("tag=team=a&kind=report") == [ids[1]]
        assert await listed("tag=team=zz") == []
        t1 = int(infos[1]["created_unix_ns"])
        t3 = int(infos[3]["created_unix_ns"])
        after = f"{t1 // 10**9}.{t1 % 10**9:09d}"
        assert ids[1] in await listed(f"created_after={after}")
        assert await listed(f"created_before={after}&created_after={after}") == []
        iso = datetime.fromtimestamp(t3 / 1e9 + 3600, UTC).isoformat()
        assert await listed(f"created_before={iso}") == ids
        assert await listed(f"created_before={after}") == ids[:1]
        assert await listed("created_after=2000-01-01T00:00:00Z&kind=export") == [ids[3]]
        for bad, needle in (
            ("created_after=yesterday", "created_after must be an RFC 3339 time"),
            ("created_before=2024-01-01T00:00:00", "created_before must be an RFC 3339 time"),
            ("tag=team", "tag must be key=value"),
            ("tag==x", "tag must be key=value"),
            ("tag=a=1&tag=a=2", "two values"),
        ):
            r = await c.get(f"/v1/tasks?{bad}")
            assert r.status_code == 400, bad
            assert needle in r.json()["error"], r.json()


async def test_list_filters_grpc_and_client() -> None:
    app = make_app()
    await app.lead()
    server = grpc.aio.server()
    grpc_api.register(server, app)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with Client(f"127.0.0.1:{port}") as client:
            a = await client.submit(b"x", kind="mail", tags={"team": "a"}, start_in=3600)
            b = await client.submit(b"y", kind="report", tags={"team": "a", "env": "prod"}, start_in=3600)
            c = await client.submit(b"z", kind="mail", start_in=3600)
            ids = [a.id, b.id, c.id]
            assert [t.id for t in await client.list_tasks(kinds="mail")] == [ids[0], ids[2]]
            assert [t.id for t in await client.list_tasks(tags={"team": "a"})] == ids[:2]
            page = await client.list_tasks(kinds=["mail", "report"], tags={"env": "prod"})
            assert [t.id for t in page] == [ids[1]]
            info = await client.get(ids[1])
            assert info.created_at is not None
            created = info.created_at - 1e-6  # (float seconds: below the ns instant)
            got = [t.id async for t in client.iter_tasks(created_after=created, limit=1)]
            assert got == ids[1:]
            assert [t.id for t in await client.list_tasks(created_before=created)] == ids[:1]
            assert [t.id for t in await client.list_tasks(created_after=created + 3600)] == []
            with pytest.raises(ValueError, match="created_after must be an aware datetime"):
                await client.list_tasks(created_after=datetime(2024, 1, 1))
            with pytest.raises(ValueError, match="tags must be a dict"):
                await client.list_tasks(tags={"a": 1})  # type: ignore[dict-item]
    finally:
        await server.stop(None)
        await app.stop()
