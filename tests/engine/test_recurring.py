"""docs/reference/behaviour.md#cron: recurring schedules — cron syntax, time zones and DST, materialization,
keys, overlap policies, replace/remove, reservation conflicts.

Engine time 0 is mapped to a known UTC instant with ``CoreConfig(time_base=...)`` so that cron
occurrences land on predictable engine instants.
"""

from __future__ import annotations

import datetime as dt
import itertools
from zoneinfo import ZoneInfo

import pytest

from cronoq.engine.model import SKIP, TaskOptions
from cronoq.engine.parents import outcomes
from cronoq.engine.recurring import (
    OVERLAP_ALLOW,
    OVERLAP_ERROR,
    OVERLAP_QUEUE,
    OVERLAP_QUEUE_ON_SUCCESS,
    OVERLAP_SKIP,
    CronSchedule,
    RecurringSpec,
    occurrence_key,
    parse_overlap,
)
from cronoq.engine.time import NS
from cronoq.errors import SubmitError

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")
MON = (2025, 1, 6)  # a Monday, 00:00:00 UTC: the default engine zero


def unix_ns(*when) -> int:
    return int(dt.datetime(*when, tzinfo=UTC).timestamp()) * NS


def as_utc(unix_s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(unix_s, UTC)


def occurrences(expr, after, n=4, tz=None):
    """The next ``n`` occurrences of ``expr`` strictly after UTC ``after`` (None ends the list)."""
    c = CronSchedule(expr, tz)
    t = dt.datetime(*after, tzinfo=UTC).timestamp()
    out = []
    for _ in range(n):
        t = c.next_after(t)
        out.append(None if t is None else as_utc(t))
        if t is None:
            break
    return out


def u(*when):
    return dt.datetime(*when, tzinfo=UTC)


@pytest.fixture
def eng(make, mkpool):
    """Build a Driver whose engine zero is UTC ``base`` (a tuple), with a 2-slot pool by default."""

    def build(base=MON, pools=None):
        return make(pools or [mkpool(cap=2)], time_base=unix_ns(*base))

    return build


def add(d, name, expr, *, tz=None, overlap=OVERLAP_SKIP, key=None, payload=None, deadline=None, **opts):
    spec = RecurringSpec(name, CronSchedule(expr, tz), overlap, TaskOptions(**opts), payload, key, deadline)
    try:
        return d.core.add_recurring(d.now, spec)
    finally:
        d.collect()


def goto(d, *when):
    """Move the clock to the UTC instant ``when``."""
    d.at_ns(unix_ns(*when) - d.core.config.time_base)
    return d


def utc_of(d, t) -> dt.datetime:
    """UTC start of the fixed-start task ``t`` (an id, or a TaskState that may be pruned)."""
    task = d.task(t) if isinstance(t, int) else t
    return as_utc((task.fixed.start + d.core.config.time_base) / NS)


def info(d, name):
    return next(i for i in d.core.list_recurring() if i.name == name)


def ahead(d, name):
    return d.task(info(d, name).last_task_id)


def step(d, name, run_s=1.0):
    """Go to the start of the occurrence ahead, check it dispatches on time, complete it."""
    t = ahead(d, name)
    assert t.status_name == "scheduled"
    d.at_ns(t.fixed.start)
    assert d.tick() == [t.id]
    d.advance(run_s)
    d.complete(t.id)
    return t


# ---------------------------------------------------------------------------- cron syntax


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("*/15 * * * *", (2025, 1, 3), [u(2025, 1, 3, 0, 15), u(2025, 1, 3, 0, 30), u(2025, 1, 3, 0, 45)]),
        ("5-7 10 * * *", (2025, 1, 3), [u(2025, 1, 3, 10, 5), u(2025, 1, 3, 10, 6), u(2025, 1, 3, 10, 7)]),
        ("0 1,13 * * *", (2025, 1, 3), [u(2025, 1, 3, 1), u(2025, 1, 3, 13), u(2025, 1, 4, 1)]),
        # 6 fields: seconds first
        (
            "*/20 * * * * *",
            (2025, 1, 3),
            [u(2025, 1, 3, 0, 0, 20), u(2025, 1, 3, 0, 0, 40), u(2025, 1, 3, 0, 1)],
        ),
        ("30 0 0 * * ?", (2025, 1, 3), [u(2025, 1, 3, 0, 0, 30), u(2025, 1, 4, 0, 0, 30)]),
        # 7 fields: trailing year
        ("0 0 12 1 1 * 2027", (2025, 1, 3), [u(2027, 1, 1, 12), None]),
        ("0 0 0 1 1 ? 2026-2027", (2025, 1, 3), [u(2026, 1, 1), u(2027, 1, 1), None]),
        # decades ahead, up to croniter's last year (the search used to give up after 50 years)
        ("0 0 12 * * ? 2099", (2026, 11, 29), [u(2099, 1, 1, 12), u(2099, 1, 2, 12)]),
        # names
        (
            "0 9 * JAN MON-FRI",
            (2025, 1, 3),
            [u(2025, 1, 3, 9), u(2025, 1, 6, 9), u(2025, 1, 7, 9), u(2025, 1, 8, 9)],
        ),
        ("0 9 * JAN MON-FRI", (2025, 1, 31, 10), [u(2026, 1, 1, 9)]),
        ("0 0 1 jan,jul *", (2025, 1, 3), [u(2025, 7, 1), u(2026, 1, 1)]),
        # ?, L, W, #
        ("0 0 1 * ?", (2025, 1, 3), [u(2025, 2, 1), u(2025, 3, 1), u(2025, 4, 1)]),
        ("0 0 L * *", (2025, 1, 3), [u(2025, 1, 31), u(2025, 2, 28), u(2025, 3, 31), u(2025, 4, 30)]),
        ("0 0 L 2 *", (2027, 6, 1), [u(2028, 2, 29)]),  # leap year
        # 15W: nearest weekday (2025-02-15 and 03-15 are Saturdays, 06-15 a Sunday)
        ("0 0 15W * *", (2025, 1, 3), [u(2025, 1, 15), u(2025, 2, 14), u(2025, 3, 14), u(2025, 4, 15)]),
        ("0 0 15W 6 *", (2025, 1, 3), [u(2025, 6, 16)]),
        ("0 0 1W * *", (2025, 1, 3), [u(2025, 2, 3), u(2025, 3, 3), u(2025, 4, 1)]),  # not into January
        ("0 0 * * 1#2", (2025, 1, 3), [u(2025, 1, 13), u(2025, 2, 10), u(2025, 3, 10)]),
        ("0 0 * * SUN#1", (2025, 1, 3), [u(2025, 1, 5), u(2025, 2, 2)]),
        ("0 0 * * 7", (2025, 1, 3), [u(2025, 1, 5), u(2025, 1, 12)]),
        # macros
        ("@hourly", (2025, 1, 3), [u(2025, 1, 3, 1), u(2025, 1, 3, 2)]),
        ("@daily", (2025, 1, 3), [u(2025, 1, 4), u(2025, 1, 5)]),
        ("@midnight", (2025, 1, 3), [u(2025, 1, 4), u(2025, 1, 5)]),
        ("@weekly", (2025, 1, 3), [u(2025, 1, 5), u(2025, 1, 12)]),  # Sundays
        ("@monthly", (2025, 1, 3), [u(2025, 2, 1), u(2025, 3, 1)]),
        ("@yearly", (2025, 1, 3), [u(2026, 1, 1), u(2027, 1, 1)]),
        ("@annually", (2025, 1, 3), [u(2026, 1, 1)]),
        ("@HOURLY", (2025, 1, 3), [u(2025, 1, 3, 1)]),
        ("  0   12 * * *  ", (2025, 1, 3), [u(2025, 1, 3, 12)]),
        # no match at all
        ("0 0 30 2 *", (2025, 1, 3), [None]),
    ],
)
def test_cron_occurrences(expr, after, expected):
    assert occurrences(expr, after, n=len(expected)) == expected


