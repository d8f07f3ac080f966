"""Authentication and authorization of `cronoq serve` (docs/reference/behaviour.md#auth,
docs/reference/behaviour.md#server-details).

* Tokens are ``authorization: Bearer <token>`` (gRPC metadata and HTTP header), checked before
  the body is read. They are kept only as SHA-256 digests and compared in constant time
  (``hmac.compare_digest``, against every configured digest: no early exit).
* Auth is on once any token is configured, on every address (loopback included); without
  tokens :meth:`Authenticator.authenticate` returns None and every check lets it through.
* Roles: ``client`` → Tasks; ``worker`` → Workers.Work; ``metrics`` → Snapshot, ListWorkers,
  ListRecurring, /metrics, /v1/snapshot; ``admin`` → everything. A token's ``pools`` restrict
  everything to those pools; its ``tenant`` is stamped on submissions and enforced.
* Missing/bad token → :class:`Unauthenticated` (UNAUTHENTICATED / 401); wrong role, pool or
  tenant → :class:`PermissionDenied` (PERMISSION_DENIED / 403).
* Without auth on loopback, HTTP requests must carry a loopback ``Host`` (DNS-rebinding
  protection): :func:`host_is_loopback`, :meth:`Authenticator.check_http_host`.
* Certificate principals (``[[auth.certs]]``, mutual TLS): a client certificate whose DNS
  subject alternative name equals an entry's ``dns`` (case-insensitive) is that entry's
  principal, with the same role, pools, labels and tenant rules as a token. The transport
  verified the certificate against ``server.tls.client_ca``; the front ends pass the DNS names
  of the verified peer certificate (gRPC: the ``peer_dns`` auth property; HTTP: the TLS
  socket's peer certificate) to :meth:`Authenticator.authenticate`. Precedence (ours): a bearer
  token, when one is sent, decides alone (an invalid one is UNAUTHENTICATED even beside a
  mapped certificate): an explicit credential beats the ambient one, and a caller holding a
  broad certificate can act with a narrower token. Without a token the certificate decides;
  when several entries match, the first configured one wins. Auth is on once any token or
  certificate principal is configured.

The HTTP layer maps routes to actions itself: ``/v1/tasks…`` and ``/v1/events`` → the Tasks
actions (``/v1/events`` = :attr:`Action.WATCH`), ``GET /v1/snapshot`` → ``SNAPSHOT``,
``GET /v1/workers`` → ``LIST_WORKERS``, ``GET /v1/recurring[/…]`` → ``LIST_RECURRING``,
``PUT``/``DELETE /v1/recurring/…`` → ``ADD_RECURRING``/``REMOVE_RECURRING``, ``/metrics`` →
``METRICS`` (on ``http_addr`` only; ``metrics_addr`` and /healthz, /readyz need no token).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from cronoq.errors import CronoqError
from cronoq.server.config import (
    CertConfig,
    FrozenMap,
    ServerConfig,
    TokenConfig,
    is_loopback,
    split_host_port,
    token_digest,
)

__all__ = [
    "GRPC_METHOD_ACTIONS",
    "METRICS_ACTIONS",
    "ROLE_ACTIONS",
    "Action",
    "AuthError",
    "Authenticator",
    "PermissionDenied",
    "Principal",
    "Role",
    "TASK_ACTIONS",
    "Unauthenticated",
    "allows_pool",
    "authorize",
    "check_pool",
    "check_tenant",
    "host_is_loopback",
    "parse_bearer",
    "restrict_pools",
    "stamp_labels",
    "stamp_tenant",
]


# --------------------------------------------------------------------------------------------
# errors


class AuthError(CronoqError):
    """Base of the auth errors; ``code`` is the lower-case gRPC status name, ``http_status``
    the HTTP status (docs/reference/behaviour.md#server-details)."""

    code: str = ""
    http_status: int = 0

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))


class Unauthenticated(AuthError):
    """Missing or bad token → UNAUTHENTICATED / 401."""

    code = "unauthenticated"
    http_status = 401


class PermissionDenied(AuthError):
    """Wrong role, pool or tenant (or a non-loopback Host without auth) → PERMISSION_DENIED / 403."""

    code = "permission_denied"
    http_status = 403


# --------------------------------------------------------------------------------------------
# roles and actions


class Role(StrEnum):
    CLIENT = "client"
    WORKER = "worker"
    METRICS = "metrics"
    ADMIN = "admin"


