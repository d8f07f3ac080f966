"""docs/how-to/operations.md: pause/resume of pools and schedules, replays and bulk selection,
in the engine under virtual time."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronoq.engine import bulk, control, replay
from cronoq.engine.actions import Dispatch, Persist, Scale
from cronoq.engine.config import AutoscaleConfig, CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import CANCELLED, FAIL, FAILED, READY, RUN_LATE, SKIP, STATUS_BY_NAME, TaskOptions
from cronoq.engine.mutations import PauseChange, Recovered, RecoveredTerminal
from cronoq.engine.recurring import CronSchedule, RecurringSpec
from cronoq.engine.time import to_ns as sec
from cronoq.errors import ReplayError, SubmitError


def pause(d, paused=True, name="default"):
    changed = control.set_pool_paused(d.core, d.now, name, paused)
    d.collect()
    return changed


def fixed(d, start, *, on_miss=RUN_LATE, tol=1.0):
    o = TaskOptions(tolerance=sec(tol), on_miss=on_miss)
    tid = d.core.submit(d.now, o, None, None, None, sec(start))[0]
    d.collect()
    return tid


# ---------------------------------------------------------------------------- pools


def test_paused_pool_dispatches_nothing_new_and_resume_dispatches_at_once(drv):
    d = drv
    running = d.submit()
    assert d.tick() == [running]
    assert pause(d) and not pause(d)  # (already paused: no change)
    queued = [d.submit() for _ in range(3)]  # submissions are still accepted
    assert d.tick() == []
    assert d.complete(running)  # the running attempt finishes normally
    assert d.tick() == []
    assert d.snapshot().paused and d.snapshot().pending == 3
    assert pause(d, False)
    assert d.tick() == queued[:2]  # at once, in the next fill pass
    assert not d.snapshot().paused


def test_paused_pool_bounds_still_apply(make, mkpool):
    d = make([mkpool(cap=1, max_pending=2)])
    pause(d)
    d.submit()
    d.submit()
    with pytest.raises(SubmitError) as ei:
        d.submit()
    assert ei.value.code == "full"


def test_other_pools_keep_dispatching(make, mkpool):
    d = make([mkpool("a", cap=1), mkpool("b", cap=1)])
    pause(d, name="a")
    ta = d.submit(pool="a")
    tb = d.submit(pool="b")
    assert d.tick() == [tb]
    assert d.status(ta) == "ready"


def test_unknown_pool_is_a_value_error(drv):
    with pytest.raises(ValueError, match="unknown pool 'nope'"):
        control.set_pool_paused(drv.core, 0, "nope", True)


@pytest.mark.parametrize(("policy", "status"), [(SKIP, "missed"), (FAIL, "failed"), (RUN_LATE, "ready")])
def test_fixed_start_due_while_paused_follows_its_miss_policy(drv, policy, status):
    d = drv
    t = fixed(d, 5, on_miss=policy)
    pause(d)
    d.at(5)
    assert d.tick() == []  # due, but the pool is paused
    assert d.status(t) == "ready"
    d.at(6.5)
    d.tick()
    assert d.status(t) == status
    pause(d, False)
    assert d.tick() == ([t] if policy == RUN_LATE else [])


def test_reservation_is_kept_while_paused_and_used_on_resume(make, mkpool):
    d = make([mkpool(cap=1)])
    t = fixed(d, 5, tol=10.0)
    pause(d)
    d.at(4.5)
    d.tick()
    assert d.snapshot().held == 1 and d.snapshot().reservations == 1
    other = d.submit()
    d.at(6)
    assert d.tick() == []
    pause(d, False)
    assert d.tick() == [t]  # the due fixed start goes first, on its held slot
    assert d.status(other) == "ready"


def test_leases_expire_while_paused_and_retry_after_resume(make, mkpool):
    d = make([mkpool(cap=1, lease_ttl=2.0)])
    t = d.submit()
    assert d.tick() == [t]
    pause(d)
    d.at(3)
    assert d.tick() == []  # the lease expired: retrying, but not dispatched again
    assert d.status(t) in ("retrying", "ready")
    d.at(30)
    assert d.tick() == []
    assert d.status(t) == "ready"
    pause(d, False)
    assert d.tick() == [t]


def test_autoscaler_never_scales_a_paused_pool_up(make):
    pool = PoolConfig("default", min=1, max=50, initial=1, autoscale=AutoscaleConfig(interval=1.0))
    d = make([pool])
    pause(d)
    for _ in range(40):
        d.submit()
    for s in range(1, 6):
        d.at(s)
        d.tick()
    assert not [a for a in d.log if isinstance(a, Scale) and a.desired > 1]
    pause(d, False)
    for s in range(6, 9):
        d.at(s)
        d.tick()
    assert [a for a in d.log if isinstance(a, Scale) and a.desired > 1]


def test_pause_is_persisted_and_recovered():
    cfg = CoreConfig([PoolConfig("default", min=1, max=1, initial=1, autoscale=False)], persist=True)
    core = Core(cfg)
    control.set_pool_paused(core, 0, "default", True)
    muts = [a.mutation for a in core.drain_actions() if isinstance(a, Persist)]
    assert muts == [PauseChange("pool", "default", True)]
    fresh = Core(cfg)
    fresh.recover(0, Recovered(paused=[("pool", "default"), ("pool", "gone"), ("recurring", "gone")]))
    assert fresh.pools[0].paused and not fresh.recurring.paused
    opts = TaskOptions()
    fresh.submit(0, opts, None)
    fresh.tick(0)
    assert not [a for a in fresh.drain_actions() if isinstance(a, Dispatch)]


@settings(max_examples=60)
@given(
    st.lists(
        st.sampled_from(["submit", "fixed", "fixed_skip", "pause", "resume", "tick", "done", "later"]),
        max_size=60,
    )
)
def test_nothing_is_dispatched_from_a_paused_pool(ops):
    from tests.engine.conftest import Driver

    d = Driver([PoolConfig("default", min=2, max=4, initial=2, autoscale=False, lease_ttl=3.0)])
    for op in ops:
        if op == "submit":
            d.submit()
        elif op in ("fixed", "fixed_skip"):
            with contextlib.suppress(SubmitError):  # (a reservation conflict)
                fixed(d, d.now / 1e9 + 1.5, on_miss=SKIP if op == "fixed_skip" else RUN_LATE)
        elif op == "pause":
            pause(d)
        elif op == "resume":
            pause(d, False)
        elif op == "later":
            d.advance(1.0)
        elif op == "done" and d.core.leases:
            d.complete_lease(next(iter(d.core.leases)))
        was_paused = d.core.pools[0].paused
        dispatched = d.tick()
        assert not (was_paused and dispatched)
    pause(d, False)  # resumed, everything ends (liveness)
    for _ in range(200):
        if not d.core.live:
            break
        for lease in list(d.core.leases):
            d.complete_lease(lease)
        d.advance(1.0)
        d.tick()
    assert d.core.live == 0


# ---------------------------------------------------------------------------- schedules


def add_schedule(d, name="every-minute", cron="* * * * *"):
    spec = RecurringSpec(name, CronSchedule(cron), 1, TaskOptions(), {"n": 1})
    d.core.add_recurring(d.now, spec)
    d.collect()


def test_paused_schedule_skips_and_counts_occurrences(drv):
    d = drv
    add_schedule(d)
    assert control.set_recurring_paused(d.core, "every-minute", True)
    assert not control.set_recurring_paused(d.core, "every-minute", True)
    for minute in (1, 2, 3):
        d.at(60 * minute)
        assert d.tick() == []
    (info,) = d.core.list_recurring()
    assert info.paused and info.skipped_paused == 3
    assert control.set_recurring_paused(d.core, "every-minute", False)
    d.at(240)
    assert len(d.tick()) == 1
    (info,) = d.core.list_recurring()
    assert not info.paused and info.skipped_paused == 3


def test_trigger_runs_now_even_while_paused(drv):
    d = drv
    add_schedule(d)
    control.set_recurring_paused(d.core, "every-minute", True)
    tid, dup = control.trigger_recurring(d.core, d.now, "every-minute")
    assert not dup and d.tick() == [tid]
    assert d.task(tid).opts.tags == {"cronoq.recurring": "every-minute"}
    with pytest.raises(ValueError, match="unknown recurring schedule 'nope'"):
        control.trigger_recurring(d.core, d.now, "nope")
    with pytest.raises(ValueError, match="unknown recurring schedule 'nope'"):
        control.set_recurring_paused(d.core, "nope", True)


def test_removing_a_paused_schedule_forgets_its_pause(drv):
    d = drv
    add_schedule(d)
    control.set_recurring_paused(d.core, "every-minute", True)
    d.core.remove_recurring(d.now, "every-minute")
    add_schedule(d)
    (info,) = d.core.list_recurring()
    assert not info.paused


# ---------------------------------------------------------------------------- replay


def test_replay_is_a_new_task_with_the_key_moved(drv):
    d = drv
    t = d.submit(key="k", payload={"p": 1}, kind="email", tags={"team": "x"})
    d.tick()
    d.fail(t, permanent=True)
    orig = d.task(t)
    replay.check(orig, t, False)
    new = replay.replay(d.core, d.now, orig, orig.payload, None)
    d.collect()
    assert new != t
    r = d.task(new)
    assert r.payload == {"p": 1} and r.opts.kind == "email"
    assert r.opts.tags == {"team": "x", "cronoq.replay_of": str(t)}
    assert replay.replay_of(r) == t and replay.replayed_by(orig) == new
    assert d.core.lookup(d.now, "k").id == new  # the key moved; the original stays by id
    assert d.core.lookup(d.now, t) is orig
    # a second replay of the original: the key stays with the first replay
    again = replay.replay(d.core, d.now, orig, orig.payload, None)
    assert d.task(again).key is None and d.core.lookup(d.now, "k").id == new
    assert replay.replayed_by(orig) == again


def test_replay_refusals(drv):
    d = drv
    with pytest.raises(ReplayError) as ei:
        replay.check(None, 42, False)
    assert ei.value.code == "unknown_task"
    t = d.submit()
    with pytest.raises(ReplayError) as ei:
        replay.check(d.task(t), t, False)
    assert ei.value.code == "not_finished"
    d.tick()
    d.complete(t, "out")
    with pytest.raises(ReplayError) as ei:
        replay.check(d.task(t), t, False)
    assert ei.value.code == "succeeded"
    assert replay.check(d.task(t), t, True) is d.task(t)


def test_replay_ids_never_repeat_and_links_recover():
    cfg = CoreConfig([PoolConfig("default", min=1, max=1, initial=1, autoscale=False)], persist=True)
    core = Core(cfg, epoch=1)  # (a new leader's term: ids of a new epoch)
    rec = Recovered(
        terminal=[
            RecoveredTerminal(1, 1, "default", "default", "k", "failed", 1, 0, 0, 10, "boom"),
            RecoveredTerminal(
                2, 2, "default", "default", "k", "cancelled", 0, 20, None, 30, None, replay_of=1
            ),
        ]
    )
    core.recover(0, rec)
    assert replay.replayed_by(core.tasks[1]) == 2 and replay.replay_of(core.tasks[2]) == 1
    assert core.keys.find("k") == 2
    assert not core.keep_payloads  # (a durable store holds them; the shell reads them back)
    new = replay.replay(core, 0, core.tasks[2], None, b"null")
    assert new not in (1, 2)


# ---------------------------------------------------------------------------- bulk selection


def test_bulk_filter_matches_every_criterion(make, mkpool):
    d = make([mkpool("a", cap=0), mkpool("b", cap=0)])
    ids = [
        d.submit(pool="a", kind="k1", tags={"x": "1"}),
        d.submit(pool="a", kind="k2"),
        d.submit(pool="b", kind="k1", tags={"x": "1"}, tenant="t"),
    ]
    d.advance(10)
    late = d.submit(pool="a", kind="k1", tags={"x": "1"})
    d.cancel(ids[1])
    core = d.core

    def sel(**kw):
        f = bulk.TaskFilter(kw.pop("statuses", frozenset({READY})), **kw)
        return [t.id for t in bulk.select(core, bulk.candidates(core), f, kw.get("limit"))]

    assert sel() == [ids[0], ids[2], late]
    assert sel(pools=frozenset({0})) == [ids[0], late]
    assert sel(kinds=frozenset({"k1"}), tags={"x": "1"}) == [ids[0], ids[2], late]
    assert sel(tenant="t") == [ids[2]]
    assert sel(created_after=sec(5)) == [late]
    assert sel(created_before=sec(5)) == [ids[0], ids[2]]
    assert sel(statuses=frozenset({CANCELLED}), finished_after=0) == [ids[1]]
    assert sel(finished_after=0) == []  # (not finished)
    assert sel(limit=2) == [ids[0], ids[2]]
    hits = bulk.select(core, bulk.candidates(core), bulk.TaskFilter(frozenset({READY})), None)
    assert bulk.cancel_all(core, d.now, hits) == 3
    assert bulk.cancel_all(core, d.now, hits) == 0  # (already cancelled)
    assert STATUS_BY_NAME["cancelled"] in bulk.REPLAYABLE and FAILED in bulk.REPLAYABLE
