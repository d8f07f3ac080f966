"""Validation of task fields, Task, Pool, RetryPolicy and Priority (docs/reference/behaviour.md#task-fields,
docs/reference/behaviour.md#reliability, docs/reference/behaviour.md#pool-api,
docs/reference/behaviour.md#types)."""

from __future__ import annotations

import datetime as dt
import math
from enum import IntEnum

import pytest

from cronoq import AutoscaleConfig, Pool, Priority, RetryPolicy, Scheduler, Task

from .conftest import echo, pool, wait

# numbers print as the published implementation prints them
# (docs/reference/behaviour.md#task-fields "(got -1)")
BAD_DURATIONS = [
    (-1, "-1"),
    (-1.0, "-1"),
    (-0.5, "-0.5"),
    (-1e-07, "-0.0000001"),
    (-1e20, "-100000000000000000000"),
    (math.inf, "inf"),
    (-math.inf, "-inf"),
    (math.nan, "NaN"),
]
TASK_DURATION_FIELDS = ["timeout", "tolerance", "duration_hint", "deadline_in"]


def duration_msg(name: str, shown: str) -> str:
    return f"{name} must be a finite, non-negative number of seconds (got {shown})"


# ----------------------------------------------------------------------------- task fields


@pytest.mark.parametrize("field", TASK_DURATION_FIELDS)
@pytest.mark.parametrize(("value", "shown"), BAD_DURATIONS)
def test_task_duration_fields(field, value, shown):
    with pytest.raises(ValueError) as ei:
        Task("p", **{field: value})
    assert str(ei.value) == duration_msg(field, shown)


@pytest.mark.parametrize("field", TASK_DURATION_FIELDS)
def test_duration_int_beyond_float_range_is_a_value_error(field):
    with pytest.raises(ValueError, match=f"^{field} must be a finite, non-negative number of seconds"):
        Task("p", **{field: 10**400})


@pytest.mark.parametrize("field", TASK_DURATION_FIELDS)
async def test_submit_duration_fields(field):
    async with Scheduler([pool()]) as s:
        for call in (s.submit, s.enqueue):
            with pytest.raises(ValueError) as ei:
                await call("p", **{field: -1})
            assert str(ei.value) == duration_msg(field, "-1")
        with pytest.raises(ValueError) as ei:
            await s.submit("p", **{field: math.nan})
        assert str(ei.value) == duration_msg(field, "NaN")
        assert (await s.snapshot()).totals["submitted"] == 0


@pytest.mark.parametrize("field", TASK_DURATION_FIELDS)
async def test_zero_durations_are_accepted(field):
    kw = {field: 0}
    Task("p", **kw)
    async with Scheduler([pool()]) as s:
        if field == "timeout":
            # a zero timeout is valid; the attempt may be aborted immediately
            h = await s.submit("p", **kw)
            assert h.id == 1
        else:
            assert await wait(await s.submit("p", **kw)) == "p"


TIMEOUT_TRUE = "timeout must be a finite, non-negative number of seconds (got True)"
AMOUNT_TRUE = "resource amount must be an int >= 1 (got True for 'db')"


@pytest.mark.parametrize(
    ("good", "bad", "msg"),
    [
        ({"timeout": 1}, {"timeout": True}, TIMEOUT_TRUE),
        ({"resources": {"db": 1}}, {"resources": {"db": True}}, AMOUNT_TRUE),
    ],
)
async def test_a_cached_valid_option_does_not_admit_an_equal_invalid_one(good, bad, msg):
    """1 == True: the options cache must not hand the options of the first to the second."""
    from cronoq import Resource

    async with Scheduler([pool()], resources=[Resource.semaphore("db", 2)]) as s:
        for _ in range(2):
            await s.enqueue("p", **good)
        with pytest.raises(ValueError) as ei:
            await s.enqueue("p", **bad)
        assert str(ei.value) == msg


