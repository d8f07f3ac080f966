"""The ``cronoq`` command line (docs/reference/behaviour.md#cli) as subprocesses against a real
``cronoq serve``.

One server (``server/procs.py``) and one ``cronoq worker tests.cli_handlers:handle`` process
serve the module; every test runs ``python -m cronoq.cli ...`` and checks its output and exit
code (0 ok, 1 error, 2 usage, 3 not found, 4 timeout, 5 task did not succeed; 6, a worker
that abandoned tasks at its grace, is in test_cli_worker_stop.py).
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.procs import ServerProc, start_server

ROOT = Path(__file__).resolve().parents[1]

POOLS_TOML = """
[[pools]]
name = "default"
max = 8
retry = {max_attempts = 3, initial_backoff_s = 0.1, max_backoff_s = 0.5}

[[pools]]
name = "sync"

[[pools]]
name = "idle"

[[pools]]
name = "bench"
max = 16
"""


def _env(srv: ServerProc | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("CRONOQ_SERVER", "CRONOQ_TOKEN", "CRONOQ_TLS", "CRONOQ_CONFIG"):
        env.pop(k, None)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    if srv is not None:
        env["CRONOQ_SERVER"] = srv.grpc
    return env


def _default_sigint() -> None:
    # a CI that runs the suite as a background job has SIGINT ignored, and children inherit
    # that (Python then leaves it ignored): Ctrl-C in these tests must reach the command
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _popen(args: list[str], srv: ServerProc | None, **kw: object) -> subprocess.Popen[str]:
    kw.setdefault("preexec_fn", _default_sigint)
    return subprocess.Popen(
        [sys.executable, "-m", "cronoq.cli", *args],
        cwd=ROOT,
        env=_env(srv),
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def _wait_line(path: Path, needle: str, proc: subprocess.Popen[str], timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if needle in text:
            return text
        if proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode} before {needle!r}:\n{text}")
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not seen within {timeout}s:\n{path.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("cli"), POOLS_TOML, grace=2.0)
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


@pytest.fixture(scope="module")
def worker(srv: ServerProc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``cronoq worker tests.cli_handlers:handle --pool default --slots 4``; its log file."""
    log = tmp_path_factory.mktemp("cli-worker") / "worker.log"
    with open(log, "w") as f:
        proc = _popen(
            [
                "worker",
                "tests.cli_handlers:handle",
                "--pool",
                "default",
                "--slots",
                "4",
                "--name",
                "cli-test",
            ],
            srv,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_line(log, "cronoq worker: registered", proc)
        yield log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        text = log.read_text()
        assert code == 0, text
        assert "cronoq worker: stopped" in text


def cli(
    srv: ServerProc | None, *args: str, timeout: float = 60.0, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronoq.cli", *args],
        cwd=ROOT,
        env=_env(srv),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok_json(srv: ServerProc | None, *args: str) -> dict[str, object]:
    r = cli(srv, *args, "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    out = json.loads(r.stdout)
    assert isinstance(out, dict)
    return out


# ---------------------------------------------------------------------------------------------


def test_help_lists_commands_and_exit_codes() -> None:
    r = cli(None, "--help")
    assert r.returncode == 0
    for cmd in ("serve", "worker", "submit", "get", "wait", "cancel", "watch", "top", "bench"):
        assert cmd in r.stdout
    assert "Exit codes" in r.stdout and "not found" in r.stdout and "timed out" in r.stdout
    r = cli(None, "submit", "--help")
    assert r.returncode == 0 and "--wait-timeout" in r.stdout and "Exit codes" in r.stdout


def test_submit_wait_json(srv: ServerProc, worker: Path) -> None:
    out = ok_json(srv, "submit", '{"n": 1}', "--wait")
    result = out["result"]
    assert isinstance(result, dict)
    assert result["status"] == "succeeded"
    assert result["output"] == {"echo": {"n": 1}, "attempt": 1}
    assert out["id"] == result["id"] and out["duplicate"] is False


def test_submit_human_wait(srv: ServerProc, worker: Path) -> None:
    r = cli(srv, "submit", "plain text", "--wait", "--wait-timeout", "30s")
    assert r.returncode == 0, r.stderr
    assert "succeeded" in r.stdout and "plain text" in r.stdout


def test_submit_fields_get_and_wait_by_key(srv: ServerProc, worker: Path) -> None:
    key = f"cli-key-{time.time_ns()}"
    out = ok_json(
        srv,
        "submit",
        "[1, 2]",
        "--key",
        key,
        "--priority",
        "high",
        "--kind",
        "thumb",
        "--tag",
        "a=b",
        "--deadline-in",
        "30s",
        "--timeout",
        "10",
        "--max-attempts",
        "2",
    )
    tid = out["id"]
    assert isinstance(tid, str) and tid.isdigit() and out["duplicate"] is False  # ids are strings
    res = ok_json(srv, "wait", key, "--timeout", "30")
    assert res == {
        "id": tid,
        "status": "succeeded",
        "output": {"echo": [1, 2], "attempt": 1},
        "content_type": "application/json",
        "message": "",
        "output_available": True,
    }
    info = ok_json(srv, "get", key)
    assert info["id"] == tid and info["key"] == key and info["priority"] == "high"
    assert info["kind"] == "thumb" and info["status"] == "succeeded" and info["max_attempts"] == 2
    by_id = ok_json(srv, "get", str(tid))
    assert by_id["key"] == key
    human = cli(srv, "get", key)
    assert human.returncode == 0 and "succeeded" in human.stdout and key in human.stdout
    assert "progress" in human.stdout and "attempt 1" in human.stdout  # the attempt timeline
    dup = ok_json(srv, "submit", "[1, 2]", "--key", key)
    assert dup == {"id": tid, "duplicate": True}
    r = cli(srv, "wait", str(tid))
    assert r.returncode == 0 and "succeeded" in r.stdout


def test_after_dependency(srv: ServerProc, worker: Path) -> None:
    key = f"cli-first-{time.time_ns()}"
    first = ok_json(srv, "submit", '"a"', "--key", key)
    second = ok_json(srv, "submit", '"b"', "--after", key, "--after", str(first["id"]), "--wait")
    assert second["result"]["status"] == "succeeded"  # type: ignore[index]


def test_payload_file(srv: ServerProc, worker: Path, tmp_path: Path) -> None:
    f = tmp_path / "job.json"
    f.write_text('{"from": "file"}')
    out = ok_json(srv, "submit", "--payload-file", str(f), "--wait")
    assert out["result"]["output"] == {"echo": {"from": "file"}, "attempt": 1}  # type: ignore[index]
    r = cli(
        srv,
        "submit",
        "--payload-file",
        "-",
        "--content-type",
        "text/plain",
        "--wait",
        "--json",
        stdin="from stdin",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["result"]["output"] == {"echo": "from stdin", "attempt": 1}
    r = cli(srv, "submit", "x", "--payload-file", str(f))
    assert r.returncode == 2 and "not both" in r.stderr


def _http_get(srv: ServerProc, path: str) -> object:
    with urllib.request.urlopen(f"http://{srv.http}{path}", timeout=30) as resp:
        return json.loads(resp.read())


def test_json_output_has_the_http_api_shapes(srv: ServerProc, worker: Path, tmp_path: Path) -> None:
    """docs/reference/behaviour.md#server-details "Ids are strings in all JSON": `--json` prints what the HTTP
    API returns."""
    key = f"cli-shape-{time.time_ns()}"
    err = tmp_path / "watch.err"
    with open(err, "w") as ef:
        watch = _popen(
            ["watch", "--key", key, "--all-transitions", "--limit", "4", "--json"],
            srv,
            stdout=subprocess.PIPE,
            stderr=ef,
        )
    try:
        _wait_line(err, "cronoq watch: live", watch)
        sub = ok_json(srv, "submit", '{"n": 7}', "--key", key, "--tag", "a=b")
        assert set(sub) == {"id", "duplicate"} and isinstance(sub["id"], str)
        tid = sub["id"]
        waited = ok_json(srv, "wait", key, "--timeout", "30")
        assert waited == _http_get(srv, f"/v1/tasks/{tid}/result")
        assert waited["output"] == {"echo": {"n": 7}, "attempt": 1}
        assert waited["content_type"] == "application/json"
        info = ok_json(srv, "get", key)
        assert info == _http_get(srv, f"/v1/tasks/{key}")  # TaskInfo proto names, id a string
        assert info["id"] == tid and info["status"] == "succeeded" and info["priority"] == "normal"
        assert isinstance(info["created_unix_ns"], int) and "created_at" not in info
        both = ok_json(srv, "submit", "[1]", "--key", key, "--wait")
        assert both == {"id": tid, "duplicate": True, "result": waited}
        out, _ = watch.communicate(timeout=30)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["status"] for e in events] == ["blocked", "ready", "running", "succeeded"]
    for e in events:  # the /v1/events data: StatusEvent proto names plus `at`
        assert set(e) == {"id", "pool", "key", "status", "attempt", "at_unix_ns", "message", "at"}, e
        assert e["id"] == tid and e["key"] == key and isinstance(e["at_unix_ns"], int)
        assert e["at"] == pytest.approx(e["at_unix_ns"] / 1e9)
    snap = ok_json(srv, "top", "--once")
    http_snap = _http_get(srv, "/v1/snapshot")
    assert isinstance(http_snap, dict) and set(snap) == set(http_snap)
    assert set(snap["pools"][0]) == set(http_snap["pools"][0])  # type: ignore[index]


def test_client_commands_need_no_server_packages(srv: ServerProc, worker: Path) -> None:
    """The client commands run with the `client` extra only: nothing of the server is imported."""
    blocked = ("starlette", "uvicorn", "prometheus_client", "cronoq.server")
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {blocked!r} or name.startswith('cronoq.server'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from cronoq.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    key = f"cli-noserver-{time.time_ns()}"
    for args in (
        ["submit", "[1]", "--key", key, "--wait", "--json"],
        ["get", key, "--json"],
        ["wait", key, "--json"],
        ["cancel", key, "--json"],
        ["top", "--once", "--json"],
    ):
        r = subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            env=_env(srv),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        json.loads(r.stdout)


def test_failed_task_exit_code_5(srv: ServerProc, worker: Path) -> None:
    r = cli(srv, "submit", '{"fail": true}', "--wait")
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert "failed" in r.stdout and "asked to fail" in r.stdout
    out = json.loads(cli(srv, "submit", '{"fail": true}', "--wait", "--json").stdout)
    assert out["result"]["status"] == "failed"
    r = cli(srv, "wait", str(out["id"]), "--json")
    assert r.returncode == 5 and json.loads(r.stdout)["message"] == "asked to fail"


def test_cancel(srv: ServerProc) -> None:
    out = ok_json(srv, "submit", "later", "--start-in", "1h", "--pool", "idle")
    tid = str(out["id"])
    r = cli(srv, "cancel", tid)
    assert r.returncode == 0 and f"cancelled task {tid}" in r.stdout
    assert ok_json(srv, "get", tid)["status"] == "cancelled"
    assert ok_json(srv, "cancel", tid) == {"cancelled": False}  # as POST /v1/tasks/{ref}/cancel
    r = cli(srv, "cancel", tid)
    assert r.returncode == 0 and "already finished" in r.stdout
    r = cli(srv, "wait", tid)
    assert r.returncode == 5 and "cancelled" in r.stdout


def test_wait_timeouts_exit_4(srv: ServerProc) -> None:
    out = ok_json(srv, "submit", "later", "--start-in", "1h", "--pool", "idle")
    tid = str(out["id"])
    t0 = time.monotonic()
    r = cli(srv, "wait", tid, "--timeout", "0.5")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "timed out" in r.stderr and time.monotonic() - t0 < 30
    r = cli(srv, "submit", "later", "--start-in", "1h", "--pool", "idle", "--wait", "--wait-timeout", "500ms")
    assert r.returncode == 4 and "timed out" in r.stderr
    assert cli(srv, "cancel", tid).returncode == 0


def test_error_exit_codes(srv: ServerProc) -> None:
    r = cli(srv, "get", "987654321")
    assert r.returncode == 3 and "unknown task" in r.stderr
    r = cli(srv, "cancel", "no-such-key")
    assert r.returncode == 3 and "unknown task" in r.stderr
    r = cli(srv, "wait", "no-such-key", "--timeout", "5")
    assert r.returncode == 3
    r = cli(srv, "submit", "x", "--pool", "no-such-pool")
    assert r.returncode == 3 and "unknown pool" in r.stderr
    r = cli(srv, "submit", "x", "--after", "no-such-dependency")
    assert r.returncode == 3 and "unknown dependency" in r.stderr
    # unreachable server: a clear message, exit 1
    r = cli(None, "get", "1", "--server", "127.0.0.1:1")
    assert r.returncode == 1 and "cannot reach" in r.stderr and "127.0.0.1:1" in r.stderr
    r = cli(None, "top", "--once", "--server", "not a host name")
    assert r.returncode == 1 and "cannot reach" in r.stderr
    # usage errors: exit 2
    for args in (
        ["submit", "--priority", "urgent"],
        ["submit", "--deadline-in", "soon"],
        ["submit", "--deadline-in", "-1"],
        ["submit", "--tag", "novalue"],
        ["submit", "x", "--wait-timeout", "5"],
        ["get"],
        ["get", ""],
        ["wait", "1", "--timeout", "x"],
        ["watch", "--limit", "0"],
        ["top", "--interval", "0"],
        ["bench", "--count", "0"],
        ["nosuchcommand"],
    ):
        r = cli(srv, *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Error" in r.stderr or "error" in r.stderr


def test_watch_filters_and_limit(srv: ServerProc, worker: Path, tmp_path: Path) -> None:
    k1, k2 = f"w1-{time.time_ns()}", f"w2-{time.time_ns()}"
    err = tmp_path / "watch.err"
    with open(err, "w") as ef:
        proc = _popen(
            ["watch", "--key", k1, "--key", k2, "--limit", "2", "--json"],
            srv,
            stdout=subprocess.PIPE,
            stderr=ef,
        )
    try:
        _wait_line(err, "cronoq watch: live", proc)
        ok_json(srv, "submit", "other")  # not watched
        ok_json(srv, "submit", "one", "--key", k1)
        ok_json(srv, "submit", "two", "--key", k2)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.read_text()
    events = [json.loads(line) for line in out.splitlines()]
    assert len(events) == 2
    assert {e["key"] for e in events} == {k1, k2}
    assert all(e["status"] == "succeeded" and e["pool"] == "default" for e in events)


def test_watch_all_transitions_human_and_duration(srv: ServerProc, worker: Path, tmp_path: Path) -> None:
    key = f"wt-{time.time_ns()}"
    err = tmp_path / "watch.err"
    out_path = tmp_path / "watch.out"
    with open(err, "w") as ef, open(out_path, "w") as of:
        proc = _popen(
            ["watch", "--all-transitions", "--key", key, "--duration", "20"],
            srv,
            stdout=of,
            stderr=ef,
        )
    try:
        _wait_line(err, "cronoq watch: live", proc)
        ok_json(srv, "submit", "x", "--key", key, "--wait")
        # the watch prints the last event in its own time: wait for it (not a fixed 0.5 s)
        _wait_line(out_path, "succeeded", proc)
        proc.send_signal(signal.SIGINT)  # Ctrl-C ends a watch normally
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.read_text()
    out = out_path.read_text()
    assert "running" in out and "succeeded" in out and key in out
    # --duration ends a quiet watch
    t0 = time.monotonic()
    r = cli(srv, "watch", "--pool", "idle", "--duration", "1")
    assert r.returncode == 0 and r.stdout == "" and time.monotonic() - t0 < 30


def test_top_once(srv: ServerProc, worker: Path) -> None:
    r = cli(srv, "top", "--once")
    assert r.returncode == 0, r.stderr
    assert "pool" in r.stdout and "default" in r.stdout and "bench" in r.stdout and "p99" in r.stdout
    snap = ok_json(srv, "top", "--once")
    pools = {p["name"]: p for p in snap["pools"]}  # type: ignore[attr-defined]
    assert set(pools) == {"default", "sync", "idle", "bench"}
    assert pools["default"]["workers_connected"] >= 1 and pools["default"]["capacity"] >= 4
    assert len(pools["default"]["pending_by_class"]) == 4
    assert "totals" in snap and "workers_connected" in snap


def test_top_live_refreshes(srv: ServerProc, tmp_path: Path) -> None:
    # (output to files: nothing has to keep reading a pipe while the command runs)
    out_path, err = tmp_path / "top.out", tmp_path / "top.err"
    with open(out_path, "w") as of, open(err, "w") as ef:
        proc = _popen(["top", "--json", "--interval", "0.2"], srv, stdout=of, stderr=ef)
    try:
        deadline = time.monotonic() + 30
        while out_path.read_text().count("\n") < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.read_text()
    lines = out_path.read_text().splitlines()
    assert len(lines) >= 3
    assert all("pools" in json.loads(line) for line in lines)


@pytest.mark.parametrize("how", ["sigterm", "sigint-ignored-by-parent"])
def test_live_commands_stop_cleanly_on_sigterm_and_an_inherited_ignored_sigint(
    srv: ServerProc, tmp_path: Path, how: str
) -> None:
    """A supervisor's SIGTERM ends top/watch like Ctrl-C (exit 0); so does Ctrl-C in a
    background job, which starts with SIGINT ignored (Python would keep ignoring it)."""
    sig = signal.SIGTERM if how == "sigterm" else signal.SIGINT

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    child_setup = _default_sigint if how == "sigterm" else ignore_sigint
    for args in (["top", "--json", "--interval", "0.2"], ["watch", "--json"]):
        out_path, err = tmp_path / f"{args[0]}-{how}.out", tmp_path / f"{args[0]}-{how}.err"
        with open(out_path, "w") as of, open(err, "w") as ef:
            proc = _popen(args, srv, stdout=of, stderr=ef, preexec_fn=child_setup)
        try:
            marker, where = ("\n", out_path) if args[0] == "top" else ("cronoq watch: live", err)
            deadline = time.monotonic() + 30
            while marker not in where.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert proc.poll() is None, err.read_text()
            proc.send_signal(sig)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, (args, err.read_text())


def test_worker_sync_handler_and_graceful_stop(srv: ServerProc, tmp_path: Path) -> None:
    log = tmp_path / "sync-worker.log"
    with open(log, "w") as f:
        proc = _popen(
            [
                "worker",
                "tests.cli_handlers:handle_sync",
                "--pool",
                "sync",
                "--slots",
                "2",
                "--label",
                "zone=a",
                "--name",
                "sync-w",
            ],
            srv,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    try:
        text = _wait_line(log, "cronoq worker: registered", proc)
        assert "pool=sync slots=2" in text
        out = ok_json(srv, "submit", "abc", "--pool", "sync", "--wait", "--wait-timeout", "30")
        result = out["result"]
        assert isinstance(result, dict)
        # text output: as the HTTP result object, base64 (only JSON bytes go in "output")
        assert result["output_base64"] == base64.b64encode(b"sync:abc").decode()
        assert result["content_type"] == "text/plain; charset=utf-8" and "output" not in result
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    text = log.read_text()
    assert code == 0, text
    assert "SIGTERM received, draining" in text and "cronoq worker: stopped" in text


def test_worker_errors(srv: ServerProc) -> None:
    for ref in (
        "tests.cli_handlers:nope",
        "no_such_module_xyz:handle",
        "tests.cli_handlers:not_callable",
        "no-colon",
    ):
        r = cli(srv, "worker", ref, "--pool", "default")
        assert r.returncode == 2, (ref, r.stderr)
    r = cli(srv, "worker", "tests.cli_handlers:handle")
    assert r.returncode == 2 and "--pool" in r.stderr
    r = cli(srv, "worker", "tests.cli_handlers:handle", "--pool", "no-such-pool", timeout=60)
    assert r.returncode == 3 and "unknown pool" in r.stderr


def test_bench(srv: ServerProc) -> None:
    report = ok_json(srv, "bench", "--count", "200", "--pool", "bench", "--batch", "50", "--slots", "8")
    assert report["tasks"] == 200 and report["statuses"] == {"succeeded": 200}
    assert isinstance(report["tasks_per_s"], float) and report["tasks_per_s"] > 0
    assert report["worker_slots"] == 8
    r = cli(srv, "bench", "-n", "30", "--pool", "bench")
    assert r.returncode == 0, r.stderr
    assert "tasks/s" in r.stdout and "succeeded 30" in r.stdout


def test_get_says_why_a_task_waits(srv: ServerProc) -> None:
    """``cronoq get`` shows the server's one line on why a task is not running
    (docs/getting-started/dashboard.md#why-a-task-waits): pool ``idle`` has no worker."""
    out = ok_json(srv, "submit", "idle", "--pool", "idle")
    info = ok_json(srv, "get", str(out["id"]))
    assert info["status"] == "ready" and isinstance(info["waiting"], str) and info["waiting"]
    human = cli(srv, "get", str(out["id"]))
    assert human.returncode == 0
    assert re.search(rf"^waiting\s+{re.escape(info['waiting'])}$", human.stdout, re.M), human.stdout
    assert cli(srv, "cancel", str(out["id"])).returncode == 0
