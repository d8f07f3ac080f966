"""BlockingScheduler: the Scheduler API, synchronous, on a private loop thread
(docs/reference/behaviour.md#blocking-api)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cronoq import (
    BlockingEventStream,
    BlockingHandle,
    BlockingScheduler,
    EventsLagged,
    Permanent,
    Pool,
    SchedulerError,
    Snapshot,
    SubmitError,
    Task,
    TaskFailed,
)

NOT_STARTED = "scheduler not started; call `await scheduler.start()` first"
SAFETY = 10.0


class ThreadGate:
    """A plain (thread-pool) executor whose attempts block until their payload is released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.order: list[Any] = []
        self.threads: set[str] = set()
        self._started: dict[Any, threading.Event] = {}
        self._gates: dict[Any, threading.Event] = {}

    def _ev(self, d: dict[Any, threading.Event], p: Any) -> threading.Event:
        with self.lock:
            return d.setdefault(p, threading.Event())

    def started(self, p: Any) -> bool:
        return self._ev(self._started, p).wait(SAFETY)

    def release(self, p: Any) -> None:
        self._ev(self._gates, p).set()

    def __call__(self, ctx: Any, payload: Any) -> Any:
        with self.lock:
            self.order.append(payload)
            self.threads.add(threading.current_thread().name)
        self._ev(self._started, payload).set()
        if not self._ev(self._gates, payload).wait(SAFETY):
            raise RuntimeError("gate never released")
        return payload


async def aecho(ctx: Any, payload: Any) -> Any:
    if payload == "boom":
        raise Permanent("nope")
    return payload


def until(cond: Any) -> None:
    """Poll ``cond`` from this thread; the timeout is only a safety net."""
    deadline = time.monotonic() + SAFETY
    while not cond():
        assert time.monotonic() < deadline, "condition not reached before the safety timeout"
        time.sleep(0.005)


def bpool(executor: Any = aecho, **kw: Any) -> Pool:
    kw.setdefault("autoscale", False)
    kw.setdefault("min", 2)
    kw.setdefault("max", 4)
    return Pool("default", executor, **kw)


@pytest.fixture
def bs() -> Iterator[BlockingScheduler]:
    s = BlockingScheduler([bpool()])
    s.start()
    try:
        yield s
    finally:
        s.shutdown()


def test_construction_validates_like_scheduler() -> None:
    with pytest.raises(ValueError, match="at least one pool is required"):
        BlockingScheduler([])
    with pytest.raises(ValueError, match="duplicate pool name 'default'"):
        BlockingScheduler([bpool(), bpool()])


def test_calls_before_start_raise() -> None:
    s = BlockingScheduler([bpool()])
    assert s.started is False
    assert s.pools == ["default"] and s.default_pool == "default"
    calls = [
        lambda: s.submit(1),
        lambda: s.enqueue(1),
        lambda: s.submit_batch([Task(1)]),
        lambda: s.cancel(1),
        lambda: s.status(1),
        lambda: s.handle(1),
        lambda: s.snapshot(),
        lambda: s.set_capacity("default", 1),
        lambda: s.add_recurring("r", "* * * * *", None),
        lambda: s.remove_recurring("r"),
        lambda: s.list_recurring(),
        lambda: s.events(),
    ]
    for call in calls:
        with pytest.raises(SchedulerError) as ei:
            call()
        assert isinstance(ei.value, RuntimeError)
        assert str(ei.value) == NOT_STARTED
    s.shutdown()  # a no-op before start


def test_calls_after_shutdown_raise() -> None:
    s = BlockingScheduler([bpool()])
    s.start()
    assert s.submit(1).result(SAFETY) == 1
    s.shutdown()
    assert s.started is False
    with pytest.raises(RuntimeError, match="scheduler not started"):
        s.submit(2)
    s.shutdown()  # idempotent


def test_submit_and_result(bs: BlockingScheduler) -> None:
    h = bs.submit({"x": 1}, key="k")
    assert isinstance(h, BlockingHandle)
    assert h.id == 1 and h.duplicate is False
    assert h.result(SAFETY) == {"x": 1}
    assert h.done()
    dup = bs.submit("other", key="k")
    assert dup.duplicate is True and dup.id == h.id
    assert dup.result(SAFETY) == {"x": 1}
    bad = bs.submit("boom")
    with pytest.raises(TaskFailed) as ei:
        bad.result(SAFETY)
    assert (ei.value.status, ei.value.message, ei.value.task_id) == ("failed", "nope", bad.id)


