"""docs/reference/behaviour.md#labels: worker groups with label sets, and label-constrained placement.

A task with ``labels`` runs only on a group whose labels include them all; when several groups
can take a task, the one with the fewest labels goes first (the unlabelled group first, ties in
creation order).  ``set_capacity`` and the autoscaler size only the unlabelled group;
``set_group_capacity`` sizes labelled groups and ``n = 0`` removes one.
"""

from __future__ import annotations

import pytest

from cronoq.engine.actions import Dispatch, Scale
from cronoq.engine.config import AutoscaleConfig, PoolConfig
from cronoq.engine.snapshot import GroupSnapshot
from cronoq.errors import SubmitError

GPU = {"gpu": "a100"}
GPU_EU = {"gpu": "a100", "zone": "eu"}


def group(d, labels, n, pool="default"):
    d.core.set_group_capacity(d.now, pool, labels, n)
    d.collect()


def groups(d, pool="default"):
    return [(g.labels, g.capacity, g.busy) for g in d.snapshot(pool).groups]


def placed_on(d, tid):
    """Labels of the group the task's current attempt was dispatched on (from the action)."""
    lease = d.lease(tid)
    (act,) = [a for a in d.log if isinstance(a, Dispatch) and a.lease == lease]
    return act.group


def test_set_group_capacity_creates_labelled_groups(make, mkpool):
    d = make([mkpool(cap=2)])
    assert groups(d) == [({}, 2, 0)]
    group(d, GPU, 3)
    group(d, {"zone": "eu"}, 1)
    snap = d.snapshot()
    assert snap.capacity == 6, "pool capacity is the sum over groups"
    assert groups(d) == [({}, 2, 0), (GPU, 3, 0), ({"zone": "eu"}, 1, 0)]
    g = snap.groups[1]
    assert isinstance(g, GroupSnapshot)
    assert (g.labels, g.capacity, g.busy) == (GPU, 3, 0)
    group(d, GPU, 5)  # same labels: resized, not duplicated
    assert d.snapshot().capacity == 8
    assert [x[0] for x in groups(d)] == [{}, GPU, {"zone": "eu"}]


def test_group_labels_are_stringified_and_unordered(make, mkpool):
    d = make([mkpool(cap=0)])
    group(d, {"n": 1, "a": "x"}, 1)
    group(d, {"a": "x", "n": "1"}, 2)  # the same label set
    assert groups(d) == [({}, 0, 0), ({"n": "1", "a": "x"}, 2, 0)]


def test_labelled_task_runs_only_on_matching_group(make, mkpool):
    d = make([mkpool(cap=2)])
    group(d, GPU_EU, 1)
    need_gpu = d.submit(labels=GPU)
    need_h100 = d.submit(labels={"gpu": "h100"})
    need_us = d.submit(labels={"gpu": "a100", "zone": "us"})
    need_more = d.submit(labels={**GPU_EU, "ssd": "yes"})
    assert d.tick() == [need_gpu], "labels ⊆ group labels; the unlabelled group cannot take them"
    assert placed_on(d, need_gpu) == GPU_EU
    assert d.task(need_gpu).group.labels == GPU_EU
    for t in (need_h100, need_us, need_more):
        assert d.status(t) == "ready"
    assert groups(d) == [({}, 2, 0), (GPU_EU, 1, 1)]


def test_labelled_task_waits_for_a_free_matching_slot(make, mkpool):
    d = make([mkpool(cap=4)])
    group(d, GPU, 1)
    a = d.submit(labels=GPU)
    b = d.submit(labels=GPU)
    plain = [d.submit() for _ in range(3)]
    assert d.tick() == [a, *plain], "b waits for the gpu slot and blocks nobody"
    assert d.status(b) == "ready"
    d.complete(plain[0])
    assert d.tick() == [], "a free unlabelled slot does not help b"
    d.complete(a)
    assert d.tick() == [b]
    assert placed_on(d, b) == GPU


def test_unlabelled_tasks_use_the_unlabelled_group_first(make, mkpool):
    d = make([mkpool(cap=1)])
    group(d, GPU, 1)
    x = d.submit()
    y = d.submit()
    z = d.submit()
    assert d.tick() == [x, y]
    assert placed_on(d, x) == {}
    assert placed_on(d, y) == GPU, "no labels needed: any group may run it, fewest labels first"
    assert d.status(z) == "ready"


