"""Task fields: validation and conversion of the docs/reference/behaviour.md#task-fields keyword arguments.

Fields that many tasks share (pool, kind, priority, timeout, retry, ...) become one
:class:`~cronoq.engine.model.TaskOptions`, cached per distinct argument set, so submitting
the same shape of task again costs a dict lookup instead of a validation.  Per-task fields
(key, deadlines) are validated each time; they are cheap.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any

from cronoq.engine.model import ON_SUCCESS, Dep, Priority, RetryPolicy, TaskOptions, parse_on_miss
from cronoq.engine.time import MAX_NS, NS, check_seconds, to_ns
from cronoq.errors import ArgumentTypeError, InvalidSubmission
from cronoq.runtime import task_fields

#: docs/reference/behaviour.md#task-fields: the fixed-start tolerance when none is given (1 s).
DEFAULT_TOLERANCE_NS = NS

#: the fields that are not task options: key, times and edges (runtime.task_fields)
PER_TASK_FIELDS = task_fields.names(option=False)


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
        out[k] = v if isinstance(v, str) else str(v)
    return out or None


def resource_map(resources: object) -> dict[str, int] | None:
    """A task's ``resources``, checked (names are strings, amounts ints >= 1) and copied."""
    if not isinstance(resources, Mapping):
        raise ArgumentTypeError("resources must be a mapping of resource name to units")
    res = {}
    for name, amount in resources.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"resource names must be strings (got {name!r})")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
            # docs/reference/behaviour.md#resources: a SubmitError ``invalid`` that is also a ValueError
            raise InvalidSubmission(f"resource amount must be an int >= 1 (got {amount!r} for '{name}')")
        res[name] = amount
    return res or None


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
    if pool is not None and not isinstance(pool, str):
        raise ArgumentTypeError(f"pool must be a string (got {pool!r})")
    if kind is None:
        kind = "default"
    elif not isinstance(kind, str) or not kind:
        raise ArgumentTypeError(f"kind must be a non-empty string (got {kind!r})")
    prio = Priority.NORMAL if priority is None else Priority.parse(priority)
    tol = DEFAULT_TOLERANCE_NS if tolerance is None else to_ns(check_seconds("tolerance", tolerance))
    miss = parse_on_miss("run_late" if on_miss is None else on_miss)
    hint = None if duration_hint is None else to_ns(check_seconds("duration_hint", duration_hint))
    tmo = None if timeout is None else to_ns(check_seconds("timeout", timeout))
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ArgumentTypeError(f"retry must be a RetryPolicy (got {retry!r})")
    res = None if resources is None else resource_map(resources)
    if tenant is not None and not isinstance(tenant, str):
        raise ArgumentTypeError(f"tenant must be a string (got {tenant!r})")
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


