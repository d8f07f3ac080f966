"""Calls between two real shard processes (docs/how-to/shards.md#a-peer-that-hangs): a frozen
peer (SIGSTOP) makes calls through the other shard fail fast once its breaker is open, within
their own budget, while that shard's own work goes on; the breaker's probe finds the peer again
once it resumes.  And a forwarded call meant for another shard is refused before it runs.

Two shards, one server each, SQLite stores (``{shard}`` in the path), no auth (loopback)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc
from server.procs import READY_RE, ServerProc, child_env

PEER_TIMEOUT = 1.5
MAX_PEER_CALLS = 3
FAILURES = 3
RESET = 2.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(directory: Path, ports: dict[str, int], shard: str) -> str:
    return f"""
[server]
grpc_addr = "127.0.0.1:{ports[shard]}"
http_addr = "127.0.0.1:0"
shutdown_grace_s = 1
[store]
path = "{directory}/peers_{{shard}}.db"
[limits]
peer_timeout_s = {PEER_TIMEOUT}
max_peer_calls = {MAX_PEER_CALLS}
peer_breaker_failures = {FAILURES}
peer_breaker_reset_s = {RESET}
[[pools]]
name = "a1"
[[pools]]
name = "b1"
[[shards]]
name = "sa"
number = 1
pools = ["a1"]
endpoint = "http://127.0.0.1:{ports["sa"]}"
[[shards]]
name = "sb"
number = 2
pools = ["b1"]
endpoint = "http://127.0.0.1:{ports["sb"]}"
"""


def _launch(directory: Path, ports: dict[str, int], shard: str) -> ServerProc:
    cfg = directory / f"{shard}.toml"
    cfg.write_text(_config(directory, ports, shard))
    log_path = directory / f"{shard}.log"
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronoq.cli", "serve", "--config", str(cfg), "--shard", shard],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )
    return ServerProc(proc, cfg, directory / f"peers_{shard}.db", log_path)


def _wait_leading(sp: ServerProc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        text = sp.log()
        m = READY_RE.search(text)
        if m and not sp.grpc:
            sp.grpc, sp.http = m.group(1), m.group(2)
        if sp.grpc and "cronoq serve: leading" in text:
            return
        assert sp.proc.poll() is None, f"server exited with {sp.proc.returncode}:\n{text}"
        assert time.monotonic() < deadline, f"server not leading within {timeout}s:\n{text}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProc]]:
    d = tmp_path_factory.mktemp("peers")
    ports = {"sa": _free_port(), "sb": _free_port()}
    procs = {s: _launch(d, ports, s) for s in ports}
    try:
        for sp in procs.values():
            _wait_leading(sp)
        yield procs
    finally:
        for sp in procs.values():
            sp.proc.send_signal(signal.SIGCONT)
            sp.kill()


def _http(addr: str, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
    """``(status, decoded body, seconds it took)``."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{addr}{path}", data=data, method=method)
    req.add_header("content-type", "application/json")
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    return status, json.loads(raw or b"null"), time.monotonic() - t0


def test_a_frozen_peer_fails_fast_behind_its_breaker(shards: dict[str, ServerProc]) -> None:
    a, b = shards["sa"].http, shards["sb"]
    status, sub, _ = _http(a, "POST", "/v1/tasks", {"pool": "b1", "start_in_s": 3600})
    assert status == 200, sub  # forwarded to sb
    path = f"/v1/tasks/{sub['id']}"
    assert _http(a, "GET", path)[0] == 200
    b.proc.send_signal(signal.SIGSTOP)
    try:
        # more concurrent calls than the peer's budget: the first ones wait for their deadline,
        # the rest fail at once (they do not queue behind a peer that does not answer)
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda _: _http(a, "GET", path), range(8)))
        assert all(s == 503 and body["error"] == "shard 'sb' is unreachable" for s, body, _ in got), got
        slow = sorted(t for _, _, t in got if t >= PEER_TIMEOUT * 0.8)
        assert len(slow) == MAX_PEER_CALLS, got
        assert all(t < PEER_TIMEOUT * 3 for t in slow), got
        # those calls opened the breaker: calls to sb now fail at once, every time
        for _ in range(10):
            status, body, took = _http(a, "GET", path)
            assert (status, body["code"]) == (503, "unavailable") and took < PEER_TIMEOUT / 2, (body, took)
        # and the shard's own work goes on
        status, own, took = _http(a, "POST", "/v1/tasks", {"pool": "a1", "key": "own-work"})
        assert status == 200 and took < PEER_TIMEOUT / 2, (own, took)
        assert "call to shard 'sb' failed at once: circuit open" in shards["sa"].log()
    finally:
        b.proc.send_signal(signal.SIGCONT)
    # after peer_breaker_reset_s one probe goes through; it finds sb answering and closes it
    t0 = time.monotonic()
    while (answer := _http(a, "GET", path))[0] != 200:
        assert time.monotonic() - t0 < RESET + PEER_TIMEOUT * 4, answer
        time.sleep(0.05)
    assert answer[1]["id"] == sub["id"]


