"""A finished task after the engine's retention (``cronoq.server.task_history``): with a durable
store, ``GET /v1/tasks/{id}`` and ``/result`` answer from the store's history (kept for
``store.keep_finished_s``), on SQLite and on PostgreSQL; another tenant's task stays unknown.
Lookups by key read the newest finished row of that key; a replay of such a task (HTTP, gRPC
and the dashboard, in Chromium) rebuilds it from the history."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from .procs import postgres_store
from .test_dashboard import browser_page, http_server, needs_browser, open_tasks
from .test_dashboard_ops import Dialogs
from .test_http_support import CLIENT, TENANT, TOKENS, FakeWorker, bearer, serve

with __import__("contextlib").suppress(ImportError):  # (needs_browser skips without it)
    from playwright.async_api import expect

LIMITS = '[limits]\nkey_retention_s = 0.2\n\n[[pools]]\nname = "default"\n\n[[pools]]\nname = "other"\n'


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f'[store]\nkind = "sqlite"\npath = "{tmp_path / "h.db"}"\n'
        return
    async with postgres_store("cronoq_h") as body:
        yield "[store]\n" + body


async def forgotten(app: Any, tid: int) -> None:
    """Until the engine no longer retains task ``tid`` (its retention is 0.2 s)."""
    deadline = asyncio.get_running_loop().time() + 10
    while app.lookup(tid) is not None:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)


async def test_get_and_result_read_the_store_after_the_engines_retention(store: str) -> None:
    async with serve(TOKENS, base=store + LIMITS) as (app, c):
        c.headers.update(bearer(CLIENT))
        FakeWorker(app)
        r = await c.post("/v1/tasks?wait=true", json={"key": "report-3am", "payload": {"n": 7}})
        assert r.status_code == 200, r.text
        tid = r.json()["id"]
        body = {"start_in_s": 3600, "kind": "nightly", "tags": {"team": "ops"}, "retry": {"max_attempts": 5}}
        failed = (await c.post("/v1/tasks", json=body)).json()["id"]
        live = (await c.get(f"/v1/tasks/{failed}")).json()
        assert (await c.post(f"/v1/tasks/{failed}/cancel")).json() == {"cancelled": True}
        await forgotten(app, int(tid))
        await forgotten(app, int(failed))
        info = (await c.get(f"/v1/tasks/{tid}")).json()
        assert (info["id"], info["status"], info["key"], info["output_available"]) == (
            tid,
            "succeeded",
            "report-3am",
            True,
        )
        assert info["finished_unix_ns"] >= info["created_unix_ns"] > 0
        res = (await c.get(f"/v1/tasks/{tid}/result")).json()
        assert (res["status"], res["output"], res["content_type"]) == (
            "succeeded",
            {"n": 7},
            "application/json",
        )
        info = (await c.get(f"/v1/tasks/{failed}")).json()
        assert info["status"] == "cancelled" and info["output_available"] is False
        # what the row records of its definition, as the engine answered it while retained
        fields = ("kind", "name", "tags", "max_attempts", "priority", "tenant")
        assert {f: info[f] for f in fields} == {f: live[f] for f in fields}
        assert (info["name"], info["tags"], info["max_attempts"]) == ("nightly", {"team": "ops"}, 5)
        first = (await c.get(f"/v1/tasks/{tid}")).json()  # the pool's retry policy: 3 attempts
        assert (first["max_attempts"], first["tags"], first["name"]) == (3, {}, "")
        # by key too: the newest finished row of that key and tenant (an index lookup)
        assert (await c.get("/v1/tasks/report-3am")).json()["id"] == tid
        res = (await c.get("/v1/tasks/report-3am/result")).json()
        assert (res["id"], res["output"]) == (tid, {"n": 7})
        r = await c.get("/v1/tasks/report-3am", headers=bearer(TENANT))
        assert r.status_code == 404  # another tenant's key
        # the key is free in the engine: a new task takes it, and lookups find that one
        r = await c.post("/v1/tasks", json={"key": "report-3am", "start_in_s": 3600})
        assert r.json()["duplicate"] is False
        assert (await c.get("/v1/tasks/report-3am")).json()["id"] == r.json()["id"]
        # another tenant's task stays unknown, in the history too
        r = await c.get(f"/v1/tasks/{tid}", headers=bearer(TENANT))
        assert r.status_code == 404 and r.json()["code"] == "not_found"
        r = await c.get(f"/v1/tasks/{tid}/result", headers=bearer(TENANT))
        assert r.status_code == 404


async def test_grpc_get_reads_the_history_too(tmp_path: Path) -> None:
    """``cronoq get ID`` (gRPC ``Get``) on a real ``cronoq serve`` with a SQLite store."""
    from cronoq.client import Client

    from .procs import start_server

    sp = start_server(tmp_path, LIMITS, name="history")
    try:
        async with Client(sp.grpc) as c:
            h = await c.submit(b"x", key="nightly", start_in=3600)
            assert await c.cancel(h.id)
            deadline = asyncio.get_running_loop().time() + 10
            while (await c.list_tasks()).tasks:  # until the engine forgot it (listings: the engine's)
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.05)
            assert (await c.get("nightly")).id == h.id  # by key too, from the history
            info = await c.get(h.id)
            assert (info.id, info.status, info.key) == (h.id, "cancelled", "nightly")
            r = await c.wait(h.id, timeout=1)
            assert (r.id, r.status, r.output_available) == (h.id, "cancelled", False)
            replay = await c.replay(h.id)  # gRPC Replay (``cronoq replay ID``) from the history
            info = await c.get("nightly")  # the key moved to the replay
            assert (info.id, info.replay_of, info.status) == (replay.id, h.id, "ready")  # (no worker)
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_replay_reads_the_store_after_the_engines_retention(store: str) -> None:
    """``POST /v1/tasks/{id}/replay`` of a forgotten task: its definition and payload from the
    store's history, the ``replay_of`` link, its key moved to the replay."""
    async with serve(TOKENS, base=store + LIMITS) as (app, c):
        c.headers.update(bearer(CLIENT))
        body = {"key": "mail-9", "payload": {"n": 9}, "start_in_s": 3600, "tags": {"team": "ops"}}
        tid = (await c.post("/v1/tasks", json=body)).json()["id"]
        assert (await c.post(f"/v1/tasks/{tid}/cancel")).json() == {"cancelled": True}
        await forgotten(app, int(tid))
        r = await c.post(f"/v1/tasks/{tid}/replay", headers=bearer(TENANT))
        assert r.status_code == 404  # another tenant's task stays unknown
        r = await c.post(f"/v1/tasks/{tid}/replay")
        assert r.status_code == 200, r.text
        rid = r.json()["id"]
        FakeWorker(app)
        res = (await c.get(f"/v1/tasks/{rid}/result?timeout=10")).json()
        assert (res["status"], res["output"]) == ("succeeded", {"n": 9})
        info = (await c.get("/v1/tasks/mail-9")).json()  # the key moved to the replay
        assert (info["id"], info["replay_of"], info["tags"]["team"]) == (rid, tid, "ops")
        # a bulk replay pages through the history too: the original has a replay, not matched
        body = {"filter": {"tags": {"team": "ops"}}, "request_key": "r1"}
        assert (await c.post("/v1/tasks:replay", json=body)).json() == {"matched": 0, "acted": 0}
        body["force"] = True
        assert (await c.post("/v1/tasks:replay", json=body | {"request_key": "r2"})).json()["acted"] == 2
        r = await c.post("/v1/tasks/123456789/replay")
        assert r.status_code == 404 and "store.keep_finished_s, 604800 s" in r.text


