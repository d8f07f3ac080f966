"""The score and urgency curves plotted on the Concepts pages are the engine's own.

``scripts/docs_diagrams.py`` draws docs/assets/concepts/priority-score.svg and urgency.svg from
small formulas over the default configuration. Here those formulas are compared with the
dispatch score the engine computes (``Core.score``) for real tasks waiting in a pool with no
free slot, at wait times on every part of the curves (aging, the cap, the urgency ramp,
overdue, the overdue cap).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from cronoq.engine.config import PriorityConfig, UrgencyConfig
from cronoq.engine.model import Priority
from cronoq.engine.time import to_ns

ROOT = Path(__file__).resolve().parent.parent.parent
WAITS = [0.0, 1.0, 37.5, 113.0, 116.0, 118.5, 119.0, 121.0, 125.0, 129.0, 300.0, 399.0, 400.0, 600.0]


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_diagrams", ROOT / "scripts" / "docs_diagrams.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def waiting(make, mkpool):
    """An engine whose only pool has no slot: submitted tasks stay ready (and age)."""
    return make([mkpool(cap=0)])


def test_class_curves_are_the_engine_score(waiting):
    d, s = waiting, script()
    ids = [d.submit(int(p)) for p in Priority]
    for w in WAITS:
        d.at(w)
        got = [d.core.score(d.task(t), d.now) for t in ids]
        want = [s.class_score(PriorityConfig(), int(p), w) for p in Priority]
        assert got == pytest.approx(want), w


def test_deadline_curve_is_the_engine_score(waiting):
    d, s = waiting, script()
    # the plotted example: Normal, due DEADLINE_IN after it became ready, expected to run
    # EXPECTED seconds (the pool's default duration)
    assert s.EXPECTED == 1.0
    tid = d.submit(int(Priority.NORMAL), deadline=s.DEADLINE_IN)
    for w in WAITS:
        d.at(w)
        want = s.deadline_score(PriorityConfig(), UrgencyConfig(), w)
        assert d.core.score(d.task(tid), d.now) == pytest.approx(want), w


@pytest.mark.parametrize("hint", [1.0, 20.0])
def test_urgency_curve_is_the_engine_urgency(waiting, hint):
    d, s = waiting, script()
    deadline = 60.0
    tid = d.submit(int(Priority.LOW), deadline=deadline, duration_hint=to_ns(hint))
    latest_start = deadline - hint
    for slack in (25.0, 20.0, 12.0, 5.0, 2.5, 0.0, -3.0, -10.0, -20.0):
        now = latest_start - slack  # slack falls, so time only moves forward
        d.at(now)
        aged = s.class_score(PriorityConfig(), int(Priority.LOW), now)
        want = aged + s.urgency(slack, hint, UrgencyConfig())
        assert d.core.score(d.task(tid), d.now) == pytest.approx(want), slack
