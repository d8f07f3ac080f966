"""``Scheduler`` owns its configuration and public API only (issue 27, "Scheduler owns less").

* the started state (engine, loop, timer, running attempts) and the attempt runner live in one
  :class:`~cronoq.runtime.started.Started` made by ``start()``: the scheduler holds no engine of
  its own before or after;
* :class:`~cronoq.runtime.operations.Operations` is composed, not mixed in, and each of its
  public methods has a delegate on ``Scheduler`` with the same signature (the docs' API pages and
  the generated ``BlockingScheduler`` read ``Scheduler``), documented there.
"""

from __future__ import annotations

import inspect

import pytest

from cronoq import Pool, Scheduler
from cronoq.runtime.operations import Operations
from cronoq.runtime.started import Started

OPERATIONS = sorted(n for n, f in vars(Operations).items() if callable(f) and not n.startswith("_"))


def test_operations_is_composed_not_mixed_in() -> None:
    assert Operations not in Scheduler.__mro__
    assert OPERATIONS  # (the list below is not vacuous)


@pytest.mark.parametrize("name", OPERATIONS)
def test_each_operation_has_a_documented_delegate_of_the_same_signature(name: str) -> None:
    delegate = getattr(Scheduler, name)
    assert inspect.signature(delegate) == inspect.signature(getattr(Operations, name))
    assert (delegate.__doc__ or "").strip() and "Scheduler." not in delegate.__doc__


async def test_the_started_state_exists_only_between_start_and_shutdown() -> None:
    async def run(ctx: object, payload: object) -> object:
        return payload

    s = Scheduler([Pool("p", run)])
    assert s._run is None and not hasattr(s, "_core")
    await s.start()
    first = s._run
    assert isinstance(first, Started) and first.live
    await s.shutdown()
    assert s._run is None and not first.live  # (late callbacks of the old run do nothing)
    await s.start()
    assert s._run is not first  # a new one per start
    await s.shutdown()
