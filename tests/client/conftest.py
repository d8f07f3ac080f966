"""A fake in-process cronoq gRPC server for client and worker tests (no real scheduler).

``FakeServer`` implements the generated ``Tasks``, ``Admin`` and ``Workers`` servicers
minimally: tasks live in a dict, tests finish them with :meth:`FakeServer.finish`, every
request and its metadata are recorded, and errors can be injected per method. Worker streams
are driven by the test through :class:`WorkerConn` (``recv`` what the worker sent, ``send``
what the server says, ``end``/``abort`` the stream).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc

TERMINAL = {
    pb.TASK_STATUS_SUCCEEDED,
    pb.TASK_STATUS_FAILED,
    pb.TASK_STATUS_DEAD_LETTERED,
    pb.TASK_STATUS_CANCELLED,
    pb.TASK_STATUS_SKIPPED,
    pb.TASK_STATUS_MISSED,
    pb.TASK_STATUS_SHED,
}

EOF = None  # what WorkerConn.recv returns once the worker half-closed


@dataclass
class FakeTask:
    id: int
    spec: pb.TaskSpec
    status: int = pb.TASK_STATUS_READY
    output: bytes | None = None
    message: str = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def result(self) -> pb.TaskResult:
        r = pb.TaskResult(id=self.id, status=self.status, message=self.message)
        if self.output is not None:
            r.output = self.output
            r.output_available = True
        return r

    def info(self) -> pb.TaskInfo:
        return pb.TaskInfo(
            id=self.id,
            status=self.status,
            pool=self.spec.pool or "default",
            key=self.spec.key,
            kind=self.spec.kind or "default",
            attempt=0,
            max_attempts=3,
            created_unix_ns=1_700_000_000_000_000_000 + self.id,
            message=self.message,
            output_available=self.output is not None,
            tenant=self.spec.tenant,
            priority=self.spec.priority or pb.PRIORITY_NORMAL,
        )


class WorkerConn:
    """One Work stream as seen by the server side of a test."""

    def __init__(self, metadata: dict[str, str]) -> None:
        self.metadata = metadata
        self.inbox: asyncio.Queue[Any] = asyncio.Queue()
        self.outbox: asyncio.Queue[Any] = asyncio.Queue()
        self.closed_by_worker = asyncio.Event()
        self.finished = asyncio.Event()

    async def recv(self, timeout: float = 5.0) -> Any:
        """The next WorkerMessage (or EOF when the worker half-closed)."""
        return await asyncio.wait_for(self.inbox.get(), timeout)

    async def recv_kind(self, kind: str, timeout: float = 5.0, skip: tuple[str, ...] = ("heartbeat",)) -> Any:
        """The next message of ``kind`` (skipping heartbeats); asserts nothing else came first."""
        while True:
            msg = await self.recv(timeout)
            assert msg is not EOF, f"worker half-closed while waiting for {kind}"
            which = msg.WhichOneof("msg")
            if which in skip and which != kind:
                continue
            assert which == kind, f"expected {kind}, got {which}: {msg}"
            return getattr(msg, kind)

    def send(self, **kwargs: Any) -> None:
        self.outbox.put_nowait(pb.ServerMessage(**kwargs))

    def register_ok(
        self,
        worker_id: int = 7,
        slots: int | None = None,
        lease_ttl: float | None = None,
        version: int = 3,
        max_message_bytes: int = 4 << 20,
    ) -> None:
        reg = pb.Registered(
            worker_id=worker_id, protocol_version=version, max_message_bytes=max_message_bytes
        )
        reg.slots = slots if slots is not None else 1
        if lease_ttl is not None:
            reg.lease_ttl_s = lease_ttl
        self.send(registered=reg)

    def lease(self, lease: int, task_id: int | None = None, payload: bytes = b"", **kwargs: Any) -> None:
        self.send(
            lease=pb.Lease(
                lease=lease,
                task_id=task_id if task_id is not None else lease,
                attempt=kwargs.pop("attempt", 1),
                payload=payload,
                pool=kwargs.pop("pool", "default"),
                **kwargs,
            )
        )

    def end(self) -> None:
        """Finish the stream with OK."""
        self.outbox.put_nowait(None)

    def abort(
        self, code: grpc.StatusCode, details: str = "", metadata: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """End the stream with ``code`` (and trailing ``metadata``, e.g. a shard redirect)."""
        self.outbox.put_nowait((code, details, metadata))


class FakeServer(pb_grpc.TasksServicer, pb_grpc.AdminServicer, pb_grpc.WorkersServicer):
    def __init__(self) -> None:
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self.tasks: dict[int, FakeTask] = {}
        self.keys: dict[str, int] = {}
        self.next_id = 1
        self.requests: list[tuple[str, Any, dict[str, str]]] = []
        self.errors: dict[str, list[tuple[grpc.StatusCode, str]]] = {}
        self.standby = False  # every call answers UNAVAILABLE
        self.wait_cap = 30.0  # the server's max_wait_s
        self.watchers: list[tuple[pb.WatchRequest, asyncio.Queue[Any]]] = []
        self.watch_started = asyncio.Event()
        self.conns: asyncio.Queue[WorkerConn] = asyncio.Queue()
        self.all_conns: list[WorkerConn] = []
        self.recurring: dict[str, pb.RecurringRequest] = {}
        self.workers: list[pb.WorkerInfo] = []
        self.snapshot = pb.SnapshotResponse()
        self.end_on_half_close = True  # like the real server: a worker's half-close ends the stream
        self.submit_many = True  # False: SubmitMany answers UNIMPLEMENTED (an older server)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, credentials: grpc.ServerCredentials | None = None, port: int = 0) -> FakeServer:
        """Listen on a loopback port (a free one by default; TLS with ``credentials``)."""
        self.server = grpc.aio.server()
        pb_grpc.add_TasksServicer_to_server(self, self.server)
        pb_grpc.add_AdminServicer_to_server(self, self.server)
        pb_grpc.add_WorkersServicer_to_server(self, self.server)
        if credentials is not None:
            self.port = self.server.add_secure_port(f"127.0.0.1:{port}", credentials)
        else:
            self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        await self.server.start()
        return self

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(0)

    # -- helpers ------------------------------------------------------------------------------

    def fail(self, method: str, code: grpc.StatusCode, details: str = "") -> None:
        """Make the next call of ``method`` fail with ``code``."""
        self.errors.setdefault(method, []).append((code, details))

    async def _enter(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> None:
        md = {k: v for k, v in context.invocation_metadata() or ()}
        self.requests.append((method, request, md))
        if self.standby:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "this server is a standby (not the leader)")
        errs = self.errors.get(method)
        if errs:
            code, details = errs.pop(0)
            await context.abort(code, details)

    def last(self, method: str) -> tuple[Any, dict[str, str]]:
        for m, req, md in reversed(self.requests):
            if m == method:
                return req, md
        raise AssertionError(f"no {method} request")

    def _find(self, ref: pb.TaskRef) -> FakeTask | None:
        if ref.WhichOneof("target") == "id":
            return self.tasks.get(ref.id)
        tid = self.keys.get(ref.key)
        return self.tasks.get(tid) if tid is not None else None

    def finish(
        self, tid: int, status: int = pb.TASK_STATUS_SUCCEEDED, output: bytes | None = b"", message: str = ""
    ) -> None:
        t = self.tasks[tid]
        t.status = status
        t.output = output if status == pb.TASK_STATUS_SUCCEEDED else None
        t.message = message
        t.done.set()
        self.publish(pb.StatusEvent(id=tid, pool=t.spec.pool or "default", key=t.spec.key, status=status))

    def publish(self, ev: pb.StatusEvent) -> None:
        for req, q in self.watchers:
            if req.pools and ev.pool not in req.pools:
                continue
            if (req.ids or req.keys) and ev.id not in req.ids and ev.key not in req.keys:
                continue
            if not req.all_transitions and ev.status not in TERMINAL:
                continue
            q.put_nowait(ev)

    def _create(self, spec: pb.TaskSpec) -> pb.SubmitResponse:
        if spec.key and spec.key in self.keys:
            return pb.SubmitResponse(id=self.keys[spec.key], duplicate=True)
        tid = self.next_id
        self.next_id += 1
        self.tasks[tid] = FakeTask(tid, spec)
        if spec.key:
            self.keys[spec.key] = tid
        return pb.SubmitResponse(id=tid)

    async def _wait(self, task: FakeTask, timeout: float | None, context: grpc.aio.ServicerContext) -> None:
        limit = self.wait_cap if timeout is None else min(timeout, self.wait_cap)
        try:
            await asyncio.wait_for(task.done.wait(), limit)
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "wait timed out")

    # -- Tasks --------------------------------------------------------------------------------

    async def Submit(self, request: pb.SubmitRequest, context: Any) -> pb.SubmitResponse:
        await self._enter("Submit", request, context)
        if request.task.pool == "nope":
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown pool 'nope'")
        resp = self._create(request.task)
        if request.wait:
            task = self.tasks[resp.id]
            wt = request.wait_timeout_s if request.HasField("wait_timeout_s") else None
            await self._wait(task, wt, context)
            resp.result.CopyFrom(task.result())
        return resp

    async def SubmitMany(self, request: pb.SubmitManyRequest, context: Any) -> pb.SubmitManyResponse:
        if not self.submit_many:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        await self._enter("SubmitMany", request, context)
        resp = pb.SubmitManyResponse()
        for spec in request.tasks:
            r = resp.results.add()
            if spec.pool == "nope":
                r.error.code, r.error.message = "not_found", "unknown pool 'nope'"
            else:
                r.submitted.CopyFrom(self._create(spec))
        return resp

    async def SubmitBatch(self, request: pb.SubmitBatchRequest, context: Any) -> pb.SubmitBatchResponse:
        await self._enter("SubmitBatch", request, context)
        return pb.SubmitBatchResponse(tasks=[self._create(s) for s in request.tasks])

    async def Cancel(self, request: pb.CancelRequest, context: Any) -> pb.CancelResponse:
        await self._enter("Cancel", request, context)
        task = self._find(request.task)
        if task is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown task")
        assert task is not None
        if task.status in TERMINAL:
            return pb.CancelResponse(cancelled=False)
        self.finish(task.id, pb.TASK_STATUS_CANCELLED, None, "cancelled")
        return pb.CancelResponse(cancelled=True)

    async def Get(self, request: pb.GetRequest, context: Any) -> pb.TaskInfo:
        await self._enter("Get", request, context)
        task = self._find(request.task)
        if task is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown task")
        assert task is not None
        return task.info()

    async def ListTasks(self, request: pb.ListTasksRequest, context: Any) -> pb.ListTasksResponse:
        await self._enter("ListTasks", request, context)
        limit = request.limit or 100
        out = []
        for tid in sorted(self.tasks):
            t = self.tasks[tid]
            if tid <= request.after:
                continue
            if request.pools and (t.spec.pool or "default") not in request.pools:
                continue
            if request.statuses and t.status not in request.statuses:
                continue
            out.append(t.info())
        page = out[:limit]
        more = len(out) > limit
        return pb.ListTasksResponse(tasks=page, next_after=page[-1].id if more else 0)

    async def Wait(self, request: pb.WaitRequest, context: Any) -> pb.TaskResult:
        await self._enter("Wait", request, context)
        task = self._find(request.task)
        if task is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown task")
        assert task is not None
        await self._wait(task, request.timeout_s if request.HasField("timeout_s") else None, context)
        return task.result()

    async def Watch(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[pb.StatusEvent]:
        await self._enter("Watch", request, context)
        q: asyncio.Queue[Any] = asyncio.Queue()
        entry = (request, q)
        self.watchers.append(entry)
        self.watch_started.set()
        await context.send_initial_metadata(())
        try:
            while True:
                ev = await q.get()
                if ev is None:
                    return
                if isinstance(ev, tuple):
                    await context.abort(*ev)
                yield ev
        finally:
            self.watchers.remove(entry)

    # -- Admin --------------------------------------------------------------------------------

    async def Snapshot(self, request: pb.Empty, context: Any) -> pb.SnapshotResponse:
        await self._enter("Snapshot", request, context)
        return self.snapshot

    async def AddRecurring(self, request: pb.RecurringRequest, context: Any) -> pb.Empty:
        await self._enter("AddRecurring", request, context)
        if request.cron == "bad":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid cron 'bad'")
        self.recurring[request.name] = request
        return pb.Empty()

    async def RemoveRecurring(
        self, request: pb.RemoveRecurringRequest, context: Any
    ) -> pb.RemoveRecurringResponse:
        await self._enter("RemoveRecurring", request, context)
        return pb.RemoveRecurringResponse(removed=self.recurring.pop(request.name, None) is not None)

    async def ListWorkers(self, request: pb.Empty, context: Any) -> pb.ListWorkersResponse:
        await self._enter("ListWorkers", request, context)
        return pb.ListWorkersResponse(workers=self.workers)

    async def ListRecurring(self, request: pb.Empty, context: Any) -> pb.ListRecurringResponse:
        await self._enter("ListRecurring", request, context)
        out = [
            pb.RecurringInfo(
                name=r.name,
                cron=r.cron,
                tz=r.tz,
                pool=r.template.pool or "default",
                kind=r.template.kind or "default",
                overlap=r.overlap or pb.OVERLAP_SKIP,
                next_unix_ns=1_800_000_000_000_000_000,
            )
            for r in self.recurring.values()
        ]
        return pb.ListRecurringResponse(schedules=out)

    # -- Workers ------------------------------------------------------------------------------

    async def Work(self, request_iterator: Any, context: Any) -> AsyncIterator[pb.ServerMessage]:
        md = {k: v for k, v in context.invocation_metadata() or ()}
        if self.standby:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "this server is a standby (not the leader)")
        conn = WorkerConn(md)
        self.all_conns.append(conn)
        self.conns.put_nowait(conn)

        async def pump() -> None:
            try:
                async for msg in request_iterator:
                    conn.inbox.put_nowait(msg)
            except Exception:
                pass
            conn.inbox.put_nowait(EOF)
            conn.closed_by_worker.set()
            if self.end_on_half_close:
                conn.end()

        reader = asyncio.create_task(pump())
        try:
            while True:
                out = await conn.outbox.get()
                if out is None:
                    return
                if isinstance(out, tuple):
                    await context.abort(*out)
                yield out
        finally:
            conn.finished.set()
            reader.cancel()

    async def next_conn(self, timeout: float = 5.0) -> WorkerConn:
        return await asyncio.wait_for(self.conns.get(), timeout)


@pytest.fixture
async def fake() -> AsyncIterator[FakeServer]:
    server = await FakeServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def fake2() -> AsyncIterator[FakeServer]:
    server = await FakeServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[bytes, bytes]:
    """(key, certificate) PEM of a throwaway self-signed certificate for localhost/127.0.0.1,
    made with the openssl command (skipped where it cannot run)."""
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    cmd = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    cmd += ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    try:
        subprocess.run([*cmd, "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:  # pragma: no cover - no openssl
        pytest.skip(f"openssl cannot make a test certificate here: {exc}")
    return key.read_bytes(), crt.read_bytes()


@pytest.fixture
async def tls_fake(self_signed: tuple[bytes, bytes]) -> AsyncIterator[FakeServer]:
    """A fake server behind TLS with the :func:`self_signed` certificate."""
    server = await FakeServer().start(grpc.ssl_server_credentials([self_signed]))
    try:
        yield server
    finally:
        await server.stop()
