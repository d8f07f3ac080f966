"""One submission value: :class:`Submission`, a task as every surface hands it on.

Theory of operation
-------------------
A task arrives as keyword arguments (``Scheduler.submit``, ``Task``, ``Client.submit``, a named
task's call) or as a wire ``cronoq.v1.TaskSpec`` (the gRPC handlers, and the HTTP handlers,
whose JSON bodies become a ``TaskSpec`` first).  Each edge builds one :class:`Submission`
once, with a constructor derived from the field table (:mod:`cronoq.spec.fields`):
:meth:`Submission.from_kwargs` runs the validators of :mod:`cronoq.spec.validate` on the
keyword arguments, :meth:`Submission.from_wire` reads a ``TaskSpec`` (:mod:`cronoq.spec.wire`),
and :meth:`Submission.to_wire` writes one.  What travels on is that value: the client sends
``to_wire()``, the server hands ``from_wire(...)`` to the scheduler, the scheduler takes the
engine's options from it (:meth:`Submission.options`).

A field not given is ``None`` (so the wire leaves it unset and the server applies its pool's
defaults); a given one is held in its canonical form: priorities, miss policies and edge
conditions as the engine's numbers, durations as integer ns, instants as :class:`TimeSpec`
(relative ns, or exact Unix ns), ``after``/``deps`` as one list of edges, mappings copied.

The value is a ``NamedTuple``: immutable, and cheap to build (``Task(payload)`` in a batch
of thousands builds one each).  An in-process submit with option fields only does not build
one at all: the scheduler's options cache (``runtime/task.py OptionsCache``) answers it from
the keyword arguments directly, the fast path.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, NamedTuple

from cronoq.engine.model import RUN_LATE, Priority, RetryPolicy, TaskOptions, parse_on_miss
from cronoq.engine.time import NS, check_seconds
from cronoq.spec import fields as task_fields
from cronoq.spec.validate import (
    DEFAULT_TOLERANCE_NS,
    Edges,
    TimeSpec,
    check_key,
    check_retry,
    check_string,
    parse_deps,
    parse_when,
    resource_map,
    str_map,
)

if TYPE_CHECKING:
    from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

__all__ = ["FIELD_NAMES", "Submission"]

#: the keyword arguments :meth:`Submission.from_kwargs` takes besides the payload
FIELD_NAMES = task_fields.names()

_NORMAL = int(Priority.NORMAL)
#: marks an options-cache key made from a Submission (:meth:`Submission.option_key`)
_OPTION_KEY = object()
_NO_OPTIONS = (None,) * 12
_tuple_new = tuple.__new__


def _ns(name: str, value: object) -> int | None:
    return None if value is None else round(check_seconds(name, value) * NS)


class Submission(NamedTuple):
    """A validated task: its payload and every task field (None: not given).  See the module
    docstring; build it with :meth:`from_kwargs` or :meth:`from_wire`."""

    payload: object = None
    pool: str | None = None
    kind: str | None = None
    #: the engine's class (``Priority`` value, 0 = critical)
    priority: int | None = None
    key: str | None = None
    deadline: TimeSpec | None = None
    start: TimeSpec | None = None
    #: durations in ns
    tolerance: int | None = None
    #: the engine's miss policy number
    on_miss: int | None = None
    duration_hint: int | None = None
    timeout: int | None = None
    retry: RetryPolicy | None = None
    #: ``after`` and ``deps`` as one list of (id or key, engine condition)
    deps: Edges | None = None
    resources: dict[str, int] | None = None
    tags: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    tenant: str | None = None

    @classmethod
    def from_kwargs(cls, payload: object = None, /, **fields: Any) -> Submission:
        """Validate ``payload`` and the task fields of docs/reference/behaviour.md#task-fields
        (keyword arguments as ``Scheduler.submit`` takes them).  An unknown field is a
        ``TypeError``; a bad value a ``ValueError`` with the reference's message."""
        if not fields:  # (a payload only: the common case of a batch member)
            return _tuple_new(cls, (payload, *_NO_OPTIONS, None, None, None, None))
        if not fields.keys() <= FIELD_NAMES:
            raise task_fields.unexpected(fields, FIELD_NAMES)
        # (each validator runs only for the fields given: a call costs more than a lookup)
        has = fields.__contains__
        get = fields.get
        key = check_key(fields["key"]) if has("key") else None
        deadline = (
            parse_when("deadline", get("deadline_in"), get("deadline_at"))
            if has("deadline_in") or has("deadline_at")
            else None
        )
        start = (
            parse_when("start", get("start_in"), get("start_at"))
            if has("start_in") or has("start_at")
            else None
        )
        deps = parse_deps(get("after"), get("deps")) if has("after") or has("deps") else None
        pool = check_string("pool", fields["pool"]) if has("pool") else None
        kind = check_string("kind", fields["kind"], empty=False) if has("kind") else None
        priority = get("priority")
        prio = None if priority is None else int(Priority.parse(priority))
        tolerance = _ns("tolerance", get("tolerance"))
        on_miss = get("on_miss")
        miss = None if on_miss is None else parse_on_miss(on_miss)
        hint = _ns("duration_hint", get("duration_hint"))
        timeout = _ns("timeout", get("timeout"))
        retry = check_retry(fields["retry"]) if has("retry") else None
        resources = get("resources")
        res = None if resources is None else resource_map(resources)
        tenant = check_string("tenant", fields["tenant"]) if has("tenant") else None
        tags = str_map("tags", fields["tags"]) if has("tags") else None
        labels = str_map("labels", fields["labels"]) if has("labels") else None
        return _tuple_new(  # (the tuple as is: no keyword defaults to fill in)
            cls,
            (
                payload,
                pool,
                kind,
                prio,
                key,
                deadline,
                start,
                tolerance,
                miss,
                hint,
                timeout,
                retry,
                deps,
                res,
                tags,
                labels,
                tenant,
            ),
        )

    @classmethod
    def from_wire(cls, spec: pb.TaskSpec, payload: object = None) -> Submission:
        """The submission a wire ``TaskSpec`` carries, ``payload`` standing for its payload
        (the server's ``Blob`` of the bytes and content type); see :func:`cronoq.spec.wire.from_wire`.
        Needs protobuf."""
        from cronoq.spec import wire

        return wire.from_wire(spec, payload)

    def to_wire(self, content_type: str | None = None) -> pb.TaskSpec:
        """This submission as a wire ``TaskSpec`` (the payload encoded, ``content_type``
        overriding the encoding's); see :func:`cronoq.spec.wire.to_wire`.  Needs protobuf."""
        from cronoq.spec import wire

        return wire.to_wire(self, content_type)

    def options(self) -> TaskOptions:
        """The engine's options of this task (unset fields: their defaults), a new object."""
        _, pool, kind, prio, _, _, _, tol, miss, hint, timeout, retry, _, res, tags, labels, tenant = self
        return TaskOptions(  # (positional: TaskOptions' order)
            pool,
            kind or "default",
            _NORMAL if prio is None else prio,
            timeout,
            retry,
            hint,
            DEFAULT_TOLERANCE_NS if tol is None else tol,
            RUN_LATE if miss is None else miss,
            tags,
            labels,
            tenant,
            res,
        )

    def option_key(self) -> Hashable | None:
        """A key equal for submissions whose :meth:`options` are equal (for a cache of shared
        options), None when no option field is given (the defaults); an unhashable retry
        policy makes it unhashable."""
        res, tags, labels = self.resources, self.tags, self.labels
        key = (
            self.pool,
            self.kind,
            self.priority,
            self.tolerance,
            self.on_miss,
            self.duration_hint,
            self.timeout,
            self.retry,
            self.tenant,
            None if res is None else tuple(res.items()),
            None if tags is None else tuple(tags.items()),
            None if labels is None else tuple(labels.items()),
        )
        return None if key == _NO_OPTIONS else (_OPTION_KEY, *key)
