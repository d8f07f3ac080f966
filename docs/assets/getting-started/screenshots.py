"""Takes the dashboard screenshots of docs/getting-started/dashboard.md.

It runs ``examples/demo.py`` (``cronoq serve`` + a remote worker + a submitter of mixed work,
on free ports, in a temporary directory), opens the dashboard in headless Chromium (Debian's
``/usr/bin/chromium``, driven by Playwright), lets the charts fill for ``--warmup`` seconds
of real traffic and saves one PNG per view next to this file.

    .venv/bin/python docs/assets/getting-started/screenshots.py
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from playwright.async_api import Page, async_playwright, expect

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 860}


async def dashboard_url(proc: asyncio.subprocess.Process) -> str:
    """Read the demo's output until it prints the dashboard's address."""
    assert proc.stdout is not None
    while line := await proc.stdout.readline():
        m = re.search(r"dashboard\s+(http://127\.0\.0\.1:\d+/)", line.decode())
        if m:
            return m.group(1)
    raise RuntimeError("the demo ended without printing the dashboard address")


async def drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdout is not None
    while await proc.stdout.readline():
        pass


async def failed_task(url: str) -> str:
    """The id of the newest task that failed (the demo submits a "broken" one now and then)."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        page = await c.get("/v1/tasks", params={"limit": 1000, "status": "failed"})
    tasks = page.json()["tasks"]
    assert tasks, "the demo has not failed a task yet: raise --warmup"
    return str(tasks[-1]["id"])


async def shoot(page: Page, name: str, section: str | None = None) -> None:
    """A screenshot of the viewport, or of the top of the page down to the end of ``section``."""
    clip = None
    if section is not None:
        box = await page.locator(section).bounding_box()
        assert box is not None
        clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": box["y"] + box["height"] + 16}
    await page.screenshot(path=str(HERE / f"dashboard-{name}.png"), clip=clip)  # type: ignore[arg-type]
    print(f"wrote {HERE / f'dashboard-{name}.png'}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds of traffic before the first shot")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(ROOT / "examples" / "demo.py"), "--grpc-port", "0", "--http-port", "0"]
        proc = await asyncio.create_subprocess_exec(
            *cmd, cwd=tmp, stdout=asyncio.subprocess.PIPE, stderr=subprocess.STDOUT
        )
        try:
            url = await dashboard_url(proc)
            drainer = asyncio.create_task(drain(proc))
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(
                    executable_path=CHROMIUM, args=["--no-sandbox"], headless=True
                )
                page = await browser.new_page(viewport=VIEWPORT, color_scheme="light")  # type: ignore[arg-type]
                await page.goto(url)
                await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
                await page.select_option("#chart-window", "60000")
                await page.wait_for_timeout(args.warmup * 1000)  # real traffic fills the charts
                await shoot(page, "pools", "#view-pools")
                await page.get_by_role("link", name="Tasks").click()
                await expect(page.locator("#tasks-table")).to_have_attribute("aria-busy", "false")
                await page.wait_for_timeout(500)
                await shoot(page, "tasks")
                # two rows selected: the bulk bar
                for box in (await page.locator("#tasks-body td.c-sel input").all())[1:3]:
                    await box.check()
                await page.wait_for_timeout(200)
                await shoot(page, "tasks-selected", "#tasks-table")
                await page.get_by_role("button", name="Clear selection").click()
                await page.goto(f"{url}#tasks/{await failed_task(url)}")  # its detail dialog
                await expect(page.locator("#task-dialog")).to_be_visible()
                await page.wait_for_timeout(300)
                await shoot(page, "task")
                await page.keyboard.press("Escape")
                await page.get_by_role("link", name="Workers").click()
                await page.wait_for_timeout(500)
                await shoot(page, "workers", "#view-workers")
                await page.get_by_role("link", name="Recurring").click()
                await page.wait_for_timeout(500)
                await shoot(page, "recurring", "#view-recurring")
                await page.locator("#recurring-body button", has_text="Edit").first.click()
                await page.locator(".edit-form input[name=cron]").fill("61 * * * *")
                await page.locator(".edit-form button[type=submit]").click()
                await expect(page.locator("#edit-err-cron")).not_to_be_empty()
                await shoot(page, "recurring-edit", "#view-recurring")
                await browser.close()
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)  # the demo stops server and worker cleanly
                await proc.wait()
        drainer.cancel()


if __name__ == "__main__":
    asyncio.run(main())
