"""Task fields in process: the options cache and :class:`Task`, the batch member.

The validators, the field table and the submission value live below the runtime in
:mod:`cronoq.spec` (shared with the client, the server and the named tasks); this module holds
what only the in-process scheduler needs.  Fields that many tasks share (pool, kind, priority,
timeout, retry, ...) become one :class:`~cronoq.engine.model.TaskOptions`, cached per distinct
argument set, so submitting the same shape of task again costs a dict lookup instead of a
validation.  Per-task fields (key, deadlines) are validated each time; they are cheap.
"""

from __future__ import annotations

from typing import Any

from cronoq.engine.model import TaskOptions
from cronoq.errors import InvalidSubmission
from cronoq.spec import fields as task_fields
from cronoq.spec.submission import FIELD_NAMES, Submission
from cronoq.spec.validate import (
    PER_TASK_FIELDS,
    Edges,
    TimeSpec,
    check_key,
    make_options,
    parse_deps,
    parse_when,
    resource_map,
    str_map,
)

__all__ = [
    "PER_TASK_FIELDS",
    "OptionsCache",
    "Prepared",
    "Task",
    "TimeSpec",
    "check_key",
    "make_options",
    "parse_deps",
    "parse_when",
    "prepare",
    "refuse_placeholder",
    "resource_map",
    "str_map",
]


_OPTION_NAMES = task_fields.names(option=True)


def _make_options(fields: dict[str, Any]) -> TaskOptions:
    """:func:`make_options` of submit's keywords; one that is no task field is a TypeError
    naming it (and the closest field), not Python's about a ``make_options()`` argument."""
    if not fields.keys() <= _OPTION_NAMES:
        raise task_fields.unexpected(fields, FIELD_NAMES)
    return make_options(**fields)


class OptionsCache:
    """Memoizes :func:`make_options` per distinct (hashable) argument tuple.

    Bounded and approximately least-recently-used, so that many keyed resources (one
    ``"name:key"`` per key, hence one options object per key) do not thrash it: entries live
    in two generations of at most ``limit`` each; a lookup that misses the young one promotes
    the entry from the old one (or builds it), and when the young one is full it becomes the
    old one and the previous old one is dropped.  An entry used at least once per ``limit``
    distinct lookups is never rebuilt; at most ``2 × limit`` entries are held.

    Options with nothing but ``resources`` (the keyed-resource case: ``enqueue(x,
    resources={"customer:42": 1})``) are keyed by the resource name alone when it asks one
    unit, by ``(name, amount)`` for another amount; several names by the tuple of names when
    each asks one unit, else by the names then the amounts: a hit compares nothing, and no
    key tuple is built for the hottest case nor kept.  Such keys (a str; a tuple of str, or of
    str then int) never equal a general key (whose second item is a type).  Two names asking
    one unit each (a stacked keyed task: ``{"customer:42": 1, "api:42": 1}``) are first looked
    up in a front dict by the first name alone, the hit checked by comparing its options'
    resources with the map (no key tuple built per call); it holds the last such options seen
    for each first name (others sharing that name fall back to the tuple key, still cached),
    at most ``limit`` of them (cleared when full).

    The memory bound: an entry is its options (about 700 bytes with its resources map and
    what the core notes on it), so the default ``limit`` of 16,384 holds at most ~23 MB, and
    only while more than 16,384 distinct resource maps (keys) are in use, where the engine
    holds more for the keys and their tasks anyway; a rotation over 10,000 keys never misses
    (with half the limit, a fifth of its lookups would).
    """

    __slots__ = ("_limit", "_old", "_pairs", "_young", "default")

    def __init__(self, limit: int = 16_384) -> None:
        self._young: dict[object, TaskOptions] = {}
        self._old: dict[object, TaskOptions] = {}
        self._pairs: dict[str, TaskOptions] = {}  # two one-unit names: by the first (checked)
        self._limit = limit
        self.default = make_options()

    def get(self, fields: dict[str, Any]) -> TaskOptions:
        if not fields:
            return self.default
        if len(fields) == 1:
            res = fields.get("resources")
            if res.__class__ is dict and res:
                n = len(res)
                if n == 1:  # (_resources_only's first case inlined: the hottest one)
                    (ck,) = res  # (its one name, and then its amount: no items() call)
                    amount = res[ck]
                    if amount.__class__ is int and amount == 1 and ck.__class__ is str:
                        opts = self._young.get(ck)  # (one unit: keyed by the name alone)
                        return opts if opts is not None else self._miss(ck, fields, res)
                elif n == 2:  # (two names asking one unit each: the front dict, checked)
                    a, b = res
                    x = res[a]
                    y = res[b]
                    if x.__class__ is int and y.__class__ is int and x == 1 and y == 1:
                        opts = self._pairs.get(a)  # (a non-str name: no hit)
                        # (its resources equal to the map: the same names, each asking 1 unit)
                        if opts is not None and opts.resources == res:
                            return opts
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
            return _make_options(fields)
        return opts if opts is not None else self._miss(ck, fields)

    def of(self, sub: Submission) -> TaskOptions:
        """The options of a validated submission (the server's way in), shared per distinct
        :meth:`~cronoq.spec.submission.Submission.option_key`."""
        ck = sub.option_key()
        if ck is None:
            return self.default
        try:
            opts = self._young.get(ck)
        except TypeError:  # (an unhashable retry policy)
            return sub.options()
        return opts if opts is not None else self._miss(ck, {}, sub=sub)

    def _resources_only(self, res: dict[str, int]) -> TaskOptions:
        """Options with only ``resources`` (the keyed-resource hot path, see the class doc):
        keyed by the name for one unit, else by ``(name, amount)``; several names asking one
        unit each by the tuple of names, else by the names then the amounts.  (:meth:`get` does
        the one-name, one-unit case inline.)"""
        ck: object
        if len(res) == 1:
            ((name, amount),) = res.items()
            if name.__class__ is not str or amount.__class__ is not int:
                return make_options(resources=res)  # (validated, or refused, each time)
            ck = name if amount == 1 else (name, amount)
            opts = self._young.get(ck)
            return opts if opts is not None else self._miss(ck, {"resources": res}, res)
        ones = True
        for amount in res.values():
            if amount.__class__ is not int:
                return make_options(resources=res)  # (validated, or refused, each time)
            if amount != 1:
                ones = False
        ck = tuple(res) if ones else (*res, *res.values())  # (then a hit compares nothing)
        opts = self._young.get(ck)
        if opts is None:
            for name in res:
                if name.__class__ is not str:
                    return make_options(resources=res)
            opts = self._miss(ck, {"resources": res}, res)
        if ones and len(res) == 2:  # (noted for get's front dict: the next call finds it there)
            pairs = self._pairs
            if len(pairs) >= self._limit:
                pairs.clear()
            pairs[next(iter(res))] = opts
        return opts

    def _miss(
        self,
        ck: object,
        fields: dict[str, Any],
        res: dict[str, int] | None = None,
        sub: Submission | None = None,
    ) -> TaskOptions:
        """The options of ``fields`` (or of ``sub``) from the old generation, else built; kept
        in the young one (``res``: resources-only fields, keyed by their names: the old entry
        must match them)."""
        opts = self._old.get(ck)
        if opts is None or (res is not None and opts.resources != res):
            if res is not None:  # (a keyed resource: one key per call; the other fields' defaults)
                # (names are str and amounts int already: a copy unless an amount is < 1)
                ok = min(res.values()) >= 1
                opts = TaskOptions(resources=dict(res) if ok else resource_map(res))
            elif sub is not None:
                opts = sub.options()
            else:
                opts = _make_options(fields)
        young = self._young
        if len(young) >= self._limit:
            self._old = young
            young = self._young = {}
        young[ck] = opts
        return opts


