"""In the forkserver that starts a worker's children (runs there only, as a preload module).

Theory of operation
-------------------
``multiprocessing``'s forkserver exits once every holder of its "alive" pipe has closed it:
the worker, and each child, which inherits a copy (:mod:`.child` closes its copy at once, so
the forkserver's life follows the worker's alone). A child's ``PR_SET_PDEATHSIG`` is tied to
its parent, the forkserver, and its pipe watchdog needs the GIL, which a task stuck in C code
may hold for ever. So, when the worker is gone and the forkserver exits, this module's
``atexit`` hook SIGKILLs the process group of every child the forkserver started: each child
with the processes its task started, whatever the child is doing. Importing this module
anywhere but in the forkserver's preload registers nothing; the children, forked from the
forkserver, inherit the hook but end with ``os._exit``, which runs none.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys

__all__ = ["children_of", "end_children"]


def children_of(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes, forked by any of its threads (Linux ``/proc``;
    empty when it cannot tell)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out += [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        pass
    return out


def end_children() -> None:
    """SIGKILL the process group of each child of this process (each child leads its own)."""
    for child in children_of(os.getpid()):
        try:
            os.killpg(child, signal.SIGKILL)
        except ProcessLookupError:  # (not yet its own group leader: it alone)
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        except OSError:
            pass


def _in_forkserver() -> bool:
    """Whether this module is being imported by the forkserver's ``main`` (as a preload)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


if sys.platform.startswith("linux") and _in_forkserver():
    atexit.register(end_children)
