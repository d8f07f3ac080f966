"""OpenTelemetry support (docs/reference/behaviour.md#metrics): metrics, trace propagation and attempt spans.

Everything here is optional.  ``opentelemetry-api`` (the ``otel`` extra) is *detected*, never
required: :func:`available` looks for the package once per process without importing it, and
``import cronoq`` never imports opentelemetry.  Without it every function below is a no-op.

Trace propagation
    :func:`inject` adds ``traceparent``/``tracestate`` (W3C TraceContext) for the submitter's
    current span to a task's tags: only a *valid* current span, and never over a
    ``traceparent`` the caller put in the tags itself (an explicit one wins, e.g. a server
    relaying a remote client's context).  The scheduler calls it on ``submit``/``enqueue``/
    ``submit_batch`` only when something is in the OpenTelemetry context (one ``ContextVar``
    read per submission, see :func:`context_probe`); the shared, cached ``TaskOptions`` are
    copied with the merged tags only then.

Attempt spans
    An attempt of a task whose tags carry a ``traceparent`` runs in a span
    ``cronoq.attempt <kind>`` (kind CONSUMER) that continues the extracted context (same
    trace, the submitter's span as parent); after :func:`instrument` (``trace_all=True``) every
    attempt does (a root span when the task carries no context).  Attributes:
    ``cronoq.task_id``, ``cronoq.attempt``, ``cronoq.pool``, ``cronoq.kind`` (and
    ``cronoq.key`` when set).  An exception the executor raises (including an abort's
    cancellation) is recorded on the span with status ERROR.  A synchronous executor's span is
    opened in its worker thread; if it returns an awaitable, that runs after the span ended.

Metrics
    :func:`instrument` registers observable instruments on a meter that report the figures of
    :meth:`Scheduler.snapshot`: per pool (attribute ``pool``) gauges ``cronoq.pool.<field>``
    (``cronoq.pool.pending`` per priority class, attribute ``class``; worker groups as
    ``cronoq.pool.group.capacity``/``busy`` with attribute ``group``), the since-start
    ``worker_seconds``/``cost`` as counters, engine-wide gauges ``cronoq.tasks.live``/
    ``running``/``pending`` and one counter ``cronoq.tasks.<name>`` per ``totals`` entry.
    The callbacks share one cached snapshot that is taken at most once per collection (again
    only when an instrument that already reported asks a second time); a reader on another
    thread (e.g. a periodic exporter) gets it through the scheduler's loop.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from cronoq.engine.model import CLASS_NAMES  # pending_by_class order (Priority.value)

if TYPE_CHECKING:
    from cronoq.engine.model import TaskOptions
    from cronoq.engine.snapshot import Snapshot
    from cronoq.runtime.context import TaskContext
    from cronoq.runtime.scheduler import Scheduler

_log = logging.getLogger("cronoq.otel")

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

_AVAILABLE: bool | None = None  # detection result (None: not looked yet); tests may set it
_api: Any = None  # the loaded opentelemetry modules (see _load)


def available() -> bool:
    """True when ``opentelemetry-api`` is installed (looked up once; nothing is imported)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            _AVAILABLE = importlib.util.find_spec("opentelemetry") is not None
        except (ImportError, ValueError):  # pragma: no cover - broken environments
            _AVAILABLE = False
        if _AVAILABLE:
            try:
                _load()
            except ImportError:  # a namespace package without the api distribution
                _AVAILABLE = False
    return _AVAILABLE


class _Api:
    """The opentelemetry names we use, imported on first need."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.context = context
        self.trace = trace
        self.propagator = TraceContextTextMapPropagator()
        self.empty = context.Context()
        self._provider: Any = None
        self._tracer: Any = None

    def tracer(self) -> Any:
        """The global provider's cronoq tracer (re-fetched when the global provider changes)."""
        provider = self.trace.get_tracer_provider()
        if provider is not self._provider:
            self._tracer = _tracer_from(provider)
            self._provider = provider
        return self._tracer


def _load() -> _Api:
    global _api
    if _api is None:
        _api = _Api()
    return _api


def _tracer_from(provider: Any) -> Any:
    from cronoq import __version__

    return provider.get_tracer("cronoq", __version__)


# ---------------------------------------------------------------------- propagation


def context_probe() -> Callable[[], object] | None:
    """A cheap callable that is truthy-valued when the OpenTelemetry context is not empty.

    None without opentelemetry (the scheduler then skips every trace hook at the cost of one
    ``is None`` test).  With the default contextvars runtime context it is that ``ContextVar``'s
    bound ``get``: the current ``Context`` is an empty dict unless a span (or baggage, ...) is
    attached, so a submission outside any span costs one ``ContextVar.get``.
    """
    if not available():
        return None
    api = _load()
    rc = getattr(api.context, "_RUNTIME_CONTEXT", None)
    cv = getattr(rc, "_current_context", None)
    get = getattr(cv, "get", None)
    if get is not None:
        try:
            get()
        except Exception:  # pragma: no cover - not the ContextVar we expect
            get = None
    return get if get is not None else api.context.get_current


