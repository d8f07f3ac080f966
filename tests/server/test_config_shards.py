"""docs/how-to/shards.md: the shard keys of the `cronoq serve` configuration ([[shards]],
server.shard / --shard / $CRONOQ_SHARD, server.peer_tls, server.insecure_peer_http,
[[resources]].shard, the {shard} store placeholder) and every rule between them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronoq.server.config import ConfigError, ServerConfig, loads_config

BASE = """
[[pools]]
name = "p1"
[[pools]]
name = "p2"
[[shards]]
name = "a"
number = 1
pools = ["p1"]
endpoint = "http://127.0.0.1:7060"
[[shards]]
name = "b"
number = 200
pools = ["p2"]
endpoint = ["http://127.0.0.1:7080", "http://127.0.0.1:7082/"]
"""


def cfg(text: str, env: dict[str, str] | None = None, **kw: Any) -> ServerConfig:
    return loads_config(text, env=env or {}, **kw)


def errors_of(text: str, env: dict[str, str] | None = None, **kw: Any) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as ei:
        cfg(text, env, **kw)
    return ei.value.errors


def test_shards_parsed() -> None:
    c = cfg('[server]\nshard = "a"\n' + BASE)
    assert [(s.name, s.number, s.pools) for s in c.shards] == [("a", 1, ("p1",)), ("b", 200, ("p2",))]
    assert c.shards[1].endpoints == ("http://127.0.0.1:7080", "http://127.0.0.1:7082")
    assert c.shards[1].endpoint == "http://127.0.0.1:7080"
    assert c.own_shard is c.shards[0]
    assert [p.name for p in c.local_pools] == ["p1"]
    assert c.server.insecure_peer_http is False and c.server.peer_tls is None


def test_unsharded_has_no_shard() -> None:
    c = cfg("")
    assert c.shards == () and c.server.shard is None and c.own_shard is None
    # a deployment-wide $CRONOQ_SHARD does not break an unsharded server
    assert cfg("", {"CRONOQ_SHARD": "a"}).server.shard is None


def test_own_shard_flag_wins_over_file_and_env() -> None:
    text = '[server]\nshard = "a"\n' + BASE
    assert cfg(text, {"CRONOQ_SHARD": "a"}, shard="b").server.shard == "b"
    assert cfg(BASE, {"CRONOQ_SHARD": "b"}).server.shard == "b"
    assert cfg(text, {"CRONOQ_SHARD": "b"}).server.shard == "a"


def test_own_shard_required_and_must_exist() -> None:
    (e,) = errors_of(BASE)
    assert e.startswith("server.shard: required with [[shards]]") and "--shard" in e and "CRONOQ_SHARD" in e
    (e,) = errors_of(BASE, shard="bb")
    assert e == "server.shard: --shard names no shard: 'bb' (did you mean 'b'?)"
    (e,) = errors_of('[server]\nshard = "zzz"\n' + BASE)
    assert e == "server.shard: server.shard names no shard: 'zzz' (shards: a, b)"
    (e,) = errors_of('[server]\nshard = "a"\n')
    assert e == "server.shard: server.shard = 'a' needs [[shards]] (there are none)"


def test_every_problem_at_once() -> None:
    bad = """
