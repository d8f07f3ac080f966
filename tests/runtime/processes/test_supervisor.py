"""Process pools in a real Scheduler, with real child processes (docs/how-to/processes.md):
hard time limits, crash isolation, recycling, outcomes, context, cancel and shutdown."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.conftest import wait
from tests.runtime.processes import broken, tasks
from tests.runtime.processes.waits import alive, gone_within, read_pid, read_pids

from cronoq import Pool, Processes, RetryPolicy, Scheduler, Task, TaskFailed
from cronoq.errors import InvalidSubmission
from cronoq.runtime.processes import supervisor
from cronoq.runtime.processes.forkserver import children_of

ONCE = RetryPolicy(max_attempts=1)
FAST = Processes(kill_grace=0.5)


def ppool(fn: Any, **kw: Any) -> Pool:
    kw.setdefault("autoscale", False)
    kw.setdefault("processes", FAST)
    return Pool("p", fn, run_in="process", **kw)


@pytest.mark.parametrize("ignore_term", [False, True], ids=["spin", "spin-ignoring-sigterm"])
async def test_timeout_kills_a_spinning_child(tmp_path: Path, ignore_term: bool) -> None:
    pidfile = tmp_path / "pid"
    async with Scheduler([ppool(tasks.spin)]) as sched:
        await wait(await sched.submit({"warm": True}))  # the child is up: the timeout is all spin
        start = time.monotonic()
        h = await sched.submit({"pidfile": str(pidfile), "ignore_term": ignore_term}, timeout=1, retry=ONCE)
        pid = await read_pid(pidfile)
        with pytest.raises(TaskFailed, match="timed out"):
            await wait(h)
        assert time.monotonic() - start < 1 + 0.5 + 0.5
        # SIGTERM at the timeout, SIGKILL kill_grace later: gone within timeout + grace + 0.5 s
        await gone_within(pid, 0.5 + 0.5)
        assert time.monotonic() - start < 1 + 0.5 + 0.5 + 0.5
        # the pool keeps serving with a new child
        sched._pools[0].executor.fn = tasks.pid  # (same pool, a task that returns)
        h2 = await sched.submit("after", retry=ONCE)
        assert (await wait(h2))["pid"] != pid


@pytest.mark.parametrize(
    ("how", "ends"),
    [
        ("spin", "attempt timed out"),
        ("exit", "died: exit code 5"),
        ("cancel", "cancelled"),
        ("stop", "scheduler shut down"),
        ("return", None),
    ],
)
async def test_no_grandchild_outlives_its_child(tmp_path: Path, how: str, ends: str | None) -> None:
    """The processes a task starts end with its child, however the child ends: killed at the
    timeout (SIGTERM ignored), crashed, killed at a cancel or at the shutdown, or recycled
    after its task returned."""
    pidfile = tmp_path / "pids"
    settings = Processes(kill_grace=0.5, max_tasks_per_child=1)
    async with Scheduler([ppool(tasks.grandchild, processes=settings)]) as sched:
        h = await sched.submit({"pidfile": str(pidfile), "how": how}, timeout=2, retry=ONCE)
        child, grandchild = await read_pids(pidfile)
        # (a crashed or recycled child's group may be gone already)
        assert how in ("exit", "return") or alive(grandchild)
        if how == "cancel":
            await sched.cancel(h.id)
        if how == "stop":
            await sched.shutdown(0)
        if ends is None:
            assert await wait(h) is None
        else:
            with pytest.raises(TaskFailed) as info:
                await wait(h)
            assert info.value.message == ends or ends in (info.value.message or "")
        try:
            await gone_within(child, 5.0)
            await gone_within(grandchild, 1.0)
        finally:
            if alive(grandchild):  # (a failed test leaves no hour-long sleeper behind)
                os.kill(grandchild, signal.SIGKILL)


async def test_a_killed_child_holds_its_slot_until_it_exits(tmp_path: Path) -> None:
    """One child per slot, dying ones included: after a timeout, a one-slot pool starts the
    next attempt's child only once the killed one (SIGTERM ignored: it spins until its
    SIGKILL, kill_grace later) has exited."""
    pidfile = tmp_path / "pid"
    pool = ppool(tasks.spin, max=1, processes=Processes(kill_grace=1.0))
    async with Scheduler([pool]) as sched:
        await wait(await sched.submit({"warm": True}))
        h = await sched.submit({"pidfile": str(pidfile), "ignore_term": True}, timeout=0.5, retry=ONCE)
        pid = await read_pid(pidfile)
        with pytest.raises(TaskFailed, match="timed out"):
            await wait(h)
        assert alive(pid)  # within its kill_grace
        sched._pools[0].executor.fn = tasks.others_alive  # (same pool, a task that returns)
        assert await wait(await sched.submit([pid], retry=ONCE)) == []
        assert sched._procs.supervisor("p").started == 2


async def test_cancel_kills_a_sleeping_child(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    async with Scheduler([ppool(tasks.sleep_forever)]) as sched:
        h = await sched.submit({"pidfile": str(pidfile)})
        pid = await read_pid(pidfile)
        assert await sched.cancel(h.id)
        with pytest.raises(TaskFailed) as info:
            await wait(h)
        assert info.value.status == "cancelled"
        await gone_within(pid, 2.0)  # time.sleep(3600) ends at the SIGTERM


async def test_is_cancelled_reaches_the_child_before_the_kill(tmp_path: Path) -> None:
    pidfile, marker = tmp_path / "pid", tmp_path / "marker"
    pool = ppool(tasks.cooperative, processes=Processes(kill_grace=5.0))
    async with Scheduler([pool]) as sched:
        h = await sched.submit({"pidfile": str(pidfile), "marker": str(marker)})
        pid = await read_pid(pidfile)
        await sched.cancel(h.id)
        await gone_within(pid, 4.0)  # it returned on its own, well before the SIGKILL
        assert marker.read_text() == "saw the cancel"


@pytest.mark.parametrize(
    ("how", "message"), [("exit", "died: exit code 3"), ("segv", "died: killed by signal SIGSEGV")]
)
async def test_a_dead_child_fails_only_its_attempt(how: str, message: str) -> None:
    async with Scheduler(
        [Pool("d", tasks.die, run_in="process", processes=FAST, max=2, autoscale=False), ppool(tasks.pid)]
    ) as sched:
        h = await sched.submit(how, pool="d", retry=ONCE)
        ok = await sched.submit("fine", pool="p")
        with pytest.raises(TaskFailed, match=message) as info:
            await wait(h)
        assert info.value.status == "dead_lettered"  # retryable: the retries ran out
        assert (await wait(ok))["payload"] == "fine"
        again = await sched.submit(how, pool="d", retry=ONCE)
        with pytest.raises(TaskFailed, match=message):
            await wait(again)


@pytest.mark.parametrize("fn", [tasks.exit_or_pid, tasks.async_exit_or_pid], ids=["plain", "async"])
async def test_sys_exit_in_the_child_fails_the_attempt_and_the_child_serves_on(fn: Any) -> None:
    """A task calling ``sys.exit()`` in its process fails its attempt, retryably, with
    "SystemExit: 3"; the child is not stopped: the pool's one child runs the next task."""
    async with Scheduler([ppool(fn, max=1)]) as sched:
        pid = await wait(await sched.submit("pid"))
        h = await sched.submit("exit", retry=RetryPolicy(max_attempts=2, initial_backoff=0))
        with pytest.raises(TaskFailed) as info:
            await wait(h)
        assert (info.value.status, info.value.message) == ("dead_lettered", "SystemExit: 3")
        assert await wait(await sched.submit("pid")) == pid