def test_a_peer_that_refuses_at_once_does_not_open_the_breaker(shards: dict[str, ServerProc]) -> None:
    """A peer shard that is failing over refuses at once (its leader's port is closed, its
    standby answers "not leading"): that is no hang, so the breaker stays closed and the first
    call after the peer leads again is forwarded.  The breaker used to count these refusals:
    a 0.4 s failover of sb kept every call through sa to sb failing for peer_breaker_reset_s."""
    a = shards["sa"]
    sub, path, opened = _stop_sb_behind_a_task(shards)
    for _ in range(FAILURES * 2):
        status, body, took = _http(a.http, "GET", path)
        assert (status, body["error"]) == (503, "shard 'sb' is unreachable") and took < PEER_TIMEOUT, body
    assert a.log().count("circuit open") == opened, a.log()[-2000:]
    assert _restart_sb(shards, path)["id"] == sub["id"]
    assert a.log().count("circuit open") == opened, a.log()[-2000:]


def _stop_sb_behind_a_task(shards: dict[str, ServerProc]) -> tuple[Any, str, int]:
    """Submit a task to sb's pool through sa, then stop sb: the task, its path on sa and how
    many "circuit open" lines sa's log held before."""
    a, b = shards["sa"], shards["sb"]
    status, sub, _ = _http(a.http, "POST", "/v1/tasks", {"pool": "b1", "start_in_s": 3600})
    assert status == 200, sub
    opened = a.log().count("circuit open")
    assert b.terminate() == 0
    return sub, f"/v1/tasks/{sub['id']}", opened


def _restart_sb(shards: dict[str, ServerProc], path: str) -> Any:
    """Start sb again (terminated) on its port; once it leads, sa's answer to GET ``path``."""
    a, b = shards["sa"], shards["sb"]
    ports = {"sa": int(a.grpc.rsplit(":", 1)[1]), "sb": int(b.grpc.rsplit(":", 1)[1])}
    shards["sb"] = b = _launch(b.config_path.parent, ports, "sb")
    _wait_leading(b)
    # (sa's channel to the restarted address reconnects within its backoff, at most 2 s)
    t0 = time.monotonic()
    while (answer := _http(a.http, "GET", path))[0] != 200:
        assert time.monotonic() - t0 < 10, answer
        time.sleep(0.05)
    return answer[1]


def _open_events_until_live(addr: str) -> None:
    """Open sa's merged ``/v1/events`` (every shard's pools), read up to ``: live``, close."""
    with urllib.request.urlopen(f"http://{addr}/v1/events", timeout=30) as r:
        while (line := r.readline()) != b": live\n":
            assert line, "the stream ended before it was live"


def test_a_watch_of_a_peer_that_refuses_at_once_does_not_open_the_breaker(
    shards: dict[str, ServerProc],
) -> None:
    """A merged watch re-opens its stream to a failing-over peer every 0.1 to 2 s, and every
    address refusing it at once is no hang either: it must not open sb's breaker, or the
    calls forwarded to sb failed "circuit open" for peer_breaker_reset_s after sb led again.
    The stream's refusals used to count as failures (a watch live during the failover was
    enough to open it)."""
    a = shards["sa"]
    sub, path, opened = _stop_sb_behind_a_task(shards)
    for _ in range(FAILURES * 2):  # (each is live once its sb stream failed at least once)
        _open_events_until_live(a.http)
    status, body, took = _http(a.http, "GET", path)
    assert (status, body["error"]) == (503, "shard 'sb' is unreachable") and took < PEER_TIMEOUT, body
    assert a.log().count("circuit open") == opened, a.log()[-2000:]
    assert _restart_sb(shards, path)["id"] == sub["id"]
    assert a.log().count("circuit open") == opened, a.log()[-2000:]


async def test_a_call_forwarded_for_another_shard_is_refused_before_it_runs(
    shards: dict[str, ServerProc],
) -> None:
    """Issue 35, defect 8: the identity of the answering shard is checked before it acts."""
    async with grpc.aio.insecure_channel(shards["sa"].grpc) as channel:
        tasks = pb_grpc.TasksStub(channel)
        md = (("cronoq-forwarded", "sb"), ("cronoq-to-shard", "sb"))
        req = pb.SubmitRequest(task=pb.TaskSpec(pool="a1", key="misrouted"))
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await tasks.Submit(req, metadata=md)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
        assert ei.value.details() == "this server is shard 'sa', not 'sb': the call was not run"
        # nothing was created; the same call meant for sa runs
        status, _, _ = await asyncio.to_thread(_http, shards["sa"].http, "GET", "/v1/tasks/misrouted")
        assert status == 404
        md = (("cronoq-forwarded", "sb"), ("cronoq-to-shard", "sa"))
        assert (await tasks.Submit(req, metadata=md)).id > 0


def test_a_peers_failed_read_of_its_store_is_passed_on(shards: dict[str, ServerProc]) -> None:
    """A lookup forwarded to sb whose store fails the read answers sb's own 503 "the store
    could not be read: retry" (sb's standbys could not answer it either), not "unreachable"."""
    a, b = shards["sa"].http, shards["sb"]
    status, sub, _ = _http(a, "POST", "/v1/tasks", {"pool": "b1", "start_in_s": 3600})
    assert status == 200, sub
    path = f"/v1/tasks/{int(sub['id']) + 1000}"  # (sb's, and in neither its engine nor its store)
    assert _http(a, "GET", path)[0] == 404
    db = sqlite3.connect(b.db_path, isolation_level=None)
    try:
        db.execute("ALTER TABLE cronoq_tasks RENAME TO cronoq_tasks_away")
        try:
            status, body, _ = _http(a, "GET", path)
        finally:
            db.execute("ALTER TABLE cronoq_tasks_away RENAME TO cronoq_tasks")
    finally:
        db.close()
    assert (status, body) == (503, {"error": "the store could not be read: retry", "code": "unavailable"})
