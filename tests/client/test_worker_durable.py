"""client/worker_durable.py against the fake server (worker protocol version 7,
docs/how-to/durable.md#remote-workers): a lease's durable calls are DurableCall messages
answered by DurableReply; a parked reply frees the slot at once (a lease right behind it is
taken, not handed back) and nothing is reported for the parked lease; errors keep their types."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_worker_fake import running

from cronoq import Permanent
from cronoq.client import Lease, Worker
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb


async def test_a_parked_reply_frees_the_slot_before_the_next_lease(fake: Any) -> None:
    runs: list[int] = []

    async def handle(lease: Lease) -> object:
        runs.append(lease.id)
        if lease.id == 1:
            ids = await lease.spawn({"payload": 5, "kind": "child"})
            await lease.wait_for(ids)
            raise AssertionError("not reached: the attempt parked")
        return "child"

    async with running(Worker(fake.target, "p", handle, slots=1)):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=1, version=7)
        conn.lease(1, resumes=0)
        spawn = await conn.recv_kind("durable")
        assert (spawn.lease, spawn.op, json.loads(spawn.args_json)) == (1, "spawn", {"detached": False})
        assert [s.kind for s in spawn.specs] == ["child"]
        conn.send(durable=pb.DurableReply(call=spawn.call, result_json="[42]"))
        wait = await conn.recv_kind("durable")
        assert (wait.op, json.loads(wait.args_json)) == ("wait_for", {"ids": [42]})
        # the server parks the attempt and, in the same breath, leases the freed slot
        conn.send(durable=pb.DurableReply(call=wait.call, parked=True))
        conn.lease(2)
        done = await conn.recv_kind("complete")  # no Nack, no report for lease 1
        assert done.lease == 2 and runs == [1, 2]


async def test_a_step_runs_its_function_only_when_not_recorded(fake: Any) -> None:
    calls: list[str] = []

    async def handle(lease: Lease) -> object:
        first = await lease.step("a", lambda: calls.append("a") or 1)
        second = await lease.step("b", lambda: calls.append("b") or 2)
        return [first, second, lease.resumes]

    async with running(Worker(fake.target, "p", handle, slots=1)):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=1, version=7)
        conn.lease(1, resumes=2)
        a = await conn.recv_kind("durable")
        conn.send(durable=pb.DurableReply(call=a.call, result_json='{"recorded": true, "value": 1}'))
        b = await conn.recv_kind("durable")
        assert (b.op, json.loads(b.args_json)) == ("step", {"name": "b"})
        conn.send(durable=pb.DurableReply(call=b.call, result_json='{"recorded": false, "value": null}'))
        rec = await conn.recv_kind("durable")
        assert (rec.op, json.loads(rec.args_json)) == ("step_done", {"name": "b", "value": 2})
        conn.send(durable=pb.DurableReply(call=rec.call, result_json='{"recorded": true, "value": 2}'))
        done = await conn.recv_kind("complete")
        assert json.loads(done.output) == [1, 2, 2] and calls == ["b"]


@pytest.mark.parametrize(
    ("kind", "error"),
    [("permanent", Permanent), ("timeout", TimeoutError), ("lookup", LookupError), ("value", ValueError)],
)
async def test_errors_are_raised_with_their_types(fake: Any, kind: str, error: type[Exception]) -> None:
    caught: list[BaseException] = []

    async def handle(lease: Lease) -> object:
        try:
            await lease.wait_signal("go", timeout=1)
        except Exception as e:
            caught.append(e)
        return "ok"

    async with running(Worker(fake.target, "p", handle, slots=1)):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=1, version=7)
        conn.lease(1)
        call = await conn.recv_kind("durable")
        assert json.loads(call.args_json) == {"name": "go", "timeout": 1}
        conn.send(durable=pb.DurableReply(call=call.call, error="boom", error_kind=kind))
        await conn.recv_kind("complete")
    assert type(caught[0]) is error or isinstance(caught[0], error)
    assert str(caught[0]) == "boom"


async def test_steps_in_the_leases_journal_replay_without_a_round_trip(fake: Any) -> None:
    async def handle(lease: Lease) -> object:
        a = await lease.step("a", lambda: "again")  # recorded: answered here
        outs = await lease.wait_for([5])  # not a step: the server, told of the step replayed
        b = await lease.step("b", lambda: "again")  # recorded after the wait: here too
        c = await lease.step("c", lambda: 3)  # new: the server
        return [a, outs[0].status, b, c]

    async with running(Worker(fake.target, "p", handle, slots=1)):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(slots=1, version=7)
        conn.lease(1, resumes=1, journal_json='[["a",1],null,["b",2]]')
        wait = await conn.recv_kind("durable")
        assert (wait.op, wait.replayed) == ("wait_for", 1)
        out = pb.ParentOutcome(id=5, status="succeeded")
        conn.send(durable=pb.DurableReply(call=wait.call, outcomes=[out], cursor=2))
        c = await conn.recv_kind("durable")
        assert (c.op, json.loads(c.args_json), c.replayed) == ("step", {"name": "c"}, 1)
        conn.send(
            durable=pb.DurableReply(call=c.call, result_json='{"recorded": false, "value": null}', cursor=3)
        )
        rec = await conn.recv_kind("durable")
        assert (rec.op, rec.replayed) == ("step_done", 0)
        conn.send(
            durable=pb.DurableReply(call=rec.call, result_json='{"recorded": true, "value": 3}', cursor=4)
        )
        done = await conn.recv_kind("complete")
        assert json.loads(done.output) == [1, "succeeded", 2, 3]
