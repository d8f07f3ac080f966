"""docs/how-to/grpc-web.md: ``[server.grpc_web]`` serves the Tasks and Admin services as gRPC-Web
on the HTTP listener of a real ``cronoq serve`` (sonora's client makes the calls), with the
same auth, CORS preflights for the allowed origins only, and the loopback ``Host`` check
without auth."""

from __future__ import annotations

import asyncio
import base64
import http.client
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from .procs import TOKENS, ServerProc, md, pb, start_server

sonora_aio = pytest.importorskip("sonora.aio")

from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc  # noqa: E402

ORIGIN = "https://dash.example.com"
BODY = f"""
[server.grpc_web]
allowed_origins = ["{ORIGIN}", "http://localhost:8000"]

[[pools]]
name = "default"

[[pools]]
name = "a"

[[auth.tokens]]
token = "{TOKENS["client_a"]}"
role = "client"
pools = ["a"]

[[auth.tokens]]
token = "{TOKENS["admin"]}"
role = "admin"
"""


class WebChannel:
    """sonora's aio channel under the generated stubs (which pass ``_registered_method``)."""

    def __init__(self, target: str) -> None:
        self.inner = sonora_aio.insecure_web_channel(f"http://{target}")

    def unary_unary(self, path: str, request_serializer: Any, response_deserializer: Any, **_: Any) -> Any:
        return self.inner.unary_unary(path, request_serializer, response_deserializer)

    def unary_stream(self, path: str, request_serializer: Any, response_deserializer: Any, **_: Any) -> Any:
        return self.inner.unary_stream(path, request_serializer, response_deserializer)

    def stream_unary(self, *a: Any, **_: Any) -> Any:
        return None

    stream_stream = stream_unary

    async def close(self) -> None:
        await self.inner._session.close()


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("grpcweb"), BODY, name="grpcweb")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


def request(
    sp: ServerProc, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    host, port = sp.http.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


async def test_submit_and_get_over_grpc_web(web_server: ServerProc) -> None:
    ch = WebChannel(web_server.http)
    try:
        tasks = pb_grpc.TasksStub(ch)  # type: ignore[no-untyped-call]
        sub = await tasks.Submit(
            pb.SubmitRequest(task=pb.TaskSpec(pool="a", payload=b"hi")), metadata=md(TOKENS["client_a"])
        )
        info = await tasks.Get(pb.GetRequest(task=pb.TaskRef(id=sub.id)), metadata=md(TOKENS["client_a"]))
        assert info.id == sub.id and info.pool == "a"
        # the token's restrictions hold: another pool is NOT_FOUND (as a missing one: no
        # oracle), no token UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as ei:
            await tasks.Submit(
                pb.SubmitRequest(task=pb.TaskSpec(pool="default")), metadata=md(TOKENS["client_a"])
            )
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as ei:
            await tasks.Get(pb.GetRequest(task=pb.TaskRef(id=sub.id)))
        assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
        admin = pb_grpc.AdminStub(ch)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as ei:
            await admin.Snapshot(pb.Empty(), metadata=md(TOKENS["client_a"]))
        assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
        snap = await admin.Snapshot(pb.Empty(), metadata=md(TOKENS["admin"]))
        assert {p.name for p in snap.pools} == {"default", "a"}
    finally:
        await ch.close()


def test_cors_preflight_for_allowed_origins_only(web_server: ServerProc) -> None:
    pre = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
    }
    status, headers, _ = request(web_server, "OPTIONS", "/cronoq.v1.Tasks/Submit", {**pre, "origin": ORIGIN})
    assert status == 204
    assert headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in headers["access-control-allow-headers"]
    assert "POST" in headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in headers
    status, headers, _ = request(
        web_server, "OPTIONS", "/cronoq.v1.Tasks/Submit", {**pre, "origin": "https://evil.example.com"}
    )
    assert status == 403 and "access-control-allow-origin" not in headers


def frame(msg: bytes) -> bytes:
    return struct.pack(">BI", 0, len(msg)) + msg


