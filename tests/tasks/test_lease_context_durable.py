"""tasks/dispatch.py: a remote attempt's ``LeaseContext`` delegates durable calls to its lease
(worker protocol version 7, docs/how-to/durable.md#remote-workers) and refuses them clearly
when the lease has none (a test double) or the session speaks an older version."""

from __future__ import annotations

import pytest

from cronoq import Permanent
from cronoq.client.worker import Lease, _Session
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.tasks.dispatch import LeaseContext

CALLS = [
    ("spawn", ([],)),
    ("wait_for", ([1],)),
    ("sleep_for", (1.0,)),
    ("sleep_until", (1.0,)),
    ("wait_signal", ("go",)),
    ("step", ("s", print)),
]


@pytest.mark.parametrize(("call", "args"), CALLS)
async def test_a_lease_without_durable_calls_refuses_them(call: str, args: tuple[object, ...]) -> None:
    ctx = LeaseContext(object())
    assert ctx.resumes == 0
    with pytest.raises(Permanent, match=rf"ctx\.{call}\(\) is not available on this worker"):
        await getattr(ctx, call)(*args)


@pytest.mark.parametrize(("call", "args"), CALLS)
async def test_an_older_session_refuses_durable_calls(call: str, args: tuple[object, ...]) -> None:
    sess = _Session()
    sess.version = 6
    ctx = LeaseContext(Lease(pb.Lease(lease=1, task_id=1, resumes=2), None, sess))
    assert ctx.resumes == 2
    with pytest.raises(Permanent, match=rf"ctx\.{call}\(\) needs worker protocol version 7"):
        await getattr(ctx, call)(*args)
    assert sess.queue.empty()  # nothing was sent
