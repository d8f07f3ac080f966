"""CI entry for the simulator: a fixed set of seeds within a bounded time budget.

A failure prints the seed, the step and ``python -m tests.sim --seed S --steps N -v``.
"""

from __future__ import annotations

import pytest

from cronoq.engine import core as core_mod

from .__main__ import main
from .featsim import FeatureSimulator
from .simulator import SimFailure, Simulator

#: seeds x steps run by CI (see docs/testing.md); ~15-25 s on a laptop-class core
CI_SEEDS = range(64)
CI_STEPS = 3000
#: a few longer runs: queues build up, retention and key reuse kick in
LONG_SEEDS = (1001, 1002, 1003, 1004)
LONG_STEPS = 25_000
#: the feature simulator (deps, fixed starts, resources, labels, tenants, crash recovery)
FEATURE_SEEDS = range(48)
FEATURE_STEPS = 2000
FEATURE_LONG_SEEDS = (2001, 2002)
FEATURE_LONG_STEPS = 12_000


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_seed(seed: int) -> None:
    st = Simulator(seed, CI_STEPS).run()
    assert st.shadow["events"] > 0


@pytest.mark.parametrize("seed", LONG_SEEDS)
def test_long_seed(seed: int) -> None:
    Simulator(seed, LONG_STEPS, full_check_every=1000, snapshot_every=2500).run()


@pytest.mark.parametrize("seed", FEATURE_SEEDS)
def test_feature_seed(seed: int) -> None:
    st = FeatureSimulator(seed, FEATURE_STEPS).run()
    assert st.shadow["dispatches"] > 0


@pytest.mark.parametrize("seed", FEATURE_LONG_SEEDS)
def test_feature_long_seed(seed: int) -> None:
    FeatureSimulator(seed, FEATURE_LONG_STEPS).run()


def test_feature_sim_covers_its_features() -> None:
    """The CI seeds exercise every feature: skips, misses, crashes with recovery."""
    agg: dict[str, int] = {}
    for seed in range(12):
        st = FeatureSimulator(seed, 1500).run()
        for k, v in st.shadow.items():
            agg[k] = agg.get(k, 0) + v
        for k in ("missed", "timeouts", "lease_expiries", "cancelled", "failed"):
            agg["t_" + k] = agg.get("t_" + k, 0) + st.totals[k]
    assert agg["skipped"] and agg["missed"] and agg["recoveries"] and agg["t_cancelled"], agg


def test_feature_replay_is_deterministic() -> None:
    a, b = FeatureSimulator(3, 1200), FeatureSimulator(3, 1200)
    sa, sb = a.run(), b.run()
    assert (sa.calls, sa.submitted, sa.totals, sa.shadow) == (sb.calls, sb.submitted, sb.totals, sb.shadow)
    assert [a._fmt(x) for x in a.trace] == [b._fmt(x) for x in b.trace]


def test_a_broken_recovery_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation check: recovery that forgets the interrupted attempt must fail with a replay line."""
    orig = core_mod.Core.recover

    def broken(self: core_mod.Core, now: int, rec) -> None:  # type: ignore[no-untyped-def]
        for r in rec.tasks:
            if r.status == "running":
                r.attempt -= 1
        orig(self, now, rec)

    monkeypatch.setattr(core_mod.Core, "recover", broken)
    with pytest.raises(SimFailure) as info:
        for seed in range(20):
            FeatureSimulator(seed, 2000).run()
    assert "features/" in str(info.value) and f"--seed {info.value.seed} --steps 2000" in str(info.value)


def test_replay_is_deterministic() -> None:
    a = Simulator(7, 1500)
    b = Simulator(7, 1500)
    sa, sb = a.run(), b.run()
    assert (sa.calls, sa.submitted, sa.sim_seconds, sa.totals, sa.shadow) == (
        sb.calls,
        sb.submitted,
        sb.sim_seconds,
        sb.totals,
        sb.shadow,
    )
    assert [Simulator._fmt(x) for x in a.trace] == [Simulator._fmt(x) for x in b.trace]


def test_a_broken_engine_is_caught_with_seed_and_replay(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Mutation check of the checker: an engine that ignores capacity decreases must fail."""
    orig = core_mod.Core.set_capacity

    def broken(self: core_mod.Core, now: int, pool: str, n: int) -> None:
        if n >= self.pools[self.pool_index[pool]].capacity:
            orig(self, now, pool, n)

    monkeypatch.setattr(core_mod.Core, "set_capacity", broken)
    with pytest.raises(SimFailure) as info:
        for seed in range(20):
            Simulator(seed, 2000).run()
    msg = str(info.value)
    assert f"seed={info.value.seed} step={info.value.step}" in msg
    assert f"python -m tests.sim --seed {info.value.seed} --steps 2000 -v" in msg
    assert main(["--seed", str(info.value.seed), "--steps", "2000"]) == 1
    assert "replay: python -m tests.sim" in capsys.readouterr().err


def test_cli_runs_seeds() -> None:
    assert main(["--seed", "5", "--seeds", "3", "--steps", "300"]) == 0
