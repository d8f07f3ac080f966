"""The task-field validators: one rule per field, the same on every surface.

Theory of operation
-------------------
Every way into cronoq (``Scheduler.submit``, ``Task``, ``Client.submit``, the gRPC and HTTP
handlers, the named-task layer) checks a task field with the function here, so a bad value
gets the same error and message everywhere.  The error family: every refusal is a
``ValueError``; a value of the wrong type is an :class:`~cronoq.errors.ArgumentTypeError`
(also a ``TypeError``), a refused resource amount, or a NUL character in a key, kind, pool,
tenant, dependency key or resource name, an :class:`~cronoq.errors.InvalidSubmission` (a
``SubmitError`` ``invalid``).

Times are integer nanoseconds once validated: a duration (``*_in``, ``timeout``, ...) is checked
as seconds and kept as ns; an instant (``*_at``: Unix seconds or an aware datetime) becomes
exact Unix ns (no float product: ``1_700_000_000.25`` is ``1_700_000_000_250_000_000``), and is
placed on the engine's clock only when submitted (:meth:`TimeSpec.resolve`).

Pure Python over the engine's model: no protobuf, no asyncio, so every layer may use it.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping

from cronoq.engine.model import (
    ON_SUCCESS,
    Dep,
    Priority,
    RetryPolicy,
    TaskOptions,
    check_stored_text,
    check_utf8,
    parse_on_miss,
)
from cronoq.engine.time import MAX_NS, NS, check_seconds, to_ns
from cronoq.errors import ArgumentTypeError, InvalidSubmission
from cronoq.spec import fields as task_fields

__all__ = [
    "DEFAULT_TOLERANCE_NS",
    "PER_TASK_FIELDS",
    "Edges",
    "TimeSpec",
    "check_key",
    "check_string",
    "make_options",
    "parse_deps",
    "parse_when",
    "resource_map",
    "str_map",
    "unix_ns",
]

#: docs/reference/behaviour.md#task-fields: the fixed-start tolerance when none is given (1 s).
DEFAULT_TOLERANCE_NS = NS

#: the fields that are not task options: key, times and edges (spec.fields)
PER_TASK_FIELDS = task_fields.names(option=False)

#: dependency edges: (task id or key, engine condition)
Edges = list[tuple[int | str, int]]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def str_map(name: str, value: object) -> dict[str, str] | None:
    """A ``tags``/``labels`` value as a ``dict[str, str]`` (values stringified), None if empty."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a mapping of str to str")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise ArgumentTypeError(f"{name} keys must be strings (got {k!r})")
        v = v if isinstance(v, str) else str(v)
        out[check_utf8(name, k)] = check_utf8(name, v)  # (a NUL is escaped in the stored JSON)
    return out or None


def resource_map(resources: object) -> dict[str, int] | None:
    """A task's ``resources``, checked (names are strings, amounts ints >= 1) and copied."""
    if not isinstance(resources, Mapping):
        raise ArgumentTypeError("resources must be a mapping of resource name to units")
    res = {}
    for name, amount in resources.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"resource names must be strings (got {name!r})")
        check_stored_text("resource name", name)
        if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
            # docs/reference/behaviour.md#resources: a SubmitError ``invalid`` that is also a ValueError
            raise InvalidSubmission(f"resource amount must be an int >= 1 (got {amount!r} for '{name}')")
        res[name] = amount
    return res or None


def check_string(name: str, value: object, *, empty: bool = True) -> str | None:
    """``pool``/``tenant`` (any string) or ``kind`` (``empty=False``: non-empty); None is unset."""
    if value is None:
        return None
    if not isinstance(value, str) or (not empty and not value):
        what = "a string" if empty else "a non-empty string"
        raise ArgumentTypeError(f"{name} must be {what} (got {value!r})")
    return check_stored_text(name, value)


def make_options(
    pool: str | None = None,
    kind: str | None = None,
    priority: Priority | int | str | None = None,
    tolerance: float | None = None,
    on_miss: str | None = None,
    duration_hint: float | None = None,
    timeout: float | None = None,
    retry: RetryPolicy | None = None,
    resources: Mapping[str, int] | None = None,
    tags: Mapping[str, object] | None = None,
    labels: Mapping[str, str] | None = None,
    tenant: str | None = None,
) -> TaskOptions:
    """Validate the shared task fields (docs/reference/behaviour.md#task-fields) into a TaskOptions.  None for
    any field means its default (as in the published implementation, whose fields all default to None)."""
    check_string("pool", pool)
    kind = check_string("kind", kind, empty=False) or "default"
    prio = Priority.NORMAL if priority is None else Priority.parse(priority)
    tol = DEFAULT_TOLERANCE_NS if tolerance is None else to_ns(check_seconds("tolerance", tolerance))
    miss = parse_on_miss("run_late" if on_miss is None else on_miss)
    hint = None if duration_hint is None else to_ns(check_seconds("duration_hint", duration_hint))
    tmo = None if timeout is None else to_ns(check_seconds("timeout", timeout))
    check_retry(retry)
    res = None if resources is None else resource_map(resources)
    check_string("tenant", tenant)
    return TaskOptions(
        pool=pool,
        kind=kind,
        priority=int(prio),
        timeout=tmo,
        retry=retry,
        duration_hint=hint,
        tolerance=tol,
        on_miss=miss,
        tags=str_map("tags", tags),
        labels=str_map("labels", labels),
        tenant=tenant,
        resources=res,
    )


