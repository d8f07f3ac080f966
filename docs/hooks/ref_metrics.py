"""The metrics reference, read from what the code actually emits.

A real in-process :class:`cronoq.Scheduler` (one pool, one task run to completion) is started;
its snapshot is rendered by the server's ``/metrics`` renderer
(:func:`cronoq.server.metrics.render`) and every ``# HELP`` / ``# TYPE`` family with its label
names is listed; the same scheduler is instrumented with :func:`cronoq.otel.instrument` on a
real OpenTelemetry SDK ``MeterProvider`` with an in-memory reader, and every instrument
collected is listed with its unit and description. A series added to or removed from the code
changes the page at the next build.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Series:
    name: str
    kind: str
    labels: tuple[str, ...]
    help: str


@dataclass(frozen=True)
class Instrument:
    name: str
    kind: str
    unit: str
    description: str
    attributes: tuple[str, ...]


_SAMPLE_RE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^}]*)\})? ")


def parse_exposition(text: str) -> list[Series]:
    """Families of a Prometheus text exposition, with the label names seen on their samples."""
    helps: dict[str, str] = {}
    kinds: dict[str, str] = {}
    labels: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, h = line[7:].partition(" ")
            helps[name] = h
            labels.setdefault(name, [])
        elif line.startswith("# TYPE "):
            name, _, k = line[7:].partition(" ")
            kinds[name] = k
        elif line and not line.startswith("#"):
            m = _SAMPLE_RE.match(line)
            if not m:
                continue
            sample = m["name"]
            family = next((f for f in (sample, sample.removesuffix("_total")) if f in helps), sample)
            for pair in filter(None, (m["labels"] or "").split(",")):
                key = pair.split("=", 1)[0].strip()
                if key and key not in labels.setdefault(family, []):
                    labels[family].append(key)
    out = []
    for name, h in helps.items():
        names = sorted(labels.get(name, ()), key=lambda n: (n != "pool", n))
        out.append(Series(name, kinds.get(name, "untyped"), tuple(names), h))
    return out


async def _collect() -> tuple[bytes, list[Instrument]]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from cronoq import Pool, Resource, Scheduler
    from cronoq.otel import instrument
    from cronoq.server.metrics import render

    async def run(ctx: Any, payload: Any) -> str:
        return "ok"

    # one resource, so the per-resource series are rendered too
    async with Scheduler([Pool("default", run, min=1, max=2)], [Resource.semaphore("db", 2)]) as sched:
        await (await sched.submit(1, resources={"db": 1}))
        snap = await sched.snapshot()
        text = render(snap, {"default": 1}, leader=True)
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader])
        handle = instrument(sched, provider, trace_all=False)
        data = reader.get_metrics_data()
        if handle is not None:
            handle.close()
        provider.shutdown()
    instruments: list[Instrument] = []
    if data is not None:
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    attrs: list[str] = []
                    for point in getattr(m.data, "data_points", ()):
                        for k in point.attributes or {}:
                            if k not in attrs:
                                attrs.append(k)
                    kind = type(m.data).__name__.lower()
                    instruments.append(
                        Instrument(m.name, kind, m.unit or "", m.description or "", tuple(attrs))
                    )
    return text, instruments


def collect() -> tuple[list[Series], list[Instrument]]:
    text, instruments = asyncio.run(_collect())
    return parse_exposition(text.decode()), instruments


def _labels(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "-"


def render() -> str:
    series, instruments = collect()
    lines = [
        "### Prometheus (`/metrics`) {#prometheus}",
        "",
        "| series | type | labels | meaning |",
        "|---|---|---|---|",
    ]
    for s in series:
        lines.append(f"| `{s.name}` | {s.kind} | {_labels(s.labels)} | {s.help} |")
    lines += [
        "",
        "### OpenTelemetry instruments {#opentelemetry}",
        "",
        "| instrument | kind | unit | attributes | meaning |",
        "|---|---|---|---|---|",
    ]
    for i in instruments:
        lines.append(f"| `{i.name}` | {i.kind} | `{i.unit}` | {_labels(i.attributes)} | {i.description} |")
    lines.append("")
    return "\n".join(lines)
