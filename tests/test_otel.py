"""OpenTelemetry support (docs/reference/behaviour.md#metrics): metrics from the snapshot, trace propagation,
attempt spans."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from opentelemetry.util._once import Once

from cronoq import BlockingScheduler, Permanent, Pool, Priority, RetryPolicy, Scheduler, Task, otel

SAFETY = 10.0


async def echo(ctx: Any, payload: Any) -> Any:
    return {"tags": ctx.tags, "span": trace.get_current_span().get_span_context()}


def sync_echo(ctx: Any, payload: Any) -> Any:
    return {"tags": ctx.tags, "span": trace.get_current_span().get_span_context()}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """A fresh global tracer provider exporting to memory (reset afterwards)."""
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    old = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace.set_tracer_provider(provider)
    try:
        yield exp
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = old


def _pool(name: str = "default", executor: Any = echo, **kw: Any) -> Pool:
    kw.setdefault("autoscale", False)
    return Pool(name, executor, **kw)


def _attempt_spans(exp: InMemorySpanExporter) -> list[Any]:
    return [s for s in exp.get_finished_spans() if s.name.startswith("cronoq.attempt")]


# ---------------------------------------------------------------------- detection


def test_import_cronoq_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, cronoq\n"
        "from cronoq import Scheduler, Pool\n"
        "bad = [m for m in sys.modules if m == 'opentelemetry' or m.startswith('opentelemetry.')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_available() -> None:
    assert otel.available()
    assert otel.context_probe() is not None


# ---------------------------------------------------------------------- propagation


async def test_inject_without_span_leaves_tags_unchanged() -> None:
    tags = {"a": "1"}
    assert otel.inject(tags) is tags
    assert otel.inject(None) is None
    async with Scheduler([_pool()]) as sched:
        h = await sched.submit(1, tags={"a": "1"})
        out = await asyncio.wait_for(h, SAFETY)
        assert out["tags"] == {"a": "1"}
        h = await sched.submit(2)
        assert (await asyncio.wait_for(h, SAFETY))["tags"] == {}


async def test_inject_with_invalid_span_leaves_tags_unchanged() -> None:
    tags = {"a": "1"}
    with trace.use_span(trace.INVALID_SPAN):
        assert otel.inject(tags) is tags
        async with Scheduler([_pool()]) as sched:
            h = await sched.submit(1)
            assert (await asyncio.wait_for(h, SAFETY))["tags"] == {}


async def test_inject_adds_traceparent(exporter: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("parent") as parent:
        sc = parent.get_span_context()
        tags = otel.inject({"a": "1"})
        assert tags is not None
        assert tags["a"] == "1"
        assert tags["traceparent"] == f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}"
        assert "tracestate" not in tags  # only when the span has one
        explicit = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
        assert otel.inject(explicit) is explicit  # an explicit traceparent wins


async def _check_parented(exporter: InMemorySpanExporter, executor: Any, kind: str = "default") -> None:
    tracer = trace.get_tracer("test")
    async with Scheduler([_pool(executor=executor)]) as sched:
        with tracer.start_as_current_span("submitter") as parent:
            h = await sched.submit("x", kind=kind, tags={"user": "u"})
        out = await asyncio.wait_for(h, SAFETY)
        psc = parent.get_span_context()
        assert out["tags"]["user"] == "u"
        assert out["tags"]["traceparent"].split("-")[1] == f"{psc.trace_id:032x}"
        spans = _attempt_spans(exporter)
        assert len(spans) == 1
        span = spans[0]
        assert span.name == f"cronoq.attempt {kind}"
        assert span.context.trace_id == psc.trace_id
        assert span.parent is not None and span.parent.span_id == psc.span_id
        assert span.kind == trace.SpanKind.CONSUMER
        assert span.attributes["cronoq.task_id"] == h.id
        assert span.attributes["cronoq.attempt"] == 1
        assert span.attributes["cronoq.pool"] == "default"
        assert span.attributes["cronoq.kind"] == kind
        # the executor ran inside the attempt span
        assert out["span"].span_id == span.context.span_id
        # without a span: no traceparent, no attempt span (not instrumented)
        exporter.clear()
        h = await sched.submit("y", tags={"user": "u"})
        out = await asyncio.wait_for(h, SAFETY)
        assert out["tags"] == {"user": "u"}
        assert _attempt_spans(exporter) == []


async def test_attempt_span_continues_submitter_async(exporter: InMemorySpanExporter) -> None:
    await _check_parented(exporter, echo, kind="email")


async def test_attempt_span_continues_submitter_sync(exporter: InMemorySpanExporter) -> None:
    await _check_parented(exporter, sync_echo, kind="report")


def test_blocking_scheduler_propagates_the_calling_threads_span(exporter: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    with BlockingScheduler([_pool(executor=sync_echo)]) as bs:
        with tracer.start_as_current_span("submitter") as parent:
            h = bs.submit(1)
            hb = bs.submit_batch([Task(2)])
        h2 = bs.submit(3)
        psc = parent.get_span_context()
        assert h.result(SAFETY)["tags"]["traceparent"].split("-")[2] == f"{psc.span_id:016x}"
        assert hb[0].result(SAFETY)["tags"]["traceparent"].split("-")[2] == f"{psc.span_id:016x}"
        assert h2.result(SAFETY)["tags"] == {}
    spans = _attempt_spans(exporter)
    assert len(spans) == 2
    assert all(s.parent.span_id == psc.span_id for s in spans)


async def test_plain_submit_enqueue_and_batch_are_traced(exporter: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    seen: list[dict[str, str]] = []
    done = asyncio.Event()

    async def run(ctx: Any, payload: Any) -> None:
        seen.append(ctx.tags)
        if len(seen) == 5:
            done.set()

    async with Scheduler([_pool(executor=run)]) as sched:
        with tracer.start_as_current_span("submitter") as parent:
            await sched.submit(1)  # the no-fields fast path
            await sched.enqueue(2)
            await sched.enqueue(3, priority=Priority.HIGH)
            await sched.submit_batch([Task(4), Task(5, tags={"b": "2"})])
        await asyncio.wait_for(done.wait(), SAFETY)
        tid = f"{parent.get_span_context().trace_id:032x}"
        assert len(seen) == 5
        assert all(t["traceparent"].split("-")[1] == tid for t in seen)
        assert {"b": "2"}.items() <= next(t for t in seen if "b" in t).items()
        spans = _attempt_spans(exporter)
        assert len(spans) == 5
        assert {s.parent.span_id for s in spans} == {parent.get_span_context().span_id}
        # the shared cached options were not modified
        assert sched._opts.default.tags is None


async def test_attempt_span_records_failure(exporter: InMemorySpanExporter) -> None:
    async def boom(ctx: Any, payload: Any) -> None:
        raise Permanent("nope")

    tracer = trace.get_tracer("test")
    async with Scheduler([_pool(executor=boom, retry=RetryPolicy.none())]) as sched:
        with tracer.start_as_current_span("submitter"):
            h = await sched.submit(1)
        with pytest.raises(Exception, match="nope"):
            await asyncio.wait_for(h, SAFETY)
    (span,) = _attempt_spans(exporter)
    assert span.status.status_code == StatusCode.ERROR
    assert any(e.name == "exception" for e in span.events)


async def test_instrument_traces_every_attempt() -> None:
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    reader = InMemoryMetricReader()
    async with Scheduler([_pool(executor=sync_echo)]) as sched:
        inst = otel.instrument(sched, MeterProvider(metric_readers=[reader]), tracer_provider=provider)
        assert inst is not None
        out = await asyncio.wait_for(await sched.submit(1, key="k"), SAFETY)
        (span,) = _attempt_spans(exp)
        assert span.parent is None  # no submitter span: a new trace
        assert span.attributes["cronoq.key"] == "k"
        assert out["span"].span_id == span.context.span_id
        # a submitter span elsewhere (another provider) is still the parent
        with provider.get_tracer("t").start_as_current_span("submitter") as parent:
            h = await sched.submit(2)
        await asyncio.wait_for(h, SAFETY)
        spans = _attempt_spans(exp)
        assert len(spans) == 2
        assert spans[1].parent.span_id == parent.get_span_context().span_id
        inst.close()
        exp.clear()
        await asyncio.wait_for(await sched.submit(3), SAFETY)
        assert _attempt_spans(exp) == []


# ---------------------------------------------------------------------- metrics


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    data = reader.get_metrics_data()
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = [(dict(p.attributes or {}), p.value) for p in m.data.data_points]
    return out


def _value(points: dict[str, list[tuple[dict[str, Any], Any]]], name: str, **attrs: Any) -> Any:
    vals = [v for a, v in points[name] if a == attrs]
    assert len(vals) == 1, (name, attrs, points[name])
    return vals[0]


async def test_instruments_report_snapshot_figures() -> None:
    gate = asyncio.Event()

    async def hold(ctx: Any, payload: Any) -> Any:
        if payload == "hold":
            await gate.wait()
        return payload

    reader = InMemoryMetricReader()
    pools = [_pool("a", hold, initial=1, min=1, max=4), _pool("b", hold, initial=2, min=0, max=4)]
    async with Scheduler(pools) as sched:
        inst = otel.instrument(sched, MeterProvider(metric_readers=[reader]), trace_all=False)
        assert inst is not None
        for _ in range(3):
            await asyncio.wait_for(await sched.submit("ok", pool="b"), SAFETY)
        await sched.submit("hold", pool="a")
        for _ in range(20):
            await asyncio.sleep(0)
        await sched.enqueue("x", pool="a", priority=Priority.HIGH)
        await sched.enqueue("y", pool="a", priority=Priority.LOW)
        await sched.enqueue("z", pool="a", priority=Priority.LOW)
        for _ in range(20):
            await asyncio.sleep(0)
        pts = _points(reader)
        assert inst.refreshes == 1  # one snapshot for the whole collection
        snap = inst.last_snapshot
        assert snap is not None
        for p in snap.pools:
            for field in ("capacity", "desired", "busy", "held", "ready", "reservations"):
                assert _value(pts, f"cronoq.pool.{field}", pool=p.name) == getattr(p, field), field
            for field in ("utilization", "wait_p99", "run_p50", "window", "dispatched", "succeeded"):
                assert _value(pts, f"cronoq.pool.{field}", pool=p.name) == getattr(p, field), field
            assert _value(pts, "cronoq.pool.worker_seconds", pool=p.name) == p.worker_seconds
            for cls, n in zip(("critical", "high", "normal", "low"), p.pending_by_class):
                assert _value(pts, "cronoq.pool.pending", pool=p.name, **{"class": cls}) == n
            assert sum(v for a, v in pts["cronoq.pool.pending"] if a["pool"] == p.name) == p.pending
        a = snap.pool("a")
        assert a is not None and a.busy == 1 and a.pending_by_class == [0, 1, 0, 2]
        assert _value(pts, "cronoq.pool.succeeded", pool="b") == 3
        for name in ("submitted", "succeeded", "dispatched", "failed", "cancelled"):
            assert _value(pts, f"cronoq.tasks.{name}") == snap.totals[name], name
        assert _value(pts, "cronoq.tasks.submitted") == 7
        assert _value(pts, "cronoq.tasks.live") == snap.live_tasks == 4
        assert _value(pts, "cronoq.tasks.running") == snap.running == 1
        assert _value(pts, "cronoq.tasks.pending") == snap.pending == 3
        assert _value(pts, "cronoq.pool.cost", pool="a") == a.cost
        assert await sched.snapshot() is not snap
        # the next collection takes one new snapshot
        gate.set()
        _points(reader)
        assert inst.refreshes == 2
        inst.close()
        assert _points_or_empty(reader) == {}


def _points_or_empty(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    if data is None:
        return {}
    return {k: v for k, v in _points(reader).items() if v}


async def test_collection_from_another_thread() -> None:
    reader = InMemoryMetricReader()
    async with Scheduler([_pool(initial=3, max=4)]) as sched:
        otel.instrument(sched, MeterProvider(metric_readers=[reader]), trace_all=False)
        await asyncio.wait_for(await sched.submit(1), SAFETY)
        result: dict[str, Any] = {}

        def collect() -> None:
            result.update(_points(reader))
            result["thread"] = threading.get_ident()

        t = threading.Thread(target=collect)
        t.start()
        while t.is_alive():  # keep the loop turning: the snapshot is taken on it
            await asyncio.sleep(0.001)
        t.join()
        assert result["thread"] != threading.get_ident()
        assert _value(result, "cronoq.tasks.succeeded") == 1
        assert _value(result, "cronoq.pool.capacity", pool="default") == 3


async def test_instruments_before_start_and_after_shutdown_report_nothing() -> None:
    reader = InMemoryMetricReader()
    sched = Scheduler([_pool()])
    otel.instrument(sched, MeterProvider(metric_readers=[reader]), trace_all=False)
    assert _points_or_empty(reader) == {}
    await sched.start()
    assert _value(_points(reader), "cronoq.tasks.submitted") == 0
    await sched.shutdown()
    assert _points_or_empty(reader) == {}


# ---------------------------------------------------------------------- opentelemetry absent


@pytest.fixture
def no_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel, "_AVAILABLE", False)


async def test_works_without_opentelemetry(no_otel: None, exporter: InMemorySpanExporter) -> None:
    assert not otel.available()
    assert otel.context_probe() is None
    assert otel.trace_tags() is None
    tags = {"a": "1"}
    tracer = trace.get_tracer("test")
    async with Scheduler([_pool(), _pool("s", sync_echo)]) as sched:
        assert sched._otel_probe is None
        assert otel.instrument(sched, MeterProvider(metric_readers=[InMemoryMetricReader()])) is None
        with tracer.start_as_current_span("submitter"):
            assert otel.inject(tags) is tags
            with otel.attempt_span(tags, "x") as span:
                assert span is None
            h1 = await sched.submit(1, tags=tags)
            h2 = await sched.submit(2, pool="s")
            hb = await sched.submit_batch([Task(3)])
            # a traceparent in the tags is carried, but no span is made
            h3 = await sched.submit(4, tags={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
        assert (await asyncio.wait_for(h1, SAFETY))["tags"] == {"a": "1"}
        assert (await asyncio.wait_for(h2, SAFETY))["tags"] == {}
        assert (await asyncio.wait_for(hb[0], SAFETY))["tags"] == {}
        assert "traceparent" in (await asyncio.wait_for(h3, SAFETY))["tags"]
    assert _attempt_spans(exporter) == []
