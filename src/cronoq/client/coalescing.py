"""Coalesced submissions: concurrent ``Client.submit()`` calls become one ``SubmitMany`` call.

Theory of operation
-------------------
A unary gRPC call costs the server far more than the task it carries (framing, HTTP/2
streams, a handler task, a response). When an application submits from many coroutines at once
(a web server handling requests, a fan-out loop with ``gather``), the submissions that arrive
while the event loop is busy are sent together: the first one of a loop turn schedules a flush
with ``call_soon``, every other one of the same turn joins it, and the flush sends them as one
``SubmitMany`` (at most :data:`MAX_ITEMS` per call). Nothing waits on a timer, so a lone submit
goes out on the next loop turn, as a plain ``Submit``, made by its caller's own coroutine: the
flush answers a lone item's future with ``None`` ("send it yourself"), so a lone submit costs a
future and one ``call_soon`` over a plain call, not a task of its own (a client submitting one
task at a time spends its CPU on the gRPC call, not on the coalescing machinery).

``SubmitMany`` is not atomic: the server creates or refuses each item on its own, in order, and
each caller gets exactly its own answer, a ``SubmitResponse`` or the :class:`ClientError` that
``Submit`` would have raised for it. A caller that is cancelled while its item is in flight
does not cancel the others (its task may still be created, as with a cancelled ``Submit``). A
server without ``SubmitMany`` (UNIMPLEMENTED) is remembered, and its items go out as ``Submit``
calls, each made by its own caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from cronoq.client.errors import ClientError
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

__all__ = ["MAX_ITEMS", "SubmitCoalescer"]

#: Items per SubmitMany call at most (the server's default ``limits.max_tasks_per_batch``).
MAX_ITEMS = 1000

Call = Callable[[str, Any], Awaitable[Any]]


class SubmitCoalescer:
    """Joins the submissions of one loop turn into one call; ``call(method, request)`` makes
    the unary call (with the client's failover) and raises :class:`ClientError`."""

    def __init__(self, call: Call, max_items: int = MAX_ITEMS) -> None:
        self._call = call
        self._max = max_items
        self._pending: list[tuple[pb.TaskSpec, asyncio.Future[pb.SubmitResponse | None]]] = []
        self._scheduled = False
        #: False once the server answered UNIMPLEMENTED to SubmitMany
        self.many_supported = True
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, spec: pb.TaskSpec) -> pb.SubmitResponse:
        """Queue ``spec`` for this loop turn's flush; its ``SubmitResponse`` (or the
        :class:`ClientError` that ``Submit`` would raise for it)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[pb.SubmitResponse | None] = loop.create_future()
        self._pending.append((spec, fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        resp = await fut
        if resp is None:  # alone in its turn (or no SubmitMany): a plain Submit, sent from here
            resp = await self._call("Submit", pb.SubmitRequest(task=spec))
        return resp

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, []
        if len(pending) == 1 or not self.many_supported:
            _each_sends_its_own(pending)  # (a caller cancelled before the flush sends nothing)
            return
        loop = asyncio.get_running_loop()
        for i in range(0, len(pending), self._max):
            task = loop.create_task(self._send(pending[i : i + self._max]))
            self._tasks.add(task)  # (kept alive until done)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, items: list[tuple[pb.TaskSpec, asyncio.Future[pb.SubmitResponse | None]]]) -> None:
        live = [(spec, fut) for spec, fut in items if not fut.done()]
        if not live:
            return
        if len(live) == 1 or not self.many_supported:
            _each_sends_its_own(live)
            return
        try:
            resp = await self._call("SubmitMany", pb.SubmitManyRequest(tasks=[spec for spec, _ in live]))
        except ClientError as err:
            if err.code == "unimplemented":
                self.many_supported = False
                _each_sends_its_own(live)
                return
            for _, fut in live:
                _fail(fut, err)
            return
        except BaseException as exc:  # cancelled or broken: every caller learns it
            for _, fut in live:
                _fail(
                    fut, exc if isinstance(exc, Exception) else ClientError("cancelled", "submit cancelled")
                )
            raise
        results = resp.results
        if len(results) != len(live):
            n = len(results)
            short = ClientError("internal", f"SubmitMany answered {n} results for {len(live)} tasks")
            for _, fut in live:
                _fail(fut, short)
            return
        for (_, fut), r in zip(live, results, strict=True):
            if fut.done():
                continue
            if r.WhichOneof("outcome") == "submitted":
                fut.set_result(r.submitted)
            else:
                fut.set_exception(ClientError(r.error.code or "unknown", r.error.message))


def _each_sends_its_own(items: list[tuple[pb.TaskSpec, asyncio.Future[pb.SubmitResponse | None]]]) -> None:
    """Answer ``None`` to every caller still waiting: each makes its own ``Submit``."""
    for _, fut in items:
        if not fut.done():
            fut.set_result(None)


def _fail(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)
