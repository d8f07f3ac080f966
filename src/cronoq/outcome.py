"""``cronoq.Outcome``: how one task ended, as its dependents (and waits) see it; and
``SignalResult``, what sending a signal did (docs/how-to/durable.md#signals).

A small frozen value with no dependencies of its own, so every layer can make and read it:
the runtime builds one per dependency edge for ``ctx.parents`` (docs/concepts/dependencies.md
#outputs-on-edges), named tasks receive one for an ``outcome_of(...)`` argument, the client
builds them from a worker lease, the server from the engine's records.

``status`` is the status name (``"succeeded"``, ``"failed"``, ``"skipped"``, ...); ``output``
the parent's output when it succeeded (for a named task, its JSON form), else None;
``message`` its message (None for a success).  In JSON (a named child's ``outcome_of``
argument, the HTTP API) it is the object :meth:`Outcome.to_json` gives, the id as a string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["UNKNOWN", "Outcome", "SignalResult"]

#: the status of a parent whose record is gone (forgotten before the edge was made durable)
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a parent task ended: ``id``, ``key``, ``status`` (its name), ``output``, ``message``."""

    id: int
    key: str | None
    status: str
    output: Any = None
    message: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this outcome (the id as a string, as every id in JSON)."""
        return {
            "id": str(self.id),
            "key": self.key,
            "status": self.status,
            "output": self.output,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class SignalResult:
    """What ``signal(name, payload)`` did (``Scheduler.signal``, ``Client.signal``):
    ``duplicate`` when the signal already existed (its first payload stays, nothing changed)."""

    name: str
    duplicate: bool
