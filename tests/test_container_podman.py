"""The container image, built and run for real with podman
(docs/how-to/production.md#building-without-a-registry).

Where podman and runc are installed (Debian's packages; no daemon, no registry), the Dockerfile
is built from a locally made Debian base (``BASE``, made once by
``deploy/docker/make-base-image.sh`` with debootstrap and cached outside the repository) with
``OFFLINE=1`` and no network at build time: cronoq's wheels are built on the host and put in
the build context. A container then runs ``cronoq serve`` on the embedded SQLite store with
the host's network, and the test checks from the host: ``/healthz``, a submit over HTTP that
the server acknowledges and reads back, and that the server process runs as the image's
non-root user (uid 10001, read from ``/proc`` of the container's process).

Cost: the first run on a machine makes the base (debootstrap, about two minutes, cached in
``$CRONOQ_BASE_CACHE``, default ``/var/cache/cronoq-images``) and the dependency wheels (pip,
cached there by the hash of pyproject.toml): 3.5 minutes in all at a load average of 10 on
two cores; later runs take 30 to 65 s (the image build, without layers, and the server
start). Skipped, with the reason, without podman, runc, or root (podman's storage and
debootstrap need it here), or when the first run finds no package index to build the
dependency wheels from; in CI (``.ci/run``, which
installs podman, runc and debootstrap from Debian's packages) each of these fails the test
instead (tests/services.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from services import missing_service

ROOT = Path(__file__).resolve().parent.parent
RUNC = "/usr/sbin/runc"
BASE = os.environ.get("CRONOQ_TEST_BASE_IMAGE", "localhost/cronoq-base:bookworm")
CACHE = Path(os.environ.get("CRONOQ_BASE_CACHE", "/var/cache/cronoq-images"))
#: what these machines allow a container (podman's defaults exceed the sandbox's limits)
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
TOKEN = "client-token-for-the-image-test"
CONFIG = """\
[server]
grpc_addr = "127.0.0.1:{grpc}"
http_addr = "127.0.0.1:{http}"
[store]
kind = "sqlite"
path = "/var/lib/cronoq/cronoq.db"
[[auth.tokens]]
token_env = "CRONOQ_CLIENT_TOKEN"
role = "client"
"""


def _skip_reason() -> str | None:
    if shutil.which("podman") is None:
        return "podman is not installed (Debian: apt-get install podman)"
    if not os.path.exists(RUNC):
        return f"no {RUNC} (Debian: apt-get install runc)"
    if os.geteuid() != 0:
        return "podman runs rootful here (its storage and debootstrap need root)"
    return None


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["podman", "--runtime", RUNC, *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
        )
    return r


def base_image() -> str:
    """The local Debian base: made (and cached) by the script the production page documents."""
    if podman("image", "exists", BASE, check=False).returncode != 0:
        if shutil.which("debootstrap") is None and not (CACHE / "bookworm-python3.tar").exists():
            missing_service(
                "debootstrap",
                f"no base image {BASE} and no debootstrap to make one (apt-get install debootstrap)",
            )
        script = ROOT / "deploy" / "docker" / "make-base-image.sh"
        r = subprocess.run([str(script), BASE], capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return BASE


def wheels(into: Path) -> None:
    """cronoq's wheel, built now, and its dependencies' wheels, built once per pyproject.toml
    (for this interpreter's Python: the base's python3 must be the same minor version)."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:12]
    deps = CACHE / f"wheels-py{sys.version_info[0]}{sys.version_info[1]}-{digest}"
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
    if not deps.exists():
        tmp = deps.with_name(deps.name + f".{uuid.uuid4().hex[:6]}")
        r = subprocess.run(
            [*pip, "--wheel-dir", str(tmp), f"{ROOT}[server,postgres]"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if r.returncode != 0:  # the first run needs the package index (later runs use the cache)
            shutil.rmtree(tmp, ignore_errors=True)
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            missing_service("the package index", f"cannot build the dependency wheels once: {last}")
        for w in tmp.glob("cronoq-*.whl"):
            w.unlink()
        tmp.rename(deps)
    for w in deps.glob("*.whl"):
        shutil.copy2(w, into)
    r = subprocess.run(
        [*pip, "--no-deps", "--no-build-isolation", "--wheel-dir", str(into), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]


def build_context(tmp: Path) -> Path:
    """What the Dockerfile's COPY lines read, as .dockerignore leaves it, plus the wheels."""
    ctx = tmp / "context"
    ctx.mkdir()
    for name in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, ctx / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.whl")
    shutil.copytree(ROOT / "src", ctx / "src", ignore=ignore)
    shutil.copytree(ROOT / "deploy" / "docker", ctx / "deploy" / "docker", ignore=ignore)
    wheels(ctx / "deploy" / "docker" / "wheels")
    return ctx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(url: str, body: object = None) -> tuple[int, dict[str, object]]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"authorization": f"Bearer {TOKEN}"})
    if data is not None:
        req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=5) as resp:
        text = resp.read().decode()
        return resp.status, (json.loads(text) if text.startswith("{") else {"text": text})


