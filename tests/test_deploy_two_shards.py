"""deploy/k8s/two-shards/ (docs/how-to/shards.md): the Kubernetes example of a two-shard
cluster parses, its ConfigMap passes the server's configuration validation for both shards,
and the manifests agree with the config (one Deployment + Service per shard, the Services
are the shards' endpoints, a worker Deployment and a KEDA ScaledObject per pool)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronoq.server.config import ServerConfig, loads_config

DIR = Path(__file__).resolve().parent.parent / "deploy" / "k8s" / "two-shards"
ENV = {
    "DATABASE_URL": "postgresql://cronoq:pw@db:5432/cronoq",
    "CRONOQ_CLIENT_TOKEN": "c" * 24,
    "CRONOQ_WORKER_TOKEN": "w" * 24,
    "CRONOQ_METRICS_TOKEN": "m" * 24,
    "CRONOQ_ADMIN_TOKEN": "a" * 24,
}


def objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in sorted(DIR.glob("*.yaml")):
        out += [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
    return out


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in objects() if d["kind"] == kind]


def config(shard: str, tmp: Path) -> ServerConfig:
    (cm,) = of_kind("ConfigMap")
    text = cm["data"]["cronoq.toml"]
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp / name).write_text("x")
    return loads_config(text.replace("/etc/cronoq/tls/", f"{tmp}/"), env={**ENV, "CRONOQ_SHARD": shard})


def env_of(dep: dict[str, Any]) -> dict[str, str]:
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in c.get("env", [])}


def args_of(dep: dict[str, Any]) -> list[str]:
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return list(c["args"])


def test_every_document_is_a_kubernetes_object() -> None:
    for d in objects():
        assert {"apiVersion", "kind", "metadata"} <= d.keys()
        assert d["metadata"]["labels"]["app.kubernetes.io/name"] == "cronoq"


@pytest.mark.parametrize("shard", ["a", "b"])
def test_config_is_valid_for_each_shard(shard: str, tmp_path: Path) -> None:
    cfg = config(shard, tmp_path)
    assert cfg.server.shard == shard and cfg.store.schema == f"cronoq_{shard}"
    assert len(cfg.shards) == 2 and cfg.server.peer_tls is not None


def test_one_deployment_and_service_per_shard(tmp_path: Path) -> None:
    cfg = config("a", tmp_path)
    servers = {env_of(d)["CRONOQ_SHARD"]: d for d in of_kind("Deployment") if args_of(d)[0] == "serve"}
    assert set(servers) == {s.name for s in cfg.shards}
    services = {s["metadata"]["name"]: s for s in of_kind("Service")}
    for shard in cfg.shards:
        m = re.fullmatch(r"https://([^:]+):(\d+)", shard.endpoint)
        assert m, shard.endpoint
        svc = services[m[1]]
        labels = servers[shard.name]["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= labels.items()
        assert {p["port"] for p in svc["spec"]["ports"]} >= {int(m[2])}
        # the Service selects this shard's pods only
        others = [d for n, d in servers.items() if n != shard.name]
        assert all(
            not svc["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
            for d in others
        )


def test_a_worker_and_a_scaledobject_per_pool(tmp_path: Path) -> None:
    cfg = config("a", tmp_path)
    owner = {p: s for s in cfg.shards for p in s.pools}
    workers = {}
    for d in of_kind("Deployment"):
        args = args_of(d)
        if args[0] == "worker":
            pool = next(a.split("=", 1)[1] for a in args if a.startswith("--pool="))
            workers[pool] = d
    assert set(workers) == set(cfg.pool_names)
    scaled = {so["spec"]["scaleTargetRef"]["name"]: so for so in of_kind("ScaledObject")}
    for pool, dep in workers.items():
        args = args_of(dep)
        server = next(a.split("=", 1)[1] for a in args if a.startswith("--server="))
        assert f"https://{server}" == owner[pool].endpoint  # (straight to its shard)
        so = scaled[dep["metadata"]["name"]]
        (trig,) = so["spec"]["triggers"]
        q = trig["metadata"]["query"]
        assert f'pool="{pool}"' in q and f'shard="{owner[pool].name}"' in q and "cronoq_pool_desired" in q
        slots = next(int(a.split("=", 1)[1]) for a in args if a.startswith("--slots="))
        assert float(trig["metadata"]["threshold"]) == slots
