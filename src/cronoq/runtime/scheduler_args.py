"""The checks of :class:`~cronoq.runtime.scheduler.Scheduler`'s constructor arguments
(docs/reference/behaviour.md#scheduler-api).

Theory of operation
-------------------
Every argument is checked when the scheduler is made, before anything runs, and a wrong one
raises ``ValueError`` naming it (the messages are the contract of the tests).  Each function
here checks one argument, or a pair that goes together, and returns the value the scheduler
keeps.  A store or a codec is checked for the methods the runtime calls (any object with them
fits, as their protocols say); a clock against its runtime-checkable protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from cronoq.engine.resources import ResourceConfig
from cronoq.errors import ArgumentTypeError
from cronoq.runtime.clock import LOOP_CLOCK, Clock
from cronoq.runtime.pool import Pool

if TYPE_CHECKING:
    from cronoq.store.base import Store
    from cronoq.store.codec import Codec


def check_pools(pools: Sequence[Pool] | Iterable[Pool]) -> list[Pool]:
    """At least one pool, every one a :class:`Pool`, with unique names."""
    pool_list = list(pools)
    if not pool_list:
        raise ValueError("at least one pool is required")
    seen: set[str] = set()
    for p in pool_list:
        if not isinstance(p, Pool):
            raise ValueError(f"pools must be Pool instances (got {p!r})")
        if p.name in seen:
            raise ValueError(f"duplicate pool name '{p.name}'")
        seen.add(p.name)
    return pool_list


def check_resources(resources: Sequence[ResourceConfig] | None) -> list[ResourceConfig]:
    """The resources, each made by ``Resource.semaphore`` or ``Resource.token_bucket``."""
    res_list = list(resources or ())
    for r in res_list:
        if not isinstance(r, ResourceConfig):
            raise ValueError(f"resources must be Resource.semaphore/token_bucket objects (got {r!r})")
    return res_list


def check_store_and_codec(store: Store | None, codec: Codec | None) -> Codec | None:
    """The codec payloads and outputs are stored with: ``codec``, or a ``JsonCodec`` when a
    store is given without one (None: no store, no codec)."""
    if store is not None and not callable(getattr(store, "commit", None)):
        raise ValueError(f"store must implement the cronoq Store protocol (got {store!r})")
    if codec is not None and not (
        callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))
    ):
        raise ValueError(f"codec must have encode(obj) -> bytes and decode(bytes) -> obj (got {codec!r})")
    if codec is None and store is not None:
        from cronoq.store.codec import JsonCodec

        return JsonCodec()
    return codec


def check_clock(clock: Clock | None) -> Clock:
    """``clock``, or the event loop's when None."""
    if clock is None:
        return LOOP_CLOCK
    if not isinstance(clock, Clock):
        raise ValueError(f"clock must implement the cronoq Clock protocol (got {clock!r})")
    return clock


def check_key_retention_max(key_retention_max: int) -> int:
    kmax = key_retention_max
    if isinstance(kmax, bool) or not isinstance(kmax, int) or kmax < 0:
        raise ValueError(f"key_retention_max must be an int >= 0 (got {key_retention_max!r})")
    return kmax


def check_keep_payloads(keep_payloads: bool | None) -> bool | None:
    if keep_payloads is not None and not isinstance(keep_payloads, bool):
        raise ValueError(f"keep_payloads must be a bool or None (got {keep_payloads!r})")
    return keep_payloads


def check_id_shard(id_shard: int) -> int:
    """The shard number carried in task ids (docs/how-to/shards.md); 0 = not sharded."""
    if isinstance(id_shard, bool) or not isinstance(id_shard, int) or not 0 <= id_shard <= 255:
        raise ValueError(f"id_shard must be an int in 0..255 (got {id_shard!r})")
    return id_shard


def check_event_capacity(event_capacity: int) -> int:
    if isinstance(event_capacity, bool) or not isinstance(event_capacity, int) or event_capacity < 1:
        raise ValueError(f"event_capacity must be an int >= 1 (got {event_capacity!r})")
    return event_capacity


def check_ref(ref: object) -> int | str:
    """A task reference: an id (int) or a key (str), else ``ArgumentTypeError``."""
    if isinstance(ref, bool) or not isinstance(ref, (int, str)):
        raise ArgumentTypeError(f"a task reference is an id (int) or a key (str), got {ref!r}")
    return ref
