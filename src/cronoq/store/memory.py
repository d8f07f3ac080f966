"""MemoryStore: the default in-process store — nothing is persisted (docs/reference/behaviour.md#stores)."""

from __future__ import annotations

from collections.abc import Callable

from cronoq.engine.mutations import Mutation, Recovered
from cronoq.store.codec import Codec

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps nothing: ``load`` is always empty and ``commit`` discards its batch.

    ``durable`` is False, so the runtime runs the engine without ``Persist`` actions and with
    epoch 0 (ids 1, 2, 3 …); ``acquire`` always succeeds at once and returns 0.
    """

    durable = False

    def __init__(self) -> None:
        self.on_lost: Callable[[], None] | None = None
        self._leading = False
        self.commits = 0  # how many commit calls were made (tests, diagnostics)

    @property
    def epoch(self) -> int:
        return 0

    async def open(self) -> None:
        return None

    async def acquire(self, *, wait: bool = True) -> int:
        self._leading = True
        return 0

    async def is_leader(self) -> bool:
        return self._leading

    async def load(self, codec: Codec, window: float | None = None, limit: int | None = None) -> Recovered:
        return Recovered()

    async def commit(self, mutations: list[Mutation], epoch: int, codec: Codec) -> None:
        self.commits += 1

    async def load_payload(self, task_id: int) -> bytes | None:
        return None  # (not durable: the engine keeps ended tasks' payloads itself)

    async def prune(self, now_unix_ns: int, limit: int | None = None) -> int:
        return 0

    async def release(self) -> None:
        self._leading = False

    async def close(self) -> None:
        self._leading = False

    def __repr__(self) -> str:
        return "MemoryStore()"
