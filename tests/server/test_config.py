"""docs/reference/behaviour.md#server-start-up, docs/reference/config.md#limits,
docs/reference/behaviour.md#server-details: `cronoq serve` configuration (TOML → validated, frozen
pydantic models)."""

from __future__ import annotations

import hashlib
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cronoq.engine.config import AutoscaleConfig, PoolConfig
from cronoq.engine.model import RetryPolicy
from cronoq.engine.resources import ResourceConfig
from cronoq.engine.time import to_ns
from cronoq.server.config import (
    CONFIG_ENV,
    MAX_DURATION_S,
    ConfigError,
    FrozenMap,
    LimitsConfig,
    PoolSpec,
    ResourceSpec,
    ScalerConfig,
    ServerConfig,
    ServerSection,
    StoreConfig,
    TlsConfig,
    autoscale_config,
    is_loopback,
    load_config,
    loads_config,
    parse_config,
    pool_config,
    resource_configs,
    split_host_port,
    token_digest,
)

TOKEN = "s3cret-token-0123456789"
TOKEN2 = "another-token-abcdefghij"
REPO = Path(__file__).resolve().parents[2]


def cfg(text: str, env: dict[str, str] | None = None, **kw: Any) -> ServerConfig:
    return loads_config(text, env=env or {}, **kw)


def errors_of(text: str, env: dict[str, str] | None = None, **kw: Any) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as ei:
        cfg(text, env, **kw)
    return ei.value.errors


def one_error(text: str, env: dict[str, str] | None = None, **kw: Any) -> str:
    errs = errors_of(text, env, **kw)
    assert len(errs) == 1, errs
    return errs[0]


# ---------------------------------------------------------------------------------------------
# defaults


def test_no_config_defaults() -> None:
    c = load_config(None, env={})
    assert c.server == ServerSection()
    assert c.server.grpc_addr == "127.0.0.1:7070"
    assert c.server.http_addr == "127.0.0.1:7071"
    assert c.server.metrics_addr is None
    assert c.server.tls is None
    assert c.server.insecure_no_auth is False
    assert c.server.shutdown_grace_s == 10
    assert c.tokens == ()
    assert c.auth_enabled is False
    assert c.store == StoreConfig()
    assert (c.store.kind, c.store.path, c.store.url, c.store.url_env, c.store.schema) == (
        "sqlite",
        "./cronoq.db",
        None,
        "DATABASE_URL",
        "public",
    )
    assert c.store.keep_finished_s == 7 * 86400
    assert c.limits == LimitsConfig()
    assert [p.name for p in c.pools] == ["default"]
    assert c.pool_names == ["default"]
    assert c.default_pool == "default"
    assert c.resources == ()
    assert c.source is None


def test_empty_file_is_defaults() -> None:
    assert cfg("") == ServerConfig()


def test_limits_defaults_match_spec() -> None:
    lim = LimitsConfig()
    assert lim.model_dump() == {
        "max_tasks_per_batch": 1000,
        "max_pending_total": 1_000_000,
        "max_pending_per_pool": 100_000,
        "max_message_bytes": 4 * 1024 * 1024,
        "max_http_body_bytes": 4 * 1024 * 1024,
        "max_key_len": 256,
        "max_kind_len": 128,
        "max_tags": 64,
        "max_tag_len": 1024,
        "max_deps": 1024,
        "max_resources": 16,
        "max_labels": 64,
        "max_label_len": 1024,
        "max_tenant_len": 256,
        "max_connections": 4096,
        "header_timeout_s": 10,
        "max_streams_per_principal": 256,
        "max_worker_sessions": 1024,
        "max_pending_bytes": 256 * 1024 * 1024,
        "max_wait_s": 300,
        "request_timeout_s": 30,
        "max_concurrent_requests": 1024,
        "max_concurrent_streams": 1024,
        "max_slots_per_worker": 1024,
        "keepalive_interval_s": 20,
        "keepalive_timeout_s": 10,
        "key_retention_s": 3600,
        "key_retention_max": 1_000_000,
        "max_list": 1000,
        "peer_timeout_s": 10,
        "max_peer_calls": 64,
        "peer_breaker_failures": 3,
        "peer_breaker_reset_s": 5,
        "max_requests_per_principal": 256,
        "max_connections_per_address": 1024,
        "max_request_key_len": 256,
        "max_filter_items": 1000,
        "max_report_message_len": 4096,
    }


def test_pool_defaults_match_in_process_pool() -> None:
    p = cfg('[[pools]]\nname = "a"\n').pools[0]
    assert p == PoolSpec("a")
    assert (p.min, p.max, p.autoscale, p.overflow) == (1, 10, True, "wait")
    assert p.scaler == ScalerConfig("external")
    assert p.retry == RetryPolicy()
    assert p.reservable_fraction == 0.5
    assert p.default_duration_s == 1.0
    assert p.lease_ttl_s == 30.0  # (ours: the server's default; in-process there is none)
    assert p.max_slots_per_worker is None
    assert p.fair_share is False
    assert dict(p.tenant_weights) == {}
    assert p.max_pending == 100_000
    assert p.await_unknown_dependencies_s is None
    assert (p.target_utilization, p.drain_time_s, p.cooldown_s, p.cost_per_worker_second) == (
        0.75,
        30.0,
        30.0,
        0.0,
    )


def test_pool_max_pending_defaults_to_limit() -> None:
    c = cfg(
        '[limits]\nmax_pending_per_pool = 7\n[[pools]]\nname = "a"\n[[pools]]\nname = "b"\nmax_pending = 3\n'
    )
    assert [p.max_pending for p in c.pools] == [7, 3]


