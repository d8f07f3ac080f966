"""Every public name of docs/reference/behaviour.md#python-api that exists today is importable from
``cronoq``."""

from __future__ import annotations

import importlib
import inspect

import cronoq

# Names of docs/reference/behaviour.md#python-api implemented in the in-process runtime today (stores,
# resources, codecs and BlockingScheduler arrive later and are deliberately not listed).
PUBLIC = [
    "Scheduler",
    "Pool",
    "Task",
    "Dep",
    "Priority",
    "RetryPolicy",
    "AutoscaleConfig",
    "TaskContext",
    "TaskHandle",
    "EventStream",
    "StatusEvent",
    "Snapshot",
    "PoolSnapshot",
    "GroupSnapshot",
    "CronoqError",
    "SubmitError",
    "SchedulerError",
    "TaskFailed",
    "EventsLagged",
    "Retryable",
    "Permanent",
]
ERRORS = [
    "CronoqError",
    "SubmitError",
    "SchedulerError",
    "TaskFailed",
    "EventsLagged",
    "Retryable",
    "Permanent",
]


def test_top_level_names():
    for name in PUBLIC:
        assert hasattr(cronoq, name), name
        assert name in cronoq.__all__, name


def test_star_import():
    ns: dict = {}
    exec("from cronoq import *", ns)
    for name in PUBLIC:
        assert name in ns, name


def test_errors_module():
    errors = importlib.import_module("cronoq.errors")
    for name in ERRORS:
        obj = getattr(errors, name)
        assert inspect.isclass(obj) and issubclass(obj, Exception)
        assert issubclass(obj, errors.CronoqError)


def test_scheduler_methods_are_async_except_events():
    s = cronoq.Scheduler
    for name in (
        "submit",
        "enqueue",
        "submit_batch",
        "cancel",
        "status",
        "handle",
        "snapshot",
        "set_capacity",
        "shutdown",
        "start",
    ):
        assert inspect.iscoroutinefunction(getattr(s, name)), name
    assert not inspect.iscoroutinefunction(s.events)


def test_scheduler_signature_defaults():
    sig = inspect.signature(cronoq.Scheduler)
    p = sig.parameters
    assert list(p)[:3] == ["pools", "resources", "emit_transitions"]
    assert p["resources"].default is None
    assert p["emit_transitions"].default is False
    assert p["shutdown_grace"].default == 5.0 and p["shutdown_grace"].kind is inspect.Parameter.KEYWORD_ONLY
    assert p["event_capacity"].default == 1024 and p["event_capacity"].kind is inspect.Parameter.KEYWORD_ONLY
    assert p["store"].default is None and p["codec"].default is None


def test_pool_signature_defaults():
    p = inspect.signature(cronoq.Pool).parameters
    assert list(p)[:2] == ["name", "executor"]
    expected = {
        "min": 1,
        "max": 10,
        "initial": None,
        "autoscale": None,
        "lease_ttl": None,
        "max_pending": None,
        "overflow": "wait",
        "retry": None,
        "unknown_dependency": "reject",
        "await_timeout": None,
        "default_duration": 1.0,
        "reservable_fraction": 0.5,
        "tenant_weights": None,
        "fair_share": False,
    }
    for name, default in expected.items():
        assert p[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert p[name].default == default, name


def test_shutdown_default_grace():
    assert inspect.signature(cronoq.Scheduler.shutdown).parameters["grace"].default == 5.0


def test_events_default_on_lag():
    assert inspect.signature(cronoq.Scheduler.events).parameters["on_lag"].default == "skip"
