"""Keys are scoped by tenant (in-process, with ``tenant=``): the rules of engine/keys.py.

A key names a task within its tenant (tasks without a tenant form one tenant); pools share
the tenant's namespace.  A duplicate returns only the submitter's own task; a dependency on a
key resolves among the dependent's tenant's tasks; a dependency by id on another tenant's
task is refused as an unknown one.  The scoping survives a restart on a durable store.
"""

from __future__ import annotations

import pathlib

import pytest

from cronoq import Scheduler, SqliteStore, SubmitError, Task

from .conftest import Gate, pool, wait


async def test_same_key_in_two_tenants_is_two_tasks() -> None:
    gate = Gate()
    async with Scheduler([pool("a", gate, max=1), pool("b", gate, max=1)]) as s:
        t2 = await s.submit("t2's", key="K", tenant="t2", pool="a")
        t1 = await s.submit("t1's", key="K", tenant="t1", pool="a")
        assert t1.id != t2.id and not t1.duplicate and not t2.duplicate
        none = await s.submit("nobody's", key="K")
        assert none.id not in (t1.id, t2.id) and not none.duplicate
        # a duplicate is the submitter's own task, whatever its pool (pools share the namespace)
        again = await s.submit("ignored", key="K", tenant="t1", pool="b")
        assert (again.id, again.duplicate) == (t1.id, True)
        assert (await s.submit("ignored", key="K")).id == none.id
        # batches: the same rule per member
        handles = await s.submit_batch(
            [Task("x", key="K", tenant="t2"), Task("y", key="K", tenant="t3"), Task("z", key="K")]
        )
        assert [h.duplicate for h in handles] == [True, False, True]
        assert handles[0].id == t2.id and handles[2].id == none.id
        gate.release_all()


async def test_dependencies_stay_within_the_tenant() -> None:
    gate = Gate()
    async with Scheduler([pool("default", gate, max=1, unknown_dependency="await", await_timeout=30)]) as s:
        other = await s.submit("t2's", key="K", tenant="t2")
        # by key: resolves among t1's tasks only (t1 has no K yet: it is awaited)
        waiting = await s.submit("w", after="K", tenant="t1")
        assert await s.status(waiting.id) == "blocked"
        own = await s.submit("t1's", key="K", tenant="t1")
        # by id: another tenant's task is refused like an unknown one
        with pytest.raises(SubmitError) as ei:
            await s.submit("x", after=other.id, tenant="t1")
        assert ei.value.code == "unknown_dependency"
        assert ei.value.message == f"unknown dependency '{other.id}'"
        with pytest.raises(SubmitError) as ei:
            await s.submit_batch([Task("x", after=other.id, tenant="t1")])
        assert ei.value.code == "unknown_dependency"
        with pytest.raises(SubmitError):
            await s.submit("x", after=other.id)  # no tenant is a tenant of its own
        ok = await s.submit("y", after=own.id, tenant="t1")
        gate.release_all()
        assert await wait(own) == "t1's"
        assert await wait(waiting) == "w" and await wait(ok) == "y"
        assert await wait(other) == "t2's"


async def test_scoping_survives_a_restart(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "keys.db"
    gate = Gate()
    async with Scheduler([pool("default", gate, max=1)], store=SqliteStore(db)) as s:
        done = await s.submit("t1 done", key="D", tenant="t1")
        live = await s.submit("t2 live", key="L", tenant="t2", start_in=3600)
        gate.release("t1 done")
        assert await wait(done) == "t1 done"
    async with Scheduler([pool("default", gate, max=1)], store=SqliteStore(db)) as s:
        # retained (terminal) and live tasks keep their tenant's key
        assert (await s.submit("x", key="D", tenant="t1")).id == done.id
        assert (await s.submit("x", key="L", tenant="t2")).id == live.id
        fresh = await s.submit("x", key="D", tenant="t2", start_in=7200)
        assert not fresh.duplicate and fresh.id != done.id
        assert not (await s.submit("x", key="L", tenant="t1", start_in=10800)).duplicate


async def test_lookups_by_key_are_scoped_by_tenant() -> None:
    """status / handle / cancel take ``tenant=``: a key names that tenant's task, and with a
    tenant given another tenant's task (by id too) is as unknown as a missing one."""
    gate = Gate()
    async with Scheduler([pool("a", gate, max=1)]) as s:
        t1 = await s.submit("t1's", key="K", tenant="t1")
        t2 = await s.submit("t2's", key="K", tenant="t2")
        plain = await s.submit("nobody's", key="K")
        assert await s.status("K", tenant="t1") is not None
        h1, h2, h0 = await s.handle("K", tenant="t1"), await s.handle("K", tenant="t2"), await s.handle("K")
        assert (h1.id, h2.id, h0.id) == (t1.id, t2.id, plain.id)  # type: ignore[union-attr]
        assert await s.status("K", tenant="t3") is None and await s.handle("K", tenant="t3") is None
        # another tenant's task by id: unknown to a tenant, known without one
        assert await s.status(t2.id, tenant="t1") is None
        assert await s.cancel(t2.id, tenant="t1") is False
        assert await s.status(t2.id) is not None
        # cancel by key cancels the caller's own task only
        assert await s.cancel("K", tenant="t2") is True
        assert await s.status(t2.id) == "cancelled"
        assert await s.status(t1.id) != "cancelled" and await s.status(plain.id) != "cancelled"
        with pytest.raises(TypeError, match="tenant must be a string"):
            await s.status("K", tenant=1)  # type: ignore[arg-type]
        gate.release_all()