@pytest.mark.parametrize("amount", [0, -1, True, 1.5, "1", None])
async def test_bad_resource_amount_is_an_invalid_submit_error_and_a_value_error(amount):
    """docs/reference/behaviour.md#resources: amounts are ints >= 1, else SubmitError ``invalid`` (still a
    ValueError)."""
    from cronoq import Resource, SubmitError

    msg = f"resource amount must be an int >= 1 (got {amount!r} for 'db')"
    with pytest.raises(SubmitError) as ei:
        Task("p", resources={"db": amount})
    assert isinstance(ei.value, ValueError)
    assert (ei.value.code, str(ei.value)) == ("invalid", msg)
    async with Scheduler([pool()], resources=[Resource.semaphore("db", 2)]) as s:
        for call in (s.submit, s.enqueue):
            with pytest.raises(SubmitError) as ei:
                await call("p", resources={"db": amount})
            assert isinstance(ei.value, ValueError)
            assert (ei.value.code, str(ei.value)) == ("invalid", msg)
        with pytest.raises(SubmitError) as ei:
            await s.add_recurring("r", "* * * * *", "p", resources={"db": amount})
        assert isinstance(ei.value, ValueError) and ei.value.code == "invalid"


async def test_other_field_errors_stay_plain_value_errors():
    """The reference gives these as ValueError, not as SubmitError ``invalid``
    (docs/reference/behaviour.md#task-fields)."""
    from cronoq import SubmitError

    for kw in ({"timeout": -1}, {"priority": "x"}, {"on_miss": "never"}, {"key": ""}):
        with pytest.raises(ValueError) as ei:
            Task("p", **kw)
        assert not isinstance(ei.value, SubmitError), kw


def test_non_numeric_duration_rejected():
    with pytest.raises(ValueError, match=r"^timeout must be a finite, non-negative number of seconds"):
        Task("p", timeout="5")


def test_unknown_priority_name():
    with pytest.raises(ValueError) as ei:
        Task("p", priority="x")
    assert str(ei.value) == "unknown priority 'x'"
    with pytest.raises(ValueError) as ei:
        Task("p", priority="urgent")
    assert str(ei.value) == "unknown priority 'urgent'"


@pytest.mark.parametrize("value", [4, -1, 99])
def test_priority_int_out_of_range(value):
    with pytest.raises(ValueError) as ei:
        Task("p", priority=value)
    assert str(ei.value) == "priority must be 0..=3"


async def test_submit_priority_errors():
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError) as ei:
            await s.submit("p", priority="x")
        assert str(ei.value) == "unknown priority 'x'"
        with pytest.raises(ValueError) as ei:
            await s.enqueue("p", priority=7)
        assert str(ei.value) == "priority must be 0..=3"


@pytest.mark.parametrize(
    ("value", "index"),
    [
        (Priority.CRITICAL, 0),
        ("critical", 0),
        ("CRITICAL", 0),
        (0, 0),
        ("High", 1),
        (1, 1),
        (Priority.NORMAL, 2),
        ("normal", 2),
        (2, 2),
        ("low", 3),
        ("LoW", 3),
        (3, 3),
    ],
)
async def test_priority_accepted_forms(value, index):
    async with Scheduler([pool()]) as s:
        await s.set_capacity("default", 0)
        await s.enqueue("p", priority=value)
        await s.submit_batch([Task("q", priority=value)])
        expected = [0, 0, 0, 0]
        expected[index] = 2
        assert (await s.snapshot()).pool("default").pending_by_class == expected


async def test_default_priority_is_normal():
    async with Scheduler([pool()]) as s:
        await s.set_capacity("default", 0)
        await s.enqueue("p")
        await s.submit_batch([Task("q")])
        assert (await s.snapshot()).pool("default").pending_by_class == [0, 0, 2, 0]


@pytest.mark.parametrize("value", ["later", "RUN_LATE", "", 1])
def test_on_miss_invalid(value):
    with pytest.raises(ValueError):
        Task("p", on_miss=value)


@pytest.mark.parametrize("value", ["run_late", "skip", "fail"])
async def test_on_miss_valid(value):
    Task("p", on_miss=value)
    async with Scheduler([pool()]) as s:
        assert await wait(await s.submit("p", on_miss=value)) == "p"


async def test_on_miss_invalid_on_submit():
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError):
            await s.submit("p", on_miss="never")


def test_deadline_in_and_at_mutually_exclusive():
    with pytest.raises(ValueError, match="mutually exclusive"):
        Task("p", deadline_in=5, deadline_at=1e10)


async def test_deadline_in_and_at_mutually_exclusive_on_submit():
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError, match="mutually exclusive"):
            await s.submit("p", deadline_in=5, deadline_at=dt.datetime.now(dt.UTC))
        assert (await s.snapshot()).totals["submitted"] == 0