def test_result_timeout(bs: BlockingScheduler) -> None:
    h = bs.submit("later", start_in=30)
    with pytest.raises(TimeoutError):
        h.result(0.05)
    assert not h.done()
    assert bs.status(h.id) == "scheduled"  # a timed-out wait does not cancel the task
    assert h.cancel() is True
    with pytest.raises(TaskFailed) as ei:
        h.result(SAFETY)
    assert ei.value.status == "cancelled"


def test_enqueue_and_status(bs: BlockingScheduler) -> None:
    tid = bs.enqueue("x", key="e")
    assert isinstance(tid, int)
    h = bs.handle("e")
    assert h is not None and h.id == tid
    assert h.result(SAFETY) == "x"
    assert bs.status(tid) == "succeeded"
    assert bs.status("e") == "succeeded"
    assert bs.status("missing") is None
    assert bs.handle(12345) is None
    with pytest.raises(ValueError):
        bs.status(1.5)  # type: ignore[arg-type]


def test_submit_errors_propagate(bs: BlockingScheduler) -> None:
    with pytest.raises(SubmitError) as ei:
        bs.submit(1, pool="nope")
    assert (ei.value.code, ei.value.message) == ("unknown_pool", "unknown pool 'nope'")
    with pytest.raises(SubmitError) as ei:
        bs.enqueue(1, after="missing")
    assert ei.value.code == "unknown_dependency"
    with pytest.raises(ValueError):
        bs.submit(1, priority="urgent")


def test_submit_batch(bs: BlockingScheduler) -> None:
    hs = bs.submit_batch([Task("b", key="b", after="a"), Task("a", key="a")])
    assert [h.result(SAFETY) for h in hs] == ["b", "a"]
    assert bs.submit_batch([]) == []
    with pytest.raises(SubmitError) as ei:
        bs.submit_batch([Task(1, key="d"), Task(2, key="d")])
    assert ei.value.code == "duplicate_key_in_batch"
    with pytest.raises(SubmitError) as ei:
        bs.submit_batch([Task(1, key="x", after="y"), Task(2, key="y", after="x")])
    assert ei.value.code == "cycle"
    assert bs.status("x") is None


def test_cancel() -> None:
    gate = ThreadGate()
    with BlockingScheduler([bpool(gate, min=1, max=1)]) as s:
        running = s.submit("run")
        queued = s.submit("queued")
        assert gate.started("run")
        assert s.status(queued.id) == "ready"
        assert s.cancel(queued.id) is True
        assert s.cancel(queued.id) is False
        assert s.cancel("unknown") is False
        with pytest.raises(TaskFailed) as ei:
            queued.result(SAFETY)
        assert (ei.value.status, ei.value.message) == ("cancelled", "cancelled")
        assert running.cancel() is True  # a running thread attempt is marked cancelled
        gate.release("run")
        with pytest.raises(TaskFailed):
            running.result(SAFETY)
        assert s.snapshot().totals["cancelled"] == 2


def test_snapshot_and_set_capacity(bs: BlockingScheduler) -> None:
    snap = bs.snapshot()
    assert isinstance(snap, Snapshot)
    p = snap.pool("default")
    assert p is not None and p.capacity == 2
    bs.set_capacity("default", 3)
    assert bs.snapshot().pool("default").capacity == 3  # type: ignore[union-attr]
    with pytest.raises(SubmitError):
        bs.set_capacity("nope", 1)


def test_set_group_capacity(bs: BlockingScheduler) -> None:
    bs.set_group_capacity("default", {"gpu": "a100"}, 2)
    p = bs.snapshot().pool("default")
    assert p is not None and p.capacity == 4  # the unlabelled group's 2 + the labelled 2
    assert [(g.labels, g.capacity) for g in p.groups] == [({}, 2), ({"gpu": "a100"}, 2)]
    assert bs.submit("on gpu", labels={"gpu": "a100"}).result(SAFETY) == "on gpu"
    bs.set_group_capacity("default", {"gpu": "a100"}, 0)  # removes the group
    assert [g.labels for g in bs.snapshot().pool("default").groups] == [{}]  # type: ignore[union-attr]
    with pytest.raises(SubmitError) as ei:
        bs.set_group_capacity("nope", {"gpu": "a100"}, 1)
    assert ei.value.code == "unknown_pool"


