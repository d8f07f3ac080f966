"""``cronoq serve``: the process around :class:`~cronoq.server.app.ServerApp`
(docs/reference/behaviour.md#server-start-up, docs/reference/behaviour.md#server-details).

:func:`serve` binds the listeners first (gRPC on ``server.grpc_addr``; the HTTP API on
``server.http_addr`` and, when set, the unauthenticated metrics app on ``server.metrics_addr``),
prints one parseable line with the ports actually bound (port 0 = any free port)::

    cronoq serve: grpc=127.0.0.1:40123 http=127.0.0.1:40124 metrics=-

then becomes the leader (a standby answers UNAVAILABLE / 503 until then) and prints
``cronoq serve: leading``.  SIGTERM/SIGINT: stop accepting new calls, send ``Shutdown`` to the
workers, give running attempts ``shutdown_grace_s``, release the leadership at once, return
(the CLI then exits 0); ``cronoq serve: stopped`` is the last line.

The HTTP front end is ``cronoq.server.http_api.create_http_app(app)`` (an ASGI app) run with
uvicorn on a socket bound here; the metrics listener uses ``create_metrics_app(app)`` from
the same module.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import importlib
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import grpc.aio

from cronoq.server import grpc_api, grpc_workers
from cronoq.server.app import ServerApp
from cronoq.server.config import ServerConfig, split_host_port
from cronoq.store.base import stop_task

__all__ = ["ServeError", "grpc_options", "serve"]

log = logging.getLogger("cronoq.server")

#: extra room for the framing around a payload/output of ``max_message_bytes``
_FRAMING = 64 * 1024


class ServeError(Exception):
    """The server could not start (bind failure, missing dependency, unreadable TLS file)."""


def grpc_options(config: ServerConfig) -> list[tuple[str, Any]]:
    """Channel arguments of the gRPC server (docs/reference/config.md#limits limits)."""
    lim = config.limits
    return [
        ("grpc.max_receive_message_length", lim.max_message_bytes + _FRAMING),
        ("grpc.max_send_message_length", lim.max_message_bytes + _FRAMING),
        ("grpc.max_concurrent_streams", lim.max_concurrent_streams),
        ("grpc.keepalive_time_ms", int(lim.keepalive_interval_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(lim.keepalive_timeout_s * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        # accept the clients' own keepalive pings (never GOAWAY "too_many_pings")
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.so_reuseport", 0),
        # slowloris: a cap on connections, and a deadline for a new connection's handshake
        ("grpc.max_allowed_incoming_connections", lim.max_connections),
        ("grpc.server_handshake_timeout_ms", int(lim.header_timeout_s * 1000)),
    ]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ServeError(f"cannot read TLS file {path!r}: {e.strerror or e}") from None


def _server_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    tls = config.server.tls
    if tls is None:
        return None
    ca = _read(tls.client_ca) if tls.client_ca else None
    return grpc.ssl_server_credentials(
        [(_read(tls.key), _read(tls.cert))], root_certificates=ca, require_client_auth=ca is not None
    )


def _host_port(addr: str) -> tuple[str, int]:
    host, port = split_host_port(addr)
    return host, int(port or 0)


def _show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _in_use(key: str) -> str:
    """What to do about an address in use (typically a second ``cronoq serve`` on the defaults)."""
    return f"another cronoq serve, or another program, listening there? stop it, or set [server] {key}"


def _listen_error(addr: str, key: str, e: OSError, what: str = "") -> ServeError:
    """``addr`` (``[server] key``) could not be bound: the OS's words, and what to do if in use."""
    hint = f" ({_in_use(key)})" if e.errno == errno.EADDRINUSE else ""
    return ServeError(f"cannot listen on {addr!r}{what}: {e.strerror or e}{hint}")


def _bound(addr: str) -> socket.socket:
    """A socket bound to ``addr`` (OSError if it cannot be), not yet listening."""
    host, port = _host_port(addr)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _bind_tcp(addr: str, key: str) -> socket.socket:
    """A listening socket on ``addr`` (the configuration's ``[server] key``); ServeError if not."""
    try:
        sock = _bound(addr)
    except OSError as e:
        raise _listen_error(addr, key, e) from None
    try:
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise _listen_error(addr, key, e) from None
    return sock


def _grpc_bind_error(addr: str, said: str) -> ServeError:
    """grpcio's bind failure names no cause ("Failed to bind to address"): a plain bind of
    ``addr`` finds it, so an address this host does not have is not taken for one in use."""
    try:
        _bound(addr).close()
    except OSError as e:
        return _listen_error(addr, "grpc_addr", e, " (gRPC)")
    except ValueError:  # (not host:port: gRPC's own words below)
        pass
    # (free to a plain bind: gone since, or refused for another reason)
    return ServeError(f"cannot listen on {addr!r} (gRPC): {said} ({_in_use('grpc_addr')})")


# ---------------------------------------------------------------------------------------------
# HTTP (uvicorn)


def _http_factory(name: str) -> Any:
    """``cronoq.server.http_api.<name>``; None when that module is not there (yet)."""
    try:
        mod = importlib.import_module("cronoq.server.http_api")
    except ModuleNotFoundError as e:
        if e.name == "cronoq.server.http_api":
            return None
        raise ServeError(
            f"the HTTP API needs '{e.name}' (install the server extra: pip install 'cronoq[server]')"
        ) from None
    return getattr(mod, name, None)


class _Http:
    """One uvicorn server on a socket bound here; signals are left to :func:`serve`."""

    def __init__(self, asgi: Any, sock: socket.socket, config: ServerConfig) -> None:
        try:
            import uvicorn
        except ModuleNotFoundError:
            raise ServeError(
                "the HTTP listener needs uvicorn (install the server extra: pip install 'cronoq[server]')"
            ) from None

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

        tls = config.server.tls
        kw: dict[str, Any] = {}
        if tls is not None:
            import ssl

            kw = {"ssl_certfile": tls.cert, "ssl_keyfile": tls.key}
            if tls.client_ca:
                kw.update(ssl_ca_certs=tls.client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
        from cronoq.server.http_conn import guarded_protocol

        lim = config.limits
        cfg = uvicorn.Config(
            asgi,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=max(1, int(config.server.shutdown_grace_s)),
            # connection cap and request-head deadline (slowloris): see http_conn.py
            http=guarded_protocol(lim.max_connections, lim.header_timeout_s, lim.max_connections_per_address),
            timeout_keep_alive=5,
            **kw,
        )
        self.server = _Server(cfg)
        self.sock = sock
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.server.serve(sockets=[self.sock]))

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            try:
                async with asyncio.timeout(15.0):
                    await self.task
            except (TimeoutError, asyncio.CancelledError):
                self.task.cancel()
            except Exception:
                log.exception("HTTP listener failed while stopping")
        with contextlib.suppress(OSError):
            self.sock.close()


# ---------------------------------------------------------------------------------------------
# serve


def _announce(line: str) -> None:
    print(f"cronoq serve: {line}", file=sys.stderr, flush=True)


async def serve(config: ServerConfig, *, ready: asyncio.Event | None = None) -> None:
    """Run a server until SIGTERM/SIGINT (or cancellation); see the module docstring.

    ``ready`` is set once every listener is bound (before leadership: a standby answers
    UNAVAILABLE until it leads).
    """
    loop = asyncio.get_running_loop()
    app = ServerApp(config)
    stop = asyncio.Event()
    grpc_server, grpc_shown = _grpc_listener(config, app)
    https, http_shown, metrics_shown = _http_listeners(config, app)
    installed = _install_signals(loop, stop)
    lead_task: asyncio.Task[None] | None = None
    try:
        await grpc_server.start()
        for h in https:
            h.start()
        _log_listening(config, app, grpc_shown, http_shown, metrics_shown, bool(https))
        _announce(f"grpc={grpc_shown} http={http_shown} metrics={metrics_shown}")
        if ready is not None:
            ready.set()
        lead_task = _start_leading(loop, app, stop)
        await stop.wait()
        if lead_task.done() and not lead_task.cancelled() and lead_task.exception() is not None:
            raise ServeError(str(lead_task.exception()))
    finally:
        await _shut_down(loop, app, grpc_server, https, lead_task)
        for sig in installed:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        _announce("stopped")


def _grpc_listener(config: ServerConfig, app: ServerApp) -> tuple[grpc.aio.Server, str]:
    """The gRPC server with every service registered, bound to ``server.grpc_addr`` (not started
    yet), and the address it is bound to as printed."""
    server = grpc.aio.server(
        # without tokens every check passes: no interceptor (one less coroutine per call)
        interceptors=[grpc_api.AuthInterceptor(app)] if app.auth.auth_enabled else None,
        options=grpc_options(config),
        # the budgets of calls, Watch streams and worker sessions (each enforced by its handler)
        maximum_concurrent_rpcs=(
            config.limits.max_concurrent_requests
            + config.limits.max_concurrent_streams
            + config.limits.max_worker_sessions
        ),
    )
    grpc_api.register(server, app)
    grpc_workers.register(server, app)
    addr = config.server.grpc_addr
    creds = _server_credentials(config)
    try:
        port = server.add_secure_port(addr, creds) if creds is not None else server.add_insecure_port(addr)
    except RuntimeError as e:  # (grpcio: "Failed to bind to address ...", in use or not ours)
        raise _grpc_bind_error(addr, str(e)) from None
    if port == 0:
        raise _grpc_bind_error(addr, "address in use or invalid")
    grpc_host, _ = _host_port(addr)
    return server, _show(grpc_host, port)


def _http_listeners(config: ServerConfig, app: ServerApp) -> tuple[list[_Http], str, str]:
    """The HTTP API listener and, when ``server.metrics_addr`` is set, the metrics one, on bound
    sockets (not started yet); and the HTTP and metrics addresses as printed (``-``: none)."""
    https: list[_Http] = []
    http_shown = metrics_shown = "-"
    factory = _http_factory("create_http_app")
    if factory is None:
        log.error(
            "HTTP API disabled: cronoq.server.http_api.create_http_app is not available in this build; "
            "serving gRPC only"
        )
    else:
        if config.server.grpc_web is not None:
            from cronoq.server.grpc_web import grpc_web_available

            if not grpc_web_available():
                raise ServeError(
                    "[server.grpc_web] needs sonora (install the server extra: pip install 'cronoq[server]')"
                )
        sock = _bind_tcp(config.server.http_addr, "http_addr")
        https.append(_Http(factory(app), sock, config))
        h, p = sock.getsockname()[:2]
        http_shown = _show(h, p)
    if config.server.metrics_addr is not None:
        mfactory = _http_factory("create_metrics_app")
        if mfactory is None:
            log.error("metrics listener disabled: cronoq.server.http_api.create_metrics_app is not available")
        else:
            msock = _bind_tcp(config.server.metrics_addr, "metrics_addr")
            https.append(_Http(mfactory(app), msock, config))
            h, p = msock.getsockname()[:2]
            metrics_shown = _show(h, p)
    return https, http_shown, metrics_shown


def _install_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> list[signal.Signals]:
    """SIGTERM and SIGINT set ``stop``; the signals whose handler could be installed."""

    def on_signal(sig: signal.Signals) -> None:
        if not stop.is_set():
            log.info("%s received: shutting down", sig.name)
        stop.set()

    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
    return installed


def _log_listening(
    config: ServerConfig, app: ServerApp, grpc_shown: str, http_shown: str, metrics_shown: str, http: bool
) -> None:
    log.info(
        "listening: gRPC %s%s, HTTP %s%s, metrics %s; store %s; pools %s; auth %s",
        grpc_shown,
        " (TLS)" if config.server.tls is not None else "",
        http_shown,
        " (+gRPC-Web)" if config.server.grpc_web is not None and http else "",
        metrics_shown,
        config.store.kind,
        ", ".join(p.name for p in config.local_pools)
        + (f" (shard {config.server.shard})" if config.server.shard else ""),
        "on" if app.auth.auth_enabled else "off",
    )


def _start_leading(
    loop: asyncio.AbstractEventLoop, app: ServerApp, stop: asyncio.Event
) -> asyncio.Task[None]:
    """Become the leader in the background (``cronoq serve: leading`` once it does); a failure to
    lead (a store of another shard, store.base.ShardMismatch) sets ``stop``: it ends the server."""

    async def lead() -> None:
        await app.lead()
        if app.leading:
            _announce("leading")

    lead_task = loop.create_task(lead())

    def lead_done(t: asyncio.Task[None]) -> None:
        if not t.cancelled() and t.exception() is not None:
            stop.set()

    lead_task.add_done_callback(lead_done)
    return lead_task


async def _shut_down(
    loop: asyncio.AbstractEventLoop,
    app: ServerApp,
    grpc_server: grpc.aio.Server,
    https: list[_Http],
    lead_task: asyncio.Task[None] | None,
) -> None:
    """Stop accepting new calls: they answer UNAVAILABLE (docs/reference/grpc.md#services) while
    running ones, e.g. worker streams, go on during the grace; the listeners close after the
    scheduler stopped."""
    app.stopping = True
    with contextlib.suppress(Exception):
        await stop_task(lead_task)  # (acquires through the store: cancelled until it is gone)
    try:
        # Shutdown to workers, grace for running attempts, release the leadership
        await app.stop()
    except Exception:
        log.exception("error while stopping the scheduler")
    grpc_stop = loop.create_task(grpc_server.stop(2.0))
    for h in https:
        await h.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await grpc_stop