[server]
shard = "c"
[[pools]]
name = "p1"
[[pools]]
name = "p2"
[[pools]]
name = "p3"
[[resources]]
name = "r"
kind = "semaphore"
permits = 1
[[shards]]
name = "a"
number = 1
pools = ["p1", "p2x"]
endpoint = "http://u:p@127.0.0.1:7070"
[[shards]]
name = "a"
number = 1
pools = ["p1", "p2"]
endpoint = "http://h:1/path"
[[shards]]
name = "b"
number = 256
endpoint = "ftp://h:1"
[[shards]]
name = "d"
number = 4
pools = ["p3"]
endpoint = "http://h"
nmae = "x"
"""
    errs = errors_of(bad)
    assert "shards[0].pools: unknown pool 'p2x' (did you mean 'p2'?)" in errs
    assert any(e.startswith("shards[0].endpoint: must not carry userinfo") for e in errs)
    assert "shards[1].name: duplicate shard name 'a' (also shards[0])" in errs
    assert "shards[1].number: duplicate shard number 1 (also shards[0])" in errs
    assert "shards[1].pools: pool 'p1' is already in shard 'a'" in errs
    assert any(e.startswith("shards[1].endpoint: must not have a path") for e in errs)
    assert "shards[2].pools: required (a list of pool names)" in errs
    assert "shards[2].number: must be an integer in 1..255 (got 256)" in errs
    scheme = "shards[2].endpoint: must be http://host:port or https://host:port"
    assert any(e.startswith(scheme) for e in errs)
    assert any(e.startswith("shards[3].endpoint: must be http(s)://host:port with a port") for e in errs)
    assert "shards[3].nmae: unknown key (did you mean 'name'?)" in errs
    assert "server.shard: server.shard names no shard: 'c' (shards: a, b, d)" in errs
    assert "resources[0].shard: required with [[shards]] (the shard that owns the resource)" in errs


def test_every_pool_in_a_shard() -> None:
    text = '[server]\nshard = "a"\n[[pools]]\nname = "p3"\n' + BASE
    (e,) = errors_of(text)
    assert e == "shards: pool 'p3' is in no shard (every pool must be in exactly one)"
    errs = errors_of("shards = []\n")
    assert any(e.startswith("shards: at least one shard is required") for e in errs)


@pytest.mark.parametrize("number", [0, -1, 256, "1", True])
def test_shard_number_range(number: object) -> None:
    text = BASE.replace("number = 1\n", f"number = {number!r}\n".replace("'", '"').replace("True", "true"))
    (e,) = errors_of(text, shard="a")
    assert e.startswith("shards[0].number: must be an integer in 1..255")


@pytest.mark.parametrize(
    "endpoint, message",
    [
        ("http://h:1/x", "must not have a path"),
        ("https://h:1?q", "must not have a path"),
        ("http://user@h:1", "must not carry userinfo"),
        ("grpc://h:1", "must be http://host:port or https://host:port"),
        ("h:1", "must be http://host:port or https://host:port"),
        ("http://h", "with a port 1..65535"),
        ("http://h:0", "with a port 1..65535"),
    ],
)
def test_endpoint_rules(endpoint: str, message: str) -> None:
    text = BASE.replace('endpoint = "http://127.0.0.1:7060"', f'endpoint = "{endpoint}"')
    (e,) = errors_of(text, shard="a")
    assert e.startswith("shards[0].endpoint: ") and message in e, e


def test_endpoint_forms_accepted() -> None:
    for ep in ("https://shard-a.svc:443", "http://[::1]:7060", "HTTP://h:1/"):
        text = BASE.replace('endpoint = "http://127.0.0.1:7060"', f'endpoint = "{ep}"')
        assert cfg(text, shard="a").shards[0].endpoint.startswith(("http", "https"))


def test_resources_name_their_shard() -> None:
    res = '[[resources]]\nname = "db"\nkind = "semaphore"\npermits = 2\nshard = "b"\n'
    c = cfg(BASE + res, shard="a")
    assert c.resources[0].shard == "b"
    (e,) = errors_of(BASE + res.replace('"b"', '"bx"'), shard="a")
    assert e == "resources[0].shard: unknown shard 'bx' (did you mean 'b'?)"
    (e,) = errors_of(res)
    assert e == "resources[0].shard: only used with [[shards]]"


def test_peer_tls(tmp_path: Path) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("x")
    c = cfg(f'[server]\npeer_tls = {{ca = "{pem}"}}\ninsecure_peer_http = true\n' + BASE, shard="a")
    assert c.server.peer_tls is not None and c.server.peer_tls.ca == str(pem)
    assert c.server.insecure_peer_http is True
    (e,) = errors_of(f'[server]\npeer_tls = {{cert = "{pem}"}}\n' + BASE, shard="a")
    assert e == "server.peer_tls.key: required with cert and key together (PEM files)"
    (e,) = errors_of('[server]\npeer_tls = {ca = "/nonexistent.pem"}\n' + BASE, shard="a")
    assert e.startswith("server.peer_tls.ca: file not found")
    (e,) = errors_of('[server]\npeer_tls = {caa = "x"}\n' + BASE, shard="a")
    assert e == "server.peer_tls.caa: unknown key (did you mean 'ca'?)"
    (e,) = errors_of('[server]\ninsecure_peer_http = "yes"\n' + BASE, shard="a")
    assert e.startswith("server.insecure_peer_http: must be true or false")


def test_store_placeholder() -> None:
    pg = '[store]\nkind = "postgres"\nurl = "postgresql://h/db"\nschema = "cq_{shard}"\n'
    assert cfg(pg + BASE, shard="b").store.schema == "cq_b"
    sq = '[store]\npath = "/var/lib/cronoq/{shard}.db"\n'
    assert cfg(sq + BASE, shard="a").store.path == "/var/lib/cronoq/a.db"
    (e,) = errors_of(pg)
    assert e == "store.schema: {shard} needs [[shards]] (there are none)"
    (e,) = errors_of(sq)
    assert e == "store.path: {shard} needs [[shards]] (there are none)"
    text = BASE.replace('name = "b"', 'name = "b-1"')
    (e,) = errors_of(pg + text, shard="b-1")
    assert e == "store.schema: with the shard name 'b-1' it is not an SQL identifier ('cq_b-1')"


def _serve(args: list[str], tmp_path: Path) -> Any:
    import subprocess
    import sys

    from tests.server.procs import child_env

    cmd = [sys.executable, "-m", "cronoq.cli", "serve", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=child_env(), cwd=tmp_path, timeout=60)


def test_cli_shard_flag_and_check(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(BASE)
    out = _serve(["--config", str(cfg), "--check", "--shard", "b"], tmp_path)
    assert out.returncode == 0 and "shard b (number 200) of 2" in out.stdout, out.stderr
    out = _serve(["--config", str(cfg), "--check"], tmp_path)
    assert out.returncode != 0 and "server.shard: required with [[shards]]" in out.stderr


async def test_a_store_of_another_shard_stops_the_server(tmp_path: Path) -> None:
    from cronoq.store.sqlite import SqliteStore

    db = tmp_path / "one.db"  # (no {shard} placeholder: both shards would share it)
    store = SqliteStore(db, shard="a")
    await store.open()
    await store.close()
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[server]\ngrpc_addr = "127.0.0.1:0"\nhttp_addr = "127.0.0.1:0"\n[store]\npath = "{db}"\n' + BASE
    )
    out = _serve(["--config", str(cfg), "--shard", "b"], tmp_path)
    assert out.returncode != 0
    assert "belongs to shard 'a', not 'b'" in out.stderr, out.stderr


def test_an_endpoint_of_two_shards_is_refused() -> None:
    """Issue 35, defect 8: an endpoint must reach one shard (a call for b reached a)."""
    text = BASE.replace('"http://127.0.0.1:7082/"', '"http://localhost:7060"')
    (e,) = errors_of(text, shard="a")
    assert e == (
        "shards[1].endpoint: endpoint 'http://localhost:7060' is also shard 'a''s: each endpoint must "
        "reach one shard"
    ), e


@pytest.mark.parametrize(
    ("grpc_addr", "endpoint"),
    [
        ("127.0.0.1:7080", "http://127.0.0.1:7080"),
        ("127.0.0.1:7080", "http://localhost:7080"),
        ("0.0.0.0:7080", "http://127.0.0.1:7080"),
        ("[::]:7080", "http://[::1]:7080"),
    ],
)
def test_a_peer_endpoint_that_is_this_server_is_refused(grpc_addr: str, endpoint: str) -> None:
    """Issue 35, defect 8: through such an endpoint a bulk replay ran twice on this shard."""
    server = f'[server]\ninsecure_no_auth = true\ngrpc_addr = "{grpc_addr}"\n'
    text = server + BASE.replace('"http://127.0.0.1:7080"', f'"{endpoint}"')
    (e,) = errors_of(text, shard="a")
    assert e == (
        f"shards[1].endpoint: endpoint {endpoint!r} of shard 'b' is this server's own "
        f"server.grpc_addr ({grpc_addr!r}, shard 'a'): calls to 'b' would come back here"
    ), e
    # the same file is right for the servers of shard b (their own endpoint lists them)
    assert cfg(text, shard="b").shards[1].endpoints[0] == endpoint


def test_other_hosts_on_the_same_port_are_not_this_server() -> None:
    text = '[server]\ninsecure_no_auth = true\ngrpc_addr = "0.0.0.0:7080"\n' + BASE.replace(
        '"http://127.0.0.1:7080"', '"https://shard-b:7080"'
    )
    assert cfg(text, shard="a").shards[1].endpoint == "https://shard-b:7080"


def test_check_refuses_a_looping_shard_config(tmp_path: Path) -> None:
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('[server]\ngrpc_addr = "127.0.0.1:7080"\n' + BASE)
    out = _serve(["--config", str(cfg_path), "--check", "--shard", "a"], tmp_path)
    assert out.returncode != 0 and "calls to 'b' would come back here" in out.stderr, out.stderr
