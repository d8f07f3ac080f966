"""Group commit (docs/reference/behaviour.md#mutations): one store transaction per batch, acknowledgement
after commit."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronoq.engine import Core, CoreConfig, PoolConfig, TaskOptions
from cronoq.engine.actions import Persist
from cronoq.engine.mutations import StatusChange, Submitted, TaskRecord
from cronoq.errors import Fenced, SchedulerError
from cronoq.runtime.durable import Committer
from cronoq.store import JsonCodec, SqliteStore, TransientStoreError

from .conftest import SAFETY, settle, wait

codec = JsonCodec()


def sub(i: int) -> Submitted:
    return Submitted(i, i, 0, TaskRecord(pool="default"))


class FakeStore:
    """Records commit calls; can hold them at a gate and fail them on demand."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []
        self.gate: asyncio.Event | None = None
        self.errors: list[BaseException] = []
        self.entered = asyncio.Event()

    async def commit(self, mutations: list[Any], epoch: int, codec: Any) -> None:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.errors:
            raise self.errors.pop(0)
        self.calls.append(list(mutations))


async def _until(cond: Any) -> None:
    """Poll ``cond`` (the commit loop goes on after the barriers it failed were answered)."""
    while not cond():
        await asyncio.sleep(0.001)


async def test_many_mutations_one_commit() -> None:
    store = FakeStore()
    c = Committer(store, codec, 1)
    for i in range(1, 101):
        c.add([sub(i)])
    await wait(c.barrier())
    assert len(store.calls) == 1 and len(store.calls[0]) == 100
    assert c.commits == 1 and c.committed == 100
    await c.stop()


async def test_barrier_waits_for_the_commit() -> None:
    store = FakeStore()
    store.gate = asyncio.Event()
    c = Committer(store, codec, 1)
    c.add([sub(1)])
    b = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())
    await settle()
    assert not b.done()  # not acknowledged before the commit finished
    store.gate.set()
    await wait(b)
    assert store.calls == [[sub(1)]]
    await c.stop()


async def test_barrier_with_nothing_pending_returns_at_once() -> None:
    c = Committer(FakeStore(), codec, 1)
    await wait(c.barrier(), 0.5)
    await c.stop()


async def test_batches_accumulate_while_a_commit_is_in_flight() -> None:
    store = FakeStore()
    store.gate = asyncio.Event()
    c = Committer(store, codec, 1)
    c.add([sub(0)])
    await wait(store.entered.wait())
    waiters = []
    for i in range(1, 1001):  # 1000 submitters arrive during the first commit
        c.add([sub(i), StatusChange(i, "running", 1, 0)])
        waiters.append(asyncio.ensure_future(c.barrier()))
    first = asyncio.ensure_future(c.barrier())
    await settle()
    assert not any(w.done() for w in waiters)
    store.gate.set()
    await wait(asyncio.gather(first, *waiters))
    assert len(store.calls) == 2 and len(store.calls[1]) == 2000
    assert c.commits / 1001 < 0.1  # commits per task under load
    await c.stop()


async def test_a_later_barrier_does_not_resolve_early() -> None:
    store = FakeStore()
    store.gate = asyncio.Event()
    c = Committer(store, codec, 1)
    c.add([sub(1)])
    b1 = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())
    c.add([sub(2)])  # added while sub(1)'s commit is in flight
    b2 = asyncio.ensure_future(c.barrier())
    store.gate.set()
    await wait(b1)
    assert len(store.calls) >= 1
    await wait(b2)
    assert [m.id for call in store.calls for m in call] == [1, 2]
    await c.stop()


async def test_transient_errors_are_retried_with_backoff() -> None:
    store = FakeStore()
    store.errors = [TransientStoreError("busy"), OSError("blip")]
    c = Committer(store, codec, 1, retry_initial=0.001)
    c.add([sub(1)])
    await wait(c.barrier())
    assert c.retries == 2 and store.calls == [[sub(1)]]
    await c.stop()


class FailsTaskOne(FakeStore):
    """Fails for good every commit that holds task 1's mutation."""

    async def commit(self, mutations: list[Any], epoch: int, codec: Any) -> None:
        await super().commit(mutations, epoch, codec)
        if any(m.id == 1 for m in mutations):
            self.calls.pop()
            raise RuntimeError("bad batch")