def wait_for(url: str, name: str) -> None:
    """Poll ``url`` (``/healthz``: the process is up; ``/readyz``: it leads and takes
    submissions) until it answers 200, with a deadline."""
    deadline = time.monotonic() + 60
    while True:
        try:
            status, _ = http(url)
            if status == 200:
                return
        except (OSError, urllib.error.URLError):
            pass  # not listening yet, or 503 until it leads
        if time.monotonic() > deadline:
            logs = podman("logs", name, check=False)
            raise AssertionError(f"the container never answered {url}:\n{logs.stdout}{logs.stderr}")
        time.sleep(0.2)


def test_the_image_builds_offline_and_serves(tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason is not None:
        missing_service("podman", reason)
    base = base_image()
    tag = "localhost/cronoq-test:podman"
    previous = podman("image", "inspect", "--format", "{{.Id}}", tag, check=False).stdout.strip()
    podman(
        "build", *LIMITS, "--network=none", "--build-arg", f"BASE={base}", "--build-arg", "OFFLINE=1",
        "--layers=false", "-t", tag, str(build_context(tmp_path)), timeout=900,
    )  # fmt: skip
    # (no layers kept: cronoq's wheel changes every run, so they would only pile up; the last
    # run's image, untagged now, goes too)
    if previous and previous != podman("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip():
        podman("rmi", previous, check=False)
    grpc, port = free_port(), free_port()
    (tmp_path / "serve.toml").write_text(CONFIG.format(grpc=grpc, http=port))
    name = f"cronoq-test-{uuid.uuid4().hex[:8]}"
    try:
        podman(
            "run", "-d", "--name", name, "--network=host", *LIMITS, "-e", f"CRONOQ_CLIENT_TOKEN={TOKEN}",
            "-v", f"{tmp_path / 'serve.toml'}:/etc/cronoq/test.toml:ro",
            tag, "--config", "/etc/cronoq/test.toml",
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/healthz", name)
        wait_for(f"{url}/readyz", name)  # leading: submissions are taken
        # a submit through the HTTP API, acknowledged and read back
        status, sub = http(f"{url}/v1/tasks", {"payload": {"hello": "image"}, "key": "from-the-host"})
        assert status in (200, 201) and sub["duplicate"] is False, sub
        status, task = http(f"{url}/v1/tasks/from-the-host")
        assert status == 200 and str(task["id"]) == str(sub["id"]) and task["status"] == "ready", task
        # the server process runs as the image's non-root user, seen from the host
        pid = podman("inspect", "--format", "{{.State.Pid}}", name).stdout.strip()
        uids = next(
            line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:")
        )
        assert uids.split()[1:] == ["10001"] * 4, uids
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == [
            b"/opt/cronoq/bin/cronoq",
            b"serve",
        ]
    finally:
        podman("rm", "-f", name, check=False, timeout=60)
