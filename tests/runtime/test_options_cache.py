"""The options cache (runtime/task.py ``OptionsCache``): shared options per distinct argument
set, bounded in two generations, with a name-keyed fast path for resources-only options."""

from __future__ import annotations

import pytest

from cronoq.errors import ArgumentTypeError, InvalidSubmission
from cronoq.runtime.task import OptionsCache


def test_same_fields_share_options() -> None:
    c = OptionsCache()
    a = c.get({"resources": {"customer:1": 1}})
    assert c.get({"resources": {"customer:1": 1}}) is a
    assert a.resources == {"customer:1": 1}
    b = c.get({"resources": {"customer:1": 1, "api:1": 1}})
    assert c.get({"resources": {"customer:1": 1, "api:1": 1}}) is b
    assert b.resources == {"customer:1": 1, "api:1": 1}
    p = c.get({"pool": "x", "resources": {"customer:1": 1}})
    assert c.get({"pool": "x", "resources": {"customer:1": 1}}) is p
    assert p.pool == "x" and p is not a


def test_another_amount_of_a_name_is_not_confused() -> None:
    c = OptionsCache()
    one = c.get({"resources": {"customer:1": 1}})
    two = c.get({"resources": {"customer:1": 2}})
    assert two.resources == {"customer:1": 2}
    assert c.get({"resources": {"customer:1": 1}}).resources == {"customer:1": 1}
    assert one.resources == {"customer:1": 1}  # (never mutated)
    assert c.get({"resources": {"customer:1": 2}}) is two
    assert c.get({"resources": {"customer:1": 1}}) is one
    maps = [{"customer:1": a, "api:1": b} for a, b in ((1, 1), (1, 2), (2, 1), (2, 2))]
    stacked = [c.get({"resources": dict(m)}) for m in maps]
    for m, opts in zip(maps, stacked, strict=True):
        assert opts.resources == m and c.get({"resources": dict(m)}) is opts


@pytest.mark.parametrize("amount", [True, 1.0, 0, "1"])
def test_bad_amounts_are_refused_even_after_a_good_one(amount: object) -> None:
    c = OptionsCache()
    c.get({"resources": {"customer:1": 1}})
    with pytest.raises((InvalidSubmission, ArgumentTypeError)):
        c.get({"resources": {"customer:1": amount}})
    with pytest.raises((InvalidSubmission, ArgumentTypeError)):
        c.get({"resources": {"customer:1": 1, "api:1": amount}})


def test_non_string_names_are_refused() -> None:
    c = OptionsCache()
    with pytest.raises(ArgumentTypeError):
        c.get({"resources": {7: 1}})
    with pytest.raises(ArgumentTypeError):
        c.get({"resources": {"a": 1, 7: 1}})


def test_bounded_and_recently_used_entries_survive() -> None:
    c = OptionsCache(limit=4)
    hot = c.get({"resources": {"customer:hot": 1}})
    first = c.get({"resources": {"customer:0": 1}})
    for i in range(1, 40):
        c.get({"resources": {f"customer:{i}": 1}})
        if i % 3 == 0:  # used at least once per `limit` lookups: never rebuilt
            assert c.get({"resources": {"customer:hot": 1}}) is hot
    # used once long ago: dropped (at most 2 x limit entries are held), built again
    again = c.get({"resources": {"customer:0": 1}})
    assert again is not first and again.resources == first.resources


def test_two_maps_sharing_their_first_name_are_not_confused() -> None:
    # the front dict for two one-unit names is keyed by the first name alone: a hit is checked
    c = OptionsCache()
    maps = [{"customer:1": 1, "api:1": 1}, {"customer:1": 1, "db": 1}, {"customer:1": 1, "api:2": 1}]
    first = [c.get({"resources": dict(m)}) for m in maps]
    for _ in range(3):
        for m, opts in zip(maps, first, strict=True):
            got = c.get({"resources": dict(m)})
            assert got is opts and got.resources == m
    swapped = c.get({"resources": {"api:1": 1, "customer:1": 1}})
    assert swapped.resources == {"api:1": 1, "customer:1": 1} and swapped is not first[0]
    assert c.get({"resources": {"customer:1": 1, "api:1": 2}}).resources == {"customer:1": 1, "api:1": 2}
    with pytest.raises((InvalidSubmission, ArgumentTypeError)):
        c.get({"resources": {"customer:1": 1, "api:1": True}})


def test_the_front_dict_of_two_names_is_bounded() -> None:
    c = OptionsCache(limit=4)
    hot = c.get({"resources": {"customer:hot": 1, "api:hot": 1}})
    for i in range(40):
        c.get({"resources": {f"customer:{i}": 1, f"api:{i}": 1}})
        assert len(c._pairs) <= 4
        assert c.get({"resources": {"customer:hot": 1, "api:hot": 1}}) is hot
