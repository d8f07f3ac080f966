"""``cronoq pause|resume|replay`` and the bulk ``cancel`` against a real server
(docs/how-to/operations.md#cli); ``cronoq cancel REF`` stays as it was (tests/test_cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.procs import ServerProc, child_env, start_server

ROOT = Path(__file__).resolve().parents[1]

POOLS_TOML = """
[[pools]]
name = "default"

[[pools]]
name = "idle"
"""


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("cli-ops"), POOLS_TOML, grace=2.0)
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


def cli(srv: ServerProc, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = child_env()
    for k in ("CRONOQ_TOKEN", "CRONOQ_TLS"):
        env.pop(k, None)
    env["CRONOQ_SERVER"] = srv.grpc
    return subprocess.run(
        [sys.executable, "-m", "cronoq.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok_json(srv: ServerProc, *args: str) -> dict[str, object]:
    r = cli(srv, *args, "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    out = json.loads(r.stdout)
    assert isinstance(out, dict)
    return out


def test_pause_resume_and_top(srv: ServerProc) -> None:
    r = cli(srv, "pause", "idle")
    assert r.returncode == 0 and "pool idle paused" in r.stdout
    assert "already paused" in cli(srv, "pause", "idle").stdout
    top = cli(srv, "top", "--once")
    assert top.returncode == 0
    line = next(x for x in top.stdout.splitlines() if x.strip().startswith("idle"))
    assert "paused" in line
    assert ok_json(srv, "resume", "idle") == {"changed": True}
    r = cli(srv, "pause", "nope")
    assert r.returncode == 3 and "unknown pool 'nope'" in r.stderr


def test_bulk_cancel_asks_first_then_replay(srv: ServerProc) -> None:
    ids = [str(ok_json(srv, "submit", "{}", "--pool", "idle", "--kind", "cli-bulk")["id"]) for _ in range(3)]
    # no --yes and no "y" on stdin: aborted, nothing cancelled
    r = cli(srv, "cancel", "--pool", "idle", "--status", "ready", stdin="n\n")
    assert r.returncode != 0 and "cancel every task matching pools=idle statuses=ready?" in r.stderr
    assert ok_json(srv, "get", ids[0])["status"] == "ready"
    r = cli(srv, "cancel", "--pool", "idle", "--status", "ready", stdin="y\n")
    assert r.returncode == 0 and "3 tasks matched, 3 cancelled" in r.stdout
    out = ok_json(srv, "replay", "--pool", "idle", "--status", "cancelled", "--since", "10m", "--yes")
    assert out == {"matched": 3, "acted": 3, "unavailable_shards": []}
    assert ok_json(srv, "cancel", "--kind", "cli-bulk", "--yes", "--request-key", "once") == {
        "matched": 3,
        "acted": 3,
        "unavailable_shards": [],
    }
    # one task by id; refused ones are clear errors
    r = cli(srv, "replay", ids[0])
    assert r.returncode == 0 and f"replayed task {ids[0]} as task" in r.stdout
    new = r.stdout.split()[-1]
    r = cli(srv, "replay", new)
    assert r.returncode == 1 and "not finished" in r.stderr
    assert cli(srv, "replay", "999999").returncode == 3
    ok_json(srv, "cancel", new)


def test_bulk_usage_errors(srv: ServerProc) -> None:
    r = cli(srv, "cancel")
    assert r.returncode == 2 and "REF or at least one filter option" in r.stderr
    r = cli(srv, "cancel", "12", "--pool", "idle")
    assert r.returncode == 2 and "not both" in r.stderr
    r = cli(srv, "cancel", "--since", "yesterday-ish", "--yes")
    assert r.returncode == 2 and "is not a time" in r.stderr
    r = cli(srv, "cancel", "--status", "succeeded", "--yes")
    assert r.returncode == 1 and "does not apply to 'succeeded'" in r.stderr
    for cmd in ("cancel", "replay"):  # a misspelt status: a usage error before any prompt
        r = cli(srv, cmd, "--pool", "idle", "--status", "bogus")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        want = "Invalid value for '--status': unknown status 'bogus' (expected one of: blocked, scheduled,"
        assert want in " ".join(r.stderr.split()), r.stderr  # (click wraps the line)
    r = cli(srv, "cancel", "--since", "2026-01-02T00:00:00Z", "--until", "2026-01-01T00:00:00Z", "--yes")
    assert r.returncode == 1 and "malformed time range" in r.stderr
