"""The wire enum maps (cronoq.proto.enums) are the proto's, matched to the engine's by name."""

from __future__ import annotations

import pytest

from cronoq.client import encoding
from cronoq.engine.model import (
    CLASS_NAMES,
    COND_NAMES,
    MISS_POLICIES,
    ON_COMPLETE,
    ON_FAILURE,
    ON_SUCCESS,
    STATUS_NAMES,
    Dep,
    Priority,
)
from cronoq.engine.recurring import OVERLAP_NAMES
from cronoq.proto import enums
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server import convert, http_json

# (wire enum, engine names, the prefix the wire adds to an engine name, to_wire, from_wire)
CASES = [
    (enums.PRIORITY, CLASS_NAMES, "", enums.PRIORITY_TO_WIRE, enums.PRIORITY_FROM_WIRE),
    (enums.TASK_STATUS, STATUS_NAMES, "", enums.STATUS_TO_WIRE, enums.STATUS_FROM_WIRE),
    (enums.EDGE_COND, COND_NAMES, "on_", enums.COND_TO_WIRE, enums.COND_FROM_WIRE),
    (enums.MISS_POLICY, MISS_POLICIES, "", enums.MISS_TO_WIRE, enums.MISS_FROM_WIRE),
    (enums.OVERLAP, OVERLAP_NAMES, "", enums.OVERLAP_TO_WIRE, enums.OVERLAP_FROM_WIRE),
]
IDS = [c[0].proto for c in CASES]


@pytest.mark.parametrize(("wire", "names", "prefix", "to_wire", "from_wire"), CASES, ids=IDS)
def test_every_engine_value_round_trips_through_the_wire(
    wire: enums.WireEnum,
    names: tuple[str, ...],
    prefix: str,
    to_wire: tuple[int, ...],
    from_wire: dict[int, int],
) -> None:
    assert len(to_wire) == len(names)
    for value, name in enumerate(names):
        number = to_wire[value]
        assert wire.names[number] == prefix + name  # by name, not by position
        assert from_wire[number] == value


@pytest.mark.parametrize(("wire", "names", "prefix", "to_wire", "from_wire"), CASES, ids=IDS)
def test_every_wire_value_but_unspecified_is_an_engine_value(
    wire: enums.WireEnum,
    names: tuple[str, ...],
    prefix: str,
    to_wire: tuple[int, ...],
    from_wire: dict[int, int],
) -> None:
    descriptor = getattr(pb, wire.proto).DESCRIPTOR
    numbers = {v.number for v in descriptor.values}
    assert 0 in numbers and set(wire.names) == numbers - {0} == set(from_wire)
    assert wire.name(0) is None and wire.name(0, "dflt") == "dflt"
    assert {wire.numbers[n] for n in wire.numbers} == set(wire.names)


def test_the_dependency_condition_trap() -> None:
    """The wire orders edge conditions SUCCESS, COMPLETE, FAILURE; the engine SUCCESS, FAILURE,
    COMPLETE: an offset would swap failure and complete."""
    assert enums.COND_TO_WIRE[ON_SUCCESS] == pb.EDGE_COND_ON_SUCCESS
    assert enums.COND_TO_WIRE[ON_FAILURE] == pb.EDGE_COND_ON_FAILURE
    assert enums.COND_TO_WIRE[ON_COMPLETE] == pb.EDGE_COND_ON_COMPLETE
    for on in ("success", "failure", "complete"):
        spec = encoding.build_spec(None, deps=[Dep(7, on)])  # the client's way out
        ((target, cond),) = convert.submission(spec, _limits()).deps or ()  # the server's way in
        assert (target, cond) == (7, Dep(7, on).cond)
        assert http_json.COND_FROM_JSON[on] == http_json.COND_FROM_JSON[f"on_{on}"] == spec.deps[0].cond


def test_priorities_and_statuses_round_trip_between_client_and_server() -> None:
    for p in Priority:
        number = encoding.priority_to_wire(p)
        assert number == enums.PRIORITY_TO_WIRE[p] == http_json.PRIORITY_FROM_JSON[p.name.lower()]
        assert encoding.priority_from_wire(number) == p.name.lower()
        spec = encoding.build_spec(None, priority=p)
        assert convert.submission(spec, _limits()).priority == p
    for value, name in enumerate(STATUS_NAMES):
        number = encoding.status_to_wire(name)
        assert encoding.status_from_wire(number) == name
        assert enums.STATUS_TO_WIRE[value] == number
    assert encoding.status_from_wire(0) == "unspecified"
    assert encoding.priority_from_wire(0) == "normal"
    assert encoding.status_from_wire(99) == "unknown(99)"


def test_miss_and_overlap_policies_agree_everywhere() -> None:
    for value, name in enumerate(MISS_POLICIES):
        spec = encoding.build_spec(None, on_miss=name)
        assert spec.on_miss == enums.MISS_TO_WIRE[value] == http_json.MISS_FROM_JSON[name]
        assert convert.submission(spec, _limits()).on_miss == value
    assert convert.submission(pb.TaskSpec(), _limits()).options().on_miss == MISS_POLICIES.index("run_late")
    for value, name in enumerate(OVERLAP_NAMES):
        number = encoding.overlap_to_wire(name)
        assert number == enums.OVERLAP_TO_WIRE[value] == http_json.OVERLAP_FROM_JSON[name]
        assert encoding.overlap_from_wire(number) == enums.OVERLAP.name(number) == name
    assert encoding.overlap_from_wire(0) == enums.OVERLAP.name(0, "skip") == "skip"


def test_a_value_without_the_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="does not start with 'NOPE_'"):
        enums.wire_enum(pb.Priority.DESCRIPTOR, "NOPE_")


def test_an_engine_name_the_wire_lacks_fails() -> None:
    with pytest.raises(KeyError):
        enums.engine_map(enums.PRIORITY, ("critical", "urgent"))


def _limits():  # type: ignore[no-untyped-def]
    from cronoq.server.config import LimitsConfig

    return LimitsConfig()