async def test_outcomes_as_in_a_thread() -> None:
    async with Scheduler([ppool(tasks.fail, max=2)]) as sched:
        perm = await sched.submit("permanent", retry=RetryPolicy(max_attempts=3))
        with pytest.raises(TaskFailed, match="no way") as info:
            await wait(perm)
        assert info.value.status == "failed"
        other = await sched.submit("key", retry=ONCE)
        with pytest.raises(TaskFailed, match="KeyError: 'boom'"):
            await wait(other)
        bad_result = await sched.submit("unpicklable", retry=RetryPolicy(max_attempts=3))
        with pytest.raises(TaskFailed, match="the result cannot be pickled") as info:
            await wait(bad_result)
        assert info.value.status == "failed"
        with pytest.raises(InvalidSubmission, match="the payload cannot be pickled"):
            await sched.submit(lambda: None, retry=RetryPolicy(max_attempts=3))  # (refused at submit)


async def test_an_unpicklable_payload_is_refused_at_submit() -> None:
    """A plain process pool's payload goes to the child pickled: one that cannot be is refused
    by submit / enqueue / submit_batch / add_recurring, and nothing is created (the key stays
    free)."""
    lock = threading.Lock()
    message = "pool 'p' runs its tasks in a process and the payload cannot be pickled for it: TypeError"
    async with Scheduler([ppool(tasks.pid), Pool("t", tasks.pid, autoscale=False)]) as sched:
        with pytest.raises(InvalidSubmission, match=message):
            await sched.submit({"lock": lock}, key="k")
        with pytest.raises(InvalidSubmission, match=message):
            await sched.enqueue(lock)
        with pytest.raises(InvalidSubmission, match=message):
            await sched.submit_batch([Task(1, key="b1"), Task(lock, key="b2")])
        with pytest.raises(InvalidSubmission, match=message):  # (each occurrence would fail)
            await sched.add_recurring("r", "* * * * *", lock)
        assert await sched.list_recurring() == []
        assert (await sched.snapshot()).live_tasks == 0
        h = await sched.submit({"ok": True}, key="k")  # nothing was half-submitted under the key
        assert not h.duplicate and (await wait(h))["payload"] == {"ok": True}
        assert not (await sched.submit(1, key="b1")).duplicate
        in_thread = await sched.submit(lock, pool="t")  # a thread pool takes any object
        assert (await wait(in_thread))["payload"] is lock


