"""Scalers carry out the autoscaler's capacity decisions (docs/reference/behaviour.md#autoscaling).

A scaler is any object with ``scale_to(pool, desired) -> capacity`` (sync or async).  The
returned capacity is applied to the pool (``None`` leaves capacity alone: it is managed
elsewhere and reported with ``set_capacity``).  Requests for one pool are carried out one at
a time in request order; a scaler that raises is logged and never stops the scheduler.

* :class:`SlotScaler` — in-process default: capacity follows the request at once.
* :class:`ExternalScaler` — capacity is managed elsewhere (KEDA/HPA reading the ``desired``
  metric, remote workers registering); report it with ``Scheduler.set_capacity``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Scaler(Protocol):
    def scale_to(self, pool: str, desired: int) -> Any:
        """Bring ``pool`` to ``desired`` worker slots; return the capacity now provisioned (or None)."""
        ...


class SlotScaler:
    """In-process concurrency slots: capacity follows the request immediately."""

    def scale_to(self, pool: str, desired: int) -> int:
        return desired

    def __repr__(self) -> str:
        return "SlotScaler()"


class ExternalScaler:
    """Capacity is managed elsewhere; only the ``desired`` figure is published."""

    def scale_to(self, pool: str, desired: int) -> None:
        return None

    def __repr__(self) -> str:
        return "ExternalScaler()"
