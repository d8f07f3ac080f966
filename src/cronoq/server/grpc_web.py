"""gRPC-Web for browser clients on the HTTP listener (``[server.grpc_web]``,
docs/how-to/grpc-web.md).

Theory of operation
-------------------
:class:`GrpcWebMiddleware` sits in front of the HTTP/JSON app on ``http_addr`` (outermost, so
before its guard) and takes the requests whose path is a ``Tasks`` or ``Admin`` method
(``/cronoq.v1.Tasks/Submit``, ...; the JSON API lives under ``/v1/``):

* ``OPTIONS`` → a CORS preflight: answered (204, ``Access-Control-Allow-*``) only when the
  ``Origin`` is one of ``allowed_origins``; any other origin gets 403 without CORS headers,
  so the browser refuses the call.  Credentials mode is never allowed (bearer tokens travel in
  the ``authorization`` header, never in cookies).
* ``POST`` with ``content-type: application/grpc-web*`` (binary or ``-text``, base64) → a
  gRPC-Web call.  In order, before the body is read: the loopback ``Host`` check when auth is
  off on a loopback listener (DNS rebinding, as the JSON API's guard); the ``Origin``, when
  sent, must be allowed or the server's own; then the caller's token or client certificate
  and the method's role (:data:`~cronoq.server.auth.GRPC_METHOD_ACTIONS`), exactly as on the
  gRPC listener.  A refusal is a trailers-only gRPC-Web answer (``grpc-status`` in the
  headers, HTTP 200, the CORS headers for an allowed origin so the page can read it).  The
  body is then read up to ``limits.max_message_bytes`` (plus framing; base64 counted as
  decoded) within ``limits.request_timeout_s`` (the JSON API's body deadline: 408 and
  DEADLINE_EXCEEDED past it), its framing checked (:mod:`.grpc_web_frames`: exactly one
  well-formed request frame, else 400 and INVALID_ARGUMENT, nothing run) and handed on.
* anything else falls through to the JSON app (a 404 there).

The calls themselves run in `sonora <https://github.com/public/sonora>`_'s ASGI gRPC-Web
server (``sonora.asgi.grpcASGI``), which hosts the very same servicers as the gRPC listener
(``grpc_api.register``: generic handlers, unary budget, Watch fan-out): sonora calls them with
its own ``ServicerContext`` (``abort``, ``invocation_metadata``, ``send_initial_metadata`` are
what they use).  The thin adapter here adds what sonora lacks: the origin policy and CORS
(sonora's own echoes the ``Host`` with credentials allowed, so it is off), the auth checks
before the body, the body bound, ``auth_context()`` on its context (the ``peer_dns`` of a
client certificate, for ``[[auth.certs]]``), and unary answers with well-formed trailers
(sonora 0.2.3 writes them as Python bytes reprs, public/sonora#67).  ``Workers.Work`` is not
served: gRPC-Web cannot stream requests.

``sonora`` is imported only when ``[server.grpc_web]`` is configured (the ``server`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import grpc

from cronoq.server import grpc_api
from cronoq.server.app import ServerApp
from cronoq.server.auth import GRPC_METHOD_ACTIONS, AuthError, PermissionDenied
from cronoq.server.grpc_web_frames import BadFrame, check_request, request_type
from cronoq.server.http_conn import scope_peer_dns

__all__ = ["GrpcWebMiddleware", "grpc_web_available"]

log = logging.getLogger("cronoq.server.grpc_web")

Scope = dict[str, Any]
ASGIApp = Any

#: the methods served (gRPC-Web has no client streaming: no Workers.Work)
_METHODS = frozenset(m for m in GRPC_METHOD_ACTIONS if not m.startswith("/cronoq.v1.Workers/"))
#: request headers a page may send (the preflight's Access-Control-Allow-Headers)
_ALLOW_HEADERS = "authorization, content-type, x-grpc-web, x-user-agent, grpc-timeout"
#: response headers a page may read
_EXPOSE_HEADERS = "grpc-status, grpc-message"
_FRAMING = 64 * 1024


def grpc_web_available() -> bool:
    """Whether sonora (the gRPC-Web implementation) is installed."""
    try:
        import sonora.asgi  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        name = k.decode("latin-1")
        if name not in out:
            out[name] = v.decode("latin-1")
    return out


def _same_origin(origin: str, scope: Scope, host: str | None) -> bool:
    from cronoq.server.http_guard import cross_site_reason

    return (
        cross_site_reason("POST", scope.get("scheme", "http"), {"origin": origin, "host": host or ""}) is None
    )


def _fit_context(ctx: Any, scope: Scope) -> Any:
    """sonora's context, its ``auth_context()`` holding the client certificate's DNS names
    (``[[auth.certs]]``; sonora's own raises NotImplementedError) and its ``abort`` taking
    ``trailing_metadata`` as grpc's does (sonora's has no such argument: an error with its own
    code, ``unknown pool`` on Submit, was a 500)."""
    names = {"peer_dns": [n.encode() for n in scope_peer_dns(scope)]}
    ctx.auth_context = lambda: names
    abort = ctx.abort

    async def abort_with_trailers(code: Any, details: str, trailing_metadata: Any = ()) -> None:
        if trailing_metadata:
            ctx.set_trailing_metadata(trailing_metadata)
        await abort(code, details)

    ctx.abort = abort_with_trailers
    return ctx


def _sonora_app() -> Any:
    """sonora's ASGI gRPC-Web server with the adapter's corrections (module docstring)."""
    try:
        from sonora import protocol
        from sonora.asgi import grpcASGI
    except ModuleNotFoundError:
        raise RuntimeError(
            "[server.grpc_web] needs sonora (install the server extra: pip install 'cronoq[server]')"
        ) from None

    def trailer_frame(wrap: Any, context: Any) -> bytes:
        trailers = [("grpc-status", str(context.code.value[0]))]
        if context.details:
            trailers.append(("grpc-message", quote(context.details.encode("utf8"))))
        if context._trailing_metadata:
            trailers.extend(context._trailing_metadata)
        frame: bytes = wrap(True, False, protocol.pack_trailers(trailers))
        return frame

    class Sonora(grpcASGI):  # (sonora is untyped: no stubs)
        async def _do_unary_response(
            self, rpc_method: Any, receive: Any, send: Any, wrap: Any, context: Any, coroutine: Any
        ) -> None:
            """sonora 0.2.3's unary answer with its trailers as text: its own packs them as
            ``b'grpc-status': b'0'`` (public/sonora#67), which clients cannot read."""
            message = None if coroutine is None else await coroutine
            headers = context._response_headers
            if context._initial_metadata:
                headers.extend(context._initial_metadata)
            data = b"" if message is None else wrap(False, False, rpc_method.response_serializer(message))
            tail = trailer_frame(wrap, context)
            headers.append((b"content-length", str(len(data) + len(tail)).encode()))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": tail, "more_body": False})

        async def _do_streaming_response(
            self, rpc_method: Any, receive: Any, send: Any, wrap: Any, context: Any, coroutine: Any
        ) -> None:
            """A server stream whose headers go out as soon as the servicer sends its initial
            metadata (``Watch``: once the subscription is live) or its first message, whichever
            comes first (sonora's waits for the first message), ended when the client goes."""
            started = False

            async def start() -> None:
                nonlocal started
                if not started:
                    started = True
                    headers = context._response_headers
                    if context._initial_metadata:
                        headers.extend(context._initial_metadata)
                    await send({"type": "http.response.start", "status": 200, "headers": headers})

            send_metadata = context.send_initial_metadata

            async def send_initial_metadata(metadata: Any) -> None:
                await send_metadata(metadata)
                await start()

            context.send_initial_metadata = send_initial_metadata

            async def pump() -> None:
                async for message in coroutine:
                    await start()
                    body = wrap(False, False, rpc_method.response_serializer(message))
                    await send({"type": "http.response.body", "body": body, "more_body": True})

            streaming = asyncio.ensure_future(pump())
            gone = asyncio.ensure_future(_disconnected(receive))
            try:
                await asyncio.wait({streaming, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                gone.cancel()
                if not streaming.done():  # the client went away (or this call was cancelled)
                    streaming.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await streaming
            if streaming.cancelled():
                return
            try:
                streaming.result()
            except grpc.RpcError:  # aborted: the status set by abort() goes out below
                if not started:
                    raise  # trailers-only (sonora's _do_grpc_error)
            await start()
            await send(
                {"type": "http.response.body", "body": trailer_frame(wrap, context), "more_body": False}
            )

        def _create_context(self, scope: Scope) -> Any:
            return _fit_context(super()._create_context(scope), scope)

    return Sonora(None, enable_cors=False)


class _ClientGone(Exception):
    """The client disconnected before its request body was complete."""


async def _disconnected(receive: Any) -> None:
    """Return when the client has gone (``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class GrpcWebMiddleware:
    """The gRPC-Web front (module docstring), an ASGI middleware around the JSON app."""

    def __init__(
        self, app: ASGIApp, api: ServerApp, listen_addr: str | None, origins: tuple[str, ...]
    ) -> None:
        self.inner = app
        self.app = api
        self.listen_addr = listen_addr
        self.origins = frozenset(origins)
        self.grpc = _sonora_app()
        grpc_api.register(self.grpc, api)
        self.max_body = api.limits.max_message_bytes + _FRAMING

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") not in _METHODS:
            await self.inner(scope, receive, send)
            return
        headers = _headers(scope)
        method = scope.get("method", "GET").upper()
        origin = headers.get("origin", "").rstrip("/").lower() or None
        if method == "OPTIONS" and origin is not None and "access-control-request-method" in headers:
            await self._preflight(origin, send)
            return
        ctype = headers.get("content-type", "")
        if method != "POST" or not ctype.startswith("application/grpc-web"):
            await self.inner(scope, receive, send)
            return
        cors = origin is not None and origin in self.origins
        reply_type = "application/grpc-web-text" if ctype.startswith("application/grpc-web-text") else ctype
        try:
            self._admit(scope, headers, origin)
        except AuthError as e:
            await self._status(
                send, grpc_api.grpc_status(e.code), e.message, reply_type, origin if cors else None
            )
            return
        limits = self.app.limits
        try:
            async with asyncio.timeout(limits.request_timeout_s):
                body = await self._read_body(receive, ctype)
        except _ClientGone:
            return  # nothing to answer, and never a call with half a request
        except TimeoutError:
            message = f"request body not received within {limits.request_timeout_s:g} s"
            code, status = grpc.StatusCode.DEADLINE_EXCEEDED, 408
            await self._status(send, code, message, reply_type, origin if cors else None, status)
            return
        if body is not None:
            try:
                check_request(body, reply_type == "application/grpc-web-text", request_type(scope["path"]))
            except BadFrame as e:
                code = grpc.StatusCode.INVALID_ARGUMENT
                await self._status(send, code, str(e), reply_type, origin if cors else None, 400)
                return
        if body is None:
            await self._status(
                send,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"request larger than max_message_bytes ({self.app.limits.max_message_bytes})",
                reply_type,
                origin if cors else None,
            )
            return

        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def send_cors(message: Any) -> None:
            if cors and message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", ()), *self._cors_headers(origin)]
            await send(message)

        await self.grpc(scope, replay, send_cors)

    # ------------------------------------------------------------------ steps

    def _admit(self, scope: Scope, headers: Mapping[str, str], origin: str | None) -> None:
        """Host, origin and auth checks before the body is read (raise an AuthError)."""
        auth = self.app.auth
        if self.listen_addr is not None:
            auth.check_http_host(self.listen_addr, headers.get("host"))
        if (
            origin is not None
            and origin not in self.origins
            and not _same_origin(origin, scope, headers.get("host"))
        ):
            raise PermissionDenied(
                f"origin {origin!r} is not allowed to call this server (server.grpc_web.allowed_origins)"
            )
        action = GRPC_METHOD_ACTIONS[scope["path"]]
        header = headers.get("authorization")
        auth.check(header, action, peer_dns=scope_peer_dns(scope) if header is None else ())

    async def _read_body(self, receive: Any, ctype: str) -> bytes | None:
        """The whole request body; None past the bound (base64 counted as decoded)."""
        limit = self.max_body * 4 // 3 + 4 if ctype.startswith("application/grpc-web-text") else self.max_body
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                raise _ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    def _cors_headers(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        assert origin is not None
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-expose-headers", _EXPOSE_HEADERS.encode()),
            (b"vary", b"Origin"),
        ]

    async def _preflight(self, origin: str, send: Any) -> None:
        if origin not in self.origins:
            await send({"type": "http.response.start", "status": 403, "headers": [(b"vary", b"Origin")]})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-methods", b"POST, OPTIONS"),
            (b"access-control-allow-headers", _ALLOW_HEADERS.encode()),
            (b"access-control-expose-headers", _EXPOSE_HEADERS.encode()),
            (b"access-control-max-age", b"600"),
            (b"vary", b"Origin"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _status(
        self,
        send: Any,
        code: grpc.StatusCode,
        message: str,
        content_type: str,
        origin: str | None,
        http_status: int = 200,
    ) -> None:
        """A trailers-only gRPC-Web answer: the status in the headers, no body (HTTP 200, or
        ``http_status`` for a request the HTTP layer refuses: a malformed or a late body)."""
        headers = [
            (b"content-type", content_type.encode("latin-1")),
            (b"grpc-status", str(code.value[0]).encode()),
            (b"grpc-message", quote(message).encode("ascii")),
        ]
        if origin is not None:
            headers += self._cors_headers(origin)
        await send({"type": "http.response.start", "status": http_status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