async def test_retry_after_is_kept() -> None:
    async with Scheduler([ppool(tasks.fail)]) as sched:
        h = await sched.submit("retry", retry=RetryPolicy(max_attempts=2, initial_backoff=0.01))
        end = time.monotonic() + 10
        while not (att := await sched.attempts(h.id)) or att[0].outcome != "failed":
            assert time.monotonic() < end
            await asyncio.sleep(0.01)
        assert att[0].message == "later"
        run = sched._run
        assert run is not None
        wake = run.core.next_wakeup()  # the retry's timer: retry_after (30 s), not the 0.01 s backoff
        assert wake is not None and (wake - run.now()) / 1e9 == pytest.approx(30, abs=2)
        await sched.cancel(h.id)


async def test_context_and_progress_in_the_child() -> None:
    async with Scheduler(
        [ppool(tasks.pid), Pool("g", tasks.progress, run_in="process", autoscale=False)]
    ) as sched:
        h = await sched.submit(7, key="k1", kind="report", tags={"a": "b"}, deadline_in=60)
        out = await wait(h)
        assert out["pid"] != os.getpid()
        assert (out["id"], out["kind"], out["key"], out["attempt"], out["tags"]) == (
            h.id,
            "report",
            "k1",
            1,
            {"a": "b"},
        )
        assert out["deadline"] == pytest.approx(time.time() + 60, abs=5)
        g = await sched.submit(None, pool="g")
        assert await wait(g) == "ok"
        p = await sched.progress(g.id)
        assert p is not None and (p.done, p.total, p.message) == (3, 4, "almost")


async def test_recycling_by_count() -> None:
    pool = ppool(tasks.pid, processes=Processes(max_tasks_per_child=2, kill_grace=0.5))
    async with Scheduler([pool]) as sched:
        pids = [(await wait(await sched.submit(i)))["pid"] for i in range(4)]
    assert pids[0] == pids[1] != pids[2] == pids[3]


async def test_recycling_replaces_one_child_at_a_time(tmp_path: Path, monkeypatch: Any) -> None:
    """Two children due for recycling at once (each ran its one task): the second keeps serving
    until the first is gone, then it is stopped in turn (never both together)."""
    from cronoq.runtime.processes.supervisor import Supervisor

    pool = ppool(tasks.gated, max=2, min=2, processes=Processes(max_tasks_per_child=1, kill_grace=0.5))
    gate = tmp_path / "gate"
    async with Scheduler([pool]) as sched:
        files = [tmp_path / "a", tmp_path / "b"]
        hs = [await sched.submit({"pidfile": str(f), "gate": str(gate)}) for f in files]
        pids = {await read_pid(f) for f in files}
        assert len(pids) == 2
        sup = sched._procs.supervisor("p")
        stopping_others: list[int] = []
        stop = Supervisor._stop

        def recorded(self: Supervisor, child: Any) -> None:
            stopping_others.append(
                sum(1 for c in self._all if c is not child and c.stopping and not c.exited.done())
            )
            stop(self, child)

        monkeypatch.setattr(Supervisor, "_stop", recorded)
        gate.write_text("go")  # both tasks end together: both children are due
        assert {await wait(h) for h in hs} == pids
        for p in pids:
            await gone_within(p, 5.0)
        assert stopping_others == [0, 0]  # each stop came while no other child was stopping
        assert sup.started == 2  # (no replacement was needed meanwhile: nothing was submitted)
        again = {await wait(await sched.submit({"pidfile": str(tmp_path / "c"), "gate": str(gate)}))}
        assert not pids.intersection(again)  # served by a new child


