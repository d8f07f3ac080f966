"""Our cronoq.proto keeps the published wire contract (shared/protocol) and grows only by
addition: every message, field, enum value, name, number, type, oneof and service method of the
contract is in ours unchanged; new fields, values and methods have new names and numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_CANDIDATES = [
    ROOT.parent / "shared" / "protocol" / "cronoq_v1.proto.txt",
    Path("/work/shared/protocol/cronoq_v1.proto.txt"),
]
OURS = ROOT / "src" / "cronoq" / "proto" / "cronoq" / "v1" / "cronoq.proto"


def _compile(source: str, tmp: Path) -> bytes:
    grpc_tools = pytest.importorskip("grpc_tools")
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    src_root = tmp / "src"
    (src_root / "cronoq" / "v1").mkdir(parents=True)
    (src_root / "cronoq" / "v1" / "cronoq.proto").write_text(source, encoding="utf-8")
    out = tmp / "set.pb"
    rc = protoc.main(["protoc", f"-I{src_root}", f"--descriptor_set_out={out}", "cronoq/v1/cronoq.proto"])
    assert rc == 0, "protoc failed"
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    assert grpc_tools is not None
    (fdp,) = fds.file
    return fdp.SerializeToString(deterministic=True)


def _contract() -> Path:
    for p in CONTRACT_CANDIDATES:
        if p.exists():
            return p
    pytest.skip("shared/protocol/cronoq_v1.proto.txt is not available")


def _fdp(source: str, tmp: Path) -> Any:
    from google.protobuf import descriptor_pb2

    return descriptor_pb2.FileDescriptorProto.FromString(_compile(source, tmp))


def _field_shape(m: Any, f: Any) -> tuple[object, ...]:
    oneof = m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
    return (f.number, f.type, f.type_name, f.label, oneof, f.proto3_optional)


def _check_messages(theirs: Any, ours: Any, where: str) -> list[str]:
    """What ``ours`` breaks of ``theirs`` (messages, recursively): empty when it only adds."""
    problems: list[str] = []
    by_name = {m.name: m for m in ours}
    for tm in theirs:
        om = by_name.get(tm.name)
        if om is None:
            problems.append(f"message {where}{tm.name} is missing")
            continue
        ofields = {f.name: f for f in om.field}
        for tf in tm.field:
            of = ofields.get(tf.name)
            if of is None:
                problems.append(f"field {where}{tm.name}.{tf.name} is missing")
            elif _field_shape(om, of) != _field_shape(tm, tf):
                problems.append(f"field {where}{tm.name}.{tf.name} changed")
        problems += _check_messages(tm.nested_type, om.nested_type, f"{where}{tm.name}.")
        problems += _check_enums(tm.enum_type, om.enum_type, f"{where}{tm.name}.")
    return problems


def _check_enums(theirs: Any, ours: Any, where: str) -> list[str]:
    problems: list[str] = []
    by_name = {e.name: e for e in ours}
    for te in theirs:
        oe = by_name.get(te.name)
        if oe is None:
            problems.append(f"enum {where}{te.name} is missing")
            continue
        ovalues = {v.name: v.number for v in oe.value}
        for v in te.value:
            if ovalues.get(v.name) != v.number:
                problems.append(f"enum value {where}{te.name}.{v.name} changed or is missing")
    return problems


def _method_shape(m: Any) -> tuple[object, ...]:
    return (m.input_type, m.output_type, m.client_streaming, m.server_streaming)


def _check_services(theirs: Any, ours: Any) -> list[str]:
    problems: list[str] = []
    by_name = {s.name: s for s in ours}
    for ts in theirs:
        os_ = by_name.get(ts.name)
        if os_ is None:
            problems.append(f"service {ts.name} is missing")
            continue
        methods = {m.name: m for m in os_.method}
        for tm in ts.method:
            om = methods.get(tm.name)
            shape = (tm.input_type, tm.output_type, tm.client_streaming, tm.server_streaming)
            if (
                om is None
                or (om.input_type, om.output_type, om.client_streaming, om.server_streaming) != shape
            ):
                problems.append(f"method {ts.name}.{tm.name} changed or is missing")
    return problems


def _breaks(theirs: Any, ours: Any) -> list[str]:
    problems = [] if theirs.package == ours.package else ["package changed"]
    problems += _check_messages(theirs.message_type, ours.message_type, "")
    problems += _check_enums(theirs.enum_type, ours.enum_type, "")
    problems += _check_services(theirs.service, ours.service)
    return problems


def test_proto_keeps_the_published_contract(tmp_path: Path) -> None:
    theirs = _fdp(_contract().read_text(encoding="utf-8"), tmp_path / "a")
    ours = _fdp(OURS.read_text(encoding="utf-8"), tmp_path / "b")
    assert _breaks(theirs, ours) == []


def test_the_contract_check_sees_a_renumbered_or_removed_field(tmp_path: Path) -> None:
    """The check above is not vacuous: a renumbered field and a removed enum value are each
    reported (a removed field is reported as missing; protoc refuses a number used twice)."""
    source = _contract().read_text(encoding="utf-8")
    theirs = _fdp(source, tmp_path / "a")
    broken = source.replace("uint32 protocol_version = 4;", "uint32 protocol_version = 40;", 1)
    broken = broken.replace("TASK_STATUS_SHED = 12;", "", 1)
    problems = _breaks(theirs, _fdp(broken, tmp_path / "b"))
    assert any("protocol_version changed" in p for p in problems), problems
    assert any("TASK_STATUS_SHED" in p for p in problems), problems


def test_committed_descriptor_matches_our_proto(tmp_path: Path) -> None:
    from google.protobuf import descriptor_pb2

    source = _fdp(OURS.read_text(encoding="utf-8"), tmp_path)
    ours = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    _strip_json_names(source.message_type)  # the Python plugin omits the derived json_name
    assert ours == source


def _strip_json_names(messages: object) -> None:
    for m in messages:  # type: ignore[attr-defined]
        for f in m.field:
            f.ClearField("json_name")
        _strip_json_names(m.nested_type)


def test_spot_check_numbers() -> None:
    # a few numbers that clients depend on, spelled out
    assert pb.TaskSpec.DESCRIPTOR.fields_by_name["tenant"].number == 20
    assert pb.RecurringRequest.DESCRIPTOR.fields_by_name["overlap"].number == 6
    assert pb.Lease.DESCRIPTOR.fields_by_name["lease_ttl_s"].number == 13
    assert pb.WorkerMessage.DESCRIPTOR.fields_by_name["cancelled"].number == 7
    assert pb.EDGE_COND_ON_COMPLETE == 2 and pb.EDGE_COND_ON_FAILURE == 3
    assert pb.TASK_STATUS_SHED == 12 and pb.PRIORITY_LOW == 4 and pb.OVERLAP_QUEUE_ON_SUCCESS == 4


def test_the_published_snapshot_reads_a_snapshot_with_the_recurring_totals(tmp_path: Path) -> None:
    """A client of the published contract decodes our ``SnapshotResponse`` whose ``Totals``
    carry the recurring totals (fields 140-142, unknown to it): its own fields read as sent."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_fdp(_contract().read_text(encoding="utf-8"), tmp_path))
    published = message_factory.GetMessageClass(pool.FindMessageTypeByName("cronoq.v1.SnapshotResponse"))
    ours = pb.SnapshotResponse(
        live_tasks=4,
        totals=pb.Totals(submitted=7, stale_completions=2, recurring_conflicts=5, recurring_invalid=1),
    )
    theirs = published.FromString(ours.SerializeToString())
    assert (theirs.live_tasks, theirs.totals.submitted, theirs.totals.stale_completions) == (4, 7, 2)
    assert "recurring_conflicts" not in theirs.totals.DESCRIPTOR.fields_by_name