def test_models_are_frozen() -> None:
    c = cfg(
        '[[pools]]\nname = "a"\ntenant_weights = {x = 2}\n'
        f'[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "admin"\n'
    )
    with pytest.raises(ValidationError, match="frozen"):
        c.server.grpc_addr = "x"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        c.pools[0].max = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.pools[0].tenant_weights["y"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        c.tokens[0].labels["y"] = "z"  # type: ignore[index]
    assert isinstance(c.pools, tuple) and isinstance(c.tokens, tuple)
    hash(c)  # hashable despite the mapping fields


# ---------------------------------------------------------------------------------------------
# every table and key

FULL = f"""
[server]
grpc_addr = "0.0.0.0:7070"
http_addr = "[::]:8080"
metrics_addr = "0.0.0.0:9090"
insecure_no_auth = false
shutdown_grace_s = 2.5

[[auth.tokens]]
token = "{TOKEN}"
role = "client"
pools = ["emails", "reports"]
tenant = "acme"

[[auth.tokens]]
token_env = "WORKER_TOKEN"
role = "worker"
pools = ["emails"]
labels = {{ gpu = "a100", zone = "eu" }}

[[auth.tokens]]
token = "metrics-token-000000"
role = "metrics"

[[auth.tokens]]
token = "admin-token-0000000000"
role = "admin"

[store]
kind = "postgres"
url_env = "PG_URL"
schema = "cronoq_prod"
keep_finished_s = 86400

[limits]
max_tasks_per_batch = 10
max_pending_total = 20
max_pending_per_pool = 30
max_message_bytes = 2048
max_http_body_bytes = 4096
max_key_len = 40
max_kind_len = 50
max_tags = 0
max_tag_len = 70
max_deps = 0
max_resources = 0
max_wait_s = 60
request_timeout_s = 5.5
max_concurrent_requests = 11
max_concurrent_streams = 12
max_slots_per_worker = 13
keepalive_interval_s = 14
keepalive_timeout_s = 15
key_retention_s = 0
key_retention_max = 0
max_list = 17
max_labels = 18
max_label_len = 19
max_tenant_len = 20
max_connections = 21
header_timeout_s = 22
max_streams_per_principal = 23
max_worker_sessions = 24
max_pending_bytes = 25

[[pools]]
name = "emails"
min = 0
max = 50
autoscale = true
scaler = {{ kind = "webhook", url = "https://scaler.example/hook", token_env = "HOOK_TOKEN" }}
lease_ttl_s = 30
max_pending = 5000
overflow = "shed_lowest"
retry = {{ max_attempts = 5, initial_backoff_s = 0.5, multiplier = 3, max_backoff_s = 120, jitter = false }}
default_duration_s = 2
reservable_fraction = 0.25
await_unknown_dependencies_s = 600
target_utilization = 0.9
drain_time_s = 10
cooldown_s = 0
cost_per_worker_second = 0.002
max_slots_per_worker = 8
fair_share = true
tenant_weights = {{ acme = 2, small = 0.5 }}

[[pools]]
name = "reports"
autoscale = false
scaler = "external"

[[resources]]
name = "db"
kind = "semaphore"
permits = 4

[[resources]]
name = "api"
kind = "token_bucket"
rate = 2.5
burst = 10
"""

FULL_ENV = {
    "WORKER_TOKEN": TOKEN2,
    "PG_URL": "postgresql://u:pw@db/cronoq",
    "HOOK_TOKEN": "hook",
}


def test_full_config_every_key() -> None:
    c = cfg(FULL, FULL_ENV)
    s = c.server
    assert s == ServerSection("0.0.0.0:7070", "[::]:8080", "0.0.0.0:9090", None, False, 2.5)
    assert c.auth_enabled
    t0, t1, t2, t3 = c.tokens
    assert t0.digest == hashlib.sha256(TOKEN.encode()).digest()
    assert (t0.role, t0.pools, t0.tenant, dict(t0.labels), t0.name) == (
        "client",
        ("emails", "reports"),
        "acme",
        {},
        "auth.tokens[0]",
    )
    assert t1.digest == token_digest(TOKEN2)
    assert (t1.role, t1.pools, dict(t1.labels), t1.token_env) == (
        "worker",
        ("emails",),
        {"gpu": "a100", "zone": "eu"},
        "WORKER_TOKEN",
    )
    assert (t2.role, t2.pools, t3.role) == ("metrics", None, "admin")
    assert c.store == StoreConfig(
        "postgres", "./cronoq.db", "postgresql://u:pw@db/cronoq", "PG_URL", "cronoq_prod", 86400
    )
    assert c.limits == LimitsConfig(
        10,
        20,
        30,
        2048,
        4096,
        40,
        50,
        0,
        70,
        0,
        0,
        60,
        5.5,
        11,
        12,
        13,
        14,
        15,
        0,
        0,
        17,
        18,
        19,
        20,
        21,
        22,
        23,
        24,
        25,
    )
    e, r = c.pools
    assert e == PoolSpec(
        name="emails",
        min=0,
        max=50,
        autoscale=True,
        scaler=ScalerConfig("webhook", "https://scaler.example/hook", "HOOK_TOKEN", "hook"),
        lease_ttl_s=30.0,
        max_pending=5000,
        overflow="shed_lowest",
        retry=RetryPolicy(5, 0.5, 3.0, 120.0, False),
        default_duration_s=2.0,
        reservable_fraction=0.25,
        await_unknown_dependencies_s=600.0,
        target_utilization=0.9,
        drain_time_s=10.0,
        cooldown_s=0.0,
        cost_per_worker_second=0.002,
        max_slots_per_worker=8,
        fair_share=True,
        tenant_weights={"acme": 2.0, "small": 0.5},
    )
    assert (r.name, r.autoscale, r.scaler.kind, r.max_pending) == ("reports", False, "external", 30)
    assert c.resources == (
        ResourceSpec("db", "semaphore", permits=4),
        ResourceSpec("api", "token_bucket", rate=2.5, burst=10),
    )
    assert c.default_pool == "emails"  # the first pool (none is named "default")
    assert c.pool("reports") is r and c.pool("nope") is None


def test_secrets_not_in_repr() -> None:
    c = cfg(FULL, FULL_ENV)
    text = repr(c)
    for secret in (TOKEN, TOKEN2, "pw@db", "'hook'"):
        assert secret not in text
    assert "PG_URL" in text


def test_default_pool_named_default_wins() -> None:
    assert cfg('[[pools]]\nname = "a"\n[[pools]]\nname = "default"\n').default_pool == "default"


def test_tls(tmp_path: Path) -> None:
    for n in ("c.pem", "k.pem", "ca.pem"):
        (tmp_path / n).write_text("x")
    c = cfg(
        f'[server.tls]\ncert = "{tmp_path}/c.pem"\nkey = "{tmp_path}/k.pem"\n'
        f'client_ca = "{tmp_path}/ca.pem"\n'
    )
    assert c.server.tls == TlsConfig(f"{tmp_path}/c.pem", f"{tmp_path}/k.pem", f"{tmp_path}/ca.pem")
    c = cfg(f'[server]\ntls = {{cert = "{tmp_path}/c.pem", key = "{tmp_path}/k.pem"}}\n')
    assert c.server.tls is not None and c.server.tls.client_ca is None
    err = one_error(f'[server.tls]\ncert = "{tmp_path}/c.pem"\nkey = "{tmp_path}/missing.pem"\n')
    assert err.startswith("server.tls.key: file not found")
    errs = errors_of(f'[server.tls]\ncert = "{tmp_path}/c.pem"\n')
    assert errs == ("server.tls.key: required (a PEM file)",)


def test_store_kinds() -> None:
    assert cfg('[store]\nkind = "memory"\n').store.kind == "memory"
    s = cfg('[store]\npath = "/var/lib/cronoq/q.db"\n').store
    assert (s.kind, s.path) == ("sqlite", "/var/lib/cronoq/q.db")
    s = cfg('[store]\nkind = "postgres"\nurl = "postgres://h/db"\n').store
    assert (s.url, s.schema) == ("postgres://h/db", "public")


def test_store_sqlite_sync_is_full_unless_normal_is_asked_for() -> None:
    """``store.sqlite_sync``: FULL by default (an acknowledged task survives power loss);
    ``normal`` is asked for explicitly (docs/concepts/durability.md#sqlite-sync; the PRAGMA each
    gives: tests/store/test_sqlite.py)."""
    from cronoq.server.app import make_store
    from cronoq.store import SqliteStore

    assert one_error('[store]\nsqlite_sync = "off"\n') == (
        "store.sqlite_sync: must be one of full, normal (got 'off')"
    )
    for extra, full in (("", True), ('sqlite_sync = "full"\n', True), ('sqlite_sync = "normal"\n', False)):
        store = make_store(cfg(f'[store]\npath = "q.db"\n{extra}'))
        assert isinstance(store, SqliteStore) and store.full_sync is full


def test_store_url_from_default_env() -> None:
    s = cfg('[store]\nkind = "postgres"\n', {"DATABASE_URL": "postgresql://x/y"}).store
    assert s.url == "postgresql://x/y" and s.url_env == "DATABASE_URL"


def test_store_url_env_errors() -> None:
    err = one_error('[store]\nkind = "postgres"\n')
    assert err.startswith("store.url_env: environment variable 'DATABASE_URL' is not set")
    assert "store.url" in err
    err = one_error('[store]\nkind = "postgres"\nurl_env = "PG"\n', {"PG": "mysql://x"})
    assert err == "store.url_env: $PG must be a postgresql:// (or postgres://) URL"
    assert one_error('[store]\nkind = "postgres"\nurl = "http://x"\n').startswith("store.url: must be")
    assert (
        one_error('[store]\nurl = "postgres://a"\nurl_env = "X"\n') == "store: give url or url_env, not both"
    )
    # sqlite / memory never need the env variable
    assert cfg('[store]\nkind = "sqlite"\n').store.url is None


def test_tokens_from_env() -> None:
    c = cfg('[[auth.tokens]]\ntoken_env = "T"\nrole = "admin"\n', {"T": TOKEN})
    assert c.tokens[0].digest == token_digest(TOKEN) and c.tokens[0].token_env == "T"
    err = one_error('[[auth.tokens]]\ntoken_env = "T"\nrole = "admin"\n')
    assert err == "auth.tokens[0].token_env: environment variable 'T' is not set"
    err = one_error('[[auth.tokens]]\ntoken_env = "T"\nrole = "admin"\n', {"T": "short"})
    assert err == "auth.tokens[0].token_env: the token in $T must be at least 16 characters (got 5)"


def test_token_rules() -> None:
    base = '[[auth.tokens]]\nrole = "admin"\n'
    assert one_error(base) == "auth.tokens[0]: token or token_env is required"
    assert (
        one_error(base + f'token = "{TOKEN}"\ntoken_env = "X"\n')
        == "auth.tokens[0]: give token or token_env, not both"
    )
    assert one_error(base + 'token = "0123456789abcde"\n') == (
        "auth.tokens[0].token: must be at least 16 characters (got 15)"
    )
    cfg(base + 'token = "0123456789abcdef"\n')  # exactly 16 is fine
    assert one_error(base + 'token = "0123456789 abcdefgh"\n') == (
        "auth.tokens[0].token: must be printable ASCII without spaces"
    )
    assert one_error(base + "token = 12345678901234567\n").startswith(
        "auth.tokens[0].token: must be a string"
    )
    assert one_error(f'[[auth.tokens]]\ntoken = "{TOKEN}"\n') == (
        "auth.tokens[0].role: required (one of client, worker, metrics, admin)"
    )
    assert one_error(f'[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "root"\n') == (
        "auth.tokens[0].role: must be one of client, worker, metrics, admin (got 'root')"
    )
    entry = f'[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "admin"\n'
    dup = entry + entry.replace("admin", "client")
    assert one_error(dup) == "auth.tokens[1]: duplicate token (same as auth.tokens[0])"


def test_token_pools_labels_tenant_validated() -> None:
    base = f'[[pools]]\nname = "a"\n[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "client"\n'
    assert cfg(base + 'pools = ["a", "a"]\n').tokens[0].pools == ("a",)
    assert one_error(base + 'pools = ["b"]\n') == "auth.tokens[0].pools: unknown pool 'b' (pools: a)"
    assert one_error(base + "pools = []\n").startswith("auth.tokens[0].pools: must be a non-empty array")
    assert one_error(base + "pools = [1]\n").startswith("auth.tokens[0].pools: item 0 must be a non-empty")
    assert one_error(base + "labels = {gpu = 1}\n") == "auth.tokens[0].labels: 'gpu' must be a string (got 1)"
    assert one_error(base + 'tenant = ""\n').startswith("auth.tokens[0].tenant: must be a non-empty string")
    # a token may name the implicit default pool
    c = cfg(f'[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "client"\npools = ["default"]\n')
    assert c.tokens[0].pools == ("default",)


def test_scaler_forms() -> None:
    base = '[[pools]]\nname = "a"\n'
    assert cfg(base + 'scaler = "external"\n').pools[0].scaler == ScalerConfig()
    assert cfg(base + 'scaler = {kind = "external"}\n').pools[0].scaler == ScalerConfig()
    sc = cfg(base + 'scaler = {url = "http://h:1/x"}\n').pools[0].scaler
    assert (sc.kind, sc.url, sc.token_env, sc.token) == ("webhook", "http://h:1/x", None, None)
    assert one_error(base + 'scaler = "webhook"\n').startswith(
        "pools[0].scaler: a webhook scaler needs a url"
    )
    assert one_error(base + 'scaler = "keda"\n').startswith('pools[0].scaler: must be "external" or a table')
    assert one_error(base + "scaler = 3\n").startswith('pools[0].scaler: must be "external" or a table')
    assert (
        one_error(base + 'scaler = {kind = "webhook"}\n')
        == "pools[0].scaler.url: required for a webhook scaler"
    )
    assert one_error(base + 'scaler = {kind = "webhook", url = "ftp://x"}\n').startswith(
        "pools[0].scaler.url: must be an http:// or https:// URL"
    )
    assert one_error(base + 'scaler = {kind = "external", url = "http://x"}\n') == (
        'pools[0].scaler.url: only used with kind = "webhook"'
    )
    assert one_error(base + 'scaler = {url = "http://x", token_env = "NOPE"}\n') == (
        "pools[0].scaler.token_env: environment variable 'NOPE' is not set"
    )


def test_resources() -> None:
    c = cfg(
        '[[resources]]\nname = "db"\nkind = "semaphore"\npermits = 2\n'
        '[[resources]]\nname = "api"\nkind = "token_bucket"\nrate = 1\nburst = 3\n'
    )
    rs = resource_configs(c)
    assert all(isinstance(r, ResourceConfig) for r in rs)
    assert [(r.name, r.kind, r.capacity) for r in rs] == [("db", "semaphore", 2), ("api", "token_bucket", 3)]
    assert rs[1].rate == 1.0 and isinstance(rs[1].rate, float)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            'kind = "semaphore"\n',
            ["resources[0].name: required", "resources[0].permits: required for a semaphore"],
        ),
        ('name = "x"\n', ["resources[0].kind: required (semaphore or token_bucket)"]),
        (
            'name = "x"\nkind = "mutex"\n',
            ["resources[0].kind: must be one of semaphore, token_bucket (got 'mutex')"],
        ),
        (
            'name = "x"\nkind = "semaphore"\npermits = 0\n',
            ["resources[0].permits: must be an integer >= 1 (got 0)"],
        ),
        (
            'name = "x"\nkind = "semaphore"\npermits = 1.5\n',
            ["resources[0].permits: must be an integer >= 1"],
        ),
        (
            'name = "x"\nkind = "semaphore"\npermits = 1\nburst = 2\n',
            ["resources[0].burst: only used with kind"],
        ),
        (
            'name = "x"\nkind = "token_bucket"\nburst = 2\n',
            ["resources[0].rate: required for a token_bucket"],
        ),
        (
            'name = "x"\nkind = "token_bucket"\nrate = 0\nburst = 2\n',
            ["resources[0].rate: must be a finite number > 0"],
        ),
        (
            'name = "x"\nkind = "token_bucket"\nrate = inf\nburst = 2\n',
            ["resources[0].rate: must be a finite"],
        ),
        (
            'name = "x"\nkind = "token_bucket"\nrate = 1\nburst = 0\n',
            ["resources[0].burst: must be an integer >= 1"],
        ),
        (
            'name = "x"\nkind = "token_bucket"\nrate = 1\nburst = 1\npermits = 1\n',
            ["resources[0].permits: only used"],
        ),
    ],
)
def test_resource_errors(body: str, expected: list[str]) -> None:
    errs = errors_of("[[resources]]\n" + body)
    assert len(errs) == len(expected), errs
    for e, x in zip(errs, expected, strict=True):
        assert e.startswith(x), (e, x)


