"""Ids above 2**53 end to end (docs/reference/http.md#conventions): every id in every JSON body
is a decimal string, and the dashboard links each task to the right parent, child and replay.

Ids are ``epoch << 48 | seq``; every restart or failover bumps the epoch, and from epoch 32 the
ids pass 2**53, where a JSON number loses its low bits in JavaScript.  The server here runs on a
SQLite store whose fencing epoch is already 40, so its first id is ``41 << 48 | 1``.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from .test_dashboard import browser_page, http_server, needs_browser, open_tasks  # noqa: E402
from .test_http_support import serve  # noqa: E402

with __import__("contextlib").suppress(ImportError):  # (needs_browser skips without it)
    from playwright.async_api import expect

EPOCH = 40


def high_epoch_base(tmp_path: Path) -> str:
    """The config of a server whose SQLite store has seen ``EPOCH`` terms already."""
    db = tmp_path / "ids.db"
    with sqlite3.connect(db) as c:
        c.execute(
            "CREATE TABLE cronoq_leader (id INTEGER PRIMARY KEY CHECK (id = 1), "
            "epoch INTEGER NOT NULL, owner TEXT, expires_at REAL NOT NULL)"
        )
        c.execute("INSERT INTO cronoq_leader VALUES (1, ?, NULL, 0)", (EPOCH,))
    return f'[store]\nkind = "sqlite"\npath = "{db}"\n\n[[pools]]\nname = "default"\n'


def big(tid: str) -> int:
    assert isinstance(tid, str) and tid.isdigit(), tid
    n = int(tid)
    assert n > 2**53, n
    return n


async def family(c: Any) -> tuple[str, str, str, str]:
    """Parent ``a`` (held an hour), child ``b`` after it, ``x`` cancelled then replayed as ``r``."""
    a = (await c.post("/v1/tasks", json={"key": "extract", "start_in_s": 3600})).json()["id"]
    b = (await c.post("/v1/tasks", json={"key": "load", "after": [a]})).json()["id"]
    x = (await c.post("/v1/tasks", json={"key": "nightly", "start_in_s": 3600})).json()["id"]
    assert (await c.post(f"/v1/tasks/{x}/cancel")).json() == {"cancelled": True}
    r = (await c.post(f"/v1/tasks/{x}/replay")).json()["id"]
    return a, b, x, r


async def test_every_id_in_json_is_a_string(tmp_path: Path) -> None:
    async with serve(base=high_epoch_base(tmp_path)) as (_app, c):
        a, b, x, r = await family(c)
        for tid in (a, b, x, r):
            big(tid)
        assert float(int(a)) != int(a) and float(int(x)) != int(x)  # JavaScript would round them
        pa, pb_, px, pr = [(await c.get(f"/v1/tasks/{t}")).json() for t in (a, b, x, r)]
        assert pa["children"] == [b] and pb_["parents"] == [a]
        assert px["replayed_by"] == r and pr["replay_of"] == x
        assert pa["replay_of"] is None and pa["replayed_by"] is None
        listed = (await c.get("/v1/tasks", params={"limit": 2})).json()
        assert [t["id"] for t in listed["tasks"]] == [a, b] and listed["next_after"] == b
        # the OpenAPI document says so too
        schema = (await c.get("/openapi.json")).json()["components"]["schemas"]["TaskInfo"]["properties"]
        for name in ("parents", "children"):
            assert schema[name]["items"]["type"] == "string", schema[name]
        for name in ("id", "replay_of", "replayed_by"):
            assert schema[name]["type"] == "string", schema[name]
        # and the raw bytes: no id is ever a bare JSON number
        raw = (await c.get(f"/v1/tasks/{b}")).text
        assert str(int(a)) in raw and not re.search(rf"[\[:,]\s*{a}\b", raw), raw


@needs_browser
async def test_dashboard_links_ids_above_2_53(tmp_path: Path) -> None:
    base = high_epoch_base(tmp_path)
    async with http_server(base=base) as (_app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        a, b, x, r = await family(c)
        async with browser_page(url) as (page, console):
            await open_tasks(page, url)
            await page.get_by_role("button", name=f"Open task {b}").click()
            dialog = page.locator("#task-dialog")
            parent = dialog.get_by_role("button", name=re.compile(rf"^Open task {a}\b"))
            await expect(parent).to_be_visible()
            await parent.click()
            await expect(page.locator("#task-title")).to_contain_text(f"Task {a}")
            await page.goto(f"{url}/#tasks/{x}")
            await expect(page.locator("#task-title")).to_contain_text(f"Task {x}")
            await dialog.get_by_role("button", name=f"Open the replay task {r}").click()
            await expect(page.locator("#task-title")).to_contain_text(f"Task {r}")
            await dialog.get_by_role("button", name=f"Open the original task {x}").click()
            await expect(page.locator("#task-title")).to_contain_text(f"Task {x}")
            await page.screenshot(path=str(tmp_path / "dashboard-large-ids.png"), full_page=True)
            assert console.errors == []
