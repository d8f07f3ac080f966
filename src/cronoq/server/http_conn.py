"""Connection limits of the HTTP listeners: a cap on open connections and a deadline for
request heads (slowloris), in front of uvicorn's HTTP/1.1 protocol.

Theory of operation
-------------------
uvicorn closes a keep-alive connection that stays idle ``timeout_keep_alive`` seconds after a
response, and answers 503 past ``limit_concurrency`` — but only once a request head has been
parsed: a client that connects and sends nothing, or a request head a byte at a time, holds
its connection (and a file descriptor) for ever.  Four thousand such connections, with no
token needed, stopped both listeners at the descriptor limit.

:func:`guarded_protocol` returns uvicorn's h11 protocol with two additions, counted per
listener:

* ``max_connections``: a connection beyond it is closed as soon as it is accepted (before a
  byte is read); so is one beyond ``per_address`` open connections from the same client IP
  address (``limits.max_connections_per_address``: one client cannot hold the listener's
  whole budget; principal_shares.py).
* ``head_timeout``: from the moment a connection opens, and again after each response, the
  next request head must be complete within this many seconds, else the connection is
  closed.  A request in progress is never cut by it (its body is bounded by the handlers'
  ``request_timeout_s``).

It also hands the DNS subject alternative names of a verified client certificate (mutual TLS)
to the app: :data:`PEER_DNS_STATE` in the ASGI scope's ``state`` (uvicorn copies a connection's
``app_state`` into every request's scope; the ASGI TLS extension is not implemented by uvicorn),
read by :func:`scope_peer_dns` for ``[[auth.certs]]``.

The gRPC listener gets the same two limits from gRPC core's channel arguments
(``grpc.max_allowed_incoming_connections``, ``grpc.server_handshake_timeout_ms``; see
``run.grpc_options``).  Limits and defaults: docs/how-to/security.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from cronoq.server.principal_shares import Shares

__all__ = ["PEER_DNS_STATE", "guarded_protocol", "peer_cert_dns", "scope_peer_dns"]

#: the scope ``state`` key holding a verified client certificate's DNS names (a tuple)
PEER_DNS_STATE = "cronoq_peer_dns"


def peer_cert_dns(cert: Any) -> tuple[str, ...]:
    """The DNS subject alternative names of ``ssl.SSLSocket.getpeercert()`` (a verified
    certificate's dict; None/empty without one)."""
    if not isinstance(cert, dict):
        return ()
    return tuple(v for k, v in cert.get("subjectAltName", ()) if k == "DNS")


def scope_peer_dns(scope: Mapping[str, Any]) -> tuple[str, ...]:
    """The client certificate's DNS names a request's scope carries (none without mTLS)."""
    state = scope.get("state")
    names = state.get(PEER_DNS_STATE, ()) if isinstance(state, dict) else ()
    return tuple(names)


log = logging.getLogger("cronoq.server.http")


def _address(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


def guarded_protocol(
    max_connections: int, head_timeout: float, per_address: int | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with connection caps and a request-head deadline (module doc)."""
    by_address = Shares()  # open connections per client address, on this listener

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _address: str | None = None  # counted in by_address

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                log.warning("HTTP connection refused: %d open (limits.max_connections)", max_connections)
                transport.close()
                return
            if per_address is not None:
                address = _address(transport)
                if not by_address.take(address, per_address):
                    log.warning(
                        "HTTP connection from %s refused: %d open from it "
                        "(limits.max_connections_per_address)",
                        address,
                        per_address,
                    )
                    transport.close()
                    return
                self._address = address
            dns = peer_cert_dns(transport.get_extra_info("peercert"))
            if dns:  # this connection's requests carry them (module docstring)
                self.app_state = {**self.app_state, PEER_DNS_STATE: dns}
            self._arm_head_timer()

        def _arm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(head_timeout, self._head_timed_out)

        def _head_timed_out(self) -> None:
            self._head_timer = None
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                return  # a request is being served: its own timeouts apply
            if not self.transport.is_closing():
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._address is not None:
                by_address.give(self._address)
                self._address = None
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

    return GuardedH11Protocol
