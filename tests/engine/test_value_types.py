"""Value classes are frozen, slotted dataclasses that keep their repr, equality and pickling.

(``StatusEvent`` is slotted but not frozen, for the watched engine loop's sake: its own test.)"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from cronoq.engine.model import ON_FAILURE, Dep, RetryPolicy, StatusEvent
from cronoq.engine.recurring import RecurringInfo
from cronoq.engine.snapshot import GroupSnapshot, PoolSnapshot, Snapshot

EVENT = StatusEvent(7, "default", "k", "retrying", 2, 1_700_000_000.5, "Boom: x")
INFO = RecurringInfo("nightly", "0 3 * * *", "UTC", "skip", 1_700_000_000 * 10**9, 7, "default", None)


@pytest.mark.parametrize(
    ("value", "attr"),
    [
        (RetryPolicy(max_attempts=4, initial_backoff=0, multiplier=3, jitter=False), "max_attempts"),
        (Dep("parent", on="on_failure"), "on"),
        (INFO, "next_unix_ns"),
        (GroupSnapshot({"gpu": "a100"}, 2, 1), "busy"),
        (Snapshot([], 0, 0, 0, {}), "running"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
def test_frozen_slotted_and_pickled_by_value(value: Any, attr: str) -> None:
    assert dataclasses.is_dataclass(value) and not hasattr(value, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, attr, 1)
    copy = pickle.loads(pickle.dumps(value))
    assert copy == value and repr(copy) == repr(value)


def test_retry_policy_normalizes_and_keeps_its_repr_and_hash() -> None:
    p = RetryPolicy(max_attempts=4, initial_backoff=0, multiplier=3, jitter=0)  # type: ignore[arg-type]
    assert (
        repr(p)
        == "RetryPolicy(max_attempts=4, initial_backoff=0.0, multiplier=3.0, max_backoff=60.0, jitter=False)"
    )
    assert type(p.initial_backoff) is float and type(p.multiplier) is float and p.jitter is False
    assert p == RetryPolicy(4, 0.0, 3.0, 60.0, False) and hash(p) == hash(
        RetryPolicy(4, 0.0, 3.0, 60.0, False)
    )
    assert p != RetryPolicy(5, 0.0, 3.0, 60.0, False)
    assert RetryPolicy.none() == RetryPolicy(max_attempts=1)
    with pytest.raises(ValueError, match="max_attempts must be an int >= 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="multiplier must be finite and > 0"):
        RetryPolicy(multiplier=0)
    # a pickle made by the constructor (as before the dataclass) still loads
    assert pickle.loads(pickle.dumps(p)).__reduce__() == (RetryPolicy, (4, 0.0, 3.0, 60.0, False))


def test_dep_normalizes_its_condition_and_keeps_its_repr() -> None:
    d = Dep("parent", on="on_failure")
    assert (d.target, d.on, d.cond) == ("parent", "failure", ON_FAILURE)
    assert repr(d) == "Dep('parent', on='failure')"
    assert d == Dep("parent", "failure") and hash(d) == hash(Dep("parent", "failure"))
    assert d != Dep("parent") and d != Dep(7, "failure")
    assert {d, Dep("parent", "failure")} == {d}
    with pytest.raises(ValueError, match="on must be 'success', 'failure' or 'complete'"):
        Dep("parent", on="maybe")


def test_status_event_keeps_its_repr_equality_and_pickle() -> None:
    assert repr(EVENT) == (
        "StatusEvent(id=7, pool='default', key='k', status='retrying', attempt=2,"
        " at=1700000000.500000, message='Boom: x')"
    )
    assert (EVENT.id, EVENT.pool, EVENT.key, EVENT.status, EVENT.attempt, EVENT.at, EVENT.message) == (
        7,
        "default",
        "k",
        "retrying",
        2,
        1_700_000_000.5,
        "Boom: x",
    )
    same = StatusEvent(7, "default", "k", "retrying", 2, 1_700_000_000.5, "Boom: x")
    assert same == EVENT
    assert StatusEvent(7, "default", "k", "retrying", 2, 1_700_000_000.5, None) != EVENT
    assert EVENT != (7, "default", "k", "retrying", 2, 1_700_000_000.5, "Boom: x")
    # slotted (no __dict__), but not frozen: see StatusEvent's docstring
    assert not hasattr(EVENT, "__dict__") and EVENT.__hash__ is None
    # pickled by the constructor, as before the dataclass (old pickles load)
    assert EVENT.__reduce__() == (StatusEvent, (7, "default", "k", "retrying", 2, 1_700_000_000.5, "Boom: x"))
    assert pickle.loads(pickle.dumps(EVENT, protocol=2)) == EVENT


def test_recurring_info_keeps_its_repr_and_next_run() -> None:
    assert repr(INFO) == (
        "RecurringInfo(name='nightly', cron='0 3 * * *', tz='UTC', overlap='skip',"
        " next_unix_ns=1700000000000000000, last_task_id=7)"
    )
    assert INFO.next_run == 1_700_000_000.0 and INFO.kind == "default"
    assert dataclasses.replace(INFO) == INFO and dataclasses.replace(INFO, last_task_id=8) != INFO


def test_pool_snapshot_is_slotted_too() -> None:
    assert "__dict__" not in PoolSnapshot.__dict__ and "groups" in PoolSnapshot.__slots__