LAST_FRIDAYS_2025 = [u(2025, m, d) for m, d in ((1, 31), (2, 28), (3, 28), (4, 25), (5, 30), (6, 27))]


@pytest.mark.parametrize(
    "expr",
    ["0 0 * * 5L", "0 0 * * FRIL", "0 0 * * fril", "0 0 * * L5", "0 0 0 * * 5L", "0 0 0 * * FRIL 2025"],
)
def test_last_weekday_of_the_month_quartz_spelling(expr):
    """docs/reference/behaviour.md#cron ``L``: ``5L`` / ``FRIL`` (day-of-week field) is the last Friday of
    each month."""
    assert occurrences(expr, (2025, 1, 1), n=6) == LAST_FRIDAYS_2025
    assert CronSchedule(expr).expr == expr  # echoed as given


def test_last_weekday_items_in_a_list_and_only_in_the_day_of_week_field():
    # last Monday and last Friday of each month
    assert occurrences("0 0 * * 1L,FRIL", (2025, 1, 1), n=4) == [
        u(2025, 1, 27),
        u(2025, 1, 31),
        u(2025, 2, 24),
        u(2025, 2, 28),
    ]
    assert occurrences("0 0 L * *", (2025, 1, 1), n=2) == [u(2025, 1, 31), u(2025, 2, 28)]  # day of month
    with pytest.raises(ValueError) as e:
        CronSchedule("0 0 * * XYZL")
    assert str(e.value) == "invalid cron '0 0 * * XYZL': invalid day-of-week value 'XYZ'"


LAST_WEEKDAYS_2025 = [
    u(2025, 1, 31),  # Friday
    u(2025, 2, 28),  # Friday
    u(2025, 3, 31),  # Monday
    u(2025, 4, 30),  # Wednesday
    u(2025, 5, 30),  # Friday (the 31st is a Saturday)
    u(2025, 6, 30),  # Monday
    u(2025, 7, 31),
    u(2025, 8, 29),  # Friday (the 31st is a Sunday)
]


@pytest.mark.parametrize("expr", ["0 0 LW * *", "0 0 lw * *", "0 0 0 LW * ?", "0 0 0 LW * * 2025"])
def test_last_weekday_of_the_month_in_the_day_of_month_field(expr):
    """``LW``: the last weekday (Monday to Friday) of the month, which croniter cannot express."""
    assert occurrences(expr, (2025, 1, 1), n=8) == LAST_WEEKDAYS_2025
    assert CronSchedule(expr).expr == expr


def test_last_weekday_of_the_month_combined_with_other_fields():
    assert occurrences("0 0 0 LW * ? 2025", (2025, 12, 1), n=2) == [u(2025, 12, 31), None]
    # in a list: the 15th or the last weekday
    assert occurrences("0 0 15,LW * *", (2025, 5, 1), n=4) == [
        u(2025, 5, 15),
        u(2025, 5, 30),
        u(2025, 6, 15),
        u(2025, 6, 30),
    ]
    # a restricted day of week as well: either matches (standard cron)
    assert occurrences("0 0 LW * MON", (2025, 8, 20), n=4) == [
        u(2025, 8, 25),
        u(2025, 8, 29),
        u(2025, 9, 1),
        u(2025, 9, 8),
    ]
    # several times a day, in a zone: 9:30 and 17:30 local on the last weekday
    assert occurrences("30 9,17 LW * *", (2025, 3, 1), n=3, tz="Europe/Berlin") == [
        u(2025, 3, 31, 7, 30),  # CEST since 30 March
        u(2025, 3, 31, 15, 30),
        u(2025, 4, 30, 7, 30),
    ]


def test_last_weekday_schedule_in_the_engine(eng):
    d = eng((2025, 5, 1))
    add(d, "eom", "0 18 LW * *", key="eom")
    runs = [step(d, "eom") for _ in range(3)]
    assert [utc_of(d, t) for t in runs] == [u(2025, 5, 30, 18), u(2025, 6, 30, 18), u(2025, 7, 31, 18)]


def test_next_after_is_strictly_after():
    c = CronSchedule("0 * * * *")
    t = u(2025, 1, 3, 5).timestamp()
    assert c.next_after(t) == t + 3600
    assert c.next_after(t - 0.5) == t