def unix_seconds(name: str, value: object) -> float:
    """An instant: Unix seconds (int/float) or an aware datetime."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be an aware datetime or Unix seconds (got a naive datetime)")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{name} must be Unix seconds or an aware datetime (got {value!r})")
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range
        v = math.inf
    # finite also in ns (TimeSpec.resolve multiplies by NS): 1e300 must not overflow later
    if not math.isfinite(v * NS):
        raise ArgumentTypeError(f"{name} must be Unix seconds or an aware datetime (got {value!r})")
    return v


class TimeSpec:
    """A per-task instant given relative (``*_in`` seconds) or absolute (``*_at``)."""

    __slots__ = ("relative", "unix")

    def __init__(self, relative: int | None, unix: float | None) -> None:
        self.relative = relative
        self.unix = unix

    def resolve(self, now: int, time_base: int) -> int:
        if self.relative is not None:
            return now + self.relative
        assert self.unix is not None
        at = round(self.unix * NS) - time_base
        # an instant centuries away is kept as "MAX_NS from now" (stored Unix ns fit int64)
        return min(max(at, now - MAX_NS), now + MAX_NS)


def parse_when(prefix: str, rel: object, at: object) -> TimeSpec | None:
    if rel is not None and at is not None:
        raise ValueError(
            f"use either {prefix}_in or {prefix}_at ({prefix}_in and {prefix}_at are mutually exclusive)"
        )
    if rel is not None:
        return TimeSpec(to_ns(check_seconds(f"{prefix}_in", rel)), None)
    if at is not None:
        return TimeSpec(None, unix_seconds(f"{prefix}_at", at))
    return None


def check_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ArgumentTypeError(f"key must be a non-empty string (got {key!r})")
    return key


def parse_deps(after: object, deps: object) -> list[tuple[int | str, int]] | None:
    """``after=ref or [refs]`` (success edges) plus ``deps=[Dep(...)]``: the union of edges."""
    out: list[tuple[int | str, int]] = []
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
            out.append((r, ON_SUCCESS))
    if deps is not None:
        if not isinstance(deps, (list, tuple)):
            raise ArgumentTypeError(f"deps must be a list of Dep (got {deps!r})")
        for d in deps:
            if not isinstance(d, Dep):
                raise ArgumentTypeError(f"deps must contain Dep objects (got {d!r})")
            out.append((d.target, d.cond))
    return out or None


class OptionsCache:
    """Memoizes :func:`make_options` per distinct (hashable) argument tuple.

    Bounded and approximately least-recently-used, so that many keyed resources (one
    ``"name:key"`` per key, hence one options object per key) do not thrash it: entries live
    in two generations of at most ``limit`` each; a lookup that misses the young one promotes
    the entry from the old one (or builds it), and when the young one is full it becomes the
    old one and the previous old one is dropped.  An entry used at least once per ``limit``
    distinct lookups is never rebuilt; at most ``2 × limit`` entries are held.

    Options with nothing but ``resources`` (the keyed-resource case: ``enqueue(x,
    resources={"customer:42": 1})``) are keyed by the resource name alone (by the tuple of
    names for several; a hit compares the amounts): no key tuple is built on a hit nor kept.
    Such keys (a str, a tuple of str) never equal a general key (a tuple holding types).

    The memory bound: an entry is its options (about 700 bytes with its resources map and
    what the core notes on it), so the default ``limit`` of 16,384 holds at most ~23 MB, and
    only while more than 16,384 distinct resource maps (keys) are in use, where the engine
    holds more for the keys and their tasks anyway; a rotation over 10,000 keys never misses
    (with half the limit, a fifth of its lookups would).
    """

    __slots__ = ("_limit", "_old", "_young", "default")

    def __init__(self, limit: int = 16_384) -> None:
        self._young: dict[object, TaskOptions] = {}
        self._old: dict[object, TaskOptions] = {}
        self._limit = limit
        self.default = make_options()

    def get(self, fields: dict[str, Any]) -> TaskOptions:
        if not fields:
            return self.default
        if len(fields) == 1:
            res = fields.get("resources")
            if res.__class__ is dict and res:
                if len(res) == 1:  # (_resources_only's first case inlined: the hottest one)
                    ((ck, amount),) = res.items()
                    if ck.__class__ is str and amount.__class__ is int:
                        opts = self._young.get(ck)
                        if opts is not None and opts.resources == res:
                            return opts
                        return self._miss(ck, fields, res)
                return self._resources_only(res)
        # the key holds each value's type (1, 1.0 and True are equal but do not validate
        # alike) and dict values (resources, tags, labels) as their items and item types
        parts: list[object] = []
        for k, v in fields.items():
            c = v.__class__
            if c is dict:
                v = (*v.items(), *map(type, v.values()))
            parts += (k, c, v)
        ck = tuple(parts)
        try:
            opts = self._young.get(ck)
        except TypeError:  # an unhashable value (make_options rejects or copies it)
            return make_options(**fields)
        return opts if opts is not None else self._miss(ck, fields)

    def _resources_only(self, res: dict[str, int]) -> TaskOptions:
        """Options with only ``resources`` (the keyed-resource hot path, see the class doc):
        keyed by the name (the tuple of names for several), the amounts checked on a hit.
        (:meth:`get` does the one-name case inline.)"""
        ck: object
        if len(res) == 1:
            ((ck, amount),) = res.items()
            if ck.__class__ is not str or amount.__class__ is not int:
                return make_options(resources=res)  # (validated, or refused, each time)
            opts = self._young.get(ck)
            if opts is not None and opts.resources == res:  # (another amount: replaced)
                return opts
            return self._miss(ck, {"resources": res}, res)
        ck = tuple(res)
        opts = self._young.get(ck)
        if opts is not None and opts.resources == res:
            # a hit's names are the entry's (str); its amounts must be ints, not just equal
            for amount in res.values():
                if amount.__class__ is not int:
                    return make_options(resources=res)
            return opts
        for name, amount in res.items():
            if name.__class__ is not str or amount.__class__ is not int:
                return make_options(resources=res)
        return self._miss(ck, {"resources": res}, res)

    def _miss(self, ck: object, fields: dict[str, Any], res: dict[str, int] | None = None) -> TaskOptions:
        """The options of ``fields`` from the old generation, else built; kept in the young one
        (``res``: resources-only fields, keyed by their names: the old entry must match them)."""
        opts = self._old.get(ck)
        if opts is None or (res is not None and opts.resources != res):
            if res is not None:  # (a keyed resource: one key per call; the other fields' defaults)
                opts = TaskOptions(resources=resource_map(res))
            else:
                opts = make_options(**fields)
        young = self._young
        if len(young) >= self._limit:
            self._old = young
            young = self._young = {}
        young[ck] = opts
        return opts


class Task:
    """A task to submit in a batch: ``Task(payload, **task fields)``, validated when built."""

    __slots__ = ("_deadline", "_deps", "_fields", "_key", "_opts", "_payload", "_start")

    def __init__(self, payload: object, **fields: Any) -> None:
        if getattr(type(payload), "cronoq_placeholder", False):  # (tasks/placeholders.py)
            raise InvalidSubmission(
                f"{payload!r} is a placeholder: pass it as an argument of a named task's call"
            )
        self._payload = payload
        self._key = check_key(fields.pop("key", None))
        self._deadline = parse_when(
            "deadline", fields.pop("deadline_in", None), fields.pop("deadline_at", None)
        )
        self._start = parse_when("start", fields.pop("start_in", None), fields.pop("start_at", None))
        self._deps = parse_deps(fields.pop("after", None), fields.pop("deps", None))
        self._opts = make_options(**fields)
        self._fields = fields

    @property
    def payload(self) -> object:
        return self._payload

    @property
    def key(self) -> str | None:
        return self._key

    def __repr__(self) -> str:
        return f"Task(payload={self._payload!r}, key={self._key!r})"
