"""gc_paused: the collector is off inside, restored after (also on error), never turned on."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cronoq import Pool, Scheduler, Task
from cronoq.runtime.gcpause import gc_paused


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:  # pragma: no cover - the suite runs with the collector on
        gc.disable()


def test_paused_inside_and_restored_after() -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: the inner exit must not turn it back on early
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_when_the_section_raises() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_application_disabled_stays_disabled() -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


async def test_submit_batch_leaves_the_collector_as_it_found_it() -> None:
    async def ex(ctx: object, payload: object) -> object:
        return payload

    gc.enable()
    async with Scheduler([Pool("default", ex, max_pending=5)]) as s:
        hs = await s.submit_batch(
            [Task(i, key=f"k{i}", after=[f"k{i - 1}"] if i else None) for i in range(5)]
        )
        assert gc.isenabled()
        with pytest.raises(Exception, match="exceeds max_pending"):
            await s.submit_batch([Task(i) for i in range(6)])
        assert gc.isenabled()  # also after a rejected batch
        assert [await h for h in hs] == list(range(5))
