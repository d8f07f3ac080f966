"""Calls to peer shards (docs/how-to/shards.md#forwarding).

Theory of operation
-------------------
One ``grpc.aio`` channel per peer address, created on first use and kept (pooled: every
forwarded call and every merged Watch to that peer shares it).  A shard's endpoint is its
Service or the list of its servers: a call goes to the address that answered last, and moves
on to the next one when the answer says this address is not the leader (UNAVAILABLE from a
standby, a stopping server or a dead one), so forwarding follows a failover.  When no address
answers as leader within ``limits.request_timeout_s`` the shard is :class:`Unreachable`
(UNAVAILABLE ``shard '<s>' is unreachable`` / 503); when every address refused at once (a
dead server's closed port, a standby's "not leading": the shard is failing over) that is no
hang, and the breaker counts it as an answer.  Any other answer of the peer, errors
included, is the answer (:class:`PeerError` keeps its status, message and trailing metadata).

Each peer shard has a circuit breaker and its own call budget (:mod:`.breaker`): a call to a
peer known to hang (``limits.peer_breaker_failures`` calls in a row not answered within
their deadline, ``limits.peer_timeout_s``) fails at once as :class:`Unreachable` until one
probe call, ``limits.peer_breaker_reset_s`` later, finds it answering again; at most
``limits.max_peer_calls`` unary calls are in flight to one peer.

Forwarding is allowed to ``https://`` peers (verified with ``server.peer_tls.ca`` or the
system roots), to ``http://`` peers on a loopback host, and to other ``http://`` peers only
with ``server.insecure_peer_http``: the caller's bearer token travels with the call.  Calls
carry ``cronoq-forwarded: <own shard>``; the peer answers from its own shard only.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import grpc.aio

from cronoq.proto.protocol import NOT_LEADING_MESSAGES
from cronoq.server.config import ServerConfig, ShardSpec, is_loopback
from cronoq.server.shards.breaker import Breaker
from cronoq.server.shards.topology import FORWARDED_KEY, NOT_THIS_SHARD, SERVED_BY_KEY, TO_SHARD_KEY

log = logging.getLogger("cronoq.server.shards")

__all__ = ["PeerError", "Peers", "Unreachable", "forward_allowed"]

#: UNAVAILABLE answers after which the request certainly did not run there: try the next address
_NOT_HERE = NOT_LEADING_MESSAGES
#: UNAVAILABLE answers that may follow a change that did land, or the leader's failed read of its
#: store (a standby could not answer it either): passed on (the client retries)
_MAYBE_DONE = ("the store could not commit", "not the leader any more", "the store could not be read")


class Unreachable(Exception):
    """No address of the shard answered as its leader in time."""

    def __init__(self, shard: ShardSpec, why: str = "", *, hung: bool = True) -> None:
        super().__init__(f"shard '{shard.name}' is unreachable")
        self.shard = shard
        self.message = str(self)
        #: why, when the call failed at once (the breaker, the budget); logged, not sent
        self.why = why
        #: whether the call's deadline ran out; False when every address refused at once (a
        #: dead server's port, a standby's "not leading": a failover in progress, not a hang)
        self.hung = hung


class PeerError(Exception):
    """The peer's own error answer (or a local handler's, see the router): passed on as is."""

    def __init__(
        self, code: grpc.StatusCode, details: str, trailing: Sequence[tuple[str, Any]] = (), cause: Any = None
    ) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.trailing = tuple(trailing)
        #: the local handler's original exception (an ApiError keeps its HTTP error code)
        self.cause = cause


def forward_allowed(config: ServerConfig, endpoint: str) -> bool:
    """The forwarding rule: https always; http to a loopback host, or with insecure_peer_http."""
    scheme, _, authority = endpoint.partition("://")
    if scheme == "https":
        return True
    return is_loopback(authority) or config.server.insecure_peer_http


def _retry_elsewhere(e: grpc.aio.AioRpcError, ep: str, shard: ShardSpec) -> bool:
    if e.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    if (e.details() or "").startswith(NOT_THIS_SHARD):  # refused before it ran: misconfigured
        log.error("peer %s is not shard %r (%s): tried the next address", ep, shard.name, e.details())
        return True
    # a standby, or the transport (connection refused, reset, ...), unless it may have landed
    return not (e.details() or "").startswith(_MAYBE_DONE)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


class Peers:
    """The channels to every peer shard's addresses and the calls over them."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.own = config.server.shard or ""
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._current: dict[str, int] = {}
        self._breakers: dict[str, Breaker] = {}
        self._creds: grpc.ChannelCredentials | None = None
        mb = config.limits.max_message_bytes
        self._options = [
            ("grpc.max_send_message_length", mb),
            ("grpc.max_receive_message_length", mb),
            ("grpc.keepalive_time_ms", int(config.limits.keepalive_interval_s * 1000)),
            ("grpc.keepalive_timeout_ms", int(config.limits.keepalive_timeout_s * 1000)),
            # a failed connection is retried soon: forwarding follows a restarted peer quickly
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ]

    def allowed(self, shard: ShardSpec) -> bool:
        """Whether calls with the caller's token may go to ``shard`` at all."""
        return any(forward_allowed(self.config, ep) for ep in shard.endpoints)

    def _credentials(self) -> grpc.ChannelCredentials:
        if self._creds is None:
            tls = self.config.server.peer_tls
            self._creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls.ca) if tls else None,
                private_key=_read(tls.key) if tls else None,
                certificate_chain=_read(tls.cert) if tls else None,
            )
        return self._creds

    def channel(self, endpoint: str) -> grpc.aio.Channel:
        ch = self._channels.get(endpoint)
        if ch is None:
            scheme, _, target = endpoint.partition("://")
            if scheme == "https":
                ch = grpc.aio.secure_channel(target, self._credentials(), options=self._options)
            else:
                ch = grpc.aio.insecure_channel(target, options=self._options)
            self._channels[endpoint] = ch
        return ch

    def order(self, shard: ShardSpec) -> list[tuple[int, str]]:
        """The shard's allowed addresses, the one that answered last first."""
        eps = [(i, ep) for i, ep in enumerate(shard.endpoints) if forward_allowed(self.config, ep)]
        start = self._current.get(shard.name, 0)
        return sorted(eps, key=lambda x: (x[0] - start) % len(shard.endpoints))

    def current(self, shard: ShardSpec) -> str:
        """The address of ``shard`` that answered as its leader last (its first before any)."""
        return shard.endpoints[self._current.get(shard.name, 0)]

    def breaker(self, shard: ShardSpec) -> Breaker:
        """The breaker and budget of calls to ``shard`` (one per peer shard, kept)."""
        br = self._breakers.get(shard.name)
        if br is None:
            lim = self.config.limits
            br = Breaker(lim.peer_breaker_failures, lim.peer_breaker_reset_s, lim.max_peer_calls)
            self._breakers[shard.name] = br
        return br

    def _admit(self, shard: ShardSpec, *, counted: bool = True) -> bool:
        """Admit a call to ``shard`` (whether it is the breaker's probe) or raise Unreachable."""
        admitted = self.breaker(shard).admit(time.monotonic(), counted=counted)
        if isinstance(admitted, str):
            log.warning("call to shard %r failed at once: %s", shard.name, admitted)
            raise Unreachable(shard, admitted)
        return admitted

    def metadata(self, authorization: str | None, shard: ShardSpec) -> tuple[tuple[str, str], ...]:
        """A forwarded call's metadata: who forwards it, to which shard, the caller's token."""
        md: tuple[tuple[str, str], ...] = ((FORWARDED_KEY, self.own), (TO_SHARD_KEY, shard.name))
        if authorization:
            md += (("authorization", authorization),)
        return md

    async def unary(
        self,
        shard: ShardSpec,
        method: str,
        request: Any,
        response_cls: Any,
        authorization: str | None,
        timeout: float | None = None,
    ) -> Any:
        """``method`` on ``shard``'s leader; :class:`PeerError` for its error answers,
        :class:`Unreachable` when no address leads within ``timeout`` (peer_timeout_s) or the
        breaker or budget fail the call at once."""
        budget = self.config.limits.peer_timeout_s if timeout is None else timeout
        probe = self._admit(shard)
        answered = False
        try:
            md = self.metadata(authorization, shard)
            resp = await self._unary(shard, method, request, response_cls, md, time.monotonic() + budget)
            answered = True
            return resp
        except PeerError:
            answered = True  # (an answer: the peer is alive)
            raise
        except Unreachable as e:
            # refused at once by every address: nothing hangs, so the breaker (whose job is to
            # stop calls that would each wait out their deadline) must not open; it did, and a
            # failover of the peer that took 0.4 s kept forwarding to it refused for
            # peer_breaker_reset_s and more
            answered = not e.hung
            raise
        finally:
            self.breaker(shard).done(time.monotonic(), answered, probe)

    async def _unary(self, shard: ShardSpec, method: str, req: Any, cls: Any, md: Any, until: float) -> Any:
        request, response_cls = req, cls
        hung = False
        for idx, ep in self.order(shard):
            left = until - time.monotonic()
            if left <= 0:
                hung = True
                break
            call = self.channel(ep).unary_unary(
                method,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response_cls.FromString,
            )
            try:
                pending = call(request, metadata=md, timeout=left)
                resp = await pending
                served = dict(await pending.trailing_metadata() or ()).get(SERVED_BY_KEY)
            except grpc.aio.AioRpcError as e:
                if _retry_elsewhere(e, ep, shard):
                    continue
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and e.details() == "Deadline Exceeded":
                    hung = True
                    break  # (our own deadline, not the peer's answer)
                self._current[shard.name] = idx  # (an answer of the leader, if an error)
                raise PeerError(e.code(), e.details() or "", tuple(e.trailing_metadata() or ())) from None
            if served is not None and served != shard.name:
                # a misconfigured address: not this shard's server (tried as the next one would be)
                log.error("peer %s answered as shard %r, not %r: ignored", ep, served, shard.name)
                continue
            self._current[shard.name] = idx
            return resp
        raise Unreachable(shard, hung=hung)

    async def stream(
        self, shard: ShardSpec, method: str, request: Any, response_cls: Any, authorization: str | None
    ) -> AsyncIterator[Any]:
        """A server stream from ``shard``'s leader: yields ``None`` once it is live (its initial
        metadata arrived), then its messages; raises :class:`PeerError` / :class:`Unreachable`."""
        md = self.metadata(authorization, shard)
        probe = self._admit(shard, counted=False)
        answered = False
        try:
            async for msg in self._stream(shard, method, request, response_cls, md):
                answered = True
                yield msg
        except PeerError:
            answered = True
            raise
        except Unreachable as e:
            answered = not e.hung  # (every address refused at once: see unary)
            raise
        finally:
            self.breaker(shard).done(time.monotonic(), answered, probe, counted=False)

    async def _stream(
        self, shard: ShardSpec, method: str, request: Any, response_cls: Any, md: tuple[tuple[str, str], ...]
    ) -> AsyncIterator[Any]:
        for idx, ep in self.order(shard):
            call = self.channel(ep).unary_stream(
                method,
                request_serializer=type(request).SerializeToString,
                response_deserializer=response_cls.FromString,
            )
            stream = call(request, metadata=md)
            try:
                await stream.initial_metadata()
                if not stream.done():  # (a refusal ends the call before any metadata)
                    self._current[shard.name] = idx
                    yield None
                async for msg in stream:
                    yield msg
                return
            except grpc.aio.AioRpcError as e:
                if _retry_elsewhere(e, ep, shard):
                    continue
                raise PeerError(e.code(), e.details() or "", tuple(e.trailing_metadata() or ())) from None
            finally:
                stream.cancel()
        # (a stream has no deadline: it ends here only when every address refused it at once)
        raise Unreachable(shard, hung=False)

    async def close(self) -> None:
        for ch in list(self._channels.values()):
            with contextlib.suppress(Exception):
                await ch.close()
        self._channels.clear()
