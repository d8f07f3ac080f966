"""Remote client and worker of a cronoq server (docs/reference/behaviour.md#client-worker); needs the
``client`` extra (grpcio, protobuf).

    from cronoq.client import Client, Worker, task

    async with Client("127.0.0.1:7070", token=...) as client:
        sub = await client.submit({"n": 1}, pool="default", priority="high", key="job-1")
        result = await client.wait(sub.id, timeout=30)
        print(result.status, result.json())

    async def handle(lease):
        return {"doubled": lease.json()["n"] * 2}

    await Worker("127.0.0.1:7070", "default", handle, slots=4).run()

``import cronoq`` never imports this package (nor grpc).
"""

from cronoq.client.blocking import BlockingClient, BlockingWatch
from cronoq.client.client import Client, Watch
from cronoq.client.encoding import build_spec, decode_payload, encode_payload, task
from cronoq.client.errors import CancelTask, ClientError, Reject, WaitTimeout
from cronoq.client.types import (
    Event,
    PoolSnapshot,
    RecurringInfo,
    Result,
    Snapshot,
    Submitted,
    TaskInfo,
    TaskPage,
    Totals,
    WorkerGroup,
    WorkerInfo,
)
from cronoq.client.worker import PROTOCOL_VERSION, CancelFlag, Lease, Worker
from cronoq.engine.model import Dep, Priority, RetryPolicy
from cronoq.errors import Permanent, Retryable, TaskFailed

__all__ = [
    "PROTOCOL_VERSION",
    "BlockingClient",
    "BlockingWatch",
    "CancelFlag",
    "CancelTask",
    "Client",
    "ClientError",
    "Dep",
    "Event",
    "Lease",
    "Permanent",
    "PoolSnapshot",
    "Priority",
    "RecurringInfo",
    "Reject",
    "Result",
    "Retryable",
    "RetryPolicy",
    "Snapshot",
    "Submitted",
    "TaskFailed",
    "TaskInfo",
    "TaskPage",
    "Totals",
    "WaitTimeout",
    "Watch",
    "Worker",
    "WorkerGroup",
    "WorkerInfo",
    "build_spec",
    "decode_payload",
    "encode_payload",
    "task",
]
