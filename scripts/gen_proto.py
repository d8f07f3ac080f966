#!/usr/bin/env python3
"""Regenerate the Python gRPC stubs of the cronoq.v1 wire contract.

    python scripts/gen_proto.py            # rewrite src/cronoq/proto/cronoq/v1/cronoq_pb2*.py(i)
    python scripts/gen_proto.py --check    # exit 1 when the committed stubs are stale

Input: ``src/cronoq/proto/cronoq/v1/cronoq.proto`` (compiled as ``cronoq/v1/cronoq.proto``, so
the descriptor keeps its canonical file name).  Output, next to it: ``cronoq_pb2.py`` (messages),
``cronoq_pb2.pyi`` (their types) and ``cronoq_pb2_grpc.py`` (service stubs and servicers).
protoc names the module ``cronoq.v1.cronoq_pb2`` (the gRPC module imports it so, and message
classes take it as ``__module__``); both spellings are rewritten to the package the stubs live
in, ``cronoq.proto.cronoq.v1``.

Needs ``grpcio-tools`` (the ``dev`` extra pins the version, so output is reproducible;
``tests/proto/test_stubs_fresh.py`` checks that the committed stubs match).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "src" / "cronoq" / "proto"
PROTO_FILE = "cronoq/v1/cronoq.proto"
STUB_DIR = PROTO_ROOT / "cronoq" / "v1"
GENERATED = ("cronoq_pb2.py", "cronoq_pb2.pyi", "cronoq_pb2_grpc.py")
PACKAGE = "cronoq.proto.cronoq.v1"


def generate(out_dir: Path) -> list[Path]:
    """Compile the contract into ``out_dir`` (flat: the three generated files); return them."""
    from importlib import resources

    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = str(resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            PROTO_FILE,
        ]
        rc = protoc.main(args)
        if rc != 0:
            raise RuntimeError(f"protoc failed with exit code {rc}")
        produced = Path(tmp) / "cronoq" / "v1"
        paths = []
        for name in GENERATED:
            text = (produced / name).read_text(encoding="utf-8")
            text = text.replace("from cronoq.v1 import cronoq_pb2", f"from {PACKAGE} import cronoq_pb2")
            text = text.replace("'cronoq.v1.cronoq_pb2'", f"'{PACKAGE}.cronoq_pb2'")
            dest = out_dir / name
            dest.write_text(text, encoding="utf-8")
            paths.append(dest)
    return paths


def stale_files(stub_dir: Path = STUB_DIR) -> list[str]:
    """Names of committed stubs that differ from a fresh generation (empty when fresh)."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        return [
            name
            for name in GENERATED
            if not (stub_dir / name).exists()
            or not filecmp.cmp(Path(tmp) / name, stub_dir / name, shallow=False)
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only check that the stubs are fresh")
    ns = parser.parse_args(argv)
    if ns.check:
        stale = stale_files()
        if stale:
            print(f"stale generated stubs: {', '.join(stale)}; run scripts/gen_proto.py", file=sys.stderr)
            return 1
        print("generated stubs are fresh")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in generate(Path(tmp)):
            shutil.copyfile(path, STUB_DIR / path.name)
            print(f"wrote {(STUB_DIR / path.name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
