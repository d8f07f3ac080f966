"""The harness: one engine plus its shadow, with a virtual clock.

Every engine call goes through a method here, which (1) lets the shadow predict the answer,
(2) calls the engine at ``self.now``, (3) drains the actions and feeds them to the shadow and
(4) runs the cheap counter checks.  The simulator and the Hypothesis state machine both drive
the engine only through this class, so they check the same invariants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cronoq.engine.config import CoreConfig
from cronoq.engine.core import Core
from cronoq.errors import SubmitError

from .invariants import Shadow
from .workload import TaskSpec

Listener = Callable[[str, tuple[Any, ...], object, list[Any]], None]


class SubmitOutcome:
    __slots__ = ("error", "full_pool", "items")

    def __init__(
        self, items: list[tuple[int, bool]] | None, error: SubmitError | None, full_pool: int | None
    ):
        self.items = items
        self.error = error
        self.full_pool = full_pool  # pool index a "full" answer asks the submitter to wait on

    def __repr__(self) -> str:
        if self.error is not None:
            return f"error:{self.error.code}"
        return repr(self.items)


class Harness:
    def __init__(self, config: CoreConfig, *, full_scan_priority: bool = True) -> None:
        if not config.emit_transitions:
            raise ValueError("the shadow needs emit_transitions=True")
        self.config = config
        self.core = Core(config)
        self.core.publish = True
        self.shadow = Shadow(config, self.core, full_scan_priority=full_scan_priority)
        self.now = 0
        self.calls = 0
        self.listener: Listener | None = None  # sees every call (trace, verbose output)

    # ------------------------------------------------------------------------ plumbing

    def advance_to(self, t: int) -> None:
        if t < self.now:
            raise ValueError(f"time goes forward only ({t} < {self.now})")
        self.now = t

    def _begin(self, call: str) -> None:
        self.calls += 1
        self.shadow.begin(self.now, call)

    # ------------------------------------------------------------------------ inputs

    def submit(self, spec: TaskSpec, payload: object = None) -> tuple[SubmitOutcome, list[Any]]:
        self._begin("submit")
        pred = self.shadow.predict_submit([spec], batch=False)
        items: list[tuple[int, bool]] | None = None
        err: SubmitError | None = None
        try:
            items = [self.core.submit(self.now, spec.options(), payload, spec.key, spec.deadline)]
        except SubmitError as e:
            err = e
        actions = self.core.drain_actions()
        out = SubmitOutcome(items, err, pred.full_pool)
        # the listener sees the call before the shadow judges it (so traces include it)
        if self.listener is not None:
            self.listener("submit", (spec,), out, actions)
        self.shadow.after_submit([spec], pred, items, err, actions)
        self.shadow.check_counters()
        return out, actions

    def submit_batch(self, specs: Sequence[TaskSpec]) -> tuple[SubmitOutcome, list[Any]]:
        self._begin("submit_batch")
        pred = self.shadow.predict_submit(specs, batch=True)
        items: list[tuple[int, bool]] | None = None
        err: SubmitError | None = None
        try:
            items = self.core.submit_batch(self.now, [s.batch_item() for s in specs])
        except SubmitError as e:
            err = e
        actions = self.core.drain_actions()
        out = SubmitOutcome(items, err, pred.full_pool)
        if self.listener is not None:
            self.listener("submit_batch", tuple(specs), out, actions)
        self.shadow.after_submit(specs, pred, items, err, actions)
        self.shadow.check_counters()
        return out, actions

    def _report(
        self, kind: str, lease: int, cause: tuple[Any, ...], fn: Callable[[], bool]
    ) -> tuple[bool, list[Any]]:
        self._begin(kind)
        t = self.shadow.before_report(lease, cause)
        ok = fn()
        actions = self.core.drain_actions()
        if self.listener is not None:
            self.listener(kind, (lease, *cause[1:]), ok, actions)
        self.shadow.after_report(kind, lease, t, ok, actions)
        self.shadow.check_counters()
        return ok, actions

    def complete(self, lease: int, output: object = None) -> tuple[bool, list[Any]]:
        return self._report(
            "complete", lease, ("complete",), lambda: self.core.complete(self.now, lease, output)
        )

    def fail(
        self, lease: int, message: str, *, permanent: bool = False, retry_after: int | None = None
    ) -> tuple[bool, list[Any]]:
        cause = ("fail_perm", message) if permanent else ("fail_retry", message, retry_after)
        return self._report(
            "fail",
            lease,
            cause,
            lambda: self.core.fail(self.now, lease, message, permanent=permanent, retry_after=retry_after),
        )

    def heartbeat(self, lease: int) -> tuple[bool, list[Any]]:
        return self._report("heartbeat", lease, ("heartbeat",), lambda: self.core.heartbeat(self.now, lease))

    def cancel(self, ref: int | str) -> tuple[bool, list[Any]]:
        self._begin("cancel")
        t = self.shadow.before_cancel(ref)
        ok = self.core.cancel(self.now, ref)
        actions = self.core.drain_actions()
        if self.listener is not None:
            self.listener("cancel", (ref,), ok, actions)
        self.shadow.after_cancel(ref, t, ok, actions)
        self.shadow.check_counters()
        return ok, actions

    def set_capacity(self, pool: str, n: int) -> list[Any]:
        self._begin("set_capacity")
        self.core.set_capacity(self.now, pool, n)
        actions = self.core.drain_actions()
        if self.listener is not None:
            self.listener("set_capacity", (pool, n), None, actions)
        self.shadow.after_set_capacity(pool, n, actions)
        self.shadow.check_counters()
        return actions

    def tick(self) -> list[Any]:
        self._begin("tick")
        self.core.tick(self.now)
        actions = self.core.drain_actions()
        if self.listener is not None:
            self.listener("tick", (), None, actions)
        self.shadow.after_tick(actions)
        self.shadow.check_counters()
        return actions

    def lookup(self, ref: int | str) -> object:
        self._begin("lookup")
        found = self.core.lookup(self.now, ref)
        self.shadow.prune(self.now)
        self.shadow.after_lookup(ref, found)
        return found

    # ------------------------------------------------------------------------ checks

    def check_full(self) -> None:
        self.shadow.check_full()

    def check_snapshot(self) -> None:
        self.shadow.check_snapshot()
