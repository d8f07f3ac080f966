"""The container image (Dockerfile, deploy/docker/cronoq.toml): its configuration passes the
server's own validation with tokens from the environment and is refused without them; the
Dockerfile runs as a non-root user, exposes 7070/7071 and starts ``cronoq serve``; every file
it copies survives .dockerignore. Where a Docker daemon answers, the image is built and a
container is started and asked for /healthz and /readyz (skipped, with the reason, elsewhere)."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from cronoq.server.config import ConfigError, loads_config

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
CONFIG = ROOT / "deploy" / "docker" / "cronoq.toml"
TOKENS = {
    "CRONOQ_CLIENT_TOKEN": "c" * 24,
    "CRONOQ_WORKER_TOKEN": "w" * 24,
    "CRONOQ_METRICS_TOKEN": "m" * 24,
    "CRONOQ_ADMIN_TOKEN": "a" * 24,
}


def test_image_config_is_valid_with_tokens_from_the_environment() -> None:
    cfg = loads_config(CONFIG.read_text(), env=TOKENS, source=str(CONFIG))
    assert cfg.server.grpc_addr == "0.0.0.0:7070" and cfg.server.http_addr == "0.0.0.0:7071"
    assert {t.role for t in cfg.tokens} == {"client", "worker", "metrics", "admin"}
    assert cfg.store.kind == "sqlite" and str(cfg.store.path).startswith("/var/lib/cronoq/")


def test_image_config_without_tokens_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        loads_config(CONFIG.read_text(), env={}, source=str(CONFIG))
    assert "CRONOQ_CLIENT_TOKEN" in str(info.value)


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile_shape() -> None:
    ins = _instructions()
    froms = [rest for op, rest in ins if op == "FROM"]
    assert froms and all(f.startswith("${BASE}") for f in froms)
    # the published default is the official slim image; BASE swaps in a locally made one
    (base,) = [rest for op, rest in ins[: ins.index(("FROM", froms[0]))] if op == "ARG"]
    assert base.startswith("BASE=python:3.") and base.endswith("-slim"), base
    final = ins[max(i for i, (op, _) in enumerate(ins) if op == "FROM") :]
    users = [rest for op, rest in final if op == "USER"]
    assert users and not users[-1].startswith(("root", "0")), users
    assert ("EXPOSE", "7070 7071") in final
    (entry,) = [json.loads(rest) for op, rest in final if op == "ENTRYPOINT"]
    assert entry == ["cronoq", "serve"]
    (cmd,) = [json.loads(rest) for op, rest in final if op == "CMD"]
    assert cmd == ["--config", "/etc/cronoq/cronoq.toml"]
    assert any(op == "COPY" and "deploy/docker/cronoq.toml" in rest for op, rest in final)


def _ignored(path: str) -> bool:
    """Whether .dockerignore leaves ``path`` out of the build context (last match wins)."""
    ignored = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        rule = raw.strip()
        if not rule or rule.startswith("#"):
            continue
        negate = rule.startswith("!")
        pattern = rule[1:] if negate else rule
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            ignored = not negate
    return ignored


def test_everything_copied_is_in_the_build_context() -> None:
    sources = []
    for op, rest in _instructions():
        if op == "COPY" and not rest.startswith("--from"):
            sources += rest.split()[:-1]
    assert sources, "no COPY of the build context"
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not _ignored(src.rstrip("/")), f"{src} is excluded by .dockerignore"
    assert _ignored("tests") and _ignored(".venv") and not _ignored("src/cronoq/__init__.py")


def _docker_reason() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker command on this machine"
    try:
        r = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if r.returncode != 0:
        return "no Docker daemon answers: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


def test_image_builds_and_serves(tmp_path: Path) -> None:
    reason = _docker_reason()
    if reason is not None:
        pytest.skip(reason)
    tag = f"cronoq-test:{uuid.uuid4().hex[:8]}"
    build = subprocess.run(
        ["docker", "build", "-t", tag, str(ROOT)], capture_output=True, text=True, timeout=900
    )
    if build.returncode != 0 and ("pull" in build.stderr or "resolve" in build.stderr):
        pytest.skip(f"the base image cannot be fetched here: {build.stderr.strip().splitlines()[-1]}")
    assert build.returncode == 0, build.stderr[-4000:]
    name = f"cronoq-test-{uuid.uuid4().hex[:8]}"
    env = [a for k, v in TOKENS.items() for a in ("-e", f"{k}={v}")]
    try:
        run = subprocess.run(
            ["docker", "run", "-d", "--name", name, "-p", "127.0.0.1::7071", *env, tag],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        port = (
            subprocess.run(["docker", "port", name, "7071/tcp"], capture_output=True, text=True, timeout=30)
            .stdout.strip()
            .rsplit(":", 1)[-1]
        )
        user = subprocess.run(
            ["docker", "exec", name, "id", "-u"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        assert user == "10001"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                if time.monotonic() > deadline:
                    logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True).stdout
                    raise AssertionError(f"container never became ready:\n{logs}") from None
                time.sleep(0.5)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=60)
