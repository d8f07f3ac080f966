"""Disk full under the SQLite store: failures are 503 and retryable, nothing acknowledged is lost.

The test mounts a small tmpfs of its own for the database (root only: skipped with the reason
otherwise), fills it with submissions until commits fail, and checks that each failure is 503
``unavailable`` naming no path (it was 500 ``internal error: SchedulerError`` with the file's
path), that the server keeps answering, that it accepts work again once space is freed, and
that every acknowledged task is still there after a restart.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.procs import start_server

PAYLOAD = "x" * 60_000
STANDBY = "this server is a standby (not the leader)"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the disk-full probe needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_is_unavailable_and_loses_nothing(tmp_path: Path, small_disk: Path) -> None:
    db = small_disk / "cronoq.db"
    body = '[[pools]]\nname = "default"\n'
    sp = start_server(tmp_path / "srv", body, name="full", db_path=db)
    acked: list[str] = []
    try:
        with httpx.Client(base_url=f"http://{sp.http}", timeout=30) as c:
            failures = []
            for i in range(200):  # bounded: 3 MiB hold far fewer than 200 such tasks
                r = c.post("/v1/tasks", json={"key": f"k{i}", "payload": PAYLOAD})
                if r.status_code == 200:
                    acked.append(f"k{i}")
                else:
                    failures.append(r)
                    if len(failures) >= 3:
                        break
            assert failures, "the disk never filled up"
            for r in failures:
                assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text
                # the commit's own answer says to retry; a leadership renewal that hit the full
                # disk first makes the server step down (also 503, and retryable elsewhere)
                msg = r.json()["error"]
                assert str(small_disk) not in r.text
                assert "retry" in msg or msg == STANDBY, msg
            assert c.get("/healthz").status_code == 200
    finally:
        assert sp.terminate() == 0, sp.log()
    assert acked, "nothing was accepted before the disk filled up"
    # make room (as an operator would) and restart: every acknowledged task is there
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    sp = start_server(tmp_path / "srv", body, name="full", db_path=db)
    try:
        with httpx.Client(base_url=f"http://{sp.http}", timeout=30) as c:
            for key in acked:
                assert c.get(f"/v1/tasks/{key}").status_code == 200, key
            assert c.post("/v1/tasks", json={"key": "after", "payload": PAYLOAD}).status_code == 200
    finally:
        assert sp.terminate() == 0, sp.log()
