"""docs/reference/behaviour.md#lifecycle: the lifecycle — transition table, events, messages, exactly one
terminal status."""

from __future__ import annotations

import random

import pytest

from cronoq.engine import model
from cronoq.engine.actions import Abort, Dispatch, Resolve
from cronoq.engine.model import (
    BLOCKED,
    CANCELLED,
    DEAD_LETTERED,
    EV_BACKOFF_DONE,
    EV_CANCEL,
    EV_DISPATCH,
    EV_EDGE_BROKEN,
    EV_EXHAUSTED,
    EV_MISS_FAIL,
    EV_MISS_SKIP,
    EV_OCCURRENCE_SKIP,
    EV_PARK,
    EV_PERMANENT,
    EV_RETRY,
    EV_SHED,
    EV_START_DUE,
    EV_SUCCEED,
    EV_UNBLOCK,
    EV_UNBLOCK_LATER,
    FAILED,
    MISSED,
    READY,
    RETRYING,
    RUNNING,
    SCHEDULED,
    SHED,
    SKIPPED,
    STATUS_NAMES,
    SUCCEEDED,
    TRANSITIONS,
    IllegalTransition,
    RetryPolicy,
    is_terminal,
    next_status,
)
from cronoq.engine.time import to_ns as sec

NON_TERMINAL = (BLOCKED, SCHEDULED, READY, RUNNING, RETRYING)
NOT_RUNNING = (BLOCKED, SCHEDULED, READY, RETRYING)
TERMINAL = (SUCCEEDED, FAILED, DEAD_LETTERED, CANCELLED, SKIPPED, MISSED, model.SHED)

# docs/reference/behaviour.md#lifecycle table, row by row (cancel and shed rows expanded over their "from"
# sets), plus the overlap rule of docs/reference/behaviour.md#cron
SPEC_ROWS = {
    (BLOCKED, EV_UNBLOCK): READY,
    (BLOCKED, EV_UNBLOCK_LATER): SCHEDULED,
    (BLOCKED, EV_EDGE_BROKEN): SKIPPED,
    (BLOCKED, EV_OCCURRENCE_SKIP): SKIPPED,
    # docs/reference/behaviour.md#cron overlap="skip": an occurrence that comes due (scheduled) while the
    # previous one is live is skipped -- implied by the cron section although the lifecycle table lists
    # skipped only from blocked
    (SCHEDULED, EV_OCCURRENCE_SKIP): SKIPPED,
    (SCHEDULED, EV_START_DUE): READY,
    (SCHEDULED, EV_MISS_SKIP): MISSED,
    (SCHEDULED, EV_MISS_FAIL): FAILED,
    (READY, EV_MISS_SKIP): MISSED,
    (READY, EV_MISS_FAIL): FAILED,
    (READY, EV_DISPATCH): RUNNING,
    (RUNNING, EV_SUCCEED): SUCCEEDED,
    (RUNNING, EV_PERMANENT): FAILED,
    (RUNNING, EV_RETRY): RETRYING,
    (RUNNING, EV_EXHAUSTED): DEAD_LETTERED,
    # docs/how-to/durable.md: a parked attempt waits without a slot (a sleep goes on to scheduled)
    (RUNNING, EV_PARK): BLOCKED,
    (RETRYING, EV_BACKOFF_DONE): READY,
    **{(s, EV_CANCEL): CANCELLED for s in NON_TERMINAL},
    **{(s, EV_SHED): SHED for s in NOT_RUNNING},
}


# ---------------------------------------------------------------------------- the table


def test_status_names_are_the_spec_spelling():
    assert STATUS_NAMES == (
        "blocked",
        "scheduled",
        "ready",
        "running",
        "retrying",
        "succeeded",
        "failed",
        "dead_lettered",
        "cancelled",
        "skipped",
        "missed",
        "shed",
    )
    assert [is_terminal(s) for s in range(len(STATUS_NAMES))] == [False] * 5 + [True] * 7


def test_transition_table_is_exactly_the_spec_table():
    assert TRANSITIONS == SPEC_ROWS


@pytest.mark.parametrize(("row", "to"), sorted(SPEC_ROWS.items()))
def test_next_status_follows_every_legal_row(row, to):
    assert next_status(*row) == to