def test_time_zone_shifts_occurrences():
    assert occurrences("0 9 * * *", (2025, 1, 3), 1, tz="Europe/Berlin") == [u(2025, 1, 3, 8)]
    assert occurrences("0 9 * * *", (2025, 7, 3), 1, tz="Europe/Berlin") == [u(2025, 7, 3, 7)]
    assert occurrences("0 9 * * *", (2025, 1, 3), 1, tz="America/New_York") == [u(2025, 1, 3, 14)]


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("not a cron", "expected 5, 6 or 7 fields, got 3"),
        ("* * * *", "expected 5, 6 or 7 fields, got 4"),
        ("* * * * * * * *", "expected 5, 6 or 7 fields, got 8"),
        ("61 * * * *", "minute value 61 out of range 0-59"),
        ("* 24 * * *", "hour value 24 out of range 0-23"),
        ("* * 32 * *", "day-of-month value 32 out of range 1-31"),
        ("* * * 13 *", "month value 13 out of range 1-12"),
        ("* * * * 8", "day-of-week value 8 out of range 0-7"),
        ("60 * * * * *", "second value 60 out of range 0-59"),
        ("0 0 0 1 1 ? 1969", "year value 1969 out of range 1970-2099"),
        ("* * * FOO *", "invalid month value 'FOO'"),
        ("* * * * Foo", "invalid day-of-week value 'Foo'"),  # as written, not lower-cased
        ("* * * * * 2099x", "invalid day-of-week value '2099x'"),  # 6 fields: seconds first
        ("L * * * *", "invalid minute value 'L'"),
        ("*/0 * * * *", "step 0 in the minute field"),
        ("0 */x * * *", "invalid step 'x' in the hour field"),
        ("1-2-3 * * * *", "invalid range '1-2-3' in the minute field"),
        ("? * * * *", "'?' is not allowed in the minute field"),
        ("0 0 * * MON#6", "day-of-week occurrence '#6' out of range 1-5"),
        ("0 0 32W * *", "day-of-month value 32 out of range 1-31"),
        ("1,,2 * * * *", "empty list item in the minute field"),
        ("@fortnightly", "unknown macro '@fortnightly'"),
        ("@every 5s", "unknown macro '@every'"),
        ("@hourlyx", "unknown macro '@hourlyx'"),
    ],
)
def test_invalid_cron_raises_value_error(expr, reason):
    """The message quotes the expression as written and says what is wrong with it
    (docs/reference/behaviour.md#cron:
    ``SchedulerError("configuration error: invalid cron '<expr>': <reason>")`` at the API)."""
    with pytest.raises(ValueError) as e:
        CronSchedule(expr)
    assert str(e.value) == f"invalid cron '{expr}': {reason}"


@pytest.mark.parametrize(("expr", "name"), [(None, "NoneType"), (5, "int")])
def test_cron_must_be_a_string(expr, name):
    with pytest.raises(ValueError) as e:
        CronSchedule(expr)
    assert str(e.value) == f"invalid cron {expr!r}: expected a string, got {name}"


@pytest.mark.parametrize("tz", ["Mars/Olympus", "Europe/Nowhere", "not a zone", 5])
def test_invalid_time_zone_raises_value_error(tz):
    with pytest.raises(ValueError):
        CronSchedule("* * * * *", tz)


def test_valid_time_zones():
    for tz in (None, "UTC", "Europe/Berlin", "Asia/Kolkata"):
        c = CronSchedule("* * * * *", tz)
        assert c.tz_name == tz


def test_parse_overlap():
    assert [parse_overlap(n) for n in ("skip", "allow", "queue", "queue_on_success")] == [
        OVERLAP_SKIP,
        OVERLAP_ALLOW,
        OVERLAP_QUEUE,
        OVERLAP_QUEUE_ON_SUCCESS,
    ]
    for bad in ("Skip", "none", "", None, 1):
        with pytest.raises(ValueError) as e:
            parse_overlap(bad)
        assert (
            str(e.value) == OVERLAP_ERROR == "overlap must be 'skip', 'allow', 'queue' or 'queue_on_success'"
        )


def test_occurrence_key_format():
    assert occurrence_key("job", unix_ns(2026, 11, 29, 10, 4, 9)) == "job@2026-11-29T10:04:09Z"
    assert occurrence_key("a@b", unix_ns(2025, 1, 6) + 999_999_999) == "a@b@2025-01-06T00:00:00Z"


# ---------------------------------------------------------------------------- DST (Europe/Berlin)


def local(ts: dt.datetime) -> str:
    return ts.astimezone(BERLIN).strftime("%m-%d %H:%M%z")


def test_spring_forward_nonexistent_time():
    """2025-03-30 02:00 CET jumps to 03:00 CEST: 02:30 does not exist that day.

    Observed (croniter): the occurrence is not dropped but runs at the first valid instant,
    03:00 CEST (01:00 UTC); the next day is 02:30 CEST again.  No duplicate, no gap of 48 h.
    """
    got = occurrences("30 2 * * *", (2025, 3, 28), 5, tz="Europe/Berlin")
    assert [local(t) for t in got] == [
        "03-28 02:30+0100",
        "03-29 02:30+0100",
        "03-30 03:00+0200",
        "03-31 02:30+0200",
        "04-01 02:30+0200",
    ]
    assert len(set(got)) == len(got) and got == sorted(got)


def test_fall_back_ambiguous_time():
    """2025-10-26 03:00 CEST falls back to 02:00 CET: 02:00-02:59 happens twice.

    Observed (croniter): a daily '0 2 * * *' fires at both instants of the repeated hour
    (00:00 UTC = 02:00 CEST and 01:00 UTC = 02:00 CET).  They are distinct instants with
    distinct occurrence keys, so nothing is created twice; whether a fixed-time job should run
    once (Vixie cron) is not specified by docs/reference/behaviour.md#cron ("DST handled by the tz database").
    """
    got = occurrences("0 2 * * *", (2025, 10, 24), 5, tz="Europe/Berlin")
    assert got == [
        u(2025, 10, 25, 0),
        u(2025, 10, 26, 0),
        u(2025, 10, 26, 1),
        u(2025, 10, 27, 1),
        u(2025, 10, 28, 1),
    ]
    assert [local(t) for t in got][1:3] == ["10-26 02:00+0200", "10-26 02:00+0100"]
    assert len(set(got)) == len(got) and got == sorted(got)


def test_hourly_across_both_transitions():
    spring = occurrences("0 * * * *", (2025, 3, 29, 23), 24, tz="Europe/Berlin")  # local day 03-30
    assert [t - s for s, t in itertools.pairwise(spring)] == [dt.timedelta(hours=1)] * 23
    assert "03-30 02:00+0100" not in [local(t) for t in spring]
    autumn = occurrences("0 * * * *", (2025, 10, 25, 22), 25, tz="Europe/Berlin")  # local day 10-26
    assert [t - s for s, t in itertools.pairwise(autumn)] == [dt.timedelta(hours=1)] * 24
    assert [local(t) for t in autumn].count("10-26 02:00+0200") == 1
    assert [local(t) for t in autumn].count("10-26 02:00+0100") == 1


