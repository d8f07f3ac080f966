"""docs/how-to/security.md#certificate-principals: ``[[auth.certs]]`` maps client
certificates (mutual TLS) to roles with a token's restrictions, over gRPC and HTTP, on a real
``cronoq serve`` with certificates generated here."""

from __future__ import annotations

import asyncio
import http.client
import json
import shutil
import ssl
import struct
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from .procs import TOKENS, Raw, RawWorker, ServerProc, code_of, make_certs, md, pb, start_server, tls_toml

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

CLIENTS = {
    "client": "DNS:client.example.com",
    "worker": "DNS:Worker.Example.com,IP:10.0.0.1",
    "admin": "DNS:admin.example.com",
    "stranger": "DNS:stranger.example.com",
}

BODY = f"""
[server.grpc_web]
allowed_origins = ["https://dash.example.com"]

[[pools]]
name = "a"

[[pools]]
name = "b"

[[pools]]
name = "w"

[[auth.tokens]]
token = "{TOKENS["client"]}"
role = "client"

[[auth.certs]]
dns = "client.example.com"
role = "client"
pools = ["a"]

[[auth.certs]]
dns = "worker.example.com"
role = "worker"
pools = ["w"]
labels = ["zone=z1"]

[[auth.certs]]
dns = "admin.example.com"
role = "admin"
"""


@dataclass
class Mtls:
    sp: ServerProc
    dir: Path

    def creds(self, name: str) -> grpc.ChannelCredentials:
        d = self.dir
        return grpc.ssl_channel_credentials(
            root_certificates=(d / "ca.pem").read_bytes(),
            private_key=(d / f"{name}.key").read_bytes(),
            certificate_chain=(d / f"{name}.pem").read_bytes(),
        )

    def raw(self, name: str) -> Raw:
        raw = Raw.__new__(Raw)
        raw.channel = grpc.aio.secure_channel(self.sp.grpc, self.creds(name))
        raw.tasks, raw.admin, raw.workers = _stubs(raw.channel)
        return raw

    def http(
        self,
        name: str,
        method: str,
        path: str,
        body: object = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, object]]:
        ctx = ssl.create_default_context(cafile=str(self.dir / "ca.pem"))
        ctx.load_cert_chain(self.dir / f"{name}.pem", self.dir / f"{name}.key")
        data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json", **(headers or {})}
        req = urllib.request.Request(
            f"https://{self.sp.http}{path}", data=data, method=method, headers=headers
        )
        if token is not None:
            req.add_header("authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


def _stubs(channel: grpc.aio.Channel) -> tuple[object, object, object]:
    from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc

    return pb_grpc.TasksStub(channel), pb_grpc.AdminStub(channel), pb_grpc.WorkersStub(channel)


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mtls]:
    d = tmp_path_factory.mktemp("mtls")
    make_certs(d, CLIENTS)
    sp = start_server(d, tls_toml(d) + BODY, name="mtls")
    try:
        yield Mtls(sp, d)
    finally:
        assert sp.terminate() == 0, sp.log()


def submit(pool: str, payload: bytes = b"x") -> pb.SubmitRequest:
    return pb.SubmitRequest(task=pb.TaskSpec(pool=pool, payload=payload))


async def test_client_certificate_submits_within_its_pools(mtls: Mtls) -> None:
    raw = mtls.raw("client")
    try:
        sub = await raw.tasks.Submit(submit("a"))  # type: ignore[attr-defined]
        info = await raw.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=sub.id)))  # type: ignore[attr-defined]
        assert info.id == sub.id and info.pool == "a"
        assert await code_of(raw.tasks.Submit(submit("b"))) == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
        # a client role may not Work, Snapshot or add recurring schedules
        assert await code_of(raw.admin.Snapshot(pb.Empty())) == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
        w = RawWorker(raw, "a")
        assert await asyncio.wait_for(w.call.code(), 10) == grpc.StatusCode.PERMISSION_DENIED
        # a server stream (Watch) is checked too, and works for the certificate's pools
        watch = raw.tasks.Watch(pb.WatchRequest(pools=["a"]))  # type: ignore[attr-defined]
        await asyncio.wait_for(watch.initial_metadata(), 10)
        watch.cancel()
        bad = raw.tasks.Watch(pb.WatchRequest(pools=["b"]))  # type: ignore[attr-defined]
        assert await asyncio.wait_for(bad.code(), 10) == grpc.StatusCode.NOT_FOUND  # (no oracle)
    finally:
        await raw.close()


