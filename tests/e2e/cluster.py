"""Real ``cronoq serve`` clusters for the HA tests and ``bench/failover.py``
(docs/reference/behaviour.md#high-availability).

Self-contained (no imports from the test packages) so the benchmark can load it by path.

* :class:`ServerNode`: one ``python -m cronoq.cli serve`` process on *fixed* ports (chosen once,
  so a node killed and started again keeps its address in the workers' and clients' target
  lists), stderr to a log file; ``ready()`` / ``healthz()`` over plain HTTP.
* :class:`WorkerProc`: ``ha_worker.py`` (a :class:`cronoq.client.Worker` with the list of every
  node's gRPC address); its stdout lines (``LEASE``/``DONE`` with wall-clock times and the
  address the lease came from) are collected by a thread.
* :class:`TcpProxy`: a loopback TCP forwarder to PostgreSQL that can be cut (every connection
  dropped, new ones refused) and restored: "PostgreSQL unreachable / lost / restarted" for one
  node or for all, without touching the shared database server.
* :class:`PgSchema`: a private schema (dropped at the end) and row inspection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKER = HERE / "ha_worker.py"
try:  # as part of the tests' `e2e` package, or as a plain module (bench/failover.py)
    from .harness import DSN, pg_run, pg_unreachable
except ImportError:  # pragma: no cover - bench/failover.py puts tests/e2e on sys.path
    from harness import DSN, pg_run, pg_unreachable  # type: ignore[no-redef]

__all__ = ["DSN", "pg_run", "pg_unreachable"]
PG_HOST, PG_PORT = "127.0.0.1", 5432
TERMINAL = {"succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed"}
EPOCH_SHIFT = 48


def epoch_of(task_id: int) -> int:
    return task_id >> EPOCH_SHIFT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dsn_parts() -> tuple[str, int]:
    from urllib.parse import urlsplit

    u = urlsplit(DSN)
    return u.hostname or PG_HOST, u.port or PG_PORT


def with_port(dsn: str, port: int, app: str | None = None) -> str:
    """``dsn`` pointed at 127.0.0.1:``port`` (a proxy), with an ``application_name``."""
    from urllib.parse import urlsplit, urlunsplit

    u = urlsplit(dsn)
    user = f"{u.username}@" if u.username else ""
    netloc = f"{user}127.0.0.1:{port}"
    query = u.query
    if app:
        query = (query + "&" if query else "") + f"application_name={app}"
    return urlunsplit((u.scheme, netloc, u.path, query, u.fragment))


# --------------------------------------------------------------------------- PostgreSQL


class PgSchema:
    def __init__(self, prefix: str = "cronoq_ha") -> None:
        self.schema = f"{prefix}_{uuid.uuid4().hex[:10]}"

    def app(self, tag: str) -> str:
        return f"{self.schema}_{tag}"[:63]

    def rows(self) -> list[tuple[int, str | None, str, int]]:
        async def q(conn: Any) -> Any:
            return await conn.fetch(
                f'SELECT id, key, status, attempt FROM "{self.schema}".cronoq_tasks ORDER BY id'
            )

        return [(r[0], r[1], r[2], r[3]) for r in pg_run(q)]

    def epoch(self) -> int:
        async def q(conn: Any) -> Any:
            return await conn.fetchval(f'SELECT epoch FROM "{self.schema}".cronoq_leader WHERE id = 1')

        return int(pg_run(q) or 0)

    def sessions(self, tag: str) -> int:
        """How many sessions the node ``tag`` has open on the database."""

        async def q(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", self.app(tag)
            )

        return int(pg_run(q))

    def terminate(self, tag: str) -> int:
        async def q(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                self.app(tag),
            )

        return int(pg_run(q))

    def drop(self) -> None:
        async def q(conn: Any) -> Any:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

        pg_run(q)


def sqlite_rows(path: Path) -> list[tuple[int, str | None, str, int]]:
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        return conn.execute("SELECT id, key, status, attempt FROM cronoq_tasks ORDER BY id").fetchall()
    finally:
        conn.close()


def sqlite_epoch(path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        return int(conn.execute("SELECT epoch FROM cronoq_leader WHERE id = 1").fetchone()[0])
    finally:
        conn.close()


# --------------------------------------------------------------------------- TCP proxy


class TcpProxy:
    """Forwards 127.0.0.1:<port> to PostgreSQL; :meth:`cut` drops every connection and refuses
    new ones (accepted and closed at once) until :meth:`restore`."""

    def __init__(self, up: bool = True) -> None:
        self.target = _dsn_parts()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = int(self.sock.getsockname()[1])
        self.up = up
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if not self.up:
                c.close()
                continue
            try:
                s = socket.create_connection(self.target, timeout=5)
                s.settimeout(None)
            except OSError:
                c.close()
                continue
            self.accepted += 1
            with self._lock:
                self._conns.update((c, s))
            threading.Thread(target=self._pipe, args=(c, s), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._conns.discard(a)
                self._conns.discard(b)

    def cut(self) -> None:
        self.up = False
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        self.up = True

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.sock.close()


# --------------------------------------------------------------------------- servers


def http_get(addr: str, path: str, timeout: float = 2.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://{addr}{path}", timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body or b"null")
        except ValueError:
            return e.code, body
    except (OSError, ValueError):
        return 0, None


def http_post(addr: str, path: str, body: Any, timeout: float = 30.0) -> tuple[int, Any]:
    req = urllib.request.Request(
        f"http://{addr}{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None
    except (OSError, ValueError) as e:
        return 0, str(e)


POOL_TOML = '[[pools]]\nname = "default"\nmin = 0\nmax = 10\n'


class ServerNode:
    """One ``cronoq serve`` process on fixed ports; restartable (same ports, same store)."""

    def __init__(
        self,
        directory: Path,
        name: str,
        store_toml: str,
        *,
        grace: float = 1.0,
        body: str = POOL_TOML,
    ) -> None:
        self.dir = directory
        self.name = name
        self.grpc_port = free_port()
        self.http_port = free_port()
        self.grpc = f"127.0.0.1:{self.grpc_port}"
        self.http = f"127.0.0.1:{self.http_port}"
        self.log_path = directory / f"{name}.log"
        self.cfg = directory / f"{name}.toml"
        self.cfg.write_text(
            "[server]\n"
            f'grpc_addr = "{self.grpc}"\n'
            f'http_addr = "{self.http}"\n'
            f"shutdown_grace_s = {grace}\n\n" + store_toml + "\n" + body
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, env: dict[str, str] | None = None) -> ServerNode:
        self.dir.mkdir(parents=True, exist_ok=True)
        e = dict(os.environ)
        e.pop("CRONOQ_CONFIG", None)
        e.update(PYTHONUNBUFFERED="1", COLUMNS="200", **(env or {}))
        with open(self.log_path, "ab") as logf:
            logf.write(f"==== start #{self.starts + 1} at {time.time():.3f}\n".encode())
            logf.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cronoq.cli", "serve", "--config", str(self.cfg)],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=e,
                cwd=self.dir,
            )
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_listening(self, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.healthz()[0] == 200:
                return
            if not self.alive():
                raise AssertionError(f"{self.name} exited:\n{self.log()[-4000:]}")
            time.sleep(0.05)
        raise AssertionError(f"{self.name} not listening within {timeout}s:\n{self.log()[-4000:]}")

    def healthz(self) -> tuple[int, Any]:
        return http_get(self.http, "/healthz", timeout=1.0)

    def ready(self) -> bool:
        return http_get(self.http, "/readyz", timeout=1.0)[0] == 200

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.name} did not exit after SIGTERM:\n{self.log()[-4000:]}") from None

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)


def wait_leader(
    nodes: list[ServerNode], timeout: float = 30.0, exclude: ServerNode | None = None
) -> ServerNode:
    """The one node answering /readyz 200 (asserting there is never more than one)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready = [n for n in nodes if n is not exclude and n.alive() and n.ready()]
        assert len(ready) <= 1, f"two nodes ready at once: {[n.name for n in ready]}"
        if ready:
            return ready[0]
        time.sleep(0.05)
    logs = "\n".join(f"--- {n.name}\n{n.log()[-3000:]}" for n in nodes)
    raise AssertionError(f"no leader within {timeout}s\n{logs}")