@pytest.mark.parametrize(("base", "before", "after"), [((2025, 3, 26), 8, 7), ((2025, 10, 22), 7, 8)])
def test_nine_o_clock_stays_nine_local_across_dst(eng, base, before, after):
    d = eng(base)
    add(d, "nine", "0 9 * * *", tz="Europe/Berlin", key="nine")
    runs = [step(d, "nine") for _ in range(8)]
    starts = [utc_of(d, t) for t in runs]
    assert all(s.astimezone(BERLIN).strftime("%H:%M") == "09:00" for s in starts)
    assert sorted({s.hour for s in starts}) == sorted({before, after})
    assert starts[0].hour == before and starts[-1].hour == after
    assert [t.key for t in runs] == [f"nine@{s.strftime('%Y-%m-%dT%H:%M:%S')}Z" for s in starts]
    assert all(t.status_name == "succeeded" for t in runs)


def test_weekly_local_time_over_months_through_both_transitions(eng):
    d = eng((2025, 3, 1))
    add(d, "weekly", "0 9 * * MON", tz="Europe/Berlin", key="w")
    runs = [step(d, "weekly", run_s=60) for _ in range(40)]  # March .. early December
    starts = [utc_of(d, t) for t in runs]
    assert starts[0] == u(2025, 3, 3, 8) and starts[-1] == u(2025, 12, 1, 8)
    assert all(s.astimezone(BERLIN).strftime("%a %H:%M") == "Mon 09:00" for s in starts)
    assert {s.hour for s in starts} == {7, 8}
    assert len({t.key for t in runs}) == 40
    assert d.snapshot().fixed_start_hit_rate == 1.0


@pytest.mark.parametrize(
    ("expr", "base", "n"),
    [
        ("30 2 * * *", (2025, 3, 27), 6),
        ("0 2 * * *", (2025, 10, 23), 6),
        ("*/30 * * * *", (2025, 10, 25, 22), 8),
    ],
)
def test_engine_across_dst_creates_no_duplicate(eng, expr, base, n):
    d = eng(base)
    add(d, "j", expr, tz="Europe/Berlin", key="j")
    runs = [step(d, "j") for _ in range(n)]
    starts = [t.fixed.start for t in runs]
    assert starts == sorted(starts) and len(set(starts)) == n
    assert len({t.key for t in runs}) == n
    assert len({t.id for t in runs}) == n
    assert d.totals()["succeeded"] == n
    assert d.totals()["recurring_invalid"] == d.totals()["recurring_conflicts"] == 0


# ---------------------------------------------------------------------------- materialization


def test_add_materializes_the_first_occurrence(eng):
    d = eng()
    i = add(d, "five", "*/5 * * * *", payload="p", priority=1)
    assert (i.name, i.cron, i.tz, i.overlap, i.pool, i.key) == (
        "five",
        "*/5 * * * *",
        None,
        "skip",
        "default",
        None,
    )
    assert i.next_unix_ns == unix_ns(2025, 1, 6, 0, 5)
    assert i.next_run == unix_ns(2025, 1, 6, 0, 5) / 1e9
    assert i.last_task_id == 1
    t = d.task(1)
    assert t.status_name == "scheduled"
    assert t.fixed.start == 300 * NS
    assert (t.payload, t.opts.priority, t.key) == ("p", 1, None)
    assert t.fixed.recurring == "five"
    assert d.core.list_recurring() == [i]
    snap = d.snapshot()
    assert (snap.reservations, snap.pending) == (1, 1)
    assert d.core.next_wakeup() == 299 * NS  # the hold


def test_next_occurrence_created_when_the_previous_comes_due(eng):
    d = eng()
    add(d, "five", "*/5 * * * *")
    goto(d, 2025, 1, 6, 0, 4, 59)
    d.tick()
    assert len(d.core.tasks) == 1
    goto(d, 2025, 1, 6, 0, 5)
    assert d.tick() == [1]
    assert len(d.core.tasks) == 2
    assert d.status(2) == "scheduled"
    assert utc_of(d, 2) == u(2025, 1, 6, 0, 10)
    snap = d.snapshot()
    assert (snap.reservations, snap.busy) == (1, 1)
    i = info(d, "five")
    assert (i.last_task_id, i.next_unix_ns) == (2, unix_ns(2025, 1, 6, 0, 10))


def test_always_one_ahead_with_a_reservation(eng):
    d = eng()
    add(d, "m", "* * * * *")
    for n in range(1, 11):
        t = step(d, "m", run_s=30)
        assert t.id == n
        assert d.status(n) == "succeeded"
        nxt = ahead(d, "m")
        assert nxt.id == n + 1 and nxt.status_name == "scheduled"
        assert nxt.fixed.start == t.fixed.start + 60 * NS
        assert d.snapshot().reservations == 1
    assert d.totals()["submitted"] == 11
    assert d.snapshot().fixed_start_hit_rate == 1.0


def test_six_field_schedule_in_the_engine(eng):
    d = eng()
    add(d, "s", "*/20 * * * * *")
    assert [utc_of(d, step(d, "s", run_s=5).id).second for _ in range(4)] == [20, 40, 0, 20]


def test_occurrence_keys_and_dedup(eng):
    d = eng()
    pre = d.submit(key="job@2025-01-06T00:05:00Z")  # someone already created that occurrence
    i = add(d, "job", "*/5 * * * *", key="job")
    assert i.last_task_id == pre  # deduplicated: no new task
    assert d.core.next_seq == 2
    assert d.tick() == [pre]
    d.complete(pre)
    goto(d, 2025, 1, 6, 0, 5)
    d.tick()
    t = ahead(d, "job")
    assert t.id == 2 and t.key == "job@2025-01-06T00:10:00Z"


def test_replacing_with_the_same_key_does_not_create_the_occurrence_twice(eng):
    d = eng()
    add(d, "job", "*/5 * * * *", key="job")
    add(d, "job", "*/5 * * * *", key="job")
    assert len(d.core.tasks) == 1
    assert d.snapshot().reservations == 1
    t = step(d, "job")
    assert t.key == "job@2025-01-06T00:05:00Z"
    assert ahead(d, "job").key == "job@2025-01-06T00:10:00Z"
    assert len(d.core.tasks) == 2


def test_year_limited_schedule_ends(eng):
    d = eng()
    add(d, "y", "0 0 0 6 1 ? 2025")  # only 2025-01-06... 00:00:00 is now, so none is left
    i = info(d, "y")
    assert i.next_unix_ns is None and i.last_task_id == 0
    assert d.totals()["recurring_invalid"] == 1
    add(d, "z", "0 0 12 6,7 1 ? 2025")
    step(d, "z")
    assert ahead(d, "z").id == 2
    step(d, "z")
    assert info(d, "z").next_unix_ns is None
    assert d.totals()["recurring_invalid"] == 2