def trace_tags() -> dict[str, str] | None:
    """``{"traceparent": ..., "tracestate": ...}`` of the current span, or None.

    None without opentelemetry, without a current span or when its span context is invalid
    (e.g. a non-recording default span).  ``tracestate`` only when the span has one.
    """
    if not available():
        return None
    api = _load()
    span_context = api.trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    carrier: dict[str, str] = {}
    api.propagator.inject(carrier)
    return carrier or None


def merge_tags(tags: dict[str, str] | None, extra: Mapping[str, str] | None) -> dict[str, str] | None:
    """``tags`` with the trace fields of ``extra`` added, or ``tags`` itself (unchanged).

    An explicit ``traceparent`` already in ``tags`` wins: then nothing is added.
    """
    if not extra or (tags and TRACEPARENT in tags):
        return tags
    return {**tags, **extra} if tags else dict(extra)


def inject(tags: dict[str, str] | None) -> dict[str, str] | None:
    """``tags`` plus ``traceparent``/``tracestate`` of the current span (docs/reference/behaviour.md#metrics).

    Returns ``tags`` itself (unchanged, not copied) when opentelemetry is absent, when there is
    no valid current span, or when ``tags`` already has a ``traceparent``; otherwise a new dict.
    """
    return merge_tags(tags, trace_tags())


def with_tags(opts: TaskOptions, tags: dict[str, str] | None) -> TaskOptions:
    """A copy of (shared, cached) ``opts`` with other tags; resolved pool fields are kept."""
    cls = type(opts)
    new = cls.__new__(cls)
    for name in cls.__slots__:
        setattr(new, name, getattr(opts, name))
    new.tags = tags
    return new


def traced_options(opts: TaskOptions, extra: Mapping[str, str] | None = None) -> TaskOptions:
    """``opts`` with the current span's trace tags (``extra`` if given), or ``opts`` itself."""
    if extra is None:
        extra = trace_tags()
    tags = merge_tags(opts.tags, extra)
    return opts if tags is opts.tags else with_tags(opts, tags)


# ---------------------------------------------------------------------- attempt spans


@contextlib.contextmanager
def attempt_span(
    tags: Mapping[str, str] | None,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    tracer: Any = None,
) -> Iterator[Any]:
    """Run the body in a current span ``name`` that continues the context carried in ``tags``.

    The parent is extracted from ``tags`` (``traceparent``/``tracestate``) on an *empty* base
    context: a task without one starts a new trace, never a child of whatever span happens to
    be current where the attempt starts.  Yields the span (None without opentelemetry).
    """
    if not available():
        yield None
        return
    api = _load()
    parent = api.propagator.extract(tags or {}, context=api.empty)
    tr = tracer if tracer is not None else api.tracer()
    with tr.start_as_current_span(
        name,
        context=parent,
        kind=api.trace.SpanKind.CONSUMER,
        attributes=dict(attributes) if attributes else None,
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        yield span


def attempt_attributes(ctx: TaskContext) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "cronoq.task_id": ctx.id,
        "cronoq.attempt": ctx.attempt,
        "cronoq.pool": ctx.pool,
        "cronoq.kind": ctx.kind,
    }
    key = ctx.key
    if key is not None:
        attrs["cronoq.key"] = key
    return attrs


def traced_executor(
    executor: Callable[..., Any], ctx: TaskContext, is_async: bool, tracer: Any = None
) -> Callable[..., Any]:
    """``executor`` wrapped to run one attempt inside its :func:`attempt_span`."""
    tags = ctx.tags
    name = f"cronoq.attempt {ctx.kind}"
    attrs = attempt_attributes(ctx)
    if is_async:

        async def run_async(c: Any, payload: Any) -> Any:
            with attempt_span(tags, name, attrs, tracer):
                return await executor(c, payload)

        return run_async

    def run_sync(c: Any, payload: Any) -> Any:
        with attempt_span(tags, name, attrs, tracer):
            return executor(c, payload)

    return run_sync


# ---------------------------------------------------------------------- metrics

