"""Keeps bench/pg_commit.py from rotting: every part comes out, with tiny sizes, on the test
database (no timing assertions: docs/benchmarks.md#targets)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # appended: bench/server.py must not shadow tests/server

import pg_commit  # noqa: E402


async def _schemas() -> list[str]:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(pg_commit.DSN)
    try:
        rows = await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'cronoq_pgcommit_%'")
        return [r[0] for r in rows]
    finally:
        await conn.close()


def test_every_part_comes_out(capsys: pytest.CaptureFixture[str]) -> None:
    before = asyncio.run(_schemas())
    pg_commit.main(["--rounds", "3", "--sizes", "1,4", "--parts", "idle,store,copy"])
    out = capsys.readouterr().out
    assert "wal_sync_method = " in out and "synchronous_commit = " in out
    idle = [ln for ln in out.splitlines() if ln.strip().startswith(("SELECT 1", "INSERT"))]
    assert len(idle) == 3 and all("(3 runs)" in ln for ln in idle)
    store = [ln for ln in out.splitlines() if "CPU us/task: client" in ln]
    assert len(store) == 2 * 2 * 3  # sizes x synchronous_commit on/off x the three commits
    copy = [ln for ln in out.splitlines() if "client CPU" in ln and "fold included" in ln]
    assert [ln.split()[1] for ln in copy] == ["statement", "copy"] * 2
    assert asyncio.run(_schemas()) == before  # every schema it made was dropped
