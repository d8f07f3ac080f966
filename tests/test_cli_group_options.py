"""``--server``, ``--token`` and ``--tls`` before the subcommand (``cronoq --token T get 1``;
docs/reference/behaviour.md#cli), as subprocesses against a real ``cronoq serve`` with tokens.

A subcommand's own option wins over the group's, the group's over the environment
(``CRONOQ_SERVER``, ``CRONOQ_TOKEN``, ``CRONOQ_TLS``), which keeps working.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from server.procs import AUTH_TOML, TOKENS, ServerProc, start_server
from test_cli import ROOT, _env

GOOD = TOKENS["client"]
BAD = "not-a-configured-token-0123456789"

POOLS_TOML = """
[[pools]]
name = "default"

[[pools]]
name = "a"
"""


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("cli-group"), POOLS_TOML + AUTH_TOML, grace=2.0)
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m cronoq.cli ARGS`` without any CRONOQ_* variable unless ``env`` adds some."""
    return subprocess.run(
        [sys.executable, "-m", "cronoq.cli", *args],
        cwd=ROOT,
        env={**_env(None), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def task_id(srv: ServerProc) -> str:
    r = run("--server", srv.grpc, "--token", GOOD, "submit", "x", "--pool", "a", "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    return str(json.loads(r.stdout)["id"])


def test_group_options_reach_the_subcommand(srv: ServerProc, task_id: str) -> None:
    r = run("--server", srv.grpc, "--token", GOOD, "get", task_id, "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert str(json.loads(r.stdout)["id"]) == task_id
    # the token really is sent: without one the server refuses
    r = run("--server", srv.grpc, "get", task_id)
    assert r.returncode == 1 and "not authenticated" in r.stderr, (r.stdout, r.stderr)
    # the server address really is used: a bad one fails (usage error), not the default address
    r = run("--server", "", "--token", GOOD, "get", task_id)
    assert r.returncode == 2, (r.stdout, r.stderr)


def test_subcommand_option_wins_over_the_groups(srv: ServerProc, task_id: str) -> None:
    r = run("--server", srv.grpc, "--token", BAD, "get", task_id, "--token", GOOD)
    assert r.returncode == 0, (r.stdout, r.stderr)
    r = run("--server", srv.grpc, "--token", GOOD, "get", task_id, "--token", BAD)
    assert r.returncode == 1 and "not authenticated" in r.stderr, (r.stdout, r.stderr)
    r = run("--server", "127.0.0.1:1", "get", task_id, "--server", srv.grpc, "--token", GOOD)
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_environment_still_works_and_the_group_option_beats_it(srv: ServerProc, task_id: str) -> None:
    env = {"CRONOQ_SERVER": srv.grpc, "CRONOQ_TOKEN": GOOD}
    assert run("get", task_id, env=env).returncode == 0
    r = run("--token", BAD, "get", task_id, env=env)
    assert r.returncode == 1 and "not authenticated" in r.stderr, (r.stdout, r.stderr)
    r = run("--token", GOOD, "get", task_id, env={"CRONOQ_SERVER": srv.grpc, "CRONOQ_TOKEN": BAD})
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_group_tls_reaches_the_subcommand(srv: ServerProc, task_id: str) -> None:
    # the test server speaks plaintext: with TLS the call cannot succeed
    r = run("--tls", "--server", srv.grpc, "--token", GOOD, "get", task_id)
    assert r.returncode == 1, (r.stdout, r.stderr)
    # the failure is the TLS handshake with that very server (not, say, a usage error)
    assert f"error: cannot reach a leading server at {srv.grpc}" in r.stderr, r.stderr
    assert "Tls handshake failed" in r.stderr, r.stderr
    assert run("--server", srv.grpc, "--token", GOOD, "get", task_id).returncode == 0


def test_group_options_in_help() -> None:
    r = run("--help")
    assert r.returncode == 0
    assert "--server" in r.stdout and "--token" in r.stdout and "--tls" in r.stdout


def test_group_json_reaches_the_subcommand(srv: ServerProc, task_id: str) -> None:
    # the README's form: client options, --json among them, before the command
    r = run("--json", "--server", srv.grpc, "--token", GOOD, "get", task_id)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["id"] == task_id
    r = run("--server", srv.grpc, "--token", GOOD, "get", task_id)  # (a table without it)
    assert r.returncode == 0 and not r.stdout.lstrip().startswith("{"), r.stdout
