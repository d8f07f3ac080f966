"""gRPC ``Watch`` streams: one shared fan-out, and stream budgets (docs/reference/grpc.md#services,
docs/reference/behaviour.md#server-details).

Theory of operation
-------------------
Every ``Watch`` used to hold its own scheduler subscription: the engine pushed each event
into every stream's buffer, and each stream converted it to a protobuf message and woke up on
its own — 1,500 streams of one token made 200 submissions take 93 s instead of 1 s.  Now the
streams of the gRPC front end share one :class:`~cronoq.server.sse.EventHub` (the same
fan-out as ``/v1/events``): each event becomes one ``StatusEvent`` message, built once and
handed to every stream whose filter passes it (streams with the same filter share the
batch), at most every :data:`FLUSH_S` while events keep coming; a stream with more than the
scheduler's ``event_capacity`` pending ends with DATA_LOSS, as before.

Budgets.  ``limits.max_concurrent_streams`` bounds the Watch streams of the gRPC listener and
``limits.max_streams_per_principal`` those of one token (or, without auth, of everyone
together); past either, Watch answers RESOURCE_EXHAUSTED at once.  Worker sessions have a
budget of their own (``limits.max_worker_sessions``, ``grpc_workers.py``), and the gRPC
server's global call limit is the sum of the three budgets, so clients can never take the
room workers need.

Progress.  A Watch with ``progress`` set joins a second hub over a subscription with progress
events (``sched.events(progress=True)``, ``sse.py``): each progress event becomes a
``StatusEvent`` with ``progress`` set (``convert.progress_update``).  The budgets count both
kinds of streams together.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Final

from cronoq.engine.progress import ProgressEvent
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server import convert
from cronoq.server.app import ApiError, ServerApp
from cronoq.server.auth import Principal
from cronoq.server.sse import EventHub, Subscriber

__all__ = ["FLUSH_S", "WatchFanout"]

#: after handing events out, the next ones gather this long (one wake-up per stream per flush)
FLUSH_S: Final = 0.01


def _encode_any(ev: Any) -> pb.StatusEvent:
    return convert.progress_update(ev) if type(ev) is ProgressEvent else convert.status_event(ev)


def _flatten(chunks: list[list[pb.StatusEvent]]) -> list[pb.StatusEvent]:
    return chunks[0] if len(chunks) == 1 else [m for c in chunks for m in c]


class WatchFanout:
    """The gRPC front end's Watch streams over one shared subscription (module docstring)."""

    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.hub: EventHub[list[pb.StatusEvent]] | None = None
        self.phub: EventHub[list[pb.StatusEvent]] | None = None  # the streams that asked for progress
        self.open = 0
        self.by_principal: dict[str, int] = {}

    @staticmethod
    def _who(principal: Principal | None) -> str:
        return "" if principal is None else principal.name

    def subscribe(
        self,
        principal: Principal | None,
        group: Hashable,
        keep: Callable[[Any], bool] | None,
        progress: bool = False,
    ) -> tuple[EventHub[list[pb.StatusEvent]], Subscriber[list[pb.StatusEvent]]]:
        """A new stream (counted until :meth:`leave`); RESOURCE_EXHAUSTED past a budget."""
        lim = self.app.limits
        if self.open >= lim.max_concurrent_streams:
            raise ApiError(
                "resource_exhausted",
                "too many concurrent watch streams "
                f"(limits.max_concurrent_streams {lim.max_concurrent_streams})",
            )
        who = self._who(principal)
        if self.by_principal.get(who, 0) >= lim.max_streams_per_principal:
            raise ApiError(
                "resource_exhausted",
                "too many concurrent watch streams for this token "
                f"(limits.max_streams_per_principal {lim.max_streams_per_principal})",
            )
        sched = self.app.require_leader()
        if progress:
            hub = self.phub
            if hub is None or hub.closed or hub.stream.closed:
                hub = self.phub = EventHub(
                    sched.events(progress=True),
                    sched.seam.event_capacity,
                    FLUSH_S,
                    encode=_encode_any,
                    join=list,
                    merge=_flatten,
                )
            return self._joined(principal, hub, hub.subscribe(group, keep))
        hub = self.hub
        if hub is None or hub.closed or hub.stream.closed:
            hub = self.hub = EventHub(
                self.app.events(),
                sched.seam.event_capacity,
                FLUSH_S,
                encode=convert.status_event,
                join=list,
                merge=_flatten,
            )
        return self._joined(principal, hub, hub.subscribe(group, keep))

    def _joined(
        self,
        principal: Principal | None,
        hub: EventHub[list[pb.StatusEvent]],
        sub: Subscriber[list[pb.StatusEvent]],
    ) -> tuple[EventHub[list[pb.StatusEvent]], Subscriber[list[pb.StatusEvent]]]:
        who = self._who(principal)
        self.open += 1
        self.by_principal[who] = self.by_principal.get(who, 0) + 1
        return hub, sub

    def leave(
        self,
        principal: Principal | None,
        hub: EventHub[list[pb.StatusEvent]],
        sub: Subscriber[list[pb.StatusEvent]],
    ) -> None:
        hub.leave(sub)
        self.open -= 1
        who = self._who(principal)
        n = self.by_principal.get(who, 0) - 1
        if n > 0:
            self.by_principal[who] = n
        else:
            self.by_principal.pop(who, None)
