"""Task id layout (docs/how-to/shards.md): which bits of a task id say what.

Theory of operation
-------------------
A task id is a 64-bit integer the engine hands out in sequence.  Without shards it is
``epoch << 48 | seq``: the fencing epoch of the leadership term that created it, then a
sequence number that starts again in every term.  With shards (numbers 1..255) it is
``shard << 56 | epoch << 40 | seq``, so any node can tell from an id alone which shard owns
the task (:func:`shard_of`).  ``Core`` keeps the high bits (:func:`id_base`) and a sequence
limit that never carries into them; it refuses submissions once the term's sequence is spent.
"""

from __future__ import annotations

EPOCH_SHIFT = 48
SEQ_MASK = (1 << EPOCH_SHIFT) - 1
#: with shards (docs/how-to/shards.md): ``id = shard << 56 | epoch << 40 | seq``
SHARD_SHIFT = 56
SHARD_EPOCH_SHIFT = 40
SHARD_SEQ_MASK = (1 << SHARD_EPOCH_SHIFT) - 1


def id_base(epoch: int, shard: int = 0) -> int:
    """The high bits of the ids of a term: ``epoch << 48`` without shards, else
    ``shard << 56 | epoch << 40`` (the sequence fills the rest and never carries into them)."""
    if shard == 0:
        return epoch << EPOCH_SHIFT
    if not 1 <= shard <= 255:
        raise ValueError(f"shard number must be in 1..255 (got {shard})")
    if not 0 <= epoch < 1 << (SHARD_SHIFT - SHARD_EPOCH_SHIFT):
        raise ValueError(f"fencing epoch {epoch} does not fit the 16 epoch bits of a sharded id")
    return shard << SHARD_SHIFT | epoch << SHARD_EPOCH_SHIFT


def seq_limit(shard: int) -> int:
    """The largest sequence number of a term: 40 bits with shards, else 48."""
    return SHARD_SEQ_MASK if shard else SEQ_MASK


def shard_of(task_id: int) -> int:
    """The shard number a sharded id carries (``id >> 56``)."""
    return task_id >> SHARD_SHIFT
