"""gRPC-Web framing against a real ``cronoq serve`` (issue #35, defect 9): a truncated, empty,
over-long or otherwise malformed request body is HTTP 400 (``grpc-status`` INVALID_ARGUMENT)
and runs nothing (it used to create tasks with an empty spec, or answer 500); a body that
arrives too slowly is cut off by the JSON API's body deadline (408)."""

from __future__ import annotations

import base64
import socket
import struct
import time
from collections.abc import Iterator
from urllib.parse import unquote

import grpc
import pytest

from .procs import Raw, ServerProc, pb, start_server

pytest.importorskip("sonora.aio")

BODY = '[server.grpc_web]\nallowed_origins = ["https://dash.example.com"]\n\n[[pools]]\nname = "default"\n'
SUBMIT = "/cronoq.v1.Tasks/Submit"
INVALID = str(grpc.StatusCode.INVALID_ARGUMENT.value[0])


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(
        tmp_path_factory.mktemp("gwframes"), BODY + "\n[limits]\nrequest_timeout_s = 1\n", name="gwframes"
    )
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


def frame(msg: bytes, flags: int = 0) -> bytes:
    return struct.pack(">BI", flags, len(msg)) + msg


def post(
    sp: ServerProc, body: bytes, ctype: str = "application/grpc-web+proto"
) -> tuple[int, dict[str, str]]:
    host, port = sp.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        head = f"POST {SUBMIT} HTTP/1.1\r\nhost: {sp.http}\r\ncontent-type: {ctype}\r\n"
        s.sendall(f"{head}content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), headers


SPEC = pb.SubmitRequest(task=pb.TaskSpec(pool="default", kind="ok")).SerializeToString()

MALFORMED = [
    ("empty", b"", "empty"),
    ("short header", b"\x00\x00\x00", "truncated frame header"),
    ("truncated", frame(SPEC)[:-3], "truncated frame"),
    ("announced too much", struct.pack(">BI", 0, 1000) + SPEC, "truncated frame"),
    ("over-long", frame(SPEC) + b"\x00\x00", "bytes after the message frame"),
    ("two frames", frame(SPEC) + frame(SPEC), "bytes after the message frame"),
    ("trailer flag", frame(SPEC, 0x80), "unsupported frame flags 0x80"),
    ("compressed", frame(SPEC, 0x01), "unsupported frame flags 0x01"),
    ("garbage", frame(b"\xff\xff\xff\xff\xff"), "not a SubmitRequest"),
    ("random bytes", bytes(range(256)) * 4, "malformed gRPC-Web body"),
]


@pytest.mark.parametrize(("name", "body", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_body_is_400_and_runs_nothing(
    web: ServerProc, name: str, body: bytes, message: str
) -> None:
    status, headers = post(web, body)
    assert (status, headers.get("grpc-status")) == (400, INVALID), (name, status, headers)
    assert message.lower() in unquote(headers["grpc-message"]), headers


def test_text_mode_garbage_is_400(web: ServerProc) -> None:
    text = "application/grpc-web-text"
    status, headers = post(web, b"!!not base64!!", text)
    assert (status, headers.get("grpc-status")) == (400, INVALID) and "not%20base64" in headers[
        "grpc-message"
    ]
    status, headers = post(web, base64.b64encode(frame(SPEC)[:-2]), text)
    assert status == 400 and "truncated frame" in unquote(headers["grpc-message"])


async def test_nothing_was_created_and_a_good_body_still_works(web: ServerProc) -> None:
    for _, body, _ in MALFORMED:
        post(web, body)
    raw = Raw(web.grpc)
    try:
        listed = await raw.tasks.ListTasks(pb.ListTasksRequest())
        assert list(listed.tasks) == []  # nothing created by any malformed body
        status, headers = post(web, frame(SPEC))
        assert status == 200 and headers.get("grpc-status", "0") == "0"  # (unary: in the trailers)
        listed = await raw.tasks.ListTasks(pb.ListTasksRequest())
        assert [t.kind for t in listed.tasks] == ["ok"]
    finally:
        await raw.close()


def test_a_slow_body_is_cut_off_by_the_body_deadline(web: ServerProc) -> None:
    host, port = web.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        head = f"POST {SUBMIT} HTTP/1.1\r\nhost: {web.http}\r\ncontent-type: application/grpc-web+proto\r\n"
        s.sendall(f"{head}content-length: 100\r\n\r\n".encode() + b"\x00\x00\x00")  # then nothing
        t0 = time.monotonic()
        data = s.recv(65536)
        took = time.monotonic() - t0
    assert data.startswith(b"HTTP/1.1 408"), data
    assert b"grpc-status: 4" in data.lower()
    assert 0.5 < took < 10, took  # request_timeout_s = 1 (it was never cut off)


def test_an_error_with_its_own_code_is_not_a_500(web: ServerProc) -> None:
    """``unknown pool`` carries an error code in its trailers (gRPC's ``abort`` takes them,
    sonora's did not: HTTP 500)."""
    bad = pb.SubmitRequest(task=pb.TaskSpec(pool="nope")).SerializeToString()
    host, port = web.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        head = f"POST {SUBMIT} HTTP/1.1\r\nhost: {web.http}\r\ncontent-type: application/grpc-web+proto\r\n"
        s.sendall(
            f"{head}content-length: {len(frame(bad))}\r\nconnection: close\r\n\r\n".encode() + frame(bad)
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data
    assert b"grpc-status:5" in data.replace(b" ", b"") and b"unknown%20pool" in data, data
