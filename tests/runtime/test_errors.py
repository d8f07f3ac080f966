"""The error family (docs/reference/behaviour.md#types): attributes, str formats, pickling."""

from __future__ import annotations

import asyncio
import inspect
import math
import pickle

import pytest

import cronoq
from cronoq import Scheduler
from cronoq.errors import (
    CronoqError,
    EventsLagged,
    InvalidSubmission,
    Permanent,
    Retryable,
    SchedulerError,
    SubmitError,
    TaskFailed,
    closing,
)

from .conftest import pool


def roundtrip(e):
    return pickle.loads(pickle.dumps(e))


def test_submit_error():
    e = SubmitError("unknown_pool", "unknown pool 'x'")
    assert isinstance(e, CronoqError) and isinstance(e, Exception)
    assert (e.code, e.message) == ("unknown_pool", "unknown pool 'x'")
    assert str(e) == "unknown pool 'x'"
    r = roundtrip(e)
    assert type(r) is SubmitError
    assert (r.code, r.message, str(r)) == ("unknown_pool", "unknown pool 'x'", "unknown pool 'x'")


def test_invalid_submission_is_a_submit_error_and_a_value_error():
    e = InvalidSubmission("resource amount must be an int >= 1 (got 0 for 'db')")
    for r in (e, roundtrip(e)):
        assert type(r) is InvalidSubmission
        assert isinstance(r, SubmitError) and isinstance(r, ValueError) and isinstance(r, CronoqError)
        assert (r.code, r.message) == ("invalid", "resource amount must be an int >= 1 (got 0 for 'db')")
        assert str(r) == r.message and r.args == e.args


@pytest.mark.parametrize(
    "code",
    [
        "unknown_pool",
        "unknown_resource",
        "resource_exceeds_capacity",
        "reservation_conflict",
        "cycle",
        "unknown_dependency",
        "full",
        "overloaded",
        "duplicate_key_in_batch",
        "invalid",
    ],
)
def test_submit_error_codes_roundtrip(code):
    r = roundtrip(SubmitError(code, f"msg for {code}"))
    assert (r.code, str(r)) == (code, f"msg for {code}")


def test_scheduler_error():
    e = SchedulerError("store is gone")
    assert isinstance(e, CronoqError)
    assert str(e) == "store is gone"
    r = roundtrip(e)
    assert type(r) is SchedulerError and str(r) == "store is gone"


def test_task_failed():
    e = TaskFailed("dead_lettered", "ValueError: x", 42)
    assert isinstance(e, CronoqError)
    assert (e.status, e.message, e.task_id) == ("dead_lettered", "ValueError: x", 42)
    assert str(e) == "task 42 ended as dead_lettered: ValueError: x"
    r = roundtrip(e)
    assert type(r) is TaskFailed
    assert (r.status, r.message, r.task_id) == ("dead_lettered", "ValueError: x", 42)
    assert str(r) == str(e)


def test_task_failed_keywords():
    e = TaskFailed(status="shutdown", message="scheduler shut down", task_id=7)
    assert str(e) == "task 7 ended as shutdown: scheduler shut down"


def test_events_lagged():
    e = EventsLagged(5)
    assert isinstance(e, CronoqError)
    assert e.skipped == 5
    r = roundtrip(e)
    assert type(r) is EventsLagged and r.skipped == 5 and str(r) == str(e)


def test_retryable():
    e = Retryable("later", retry_after=2.5)
    assert isinstance(e, CronoqError)
    assert (e.message, e.retry_after, str(e)) == ("later", 2.5, "later")
    r = roundtrip(e)
    assert type(r) is Retryable and (r.message, r.retry_after) == ("later", 2.5)
    d = Retryable()
    assert (d.message, d.retry_after, str(d)) == ("", None, "")
    assert roundtrip(d).retry_after is None
    # an error path never raises: a bad retry_after is kept as given and ignored when used
    for bad in (-1, math.nan, math.inf, "x"):
        assert Retryable("m", retry_after=bad).retry_after is bad


def test_task_failed_task_id_is_optional():
    e = TaskFailed("shutdown", "scheduler shut down")
    assert e.task_id is None and str(e) == "task None ended as shutdown: scheduler shut down"


def test_permanent():
    e = Permanent("bad")
    assert isinstance(e, CronoqError)
    assert (e.message, str(e)) == ("bad", "bad")
    r = roundtrip(e)
    assert type(r) is Permanent and r.message == "bad"
    assert Permanent().message == ""


async def test_not_started_error_roundtrips():
    s = Scheduler([pool()])
    with pytest.raises(SchedulerError) as ei:
        await s.status(1)
    e = ei.value
    r = roundtrip(e)
    assert isinstance(r, RuntimeError) and isinstance(r, SchedulerError)
    assert str(r) == str(e) == "scheduler not started; call `await scheduler.start()` first"


def test_errors_are_the_same_objects_at_top_level():
    for name in (
        "CronoqError",
        "SubmitError",
        "SchedulerError",
        "TaskFailed",
        "EventsLagged",
        "Retryable",
        "Permanent",
    ):
        assert getattr(cronoq, name) is getattr(cronoq.errors, name)


def test_errors_can_be_raised_and_caught_as_base():
    for e in (
        SubmitError("full", "pool 'a' is full"),
        SchedulerError("x"),
        TaskFailed("failed", "m", 1),
        EventsLagged(1),
        Retryable("r"),
        Permanent("p"),
    ):
        with pytest.raises(CronoqError):
            raise e


class _Suspend:
    def __await__(self):  # type: ignore[no-untyped-def]
        yield


def test_closing_tells_a_coroutine_being_closed_from_a_generator_exit_it_raised():
    """An attempt runner's ``except GeneratorExit``: the coroutine's close (its task destroyed,
    its loop gone) unwinds and reports nothing; a GeneratorExit the executor raised while its
    task ran it is a failure like any exception (docs/reference/behaviour.md#reliability)."""
    seen: list[bool] = []

    async def runner(raise_it: bool) -> None:
        try:
            if raise_it:
                raise GeneratorExit("raised by the task")
            await _Suspend()
        except GeneratorExit:
            seen.append(closing(inspect.currentframe()))
            raise

    async def main() -> None:
        with pytest.raises(GeneratorExit):
            await asyncio.create_task(runner(True))  # run by its task: not closing
        coro = runner(False)
        coro.send(None)
        coro.close()  # closed while another task (this one) runs: closing

    asyncio.run(main())
    coro = runner(False)
    coro.send(None)
    coro.close()  # closed with no loop running (the garbage collector, at exit): closing
    assert seen == [False, True, True]