async def test_a_replayed_callback_gets_its_parents_outputs_from_the_history(store: str) -> None:
    """A chord callback failed at 03:00, replayed at 09:00 over HTTP: the replay carries no
    edges, but the markers of its payload take its parents' outputs, read from the store's
    history once the engine has forgotten them (issue #34)."""
    seen: list[Any] = []

    def handler(msg: Any) -> Any:
        body = json.loads(msg.payload)
        seen.append(body)
        if "sum" in body and len(seen) == 3:  # the callback's first run: it fails
            return ("fail", "database down at 03:00", True)
        return ("complete", msg.payload, msg.content_type)

    async with serve(TOKENS, base=store + LIMITS) as (app, c):
        c.headers.update(bearer(CLIENT))
        w = FakeWorker(app, handler=handler, slots=1)
        parts = [{"payload": {"v": n}, "key": f"part-{n}"} for n in (1, 2)]
        callback = {"payload": {"sum": [{"$output": 0}, {"$output": 1}]}, "after": ["part-1", "part-2"]}
        r = await c.post("/v1/tasks:batch", json={"tasks": [*parts, callback]})
        ids = [t["id"] for t in r.json()["tasks"]]
        res = (await c.get(f"/v1/tasks/{ids[2]}/result", params={"timeout": 10})).json()
        assert (res["status"], res["message"]) == ("failed", "database down at 03:00"), res
        for tid in ids:
            await forgotten(app, int(tid))
        r = await c.post(f"/v1/tasks/{ids[2]}/replay")
        assert r.status_code == 200, r.text
        res = (await c.get(f"/v1/tasks/{r.json()['id']}/result", params={"timeout": 10})).json()
        assert (res["status"], res["output"]) == ("succeeded", {"sum": [{"v": 1}, {"v": 2}]}), res
        assert seen[-1] == {"sum": [{"v": 1}, {"v": 2}]}  # plain arguments, as the first run had
        await w.close()


@needs_browser
async def test_the_dashboard_shows_and_replays_a_task_from_the_history(tmp_path: Path) -> None:
    """The person on call opens a failed task the engine no longer retains (a link kept from an
    alert): its detail comes from the store's history, and Replay works from there."""
    httpx = pytest.importorskip("httpx")
    base = f'[store]\nkind = "sqlite"\npath = "{tmp_path / "d.db"}"\n' + LIMITS
    async with http_server(base=base) as (app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        w = FakeWorker(app, handler=lambda lease: ("fail", "upstream down at 03:00", True))
        tid = (await c.post("/v1/tasks", json={"key": "report-3am", "payload": {"n": 3}})).json()["id"]
        res = (await c.get(f"/v1/tasks/{tid}/result", params={"timeout": 5})).json()
        assert res["status"] in ("failed", "dead_lettered"), res
        await w.close()
        await forgotten(app, int(tid))
        async with browser_page(url) as (page, console):
            Dialogs(page)
            await open_tasks(page, url)
            await page.goto(f"{url}/#tasks/{tid}")
            dialog = page.locator("#task-dialog")
            await expect(page.locator("#task-title")).to_contain_text(f"Task {tid}")
            await expect(dialog).to_contain_text("report-3am")
            await expect(dialog).to_contain_text("upstream down at 03:00")
            await dialog.get_by_role("button", name=f"Replay task {tid}").click()
            await expect(dialog).to_contain_text("Replay of")
            await expect(dialog.get_by_role("button", name=f"Open the original task {tid}")).to_be_visible()
            assert console.errors == []