def test_every_other_transition_is_illegal():
    n_events = len(model.EVENT_NAMES)
    illegal = 0
    for s in range(len(STATUS_NAMES)):
        for ev in range(n_events):
            if (s, ev) in SPEC_ROWS:
                continue
            with pytest.raises(IllegalTransition):
                next_status(s, ev)
            illegal += 1
    # terminal statuses have no way out at all
    assert illegal > 7 * n_events


@pytest.mark.parametrize("terminal", TERMINAL)
def test_no_transition_leaves_a_terminal_status(terminal):
    for ev in range(len(model.EVENT_NAMES)):
        with pytest.raises(IllegalTransition):
            next_status(terminal, ev)


def test_illegal_transition_message_names_status_and_event():
    with pytest.raises(IllegalTransition, match=r"illegal transition: succeeded --cancel-->"):
        next_status(SUCCEEDED, EV_CANCEL)
    with pytest.raises(IllegalTransition, match=r"running --shed-->"):
        next_status(RUNNING, EV_SHED)
    assert issubclass(IllegalTransition, AssertionError)


# ---------------------------------------------------------------------------- submit / events


def test_submit_emits_blocked_then_ready_with_emit_transitions(make):
    d = make(emit_transitions=True, publish=True)
    tid = d.submit(key="k1")
    evs = d.events(tid)
    assert [e.status for e in evs] == ["blocked", "ready"]
    assert all(e.attempt == 0 and e.message is None for e in evs)
    assert all(e.pool == "default" and e.key == "k1" and e.id == tid for e in evs)
    assert d.status(tid) == "ready"


def test_full_success_event_sequence_with_emit_transitions(make):
    d = make(emit_transitions=True, publish=True)
    tid = d.submit()
    d.advance(1)
    assert d.tick() == [tid]
    d.advance(2)
    assert d.complete(tid, "out")
    evs = d.events(tid)
    assert [(e.status, e.attempt) for e in evs] == [
        ("blocked", 0),
        ("ready", 0),
        ("running", 1),
        ("succeeded", 1),
    ]
    assert [e.at for e in evs] == [0.0, 0.0, 1.0, 3.0]
    assert evs[-1].message is None


def test_event_at_uses_time_base(make):
    d = make(emit_transitions=True, publish=True, time_base=sec(1_700_000_000))
    tid = d.submit()
    assert d.events(tid)[0].at == pytest.approx(1_700_000_000.0)


def test_without_emit_transitions_only_terminal_events_are_published(make):
    d = make(publish=True)
    tid = d.submit(retry=RetryPolicy(max_attempts=2, jitter=False))
    d.tick()
    d.fail(tid, "first")
    d.advance(1)
    d.tick()
    d.complete(tid)
    assert d.statuses(tid) == ["succeeded"]


def test_nothing_is_published_while_no_one_subscribes(make):
    d = make(emit_transitions=True, publish=False)
    tid = d.submit()
    d.tick()
    d.complete(tid)
    assert d.events() == []
    assert len(d.resolves(tid)) == 1


# ---------------------------------------------------------------------------- running rows


def test_ready_to_running_emits_dispatch_with_lease(drv):
    tid = drv.submit()
    assert drv.status(tid) == "ready"
    acts = drv.core.drain_actions()
    assert not any(isinstance(a, Dispatch) for a in acts), "dispatch only happens in tick"
    assert drv.tick() == [tid]
    (disp,) = drv.of(Dispatch)
    t = drv.task(tid)
    assert disp.task is t and disp.lease == t.lease and t.attempt == 1
    assert t.status_name == "running"


def test_running_to_succeeded(drv):
    tid = drv.submit()
    drv.tick()
    assert drv.complete(tid, {"v": 1})
    t = drv.task(tid)
    assert t.status_name == "succeeded"
    assert t.output == {"v": 1}
    assert t.message is None
    assert [r.task.id for r in drv.of(Resolve)] == [tid]
    assert drv.totals()["succeeded"] == 1


