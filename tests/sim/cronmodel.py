"""An independent model of the cron expressions the feature simulator generates
(docs/reference/behaviour.md#cron).

The simulator does not ask the engine (or croniter) when a schedule fires: it generates cron
expressions from explicit field sets and computes their occurrences here, by scanning wall-clock
time in the schedule's zone with the stdlib ``zoneinfo`` database:

* an occurrence is a whole Unix second whose local time (either side of a fall-back: both
  instants of a repeated hour count) has its second, minute and hour in the field sets
  (day, month and weekday are always ``*`` here);
* a spring-forward gap that swallows matching local times may fire once, at some instant from
  the end of the gap up to (excluding) the next natural occurrence: docs/reference/behaviour.md#cron only says
  "DST handled by the tz database", and croniter's choice there is quirky (``30 30 2 * * *`` fires
  at 03:00:30, ``10 * 2 * * *`` in Lord Howe's 30-minute gap not at all).  :meth:`gap_before`
  finds such a gap; the simulator then takes the engine's instant and checks it lies in that
  range (everything else it computes itself).

:func:`random_cron` draws expressions: 6-field second-granularity steps, lists and ranges,
sometimes restricted to the local minutes or hours around the simulation's start (which the
scenario puts just before a DST transition), 5-field every-minute, ``@hourly``, and an
expression that never fires (30 February).
"""

from __future__ import annotations

import datetime as dt
import random
from zoneinfo import ZoneInfo

from cronoq.engine.time import NS

_EPOCH = dt.datetime(1970, 1, 1)
_UTC = dt.UTC
ALL_60 = frozenset(range(60))
ALL_24 = frozenset(range(24))
HORIZON_S = 3 * 86400  # the generated expressions always fire within 3 days (or never)


