"""The fan-out behind ``/v1/events`` (Server-Sent Events; docs/reference/http.md#conventions) and gRPC
``Watch``: one scheduler subscription shared by every open stream of a front end.

Theory of operation
-------------------
Many dashboards watching every transition would otherwise cost the server per event *and* per
stream (a push into each stream's buffer, a JSON encoding, a wake-up and an ASGI send each).
Instead an :class:`EventHub` holds one :class:`~cronoq.runtime.events.EventStream` of the
scheduler (created with the first stream, closed with the last, so the engine builds no events
while nobody watches) and a task that reads it a batch at a time: it waits for an event, takes
everything buffered, and encodes each event's frame once (:func:`event_frame`); the streams are
grouped by their filter, each group gets its frames joined into one chunk, and every
:class:`Subscriber` of the group gets that same ``bytes`` object appended to its pending chunks
and one wake-up.  After a delivery the hub lets events gather for ``flush_s`` before taking the
next batch (the first event after a quiet spell goes out at once), so a busy server makes at
most ``1/flush_s`` wake-ups and sends per stream and second, however many events there are.
Each stream's response task sends what is pending as one chunk.

The hub is generic in what it hands out: SSE encodes each event as its frame (``bytes``,
:func:`event_frame`) and joins a batch into one ``bytes`` chunk; gRPC ``Watch``
(``grpc_api.py``) encodes each event as one ``StatusEvent`` message, built once and shared by
every stream it goes to, and a batch is a list of them (``encode``, ``join`` and ``merge``).

Progress (docs/how-to/progress.md#event-streams).  Streams that ask for progress
(``/v1/events?progress=1``, ``WatchRequest.progress``) share a second hub over a
``sched.events(progress=True)`` subscription; its events are status events and
:class:`~cronoq.engine.progress.ProgressEvent` items (already rate-limited by the engine, 4 per
second per task), encoded by :func:`any_frame` (an ``event: progress`` frame for the latter) and
filtered by :func:`with_progress` (progress passes the stream's pool, id, key and tenant
filters whatever its ``all_transitions``).  Streams that do not ask stay on the first hub and
never see a progress event.

Semantics kept per stream (docs/reference/behaviour.md#lifecycle, docs/reference/http.md#conventions): a
stream sees only events published after it joined (:meth:`EventHub.join` first hands what the hub has buffered
to the streams already there); events in publication order; at most ``capacity`` events pending per stream
(the scheduler's ``event_capacity``) — a stream whose client does not keep up with more than that pending ends
with ``data_loss``, and so does every stream when the hub's own subscription lags (a burst of
more than ``capacity`` events at once); when the scheduler stops, each stream gets what was
published before, then ``unavailable``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final, Generic, TypeVar

from cronoq.engine.progress import ProgressEvent
from cronoq.runtime.events import EventStream, ProgressEventStream
from cronoq.server.app import ApiError

__all__ = ["EventHub", "Subscriber", "any_frame", "event_frame", "progress_frame", "with_progress"]

log = logging.getLogger("cronoq.server.http")

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_FRAME: Final = (
    b"event: status\ndata: "
    b'{"id":"%d","pool":%b,"key":%b,"status":%b,"attempt":%d,"at_unix_ns":%d,"message":%b,"at":%r}'
    b"\n\n"
)
_NAMES: dict[str, bytes] = {}  # pool and status names → their JSON (few)


def _name(s: str) -> bytes:
    b = _NAMES.get(s)
    if b is None:
        b = _ENCODER.encode(s).encode("utf-8")
        if len(_NAMES) < 4096:
            _NAMES[s] = b
    return b


def event_frame(ev: Any) -> bytes:
    """The SSE frame of a ``StatusEvent``: ``event: status`` and ``data:`` its JSON
    (docs/reference/http.md#conventions: the proto ``StatusEvent`` fields with the id as a string and the
    status as its lower-case name, plus ``at`` in Unix seconds; the same bytes as ``http_json.event_json``
    through ``json.dumps``, built directly: a float's JSON is its ``repr``)."""
    at = ev.at
    key = ev.key
    msg = ev.message
    return _FRAME % (
        ev.id,
        _name(ev.pool),
        _ENCODER.encode(key).encode("utf-8") if key else b'""',
        _name(ev.status),
        ev.attempt,
        round(at * 1e9),
        _ENCODER.encode(msg).encode("utf-8") if msg else b'""',
        at,
    )


def progress_frame(ev: ProgressEvent) -> bytes:
    """The SSE frame of a :class:`~cronoq.engine.progress.ProgressEvent`: ``event: progress`` and
    ``data:`` ``{id, pool, key, attempt, done, total, message, at}`` (id as a string, key and
    message ``""`` when none, total ``null`` when unknown, ``at`` Unix seconds)."""
    data = {
        "id": str(ev.id),
        "pool": ev.pool,
        "key": ev.key or "",
        "attempt": ev.attempt,
        "done": ev.done,
        "total": ev.total,
        "message": ev.message or "",
        "at": ev.at,
    }
    return b"event: progress\ndata: " + _ENCODER.encode(data).encode("utf-8") + b"\n\n"


def any_frame(ev: Any) -> bytes:
    """The SSE frame of a status or progress event (the encoder of a progress hub)."""
    return progress_frame(ev) if type(ev) is ProgressEvent else event_frame(ev)


def with_progress(
    keep_status: Callable[[Any], bool] | None, keep_progress: Callable[[Any], bool] | None
) -> Callable[[Any], bool] | None:
    """The filter of a stream that asked for progress: ``keep_status`` for status events,
    ``keep_progress`` (the same filter with every transition) for progress events; None when
    both pass everything."""
    if keep_status is None and keep_progress is None:
        return None

    def keep(ev: Any) -> bool:
        k = keep_progress if type(ev) is ProgressEvent else keep_status
        return k is None or k(ev)

    return keep


C = TypeVar("C")  # what a stream is handed: one chunk of encoded events


def _merge_bytes(chunks: list[bytes]) -> bytes:
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _join_bytes(frames: list[Any]) -> Any:
    return b"".join(frames)


def _wake(w: asyncio.Future[None]) -> None:
    if not w.done():
        w.set_result(None)


class Subscriber(Generic[C]):
    """One stream's side of the hub: pending chunks, and how it ended (``end``)."""

    __slots__ = ("chunks", "end", "gone", "group", "merge", "pending", "waiter")

    def __init__(self, group: Hashable, merge: Callable[[list[C]], C] = _merge_bytes) -> None:  # type: ignore[assignment]
        self.group = group
        self.merge = merge
        self.chunks: list[C] = []
        self.pending = 0  # events in ``chunks``
        self.end: ApiError | None = None  # set once: no more chunks after it
        self.gone = False  # the client went away
        self.waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def finish(self, err: ApiError, *, drop: bool = False) -> None:
        """No more events; ``drop``: discard what is pending too (``data_loss``)."""
        if self.end is None:
            self.end = err
            if drop:
                self.chunks = []
                self.pending = 0
            self.wake()

    def disconnect(self) -> None:
        self.gone = True
        self.wake()

    def take(self) -> C:
        """Everything pending as one chunk."""
        chunks = self.chunks
        self.chunks = []
        self.pending = 0
        return self.merge(chunks)

    async def wait(self, timeout: float) -> None:
        """Until something is pending, the stream ended or the client left, or ``timeout`` s."""
        if self.chunks or self.end is not None or self.gone:
            return
        loop = asyncio.get_running_loop()
        w = self.waiter = loop.create_future()
        timer = loop.call_later(timeout, _wake, w)
        try:
            await w
        finally:
            self.waiter = None
            timer.cancel()


class EventHub(Generic[C]):
    """One scheduler subscription fanned out to many streams (see the module docstring)."""

    def __init__(
        self,
        stream: EventStream | ProgressEventStream,
        capacity: int,
        flush_s: float,
        *,
        encode: Callable[[Any], Any] = event_frame,
        join: Callable[[list[Any]], C] = _join_bytes,
        merge: Callable[[list[C]], C] = _merge_bytes,  # type: ignore[assignment]
    ) -> None:
        self.stream = stream
        self.capacity = capacity
        self.flush_s = flush_s
        self.encode = encode  # one event -> what streams get of it (built once per event)
        self.join = join  # a batch of encoded events -> one chunk
        self.merge = merge  # a stream's pending chunks -> one
        #: filter group → (predicate or None for every event, its subscribers in join order)
        self.groups: dict[Hashable, tuple[Callable[[Any], bool] | None, dict[Subscriber[C], None]]] = {}
        self.closed = False
        self._lagged = 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    def subscribe(self, group: Hashable, keep: Callable[[Any], bool] | None) -> Subscriber[C]:
        """A new stream: it gets the events published from now on that ``keep`` passes (every
        event when None); streams of the same ``group`` must have the same filter."""
        self._collect()  # what is buffered is older than this stream: for the others only
        sub: Subscriber[C] = Subscriber(group, self.merge)
        entry = self.groups.get(group)
        if entry is None:
            entry = self.groups[group] = (keep, {})
        entry[1][sub] = None
        return sub

    def leave(self, sub: Subscriber[C]) -> None:
        entry = self.groups.get(sub.group)
        if entry is not None:
            entry[1].pop(sub, None)
            if not entry[1]:
                del self.groups[sub.group]
        if not self.groups:
            self.close()

    def close(self) -> None:
        """Unsubscribe from the scheduler (the last stream left)."""
        if not self.closed:
            self.closed = True
            self.stream.close()
            self._task.cancel()

    # -- the reader task ------------------------------------------------------------------------

    async def _run(self) -> None:
        stream = self.stream
        try:
            while not self.closed:
                batch = await stream.next_batch()
                if batch or stream.lagged != self._lagged:
                    self._deliver(batch)
                    await asyncio.sleep(self.flush_s)  # let the next events gather
                elif stream.closed:
                    break
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("event stream fan-out failed")
            self._end_all(ApiError("internal", "internal error in the event stream"), drop=False)
            return
        self._end_all(ApiError("unavailable", "the server is shutting down or not the leader"), drop=False)

    def _collect(self) -> None:
        if self.closed:
            return
        batch = self.stream.take()
        if batch or self.stream.lagged != self._lagged:
            self._deliver(batch)

    def _end_all(self, err: ApiError, *, drop: bool) -> None:
        self.closed = True
        self.stream.close()
        for _, subs in self.groups.values():
            for sub in subs:
                sub.finish(err, drop=drop)
        self.groups.clear()

    def _deliver(self, batch: Sequence[Any]) -> None:
        lagged = self.stream.lagged
        if lagged != self._lagged:
            lost = lagged - self._lagged
            self._lagged = lagged
            err = ApiError("data_loss", f"watch consumer too far behind ({lost} events lost)")
            for _, subs in self.groups.values():
                for sub in subs:
                    sub.finish(err, drop=True)
            self.groups.clear()  # they end; the hub goes on for streams that join later
            return
        frames: list[Any] | None = None  # every event encoded, when a group takes every event
        some: dict[int, Any] = {}  # position → encoded event, for filtered groups otherwise
        every: C | None = None
        cap = self.capacity
        encode, join = self.encode, self.join
        for group, (keep, subs) in list(self.groups.items()):
            if keep is None:
                if every is None:
                    if frames is None:
                        frames = [encode(ev) for ev in batch]
                    every = join(frames)
                chunk, n = every, len(batch)
            else:
                if frames is not None:
                    sel = [f for ev, f in zip(batch, frames, strict=True) if keep(ev)]
                else:  # encode only what some filter passes
                    sel = []
                    for i, ev in enumerate(batch):
                        if keep(ev):
                            f = some.get(i)
                            if f is None:
                                f = some[i] = encode(ev)
                            sel.append(f)
                if not sel:
                    continue
                chunk, n = join(sel), len(sel)
            for sub in tuple(subs):
                if sub.pending + n > cap:
                    lost = sub.pending + n
                    sub.finish(
                        ApiError("data_loss", f"watch consumer too far behind ({lost} events lost)"),
                        drop=True,
                    )
                    del subs[sub]
                    continue
                sub.chunks.append(chunk)
                sub.pending += n
                sub.wake()
            if not subs:
                del self.groups[group]