async def test_worker_certificate_works_with_its_labels(mtls: Mtls) -> None:
    client, worker = mtls.raw("admin"), mtls.raw("worker")
    try:
        assert await code_of(worker.tasks.Submit(submit("w"))) == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
        w = RawWorker(worker, "w")
        assert (await w.read()).WhichOneof("msg") == "registered"
        sub = await client.tasks.Submit(submit("w", b"job"))  # type: ignore[attr-defined]
        lease = (await w.read()).lease
        assert lease.task_id == sub.id and lease.payload == b"job"
        w.send(complete=pb.Complete(lease=lease.lease, output=b"done"))
        res = await client.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=sub.id), timeout_s=10))  # type: ignore[attr-defined]
        assert res.status == pb.TASK_STATUS_SUCCEEDED and res.output == b"done"
        workers = await client.admin.ListWorkers(pb.Empty())  # type: ignore[attr-defined]
        assert [dict(x.labels) for x in workers.workers if x.pool == "w"] == [{"zone": "z1"}]
        await w.close()
        # pool b is not the certificate's: as unknown as a missing pool
        wb = RawWorker(worker, "b")
        assert await asyncio.wait_for(wb.call.code(), 10) == grpc.StatusCode.NOT_FOUND
    finally:
        await client.close()
        await worker.close()


async def test_unmapped_certificate_is_unauthenticated(mtls: Mtls) -> None:
    raw = mtls.raw("stranger")
    try:
        for call in (raw.tasks.Submit(submit("a")), raw.admin.Snapshot(pb.Empty())):  # type: ignore[attr-defined]
            with pytest.raises(grpc.aio.AioRpcError) as ei:
                await call
            assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert ei.value.details() == (
                "client certificate (DNS stranger.example.com) is not mapped by [[auth.certs]]"
            )
        for _ in range(10):  # (a race once gave INTERNAL here: grpc_workers._refuse)
            w = RawWorker(raw, "a")
            assert await asyncio.wait_for(w.call.code(), 10) == grpc.StatusCode.UNAUTHENTICATED
        # the refusal waits for the worker's Register: a status sent while that write is in
        # flight makes grpcio's client report INTERNAL instead (grpc/grpc#36066)
        written: list[bool] = []

        async def late_register() -> AsyncIterator[pb.WorkerMessage]:
            await asyncio.sleep(0.1)  # a worker slow to write
            written.append(True)
            yield pb.WorkerMessage(register=pb.Register(pool="a", slots=1, protocol_version=3))
            await asyncio.Event().wait()  # (cancelled with the call)

        call = raw.workers.Work(late_register())
        assert await asyncio.wait_for(call.code(), 10) == grpc.StatusCode.UNAUTHENTICATED
        assert written, "refused before the worker's Register was read"
    finally:
        await raw.close()
    assert mtls.http("stranger", "GET", "/v1/snapshot") == (
        401,
        {
            "error": "client certificate (DNS stranger.example.com) is not mapped by [[auth.certs]]",
            "code": "unauthenticated",
        },
    )


async def test_a_sent_token_takes_precedence_over_the_certificate(mtls: Mtls) -> None:
    stranger, client = mtls.raw("stranger"), mtls.raw("client")
    try:
        # an unmapped certificate with a valid token: the token decides (and allows pool b)
        sub = await stranger.tasks.Submit(submit("b"), metadata=md(TOKENS["client"]))  # type: ignore[attr-defined]
        assert sub.id > 0
        # a mapped certificate with a bad token: the token decides (UNAUTHENTICATED)
        bad = client.tasks.Submit(submit("a"), metadata=md("not-a-valid-token-123"))  # type: ignore[attr-defined]
        assert await code_of(bad) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await stranger.close()
        await client.close()


def test_http_certificate_principals(mtls: Mtls) -> None:
    status, body = mtls.http("client", "POST", "/v1/tasks", {"pool": "a", "payload": {"n": 1}})
    assert status == 200, body
    status, got = mtls.http("client", "GET", f"/v1/tasks/{body['id']}")
    assert status == 200 and got["pool"] == "a"
    status, err = mtls.http("client", "POST", "/v1/tasks", {"pool": "b"})
    assert (status, err["code"]) == (404, "unknown_pool")
    assert mtls.http("client", "GET", "/v1/snapshot")[0] == 403
    assert mtls.http("admin", "GET", "/v1/snapshot")[0] == 200
    # a sent token decides, here for a certificate no entry maps
    status, _ = mtls.http("stranger", "POST", "/v1/tasks", {"pool": "b"}, token=TOKENS["client"])
    assert status == 200