def test_deadline_at_naive_datetime_rejected():
    with pytest.raises(ValueError):
        Task("p", deadline_at=dt.datetime(2030, 1, 1))


async def test_deadline_at_accepts_unix_seconds_and_aware_datetime():
    seen = []

    async def run(ctx, p):
        seen.append(ctx.deadline)

    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    tasks = [Task(1, deadline_at=2_000_000_000), Task(2, deadline_at=2_000_000_000.5)]
    tasks.append(Task(3, deadline_at=when))
    async with Scheduler([pool(executor=run, min=1, max=1)]) as s:
        for h in await s.submit_batch(tasks):
            await wait(h)
    assert sorted(seen) == [when.timestamp(), 2_000_000_000.0, 2_000_000_000.5]  # (earliest deadline first)


@pytest.mark.parametrize("field", ["deadline_at", "start_at"])
@pytest.mark.parametrize("value", [1e300, -1e300, 10**400])
async def test_instant_beyond_ns_range_is_a_value_error(field, value):
    # finite seconds whose nanoseconds overflow a float used to escape as OverflowError at submit
    with pytest.raises(ValueError, match=f"^{field} must be Unix seconds or an aware datetime"):
        Task("p", **{field: value})
    async with Scheduler([pool()]) as s:
        with pytest.raises(ValueError, match=f"^{field} must be Unix seconds or an aware datetime"):
            await s.submit("p", **{field: value})
        assert (await s.snapshot()).totals["submitted"] == 0


def test_retry_field_must_be_retry_policy():
    with pytest.raises(ValueError):
        Task("p", retry=3)


def test_tags_keys_must_be_strings():
    with pytest.raises(ValueError):
        Task("p", tags={1: "a"})


# ----------------------------------------------------------------------------- Task


def test_task_is_validated_at_construction_and_read_only():
    payload = {"a": 1}
    t = Task(payload, key="k", priority="high", timeout=3)
    assert t.payload is payload
    assert t.key == "k"
    with pytest.raises(AttributeError):
        t.payload = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        t.key = "other"  # type: ignore[misc]
    assert t.payload is payload and t.key == "k"
    assert Task(None).key is None


async def test_task_unknown_pool_is_reported_at_submission():
    t = Task("p", pool="nope")  # pools are only known to a scheduler
    async with Scheduler([pool()]) as s:
        with pytest.raises(Exception) as ei:
            await s.submit_batch([t])
        assert getattr(ei.value, "code", None) == "unknown_pool"


# ----------------------------------------------------------------------------- Pool


def _pool_error(**kw) -> str:
    with pytest.raises(ValueError) as ei:
        Pool("p", echo, **kw)
    return str(ei.value)


def test_pool_min_greater_than_max():
    assert _pool_error(min=5, max=2) == "min must be <= max"


@pytest.mark.parametrize("value", [0, -3])
def test_pool_max_at_least_one(value):
    assert _pool_error(min=0, max=value) == "max must be >= 1"


def test_pool_reservable_fraction():
    assert _pool_error(reservable_fraction=1.5) == "reservable_fraction must be in [0, 1] (got 1.5)"
    assert _pool_error(reservable_fraction=-0.5) == "reservable_fraction must be in [0, 1] (got -0.5)"
    Pool("p", echo, reservable_fraction=0)
    Pool("p", echo, reservable_fraction=1)


def test_pool_default_duration():
    assert _pool_error(default_duration=-1) == duration_msg("default_duration", "-1")
    assert _pool_error(default_duration=math.inf) == duration_msg("default_duration", "inf")
    Pool("p", echo, default_duration=0)


@pytest.mark.parametrize("value", [0, -1, 0.0])
def test_pool_lease_ttl(value):
    assert _pool_error(lease_ttl=value) == "lease_ttl must be > 0"


def test_pool_await_timeout_is_a_duration():
    assert _pool_error(await_timeout=-1) == duration_msg("await_timeout", "-1")


@pytest.mark.parametrize("value", ["drop", "WAIT", "", "shed"])
def test_pool_overflow(value):
    assert _pool_error(overflow=value) == "overflow must be wait, reject, shed_lowest or shed_oldest"


