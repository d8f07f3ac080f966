"""Listen addresses: ``host:port``, ``[v6]:port``, loopback or not.

``split_host_port`` splits without judging; ``listen_addr`` is the rule of ``server.*_addr``
(raising :class:`~.errors.Bad` with the message users see); ``is_loopback`` decides whether a
listener needs authentication (``localhost``, 127.0.0.0/8 and ::1 do not).
"""

from __future__ import annotations

import ipaddress

from .errors import Bad

__all__ = ["is_loopback", "listen_addr", "split_host_port"]


def split_host_port(addr: str) -> tuple[str, str | None]:
    """Split ``host[:port]`` / ``[v6][:port]`` / a bare IPv6 literal into (host, port or None).

    The host is returned without brackets; raises ``ValueError`` on a malformed address.
    """
    if addr.startswith("["):
        end = addr.find("]")
        if end < 0:
            raise ValueError("unclosed '['")
        host, rest = addr[1:end], addr[end + 1 :]
        if rest == "":
            return host, None
        if not rest.startswith(":"):
            raise ValueError("unexpected text after ']'")
        return host, rest[1:]
    if addr.count(":") == 1:
        host, port = addr.split(":")
        return host, port
    if addr.count(":") > 1:
        return addr, None  # a bare IPv6 literal
    return addr, None


def _host_is_loopback(host: str) -> bool:
    h = host.lower()
    if h.endswith(".") and len(h) > 1:
        h = h[:-1]  # a fully qualified "localhost."
    if h == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def is_loopback(addr: str) -> bool:
    """True when ``addr`` (``host:port``, ``[v6]:port`` or a bare host) is a loopback address:
    ``localhost``, 127.0.0.0/8 or ::1. Wildcards (0.0.0.0, ::) and other names are not."""
    try:
        host, _ = split_host_port(addr.strip())
    except ValueError:
        return False
    return _host_is_loopback(host)


def listen_addr(addr: str) -> tuple[str, int]:
    """``(host, port)`` of a listen address; raises :class:`Bad` with the user's message."""
    try:
        host, port = split_host_port(addr)
    except ValueError as e:
        raise Bad(f"must be 'host:port' ({e}) (got {addr!r})") from None
    if not host or port is None or not port.isdigit() or not (0 <= int(port) <= 65535):
        raise Bad(f"must be 'host:port' with a port 0..65535, IPv6 in brackets (got {addr!r})")
    if ":" in host or addr.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise Bad(f"invalid IPv6 address in {addr!r}") from None
    return host.lower(), int(port)
