"""The durable records the engine builds (engine/mutations.py)."""

from __future__ import annotations

from cronoq.engine.model import RetryPolicy, TaskOptions
from cronoq.engine.mutations import TaskRecord, task_record


def test_task_record_puts_every_option_in_its_field() -> None:
    """``task_record`` passes TaskRecord's fields by position (it runs once per durable
    submission): every field, each with a distinct value, lands where its name says."""
    o = TaskOptions(
        pool="p",
        kind="k",
        priority=3,
        timeout=11,
        retry=RetryPolicy(max_attempts=4, initial_backoff=0.5, multiplier=3.0, max_backoff=9.0, jitter=False),
        duration_hint=12,
        tolerance=13,
        on_miss=1,
        tags={"t": "1"},
        labels={"l": "2"},
        tenant="acme",
        resources={"db": 2},
    )
    rec = task_record("pool-a", o, "key-1", b"blob", 14, 15, [(7, 0)], "nightly")
    assert rec == TaskRecord(
        pool="pool-a",
        kind="k",
        priority=3,
        key="key-1",
        deadline=14,
        start=15,
        tolerance=13,
        on_miss=1,
        duration_hint=12,
        timeout=11,
        retry=(4, 0.5, 3.0, 9.0, False),
        deps=[(7, 0)],
        resources={"db": 2},
        tags={"t": "1"},
        labels={"l": "2"},
        tenant="acme",
        payload=b"blob",
        recurring="nightly",
    )
    bare = task_record("pool-a", TaskOptions(pool="p"), None, None)
    assert bare == TaskRecord(pool="pool-a")
