"""Regression tests for engine bugs found by the feature simulator (tests/sim/featsim.py)."""

from __future__ import annotations

from cronoq.engine.actions import Dispatch, Persist, Publish
from cronoq.engine.config import AutoscaleConfig, CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import ON_COMPLETE, ON_FAILURE, ON_SUCCESS, RetryPolicy, TaskOptions
from cronoq.engine.mutations import (
    Recovered,
    RecoveredSchedule,
    RecoveredTask,
    RecurringNext,
    RecurringUpsert,
    Submitted,
)
from cronoq.engine.recurring import OVERLAP_SKIP, CronSchedule, RecurringSpec
from cronoq.engine.time import NS


def _config(**pool: object) -> CoreConfig:
    return CoreConfig(
        [PoolConfig("default", min=0, max=2, initial=0, autoscale=False, **pool)],  # type: ignore[arg-type]
        emit_transitions=True,
        persist=True,
    )


def _submitted(core: Core) -> list[Submitted]:
    return [a.mutation for a in core.drain_actions() if type(a) is Persist and type(a.mutation) is Submitted]


def _recover_live(config: CoreConfig, subs: list[Submitted], now: int) -> Core:
    core = Core(config, now=now, epoch=1)
    core.publish = True
    live = [RecoveredTask(m.id, m.seq, m.arrival, m.spec, None, "submitted", 0) for m in subs]
    core.recover(now, Recovered(live, []))
    return core


def test_batch_member_with_unmet_edge_to_finished_task_is_skipped_not_released() -> None:
    """featsim seed 5: a cascade of skips satisfied the member edges of a dependent whose
    success edge to an already-cancelled task was unmet; it was released to ready and ran."""
    core = Core(CoreConfig([PoolConfig("default", min=0, max=2, initial=0, autoscale=False)]))
    core.publish = True
    gone, _ = core.submit(0, TaskOptions(), None, key="gone")
    core.cancel(0, gone)
    core.drain_actions()
    ids = core.submit_batch(
        0,
        [
            (TaskOptions(), None, "a", None, None, [("gone", ON_SUCCESS)]),  # skipped at once
            (TaskOptions(), None, "b", None, None, [("a", ON_SUCCESS)]),  # skipped by cascade
            (TaskOptions(), None, "d", None, None, [("b", ON_FAILURE), ("gone", ON_SUCCESS)]),
        ],
    )
    d = core.tasks[ids[2][0]]
    assert d.status_name == "skipped"
    assert d.message in ("task already finished", f"dependency {gone} ended as cancelled")
    # ... and a member whose only unmet edge is to a finished task still skips
    ids = core.submit_batch(
        0, [(TaskOptions(), None, "e", None, None, [("gone", ON_COMPLETE), ("gone", ON_SUCCESS)])]
    )
    assert core.tasks[ids[0][0]].status_name == "skipped"


def test_recovery_publishes_blocked_under_the_real_id() -> None:
    """featsim seed 0: recover() published each live task's ``blocked`` event under a
    temporary id (new epoch, reused sequence) that no task has."""
    config = _config()
    core = Core(config)
    core.submit(0, TaskOptions(), None, key="x")
    subs = _submitted(core)
    new = _recover_live(config, subs, NS)
    events = [a.event for a in new.drain_actions() if type(a) is Publish]
    assert events and {e.id for e in events} == {subs[0].id}
    assert events[0].status == "blocked"


