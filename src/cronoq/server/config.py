"""Server configuration (docs/reference/behaviour.md#server-start-up, docs/reference/config.md#limits): TOML →
validated, frozen dataclasses.

``load_config(path)`` reads a TOML file (stdlib ``tomllib``); without a path it uses the file
named by ``$CRONOQ_CONFIG`` or, failing that, the defaults (one pool ``default``, gRPC on
127.0.0.1:7070, HTTP on 127.0.0.1:7071, SQLite store ``./cronoq.db``, no auth on loopback).

Everything is checked at start: unknown keys are errors at every level, every value is
validated, and every problem is reported (all of them at once) as ``<key path>: <message>``,
e.g. ``pools[0].max: must be an integer >= 1 (got 0)``. Durations are integers or floats of
seconds, finite, >= 0 and <= 365 days. Listening on ``grpc_addr`` / ``http_addr`` beyond
loopback needs ``[[auth.tokens]]`` or ``[[auth.certs]]`` (or ``server.insecure_no_auth`` /
``--insecure-no-auth``); ``metrics_addr`` serves only the unauthenticated /metrics, /healthz
and /readyz. Certificate principals need mutual TLS (``server.tls.client_ca``). The
server-parity sections (token ``labels`` in list form, ``[[auth.certs]]``, ``[outputs]``,
``[server.grpc_web]``) are parsed by their own methods (``certs``, ``outputs``, ``grpc_web``).

Secrets are not kept in clear: tokens are stored as SHA-256 digests (``TokenConfig.digest``);
the store URL and webhook token are excluded from ``repr``.

Engine objects are built by :func:`pool_config` (→ ``cronoq.engine.config.PoolConfig``) and
:func:`resource_configs` (→ ``ResourceConfig``).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from cronoq.engine.config import OVERFLOW_POLICIES, AutoscaleConfig, PoolConfig
from cronoq.engine.model import RetryPolicy
from cronoq.engine.resources import ResourceConfig

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_POOL",
    "FrozenMap",
    "MAX_DURATION_S",
    "MIN_TOKEN_LEN",
    "CertConfig",
    "ConfigError",
    "GrpcWebConfig",
    "OutputsConfig",
    "LimitsConfig",
    "PoolSpec",
    "ResourceSpec",
    "ScalerConfig",
    "ServerConfig",
    "ServerSection",
    "SHARD_ENV",
    "PeerTlsConfig",
    "ShardSpec",
    "StoreConfig",
    "TlsConfig",
    "TokenConfig",
    "autoscale_config",
    "is_loopback",
    "load_config",
    "loads_config",
    "parse_config",
    "pool_config",
    "resource_configs",
    "split_host_port",
    "token_digest",
]

CONFIG_ENV: Final = "CRONOQ_CONFIG"
#: (docs/how-to/shards.md) names the server's own shard when neither --shard nor server.shard does
SHARD_ENV: Final = "CRONOQ_SHARD"
#: the highest shard number (ids carry it in their top 8 bits)
MAX_SHARD_NUMBER: Final = 255
DEFAULT_POOL: Final = "default"
DAY: Final = 86_400
MAX_DURATION_S: Final = 365 * DAY
MIB: Final = 1024 * 1024
MIN_TOKEN_LEN: Final = 16

ROLES: Final = ("client", "worker", "metrics", "admin")
STORE_KINDS: Final = ("memory", "sqlite", "postgres")
SCALER_KINDS: Final = ("external", "webhook")
RESOURCE_KINDS: Final = ("semaphore", "token_bucket")

#: replaced by the server's shard name in ``store.schema`` / ``store.path`` (ours)
SHARD_PLACEHOLDER: Final = "{shard}"
_SCHEMA_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_ENV_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOKEN_RE: Final = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces (header-safe)


# --------------------------------------------------------------------------------------------
# errors


class ConfigError(ValueError):
    """An invalid configuration; ``errors`` lists every problem as ``<key path>: <message>``."""

    def __init__(self, errors: str | Sequence[str], source: str | None = None) -> None:
        self.errors: tuple[str, ...] = (errors,) if isinstance(errors, str) else tuple(errors)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        if len(self.errors) == 1:
            return prefix + self.errors[0]
        lines = "\n".join(f"  {e}" for e in self.errors)
        return f"{prefix}{len(self.errors)} configuration errors:\n{lines}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errors, self.source))


# --------------------------------------------------------------------------------------------
# the configuration

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V], Generic[K, V]):
    """An immutable, hashable, picklable mapping (equal to a dict with the same items)."""

    __slots__ = ("_d",)

    def __init__(self, data: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._d: dict[K, V] = dict(data)

    def __getitem__(self, key: K) -> V:
        return self._d[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        return hash(frozenset(self._d.items()))

    def __repr__(self) -> str:
        return repr(self._d)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._d,))


@dataclass(frozen=True)
class TlsConfig:
    """``[server.tls]``: PEM files; ``client_ca`` turns on mutual TLS."""

    cert: str
    key: str
    client_ca: str | None = None


@dataclass(frozen=True)
class GrpcWebConfig:
    """``[server.grpc_web]``: gRPC-Web for browser clients on the HTTP listener
    (docs/how-to/grpc-web.md); CORS preflights are answered for ``allowed_origins`` only."""

    allowed_origins: tuple[str, ...] = ()


@dataclass(frozen=True)
class PeerTlsConfig:
    """``[server.peer_tls]``: the TLS of calls to ``https://`` peer shards (``ca`` None: the
    system roots; ``cert`` + ``key``: a client certificate)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class ServerSection:
    """``[server]``."""

    grpc_addr: str = "127.0.0.1:7070"
    http_addr: str = "127.0.0.1:7071"
    metrics_addr: str | None = None
    tls: TlsConfig | None = None
    insecure_no_auth: bool = False
    shutdown_grace_s: float = 10.0
    #: ``[server.grpc_web]``; None = off
    grpc_web: GrpcWebConfig | None = None
    # -- shards (docs/how-to/shards.md)
    #: the server's own shard (also ``--shard`` / ``$CRONOQ_SHARD``); None without [[shards]]
    shard: str | None = None
    peer_tls: PeerTlsConfig | None = None
    #: allow forwarding callers' tokens to plain http:// peers beyond loopback
    insecure_peer_http: bool = False


@dataclass(frozen=True)
class TokenConfig:
    """One ``[[auth.tokens]]`` entry. The token itself is kept only as its SHA-256 digest."""

    digest: bytes = field(repr=False)
    role: str
    #: None = every pool; else the only pools this token may touch.
    pools: tuple[str, ...] | None = None
    labels: Mapping[str, str] = field(default_factory=FrozenMap)
    tenant: str | None = None
    #: where the token came from, for messages and logs: ``"auth.tokens[0]"``.
    name: str = ""
    #: the environment variable it was read from, if any.
    token_env: str | None = None


@dataclass(frozen=True)
class CertConfig:
    """One ``[[auth.certs]]`` entry: a client certificate (mutual TLS) whose DNS subject
    alternative name equals ``dns`` gets ``role`` with the restrictions of a token."""

    dns: str
    role: str
    pools: tuple[str, ...] | None = None
    labels: Mapping[str, str] = field(default_factory=FrozenMap)
    tenant: str | None = None
    #: ``"auth.certs[0]"``, for messages and logs
    name: str = ""


