"""The wire enums, name ↔ number, derived from the proto descriptors (client and server alike).

Theory of operation
-------------------
Every enum of ``cronoq.v1`` has ``0 = *_UNSPECIFIED`` ("not given": the server applies the
default) and values named ``<PREFIX>_<NAME>``.  :func:`wire_enum` reads them from the generated
descriptor, strips the prefix and lower-cases the rest, so ``PRIORITY_CRITICAL = 1`` becomes
``"critical" ↔ 1``; nothing here types a wire number by hand, and a value added to the proto
appears here by itself.  UNSPECIFIED is not a name: it is each reader's own default.

The engine numbers its enums its own way (``Priority.CRITICAL = 0``, statuses from 0, edge
conditions ``ON_SUCCESS, ON_FAILURE, ON_COMPLETE``, miss policies, overlap policies), and the
wire order is not always the engine's: the wire's edge conditions are ``ON_SUCCESS = 1,
ON_COMPLETE = 2, ON_FAILURE = 3``.  So engine ↔ wire is matched **by name**
(:func:`engine_map`), never by an offset: ``X_TO_WIRE[engine number]`` is the wire number and
``X_FROM_WIRE[wire number]`` the engine's (UNSPECIFIED absent).  Building the maps fails at
import if an engine name has no wire value (``tests/proto/test_enums.py`` checks both ways).

Needs protobuf (the ``client`` or ``server`` extra), like the stubs it reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from cronoq.engine.model import CLASS_NAMES, COND_NAMES, MISS_POLICIES, STATUS_NAMES
from cronoq.engine.recurring import OVERLAP_NAMES
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

__all__ = [
    "COND_FROM_WIRE",
    "COND_TO_WIRE",
    "EDGE_COND",
    "MISS_FROM_WIRE",
    "MISS_POLICY",
    "MISS_TO_WIRE",
    "OVERLAP",
    "OVERLAP_FROM_WIRE",
    "OVERLAP_TO_WIRE",
    "PRIORITY",
    "PRIORITY_FROM_WIRE",
    "PRIORITY_TO_WIRE",
    "STATUS_FROM_WIRE",
    "STATUS_TO_WIRE",
    "TASK_STATUS",
    "WireEnum",
    "engine_map",
    "wire_enum",
]


@dataclass(frozen=True, slots=True)
class WireEnum:
    """One proto enum: ``numbers`` (name → number) and ``names`` (number → name), in wire
    order, without UNSPECIFIED (0)."""

    proto: str
    numbers: Mapping[str, int]
    names: Mapping[int, str]

    def name(self, number: int, default: str | None = None) -> str | None:
        """The name of ``number``; ``default`` for UNSPECIFIED or a value newer than this code."""
        return self.names.get(number, default)


def wire_enum(descriptor: Any, prefix: str) -> WireEnum:
    """The :class:`WireEnum` of a generated enum ``descriptor`` whose values are named
    ``prefix + NAME`` (all but UNSPECIFIED: a value that lacks the prefix is an error)."""
    numbers: dict[str, int] = {}
    for v in descriptor.values:
        if v.number == 0:
            continue
        if not v.name.startswith(prefix):
            raise ValueError(f"{descriptor.name}.{v.name} does not start with {prefix!r}")
        numbers[v.name[len(prefix) :].lower()] = v.number
    names = {n: name for name, n in numbers.items()}
    return WireEnum(descriptor.name, MappingProxyType(numbers), MappingProxyType(names))


def engine_map(
    wire: WireEnum, engine_names: Sequence[str], prefix: str = ""
) -> tuple[tuple[int, ...], dict[int, int]]:
    """``(to_wire, from_wire)`` for an engine enum whose value ``i`` is named
    ``engine_names[i]`` (the wire calls it ``prefix + name``): ``to_wire[i]`` is its wire
    number, ``from_wire[number]`` its engine value.  Matched by name; a name the wire lacks
    raises ``KeyError``."""
    to_wire = tuple(wire.numbers[prefix + n] for n in engine_names)
    return to_wire, {w: i for i, w in enumerate(to_wire)}


PRIORITY: WireEnum = wire_enum(pb.Priority.DESCRIPTOR, "PRIORITY_")
TASK_STATUS: WireEnum = wire_enum(pb.TaskStatus.DESCRIPTOR, "TASK_STATUS_")
#: names ``on_success``, ``on_complete``, ``on_failure`` (the engine's names without ``on_``)
EDGE_COND: WireEnum = wire_enum(pb.EdgeCond.DESCRIPTOR, "EDGE_COND_")
MISS_POLICY: WireEnum = wire_enum(pb.MissPolicy.DESCRIPTOR, "MISS_POLICY_")
OVERLAP: WireEnum = wire_enum(pb.Overlap.DESCRIPTOR, "OVERLAP_")

#: engine priority class (``Priority.value``) ↔ wire ``Priority``
PRIORITY_TO_WIRE, PRIORITY_FROM_WIRE = engine_map(PRIORITY, CLASS_NAMES)
#: engine status ↔ wire ``TaskStatus``
STATUS_TO_WIRE, STATUS_FROM_WIRE = engine_map(TASK_STATUS, STATUS_NAMES)
#: engine edge condition (``ON_SUCCESS``, ``ON_FAILURE``, ``ON_COMPLETE``) ↔ wire ``EdgeCond``
COND_TO_WIRE, COND_FROM_WIRE = engine_map(EDGE_COND, COND_NAMES, "on_")
#: engine miss policy ↔ wire ``MissPolicy``
MISS_TO_WIRE, MISS_FROM_WIRE = engine_map(MISS_POLICY, MISS_POLICIES)
#: engine overlap policy ↔ wire ``Overlap``
OVERLAP_TO_WIRE, OVERLAP_FROM_WIRE = engine_map(OVERLAP, OVERLAP_NAMES)