def test_fewest_labels_first_ties_in_creation_order(make, mkpool):
    d = make([mkpool(cap=0)])
    group(d, {"gpu": "a100", "zone": "eu"}, 1)  # 2 labels, created 1st
    group(d, {"gpu": "a100"}, 1)  # 1 label
    group(d, {"gpu": "a100", "ssd": "yes"}, 1)  # 2 labels, created 3rd
    group(d, {"gpu": "a100", "a": "b", "c": "d"}, 1)  # 3 labels
    ids = [d.submit(labels={"gpu": "a100"}) for _ in range(5)]
    assert d.tick() == ids[:4]
    assert [placed_on(d, t) for t in ids[:4]] == [
        {"gpu": "a100"},
        {"gpu": "a100", "zone": "eu"},
        {"gpu": "a100", "ssd": "yes"},
        {"gpu": "a100", "a": "b", "c": "d"},
    ]
    assert [len(g[0]) for g in groups(d)] == [0, 1, 2, 2, 3]


def test_fewest_labels_first_after_a_slot_frees(make, mkpool):
    d = make([mkpool(cap=0)])
    group(d, GPU_EU, 1)
    group(d, GPU, 1)
    a = d.submit(labels=GPU)
    b = d.submit(labels=GPU)
    assert d.tick() == [a, b]
    assert placed_on(d, a) == GPU and placed_on(d, b) == GPU_EU
    d.complete(a)
    d.complete(b)
    c = d.submit(labels=GPU)
    assert d.tick() == [c]
    assert placed_on(d, c) == GPU


def test_zero_removes_a_group(make, mkpool):
    d = make([mkpool(cap=1)])
    group(d, GPU, 2)
    a = d.submit(labels=GPU)
    assert d.tick() == [a]
    group(d, GPU, 0)
    assert groups(d) == [({}, 1, 0)]
    assert d.snapshot().capacity == 1
    # its running attempt finishes normally
    assert d.complete(a)
    assert d.status(a) == "succeeded"
    assert d.snapshot().busy == 0
    b = d.submit(labels=GPU)
    assert d.tick() == []
    assert d.status(b) == "ready"
    group(d, GPU, 1)  # created again
    assert d.tick() == [b]


def test_zero_for_an_unknown_group_is_a_no_op(make, mkpool):
    d = make([mkpool(cap=1)])
    group(d, {"x": "y"}, 0)
    assert groups(d) == [({}, 1, 0)]


def test_zero_on_the_unlabelled_group_keeps_it(make, mkpool):
    d = make([mkpool(cap=1)])
    group(d, None, 0)
    group(d, {}, 0)
    assert groups(d) == [({}, 0, 0)]
    d.set_capacity(2)
    assert groups(d) == [({}, 2, 0)]


def test_unmatched_labels_are_accepted_and_visible_as_pending_and_ready(make, mkpool):
    d = make([mkpool(cap=2)])
    t = d.submit(labels={"arch": "arm64"})
    d.tick()
    snap = d.snapshot()
    assert snap.pending == 1 and snap.ready == 1 and snap.busy == 0
    assert snap.pending_by_class == [0, 0, 1, 0]
    assert d.core.snapshot(d.now).pending == 1
    assert d.status(t) == "ready"
    group(d, {"arch": "arm64", "os": "linux"}, 1)
    assert d.tick() == [t], "a matching group appearing lets it run"


def test_growing_a_group_serves_waiting_tasks(make, mkpool):
    d = make([mkpool(cap=0)])
    group(d, GPU, 1)
    ids = [d.submit(labels=GPU) for _ in range(3)]
    assert d.tick() == ids[:1]
    group(d, GPU, 3)
    assert d.tick() == ids[1:]
    assert groups(d)[1] == (GPU, 3, 3)


def test_waiting_labelled_tasks_keep_priority_order(make, mkpool):
    d = make([mkpool(cap=0)])
    group(d, GPU, 1)
    first = d.submit(labels=GPU)
    assert d.tick() == [first]
    low = d.submit(3, labels=GPU)
    high = d.submit(1, labels=GPU)
    assert d.tick() == []
    d.complete(first)
    assert d.tick() == [high]
    assert d.status(low) == "ready"


def test_set_capacity_sizes_only_the_unlabelled_group(make, mkpool):
    d = make([mkpool(cap=1)])
    group(d, GPU, 2)
    d.set_capacity(5)
    assert groups(d) == [({}, 5, 0), (GPU, 2, 0)]
    assert d.snapshot().capacity == 7
    d.set_capacity(0)
    assert groups(d) == [({}, 0, 0), (GPU, 2, 0)]
    assert d.snapshot().capacity == 2


def test_autoscaler_sizes_only_the_unlabelled_group(make):
    cfg = PoolConfig("default", min=1, max=3, autoscale=AutoscaleConfig(interval=1.0, max_step_up_abs=10))
    d = make([cfg])
    group(d, GPU, 4)
    for _ in range(40):
        d.submit(duration_hint=10 * 10**9)
    d.tick()
    assert groups(d) == [({}, 1, 1), (GPU, 4, 4)]
    d.at(1.0).tick()
    scales = d.of(Scale)
    assert scales and scales[-1].desired == 3, "desired is clamped to max, for the unlabelled group"
    assert d.snapshot().desired == 3
    d.set_capacity(scales[-1].desired)
    assert groups(d)[1] == (GPU, 4, 4), "the labelled group is untouched"
    assert d.snapshot().capacity == 7