# PoolSnapshot fields reported as gauges: (field, unit, description)
_POOL_GAUGES = (
    ("capacity", "{slot}", "worker slots"),
    ("desired", "{slot}", "capacity the autoscaler wants"),
    ("busy", "{slot}", "slots running an attempt"),
    ("held", "{slot}", "slots held for fixed-start tasks"),
    ("ready", "{task}", "tasks ready to run"),
    ("reservations", "{task}", "fixed-start tasks not yet started"),
    ("utilization", "1", "busy slot-time / available slot-time over the window"),
    ("schedule_efficiency", "1", "useful run time / provisioned slot-time over the window"),
    ("priority_adherence", "1", "dispatches that respected priority over the window"),
    ("fixed_start_hit_rate", "1", "fixed-start tasks started within tolerance over the window"),
    ("wait_mean", "s", "ready -> running wait, mean over the window"),
    ("wait_p50", "s", "ready -> running wait, p50 over the window"),
    ("wait_p90", "s", "ready -> running wait, p90 over the window"),
    ("wait_p99", "s", "ready -> running wait, p99 over the window"),
    ("run_p50", "s", "attempt run time, p50 over the window"),
    ("run_p99", "s", "attempt run time, p99 over the window"),
    ("dispatched", "{attempt}", "attempts dispatched over the window"),
    ("succeeded", "{attempt}", "attempts succeeded over the window"),
    ("failed", "{attempt}", "attempts failed over the window (incl. retried)"),
    ("retried", "{attempt}", "attempts retried over the window"),
    ("window", "s", "length of the metrics window"),
)
# PoolSnapshot fields that only grow: counters
_POOL_COUNTERS = (
    ("worker_seconds", "s", "provisioned worker time since start"),
    ("cost", "1", "cost since start"),
)
_TASK_GAUGES = (
    ("live", "live_tasks", "non-terminal tasks"),
    ("running", "running", "running attempts"),
    ("pending", "pending", "tasks not yet running"),
)


class _SnapshotCache:
    """One snapshot shared by all callbacks of a collection (taken at most once per collection).

    A collection calls every instrument's callback once; a callback asking again means a new
    collection began, so the snapshot is refreshed then (and the record of who read it reset).
    """

    def __init__(self, sched: Scheduler) -> None:
        self._sched = sched
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._have = False
        self._seen: set[str] = set()
        self.closed = False
        self.refreshes = 0

    def get(self, who: str, timeout: float) -> Snapshot | None:
        if self.closed:
            return None
        with self._lock:
            if not self._have or who in self._seen:
                self._refresh(timeout)
            self._seen.add(who)
            return self._snap

    def _refresh(self, timeout: float) -> None:
        self._seen = set()
        self._have = True
        self.refreshes += 1
        sched = self._sched
        seam = sched.seam
        loop = seam.loop
        if not sched.started or loop is None or loop.is_closed():
            self._snap = None
            return
        if seam.on_loop_thread():
            self._snap = seam.snapshot_now()
            return
        # another thread (a periodic exporter): the core is only touched on its loop
        fut: concurrent.futures.Future[Snapshot | None] = concurrent.futures.Future()

        def take() -> None:
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(seam.snapshot_now())
                except BaseException as exc:  # pragma: no cover - defensive
                    fut.set_exception(exc)

        try:
            loop.call_soon_threadsafe(take)
            self._snap = fut.result(timeout)
        except RuntimeError:  # the loop closed meanwhile
            self._snap = None
        except concurrent.futures.TimeoutError:
            fut.cancel()
            _log.debug("cronoq snapshot for OpenTelemetry timed out; reporting the previous one")


class Instrumentation:
    """What :func:`instrument` registered; :meth:`close` makes the callbacks report nothing."""

    def __init__(self, sched: Scheduler, cache: _SnapshotCache, instruments: list[Any]) -> None:
        self.scheduler = sched
        self.instruments = instruments
        self._cache = cache

    @property
    def refreshes(self) -> int:
        """How many snapshots the callbacks took so far."""
        return self._cache.refreshes

    @property
    def last_snapshot(self) -> Snapshot | None:
        """The snapshot the last collection reported (None before one, or when not running)."""
        return self._cache._snap

    def close(self) -> None:
        self._cache.closed = True
        seam = self.scheduler.seam
        seam.trace_all = False
        seam.tracer = None


def instrument(
    scheduler: Scheduler,
    meter_provider: Any = None,
    *,
    tracer_provider: Any = None,
    trace_all: bool = True,
    timeout: float = 5.0,
) -> Instrumentation | None:
    """Report ``scheduler``'s snapshot figures as OpenTelemetry metrics (docs/reference/behaviour.md#metrics).

    ``meter_provider``/``tracer_provider`` default to the global ones.  With ``trace_all``
    every attempt runs in a span (root spans for tasks that carry no trace context), made by
    ``tracer_provider``'s tracer.  ``timeout`` caps (s) how long a collection on another thread
    waits for the scheduler's loop.  Returns None (a no-op) without opentelemetry.
    """
    if not available():
        return None
    from opentelemetry import metrics

    from cronoq import __version__

    if meter_provider is None:
        meter = metrics.get_meter("cronoq", __version__)
    else:
        meter = meter_provider.get_meter("cronoq", __version__)
    cache = _SnapshotCache(scheduler)
    instruments = _register(meter, _Observers(cache, timeout, metrics.Observation))
    _trace_attempts(scheduler, tracer_provider, trace_all)
    return Instrumentation(scheduler, cache, instruments)


