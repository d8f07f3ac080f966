"""The dashboard's task detail for a pipeline (docs/concepts/dependencies.md#outputs-on-edges),
in headless Chromium against a real ServerApp (the harness of test_dashboard.py): a child whose
payload holds placeholders lists which argument comes from which parent, each parent a link
that opens it, and the outcomes its parents ended with. Without a browser, the same facts are
checked on the JSON of ``GET /v1/tasks/{ref}``."""

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

DECLINED = "card declined"


def handler(msg: Any) -> Any:
    if json.loads(msg.payload or b"null") == {"op": "fail"}:
        return ("fail", DECLINED, True)
    return ("complete", msg.payload, msg.content_type)


async def pipeline(c: Any) -> dict[str, str]:
    """Two parents on ``default`` (one succeeds, one fails) and a named child on ``other``,
    which has no worker: it waits, holding its placeholders. Returns ids by key."""
    child = {
        "kind": "shop.render_invoice",
        "key": "invoice-42",
        "pool": "other",
        "after": ["order-42"],
        "deps": [{"target": "charge-42", "cond": "complete"}],
        "payload": {"args": [{"$output": 0}], "kwargs": {"charge": {"$outcome": 1}}},
    }
    body = {
        "tasks": [
            {"key": "order-42", "payload": {"id": 42}},
            {"key": "charge-42", "payload": {"op": "fail"}},
            child,
        ]
    }
    r = await c.post("/v1/tasks:batch", json=body)
    assert r.status_code in (200, 201), r.text
    ids = {t["key"]: str(made["id"]) for t, made in zip(body["tasks"], r.json()["tasks"])}
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        statuses = [(await c.get(f"/v1/tasks/{k}")).json()["status"] for k in ("order-42", "charge-42")]
        if statuses == ["succeeded", "failed"]:
            return ids
        assert asyncio.get_running_loop().time() < deadline, statuses
        await asyncio.sleep(0.02)


async def test_the_json_says_which_argument_comes_from_which_parent() -> None:
    async with http_server() as (app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        w = FakeWorker(app, handler=handler)
        ids = await pipeline(c)
        detail = (await c.get("/v1/tasks/invoice-42")).json()
        assert detail["arguments"] == [
            {"path": "args[0]", "mode": "output", "edge": 0, "task_id": ids["order-42"]},
            {"path": "kwargs.charge", "mode": "outcome", "edge": 1, "task_id": ids["charge-42"]},
        ]
        assert [(p["id"], p["status"], p["message"]) for p in detail["parent_outcomes"]] == [
            (ids["order-42"], "succeeded", ""),
            (ids["charge-42"], "failed", DECLINED),
        ]
        await w.close()


@needs_browser
async def test_the_task_detail_links_arguments_to_parents(tmp_path: Path) -> None:
    async with http_server() as (app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        w = FakeWorker(app, handler=handler)
        ids = await pipeline(c)
        async with browser_page(url) as (page, console):
            await open_tasks(page, url)
            await page.get_by_role("button", name=f"Open task {ids['invoice-42']}", exact=True).first.click()
            dialog = page.get_by_role("dialog")
            args = dialog.get_by_role("list", name="Arguments taken from parents").get_by_role("listitem")
            await expect(args).to_have_count(2)
            await expect(args.nth(0)).to_have_text(f"args[0] ← output of {ids['order-42']}")
            await expect(args.nth(1)).to_have_text(f"kwargs.charge ← outcome of {ids['charge-42']}")
            received = dialog.get_by_role("list", name="Outcomes received from the parents")
            outcomes = received.get_by_role("listitem")
            await expect(outcomes).to_have_count(2)
            await expect(outcomes.nth(0)).to_have_text(f"{ids['order-42']} succeeded")
            await expect(outcomes.nth(1)).to_have_text(f"{ids['charge-42']} failed · {DECLINED}")
            await page.screenshot(path=str(tmp_path / "dashboard-pipeline.png"), full_page=True)
            # each argument's parent is a link that opens that parent's detail
            await args.nth(1).get_by_role("button", name=f"Open parent task {ids['charge-42']}").click()
            await expect(page.locator("#task-title")).to_contain_text(f"Task {ids['charge-42']}")
            await expect(dialog.locator("#detail-status")).to_have_text("failed")
            assert console.errors == []
        await w.close()
