"""The dashboard for the person on call (docs/getting-started/dashboard.md#why-a-task-waits), in
headless Chromium against a real ServerApp (the harness of test_dashboard.py): task rows show
key, name, customer tags and one line saying why a task waits (a resource at its limit, a
paused pool, no connected worker serving its kind) or why it failed; a task's
detail says why it is not running and summarises a wide fan-in by status; the Pools view splits
pending into ready and the rest and lists each resource's use; recurring times are in the
schedule's own zone; nothing overflows a 1400 px window. Without a browser, the same facts are
checked on the JSON (``waiting``, ``tags``, ``parent_statuses``, ``resources``) and /metrics."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from .test_dashboard import browser_page, expect, http_server, needs_browser, open_tasks  # noqa: E402
from .test_http_support import FakeWorker  # noqa: E402

EXTRA = """
[[pools]]
name = "deploy"

[[resources]]
name = "customer:42"
kind = "semaphore"
permits = 1
"""
#: parents of the callback: a 300-way chord, on the default limits (limits.max_deps is 1024),
#: far more than the graph draws
FAN_IN = 300
UNSERVED = "no connected worker serves task 'shop.charge'"
DECLINED = "card declined: insufficient funds\nTraceback (most recent call last): ..."


def handler(msg: Any) -> Any:
    body = json.loads(msg.payload or b"null")
    op = body.get("op") if isinstance(body, dict) else None
    if op == "hold":
        return None  # keeps its slot (and its resource) until the test ends
    if op == "fail":
        return ("fail", DECLINED, True)
    return ("complete", msg.payload, msg.content_type)


async def until(check: Any, what: str, timeout: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await check()
        if got:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def scenario(app: Any, c: Any) -> dict[str, str]:
    """Work in every state the person on call asks about; returns ids by name."""
    ids: dict[str, str] = {}

    async def submit(name: str, **task: Any) -> None:
        r = await c.post("/v1/tasks", json=task)
        assert r.status_code in (200, 201), r.text
        ids[name] = str(r.json()["id"])

    # first (so the rows below are the newest, on the task list's first page), a chord: parents
    # and callback in one atomic batch (two parents fail, so it is skipped)
    parts = [{"payload": {"op": "fail" if n < 2 else "ok"}, "key": f"part-{n}"} for n in range(FAN_IN)]
    callback = {"payload": {}, "key": "sum-parts", "after": [f"part-{n}" for n in range(FAN_IN)]}
    r = await c.post("/v1/tasks:batch", json={"tasks": [*parts, callback]})
    assert r.status_code in (200, 201), r.text
    ids["callback"] = str(r.json()["tasks"][-1]["id"])
    await until(lambda: _status(c, "sum-parts", "skipped"), "the callback to be skipped", 60)
    await until(lambda: _parents_done(c), "every parent to finish", 60)
    tags = {"customer": "42", "order": "A-1001"}
    await submit("holder", payload={"op": "hold"}, key="export-42-a", resources={"customer:42": 1}, tags=tags)
    await until(lambda: _status(c, "export-42-a", "running"), "the holder to run")
    await submit("waiter", payload={"op": "hold"}, key="export-42-b", resources={"customer:42": 1}, tags=tags)
    await submit("failed", payload={"op": "fail"}, key="charge-7", kind="shop.charge", tags={"customer": "7"})
    assert (await c.post("/v1/pools/other/pause")).status_code == 200
    await submit("paused", payload={}, pool="other", key="paused-1")
    # a rolling deploy: the only worker of pool "deploy" is of the release without shop.charge
    app.registry.register("deploy", "v1", {}, 1, kinds=frozenset({"shop.refund"}))
    await submit("unserved", payload={}, pool="deploy", kind="shop.charge", key="charge-new")
    nightly = {"cron": "0 3 * * *", "tz": "Asia/Tokyo", "task": {"kind": "backup"}}
    r = await c.put("/v1/recurring/nightly", json=nightly)
    assert r.status_code == 200, r.text
    return ids


async def _parents_done(c: Any) -> bool:
    counts = (await c.get("/v1/tasks/sum-parts")).json()["parent_statuses"]
    return {k: int(v) for k, v in counts.items()} == {"succeeded": FAN_IN - 2, "failed": 2}


async def _status(c: Any, ref: str, status: str) -> bool:
    r = await c.get(f"/v1/tasks/{ref}")
    return r.status_code == 200 and r.json()["status"] == status


async def test_the_json_says_why_and_what() -> None:
    async with http_server(EXTRA) as (app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        w = FakeWorker(app, handler=handler)
        await scenario(app, c)
        waiter = (await c.get("/v1/tasks/export-42-b")).json()
        assert waiter["status"] == "ready"
        assert waiter["waiting"] == "resource 'customer:42' at its limit (1 of 1 in use)"
        assert waiter["tags"] == {"customer": "42", "order": "A-1001"}
        paused = (await c.get("/v1/tasks/paused-1")).json()
        assert paused["waiting"] == "pool 'other' is paused"
        unserved = (await c.get("/v1/tasks/charge-new")).json()
        assert unserved["status"] == "ready" and unserved["waiting"] == UNSERVED
        assert (await c.get("/v1/tasks/export-42-a")).json().get("waiting", "") == ""
        cb = (await c.get("/v1/tasks/sum-parts")).json()
        assert {k: int(v) for k, v in cb["parent_statuses"].items()} == {"succeeded": FAN_IN - 2, "failed": 2}
        assert len(cb["parents"]) == FAN_IN and cb["message"].startswith("dependency ")
        snap = (await c.get("/v1/snapshot")).json()
        (res,) = snap["resources"]
        assert res["name"] == "customer:42" and res["kind"] == "semaphore"
        assert [int(res[k]) for k in ("capacity", "in_use", "waiting")] == [1, 1, 1]
        default = next(p for p in snap["pools"] if p["name"] == "default")
        assert int(default["ready"]) == 1  # the waiter: ready, held back by the resource
        metrics = (await c.get("/metrics")).text
        assert 'cronoq_resource_in_use{resource="customer:42"} 1.0' in metrics
        assert 'cronoq_resource_waiting{resource="customer:42"} 1.0' in metrics
        assert 'cronoq_resource_capacity{resource="customer:42"} 1.0' in metrics
        await w.close()


@needs_browser
async def test_the_dashboard_for_the_person_on_call(tmp_path: Path) -> None:
    async with http_server(EXTRA) as (app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        w = FakeWorker(app, handler=handler)
        ids = await scenario(app, c)
        async with browser_page(url, width=1400, height=900) as (page, console):
            await open_tasks(page, url)
            waiter = page.locator('#tasks-body tr[data-key="export-42-b"]')
            await waiter.wait_for()
            cells = waiter.locator("td")
            # Key and Name are two columns; the tags are the customer's; one line says why
            assert await cells.nth(2).inner_text() == "export-42-b"
            assert await cells.nth(3).inner_text() == "–"
            assert "customer=42" in await cells.nth(4).inner_text()
            note = waiter.locator(".row-note")
            assert await note.get_attribute("data-note") == "waiting"
            assert await note.inner_text() == "resource 'customer:42' at its limit (1 of 1 in use)"
            failed = page.locator('#tasks-body tr[data-key="charge-7"]')
            assert await failed.locator("td").nth(3).inner_text() == "named shop.charge"
            fnote = failed.locator(".row-note")
            assert await fnote.inner_text() == "card declined: insufficient funds"  # its first line
            assert await fnote.get_attribute("title") == DECLINED
            paused = page.locator('#tasks-body tr[data-key="paused-1"] .row-note')
            assert await paused.inner_text() == "pool 'other' is paused"
            unserved = page.locator('#tasks-body tr[data-key="charge-new"] .row-note')
            assert await unserved.inner_text() == UNSERVED
            assert await overflow(page, "#view-tasks .table-wrap") == 0, "the task table fits 1400 px"
            assert await clipped(page) == [], "the Tasks view fits 1400 px"
            await page.screenshot(path=str(tmp_path / "oncall-tasks.png"), full_page=True)

            # the callback's detail: a summary of every parent, nodes named by key
            await page.get_by_role("button", name=f"Open task {ids['callback']}", exact=True).first.click()
            dialog = page.get_by_role("dialog")
            summary = dialog.locator('.dep-summary[data-side="parents"]')
            await summary.wait_for()
            want = f"{FAN_IN} parents: {FAN_IN - 2} succeeded, 2 failed (12 drawn)"
            assert await summary.inner_text() == want
            assert "more not drawn" not in await dialog.inner_text()
            await page.wait_for_function(
                "[...document.querySelectorAll('.dep-node .dep-id')].some((t) => t.textContent === 'part-0')"
            )
            labels = await dialog.locator(".dep-node .dep-id").all_text_contents()
            assert "sum-parts" in labels and "part-0" in labels, labels
            assert await clipped(page) == [], "the task's detail fits 1400 px"
            await page.screenshot(path=str(tmp_path / "oncall-detail.png"), full_page=True)
            await dialog.get_by_role("button", name="Close task details").click()

            # the waiter's detail says why it is not running
            await page.get_by_role("button", name=f"Open task {ids['waiter']}", exact=True).first.click()
            why = dialog.locator("#detail-waiting")
            assert await why.inner_text() == "resource 'customer:42' at its limit (1 of 1 in use)"
            await dialog.get_by_role("button", name="Close task details").click()
            await expect(dialog).to_be_hidden()
            assert console.errors == []

            # Pools: pending split and the resources' use
            await page.goto(url + "/#pools")
            split = page.locator('article.pool[data-pool="default"] [data-stat="pending-split"]')
            await split.wait_for(state="attached")
            await page.wait_for_function(
                'document.querySelector(\'article.pool[data-pool="default"] [data-stat="pending-split"]\')'
                ".textContent.startsWith('1 ready')"
            )
            row = page.locator('#resources-body tr[data-resource="customer:42"]')
            await row.wait_for()
            assert await row.locator("td").all_inner_texts() == ["customer:42", "semaphore", "1 of 1", "1"]
            assert await clipped(page) == [], "the Pools view fits 1400 px"
            await page.screenshot(path=str(tmp_path / "oncall-pools.png"), full_page=True)

            # Recurring: the next run in the schedule's own zone; the next occurrence's task
            await page.goto(url + "/#recurring")
            sched = page.locator('#recurring-body tr[data-name="nightly"]')
            await sched.wait_for()
            assert " 03:00 " in await sched.locator("td.c-next").inner_text()
            header = await page.locator("#view-recurring thead").inner_text()
            assert "Next occurrence" in header and "Last task" not in header
            assert await page.get_by_role("button", name="Open the next occurrence of nightly").count() == 1
            assert await overflow(page, "#view-recurring .table-wrap") == 0, "the schedules fit 1400 px"
            assert await clipped(page) == [], "the Recurring view fits 1400 px"
            await page.goto(url + "/#workers")
            await page.locator("#view-workers tbody tr").first.wait_for()
            assert await clipped(page) == [], "the Workers view fits 1400 px"
            await page.screenshot(path=str(tmp_path / "oncall-recurring.png"), full_page=True)
            assert console.errors == []
        await w.close()


async def overflow(page: Any, selector: str) -> int:
    """How many pixels the element's content is wider than the element (0: nothing clipped)."""
    return int(await page.eval_on_selector(selector, "el => Math.max(0, el.scrollWidth - el.clientWidth)"))


async def clipped(page: Any) -> list[str]:
    """The visible elements of the page whose content is cut or scrolls sideways: the page
    itself, and any element narrower than its content whose overflow hides or scrolls it
    (a cell whose text ends in an ellipsis on purpose, with its title, and text for screen
    readers only are not counted)."""
    return list(
        await page.evaluate(
            """() => {
            const out = [];
            const doc = document.documentElement;
            if (doc.scrollWidth > doc.clientWidth) out.push(`page ${doc.scrollWidth} > ${doc.clientWidth}`);
            for (const el of document.querySelectorAll("body *")) {
              if (!el.offsetParent && getComputedStyle(el).position !== "fixed") continue;
              const cs = getComputedStyle(el);
              if (cs.overflowX === "visible" || cs.textOverflow === "ellipsis") continue;
              if (el.classList.contains("sr-only")) continue; // (for screen readers: 1 px on purpose)
              if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
                const name = `${el.tagName.toLowerCase()}#${el.id}.${el.className}`;
                out.push(`${name} ${el.scrollWidth} > ${el.clientWidth}`);
              }
            }
            return out;
          }"""
        )
    )
