"""The configuration reference of ``cronoq serve``, generated from the config code itself.

Nothing here restates what the code decides. For every table of the TOML file the generator
asks :func:`cronoq.server.config.parse_config`:

- which keys it accepts: a table holding only an unknown key is refused with
  ``unknown key (known: a, b, ...)``, which lists them in the parser's own order; the same probe
  reports the keys that are ``required``;
- how each key is validated: the key is set to a few wrong values and the parser's messages
  (``must be an integer >= 1``, ``must be one of memory, sqlite, postgres``, ...) become the
  "validation" column;
- its default: read from the defaults ``parse_config({})`` returns (the frozen dataclasses).

Only the one-line meaning of each key is written here (:data:`DESCRIPTIONS`). A key the parser
accepts without a description fails the build (strict mode) and ``tests/docs``, and so does a
description of a key that no longer exists: the page cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

PROBE_KEY = "qqqqqqqq"


class _Probe:
    """A value no converter accepts; shown as ``PROBE`` in messages."""

    def __str__(self) -> str:
        return "PROBE"

    __repr__ = __str__


#: Wrong values tried on every key (their messages, minus the "(got ...)" part, are the rules).
PROBES: tuple[Any, ...] = (_Probe(), "", "x y", -1, 10**12)


def _no_base(key: str) -> dict[str, Any]:
    return {}


@dataclasses.dataclass(frozen=True)
class Table:
    """One table of the file: its name in the docs, how to build a config holding ``{k: v}`` in
    it, the key path the parser reports, where its defaults live, and the other keys a probe of
    ``key`` needs beside it (``base(key)``) so that only ``key`` is wrong."""

    name: str
    build: Callable[[dict[str, Any]], dict[str, Any]]
    path: str
    defaults: Callable[[Any], Any] | None
    intro: str
    base: Callable[[str], dict[str, Any]] = _no_base


def _resource_base(key: str) -> dict[str, Any]:
    return {"name": "r", "kind": "token_bucket" if key in ("rate", "burst") else "semaphore"}


TABLES: tuple[Table, ...] = (
    Table("top level", lambda t: t, "", None, "The file's top-level tables."),
    Table("[server]", lambda t: {"server": t}, "server", lambda c: c.server, "Listeners, TLS and shutdown."),
    Table(
        "[server.tls]",
        lambda t: {"server": {"tls": t}},
        "server.tls",
        None,
        "TLS for both listeners (PEM files). `client_ca` turns on mutual TLS.",
    ),
    Table(
        "[server.grpc_web]",
        lambda t: {"server": {"grpc_web": t}},
        "server.grpc_web",
        None,
        "gRPC-Web for browser clients on the HTTP listener (off when absent); see "
        "[gRPC-Web](../how-to/grpc-web.md).",
    ),
    Table("[auth]", lambda t: {"auth": t}, "auth", None, "Authentication."),
    Table(
        "[[auth.tokens]]",
        lambda t: {"auth": {"tokens": [t]}},
        "auth.tokens[0]",
        None,
        "One entry per bearer token. Give `token` or `token_env`, not both. Once any token is "
        "configured, auth applies on every address (loopback included).",
        lambda key: {"role": "client"},
    ),
    Table(
        "[[auth.certs]]",
        lambda t: {"auth": {"certs": [t]}},
        "auth.certs[0]",
        None,
        "Certificate principals (mutual TLS, needs `server.tls.client_ca`): a client certificate "
        "whose DNS subjectAltName equals `dns` gets `role`, with the restrictions of a token. "
        "See [certificate principals](../how-to/security.md#certificate-principals).",
        lambda key: {"role": "client", "dns": "w.example.com"},
    ),
    Table("[store]", lambda t: {"store": t}, "store", lambda c: c.store, "Where durable state lives."),
    Table(
        "[limits]",
        lambda t: {"limits": t},
        "limits",
        lambda c: c.limits,
        "Bounds on requests, streams and memory.",
    ),
    Table(
        "[outputs]",
        lambda t: {"outputs": t},
        "outputs",
        lambda c: c.outputs,
        "The leader's in-memory cache of recent outputs and finished task records, which "
        "answers `Wait`/`Get` after completion. Beyond `cache_entries` outputs or "
        "`cache_bytes` bytes (data and content type) the oldest outputs are dropped: the task "
        "answers `succeeded` with `output_available` false (the newest output always stays). "
        "Beyond `info_entries` finished tasks (or `limits.key_retention_max`, the smaller) the "
        "oldest are forgotten (`not_found`, "
        "their keys free). The store keeps its copy for `store.keep_finished_s`.",
    ),
    Table(
        "[[pools]]",
        lambda t: {"pools": [t]},
        "pools[0]",
        lambda c: c.pools[0],
        "One entry per pool. Only `name` is required; every other key has the in-process "
        "[`Pool`](api.md#cronoq.Pool) default. Without `[[pools]]` there is one pool `default`.",
        lambda key: {"name": "p"},
    ),
    Table(
        "[pools.retry]",
        lambda t: {"pools": [{"name": "p", "retry": t}]},
        "pools[0].retry",
        lambda c: c.pools[0].retry,
        "A pool's retry policy, e.g. `retry = {max_attempts = 5, initial_backoff_s = 0.5}`.",
    ),
    Table(
        "[pools.scaler]",
        lambda t: {"pools": [{"name": "p", "scaler": t}]},
        "pools[0].scaler",
        None,
        'A pool\'s scaler: the string `"external"` (the default: KEDA/HPA read `desired`, '
        'workers bring the capacity) or a table; with `kind = "webhook"` (implied by `url`) the '
        "desired count is POSTed to `url`, which is then required.",
        lambda key: {"kind": "webhook", "url": "http://h"},
    ),
    Table(
        "[[resources]]",
        lambda t: {"resources": [t]},
        "resources[0]",
        None,
        "Shared resources: a semaphore (`permits`, required) or a token bucket (`rate` and "
        "`burst`, required).",
        _resource_base,
    ),
    Table(
        "[server.peer_tls]",
        lambda t: {"server": {"peer_tls": t}},
        "server.peer_tls",
        None,
        "TLS of calls to `https://` peer shards (PEM files); without `ca` the system roots. "
        "`cert` and `key` (a client certificate) go together.",
    ),
    Table(
        "[[shards]]",
        lambda t: {"shards": [t]},
        "shards[0]",
        None,
        "One entry per shard ([Scaling out with shards](../how-to/shards.md)): every pool in "
        "exactly one shard; every server of every shard reads the same file.",
        lambda key: {"name": "s", "number": 1, "pools": ["p"], "endpoint": "http://h:1"},
    ),
)

#: The meaning of every key, by "<table name> <key>". Keep to one line each.
DESCRIPTIONS: Mapping[str, str] = {
    "top level server": "the `[server]` table",
    "top level auth": "the `[auth]` table (`[[auth.tokens]]`, `[[auth.certs]]`)",
    "top level store": "the `[store]` table",
    "top level limits": "the `[limits]` table",
    "top level pools": "the `[[pools]]` array of tables",
    "top level resources": "the `[[resources]]` array of tables",
    "top level shards": "the `[[shards]]` array of tables (pools split between leaders)",
    "[server] shard": "this server's shard, a `[[shards]]` name (also `--shard`, `$CRONOQ_SHARD`; "
    "the flag wins)",
    "[server] peer_tls": "the `[server.peer_tls]` table",
    "[server] insecure_peer_http": "forward callers' tokens to plain `http://` peers beyond loopback",
    "[server.peer_tls] ca": "CA bundle that peers' certificates must chain to (default: system roots)",
    "[server.peer_tls] cert": "client certificate presented to peers (PEM, with `key`)",
    "[server.peer_tls] key": "its private key (PEM, with `cert`)",
    "[[shards]] name": "the shard's name (unique)",
    "[[shards]] number": "1..255, unique, carried in the top 8 bits of its task ids",
    "[[shards]] pools": "the pools this shard serves",
    "[[shards]] endpoint": "`http(s)://host:port` of its leader (a Service), or a list of its servers",
    "[[resources]] shard": "the shard that owns the resource (required with `[[shards]]`)",
    "[server] grpc_addr": "gRPC listener `host:port` (port 0 = any free port)",
    "[server] http_addr": "HTTP/JSON, SSE, dashboard and `/metrics` listener",
    "[server] metrics_addr": "an extra listener serving only `/metrics`, `/healthz`, `/readyz`, "
    "unauthenticated",
    "[server] tls": "the `[server.tls]` table",
    "[server] insecure_no_auth": "allow listening beyond loopback without tokens (also `--insecure-no-auth`)",
    "[server] shutdown_grace_s": "on SIGTERM/SIGINT, how long running attempts may finish",
    "[server.tls] cert": "server certificate (PEM)",
    "[server.tls] key": "its private key (PEM)",
    "[server.tls] client_ca": "CA bundle that client certificates must chain to (mutual TLS)",
    "[auth] tokens": "the `[[auth.tokens]]` entries",
    "[[auth.tokens]] token": "the token itself (kept only as its SHA-256 digest)",
    "[[auth.tokens]] token_env": "the environment variable holding the token",
    "[[auth.tokens]] role": "`client` (Tasks), `worker` (Workers.Work), `metrics` (read-only), `admin` (all)",
    "[[auth.tokens]] pools": "restrict the token to these pools (default: every pool)",
    "[[auth.tokens]] labels": (
        'worker labels the token\'s workers register with: a table or a list `["zone=z1", "gpu=a100"]`'
    ),
    "[[auth.tokens]] tenant": "stamp and enforce this tenant on the token's submissions",
    "[auth] certs": "the `[[auth.certs]]` entries (certificate principals, mutual TLS)",
    "[[auth.certs]] dns": "the DNS subjectAltName a client certificate must carry (case-insensitive)",
    "[[auth.certs]] role": "`client`, `worker`, `metrics` or `admin`, as for a token",
    "[[auth.certs]] pools": "restrict the certificate to these pools (default: every pool)",
    "[[auth.certs]] labels": "worker labels the certificate's workers register with (table or list)",
    "[[auth.certs]] tenant": "stamp and enforce this tenant on the certificate's submissions",
    "[server] grpc_web": "the `[server.grpc_web]` table (gRPC-Web for browsers; off when absent)",
    "[server.grpc_web] allowed_origins": "browser origins (`https://host[:port]`) answered CORS preflights",
    "top level outputs": "the `[outputs]` table",
    "[outputs] cache_entries": "outputs kept in memory (oldest dropped first)",
    "[outputs] cache_bytes": "bytes of outputs kept in memory (oldest dropped first)",
    "[outputs] info_entries": "finished task records kept in memory (`limits.key_retention_max` if smaller)",
    "[store] kind": "`memory` (nothing persisted), `sqlite` or `postgres`",
    "[store] path": "SQLite file",
    "[store] url": "PostgreSQL URL (`postgresql://...`)",
    "[store] url_env": "environment variable holding the PostgreSQL URL when `url` is not given",
    "[store] schema": "PostgreSQL schema (one cluster per schema)",
    "[store] keep_finished_s": "how long the store keeps finished tasks and their outputs",
    "[store] commit_timeout_s": "a slower commit: the leader steps down, its callers get UNAVAILABLE",
    "[store] statement_timeout_s": "PostgreSQL: bound of every statement (a hung database)",
    "[store] connect_timeout_s": "PostgreSQL: bound of connecting",
    "[limits] max_tasks_per_batch": "tasks in one `SubmitBatch`",
    "[limits] max_pending_total": "not-yet-running tasks over all pools",
    "[limits] max_pending_per_pool": "default `max_pending` of a pool",
    "[limits] max_message_bytes": "largest gRPC message (both directions)",
    "[limits] max_http_body_bytes": "largest HTTP request body (413 beyond)",
    "[limits] max_key_len": "longest task key",
    "[limits] max_kind_len": "longest task kind",
    "[limits] max_tags": "tags per task",
    "[limits] max_tag_len": "longest tag key or value",
    "[limits] max_deps": "dependencies per task",
    "[limits] max_resources": "resources per task",
    "[limits] max_labels": "worker labels a task may require",
    "[limits] max_label_len": "longest label key or value",
    "[limits] max_tenant_len": "longest tenant name",
    "[limits] max_pending_bytes": "payload bytes held by not-yet-running tasks (`overloaded` beyond)",
    "[limits] max_connections": "open connections per listener (HTTP and gRPC)",
    "[limits] header_timeout_s": "a request head (HTTP) or handshake (gRPC) must arrive within this",
    "[limits] max_streams_per_principal": "Watch / SSE streams of one token (of all callers without auth)",
    "[limits] max_worker_sessions": "worker sessions: their own budget, so clients never lock workers out",
    "[limits] max_wait_s": "longest wait of `Wait` / `?wait=true` / `/result`",
    "[limits] request_timeout_s": "deadline of one unary request",
    "[limits] max_concurrent_requests": "unary requests in flight (RESOURCE_EXHAUSTED / 429 beyond)",
    "[limits] max_concurrent_streams": "open Watch, worker and SSE streams",
    "[limits] max_slots_per_worker": "slots granted to one worker at most",
    "[limits] keepalive_interval_s": "gRPC keepalive ping interval",
    "[limits] keepalive_timeout_s": "gRPC keepalive ping timeout",
    "[limits] key_retention_s": "how long a finished task's key stays reserved (dedup, deps, lookups)",
    "[limits] key_retention_max": "at most this many retained finished tasks (oldest dropped first)",
    "[limits] max_list": "largest `ListTasks` page",
    "[[pools]] name": "the pool's name (unique)",
    "[[pools]] min": "lower bound of the autoscaler's `desired`",
    "[[pools]] max": "upper bound of `desired` and of one worker's grant",
    "[[pools]] autoscale": "compute `desired` (exported as `cronoq_pool_desired` and sent to the scaler)",
    "[[pools]] scaler": 'who acts on `desired`: `"external"` or a `[pools.scaler]` table',
    "[[pools]] lease_ttl_s": "workers must heartbeat within this (server default 30 s)",
    "[[pools]] max_pending": "not-yet-running tasks of the pool (default `limits.max_pending_per_pool`)",
    "[[pools]] overflow": "what a full pool does with a new task: `wait`, `reject`, `shed_lowest`, "
    "`shed_oldest`",
    "[[pools]] retry": "the pool's default retry policy (`[pools.retry]`)",
    "[[pools]] default_duration_s": "expected duration before any run time was learned",
    "[[pools]] reservable_fraction": "share of `max` that fixed-start reservations may overlap on",
    "[[pools]] await_unknown_dependencies_s": "await unknown dependency keys this long (unset = reject them)",
    "[[pools]] target_utilization": "autoscaler's target busy share",
    "[[pools]] drain_time_s": "autoscaler: drain the backlog within this",
    "[[pools]] cooldown_s": "autoscaler: at most one step down per cooldown",
    "[[pools]] cost_per_worker_second": "price of one slot-second, for the `cost` figure",
    "[[pools]] max_slots_per_worker": "cap on one worker's grant in this pool",
    "[[pools]] fair_share": "weighted fair share between tenants within a class",
    "[[pools]] tenant_weights": "`{tenant = weight}`; unlisted tenants weigh 1",
    "[pools.retry] max_attempts": "attempts in total (1 = no retry)",
    "[pools.retry] initial_backoff_s": "delay after the first failed attempt",
    "[pools.retry] multiplier": "factor per further attempt",
    "[pools.retry] max_backoff_s": "cap on the delay",
    "[pools.retry] jitter": "draw each delay uniformly in [delay/2, delay]",
    "[pools.scaler] kind": "`external` or `webhook`",
    "[pools.scaler] url": "webhook URL the desired count is POSTed to",
    "[pools.scaler] token_env": "environment variable with a bearer token for the webhook",
    "[[resources]] name": "the resource's name (unique), used in a task's `resources`",
    "[[resources]] kind": "`semaphore` or `token_bucket`",
    "[[resources]] permits": "semaphore: units held while running",
    "[[resources]] rate": "token bucket: refill per second",
    "[[resources]] burst": "token bucket: capacity (it starts full)",
}

_KNOWN_RE = re.compile(r": unknown key \(known: (?P<keys>[^)]*)\)$")
_GOT_RE = re.compile(r" \(got .*\)$")


def _errors(data: dict[str, Any]) -> tuple[str, ...]:
    from cronoq.server.config import ConfigError, parse_config

    try:
        parse_config(data, env={})
    except ConfigError as e:
        return e.errors
    return ()


def _key_path(table: Table, key: str) -> str:
    return f"{table.path}.{key}" if table.path else key


def known_keys(table: Table) -> tuple[list[str], dict[str, str]]:
    """The keys ``table`` accepts, in the parser's order, and the required ones with their note."""
    errors = _errors(table.build({PROBE_KEY: 1}))
    keys: list[str] = []
    required: dict[str, str] = {}
    prefix = _key_path(table, "")
    for e in errors:
        m = _KNOWN_RE.search(e)
        if m and e.startswith(_key_path(table, PROBE_KEY) + ":"):
            keys = [k.strip() for k in m["keys"].split(",")]
    for e in errors:
        path, _, msg = e.partition(": ")
        key = path[len(prefix) :] if path.startswith(prefix) else ""
        if key in keys and msg.startswith("required"):
            required[key] = msg
    if not keys:
        raise RuntimeError(f"cannot read the keys of {table.name}: {errors}")
    return keys, required


