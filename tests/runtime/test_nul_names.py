"""A NUL character in a name or key a durable store keeps as text, on a running scheduler with
SQLite and PostgreSQL (whose text cannot hold one): every in-process entry refuses it before
anything is written (docs/reference/behaviour.md#task-fields), so the group commit it would
have failed goes on, and the scheduler keeps committing the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cronoq import Resource, Scheduler, Task
from cronoq.errors import InvalidSubmission
from cronoq.store import JsonCodec

from .conftest import pool, wait

NUL = "n\x00l"


def refused(what: str) -> str:
    return f"{what} must not contain a NUL character (U+0000)"


async def test_every_in_process_entry_refuses_a_nul(make_store: Callable[[], Any]) -> None:
    store = make_store()
    res = [Resource.semaphore("db", 2)]
    async with Scheduler([pool()], store=store, resources=res, shutdown_grace=0) as s:
        await s.submit("before", key="before")
        for field in ("key", "kind", "pool", "tenant"):
            with pytest.raises(InvalidSubmission) as ei:
                await s.submit("x", **{field: NUL})
            assert ei.value.message == refused(field)
        with pytest.raises(InvalidSubmission, match="dependency key"):
            await s.submit("x", after=NUL)
        with pytest.raises(InvalidSubmission, match="dependency key"):
            await s.submit_batch([Task("x", after=["before", NUL])])
        # (one resource asking one unit: the options cache's fast path, checked by the engine)
        with pytest.raises(InvalidSubmission) as ei:
            await s.submit("x", resources={NUL: 1})
        assert ei.value.message == refused("resource name")
        with pytest.raises(ValueError, match=r"a signal name must not contain a NUL character \(U\+0000\)"):
            await s.signal(NUL)
        with pytest.raises(ValueError, match=r"tenant must not contain a NUL"):
            await s.signal("go", tenant=NUL)
        with pytest.raises(ValueError, match=r"recurring schedule name must not contain a NUL"):
            await s.add_recurring(NUL, "* * * * *", None)
        with pytest.raises(ValueError, match=r"request_key must not contain a NUL"):
            await s.cancel_where(request_key=NUL, kinds="none")
        with pytest.raises(ValueError, match=r"tenant must not contain a NUL"):
            await s.cancel_where(request_key="once", tenant=NUL)
        # the scheduler still commits and runs what comes next
        after = await s.submit("after", key="after", kind="k", resources={"db": 1})
        assert (await wait(after)) == "after"
    store = make_store()
    await store.open()
    try:
        # a lookup by a key with a NUL finds nothing (PostgreSQL: without a query it cannot take)
        assert await store.load_finished_key(NUL, None, JsonCodec()) is None
        assert (await store.load_finished_key("after", None, JsonCodec())) is not None
    finally:
        await store.close()
