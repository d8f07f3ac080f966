"""cronoq: an elastic, priority-aware asyncio task scheduler.

Public names only (docs/reference/behaviour.md#python-api); imports stay light (no server, store or gRPC
modules).
"""

from cronoq.engine.attempts import AttemptRecord
from cronoq.engine.config import AutoscaleConfig
from cronoq.engine.model import Dep, Priority, RetryPolicy, StatusEvent
from cronoq.engine.progress import Progress, ProgressEvent
from cronoq.engine.recurring import RecurringInfo
from cronoq.engine.resources import Resource
from cronoq.engine.snapshot import GroupSnapshot, PoolSnapshot, Snapshot
from cronoq.errors import (
    CronoqError,
    EventsLagged,
    Fenced,
    Permanent,
    ReplayError,
    Retryable,
    SchedulerError,
    SubmitError,
    TaskFailed,
)
from cronoq.outcome import Outcome
from cronoq.runtime.blocking import BlockingEventStream, BlockingHandle, BlockingScheduler
from cronoq.runtime.context import TaskContext
from cronoq.runtime.events import EventStream, ProgressEventStream
from cronoq.runtime.handles import TaskHandle
from cronoq.runtime.operations import BulkResult
from cronoq.runtime.pool import Pool
from cronoq.runtime.processes.settings import Processes
from cronoq.runtime.scalers import ExternalScaler, Scaler, SlotScaler
from cronoq.runtime.scheduler import Scheduler
from cronoq.runtime.task import Task
from cronoq.store.codec import Codec, JsonCodec
from cronoq.store.memory import MemoryStore
from cronoq.store.postgres import PostgresStore
from cronoq.store.sqlite import SqliteStore
from cronoq.tasks.app import App
from cronoq.tasks.placeholders import outcome_of, output_of

__version__ = "0.1.0"

__all__ = [
    "App",
    "AttemptRecord",
    "AutoscaleConfig",
    "BlockingEventStream",
    "BlockingHandle",
    "BlockingScheduler",
    "BulkResult",
    "CronoqError",
    "Dep",
    "EventStream",
    "EventsLagged",
    "Fenced",
    "GroupSnapshot",
    "Permanent",
    "Pool",
    "PoolSnapshot",
    "Processes",
    "Priority",
    "Progress",
    "ProgressEvent",
    "ProgressEventStream",
    "RecurringInfo",
    "Resource",
    "Scaler",
    "SlotScaler",
    "ExternalScaler",
    "ReplayError",
    "Retryable",
    "RetryPolicy",
    "Scheduler",
    "SchedulerError",
    "Snapshot",
    "StatusEvent",
    "SubmitError",
    "Task",
    "Codec",
    "JsonCodec",
    "MemoryStore",
    "Outcome",
    "outcome_of",
    "output_of",
    "PostgresStore",
    "SqliteStore",
    "TaskContext",
    "TaskFailed",
    "TaskHandle",
]
