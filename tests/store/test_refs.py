"""store/_records.py: what live state refers to in a store's history has one definition
(``referenced``), which a load (``history_refs``: what it reads back past its window) and a
prune (``prune_refs``: what it keeps past the retention) both use, so a prune never deletes a
row a start would read back."""

from __future__ import annotations

import json

from cronoq.engine.mutations import Recovered, RecoveredTask, TaskRecord
from cronoq.store._records import RefsCache, db_id, history_refs, newest_holders, prune_refs, spec_json

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
        [(100 + i, spec_json(s)) for i, s in enumerate(specs) if s.deps],  # (what PRUNE_LIVE_DEPS selects)
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
    refs = prune_refs([(1, "not json"), (2, '{"deps":[[]]}'), (3, '{"deps":7}')], [("[",)], [])
    assert refs.ids == [] and refs.keys == {}


def test_a_prune_parses_only_the_definitions_it_has_not_seen() -> None:
    """The store's cache of parsed references (``RefsCache``): a definition read again with
    the same text is not parsed again; one written again under its id with another text is;
    the cache holds the rows of the latest prune only, at most ``limit`` of them."""
    a = spec_json(TaskRecord(pool="p", deps=[(1, 0)]))
    b = spec_json(TaskRecord(pool="p", tenant="acme", deps=[("k", 0)]))
    cache = RefsCache()
    assert prune_refs([(10, a), (11, b)], [], [], cache).ids == [1]
    assert cache.parsed == 2
    refs = prune_refs([(10, a), (11, b)], [], [], cache)
    assert (refs.ids, refs.keys, cache.parsed) == ([1], {"k": {"acme"}}, 2)
    b2 = spec_json(TaskRecord(pool="p", tenant="acme", deps=[("j", 0)]))
    assert len(b2) == len(b)  # (texts are compared, not lengths)
    refs = prune_refs([(10, a), (11, b2), (12, a)], [], [], cache)  # 11 changed, 12 is new
    assert (refs.ids, refs.keys, cache.parsed) == ([1], {"j": {"acme"}}, 4)
    prune_refs([(12, a)], [], [], cache)  # 10 and 11 finished: they leave the cache
    assert sorted(cache.entries) == [12] and cache.parsed == 4
    small = RefsCache(limit=1)
    for _ in range(2):
        assert prune_refs([(10, a), (11, b)], [], [], small).ids == [1]
    assert len(small.entries) == 1 and small.parsed == 3  # (11 is parsed each time)
