"""The dashboard (docs/reference/behaviour.md#dashboard) in a real browser: headless Chromium (Debian's
``chromium`` package) driven by Playwright for Python, against uvicorn serving ``create_http_app`` in the
test's event loop with a fake worker (like test_http_real.py).

Every browser test saves screenshots under its ``tmp_path``.  Without Playwright or
``/usr/bin/chromium`` the browser tests are skipped (``.ci/run`` installs both); the static
file serving is tested without a browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from cronoq.server.dashboard import load_assets  # noqa: E402
from cronoq.server.http_api import create_http_app  # noqa: E402
from services import CHROMIUM, browser_missing, missing_service, unless_missing  # noqa: E402

from .test_http_support import ADMIN, CLIENT, TOKENS, FakeWorker, bearer, make_app, serve  # noqa: E402

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

with contextlib.suppress(ImportError):  # browser_missing() says when it is not there
    from playwright.async_api import Page, async_playwright, expect

needs_browser = unless_missing("the browser", browser_missing())


# ---------------------------------------------------------------------------------------------
# helpers


@contextlib.asynccontextmanager
async def http_server(extra: str = "", *, base: str | None = None) -> AsyncIterator[tuple[Any, str]]:
    """A led ServerApp (memory store, or the store of ``base``) served by uvicorn on a free
    loopback port."""
    app = make_app(extra) if base is None else make_app(extra, base=base)
    await app.lead()
    server = uvicorn.Server(
        uvicorn.Config(
            create_http_app(app),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
    )
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield app, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        await app.stop()


class Console:
    """Console errors and uncaught exceptions of a page."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def on_console(self, msg: Any) -> None:
        if msg.type == "error":
            self.errors.append(f"console: {msg.text}")

    def on_pageerror(self, err: Any) -> None:
        self.errors.append(f"pageerror: {err}")


@contextlib.asynccontextmanager
async def browser_page(
    url: str, *, width: int = 1280, height: int = 900
) -> AsyncIterator[tuple[Page, Console]]:
    if why := browser_missing():
        missing_service("the browser", why)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = await browser.new_context(viewport={"width": width, "height": height})
            page = await context.new_page()
            console = Console()
            page.on("console", console.on_console)
            page.on("pageerror", console.on_pageerror)
            page.set_default_timeout(10_000)
            yield page, console
            await context.close()
        finally:
            await browser.close()


async def open_tasks(page: Page, url: str) -> None:
    await page.goto(url + "/#tasks")
    await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    await expect(page.locator("#tasks-table")).to_have_attribute("aria-busy", "false")


UNNAMED_CONTROLS_JS = """
() => {
  const named = (el) => {
    if ((el.getAttribute('aria-label') || '').trim()) return true;
    if (el.getAttribute('aria-labelledby')) return true;
    if (el.labels && el.labels.length) return true;
    if (el.tagName === 'BUTTON' && el.textContent.trim()) return true;
    if ((el.getAttribute('title') || '').trim()) return true;
    return false;
  };
  return Array.from(document.querySelectorAll('button, input, select, textarea, a[href]'))
    .filter((el) => el.tagName === 'A' ? !el.textContent.trim() : !named(el))
    .map((el) => el.outerHTML.slice(0, 120));
}
"""


# ---------------------------------------------------------------------------------------------
# static files (no browser)


async def test_status_names_come_from_the_engine_table() -> None:
    """The page imports the status names, the terminal ones and the classes from ``tables.js``,
    which the server writes from the engine's tables; no shipped script restates them."""
    from cronoq.engine.model import CLASS_NAMES, FIRST_TERMINAL, STATUS_NAMES

    a = load_assets()
    body = a.files["tables.js"].body.decode()
    assert f"export const STATUSES = {json.dumps(list(STATUS_NAMES))};" in body
    assert f"new Set({json.dumps(list(STATUS_NAMES[FIRST_TERMINAL:]))})" in body
    assert json.dumps(list(CLASS_NAMES)) in body
    for name, asset in a.files.items():
        if name.endswith(".js") and name != "tables.js":
            assert '"dead_lettered",' not in asset.body.decode(), name
    async with serve() as (_app, c):
        r = await c.get(f"/static/{a.build}/tables.js")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
        assert r.text == body


