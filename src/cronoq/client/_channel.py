"""Channel construction and call metadata shared by :class:`Client` and :class:`Worker`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio

__all__ = ["DEFAULT_OPTIONS", "auth_metadata", "make_channel", "normalize_targets"]

#: Channel options applied unless the caller gives the same key: outputs and payloads may be
#: as large as the server's ``max_message_bytes`` (4 MiB by default), plus framing.
DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (("grpc.max_receive_message_length", 64 * 1024 * 1024),)


def normalize_targets(target: str | Sequence[str]) -> list[str]:
    """One address or a list of addresses (tried in order for failover); never empty."""
    targets = [target] if isinstance(target, str) else list(target)
    if not targets:
        raise ValueError("at least one server address is required")
    for t in targets:
        if not isinstance(t, str) or not t:
            raise ValueError(f"a server address must be a non-empty string (got {t!r})")
    return targets


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """``authorization: Bearer <token>`` metadata (SPEC §17.2), empty without a token."""
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
    """An asyncio channel: TLS when ``credentials`` are given or ``tls`` is set (system roots),
    else plaintext."""
    opts = merged_options(options)
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials, options=opts)
    if tls:
        return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options=opts)
    return grpc.aio.insecure_channel(target, options=opts)
