"""Worker groups that serve some task kinds only (docs/how-to/deploys.md): a ready task no
group serves is parked, holding no slot, and runs once a group serving its kind has a slot;
a group serving any kind (a plain handler) takes every kind, as before."""

from __future__ import annotations

from cronoq.engine.waiting import waiting_reason

SHOP = frozenset({"shop.charge"})


def why(d, tid: int) -> str:
    t = d.task(tid)
    return waiting_reason(t, d.core.pools[t.opts.pool_index], d.core.res, d.now)


def test_a_kind_no_group_serves_waits_without_holding_a_slot(make, mkpool):
    d = make([mkpool(cap=0)])
    d.core.set_group_capacity(d.now, "default", None, 1, frozenset({"mail.send"}))
    charge = d.submit(kind="shop.charge")
    mails = [d.submit(kind="mail.send") for _ in range(2)]
    assert d.tick() == [mails[0]]  # the charge is parked: the slot goes to the mail behind it
    assert d.status(charge) == "ready"
    assert why(d, charge) == "no worker serves task 'shop.charge'"
    d.complete(mails[0])
    assert d.tick() == [mails[1]]
    # a group serving the kind arrives (a rolling deploy): the parked task runs there
    d.core.set_group_capacity(d.now, "default", None, 1, SHOP)
    assert d.tick() == [charge]
    assert d.task(charge).group.kinds == SHOP
    assert why(d, charge) == ""


def test_a_group_serving_any_kind_takes_it_when_its_slot_frees(make, mkpool):
    d = make([mkpool(cap=1)])  # the unlabelled group: a plain handler, any kind
    d.core.set_group_capacity(d.now, "default", None, 1, frozenset({"mail.send"}))
    first = d.submit(kind="shop.charge")
    assert d.tick() == [first]  # the any-kind group takes it
    charge = d.submit(kind="shop.charge")
    assert d.tick() == []  # the free slot does not serve it: parked
    assert why(d, charge) == "waiting for capacity (1 of 2 slots busy)"
    d.complete(first)
    assert d.tick() == [charge]


def test_a_moved_attempt_keeps_to_groups_serving_its_kind(make, mkpool):
    d = make([mkpool(cap=1)])
    d.core.set_group_capacity(d.now, "default", None, 1, frozenset({"mail.send"}))
    charge = d.submit(kind="shop.charge")
    assert d.tick() == [charge]
    lease = d.lease(charge)
    assert not d.core.move_attempt(lease, {}, frozenset({"mail.send"}))  # does not serve it
    assert d.core.move_attempt(lease, {}, None)  # already there
    d.core.set_group_capacity(d.now, "default", None, 0, frozenset({"mail.send"}))
    assert len(d.core.pools[0].groups) == 1 and not d.core.pools[0].kinded


def test_the_autoscaler_counts_unlabelled_kind_groups_as_its_capacity(make, mkpool):
    d = make([mkpool(cap=0)])
    pool = d.core.pools[0]
    d.core.set_group_capacity(d.now, "default", None, 3, SHOP)
    d.core.set_group_capacity(d.now, "default", {"gpu": "a100"}, 2, SHOP)
    d.submit(kind="shop.charge")
    d.tick()
    assert pool.unlabelled() == (3, 1)  # the labelled group is not the autoscaler's to size