async def test_static_files_types_and_cache_headers() -> None:
    a = load_assets()
    assert {"index.html", "app.js", "api.js", "chart.js", "util.js", "app.css", "favicon.svg"} <= set(a.files)
    async with serve() as (_app, c):
        r = await c.get("/")
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        assert r.headers["cache-control"] == "no-cache"
        csp = r.headers["content-security-policy"]
        assert "connect-src 'self'" in csp and "script-src 'self'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert f"/static/{a.build}/app.js" in r.text and "{{static}}" not in r.text
        # no external resources: every src/href is same-origin
        for ref in re.findall(r'(?:src|href)="([^"]+)"', r.text):
            assert ref.startswith(("/", "#")), ref

        r = await c.get(f"/static/{a.build}/app.js")
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/javascript; charset=utf-8"
        assert "immutable" in r.headers["cache-control"]
        r = await c.get("/static/app.css")
        assert r.headers["content-type"] == "text/css; charset=utf-8"
        assert r.headers["cache-control"] == "no-cache"
        etag = r.headers["etag"]
        r2 = await c.get("/static/app.css", headers={"if-none-match": etag})
        assert r2.status_code == 304 and not r2.content
        r = await c.get("/static/favicon.svg")
        assert r.headers["content-type"] == "image/svg+xml"
        assert (await c.get("/favicon.ico")).status_code == 200
        # an old build id still gets the file, but not as immutable
        r = await c.get("/static/000000000000/app.js")
        assert r.status_code == 200 and r.headers["cache-control"] == "no-cache"

        for bad in ("/static/nope.js", "/static/../dashboard.py", "/static/%2e%2e/dashboard.py", "/static/"):
            r = await c.get(bad)
            assert r.status_code == 404, bad
        # the API routes still win, and the loopback Host check covers the page
        assert (await c.get("/healthz")).status_code == 200
        r = await c.get("/", headers={"host": "evil.example"})
        assert r.status_code == 403


async def test_page_needs_no_token_but_api_does() -> None:
    async with serve(TOKENS) as (_app, c):
        assert (await c.get("/")).status_code == 200
        assert (await c.get(f"/static/{load_assets().build}/app.js")).status_code == 200
        assert (await c.get("/v1/tasks")).status_code == 401
        assert (await c.get("/v1/tasks", headers=bearer(CLIENT))).status_code == 200


# ---------------------------------------------------------------------------------------------
# in the browser


@needs_browser
async def test_page_loads_without_console_errors(tmp_path: Path) -> None:
    async with http_server() as (app, url):
        w = FakeWorker(app, labels={"zone": "a"})
        async with browser_page(url) as (page, console):
            await page.goto(url + "/")
            await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
            card = page.locator('article.pool[data-pool="default"]')
            await expect(card).to_be_visible()
            await expect(page.locator('article.pool[data-pool="other"]')).to_be_visible()
            await expect(card.locator('dd[data-stat="capacity"]')).to_have_text("4")
            await page.wait_for_timeout(1200)
            await page.screenshot(path=str(tmp_path / "dashboard-pools.png"), full_page=True)

            await page.get_by_role("link", name="Workers").click()
            row = page.locator("#workers-body tr").first
            await expect(row).to_contain_text("fake")
            await expect(row).to_contain_text("zone=a")
            await page.get_by_role("link", name="Recurring").click()
            await expect(page.locator("#recurring-body")).to_contain_text("No recurring schedules")
            await page.get_by_role("link", name="Tasks").click()
            await expect(page.locator("#tasks-table")).to_have_attribute("aria-busy", "false")
            await page.screenshot(path=str(tmp_path / "dashboard-tasks.png"), full_page=True)

            assert await page.evaluate(UNNAMED_CONTROLS_JS) == []
            # a narrow (phone) screen: no horizontal page scroll
            await page.set_viewport_size({"width": 375, "height": 800})
            await page.get_by_role("link", name="Pools").click()
            await expect(page.locator("#view-pools")).to_be_visible()  # routed (not a fixed 400 ms)
            overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1
            await page.screenshot(path=str(tmp_path / "dashboard-narrow.png"), full_page=True)
            assert console.errors == []
        await w.close()
    assert (tmp_path / "dashboard-pools.png").stat().st_size > 1000