async def test_a_batch_cut_at_max_batch_keeps_each_add_whole() -> None:
    """Over ``max_batch`` pending mutations are cut between ``add`` calls, never inside one:
    a submission's mutations commit, or fail, together (cut inside it, its first part failed
    with the other submission's and it was acknowledged with only its second part stored)."""
    store = FailsTaskOne()
    store.gate = asyncio.Event()
    c = Committer(store, codec, 1, max_batch=2, defer=0)
    c.add([sub(10)])
    await wait(store.entered.wait())  # (held: the next two calls pend behind it)
    c.add([sub(1)])  # someone else's submission
    b1 = asyncio.ensure_future(c.barrier())
    await settle()
    c.add([sub(2), sub(3)])  # one submission of two tasks
    b2 = asyncio.ensure_future(c.barrier())
    await settle()
    store.gate.set()
    for b in (b1, b2):  # (b2 too: it came after task 1's lost mutation)
        with pytest.raises(SchedulerError, match="bad batch"):
            await wait(b)
    await wait(_until(lambda: [[m.id for m in call] for call in store.calls] == [[10], [2, 3]]))
    with pytest.raises(SchedulerError):
        await c.stop()
    c = Committer(FakeStore(), codec, 1, max_batch=2, defer=0)
    c.add([sub(4), sub(5), sub(6)])  # one call bigger than max_batch: one commit of it all
    c.add([sub(7)])
    c.add([sub(8)])
    await wait(c.barrier())
    assert isinstance(c.store, FakeStore)
    assert [[m.id for m in call] for call in c.store.calls] == [[4, 5, 6], [7, 8]]
    await c.stop()


async def test_a_permanent_error_fails_that_batch_and_goes_on() -> None:
    """The later mutations are still written, but no barrier is acknowledged any more: each
    comes after a lost mutation (the engine is ahead of the store; the scheduler steps down)."""
    store = FakeStore()
    store.errors = [SchedulerError("disk is read-only")]
    seen: list[BaseException] = []
    c = Committer(store, codec, 1, on_error=seen.append)
    c.add([sub(1)])
    with pytest.raises(SchedulerError, match="read-only"):
        await wait(c.barrier())
    assert len(seen) == 1 and c.failures == 1
    c.add([sub(2)])
    with pytest.raises(SchedulerError, match="read-only"):
        await wait(c.barrier())
    assert store.calls == [[sub(2)]]
    c.add([sub(3)])
    with pytest.raises(SchedulerError, match="read-only"):
        await wait(c.stop())  # (its flush is a barrier too: it writes what is pending first)
    assert store.calls == [[sub(2)], [sub(3)]]


async def test_a_barrier_after_a_lost_batch_fails_though_the_next_batch_lands() -> None:
    """A barrier knows only how many mutations came before it: one waiting on a later batch
    (another submission's, or none of its own: a keyed duplicate of a task in the lost batch)
    must not be acknowledged when that batch lands, nor one called after the loss."""
    store = FailsTaskOne()
    store.gate = asyncio.Event()
    seen: list[BaseException] = []
    c = Committer(store, codec, 1, defer=0, on_error=seen.append)
    c.add([sub(1)])  # the submission whose commit fails for good
    b1 = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())
    c.add([sub(2)])  # another submission, pending behind it
    b2 = asyncio.ensure_future(c.barrier())
    await settle()
    store.gate.set()
    for b in (b1, b2):
        with pytest.raises(SchedulerError, match="bad batch"):
            await wait(b)
    await wait(_until(lambda: store.calls == [[sub(2)]]))  # (written all the same)
    with pytest.raises(SchedulerError, match="bad batch"):
        await c.barrier()  # called after the loss: the engine is ahead of the store
    assert len(seen) == 1
    with pytest.raises(SchedulerError):
        await c.stop()


