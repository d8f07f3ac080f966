"""The one submission value (cronoq.spec): built from keyword arguments or from the wire, the
same validation everywhere, instants as exact integer ns end to end."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from cronoq.engine.model import ON_COMPLETE, ON_FAILURE, ON_SUCCESS, Dep, Priority, RetryPolicy, TaskOptions
from cronoq.engine.time import NS
from cronoq.errors import ArgumentTypeError, InvalidSubmission
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.spec.submission import FIELD_NAMES, Submission
from cronoq.spec.validate import TimeSpec, make_options, unix_ns

EVERY: dict[str, Any] = {
    "pool": "gpu",
    "kind": "render",
    "priority": "high",
    "key": "job-1",
    "deadline_in": 2.5,
    "start_at": 1_700_000_000.25,
    "tolerance": 0.5,
    "on_miss": "skip",
    "duration_hint": 3,
    "timeout": 10.0,
    "retry": RetryPolicy(max_attempts=5, initial_backoff=0.5, multiplier=3, max_backoff=30, jitter=False),
    "after": [1, "parent"],
    "deps": [Dep(2, on="failure"), Dep("k", on="complete")],
    "resources": {"db": 2},
    "tags": {"n": 5},
    "labels": {"zone": "eu"},
    "tenant": "acme",
}


def _options(opts: TaskOptions) -> tuple[Any, ...]:
    return tuple(getattr(opts, s) for s in TaskOptions.__slots__ if s not in ("resolver", "stats_key"))


def test_from_kwargs_holds_every_field_in_canonical_form() -> None:
    sub = Submission.from_kwargs({"n": 1}, **EVERY)
    assert sub.payload == {"n": 1} and sub.pool == "gpu" and sub.kind == "render"
    assert sub.priority == Priority.HIGH and sub.key == "job-1"
    assert sub.deadline == TimeSpec(int(2.5 * NS), None)
    assert sub.start == TimeSpec(None, 1_700_000_000_250_000_000)
    assert (sub.tolerance, sub.duration_hint, sub.timeout) == (NS // 2, 3 * NS, 10 * NS)
    assert sub.deps == [(1, ON_SUCCESS), ("parent", ON_SUCCESS), (2, ON_FAILURE), ("k", ON_COMPLETE)]
    assert sub.tags == {"n": "5"} and sub.resources == {"db": 2} and sub.tenant == "acme"
    assert set(Submission._fields) - {"payload"} >= {"pool", "key", "deps"}
    assert {"after", "deadline_at", "start_in"} <= FIELD_NAMES


def test_options_are_those_of_make_options() -> None:
    option_fields = {k: v for k, v in EVERY.items() if k in make_options.__code__.co_varnames}
    sub = Submission.from_kwargs(None, **option_fields)
    assert _options(sub.options()) == _options(make_options(**option_fields))
    assert _options(Submission().options()) == _options(make_options())


def test_the_wire_round_trip_keeps_every_field() -> None:
    sub = Submission.from_kwargs(b"x", **EVERY)
    spec = sub.to_wire()
    assert pb.TaskSpec.FromString(spec.SerializeToString()) == spec
    back = Submission.from_wire(spec, b"x")
    assert back == sub._replace(tags={"n": "5"})
    assert Submission.from_wire(Submission().to_wire()) == Submission()


@pytest.mark.parametrize(
    "value",
    [1_700_000_000.123456789, 1_733_000_000.000000123, 2_000_000_000.5, 1_700_000_000, -1.5],
)
def test_instants_are_exact_ns_end_to_end(value: float) -> None:
    """No float product: the ns of the float (its exact value, rounded once) arrive on the
    server as they left the client (a float round trip was up to ~120 ns off)."""
    from fractions import Fraction

    exact = round(Fraction(value) * NS)
    sub = Submission.from_kwargs(None, deadline_at=value)
    assert sub.deadline is not None and sub.deadline.unix_ns == exact
    spec = sub.to_wire()
    assert spec.deadline_unix_ns == exact
    back = Submission.from_wire(spec)
    assert back.deadline is not None and back.deadline.resolve(0, 1000) == exact - 1000


def test_aware_datetimes_are_exact() -> None:
    when = dt.datetime(2030, 1, 1, 0, 0, 0, 123456, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert unix_ns("x", when) == (1_893_452_400 * 1_000_000 + 123456) * 1000


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"colour": 1}, TypeError, "unexpected task field 'colour'"),
        ({"key": ""}, ArgumentTypeError, "key must be a non-empty string (got '')"),
        ({"kind": ""}, ArgumentTypeError, "kind must be a non-empty string (got '')"),
        ({"pool": 3}, ArgumentTypeError, "pool must be a string (got 3)"),
        ({"resources": {"db": 0}}, InvalidSubmission, "resource amount must be an int >= 1 (got 0 for 'db')"),
        (
            {"start_in": 1, "start_at": 2},
            ValueError,
            "use either start_in or start_at (start_in and start_at are mutually exclusive)",
        ),
        ({"timeout": -1}, ValueError, "timeout must be a finite, non-negative number of seconds (got -1)"),
    ],
)
def test_one_error_family(fields: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as ei:
        Submission.from_kwargs(None, **fields)
    assert str(ei.value) == message
    assert isinstance(ei.value, (ValueError, TypeError))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (pb.TaskSpec(priority=9), "unknown priority value 9"),  # type: ignore[arg-type]
        (pb.TaskSpec(on_miss=9), "unknown on_miss value 9"),  # type: ignore[arg-type]
        (
            pb.TaskSpec(deadline_in_s=1, deadline_unix_ns=2),
            "deadline_in_s and deadline_unix_ns are mutually exclusive",
        ),
        (pb.TaskSpec(timeout_s=-1), "timeout_s must be a finite, non-negative number of seconds (got -1.0)"),
        (pb.TaskSpec(deps=[pb.Dep(target=pb.TaskRef(id=0))]), "dependency id must be >= 1"),
        (pb.TaskSpec(deps=[pb.Dep()]), "dependency target must be an id or a key"),
        (pb.TaskSpec(deps=[pb.Dep(target=pb.TaskRef(id=1), cond=9)]), "unknown dependency condition 9"),  # type: ignore[arg-type]
        (pb.TaskSpec(resources={"db": 0}), "resource amount must be >= 1 (got 0 for 'db')"),
        (pb.TaskSpec(retry=pb.RetryPolicy(initial_backoff_s=-1)), "initial_backoff must be a finite"),
    ],
)
def test_the_wire_is_refused_with_the_servers_messages(spec: pb.TaskSpec, message: str) -> None:
    with pytest.raises(InvalidSubmission, match=re.escape(message)):
        Submission.from_wire(spec)


def test_option_keys_tell_options_apart() -> None:
    assert Submission().option_key() is None
    assert Submission.from_kwargs(None, key="k", after=1).option_key() is None
    a = Submission.from_kwargs(None, priority="high", tags={"a": 1})
    b = Submission.from_kwargs(None, priority=1, tags={"a": "1"})
    c = Submission.from_kwargs(None, priority="low", tags={"a": 1})
    assert a.option_key() == b.option_key() != c.option_key()
    hash(a.option_key())
