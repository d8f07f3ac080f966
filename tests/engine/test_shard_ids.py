"""docs/how-to/shards.md: the id layout with shards (``shard << 56 | epoch << 40 | seq``) and
without (``epoch << 48 | seq``): no collisions across shards and epochs, ids sort by shard."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronoq.engine import Core, CoreConfig, PoolConfig, TaskOptions
from cronoq.engine.ids import SHARD_SEQ_MASK, id_base, shard_of
from cronoq.errors import SubmitError


def _core(**kw: int) -> Core:
    return Core(CoreConfig([PoolConfig("p", min=1, max=1, autoscale=False)]), **kw)


def test_first_id_of_a_shard_and_epoch() -> None:
    c = _core(epoch=3, shard=7)
    tid, _ = c.submit(0, TaskOptions(), "x")
    assert tid == 7 << 56 | 3 << 40 | 1 and shard_of(tid) == 7
    u = _core(epoch=3)
    assert u.submit(0, TaskOptions(), "x")[0] == 3 << 48 | 1


keys = st.tuples(st.integers(1, 255), st.integers(0, 0xFFFF), st.integers(1, SHARD_SEQ_MASK))


@given(st.lists(keys, min_size=2, max_size=50, unique=True))
def test_no_collisions_and_sorted_by_shard(triples: list[tuple[int, int, int]]) -> None:
    ids = {id_base(e, s) | q: (s, e, q) for s, e, q in triples}
    assert len(ids) == len(triples)  # distinct (shard, epoch, seq) -> distinct ids
    for tid, (s, _, _) in ids.items():
        assert shard_of(tid) == s and tid < 1 << 64
    ordered = sorted(ids)
    assert [ids[i] for i in ordered] == sorted(ids.values())


def test_sequence_never_carries_into_the_epoch_or_shard() -> None:
    c = _core(epoch=1, shard=255, first_seq=SHARD_SEQ_MASK)
    last, _ = c.submit(0, TaskOptions(), "x")
    assert shard_of(last) == 255 and last & SHARD_SEQ_MASK == SHARD_SEQ_MASK
    with pytest.raises(SubmitError, match="exhausted"):
        c.submit(0, TaskOptions(), "y")


def test_bad_shard_or_epoch() -> None:
    with pytest.raises(ValueError, match=r"1\.\.255"):
        id_base(0, 256)
    with pytest.raises(ValueError, match="16 epoch bits"):
        id_base(1 << 16, 1)
