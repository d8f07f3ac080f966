"""Recurring schedules: cron expressions → fixed-start occurrences (docs/reference/behaviour.md#cron).

Cron parsing and iteration come from croniter (imported lazily, so ``import cronoq`` stays
light); time zones from the stdlib ``zoneinfo`` database, which handles DST.  The cron
machinery is pure computation over Unix seconds: the core converts to engine time with its
``time_base``, so the engine stays deterministic.

:class:`Schedules` is the recurring state of one core.  A schedule has at most one occurrence
materialized ahead, a fixed-start task created through the core's normal admission (with the
schedule's name on its ``FixedStart`` before it is persisted); a ``T_RECUR`` wake-up at that
occurrence's start creates the next one, after the core's fill pass, so an occurrence never
conflicts with its own successor.  An occurrence that cannot be admitted is dropped and
counted (``recurring_conflicts`` for a reservation conflict, ``recurring_rejected`` when the
pool refuses it otherwise: full, overloaded, a resource it cannot hold), and the wake-up
stays armed at its instant to try the following one.  The overlap policy links each
occurrence to the previous one: a dependency edge (``queue``, ``queue_on_success``), or a
start-time check (``skip``).
Replacing a schedule keeps the occurrence ahead; removing one leaves it to run.

Accepted syntax: 5 fields (min hour dom mon dow), 6 (seconds first), 7 (seconds first,
trailing year); ranges, lists, steps, names, ``?``, ``L``, ``W``, ``#``; and the macros
``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``, ``@annually``, ``@midnight``.
"The last <weekday> of the month" in the day-of-week field may be written ``5L`` / ``FRIL``
(the common Quartz spelling, Unix day numbers: 0 or 7 = Sunday) as well as croniter's ``L5``;
``LW`` in the day-of-month field is the last weekday (Monday to Friday) of the month.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronoq.engine.admission import BatchItem
from cronoq.engine.model import FIRST_TERMINAL, ON_COMPLETE, ON_SUCCESS, TaskOptions, TaskState
from cronoq.engine.mutations import (
    PauseChange,
    RecoveredSchedule,
    RecurringNext,
    RecurringRecord,
    RecurringRemove,
    RecurringUpsert,
    task_record,
)
from cronoq.engine.time import NS
from cronoq.errors import SubmitError

if TYPE_CHECKING:
    from cronoq.engine.core import Core

OVERLAP_SKIP: Final = 0
OVERLAP_ALLOW: Final = 1
OVERLAP_QUEUE: Final = 2
OVERLAP_QUEUE_ON_SUCCESS: Final = 3
OVERLAP_NAMES: Final = ("skip", "allow", "queue", "queue_on_success")
OVERLAP_ERROR: Final = "overlap must be 'skip', 'allow', 'queue' or 'queue_on_success'"
RECURRING_TAG: Final = "cronoq.recurring"  # tag of every occurrence: its schedule's name

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
    """A validated cron expression in a time zone; ``next_after`` iterates occurrences.

    An invalid expression raises ``ValueError("invalid cron '<expr>': <reason>")`` (the
    expression as written, a short reason naming the field).  ``LW`` in the day-of-month field
    (the last weekday, Monday to Friday, of the month), which croniter lacks, is computed here:
    the schedule is then the union of croniter expressions (standard cron: a restricted
    day-of-month and day-of-week match either), the ``LW`` one filtered to that day.
    """

    __slots__ = ("_parts", "_tz", "expr", "tz_name")

    def __init__(self, expr: str, tz: str | None = None) -> None:
        if not isinstance(expr, str):
            raise ValueError(f"invalid cron {expr!r}: expected a string, got {type(expr).__name__}")
        if tz is not None and not isinstance(tz, str):
            raise ValueError(f"invalid time zone {tz!r}")
        self._tz: _dt.tzinfo
        try:
            self._tz = ZoneInfo(tz) if tz else _dt.UTC
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown time zone '{tz}'") from e
        text = " ".join(expr.split())
        if not text:
            raise _invalid(expr, "empty expression")
        if text.startswith("@"):
            macro = _MACROS.get(text.lower())
            if macro is None:
                raise _invalid(expr, f"unknown macro '{text.split(' ')[0]}'")
            text = macro
        fields = text.split(" ")
        if len(fields) not in (5, 6, 7):
            raise _invalid(expr, f"expected 5, 6 or 7 fields, got {len(fields)}")
        names = _FIELD_NAMES[len(fields)]
        dom = names.index(_DOM)
        dow = dom + 2
        if "l" in fields[dow] or "L" in fields[dow]:
            fields[dow] = _last_weekday_items(fields[dow])
        # (croniter expression, only the last weekday of the month) whose union is the schedule
        parts: list[tuple[str, bool]] = []
        dom_items = fields[dom].split(",")
        if any(i.upper() == "LW" for i in dom_items):
            rest = [i for i in dom_items if i.upper() != "LW"]
            parts.append((_with(fields, {dom: "26-31", dow: "*"}), True))  # LW is one of them
            if rest:
                parts.append((_with(fields, {dom: ",".join(rest), dow: "*"}), False))
            if fields[dow] not in ("*", "?"):
                parts.append((_with(fields, {dom: "*"}), False))
        else:
            parts.append((" ".join(fields), False))
        self.expr = expr
        self.tz_name = tz
        self._parts = parts
        from croniter import croniter  # type: ignore[import-untyped]  # lazily: only schedules need it

        for part, _ in parts:
            try:
                croniter(part, _dt.datetime.now(self._tz), second_at_beginning=True)
            except Exception as e:  # croniter raises several error types for bad syntax
                raise _invalid(expr, _diagnose(text.split(" "), names) or "unsupported syntax") from e

    def next_after(self, unix_s: float) -> float | None:
        """The first occurrence strictly after ``unix_s`` (Unix seconds), or None if none exists."""
        best: float | None = None
        for part, last_weekday in self._parts:
            x = self._next_lw(part, unix_s) if last_weekday else self._next(part, unix_s)
            if x is not None and (best is None or x < best):
                best = x
        return best

    def _next(self, part: str, unix_s: float) -> float | None:
        from croniter import croniter

        start = _dt.datetime.fromtimestamp(unix_s, self._tz)
        try:
            # (the year field reaches 2099: look that far; an impossible date still fails fast)
            it = croniter(part, start, second_at_beginning=True, max_years_between_matches=130)
            nxt = it.get_next(_dt.datetime)
        except Exception:  # no further match (e.g. 30 February, or a year range that ended)
            return None
        ts: float = nxt.timestamp()
        if ts <= unix_s:  # pragma: no cover - croniter contract says strictly after
            return self._next(part, unix_s + 1)
        return ts

    def _next_lw(self, part: str, unix_s: float) -> float | None:
        """The next match of ``part`` (day of month 26-31) on the last weekday of its month."""
        t = unix_s
        for _ in range(10_000):  # (at most 5 other days a month are passed over)
            x = self._next(part, t)
            if x is None:
                return None
            day = _dt.datetime.fromtimestamp(x, self._tz).date()
            if _is_last_weekday(day):
                return x
            midnight = _dt.datetime.combine(day + _dt.timedelta(days=1), _dt.time(), self._tz)
            t = max(x, midnight.timestamp() - 0.5)  # skip the rest of that day
        return None  # pragma: no cover


def _with(fields: list[str], repl: dict[int, str]) -> str:
    return " ".join(repl.get(i, f) for i, f in enumerate(fields))


def _is_last_weekday(day: _dt.date) -> bool:
    last = calendar.monthrange(day.year, day.month)[1]
    # Saturday (5) -> the Friday before, Sunday (6) -> two days before
    return day.day == last - max(0, _dt.date(day.year, day.month, last).weekday() - 4)


def _invalid(expr: str, reason: str) -> ValueError:
    return ValueError(f"invalid cron '{expr}': {reason}")


_DOM: Final = "day-of-month"
_DOW: Final = "day-of-week"
_FIELDS_5: Final = ("minute", "hour", _DOM, "month", _DOW)
_FIELD_NAMES: Final = {5: _FIELDS_5, 6: ("second", *_FIELDS_5), 7: ("second", *_FIELDS_5, "year")}
_BOUNDS: Final = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    _DOM: (1, 31),
    "month": (1, 12),
    _DOW: (0, 7),
    "year": (1970, 2099),
}
_MONTH_NAMES: Final = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_NAMES: Final = {"month": frozenset(_MONTH_NAMES), _DOW: frozenset(_DOW_NAMES)}


def _diagnose(fields: list[str], names: tuple[str, ...]) -> str | None:
    """Why cron ``fields`` (as written) are invalid, for the error message (None: no idea)."""
    for text, field in zip(fields, names, strict=True):
        for item in text.split(","):
            reason = _item_error(item, field)
            if reason is not None:
                return reason
    return None


def _item_error(item: str, field: str) -> str | None:
    if not item:
        return f"empty list item in the {field} field"
    base, slash, step = item.partition("/")
    if slash:
        if not step.isdigit():
            return f"invalid step '{step}' in the {field} field"
        if int(step) == 0:
            return f"step 0 in the {field} field"
    up = base.upper()
    if up == "*":
        return None
    if up == "?":
        return None if field in (_DOM, _DOW) else f"'?' is not allowed in the {field} field"
    if field == _DOM:
        if up in ("L", "LW"):
            return None
        if up.endswith("W"):
            base = base[:-1]
    elif field == _DOW:
        if "#" in base:
            day, _, nth = base.partition("#")
            if not (nth.isdigit() and 1 <= int(nth) <= 5):
                return f"day-of-week occurrence '#{nth}' out of range 1-5"
            base = day
        elif len(up) > 1 and up.startswith("L"):
            base = base[1:]
        elif len(up) > 1 and up.endswith("L"):
            base = base[:-1]
    ends = base.split("-")
    if len(ends) > 2:
        return f"invalid range '{base}' in the {field} field"
    for tok in ends:
        if tok.isdigit():
            lo, hi = _BOUNDS[field]
            if not lo <= int(tok) <= hi:
                return f"{field} value {int(tok)} out of range {lo}-{hi}"
        elif tok.upper() not in _NAMES.get(field, ()):
            return f"invalid {field} value '{tok}'"
    return None


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
    """Engine state of one schedule.

    ``next_start`` is the engine instant of its next wake-up (a ``T_RECUR`` timer), None once it
    has no further occurrence; ``ahead`` the occurrence materialized for that instant, or None
    when the occurrence of that instant was dropped for a reservation conflict (the wake-up then
    retries with the following one); ``chain`` the latest occurrence this schedule created, which
    its next one follows for the overlap policy (held past retention: the next one's edge still
    names it and settles against its outcome; after a restart it is the ``last`` occurrence,
    whose row a durable store keeps).  ``opts`` are the template's options as each
    occurrence gets them (the ``cronoq.recurring`` tag added).
    """

    __slots__ = ("ahead", "chain", "gen", "last_id", "next_start", "opts", "spec")

    def __init__(self, spec: RecurringSpec) -> None:
        self.spec = spec
        self.gen = 0
        self.ahead: TaskState | None = None
        self.chain: TaskState | None = None
        self.next_start: int | None = None  # engine ns of the next wake-up
        self.last_id = 0
        self.opts = occurrence_options(spec)


@dataclass(frozen=True, slots=True)
class RecurringInfo:
    """A schedule as listed: ``next_unix_ns`` is its next wake-up, the start of the occurrence
    materialized ahead (or of one dropped for a reservation conflict: the following one is tried
    then); ``last_task_id`` the latest occurrence (0: none yet)."""

    name: str
    cron: str
    tz: str | None
    overlap: str
    next_unix_ns: int | None
    last_task_id: int
    pool: str
    key: str | None
    kind: str = "default"
    #: occurrences coming due are skipped while paused (docs/how-to/operations.md)
    paused: bool = False
    #: occurrences skipped while paused (since start)
    skipped_paused: int = 0

    @property
    def next_run(self) -> float | None:
        """Unix seconds of the next occurrence, or None."""
        return None if self.next_unix_ns is None else self.next_unix_ns / 1e9

    def __repr__(self) -> str:
        return (
            f"RecurringInfo(name={self.name!r}, cron={self.cron!r}, tz={self.tz!r}, overlap={self.overlap!r},"
            f" next_unix_ns={self.next_unix_ns}, last_task_id={self.last_task_id})"
        )


def occurrence_options(spec: RecurringSpec) -> TaskOptions:
    """The template's options with the tag ``cronoq.recurring`` = schedule name (unless the
    template sets that tag itself); the template itself is left as it was given (persisted)."""
    tags = spec.opts.tags
    if tags is not None and RECURRING_TAG in tags:
        return spec.opts
    opts = spec.opts.unresolved()
    opts.tags = {**(tags or {}), RECURRING_TAG: spec.name}
    return opts


def occurrence_key(template: str, start_unix_ns: int) -> str:
    """``"<key>@<UTC start, ISO-8601 seconds>Z"``."""
    when = _dt.datetime.fromtimestamp(start_unix_ns // 1_000_000_000, _dt.UTC)
    return f"{template}@{when.strftime('%Y-%m-%dT%H:%M:%S')}Z"


class Schedules:
    """The recurring schedules of one core, by name (see the module docstring)."""

    __slots__ = ("by_name", "core", "held", "paused", "skipped_paused")

    def __init__(self, core: Core) -> None:
        self.core = core
        self.by_name: dict[str, Schedule] = {}
        # while an occurrence is submitted: the previous one, which its overlap edge names and
        # resolves to even once retention has forgotten it (see ``materialize``)
        self.held: TaskState | None = None
        # names of the paused schedules (kept when a schedule is replaced, dropped when removed)
        self.paused: set[str] = set()
        self.skipped_paused: dict[str, int] = {}  # name -> occurrences skipped while paused

    def unix_s(self, now: int) -> float:
        return (self.core.config.time_base + now) / NS

    def held_as(self, target: object) -> TaskState | None:
        """The previous occurrence an occurrence being submitted names as ``target``, held
        past retention (``held``), or None: what a dependency lookup falls back to."""
        held = self.held
        return held if held is not None and held.id == target else None

    def woken(self, token: int) -> Schedule | None:
        """The schedule a fired wake-up of generation ``token`` wakes, or None when that wake-up
        is no longer its latest one or the schedule was removed or replaced since."""
        sched = self.core.timers.take_recur(token)
        if sched is None or sched.gen != token or self.by_name.get(sched.spec.name) is not sched:
            return None
        return sched

    def resume(self, sched: Schedule, now: int) -> None:
        """``sched`` woke up: materialize its next occurrence.

        A late wake-up (loaded host, long pause) does not create a burst of past occurrences:
        it resumes from now - tolerance (missed ones are dropped).
        """
        late = self.unix_s(now) - sched.spec.opts.tolerance / NS
        self.materialize(sched, now, max(self.unix_s(sched.next_start or now), late))

    def add(self, now: int, spec: RecurringSpec) -> RecurringInfo:
        """Add or replace a schedule and materialize its first occurrence (docs/reference/behaviour.md#cron).

        Raises SubmitError ``unknown_pool``; the cron and time zone were validated when the
        spec was built.  A replaced schedule's materialized occurrence still runs, and the two
        never fire for the same instant: when the replaced schedule has an occurrence for
        instant T materialized (whatever became of it since), that one stays the occurrence
        ahead, and the new schedule's first occurrence, the first one after T, is created when
        T comes due.  The new schedule's overlap policy does not chain onto it.
        """
        self.core.resolve_pool(spec.opts)
        old = self.by_name.get(spec.name)
        sched = Schedule(spec)
        self.by_name[spec.name] = sched
        if self.core.durable:
            self.core.persist(RecurringUpsert(self.record(spec)))
        if old is not None and old.ahead is not None and old.next_start is not None:
            sched.ahead = old.ahead
            sched.last_id = old.last_id
            self.arm(sched, old.next_start)
        else:
            self.materialize(sched, now, self.unix_s(now))
        return self.info(sched)

    def remove(self, name: str) -> bool:
        """Remove a schedule; its already-materialized occurrence still runs."""
        removed = self.by_name.pop(name, None) is not None
        if removed and self.core.durable:
            self.core.persist(RecurringRemove(name))
        if removed and name in self.paused:
            self.paused.discard(name)
            if self.core.durable:
                self.core.persist(PauseChange("recurring", name, False))
        return removed

    def record(self, spec: RecurringSpec) -> RecurringRecord:
        o = spec.opts
        template = task_record(self.core.pools[o.pool_index].name, o, spec.key, spec.blob)
        return RecurringRecord(
            spec.name, spec.cron.expr, spec.cron.tz_name, spec.overlap, template, spec.deadline_rel
        )

    def infos(self) -> list[RecurringInfo]:
        return [self.info(s) for s in self.by_name.values()]

    def info(self, sched: Schedule) -> RecurringInfo:
        spec = sched.spec
        return RecurringInfo(
            name=spec.name,
            cron=spec.cron.expr,
            tz=spec.cron.tz_name,
            overlap=OVERLAP_NAMES[spec.overlap],
            next_unix_ns=None if sched.next_start is None else self.core.config.time_base + sched.next_start,
            last_task_id=sched.last_id,
            pool=self.core.pools[spec.opts.pool_index].name,
            key=spec.key,
            kind=spec.opts.kind,
            paused=spec.name in self.paused,
            skipped_paused=self.skipped_paused.get(spec.name, 0),
        )

    def materialize(self, sched: Schedule, now: int, after_unix: float) -> None:
        """Create the next occurrence after ``after_unix`` as a fixed-start task.

        One occurrence is tried (docs/reference/behaviour.md#cron: each next one is created when the previous
        comes due): one that cannot get a reservation is dropped and counted once in
        ``recurring_conflicts``, one its pool refuses otherwise (full, overloaded, a resource it
        cannot hold) in ``recurring_rejected``, and the schedule wakes up at its instant to try
        the following one, by when the reservations it conflicted with (or the queue that was
        full) may have been released.
        """
        spec = sched.spec
        prev = sched.chain
        tb = self.core.config.time_base
        nxt = spec.cron.next_after(after_unix)
        if nxt is None:
            self.core.count("recurring_invalid")
            sched.ahead = None
            sched.next_start = None
            if self.core.durable:
                self.core.persist(RecurringNext(spec.name, None, sched.last_id))
            return
        start = round(nxt * NS) - tb
        key = None if spec.key is None else occurrence_key(spec.key, tb + start)
        deps: list[tuple[int | str, int]] | None = None
        if prev is not None and spec.overlap in (OVERLAP_QUEUE, OVERLAP_QUEUE_ON_SUCCESS):
            # (an edge even to a previous occurrence retention forgot: ``held`` resolves it)
            deps = [(prev.id, ON_COMPLETE if spec.overlap == OVERLAP_QUEUE else ON_SUCCESS)]
            self.held = prev
        deadline = None if spec.deadline_rel is None else start + spec.deadline_rel
        try:
            item = BatchItem(sched.opts, spec.payload, key, deadline, start, deps, spec.blob)
            tid, dup = self.core.submit_occurrence(now, item, spec.name)
        except SubmitError as e:  # drop this occurrence: a conflict, or the pool refused it
            conflict = e.code == "reservation_conflict"
            self.core.count("recurring_conflicts" if conflict else "recurring_rejected")
            sched.ahead = None
            self.arm(sched, start)
            return
        finally:
            self.held = None
        t = self.core.tasks[tid]
        if not dup and t.fixed is not None and spec.overlap == OVERLAP_SKIP:
            # an occurrence that ended before coming due (skipped for overlap, or cancelled
            # while scheduled) still has its start check's ``prev``: check the one it deferred
            # to, so a long run is never overlapped by a later one
            live = prev
            while (
                live is not None
                and live.status >= FIRST_TERMINAL
                and live.fixed is not None
                and live.fixed.prev is not None
            ):
                live = live.fixed.prev
            t.fixed.prev = live
        sched.ahead = t
        sched.chain = t
        sched.last_id = tid
        self.arm(sched, start)

    def arm(self, sched: Schedule, start: int) -> None:
        """Wake ``sched`` up at ``start`` (the instant of its occurrence ahead, or of the one
        dropped for a conflict) and persist where it stands."""
        sched.next_start = start
        self.core.timers.arm_recur(start, sched)
        if self.core.durable:
            at = self.core.config.time_base + start
            self.core.persist(RecurringNext(sched.spec.name, at, sched.last_id))

    def recover(self, rs: RecoveredSchedule, now: int, live_occ: TaskState | None = None) -> None:
        """Resume a schedule read back from a durable store (``live_occ``: for overlap=skip,
        its latest live occurrence, which the next one defers to)."""
        rec = rs.spec
        try:
            cron = CronSchedule(rec.cron, rec.tz)
        except ValueError as e:
            self.core.count("recurring_invalid")
            if self.core.durable:
                self.core.persist(RecurringRemove(rec.name))
            del e
            return
        opts = rec.template.options()
        try:
            self.core.resolve_pool(opts)
        except SubmitError:
            self.core.count("recurring_invalid")
            return
        spec = RecurringSpec(
            rec.name, cron, rec.overlap, opts, rec.template.payload, rec.template.key, rec.deadline_rel
        )
        spec.blob = rec.template.payload
        sched = Schedule(spec)
        self.by_name[rec.name] = sched
        ahead = self.core.tasks.get(rs.last) if rs.last else None
        if ahead is not None and ahead.status < FIRST_TERMINAL and rs.next is not None:
            # the wake-up resumes: at the start of the occurrence ahead, or at the instant of
            # one dropped for a conflict (``last`` is then the occurrence before it)
            sched.chain = ahead
            sched.last_id = ahead.id
            sched.next_start = rs.next - self.core.config.time_base
            f = ahead.fixed
            sched.ahead = ahead if f is not None and f.start == sched.next_start else None
            self.core.timers.arm_recur(sched.next_start, sched)
        else:
            # (overlap=skip: the next occurrence defers to the latest live one, see recover)
            sched.chain = ahead if live_occ is None or live_occ.status >= FIRST_TERMINAL else live_occ
            sched.last_id = rs.last
            after = self.unix_s(now) if rs.next is None else max(self.unix_s(now), rs.next / NS)
            self.materialize(sched, now, after)