async def test_a_stop_waiting_when_a_batch_is_lost_still_writes_the_rest() -> None:
    """``stop`` flushes everything added before it, also when a batch before fails for good
    meanwhile (the scheduler's shutdown racing a lost commit): its flush failed at once, and
    the commit loop was cancelled with the later mutations unwritten (the tasks they ended
    would run again after a restart)."""
    store = FailsTaskOne()
    store.gate = asyncio.Event()
    c = Committer(store, codec, 1, defer=0)
    c.add([sub(1)])  # its commit fails for good
    await wait(store.entered.wait())
    c.add([sub(2)])  # pending behind it
    stopping = asyncio.ensure_future(c.stop())
    await settle()
    store.gate.set()
    with pytest.raises(SchedulerError, match="bad batch"):
        await wait(stopping)
    assert store.calls == [[sub(2)]]


async def test_fenced_calls_back_and_fails_every_barrier() -> None:
    store = FakeStore()
    store.gate = asyncio.Event()
    store.errors = [Fenced("another instance took over")]
    fenced: list[Fenced] = []
    c = Committer(store, codec, 1, on_fenced=fenced.append)
    c.add([sub(1)])
    b1 = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())
    c.add([sub(2)])  # still pending when the fence hits
    b2 = asyncio.ensure_future(c.barrier())
    store.gate.set()
    for b in (b1, b2):
        with pytest.raises(Fenced) as ei:
            await wait(b)
        assert isinstance(ei.value, SchedulerError)
    assert len(fenced) == 1 and c.fenced is fenced[0]
    c.add([sub(3)])  # dropped: this instance no longer leads
    with pytest.raises(Fenced):
        await c.barrier()
    assert store.calls == []
    await c.stop()


async def test_stop_flushes_then_refuses() -> None:
    store = FakeStore()
    c = Committer(store, codec, 1)
    c.add([sub(1), sub(2)])
    await wait(c.stop())
    assert store.calls == [[sub(1), sub(2)]]
    with pytest.raises(SchedulerError):
        c.add([sub(3)])
    await c.stop()  # idempotent


async def test_group_commit_into_a_real_sqlite_store(tmp_path: pathlib.Path) -> None:
    store = SqliteStore(tmp_path / "gc.db")
    await store.open()
    epoch = await store.acquire()
    calls = 0
    real_commit = store.commit

    async def counting(muts: list[Any], ep: int, cd: Any) -> None:
        nonlocal calls
        calls += 1
        await real_commit(muts, ep, cd)

    store.commit = counting  # type: ignore[method-assign]
    core = Core(
        CoreConfig([PoolConfig("default", min=1, max=1, autoscale=False)], persist=True, time_base=10**18),
        epoch=epoch,
    )
    c = Committer(store, codec, epoch)

    async def submitter(i: int) -> int:
        tid, _ = core.submit(0, TaskOptions(), i, blob=codec.encode(i))
        c.add([a.mutation for a in core.drain_actions() if isinstance(a, Persist)])
        await c.barrier()  # acknowledged only once durable
        return tid

    try:
        ids = await wait(asyncio.gather(*(submitter(i) for i in range(500))))
        assert calls <= 50  # < 0.1 commits per task
        rec = await store.load(codec)
        assert sorted(t.id for t in rec.tasks) == sorted(ids)
        assert sorted(t.payload for t in rec.tasks) == list(range(500))
        await c.stop()
    finally:
        await store.close()


@pytest.mark.parametrize(("gather", "groups"), [(0.2, [[1], [2, 3]]), (0.0, [[1], [2], [3]])])
async def test_a_small_commit_right_after_another_gathers_more_first(
    gather: float, groups: list[list[int]]
) -> None:
    """Steady load: a few mutations pending right after a commit wait ``gather`` for company
    (without it each commit goes at once)."""
    store = FakeStore()
    store.gate = asyncio.Event()
    c = Committer(store, codec, 1, gather=gather, defer=0)  # ([2] has no waiter: see defer)
    c.add([sub(1)])
    first = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())  # commit 1 in flight
    c.add([sub(2)])
    store.gate.set()
    await wait(first)  # commit 1 done: [2] is pending (and, with gather, waits for more)
    c.add([sub(3)])
    await wait(c.barrier())
    assert [[m.id for m in call] for call in store.calls] == groups
    await c.stop()


