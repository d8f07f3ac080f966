"""The task fields, declared once (docs/reference/behaviour.md#task-fields).

Theory of operation
-------------------
A task field travels through five surfaces: the in-process keyword (``Scheduler.submit``,
``Task``, ``Client.submit``), the ``cronoq.v1.TaskSpec`` wire field, the HTTP JSON body, the
OpenAPI request schema and the ``cronoq submit`` option.  :data:`TASK_FIELDS` says, for every
field, what it is called on each of them, its type and documented default, and which
:data:`shape <FieldShape>` its value has on the wire side (how the JSON parser and the OpenAPI
schema treat it).  The surfaces derive what they can from it (the sets of accepted names, the
loops over fields of one shape, the OpenAPI properties); ``tests/architecture/test_task_fields.py``
checks every surface against it, including the code that still spells a field out by hand.

Two fields have no wire field of their own: ``after`` travels as success edges in ``deps``.
``option`` marks the fields shared by many tasks (one ``TaskOptions``, built by
``spec.validate.make_options``); the others (key, times, edges) are per task.

This module is pure data: it imports nothing, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["TASK_FIELDS", "FieldShape", "TaskField", "by_name", "names", "of_shape", "unexpected"]

#: what a field's value is on the wire side (JSON and OpenAPI):
#: ``string`` a plain string; ``priority`` a class name or 0..3; ``seconds`` a duration (``*_s``);
#: ``unix_ns`` an instant in Unix ns (an integer or digit string); ``on_miss`` a miss policy name;
#: ``retry`` a RetryPolicy object; ``after`` ids/keys (success edges); ``deps`` Dep objects;
#: ``resources`` name → units; ``str_map`` str → str (values stringified)
FieldShape = Literal[
    "string", "priority", "seconds", "unix_ns", "on_miss", "retry", "after", "deps", "resources", "str_map"
]


@dataclass(frozen=True, slots=True)
class TaskField:
    """One task field on every surface (see the module docstring)."""

    name: str  #: the in-process keyword
    type: str  #: its Python type, as ``make_options``/``Task`` annotate it (without ``| None``)
    default: str  #: the documented default (the behaviour reference's table)
    wire: str  #: the ``TaskSpec`` field that carries it
    json: str  #: its name in an HTTP JSON body (and in the OpenAPI ``TaskSpec`` schema)
    shape: FieldShape
    cli: str | None  #: the ``cronoq submit`` option, if it has one
    option: bool  #: shared by many tasks (``TaskOptions``) rather than per task


def _f(
    name: str,
    type: str,
    default: str,
    wire: str,
    shape: FieldShape,
    *,
    json: str | None = None,
    cli: str | None = None,
    option: bool = True,
) -> TaskField:
    return TaskField(name, type, default, wire, wire if json is None else json, shape, cli, option)


#: every task field of docs/reference/behaviour.md#task-fields but the payload, in its order
TASK_FIELDS: tuple[TaskField, ...] = (
    _f("pool", "str", "the default pool", "pool", "string", cli="--pool"),
    _f("kind", "str", '`"default"`', "kind", "string", cli="--kind"),
    _f("priority", "Priority | int | str", "`normal`", "priority", "priority", cli="--priority"),
    _f("key", "str", "none", "key", "string", cli="--key", option=False),
    _f("deadline_in", "float", "none", "deadline_in_s", "seconds", cli="--deadline-in", option=False),
    _f("deadline_at", "float | datetime", "none", "deadline_unix_ns", "unix_ns", option=False),
    _f("start_in", "float", "none", "start_in_s", "seconds", cli="--start-in", option=False),
    _f("start_at", "float | datetime", "none", "start_unix_ns", "unix_ns", option=False),
    _f("tolerance", "float", "1.0 s", "tolerance_s", "seconds"),
    _f("on_miss", "str", '`"run_late"`', "on_miss", "on_miss"),
    _f("duration_hint", "float", "learned", "duration_hint_s", "seconds"),
    _f("timeout", "float", "none", "timeout_s", "seconds", cli="--timeout"),
    # (the CLI sets only the attempts: --max-attempts)
    _f("retry", "RetryPolicy", "the pool's", "retry", "retry", cli="--max-attempts"),
    _f(
        "after",
        "int | str | list[int | str]",
        "none",
        "deps",
        "after",
        json="after",
        cli="--after",
        option=False,
    ),
    _f("deps", "list[Dep]", "none", "deps", "deps", option=False),
    _f("resources", "Mapping[str, int]", "none", "resources", "resources"),
    _f("tags", "Mapping[str, object]", "none", "tags", "str_map", cli="--tag"),
    _f("labels", "Mapping[str, str]", "none", "labels", "str_map", cli="--label"),
    _f("tenant", "str", "none", "tenant", "string", cli="--tenant"),
)


def names(*, option: bool | None = None) -> frozenset[str]:
    """The in-process names: all, or only the shared options (``option=True``) or the
    per-task fields (``option=False``)."""
    return frozenset(f.name for f in TASK_FIELDS if option is None or f.option is option)


def unexpected(given: Iterable[str], known: frozenset[str]) -> TypeError:
    """The TypeError for the first of ``given`` not in ``known`` (a misspelt keyword such as
    ``submit(1, priorty="high")``), suggesting the closest known name."""
    import difflib  # (lazily: an error path)

    name = (sorted(set(given) - known) or sorted(given))[0]
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return TypeError(f"unexpected task field {name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))


def of_shape(*shapes: FieldShape) -> tuple[TaskField, ...]:
    """The fields of these shapes, in declaration order."""
    return tuple(f for f in TASK_FIELDS if f.shape in shapes)


def by_name(name: str) -> TaskField:
    """The field with in-process name ``name`` (KeyError if none)."""
    for f in TASK_FIELDS:
        if f.name == name:
            return f
    raise KeyError(name)
