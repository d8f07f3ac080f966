"""The dashboard's keyed-resources panel (docs/concepts/resources.md#keyed-resources), in a
real browser: the gauges of each keyed resource under the pools, and its busiest keys on demand."""

from __future__ import annotations

import contextlib

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from .test_dashboard import browser_page, http_server, needs_browser  # noqa: E402

with contextlib.suppress(ImportError):  # (needs_browser skips without it)
    from playwright.async_api import expect

pytestmark = needs_browser

KEYED = '[[resources]]\nname = "customer"\nkind = "semaphore"\npermits = 1\nper_key = true\n'


async def test_keyed_resources_panel_lists_the_busiest_keys() -> None:
    async with (
        http_server(KEYED) as (_app, url),
        httpx.AsyncClient(base_url=url, timeout=10) as c,
        browser_page(url) as (page, console),
    ):
        for key, n in (("acme", 3), ("zeta", 1)):
            for _ in range(n):
                r = await c.post("/v1/tasks", json={"resources": {f"customer:{key}": 1}})
                assert r.status_code == 200, r.text
        await page.goto(url + "/")
        panel = page.locator("#resources-panel")
        await expect(panel).to_be_visible()
        row = panel.locator("table.res-gauges tbody tr").first
        await expect(row.locator("td").nth(2)).to_have_text("2")  # live keys
        await expect(row.locator("td").nth(3)).to_have_text("4")  # waiting units
        await row.get_by_role("button", name="Busiest keys").click()
        keys = page.locator("#resource-keys tbody tr")
        await expect(keys).to_have_count(2)
        await expect(keys.first.locator("td").first).to_have_text("acme")
        await expect(keys.first.locator("td").nth(2)).to_have_text("3")
        assert console.errors == []
