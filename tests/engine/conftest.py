"""Helpers for the engine unit tests: everything runs under virtual time (integer ns).

Test modules get these through fixtures (``drv``, ``make``, ``mkpool``) rather than by importing
this file, so that other test directories' conftests cannot shadow it; times in tests are
written with ``cronoq.engine.time.to_ns`` (seconds -> ns).

``Driver`` wraps a :class:`Core`, keeps a virtual clock, drains and records every action the
engine emits, and offers small verbs (submit, tick, complete, fail, cancel ...) addressed by
task id, so tests read like scenarios.
"""

from __future__ import annotations

from typing import Any

import pytest

from cronoq.engine.actions import Abort, Dispatch, Publish, Resolve, SpaceAvailable
from cronoq.engine.config import CoreConfig, PoolConfig
from cronoq.engine.core import Core
from cronoq.engine.model import TaskOptions, TaskState
from cronoq.engine.time import NS

__all__ = ["NS", "Driver", "pool", "sec"]


def sec(seconds: float) -> int:
    """Seconds to engine ns (exact for the values used in tests)."""
    return round(seconds * NS)


def pool(name: str = "default", cap: int = 2, **kw: Any) -> PoolConfig:
    """A fixed-capacity pool (no autoscaling) with ``cap`` slots."""
    kw.setdefault("autoscale", False)
    return PoolConfig(name, min=cap, max=max(cap, 1), initial=cap, **kw)


class Driver:
    """A Core under a virtual clock, with every emitted action recorded in ``log``."""

    def __init__(
        self,
        pools: list[PoolConfig] | None = None,
        *,
        seed: int = 0,
        emit_transitions: bool = False,
        publish: bool = False,
        epoch: int = 0,
        **cfg: Any,
    ) -> None:
        config = CoreConfig(pools or [pool()], seed=seed, emit_transitions=emit_transitions, **cfg)
        self.core = Core(config, now=0, epoch=epoch)
        self.core.publish = publish
        self.now = 0
        self.log: list[Any] = []

    # ---------------------------------------------------------------- clock and actions

    def at(self, seconds: float) -> Driver:
        """Move the virtual clock to ``seconds`` (never backwards)."""
        return self.at_ns(sec(seconds))

    def at_ns(self, ns: int) -> Driver:
        assert ns >= self.now, "virtual time must not go backwards"
        self.now = ns
        return self

    def advance(self, seconds: float) -> Driver:
        return self.at_ns(self.now + sec(seconds))

    def collect(self) -> list[Any]:
        acts = self.core.drain_actions()
        self.log.extend(acts)
        return acts

    def of(self, kind: type) -> list[Any]:
        return [a for a in self.log if isinstance(a, kind)]

    def events(self, tid: int | None = None) -> list[Any]:
        return [a.event for a in self.log if isinstance(a, Publish) and (tid is None or a.event.id == tid)]

    def statuses(self, tid: int) -> list[str]:
        return [e.status for e in self.events(tid)]

    def resolves(self, tid: int) -> list[Resolve]:
        return [a for a in self.log if isinstance(a, Resolve) and a.task.id == tid]

    def aborts(self) -> list[Abort]:
        return self.of(Abort)

    def space_available(self) -> list[SpaceAvailable]:
        return self.of(SpaceAvailable)

    # ---------------------------------------------------------------- inputs

    def submit(
        self,
        priority: int = 2,
        *,
        key: str | None = None,
        deadline: float | None = None,
        payload: object = None,
        **opts: Any,
    ) -> int:
        """Submit one task; ``deadline`` in absolute seconds.  Returns the id."""
        tid, _ = self.submit2(priority, key=key, deadline=deadline, payload=payload, **opts)
        return tid

    def submit2(
        self,
        priority: int = 2,
        *,
        key: str | None = None,
        deadline: float | None = None,
        payload: object = None,
        **opts: Any,
    ) -> tuple[int, bool]:
        o = TaskOptions(priority=priority, **opts)
        dl = None if deadline is None else sec(deadline)
        try:
            return self.core.submit(self.now, o, payload, key, dl)
        finally:
            self.collect()

    def tick(self) -> list[int]:
        """Fire due timers and fill slots; returns the ids dispatched, in order."""
        self.core.tick(self.now)
        return [a.task.id for a in self.collect() if isinstance(a, Dispatch)]

    def task(self, tid: int) -> TaskState:
        t = self.core.lookup(self.now, tid)
        assert t is not None, f"task {tid} unknown"
        return t

    def status(self, tid: int) -> str:
        return self.task(tid).status_name

    def lease(self, tid: int) -> int:
        return self.task(tid).lease

    def complete(self, tid: int, output: object = None) -> bool:
        ok = self.core.complete(self.now, self.lease(tid), output)
        self.collect()
        return ok

    def complete_lease(self, lease: int, output: object = None) -> bool:
        ok = self.core.complete(self.now, lease, output)
        self.collect()
        return ok

    def fail(self, tid: int, message: str = "boom", **kw: Any) -> bool:
        return self.fail_lease(self.lease(tid), message, **kw)

    def fail_lease(self, lease: int, message: str = "boom", **kw: Any) -> bool:
        ok = self.core.fail(self.now, lease, message, **kw)
        self.collect()
        return ok

    def cancel(self, ref: int | str) -> bool:
        ok = self.core.cancel(self.now, ref)
        self.collect()
        return ok

    def heartbeat(self, tid: int) -> bool:
        ok = self.core.heartbeat(self.now, self.lease(tid))
        self.collect()
        return ok

    def set_capacity(self, n: int, name: str = "default") -> None:
        self.core.set_capacity(self.now, name, n)
        self.collect()

    def snapshot(self, name: str = "default") -> Any:
        return self.core.snapshot(self.now).pool(name)

    def totals(self) -> dict[str, int]:
        return self.core.snapshot(self.now).totals

    def wakeup_in(self) -> int | None:
        """ns from now until the engine's next timer (None: no timers)."""
        w = self.core.next_wakeup()
        return None if w is None else w - self.now


@pytest.fixture
def make() -> type[Driver]:
    """The Driver class, to build engines with a custom configuration."""
    return Driver


@pytest.fixture
def mkpool() -> Any:
    """The ``pool(name, cap, **kw)`` helper (fixed-capacity PoolConfig)."""
    return pool


@pytest.fixture
def drv() -> Driver:
    """A default engine: one pool ``default`` with 2 fixed slots, seed 0."""
    return Driver()
