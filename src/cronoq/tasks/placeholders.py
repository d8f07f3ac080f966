"""Placeholders: a parent's output (or outcome) as an argument of a named task's call
(docs/concepts/dependencies.md#outputs-on-edges).

Theory of operation
-------------------
``spec.output``, ``cronoq.output_of(x)`` and ``cronoq.outcome_of(x)`` make a
:class:`Placeholder`: a parent (a spec, a handle, an id or a key) and a mode.  A call whose
arguments hold placeholders (anywhere inside lists, tuples and dicts) is encoded by
:func:`encode_call`: each distinct placeholder becomes one dependency edge of the call, after
the edges it was given (``after``, then ``deps``) - ``success`` for an output, ``complete``
for an outcome - and, in the payload, the JSON marker ``{"$output": i}`` or
``{"$outcome": i}``, ``i`` being that edge's position among the task's edges.  Arguments
holding a marker are not converted at submission (their other values must be JSON); the
substituted value is, when the child runs.

Edges are resolved when the call is submitted (:func:`resolve_edges`): a spec in the same batch
by its key (a keyless one gets a generated key), a spec submitted before by its id, a handle
by its id, an id or key as given; a spec neither in the batch nor submitted is
``SubmitError("invalid")`` naming it, before anything is submitted.

Before the child runs, :func:`substitute` replaces each marker with its parent's output (the
JSON the parent returned) or its :class:`~cronoq.Outcome` as JSON; the child's binding then
converts it into the annotated type, so a ``datetime``, dataclass or pydantic model arrives
as such.  An output that is not JSON fails the child permanently, naming the parent.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from cronoq.engine.model import ON_COMPLETE, ON_SUCCESS, Dep
from cronoq.errors import InvalidSubmission, Permanent
from cronoq.outcome import Outcome
from cronoq.runtime.handles import TaskHandle
from cronoq.tasks.convert import is_json

if TYPE_CHECKING:
    from cronoq.tasks.binding import Binding, Payload
    from cronoq.tasks.targets import NamedTask

__all__ = [
    "Placeholder",
    "encode_call",
    "has_marker",
    "has_placeholder",
    "no_edge_message",
    "outcome_of",
    "output_of",
    "substitute",
]

R = TypeVar("R")

OUTPUT, OUTCOME = "$output", "$outcome"
_PREFIX = uuid.uuid4().hex[:16]
_SEQ = itertools.count(1)
_OUTSIDE = "a placeholder ({!r}) is only an argument of a named task's call (t.spec / t.submit)"


class _NoAttribute(TypeError, AttributeError):
    """An attribute of a placeholder: a TypeError (how any other use is refused) that
    ``hasattr`` and ``getattr(p, name, default)`` take for the missing attribute it is."""


class Placeholder:
    """A parent's output or outcome, to be passed to a named task's call (see the module
    docstring).  It has no value of its own: using it any other way is a TypeError."""

    __slots__ = ("mode", "source")
    cronoq_placeholder = True  # (what cronoq.Task looks for: a placeholder is no payload)

    def __init__(self, source: object, mode: str) -> None:
        if isinstance(source, bool) or not isinstance(source, (int, str, TaskHandle)):
            from cronoq.tasks.targets import NamedTask

            if not isinstance(source, NamedTask):
                raise InvalidSubmission(
                    f"a placeholder's parent is a spec, a TaskHandle, a task id or a key (got {source!r})"
                )
        if isinstance(source, int) and not isinstance(source, bool) and source < 1:
            raise InvalidSubmission(f"a task id is >= 1 (got {source})")
        if isinstance(source, str) and not source:
            raise InvalidSubmission("a task key is a non-empty string")
        self.source = source
        self.mode = mode

    @classmethod
    def of_spec(cls, spec: NamedTask, mode: str) -> Placeholder:
        """``spec.output``: a spec needs none of the checks of ``__init__`` (the hot path of a
        wide fan-in builds one per member)."""
        p = object.__new__(cls)
        p.source = spec
        p.mode = mode
        return p

    def _refuse(self, *_: Any) -> Any:
        raise TypeError(_OUTSIDE.format(self))

    __bool__ = __iter__ = __len__ = __int__ = __float__ = __index__ = _refuse
    # as text (an f-string, str(), %) it would have become its repr, sent to the child as data
    __str__ = __format__ = __getitem__ = __contains__ = __call__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = _refuse
    __neg__ = __pos__ = __abs__ = __round__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def __getattr__(self, name: str) -> Any:
        """``p.id`` of a parent's output: not known until the parent ran (a TypeError naming
        the placeholder, an AttributeError too, so ``hasattr`` and ``getattr`` with a default
        still answer a probe); dunder probes (copy, pickle) stay plain AttributeErrors."""
        if name.startswith("__"):
            raise AttributeError(name)
        raise _NoAttribute(_OUTSIDE.format(self) + f": it has no attribute {name!r} before the parent ran")

    def __repr__(self) -> str:
        fn = "output_of" if self.mode == OUTPUT else "outcome_of"
        return f"{fn}({self.source!r})"


@overload
def output_of(x: NamedTask[R]) -> R: ...
@overload
def output_of(x: TaskHandle[R]) -> R: ...
@overload
def output_of(x: int | str) -> Any: ...
def output_of(x: object) -> Any:
    """A placeholder for the output of ``x`` (a spec, a :class:`~cronoq.TaskHandle`, a task id
    or a key): the call it is passed to depends on ``x`` succeeding and receives its output."""
    return Placeholder(x, OUTPUT)


def outcome_of(x: object) -> Outcome:
    """A placeholder for how ``x`` ended, a :class:`~cronoq.Outcome`: the call it is passed to
    runs once ``x`` has ended, however it ended (a ``complete`` edge)."""
    return Placeholder(x, OUTCOME)  # type: ignore[return-value]


def has_placeholder(value: object, depth: int = 0) -> bool:
    """Whether ``value`` holds a placeholder (inside lists, tuples and dicts)."""
    tp = type(value)
    if tp is Placeholder:
        return True
    if depth > 100:
        return False
    if tp is list or tp is tuple:
        return any(has_placeholder(v, depth + 1) for v in value)  # type: ignore[attr-defined]
    if tp is dict:
        return any(has_placeholder(v, depth + 1) for v in value.values())  # type: ignore[attr-defined]
    return False


def _mark(value: object, holes: dict[tuple[str, int], tuple[int, Placeholder]], base: int) -> object:
    """``value`` with each placeholder replaced by its marker (``holes`` collects them, by mode
    and parent: the same parent twice is one edge)."""
    tp = type(value)
    if tp is Placeholder:
        p: Any = value
        k = (p.mode, id(p.source))
        found = holes.get(k)
        if found is None:
            found = holes[k] = (len(holes), p)
        return {p.mode: base + found[0]}
    if tp is list or tp is tuple:
        return [_mark(v, holes, base) for v in value]  # type: ignore[attr-defined]
    if tp is dict:
        return {k: _mark(v, holes, base) for k, v in value.items()}  # type: ignore[attr-defined]
    return value


def encode_call(
    binding: Binding, args: tuple[Any, ...], kwargs: dict[str, Any], n_edges: int
) -> tuple[Payload, list[Placeholder]]:
    """The payload of a call holding placeholders, and its placeholders in edge order (the
    first one is edge ``n_edges``: the call's own edges come first)."""
    holes: dict[tuple[str, int], tuple[int, Placeholder]] = {}
    in_args = [has_placeholder(v) for v in args]
    in_kw = {k: has_placeholder(v) for k, v in kwargs.items()}
    margs = tuple(_mark(v, holes, n_edges) if m else v for v, m in zip(args, in_args))
    mkw = {k: _mark(v, holes, n_edges) if in_kw[k] else v for k, v in kwargs.items()}
    held = [x for x, m in zip(margs, in_args) if m] + [mkw[k] for k in kwargs if in_kw[k]]
    for v in held:
        if not is_json(v):
            raise InvalidSubmission(
                f"task '{binding.name}': an argument holding a placeholder must otherwise be JSON (got {v!r})"
            )
    skip = {id(v) for v in held}
    return binding.encode_holes(margs, mkw, lambda v: id(v) in skip), [p for _, p in holes.values()]


def _target(p: Placeholder, batch: Collection[int]) -> int | str:
    """The edge target of ``p``; ``batch``: the ``id()`` of the batch's specs."""
    src = p.source
    if id(src) in batch:  # (the common case first: a spec of this batch)
        spec: Any = src
        if spec.key is None:  # a unique key: the process's random prefix and a counter
            spec.set_key(f"{spec.fields.get('kind', 'task')}:{_PREFIX}-{next(_SEQ)}")
        return str(spec.key)
    if isinstance(src, TaskHandle):
        return int(src.id)
    if isinstance(src, (int, str)):
        return src
    spec = src
    if spec.submitted_id is not None:
        return int(spec.submitted_id)
    raise InvalidSubmission(f"{p!r}: that spec is neither in this batch nor submitted: {spec!r}")


def resolve_edges(spec: NamedTask, batch: Collection[int]) -> None:
    """Give ``spec`` the edges of its placeholders (see the module docstring); idempotent.
    ``batch``: the ``id()`` of every spec of the batch."""
    spec.set_edges([(_target(p, batch), ON_SUCCESS if p.mode == OUTPUT else ON_COMPLETE) for p in spec.holes])


def edges_for(holes: Sequence[Placeholder]) -> list[Dep]:
    """The edges of a single call's placeholders (no batch: specs must have been submitted)."""
    return [Dep(_target(p, ()), on="success" if p.mode == OUTPUT else "complete") for p in holes]


def no_edge_message(name: str, mode: str, i: int) -> str:
    """The refusal of marker ``{mode: i}`` in task ``name``'s payload that names no edge."""
    return f"task '{name}': placeholder {{{mode!r}: {i}}} names no dependency edge"


def _is_marker(value: dict[str, Any]) -> bool:
    if len(value) != 1:
        return False
    ((k, v),) = value.items()
    return k in (OUTPUT, OUTCOME) and type(v) is int


def has_marker(payload: object, depth: int = 0) -> bool:
    """True when an encoded ``payload`` holds a placeholder's marker (it needs its parents)."""
    tp = type(payload)
    if depth > 100:
        return False
    if tp is dict:
        d: Any = payload
        return _is_marker(d) or any(has_marker(x, depth + 1) for x in d.values())
    if tp is list or tp is tuple:
        return any(has_marker(x, depth + 1) for x in payload)  # type: ignore[attr-defined]
    return False


def substitute(payload: object, parents: Sequence[Outcome], name: str) -> object:
    """``payload`` with each marker replaced by its parent's output or outcome (a copy of the
    parts that change); Permanent if a marker names no edge or an output is not JSON."""

    def walk(v: object, depth: int) -> object:
        tp = type(v)
        if tp is dict:
            d: Any = v
            if _is_marker(d):
                ((mode, i),) = d.items()
                return _value(mode, i)
            return {k: walk(x, depth + 1) for k, x in d.items()} if depth < 100 else v
        if tp is list or tp is tuple:
            return [walk(x, depth + 1) for x in v] if depth < 100 else v  # type: ignore[attr-defined]
        return v

    def _value(mode: str, i: int) -> object:
        if not 0 <= i < len(parents):
            raise Permanent(no_edge_message(name, mode, i))
        o = parents[i]
        if mode == OUTCOME:
            out = o.to_json()
            if not is_json(o.output):
                raise Permanent(
                    f"task '{name}': the output of parent {o.id} is not JSON ({type(o.output).__name__})"
                )
            return out
        if not o.succeeded:  # (never on a success edge; a replay's parent may have failed)
            raise Permanent(
                f"task '{name}': parent {o.id} ended {o.status}, with no output to pass (replay it first)"
            )
        if not is_json(o.output):
            raise Permanent(
                f"task '{name}': the output of parent {o.id} is not JSON ({type(o.output).__name__})"
            )
        return o.output

    return walk(payload, 0)