def test_duplicate_resource_and_pool_names() -> None:
    r = '[[resources]]\nname = "db"\nkind = "semaphore"\npermits = 1\n'
    assert one_error(r + r) == "resources[1].name: duplicate resource name 'db' (also resources[0])"
    p = '[[pools]]\nname = "a"\n'
    assert one_error(p + p) == "pools[1].name: duplicate pool name 'a' (also pools[0])"


# ---------------------------------------------------------------------------------------------
# unknown keys at every level


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("bogus = 1\n", "bogus"),
        ("[serve]\n", "serve"),
        ('[server]\ngrpc_adr = "127.0.0.1:1"\n', "server.grpc_adr"),
        ('[server.tls]\ncert = "a"\nkey = "b"\nca = "c"\n', "server.tls.ca"),
        ('[auth]\ntoken = "x"\n', "auth.token"),
        (f'[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "admin"\nscope = "x"\n', "auth.tokens[0].scope"),
        ('[store]\nfile = "x"\n', "store.file"),
        ("[limits]\nmax_batch = 3\n", "limits.max_batch"),
        ('[[pools]]\nname = "a"\nmaximum = 3\n', "pools[0].maximum"),
        ('[[pools]]\nname = "a"\nretry = {attempts = 3}\n', "pools[0].retry.attempts"),
        (
            '[[pools]]\nname = "a"\nscaler = {kind = "webhook", url = "http://x", secret = "s"}\n',
            "pools[0].scaler.secret",
        ),
        (
            '[[resources]]\nname = "r"\nkind = "semaphore"\npermits = 1\ncapacity = 3\n',
            "resources[0].capacity",
        ),
    ],
)
def test_unknown_keys_rejected(text: str, path: str) -> None:
    errs = errors_of(text)
    assert any(e.startswith(f"{path}: unknown key") for e in errs), errs


