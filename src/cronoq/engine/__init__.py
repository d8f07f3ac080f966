"""The sans-IO scheduling engine: no asyncio, no clock, no threads, no I/O.

Import what you need from the submodules; this package deliberately re-exports only the
main entry points.
"""

from cronoq.engine.config import AutoscaleConfig, CoreConfig, PoolConfig, PriorityConfig, UrgencyConfig
from cronoq.engine.core import Core
from cronoq.engine.model import Dep, Priority, RetryPolicy, StatusEvent, TaskOptions, TaskState

__all__ = [
    "AutoscaleConfig",
    "Core",
    "CoreConfig",
    "Dep",
    "PoolConfig",
    "Priority",
    "PriorityConfig",
    "RetryPolicy",
    "StatusEvent",
    "TaskOptions",
    "TaskState",
    "UrgencyConfig",
]
