"""tasks/dispatch.py: a remote attempt's ``LeaseContext`` refuses durable calls clearly (the
worker protocol does not carry journals yet; docs/how-to/durable.md#remote-workers)."""

from __future__ import annotations

import pytest

from cronoq import Permanent
from cronoq.tasks.dispatch import LeaseContext


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("spawn", ([],)),
        ("wait_for", ([1],)),
        ("sleep_for", (1.0,)),
        ("sleep_until", (1.0,)),
        ("wait_signal", ("go",)),
        ("step", ("s", print)),
    ],
)
async def test_durable_calls_fail_permanently_on_a_remote_worker(call: str, args: tuple[object, ...]) -> None:
    ctx = LeaseContext(object())
    assert ctx.resumes == 0
    with pytest.raises(Permanent, match=rf"ctx\.{call}\(\) is not available on a remote worker yet"):
        await getattr(ctx, call)(*args)