def test_unknown_key_suggests_close_match() -> None:
    assert (
        one_error('[[pools]]\nname = "a"\nmax_pendng = 3\n')
        == "pools[0].max_pendng: unknown key (did you mean 'max_pending'?)"
    )


# ---------------------------------------------------------------------------------------------
# bad values, clear messages


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("max = 0", "pools[0].max: must be an integer >= 1 (got 0)"),
        ("max = 2.0", "pools[0].max: must be an integer >= 1 (got 2.0)"),
        ('max = "3"', "pools[0].max: must be an integer >= 1 (got '3')"),
        ("max = true", "pools[0].max: must be an integer >= 1 (got true)"),
        ("min = -1", "pools[0].min: must be an integer >= 0 (got -1)"),
        ("min = 11", "pools[0].min: must be <= max (got min = 11, max = 10)"),
        ("autoscale = 1", "pools[0].autoscale: must be true or false (got 1)"),
        ("lease_ttl_s = 0", "pools[0].lease_ttl_s: must be a number of seconds > 0 and <= 365 days (got 0)"),
        ("max_pending = 0", "pools[0].max_pending: must be an integer >= 1 (got 0)"),
        (
            'overflow = "drop"',
            "pools[0].overflow: must be one of wait, reject, shed_lowest, shed_oldest (got 'drop')",
        ),
        ("retry = 3", "pools[0].retry: must be a table {max_attempts, initial_backoff_s, ...} (got 3)"),
        ("retry = {max_attempts = 0}", "pools[0].retry.max_attempts: must be an integer >= 1 (got 0)"),
        (
            "retry = {initial_backoff_s = -1}",
            "pools[0].retry.initial_backoff_s: must be a number of seconds >= 0",
        ),
        ("retry = {multiplier = 0}", "pools[0].retry.multiplier: must be a finite number > 0 (got 0)"),
        ("retry = {max_backoff_s = nan}", "pools[0].retry.max_backoff_s: must be a number of seconds >= 0"),
        ('retry = {jitter = "yes"}', "pools[0].retry.jitter: must be true or false (got 'yes')"),
        ("default_duration_s = -1", "pools[0].default_duration_s: must be a number of seconds >= 0"),
        ("reservable_fraction = 1.5", "pools[0].reservable_fraction: must be a number in [0, 1] (got 1.5)"),
        ("await_unknown_dependencies_s = -0.5", "pools[0].await_unknown_dependencies_s: must be a number"),
        ("target_utilization = 0", "pools[0].target_utilization: must be a number in (0, 1] (got 0)"),
        ("target_utilization = 1.01", "pools[0].target_utilization: must be a number in (0, 1] (got 1.01)"),
        ("drain_time_s = 0", "pools[0].drain_time_s: must be a number of seconds > 0"),
        (
            "cooldown_s = inf",
            "pools[0].cooldown_s: must be a number of seconds >= 0 and <= 365 days (got inf)",
        ),
        (
            "cost_per_worker_second = -1",
            "pools[0].cost_per_worker_second: must be a finite number >= 0 (got -1)",
        ),
        ("max_slots_per_worker = 0", "pools[0].max_slots_per_worker: must be an integer >= 1 (got 0)"),
        ('fair_share = "no"', "pools[0].fair_share: must be true or false (got 'no')"),
        (
            "tenant_weights = {a = 0}",
            "pools[0].tenant_weights: tenant weights must be finite and > 0 (got a = 0)",
        ),
        ("tenant_weights = {a = inf}", "pools[0].tenant_weights: tenant weights must be finite and > 0"),
        ("tenant_weights = 2", "pools[0].tenant_weights: must be a table of tenant = weight (got 2)"),
    ],
)
def test_bad_pool_values(line: str, message: str) -> None:
    err = one_error(f'[[pools]]\nname = "a"\n{line}\n')
    assert err.startswith(message), err


