"""Helpers for the e2e durability tests: child processes, store inspection, PostgreSQL schemas."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHILD = Path(__file__).resolve().parent / "child_scheduler.py"
DSN = os.environ.get("CRONOQ_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
TERMINAL = {"succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed"}
EPOCH_SHIFT = 48


def epoch_of(task_id: int) -> int:
    return task_id >> EPOCH_SHIFT


class Child:
    """``child_scheduler.py`` in its own process; its stdout lines are collected by a thread."""

    def __init__(self, args: list[str], *, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.lines: list[tuple[float, list[str]]] = []
        self._cond = threading.Condition()
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in cleanup()
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
            env={**os.environ, **(env or {})},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.rstrip("\n").split(" ", 3)
            with self._cond:
                self.lines.append((time.monotonic(), parts))
                self._cond.notify_all()
        with self._cond:
            self.lines.append((time.monotonic(), ["EOF"]))
            self._cond.notify_all()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for(
        self, kind: str, timeout: float, pred: Callable[[list[str]], bool] | None = None
    ) -> list[str]:
        """The first line of ``kind`` (matching ``pred``); AssertionError after ``timeout``."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for _, parts in self.lines:
                    if parts[0] == kind and (pred is None or pred(parts)):
                        return parts
                    if parts[0] == "EOF" and kind != "EOF":
                        raise AssertionError(f"child exited before {kind}: {self.describe()}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {kind} within {timeout} s: {self.describe()}")
                self._cond.wait(left)

    def time_of(self, kind: str) -> float | None:
        with self._cond:
            return next((t for t, p in self.lines if p[0] == kind), None)

    def of(self, kind: str) -> list[list[str]]:
        with self._cond:
            return [p for _, p in self.lines if p[0] == kind]

    def acks(self) -> list[tuple[str, int, bool]]:
        return [(p[1], int(p[2]), p[3] == "1") for p in self.of("ACK")]

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.finish(10)

    def finish(self, timeout: float) -> int:
        """Wait for exit and for stdout to be drained; the exit code.  A child still running
        after ``timeout`` is asked for its stacks (SIGUSR1), which the AssertionError shows."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGUSR1)
            with contextlib.suppress(AssertionError):
                self.wait_for("STACKS", 10)
            raise AssertionError(f"still running after {timeout} s: {self.describe(20000)}") from None
        self._reader.join(timeout)
        return rc

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def describe(self, stderr_chars: int = 3000) -> str:
        with self._cond:
            tail = [" ".join(p) for _, p in self.lines if p[0] != "ACK"][-8:]
            n = sum(1 for _, p in self.lines if p[0] == "ACK")
        return f"rc={self.proc.poll()} acks={n} lines={tail} stderr={self.stderr()[-stderr_chars:]!r}"

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.close_stdin()
        self._stderr.close()


@contextmanager
def children() -> Iterator[list[Child]]:
    """Collects the children a test starts and kills the survivors at the end."""
    got: list[Child] = []
    try:
        yield got
    finally:
        for c in got:
            c.cleanup()


# --------------------------------------------------------------------------- stores


class SqliteTarget:
    """A SQLite file shared by the children; rows are read with plain sqlite3."""

    name = "sqlite"

    def __init__(self, path: Path, *, lease_ttl: float = 0.6, lease_renew: float = 0.1) -> None:
        self.path = path
        self.lease_ttl = lease_ttl
        self.lease_renew = lease_renew

    def args(self, tag: str = "") -> list[str]:
        return [
            "--store", "sqlite", "--path", str(self.path),
            "--lease-ttl", str(self.lease_ttl), "--lease-renew", str(self.lease_renew),
        ]  # fmt: skip

    def rows(self) -> list[tuple[int, str | None, str, int]]:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            return conn.execute("SELECT id, key, status, attempt FROM cronoq_tasks ORDER BY id").fetchall()
        finally:
            conn.close()

    def epoch(self) -> int:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            return int(conn.execute("SELECT epoch FROM cronoq_leader WHERE id = 1").fetchone()[0])
        finally:
            conn.close()

    def lease_expires(self) -> float:
        """The lease row's ``expires_at`` (Unix seconds)."""
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            return float(conn.execute("SELECT expires_at FROM cronoq_leader WHERE id = 1").fetchone()[0])
        finally:
            conn.close()

    def write_locked(self) -> bool:
        """Whether some connection holds the database write lock right now."""
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                return True
            raise
        finally:
            conn.close()