async def test_after_an_idle_spell_the_first_commit_does_not_wait() -> None:
    c = Committer(FakeStore(), codec, 1, gather=5.0)
    c.add([sub(1)])
    await asyncio.wait_for(c.barrier(), 2.5)  # far less than gather: it did not wait
    await c.stop()


def test_gather_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="gather must be >= 0"):
        Committer(FakeStore(), codec, 1, gather=-1)
    with pytest.raises(ValueError, match="gather_enough must be >= 1"):
        Committer(FakeStore(), codec, 1, gather_enough=0)
    with pytest.raises(ValueError, match="gather_lone must be >= 0"):
        Committer(FakeStore(), codec, 1, gather_lone=-1)


async def _acked(c: Committer) -> None:
    """Await a barrier taken right away, as a submitter does after its ``add`` (``wait`` would
    take it a loop turn later, in a task of its own), with the same safety timeout."""
    async with asyncio.timeout(SAFETY):
        await c.barrier()


async def test_a_lone_submitter_stops_paying_the_gather() -> None:
    """One submitter in a closed loop (each submit waits for its answer) has no company: after
    ``gather_lone`` commits that answered one barrier each, its commits go at once — and its
    barriers still resolve only after their commit returned."""
    store = FakeStore()
    c = Committer(store, codec, 1, gather=0.3, gather_lone=3, defer=0)
    for i in range(1, 7):
        c.add([sub(i)])
        await _acked(c)
    # 1 after an idle spell (no gather); 2 and 3 gathered for nothing; 4, 5, 6 at once
    assert (c.gathers, c.gathers_skipped) == (2, 3)
    assert [[m.id for m in call] for call in store.calls] == [[i] for i in range(1, 7)]
    store.gate = asyncio.Event()
    store.entered.clear()
    c.add([sub(7)])
    b = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())
    await settle()
    assert not b.done() and c.gathers_skipped == 4  # in flight, not gathered: not acknowledged
    store.gate.set()
    await wait(b)
    await c.stop()


async def test_a_second_submitter_brings_the_gather_back() -> None:
    """After lone commits, a barrier that comes while another one still waits is company: the
    next small commit right after another gathers again, and a third submitter joins it."""
    store = FakeStore()
    c = Committer(store, codec, 1, gather=0.3, gather_lone=2, defer=0)
    c.add([sub(1)])
    await _acked(c)  # (after an idle spell: no gather)
    c.add([sub(2)])
    await _acked(c)  # gathered, nobody joined: two lone commits
    store.gate = asyncio.Event()
    store.entered.clear()
    c.add([sub(3)])
    first = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())  # 3 went at once (lone) and is in flight
    assert (c.gathers, c.gathers_skipped) == (1, 1)
    c.add([sub(4)])
    second = asyncio.ensure_future(c.barrier())  # while first still waits: company
    await settle()
    store.gate.set()
    await wait(first)  # commit 3 returned: [4] is pending and gathers again
    c.add([sub(5)])
    await wait(asyncio.gather(second, c.barrier()))
    assert c.gathers == 2
    assert [[m.id for m in call] for call in store.calls] == [[1], [2], [3], [4, 5]]
    await c.stop()


async def test_mutations_nobody_waits_for_wait_for_a_barrier_up_to_defer() -> None:
    """A task's later changes (a lease, a completion) have no barrier: they wait up to
    ``defer`` for one, so they ride with the next acknowledged group's commit instead of
    making a commit of their own that the group would queue behind."""
    store = FakeStore()
    c = Committer(store, codec, 1, gather=0, defer=5.0)
    c.add([sub(1)])
    await settle()
    assert store.calls == [] and not store.entered.is_set()  # deferred: nobody waits
    c.add([sub(2)])
    b = asyncio.ensure_future(c.barrier())  # a submission's barrier ends the deferral at once
    await wait(b, 2.5)
    assert [[m.id for m in call] for call in store.calls] == [[1, 2]]
    c.add([sub(3)])
    store.entered.clear()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    c2 = Committer(store, codec, 1, gather=0, defer=0.3)
    c2.add([sub(4)])
    await wait(store.entered.wait())  # (no barrier: it commits when defer runs out)
    await wait(c2.barrier())
    assert loop.time() - t0 >= 0.25  # (defer 0.3 s, no waiter: it went when defer ran out)
    assert store.calls[-1] == [sub(4)]
    await c.stop()  # (flushes [3]: stop's barrier ends its deferral)
    assert store.calls[-1] == [sub(3)]
    await c2.stop()