def test_same_api_as_scheduler() -> None:
    """docs/reference/behaviour.md#blocking-api: every public method and property of Scheduler, same
    parameters, synchronous."""
    import inspect

    from cronoq import Scheduler

    def public(cls: type) -> set[str]:
        return {n for n in dir(cls) if not n.startswith("_")}

    assert public(Scheduler) <= public(BlockingScheduler)
    for name in public(Scheduler):
        a, b = getattr(Scheduler, name), getattr(BlockingScheduler, name)
        if isinstance(a, property):
            assert isinstance(b, property), name
            continue
        assert not inspect.iscoroutinefunction(b), name
        pa, pb = inspect.signature(a).parameters, inspect.signature(b).parameters
        assert [(p.name, p.kind, p.default) for p in pa.values()] == [
            (p.name, p.kind, p.default) for p in pb.values()
        ], name


def test_shutdown_grace_defaults() -> None:
    """``shutdown()`` defaults to 5.0 s (docs/reference/behaviour.md#scheduler-api); ``with`` uses the
    scheduler's shutdown_grace."""
    import inspect

    assert inspect.signature(BlockingScheduler.shutdown).parameters["grace"].default == 5.0
    gate = ThreadGate()
    t0 = time.monotonic()
    with BlockingScheduler([bpool(gate)], shutdown_grace=0.0) as s:
        h = s.submit("held")
        assert gate.started("held")
    assert time.monotonic() - t0 < 4.0  # not the 5 s default: the thread is still held
    gate.release("held")
    with pytest.raises(TaskFailed) as ei:
        h.result(SAFETY)
    assert ei.value.status == "shutdown"


def test_events_iterator() -> None:
    with BlockingScheduler([bpool()], emit_transitions=True) as s:
        stream = s.events()
        assert isinstance(stream, BlockingEventStream)
        assert stream.closed is False and stream.lagged == 0
        h = s.submit("x")
        h.result(SAFETY)
        got = []
        for ev in stream:
            got.append(ev)
            if ev.status == "succeeded":
                break
        assert [e.status for e in got] == ["blocked", "ready", "running", "succeeded"]
        assert all(e.id == h.id and e.pool == "default" for e in got)
        with pytest.raises(TimeoutError):
            stream.next(timeout=0.05)
        stream.close()
        with pytest.raises(StopIteration):
            stream.next(timeout=SAFETY)


def test_events_end_at_shutdown() -> None:
    s = BlockingScheduler([bpool()])
    s.start()
    stream = s.events()
    s.submit("x").result(SAFETY)
    ev = stream.next(timeout=SAFETY)
    assert ev.status == "succeeded"
    done = threading.Event()
    leftovers: list[Any] = []

    def reader() -> None:
        try:
            leftovers.extend(stream)  # blocks until the stream ends
        except Exception as e:  # pragma: no cover - reported below
            leftovers.append(e)
        done.set()

    t = threading.Thread(target=reader)
    t.start()
    # shut down while the reader waits in next() (its read pending on the loop), as a fixed
    # sleep only made likely; a read that starts while the loop stops could hang
    until(lambda: stream._s._waiter is not None)
    s.shutdown()
    t.join(SAFETY)
    assert done.is_set()
    # at shutdown the stream ends and so does iteration: cleanly, nothing left
    # (docs/reference/behaviour.md#scheduler-api)
    assert leftovers == []
    assert stream.closed


def test_events_buffered_before_shutdown_are_read_after_it() -> None:
    """Reading an ended stream needs no loop: what it buffered, then StopIteration
    (docs/reference/behaviour.md#scheduler-api, docs/reference/behaviour.md#blocking-api) -- not
    NotStartedError because the scheduler is gone."""
    s = BlockingScheduler([bpool()])
    s.start()
    stream = s.events()
    h1, h2 = s.submit("a"), s.submit("b")
    assert (h1.result(SAFETY), h2.result(SAFETY)) == ("a", "b")
    until(lambda: len(stream._s._buf) == 2)  # both terminal events are buffered
    s.shutdown()
    assert stream.closed
    got = [(e.id, e.status) for e in stream]
    assert sorted(got) == [(h1.id, "succeeded"), (h2.id, "succeeded")]
    with pytest.raises(StopIteration):
        stream.next(timeout=SAFETY)
    # a restarted scheduler does not revive it: still ended, answered at once
    s.start()
    try:
        s.submit("c").result(SAFETY)
        assert stream.closed
        with pytest.raises(StopIteration):
            stream.next()
    finally:
        s.shutdown()