class Action(StrEnum):
    """Everything a caller can ask for; one per RPC (plus the HTTP-only /metrics)."""

    # Tasks (client)
    SUBMIT = "submit"
    SUBMIT_BATCH = "submit_batch"
    CANCEL = "cancel"
    GET = "get"
    LIST_TASKS = "list_tasks"
    WAIT = "wait"
    WATCH = "watch"
    # Workers (worker)
    WORK = "work"
    # Admin, read-only (metrics)
    SNAPSHOT = "snapshot"
    LIST_WORKERS = "list_workers"
    LIST_RECURRING = "list_recurring"
    METRICS = "metrics"
    # Admin, changing (admin only)
    ADD_RECURRING = "add_recurring"
    REMOVE_RECURRING = "remove_recurring"
    # Operations (docs/how-to/operations.md): replay and bulk actions are task actions (client)
    REPLAY = "replay"
    REPLAY_WHERE = "replay_where"
    CANCEL_WHERE = "cancel_where"
    # signals (docs/how-to/durable.md#signals): a task action (client)
    SIGNAL = "signal"
    # ... pausing, resuming and "run now" are admin only
    PAUSE_POOL = "pause_pool"
    RESUME_POOL = "resume_pool"
    PAUSE_RECURRING = "pause_recurring"
    RESUME_RECURRING = "resume_recurring"
    TRIGGER_RECURRING = "trigger_recurring"


TASK_ACTIONS: Final = frozenset(
    {
        Action.SUBMIT,
        Action.SUBMIT_BATCH,
        Action.CANCEL,
        Action.GET,
        Action.LIST_TASKS,
        Action.WAIT,
        Action.WATCH,
        Action.REPLAY,
        Action.REPLAY_WHERE,
        Action.CANCEL_WHERE,
        Action.SIGNAL,
    }
)
METRICS_ACTIONS: Final = frozenset(
    {Action.SNAPSHOT, Action.LIST_WORKERS, Action.LIST_RECURRING, Action.METRICS}
)

ROLE_ACTIONS: Final[Mapping[Role, frozenset[Action]]] = MappingProxyType(
    {
        Role.CLIENT: TASK_ACTIONS,
        Role.WORKER: frozenset({Action.WORK}),
        Role.METRICS: METRICS_ACTIONS,
        Role.ADMIN: frozenset(Action),
    }
)

