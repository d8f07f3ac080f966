"""A two-shard cluster of real ``cronoq serve`` processes on loopback (docs/how-to/shards.md).

Shard ``sa`` (number 1, pools ``a1``, ``a2``) and shard ``sb`` (number 200: its ids have the
sign bit of the store's signed id column set; pool ``b1``), each a leader and a standby on its
own PostgreSQL schema (``store.schema = "shards_<run>_{shard}"``).  Every server reads the same
config file; the shard is named by ``--shard`` for leaders and ``$CRONOQ_SHARD`` for standbys.
The endpoints list both servers of a shard, so forwarding follows a failover.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.server.procs import READY_RE, ServerProc, child_env

PG_DSN = os.environ.get("CRONOQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")

TOKENS = {
    "client": "shards-client-token-0123456789",
    "worker": "shards-worker-token-0123456789",
    "admin": "shards-admin-token-0123456789",
}

#: a client token restricted to pool b1 (shard sb's)
B1_TOKEN = "shards-b1-client-token-0123456789"

SHARDS = {"sa": (1, ["a1", "a2"]), "sb": (200, ["b1"])}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def non_loopback_ip() -> str | None:
    """An address of this machine beyond loopback (for the plain-http refusal), if any."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = str(s.getsockname()[0])
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


def config_toml(
    schema: str,
    ports: dict[str, list[int]],
    endpoints: dict[str, list[str]] | None = None,
    shards: dict[str, tuple[int, list[str]]] = SHARDS,
) -> str:
    lines = [
        "[server]",
        'http_addr = "127.0.0.1:0"',
        "shutdown_grace_s = 1",
        "[store]",
        'kind = "postgres"',
        f'url = "{PG_DSN}"',
        f'schema = "{schema}_{{shard}}"',
        "[limits]",
        "request_timeout_s = 5",
    ]
    for role, tok in TOKENS.items():
        lines += ["[[auth.tokens]]", f'token = "{tok}"', f'role = "{role}"']
    lines += ["[[auth.tokens]]", f'token = "{B1_TOKEN}"', 'role = "client"', 'pools = ["b1"]']
    for _, (_, pools) in shards.items():
        for p in pools:
            lines += [
                "[[pools]]",
                f'name = "{p}"',
                "min = 0",
                "max = 1000",  # (room for the fixed-start reservations the tests make)
                "reservable_fraction = 1.0",
                "retry = {max_attempts = 5, initial_backoff_s = 0.1}",
            ]
    if "sb" in shards:  # a keyed resource of shard sb (its busiest keys: asked through either shard)
        lines += [
            "[[resources]]",
            'name = "customer"',
            'kind = "semaphore"',
            "permits = 1",
            "per_key = true",
            'shard = "sb"',
        ]
    for name, (number, pools) in shards.items():
        eps = (
            endpoints[name]
            if endpoints and name in endpoints
            else [f"http://127.0.0.1:{p}" for p in ports[name]]
        )
        lines += [
            "[[shards]]",
            f'name = "{name}"',
            f"number = {number}",
            "pools = [" + ", ".join(f'"{p}"' for p in pools) + "]",
            "endpoint = [" + ", ".join(f'"{e}"' for e in eps) + "]",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class Cluster:
    directory: Path
    schema: str = field(default_factory=lambda: f"shards_{uuid.uuid4().hex[:8]}")
    ports: dict[str, list[int]] = field(default_factory=dict)
    procs: dict[str, ServerProc] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ports = {name: [free_port(), free_port()] for name in SHARDS}
        self.config = self.directory / "cluster.toml"
        self.config.write_text(config_toml(self.schema, self.ports))

    def grpc(self, shard: str) -> str:
        """The address of ``shard``'s current leader."""
        for i in (0, 1):
            p = self.procs.get(f"{shard}{i}")
            if p is not None and p.proc.poll() is None and "cronoq serve: leading" in self.text(p):
                return p.grpc
        raise AssertionError(f"no leader of {shard}")

    @staticmethod
    def text(sp: ServerProc) -> str:
        """What this process (not an earlier one with the same log file) logged."""
        return sp.log()[int(sp.extra.get("offset", "0")) :]

    def http(self, shard: str) -> str:
        addr = self.grpc(shard)
        return next(p.http for p in self.procs.values() if p.grpc == addr)

    def launch(self, shard: str, i: int, config: Path | None = None, name: str | None = None) -> ServerProc:
        """Start server ``i`` of ``shard`` (0: with --shard, 1: with $CRONOQ_SHARD)."""
        name = name or f"{shard}{i}"
        cfg = config or self.config
        log_path = self.directory / f"{name}.log"
        env = child_env()
        cmd = [sys.executable, "-m", "cronoq.cli", "serve", "--config", str(cfg)]
        port = self.ports[shard][i] if config is None else free_port()
        # each server's own grpc_addr: a one-line override file would need a second config, so
        # the address goes in a per-server copy of the shared file
        own = self.directory / f"{name}.toml"
        own.write_text(
            cfg.read_text().replace("[server]\n", f'[server]\ngrpc_addr = "127.0.0.1:{port}"\n', 1)
        )
        cmd[-1] = str(own)
        if i == 0:
            cmd += ["--shard", shard]
        else:
            env["CRONOQ_SHARD"] = shard
        offset = log_path.stat().st_size if log_path.exists() else 0  # (a restart appends)
        with open(log_path, "ab") as logf:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env
            )
        sp = ServerProc(proc, own, self.directory / "unused.db", log_path, extra={"offset": str(offset)})
        self.procs[name] = sp
        return sp

    def wait_ready(self, sp: ServerProc, leading: bool, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text(sp)
            m = READY_RE.search(text)
            if m and not sp.grpc:
                sp.grpc, sp.http = m.group(1), m.group(2)
            if sp.grpc and (not leading or "cronoq serve: leading" in text):
                return
            if sp.proc.poll() is not None:
                raise AssertionError(f"server exited with {sp.proc.returncode}:\n{text}")
            if time.monotonic() > deadline:
                raise AssertionError(f"server not ready within {timeout}s:\n{text}")
            time.sleep(0.05)

    def start(self) -> None:
        leaders = [self.launch(s, 0) for s in SHARDS]
        for sp in leaders:
            self.wait_ready(sp, leading=True)
        standbys = [self.launch(s, 1) for s in SHARDS]
        for sp in standbys:
            self.wait_ready(sp, leading=False)

    def stop(self) -> None:
        for sp in self.procs.values():
            sp.kill()

    async def drop_schemas(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(PG_DSN)
        try:
            for s in SHARDS:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}_{s}" CASCADE')
                await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}_lonely_{s}" CASCADE')
        finally:
            await conn.close()