def test_ended_stream_reports_lag_before_its_buffered_events() -> None:
    s = BlockingScheduler([bpool()], event_capacity=2)
    s.start()
    stream = s.events(on_lag="raise")
    hs = [s.submit(i) for i in range(4)]
    for h in hs:
        h.result(SAFETY)
    until(lambda: stream.lagged == 2)
    s.shutdown()
    with pytest.raises(EventsLagged) as ei:
        stream.next()
    assert ei.value.skipped == 2
    assert len(list(stream)) == 2
    with pytest.raises(StopIteration):
        stream.next()


def test_close_is_synchronous_and_ends_a_waiting_reader(bs: BlockingScheduler) -> None:
    stream = bs.events()
    out: list[Any] = []
    done = threading.Event()

    def reader() -> None:
        try:
            out.extend(stream)
        except Exception as e:  # pragma: no cover - reported below
            out.append(e)
        done.set()

    t = threading.Thread(target=reader)
    t.start()
    until(lambda: stream._s._waiter is not None)  # the reader waits in next()
    # hold the loop thread, so nothing close() hands to it can have run yet
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(SAFETY)

    assert bs._loop is not None
    bs._loop.call_soon_threadsafe(hold)
    assert held.wait(SAFETY)
    try:
        stream.close()
        assert stream.closed  # at once, not when the loop thread gets to it
        with pytest.raises(StopIteration):
            stream.next(timeout=SAFETY)  # answered without the (busy) loop
    finally:
        release.set()
    t.join(SAFETY)
    assert done.is_set() and out == []
    # the subscription itself is dropped on the loop thread
    until(lambda: stream._s.closed and stream._s not in bs.scheduler._streams)


def test_events_context_manager(bs: BlockingScheduler) -> None:
    with bs.events() as stream:
        bs.submit("x").result(SAFETY)
        assert stream.next(timeout=SAFETY).status == "succeeded"
    assert stream.closed  # synchronously, although the subscription is dropped on the loop
    with pytest.raises(StopIteration):
        stream.next()


def test_recurring(bs: BlockingScheduler) -> None:
    info = bs.add_recurring("r", "* * * * * *", "tick", key="k")
    assert info.next_run is not None and info.next_run > time.time() - 0.01
    assert [i.name for i in bs.list_recurring()] == ["r"]
    h = bs.handle(info.last_task_id)
    assert h is not None
    assert h.result(SAFETY) == "tick"
    assert bs.status(info.last_task_id) == "succeeded"
    assert bs.remove_recurring("r") is True
    assert bs.remove_recurring("r") is False
    assert bs.list_recurring() == []
    with pytest.raises(SchedulerError) as ei:
        bs.add_recurring("r", "* * * * *", None, pool="x")
    assert str(ei.value) == "configuration error: unknown pool 'x'"
    with pytest.raises(ValueError):
        bs.add_recurring("r", "* * * * *", None, overlap="sometimes")


def test_context_manager_and_restart() -> None:
    s = BlockingScheduler([bpool()])
    with s as entered:
        assert entered is s
        assert s.started
        first = s.submit(1).id
    assert s.started is False
    with s:
        h = s.submit(2)
        assert h.result(SAFETY) == 2
        assert h.id > first  # ids continue after a restart
        assert s.status(first) is None  # without a store a restarted scheduler begins empty


def test_shutdown_fails_unfinished_handles() -> None:
    s = BlockingScheduler([bpool(min=0, max=1, initial=0)])
    s.start()
    h = s.submit("never")
    s.shutdown(0.0)
    assert h.done()
    with pytest.raises(TaskFailed) as ei:
        h.result(SAFETY)  # the outcome is known although the loop is gone
    assert (ei.value.status, ei.value.message) == ("shutdown", "scheduler shut down")


def test_shutdown_fails_waiting_threads() -> None:
    s = BlockingScheduler([bpool(min=0, max=1, initial=0)])
    s.start()
    h = s.submit("never")
    out: list[BaseException] = []

    def waiter() -> None:
        try:
            h.result(SAFETY)
        except BaseException as e:
            out.append(e)

    run = h._h._sched._run
    assert run is not None
    t = threading.Thread(target=waiter)
    t.start()
    # shut down while the thread waits in result(): its wait (an ``await handle``: a future
    # of its own, listed for the task) is pending on the loop; a fixed sleep only made that likely
    until(lambda: h.id in run.awaiting)
    s.shutdown(0.0)
    t.join(SAFETY)
    assert len(out) == 1 and isinstance(out[0], TaskFailed)
    assert out[0].status == "shutdown"