@dataclass(frozen=True)
class OutputsConfig:
    """``[outputs]`` (ours: the defaults): the leader's in-memory cache of recent outputs and
    finished task records, which answers ``Wait``/``Get`` after completion
    (docs/reference/config.md#outputs). Beyond ``cache_entries`` outputs or ``cache_bytes``
    bytes the oldest outputs are dropped (the task stays known, ``output_available`` false; the
    newest output always stays); beyond ``info_entries`` (or ``limits.key_retention_max``, the
    smaller) the oldest finished tasks are forgotten."""

    cache_entries: int = 100_000
    cache_bytes: int = 256 * MIB
    info_entries: int = 1_000_000


@dataclass(frozen=True)
class StoreConfig:
    """``[store]``. ``url`` is resolved (from ``url`` or ``$url_env``) for ``postgres``."""

    kind: str = "sqlite"
    path: str = "./cronoq.db"
    url: str | None = field(default=None, repr=False)
    url_env: str = "DATABASE_URL"
    schema: str = "public"
    keep_finished_s: float = 7.0 * DAY
    #: (ours) a commit that takes longer makes the leader step down; its waiters get UNAVAILABLE
    commit_timeout_s: float = 15.0
    #: (ours, postgres) every statement's bound (server and client side) and connecting's
    statement_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0


@dataclass(frozen=True)
class LimitsConfig:
    """``[limits]`` (docs/reference/config.md#limits)."""

    max_tasks_per_batch: int = 1000
    max_pending_total: int = 1_000_000
    max_pending_per_pool: int = 100_000
    max_message_bytes: int = 4 * MIB
    max_http_body_bytes: int = 4 * MIB
    max_key_len: int = 256
    max_kind_len: int = 128
    max_tags: int = 64
    max_tag_len: int = 1024
    max_deps: int = 256
    max_resources: int = 16
    max_wait_s: float = 300.0
    request_timeout_s: float = 30.0
    max_concurrent_requests: int = 1024
    max_concurrent_streams: int = 1024
    max_slots_per_worker: int = 1024
    keepalive_interval_s: float = 20.0
    keepalive_timeout_s: float = 10.0
    key_retention_s: float = 3600.0
    key_retention_max: int = 1_000_000
    max_list: int = 1000
    # (ours, hardening; after the documented limits so positional construction keeps working)
    max_labels: int = 64
    max_label_len: int = 1024
    max_tenant_len: int = 256
    #: open connections per listener (HTTP; gRPC) and how long a request head (HTTP) or the
    #: connection handshake (gRPC) may take: slowloris without a token
    max_connections: int = 4096
    header_timeout_s: float = 10.0
    #: Watch streams of one token (all callers together without auth); worker sessions have
    #: their own budget, so clients can never lock workers out
    max_streams_per_principal: int = 256
    max_worker_sessions: int = 1024
    #: payload bytes the leader holds for live tasks (payloads of 256 bytes and more count)
    max_pending_bytes: int = 256 * MIB


@dataclass(frozen=True)
class ScalerConfig:
    """A pool's scaler: ``external`` (KEDA/HPA read ``desired``; workers bring capacity) or
    ``webhook`` (the desired count is POSTed to ``url``, with ``Bearer $token_env`` if set)."""

    kind: str = "external"
    url: str | None = None
    token_env: str | None = None
    token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class PoolSpec:
    """One ``[[pools]]`` entry; defaults are the in-process ``Pool`` defaults
    (docs/reference/behaviour.md#pool-api)."""

    name: str
    min: int = 1
    max: int = 10
    autoscale: bool = True
    scaler: ScalerConfig = field(default_factory=ScalerConfig)
    #: (ours) a lease not heartbeaten for this long is lost (the attempt is retried): a worker
    #: that is connected but hung never holds its tasks and slots forever
    lease_ttl_s: float | None = 30.0
    max_pending: int = LimitsConfig.max_pending_per_pool
    overflow: str = "wait"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    default_duration_s: float = 1.0
    reservable_fraction: float = 0.5
    await_unknown_dependencies_s: float | None = None
    target_utilization: float = 0.75
    drain_time_s: float = 30.0
    cooldown_s: float = 30.0
    cost_per_worker_second: float = 0.0
    max_slots_per_worker: int | None = None
    fair_share: bool = False
    tenant_weights: Mapping[str, float] = field(default_factory=FrozenMap)


@dataclass(frozen=True)
class ResourceSpec:
    """One ``[[resources]]`` entry: a semaphore (``permits``) or a token bucket (``rate``, ``burst``)."""

    name: str
    kind: str
    permits: int | None = None
    rate: float | None = None
    burst: int | None = None
    #: the shard that owns the resource (required in a sharded config)
    shard: str | None = None

    def to_engine(self) -> ResourceConfig:
        if self.kind == "semaphore":
            assert self.permits is not None
            return ResourceConfig.semaphore(self.name, self.permits)
        assert self.rate is not None and self.burst is not None
        return ResourceConfig.token_bucket(self.name, self.rate, self.burst)


@dataclass(frozen=True)
class ShardSpec:
    """One ``[[shards]]`` entry: a group of pools served by one HA group of servers.

    ``endpoints`` are the gRPC endpoints (``http(s)://host:port``) of that shard: its Service,
    or the addresses of its servers (requests go to whichever leads); ``endpoint`` is the first.
    """

    name: str
    number: int
    pools: tuple[str, ...]
    endpoints: tuple[str, ...]

    @property
    def endpoint(self) -> str:
        return self.endpoints[0]


def _default_pools() -> tuple[PoolSpec, ...]:
    return (PoolSpec(DEFAULT_POOL),)


