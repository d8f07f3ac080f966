"""Our cronoq.proto describes exactly the published wire contract (shared/protocol): every
message, field, enum value, name, number, type, oneof and service method is the same; only the
comments differ."""

from __future__ import annotations

from pathlib import Path

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


def test_proto_matches_the_published_contract(tmp_path: Path) -> None:
    theirs = _compile(_contract().read_text(encoding="utf-8"), tmp_path / "a")
    ours = _compile(OURS.read_text(encoding="utf-8"), tmp_path / "b")
    assert ours == theirs


def test_committed_descriptor_matches_the_contract(tmp_path: Path) -> None:
    from google.protobuf import descriptor_pb2

    theirs = descriptor_pb2.FileDescriptorProto.FromString(
        _compile(_contract().read_text(encoding="utf-8"), tmp_path)
    )
    ours = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    _strip_json_names(theirs.message_type)  # the Python plugin omits the derived json_name
    assert ours == theirs


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
