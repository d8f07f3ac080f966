"""Recurring schedules: cron expressions → fixed-start occurrences (SPEC §7).

Cron parsing and iteration come from croniter (imported lazily, so ``import cronoq`` stays
light); time zones from the stdlib ``zoneinfo`` database, which handles DST.  Everything
here is pure computation over Unix seconds: the core converts to engine time with its
``time_base``, so the engine stays deterministic.

Accepted syntax: 5 fields (min hour dom mon dow), 6 (seconds first), 7 (seconds first,
trailing year); ranges, lists, steps, names, ``?``, ``L``, ``W``, ``#``; and the macros
``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``, ``@annually``, ``@midnight``.
"The last <weekday> of the month" in the day-of-week field may be written ``5L`` / ``FRIL``
(the common Quartz spelling, Unix day numbers: 0 or 7 = Sunday) as well as croniter's ``L5``.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronoq.engine.model import TaskOptions, TaskState

OVERLAP_SKIP: Final = 0
OVERLAP_ALLOW: Final = 1
OVERLAP_QUEUE: Final = 2
OVERLAP_QUEUE_ON_SUCCESS: Final = 3
OVERLAP_NAMES: Final = ("skip", "allow", "queue", "queue_on_success")
OVERLAP_ERROR: Final = "overlap must be 'skip', 'allow', 'queue' or 'queue_on_success'"

_MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


_DOW_NAMES: Final = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_LAST_DOW: Final = re.compile(r"([0-7]|[A-Z]{3})L", re.IGNORECASE)


def _last_weekday_items(field: str) -> str:
    """Day-of-week ``<n>L`` / ``<NAME>L`` list items (last such weekday of the month) → ``L<n>``."""
    out = []
    for item in field.split(","):
        m = _LAST_DOW.fullmatch(item)
        if m is not None:
            day = m.group(1)
            n = int(day) if day.isdigit() else _DOW_NAMES.get(day.upper())
            if n is not None:  # (an unknown name is left for croniter to reject)
                item = f"L{n}"
        out.append(item)
    return ",".join(out)


def parse_overlap(value: object) -> int:
    if isinstance(value, str) and value in OVERLAP_NAMES:
        return OVERLAP_NAMES.index(value)
    raise ValueError(OVERLAP_ERROR)


class CronSchedule:
    """A validated cron expression in a time zone; ``next_after`` iterates occurrences."""

    __slots__ = ("_expr", "_tz", "expr", "tz_name")

    def __init__(self, expr: str, tz: str | None = None) -> None:
        if not isinstance(expr, str) or not expr.strip():
            raise ValueError(f"invalid cron expression {expr!r}")
        if tz is not None and not isinstance(tz, str):
            raise ValueError(f"invalid time zone {tz!r}")
        self._tz: _dt.tzinfo
        try:
            self._tz = ZoneInfo(tz) if tz else _dt.UTC
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown time zone '{tz}'") from e
        text = " ".join(expr.split())
        text = _MACROS.get(text.lower(), text)
        fields = text.split(" ")
        if len(fields) not in (5, 6, 7):
            raise ValueError(
                f"invalid cron expression '{expr}': expected 5, 6 or 7 fields, got {len(fields)}"
            )
        dow = 4 if len(fields) == 5 else 5  # seconds come first in the 6- and 7-field forms
        if "l" in fields[dow] or "L" in fields[dow]:
            fields[dow] = _last_weekday_items(fields[dow])
            text = " ".join(fields)
        self.expr = expr
        self.tz_name = tz
        self._expr = text
        from croniter import croniter  # type: ignore[import-untyped]  # lazily: only schedules need it

        try:
            croniter(text, _dt.datetime.now(self._tz), second_at_beginning=True)
        except Exception as e:  # croniter raises several error types for bad syntax
            raise ValueError(f"invalid cron expression '{expr}': {e}") from e

    def next_after(self, unix_s: float) -> float | None:
        """The first occurrence strictly after ``unix_s`` (Unix seconds), or None if none exists."""
        from croniter import croniter

        start = _dt.datetime.fromtimestamp(unix_s, self._tz)
        try:
            # (the year field reaches 2099: look that far; an impossible date still fails fast)
            it = croniter(self._expr, start, second_at_beginning=True, max_years_between_matches=130)
            nxt = it.get_next(_dt.datetime)
        except Exception:  # no further match (e.g. 30 February, or a year range that ended)
            return None
        ts: float = nxt.timestamp()
        if ts <= unix_s:  # pragma: no cover - croniter contract says strictly after
            return self.next_after(unix_s + 1)
        return ts


class RecurringSpec:
    """A schedule as added: cron, overlap policy and the occurrence template."""

    __slots__ = ("blob", "cron", "deadline_rel", "key", "name", "opts", "overlap", "payload")

    def __init__(
        self,
        name: str,
        cron: CronSchedule,
        overlap: int,
        opts: TaskOptions,
        payload: object,
        key: str | None = None,
        deadline_rel: int | None = None,
        blob: bytes | None = None,
    ) -> None:
        self.blob = blob  # the payload as encoded by the shell's codec (durable stores only)
        self.name = name
        self.cron = cron
        self.overlap = overlap
        self.opts = opts
        self.payload = payload
        self.key = key
        self.deadline_rel = deadline_rel


class Schedule:
    """Engine state of one schedule: the occurrence materialized ahead and the one before."""

    __slots__ = ("ahead", "gen", "last_id", "next_start", "prev", "spec")

    def __init__(self, spec: RecurringSpec) -> None:
        self.spec = spec
        self.gen = 0
        self.ahead: TaskState | None = None
        self.prev: TaskState | None = None
        self.next_start: int | None = None  # engine ns of the occurrence ahead
        self.last_id = 0


class RecurringInfo:
    """A schedule as listed: ``next_unix_ns`` is the start of the occurrence materialized ahead."""

    __slots__ = ("cron", "key", "kind", "last_task_id", "name", "next_unix_ns", "overlap", "pool", "tz")

    def __init__(
        self,
        name: str,
        cron: str,
        tz: str | None,
        overlap: str,
        next_unix_ns: int | None,
        last_task_id: int,
        pool: str,
        key: str | None,
        kind: str = "default",
    ) -> None:
        self.kind = kind
        self.name = name
        self.cron = cron
        self.tz = tz
        self.overlap = overlap
        self.next_unix_ns = next_unix_ns
        self.last_task_id = last_task_id
        self.pool = pool
        self.key = key

    @property
    def next_run(self) -> float | None:
        """Unix seconds of the next occurrence, or None."""
        return None if self.next_unix_ns is None else self.next_unix_ns / 1e9

    def __repr__(self) -> str:
        return (
            f"RecurringInfo(name={self.name!r}, cron={self.cron!r}, tz={self.tz!r}, overlap={self.overlap!r},"
            f" next_unix_ns={self.next_unix_ns}, last_task_id={self.last_task_id})"
        )

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RecurringInfo) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__
        )

    __hash__ = None  # type: ignore[assignment]


def occurrence_key(template: str, start_unix_ns: int) -> str:
    """``"<key>@<UTC start, ISO-8601 seconds>Z"``."""
    when = _dt.datetime.fromtimestamp(start_unix_ns // 1_000_000_000, _dt.UTC)
    return f"{template}@{when.strftime('%Y-%m-%dT%H:%M:%S')}Z"