def test_dispatch_action_carries_the_group_labels(make, mkpool):
    d = make([mkpool(cap=1)])
    group(d, GPU, 1)
    a = d.submit()
    b = d.submit(labels=GPU)
    d.tick()
    by_id = {x.task.id: x.group for x in d.of(Dispatch)}
    assert by_id == {a: {}, b: GPU}


def test_group_snapshot_busy_counts(make, mkpool):
    d = make([mkpool(cap=2)])
    group(d, GPU, 2)
    ids = [d.submit(labels=GPU), d.submit(), d.submit(), d.submit()]
    d.tick()
    assert groups(d) == [({}, 2, 2), (GPU, 2, 2)]
    assert d.snapshot().busy == 4
    for t in ids:
        d.complete(t)
    assert groups(d) == [({}, 2, 0), (GPU, 2, 0)]


def test_groups_are_per_pool(make, mkpool):
    d = make([mkpool("a", cap=1), mkpool("b", cap=1)])
    group(d, GPU, 1, pool="b")
    t = d.submit(pool="a", labels=GPU)
    u = d.submit(pool="b", labels=GPU)
    assert d.tick() == [u]
    assert d.status(t) == "ready"
    assert groups(d, "a") == [({}, 1, 0)]


def test_set_group_capacity_validation(make, mkpool):
    d = make([mkpool(cap=1)])
    with pytest.raises(SubmitError) as ei:
        d.core.set_group_capacity(d.now, "nope", GPU, 1)
    assert ei.value.code == "unknown_pool"
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError):
            d.core.set_group_capacity(d.now, "default", GPU, bad)
    assert groups(d) == [({}, 1, 0)]


def test_move_attempt_to_another_group(make, mkpool):
    """A lease handed back unrun may run on a worker of another group (docs/reference/grpc.md#worker-protocol,
    Nack): the attempt keeps its number and lease and takes that group's slot, giving its own back."""
    d = make([mkpool(cap=1)])
    group(d, GPU, 1)
    group(d, {"zone": "eu"}, 1)
    x = d.submit()
    assert d.tick() == [x] and placed_on(d, x) == {}
    lease = d.lease(x)
    assert d.core.move_attempt(lease, {}) is True, "its own group: nothing to do"
    assert d.core.move_attempt(lease, {"gpu": "h100"}) is False, "no such group"
    assert d.core.move_attempt(lease, GPU) is True
    assert d.task(x).group.labels == GPU and d.task(x).attempt == 1 and d.lease(x) == lease
    assert groups(d) == [({}, 1, 0), (GPU, 1, 1), ({"zone": "eu"}, 1, 0)]
    y = d.submit()
    assert d.tick() == [y] and placed_on(d, y) == {}, "the slot it gave back serves the next task"
    assert d.core.move_attempt(d.lease(y), GPU) is False, "no free slot there: nothing changes"
    assert groups(d) == [({}, 1, 1), (GPU, 1, 1), ({"zone": "eu"}, 1, 0)]
    assert d.complete(x)
    assert groups(d) == [({}, 1, 1), (GPU, 1, 0), ({"zone": "eu"}, 1, 0)]
    assert d.core.move_attempt(lease, GPU) is False, "a lease no longer current"


def test_move_attempt_respects_task_labels_and_unparks(make, mkpool):
    d = make([mkpool(cap=1)])
    group(d, GPU, 1)
    group(d, {"zone": "eu"}, 1)
    u = d.submit()
    v = d.submit()
    assert d.tick() == [u, v] and placed_on(d, v) == GPU, "no labels: fewest-labels group first"
    p = d.submit(labels=GPU)
    assert d.tick() == [] and d.status(p) == "ready", "the gpu slot is taken by v"
    g = d.submit(labels=GPU)  # (not run yet: parked behind p)
    assert d.core.move_attempt(d.lease(u), GPU) is False, "gpu group is full"
    # v is handed back by its gpu worker and taken by the eu worker: the gpu slot it gives
    # back goes to the parked gpu task at the next dispatch decision
    assert d.core.move_attempt(d.lease(v), {"zone": "eu"}) is True
    assert d.tick() == [p] and placed_on(d, p) == GPU
    assert groups(d) == [({}, 1, 1), (GPU, 1, 1), ({"zone": "eu"}, 1, 1)]
    assert d.status(g) == "ready"
    # a labelled task cannot move to a group without its labels
    assert d.core.move_attempt(d.lease(p), {"zone": "eu"}) is False
    assert d.complete(u)
    assert d.core.move_attempt(d.lease(p), {}) is False, "the unlabelled group lacks gpu"