def test_impossible_date_is_counted_invalid(eng):
    d = eng()
    i = add(d, "feb30", "0 0 30 2 *")
    assert i.next_unix_ns is None
    assert len(d.core.tasks) == 0
    assert d.totals()["recurring_invalid"] == 1
    assert d.core.next_wakeup() is None


def test_unknown_pool_is_rejected(eng):
    d = eng()
    with pytest.raises(SubmitError) as e:
        add(d, "x", "* * * * *", pool="nope")
    assert (e.value.code, e.value.message) == ("unknown_pool", "unknown pool 'nope'")
    assert d.core.list_recurring() == []
    assert len(d.core.tasks) == 0


def test_deadline_relative_to_each_occurrence(eng):
    d = eng()
    add(d, "dl", "*/5 * * * *", deadline=30 * NS)
    assert d.task(1).deadline == 330 * NS


def test_occurrences_carry_the_schedule_name_as_a_tag(eng):
    """Each occurrence is tagged ``cronoq.recurring`` = <schedule name> (seen as ``ctx.tags`` and
    in TaskInfo/Lease tags), after the template's own tags; the template itself is unchanged."""
    d = eng()
    add(d, "plain", "*/5 * * * *")
    add(d, "tagged", "*/5 * * * * *", tags={"a": "1", "b": "z"})
    add(d, "own", "*/7 * * * *", tags={"cronoq.recurring": "mine"})
    assert d.task(info(d, "plain").last_task_id).opts.tags == {"cronoq.recurring": "plain"}
    t = ahead(d, "tagged")
    assert list(t.opts.tags.items()) == [("a", "1"), ("b", "z"), ("cronoq.recurring", "tagged")]
    assert d.core.schedules["tagged"].spec.opts.tags == {"a": "1", "b": "z"}  # the template
    assert ahead(d, "own").opts.tags == {"cronoq.recurring": "mine"}  # set by the template: kept
    step(d, "tagged")
    assert ahead(d, "tagged").opts.tags["cronoq.recurring"] == "tagged"  # every occurrence
    # a replacement's occurrences carry it too
    add(d, "plain", "*/5 * * * *", tags={"x": "y"})
    goto(d, 2025, 1, 6, 0, 5)
    d.tick()
    assert ahead(d, "plain").opts.tags == {"x": "y", "cronoq.recurring": "plain"}


# ---------------------------------------------------------------------------- replace / remove


def test_replace_by_name(eng):
    d = eng()
    add(d, "a", "*/5 * * * *")
    i = add(d, "a", "*/7 * * * *", tz="UTC", overlap=OVERLAP_ALLOW)
    assert d.core.list_recurring() == [i]
    # the replaced schedule's occurrence (00:05) stays the one ahead; nothing new yet
    assert (i.cron, i.tz, i.overlap, i.last_task_id) == ("*/7 * * * *", "UTC", "allow", 1)
    assert i.next_unix_ns == unix_ns(2025, 1, 6, 0, 5)
    assert len(d.core.tasks) == 1
    # it still runs; when it comes due the new schedule's first occurrence after it is created
    goto(d, 2025, 1, 6, 0, 5)
    assert d.tick() == [1]
    assert len(d.core.tasks) == 2
    assert utc_of(d, 2) == u(2025, 1, 6, 0, 7)
    assert d.task(2).fixed.recurring == "a"
    goto(d, 2025, 1, 6, 0, 7)
    assert d.tick() == [2]
    assert utc_of(d, 3) == u(2025, 1, 6, 0, 14)
    assert len(d.core.tasks) == 3


@pytest.mark.parametrize("key", [None, "same", "other"])
def test_replacing_never_fires_twice_for_one_instant(eng, key):
    """The old schedule has materialized 00:05: the old occurrence runs once (with the old
    payload), and the new schedule starts after that instant, whether or not its key differs."""
    d = eng(pools=None)
    add(d, "a", "*/5 * * * *", key=None if key is None else "same", payload="old")
    add(d, "a", "*/5 * * * *", key=key, payload="new")
    assert len(d.core.tasks) == 1
    assert d.snapshot().reservations == 1
    ran = []
    for m in (5, 10, 15):
        ids = at_min(d, m)
        assert len(ids) == 1
        ran.append((utc_of(d, ids[0]).minute, d.task(ids[0]).payload))
        d.advance(1)
        d.complete(ids[0])
    assert ran == [(5, "old"), (10, "new"), (15, "new")]
    assert d.totals()["submitted"] == 4  # 00:05, 00:10, 00:15 and 00:20 ahead


def test_replacing_twice_before_the_instant_still_waits_for_it(eng):
    d = eng()
    add(d, "a", "*/5 * * * *", payload=1)
    add(d, "a", "* * * * *", payload=2)
    i = add(d, "a", "*/2 * * * *", payload=3)
    assert (i.last_task_id, i.next_unix_ns) == (1, unix_ns(2025, 1, 6, 0, 5))
    assert at_min(d, 2) == [] and len(d.core.tasks) == 1
    assert at_min(d, 5) == [1]
    nxt = ahead(d, "a")
    assert (nxt.payload, utc_of(d, nxt)) == (3, u(2025, 1, 6, 0, 6))


def test_replacing_after_the_old_occurrence_was_cancelled_still_waits_for_its_instant(eng):
    d = eng()
    add(d, "a", "*/5 * * * *")
    d.cancel(1)
    i = add(d, "a", "* * * * *")
    assert (i.last_task_id, i.next_unix_ns) == (1, unix_ns(2025, 1, 6, 0, 5))
    assert at_min(d, 1) == []
    assert len(d.core.tasks) == 1
    at_min(d, 5)
    assert utc_of(d, ahead(d, "a")) == u(2025, 1, 6, 0, 6)


def test_replacing_a_schedule_whose_occurrence_was_dropped_materializes_at_once(eng):
    """Nothing was materialized for the instant the old schedule waits on (a conflict): the new
    schedule's first occurrence is created at once, and may take that instant."""
    d = eng()  # limit 1
    blocker = fixed_at(d, 300)
    add(d, "a", "*/5 * * * *")
    assert d.totals()["recurring_conflicts"] == 1 and len(d.core.tasks) == 1
    d.cancel(blocker)
    i = add(d, "a", "*/5 * * * *")
    assert i.last_task_id == 2 and utc_of(d, 2) == u(2025, 1, 6, 0, 5)
    assert i.next_unix_ns == unix_ns(2025, 1, 6, 0, 5)
    assert at_min(d, 5) == [2]