def test_pool_name_rules() -> None:
    assert one_error("[[pools]]\nmax = 3\n") == "pools[0].name: required"
    assert one_error('[[pools]]\nname = ""\n').startswith("pools[0].name: must be a non-empty string")
    assert one_error('[[pools]]\nname = " a"\n').startswith("pools[0].name: must not have surrounding spaces")
    assert one_error("pools = []\n").startswith("pools: at least one pool is required")
    assert one_error('[pools]\nname = "a"\n').startswith("pools: must be an array of tables ([[pools]])")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("max_tasks_per_batch", "0", "must be an integer >= 1 (got 0)"),
        ("max_pending_total", "-1", "must be an integer >= 1 (got -1)"),
        ("max_pending_per_pool", "1.5", "must be an integer >= 1 (got 1.5)"),
        ("max_message_bytes", "100", "must be an integer in 1024..2147483647 (got 100)"),
        ("max_http_body_bytes", "4294967296", "must be an integer in 1024..2147483647"),
        ("max_key_len", "0", "must be an integer >= 1"),
        ("max_kind_len", "0", "must be an integer >= 1"),
        ("max_tags", "-1", "must be an integer >= 0"),
        ("max_tag_len", "0", "must be an integer >= 1"),
        ("max_deps", "-1", "must be an integer >= 0"),
        ("max_resources", "-1", "must be an integer >= 0"),
        ("max_wait_s", "0", "must be a number of seconds > 0 and <= 365 days (got 0)"),
        ("request_timeout_s", "-1", "must be a number of seconds > 0"),
        ("max_concurrent_requests", "0", "must be an integer >= 1"),
        ("max_concurrent_streams", "0", "must be an integer >= 1"),
        ("max_slots_per_worker", "0", "must be an integer >= 1"),
        ("keepalive_interval_s", "0", "must be a number of seconds > 0"),
        ("keepalive_timeout_s", '"10"', "must be a number of seconds > 0 and <= 365 days (got '10')"),
        ("key_retention_s", "-1", "must be a number of seconds >= 0"),
        ("key_retention_max", "-1", "must be an integer >= 0"),
        ("max_list", "0", "must be an integer >= 1"),
    ],
)
def test_bad_limits(key: str, value: str, message: str) -> None:
    assert key in LimitsConfig.model_fields
    err = one_error(f"[limits]\n{key} = {value}\n")
    assert err.startswith(f"limits.{key}: {message}"), err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[server]\ngrpc_addr = "127.0.0.1"', "server.grpc_addr: must be 'host:port'"),
        ('[server]\ngrpc_addr = "127.0.0.1:99999"', "server.grpc_addr: must be 'host:port'"),
        ('[server]\nhttp_addr = ":8080"', "server.http_addr: must be 'host:port'"),
        ('[server]\nhttp_addr = "::1:8080"', "server.http_addr: must be 'host:port'"),
        ('[server]\nhttp_addr = "[::1:8080"', "server.http_addr: must be 'host:port'"),
        ('[server]\nhttp_addr = "[nope]:8080"', "server.http_addr: invalid IPv6 address"),
        ("[server]\nmetrics_addr = 9090", "server.metrics_addr: must be a non-empty string (got 9090)"),
        ('[server]\ninsecure_no_auth = "yes"', "server.insecure_no_auth: must be true or false"),
        ("[server]\nshutdown_grace_s = -1", "server.shutdown_grace_s: must be a number of seconds >= 0"),
        ("[server]\ntls = 1", "server.tls: must be a table (got 1)"),
        ("server = 1", "server: must be a table (got 1)"),
        ("auth = 1", "auth: must be a table (got 1)"),
        ("[auth]\ntokens = 1", "auth.tokens: must be an array of tables ([[auth.tokens]])"),
        ("store = 1", "store: must be a table"),
        ('[store]\nkind = "mysql"', "store.kind: must be one of memory, sqlite, postgres (got 'mysql')"),
        ('[store]\npath = ""', "store.path: must be a non-empty string"),
        ('[store]\nschema = "a;drop"', "store.schema: must be an SQL identifier"),
        ('[store]\nurl_env = "1X"', "store.url_env: must be an environment variable name"),
        ("[store]\nkeep_finished_s = -5", "store.keep_finished_s: must be a number of seconds >= 0"),
        ("limits = 1", "limits: must be a table"),
        ("resources = 1", "resources: must be an array of tables ([[resources]])"),
        (
            '[server]\ngrpc_addr = "127.0.0.1:7000"\nhttp_addr = "127.0.0.1:7000"',
            "server.http_addr: must differ from server.grpc_addr",
        ),
        (
            '[server]\nmetrics_addr = "127.0.0.1:7071"',
            "server.metrics_addr: must differ from server.http_addr",
        ),
    ],
)
def test_bad_values(text: str, message: str) -> None:
    err = one_error(text + "\n")
    assert err.startswith(message), err