def test_a_call_the_loop_stops_under_fails_instead_of_hanging() -> None:
    """A call that reached the loop but cannot finish before the loop stops (here: a wait
    that nothing will ever end) gets NotStartedError when shutdown stops the loop."""
    import asyncio

    from cronoq.errors import NotStartedError

    s = BlockingScheduler([bpool()])
    s.start()
    entered = threading.Event()
    out: list[BaseException] = []

    async def forever() -> None:
        entered.set()
        await asyncio.Event().wait()

    def caller() -> None:
        try:
            s._call(forever())
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=caller)
    t.start()
    assert entered.wait(SAFETY)
    s.shutdown(0.0)
    t.join(SAFETY)
    assert not t.is_alive(), "the caller still waits on a loop that has stopped"
    assert len(out) == 1 and isinstance(out[0], NotStartedError)
    assert not s._calls


def test_plain_executor_runs_off_the_loop_thread() -> None:
    gate = ThreadGate()
    with BlockingScheduler([bpool(gate)]) as s:
        h = s.submit("x")
        assert gate.started("x")
        gate.release("x")
        assert h.result(SAFETY) == "x"
    assert "cronoq-scheduler" not in gate.threads


def test_methods_refuse_the_loop_thread() -> None:
    """Calling a blocking method from an executor on the loop thread would deadlock: it raises."""
    errors: list[BaseException] = []
    holder: dict[str, BlockingScheduler] = {}

    async def run(ctx: Any, payload: Any) -> Any:
        try:
            holder["s"].status(1)
        except RuntimeError as e:
            errors.append(e)
        return payload

    with BlockingScheduler([bpool(run)]) as s:
        holder["s"] = s
        assert s.submit("x").result(SAFETY) == "x"
    assert errors and "own loop thread" in str(errors[0])


def test_thread_safety_many_submitters() -> None:
    n_threads, per_thread = 8, 150
    with BlockingScheduler([bpool(min=4, max=4)]) as s:
        results: dict[int, list[tuple[int, Any]]] = {}
        errors: list[BaseException] = []
        barrier = threading.Barrier(n_threads)

        def worker(k: int) -> None:
            try:
                barrier.wait(SAFETY)
                mine = []
                for i in range(per_thread):
                    if i % 3 == 0:
                        tid = s.enqueue((k, i), key=f"t{k}-{i}")
                        mine.append((tid, (k, i)))
                    elif i % 3 == 1:
                        h = s.submit((k, i))
                        mine.append((h.id, h.result(SAFETY)))
                    else:
                        (h,) = s.submit_batch([Task((k, i))])
                        mine.append((h.id, (k, i)))
                results[k] = mine
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        ids = [tid for mine in results.values() for tid, _ in mine]
        assert len(ids) == n_threads * per_thread == len(set(ids))
        for k, mine in results.items():
            for _tid, payload in mine:
                assert payload[0] == k
        # every task ends succeeded
        deadline = time.monotonic() + SAFETY
        total = n_threads * per_thread
        while s.snapshot().totals["succeeded"] < total and time.monotonic() < deadline:
            time.sleep(0.01)
        snap = s.snapshot()
        assert snap.totals["submitted"] == total
        assert snap.totals["succeeded"] == total
        assert s.status(f"t{n_threads - 1}-0") == "succeeded"


def test_concurrent_handle_waiters() -> None:
    gate = ThreadGate()
    with BlockingScheduler([bpool(gate)]) as s:
        h = s.submit("x")
        outs: list[Any] = []

        def waiter() -> None:
            outs.append(h.result(SAFETY))

        ts = [threading.Thread(target=waiter) for _ in range(5)]
        for t in ts:
            t.start()
        assert gate.started("x")
        gate.release("x")
        for t in ts:
            t.join(SAFETY)
        assert outs == ["x"] * 5


def test_underlying_scheduler_exposed(bs: BlockingScheduler) -> None:
    assert bs.scheduler.started
    assert bs.scheduler.pools == ["default"]
    assert "BlockingScheduler" in repr(bs)