def test_remove_keeps_the_materialized_occurrence(eng):
    d = eng()
    add(d, "a", "*/5 * * * *")
    add(d, "b", "*/10 * * * *")
    assert d.core.remove_recurring(d.now, "a") is True
    assert d.core.remove_recurring(d.now, "a") is False
    assert d.core.remove_recurring(d.now, "never") is False
    assert [i.name for i in d.core.list_recurring()] == ["b"]
    goto(d, 2025, 1, 6, 0, 5)
    assert d.tick() == [1]  # still runs
    d.complete(1)
    assert len(d.core.tasks) == 2  # nothing new for "a"
    goto(d, 2025, 1, 6, 0, 10)
    assert d.tick() == [2]
    assert len(d.core.tasks) == 3  # "b" goes on


def test_remove_then_add_again(eng):
    d = eng()
    add(d, "a", "*/5 * * * *", key="a")
    d.core.remove_recurring(d.now, "a")
    i = add(d, "a", "*/5 * * * *", key="a")
    assert i.last_task_id == 1  # same occurrence key: deduplicated
    step(d, "a")
    assert ahead(d, "a").id == 2


# ---------------------------------------------------------------------------- overlap


def start_first(d, name):
    """Dispatch the first occurrence at its start (it keeps running)."""
    t = ahead(d, name)
    d.at_ns(t.fixed.start)
    assert d.tick() == [t.id]
    return t.id


def at_min(d, m, s=0):
    goto(d, 2025, 1, 6, 0, m, s)
    return d.tick()


def test_overlap_skip(eng):
    d = eng()
    add(d, "m", "* * * * *", overlap=OVERLAP_SKIP)
    d.core.publish = True
    first = start_first(d, "m")  # 00:01, runs until 00:02:30
    second = ahead(d, "m").id
    assert at_min(d, 2) == []
    t = d.task(second)
    assert (t.status_name, t.message) == ("skipped", "previous occurrence still running")
    assert d.statuses(second) == ["skipped"]
    assert d.totals()["skipped"] == 1
    assert d.snapshot().reservations == 1  # the skipped one's reservation is gone; one ahead
    third = ahead(d, "m").id
    at_min(d, 2, 30)
    d.complete(first)
    assert at_min(d, 3) == [third]


def test_overlap_skip_while_one_occurrence_outlives_several(eng):
    d = eng()
    add(d, "m", "* * * * *", overlap=OVERLAP_SKIP)
    first = start_first(d, "m")  # 00:01, runs until 00:04:30
    skipped = []
    for m in (2, 3, 4):
        nxt = ahead(d, "m").id
        assert at_min(d, m) == []
        assert d.task(nxt).message == "previous occurrence still running"
        skipped.append(nxt)
    assert [d.status(t) for t in skipped] == ["skipped"] * 3
    at_min(d, 4, 30)
    d.complete(first)
    nxt = ahead(d, "m").id
    assert at_min(d, 5) == [nxt]


def test_overlap_skip_does_not_skip_when_previous_finished(eng):
    d = eng()
    add(d, "m", "* * * * *")
    first = start_first(d, "m")
    at_min(d, 1, 59)
    d.complete(first)
    assert at_min(d, 2) == [ahead(d, "m").id - 1]


def test_overlap_allow(eng):
    d = eng()
    add(d, "m", "* * * * *", overlap=OVERLAP_ALLOW)
    first = start_first(d, "m")
    second = ahead(d, "m").id
    assert at_min(d, 2) == [second]
    assert d.status(first) == d.status(second) == "running"
    assert d.snapshot().busy == 2


def test_overlap_queue_waits_for_the_previous_to_complete(eng):
    d = eng()
    add(d, "m", "* * * * *", overlap=OVERLAP_QUEUE)
    first = start_first(d, "m")
    second = ahead(d, "m").id
    assert d.status(second) == "blocked"
    assert d.task(first).edges() == [(d.task(second), 2)]
    assert d.snapshot().reservations == 1  # reserved while blocked
    assert at_min(d, 2) == []
    assert d.status(second) == "blocked"
    third = ahead(d, "m").id
    assert d.task(second).edges() == [(d.task(third), 2)]
    at_min(d, 2, 20)
    d.fail(first, "x", permanent=True)  # complete edge: any terminal status releases it
    assert d.tick() == [second]  # past start + tolerance: runs late (run_late)
    assert d.snapshot().fixed_start_hit_rate == 0.0  # the first's hit is out of the 60 s window
    at_min(d, 2, 50)
    d.complete(second)
    assert d.status(third) == "scheduled"
    assert at_min(d, 3) == [third]


def test_overlap_queue_releases_on_time_when_previous_is_quick(eng):
    d = eng()
    add(d, "m", "* * * * *", overlap=OVERLAP_QUEUE)
    first = start_first(d, "m")
    second = ahead(d, "m").id
    at_min(d, 1, 10)
    d.complete(first)
    assert d.status(second) == "scheduled"
    assert at_min(d, 2) == [second]


def test_overlap_queue_on_success_chain(eng):
    d = eng()
    add(d, "m", "* * * * *", overlap=OVERLAP_QUEUE_ON_SUCCESS)
    first = start_first(d, "m")
    second = ahead(d, "m").id
    at_min(d, 1, 30)
    d.complete(first)
    assert d.status(second) == "scheduled"
    assert at_min(d, 2) == [second]
    third = ahead(d, "m").id
    assert d.status(third) == "blocked"
    at_min(d, 2, 30)
    d.fail(second, "bad", permanent=True)
    t = d.task(third)
    assert (t.status_name, t.message) == ("skipped", f"dependency {second} ended as failed")
    # the chain stays broken: every later occurrence is skipped at once
    for m in (3, 4, 5):
        assert at_min(d, m) == []
        nxt = ahead(d, "m")
        assert nxt.status_name == "skipped"
        assert nxt.message == "task already finished"
    # ... until the schedule is replaced: the replaced schedule's occurrence for 00:06 (already
    # skipped) keeps its instant, and the new schedule's first occurrence, 00:07, does not
    # depend on it
    old = ahead(d, "m")
    add(d, "m", "* * * * *", overlap=OVERLAP_QUEUE_ON_SUCCESS)
    assert ahead(d, "m") is old
    assert at_min(d, 6) == []
    fresh = ahead(d, "m")
    assert fresh.status_name == "scheduled" and utc_of(d, fresh) == u(2025, 1, 6, 0, 7)
    assert fresh.unmet == 0 and old.edges() == []
    assert at_min(d, 7) == [fresh.id]
    at_min(d, 7, 30)
    d.complete(fresh.id)
    nxt = ahead(d, "m")
    assert nxt.status_name == "scheduled"  # the new chain: on the success of 00:07
    assert at_min(d, 8) == [nxt.id]


