"""A :class:`~cronoq.spec.submission.Submission` ↔ ``cronoq.v1.TaskSpec``, and the wire's enum
conversions (docs/reference/behaviour.md#server-details).

Theory of operation
-------------------
:func:`to_wire` is the client's way out: priority classes to the wire ``Priority``, durations
(ns) to the ``*_s`` doubles, instants to ``*_unix_ns`` (exact integers), edges to ``deps`` with
``EdgeCond``, a :class:`~cronoq.RetryPolicy` to the wire ``RetryPolicy``; an unset field stays
unset, so the server applies its pool's defaults.  :func:`from_wire` is the server's way in,
the reverse: ``0``/empty is "not given", a value this code does not know is refused.  Both
map enums by name through :mod:`cronoq.proto.enums` (nothing here spells a wire number).

Refusals are the submission error family of :mod:`cronoq.spec.validate`: an
:class:`~cronoq.errors.InvalidSubmission` (``SubmitError`` ``invalid``, a ``ValueError``)
naming the wire field.  The request limits (counts, lengths, message size) are the server's
and are checked before (``server/request_limits.py``).

Needs protobuf (the ``client`` or ``server`` extra).
"""

from __future__ import annotations

import math

from cronoq.engine.model import ON_SUCCESS, Priority, RetryPolicy, check_stored_text
from cronoq.engine.time import NS, check_seconds, to_ns
from cronoq.errors import InvalidSubmission
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.spec import fields as task_fields
from cronoq.spec.payloads import encode_payload
from cronoq.spec.submission import Submission
from cronoq.spec.validate import TimeSpec, check_key

__all__ = [
    "INT64_MAX",
    "OVERLAPS",
    "UINT32_MAX",
    "UINT64_MAX",
    "from_wire",
    "overlap_from_wire",
    "overlap_to_wire",
    "priority_from_wire",
    "priority_to_wire",
    "retry_from_wire",
    "retry_to_wire",
    "status_from_wire",
    "status_to_wire",
    "task_ref",
    "to_wire",
]

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1

# ---------------------------------------------------------------------------------------------
# Enums

#: Wire Overlap values by policy name (docs/reference/behaviour.md#cron).
OVERLAPS: dict[str, int] = dict(enums.OVERLAP.numbers)


def status_from_wire(value: int) -> str:
    """Lower-case status name (``"succeeded"``); ``"unspecified"`` for 0, ``"unknown(n)"`` for
    values newer than this code."""
    if value == 0:
        return "unspecified"
    return enums.TASK_STATUS.names.get(value, f"unknown({value})")


def status_to_wire(value: object) -> int:
    """A status name (case-insensitive) or wire value → wire ``TaskStatus``."""
    if isinstance(value, str):
        v = enums.TASK_STATUS.numbers.get(value.lower())
        if v is None:
            raise ValueError(f"unknown status {value!r}")
        return v
    if isinstance(value, int) and not isinstance(value, bool) and value in enums.TASK_STATUS.names:
        return value
    raise ValueError(f"unknown status {value!r}")


def priority_to_wire(value: object) -> int:
    """``Priority``, int 0..3 or name → wire ``Priority`` (CRITICAL=1 .. LOW=4)."""
    return enums.PRIORITY_TO_WIRE[Priority.parse(value)]


def priority_from_wire(value: int) -> str:
    """Lower-case class name; ``"normal"`` for UNSPECIFIED (the server default)."""
    if value == pb.PRIORITY_UNSPECIFIED:
        return "normal"
    name = enums.PRIORITY.names.get(value)
    return f"unknown({value})" if name is None else name


def overlap_to_wire(value: object) -> int:
    if isinstance(value, str) and value in OVERLAPS:
        return OVERLAPS[value]
    raise ValueError("overlap must be 'skip', 'allow', 'queue' or 'queue_on_success'")


def overlap_from_wire(value: int) -> str:
    """The overlap policy's name; ``"skip"`` for UNSPECIFIED, ``"unknown(n)"`` for newer values."""
    if value == pb.OVERLAP_UNSPECIFIED:
        return "skip"
    return enums.OVERLAP.names.get(value, f"unknown({value})")


# ---------------------------------------------------------------------------------------------
# Refs and retry policies


