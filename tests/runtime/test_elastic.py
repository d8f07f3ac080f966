"""Elasticity in the asyncio runtime (docs/reference/behaviour.md#autoscaling,
docs/reference/behaviour.md#resources, docs/reference/behaviour.md#labels,
docs/reference/behaviour.md#python-api): shared resources, worker groups and ``ctx.group``, pluggable scalers
(custom async, failing, external) and autoscaling with the default SlotScaler.

Waits are event-driven with a generous safety timeout; the only polling is of ``snapshot()``
while real-time autoscaler evaluations (interval 0.05 s) happen.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from cronoq import (
    AutoscaleConfig,
    ExternalScaler,
    Pool,
    Resource,
    Scheduler,
    SlotScaler,
    SubmitError,
    TaskFailed,
)

from .conftest import SAFETY, Gate, pool, settle, wait

FAST = {"interval": 0.05, "stabilization_window": 60.0, "cooldown": 30.0}


async def until(pred, timeout: float = SAFETY, step: float = 0.01) -> None:
    """Poll ``pred()`` (sync or async) until true; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if asyncio.iscoroutine(v):
            v = await v
        if v:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(step)


class Tracker:
    """An async executor that records concurrency and blocks until released."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.started: list[tuple[Any, float]] = []
        self.release = asyncio.Event()

    async def __call__(self, ctx: Any, payload: Any) -> Any:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.started.append((payload, time.monotonic()))
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return payload


# ---------------------------------------------------------------------------- resources


async def test_semaphore_bounds_concurrency_across_pools():
    ex = Tracker()
    sched = Scheduler(
        [pool("a", ex, min=5, max=5), pool("b", ex, min=5, max=5)],
        resources=[Resource.semaphore("db", 3)],
    )
    async with sched:
        handles = [await sched.submit(i, pool="ab"[i % 2], resources={"db": 1}) for i in range(10)]
        await until(lambda: ex.running == 3)
        await settle()
        assert ex.running == 3 and len(ex.started) == 3
        snap = await sched.snapshot()
        assert snap.running == 3 and snap.pending == 7
        ex.release.set()
        assert await wait(asyncio.gather(*handles)) == list(range(10))
    assert ex.peak == 3


async def test_token_bucket_paces_dispatch_without_polling():
    ex = Tracker()
    ex.release.set()
    rate = 20.0  # one token every 50 ms
    sched = Scheduler([pool("default", ex, min=4, max=4)], resources=[Resource.token_bucket("api", rate, 2)])
    async with sched:
        t0 = time.monotonic()
        handles = [await sched.submit(i, resources={"api": 1}) for i in range(5)]
        await wait(asyncio.gather(*handles))
    starts = sorted(t - t0 for _, t in ex.started)
    assert len(starts) == 5
    # one task per refill after the burst: never more than burst + rate·t by any instant (the
    # bucket starting full is test_token_bucket_starts_full: no upper bound on time here)
    for i, s in enumerate(starts):
        assert i + 1 <= 2 + rate * s + 1e-6, starts
    assert starts[4] >= 0.14, starts  # 3 refills of 50 ms


async def test_token_bucket_starts_full(gate: Gate):
    # burst 2: two tasks start at once; the next token is 20 s away (0.05/s), beyond any wait
    # here, so "at once" needs no wall-clock bound (it was "within 40 ms", which CI can miss)
    sched = Scheduler(
        [pool("default", gate, min=4, max=4)], resources=[Resource.token_bucket("api", 0.05, 2)]
    )
    async with sched:
        handles = [await sched.submit(i, resources={"api": 1}) for i in range(3)]
        await wait(gate.started(0).wait())
        await wait(gate.started(1).wait())
        await settle()
        assert gate.order == [0, 1]
        assert await sched.status(handles[2].id) == "ready"
        assert handles[2].cancel() is True
        gate.release_all()
        assert await wait(asyncio.gather(*handles[:2])) == [0, 1]
        with pytest.raises(TaskFailed):
            await wait(handles[2])


async def test_unknown_resource_and_capacity_errors():
    sched = Scheduler([pool()], resources=[Resource.semaphore("db", 2)])
    async with sched:
        with pytest.raises(SubmitError) as ei:
            await sched.submit(1, resources={"nope": 1})
        assert ei.value.code == "unknown_resource"
        with pytest.raises(SubmitError) as ei:
            await sched.enqueue(1, resources={"db": 3})
        assert ei.value.code == "resource_exceeds_capacity"
        assert (await sched.snapshot()).totals["submitted"] == 0


def test_resources_must_be_resource_objects():
    with pytest.raises(ValueError):
        Scheduler([pool()], resources=["db"])
    with pytest.raises(ValueError):
        Scheduler([pool()], resources=[Resource.semaphore("db", 1), Resource.semaphore("db", 2)])


# ---------------------------------------------------------------------------- groups


async def test_group_capacity_and_ctx_group(gate: Gate):
    sched = Scheduler([pool("default", gate, min=1, max=1)])
    async with sched:
        await sched.set_group_capacity("default", {"gpu": "a100", "zone": "eu"}, 1)
        snap = (await sched.snapshot()).pool("default")
        assert snap.capacity == 2
        assert [(g.labels, g.capacity) for g in snap.groups] == [({}, 1), ({"gpu": "a100", "zone": "eu"}, 1)]
        plain = await sched.submit("plain")
        gpu = await sched.submit("gpu", labels={"gpu": "a100"})
        other = await sched.submit("h100", labels={"gpu": "h100"})
        await wait(gate.started("plain").wait())
        await wait(gate.started("gpu").wait())
        assert gate.contexts["plain"].group == {}
        assert gate.contexts["gpu"].group == {"gpu": "a100", "zone": "eu"}
        await settle()
        assert "h100" not in gate.order
        assert await sched.status(other.id) == "ready"
        snap = (await sched.snapshot()).pool("default")
        assert [(g.labels, g.busy) for g in snap.groups] == [({}, 1), ({"gpu": "a100", "zone": "eu"}, 1)]
        assert snap.ready == 1 and snap.pending == 1
        # a matching group appears: the waiting task runs there
        await sched.set_group_capacity("default", {"gpu": "h100"}, 1)
        await wait(gate.started("h100").wait())
        assert gate.contexts["h100"].group == {"gpu": "h100"}
        gate.release_all()
        assert await wait(asyncio.gather(plain, gpu, other)) == ["plain", "gpu", "h100"]
        # n = 0 removes a labelled group
        await sched.set_group_capacity("default", {"gpu": "h100"}, 0)
        snap = (await sched.snapshot()).pool("default")
        assert [g.labels for g in snap.groups] == [{}, {"gpu": "a100", "zone": "eu"}]


async def test_set_capacity_leaves_labelled_groups_alone(gate: Gate):
    sched = Scheduler([pool("default", gate, min=1, max=1)])
    async with sched:
        await sched.set_group_capacity("default", {"gpu": "x"}, 2)
        await sched.set_capacity("default", 4)
        snap = (await sched.snapshot()).pool("default")
        assert [(g.labels, g.capacity) for g in snap.groups] == [({}, 4), ({"gpu": "x"}, 2)]
        assert snap.capacity == 6


async def test_set_group_capacity_validation():
    sched = Scheduler([pool()])
    async with sched:
        with pytest.raises(SubmitError) as ei:
            await sched.set_group_capacity("nope", {"a": "b"}, 1)
        assert ei.value.code == "unknown_pool"
        with pytest.raises(ValueError):
            await sched.set_group_capacity("default", ["a"], 1)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            await sched.set_group_capacity("default", {"a": "b"}, -1)


async def test_ctx_group_of_thread_executor():
    seen = []

    def run(ctx, payload):
        seen.append(ctx.group)
        return payload

    sched = Scheduler([Pool("default", run, min=0, max=1, autoscale=False)])
    async with sched:
        await sched.set_group_capacity("default", {"os": "linux"}, 1)
        assert await wait(await sched.submit(1)) == 1
    assert seen == [{"os": "linux"}]


# ---------------------------------------------------------------------------- scalers


class OrderedScaler:
    """Async scaler: early requests take longer than later ones; records call/finish order."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.finished: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def scale_to(self, pool: str, desired: int) -> int:
        n = len(self.calls)
        self.calls.append(desired)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(max(0.0, 0.12 - 0.04 * n))
        finally:
            self.in_flight -= 1
        self.finished.append(n)
        return desired


