"""The request guard of the HTTP API (docs/how-to/security.md, docs/reference/http.md#conventions):
what is checked of a request before its handler runs, and how its body is read.

Theory of operation
-------------------
:class:`RequestGuard` (pure ASGI, installed as :class:`GuardMiddleware` before routing), in order:

1. The loopback ``Host`` check when it applies (no auth on a loopback listener:
   DNS-rebinding protection; ``auth.check_http_host``) → 403.
2. The cross-site check (:func:`cross_site_reason`): a web page may make a browser send
   "simple" cross-site POSTs (form or text bodies, no preflight), and the browser attaches
   its *ambient* credentials to them: the client certificate it holds (mutual TLS), cookies
   (none are used today).  Only a bearer token is never added by a browser on its own.  So on
   a server without auth or with ``[[auth.certs]]``, a state-changing request (POST, PUT,
   DELETE, PATCH) without an ``authorization`` header that the browser marks as cross-site
   is refused with 403 ``permission_denied``: an ``Origin`` whose host:port
   differs from the ``Host`` header (``Origin: null`` included), or ``Sec-Fetch-Site:
   cross-site`` / ``same-site``.  Requests without ``Origin`` (curl, urllib, httpx,
   programs) and same-origin ones (the dashboard at ``/``) pass; GET (and so
   ``/v1/events``) is never checked.
3. The content type (:func:`media_type_reason`): a state-changing request with a body must
   declare it JSON (``application/json``, or a ``+json`` type) → else 415
   ``invalid_argument``.  The types a page can send cross-site without a CORS preflight
   (``text/plain``, forms) are never JSON, so no such request reaches a handler even if the
   origin check were passed.
4. The concurrency limits (``limits.max_concurrent_requests``; ``/v1/events`` streams count
   against ``limits.max_concurrent_streams``) and the caller's share of each
   (``max_requests_per_principal`` with auth on, ``max_streams_per_principal``;
   :mod:`cronoq.server.principal_shares`) → 429.

``/healthz`` and ``/readyz`` are exempt from all four.  Paths are taken past the ``root_path``
(the app mounted in another ASGI app, or served under a prefix): ``/prefix/healthz`` is exempt
and ``/prefix/v1/events`` a stream, as without the prefix.

Then, in the handler: :func:`authenticate` checks the bearer token (or the client certificate
of mutual TLS) and the route's role *before the body is read* → 401 / 403; :func:`read_json`
reads the body (declared JSON, as step 3 made sure), at most ``limits.max_http_body_bytes``
(checked against ``Content-Length`` and while reading, so chunked bodies are bounded too →
413) and within ``limits.request_timeout_s`` (→ 408), and decodes it
(``http_json.decode_json_object`` → 400).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from cronoq.server.app import ServerApp
from cronoq.server.auth import Action, AuthError, Principal
from cronoq.server.config import split_host_port
from cronoq.server.http_conn import scope_peer_dns
from cronoq.server.http_json import HttpError, bad_request, decode_json_object, error_response
from cronoq.server.principal_shares import Shares, principal_key

__all__ = [
    "GuardMiddleware",
    "RequestGuard",
    "authenticate",
    "cross_site_reason",
    "media_type_reason",
    "read_json",
    "read_optional_json",
]

EXEMPT_PATHS: Final = frozenset({"/healthz", "/readyz"})
#: methods that change state: refused cross-site with ambient credentials (see the module docstring)
UNSAFE_METHODS: Final = frozenset({"POST", "PUT", "DELETE", "PATCH"})
#: the request headers the guard looks at
_GUARD_HEADERS: Final = frozenset(
    {
        b"host",
        b"origin",
        b"sec-fetch-site",
        b"authorization",
        b"content-type",
        b"content-length",
        b"transfer-encoding",
    }
)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _authority(host: str | None, port: int | str | None, scheme: str) -> tuple[str, int] | None:
    """``(host, port)`` normalized for comparison (lower case, no brackets or trailing dot,
    the scheme's default port filled in); None when it cannot be made sense of."""
    if not host:
        return None
    h = host.strip().lower().strip("[]")
    if h.endswith(".") and len(h) > 1:
        h = h[:-1]
    if port is None or port == "":
        p = _DEFAULT_PORTS.get(scheme.lower())
        if p is None:
            return None
    else:
        if isinstance(port, str) and not (port.isascii() and port.isdigit()):
            return None
        p = int(port)
    return h, p


def cross_site_reason(method: str, scheme: str, headers: Mapping[str, str]) -> str | None:
    """Why a state-changing request is cross-site as a browser marks it, else None.

    ``headers`` maps lower-case names to values (``origin``, ``sec-fetch-site``, ``host``).
    """
    if method.upper() not in UNSAFE_METHODS:
        return None
    site = headers.get("sec-fetch-site", "").strip().lower()
    if site in ("cross-site", "same-site"):
        return f"the browser marked it Sec-Fetch-Site: {site}"
    origin = headers.get("origin")
    if origin is None:
        return None  # not a browser's cross-origin request (curl, urllib, httpx, our client)
    o = origin.strip()
    if o.lower() == "null":
        return "it comes from an opaque origin (Origin: null)"
    try:
        u = urlsplit(o)
        theirs = _authority(u.hostname, u.port, u.scheme) if u.scheme and u.netloc else None
    except ValueError:
        theirs = None
    host = headers.get("host")
    ours = None
    if host:
        try:
            h, p = split_host_port(host.strip())
        except ValueError:
            pass
        else:
            ours = _authority(h, p, scheme)
    if theirs is None or ours is None or theirs != ours:
        return f"its Origin {origin!r} is not this server's (Host {host!r})"
    return None


def media_type_reason(method: str, headers: Mapping[str, str]) -> str | None:
    """Why a state-changing request's body is refused for its ``Content-Type`` (not JSON), else
    None.  A request without a body (no length or length 0, not chunked) needs none."""
    if method.upper() not in UNSAFE_METHODS:
        return None
    length = headers.get("content-length", "").strip()
    if length in ("", "0") and "transfer-encoding" not in headers:
        return None
    raw = headers.get("content-type")
    media = (raw or "").split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return None
    got = "no content-type" if raw is None else f"content-type {raw!r}"
    return f"a request body must be JSON: send content-type: application/json (got {got})"


def _guard_headers(scope: Scope) -> dict[str, str]:
    """The headers the guard checks (the first of each), lower-case names."""
    headers: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        if k in _GUARD_HEADERS and k.decode("latin-1") not in headers:
            headers[k.decode("latin-1")] = v.decode("latin-1")
    return headers


def _refusal(
    method: str, scheme: str, headers: Mapping[str, str], ambient: bool
) -> tuple[int, str, str] | None:
    """Steps 2 and 3 of the module docstring: ``(status, message, code)`` of a refusal, else None.
    ``ambient``: a request without a bearer token may be allowed (no auth, or client certificates)."""
    if method.upper() not in UNSAFE_METHODS:
        return None
    if ambient and "authorization" not in headers:  # a browser may send it on a page's behalf
        reason = cross_site_reason(method, scheme, headers)
        if reason is not None:
            return (
                403,
                f"cross-site request refused: {reason}. Without a bearer token (no auth, or a "
                f"client certificate) this server accepts {', '.join(sorted(UNSAFE_METHODS))} "
                "requests only from its own origin or from non-browser clients (no Origin "
                "header); a page on another origin must send an authorization header",
                "permission_denied",
            )
    reason = media_type_reason(method, headers)
    return None if reason is None else (415, reason, "invalid_argument")


class RequestGuard:
    """The checks before routing (see the module docstring), counting the requests and
    streams in progress on one listener."""

    def __init__(self, inner: ASGIApp, app: ServerApp, listen_addr: str | None) -> None:
        self.inner = inner
        self.app = app
        self.listen_addr = listen_addr
        self.requests = 0
        self.streams = 0
        self.request_shares = Shares()
        self.stream_shares = Shares()

    def _admit(self, stream: bool, key: str) -> tuple[Shares | None, str | None]:
        """Count one request or stream (the share it took, or None), or say why not (429)."""
        lim = self.app.limits
        if stream:
            if self.streams >= lim.max_concurrent_streams:
                return (
                    None,
                    "too many concurrent event streams "
                    f"(limits.max_concurrent_streams {lim.max_concurrent_streams})",
                )
            if not self.stream_shares.take(key, lim.max_streams_per_principal):
                return None, (
                    "too many concurrent event streams for this token "
                    f"(limits.max_streams_per_principal {lim.max_streams_per_principal})"
                )
            self.streams += 1
            return self.stream_shares, None
        if self.requests >= lim.max_concurrent_requests:
            return (
                None,
                "too many concurrent requests "
                f"(limits.max_concurrent_requests {lim.max_concurrent_requests})",
            )
        shares = self.request_shares if self.app.auth.auth_enabled else None  # (module docstring)
        if shares is not None and not shares.take(key, lim.max_requests_per_principal):
            return None, (
                "too many concurrent requests for this token "
                f"(limits.max_requests_per_principal {lim.max_requests_per_principal})"
            )
        self.requests += 1
        return shares, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        path: str = scope.get("path", "")
        root: str = scope.get("root_path") or ""
        if root and path.startswith(root + "/"):  # (mounted: the route's path is past the prefix)
            path = path[len(root) :]
        if path in EXEMPT_PATHS:
            await self.inner(scope, receive, send)
            return
        method: str = scope.get("method", "GET")
        headers = _guard_headers(scope)
        auth = self.app.auth
        if self.listen_addr is not None:
            try:
                auth.check_http_host(self.listen_addr, headers.get("host"))
            except AuthError as e:
                await error_response(e.http_status, e.message, e.code)(scope, receive, send)
                return
        ambient = not auth.auth_enabled or auth.certs_enabled
        refusal = _refusal(method, scope.get("scheme", "http"), headers, ambient)
        if refusal is not None:
            await error_response(*refusal)(scope, receive, send)
            return
        stream = path == "/v1/events"
        key = principal_key(headers.get("authorization"), scope_peer_dns(scope)) if auth.auth_enabled else ""
        shares, refused = self._admit(stream, key)
        if refused is not None:
            await error_response(429, refused, "resource_exhausted")(scope, receive, send)
            return
        try:
            await self.inner(scope, receive, send)
        finally:
            if shares is not None:
                shares.give(key)
            if stream:
                self.streams -= 1
            else:
                self.requests -= 1


class GuardMiddleware(RequestGuard):
    """:class:`RequestGuard` with the ``(app, **options)`` signature of Starlette's middleware stack."""

    def __init__(self, app: ASGIApp, server: ServerApp, listen_addr: str | None) -> None:
        super().__init__(app, server, listen_addr)


# ---------------------------------------------------------------------------------------------
# in the handler: the caller, then the body


def authenticate(app: ServerApp, request: Request, action: Action) -> Principal | None:
    """The caller of ``request`` if allowed to do ``action`` (else AuthError); never reads the body."""
    auth = app.auth
    header = request.headers.get("authorization")
    if header is None and auth.certs_enabled:  # a client certificate (mutual TLS) instead
        return auth.check(None, action, peer_dns=scope_peer_dns(request.scope))
    return auth.check(header, action)


def _too_large(limit: int) -> HttpError:
    message = f"request body larger than limits.max_http_body_bytes ({limit})"
    return HttpError(413, message, "resource_exhausted")


async def read_json(app: ServerApp, request: Request) -> dict[str, Any]:
    """The body of ``request`` as a JSON object, within the body limits (see the module docstring)."""
    limits = app.limits
    limit = limits.max_http_body_bytes
    cl = request.headers.get("content-length")
    if cl is not None:
        if not (cl.strip().isascii() and cl.strip().isdigit()):
            raise bad_request(f"malformed content-length {cl!r}")
        if int(cl) > limit:
            raise _too_large(limit)

    async def collect() -> bytes:
        chunks: list[bytes] = []
        n = 0
        async for chunk in request.stream():
            n += len(chunk)
            if n > limit:
                raise _too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        async with asyncio.timeout(limits.request_timeout_s):
            body = await collect()
    except TimeoutError:
        raise HttpError(
            408, f"request body not received within {limits.request_timeout_s:g} s", "deadline_exceeded"
        ) from None
    return decode_json_object(body)


async def read_optional_json(app: ServerApp, request: Request) -> dict[str, Any]:
    """A JSON object body, or {} when there is none (no length, or length 0, and not chunked)."""
    cl = request.headers.get("content-length")
    if (cl is None or cl.strip() == "0") and "transfer-encoding" not in request.headers:
        return {}
    return await read_json(app, request)
