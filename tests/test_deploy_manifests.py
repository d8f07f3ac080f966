"""The deployment examples under deploy/ (docs/how-to/production.md): every YAML document
parses and has the fields the docs rely on; the example cronoq.toml (and the copy in the
ConfigMap) passes the server's own configuration validation; the systemd unit has the
directives that matter; the KEDA threshold matches the slots of one worker replica."""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronoq.server.config import loads_config

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
K8S = DEPLOY / "k8s"
ENV = {
    "DATABASE_URL": "postgresql://cronoq:pw@db:5432/cronoq",
    "CRONOQ_CLIENT_TOKEN": "c" * 24,
    "CRONOQ_WORKER_TOKEN": "w" * 24,
    "CRONOQ_METRICS_TOKEN": "m" * 24,
    "CRONOQ_ADMIN_TOKEN": "a" * 24,
}


def docs() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(K8S.glob("*.yaml")):
        out[f.name] = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
    return out


def by_kind(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for ds in docs().values() for d in ds if d["kind"] == kind]
    if name is not None:
        found = [d for d in found if d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("path", sorted(K8S.glob("*.yaml")), ids=lambda p: p.name)
def test_every_document_is_a_kubernetes_object(path: Path) -> None:
    ds = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert ds, path
    for d in ds:
        assert isinstance(d, dict)
        assert {"apiVersion", "kind", "metadata"} <= d.keys(), d.keys()
        assert d["metadata"]["name"]
        assert d["metadata"]["labels"]["app.kubernetes.io/name"] == "cronoq"


def container(dep: dict[str, Any]) -> dict[str, Any]:
    cs = dep["spec"]["template"]["spec"]["containers"]
    assert len(cs) == 1
    return cs[0]


def test_server_deployment() -> None:
    dep = by_kind("Deployment", "cronoq-server")
    assert dep["apiVersion"] == "apps/v1"
    spec = dep["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    c = container(dep)
    assert c["args"][0] == "serve"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"grpc": 7070, "http": 7071, "metrics": 9090}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["periodSeconds"] <= 2, "readiness period adds to the failover time"
    assert {"secretRef": {"name": "cronoq-secrets"}} in c["envFrom"]
    # the pod may stop gracefully: grace of the config + handover
    cfg = server_config()
    assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > cfg.server.shutdown_grace_s
    # the config file the args name is the ConfigMap's key
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert c["args"][2] == mounts["config"] + "/cronoq.toml"
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert vols["config"]["configMap"]["name"] == "cronoq-config"
    assert vols["tls"]["secret"]["secretName"] == "cronoq-tls"
    assert 'cert = "' + mounts["tls"] + '/tls.crt"' in (DEPLOY / "cronoq.toml").read_text()
    # only the leader is ever Ready: the rollout must not wait for a second Ready pod
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == "100%"


def test_service_points_at_the_server_pods() -> None:
    svc = by_kind("Service", "cronoq")
    dep = by_kind("Deployment", "cronoq-server")
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    assert ports["grpc"] == (7070, "grpc") and ports["http"] == (7071, "http")


def test_worker_deployment() -> None:
    dep = by_kind("Deployment", "cronoq-worker")
    c = container(dep)
    args = c["args"]
    assert args[0] == "worker" and ":" in args[1]
    assert "--server=cronoq:7070" in args and "--tls" in args and "--pool=default" in args
    env = {e["name"]: e for e in c["env"]}
    ref = env["CRONOQ_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "cronoq-secrets", "key": "CRONOQ_WORKER_TOKEN"}
    grace = next(float(a.split("=", 1)[1]) for a in args if a.startswith("--grace="))
    assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > grace


def test_keda_scaledobject_reads_pool_desired() -> None:
    so = by_kind("ScaledObject")
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    assert so["spec"]["scaleTargetRef"]["name"] == "cronoq-worker"
    (trig,) = so["spec"]["triggers"]
    assert trig["type"] == "prometheus"
    md = trig["metadata"]
    assert "cronoq_pool_desired" in md["query"] and 'pool="default"' in md["query"]
    assert md["serverAddress"].startswith("http")
    # the desired figure counts slots: one replica serves as many as its worker's --slots
    args = container(by_kind("Deployment", "cronoq-worker"))["args"]
    slots = next(int(a.split("=", 1)[1]) for a in args if a.startswith("--slots="))
    assert float(md["threshold"]) == slots
    assert so["spec"]["minReplicaCount"] <= so["spec"]["maxReplicaCount"]
    # Prometheus scrapes the metrics port of the server pods
    ann = by_kind("Deployment", "cronoq-server")["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/port"] == "9090" and ann["prometheus.io/path"] == "/metrics"


def test_secrets_hold_every_variable_the_config_reads() -> None:
    sec = by_kind("Secret", "cronoq-secrets")
    data = sec["stringData"]
    assert set(ENV) <= data.keys()
    for k, v in data.items():
        if k.endswith("_TOKEN"):
            assert len(v) >= 16, k
    tls = by_kind("Secret", "cronoq-tls")
    assert tls["type"] == "kubernetes.io/tls"
    assert {"tls.crt", "tls.key", "ca.crt"} <= tls["stringData"].keys()


def _with_tls_files(text: str, tmp: Path) -> str:
    for name in ("tls.crt", "tls.key"):
        (tmp / name).write_text("x")
    return text.replace("/etc/cronoq/tls/", f"{tmp}/")


def server_config(text: str | None = None, tmp: Path | None = None) -> Any:
    import tempfile

    text = (DEPLOY / "cronoq.toml").read_text() if text is None else text
    with tempfile.TemporaryDirectory() as d:
        return loads_config(_with_tls_files(text, tmp or Path(d)), env=ENV)


def test_example_config_is_valid_and_ha_ready(tmp_path: Path) -> None:
    cfg = server_config(None, tmp_path)
    assert cfg.store.kind == "postgres" and cfg.store.url == ENV["DATABASE_URL"]
    assert cfg.server.metrics_addr is not None
    assert cfg.server.tls is not None
    assert {t.role for t in cfg.tokens} == {"client", "worker", "metrics", "admin"}


def test_configmap_carries_the_example_config() -> None:
    cm = by_kind("ConfigMap", "cronoq-config")
    assert cm["data"]["cronoq.toml"].strip() == (DEPLOY / "cronoq.toml").read_text().strip()


def test_systemd_unit() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((DEPLOY / "systemd" / "cronoq.service").read_text())
    svc = unit["Service"]
    assert svc["ExecStart"].endswith("cronoq serve")
    assert svc["KillSignal"] == "SIGTERM"
    assert svc["Restart"] == "always"
    assert "CRONOQ_CONFIG=" in svc["Environment"]
    assert svc["EnvironmentFile"].startswith("/etc/cronoq/")
    assert int(svc["TimeoutStopSec"]) > server_config().server.shutdown_grace_s
    assert unit["Install"]["WantedBy"] == "multi-user.target"