def rules(table: Table, key: str) -> list[str]:
    """The parser's messages for wrong values of ``key`` (without the "(got ...)" part)."""
    out: list[str] = []
    for probe in PROBES:
        for e in _errors(table.build({**table.base(key), key: probe})):
            path, _, msg = e.partition(": ")
            if path != _key_path(table, key):
                continue
            msg = _GOT_RE.sub("", msg)
            msg = re.sub(r": ('x y'|''|PROBE|-1)$", "", msg)
            if msg not in out:
                out.append(msg)
    return out


def _toml(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, bool):
        return "`true`" if v else "`false`"
    if isinstance(v, str):
        return f'`"{v}"`'
    if isinstance(v, float):
        if math.isfinite(v) and v.is_integer():
            return f"`{int(v):_}`".replace("_", ",") if abs(v) >= 10_000 else f"`{int(v)}`"
        return f"`{v}`"
    if isinstance(v, int):
        return f"`{v:,}`"
    if isinstance(v, Mapping):
        return "`{}`" if not v else f"`{dict(v)}`"
    if isinstance(v, (tuple, list)):
        return f"`{list(v)}`"
    kind = getattr(v, "kind", None)
    if isinstance(kind, str):  # ScalerConfig
        return f'`"{kind}"`'
    if hasattr(v, "max_attempts"):  # RetryPolicy
        return "[`RetryPolicy()`](#pools-retry)"
    return f"`{v}`"