def pg_store_toml(schema: str, url: str) -> str:
    return f'[store]\nkind = "postgres"\nurl = "{url}"\nschema = "{schema}"\nkeep_finished_s = 3600\n'


def sqlite_store_toml(path: Path) -> str:
    return f'[store]\nkind = "sqlite"\npath = "{path}"\nkeep_finished_s = 3600\n'


# --------------------------------------------------------------------------- workers


class WorkerProc:
    """``ha_worker.py TARGETS POOL SLOTS EXEC_MS``; collects its stdout lines."""

    def __init__(
        self, targets: list[str], *, pool: str = "default", slots: int = 4, exec_ms: int = 20
    ) -> None:
        self.lines: list[list[str]] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), ",".join(targets), pool, str(slots), str(exec_ms)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n").split(" "))
                self._cond.notify_all()

    def of(self, kind: str) -> list[list[str]]:
        with self._cond:
            return [p for p in self.lines if p and p[0] == kind]

    def wait_for(self, kind: str, timeout: float) -> list[str]:
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for p in self.lines:
                    if p and p[0] == kind:
                        return p
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"worker: no {kind} within {timeout}s: {self.lines[-20:]}")
                self._cond.wait(left)

    def leases(self) -> list[tuple[float, str, int, int]]:
        """(wall time, server address, task id, attempt) of every lease received."""
        return [(float(p[1]), p[2], int(p[3]), int(p[4])) for p in self.of("LEASE")]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def first_dispatch_after(workers: list[WorkerProc], addr: str, t: float) -> float | None:
    """Wall time of the first lease any worker received from ``addr`` after ``t``."""
    times = [w_t for w in workers for (w_t, a, _, _) in w.leases() if a == addr and w_t > t]
    return min(times) if times else None


