"""cronoq.server.grpc_web in-process (docs/how-to/grpc-web.md): a client that goes away before
its request body is complete submits nothing and gets no answer; the JSON API is untouched."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server.http_api import create_http_app

from .test_http_support import CLIENT, TOKENS, serve

pytest.importorskip("sonora")

GRPC_WEB = '[server.grpc_web]\nallowed_origins = ["https://dash.example.com"]\n'


async def test_a_client_gone_mid_body_submits_nothing() -> None:
    async with serve(GRPC_WEB + TOKENS) as (app, client):
        web = create_http_app(app)
        msg = pb.SubmitRequest(task=pb.TaskSpec(payload=b"x")).SerializeToString()
        frame = struct.pack(">BI", 0, len(msg)) + msg
        events: list[dict[str, Any]] = [
            {"type": "http.request", "body": frame[:3], "more_body": True},
            {"type": "http.disconnect"},
        ]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return events.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/cronoq.v1.Tasks/Submit",
            "scheme": "http",
            "headers": [
                (b"host", b"127.0.0.1:7071"),
                (b"content-type", b"application/grpc-web+proto"),
                (b"authorization", f"Bearer {CLIENT}".encode()),
            ],
        }
        await web(scope, receive, send)
        assert sent == []
        page, _ = app.list_tasks(None, [], [], 0, 10)
        assert page == []
        # the JSON API beside it answers as before
        r = await client.post("/v1/tasks", json={"payload": 1}, headers={"authorization": f"Bearer {CLIENT}"})
        assert r.status_code == 200, r.text
