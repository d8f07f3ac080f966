"""Real ``cronoq serve`` processes for the server tests.

:func:`start_server` writes a TOML config (loopback, port 0, a SQLite store in a temp dir),
starts ``python -m cronoq.cli serve --config FILE`` with stderr going to a log file, and waits
for the parseable ``cronoq serve: grpc=HOST:PORT http=... metrics=...`` line and then for
``cronoq serve: leading``. :meth:`ServerProc.terminate` sends SIGTERM and returns the exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc

#: the test PostgreSQL (trust auth), for the servers of a store-parametrised test
PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"

READY_RE = re.compile(r"^cronoq serve: grpc=(\S+) http=(\S+) metrics=(\S+)$", re.M)

#: tokens of the auth tests (>= 16 characters)
TOKENS = {
    "client": "client-token-0123456789",
    "worker": "worker-token-0123456789",
    "metrics": "metrics-token-0123456789",
    "admin": "admin-token-0123456789",
    "client_a": "client-a-token-0123456789",  # pools = ["a"]
    "worker_a": "worker-a-token-0123456789",  # pools = ["a"]
    "client_t1": "client-t1-token-0123456789",  # tenant = "t1"
    "client_t2": "client-t2-token-0123456789",  # tenant = "t2"
}

AUTH_TOML = "\n".join(
    [
        f'[[auth.tokens]]\ntoken = "{TOKENS["client"]}"\nrole = "client"\n',
        f'[[auth.tokens]]\ntoken = "{TOKENS["worker"]}"\nrole = "worker"\n',
        f'[[auth.tokens]]\ntoken = "{TOKENS["metrics"]}"\nrole = "metrics"\n',
        f'[[auth.tokens]]\ntoken = "{TOKENS["admin"]}"\nrole = "admin"\n',
        f'[[auth.tokens]]\ntoken = "{TOKENS["client_a"]}"\nrole = "client"\npools = ["a"]\n',
        f'[[auth.tokens]]\ntoken = "{TOKENS["worker_a"]}"\nrole = "worker"\npools = ["a"]\n',
        f'[[auth.tokens]]\ntoken = "{TOKENS["client_t1"]}"\nrole = "client"\ntenant = "t1"\n',
        f'[[auth.tokens]]\ntoken = "{TOKENS["client_t2"]}"\nrole = "client"\ntenant = "t2"\n',
    ]
)


@dataclass
class ServerProc:
    proc: subprocess.Popen[bytes]
    config_path: Path
    db_path: Path
    log_path: Path
    grpc: str = ""
    http: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"server did not exit within {timeout}s after SIGTERM:\n{self.log()}"
            ) from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def child_env() -> dict[str, str]:
    """The environment of a ``cronoq`` child process: no inherited config file, unbuffered
    output (the tests read it line by line), wide enough for the tables they parse."""
    env = dict(os.environ)
    env.pop("CRONOQ_CONFIG", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    return env


def config_text(
    db_path: Path, body: str, *, grace: float = 5.0, server_extra: str = "", store: str | None = None
) -> str:
    """The config file: loopback listeners on free ports, ``store`` (the lines of its [store]
    table; default a SQLite file at ``db_path``), then ``body``."""
    if store is None:
        store = f'kind = "sqlite"\npath = "{db_path}"\n'
    return (
        "[server]\n"
        'grpc_addr = "127.0.0.1:0"\n'
        'http_addr = "127.0.0.1:0"\n'
        f"shutdown_grace_s = {grace}\n" + server_extra + "\n"
        "[store]\n" + store + body
    )


def start_server(
    directory: Path,
    body: str,
    *,
    name: str = "server",
    db_path: Path | None = None,
    grace: float = 5.0,
    timeout: float = 30.0,
    wait_leading: bool = True,
    server_extra: str = "",
    store: str | None = None,
) -> ServerProc:
    directory.mkdir(parents=True, exist_ok=True)
    db = db_path or directory / f"{name}.db"
    cfg = directory / f"{name}.toml"
    cfg.write_text(config_text(db, body, grace=grace, server_extra=server_extra, store=store))
    log_path = directory / f"{name}.log"
    start_len = log_path.stat().st_size if log_path.exists() else 0
    env = child_env()
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronoq.cli", "serve", "--config", str(cfg)],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=directory,
        )
    sp = ServerProc(proc, cfg, db, log_path)
    deadline = time.monotonic() + timeout
    while True:
        text = sp.log()[start_len:]
        m = READY_RE.search(text)
        if m and not sp.grpc:
            sp.grpc, sp.http = m.group(1), m.group(2)
            sp.extra["metrics"] = m.group(3)
        if sp.grpc and (not wait_leading or "cronoq serve: leading" in text):
            return sp
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode} before it was ready:\n{sp.log()}")
        if time.monotonic() > deadline:
            sp.kill()
            raise AssertionError(f"server not ready within {timeout}s:\n{sp.log()}")
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------------
# certificates (mutual TLS)


def make_certs(directory: Path, clients: dict[str, str]) -> None:
    """A throwaway CA (``ca.pem``), a server certificate for localhost/127.0.0.1
    (``server.pem``/``server.key``) and one client certificate per ``clients`` entry
    (``<name>.pem``/``<name>.key``, its subjectAltName e.g. ``"DNS:w1.example.com"``), made
    with the openssl command (callers skip without it)."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=cronoq-test-ca")  # fmt: skip
    for name, san in {"server": "IP:127.0.0.1,DNS:localhost", **clients}.items():
        (directory / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")  # fmt: skip
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")  # fmt: skip


def tls_toml(directory: Path) -> str:
    """The ``[server.tls]`` table of :func:`make_certs`' server with mutual TLS."""
    return (
        f'[server.tls]\ncert = "{directory / "server.pem"}"\nkey = "{directory / "server.key"}"\n'
        f'client_ca = "{directory / "ca.pem"}"\n'
    )


# ---------------------------------------------------------------------------------------------
# raw stubs (independent of cronoq.client)


def md(token: str | None) -> tuple[tuple[str, str], ...]:
    return () if token is None else (("authorization", f"Bearer {token}"),)


class Raw:
    """Raw ``grpc.aio`` stubs for calls the Client validates away or for exact status codes."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.aio.insecure_channel(target)
        self.tasks = pb_grpc.TasksStub(self.channel)
        self.admin = pb_grpc.AdminStub(self.channel)
        self.workers = pb_grpc.WorkersStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()


async def code_of(coro: object) -> grpc.StatusCode:
    """The status code a raw call ends with (OK when it succeeds)."""
    try:
        await coro  # type: ignore[misc]
    except grpc.aio.AioRpcError as e:
        return e.code()
    return grpc.StatusCode.OK


__all__ = [
    "AUTH_TOML",
    "child_env",
    "TOKENS",
    "Raw",
    "RawWorker",
    "ServerProc",
    "code_of",
    "make_certs",
    "md",
    "pb",
    "pb_grpc",
    "start_server",
    "tls_toml",
]


class RawWorker:
    """A worker session on raw stubs: registers at once; ``read`` the server's messages, ``send``
    reports, ``close()`` half-closes (the server then ends the stream)."""

    def __init__(self, raw: Raw, pool: str = "default", slots: int = 1, version: int = 3) -> None:
        self.out: asyncio.Queue[pb.WorkerMessage | None] = asyncio.Queue()
        self.out.put_nowait(
            pb.WorkerMessage(register=pb.Register(pool=pool, slots=slots, protocol_version=version))
        )
        self.call = raw.workers.Work(self._requests())

    async def _requests(self) -> AsyncIterator[pb.WorkerMessage]:
        while (m := await self.out.get()) is not None:
            yield m

    async def read(self, timeout: float = 10.0) -> pb.ServerMessage:
        msg = await asyncio.wait_for(self.call.read(), timeout)
        assert msg is not grpc.aio.EOF, "stream ended"
        return msg

    def send(self, **kw: object) -> None:
        self.out.put_nowait(pb.WorkerMessage(**kw))  # type: ignore[arg-type]

    async def close(self, timeout: float = 10.0) -> None:
        self.out.put_nowait(None)
        await asyncio.wait_for(self.call.code(), timeout)


# ---------------------------------------------------------------------------------------------
# worker processes


def start_worker(
    log_path: Path, argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a worker process (``argv``, output to ``log_path``) and wait until it printed
    ``cronoq worker: registered``."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env or child_env(),
            cwd=cwd,
        )
    deadline = time.monotonic() + 30
    while "cronoq worker: registered" not in log_path.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"worker not registered (exit {proc.poll()}):\n{log_path.read_text()}")
        time.sleep(0.05)
    return proc


def stop_worker(proc: subprocess.Popen[bytes], log_path: Path) -> None:
    """SIGTERM the worker; it must drain and exit 0."""
    proc.terminate()
    assert proc.wait(30) == 0, log_path.read_text()


def app_worker_argv(
    sp: ServerProc, app_ref: str, app_dir: Path, *, slots: int, pool: str = "default"
) -> list[str]:
    """A real ``cronoq worker APP_REF`` serving ``pool`` of ``sp`` with ``slots`` slots."""
    return [sys.executable, "-m", "cronoq.cli", "worker", app_ref, "--pool", pool, "--slots", str(slots),
            "--app-dir", str(app_dir), "--server", sp.grpc]  # fmt: skip


@contextlib.contextmanager
def serving_app(
    directory: Path, toml: str, *, name: str, app_ref: str, app_dir: Path, slots: int
) -> Iterator[tuple[ServerProc, subprocess.Popen[bytes]]]:
    """A server (``toml``) and one registered worker of ``app_ref``; on exit the worker must
    drain and exit 0, then the server."""
    sp = start_server(directory, toml, name=name)
    log_path = directory / "worker.log"
    worker = start_worker(log_path, app_worker_argv(sp, app_ref, app_dir, slots=slots))
    try:
        yield sp, worker
    finally:
        stop_worker(worker, log_path)
        assert sp.terminate() == 0, sp.log()


@contextlib.asynccontextmanager
async def postgres_store(prefix: str) -> AsyncIterator[str]:
    """The ``[store]`` body of a PostgreSQL store in a schema of its own (``prefix`` + a random
    suffix), dropped on exit; the test is skipped when PostgreSQL is unreachable."""
    asyncpg = pytest.importorskip("asyncpg")
    try:
        conn = await asyncpg.connect(PG_DSN, timeout=3)
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"PostgreSQL unreachable at {PG_DSN}: {e}")
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield f'kind = "postgres"\nurl = "{PG_DSN}"\nschema = "{schema}"\n'
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


def http_call(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None, method: str | None = None
) -> tuple[int, Any]:
    """A blocking urllib request (run it with ``asyncio.to_thread`` from a test): the status and
    the JSON body, of an error answer too.  urllib as a test written with the standard library
    would use it: with ``data=`` and no content type it sends ``application/x-www-form-urlencoded``."""
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
