"""Suite-wide guards: a livelocked engine fails the test with a report instead of hanging it.

Theory of operation
-------------------
The engine is deterministic and each of its calls (``submit``, ``tick``, ``complete`` ...) does
a bounded amount of work, microseconds to milliseconds.  A bug that makes one call loop for
ever (a token bucket whose wake-up instant rounds down re-arms its timer at ``now`` and
``tick`` fires it again and again) used to hang the suite until pytest-timeout killed it, and
under Hypothesis not even then (it kept shrinking).  So, for the tests that drive an engine
directly (tests/engine, tests/sim):

* every public :class:`~cronoq.engine.core.Core` method gets a budget of
  :data:`ENGINE_CALL_CPU_S` seconds of CPU time, measured by ``ITIMER_VIRTUAL`` (process CPU
  time, so a loaded machine does not trip it and it does not disturb pytest-timeout's
  ``SIGALRM``); past it the call raises :class:`EngineLivelock` where it loops, naming the
  call, so the traceback shows the loop and Hypothesis reports (and shrinks) the example;
* Hypothesis examples get a deadline (:data:`HYPOTHESIS_DEADLINE`, the ``cronoq`` profile),
  and the drivers' own loops (tests/sim quiesce loops, ``until`` helpers) have step budgets.

Only the outermost engine call is timed (public methods call each other), and only in the main
thread (signals are delivered there).
"""

from __future__ import annotations

import functools
import inspect
import signal
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import settings

from cronoq.engine.core import Core

#: CPU seconds one engine call may take before it is declared a livelock
ENGINE_CALL_CPU_S = 2.0
#: the per-example deadline of Hypothesis (the ``cronoq`` profile, loaded for every test)
HYPOTHESIS_DEADLINE = timedelta(seconds=5)
#: the test directories whose tests drive an engine directly
_ENGINE_DIRS = ("engine", "sim")

settings.register_profile("cronoq", deadline=HYPOTHESIS_DEADLINE)
settings.load_profile("cronoq")


class EngineLivelock(AssertionError):
    """An engine call ran past its CPU budget (see the module docstring)."""


class _Budget:
    def __init__(self) -> None:
        self.depth = 0
        self.call = ""

    def _expired(self, signum: int, frame: Any) -> None:
        raise EngineLivelock(
            f"engine call Core.{self.call} used more than {ENGINE_CALL_CPU_S} s of CPU: a livelock"
        )

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.depth or threading.current_thread() is not threading.main_thread():
                return fn(*args, **kwargs)
            self.depth, self.call = 1, name
            previous = signal.signal(signal.SIGVTALRM, self._expired)
            signal.setitimer(signal.ITIMER_VIRTUAL, ENGINE_CALL_CPU_S)
            try:
                return fn(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
                signal.signal(signal.SIGVTALRM, previous)
                self.depth = 0

        return call


def _public_methods() -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, fn in inspect.getmembers(Core, inspect.isfunction):
        if not name.startswith("_"):
            yield name, fn


@pytest.fixture(autouse=True)
def engine_call_budget(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Times every engine call of the tests under tests/engine and tests/sim (module doc)."""
    if request.node.path.parent.name not in _ENGINE_DIRS:
        return
    budget = _Budget()
    for name, fn in _public_methods():
        monkeypatch.setattr(Core, name, budget.wrap(name, fn))