@pytest.mark.parametrize("value", ["wait", "reject", "shed_lowest", "shed_oldest"])
def test_pool_overflow_valid(value):
    config = Pool("p", echo, overflow=value, max_pending=3).config
    assert (config.overflow, config.max_pending) == (value, 3)


@pytest.mark.parametrize("weight", [0, -1, math.inf, math.nan])
def test_pool_tenant_weights(weight):
    assert _pool_error(tenant_weights={"a": 1.0, "b": weight}) == "tenant weights must be finite and > 0"


@pytest.mark.parametrize("value", [0, -1])
def test_pool_max_pending(value):
    with pytest.raises(ValueError):
        Pool("p", echo, max_pending=value)


def test_pool_max_pending_valid():
    assert Pool("p", echo, max_pending=1).config.max_pending == 1
    assert Pool("p", echo, max_pending=None).config.max_pending is None


def test_pool_autoscale_forms():
    default = repr(AutoscaleConfig())  # (no __eq__: compared by their fields)
    assert repr(Pool("p", echo, autoscale=None).config.autoscale) == default  # the default: on
    assert repr(Pool("p", echo, autoscale=True).config.autoscale) == default
    assert Pool("p", echo, autoscale=False).config.autoscale is None
    assert Pool("p", echo, autoscale=AutoscaleConfig(interval=2.0)).config.autoscale.interval == 2.0


def test_pool_retry_must_be_retry_policy():
    with pytest.raises(ValueError):
        Pool("p", echo, retry=5)


# ----------------------------------------------------------------------------- RetryPolicy


def test_retry_policy_defaults_and_none():
    r = RetryPolicy()
    assert (r.max_attempts, r.initial_backoff, r.multiplier, r.max_backoff, r.jitter) == (
        3,
        1.0,
        2.0,
        60.0,
        True,
    )
    assert RetryPolicy.none().max_attempts == 1
    RetryPolicy(max_attempts=1, initial_backoff=0, multiplier=0.5, max_backoff=0, jitter=False)


@pytest.mark.parametrize(
    "kw",
    [
        {"max_attempts": 0},
        {"max_attempts": -2},
        {"max_attempts": 1.5},
        {"max_attempts": "3"},
        {"initial_backoff": -1},
        {"initial_backoff": math.inf},
        {"initial_backoff": math.nan},
        {"max_backoff": -0.1},
        {"max_backoff": math.inf},
        {"multiplier": 0},
        {"multiplier": -1},
        {"multiplier": math.inf},
        {"multiplier": math.nan},
    ],
)
def test_retry_policy_validation(kw):
    with pytest.raises(ValueError):
        RetryPolicy(**kw)


def test_retry_policy_backoff_messages_are_duration_messages():
    with pytest.raises(ValueError) as ei:
        RetryPolicy(initial_backoff=-1)
    assert str(ei.value) == duration_msg("initial_backoff", "-1")


# ----------------------------------------------------------------------------- Priority


def test_priority_enum():
    assert issubclass(Priority, IntEnum)
    assert [p.name for p in Priority] == ["CRITICAL", "HIGH", "NORMAL", "LOW"]
    assert [p.value for p in Priority] == [0, 1, 2, 3]
    assert int(Priority.HIGH) == 1
    assert Priority.CRITICAL < Priority.HIGH < Priority.NORMAL < Priority.LOW
    assert min(Priority) is Priority.CRITICAL
    assert sorted([Priority.LOW, Priority.CRITICAL, Priority.NORMAL]) == [
        Priority.CRITICAL,
        Priority.NORMAL,
        Priority.LOW,
    ]
    assert Priority(3) is Priority.LOW
    assert Priority.NORMAL == 2
    assert repr(Priority.HIGH) == str(Priority.HIGH) == "Priority.HIGH"  # as the published one


# ------------------------------------------------------------- drop-in with the published API


async def test_none_means_the_default_for_every_field():
    """The published implementation's fields all default to None: passing None explicitly
    gives the docs/reference/behaviour.md#task-fields default (kind "default", priority normal, tolerance 1 s,
    run_late)."""
    nones = {"priority": None, "kind": None, "tolerance": None, "on_miss": None, "pool": None}
    t = Task("p", **nones)
    assert (t._opts.kind, t._opts.priority, t._opts.tolerance, t._opts.on_miss) == (
        "default",
        int(Priority.NORMAL),
        1_000_000_000,
        0,
    )
    async with Scheduler([pool()]) as s:
        for call in (s.submit, s.enqueue):
            await call("p", **nones)
        h = await s.submit("x", **nones, key="k", start_in=0.05)
        assert await wait(h) == "x"
        assert (await s.snapshot()).totals["submitted"] == 3


