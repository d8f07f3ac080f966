"""``cronoq.Processes``: the settings of the child processes that run ``run_in="process"`` work.

One immutable value, given as ``processes=`` to a :class:`~cronoq.Pool`, a
:class:`~cronoq.Scheduler` (``app.scheduler(...)``: the settings of the app's process tasks) or
a remote :class:`cronoq.client.Worker`. Every field is checked when the value is made, so a bad
limit is a ``ValueError`` before anything runs (docs/how-to/processes.md).
"""

from __future__ import annotations

import math
import re

from cronoq.engine.time import check_seconds

__all__ = ["START_METHODS", "Processes", "parse_memory"]

#: the start methods a child may be made with; "fork" is used only while the parent runs one
#: thread (forking a threaded process can deadlock the child), forkserver otherwise
START_METHODS = ("forkserver", "spawn", "fork")

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_memory(value: object, name: str = "max_memory_per_child") -> int:
    """A memory size in bytes: a number, or a string such as ``"512MiB"``, ``"2GB"``, ``"300000"``
    (units B, KB/MB/GB: powers of 1000; KiB/MiB/GiB: powers of 1024). > 0, else ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number of bytes or a size such as '512MiB' (got {value!r})")
    if isinstance(value, (int, float)):
        n = math.floor(value) if math.isfinite(value) else 0
    elif isinstance(value, str):
        m = _SIZE.match(value)
        unit = _UNITS.get(m.group(2).lower()) if m else None
        if m is None or unit is None:
            raise ValueError(
                f"{name} must be a number of bytes or a size such as '512MiB' (got {value!r}; "
                "units: B, KB, MB, GB, KiB, MiB, GiB)"
            )
        n = math.floor(float(m.group(1)) * unit)
    else:
        raise ValueError(f"{name} must be a number of bytes or a size such as '512MiB' (got {value!r})")
    if n <= 0:
        raise ValueError(f"{name} must be > 0 bytes (got {value!r})")
    return n


class Processes:
    """How process children are run: ``Processes(max_tasks_per_child=None,
    max_memory_per_child=None, kill_grace=5.0, start_method="forkserver")``.

    * ``max_tasks_per_child``: a child is replaced after this many tasks (None: never);
    * ``max_memory_per_child``: a child whose RSS after a task exceeds this many bytes (or a
      size string such as ``"512MiB"``) is replaced (None: never);
    * ``kill_grace``: seconds between the SIGTERM and the SIGKILL of a child whose attempt is
      cut short (timeout, cancel, lease loss, shutdown);
    * ``start_method``: ``"forkserver"`` (default), ``"spawn"`` or ``"fork"`` (used only while
      the parent runs a single thread; forkserver otherwise).
    """

    __slots__ = ("kill_grace", "max_memory_per_child", "max_tasks_per_child", "start_method")

    def __init__(
        self,
        max_tasks_per_child: int | None = None,
        max_memory_per_child: int | str | None = None,
        kill_grace: float = 5.0,
        start_method: str = "forkserver",
    ) -> None:
        if max_tasks_per_child is not None and (
            isinstance(max_tasks_per_child, bool)
            or not isinstance(max_tasks_per_child, int)
            or max_tasks_per_child < 1
        ):
            raise ValueError(f"max_tasks_per_child must be an int >= 1 or None (got {max_tasks_per_child!r})")
        self.max_tasks_per_child: int | None = max_tasks_per_child
        self.max_memory_per_child: int | None = (
            None if max_memory_per_child is None else parse_memory(max_memory_per_child)
        )
        self.kill_grace: float = check_seconds("kill_grace", kill_grace)
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {', '.join(START_METHODS)} (got {start_method!r})")
        self.start_method: str = start_method

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, name):
            raise AttributeError(f"Processes is immutable (cannot set {name})")
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Processes):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[object, ...]:
        return (self.max_tasks_per_child, self.max_memory_per_child, self.kill_grace, self.start_method)

    def __repr__(self) -> str:
        return (
            f"Processes(max_tasks_per_child={self.max_tasks_per_child!r}, "
            f"max_memory_per_child={self.max_memory_per_child!r}, kill_grace={self.kill_grace!r}, "
            f"start_method={self.start_method!r})"
        )


def check_processes(value: object) -> Processes | None:
    """A ``processes=`` argument: None or a :class:`Processes` (ValueError otherwise)."""
    if value is None or isinstance(value, Processes):
        return value
    raise ValueError(f"processes must be a cronoq.Processes (got {value!r})")