#: full gRPC method name → action, for an interceptor.
GRPC_METHOD_ACTIONS: Final[Mapping[str, Action]] = MappingProxyType(
    {
        "/cronoq.v1.Tasks/Submit": Action.SUBMIT,
        "/cronoq.v1.Tasks/SubmitBatch": Action.SUBMIT_BATCH,
        "/cronoq.v1.Tasks/SubmitMany": Action.SUBMIT,
        "/cronoq.v1.Tasks/Cancel": Action.CANCEL,
        "/cronoq.v1.Tasks/Get": Action.GET,
        "/cronoq.v1.Tasks/ListTasks": Action.LIST_TASKS,
        "/cronoq.v1.Tasks/Wait": Action.WAIT,
        "/cronoq.v1.Tasks/Watch": Action.WATCH,
        "/cronoq.v1.Workers/Work": Action.WORK,
        "/cronoq.v1.Admin/Snapshot": Action.SNAPSHOT,
        "/cronoq.v1.Admin/ListResourceKeys": Action.SNAPSHOT,
        "/cronoq.v1.Admin/AddRecurring": Action.ADD_RECURRING,
        "/cronoq.v1.Admin/RemoveRecurring": Action.REMOVE_RECURRING,
        "/cronoq.v1.Admin/ListWorkers": Action.LIST_WORKERS,
        "/cronoq.v1.Admin/ListRecurring": Action.LIST_RECURRING,
        "/cronoq.v1.Tasks/Replay": Action.REPLAY,
        "/cronoq.v1.Tasks/ReplayWhere": Action.REPLAY_WHERE,
        "/cronoq.v1.Tasks/CancelWhere": Action.CANCEL_WHERE,
        "/cronoq.v1.Tasks/Signal": Action.SIGNAL,
        "/cronoq.v1.Admin/PausePool": Action.PAUSE_POOL,
        "/cronoq.v1.Admin/ResumePool": Action.RESUME_POOL,
        "/cronoq.v1.Admin/PauseRecurring": Action.PAUSE_RECURRING,
        "/cronoq.v1.Admin/ResumeRecurring": Action.RESUME_RECURRING,
        "/cronoq.v1.Admin/TriggerRecurring": Action.TRIGGER_RECURRING,
    }
)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the role and restrictions of the token that was presented."""

    role: Role
    #: None = every pool; else the only pools the caller may touch or see.
    pools: frozenset[str] | None = None
    labels: Mapping[str, str] = field(default_factory=FrozenMap)
    tenant: str | None = None
    #: which token or certificate entry matched (``"auth.tokens[0]"``, ``"auth.certs[0]"``), for
    #: logs and per-principal budgets; never the token itself.
    name: str = ""

    def can(self, action: Action | str) -> bool:
        return Action(action) in ROLE_ACTIONS[self.role]


# --------------------------------------------------------------------------------------------
# checks (a None principal means "auth is off": everything passes)


def authorize(principal: Principal | None, action: Action | str, pool: str | None = None) -> None:
    """Raise :class:`PermissionDenied` unless ``principal`` may do ``action`` (on ``pool``).

    ``pool`` is the pool the request acts on, already resolved (the default pool for a
    submission without one); None for requests not tied to one pool.
    """
    if principal is None:
        return
    act = Action(action)
    if act not in ROLE_ACTIONS[principal.role]:
        raise PermissionDenied(f"role '{principal.role}' is not allowed to {act.value}")
    if pool is not None:
        check_pool(principal, pool)


def allows_pool(principal: Principal | None, pool: str) -> bool:
    """Whether the caller may touch or see ``pool``."""
    return principal is None or principal.pools is None or pool in principal.pools


def check_pool(principal: Principal | None, pool: str) -> None:
    if not allows_pool(principal, pool):
        raise PermissionDenied(f"token is not allowed to use pool '{pool}'")


def restrict_pools(principal: Principal | None, requested: Iterable[str] = ()) -> list[str] | None:
    """The pool filter of a listing/watch request (``ListTasks``, ``Watch``, ``/v1/events``).

    Empty ``requested`` means every pool the caller may see: None (no filter) for an
    unrestricted caller, else the token's pools (sorted). Requested pools outside the
    token's → :class:`PermissionDenied`.
    """
    wanted = list(dict.fromkeys(requested))
    if principal is None or principal.pools is None:
        return wanted or None
    if not wanted:
        return sorted(principal.pools)
    for p in wanted:
        check_pool(principal, p)
    return wanted


def stamp_tenant(principal: Principal | None, requested_tenant: str | None) -> str | None:
    """The tenant a submission gets: the token's tenant when it has one (a different requested
    tenant → :class:`PermissionDenied`), else what was requested (``""`` → None)."""
    requested = requested_tenant or None
    if principal is None or principal.tenant is None:
        return requested
    if requested is not None and requested != principal.tenant:
        raise PermissionDenied(f"token may only submit for tenant '{principal.tenant}' (got '{requested}')")
    return principal.tenant


def check_tenant(principal: Principal | None, task_tenant: str | None) -> None:
    """Enforce the token's tenant on an existing task (Get, Cancel, Wait, ...)."""
    if principal is None or principal.tenant is None:
        return
    if (task_tenant or None) != principal.tenant:
        raise PermissionDenied(f"token may only access tasks of tenant '{principal.tenant}'")


def stamp_labels(principal: Principal | None, requested: Mapping[str, str] | None) -> dict[str, str]:
    """The labels a worker registers with: its own plus the token's ``labels`` (which win; a
    requested label contradicting the token's → :class:`PermissionDenied`)."""
    out = dict(requested or {})
    if principal is None:
        return out
    for k, v in principal.labels.items():
        if k in out and out[k] != v:
            raise PermissionDenied(f"token fixes label {k}={v!r} (got {out[k]!r})")
        out[k] = v
    return out


def host_is_loopback(host_header: str | None) -> bool:
    """A ``Host`` header naming loopback: ``localhost``, 127.0.0.0/8 or ``[::1]``, with or
    without a port. A missing or malformed header is not."""
    if not host_header:
        return False
    host_header = host_header.strip()
    try:
        host, port = split_host_port(host_header)
    except ValueError:
        return False
    if port is not None and not (port.isdigit() and int(port) <= 65535):
        return False
    # a bare IPv6 literal (``::1``, no port possible) is accepted like ``[::1]``
    return bool(host) and is_loopback(host_header)