def test_overlap_queue_on_success_failure_while_successor_blocked(eng):
    d = eng()
    add(d, "m", "* * * * *", overlap=OVERLAP_QUEUE_ON_SUCCESS)
    first = start_first(d, "m")  # runs long
    second = ahead(d, "m").id
    at_min(d, 2)
    third = ahead(d, "m").id
    assert d.status(second) == d.status(third) == "blocked"
    at_min(d, 2, 30)
    d.fail(first, "bad", permanent=True)
    assert d.task(second).message == f"dependency {first} ended as failed"
    assert d.task(third).message == f"dependency {second} ended as skipped"
    assert d.snapshot().reservations == 0
    at_min(d, 3)
    assert ahead(d, "m").status_name == "skipped"


def test_overlap_queue_on_success_chain_stays_broken_past_retention(eng):
    """A broken chain stays broken however long ago the previous occurrence ended: a daily
    schedule's skipped occurrence is long forgotten (retention 1 h) when its successor is created,
    and the schedule still holds its outcome (it used to start a fresh chain there)."""
    d = eng()
    assert d.core.config.retention == 3600 * NS
    add(d, "daily", "0 0 * * *", overlap=OVERLAP_QUEUE_ON_SUCCESS)
    first = start_first(d, "daily")  # Tuesday 00:00
    second = ahead(d, "daily").id
    goto(d, 2025, 1, 7, 0, 30)
    d.fail(first, "bad", permanent=True)
    assert d.task(second).message == f"dependency {first} ended as failed"
    for day in (8, 9, 10):  # each occurrence comes due; the one it creates is skipped at once
        goto(d, 2025, 1, day)
        assert d.tick() == []
        assert d.core.lookup(d.now, second) is None  # forgotten by the engine
        nxt = ahead(d, "daily")
        assert utc_of(d, nxt) == u(2025, 1, day + 1)
        assert (nxt.status_name, nxt.message) == ("skipped", "task already finished")
        second = nxt.id
    assert d.snapshot().reservations == 0


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_overlap_queue_on_success_after_a_dropped_occurrence(eng, outcome):
    """An occurrence dropped for a reservation conflict leaves the chain on the one before it,
    which may be forgotten by the time the following occurrence is created: that one still
    follows its outcome (an edge to it: met if it succeeded, broken if not)."""
    d = eng()  # 2 slots: reservation limit 1
    add(d, "2h", "0 */2 * * *", overlap=OVERLAP_QUEUE_ON_SUCCESS)
    first = ahead(d, "2h")
    fixed_at(d, 4 * 3600)  # takes the 04:00 window: that occurrence is dropped
    d.at_ns(first.fixed.start)
    assert d.tick() == [first.id]  # 02:00; 04:00 conflicts
    assert d.totals()["recurring_conflicts"] == 1
    d.advance(60)
    if outcome == "succeeded":
        d.complete(first.id, "out")
    else:
        d.fail(first.id, "bad", permanent=True)
    goto(d, 2025, 1, 6, 4)  # the dropped occurrence's instant: 06:00 is created
    d.tick()
    assert d.core.lookup(d.now, first.id) is None  # ended at 02:01: forgotten at 03:01
    nxt = ahead(d, "2h")
    assert utc_of(d, nxt) == u(2025, 1, 6, 6)
    if outcome == "succeeded":
        assert nxt.status_name == "scheduled"
        assert outcomes(d.core, nxt) == [(first.id, None, "succeeded", "out", None)]
    else:
        assert (nxt.status_name, nxt.message) == ("skipped", "task already finished")


# ---------------------------------------------------------------------------- conflicts


def fixed_at(d, seconds, key=None):
    """A plain fixed-start task at engine second ``seconds`` (tolerance 1 s, expected 1 s, skip)."""
    try:
        return d.core.submit(d.now, TaskOptions(on_miss=SKIP), None, key, None, seconds * NS, None)[0]
    finally:
        d.collect()


def test_conflicting_occurrence_is_dropped_and_counted(eng):
    d = eng()  # 2 slots: reservation limit 1
    fixed_at(d, 300)  # occupies the 00:05 window
    fixed_at(d, 900)  # and the 00:15 one
    i = add(d, "five", "*/5 * * * *")
    # 00:05 is dropped and counted; the schedule wakes up then to try 00:10
    assert d.totals()["recurring_conflicts"] == 1
    assert (i.last_task_id, i.next_unix_ns) == (0, unix_ns(2025, 1, 6, 0, 5))
    assert len(d.core.tasks) == 2
    assert at_min(d, 5) == [1]  # the fixed task runs
    assert utc_of(d, ahead(d, "five")) == u(2025, 1, 6, 0, 10)
    t = step(d, "five")  # at 00:10 the next one (00:15) conflicts too
    assert d.totals()["recurring_conflicts"] == 2
    i = info(d, "five")
    assert (i.last_task_id, i.next_unix_ns) == (t.id, unix_ns(2025, 1, 6, 0, 15))
    assert at_min(d, 15) == [2]
    assert utc_of(d, ahead(d, "five")) == u(2025, 1, 6, 0, 20)
    assert d.totals()["recurring_conflicts"] == 2
    assert d.core.next_seq == 5  # conflicts consume no id


def test_an_occurrence_its_full_pool_refuses_is_counted_apart_from_conflicts(eng, mkpool):
    """docs/reference/behaviour.md#cron: ``recurring_conflicts`` counts reservation conflicts
    only; an occurrence its pool refuses for another reason (here max_pending) is dropped and
    counted in ``recurring_rejected``, and the schedule tries the following one at its instant."""
    d = eng(pools=[mkpool(cap=2, max_pending=1)])
    queued = d.core.submit(d.now, TaskOptions(), None, None, None, None, None)[0]  # fills the queue
    d.collect()
    i = add(d, "five", "*/5 * * * *")
    assert (d.totals()["recurring_rejected"], d.totals()["recurring_conflicts"]) == (1, 0)
    assert (i.last_task_id, i.next_unix_ns) == (0, unix_ns(2025, 1, 6, 0, 5))
    assert not d.core.pools[0].waiting_space  # nothing waits for the dropped occurrence
    d.cancel(queued)  # room again: the next occurrence is created when the dropped one comes due
    assert d.space_available() == []  # (its refusal woke no submitter waiting for space)
    at_min(d, 5)
    assert utc_of(d, ahead(d, "five")) == u(2025, 1, 6, 0, 10)
    assert (d.totals()["recurring_rejected"], d.totals()["recurring_conflicts"]) == (1, 0)