# --------------------------------------------------------------------------- checks


def check_rows(rows: list[tuple[int, str | None, str, int]], acked: dict[str, int]) -> dict[str, int]:
    """Every acknowledged key: exactly one row, the acknowledged id, terminal ``succeeded``;
    no key with two rows; unique ids."""
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate task ids in the store"
    by_key: dict[str, list[tuple[int, str, int]]] = {}
    for tid, key, status, attempt in rows:
        if key is not None:
            by_key.setdefault(key, []).append((tid, status, attempt))
    dup = {k: v for k, v in by_key.items() if len(v) > 1}
    assert not dup, f"keys with several tasks: {dict(list(dup.items())[:5])}"
    missing = [k for k in acked if k not in by_key]
    assert not missing, f"{len(missing)} acknowledged keys lost, e.g. {missing[:10]}"
    wrong = [(k, i, by_key[k][0][0]) for k, i in acked.items() if by_key[k][0][0] != i]
    assert not wrong, f"acknowledged ids differ from the stored ones: {wrong[:5]}"
    bad = [(k, by_key[k][0]) for k in acked if by_key[k][0][1] != "succeeded"]
    assert not bad, f"{len(bad)} acknowledged tasks did not end succeeded, e.g. {bad[:10]}"
    return {
        "rows": len(rows),
        "acked": len(acked),
        "reran": sum(1 for r in rows if r[3] > 1),
        "max_attempt": max((r[3] for r in rows), default=0),
    }


class Submitter:
    """Submits keyed tasks continuously through a failover ``Client`` (in its own thread and
    loop); a retryable error retries the same key (so at most one task per key), and a key is
    *acknowledged* once a Submit answered with its id."""

    def __init__(self, targets: list[str], prefix: str, *, concurrency: int = 4, pace: float = 0.005) -> None:
        self.targets = targets
        self.prefix = prefix
        self.concurrency = concurrency
        self.pace = pace
        self.acked: dict[str, int] = {}
        self.ack_log: list[tuple[float, str, int]] = []  # (wall time, key, id)
        # acknowledgements that created the task (not duplicates of an earlier submission: a
        # retry after an error may be answered by the new leader with the old leader's id)
        self.fresh_log: list[tuple[float, str, int]] = []
        self.errors: dict[str, int] = {}
        self.unacked: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._n = 0

    def start(self) -> Submitter:
        self._thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "submitter did not stop"

    async def _main(self) -> None:
        from cronoq.client import Client, ClientError

        async with Client(self.targets) as client:

            async def one() -> None:
                while not self._stop.is_set():
                    self._n += 1
                    key = f"{self.prefix}-{self._n}"
                    self.unacked.add(key)
                    while True:
                        try:
                            r = await client.submit(f"p-{key}".encode(), key=key, call_timeout=10.0)
                        except ClientError as e:
                            self.errors[e.code] = self.errors.get(e.code, 0) + 1
                            if e.code in (
                                "unavailable",
                                "resource_exhausted",
                                "deadline_exceeded",
                                "internal",
                            ):
                                if self._stop.is_set():
                                    break  # left unacknowledged (it may exist or not)
                                await asyncio.sleep(0.05)
                                continue
                            raise
                        if key in self.acked:
                            assert self.acked[key] == r.id, (key, self.acked[key], r.id)
                        self.acked[key] = r.id
                        self.ack_log.append((time.time(), key, r.id))
                        if not r.duplicate:
                            self.fresh_log.append(self.ack_log[-1])
                        self.unacked.discard(key)
                        break
                    await asyncio.sleep(self.pace)

            await asyncio.gather(*(one() for _ in range(self.concurrency)))


def wait_all_terminal(
    rows: Callable[[], list[tuple[int, str | None, str, int]]], acked: dict[str, int], timeout: float
) -> list[tuple[int, str | None, str, int]]:
    end = time.monotonic() + timeout
    while True:
        got = rows()
        st = {k: s for _, k, s, _ in got if k is not None}
        left = [k for k in acked if st.get(k) not in TERMINAL]
        if not left:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"{len(left)} acknowledged tasks not terminal after {timeout}s: {left[:10]}")
        time.sleep(0.2)