async def test_a_deferred_group_is_acknowledged_only_after_its_commit() -> None:
    """Ack order with a deferral ended by a barrier: the barrier resolves after the commit."""
    store = FakeStore()
    store.gate = asyncio.Event()
    c = Committer(store, codec, 1, gather=0, defer=5.0)
    c.add([sub(1), sub(2)])
    await settle()
    b = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait(), 2.5)
    await settle()
    assert not b.done() and store.calls == []  # the commit is in flight: not acknowledged
    store.gate.set()
    await wait(b)
    assert store.calls == [[sub(1), sub(2)]]
    await c.stop()


def test_defer_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="defer must be >= 0"):
        Committer(FakeStore(), codec, 1, defer=-1)


async def _right_after_a_commit(c: Committer, store: FakeStore) -> None:
    """Commit 1 in flight, [2] added meanwhile, then commit 1 done: the commit loop is now
    gathering for [2] (a small commit right after another)."""
    store.gate = asyncio.Event()
    c.add([sub(1)])
    first = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())
    c.add([sub(2)])
    store.gate.set()
    await wait(first)


@pytest.mark.parametrize("big", [False, True])
async def test_a_barrier_on_a_big_group_ends_the_gather(big: bool) -> None:
    """A barrier waiting on ``gather_enough`` pending mutations or more (64 coroutines' one
    ``SubmitMany``) ends a gather under way: the group goes at once, not ``gather`` later; a
    smaller one still waits for company."""
    store = FakeStore()
    c = Committer(store, codec, 1, gather=0.5, gather_enough=10)
    await _right_after_a_commit(c, store)
    n = 9 if big else 3  # [2] + 9 = 10 pending: enough
    c.add([sub(i) for i in range(3, 3 + n)])
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await wait(c.barrier())
    took = loop.time() - t0
    assert [len(call) for call in store.calls] == [1, 1 + n]
    if big:
        assert took < 0.25, took  # (far less than gather: it did not wait it out)
    else:
        assert took >= 0.4, took  # (gather 0.5 s; the loop's clock may round a little)
    await c.stop()


async def test_a_big_group_that_ends_the_gather_is_acknowledged_only_after_its_commit() -> None:
    """Ack order with the gather cut short: the barrier resolves after the group's commit
    returns, never when the gather ends or the commit starts."""
    store = FakeStore()
    c = Committer(store, codec, 1, gather=5.0, gather_enough=4)
    await _right_after_a_commit(c, store)
    store.gate = asyncio.Event()
    store.entered.clear()
    c.add([sub(i) for i in range(3, 8)])
    b = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait(), 2.5)  # (the gather of 5 s ended at once)
    await settle()
    assert not b.done() and len(store.calls) == 1  # commit 2 in flight: not acknowledged
    store.gate.set()
    await wait(b)
    assert [m.id for m in store.calls[1]] == [2, 3, 4, 5, 6, 7]
    await c.stop()


async def test_a_big_group_already_waited_for_does_not_gather() -> None:
    """The barrier came before the commit loop looked (one loop turn): no gather either."""
    store = FakeStore()
    c = Committer(store, codec, 1, gather=5.0, gather_enough=4)
    store.gate = asyncio.Event()
    c.add([sub(1)])
    first = asyncio.ensure_future(c.barrier())
    await wait(store.entered.wait())
    c.add([sub(i) for i in range(2, 7)])  # 5 pending while commit 1 is in flight
    second = asyncio.ensure_future(c.barrier())
    await settle()
    store.gate.set()
    await wait(asyncio.gather(first, second), 2.5)
    assert [len(call) for call in store.calls] == [1, 5]
    await c.stop()