def check_retry(retry: object) -> RetryPolicy | None:
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ArgumentTypeError(f"retry must be a RetryPolicy (got {retry!r})")
    return retry


def _round_div(a: int, b: int) -> int:
    """``a / b`` rounded to the nearest integer, ties to even (``b > 0``), exactly."""
    q, r = divmod(a, b)
    if 2 * r > b or (2 * r == b and q & 1):
        q += 1
    return q


def unix_ns(name: str, value: object) -> int:
    """An instant (Unix seconds, int or float, or an aware datetime) as exact Unix ns."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be an aware datetime or Unix seconds (got a naive datetime)")
        delta = value - _EPOCH
        return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1_000
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} must be Unix seconds or an aware datetime (got {value!r})")
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range
        v = math.inf
    # finite also in ns: 1e300 s is refused here rather than overflowing later
    if not math.isfinite(v * NS):
        raise ArgumentTypeError(f"{name} must be Unix seconds or an aware datetime (got {value!r})")
    if isinstance(value, int):
        return value * NS
    n, d = v.as_integer_ratio()
    return _round_div(n * NS, d)


class TimeSpec:
    """A per-task instant given relative (``*_in``: ``relative`` ns from submission) or absolute
    (``*_at``: ``unix_ns``)."""

    __slots__ = ("relative", "unix_ns")

    def __init__(self, relative: int | None, unix_ns: int | None) -> None:
        self.relative = relative
        self.unix_ns = unix_ns

    def resolve(self, now: int, time_base: int) -> int:
        """The instant on the engine's clock (``now`` and ``time_base`` in ns)."""
        if self.relative is not None:
            return now + self.relative
        assert self.unix_ns is not None
        at = self.unix_ns - time_base
        # an instant centuries away is kept as "MAX_NS from now" (stored Unix ns fit int64)
        return min(max(at, now - MAX_NS), now + MAX_NS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimeSpec):
            return NotImplemented
        return (self.relative, self.unix_ns) == (other.relative, other.unix_ns)

    def __hash__(self) -> int:
        return hash((self.relative, self.unix_ns))

    def __repr__(self) -> str:
        return f"TimeSpec(relative={self.relative!r}, unix_ns={self.unix_ns!r})"


def parse_when(prefix: str, rel: object, at: object) -> TimeSpec | None:
    """``<prefix>_in`` (seconds from now) or ``<prefix>_at`` (an instant), at most one."""
    if rel is not None and at is not None:
        raise ValueError(
            f"use either {prefix}_in or {prefix}_at ({prefix}_in and {prefix}_at are mutually exclusive)"
        )
    if rel is not None:
        return TimeSpec(to_ns(check_seconds(f"{prefix}_in", rel)), None)
    if at is not None:
        return TimeSpec(None, unix_ns(f"{prefix}_at", at))
    return None


def check_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ArgumentTypeError(f"key must be a non-empty string (got {key!r})")
    return check_stored_text("key", key)


def parse_deps(after: object, deps: object) -> Edges | None:
    """``after=ref or [refs]`` (success edges) plus ``deps=[Dep(...)]``: the union of edges."""
    out: Edges = []
    if after is not None:
        refs = [after] if isinstance(after, (int, str)) and not isinstance(after, bool) else after
        if not isinstance(refs, (list, tuple)):
            raise ArgumentTypeError(f"after must be a task id, a key or a list of them (got {after!r})")
        for r in refs:
            if isinstance(r, Dep):
                out.append((r.target, r.cond))
                continue
            if isinstance(r, bool) or not isinstance(r, (int, str)) or (isinstance(r, int) and r < 1):
                raise ArgumentTypeError(f"a dependency is a task id (int >= 1) or a key (str), got {r!r}")
            if r.__class__ is str:
                check_stored_text("dependency key", r)
            out.append((r, ON_SUCCESS))
    if deps is not None:
        if not isinstance(deps, (list, tuple)):
            raise ArgumentTypeError(f"deps must be a list of Dep (got {deps!r})")
        for d in deps:
            if not isinstance(d, Dep):
                raise ArgumentTypeError(f"deps must contain Dep objects (got {d!r})")
            out.append((d.target, d.cond))
    return out or None