#: a submission ready for the engine: options, key, deadline, start, edges
Prepared = tuple[TaskOptions, str | None, TimeSpec | None, TimeSpec | None, Edges | None]


def prepare(cache: OptionsCache, fields: dict[str, Any] | Submission) -> Prepared:
    """A submission's parts for ``Core.submit``: from a validated :class:`Submission` (the
    server's), or from ``Scheduler.submit``'s keyword arguments (consumed: validated here with
    :mod:`cronoq.spec.validate`, the options from ``cache``)."""
    if isinstance(fields, Submission):
        return cache.of(fields), fields.key, fields.deadline, fields.start, fields.deps
    if not fields:
        return cache.default, None, None, None, None
    key = deadline = start = deps = None
    if "key" in fields:
        key = check_key(fields.pop("key"))
    if "deadline_in" in fields or "deadline_at" in fields:
        deadline = parse_when("deadline", fields.pop("deadline_in", None), fields.pop("deadline_at", None))
    if "start_in" in fields or "start_at" in fields:
        start = parse_when("start", fields.pop("start_in", None), fields.pop("start_at", None))
    if "after" in fields or "deps" in fields:
        deps = parse_deps(fields.pop("after", None), fields.pop("deps", None))
    return cache.get(fields), key, deadline, start, deps


#: payload types that are no placeholder, known without the attribute lookup (a miss on a type
#: raises and clears an AttributeError inside getattr: ~5x the cost of this set test)
_PLAIN_TYPES: frozenset[type] = frozenset({tuple, dict, list, str, bytes, int, float, bool, type(None)})


def refuse_placeholder(payload: object) -> None:
    """A placeholder (tasks/placeholders.py) is no payload: ``InvalidSubmission`` saying where
    it goes instead (one attribute lookup: the payload itself, not inside it)."""
    tp = type(payload)
    if tp not in _PLAIN_TYPES and getattr(tp, "cronoq_placeholder", False):
        raise InvalidSubmission(
            f"{payload!r} is a placeholder: pass it as an argument of a named task's call"
        )


class Task:
    """A task to submit in a batch: ``Task(payload, **task fields)``, validated when built
    (one :class:`~cronoq.spec.submission.Submission` and its options)."""

    __slots__ = ("_opts", "_sub")

    def __init__(self, payload: object, **fields: Any) -> None:
        refuse_placeholder(payload)
        self._sub = sub = Submission.from_kwargs(payload, **fields)
        self._opts = sub.options() if fields else TaskOptions()  # (the defaults: a batch's usual case)

    @classmethod
    def of(cls, sub: Submission, opts: TaskOptions | None = None) -> Task:
        """The batch member of an already validated submission (``opts``: its options, if
        known: e.g. shared from a cache)."""
        t = cls.__new__(cls)
        t._sub = sub
        t._opts = sub.options() if opts is None else opts
        return t

    @property
    def payload(self) -> object:
        return self._sub.payload

    @property
    def key(self) -> str | None:
        return self._sub.key

    @property
    def submission(self) -> Submission:
        return self._sub

    def __repr__(self) -> str:
        return f"Task(payload={self._sub.payload!r}, key={self._sub.key!r})"