async def test_custom_async_scaler_applied_in_request_order(gate: Gate):
    sc = OrderedScaler()
    p = Pool("default", gate, min=1, max=30, autoscale=AutoscaleConfig(max_step_up_abs=2, **FAST), scaler=sc)
    sched = Scheduler([p])
    async with sched:
        for i in range(200):
            await sched.enqueue(i)
        await until(lambda: len(sc.finished) >= 4)
        assert sc.finished == list(range(len(sc.finished))), "one at a time, in request order"
        assert sc.max_in_flight == 1
        await until(lambda: not sc.in_flight, step=0.005)
        snap = (await sched.snapshot()).pool("default")
        # the capacity is the last answer applied (requests keep coming while work is queued)
        assert snap.capacity in sc.calls
        assert snap.capacity > 1
        gate.release_all()


async def test_sync_custom_scaler_result_is_applied(gate: Gate):
    calls = []

    class Half:
        def scale_to(self, pool: str, desired: int) -> int:
            calls.append(desired)
            return max(1, desired // 2)

    p = Pool("default", gate, min=1, max=40, autoscale=AutoscaleConfig(**FAST), scaler=Half())
    sched = Scheduler([p])
    async with sched:
        for i in range(100):
            await sched.enqueue(i)
        await until(lambda: len(calls) >= 2)
        snap = (await sched.snapshot()).pool("default")
        assert snap.capacity == max(1, calls[-1] // 2) or snap.capacity == max(1, calls[-2] // 2)
        gate.release_all()


async def test_failing_scaler_is_logged_and_never_fatal(caplog):
    class Boom:
        def __init__(self) -> None:
            self.n = 0
            self.twice = asyncio.Event()

        async def scale_to(self, pool: str, desired: int) -> int:
            self.n += 1
            if self.n >= 2:
                self.twice.set()
            raise RuntimeError("cloud API down")

    boom = Boom()
    done = asyncio.Event()
    left = [30]

    async def work(ctx, payload):
        # the backlog lasts until the scaler was asked twice (not a race of 0.3 s of work
        # against two evaluations)
        await boom.twice.wait()
        await asyncio.sleep(0.01)
        left[0] -= 1
        if not left[0]:
            done.set()
        return payload

    p = Pool("default", work, min=1, max=10, autoscale=AutoscaleConfig(**FAST), scaler=boom)
    sched = Scheduler([p])
    with caplog.at_level(logging.ERROR, logger="cronoq"):
        async with sched:
            for i in range(30):
                await sched.enqueue(i)
            await until(lambda: boom.n >= 2)
            await wait(done.wait())  # the scheduler keeps working on its one slot
            snap = (await sched.snapshot()).pool("default")
            assert snap.capacity == 1, "the failed requests changed nothing"
            assert (await sched.snapshot()).totals["succeeded"] >= 29
            h = await sched.submit("still alive")
            assert await wait(h) == "still alive"
    msgs = [r.getMessage() for r in caplog.records if r.name == "cronoq"]
    assert any("scaler" in m and "default" in m for m in msgs), msgs
    assert any(r.exc_info for r in caplog.records if r.name == "cronoq"), "the traceback is logged"


async def test_scaler_returning_nonsense_is_logged(caplog, gate: Gate):
    class Nonsense:
        def scale_to(self, pool: str, desired: int) -> Any:
            return -3

    p = Pool("default", gate, min=1, max=10, autoscale=AutoscaleConfig(**FAST), scaler=Nonsense())
    with caplog.at_level(logging.ERROR, logger="cronoq"):
        async with Scheduler([p]) as sched:
            for i in range(50):
                await sched.enqueue(i)
            await until(lambda: any("invalid capacity" in r.getMessage() for r in caplog.records))
            assert (await sched.snapshot()).pool("default").capacity == 1
            gate.release_all()


async def test_external_scaler_leaves_capacity_alone_until_set_capacity(gate: Gate):
    p = Pool("default", gate, min=1, max=20, autoscale=AutoscaleConfig(**FAST), scaler=ExternalScaler())
    async with Scheduler([p]) as sched:
        for i in range(100):
            await sched.enqueue(i)

        async def wants_more():
            return (await sched.snapshot()).pool("default").desired > 1

        await until(wants_more)
        await asyncio.sleep(0.2)  # several more evaluations
        snap = (await sched.snapshot()).pool("default")
        assert snap.capacity == 1 and snap.busy == 1
        assert snap.desired > 1
        await sched.set_capacity("default", 6)  # e.g. reported by KEDA/HPA or workers registering
        await until(lambda: len(gate.order) >= 6)
        snap = (await sched.snapshot()).pool("default")
        assert snap.capacity == 6 and snap.busy == 6
        gate.release_all()


def test_pool_scaler_validation():
    async def ex(ctx, p):
        return p

    with pytest.raises(ValueError):
        Pool("p", ex, scaler=object())
    assert isinstance(Pool("p", ex).scaler, SlotScaler)
    assert SlotScaler().scale_to("p", 3) == 3
    assert ExternalScaler().scale_to("p", 3) is None


# ---------------------------------------------------------------------------- autoscaling


async def test_slot_scaler_grows_capacity_under_backlog():
    ex = Tracker()
    p = Pool("default", ex, min=1, max=8, autoscale=AutoscaleConfig(**FAST))
    async with Scheduler([p]) as sched:
        for i in range(200):
            await sched.enqueue(i)
        await until(lambda: ex.running == 8)
        snap = (await sched.snapshot()).pool("default")
        assert snap.capacity == 8 and snap.desired == 8, "grown to max, not beyond"
        assert [g.capacity for g in snap.groups] == [8]
        ex.release.set()


async def test_autoscaled_pool_shrinks_back_when_idle():
    done = asyncio.Event()
    left = [40]

    async def work(ctx, payload):
        await asyncio.sleep(0.02)
        left[0] -= 1
        if not left[0]:
            done.set()

    cfg = AutoscaleConfig(interval=0.05, stabilization_window=0.1, cooldown=0.05, max_step_down=4)
    async with Scheduler([Pool("default", work, min=1, max=8, autoscale=cfg)]) as sched:
        for i in range(40):
            await sched.enqueue(i)

        await until(lambda: cap_gt(sched, 1))
        await wait(done.wait())
        await until(lambda: cap_eq(sched, 1))
        snap = (await sched.snapshot()).pool("default")
        assert snap.worker_seconds > 0


async def test_pool_started_above_min_shrinks_with_no_work_submitted():
    cfg = AutoscaleConfig(interval=0.05, stabilization_window=0.1, cooldown=0.05)

    async def work(ctx, payload):  # pragma: no cover - nothing is submitted
        return payload

    async with Scheduler([Pool("default", work, min=1, max=10, initial=5, autoscale=cfg)]) as sched:
        assert (await sched.snapshot()).pool("default").capacity == 5
        await until(lambda: cap_eq(sched, 1))
        assert (await sched.snapshot()).totals["submitted"] == 0


async def cap_gt(sched, n):
    return (await sched.snapshot()).pool("default").capacity > n


async def cap_eq(sched, n):
    return (await sched.snapshot()).pool("default").capacity == n