def default(table: Table, key: str, defaults_root: Any) -> str:
    if table.defaults is None:
        return "-"
    obj = table.defaults(defaults_root)
    if obj is None:
        return "-"
    for attr in (key, key.removesuffix("_s")):
        if hasattr(obj, attr):
            return _toml(getattr(obj, attr))
    return "-"


def undocumented() -> list[str]:
    """Keys the parser accepts that :data:`DESCRIPTIONS` does not describe."""
    return [f"{t.name} {k}" for t in TABLES for k in known_keys(t)[0] if f"{t.name} {k}" not in DESCRIPTIONS]


def stale() -> list[str]:
    """Descriptions of keys the parser no longer accepts."""
    accepted = {f"{t.name} {k}" for t in TABLES for k in known_keys(t)[0]}
    return sorted(set(DESCRIPTIONS) - accepted)


def problems() -> list[str]:
    out = [
        f"config key {k} has no description in docs/hooks/ref_config.py DESCRIPTIONS" for k in undocumented()
    ]
    out += [f"docs/hooks/ref_config.py describes {k}, which the config no longer accepts" for k in stale()]
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    from cronoq.server.config import parse_config

    root = parse_config({}, env={})
    lines: list[str] = []
    for table in TABLES:
        keys, required = known_keys(table)
        anchor = re.sub(r"[^a-z0-9]+", "-", table.name.lower()).strip("-")
        lines += [f"### `{table.name}` {{#{anchor}}}" if table.path else f"### Top level {{#{anchor}}}", ""]
        lines += [table.intro, ""]
        lines += ["| key | default | validation | meaning |", "|---|---|---|---|"]
        for key in keys:
            desc = DESCRIPTIONS.get(f"{table.name} {key}", "**not described yet**")
            checks = rules(table, key)
            if key in required:
                checks.insert(0, f"**{required[key]}**")
            rule = _cell("; ".join(checks)) or "-"
            dflt = "-" if key in required else default(table, key, root)
            lines.append(f"| `{key}` | {dflt} | {rule} | {_cell(desc)} |")
        lines.append("")
    return "\n".join(lines)


def serve_options() -> str:
    """The options of ``cronoq serve`` with their environment variables (from the click command)."""
    import click

    from cronoq.cli import serve

    lines = ["| option | environment | default | meaning |", "|---|---|---|---|"]
    for p in serve.params:
        if not isinstance(p, click.Option):
            continue
        flags = ", ".join(f"`{o}`" for o in p.opts)
        if not p.is_flag and p.metavar is None and isinstance(p.type, click.Choice):
            flags += " `LEVEL`"
        elif not p.is_flag:
            flags += " `PATH`" if isinstance(p.type, click.Path) else " `VALUE`"
        env = p.envvar if isinstance(p.envvar, str) else ", ".join(p.envvar or ())
        dflt = "-" if p.default in (None, False) or p.is_flag else f"`{p.default}`"
        meaning = p.help or (p.name or "").replace("_", " ")
        if isinstance(p.type, click.Choice):
            meaning += " (one of " + ", ".join(f"`{c}`" for c in p.type.choices) + ")"
        lines.append(f"| {flags} | {f'`{env}`' if env else '-'} | {dflt} | {_cell(meaning)} |")
    return "\n".join(lines)
