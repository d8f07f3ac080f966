"""A SIGKILL of ``cronoq serve`` during per-task submits from 8 client processes loses no
acknowledged task (docs/reference/behaviour.md#mutations: group commit, the acknowledgement after
the commit).

Eight real client processes submit one task at a time and append each acknowledged id to their
own file (a line once ``submit`` returned).  Once at least ``ACKED`` ids are acknowledged in
all, the server is SIGKILLed; restarted on the same SQLite file, it must know every one of them:
with the default ``store.sqlite_sync = "full"`` and with ``"normal"``, which gives up only the
transactions a host crash or power loss could lose (docs/concepts/durability.md#sqlite-sync),
never one a killed process had acknowledged.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cronoq.client import Client, ClientError

from .procs import child_env, start_server

POOL_TOML = """
[[pools]]
name = "p"
min = 0
max = 4
autoscale = false
"""

CLIENTS = 8
ACKED = 300  # acknowledged ids (in all) before the kill

SUBMITTER = """
import asyncio, sys
from cronoq.client import Client

async def main(addr, out):
    async with Client(addr) as c:
        with open(out, "a", buffering=1) as f:
            while True:
                sub = await c.submit(b"x", pool="p")
                f.write(f"{sub.id}\\n")  # acknowledged

try:
    asyncio.run(main(sys.argv[1], sys.argv[2]))
except BaseException:
    sys.exit(0)  # the server went away: expected
"""


def _acked(files: list[Path]) -> list[int]:
    ids = []
    for f in files:
        text = f.read_text() if f.exists() else ""
        ids += [int(x) for x in text.split("\n")[:-1]]  # a line without its newline is not one
    return ids


@pytest.mark.parametrize("sync", ["full", "normal"])
async def test_sigkill_during_per_task_submits_loses_no_acknowledged_task(tmp_path: Path, sync: str) -> None:
    store = f'kind = "sqlite"\npath = "{tmp_path / "crash.db"}"\nsqlite_sync = "{sync}"\n'
    sp = start_server(tmp_path, POOL_TOML, name="crash", store=store)
    files = [tmp_path / f"acked-{i}.txt" for i in range(CLIENTS)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SUBMITTER, sp.grpc, str(f)],
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for f in files
    ]
    try:
        deadline = time.monotonic() + 60
        while len(_acked(files)) < ACKED:
            assert time.monotonic() < deadline, f"only {len(_acked(files))} acknowledged:\n{sp.log()}"
            assert all(p.poll() is None for p in procs), "a submitter ended early"
            time.sleep(0.02)  # polling the files with a deadline (not synchronisation)
        sp.kill()  # SIGKILL mid-stream: submits are in flight
        for p in procs:
            p.wait(30)
    finally:
        sp.kill()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    acked = _acked(files)
    assert len(acked) >= ACKED and len(set(acked)) == len(acked)
    sp2 = start_server(tmp_path, POOL_TOML, name="crash", store=store)
    try:
        missing = []
        async with Client(sp2.grpc) as c:
            for tid in acked:
                try:
                    assert (await c.get(tid)).id == tid
                except ClientError as e:
                    missing.append((tid, e.code))
        assert not missing, f"{len(missing)} acknowledged tasks lost, e.g. {missing[:5]}"
    finally:
        assert sp2.terminate() == 0, sp2.log()