class HeldSqliteStore(SqliteStore):
    """A real SQLite store whose commits wait at a gate: what was committed when, and what
    the caller had been acknowledged at that moment."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()
        self.committed_ids: set[int] = set()

    async def commit(self, mutations: list[Any], epoch: int, codec: Any) -> None:
        self.entered.set()
        await self.gate.wait()
        await super().commit(mutations, epoch, codec)
        self.committed_ids.update(m.id for m in mutations if isinstance(m, Submitted))


async def test_concurrent_submits_are_acknowledged_only_after_their_commit(tmp_path: pathlib.Path) -> None:
    """Group commit's order on a real scheduler and store: while the commit is held, no
    submission of the group is acknowledged; once it lands, each acknowledged id is in the store."""
    from cronoq import Scheduler

    from .conftest import pool

    store = HeldSqliteStore(tmp_path / "ack.db")
    async with Scheduler([pool("default", max=1)], store=store) as s:
        store.gate.clear()
        store.entered.clear()
        acked: list[int] = []

        async def submit(i: int) -> None:
            tid = await s.enqueue(i)
            assert tid in store.committed_ids, "acknowledged before its commit"
            acked.append(tid)

        subs = [asyncio.ensure_future(submit(i)) for i in range(20)]
        await wait(store.entered.wait())  # the group's commit is in flight, held
        await settle()
        assert acked == [] and not any(t.done() for t in subs)
        store.gate.set()
        await wait(asyncio.gather(*subs))
        assert len(acked) == 20
    rec = SqliteStore(tmp_path / "ack.db")
    await rec.open()
    try:
        loaded = await rec.load(codec)
        assert set(acked) <= {t.id for t in loaded.tasks} | {t.id for t in loaded.terminal}
    finally:
        await rec.close()


class LosesKeyK(SqliteStore):
    """A real SQLite store whose commits of the task with key ``k`` fail for good, once
    released from a gate."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def commit(self, mutations: list[Any], epoch: int, codec: Any) -> None:
        if any(isinstance(m, Submitted) and m.spec.key == "k" for m in mutations):
            self.entered.set()
            await self.gate.wait()
            raise SchedulerError("disk full")
        await super().commit(mutations, epoch, codec)


async def test_a_duplicate_of_a_lost_submission_is_not_acknowledged(tmp_path: pathlib.Path) -> None:
    """A keyed submission answered as a duplicate of one whose commit then fails for good must
    fail too, though the commit after it (another submission's) lands: its task was never
    stored."""
    from cronoq import Scheduler

    from .conftest import pool

    store = LosesKeyK(tmp_path / "lost.db")
    s = Scheduler([pool("default", max=1)], store=store)
    await s.start()
    try:
        first = asyncio.ensure_future(s.enqueue(1, key="k"))
        await wait(store.entered.wait())  # its commit is in flight
        other = asyncio.ensure_future(s.enqueue(2, key="j"))  # pending behind it
        await settle()
        dup = asyncio.ensure_future(s.enqueue(3, key="k"))  # a duplicate: adds no mutation
        await settle()
        store.gate.set()
        results = await wait(asyncio.gather(first, other, dup, return_exceptions=True))
        assert isinstance(results[0], SchedulerError)
        assert isinstance(results[2], SchedulerError), "a duplicate of a lost task was acknowledged"
        assert "disk full" in str(results[2])
    finally:
        await s.shutdown(0)