def test_recovered_awaiting_task_still_times_out() -> None:
    """featsim seed 0: recover() re-registered awaited-key edges but not their
    ``await_timeout`` timer, so the task stayed blocked forever after a crash."""
    config = _config(unknown_dependency="await", await_timeout=1.0)
    core = Core(config)
    tid, _ = core.submit(0, TaskOptions(), None, None, None, None, [("later", ON_SUCCESS)])
    subs = _submitted(core)
    new = _recover_live(config, subs, NS // 2)
    assert new.tasks[tid].status_name == "blocked"
    assert new.next_wakeup() == NS  # counted from the submission
    new.tick(NS)
    assert new.tasks[tid].status_name == "skipped"
    assert new.tasks[tid].message == "timed out awaiting unknown dependency"


def _skip_schedule(core: Core, now: int) -> int:
    """An every-10-seconds overlap=skip schedule; returns the first occurrence's id."""
    spec = RecurringSpec("job", CronSchedule("*/10 * * * * *"), OVERLAP_SKIP, TaskOptions(), None)
    info = core.add_recurring(now, spec)
    return info.last_task_id


def _run_until(core: Core, when: int) -> None:
    for _ in range(100_000):  # a step budget: a wake-up that never advances is a failure
        w = core.next_wakeup()
        if w is None or w > when:
            break
        core.tick(w)
    else:
        raise AssertionError(f"the engine keeps waking before {when} without advancing")
    core.tick(when)


def test_skip_overlap_survives_a_cancelled_occurrence_ahead() -> None:
    """featsim seed 49: with overlap=skip, cancelling the scheduled occurrence ahead while the
    previous one still runs broke the chain: the next occurrence checked only the cancelled
    one (terminal) and ran alongside the long-running one."""
    core = Core(CoreConfig([PoolConfig("default", min=0, max=4, initial=4, autoscale=False)]))
    first = _skip_schedule(core, 0)  # starts at 10 s
    _run_until(core, 10 * NS)
    assert core.tasks[first].status_name == "running"  # and keeps running
    second = core.list_recurring()[0].last_task_id  # scheduled for 20 s
    assert core.cancel(15 * NS, second)
    _run_until(core, 20 * NS)  # second's start: the third is materialized
    third = core.list_recurring()[0].last_task_id
    _run_until(core, 30 * NS)  # third's start: first is still running
    t = core.tasks[third]
    assert (t.status_name, t.message) == ("skipped", "previous occurrence still running")
    assert core.running == 1


def _crashed_while_first_runs() -> tuple[CoreConfig, int, int, Recovered]:
    """A skip schedule whose first occurrence runs (10 s) and second is scheduled (20 s);
    the state a store hands back after a crash then."""
    config = CoreConfig(
        [PoolConfig("default", min=0, max=4, initial=4, autoscale=False, retry=RetryPolicy(jitter=False))],
        persist=True,
    )
    core = Core(config)
    first = _skip_schedule(core, 0)
    _run_until(core, 10 * NS)
    second = core.list_recurring()[0].last_task_id
    muts = [a.mutation for a in core.drain_actions() if type(a) is Persist]
    subs = {m.id: m for m in muts if type(m) is Submitted}
    sched = next(m.spec for m in muts if type(m) is RecurringUpsert)
    nxt = [m for m in muts if type(m) is RecurringNext][-1]

    def task(tid: int, status: str, attempt: int) -> RecoveredTask:
        return RecoveredTask(tid, subs[tid].seq, subs[tid].arrival, subs[tid].spec, None, status, attempt)

    rec = Recovered(
        [task(first, "running", 1), task(second, "submitted", 0)],
        [],
        [RecoveredSchedule(sched, nxt.next, nxt.last)],
    )
    return config, first, second, rec


def test_skip_overlap_survives_recovery() -> None:
    """featsim seed 49: recover() did not restore the overlap=skip chain (``FixedStart.prev``
    is not persisted): the scheduled occurrence ahead came due and ran alongside the
    occurrence the crash had interrupted (recovered as retrying, then running again)."""
    config, first, second, rec = _crashed_while_first_runs()
    new = Core(config, now=12 * NS, epoch=1)
    new.recover(12 * NS, rec)
    _run_until(new, 20 * NS)  # first retried at 13 s and runs; second comes due at 20 s
    assert new.tasks[first].status_name == "running"
    t = new.tasks[second]
    assert (t.status_name, t.message) == ("skipped", "previous occurrence still running")
    assert new.running == 1


def test_recovered_occurrence_due_while_the_previous_is_live_is_skipped() -> None:
    """The same after a longer outage: the occurrence ahead came due while the engine was
    down; recovery must skip it, not start it next to the interrupted one."""
    config, first, second, rec = _crashed_while_first_runs()
    now = 20 * NS + NS // 2  # back 0.5 s after second's start
    new = Core(config, now=now, epoch=1)
    new.recover(now, rec)
    assert new.tasks[first].status_name == "retrying"
    t = new.tasks[second]
    assert (t.status_name, t.message) == ("skipped", "previous occurrence still running")
    _run_until(new, now + 2 * NS)
    assert new.running == 1 and new.tasks[first].status_name == "running"


def test_occurrence_records_name_their_schedule() -> None:
    """featsim: an occurrence's ``Submitted`` record carried ``recurring=None`` (the name was
    set after the record was built), so recovery could not tell occurrences from other tasks."""
    core = Core(CoreConfig([PoolConfig("default", min=0, max=1, initial=1, autoscale=False)], persist=True))
    first = _skip_schedule(core, 0)
    subs = [a.mutation for a in core.drain_actions() if type(a) is Persist and type(a.mutation) is Submitted]
    assert [(m.id, m.spec.recurring) for m in subs] == [(first, "job")]


def test_recovered_and_new_fixed_start_tasks_with_equal_sequence_and_start() -> None:
    """featsim seed 180: sequence numbers restart in each epoch, so after a recovery a new
    fixed-start task can share both start and ``seq`` with a recovered one; the due heap
    ``(start, seq, task)`` then compared two TaskStates and ``tick`` raised TypeError."""
    config = _config(reservable_fraction=1.0)
    core = Core(config)
    old, _ = core.submit(0, TaskOptions(), None, start_at=5 * NS)
    subs = _submitted(core)
    new = _recover_live(config, subs, NS)  # epoch 1: its sequence numbers restart at 1
    tid, _ = new.submit(NS, TaskOptions(), None, start_at=5 * NS)
    assert new.tasks[tid].seq == new.tasks[old].seq
    new.set_capacity(NS, "default", 2)
    new.tick(5 * NS)
    assert new.tasks[old].status_name == new.tasks[tid].status_name == "running"


def test_autoscaled_fair_share_pool_evaluates() -> None:
    """featsim seed 7: the autoscaler's service-time estimate read ``fifo``/``late`` of each
    class lane, which a fair-share pool's FairLane does not have: ``tick`` raised
    AttributeError at the first evaluation."""
    cfg = PoolConfig(
        "default", min=0, max=8, initial=0, fair_share=True, autoscale=AutoscaleConfig(interval=1.0)
    )
    core = Core(CoreConfig([cfg]))
    for tenant in ("a", "b", None):
        core.submit(0, TaskOptions(tenant=tenant, duration_hint=4 * NS), None)
    core.tick(NS)  # the first evaluation: s = 4 s from the hints of the queued work
    assert core.pools[0].desired >= 1


def test_fifo_holds_across_a_recovery() -> None:
    """Sequence numbers restart per epoch: lanes order by id, so older recovered tasks go first."""
    config = _config()
    core = Core(config)
    for _ in range(5):
        core.submit(0, TaskOptions(), None)
    subs = _submitted(core)
    new = _recover_live(config, subs[3:], NS)  # tasks 4 and 5 come back, still queued
    late, _ = new.submit(NS, TaskOptions(), None)
    new.set_capacity(NS, "default", 1)
    new.tick(NS)
    first = next(a.task.id for a in new.drain_actions() if type(a) is Dispatch)
    assert first == subs[3].id != late


def test_task_of_a_pool_that_no_longer_exists_is_quarantined_as_a_known_failed_task() -> None:
    """Black-box audit: a quarantined row vanished for that run (status None, key free), so a
    resubmission under its key created a second task and its dependents were left waiting."""
    old = CoreConfig(
        [
            PoolConfig("default", min=0, max=2, initial=0, autoscale=False),
            PoolConfig("gone", min=0, max=2, initial=0, autoscale=False),
        ],
        persist=True,
    )
    core = Core(old)
    tid, _ = core.submit(0, TaskOptions(pool="gone"), None, key="k")
    child, _ = core.submit(0, TaskOptions(), None, key="c", deps=[("k", ON_SUCCESS)])
    subs = _submitted(core)
    new = _recover_live(_config(), subs, NS)
    t = new.lookup(NS, "k")
    assert t is not None and t.id == tid and t.status_name == "failed"
    assert t.message == "cannot recover task: unknown pool 'gone'"
    assert new.totals["failed"] == 1
    assert new.submit(NS, TaskOptions(), None, key="k") == (tid, True)  # still its key
    assert new.tasks[child].status_name == "skipped"  # its parent failed