def test_resolve_only_for_the_ids_the_shell_waits_for(make, mkpool):
    """``resolve_for`` (the runtime's waiters): an ending task nobody waits for gets no Resolve,
    whichever way it ends; None (the default) resolves every one."""
    d = make([mkpool(cap=1)])
    waited: dict[int, object] = {}
    d.core.resolve_for = waited
    a, b, c = d.submit(), d.submit(), d.submit()
    waited[b] = None
    assert d.tick() == [a]
    assert d.complete(a)
    assert d.tick() == [b]
    assert d.complete(b)
    assert d.cancel(c)
    assert [r.task.id for r in d.of(Resolve)] == [b]
    assert [d.status(x) for x in (a, b, c)] == ["succeeded", "succeeded", "cancelled"]


def test_running_to_failed_via_permanent(make):
    d = make(publish=True)
    tid = d.submit()
    d.tick()
    assert d.fail(tid, "bad input", permanent=True)
    t = d.task(tid)
    assert t.status_name == "failed"
    assert t.message == "bad input"
    assert d.events(tid)[-1].message == "bad input"
    tot = d.totals()
    assert tot["failed"] == 1 and tot["retries"] == 0 and tot["dead_lettered"] == 0


def test_permanent_failure_never_retries_even_with_attempts_left(drv):
    tid = drv.submit(retry=RetryPolicy(max_attempts=5))
    drv.tick()
    drv.fail(tid, "nope", permanent=True)
    assert drv.wakeup_in() is None
    drv.advance(100)
    assert drv.tick() == []
    assert drv.task(tid).attempt == 1


def test_running_to_retrying_then_ready_after_backoff(make):
    d = make(emit_transitions=True, publish=True)
    tid = d.submit(retry=RetryPolicy(max_attempts=3, initial_backoff=2.0, jitter=False))
    d.tick()
    d.fail(tid, "flaky")
    assert d.status(tid) == "retrying"
    retry_ev = d.events(tid)[-1]
    assert (retry_ev.status, retry_ev.attempt, retry_ev.message) == ("retrying", 1, "flaky")
    d.advance(1.999)
    assert d.tick() == []
    assert d.status(tid) == "retrying"
    d.advance(0.001)
    assert d.tick() == [tid]
    assert d.task(tid).attempt == 2
    assert d.statuses(tid)[-3:] == ["retrying", "ready", "running"]
    assert d.totals()["retries"] == 1


def test_running_to_dead_lettered_carries_last_attempts_message(make):
    d = make(publish=True)
    tid = d.submit(retry=RetryPolicy(max_attempts=3, initial_backoff=0.0, jitter=False))
    for i in range(1, 4):
        assert d.tick() == [tid]
        assert d.task(tid).attempt == i
        d.fail(tid, f"err {i}")
    t = d.task(tid)
    assert t.status_name == "dead_lettered"
    assert t.message == "err 3"
    (ev,) = d.events(tid)
    assert (ev.status, ev.message, ev.attempt) == ("dead_lettered", "err 3", 3)
    tot = d.totals()
    assert tot["dead_lettered"] == 1 and tot["retries"] == 2 and tot["failed"] == 0


def test_success_after_retry_has_no_message(drv):
    tid = drv.submit(retry=RetryPolicy(max_attempts=2, initial_backoff=0.0))
    drv.tick()
    drv.fail(tid, "transient")
    assert drv.task(tid).status_name == "ready"
    drv.tick()
    drv.complete(tid, 7)
    t = drv.task(tid)
    assert t.status_name == "succeeded"
    assert t.message is None, "docs/reference/behaviour.md#lifecycle: success -> no message"
    assert t.output == 7


# ---------------------------------------------------------------------------- cancel


def test_cancel_from_ready(make):
    d = make(publish=True)
    tid = d.submit(key="c")
    assert d.cancel(tid)
    t = d.task(tid)
    assert t.status_name == "cancelled" and t.message == "cancelled"
    assert d.events(tid)[-1].message == "cancelled"
    assert d.aborts() == []
    assert d.tick() == []
    assert d.totals()["cancelled"] == 1
    assert d.snapshot().pending == 0


def test_cancel_by_key(drv):
    tid = drv.submit(key="by-key")
    assert drv.cancel("by-key")
    assert drv.status(tid) == "cancelled"


