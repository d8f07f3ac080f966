"""Regression tests for engine bugs found by the feature simulator (tests/sim/featsim.py)."""

from __future__ import annotations

from cronoq.engine.actions import Persist, Publish
from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import ON_COMPLETE, ON_FAILURE, ON_SUCCESS, TaskOptions
from cronoq.engine.mutations import Recovered, RecoveredTask, Submitted
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
