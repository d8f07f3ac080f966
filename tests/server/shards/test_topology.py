"""docs/how-to/shards.md#ownership and #forwarding: which shard owns a pool, an id or a
resource, the refusal messages and metadata, and the forwarding rule."""

from __future__ import annotations

from cronoq.server.config import loads_config
from cronoq.server.shards.peers import Peers, forward_allowed
from cronoq.server.shards.topology import Topology

TOML = """
[[pools]]
name = "p1"
[[pools]]
name = "p2"
[[resources]]
name = "db"
kind = "semaphore"
permits = 1
shard = "b"
[[shards]]
name = "a"
number = 1
pools = ["p1"]
endpoint = "http://127.0.0.1:7070"
[[shards]]
name = "b"
number = 200
pools = ["p2"]
endpoint = ["http://10.1.2.3:7070", "https://b2.example:7070"]
"""


def test_owners() -> None:
    top = Topology(loads_config(TOML, env={}, shard="a"))
    a, b = top.shards
    assert top.own is a and top.peers == (b,) and top.sharded
    assert top.of_pool("p1") is a and top.of_pool("p2") is b and top.of_pool("nope") is None
    assert top.of_pool("") is a  # the default pool (the first)
    assert top.of_id(200 << 56 | 5 << 40 | 1) is b and top.of_id(1 << 56 | 9) is a
    assert top.of_id(3 << 48 | 1) is None  # an unsharded id names no shard
    assert top.of_resource("db") is b and top.of_resource("x") is None
    assert top.of_resource("db:customer-42") is b and top.of_resource("x:1") is None


def test_refusals() -> None:
    top = Topology(loads_config(TOML, env={}, shard="a"))
    b = top.shards[1]
    r = top.pool_refusal("p2", b)
    assert r.message == "pool 'p2' is served by shard 'b' at http://10.1.2.3:7070"
    assert r.metadata == (("cronoq-shard", "b"), ("cronoq-shard-endpoint", "http://10.1.2.3:7070"))
    t = top.task_refusal(200 << 56 | 1, b)
    assert t.message == f"task {200 << 56 | 1} belongs to shard 'b' at http://10.1.2.3:7070"
    assert top.pool_refusal("p2", b, "https://b2.example:7070").metadata[1][1] == "https://b2.example:7070"


def test_forwarding_rule() -> None:
    cfg = loads_config(TOML, env={}, shard="a")
    assert forward_allowed(cfg, "https://b2.example:7070")
    assert forward_allowed(cfg, "http://127.0.0.1:7070") and forward_allowed(cfg, "http://localhost:1")
    assert forward_allowed(cfg, "http://[::1]:7070")
    assert not forward_allowed(cfg, "http://10.1.2.3:7070")
    insecure = loads_config("[server]\ninsecure_peer_http = true\n" + TOML, env={}, shard="a")
    assert forward_allowed(insecure, "http://10.1.2.3:7070")
    peers = Peers(cfg)
    b = cfg.shards[1]
    assert peers.allowed(b)  # (its https address)
    assert [ep for _, ep in peers.order(b)] == ["https://b2.example:7070"]
    assert peers.current(b) == "http://10.1.2.3:7070"


def test_unsharded_config_has_no_topology() -> None:
    top = Topology(loads_config("", env={}))
    assert not top.sharded and top.own is None and top.shards == ()


def test_dependencies_and_resources_stay_within_a_shard() -> None:
    import pytest

    from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
    from cronoq.server.app import ApiError
    from cronoq.server.shards.router import check_task

    top = Topology(loads_config(TOML, env={}, shard="a"))
    a, b = top.shards
    ok = pb.TaskSpec(pool="p2", resources={"db": 1}, deps=[pb.Dep(target=pb.TaskRef(id=200 << 56 | 1))])
    check_task(top, ok, b)
    with pytest.raises(ApiError) as ei:
        check_task(top, pb.TaskSpec(pool="p1", deps=[pb.Dep(target=pb.TaskRef(id=200 << 56 | 7))]), a)
    assert ei.value.code == "unknown_dependency" and ei.value.status == "not_found"
    assert "shard 'b'" in ei.value.message and "shard 'a'" in ei.value.message
    with pytest.raises(ApiError) as ei:
        check_task(top, pb.TaskSpec(pool="p1", resources={"db": 1}), a)
    assert ei.value.code == "unknown_resource" and ei.value.status == "invalid_argument"
    assert ei.value.message.startswith("resource 'db' belongs to shard 'b': pool 'p1' is served by shard 'a'")
