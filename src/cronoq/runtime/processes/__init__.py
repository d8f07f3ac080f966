"""CPU-bound work in child processes: hard time limits, recycling, crash isolation
(docs/how-to/processes.md).

* :mod:`.settings` — :class:`Processes`, the settings value;
* :mod:`.runin` — ``run_in`` checks and the executor of a process pool;
* :mod:`.registry` — which supervisor runs an attempt (scheduler, remote worker, test kit);
* :mod:`.supervisor` — the parent side: children per pool, kills, recycling, crashes;
* :mod:`.child` — the child's main loop and its task context;
* :mod:`.forkserver` — in the forkserver: its children's groups end with it;
* :mod:`.lifespans` — in a child: an app's lifespan (once per child) and call hooks;
* :mod:`.jobs` — what crosses the pipe.
"""

from cronoq.runtime.processes.jobs import CTX_LEASE, CTX_NONE, CTX_TASK, FnRef
from cronoq.runtime.processes.registry import (
    CURRENT,
    IN_THREADS,
    ProcessRegistry,
    run_in_process,
    start_in_process,
)
from cronoq.runtime.processes.runin import RUN_IN, ProcessExecutor, check_run_in, lease_handler
from cronoq.runtime.processes.settings import Processes, check_processes, parse_memory

__all__ = [
    "CTX_LEASE",
    "CTX_NONE",
    "CTX_TASK",
    "CURRENT",
    "IN_THREADS",
    "RUN_IN",
    "FnRef",
    "ProcessExecutor",
    "ProcessRegistry",
    "Processes",
    "check_processes",
    "check_run_in",
    "lease_handler",
    "parse_memory",
    "run_in_process",
    "start_in_process",
]