def pg_run(fn: Callable[[Any], Any]) -> Any:
    """``await fn(conn)`` on a fresh asyncpg connection (sync wrapper for the tests)."""
    import asyncpg  # type: ignore[import-untyped]

    async def go() -> Any:
        conn = await asyncpg.connect(DSN, timeout=5)
        try:
            return await fn(conn)
        finally:
            await conn.close()

    return asyncio.run(go())


def pg_unreachable() -> str:
    """'' if PostgreSQL answers at DSN, else why not."""
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        return "asyncpg is not installed"
    try:

        async def ping(conn: Any) -> Any:
            return await conn.fetchval("SELECT 1")

        pg_run(ping)
        return ""
    except Exception as e:
        return f"PostgreSQL unreachable at {DSN}: {type(e).__name__}: {e}"


class PostgresTarget:
    """One PostgreSQL schema (dropped by :meth:`drop`); children are told apart by application_name."""

    name = "postgres"

    def __init__(self) -> None:
        self.schema = f"cronoq_e2e_{uuid.uuid4().hex[:12]}"

    def app(self, tag: str) -> str:
        return f"{self.schema}_{tag}"[:63]

    def args(self, tag: str = "") -> list[str]:
        dsn = DSN + ("&" if "?" in DSN else "?") + f"application_name={self.app(tag or 'x')}"
        return ["--store", "postgres", "--dsn", dsn, "--schema", self.schema]

    def rows(self) -> list[tuple[int, str | None, str, int]]:
        async def q(conn: Any) -> Any:
            sql = f'SELECT id, key, status, attempt FROM "{self.schema}".cronoq_tasks ORDER BY id'
            return await conn.fetch(sql)

        return [(r[0], r[1], r[2], r[3]) for r in pg_run(q)]

    def epoch(self) -> int:
        async def q(conn: Any) -> Any:
            return await conn.fetchval(f'SELECT epoch FROM "{self.schema}".cronoq_leader WHERE id = 1')

        return int(pg_run(q))

    def terminate(self, tag: str) -> int:
        """pg_terminate_backend every session of the child started with ``tag``; how many."""

        async def q(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                self.app(tag),
            )

        return int(pg_run(q))

    def sessions(self, tag: str) -> int:
        async def q(conn: Any) -> Any:
            return await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", self.app(tag)
            )

        return int(pg_run(q))

    def drop(self) -> None:
        async def q(conn: Any) -> Any:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

        pg_run(q)


def check_store(
    rows: list[tuple[int, str | None, str, int]], acked: dict[str, int], epochs: set[int]
) -> dict[str, int]:
    """The durability invariants over a store's task rows; returns counts for the report.

    Every acknowledged key has exactly one row, with the acknowledged id, ``succeeded``; no
    key has two rows; ids are unique and carry an epoch some leader was given; nothing is live.
    """
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate task ids in the store"
    by_key: dict[str, list[tuple[int, str, int]]] = {}
    for tid, key, status, attempt in rows:
        assert key is not None, f"task {tid} has no key (every test task has one)"
        by_key.setdefault(key, []).append((tid, status, attempt))
    dup = {k: v for k, v in by_key.items() if len(v) > 1}
    assert not dup, f"keys with several tasks: {dict(list(dup.items())[:5])}"
    missing = [k for k in acked if k not in by_key]
    assert not missing, f"{len(missing)} acknowledged keys lost, e.g. {missing[:10]}"
    wrong_id = [(k, i, by_key[k][0][0]) for k, i in acked.items() if by_key[k][0][0] != i]
    assert not wrong_id, f"acknowledged ids differ from the stored ones: {wrong_id[:5]}"
    not_ok = [(k, v[0]) for k, v in by_key.items() if v[0][1] != "succeeded"]
    assert not not_ok, f"{len(not_ok)} tasks did not end succeeded, e.g. {not_ok[:10]}"
    bad_epoch = [i for i in ids if epoch_of(i) not in epochs]
    assert not bad_epoch, f"ids from epochs no leader was given: {[hex(i) for i in bad_epoch[:5]]} {epochs}"
    return {
        "rows": len(rows),
        "acked": len(acked),
        "unacked_rows": len(rows) - len(acked),
        "reran": sum(1 for r in rows if r[3] > 1),
        "max_attempt": max((r[3] for r in rows), default=0),
    }