def task_ref(ref: object) -> pb.TaskRef:
    """A task id (int ≥ 1), a key (non-empty str), or anything with an int ``id`` attribute
    (``Submitted``, ``TaskInfo``, ``Event``) → ``TaskRef``."""
    if not isinstance(ref, (int, str)):
        rid = getattr(ref, "id", None)
        if isinstance(rid, int) and not isinstance(rid, bool):
            ref = rid
    if isinstance(ref, bool) or not isinstance(ref, (int, str)):
        raise ValueError(f"a task reference is a task id (int >= 1) or a key (str), got {ref!r}")
    if isinstance(ref, int):
        if not 1 <= ref <= UINT64_MAX:
            raise ValueError(f"task id out of range (got {ref})")
        return pb.TaskRef(id=ref)
    if not ref:
        raise ValueError("a task key must be a non-empty string")
    return pb.TaskRef(key=ref)


# The wire reads 0 in these fields as "the default"; an explicit 0 s is sent as 1 ns instead.
_TINY = 1e-9


def retry_to_wire(policy: RetryPolicy) -> pb.RetryPolicy:
    """A :class:`~cronoq.RetryPolicy` → wire ``RetryPolicy``.

    On the wire a zero ``initial_backoff_s``/``max_backoff_s`` means "default", so a policy
    that asks for no backoff is sent with 1 ns, which the server treats as immediate.
    """
    if not isinstance(policy, RetryPolicy):
        raise ValueError(f"retry must be a RetryPolicy (got {policy!r})")
    if policy.max_attempts > UINT32_MAX:
        raise ValueError(f"max_attempts must be <= {UINT32_MAX} (got {policy.max_attempts})")
    return pb.RetryPolicy(
        max_attempts=policy.max_attempts,
        initial_backoff_s=policy.initial_backoff or _TINY,
        multiplier=policy.multiplier,
        max_backoff_s=policy.max_backoff or _TINY,
        jitter=policy.jitter,
    )


def retry_from_wire(r: pb.RetryPolicy) -> RetryPolicy:
    """Zero fields mean that field's default (docs/reference/behaviour.md#server-details)."""
    try:
        return RetryPolicy(
            max_attempts=r.max_attempts or 3,
            initial_backoff=r.initial_backoff_s or 1.0,
            multiplier=r.multiplier or 2.0,
            max_backoff=r.max_backoff_s or 60.0,
            jitter=r.jitter,
        )
    except ValueError as e:
        raise InvalidSubmission(str(e)) from None


# ---------------------------------------------------------------------------------------------
# Submissions

#: the option fields that are durations: (Submission attribute, wire field)
_SECONDS_OPTIONS = tuple((f.name, f.wire) for f in task_fields.of_shape("seconds") if f.option)
#: the string fields ("" on the wire is unset): pool, kind, key, tenant
_STRINGS = tuple(f.wire for f in task_fields.of_shape("string"))


def _instant_to_wire(spec: pb.TaskSpec, prefix: str, when: TimeSpec | None) -> None:
    if when is None:
        return
    if when.relative is not None:
        setattr(spec, f"{prefix}_in_s", when.relative / NS)
        return
    ns = when.unix_ns
    assert ns is not None
    if not -INT64_MAX <= ns <= INT64_MAX:
        raise InvalidSubmission(f"{prefix}_at is out of range (got {ns / NS!r})")
    setattr(spec, f"{prefix}_unix_ns", ns)


def to_wire(sub: Submission, content_type: str | None = None) -> pb.TaskSpec:
    """``sub`` as a ``TaskSpec``: unset fields stay unset, the payload encoded
    (:func:`~cronoq.spec.payloads.encode_payload`), ``content_type`` overriding its type."""
    spec = pb.TaskSpec()
    data, ctype = encode_payload(sub.payload)
    spec.payload = data
    spec.content_type = ctype if content_type is None else content_type
    if sub[1:] == _UNSET:  # a payload only (a common per-task submit)
        return spec
    if sub.pool is not None:
        spec.pool = sub.pool
    if sub.kind is not None:
        spec.kind = sub.kind
    if sub.priority is not None:
        spec.priority = enums.PRIORITY_TO_WIRE[sub.priority]  # type: ignore[assignment]
    if sub.key is not None:
        spec.key = sub.key
    _instant_to_wire(spec, "deadline", sub.deadline)
    _instant_to_wire(spec, "start", sub.start)
    for name, wire in _SECONDS_OPTIONS:  # tolerance, duration_hint, timeout
        ns = getattr(sub, name)
        if ns is not None:
            setattr(spec, wire, ns / NS)
    if sub.on_miss is not None:
        spec.on_miss = enums.MISS_TO_WIRE[sub.on_miss]  # type: ignore[assignment]
    if sub.retry is not None:
        spec.retry.CopyFrom(retry_to_wire(sub.retry))
    for target, cond in sub.deps or ():
        spec.deps.append(pb.Dep(target=task_ref(target), cond=enums.COND_TO_WIRE[cond]))  # type: ignore[arg-type]
    if sub.resources is not None:
        for name, amount in sub.resources.items():
            if amount > UINT32_MAX:
                raise InvalidSubmission(f"resource amount must be an int >= 1 (got {amount!r} for '{name}')")
            spec.resources[name] = amount
    if sub.tags:
        spec.tags.update(sub.tags)
    if sub.labels:
        spec.labels.update(sub.labels)
    if sub.tenant is not None:
        spec.tenant = sub.tenant
    return spec