@dataclass(frozen=True)
class ServerConfig:
    """The whole validated configuration of ``cronoq serve``."""

    server: ServerSection = field(default_factory=ServerSection)
    tokens: tuple[TokenConfig, ...] = ()
    store: StoreConfig = field(default_factory=StoreConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    pools: tuple[PoolSpec, ...] = field(default_factory=_default_pools)
    resources: tuple[ResourceSpec, ...] = ()
    #: the file it was read from (None: defaults / a string).
    source: str | None = None
    #: ``[[auth.certs]]`` certificate principals (mutual TLS)
    certs: tuple[CertConfig, ...] = ()
    outputs: OutputsConfig = field(default_factory=OutputsConfig)
    #: ``[[shards]]`` (empty: one unsharded server group)
    shards: tuple[ShardSpec, ...] = ()

    @property
    def own_shard(self) -> ShardSpec | None:
        """This server's shard (``server.shard``), None without shards."""
        for s in self.shards:
            if s.name == self.server.shard:
                return s
        return None

    @property
    def local_pools(self) -> tuple[PoolSpec, ...]:
        """The pools this server's engine runs: its shard's (every pool without shards)."""
        own = self.own_shard
        if own is None:
            return self.pools
        return tuple(p for p in self.pools if p.name in own.pools)

    @property
    def auth_enabled(self) -> bool:
        """docs/reference/behaviour.md#server-details: once any token (or certificate principal) is
        configured, auth applies on every address."""
        return bool(self.tokens) or bool(self.certs)

    @property
    def pool_names(self) -> list[str]:
        return [p.name for p in self.pools]

    @property
    def default_pool(self) -> str:
        """docs/reference/behaviour.md#concepts: the first pool, unless one is named ``default``."""
        for p in self.pools:
            if p.name == DEFAULT_POOL:
                return p.name
        return self.pools[0].name

    def pool(self, name: str) -> PoolSpec | None:
        for p in self.pools:
            if p.name == name:
                return p
        return None


# --------------------------------------------------------------------------------------------
# engine objects


def autoscale_config(p: PoolSpec) -> AutoscaleConfig | None:
    """The pool's ``AutoscaleConfig`` (None when ``autoscale = false``)."""
    if not p.autoscale:
        return None
    return AutoscaleConfig(
        target_utilization=p.target_utilization,
        drain_time=p.drain_time_s,
        cooldown=p.cooldown_s,
        cost_per_worker_second=p.cost_per_worker_second,
    )


def pool_config(p: PoolSpec, *, initial: int | None = 0) -> PoolConfig:
    """The engine ``PoolConfig`` of a ``[[pools]]`` entry.

    ``initial`` defaults to 0: a server pool's capacity is the granted slots of its connected
    workers (docs/reference/behaviour.md#server-details), 0 until one registers. An unknown dependency is
    awaited for ``await_unknown_dependencies_s`` when set, else rejected.
    """
    awaits = p.await_unknown_dependencies_s is not None
    autoscale = autoscale_config(p)
    return PoolConfig(
        p.name,
        min=p.min,
        max=p.max,
        initial=initial,
        autoscale=autoscale if autoscale is not None else False,
        lease_ttl=p.lease_ttl_s,
        max_pending=p.max_pending,
        overflow=p.overflow,
        retry=p.retry,
        unknown_dependency="await" if awaits else "reject",
        await_timeout=p.await_unknown_dependencies_s,
        default_duration=p.default_duration_s,
        reservable_fraction=p.reservable_fraction,
        tenant_weights=dict(p.tenant_weights),
        fair_share=p.fair_share,
    )


def resource_configs(cfg: ServerConfig) -> list[ResourceConfig]:
    """The engine resources (``Resource.semaphore`` / ``Resource.token_bucket``)."""
    return [r.to_engine() for r in cfg.resources if r.shard is None or r.shard == cfg.server.shard]


def token_digest(token: str) -> bytes:
    """SHA-256 of a token (UTF-8), the only form in which tokens are kept."""
    return hashlib.sha256(token.encode("utf-8")).digest()


# --------------------------------------------------------------------------------------------
# addresses


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


def _parse_listen_addr(addr: str) -> tuple[str, int]:
    try:
        host, port = split_host_port(addr)
    except ValueError as e:
        raise _Bad(f"must be 'host:port' ({e}) (got {addr!r})") from None
    if not host or port is None or not port.isdigit() or not (0 <= int(port) <= 65535):
        raise _Bad(f"must be 'host:port' with a port 0..65535, IPv6 in brackets (got {addr!r})")
    if ":" in host or addr.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _Bad(f"invalid IPv6 address in {addr!r}") from None
    return host.lower(), int(port)


# --------------------------------------------------------------------------------------------
# parsing


class _Bad(Exception):
    """A value failed validation; the message has no key path (the caller adds it)."""


T = TypeVar("T")
Conv = Callable[[Any], T]


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _show(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


def _fmt_seconds(s: float) -> str:
    return str(int(s)) if float(s).is_integer() else str(s)


# converters: value -> validated value, or raise _Bad(message)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(lo: int, hi: int | None = None) -> Conv[int]:
    def conv(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
            raise _Bad(f"must be an integer {rng} (got {_show(v)})")
        return v

    return conv


def _duration(*, positive: bool = False) -> Conv[float]:
    def conv(v: Any) -> float:
        ok = _is_num(v) and math.isfinite(v) and (v > 0 if positive else v >= 0) and v <= MAX_DURATION_S
        if not ok:
            lo = "> 0" if positive else ">= 0"
            raise _Bad(f"must be a number of seconds {lo} and <= 365 days (got {_show(v)})")
        return float(v)

    return conv


def _fraction(lo_open: bool, hi: float = 1.0) -> Conv[float]:
    def conv(v: Any) -> float:
        ok = _is_num(v) and math.isfinite(v) and (v > 0 if lo_open else v >= 0) and v <= hi
        if not ok:
            rng = f"(0, {_fmt_seconds(hi)}]" if lo_open else f"[0, {_fmt_seconds(hi)}]"
            raise _Bad(f"must be a number in {rng} (got {_show(v)})")
        return float(v)

    return conv


def _nonneg_number(v: Any) -> float:
    if not (_is_num(v) and math.isfinite(v) and v >= 0):
        raise _Bad(f"must be a finite number >= 0 (got {_show(v)})")
    return float(v)


def _positive_number(v: Any) -> float:
    if not (_is_num(v) and math.isfinite(v) and v > 0):
        raise _Bad(f"must be a finite number > 0 (got {_show(v)})")
    return float(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _Bad(f"must be true or false (got {_show(v)})")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise _Bad(f"must be a non-empty string (got {_show(v)})")
    return v


def _name(v: Any) -> str:
    s = _str(v)
    if s != s.strip() or any(ord(c) < 32 or ord(c) == 127 for c in s):
        raise _Bad(f"must not have surrounding spaces or control characters (got {s!r})")
    return s


def _choice(options: Sequence[str]) -> Conv[str]:
    def conv(v: Any) -> str:
        if not isinstance(v, str) or v not in options:
            raise _Bad(f"must be one of {', '.join(options)} (got {_show(v)})")
        return v

    return conv


def _env_name(v: Any) -> str:
    s = _str(v)
    if not _ENV_NAME_RE.match(s):
        raise _Bad(f"must be an environment variable name (got {s!r})")
    return s


def _addr(v: Any) -> str:
    s = _str(v)
    _parse_listen_addr(s)
    return s


def _existing_file(v: Any) -> str:
    s = _str(v)
    if not os.path.isfile(s):
        raise _Bad(f"file not found: {s!r}")
    return s


def _http_url(v: Any) -> str:
    s = _str(v)
    if not re.match(r"^https?://[^/\s]+", s):
        raise _Bad(f"must be an http:// or https:// URL (got {s!r})")
    return s


def _pg_url(v: Any) -> str:
    s = _str(v)
    if not re.match(r"^postgres(ql)?://", s):
        raise _Bad("must be a postgresql:// (or postgres://) URL")
    return s


def _schema(v: Any) -> str:
    s = _str(v)
    if not _SCHEMA_RE.match(s.replace(SHARD_PLACEHOLDER, "s")):
        raise _Bad(f"must be an SQL identifier (letters, digits, _; at most 63) (got {s!r})")
    return s


def _token_text(v: Any) -> str:
    if not isinstance(v, str):
        raise _Bad(f"must be a string (got {_show(v)})")
    if len(v) < MIN_TOKEN_LEN:
        raise _Bad(f"must be at least {MIN_TOKEN_LEN} characters (got {len(v)})")
    if not _TOKEN_RE.match(v):
        raise _Bad("must be printable ASCII without spaces")
    return v


def _str_list(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not v:
        raise _Bad(f"must be a non-empty array of strings (got {_show(v)})")
    out: list[str] = []
    for i, x in enumerate(v):
        if not isinstance(x, str) or not x:
            raise _Bad(f"item {i} must be a non-empty string (got {_show(x)})")
        if x not in out:
            out.append(x)
    return tuple(out)


def _str_map(v: Any) -> Mapping[str, str]:
    if not isinstance(v, dict):
        raise _Bad(f"must be a table of strings (got {_show(v)})")
    for k, x in v.items():
        if not k:
            raise _Bad("keys must be non-empty")
        if not isinstance(x, str):
            raise _Bad(f"{k!r} must be a string (got {_show(x)})")
    return FrozenMap(v)


def _labels(v: Any) -> Mapping[str, str]:
    """A token's ``labels``: a table of strings, or the list form ``["zone=z1", "gpu=a100"]``
    (docs/reference/config.md#auth)."""
    if isinstance(v, dict):
        return _str_map(v)
    if not isinstance(v, list):
        raise _Bad(f'must be a table of strings or an array of "key=value" strings (got {_show(v)})')
    out: dict[str, str] = {}
    for i, x in enumerate(v):
        if not isinstance(x, str):
            raise _Bad(f'item {i} must be a "key=value" string (got {_show(x)})')
        k, eq, val = x.partition("=")
        k = k.strip()
        if not eq:
            raise _Bad(f'item {i} must be "key=value" (got {x!r}: no "=")')
        if not k:
            raise _Bad(f'item {i} must be "key=value" with a non-empty key (got {x!r})')
        if k in out:
            raise _Bad(f"item {i}: duplicate label {k!r}")
        out[k] = val.strip()
    return FrozenMap(out)


_DNS_LABEL: Final = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_DNS_RE: Final = re.compile(rf"^(?=.{{1,253}}$){_DNS_LABEL}(\.{_DNS_LABEL})*$")


def _dns_name(v: Any) -> str:
    """A DNS name as it appears in a certificate's subjectAltName (compared case-insensitively)."""
    if not isinstance(v, str) or not v:
        raise _Bad(f"must be a non-empty DNS name (got {_show(v)})")
    name = v.lower().rstrip(".")
    if not _DNS_RE.match(name):
        raise _Bad(f"must be a DNS name such as 'worker-1.example.com' (got {v!r})")
    return name


def _origins(v: Any) -> tuple[str, ...]:
    """``allowed_origins``: browser origins ``scheme://host[:port]`` (no path), as sent in ``Origin``."""
    if not isinstance(v, list):
        raise _Bad(f'must be an array of origins such as "https://dash.example.com" (got {_show(v)})')
    out: list[str] = []
    for i, x in enumerate(v):
        if not isinstance(x, str):
            raise _Bad(f"item {i} must be a string (got {_show(x)})")
        if x == "*":
            raise _Bad(f"item {i}: '*' is not allowed; list each origin")
        m = re.match(r"^(https?)://([^/?#@\s]+)$", x.rstrip("/"))
        if not m:
            raise _Bad(f"item {i} must be an origin 'http(s)://host[:port]' without a path (got {x!r})")
        scheme, host = m.group(1), m.group(2).lower()
        default_port = ":443" if scheme == "https" else ":80"
        if host.endswith(default_port):  # browsers leave the default port out of Origin
            host = host[: -len(default_port)]
        origin = f"{scheme}://{host}"
        if origin not in out:
            out.append(origin)
    return tuple(out)


def _weights(v: Any) -> Mapping[str, float]:
    if not isinstance(v, dict):
        raise _Bad(f"must be a table of tenant = weight (got {_show(v)})")
    out: dict[str, float] = {}
    for k, x in v.items():
        if not (_is_num(x) and math.isfinite(x) and x > 0):
            raise _Bad(f"tenant weights must be finite and > 0 (got {k} = {_show(x)})")
        out[k] = float(x)
    return FrozenMap(out)


def _endpoint(v: Any) -> str:
    """A shard endpoint: ``http(s)://host:port``, no userinfo, no path (a trailing ``/`` is
    dropped)."""
    s = _str(v)
    m = re.match(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", s)
    if m is None or m["scheme"].lower() not in ("http", "https"):
        raise _Bad(f"must be http://host:port or https://host:port (got {s!r})")
    rest = m["rest"]
    if "@" in rest:
        raise _Bad(f"must not carry userinfo (user@ or user:password@) (got {s!r})")
    authority, _, path = rest.partition("/")
    if path or "?" in authority or "#" in authority:
        raise _Bad(f"must not have a path, query or fragment: http(s)://host:port only (got {s!r})")
    try:
        host, port = split_host_port(authority)
    except ValueError as e:
        raise _Bad(f"must be http(s)://host:port ({e}) (got {s!r})") from None
    if not host or port is None or not port.isdigit() or not (1 <= int(port) <= 65535):
        raise _Bad(f"must be http(s)://host:port with a port 1..65535 (got {s!r})")
    return f"{m['scheme'].lower()}://{authority}"


def _endpoints(v: Any) -> tuple[str, ...]:
    """One endpoint, or a non-empty array of them (the addresses of the shard's servers)."""
    if isinstance(v, list):
        if not v:
            raise _Bad("must be an endpoint or a non-empty array of endpoints (got [])")
        return tuple(_endpoint(x) for x in v)
    return (_endpoint(v),)


#: ``[server]`` keys of shards (parsed by :meth:`_Parser.shard_server`)
_SHARD_SERVER_KEYS: Final = ("shard", "peer_tls", "insecure_peer_http")


class _Parser:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.errors: list[str] = []
        self.shard_names: list[str] = []  # (every [[shards]] name given, valid entries or not)

    def error(self, path: str, msg: str) -> None:
        self.errors.append(f"{path}: {msg}")

    def table(
        self, v: Any, path: str, allowed: Sequence[str], what: str = "a table"
    ) -> dict[str, Any] | None:
        """Check that ``v`` is a table with only ``allowed`` keys (reporting unknown ones)."""
        if not isinstance(v, dict):
            self.error(path, f"must be {what} (got {_show(v)})")
            return None
        for k in v:
            if k not in allowed:
                close = difflib.get_close_matches(k, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(allowed)})"
                self.error(_join(path, k), f"unknown key{hint}")
        return v

    def tables(self, v: Any, path: str, header: str) -> list[Any]:
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            self.error(path, f"must be an array of tables ({header}) (got {_show(v)})")
            return []
        return v

    def get(self, t: Mapping[str, Any], key: str, path: str, conv: Conv[T], default: T) -> T:
        if key not in t:
            return default
        try:
            return conv(t[key])
        except _Bad as e:
            self.error(_join(path, key), str(e))
            return default

    def opt(self, t: Mapping[str, Any], key: str, path: str, conv: Conv[T]) -> T | None:
        return self.get(t, key, path, conv, None)

    # ---- sections ------------------------------------------------------------------------

    def server(self, v: Any) -> ServerSection:
        keys: tuple[str, ...] = ("grpc_addr", "http_addr", "metrics_addr", "tls", "insecure_no_auth")
        keys += ("shutdown_grace_s", "grpc_web")
        t = self.table(v, "server", keys + _SHARD_SERVER_KEYS)
        if t is None:
            return ServerSection()
        d = ServerSection()
        tls: TlsConfig | None = None
        if "tls" in t:
            tt = self.table(t["tls"], "server.tls", ("cert", "key", "client_ca"))
            if tt is not None:
                for req in ("cert", "key"):
                    if req not in tt:
                        self.error(f"server.tls.{req}", "required (a PEM file)")
                cert = self.get(tt, "cert", "server.tls", _existing_file, "")
                key = self.get(tt, "key", "server.tls", _existing_file, "")
                ca = self.opt(tt, "client_ca", "server.tls", _existing_file)
                if cert and key:
                    tls = TlsConfig(cert, key, ca)
        section = ServerSection(
            grpc_addr=self.get(t, "grpc_addr", "server", _addr, d.grpc_addr),
            http_addr=self.get(t, "http_addr", "server", _addr, d.http_addr),
            metrics_addr=self.opt(t, "metrics_addr", "server", _addr),
            tls=tls,
            insecure_no_auth=self.get(t, "insecure_no_auth", "server", _bool, False),
            shutdown_grace_s=self.get(t, "shutdown_grace_s", "server", _duration(), d.shutdown_grace_s),
            grpc_web=self.grpc_web(t["grpc_web"]) if "grpc_web" in t else None,
        )
        return dataclasses.replace(section, **self.shard_server(t))

    # ---- shards (docs/how-to/shards.md) ------------------------------------------------------

    def shard_server(self, t: Mapping[str, Any]) -> dict[str, Any]:
        """The ``[server]`` keys of shards: ``shard``, ``peer_tls``, ``insecure_peer_http``."""
        peer_tls: PeerTlsConfig | None = None
        if "peer_tls" in t:
            tt = self.table(t["peer_tls"], "server.peer_tls", ("ca", "cert", "key"))
            if tt is not None:
                ca = self.opt(tt, "ca", "server.peer_tls", _existing_file)
                cert = self.opt(tt, "cert", "server.peer_tls", _existing_file)
                key = self.opt(tt, "key", "server.peer_tls", _existing_file)
                if ("cert" in tt) != ("key" in tt):
                    missing = "key" if "cert" in tt else "cert"
                    msg = "required with cert and key together (PEM files)"
                    self.error(f"server.peer_tls.{missing}", msg)
                peer_tls = PeerTlsConfig(ca, cert, key)
        return {
            "shard": self.opt(t, "shard", "server", _name),
            "peer_tls": peer_tls,
            "insecure_peer_http": self.get(t, "insecure_peer_http", "server", _bool, False),
        }

    def shards(self, v: Any, pool_names: Sequence[str]) -> tuple[ShardSpec, ...]:
        """``[[shards]]``: unique names and numbers 1..255, every pool in exactly one shard."""
        out: list[ShardSpec] = []
        names: dict[str, str] = {}
        numbers: dict[int, str] = {}
        owner: dict[str, str] = {}
        raw_shards = self.tables(v, "shards", "[[shards]]")
        if isinstance(v, list) and not v:
            self.error("shards", "at least one shard is required (leave out [[shards]] for one server group)")
        for i, raw in enumerate(raw_shards):
            path = f"shards[{i}]"
            t = self.table(raw, path, ("name", "number", "pools", "endpoint"))
            if t is None:
                continue
            n = len(self.errors)
            for req, what in (
                ("name", "a unique name"),
                ("number", f"a unique integer in 1..{MAX_SHARD_NUMBER}"),
                ("pools", "a list of pool names"),
                ("endpoint", "http(s)://host:port"),
            ):
                if req not in t:
                    self.error(f"{path}.{req}", f"required ({what})")
            name = self.get(t, "name", path, _name, "")
            if name in names:
                self.error(f"{path}.name", f"duplicate shard name {name!r} (also {names[name]})")
            elif name:
                names[name] = path
            number = self.get(t, "number", path, _int(1, MAX_SHARD_NUMBER), 0)
            if number in numbers:
                self.error(f"{path}.number", f"duplicate shard number {number} (also {numbers[number]})")
            elif number:
                numbers[number] = path
            no_pools: tuple[str, ...] = ()
            pools = self.get(t, "pools", path, _str_list, no_pools)
            for pool in pools:
                if pool not in pool_names:
                    close = difflib.get_close_matches(pool, pool_names, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else f" (pools: {', '.join(pool_names)})"
                    self.error(f"{path}.pools", f"unknown pool {pool!r}{hint}")
                elif pool in owner:
                    self.error(f"{path}.pools", f"pool {pool!r} is already in shard {owner[pool]!r}")
                else:
                    owner[pool] = name or path
            endpoints = self.get(t, "endpoint", path, _endpoints, no_pools)
            if len(self.errors) == n:
                out.append(ShardSpec(name, number, pools, endpoints))
        self.shard_names = list(names)
        if raw_shards:
            for pool in pool_names:
                if pool not in owner:
                    self.error("shards", f"pool {pool!r} is in no shard (every pool must be in exactly one)")
        return tuple(out)

    def check_sharding(
        self,
        shards: tuple[ShardSpec, ...],
        sharded: bool,
        server: ServerSection,
        store: StoreConfig,
        resources: tuple[ResourceSpec, ...],
        flag: str | None,
    ) -> tuple[ServerSection, StoreConfig]:
        """The rules between [[shards]] and the rest; fills in ``server.shard`` (flag, file,
        ``$CRONOQ_SHARD``) and the ``{shard}`` placeholder of the store."""
        own = flag or server.shard or self.env.get(SHARD_ENV) or None
        where = "--shard" if flag else "server.shard" if server.shard else f"${SHARD_ENV}"
        names = self.shard_names
        if not sharded:
            if flag or server.shard:  # (a deployment-wide $CRONOQ_SHARD is ignored)
                self.error("server.shard", f"{where} = {own!r} needs [[shards]] (there are none)")
            for i, r in enumerate(resources):
                if r.shard is not None:
                    self.error(f"resources[{i}].shard", "only used with [[shards]]")
            for key in ("schema", "path"):
                if SHARD_PLACEHOLDER in getattr(store, key):
                    self.error(f"store.{key}", f"{SHARD_PLACEHOLDER} needs [[shards]] (there are none)")
            return dataclasses.replace(server, shard=None), store
        if own is None:
            self.error(
                "server.shard",
                f"required with [[shards]]: name this server's shard (server.shard, --shard or "
                f"${SHARD_ENV}; shards: {', '.join(names)})",
            )
        elif own not in names and names:
            close = difflib.get_close_matches(own, names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"shards: {', '.join(names)}"
            self.error("server.shard", f"{where} names no shard: {own!r} ({hint})")
        for i, r in enumerate(resources):
            if r.shard is None:
                msg = "required with [[shards]] (the shard that owns the resource)"
                self.error(f"resources[{i}].shard", msg)
            elif r.shard not in names and names:
                close = difflib.get_close_matches(r.shard, names, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"shards: {', '.join(names)}"
                self.error(f"resources[{i}].shard", f"unknown shard {r.shard!r} ({hint})")
        if own is not None:
            schema = store.schema.replace(SHARD_PLACEHOLDER, own)
            if store.kind == "postgres" and not _SCHEMA_RE.match(schema):
                msg = f"with the shard name {own!r} it is not an SQL identifier ({schema!r})"
                self.error("store.schema", msg)
            store = dataclasses.replace(store, schema=schema, path=store.path.replace(SHARD_PLACEHOLDER, own))
        return dataclasses.replace(server, shard=own), store

    def tokens(self, v: Any, pool_names: Sequence[str]) -> tuple[TokenConfig, ...]:
        t = self.table(v, "auth", ("tokens", "certs"))
        if t is None or "tokens" not in t:
            return ()
        out: list[TokenConfig] = []
        seen: dict[bytes, str] = {}
        for i, raw in enumerate(self.tables(t["tokens"], "auth.tokens", "[[auth.tokens]]")):
            path = f"auth.tokens[{i}]"
            keys = ("token", "token_env", "role", "pools", "labels", "tenant")
            tt = self.table(raw, path, keys)
            if tt is None:
                continue
            role = self.get(tt, "role", path, _choice(ROLES), "")
            if "role" not in tt:
                self.error(f"{path}.role", f"required (one of {', '.join(ROLES)})")
            pools, labels, tenant = self.restrictions(tt, path, pool_names)
            token: str | None = None
            token_env: str | None = None
            if "token" in tt and "token_env" in tt:
                self.error(path, "give token or token_env, not both")
            elif "token" in tt:
                token = self.opt(tt, "token", path, _token_text)
            elif "token_env" in tt:
                token_env = self.opt(tt, "token_env", path, _env_name)
                if token_env is not None:
                    value = self.env.get(token_env)
                    if not value:
                        self.error(f"{path}.token_env", f"environment variable {token_env!r} is not set")
                    else:
                        try:
                            token = _token_text(value)
                        except _Bad as e:
                            self.error(f"{path}.token_env", f"the token in ${token_env} {e}")
            else:
                self.error(path, "token or token_env is required")
            if token is None or not role:
                continue
            digest = token_digest(token)
            if digest in seen:
                self.error(path, f"duplicate token (same as {seen[digest]})")
                continue
            seen[digest] = path
            out.append(TokenConfig(digest, role, pools, labels, tenant, name=path, token_env=token_env))
        return tuple(out)

    def restrictions(
        self, tt: Mapping[str, Any], path: str, pool_names: Sequence[str]
    ) -> tuple[tuple[str, ...] | None, Mapping[str, str], str | None]:
        """The ``pools``, ``labels`` and ``tenant`` of a token or certificate principal."""
        pools = self.opt(tt, "pools", path, _str_list)
        if pools is not None:
            for p in pools:
                if p not in pool_names:
                    self.error(f"{path}.pools", f"unknown pool {p!r} (pools: {', '.join(pool_names)})")
        no_labels: Mapping[str, str] = FrozenMap()
        labels = self.get(tt, "labels", path, _labels, no_labels)
        tenant = self.opt(tt, "tenant", path, _name)
        return pools, labels, tenant

    def certs(self, v: Any, pool_names: Sequence[str]) -> tuple[CertConfig, ...]:
        """``[[auth.certs]]`` (the ``[auth]`` table itself is checked by :meth:`tokens`)."""
        if not isinstance(v, dict) or "certs" not in v:
            return ()
        out: list[CertConfig] = []
        seen: dict[str, str] = {}
        for i, raw in enumerate(self.tables(v["certs"], "auth.certs", "[[auth.certs]]")):
            path = f"auth.certs[{i}]"
            tt = self.table(raw, path, ("dns", "role", "pools", "labels", "tenant"))
            if tt is None:
                continue
            role = self.get(tt, "role", path, _choice(ROLES), "")
            if "role" not in tt:
                self.error(f"{path}.role", f"required (one of {', '.join(ROLES)})")
            if "dns" not in tt:
                self.error(f"{path}.dns", "required (a client certificate's DNS subjectAltName)")
            dns = self.get(tt, "dns", path, _dns_name, "")
            pools, labels, tenant = self.restrictions(tt, path, pool_names)
            if not dns or not role:
                continue
            if dns in seen:
                self.error(f"{path}.dns", f"duplicate certificate principal {dns!r} (same as {seen[dns]})")
                continue
            seen[dns] = path
            out.append(CertConfig(dns, role, pools, labels, tenant, name=path))
        return tuple(out)

    def outputs(self, v: Any) -> OutputsConfig:
        t = self.table(v, "outputs", ("cache_entries", "cache_bytes", "info_entries"))
        d = OutputsConfig()
        if t is None:
            return d
        return OutputsConfig(
            cache_entries=self.get(t, "cache_entries", "outputs", _int(1), d.cache_entries),
            cache_bytes=self.get(t, "cache_bytes", "outputs", _int(1), d.cache_bytes),
            info_entries=self.get(t, "info_entries", "outputs", _int(1), d.info_entries),
        )

    def grpc_web(self, v: Any) -> GrpcWebConfig | None:
        t = self.table(v, "server.grpc_web", ("allowed_origins",))
        if t is None:
            return None
        origins: tuple[str, ...] = ()
        if "allowed_origins" not in t:
            self.error("server.grpc_web.allowed_origins", 'required (e.g. ["https://dash.example.com"])')
        else:
            origins = self.get(t, "allowed_origins", "server.grpc_web", _origins, ())
        return GrpcWebConfig(origins)

    def store(self, v: Any) -> StoreConfig:
        t = self.table(
            v,
            "store",
            (
                "kind",
                "path",
                "url",
                "url_env",
                "schema",
                "keep_finished_s",
                "commit_timeout_s",
                "statement_timeout_s",
                "connect_timeout_s",
            ),
        )
        if t is None:
            return StoreConfig()
        d = StoreConfig()
        kind = self.get(t, "kind", "store", _choice(STORE_KINDS), d.kind)
        url = self.opt(t, "url", "store", _pg_url if kind == "postgres" else _str)
        url_env = self.get(t, "url_env", "store", _env_name, d.url_env)
        if "url" in t and "url_env" in t:
            self.error("store", "give url or url_env, not both")
        elif kind == "postgres" and url is None and "url" not in t:
            value = self.env.get(url_env)
            if not value:
                self.error(
                    "store.url_env",
                    f"environment variable {url_env!r} is not set "
                    '(store.kind = "postgres" needs store.url or store.url_env)',
                )
            else:
                try:
                    url = _pg_url(value)
                except _Bad as e:
                    self.error("store.url_env", f"${url_env} {e}")
        return StoreConfig(
            kind=kind,
            path=self.get(t, "path", "store", _str, d.path),
            url=url,
            url_env=url_env,
            schema=self.get(t, "schema", "store", _schema, d.schema),
            keep_finished_s=self.get(t, "keep_finished_s", "store", _duration(), d.keep_finished_s),
            commit_timeout_s=self.get(
                t, "commit_timeout_s", "store", _duration(positive=True), d.commit_timeout_s
            ),
            statement_timeout_s=self.get(
                t, "statement_timeout_s", "store", _duration(positive=True), d.statement_timeout_s
            ),
            connect_timeout_s=self.get(
                t, "connect_timeout_s", "store", _duration(positive=True), d.connect_timeout_s
            ),
        )

    _LIMIT_CONVS: Final[Mapping[str, Conv[Any]]] = {
        "max_tasks_per_batch": _int(1),
        "max_pending_total": _int(1),
        "max_pending_per_pool": _int(1),
        "max_message_bytes": _int(1024, 2**31 - 1),
        "max_http_body_bytes": _int(1024, 2**31 - 1),
        "max_key_len": _int(1),
        "max_kind_len": _int(1),
        "max_tags": _int(0),
        "max_tag_len": _int(1),
        "max_deps": _int(0),
        "max_resources": _int(0),
        "max_labels": _int(0),
        "max_label_len": _int(1),
        "max_tenant_len": _int(1),
        "max_connections": _int(1),
        "header_timeout_s": _duration(positive=True),
        "max_streams_per_principal": _int(1),
        "max_worker_sessions": _int(1),
        "max_pending_bytes": _int(1),
        "max_wait_s": _duration(positive=True),
        "request_timeout_s": _duration(positive=True),
        "max_concurrent_requests": _int(1),
        "max_concurrent_streams": _int(1),
        "max_slots_per_worker": _int(1),
        "keepalive_interval_s": _duration(positive=True),
        "keepalive_timeout_s": _duration(positive=True),
        "key_retention_s": _duration(),
        "key_retention_max": _int(0),
        "max_list": _int(1),
    }

    def limits(self, v: Any) -> LimitsConfig:
        t = self.table(v, "limits", tuple(self._LIMIT_CONVS))
        if t is None:
            return LimitsConfig()
        d = LimitsConfig()
        values = {k: self.get(t, k, "limits", conv, getattr(d, k)) for k, conv in self._LIMIT_CONVS.items()}
        return dataclasses.replace(d, **values)

    def scaler(self, v: Any, path: str) -> ScalerConfig:
        if isinstance(v, str):
            if v == "webhook":
                self.error(path, 'a webhook scaler needs a url: scaler = {kind = "webhook", url = "..."}')
            elif v != "external":
                self.error(path, f'must be "external" or a table {{kind, url, token_env}} (got {v!r})')
            return ScalerConfig()
        what = '"external" or a table {kind, url, token_env}'
        t = self.table(v, path, ("kind", "url", "token_env"), what=what)
        if t is None:
            return ScalerConfig()
        kind = self.get(t, "kind", path, _choice(SCALER_KINDS), "webhook" if "url" in t else "external")
        if kind == "external":
            for k in ("url", "token_env"):
                if k in t:
                    self.error(f"{path}.{k}", 'only used with kind = "webhook"')
            return ScalerConfig()
        if "url" not in t:
            self.error(f"{path}.url", "required for a webhook scaler")
        url = self.opt(t, "url", path, _http_url)
        token_env = self.opt(t, "token_env", path, _env_name)
        token: str | None = None
        if token_env is not None:
            token = self.env.get(token_env) or None
            if token is None:
                self.error(f"{path}.token_env", f"environment variable {token_env!r} is not set")
        return ScalerConfig("webhook", url, token_env, token)

    def retry(self, v: Any, path: str) -> RetryPolicy:
        keys = ("max_attempts", "initial_backoff_s", "multiplier", "max_backoff_s", "jitter")
        t = self.table(v, path, keys, what="a table {max_attempts, initial_backoff_s, ...}")
        if t is None:
            return RetryPolicy()
        d = RetryPolicy()
        n = len(self.errors)
        max_attempts = self.get(t, "max_attempts", path, _int(1), d.max_attempts)
        initial_backoff = self.get(t, "initial_backoff_s", path, _duration(), d.initial_backoff)
        multiplier = self.get(t, "multiplier", path, _positive_number, d.multiplier)
        max_backoff = self.get(t, "max_backoff_s", path, _duration(), d.max_backoff)
        jitter = self.get(t, "jitter", path, _bool, d.jitter)
        if len(self.errors) > n:
            return d
        try:
            return RetryPolicy(max_attempts, initial_backoff, multiplier, max_backoff, jitter)
        except ValueError as e:  # pragma: no cover - the checks above are stricter
            self.error(path, str(e))
            return d

    _POOL_KEYS: Final = (
        "name",
        "min",
        "max",
        "autoscale",
        "scaler",
        "lease_ttl_s",
        "max_pending",
        "overflow",
        "retry",
        "default_duration_s",
        "reservable_fraction",
        "await_unknown_dependencies_s",
        "target_utilization",
        "drain_time_s",
        "cooldown_s",
        "cost_per_worker_second",
        "max_slots_per_worker",
        "fair_share",
        "tenant_weights",
    )

    def pools(self, v: Any, limits: LimitsConfig) -> tuple[PoolSpec, ...]:
        raw_pools = self.tables(v, "pools", "[[pools]]")
        if isinstance(v, list) and not v:
            self.error("pools", "at least one pool is required (leave out [[pools]] for one pool 'default')")
        out: list[PoolSpec] = []
        names: dict[str, str] = {}
        for i, raw in enumerate(raw_pools):
            path = f"pools[{i}]"
            t = self.table(raw, path, self._POOL_KEYS)
            if t is None:
                continue
            n_errors = len(self.errors)
            if "name" not in t:
                self.error(f"{path}.name", "required")
            name = self.get(t, "name", path, _name, "")
            if name in names:
                self.error(f"{path}.name", f"duplicate pool name {name!r} (also {names[name]})")
            elif name:
                names[name] = path
            d = PoolSpec(name or DEFAULT_POOL)
            mn = self.get(t, "min", path, _int(0), d.min)
            mx = self.get(t, "max", path, _int(1), d.max)
            if mn > mx:
                self.error(f"{path}.min", f"must be <= max (got min = {mn}, max = {mx})")
            spec = PoolSpec(
                name=name,
                min=mn,
                max=mx,
                autoscale=self.get(t, "autoscale", path, _bool, d.autoscale),
                scaler=self.scaler(t["scaler"], f"{path}.scaler") if "scaler" in t else ScalerConfig(),
                lease_ttl_s=self.get(t, "lease_ttl_s", path, _duration(positive=True), d.lease_ttl_s),
                max_pending=self.get(t, "max_pending", path, _int(1), limits.max_pending_per_pool),
                overflow=self.get(t, "overflow", path, _choice(OVERFLOW_POLICIES), d.overflow),
                retry=self.retry(t["retry"], f"{path}.retry") if "retry" in t else d.retry,
                default_duration_s=self.get(t, "default_duration_s", path, _duration(), d.default_duration_s),
                reservable_fraction=self.get(
                    t, "reservable_fraction", path, _fraction(lo_open=False), d.reservable_fraction
                ),
                await_unknown_dependencies_s=self.opt(t, "await_unknown_dependencies_s", path, _duration()),
                target_utilization=self.get(
                    t, "target_utilization", path, _fraction(lo_open=True), d.target_utilization
                ),
                drain_time_s=self.get(t, "drain_time_s", path, _duration(positive=True), d.drain_time_s),
                cooldown_s=self.get(t, "cooldown_s", path, _duration(), d.cooldown_s),
                cost_per_worker_second=self.get(
                    t, "cost_per_worker_second", path, _nonneg_number, d.cost_per_worker_second
                ),
                max_slots_per_worker=self.opt(t, "max_slots_per_worker", path, _int(1)),
                fair_share=self.get(t, "fair_share", path, _bool, d.fair_share),
                tenant_weights=self.get(t, "tenant_weights", path, _weights, FrozenMap()),
            )
            if len(self.errors) == n_errors:
                try:  # belt and braces: the engine must accept what we accepted
                    pool_config(spec)
                except ValueError as e:  # pragma: no cover
                    self.error(path, str(e))
            out.append(spec)
        return tuple(out)

    def resources(self, v: Any) -> tuple[ResourceSpec, ...]:
        out: list[ResourceSpec] = []
        names: dict[str, str] = {}
        for i, raw in enumerate(self.tables(v, "resources", "[[resources]]")):
            path = f"resources[{i}]"
            t = self.table(raw, path, ("name", "kind", "permits", "rate", "burst", "shard"))
            if t is None:
                continue
            n = len(self.errors)
            if "name" not in t:
                self.error(f"{path}.name", "required")
            if "kind" not in t:
                self.error(f"{path}.kind", "required (semaphore or token_bucket)")
            name = self.get(t, "name", path, _name, "")
            if name in names:
                self.error(f"{path}.name", f"duplicate resource name {name!r} (also {names[name]})")
            elif name:
                names[name] = path
            kind = self.get(t, "kind", path, _choice(RESOURCE_KINDS), "")
            permits: int | None = None
            rate: float | None = None
            burst: int | None = None
            if kind == "semaphore":
                for k in ("rate", "burst"):
                    if k in t:
                        self.error(f"{path}.{k}", 'only used with kind = "token_bucket"')
                if "permits" not in t:
                    self.error(f"{path}.permits", "required for a semaphore (an integer >= 1)")
                permits = self.opt(t, "permits", path, _int(1))
            elif kind == "token_bucket":
                if "permits" in t:
                    self.error(f"{path}.permits", 'only used with kind = "semaphore"')
                for k in ("rate", "burst"):
                    if k not in t:
                        self.error(f"{path}.{k}", "required for a token_bucket")
                rate = self.opt(t, "rate", path, _positive_number)
                burst = self.opt(t, "burst", path, _int(1))
            shard = self.opt(t, "shard", path, _name)
            if len(self.errors) == n:
                out.append(ResourceSpec(name, kind, permits, rate, burst, shard))
        return tuple(out)


_TOP_KEYS: Final = ("server", "auth", "store", "limits", "pools", "resources", "shards", "outputs")


def parse_config(
    data: Mapping[str, Any],
    *,
    env: Mapping[str, str] = os.environ,
    insecure_no_auth: bool = False,
    source: str | None = None,
    shard: str | None = None,
) -> ServerConfig:
    """Validate already-decoded TOML (a dict); ``insecure_no_auth`` and ``shard`` are the CLI
    flags (``--shard`` wins over ``server.shard`` and ``$CRONOQ_SHARD``)."""
    p = _Parser(env)
    top = p.table(dict(data), "", _TOP_KEYS, what="a table")
    assert top is not None
    limits = p.limits(top["limits"]) if "limits" in top else LimitsConfig()
    pools = p.pools(top["pools"], limits) if "pools" in top else _default_pools()
    if not pools:
        pools = _default_pools()
    pool_names = [x.name for x in pools if x.name]
    tokens = p.tokens(top["auth"], pool_names) if "auth" in top else ()
    certs = p.certs(top["auth"], pool_names) if "auth" in top else ()
    outputs = p.outputs(top["outputs"]) if "outputs" in top else OutputsConfig()
    store = p.store(top["store"]) if "store" in top else StoreConfig()
    server = p.server(top["server"]) if "server" in top else ServerSection()
    resources = p.resources(top["resources"]) if "resources" in top else ()
    if insecure_no_auth and not server.insecure_no_auth:
        server = dataclasses.replace(server, insecure_no_auth=True)
    auth_configured = bool(tokens) or bool(certs) or any(True for e in p.errors if e.startswith("auth."))
    if certs and (server.tls is None or server.tls.client_ca is None):
        p.error("auth.certs", "certificate principals need mutual TLS: set server.tls.client_ca")
    shards = p.shards(top["shards"], pool_names) if "shards" in top else ()
    server, store = p.check_sharding(shards, "shards" in top, server, store, resources, shard)

    # listening beyond loopback needs auth (metrics_addr is unauthenticated by design)
    if not auth_configured and not server.insecure_no_auth:
        for key in ("grpc_addr", "http_addr"):
            addr = getattr(server, key)
            if not is_loopback(addr):
                p.error(
                    f"server.{key}",
                    f"listening on {addr!r} (beyond loopback) requires [[auth.tokens]] "
                    "(or server.insecure_no_auth = true / --insecure-no-auth)",
                )
    # distinct listeners (port 0 = any free port, never a clash)
    seen: dict[tuple[str, int], str] = {}
    for key in ("grpc_addr", "http_addr", "metrics_addr"):
        addr = getattr(server, key)
        if addr is None:
            continue
        try:
            hp = _parse_listen_addr(addr)
        except _Bad:  # pragma: no cover - validated above
            continue
        if hp[1] != 0 and hp in seen:
            p.error(f"server.{key}", f"must differ from server.{seen[hp]} (both {addr!r})")
        seen.setdefault(hp, key)

    if p.errors:
        raise ConfigError(p.errors, source)
    return ServerConfig(
        server=server,
        tokens=tokens,
        store=store,
        limits=limits,
        pools=pools,
        resources=resources,
        source=source,
        certs=certs,
        outputs=outputs,
        shards=shards,
    )


def loads_config(
    text: str,
    *,
    env: Mapping[str, str] = os.environ,
    insecure_no_auth: bool = False,
    source: str | None = None,
    shard: str | None = None,
) -> ServerConfig:
    """Parse and validate TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"invalid TOML: {e}", source) from None
    except RecursionError:  # (tomllib recurses per nesting level of arrays and inline tables)
        raise ConfigError("invalid TOML: values are nested too deeply", source) from None
    return parse_config(data, env=env, insecure_no_auth=insecure_no_auth, source=source, shard=shard)


def load_config(
    path: str | os.PathLike[str] | None,
    *,
    env: Mapping[str, str] = os.environ,
    insecure_no_auth: bool = False,
    shard: str | None = None,
) -> ServerConfig:
    """Load the server configuration.

    ``path`` None → the file named by ``$CRONOQ_CONFIG`` (when set and non-empty), else the
    defaults. ``insecure_no_auth`` is the ``--insecure-no-auth`` flag (or-ed with the file's).
    Raises :class:`ConfigError` naming the file and every invalid key.
    """
    if path is None:
        path = env.get(CONFIG_ENV) or None
    if path is None:
        return parse_config({}, env=env, insecure_no_auth=insecure_no_auth, shard=shard)
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ConfigError("config file not found", source) from None
    except OSError as e:
        raise ConfigError(f"cannot read config file: {e.strerror or e}", source) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("config file is not valid UTF-8", source) from None
    return loads_config(text, env=env, insecure_no_auth=insecure_no_auth, source=source, shard=shard)