def test_port_zero_never_clashes() -> None:
    c = cfg('[server]\ngrpc_addr = "127.0.0.1:0"\nhttp_addr = "127.0.0.1:0"\nmetrics_addr = "localhost:0"\n')
    assert c.server.grpc_addr == "127.0.0.1:0"


def test_all_errors_reported_at_once() -> None:
    with pytest.raises(ConfigError) as ei:
        cfg('[[pools]]\nname = "a"\nmax = 0\nmin = -1\n[limits]\nmax_list = 0\nbogus = 1\n', source="c.toml")
    e = ei.value
    assert len(e.errors) == 4
    text = str(e)
    assert text.startswith("c.toml: 4 configuration errors:\n")
    for x in e.errors:
        assert x in text
    assert isinstance(e, ValueError)


def test_config_error_single_message_and_pickle() -> None:
    e = ConfigError("pools[0].max: must be an integer >= 1 (got 0)", "x.toml")
    assert str(e) == "x.toml: pools[0].max: must be an integer >= 1 (got 0)"
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.errors, e2.source, str(e2)) == (e.errors, e.source, str(e))


# ---------------------------------------------------------------------------------------------
# durations: integers or floats, <= 365 days


@pytest.mark.parametrize(
    "key",
    [
        "[server]\nshutdown_grace_s",
        "[store]\nkeep_finished_s",
        "[limits]\nkey_retention_s",
        "[limits]\nmax_wait_s",
        '[[pools]]\nname = "a"\nlease_ttl_s',
        '[[pools]]\nname = "a"\ndrain_time_s',
        '[[pools]]\nname = "a"\nawait_unknown_dependencies_s',
    ],
)
def test_duration_365_day_limit(key: str) -> None:
    cfg(f"{key} = {MAX_DURATION_S}\n")  # exactly 365 days, as an integer
    cfg(f"{key} = 12.5\n")  # floats too
    err = one_error(f"{key} = {MAX_DURATION_S + 1}\n")
    assert "must be a number of seconds" in err and "<= 365 days" in err
    assert one_error(f"{key} = {MAX_DURATION_S}.5\n").endswith(f"(got {MAX_DURATION_S}.5)")


def test_durations_are_floats() -> None:
    c = cfg('[server]\nshutdown_grace_s = 3\n[[pools]]\nname = "a"\nlease_ttl_s = 5\n')
    assert isinstance(c.server.shutdown_grace_s, float) and c.server.shutdown_grace_s == 3.0
    assert isinstance(c.pools[0].lease_ttl_s, float)


# ---------------------------------------------------------------------------------------------
# loopback and auth