class _Observers:
    """The callbacks of the observable instruments: each reads the shared snapshot of ``cache``
    (waiting at most ``timeout`` s, or the collection's own timeout when that is shorter) and
    turns the figures it reports into observations."""

    def __init__(self, cache: _SnapshotCache, timeout: float, observation: Any) -> None:
        self.cache = cache
        self.timeout = timeout
        self.observation = observation

    def snapshot(self, name: str, options: Any) -> Snapshot | None:
        ms = getattr(options, "timeout_millis", None)
        return self.cache.get(name, self.timeout if not ms else min(self.timeout, ms / 1000.0))

    def pool_field(self, name: str, field: str) -> Callable[[Any], list[Any]]:
        def cb(options: Any) -> list[Any]:
            snap = self.snapshot(name, options)
            if snap is None:
                return []
            return [self.observation(getattr(p, field), {"pool": p.name}) for p in snap.pools]

        return cb

    def pool_pending(self, options: Any) -> list[Any]:
        snap = self.snapshot("cronoq.pool.pending", options)
        if snap is None:
            return []
        return [
            self.observation(n, {"pool": p.name, "class": cls})
            for p in snap.pools
            for cls, n in zip(CLASS_NAMES, p.pending_by_class)
        ]

    def group_field(self, name: str, field: str) -> Callable[[Any], list[Any]]:
        def cb(options: Any) -> list[Any]:
            snap = self.snapshot(name, options)
            if snap is None:
                return []
            return [
                self.observation(getattr(g, field), {"pool": p.name, "group": _group_name(g.labels)})
                for p in snap.pools
                for g in p.groups
            ]

        return cb

    def task_field(self, name: str, field: str) -> Callable[[Any], list[Any]]:
        def cb(options: Any) -> list[Any]:
            snap = self.snapshot(name, options)
            return [] if snap is None else [self.observation(getattr(snap, field))]

        return cb

    def total(self, name: str, key: str) -> Callable[[Any], list[Any]]:
        def cb(options: Any) -> list[Any]:
            snap = self.snapshot(name, options)
            return [] if snap is None else [self.observation(snap.totals.get(key, 0))]

        return cb


def _register(meter: Any, obs: _Observers) -> list[Any]:
    """Create every observable instrument of the module doc on ``meter``, reading from ``obs``."""
    from cronoq.engine.snapshot import TOTAL_NAMES

    gauge, counter = meter.create_observable_gauge, meter.create_observable_counter
    instruments: list[Any] = []
    for field, unit, desc in _POOL_GAUGES:
        name = f"cronoq.pool.{field}"
        instruments.append(gauge(name, [obs.pool_field(name, field)], unit, desc))
    instruments.append(
        gauge("cronoq.pool.pending", [obs.pool_pending], "{task}", "tasks not yet running, by priority class")
    )
    for field, unit, desc in _POOL_COUNTERS:
        name = f"cronoq.pool.{field}"
        instruments.append(counter(name, [obs.pool_field(name, field)], unit, desc))
    for field, desc in (("capacity", "worker slots of the group"), ("busy", "busy slots of the group")):
        name = f"cronoq.pool.group.{field}"
        instruments.append(gauge(name, [obs.group_field(name, field)], "{slot}", desc))
    for short, field, desc in _TASK_GAUGES:
        name = f"cronoq.tasks.{short}"
        instruments.append(gauge(name, [obs.task_field(name, field)], "{task}", desc))
    for key in TOTAL_NAMES:
        name = f"cronoq.tasks.{key}"
        instruments.append(counter(name, [obs.total(name, key)], "1", f"totals.{key} since start"))
    return instruments


def _trace_attempts(scheduler: Scheduler, tracer_provider: Any, trace_all: bool) -> None:
    """With ``trace_all`` every attempt runs in a span; the tracer is ``tracer_provider``'s (None:
    the global one, looked up per span)."""
    seam = scheduler.seam
    if trace_all:
        seam.tracer = _tracer_from(tracer_provider) if tracer_provider is not None else None
        seam.trace_all = True
    elif tracer_provider is not None:
        seam.tracer = _tracer_from(tracer_provider)


def _group_name(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


__all__ = [
    "Instrumentation",
    "attempt_span",
    "available",
    "context_probe",
    "inject",
    "instrument",
    "trace_tags",
    "traced_executor",
    "traced_options",
]
