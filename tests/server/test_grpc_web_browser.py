"""docs/how-to/grpc-web.md in a real browser: a static page in headless Chromium (Debian's
``chromium``, driven by Playwright as in test_dashboard.py) calls ``Admin/Snapshot`` over
gRPC-Web on a real ``cronoq serve``, from an allowed origin (a real CORS preflight: the call
carries an ``authorization`` header) and from one that is not."""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services import CHROMIUM, browser_missing, missing_service, unless_missing

from .procs import TOKENS, ServerProc, pb, start_server

pytest.importorskip("sonora")
with contextlib.suppress(ImportError):  # browser_missing() says when it is not there
    from playwright.async_api import async_playwright

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
PAGE_DIR = Path(__file__).with_name("grpc_web_page")

pytestmark = unless_missing("the browser", browser_missing())


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[int]:
    """A static file server for the page on a free loopback port."""
    handler = functools.partial(_Quiet, directory=str(PAGE_DIR))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def web_server(tmp_path: Path, page_server: int) -> Iterator[ServerProc]:
    body = (
        f'[server.grpc_web]\nallowed_origins = ["http://localhost:{page_server}"]\n'
        f'[[auth.tokens]]\ntoken = "{TOKENS["admin"]}"\nrole = "admin"\n'
    )
    sp = start_server(tmp_path, body, name="grpcweb-browser")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_a_page_calls_snapshot_over_grpc_web(
    web_server: ServerProc, page_server: int, tmp_path: Path
) -> None:
    server = f"http://{web_server.http}"
    if why := browser_missing():
        missing_service("the browser", why)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = await browser.new_page()
            # an allowed origin: the preflight passes, the call answers, the page reads it all
            await page.goto(f"http://localhost:{page_server}/index.html")
            out = await page.evaluate(
                "([s, t]) => grpcWebCall(s, '/cronoq.v1.Admin/Snapshot', t)", [server, TOKENS["admin"]]
            )
            await page.screenshot(path=str(tmp_path / "allowed.png"))
            assert out["http"] == 200
            assert "grpc-status:0" in out["trailers"].replace(" ", "")
            (message,) = out["messages"]
            snap = pb.SnapshotResponse.FromString(base64.b64decode(message))
            assert [p.name for p in snap.pools] == ["default"]
            # a wrong token: the status comes back readable (CORS exposes grpc-status)
            bad = await page.evaluate(
                "([s]) => grpcWebCall(s, '/cronoq.v1.Admin/Snapshot', 'not-the-token-0123456789')", [server]
            )
            assert bad["headerStatus"] == "16" and bad["messages"] == []
            # another origin (127.0.0.1 is not localhost): the browser refuses after the preflight
            await page.goto(f"http://127.0.0.1:{page_server}/index.html")
            err = await page.evaluate(
                "([s, t]) => grpcWebCall(s, '/cronoq.v1.Admin/Snapshot', t).then(() => 'ok', e => String(e))",
                [server, TOKENS["admin"]],
            )
            assert err.startswith("TypeError"), err
        finally:
            await browser.close()
