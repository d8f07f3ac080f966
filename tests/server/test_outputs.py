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
    cache.note(6, Blob(b"z" * 101, ""))  # larger than the whole cache: nothing else can stay ...
    assert dropped == [1, 2, 3, 4, 5] and cache.bytes == 101 and len(cache) == 1
    cache.note(7, Blob(b"", ""))  # ... and it goes with the next one (the newest always stays)
    assert dropped == [1, 2, 3, 4, 5, 6] and cache.bytes == 0 and len(cache) == 1


def test_recovered_outputs_noted_in_order() -> None:
    dropped: list[int] = []
    cache = OutputCache(1, 10**6, lambda tid, blob: dropped.append(tid))
    cache.note_recovered([(7, Blob(b"a", "")), (8, Blob(b"b", ""))])
    assert dropped == [7] and len(cache) == 1


def test_entries_no_longer_held_leave_without_a_drop() -> None:
    dropped: list[int] = []
    gone = {1, 2}
    cache = OutputCache(10, 10**6, lambda tid, blob: dropped.append(tid), lambda tid, blob: tid not in gone)
    cache.note(1, Blob(b"a", ""))
    cache.note(2, Blob(b"b", ""))
    assert len(cache) == 1  # 1 is no longer held: it left without a drop
    cache.note(3, Blob(b"c", ""))
    assert dropped == [] and len(cache) == 1 and cache.bytes == 1
