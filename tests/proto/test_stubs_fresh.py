"""The committed gRPC stubs are what scripts/gen_proto.py generates from cronoq.proto (CI keeps
them fresh), and they import from their package path."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_proto.py"
STUBS = ROOT / "src" / "cronoq" / "proto" / "cronoq" / "v1"

pytest.importorskip("grpc_tools", reason="grpcio-tools (dev extra) regenerates the stubs")


def _gen_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cronoq_gen_proto", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_stubs_are_fresh(tmp_path: Path) -> None:
    gen = _gen_module()
    produced = gen.generate(tmp_path)
    assert sorted(p.name for p in produced) == sorted(gen.GENERATED)
    stale = [p.name for p in produced if (STUBS / p.name).read_bytes() != p.read_bytes()]
    assert not stale, f"stale generated stubs {stale}: run `python scripts/gen_proto.py`"


def test_check_mode_reports_fresh() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "fresh" in out.stdout


def test_generated_imports_use_the_package_path() -> None:
    text = (STUBS / "cronoq_pb2_grpc.py").read_text()
    assert "from cronoq.proto.cronoq.v1 import cronoq_pb2" in text
    assert "from cronoq.v1 import" not in text

    from cronoq.proto.cronoq.v1 import cronoq_pb2, cronoq_pb2_grpc

    assert cronoq_pb2.DESCRIPTOR.package == "cronoq.v1"
    assert cronoq_pb2.DESCRIPTOR.name == "cronoq/v1/cronoq.proto"
    assert cronoq_pb2.TaskSpec.__module__ == "cronoq.proto.cronoq.v1.cronoq_pb2"
    assert set(cronoq_pb2.DESCRIPTOR.services_by_name) == {"Tasks", "Workers", "Admin"}
    for name in ("TasksStub", "WorkersStub", "AdminStub", "add_TasksServicer_to_server"):
        assert hasattr(cronoq_pb2_grpc, name)