def test_a_refused_occurrence_leaves_a_waiting_submitter_its_wake_up(eng, mkpool):
    """docs/reference/behaviour.md#cron: a submitter refused ``full`` (overflow="wait") is
    still told when space frees, however many occurrences were refused meanwhile."""
    d = eng(pools=[mkpool(cap=2, max_pending=1)])
    queued = d.core.submit(d.now, TaskOptions(), None, None, None, None, None)[0]
    d.collect()
    with pytest.raises(SubmitError) as ei:
        d.core.submit(d.now, TaskOptions(), None, None, None, None, None)
    assert ei.value.code == "full"
    add(d, "five", "*/5 * * * *")
    d.cancel(queued)
    assert [a.pool for a in d.space_available()] == ["default"]


def test_a_conflict_drops_one_occurrence_and_retries_when_it_comes_due(eng):
    """docs/reference/behaviour.md#cron: occurrences are created one ahead, each when the previous one comes
    due.  A conflict drops that one occurrence (counted once); the schedule tries the following one at
    the dropped one's instant, by when the reservation it conflicted with may be released, rather
    than dropping every later occurrence that conflicts now."""
    d = eng()  # limit 1
    opts = TaskOptions(tolerance=NS * 5 // 2, duration_hint=NS // 2)
    blocker = d.core.submit(d.now, opts, None, None, None, 3 * NS, None)[0]  # window [0.5 s, 6 s]
    d.collect()
    i = add(d, "s", "* * * * * *", tolerance=NS // 5, duration_hint=NS // 10)
    tb = d.core.config.time_base
    assert d.totals()["recurring_conflicts"] == 1  # 1 s
    assert (i.last_task_id, i.next_unix_ns) == (0, tb + NS)
    assert d.core.next_wakeup() == NS
    for second in (1, 2):
        d.at_ns(second * NS)
        assert d.tick() == []
        assert d.totals()["recurring_conflicts"] == second + 1  # 2 s, then 3 s
        assert info(d, "s").next_unix_ns == tb + (second + 1) * NS
        assert len(d.core.tasks) == 1
    d.at_ns(3 * NS)
    assert d.tick() == [blocker]  # started: its reservation is released
    assert d.totals()["recurring_conflicts"] == 3
    assert ahead(d, "s").fixed.start == 4 * NS
    for second in (4, 5, 6, 7):
        d.at_ns(second * NS)
        ran = d.tick()
        assert len(ran) == 1 and d.task(ran[0]).fixed.start == second * NS
        d.advance(0.05)
        d.complete(ran[0])
    assert d.totals()["recurring_conflicts"] == 3


def test_two_schedules_at_the_same_instants_the_first_keeps_them(eng):
    """Limit 1: "b" cannot reserve "a"'s occurrence; at each instant "a" materializes its next
    occurrence first (timer order), so "b" conflicts again, once per instant."""
    d = eng()
    add(d, "a", "*/5 * * * *")
    add(d, "b", "*/5 * * * *")
    assert d.totals()["recurring_conflicts"] == 1
    assert info(d, "b").next_unix_ns == unix_ns(2025, 1, 6, 0, 5)
    ran = []
    for m in (5, 10, 15, 20):
        ids = at_min(d, m)
        assert len(ids) == 1
        ran.append(d.task(ids[0]).fixed.recurring)
        d.advance(1)
        d.complete(ids[0])
    assert ran == ["a"] * 4
    assert d.totals()["recurring_conflicts"] == 5
    assert info(d, "b").next_unix_ns == unix_ns(2025, 1, 6, 0, 25)


def test_every_second_on_a_one_slot_pool_fires_every_second(eng, mkpool):
    """Reservation limit 1: the occurrence that comes due starts on its held slot (releasing its
    reservation) before its successor is created, so it never conflicts with its own successor."""
    d = eng(pools=[mkpool(cap=1)])
    add(d, "s", "* * * * * *")
    starts = []
    for _ in range(10):
        t = step(d, "s", run_s=0.5)
        starts.append(t.fixed.start)
        nxt = ahead(d, "s")
        assert nxt.status_name == "scheduled" and nxt.fixed.start == t.fixed.start + NS
        assert d.snapshot().reservations == 1
    assert [b - a for a, b in itertools.pairwise(starts)] == [NS] * 9
    assert d.totals()["recurring_conflicts"] == 0
    assert d.snapshot().fixed_start_hit_rate == 1.0


def test_every_second_with_the_default_expected_duration_does_not_skip(eng, mkpool):
    """The same with pool max 3 (limit 1) and runs shorter than the window: one per second."""
    d = eng(pools=[mkpool(cap=3)])
    add(d, "s", "* * * * * *")
    first = ahead(d, "s").fixed.start
    for n in range(1, 6):
        d.at_ns(first + (n - 1) * NS)
        ran = d.tick()
        assert len(ran) == 1 and d.task(ran[0]).fixed.start == first + (n - 1) * NS
        d.advance(0.25)
        d.complete(ran[0])
    assert d.totals()["recurring_conflicts"] == 0


def test_a_due_occurrence_that_cannot_start_keeps_its_reservation(eng, mkpool):
    """Only a started occurrence releases its reservation (docs/reference/behaviour.md#fixed-starts): one
    still waiting for a slot at its start blocks its overlapping successors, which are dropped and counted
    (one per instant, as each comes due)."""
    d = eng(pools=[mkpool(cap=1)])
    add(d, "s", "* * * * * *")
    first = ahead(d, "s")
    s0 = first.fixed.start
    d.set_capacity(0)
    d.at_ns(s0)
    assert d.tick() == []
    assert d.status(first.id) == "ready" and first.fixed.reserved  # window [s0-1, s0+2] still counts
    assert d.totals()["recurring_conflicts"] == 1  # s0+1 overlaps it
    assert info(d, "s").next_unix_ns == d.core.config.time_base + s0 + NS
    d.at_ns(s0 + NS)
    d.tick()
    assert d.totals()["recurring_conflicts"] == 2  # s0+2 too
    d.at_ns(s0 + 2 * NS)
    d.tick()
    assert d.totals()["recurring_conflicts"] == 2
    assert ahead(d, "s").fixed.start == s0 + 3 * NS  # its window only touches: accepted
