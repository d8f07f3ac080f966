"""Channel construction and call metadata shared by :class:`Client` and :class:`Worker`."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio

__all__ = [
    "DEFAULT_OPTIONS",
    "auth_metadata",
    "is_loopback_host",
    "make_channel",
    "normalize_targets",
    "split_target",
]

#: Channel options applied unless the caller gives the same key: outputs and payloads may be
#: as large as the server's ``max_message_bytes`` (4 MiB by default), plus framing; and a
#: subchannel pool of the channel's own, so a new channel to an address really connects anew
#: (gRPC otherwise shares one connection per address between channels, with its reconnect
#: backoff: a channel made to replace one that could not connect inherited the wait).
DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.use_local_subchannel_pool", 1),
)


def normalize_targets(target: str | Sequence[str]) -> list[str]:
    """One address or a list of addresses (tried in order for failover); never empty."""
    targets = [target] if isinstance(target, str) else list(target)
    if not targets:
        raise ValueError("at least one server address is required")
    for t in targets:
        if not isinstance(t, str) or not t:
            raise ValueError(f"a server address must be a non-empty string (got {t!r})")
    return targets


def split_target(target: str) -> tuple[str, bool]:
    """``target`` → (gRPC address, TLS asked by its scheme).

    A target may carry ``grpc://`` or ``http://`` (plaintext unless TLS is configured),
    ``https://`` (TLS) and a trailing ``/``: ``https://sched.example.com:7070/`` →
    ``("sched.example.com:7070", True)``. Anything else is passed to gRPC as it is.
    """
    tls = False
    for scheme, scheme_tls in (("grpc://", False), ("http://", False), ("https://", True)):
        if target[: len(scheme)].lower() == scheme:
            target, tls = target[len(scheme) :], scheme_tls
            break
    target = target.rstrip("/")
    if not target:
        raise ValueError("a server address must name a host (got an empty address)")
    return target, tls


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """``authorization: Bearer <token>`` metadata (docs/reference/behaviour.md#auth), empty without a
    token."""
    if token is None:
        return ()
    if not isinstance(token, str) or not token:
        raise ValueError("token must be a non-empty string")
    return (("authorization", f"Bearer {token}"),)


def merged_options(options: Sequence[tuple[str, Any]] | None) -> list[tuple[str, Any]]:
    given = list(options or ())
    keys = {k for k, _ in given}
    return given + [(k, v) for k, v in DEFAULT_OPTIONS if k not in keys]


def make_channel(
    target: str,
    *,
    tls: bool = False,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] | None = None,
) -> grpc.aio.Channel:
    """An asyncio channel: TLS when ``credentials`` are given, ``tls`` is set or the target
    says ``https://`` (system roots), else plaintext. See :func:`split_target`."""
    opts = merged_options(options)
    target, scheme_tls = split_target(target)
    tls = tls or scheme_tls
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials, options=opts)
    if tls:
        return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options=opts)
    return grpc.aio.insecure_channel(target, options=opts)