#: what a page on another origin makes a browser send, with the client certificate it holds
CROSS_SITE = [
    {"origin": "https://evil.example", "content-type": "text/plain"},
    {"origin": "null", "content-type": "application/json"},
    {"sec-fetch-site": "cross-site", "content-type": "application/x-www-form-urlencoded"},
]


def test_a_certificate_is_no_credential_for_a_cross_site_write(mtls: Mtls) -> None:
    """Defect: a page on another origin, in a browser holding the admin's client certificate,
    paused a pool and cancelled every task (the origin check ran only without auth)."""
    status, body = mtls.http(
        "admin", "POST", "/v1/tasks", {"pool": "b", "key": "csrf-victim", "start_in_s": 3600}
    )
    assert status == 200, body
    writes: list[tuple[str, str, bytes]] = [
        ("POST", "/v1/pools/b/pause", b"{}"),
        ("POST", "/v1/tasks:cancel", b'{"filter": {}}'),
        ("POST", "/v1/tasks/csrf-victim/cancel", b""),
        ("POST", "/v1/tasks", b'{"pool": "b", "key": "csrf-new"}'),
    ]
    for headers in CROSS_SITE:
        for method, path, raw in writes:
            status, err = mtls.http("admin", method, path, raw, headers=headers)
            assert (status, err["code"]) == (403, "permission_denied"), (headers, path, err)
            assert "cross-site request refused" in str(err["error"])
        # reads stay allowed
        assert mtls.http("admin", "GET", "/v1/tasks/csrf-victim", headers=headers)[0] == 200
    # a form or text body is refused even without an Origin (a browser that sends none)
    status, err = mtls.http(
        "admin", "POST", "/v1/tasks:cancel", b'{"filter": {}}', headers={"content-type": "text/plain"}
    )
    assert (status, err["code"]) == (415, "invalid_argument"), err
    # nothing happened
    status, task = mtls.http("admin", "GET", "/v1/tasks/csrf-victim")
    assert status == 200 and task["status"] == "scheduled", task
    assert mtls.http("admin", "GET", "/v1/tasks/csrf-new")[0] == 404
    pools = {p["name"]: p for p in mtls.http("admin", "GET", "/v1/snapshot")[1]["pools"]}  # type: ignore[attr-defined]
    assert pools["b"]["paused"] is False
    # the same request from the server's own origin (the dashboard), or a program, goes through
    own = {"origin": f"https://{mtls.sp.http}"}
    status, body = mtls.http("admin", "POST", "/v1/tasks/csrf-victim/cancel", b"", headers=own)
    assert (status, body) == (200, {"cancelled": True})
    # a bearer token (never added by a browser on its own) is not refused cross-site
    status, body = mtls.http(
        "admin", "POST", "/v1/tasks", {"pool": "a"}, token=TOKENS["client"], headers=CROSS_SITE[1]
    )
    assert status == 200, body


def test_grpc_web_with_a_client_certificate(mtls: Mtls) -> None:
    pytest.importorskip("sonora")
    host, port = mtls.sp.http.rsplit(":", 1)

    def call(name: str, method: str, msg: bytes) -> tuple[dict[str, str], bytes]:
        ctx = ssl.create_default_context(cafile=str(mtls.dir / "ca.pem"))
        ctx.load_cert_chain(mtls.dir / f"{name}.pem", mtls.dir / f"{name}.key")
        conn = http.client.HTTPSConnection(host, int(port), timeout=10, context=ctx)
        try:
            body = struct.pack(">BI", 0, len(msg)) + msg
            conn.request("POST", method, body=body, headers={"content-type": "application/grpc-web+proto"})
            r = conn.getresponse()
            return {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    # the certificate's principal reaches the servicer (pool restriction of the client cert)
    ok = pb.SubmitRequest(task=pb.TaskSpec(pool="a")).SerializeToString()
    headers, data = call("client", "/cronoq.v1.Tasks/Submit", ok)
    assert (
        "grpc-status" not in headers
        and pb.SubmitResponse.FromString(data[5 : 5 + int.from_bytes(data[1:5])]).id
    )
    denied = pb.SubmitRequest(task=pb.TaskSpec(pool="b")).SerializeToString()
    # NOT_FOUND: another pool answers as a missing one (no oracle)
    assert call("client", "/cronoq.v1.Tasks/Submit", denied)[0]["grpc-status"] == "5"
    assert call("stranger", "/cronoq.v1.Admin/Snapshot", b"")[0]["grpc-status"] == "16"
    headers, data = call("admin", "/cronoq.v1.Admin/Snapshot", b"")
    assert "grpc-status" not in headers and b"grpc-status: 0" in data
