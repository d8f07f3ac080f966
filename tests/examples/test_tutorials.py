"""The tutorial programs under ``examples/tutorials/`` run to completion and print what their
pages say they print.

Each program runs as a subprocess with this interpreter (the project's venv), in a temporary
working directory, with a bounded timeout; the assertions check the lines that carry the
lesson of each tutorial (an order, a status, a rate), loose enough for a loaded machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "examples" / "tutorials"
TIMEOUT = 60  # seconds; each program takes a few


def run(name: str, tmp_path: Path) -> str:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r = subprocess.run(
        [sys.executable, str(TUTORIALS / f"{name}.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


def test_every_tutorial_program_is_run_by_a_test() -> None:
    tests = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    untested = [p.name for p in TUTORIALS.glob("*.py") if f'"{p.stem}"' not in tests]
    assert not untested, f"tutorial programs no test under tests/examples runs: {untested}"


def test_image_pipeline(tmp_path: Path) -> None:
    out = run("image_pipeline", tmp_path)
    assert "resubmitting key img-flaky: duplicate=True, same id=True" in out
    assert "urgent: urgent-thumb.jpg -> thumbs/urgent-thumb.jpg (attempt 1)" in out
    assert "flaky: flaky.jpg -> thumbs/flaky.jpg (attempt 3)" in out
    assert "corrupt: failed (not a JPEG file)" in out
    assert "unreachable: dead_lettered (ConnectionError: storage did not answer)" in out
    order = re.search(r"^start order: (.*)$", out, re.M)
    assert order, out
    names = order.group(1).split()
    # the deadline made the Low task urgent; High before Normal; Normal before the Low backlog
    assert names[:5] == ["urgent-thumb", "vip-upload", "upload-0", "upload-1", "upload-2"], names
    assert names[-8:] == [f"backfill-{i}" for i in range(8)], names
    assert "totals: submitted=16 succeeded=14 failed=1 dead_lettered=1 retries=3" in out


def test_dag(tmp_path: Path) -> None:
    out = run("dag", tmp_path)
    status = dict(re.findall(r"^(\S+)\s+(\w+)", out, re.M))
    assert status == {
        "extract": "succeeded",
        "clean-orders": "succeeded",
        "clean-users": "succeeded",
        "load": "failed",
        "publish": "skipped",
        "notify-customers": "skipped",
        "alert-on-call": "succeeded",
        "cleanup-tmp": "succeeded",
    }, out
    assert re.search(r"^publish\s+skipped\s+\(dependency \d+ ended as failed\)$", out, re.M), out
    assert re.search(r"^notify-customers\s+skipped\s+\(dependency \d+ ended as skipped\)$", out, re.M), out


def test_nightly_cron(tmp_path: Path) -> None:
    out = run("nightly_cron", tmp_path)
    assert "nightly: cron='0 3 * * *' tz=Europe/Berlin overlap=skip" in out
    # 03:00 in Berlin is 02:00 UTC in winter, 01:00 UTC in summer
    assert re.search(r"next run \d{4}-\d\d-\d\d 03:00 CES?T = \d{4}-\d\d-\d\d 0[12]:00 UTC", out), out
    assert re.search(r"its occurrence: task \d+, scheduled", out), out
    assert "reservations=1" in out
    skip, queue = out.split("overlap='skip':")[1].split("overlap='queue':")
    assert "skipped (previous occurrence still running)" in skip, out
    assert re.search(r"started \+0\.\d s  succeeded", skip), out
    assert "skipped" not in queue, out
    # queued occurrences wait for the previous one: the second starts about 0.4 s late
    lates = [float(x) for x in re.findall(r"started \+(\d\.\d) s", queue)]
    assert len(lates) >= 2 and lates[1] >= 0.2, out
    assert "occurrences dropped for want of a reservation: 0" in out


def test_fixed_starts(tmp_path: Path) -> None:
    out = run("fixed_starts", tmp_path)
    assert "one-too-many: refused, reservation_conflict (fixed-start reservation conflict)" in out
    assert "at submit: capacity=4 reservations=2 held=0" in out
    assert re.search(r"0\.5 s before the start: busy=2 held=2 ready=\d+", out), out
    for name in ("market-open-snapshot", "report"):
        m = re.search(rf"^{name}: started ([+-]\d\.\d+) s from its start time$", out, re.M)
        assert m and -0.01 <= float(m.group(1)) < 0.25, out  # held slots: on time, within tolerance
    assert "fixed_start_hit_rate=1.00" in out
    assert "skip-me: missed (fixed start missed)" in out
    m = re.search(r"run-late: started \+(\d\.\d+) s late, after long-job", out)
    assert m and float(m.group(1)) > 0.05, out


def test_rate_limits(tmp_path: Path) -> None:
    out = run("rate_limits", tmp_path)
    assert "calls in the first 10 ms (the burst): 5" in out
    achieved = re.search(r"both pools together after the burst: ([\d.]+) calls/s", out)
    assert achieved and 36.0 <= float(achieved.group(1)) <= 40.5, out
    spans = {
        m[0]: (int(m[1]), float(m[2]), float(m[3]))
        for m in re.findall(r"^(enrich|search): (\d+) calls from ([\d.]+) s to ([\d.]+) s$", out, re.M)
    }
    assert spans["enrich"][0] == 50 and spans["search"][0] == 30, out
    # the High priority lookups took the tokens first although enrich was submitted first
    assert spans["search"][2] <= spans["enrich"][1] + 0.05, out
    local = re.search(r"local pool \(no bucket\): 50 calls in ([\d.]+) s", out)
    assert local and float(local.group(1)) < 0.5, out


def test_multi_tenant(tmp_path: Path) -> None:
    out = run("multi_tenant", tmp_path)
    assert "first 50 dispatches, FIFO:       acme=50 (100%)  globex= 0 (  0%)  initech= 0 (  0%)" in out
    assert "first 50 dispatches, fair share: acme=30 ( 60%)  globex=10 ( 20%)  initech=10 ( 20%)" in out
    assert "all done: 130 and 130 jobs" in out


def test_web_app(tmp_path: Path) -> None:
    out = run("web_app", tmp_path)
    lines = out.splitlines()
    for video in ("holiday", "flaky-upload", "keynote"):
        mine = [ln.split(": ", 1)[1] for ln in lines if ln.startswith(f"{video}: ")]
        assert mine[0].startswith("submitted as job "), out
        assert mine[-2] == "succeeded", out
        assert mine[-1] == f"result https://cdn.example.com/{video}.mp4", out
    flaky = [ln for ln in lines if ln.startswith("flaky-upload: ")]
    assert "flaky-upload: retrying (encoder crashed)" in flaky, out
    assert "flaky-upload: running attempt 2" in flaky, out
    assert "bad priority: 400 unknown priority 'urgent'" in out
    assert out.rstrip().endswith("server stopped"), out