class CronModel:
    """Occurrences of ``S M H * * *`` in ``tz`` (or none at all when ``never``)."""

    __slots__ = ("expr", "hours", "minutes", "never", "seconds", "tz", "zone")

    def __init__(
        self,
        expr: str,
        seconds: frozenset[int],
        minutes: frozenset[int] = ALL_60,
        hours: frozenset[int] = ALL_24,
        tz: str | None = None,
        never: bool = False,
    ) -> None:
        self.expr = expr
        self.seconds = seconds
        self.minutes = minutes
        self.hours = hours
        self.tz = tz
        self.zone: dt.tzinfo = ZoneInfo(tz) if tz else _UTC
        self.never = never

    def _wall_match(self, wall_s: int) -> bool:
        w = _EPOCH + dt.timedelta(seconds=wall_s)
        return w.hour in self.hours and w.minute in self.minutes and w.second in self.seconds

    def next_after(self, after_unix_ns: int) -> int | None:
        """The first natural occurrence (Unix seconds) strictly after ``after_unix_ns``, or None."""
        if self.never:
            return None
        x = after_unix_ns // NS + 1
        limit = x + HORIZON_S
        zone = self.zone
        while x < limit:
            local = dt.datetime.fromtimestamp(x, zone)
            if local.hour in self.hours and local.minute in self.minutes:
                if local.second in self.seconds:
                    return x
                x += 1
            else:
                x = (x // 60 + 1) * 60  # (zone offsets are whole minutes)
        raise AssertionError(f"cron model: no occurrence of {self.expr!r} within {HORIZON_S} s")

    def gap_before(self, after_unix_ns: int, natural: int) -> int | None:
        """A spring-forward transition ``x`` with ``after < x <= natural`` whose gap swallowed
        matching wall times (which then fire once at or after ``x``, before ``natural``)."""
        zone = self.zone
        lo_s = after_unix_ns // NS
        t = lo_s
        prev = dt.datetime.fromtimestamp(t, zone).utcoffset()
        while t < natural:
            t = min(natural, (t // 60 + 1) * 60)
            off = dt.datetime.fromtimestamp(t, zone).utcoffset()
            assert off is not None and prev is not None
            if off > prev and t * NS > after_unix_ns:
                lo = t - 1 + int(prev.total_seconds()) + 1
                hi = t + int(off.total_seconds())
                if any(self._wall_match(w) for w in range(lo, hi)):
                    return t
            prev = off
        return None

    def __repr__(self) -> str:
        return f"CronModel({self.expr!r}, tz={self.tz!r})"


# ------------------------------------------------------------------------------- generation

#: (zone, Unix second of a DST transition in it); the scenario starts shortly before one
TRANSITIONS: list[tuple[str, int]] = [
    ("Europe/Berlin", int(dt.datetime(2025, 3, 30, 1, tzinfo=_UTC).timestamp())),  # spring, 1 h
    ("Europe/Berlin", int(dt.datetime(2025, 10, 26, 1, tzinfo=_UTC).timestamp())),  # fall, 1 h
    ("America/New_York", int(dt.datetime(2025, 3, 9, 7, tzinfo=_UTC).timestamp())),
    ("America/New_York", int(dt.datetime(2025, 11, 2, 6, tzinfo=_UTC).timestamp())),
    ("Australia/Lord_Howe", int(dt.datetime(2025, 4, 5, 15, tzinfo=_UTC).timestamp())),  # fall, 30 min
    ("Australia/Lord_Howe", int(dt.datetime(2025, 10, 4, 15, 30, tzinfo=_UTC).timestamp())),  # spring, 30 min
]
#: zones without a transition nearby
OTHER_ZONES: list[str | None] = [None, "UTC", "Asia/Kolkata"]


def _field(values: frozenset[int], full: int) -> str:
    if len(values) == full:
        return "*"
    return ",".join(str(v) for v in sorted(values))


def _seconds(rng: random.Random) -> tuple[str, frozenset[int]]:
    r = rng.random()
    if r < 0.55:
        k = rng.choice((2, 3, 4, 5, 7, 10, 15, 20))
        return f"*/{k}", frozenset(range(0, 60, k))
    if r < 0.8:
        vals = frozenset(rng.sample(range(60), rng.randint(2, 5)))
        return _field(vals, 60), vals
    a = rng.randrange(0, 30)
    b = rng.randrange(a + 5, 60)
    k = rng.choice((3, 5, 6))
    return f"{a}-{b}/{k}", frozenset(range(a, b + 1, k))


def random_cron(rng: random.Random, tz: str | None, start_unix_s: int) -> CronModel:
    """A cron expression that fires every few seconds (or around ``start_unix_s``'s local
    minute/hour, or rarely), with its model."""
    zone: dt.tzinfo = ZoneInfo(tz) if tz else _UTC
    r = rng.random()
    if r < 0.03:
        return CronModel("0 0 0 30 2 *", frozenset({0}), frozenset({0}), frozenset({0}), tz, never=True)
    if r < 0.08:
        return CronModel("* * * * *", frozenset({0}), ALL_60, ALL_24, tz)  # 5 fields: every minute
    if r < 0.12:
        return CronModel("@hourly", frozenset({0}), frozenset({0}), ALL_24, tz)
    sexpr, secs = _seconds(rng)
    mins, hours = ALL_60, ALL_24
    near = [dt.datetime.fromtimestamp(start_unix_s + d, zone) for d in (0, 45, 90, 150)]
    r = rng.random()
    if r < 0.15:  # the local minutes around the start
        mins = frozenset(x.minute for x in rng.sample(near, rng.randint(1, 3)))
    elif r < 0.35:  # the local hours around the start (across a DST transition: gaps, repeats)
        hours = frozenset(x.hour for x in rng.sample(near, rng.randint(1, 2)))
    elif r < 0.45:
        mins = frozenset(range(0, 60, 2))
    expr = f"{sexpr} {_field(mins, 60) if len(mins) < 60 else '*'} {_field(hours, 24)} * * *"
    if mins == frozenset(range(0, 60, 2)):
        expr = f"{sexpr} */2 {_field(hours, 24)} * * *"
    return CronModel(expr, secs, mins, hours, tz)
