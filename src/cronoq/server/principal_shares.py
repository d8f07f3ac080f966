"""Per-principal shares of the server's budgets (docs/how-to/security.md#connections-and-streams).

Theory of operation
-------------------
The budgets of a listener (``limits.max_concurrent_requests``, ``max_concurrent_streams``,
``max_connections``) are global: without shares, one tenant holding 1,024 long ``Wait`` calls
locked every other tenant out of submitting, one token could hold every ``/v1/events`` stream,
and one client holding thousands of sockets kept most new connections out.  So each budget also
has a share per caller, counted by :class:`Shares` (in-flight counts per key, a key dropped when
its count is back to 0):

* unary requests (gRPC and HTTP): ``max_requests_per_principal`` per token or certificate
  principal (with auth on; without auth every caller is one principal and only the global
  budget applies);
* event streams (gRPC ``Watch``, HTTP ``/v1/events``): ``max_streams_per_principal`` per token
  (all callers together without auth);
* connections (HTTP listener): ``max_connections_per_address`` per client IP address, whether
  or not it authenticates later (a connection has no principal yet).

The principal of a request is its credential as sent: the ``authorization`` header (a wrong
token is refused with 401 right after, so counting it costs nothing), else the client
certificate's DNS names (mutual TLS), else none.  Pure bookkeeping: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Shares", "principal_key"]


def principal_key(authorization: str | None, cert_dns: Sequence[str] = ()) -> str:
    """The key a caller's share is counted under ("" for no credential)."""
    if authorization:
        return "token:" + authorization
    if cert_dns:
        return "cert:" + ",".join(cert_dns)
    return ""


class Shares:
    """In-flight counts per key, each at most a limit (see the module docstring)."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def take(self, key: str, limit: int) -> bool:
        """Count one more for ``key`` unless it already has ``limit``."""
        n = self.counts.get(key, 0)
        if n >= limit:
            return False
        self.counts[key] = n + 1
        return True

    def give(self, key: str) -> None:
        """The end of one that :meth:`take` counted."""
        n = self.counts[key] - 1
        if n:
            self.counts[key] = n
        else:
            del self.counts[key]
