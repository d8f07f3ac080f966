"""Rolling deploys end to end (docs/how-to/deploys.md): a real ``cronoq serve`` and real
``cronoq worker MODULE:APP`` subprocesses of two releases of one app.  A task of a kind no
connected worker serves waits (holding no slot, saying why in ``cronoq get``) and runs once a
worker of the release that serves it connects; ``cronoq submit --task NAME`` without
``--pool`` goes to the pool whose workers serve NAME, or asks for ``--pool``."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from cronoq.client import Client

from .procs import child_env, start_server, start_worker, stop_worker

HERE = Path(__file__).resolve().parent
CLI = (sys.executable, "-m", "cronoq.cli")
SERVER_TOML = """
[[pools]]
name = "default"
max = 4

[[pools]]
name = "shop"
max = 4
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=child_env(), timeout=60)


def _worker(directory: Path, release: str, grpc: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = directory / f"{release}.log"
    argv = [*CLI, "worker", f"{release}:app", "--pool", "shop", "--slots", "1", "--app-dir", str(HERE)]
    return start_worker(log, [*argv, "--server", grpc]), log


async def test_a_kind_no_worker_serves_waits_then_runs_when_one_connects(tmp_path: Path) -> None:
    sp = start_server(tmp_path, SERVER_TOML, name="deploys")
    old = new = None
    try:
        old = _worker(tmp_path, "deploy_v1", sp.grpc)  # serves shop.refund only, one slot
        r = _cli("submit", "--task", "shop.charge", "--args", "[500]", "--server", sp.grpc)
        assert r.returncode == 2, r.stderr
        assert "no connected worker serves task 'shop.charge': give --pool" in r.stderr
        r = _cli("submit", "--task", "shop.charge", "--args", "[500]", "--pool", "shop", "--json",
                 "--server", sp.grpc)  # fmt: skip
        assert r.returncode == 0, r.stderr
        charge = int(json.loads(r.stdout)["id"])
        # the waiting charge holds no slot: the old worker's only slot runs a refund (routed to
        # the pool its worker serves shop.refund in, with no --pool)
        r = _cli("submit", "--task", "shop.refund", "--args", "[70]", "--wait", "--json", "--server", sp.grpc)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["result"]["output"] == -70
        r = _cli("get", str(charge), "--server", sp.grpc)
        assert r.returncode == 0, r.stderr
        assert "ready" in r.stdout and "no connected worker serves task 'shop.charge'" in r.stdout, r.stdout
        with urllib.request.urlopen(f"http://{sp.http}/v1/tasks/{charge}", timeout=10) as resp:
            assert json.loads(resp.read())["waiting"] == "no connected worker serves task 'shop.charge'"
        async with Client(sp.grpc) as c:
            assert (await c.get(charge)).attempt == 0  # never leased to the old worker
            new = _worker(tmp_path, "deploy_v2", sp.grpc)  # the new release serves it
            result = await c.wait(charge, timeout=30)
            assert (result.status, result.json()) == ("succeeded", {"charged": 500}), result
            kinds = {w.name: w.kinds for w in await c.list_workers()}
            assert sorted(kinds.values()) == [("shop.charge", "shop.refund"), ("shop.refund",)]
    finally:
        for w in (new, old):
            if w is not None:
                stop_worker(*w)
        assert sp.terminate() == 0, sp.log()
