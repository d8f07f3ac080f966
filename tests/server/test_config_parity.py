"""docs/reference/config.md#auth-tokens, docs/reference/config.md#outputs,
docs/reference/config.md#server-grpc-web: the server-parity sections of the configuration (token labels
in list form, ``[outputs]``, ``[[auth.certs]]``, ``[server.grpc_web]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronoq.server.config import ConfigError, ServerConfig, loads_config

TOKEN = "s3cret-token-0123456789"
BASE = f'[[pools]]\nname = "a"\n[[auth.tokens]]\ntoken = "{TOKEN}"\nrole = "worker"\n'


def cfg(text: str, env: dict[str, str] | None = None, **kw: Any) -> ServerConfig:
    return loads_config(text, env=env or {}, **kw)


def one_error(text: str) -> str:
    with pytest.raises(ConfigError) as ei:
        cfg(text)
    errs = ei.value.errors
    assert len(errs) == 1, errs
    return errs[0]


# ---------------------------------------------------------------------------------------------
# token labels


def test_token_labels_list_form_equals_table_form() -> None:
    listed = cfg(BASE + 'labels = ["zone=z1", "gpu=a100"]\n').tokens[0].labels
    table = cfg(BASE + 'labels = {zone = "z1", gpu = "a100"}\n').tokens[0].labels
    assert dict(listed) == dict(table) == {"zone": "z1", "gpu": "a100"}
    # a value may contain "=" (only the first one splits) and be empty
    assert dict(cfg(BASE + 'labels = ["expr=a=b", "empty="]\n').tokens[0].labels) == {
        "expr": "a=b",
        "empty": "",
    }
    assert dict(cfg(BASE + "labels = []\n").tokens[0].labels) == {}


def test_token_labels_list_form_errors() -> None:
    assert one_error(BASE + 'labels = ["zone"]\n') == (
        'auth.tokens[0].labels: item 0 must be "key=value" (got \'zone\': no "=")'
    )
    assert one_error(BASE + 'labels = ["=z1"]\n') == (
        "auth.tokens[0].labels: item 0 must be \"key=value\" with a non-empty key (got '=z1')"
    )
    assert one_error(BASE + 'labels = ["zone=z1", "gpu=a", "zone=z2"]\n') == (
        "auth.tokens[0].labels: item 2: duplicate label 'zone'"
    )
    assert one_error(BASE + "labels = [1]\n") == (
        'auth.tokens[0].labels: item 0 must be a "key=value" string (got 1)'
    )
    assert one_error(BASE + 'labels = "zone=z1"\n').startswith(
        'auth.tokens[0].labels: must be a table of strings or an array of "key=value" strings'
    )


# ---------------------------------------------------------------------------------------------
# [outputs]


def test_outputs_defaults_and_values() -> None:
    d = cfg("").outputs
    assert (d.cache_entries, d.cache_bytes, d.info_entries) == (100_000, 256 * 1024 * 1024, 1_000_000)
    o = cfg("[outputs]\ncache_entries = 5\ncache_bytes = 4096\ninfo_entries = 10\n").outputs
    assert (o.cache_entries, o.cache_bytes, o.info_entries) == (5, 4096, 10)


def test_outputs_validated() -> None:
    with pytest.raises(ConfigError) as ei:
        cfg('[outputs]\ncache_entries = 0\ncache_bytes = "1M"\ninfo_entries = -1\ncache = 1\n')
    assert ei.value.errors == (
        "outputs.cache: unknown key (did you mean 'cache_bytes'?)",
        "outputs.cache_entries: must be an integer >= 1 (got 0)",
        "outputs.cache_bytes: must be an integer >= 1 (got '1M')",
        "outputs.info_entries: must be an integer >= 1 (got -1)",
    )
    assert one_error("outputs = 3\n") == "outputs: must be a table (got 3)"


# ---------------------------------------------------------------------------------------------
# [[auth.certs]]


def mtls(tmp_path: Path, *, client_ca: bool = True) -> str:
    for n in ("c.pem", "k.pem", "ca.pem"):
        (tmp_path / n).write_text("x")
    ca = f'client_ca = "{tmp_path}/ca.pem"\n' if client_ca else ""
    return f'[server.tls]\ncert = "{tmp_path}/c.pem"\nkey = "{tmp_path}/k.pem"\n{ca}[[pools]]\nname = "a"\n'


def test_certs_parsed(tmp_path: Path) -> None:
    c = cfg(
        mtls(tmp_path)
        + '[[auth.certs]]\ndns = "W1.Example.com."\nrole = "worker"\npools = ["a"]\nlabels = ["zone=z1"]\n'
        + '[[auth.certs]]\ndns = "client.example.com"\nrole = "client"\ntenant = "t1"\n'
    )
    w, cl = c.certs
    assert (w.dns, w.role, w.pools, dict(w.labels), w.tenant, w.name) == (
        "w1.example.com",
        "worker",
        ("a",),
        {"zone": "z1"},
        None,
        "auth.certs[0]",
    )
    assert (cl.dns, cl.role, cl.tenant) == ("client.example.com", "client", "t1")
    assert c.auth_enabled and not c.tokens
    # certificates alone are auth: listening beyond loopback is allowed
    wide = cfg(
        mtls(tmp_path) + '[[auth.certs]]\ndns = "a.b"\nrole = "admin"\n[server]\ngrpc_addr = "0.0.0.0:7070"\n'
    )
    assert wide.auth_enabled


def test_certs_validated(tmp_path: Path) -> None:
    base = mtls(tmp_path)
    with pytest.raises(ConfigError) as ei:
        cfg(base + '[[auth.certs]]\nrole = 1\npools = ["z"]\nfoo = 1\n')
    assert ei.value.errors == (
        "auth.certs[0].foo: unknown key (known: dns, role, pools, labels, tenant)",
        "auth.certs[0].role: must be one of client, worker, metrics, admin (got 1)",
        "auth.certs[0].dns: required (a client certificate's DNS subjectAltName)",
        "auth.certs[0].pools: unknown pool 'z' (pools: a)",
    )
    assert one_error(base + '[[auth.certs]]\ndns = "a.b"\n') == (
        "auth.certs[0].role: required (one of client, worker, metrics, admin)"
    )
    assert one_error(base + '[[auth.certs]]\ndns = "bad name"\nrole = "client"\n') == (
        "auth.certs[0].dns: must be a DNS name such as 'worker-1.example.com' (got 'bad name')"
    )
    entry = '[[auth.certs]]\ndns = "a.example.com"\nrole = "client"\n'
    assert one_error(base + entry + entry.replace("A", "a").replace('"a.', '"A.')) == (
        "auth.certs[1].dns: duplicate certificate principal 'a.example.com' (same as auth.certs[0])"
    )
    assert one_error(mtls(tmp_path, client_ca=False) + entry) == (
        "auth.certs: certificate principals need mutual TLS: set server.tls.client_ca"
    )
    assert one_error(entry) == "auth.certs: certificate principals need mutual TLS: set server.tls.client_ca"
    assert one_error("[auth]\ncerts = 3\n").startswith(
        "auth.certs: must be an array of tables ([[auth.certs]])"
    )


# ---------------------------------------------------------------------------------------------
# [server.grpc_web]


def test_grpc_web_origins() -> None:
    assert cfg("").server.grpc_web is None
    gw = cfg(
        '[server.grpc_web]\nallowed_origins = ["https://Dash.Example.com/", "https://dash.example.com:443", '
        '"http://localhost:8000", "http://a.example:80"]\n'
    ).server.grpc_web
    assert gw is not None
    assert gw.allowed_origins == ("https://dash.example.com", "http://localhost:8000", "http://a.example")
    assert cfg("[server.grpc_web]\nallowed_origins = []\n").server.grpc_web is not None


def test_grpc_web_validated() -> None:
    assert one_error("[server.grpc_web]\n") == (
        'server.grpc_web.allowed_origins: required (e.g. ["https://dash.example.com"])'
    )
    assert one_error('[server.grpc_web]\nallowed_origins = ["*"]\n') == (
        "server.grpc_web.allowed_origins: item 0: '*' is not allowed; list each origin"
    )
    assert one_error('[server.grpc_web]\nallowed_origins = ["https://a.example/app"]\n') == (
        "server.grpc_web.allowed_origins: item 0 must be an origin 'http(s)://host[:port]' without a path "
        "(got 'https://a.example/app')"
    )
    assert one_error('[server.grpc_web]\nallowed_origins = ["dash.example.com"]\n').startswith(
        "server.grpc_web.allowed_origins: item 0 must be an origin"
    )
    assert one_error('[server.grpc_web]\nallowed_origins = "https://a.example"\n').startswith(
        "server.grpc_web.allowed_origins: must be an array of origins"
    )
    assert one_error('[server.grpc_web]\norigins = ["https://a.example"]\nallowed_origins = []\n') == (
        "server.grpc_web.origins: unknown key (did you mean 'allowed_origins'?)"
    )
    assert one_error("[server]\ngrpc_web = 1\n") == "server.grpc_web: must be a table (got 1)"
