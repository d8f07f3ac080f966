"""Concurrent ``Client.submit()`` calls are coalesced into one ``SubmitMany`` (against the fake
server, which records every call): each caller gets exactly its own answer or error, a lone
submit is a plain ``Submit``, a cancelled caller does not disturb the others, and a server
without ``SubmitMany`` gets ``Submit`` calls."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from cronoq.client import Client, ClientError


def calls(fake: Any, method: str) -> list[Any]:
    return [req for m, req, _ in fake.requests if m == method]


async def test_concurrent_submits_share_one_call(fake: Any) -> None:
    async with Client(fake.target) as client:
        subs = await asyncio.gather(*(client.submit({"n": i}) for i in range(50)))
    assert len({s.id for s in subs}) == 50
    (many,) = calls(fake, "SubmitMany")
    assert [t.payload for t in many.tasks] == [f'{{"n":{i}}}'.encode() for i in range(50)]
    # each caller got the id of its own task
    for i, s in enumerate(subs):
        assert fake.tasks[s.id].spec.payload == f'{{"n":{i}}}'.encode()
    assert calls(fake, "Submit") == []


async def test_a_lone_submit_is_a_plain_submit(fake: Any) -> None:
    async with Client(fake.target) as client:
        await client.submit({"a": 1})
        await client.submit({"a": 2})
    assert len(calls(fake, "Submit")) == 2 and calls(fake, "SubmitMany") == []


async def test_each_caller_gets_its_own_error(fake: Any) -> None:
    async with Client(fake.target) as client:
        results = await asyncio.gather(
            client.submit(1), client.submit(2, pool="nope"), client.submit(3), return_exceptions=True
        )
    ok1, err, ok3 = results
    assert isinstance(err, ClientError) and (err.code, err.message) == ("not_found", "unknown pool 'nope'")
    assert not isinstance(ok1, BaseException) and not isinstance(ok3, BaseException)
    assert ok1.id != ok3.id
    assert len(calls(fake, "SubmitMany")) == 1


async def test_a_key_twice_in_one_call_is_a_duplicate_of_the_first(fake: Any) -> None:
    async with Client(fake.target) as client:
        a, b = await asyncio.gather(client.submit(1, key="k"), client.submit(2, key="k"))
    assert (a.id, a.duplicate) == (b.id, False) and b.duplicate


async def test_a_cancelled_caller_leaves_the_others_alone(fake: Any) -> None:
    async with Client(fake.target) as client:
        victim = asyncio.create_task(client.submit("cancelled"))
        others = [asyncio.create_task(client.submit(i)) for i in range(5)]
        await asyncio.sleep(0)  # every task queued its item
        victim.cancel()
        subs = await asyncio.gather(*others)
        with pytest.raises(asyncio.CancelledError):
            await victim
    assert len({s.id for s in subs}) == 5
    (many,) = calls(fake, "SubmitMany")
    assert len(many.tasks) == 5  # the cancelled caller's item was dropped before sending


async def test_whole_call_failure_reaches_every_caller(fake: Any) -> None:
    fake.fail("SubmitMany", grpc.StatusCode.PERMISSION_DENIED, "token may not submit")
    async with Client(fake.target) as client:
        results = await asyncio.gather(*(client.submit(i) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, ClientError) and r.code == "permission_denied" for r in results)


async def test_a_server_without_submit_many_gets_submits(fake: Any) -> None:
    fake.submit_many = False
    async with Client(fake.target) as client:
        subs = await asyncio.gather(*(client.submit(i) for i in range(4)))
        assert len({s.id for s in subs}) == 4
        subs = await asyncio.gather(*(client.submit(i) for i in range(4)))
    assert len(calls(fake, "Submit")) == 8  # remembered: the second round went straight to Submit


async def test_coalescing_can_be_turned_off(fake: Any) -> None:
    async with Client(fake.target, coalesce_submits=False) as client:
        await asyncio.gather(*(client.submit(i) for i in range(3)))
    assert len(calls(fake, "Submit")) == 3 and calls(fake, "SubmitMany") == []