class RandomStore:
    """Commits after a few loop turns, and fails some for good, some transiently, some fenced
    (``rng``'s draws); records what each commit that succeeded held."""

    def __init__(self, rng: random.Random, fail: float, fence: float) -> None:
        self.rng, self.fail, self.fence = rng, fail, fence
        self.batches: list[list[int]] = []
        self.committed: set[int] = set()
        self.lost: set[int] = set()

    async def commit(self, mutations: list[Any], epoch: int, codec: Any) -> None:
        for _ in range(self.rng.randint(0, 3)):
            await asyncio.sleep(0)
        r = self.rng.random()
        if r < self.fence:
            raise Fenced("another instance took over")
        if r < self.fence + self.fail:
            self.lost.update(mutations)
            raise RuntimeError("bad batch")
        if r < self.fence + self.fail + 0.1:
            raise TransientStoreError("busy")
        self.batches.append(list(mutations))
        self.committed.update(mutations)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(
    seed=st.integers(0, 2**32),
    ops=st.lists(st.tuples(st.sampled_from(["add", "add+barrier", "barrier", "turns"]), st.integers(1, 6))),
    fail=st.sampled_from([0.0, 0.05, 0.2]),
    fence=st.sampled_from([0.0, 0.0, 0.03]),
    max_batch=st.integers(1, 12),
    gather=st.sampled_from([0.0, 0.0005]),
    defer=st.sampled_from([0.0, 0.001]),
)
def test_random_interleavings_never_acknowledge_early(
    seed: int,
    ops: list[tuple[str, int]],
    fail: float,
    fence: float,
    max_batch: int,
    gather: float,
    defer: float,
) -> None:
    """Random adds, barriers and loop turns against commits that take turns and fail at
    random: a barrier that resolves finds every mutation added before it committed; a
    commit holds whole ``add`` calls, in order, each once; no barrier after a lost mutation
    is acknowledged; with no failure every barrier is."""

    async def run() -> None:
        rng = random.Random(seed)
        store = RandomStore(rng, fail, fence)
        c = Committer(
            store, codec, 1, max_batch=max_batch, retry_initial=0.0001, retry_max=0.0005,
            gather=gather, defer=defer, gather_lone=rng.choice([0, 2, 8]),
            gather_enough=rng.choice([1, 4, 64]),
        )  # fmt: skip
        calls: list[tuple[int, int]] = []  # each add's first and last mutation
        answers: list[tuple[str, int]] = []
        n = 0

        async def barrier(before: int) -> None:
            try:
                await c.barrier()
            except SchedulerError:  # (Fenced too)
                answers.append(("failed", before))
                return
            early = [m for m in range(1, before + 1) if m not in store.committed]
            assert not early, f"acknowledged before mutations {early[:5]} were committed"
            answers.append(("ok", before))

        waiting = []
        for op, k in ops:
            if op.startswith("add"):
                c.add(list(range(n + 1, n + k + 1)))
                calls.append((n + 1, n + k))
                n += k
            if op.endswith("barrier"):
                waiting.append(asyncio.ensure_future(barrier(n)))
            elif op == "turns":
                await settle(k)
        await wait(asyncio.gather(*waiting))
        with contextlib.suppress(SchedulerError):
            await wait(c.stop())
        if c.fenced is None:  # a stop's flush writes (or loses) everything added before it
            assert store.committed | store.lost == set(range(1, n + 1))
        firsts, lasts = {a for a, _ in calls}, {b for _, b in calls}
        order: list[int] = []
        for b in store.batches:
            assert b[0] in firsts and b[-1] in lasts, f"an add split over commits: {b}"
            assert len(b) <= max_batch or (b[0], b[-1]) in calls, f"over max_batch: {b}"
            order += b
        assert order == sorted(set(order))
        if store.lost:
            assert all(before < min(store.lost) for how, before in answers if how == "ok")
        elif c.fenced is None:
            assert all(how == "ok" for how, _ in answers)

    asyncio.run(run())


async def test_a_lost_commit_steps_down_saying_so(tmp_path: pathlib.Path, caplog: Any) -> None:
    """A commit that failed for good steps the scheduler down, logged as what it is: it was
    logged "lost leadership of the store", which sends an operator looking for another
    instance, and the store was not released, which leaves a standby waiting for the lease."""
    from cronoq import Scheduler

    from .conftest import pool

    store = LosesKeyK(tmp_path / "lost.db")
    store.gate.set()
    released: list[bool] = []
    release = store.release

    async def spy() -> None:
        released.append(True)
        await release()

    store.release = spy  # type: ignore[method-assign]
    stepped: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
    s = Scheduler([pool("default", max=1)], store=store)
    s.on_fenced = stepped.set_result
    await s.start()
    with pytest.raises(SchedulerError, match="disk full"):
        await wait(s.enqueue(1, key="k"))
    assert str(await wait(stepped)) == "disk full"
    assert not s.started
    logged = [r.getMessage() for r in caplog.records if r.name == "cronoq"]
    assert not any("leadership" in m for m in logged), logged
    assert any("commit failed for good" in m and "disk full" in m for m in logged), logged
    assert released == [True]
