"""The dashboard of ``cronoq serve`` at ``/`` (docs/reference/behaviour.md#dashboard): static files shipped in
the package.

:func:`dashboard_routes` returns the Starlette routes mounted by
:func:`cronoq.server.http_api.create_http_app` (after the API routes, so ``/v1/...``,
``/metrics``, ``/healthz``, ``/readyz`` and ``/openapi.json`` always win).  The HTTP front end
applies the loopback ``Host`` check (DNS-rebinding protection) to these routes like to every
other one; the page itself needs no token (a browser navigation cannot send one): it calls the
public API with the bearer token the user enters, so it has the same auth as the API.

Theory of operation
-------------------
The page is plain HTML/CSS/JavaScript (ES modules, no framework, no build step, nothing
fetched from the internet) under ``dashboard_static/``.  The files are read once, on first
use, into memory together with a short content hash of the whole set (the *build id*):

* ``GET /`` serves ``index.html`` with ``{{static}}`` replaced by ``/static/<build id>``;
  it is never cached (``no-cache``) and carries a strict same-origin Content-Security-Policy.
* ``GET /static/<build id>/<file>`` is immutable (a year of ``max-age``): a new package
  version has a new build id, so browsers never mix old and new modules (relative ``import``\\ s
  of a module resolve under the same prefix).
* ``GET /static/<file>`` (no build id, or another one) is served with ``no-cache`` and an
  ``ETag`` (``If-None-Match`` → 304).

Only files present in the package directory are served (no path is joined from user input),
with a content type from a fixed table, plus one module made here: ``tables.js``
(:data:`TABLES_JS`), the engine's status names, which of them are terminal and the priority
classes, written from :mod:`cronoq.engine.model`'s tables so the page never restates them.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
from dataclasses import dataclass
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cronoq.engine.model import CLASS_NAMES, FIRST_TERMINAL, STATUS_NAMES

__all__ = ["dashboard_routes", "load_assets"]

STATIC_PACKAGE: Final = "cronoq.server"
STATIC_DIR: Final = "dashboard_static"

CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
}

#: The page talks to its own origin only; no inline script, no external anything.
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
IMMUTABLE: Final = "public, max-age=31536000, immutable"


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


@dataclass(frozen=True)
class Assets:
    build: str
    files: dict[str, Asset]
    index: bytes


_assets: Assets | None = None

#: The module the page imports the engine's tables from (made here, not a file).
TABLES_JS: Final = "tables.js"


def tables_js() -> bytes:
    """``tables.js``: ``STATUSES`` (in the engine's order), ``TERMINAL`` and ``CLASSES``."""
    lines = [
        "// Made by cronoq.server.dashboard from the engine's tables (cronoq.engine.model).",
        f"export const STATUSES = {json.dumps(list(STATUS_NAMES))};",
        f"export const TERMINAL = new Set({json.dumps(list(STATUS_NAMES[FIRST_TERMINAL:]))});",
        f"export const CLASSES = {json.dumps(list(CLASS_NAMES))};",
    ]
    return ("\n".join(lines) + "\n").encode()


def load_assets() -> Assets:
    """The shipped files (read once): name → body, content type, ETag; plus the build id."""
    global _assets
    if _assets is not None:
        return _assets
    root = importlib.resources.files(STATIC_PACKAGE).joinpath(STATIC_DIR)
    files: dict[str, Asset] = {}
    whole = hashlib.sha256()

    def walk(node: importlib.resources.abc.Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            name = prefix + child.name
            if child.name.startswith((".", "_")):
                continue
            if child.is_dir():
                walk(child, name + "/")
                continue
            ext = "." + child.name.rsplit(".", 1)[-1] if "." in child.name else ""
            ctype = CONTENT_TYPES.get(ext)
            if ctype is None:
                continue
            body = child.read_bytes()
            digest = hashlib.sha256(body).hexdigest()
            whole.update(name.encode() + b"\0" + digest.encode())
            files[name] = Asset(body, ctype, f'"{digest[:20]}"')

    walk(root, "")
    body = tables_js()
    digest = hashlib.sha256(body).hexdigest()
    whole.update(TABLES_JS.encode() + b"\0" + digest.encode())
    files[TABLES_JS] = Asset(body, CONTENT_TYPES[".js"], f'"{digest[:20]}"')
    build = whole.hexdigest()[:12]
    raw = files["index.html"].body if "index.html" in files else b"<!doctype html><title>cronoq</title>"
    index = raw.replace(b"{{static}}", f"/static/{build}".encode())
    _assets = Assets(build, files, index)
    return _assets


async def _index(request: Request) -> Response:
    a = load_assets()
    return Response(
        a.index,
        media_type="text/html; charset=utf-8",
        headers={"cache-control": "no-cache", "content-security-policy": CSP, **SECURITY_HEADERS},
    )


def _not_found(path: str) -> Response:
    """The API's error body, encoded by ``json`` (any path, backslashes and quotes included)."""
    body = json.dumps({"error": f"no such file: {path[:200]}", "code": "not_found"}, ensure_ascii=False)
    return Response(body.encode("utf-8"), status_code=404, media_type="application/json")


async def _static(request: Request) -> Response:
    a = load_assets()
    path: str = request.path_params["path"]
    cache = "no-cache"
    head, _, rest = path.partition("/")
    if rest and head not in a.files and len(head) == len(a.build) and head.isalnum():
        # /static/<build id>/<file>: immutable when the build is the current one
        cache = IMMUTABLE if head == a.build else "no-cache"
        path = rest
    asset = a.files.get(path)
    if asset is None:
        return _not_found(path)
    headers = {"cache-control": cache, "etag": asset.etag, **SECURITY_HEADERS}
    inm = request.headers.get("if-none-match")
    if inm is not None and asset.etag in [t.strip().removeprefix("W/") for t in inm.split(",")]:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.content_type, headers=headers)


async def _favicon(request: Request) -> Response:
    a = load_assets()
    asset = a.files.get("favicon.svg")
    if asset is None:
        return _not_found("favicon.ico")
    return Response(
        asset.body,
        media_type=asset.content_type,
        headers={"cache-control": "public, max-age=86400", **SECURITY_HEADERS},
    )


def dashboard_routes() -> list[BaseRoute]:
    """The dashboard's routes (``GET /`` and its static assets)."""
    return [
        Route("/", _index, methods=["GET"], name="dashboard"),
        Route("/static/{path:path}", _static, methods=["GET"], name="dashboard_static"),
        Route("/favicon.ico", _favicon, methods=["GET"], name="dashboard_favicon"),
    ]