@pytest.mark.parametrize(
    ("addr", "expected"),
    [
        ("127.0.0.1:7070", True),
        ("127.1.2.3:1", True),
        ("localhost:7070", True),
        ("LOCALHOST:1", True),
        ("localhost.:1", True),
        ("[::1]:7070", True),
        ("::1", True),
        ("[::1]", True),
        ("127.0.0.1", True),
        ("[::ffff:127.0.0.1]:1", True),
        ("0.0.0.0:7070", False),
        ("[::]:7070", False),
        ("10.0.0.1:7070", False),
        ("example.com:7070", False),
        ("localhost.example.com:1", False),
        ("[::1:1", False),
        ("", False),
    ],
)
def test_is_loopback(addr: str, expected: bool) -> None:
    assert is_loopback(addr) is expected


def test_split_host_port() -> None:
    assert split_host_port("a:1") == ("a", "1")
    assert split_host_port("[::1]:2") == ("::1", "2")
    assert split_host_port("[::1]") == ("::1", None)
    assert split_host_port("::1") == ("::1", None)
    assert split_host_port("host") == ("host", None)
    with pytest.raises(ValueError):
        split_host_port("[::1]x")


@pytest.mark.parametrize("key", ["grpc_addr", "http_addr"])
@pytest.mark.parametrize("addr", ["0.0.0.0:7000", "[::]:7000", "10.1.2.3:7000", "myhost:7000"])
def test_non_loopback_without_tokens_rejected(key: str, addr: str) -> None:
    err = one_error(f'[server]\n{key} = "{addr}"\n')
    assert err.startswith(f"server.{key}: listening on '{addr}' (beyond loopback) requires [[auth.tokens]]")
    assert "insecure_no_auth" in err


def test_non_loopback_allowed_with_tokens_or_insecure() -> None:
    text = '[server]\ngrpc_addr = "0.0.0.0:7000"\nhttp_addr = "0.0.0.0:7001"\n'
    c = cfg(text + f'[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "admin"\n')
    assert c.auth_enabled
    c = cfg(text.replace("[server]\n", "[server]\ninsecure_no_auth = true\n"))
    assert c.server.insecure_no_auth and not c.auth_enabled
    c = cfg(text, insecure_no_auth=True)  # the --insecure-no-auth flag
    assert c.server.insecure_no_auth
    c = load_config(None, env={}, insecure_no_auth=True)
    assert c.server.insecure_no_auth


def test_metrics_addr_beyond_loopback_needs_no_token() -> None:
    c = cfg('[server]\nmetrics_addr = "0.0.0.0:9090"\n')
    assert c.server.metrics_addr == "0.0.0.0:9090" and not c.auth_enabled


def test_auth_enabled_on_loopback_too() -> None:
    assert cfg(f'[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "client"\n').auth_enabled


# ---------------------------------------------------------------------------------------------
# engine objects


def test_pool_config_defaults() -> None:
    pc = pool_config(PoolSpec("a"))
    assert isinstance(pc, PoolConfig)
    assert (pc.name, pc.min, pc.max, pc.initial_capacity) == ("a", 1, 10, 0)
    assert pc.unknown_dependency == "reject" and pc.await_timeout is None
    assert pc.max_pending == 100_000 and pc.overflow == "wait"
    assert pc.retry == RetryPolicy()
    assert pc.lease_ttl == to_ns(30.0)  # (ours: server pools default to a 30 s lease TTL)
    assert pc.default_duration == to_ns(1.0)
    assert isinstance(pc.autoscale, AutoscaleConfig)
    assert (pc.autoscale.target_utilization, pc.autoscale.drain_time, pc.autoscale.cooldown) == (
        0.75,
        30.0,
        30.0,
    )
    assert pool_config(PoolSpec("a"), initial=None).initial_capacity == 1


def test_pool_config_full() -> None:
    e, r = cfg(FULL, FULL_ENV).pools
    pc = pool_config(e)
    assert (pc.min, pc.max, pc.max_pending, pc.overflow) == (0, 50, 5000, "shed_lowest")
    assert pc.unknown_dependency == "await" and pc.await_timeout == to_ns(600)
    assert pc.lease_ttl == to_ns(30)
    assert pc.retry == RetryPolicy(5, 0.5, 3.0, 120.0, False)
    assert pc.default_duration == to_ns(2)
    assert pc.reservable_fraction == 0.25
    assert pc.fair_share is True and pc.tenant_weights == {"acme": 2.0, "small": 0.5}
    assert pc.autoscale is not None
    assert (pc.autoscale.target_utilization, pc.autoscale.drain_time, pc.autoscale.cooldown) == (
        0.9,
        10.0,
        0.0,
    )
    assert pc.cost_per_worker_second == 0.002
    assert pool_config(r).autoscale is None
    assert autoscale_config(r) is None


def test_await_zero_seconds_still_awaits() -> None:
    p = cfg('[[pools]]\nname = "a"\nawait_unknown_dependencies_s = 0\n').pools[0]
    pc = pool_config(p)
    assert pc.unknown_dependency == "await" and pc.await_timeout == 0


# ---------------------------------------------------------------------------------------------
# files and CRONOQ_CONFIG


def test_load_config_from_file(tmp_path: Path) -> None:
    f = tmp_path / "cronoq.toml"
    f.write_text('[[pools]]\nname = "a"\n')
    c = load_config(str(f), env={})
    assert c.pool_names == ["a"] and c.source == str(f)
    assert load_config(f, env={}).pool_names == ["a"]  # a PathLike works too


