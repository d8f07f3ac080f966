"""Defect: memory a single token could take (issue #35, defect 4).

A 4 MB bulk ``request_key`` was accepted and remembered (250 calls took the server from 147 to
1,075 MB), a ``Watch`` filtering on 450,000 ids cost 61 MB and 256 of them were allowed per
token.  Now every string and list a client sends has a limit: ``max_request_key_len`` (256),
``max_filter_items`` (1000 ids, keys and pools in one filter) and the task limits for the keys,
kinds and tags of a filter; a worker's failure message is cut to ``max_report_message_len``.
Each refusal is INVALID_ARGUMENT / 400 ``invalid`` with the limit's name, on gRPC and HTTP.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import grpc

from server.procs import Raw, RawWorker, ServerProc, pb

from .probes import post_raw


def _get(addr: str, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://{addr}{path}", timeout=30) as resp:
            return resp.status, None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


async def _code(aw: Any) -> tuple[grpc.StatusCode, str]:
    try:
        await aw
    except grpc.aio.AioRpcError as e:
        return e.code(), e.details() or ""
    return grpc.StatusCode.OK, ""


async def test_a_long_request_key_is_refused(plain_server: ServerProc) -> None:
    filt = {"filter": {"pools": ["default"]}}
    status, reply = post_raw(
        plain_server.http, "/v1/tasks:cancel", json.dumps({**filt, "request_key": "k" * 4_000_000}).encode()
    )
    assert status == 400 and reply["code"] == "invalid", reply
    assert reply["error"] == "request_key is longer than 256 characters (limits.max_request_key_len)"
    status, reply = post_raw(
        plain_server.http, "/v1/tasks:cancel", json.dumps({**filt, "request_key": "k" * 256}).encode()
    )
    assert status == 200, reply
    raw = Raw(plain_server.grpc)
    try:
        req = pb.BulkRequest(filter=pb.TaskFilter(pools=["default"]), request_key="k" * 257)
        code, details = await _code(raw.tasks.CancelWhere(req))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "request_key is longer than 256" in details
    finally:
        await raw.close()


async def test_watch_filters_are_bounded(plain_server: ServerProc) -> None:
    raw = Raw(plain_server.grpc)
    try:
        for req, message in (
            (
                pb.WatchRequest(ids=list(range(1, 450_001))),
                "filter has too many items (450000, limits.max_filter_items 1000)",
            ),
            (pb.WatchRequest(ids=list(range(1, 1001)), keys=["k"]), "max_filter_items 1000"),
            (pb.WatchRequest(keys=["k" * 257]), "key is longer than 256 characters"),
        ):
            call = raw.tasks.Watch(req)
            code, details = await _code(call.read())
            assert code == grpc.StatusCode.INVALID_ARGUMENT and message in details, details
        ok = raw.tasks.Watch(pb.WatchRequest(ids=list(range(1, 1001))))
        await ok.initial_metadata()  # (1,000 items: subscribed)
        ok.cancel()
        q = urllib.parse.urlencode([("id", str(i)) for i in range(1, 1002)])
        status, reply = _get(plain_server.http, f"/v1/events?{q}")
        assert status == 400 and "max_filter_items" in reply["error"], reply
        code, details = await _code(raw.tasks.ListTasks(pb.ListTasksRequest(kinds=["k"] * 1001)))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "max_filter_items" in details
        status, reply = post_raw(
            plain_server.http, "/v1/tasks:replay", json.dumps({"filter": {"kinds": ["x" * 129]}}).encode()
        )
        assert status == 400, reply
        assert reply["error"] == "kind is longer than 128 characters (limits.max_kind_len)", reply
    finally:
        await raw.close()


async def test_a_long_failure_message_is_cut(plain_server: ServerProc) -> None:
    n = 100_000
    raw = Raw(plain_server.grpc)
    w = RawWorker(raw, slots=1, version=5)
    try:
        sub = await raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec()))
        while (msg := await w.read()).WhichOneof("msg") != "lease":
            pass
        w.send(fail=pb.Fail(lease=msg.lease.lease, message="x" * n, permanent=True))
        res = await raw.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=sub.id), timeout_s=30))
        assert res.message == "x" * 4096 + "… (cut at 4096 characters)"
        await w.close()
    finally:
        await raw.close()
