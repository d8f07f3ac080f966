"""cronoq.server.outputs: the output cache evicts the oldest outputs beyond its count and byte
bounds (docs/reference/config.md#outputs)."""

from __future__ import annotations

from cronoq.server.outputs import OutputCache, blob_size
from cronoq.server.workers import Blob


def test_evicts_oldest_by_count_then_bytes() -> None:
    dropped: list[int] = []
    cache = OutputCache(2, 100, lambda tid, blob: dropped.append(tid))
    for tid in (1, 2, 3):
        cache.note(tid, Blob(b"ab", "t"))
    assert dropped == [1] and len(cache) == 2 and cache.bytes == 2 * blob_size(Blob(b"ab", "t")) == 6
    cache.note(4, Blob(b"x" * 97, ""))  # 97 + 3 (entry 3) = 100: fits; entry 2 goes by count
    assert dropped == [1, 2] and cache.bytes == 100
    cache.note(5, Blob(b"y", ""))  # 101 bytes: entry 3 goes, then 98 bytes with 2 entries
    assert dropped == [1, 2, 3] and cache.bytes == 98
    cache.note(6, Blob(b"z" * 101, ""))  # larger than the whole cache: nothing else can stay
    assert dropped == [1, 2, 3, 4, 5, 6] and cache.bytes == 0 and len(cache) == 0


def test_recovered_outputs_noted_in_order() -> None:
    dropped: list[int] = []
    cache = OutputCache(1, 10**6, lambda tid, blob: dropped.append(tid))
    cache.note_recovered([(7, Blob(b"a", "")), (8, Blob(b"b", ""))])
    assert dropped == [7] and len(cache) == 1