def test_load_config_from_env_var(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[[pools]]\nname = "from-env"\n')
    assert load_config(None, env={CONFIG_ENV: str(f)}).pool_names == ["from-env"]
    assert load_config(None, env={CONFIG_ENV: ""}).pool_names == ["default"]
    # an explicit path wins over the env variable
    g = tmp_path / "g.toml"
    g.write_text('[[pools]]\nname = "explicit"\n')
    assert load_config(str(g), env={CONFIG_ENV: str(f)}).pool_names == ["explicit"]


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found") as ei:
        load_config(str(tmp_path / "missing.toml"), env={})
    assert str(ei.value).startswith(str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[pools\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(str(bad), env={})
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_config(str(binary), env={})
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(str(tmp_path), env={})  # a directory
    f = tmp_path / "v.toml"
    f.write_text('[[pools]]\nname = "a"\nmax = 0\n')
    with pytest.raises(ConfigError) as ei:
        load_config(str(f), env={})
    assert str(ei.value) == f"{f}: pools[0].max: must be an integer >= 1 (got 0)"


def test_parse_config_from_dict() -> None:
    c = parse_config({"pools": [{"name": "x", "max": 3}]}, env={})
    assert c.pools[0].max == 3


def test_uses_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRONOQ_TEST_TOKEN", TOKEN)
    c = loads_config('[[auth.tokens]]\ntoken_env = "CRONOQ_TEST_TOKEN"\nrole = "admin"\n')
    assert c.tokens[0].digest == token_digest(TOKEN)


# ---------------------------------------------------------------------------------------------
# example configs

EXAMPLES = {
    "minimal": "",
    "local-dev": """
# everything on loopback, no auth, in-memory store
[store]
kind = "memory"

[[pools]]
name = "default"
max = 4
""",
    "production": f"""
[server]
grpc_addr = "0.0.0.0:7070"
http_addr = "0.0.0.0:7071"
metrics_addr = "0.0.0.0:9464"
shutdown_grace_s = 30

[[auth.tokens]]
token_env = "CRONOQ_CLIENT_TOKEN"
role = "client"

[[auth.tokens]]
token_env = "CRONOQ_WORKER_TOKEN"
role = "worker"
pools = ["emails"]

[[auth.tokens]]
token = "{TOKEN}"
role = "admin"

[store]
kind = "postgres"
schema = "cronoq"

[[pools]]
name = "default"
max = 100

[[pools]]
name = "emails"
min = 0
max = 20
lease_ttl_s = 60
overflow = "reject"
retry = {{max_attempts = 5, initial_backoff_s = 2, multiplier = 2.0, max_backoff_s = 300, jitter = true}}
await_unknown_dependencies_s = 3600
max_slots_per_worker = 16

[[resources]]
name = "smtp"
kind = "token_bucket"
rate = 10
burst = 50
""",
}
EXAMPLE_ENV = {
    "CRONOQ_CLIENT_TOKEN": "client-token-0123456789",
    "CRONOQ_WORKER_TOKEN": "worker-token-0123456789",
    "DATABASE_URL": "postgresql://cronoq@db/cronoq",
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_configs(name: str) -> None:
    c = cfg(EXAMPLES[name], EXAMPLE_ENV)
    for p in c.pools:
        assert isinstance(pool_config(p), PoolConfig)
    resource_configs(c)


def test_production_example_details() -> None:
    c = cfg(EXAMPLES["production"], EXAMPLE_ENV)
    assert c.auth_enabled and len(c.tokens) == 3
    assert c.store.url == "postgresql://cronoq@db/cronoq"
    assert c.default_pool == "default"
    assert c.pool("emails") is not None


_REPO_EXAMPLES = sorted(p for d in ("examples", "docs") for p in (REPO / d).glob("**/*.toml"))


@pytest.mark.parametrize("path", _REPO_EXAMPLES, ids=[str(p.relative_to(REPO)) for p in _REPO_EXAMPLES])
def test_repository_example_configs(path: Path) -> None:
    env = {**EXAMPLE_ENV}
    # example files may name any token variable: give every *_TOKEN / *_URL a valid value
    text = path.read_text()
    for var in re.findall(r'(?:token_env|url_env)\s*=\s*"([A-Za-z_][A-Za-z0-9_]*)"', text):
        env.setdefault(var, "postgresql://x/y" if "URL" in var else "example-token-0123456789")
    c = load_config(str(path), env=env)
    for p in c.pools:
        pool_config(p)


def test_config_pickles_and_compares() -> None:
    c = cfg(FULL, FULL_ENV)
    c2 = pickle.loads(pickle.dumps(c))
    assert c2 == c and hash(c2) == hash(c)
    assert c.pools[0].tenant_weights == {"acme": 2.0, "small": 0.5}
    assert FrozenMap({"a": 1}) == FrozenMap([("a", 1)]) == {"a": 1}
    assert hash(FrozenMap({"a": 1})) == hash(FrozenMap({"a": 1}))
    assert repr(FrozenMap({"a": 1})) == "{'a': 1}"


def test_deeply_nested_toml_is_a_config_error() -> None:
    """Not a RecursionError traceback of thousands of lines.  Where tomllib gives up depends on
    the interpreter's recursion limit (another test or library may have raised it): past it the
    parse fails, below it the depth check refuses the value; either way a config error."""
    for text in ("x = " + "[" * 5000 + "]" * 5000, "x = " + "{a = " * 5000 + "1" + "}" * 5000):
        with pytest.raises(ConfigError) as ei:
            loads_config(text, source="deep.toml")
        msg = str(ei.value)
        assert "nested too deeply" in msg or "nested more than 32 levels deep" in msg, msg
        assert "deep.toml" in msg


@pytest.mark.parametrize("table", ["pools", "resources", "shards", "a"])
def test_a_deep_dotted_table_header_is_a_config_error(table: str) -> None:
    """``[pools.a.a.a...]`` of 5,000 levels nests without recursion in tomllib but was a
    RecursionError when validated: now it is refused first, with the path and the limit."""
    text = "[" + ".".join([table] + ["a"] * 5000) + "]\n"
    with pytest.raises(ConfigError) as ei:
        loads_config(text, source="deep.toml")
    assert f"{table}.a.a...: tables and arrays nested more than 32 levels deep" in str(ei.value)
    assert "deep.toml" in str(ei.value)
    with pytest.raises(ConfigError, match=r"server\.a: unknown key"):  # (shallow: the usual message)
        loads_config("[" + ".".join(["server"] + ["a"] * 30) + "]\n")
