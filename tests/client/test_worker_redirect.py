"""The remote Worker follows shard redirects (a refused Register naming the owning shard's
endpoint) with the rules of docs/reference/behaviour.md: at most MAX_REDIRECTS in a row, never
from TLS to plain http, never to userinfo, the token over plain http to loopback only, back to
the configured target when the shard it was sent to is unavailable; and the published Worker's
attributes and the Client's target forms."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

from cronoq import CronoqError
from cronoq.client import CancelTask, Client, ClientError, Lease, Reject, Worker, task
from cronoq.client._channel import is_loopback_host, split_target
from cronoq.client.worker import MAX_REDIRECTS
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.proto.cronoq.v1 import cronoq_pb2_grpc as pb_grpc

FP = grpc.StatusCode.FAILED_PRECONDITION


async def echo(lease: Lease) -> object:
    return lease.value()


def redirect_md(endpoint: str, shard: str = "b") -> tuple[tuple[str, str], ...]:
    return (("cronoq-shard", shard), ("cronoq-shard-endpoint", endpoint))


def refuse(conn: Any, endpoint: str | None, shard: str = "b") -> None:
    msg = f"pool 'p' is served by shard '{shard}' at {endpoint}"
    conn.abort(FP, msg, redirect_md(endpoint, shard) if endpoint else ())


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    task_ = asyncio.create_task(worker.run())
    try:
        yield task_
    finally:
        if not task_.done():
            await asyncio.wait_for(worker.stop(grace=0.5), 10)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task_, 10)


async def test_follows_a_redirect_and_registers_at_the_owning_shard(fake: Any, fake2: Any) -> None:
    w = Worker(fake.target, "p", echo, token="worker-token-0123456789", backoff=(5.0, 5.0))
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        refuse(conn, f"http://{fake2.target}")
        # no backoff for a redirect: the next session goes straight to the endpoint named
        conn2 = await fake2.next_conn(timeout=2.0)
        reg = await conn2.recv_kind("register")
        assert reg.pool == "p"
        assert conn2.metadata["authorization"] == "Bearer worker-token-0123456789"  # loopback
        conn2.register_ok(worker_id=9)
        assert await w.wait_registered(5) == 9
        assert w.target == fake2.target
        conn2.lease(1, payload=b'{"a":1}', content_type="application/json")
        assert (await conn2.recv_kind("complete")).output == b'{"a":1}'


async def test_more_than_max_redirects_in_a_row_is_fatal(fake: Any) -> None:
    w = Worker(fake.target, "p", echo, backoff=(0.01, 0.01))
    run = asyncio.create_task(w.run())
    for _ in range(MAX_REDIRECTS + 1):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        refuse(conn, f"http://{fake.target}/")  # a trailing slash is allowed
    with pytest.raises(ClientError) as info:
        await asyncio.wait_for(run, 10)
    assert info.value.code == "failed_precondition"
    assert str(info.value.message).startswith(
        "worker redirected 4 times in a row, more than the 3 it follows: pool 'p' is served by shard 'b'"
    )


async def test_a_registration_resets_the_redirect_count(fake: Any) -> None:
    w = Worker(fake.target, "p", echo, backoff=(0.01, 0.01))
    async with running(w) as run:
        for _round in range(2):
            for _ in range(MAX_REDIRECTS):
                conn = await fake.next_conn()
                await conn.recv_kind("register")
                refuse(conn, f"http://{fake.target}")
            conn = await fake.next_conn()
            await conn.recv_kind("register")
            conn.register_ok()
            await w.wait_registered(5)
            conn.end()  # the session ends: the worker reconnects (to the redirect target)
        assert not run.done()


async def refused_fatally(fake: Any, endpoint: str | None, **worker: Any) -> ClientError:
    """Run a worker against ``fake``, refuse its registration naming ``endpoint``, and return
    the error its ``run()`` ends with (it must not reconnect)."""
    w = Worker(fake.target, "p", echo, backoff=(0.01, 0.01), **worker)
    run = asyncio.create_task(w.run())
    conn = await fake.next_conn()
    await conn.recv_kind("register")
    refuse(conn, endpoint)
    with pytest.raises(ClientError) as info:
        await asyncio.wait_for(run, 10)
    assert info.value.code == "failed_precondition"
    assert fake.conns.empty()  # no reconnect loop
    return info.value


async def test_failed_precondition_without_an_endpoint_is_fatal(fake: Any) -> None:
    await refused_fatally(fake, None)


@pytest.mark.parametrize(
    ("endpoint", "needle"),
    [
        ("http://user:secret@127.0.0.1:1", "userinfo"),
        ("http://127.0.0.1:1/api", "path"),
        ("ftp://127.0.0.1:1", "invalid endpoint"),
        ("http://127.0.0.1", "invalid endpoint"),  # no port
        ("http://shard-b.invalid:7070", "token over plain http"),
    ],
)
async def test_unsafe_redirects_are_refused(fake: Any, endpoint: str, needle: str) -> None:
    err = await refused_fatally(fake, endpoint, token="worker-token-0123456789")
    assert needle in err.message


async def test_token_over_plain_http_to_another_host_when_allowed(fake: Any) -> None:
    """insecure_redirect_http=True follows the redirect (the host here does not resolve: the
    worker then goes back to its configured target, which redirects it again)."""
    w = Worker(
        fake.target,
        "p",
        echo,
        token="worker-token-0123456789",
        backoff=(0.01, 0.01),
        insecure_redirect_http=True,
    )
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        refuse(conn, "http://shard-b.invalid:7070")
        # unreachable shard → back to the configured target
        conn = await fake.next_conn(timeout=15)
        await conn.recv_kind("register")
        conn.register_ok()
        await w.wait_registered(5)
        assert w.target == fake.target


async def test_unavailable_redirect_target_returns_to_the_configured_target(fake: Any, fake2: Any) -> None:
    fake2.standby = True  # answers UNAVAILABLE, as a shard without a leader
    w = Worker(fake.target, "p", echo, backoff=(0.01, 0.01))
    async with running(w):
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        refuse(conn, f"http://{fake2.target}")
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(worker_id=3)
        assert await w.wait_registered(5) == 3
        assert w.target == fake.target


async def test_redirects_to_an_unavailable_shard_are_not_in_a_row(fake: Any, fake2: Any) -> None:
    """A failover of the shard a worker is sent to: each redirect ends in UNAVAILABLE there and
    the worker goes back to its target; that is not a redirect "in a row", so more than
    MAX_REDIRECTS such rounds never end the worker (it backs off and registers once the shard
    is back)."""
    fake2.standby = True  # answers UNAVAILABLE, as a shard without a leader
    w = Worker(fake.target, "p", echo, backoff=(0.01, 0.01))
    async with running(w) as run:
        for _ in range(MAX_REDIRECTS + 2):
            conn = await fake.next_conn()
            await conn.recv_kind("register")
            refuse(conn, f"http://{fake2.target}")
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok(worker_id=7)
        assert await w.wait_registered(5) == 7
        assert not run.done()


async def test_no_redirect_from_tls_to_plain_http(
    tls_fake: Any, self_signed: tuple[bytes, bytes], fake2: Any
) -> None:
    w = Worker(
        f"https://localhost:{tls_fake.port}",
        "p",
        echo,
        credentials=grpc.ssl_channel_credentials(root_certificates=self_signed[1]),
        backoff=(0.01, 0.01),
    )
    run = asyncio.create_task(w.run())
    conn = await tls_fake.next_conn()
    await conn.recv_kind("register")
    refuse(conn, f"http://{fake2.target}")
    with pytest.raises(ClientError) as info:
        await asyncio.wait_for(run, 10)
    assert info.value.code == "failed_precondition"
    assert "from TLS to plain http" in info.value.message
    assert fake2.conns.empty()


async def test_client_https_target_turns_on_tls(tls_fake: Any, self_signed: tuple[bytes, bytes]) -> None:
    """``https://`` is TLS with the system roots: this self-signed server is then refused (a
    plaintext channel would fail differently), and with its root it works."""
    async with Client(f"https://localhost:{tls_fake.port}/") as client:
        with pytest.raises(ClientError) as info:
            await client.submit({"a": 1}, call_timeout=5)
        assert info.value.code == "unavailable"
    creds = grpc.ssl_channel_credentials(root_certificates=self_signed[1])
    async with Client(f"https://localhost:{tls_fake.port}", credentials=creds) as client:
        assert (await client.submit({"a": 1})).id >= 1


async def test_published_worker_attributes(fake: Any) -> None:
    w = Worker(
        fake.target,
        "p",
        echo,
        slots=4,
        name="w-1",
        labels={"zone": "z1"},
        reconnect=False,
        backoff=(0.2, 3.0),
        grace=7.5,
    )
    assert (w.slots, w.labels, w.name, w.handler, w.reconnect) == (4, {"zone": "z1"}, "w-1", echo, False)
    assert (w.backoff, w.grace, w.last_shutdown) == ((0.2, 3.0), 7.5, None)
    async with running(w) as run:
        conn = await fake.next_conn()
        await conn.recv_kind("register")
        conn.register_ok()
        await w.wait_registered(5)
        conn.send(shutdown=pb.Shutdown(reason="server shutting down"))
        conn.end()
        await asyncio.wait_for(run, 10)  # reconnect=False: run() returns when the session ends
        assert w.last_shutdown == "server shutting down"


def test_targets_may_carry_a_scheme_and_a_trailing_slash() -> None:
    assert split_target("https://sched.example.com:7070/") == ("sched.example.com:7070", True)
    assert split_target("HTTP://127.0.0.1:7070") == ("127.0.0.1:7070", False)
    assert split_target("grpc://[::1]:7070/") == ("[::1]:7070", False)
    assert split_target("127.0.0.1:7070") == ("127.0.0.1:7070", False)
    with pytest.raises(ValueError, match="must name a host"):
        split_target("https://")
    assert is_loopback_host("localhost") and is_loopback_host("127.3.2.1") and is_loopback_host("[::1]")
    assert not is_loopback_host("10.1.2.3") and not is_loopback_host("example.com")


async def test_client_accepts_http_and_grpc_prefixes(fake: Any) -> None:
    for target in (f"http://{fake.target}/", f"grpc://{fake.target}"):
        async with Client(target) as client:
            sub = await client.submit({"a": 1})
            assert sub.id >= 1


async def test_submit_wait_timeout_needs_wait(fake: Any) -> None:
    async with Client(fake.target) as client:
        with pytest.raises(ValueError, match="wait_timeout needs wait=True"):
            await client.submit({"a": 1}, wait_timeout=5)
    assert not [r for r in fake.requests if r[0] == "Submit"]  # nothing was sent


async def test_add_recurring_takes_a_prebuilt_spec(fake: Any) -> None:
    async with Client(fake.target) as client:
        spec = task({"job": "vacuum"}, pool="maint", kind="vacuum", priority="low")
        await client.add_recurring("nightly", "0 3 * * *", spec, tz="Europe/Berlin")
        req = fake.recurring["nightly"]
        assert (req.template.pool, req.template.kind, req.template.payload) == (
            "maint",
            "vacuum",
            b'{"job":"vacuum"}',
        )
        with pytest.raises(ValueError, match="not both"):
            await client.add_recurring("x", "0 3 * * *", spec, pool="other")


async def test_client_error_from_rpc(fake: Any) -> None:
    fake.fail("Get", grpc.StatusCode.NOT_FOUND, "unknown task 5")
    channel = grpc.aio.insecure_channel(fake.target)
    try:
        with pytest.raises(grpc.RpcError) as info:
            await pb_grpc.TasksStub(channel).Get(pb.GetRequest(task=pb.TaskRef(id=5)))
        err = ClientError.from_rpc(info.value)
        assert (type(err), err.code, err.message) == (ClientError, "not_found", "unknown task 5")
    finally:
        await channel.close()


def test_reject_and_cancel_task_are_cronoq_errors() -> None:
    assert isinstance(Reject("busy"), CronoqError) and isinstance(CancelTask("no"), CronoqError)
    assert Reject("busy").reason == "busy" and CancelTask("no").reason == "no"