def parse_bearer(authorization_header: str | None) -> str:
    """The token of an ``authorization: Bearer <token>`` value, else :class:`Unauthenticated`."""
    if authorization_header is None or not authorization_header.strip():
        raise Unauthenticated("missing authorization header (expected 'Bearer <token>')")
    scheme, _, token = authorization_header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("malformed authorization header (expected 'Bearer <token>')")
    return token


# --------------------------------------------------------------------------------------------
# the authenticator


def _principal_of(entry: TokenConfig | CertConfig) -> Principal:
    return Principal(
        role=Role(entry.role),
        pools=None if entry.pools is None else frozenset(entry.pools),
        labels=FrozenMap(entry.labels),
        tenant=entry.tenant,
        name=entry.name,
    )


class Authenticator:
    """Checks bearer tokens against the configured digests, and client certificates' DNS
    names against ``[[auth.certs]]``."""

    __slots__ = ("_certs", "_entries", "auth_enabled", "certs_enabled")

    def __init__(self, config: ServerConfig) -> None:
        self._entries: tuple[tuple[bytes, Principal], ...] = tuple(
            (t.digest, _principal_of(t)) for t in config.tokens
        )
        self._certs: tuple[tuple[str, Principal], ...] = tuple(
            (c.dns, _principal_of(c)) for c in config.certs
        )
        #: whether the front ends must look at peer certificates (``[[auth.certs]]`` configured)
        self.certs_enabled: bool = bool(self._certs)
        #: docs/reference/behaviour.md#server-details: once any token (or certificate principal) is
        #: configured, auth applies on every address.
        self.auth_enabled: bool = bool(self._entries) or self.certs_enabled

    def authenticate(
        self, authorization_header: str | None, peer_dns: Iterable[str] = ()
    ) -> Principal | None:
        """The caller's principal; None when auth is off (whatever header was sent).

        ``peer_dns``: the DNS subject alternative names of the caller's verified client
        certificate (none without mutual TLS). A sent token decides alone; without one the
        certificate does (module docstring). Raises :class:`Unauthenticated` for a missing,
        malformed or unknown token, or a certificate no ``[[auth.certs]]`` entry maps.
        """
        if not self.auth_enabled:
            return None
        if self.certs_enabled and (authorization_header is None or not authorization_header.strip()):
            return self.cert_principal(peer_dns)
        token = parse_bearer(authorization_header)
        digest = token_digest(token)
        found: Principal | None = None
        for d, principal in self._entries:  # compare against all: timing reveals nothing
            if hmac.compare_digest(d, digest) and found is None:
                found = principal
        if found is None:
            raise Unauthenticated("invalid token")
        return found

    def cert_principal(self, peer_dns: Iterable[str]) -> Principal:
        """The ``[[auth.certs]]`` principal of a client certificate with these DNS names (the first
        configured entry that matches), else :class:`Unauthenticated`."""
        names = {d.lower().rstrip(".") for d in peer_dns}
        for dns, principal in self._certs:
            if dns in names:
                return principal
        if not names:
            raise Unauthenticated(
                "missing authorization header (expected 'Bearer <token>') and no client certificate "
                "mapped by [[auth.certs]]"
            )
        raise Unauthenticated(
            f"client certificate (DNS {', '.join(sorted(names))}) is not mapped by [[auth.certs]]"
        )

    def authorize(self, principal: Principal | None, action: Action | str, pool: str | None = None) -> None:
        authorize(principal, action, pool)

    def check(
        self,
        authorization_header: str | None,
        action: Action | str,
        pool: str | None = None,
        peer_dns: Iterable[str] = (),
    ) -> Principal | None:
        """``authenticate`` then ``authorize``: the usual one-liner of a handler."""
        principal = self.authenticate(authorization_header, peer_dns)
        authorize(principal, action, pool)
        return principal

    def host_check_required(self, listen_addr: str) -> bool:
        """DNS-rebinding protection applies to an HTTP listener on loopback without auth."""
        return not self.auth_enabled and is_loopback(listen_addr)

    def check_http_host(self, listen_addr: str, host_header: str | None) -> None:
        """Raise :class:`PermissionDenied` for a non-loopback ``Host`` when the check applies."""
        if self.host_check_required(listen_addr) and not host_is_loopback(host_header):
            raise PermissionDenied(
                f"Host header {host_header!r} is not a loopback name; without auth this server "
                "only answers requests addressed to localhost, 127.0.0.1 or [::1]"
            )

    @property
    def roles(self) -> Sequence[Role]:
        """The roles of the configured tokens and certificate principals (for a start-up log line)."""
        return [p.role for _, p in self._entries + self._certs]