def test_cancel_running_emits_abort_and_frees_the_slot(make, mkpool):
    d = make([mkpool(cap=1)])
    a = d.submit()
    b = d.submit()
    assert d.tick() == [a]
    lease = d.lease(a)
    d.log.clear()
    assert d.cancel(a)
    assert [type(x) for x in d.log] == [Abort, Resolve]
    abort = d.log[0]
    assert (abort.lease, abort.task_id, abort.reason) == (lease, a, "cancelled")
    assert d.status(a) == "cancelled"
    assert d.snapshot().busy == 0
    assert d.tick() == [b]
    # the aborted attempt reporting later is stale
    assert not d.complete_lease(lease, "late")
    assert d.status(a) == "cancelled"
    assert d.task(a).output is None
    assert d.totals()["stale_completions"] == 1


def test_cancel_retrying_drops_the_backoff_timer(drv):
    tid = drv.submit(retry=RetryPolicy(max_attempts=3, initial_backoff=5.0, jitter=False))
    drv.tick()
    drv.fail(tid, "x")
    assert drv.wakeup_in() == sec(5)
    assert drv.cancel(tid)
    assert drv.status(tid) == "cancelled"
    assert drv.wakeup_in() is None
    drv.advance(10)
    assert drv.tick() == []
    assert drv.status(tid) == "cancelled"
    assert drv.snapshot().pending == 0


def test_cancel_unknown_or_terminal_returns_false(drv):
    assert not drv.cancel(12345)
    assert not drv.cancel("no-such-key")
    tid = drv.submit()
    drv.tick()
    drv.complete(tid)
    assert not drv.cancel(tid)
    assert drv.status(tid) == "succeeded"
    assert drv.totals()["cancelled"] == 0


# ---------------------------------------------------------------------------- one terminal


def test_reports_after_terminal_are_stale_and_change_nothing(drv):
    tid = drv.submit()
    drv.tick()
    lease = drv.lease(tid)
    drv.complete(tid, "first")
    assert not drv.complete_lease(lease, "second")
    assert not drv.fail_lease(lease, "late", permanent=True)
    assert not drv.cancel(tid)
    t = drv.task(tid)
    assert (t.status_name, t.output) == ("succeeded", "first")
    assert len(drv.resolves(tid)) == 1
    assert drv.totals()["stale_completions"] == 2


@pytest.mark.parametrize("scenario_seed", range(8))
def test_exactly_one_terminal_status_under_random_operations(make, mkpool, scenario_seed):
    rnd = random.Random(scenario_seed)
    d = make([mkpool(cap=3, lease_ttl=3.0)], publish=True, emit_transitions=True, seed=scenario_seed)
    ids = []
    for _ in range(60):
        op = rnd.random()
        if op < 0.3 or not ids:
            ids.append(
                d.submit(
                    rnd.randrange(4),
                    timeout=sec(rnd.choice([2, 4, 100])),
                    retry=RetryPolicy(max_attempts=rnd.randint(1, 3), initial_backoff=0.5),
                )
            )
        elif op < 0.5:
            d.cancel(rnd.choice(ids))
        else:
            running = [t for t in ids if d.core.tasks.get(t) and d.core.tasks[t].status == RUNNING]
            if running:
                tid = rnd.choice(running)
                r = rnd.random()
                if r < 0.4:
                    d.complete(tid, tid)
                elif r < 0.7:
                    d.fail(tid, "r")
                elif r < 0.8:
                    d.fail(tid, "p", permanent=True)
                else:
                    d.heartbeat(tid)
        d.advance(rnd.choice([0, 0.5, 1, 2.5]))
        d.tick()
    for _ in range(20):
        d.advance(10)  # past any backoff; expired leases and timeouts fire too
        d.tick()
        for tid in ids:
            if d.core.tasks[tid].status == RUNNING:
                d.complete(tid)
    for tid in ids:
        resolves = d.resolves(tid)
        assert len(resolves) == 1, f"task {tid}: {len(resolves)} resolves"
        statuses = d.statuses(tid)
        terminal = [s for s in statuses if s not in STATUS_NAMES[:5]]
        assert len(terminal) == 1 and statuses[-1] == terminal[0]
        assert d.status(tid) == terminal[0]
    snap = d.core.snapshot(d.now)
    assert snap.live_tasks == 0 and snap.pending == 0 and snap.running == 0
    tot = snap.totals
    ended = tot["succeeded"] + tot["failed"] + tot["dead_lettered"] + tot["cancelled"]
    assert ended == tot["submitted"] == len(ids)
