"""LogSummary: the first occurrence logged at once, then one line per interval with counts."""

from __future__ import annotations

import asyncio
import logging

import pytest

from cronoq.server.log_summary import LogSummary


def test_a_burst_is_one_line_then_a_summary(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    log = logging.getLogger("test.summary")
    s = LogSummary(log, "reports dropped", interval=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.summary"):
        for i in range(5000):
            s.note(f"worker {i % 7}", f"bad {i}")
        assert [r.getMessage() for r in caplog.records] == ["reports dropped: bad 0 (worker 0)"]
        now[0] += 10.0
        s.note("worker 1", "bad last")  # the interval ended: the summary is written
        (line,) = [r.getMessage() for r in caplog.records[1:]]
        assert line.startswith("reports dropped: 5000 in the last 10 s (worker ")
        assert "2 more; latest: bad last)" in line
        s.flush()  # nothing counted since: nothing written
        assert len(caplog.records) == 2
        assert s.total == 5001


async def test_a_summary_is_written_when_the_interval_ends() -> None:
    """With nothing arriving after a burst, its count is still written once the interval ends."""
    lines: list[str] = []
    written = asyncio.Event()

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())
            if len(lines) == 2:
                written.set()

    log = logging.getLogger("test.summary2")
    log.addHandler(Catch())
    s = LogSummary(log, "dropped", interval=0.05)
    s.note("a", "x")
    s.note("a", "y")
    assert lines == ["dropped: x (a)"]
    await asyncio.wait_for(written.wait(), 5)
    assert lines[1] == "dropped: 1 in the last 0.05 s (a: 1; latest: y)"