@pytest.mark.parametrize("field", [*TASK_DURATION_FIELDS, "start_in"])
def test_durations_beyond_a_century_are_accepted(field):
    """docs/reference/behaviour.md#task-fields: any finite duration >= 0 is valid; the engine keeps at most
    2**62 ns."""
    t = Task("p", **{field: 1e12})
    assert t is not None
    assert Task("p", timeout=4e9)._opts.timeout == 4 * 10**18  # 127 years: kept as given
    assert Task("p", timeout=1e12)._opts.timeout == 1 << 62


async def test_far_instants_are_kept_within_range():
    async with Scheduler([pool(max=4)]) as s:
        far = await s.submit("a", start_at=1e12, timeout=1e10, deadline_in=1e10)
        past = await s.submit("b", deadline_at=-1e12)
        assert await s.status(far.id) == "scheduled"
        assert await wait(past) == "b"


@pytest.mark.parametrize(
    "fields",
    [
        {"pool": 1},
        {"kind": 2},
        {"retry": 3},
        {"resources": [1]},
        {"resources": {1: 1}},
        {"tenant": 4},
        {"tags": {1: "x"}},
        {"key": 5.5},
        {"after": 1.5},
        {"deps": "x"},
        {"deps": ["x"]},
        {"timeout": "10"},
        {"start_at": "tomorrow"},
    ],
)
def test_wrong_types_are_value_errors_and_type_errors(fields):
    """The reference (docs/reference/behaviour.md#task-fields): bad input is a ValueError; the published
    implementation raises TypeError for a wrong type - ours is both, so either ``except`` keeps working."""
    with pytest.raises(ValueError) as ei:
        Task("p", **fields)
    assert isinstance(ei.value, TypeError)


async def test_wrong_types_on_the_scheduler_too():
    async with Scheduler([pool()]) as s:
        with pytest.raises(TypeError):
            await s.submit_batch(["not a task"])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            await s.status(1.5)  # type: ignore[arg-type]


async def test_messages_the_published_implementation_gives():
    """Where the reference names no text, ours contains the published implementation's (code that
    matches on it keeps working), with detail after it."""
    from cronoq import Dep, EventsLagged, Resource, SubmitError

    with pytest.raises(ValueError, match=r"^use either deadline_in or deadline_at \("):
        Task("p", deadline_in=1, deadline_at=2)
    with pytest.raises(ValueError, match=r"^use either start_in or start_at \("):
        Task("p", start_in=1, start_at=2)
    with pytest.raises(ValueError, match=r"^on must be 'success', 'failure' or 'complete' \(got 'x'\)$"):
        Dep("k", on="x")
    assert str(EventsLagged(3)) == "event stream fell behind; 3 events were dropped"
    async with Scheduler([pool()], resources=[Resource.semaphore("gpu", 2)]) as s:
        with pytest.raises(SubmitError) as ei:
            await s.submit("p", resources={"gpu": 3})
    assert ei.value.code == "resource_exceeds_capacity"
    assert str(ei.value).startswith("requested amount exceeds capacity of resource 'gpu' (")


async def test_a_misspelt_field_is_named_on_every_submit_path():
    """``submit(1, priorty=...)`` without a key takes the fast path, which used to fail with
    Python's "make_options() got an unexpected keyword argument": an internal name the caller
    never wrote.  Every path now names the task field and the closest real one."""
    want = "unexpected task field 'priorty' (did you mean 'priority'?)"
    async with Scheduler([pool()]) as s:
        for submit in (
            lambda: s.submit(1, priorty="high"),
            lambda: s.enqueue(1, priorty="high"),
            lambda: s.submit(1, key="k", priorty="high"),
        ):
            with pytest.raises(TypeError) as ei:
                await submit()
            assert str(ei.value) == want
        with pytest.raises(TypeError, match=r"^unexpected task field 'zzz'$"):
            await s.submit(1, zzz=1)  # nothing close: no suggestion
    with pytest.raises(TypeError) as ei:
        Task(1, priorty="high")
    assert str(ei.value) == want
