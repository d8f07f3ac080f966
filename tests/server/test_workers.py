"""The worker registry's index (cronoq.server.workers): sessions are kept by group (pool,
labels, kinds) and by pool, so picking a worker, sizing a group and re-offering a lease read
only the sessions concerned, never every connected session; the index follows registrations
and disconnections."""

from __future__ import annotations

from typing import Any

import pytest

from cronoq.server.workers import WorkerRegistry, WorkerSession


class _Seam:
    def __init__(self) -> None:
        self.capacity: dict[tuple[str, tuple[tuple[str, str], ...], Any], int] = {}

    def set_group_capacity(self, pool: str, labels: dict[str, str] | None, n: int, kinds: Any) -> None:
        self.capacity[(pool, tuple(sorted((labels or {}).items())), kinds)] = n


class _Sched:
    def __init__(self) -> None:
        self.seam = _Seam()


class _NoScan(dict[int, WorkerSession]):
    """The registry's session table, refusing to be scanned."""

    def values(self) -> Any:
        raise AssertionError("scanned every session")

    def __iter__(self) -> Any:
        raise AssertionError("scanned every session")


@pytest.fixture
def registry() -> WorkerRegistry:
    return WorkerRegistry(_Sched())  # type: ignore[arg-type]


def test_pick_reads_only_its_group(registry: WorkerRegistry) -> None:
    gpu = {"gpu": "a100"}
    many = [registry.register("other", f"o{i}", {}, 4) for i in range(50)]
    plain = registry.register("p", "plain", {}, 2)
    small = registry.register("p", "small", gpu, 1)
    big = registry.register("p", "big", gpu, 3)
    kinded = registry.register("p", "kinded", gpu, 8, kinds=frozenset({"k"}))
    registry.sessions = _NoScan(registry.sessions)
    assert registry.pick("p", gpu, None, set()) is big
    assert registry.pick("p", gpu, None, {big.id}) is small
    assert registry.pick("p", {}, None, set()) is plain
    assert registry.pick("p", gpu, frozenset({"k"}), set()) is kinded
    assert registry.pick("p", {"gpu": "h100"}, None, set()) is None
    assert registry.group("p", {"gpu": "a100"}, None) == [small, big]
    assert registry.connected("p") == 4 and registry.connected("other") == len(many)
    assert registry.serving("p", "k") and registry.serving("p", "anything")  # (plain serves any)


def test_the_index_follows_disconnections(registry: WorkerRegistry) -> None:
    seam = registry.sched.seam
    a = registry.register("p", "a", {"x": "1"}, 2)
    b = registry.register("p", "b", {"x": "1"}, 3)
    assert seam.capacity[("p", (("x", "1"),), None)] == 5  # type: ignore[attr-defined]
    registry.disconnect(a)
    assert registry.group("p", {"x": "1"}, None) == [b]
    assert seam.capacity[("p", (("x", "1"),), None)] == 3  # type: ignore[attr-defined]
    assert registry.pick("p", {"x": "1"}, None, set()) is b
    registry.disconnect(b)
    assert registry.group("p", {"x": "1"}, None) == [] and registry.connected("p") == 0
    assert registry.pick("p", {"x": "1"}, None, set()) is None
    assert not registry._groups and not registry._pools  # (no empty groups kept)