_UNSET = Submission()[1:]


def _seconds(name: str, v: float) -> float:
    if not math.isfinite(v) or v < 0:
        raise InvalidSubmission(f"{name} must be a finite, non-negative number of seconds (got {v})")
    return v


def _when(spec: pb.TaskSpec, prefix: str) -> TimeSpec | None:
    has = spec.HasField
    rel, at = f"{prefix}_in_s", f"{prefix}_unix_ns"
    if has(rel):
        if has(at):
            raise InvalidSubmission(f"{rel} and {at} are mutually exclusive")
        return TimeSpec(to_ns(check_seconds(rel, _seconds(rel, getattr(spec, rel)))), None)
    if has(at):
        return TimeSpec(None, getattr(spec, at))
    return None


def _deps_from_wire(spec: pb.TaskSpec) -> list[tuple[int | str, int]]:
    deps: list[tuple[int | str, int]] = []
    for d in spec.deps:
        which = d.target.WhichOneof("target")
        if which == "id":
            if d.target.id == 0:
                raise InvalidSubmission("dependency id must be >= 1")
            target: int | str = d.target.id
        elif which == "key":
            if not d.target.key:
                raise InvalidSubmission("dependency key must not be empty")
            target = check_stored_text("dependency key", d.target.key)
        else:
            raise InvalidSubmission("dependency target must be an id or a key")
        if d.cond:
            cond = enums.COND_FROM_WIRE.get(d.cond)
            if cond is None:
                raise InvalidSubmission(f"unknown dependency condition {d.cond}")
        else:  # (UNSPECIFIED: on success)
            cond = ON_SUCCESS
        deps.append((target, cond))
    return deps


def from_wire(spec: pb.TaskSpec, payload: object = None) -> Submission:
    """The :class:`Submission` of a ``TaskSpec`` (``payload`` standing for its payload)."""
    # (a NUL in one is refused: a store keeps them as text)
    pool, kind, key, tenant = (check_stored_text(w, getattr(spec, w)) or None for w in _STRINGS)
    prio = None
    if spec.priority:
        prio = enums.PRIORITY_FROM_WIRE.get(spec.priority)
        if prio is None:
            raise InvalidSubmission(f"unknown priority value {spec.priority}")
    deadline = _when(spec, "deadline")
    start = _when(spec, "start")
    has = spec.HasField
    durations = []
    for name, wire in _SECONDS_OPTIONS:  # tolerance, duration_hint, timeout
        durations.append(
            to_ns(check_seconds(name, _seconds(wire, getattr(spec, wire)))) if has(wire) else None
        )
    tolerance, duration_hint, timeout = durations
    miss = None
    if spec.on_miss:
        miss = enums.MISS_FROM_WIRE.get(spec.on_miss)
        if miss is None:
            raise InvalidSubmission(f"unknown on_miss value {spec.on_miss}")
    retry = retry_from_wire(spec.retry) if has("retry") else None
    deps = _deps_from_wire(spec) if spec.deps else None
    res = None
    if spec.resources:
        res = {}
        for name, amount in spec.resources.items():
            if amount < 1:
                raise InvalidSubmission(f"resource amount must be >= 1 (got {amount} for '{name}')")
            check_stored_text("resource name", name)
            res[name] = int(amount)
    return _tuple_new(  # (a Submission, its fields in order)
        Submission,
        (
            payload,
            pool,
            kind,
            prio,
            check_key(key),
            deadline,
            start,
            tolerance,
            miss,
            duration_hint,
            timeout,
            retry,
            deps,
            res,
            dict(spec.tags) or None,
            dict(spec.labels) or None,
            tenant,
        ),
    )


_tuple_new = tuple.__new__
