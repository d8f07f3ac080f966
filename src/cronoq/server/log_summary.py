"""Rate-limited, aggregated warnings: one summary line per interval, with counts.

Theory of operation
-------------------
A warning logged once per bad item lets one client message cost the server one log line per
item: a worker batch of 20,000 invalid progress reports wrote 20,000 lines and froze the
leader's loop for seconds (issue #35).  A :class:`LogSummary` counts instead.  The first
occurrence after a quiet interval is logged at once (an operator sees a problem as it starts);
the ones that follow within :data:`INTERVAL_S` are only counted, per source (a worker) and in
total, and one summary line is written when the interval ends (a ``call_later`` on the
running loop; without a loop, at the next occurrence after the interval): ``N dropped in the
last 10 s (worker 3 'w1': N1, ...; latest: <reason>)``.  The sources named in a line are the
:data:`TOP_SOURCES` with the most occurrences, so a line stays short whatever the load, and
the counters it keeps are bounded by the sources seen in one interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Final

__all__ = ["INTERVAL_S", "TOP_SOURCES", "LogSummary"]

#: the most one summary writes: one line per this many seconds (and one at a burst's start)
INTERVAL_S: Final = 10.0
#: the sources named in a summary line (the ones with the most occurrences)
TOP_SOURCES: Final = 5


class LogSummary:
    """Counts occurrences of one kind of warning (``what``: e.g. "progress reports dropped")
    and logs them at most once per ``interval`` s (see the module docstring)."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        interval: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.interval = interval
        self.clock = clock
        self.counts: Counter[str] = Counter()
        self.latest = ""
        self.quiet_until = 0.0  # before it, occurrences are counted, not logged
        self.flush_handle: asyncio.TimerHandle | None = None
        #: occurrences since start (tests, diagnostics)
        self.total = 0

    def note(self, source: str, reason: str) -> None:
        """One occurrence from ``source`` (e.g. ``worker 3 'w1'``) for ``reason``."""
        self.total += 1
        now = self.clock()
        if now >= self.quiet_until and not self.counts:
            self.logger.warning("%s: %s (%s)", self.what, reason, source)
            self.quiet_until = now + self.interval
            return
        self.counts[source] += 1
        self.latest = reason
        if now >= self.quiet_until:
            self.flush()
        elif self.flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self.flush_handle = loop.call_later(self.quiet_until - now, self.flush)

    def flush(self) -> None:
        """Write the summary of what was counted (nothing when nothing was)."""
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None
        if not self.counts:
            return
        n = sum(self.counts.values())
        top = ", ".join(f"{s}: {c}" for s, c in self.counts.most_common(TOP_SOURCES))
        more = len(self.counts) - TOP_SOURCES
        if more > 0:
            top += f", {more} more"
        self.logger.warning(
            "%s: %d in the last %g s (%s; latest: %s)", self.what, n, self.interval, top, self.latest
        )
        self.counts.clear()
        self.quiet_until = self.clock() + self.interval
