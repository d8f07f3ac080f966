"""Defect: no byte budget for pending work.

150 pending tasks of 4 MiB put the leader at 724 MB (the shipped pod limit is 1 GiB).  Now the
leader counts the payload bytes it holds for live tasks and refuses a submission past
``limits.max_pending_bytes`` with ``overloaded``; the budget frees as tasks end, and payloads
brought back by recovery after a restart count again.
"""

from __future__ import annotations

import grpc
import pytest

from server.procs import Raw, pb, start_server

MIB = 1024 * 1024
BODY = '[limits]\nmax_pending_bytes = 8388608\n\n[[pools]]\nname = "default"\n'  # 8 MiB


async def _submit(raw: Raw, key: str) -> grpc.StatusCode:
    spec = pb.TaskSpec(key=key, payload=b"x" * (MIB - 64), content_type="application/octet-stream")
    try:
        await raw.tasks.Submit(pb.SubmitRequest(task=spec), timeout=60)
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_pending_bytes" in (e.details() or "")
        return e.code()
    return grpc.StatusCode.OK


async def test_pending_payload_bytes_are_budgeted(tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("bytes")
    sp = start_server(directory, BODY, name="bytes")
    try:
        raw = Raw(sp.grpc)
        try:
            codes = [await _submit(raw, f"t{i}") for i in range(9)]
            assert codes == [grpc.StatusCode.OK] * 8 + [grpc.StatusCode.RESOURCE_EXHAUSTED]
            # a duplicate holds nothing new
            assert await _submit(raw, "t0") == grpc.StatusCode.OK
            for i in range(3):  # tasks that end give their bytes back
                await raw.tasks.Cancel(pb.CancelRequest(task=pb.TaskRef(key=f"t{i}")), timeout=30)
            assert [await _submit(raw, f"u{i}") for i in range(4)] == [grpc.StatusCode.OK] * 3 + [
                grpc.StatusCode.RESOURCE_EXHAUSTED
            ]
        finally:
            await raw.close()
    finally:
        assert sp.terminate() == 0, sp.log()
    # after a restart the recovered payloads are held again: still full
    sp = start_server(directory, BODY, name="bytes")
    try:
        raw = Raw(sp.grpc)
        try:
            assert await _submit(raw, "v0") == grpc.StatusCode.RESOURCE_EXHAUSTED
        finally:
            await raw.close()
    finally:
        assert sp.terminate() == 0, sp.log()