async def test_recycling_by_memory() -> None:
    async with Scheduler([ppool(tasks.leak)]) as sched:
        base = await wait(await sched.submit(0))
    probe = sched._procs  # (the registry is closed; measure a fresh child's RSS instead)
    assert probe.supervisors == {}
    pool = ppool(tasks.leak, processes=Processes(max_memory_per_child="150MiB", kill_grace=0.5))
    async with Scheduler([pool]) as sched:
        first = await wait(await sched.submit(0))
        assert await wait(await sched.submit(0)) == first  # under the limit: kept
        assert await wait(await sched.submit(200)) == first  # grows past it during this task
        after = await wait(await sched.submit(0))
        assert after != first  # replaced after the task that crossed the limit
    assert base != first


async def test_import_error_in_the_child_is_permanent_without_respawns() -> None:
    async with Scheduler([ppool(broken.task)]) as sched:
        for _ in range(3):
            h = await sched.submit(None, retry=RetryPolicy(max_attempts=3))
            with pytest.raises(
                TaskFailed, match="cannot load the task in the child process: ImportError"
            ) as info:
                await wait(h)
            assert info.value.status == "failed"
        assert sched._procs.supervisor("p").started == 1


async def test_shutdown_kills_running_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    sched = Scheduler([ppool(tasks.spin)])
    await sched.start()
    await sched.submit({"pidfile": str(pidfile), "ignore_term": True})
    pid = await read_pid(pidfile)
    start = time.monotonic()
    await wait(sched.shutdown(0.2))
    assert not alive(pid)
    assert time.monotonic() - start < 0.2 + 0.5 + 1.0


async def test_shutdown_stops_the_children_still_starting() -> None:
    """A shutdown that comes while children are being started (in the spawner threads) waits
    for them and stops them: none is left running after it, served by nothing."""
    sched = Scheduler([ppool(tasks.pid, max=2, min=2)])
    await sched.start()
    for i in range(2):
        await sched.submit(i)
    end = time.monotonic() + 10
    while "p" not in sched._procs.supervisors:  # the attempts started: their children are starting
        assert time.monotonic() < end
        await asyncio.sleep(0.001)
    await wait(sched.shutdown(0))
    # the spawner threads are done (both busy at once with the barrier), and the loop has not
    # run since the shutdown returned: a child started too late for it is alive here
    barrier = threading.Barrier(2)
    concurrent.futures.wait([supervisor._spawner().submit(barrier.wait, 10) for _ in range(2)])
    ours = children_of(os.getpid())
    servers = [p for p in ours if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert servers
    assert [c for s in servers for c in children_of(s) if alive(c)] == []


async def test_one_child_per_slot_and_idle_surplus_stops_when_capacity_falls(tmp_path: Path) -> None:
    async with Scheduler([ppool(tasks.sleep_forever, max=2, min=2)]) as sched:
        files = [tmp_path / "a", tmp_path / "b"]
        hs = [await sched.submit({"pidfile": str(f)}) for f in files]
        pids = [await read_pid(f) for f in files]
        assert len(set(pids)) == 2  # one child per running attempt
        for h in hs:
            await sched.cancel(h.id)
        for p in pids:
            await gone_within(p, 3.0)
        sched._pools[0].executor.fn = tasks.pid
        sup = sched._procs.supervisor("p")
        both = [await sched.submit(i) for i in range(2)]
        for h in both:
            await wait(h)
        assert len(sup.pids) == 2
        await sched.set_capacity("p", 1)
        await wait(await sched.submit("one"))
        end = time.monotonic() + 5
        while len(sup.pids) > 1:  # the idle surplus child is stopped
            assert time.monotonic() < end, sup.pids
            await asyncio.sleep(0.01)