def test_text_mode_call_from_an_allowed_and_a_refused_origin(web_server: ServerProc) -> None:
    body = base64.b64encode(frame(pb.Empty().SerializeToString()))
    headers = {
        "content-type": "application/grpc-web-text",
        "accept": "application/grpc-web-text",
        "x-grpc-web": "1",
        "authorization": f"Bearer {TOKENS['admin']}",
    }
    status, got, data = request(
        web_server, "POST", "/cronoq.v1.Admin/Snapshot", {**headers, "origin": ORIGIN}, body
    )
    assert status == 200 and got["access-control-allow-origin"] == ORIGIN
    # each frame is base64 on its own (padding may end a chunk)
    raw = b"".join(base64.b64decode(chunk) for chunk in re.findall(rb"[^=]+=*", data))
    n = struct.unpack(">I", raw[1:5])[0]
    snap = pb.SnapshotResponse.FromString(raw[5 : 5 + n])
    assert {p.name for p in snap.pools} == {"default", "a"}
    assert b"grpc-status:0" in raw[5 + n :].replace(b" ", b"")
    # a page of another origin: refused before the call, and unreadable (no CORS header)
    status, got, _ = request(
        web_server,
        "POST",
        "/cronoq.v1.Admin/Snapshot",
        {**headers, "origin": "https://evil.example.com"},
        body,
    )
    assert status == 200 and got["grpc-status"] == str(grpc.StatusCode.PERMISSION_DENIED.value[0])
    assert "access-control-allow-origin" not in got
    # not gRPC-Web: the JSON app answers (404), the gRPC-Web paths are nothing else
    assert request(web_server, "GET", "/cronoq.v1.Admin/Snapshot", {})[0] == 404


def test_without_auth_only_loopback_hosts(tmp_path: Path) -> None:
    sp = start_server(tmp_path, '[server.grpc_web]\nallowed_origins = ["http://localhost:8000"]\n')
    try:
        body = frame(pb.Empty().SerializeToString())
        headers = {"content-type": "application/grpc-web+proto", "x-grpc-web": "1"}
        status, got, _ = request(sp, "POST", "/cronoq.v1.Admin/Snapshot", headers, body)
        assert status == 200 and got.get("grpc-status", "0") == "0"
        status, got, _ = request(
            sp, "POST", "/cronoq.v1.Admin/Snapshot", {**headers, "host": "attacker.example.com"}, body
        )
        assert got["grpc-status"] == str(grpc.StatusCode.PERMISSION_DENIED.value[0])
        assert "loopback" in got["grpc-message"]
    finally:
        assert sp.terminate() == 0, sp.log()


async def test_watch_streams_over_grpc_web(web_server: ServerProc) -> None:
    ch = WebChannel(web_server.http)
    try:
        tasks = pb_grpc.TasksStub(ch)  # type: ignore[no-untyped-call]
        call = tasks.Watch(
            pb.WatchRequest(pools=["a"], all_transitions=True), metadata=md(TOKENS["client_a"])
        )
        # the headers come once the subscription is live: nothing submitted afterwards is missed
        await asyncio.wait_for(call.initial_metadata(), 10)
        sub = await tasks.Submit(
            pb.SubmitRequest(task=pb.TaskSpec(pool="a")), metadata=md(TOKENS["client_a"])
        )
        event = await asyncio.wait_for(call.read(), 10)
        assert event.id == sub.id and event.pool == "a"
        call.__exit__(None, None, None)  # the client goes away: the server ends the stream
        # a pool outside the token's: refused (as a missing one) as a trailers-only answer
        bad = tasks.Watch(pb.WatchRequest(pools=["default"]), metadata=md(TOKENS["client_a"]))
        with pytest.raises(grpc.RpcError) as ei:
            await asyncio.wait_for(bad.read(), 10)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await ch.close()


def test_a_body_past_max_message_bytes_is_refused(web_server: ServerProc) -> None:
    headers = {"content-type": "application/grpc-web+proto", "authorization": f"Bearer {TOKENS['admin']}"}
    big = frame(b"\0" * (4 * 1024 * 1024 + 128 * 1024))
    status, got, _ = request(web_server, "POST", "/cronoq.v1.Tasks/Submit", headers, big)
    assert status == 200 and got["grpc-status"] == str(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
    assert "max_message_bytes" in got["grpc-message"]