@needs_browser
async def test_submitted_task_appears_without_reload(tmp_path: Path) -> None:
    async with (
        http_server() as (app, url),
        httpx.AsyncClient(base_url=url, timeout=10) as c,
        browser_page(url) as (page, console),
    ):
        await open_tasks(page, url)
        await page.evaluate("window.__noReload = 1")
        r = await c.post("/v1/tasks", json={"key": "live-1", "kind": "mail", "payload": {"to": "x"}})
        tid = r.json()["id"]
        t0 = time.monotonic()
        row = page.locator('#tasks-body tr[data-key="live-1"]')
        await expect(row).to_be_visible(timeout=2000)
        assert time.monotonic() - t0 < 2.0
        await expect(row).to_have_attribute("data-status", "ready")
        await expect(row).to_contain_text(tid)
        # a worker runs it: the row follows the events
        w = FakeWorker(app)
        await expect(row).to_have_attribute("data-status", "succeeded", timeout=3000)
        await expect(row).to_contain_text("mail")  # full fields from the live refresh
        assert await page.evaluate("window.__noReload") == 1
        await page.screenshot(path=str(tmp_path / "dashboard-live.png"), full_page=True)
        assert console.errors == []
        await w.close()


@needs_browser
async def test_cancel_button_cancels_a_scheduled_task(tmp_path: Path) -> None:
    async with http_server() as (_app, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        r = await c.post("/v1/tasks", json={"key": "later", "start_in_s": 3600})
        tid = r.json()["id"]
        assert (await c.get(f"/v1/tasks/{tid}")).json()["status"] == "scheduled"
        async with browser_page(url) as (page, console):
            await open_tasks(page, url)
            row = page.locator(f'#tasks-body tr[data-id="{tid}"]')
            await expect(row).to_have_attribute("data-status", "scheduled")
            page.on("dialog", lambda d: asyncio.ensure_future(d.accept()))
            await page.get_by_role("button", name=f"Cancel task {tid}").click()
            await expect(row).to_have_attribute("data-status", "cancelled")
            await expect(page.get_by_role("button", name=f"Cancel task {tid}")).to_have_count(0)
            assert (await c.get(f"/v1/tasks/{tid}")).json()["status"] == "cancelled"
            await page.screenshot(path=str(tmp_path / "dashboard-cancelled.png"), full_page=True)
            assert console.errors == []


@needs_browser
async def test_pool_chart_updates(tmp_path: Path) -> None:
    async with (
        http_server() as (app, url),
        httpx.AsyncClient(base_url=url, timeout=10) as c,
        browser_page(url) as (page, console),
    ):
        await page.goto(url + "/")
        canvas = page.locator('canvas[data-pool="default"][data-chart="capacity"]')
        await expect(canvas).to_have_attribute("aria-label", re.compile(r"capacity 0\b"))
        samples0 = int(await canvas.get_attribute("data-samples") or 0)
        image0 = await canvas.evaluate("c => c.toDataURL()")
        w = FakeWorker(app, slots=4, handler=lambda lease: None)  # holds its leases
        for i in range(2):
            await c.post("/v1/tasks", json={"key": f"busy-{i}"})
        await expect(canvas).to_have_attribute("aria-label", re.compile(r"capacity 4\b.*busy 2\b"))
        # a new sample and a redraw, awaited rather than expected within a fixed 1.5 s (samples
        # come from a 1 s poll, redraws from animation frames: both slow down on a loaded host)
        await expect(canvas).not_to_have_attribute("data-samples", str(samples0))
        samples1 = int(await canvas.get_attribute("data-samples") or 0)
        assert samples1 > samples0
        handle = await canvas.element_handle()
        await page.wait_for_function("([c, before]) => c.toDataURL() !== before", arg=[handle, image0])
        image1 = await canvas.evaluate("c => c.toDataURL()")
        assert image1 != image0
        card = page.locator('article.pool[data-pool="default"]')
        await expect(card.locator('dd[data-stat="busy"]')).to_have_text("2")
        await page.screenshot(path=str(tmp_path / "dashboard-chart.png"), full_page=True)
        assert console.errors == []
        await w.close()


@needs_browser
async def test_submit_form_detail_and_output(tmp_path: Path) -> None:
    async with http_server() as (app, url):
        w = FakeWorker(app)  # echoes the payload as output
        async with browser_page(url) as (page, console):
            await open_tasks(page, url)
            await page.get_by_text("Submit a task").click()
            form = page.locator("#submit-form")
            await form.get_by_label("Key").fill("from-form")
            await form.get_by_label("Kind").fill("report")
            await form.get_by_label("Priority").select_option("high")
            await form.get_by_label("Payload (JSON)").fill('{"answer": 42}')
            await form.get_by_role("button", name="Submit").click()
            await expect(page.locator("#submit-out")).to_contain_text("Submitted task")
            row = page.locator('#tasks-body tr[data-key="from-form"]')
            await expect(row).to_have_attribute("data-status", "succeeded")
            tid = await row.get_attribute("data-id")
            await page.get_by_role("button", name=f"Open task {tid}").first.click()
            dialog = page.get_by_role("dialog")
            await expect(dialog).to_be_visible()
            await expect(dialog.locator("#detail-status")).to_have_text("succeeded")
            await expect(dialog.get_by_label("Status history")).to_contain_text("running")
            await expect(dialog.get_by_label("Status history")).to_contain_text("succeeded")
            await expect(dialog.get_by_label("Output preview")).to_contain_text('"answer": 42')
            await expect(dialog).to_contain_text("high")
            await page.screenshot(path=str(tmp_path / "dashboard-detail.png"), full_page=True)
            await dialog.get_by_role("button", name="Close task details").click()
            await expect(dialog).to_be_hidden()
            # find by key
            await page.get_by_label("Find by key or id").fill("from-form")
            await page.get_by_role("button", name="Find").click()
            await expect(page.get_by_role("dialog")).to_contain_text(f"Task {tid}")
            assert console.errors == []
        await w.close()


@needs_browser
async def test_recurring_add_and_remove(tmp_path: Path) -> None:
    async with (
        http_server() as (_app, url),
        httpx.AsyncClient(base_url=url, timeout=10) as c,
        browser_page(url) as (page, console),
    ):
        await page.goto(url + "/#recurring")
        await page.get_by_text("Add or replace a schedule").click()
        form = page.locator("#recurring-form")
        await form.get_by_label("Name").fill("nightly")
        await form.get_by_label("Cron").fill("0 3 * * *")
        await form.get_by_label("Time zone").fill("Europe/Berlin")
        await form.get_by_label("Kind").fill("backup")
        await form.get_by_role("button", name="Save schedule").click()
        row = page.locator('#recurring-body tr[data-name="nightly"]')
        await expect(row).to_contain_text("0 3 * * *")
        await expect(row).to_contain_text("Europe/Berlin")
        await expect(row).to_contain_text("backup")
        listed = (await c.get("/v1/recurring")).json()["schedules"]
        assert [s["name"] for s in listed] == ["nightly"]
        await page.screenshot(path=str(tmp_path / "dashboard-recurring.png"), full_page=True)
        page.on("dialog", lambda d: asyncio.ensure_future(d.accept()))
        await page.get_by_role("button", name="Remove schedule nightly").click()
        await expect(row).to_have_count(0)
        assert (await c.get("/v1/recurring")).json()["schedules"] == []
        assert console.errors == []


@needs_browser
async def test_token_prompt_and_authenticated_stream(tmp_path: Path) -> None:
    async with (
        http_server(TOKENS) as (_app, url),
        httpx.AsyncClient(base_url=url, timeout=10) as c,
        browser_page(url) as (page, console),
    ):
        await page.goto(url + "/#tasks")
        dialog = page.get_by_role("dialog", name="API token")
        await expect(dialog).to_be_visible()
        await page.screenshot(path=str(tmp_path / "dashboard-token.png"))
        await dialog.get_by_label("Token").fill(ADMIN)
        await dialog.get_by_role("button", name="Use token").click()
        await expect(dialog).to_be_hidden()
        await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
        await expect(page.locator("#tasks-table")).to_have_attribute("aria-busy", "false")
        stored = await page.evaluate("sessionStorage.getItem('cronoq.token')")
        assert stored == ADMIN
        # the stream is read with fetch() + Authorization (EventSource cannot send it)
        r = await c.post("/v1/tasks", json={"key": "authed"}, headers=bearer(CLIENT))
        assert r.status_code == 200
        await expect(page.locator('#tasks-body tr[data-key="authed"]')).to_be_visible(timeout=2000)
        await expect(page.locator('article.pool[data-pool="default"]')).to_have_count(1)
        await page.reload()  # the token survives a reload (session storage)
        await expect(page.locator('#tasks-body tr[data-key="authed"]')).to_be_visible()
        await expect(dialog).to_be_hidden()
        # only the refusals of the first, token-less calls (fetch 401s, the EventSource)
        unexpected = [e for e in console.errors if "401" not in e and "EventSource" not in e]
        assert unexpected == [], console.errors


@needs_browser
@pytest.mark.slow
async def test_responsive_with_100k_tasks_and_200_events_per_second(tmp_path: Path) -> None:
    extra = "[limits]\nmax_pending_per_pool = 200000\nmax_pending_total = 400000\n"
    async with http_server(extra) as (app, url), httpx.AsyncClient(base_url=url, timeout=60) as c:
        for b in range(100):
            r = await c.post(
                "/v1/tasks:batch", json={"tasks": [{"key": f"bulk-{b}-{i}"} for i in range(1000)]}
            )
            assert r.status_code == 200, r.text
        last = r.json()["tasks"][-1]["id"]
        async with browser_page(url) as (page, console):
            t0 = time.monotonic()
            await open_tasks(page, url)
            first = page.locator("#tasks-body tr").first
            await expect(first).to_have_attribute("data-id", last)
            load_s = time.monotonic() - t0
            await expect(page.locator("#tasks-body tr")).to_have_count(50)
            await page.get_by_role("button", name="Older").click()
            await expect(first).to_have_attribute("data-id", str(int(last) - 50))
            await page.get_by_role("button", name="Newest (live)").click()
            await expect(first).to_have_attribute("data-id", last)

            # 200 events/s for 3 s (submissions + completions by the fake worker)
            await page.evaluate(
                """() => { window.__gaps = []; let t = performance.now();
                const loop = (now) => { window.__gaps.push(now - t); t = now;
                  if (window.__gaps.length < 100000) requestAnimationFrame(loop); };
                requestAnimationFrame(loop); }"""
            )
            w = FakeWorker(app, pool="other", slots=64)
            stats0 = await page.evaluate("({...window.cronoqDashboard.stats})")
            for s in range(30):
                await c.post(
                    "/v1/tasks:batch",
                    json={"tasks": [{"pool": "other", "key": f"rate-{s}-{i}"} for i in range(7)]},
                )
                await asyncio.sleep(0.1)
            await expect(page.locator('#tasks-body tr[data-key="rate-29-6"]')).to_be_visible(timeout=2000)
            stats1 = await page.evaluate("({...window.cronoqDashboard.stats})")
            events = stats1["events"] - stats0["events"]
            flushes = stats1["flushes"] - stats0["flushes"]
            assert events >= 400
            assert flushes < events / 2, (events, flushes)  # batched per animation frame
            gaps = await page.evaluate("window.__gaps.slice(5)")
            # responsiveness smoke check (generous: the numbers belong to bench/, not to tests)
            assert max(gaps) < 1000, max(gaps)
            await page.screenshot(path=str(tmp_path / "dashboard-100k.png"), full_page=True)
            assert console.errors == []
            print(f"100k tasks: newest page in {load_s:.2f} s; {events} events in {flushes} batches")
            await w.close()


async def test_static_404_is_json_whatever_the_path() -> None:
    """The 404 body is encoded as JSON, not pasted into an f-string (a path ending in a
    backslash, or holding quotes or control characters, gave invalid JSON)."""
    async with serve() as (_app, c):
        for raw in ("nope%5C", "a%22b%5C%5C", "%E2%9C%93%5C"):
            r = await c.get(f"/static/{raw}")
            assert r.status_code == 404
            body = r.json()
            assert body["code"] == "not_found" and body["error"].startswith("no such file: ")
