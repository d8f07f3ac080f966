"""store/_records.py: what live state refers to in a store's history has one definition
(``referenced``), which a load (``history_refs``: what it reads back past its window) and a
prune (``prune_refs``: what it keeps past the retention) both use, so a prune never deletes a
row a start would read back."""

from __future__ import annotations

import json

from cronoq.engine.mutations import Recovered, RecoveredTask, TaskRecord
from cronoq.store._records import db_id, history_refs, newest_holders, prune_refs, spec_json

BIG = (1 << 64) - 5  # a shard's id above 2**63: stored negative


def live(*specs: TaskRecord) -> Recovered:
    rec = Recovered()
    rec.tasks = [
        RecoveredTask(100 + i, 100 + i, 0, s, None, "submitted", 0, None, None) for i, s in enumerate(specs)
    ]
    return rec


def test_load_and_prune_agree_on_what_is_referred_to() -> None:
    specs = (
        TaskRecord(pool="p", deps=[(1, 0), ("a", 1)]),
        TaskRecord(pool="p", tenant="acme", deps=[("a", 0), (BIG, 0)]),
        TaskRecord(pool="p", key="free"),  # no edges
        TaskRecord(pool="p", tags={"deps": "[[7,0]]"}, deps=[(2, 0)]),  # ("deps" in a value too)
    )
    journals = [
        (100, 0, json.dumps(["spawn", "fp", [3, 4], False]), 0),
        (100, 1, json.dumps(["wait", "", [5]]), 0),
        (100, 2, json.dumps(["step", "s", [6]]), 0),  # a step's result names no task
    ]
    schedules = [("s", "{}", None, 0, 8), ("t", "{}", None, 0, 0)]
    loaded = history_refs(live(*specs), schedules, journals)
    pruned = prune_refs(
        [(spec_json(s),) for s in specs if s.deps],  # (what PRUNE_LIVE_DEPS selects)
        [(r[2],) for r in journals],
        [(r[4],) for r in schedules if r[4]],
    )
    assert loaded.ids == pruned.ids == sorted([1, 2, 3, 4, 5, 8, db_id(BIG)])
    assert loaded.keys == pruned.keys == {"a": {None, "acme"}}


def test_a_prune_keeps_the_newest_holder_of_each_key_and_tenant() -> None:
    rows = [  # (id, key, spec), newest first
        (9, "a", '{"pool":"p","key":"a","tenant":"acme"}'),
        (8, "a", '{"pool":"p","key":"a"}'),
        (7, "a", '{"pool":"p","key":"a","tenant":"acme"}'),  # an older holder: not needed
        (6, "b", '{"pool":"p","key":"b"}'),  # not wanted
    ]
    assert newest_holders(rows, {"a": {None, "acme"}}) == [9, 8]


def test_undecodable_rows_refer_to_nothing() -> None:
    refs = prune_refs([("not json",), ('{"deps":[[]]}',), ('{"deps":7}',)], [("[",)], [])
    assert refs.ids == [] and refs.keys == {}
