"""Auth of a real ``cronoq serve`` (docs/reference/behaviour.md#auth): each role × each call, pools, tenants,
tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import grpc
import pytest

from cronoq.client import Client, ClientError, Worker

from .procs import AUTH_TOML, TOKENS, Raw, RawWorker, ServerProc, md, pb, start_server

POOLS_TOML = """
[[pools]]
name = "default"

[[pools]]
name = "a"

[[pools]]
name = "b"
"""

DENIED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("auth"), POOLS_TOML + AUTH_TOML, name="auth")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


@pytest.fixture
async def raw(auth_server: ServerProc) -> AsyncIterator[Raw]:
    r = Raw(auth_server.grpc)
    try:
        yield r
    finally:
        await r.close()


def admin(sp: ServerProc) -> Client:
    return Client(sp.grpc, token=TOKENS["admin"])


# ---------------------------------------------------------------------------------------------
# the role matrix

Call = Callable[[Raw, tuple[tuple[str, str], ...]], Awaitable[grpc.StatusCode]]


async def _unary(coro: Awaitable[object]) -> grpc.StatusCode:
    try:
        await coro
    except grpc.aio.AioRpcError as e:
        return e.code()
    return grpc.StatusCode.OK


async def _watch(raw: Raw, m: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
    call = raw.tasks.Watch(pb.WatchRequest(), metadata=m)
    try:
        await asyncio.wait_for(call.initial_metadata(), 10)
        if not call.done():
            # A live watch must deliver the next event; a refused one ends with its code. (Not
            # "still open 50 ms later": a refusal can take longer than that to arrive.)
            admin = md(TOKENS["admin"])
            spec = pb.TaskSpec(pool="default")
            sub = await raw.tasks.Submit(pb.SubmitRequest(task=spec), metadata=admin)
            await raw.tasks.Cancel(pb.CancelRequest(task=pb.TaskRef(id=sub.id)), metadata=admin)
        try:
            msg = await asyncio.wait_for(call.read(), 10)
        except grpc.aio.AioRpcError as e:
            return e.code()
        if msg is grpc.aio.EOF:
            return await call.code()
        return grpc.StatusCode.OK
    finally:
        call.cancel()


async def _work(raw: Raw, m: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
    async def requests() -> AsyncIterator[pb.WorkerMessage]:
        yield pb.WorkerMessage(register=pb.Register(pool="default", slots=1, protocol_version=3))
        await asyncio.sleep(30)

    call = raw.workers.Work(requests(), metadata=m)
    try:
        msg = await asyncio.wait_for(call.read(), 10)
        assert msg.WhichOneof("msg") == "registered"
        return grpc.StatusCode.OK
    except grpc.aio.AioRpcError as e:
        return e.code()
    finally:
        call.cancel()


CALLS: dict[str, Call] = {
    "submit": lambda r, m: _unary(
        r.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(pool="default")), metadata=m)
    ),
    "submit_batch": lambda r, m: _unary(r.tasks.SubmitBatch(pb.SubmitBatchRequest(), metadata=m)),
    "submit_many": lambda r, m: _unary(r.tasks.SubmitMany(pb.SubmitManyRequest(), metadata=m)),
    "cancel": lambda r, m: _unary(r.tasks.Cancel(pb.CancelRequest(task=pb.TaskRef(id=12345)), metadata=m)),
    "get": lambda r, m: _unary(r.tasks.Get(pb.GetRequest(task=pb.TaskRef(id=12345)), metadata=m)),
    "list_tasks": lambda r, m: _unary(r.tasks.ListTasks(pb.ListTasksRequest(), metadata=m)),
    "wait": lambda r, m: _unary(r.tasks.Wait(pb.WaitRequest(task=pb.TaskRef(id=12345)), metadata=m)),
    "watch": _watch,
    "work": _work,
    "snapshot": lambda r, m: _unary(r.admin.Snapshot(pb.Empty(), metadata=m)),
    "add_recurring": lambda r, m: _unary(
        r.admin.AddRecurring(
            pb.RecurringRequest(name="matrix", cron="0 3 * * *", template=pb.TaskSpec(pool="default")),
            metadata=m,
        )
    ),
    "remove_recurring": lambda r, m: _unary(
        r.admin.RemoveRecurring(pb.RemoveRecurringRequest(name="matrix"), metadata=m)
    ),
    "list_workers": lambda r, m: _unary(r.admin.ListWorkers(pb.Empty(), metadata=m)),
    "list_recurring": lambda r, m: _unary(r.admin.ListRecurring(pb.Empty(), metadata=m)),
}

TASKS = {"submit", "submit_batch", "submit_many", "cancel", "get", "list_tasks", "wait", "watch"}
ALLOWED = {
    "client": TASKS,
    "worker": {"work"},
    "metrics": {"snapshot", "list_workers", "list_recurring"},
    "admin": set(CALLS),
}


@pytest.mark.parametrize("role", sorted(ALLOWED))
@pytest.mark.parametrize("call", sorted(CALLS))
async def test_role_matrix(raw: Raw, role: str, call: str) -> None:
    code = await CALLS[call](raw, md(TOKENS[role]))
    if call in ALLOWED[role]:
        assert code not in DENIED, f"{role} should be allowed to {call}, got {code}"
    else:
        assert code == grpc.StatusCode.PERMISSION_DENIED, f"{role} must not {call}, got {code}"


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(
    "header",
    [None, "Bearer not-a-configured-token-at-all", "Basic " + TOKENS["admin"], "Bearer"],
    ids=["missing", "bad", "wrong-scheme", "empty"],
)
async def test_missing_or_bad_token(raw: Raw, call: str, header: str | None) -> None:
    m = () if header is None else (("authorization", header),)
    assert await CALLS[call](raw, m) == grpc.StatusCode.UNAUTHENTICATED


async def test_auth_checked_before_the_body_is_read(auth_server: ServerProc) -> None:
    # A body that is not a valid protobuf: with a good token the call fails decoding it
    # (INTERNAL), without one it must be rejected before anyone looks at it.
    async with grpc.aio.insecure_channel(auth_server.grpc) as ch:
        call = ch.unary_unary("/cronoq.v1.Tasks/Submit")
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await call(b"\xff\xff\xff\xff", metadata=md(None))
        assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await call(b"\xff\xff\xff\xff", metadata=md(TOKENS["worker"]))
        assert ei.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await call(b"\xff\xff\xff\xff", metadata=md(TOKENS["client"]))
        assert ei.value.code() not in DENIED


async def test_client_library_sees_auth_errors(auth_server: ServerProc) -> None:
    async with Client(auth_server.grpc) as c:
        with pytest.raises(ClientError) as ei:
            await c.submit(pool="default")
        assert ei.value.code == "unauthenticated" and not ei.value.retryable
    async with Client(auth_server.grpc, token=TOKENS["metrics"]) as c:
        with pytest.raises(ClientError) as ei:
            await c.submit(pool="default")
        assert ei.value.code == "permission_denied"
        assert isinstance((await c.snapshot()).pools, list)
    w = Worker(auth_server.grpc, "default", lambda lease: None, token=TOKENS["client"], reconnect=False)
    with pytest.raises(ClientError) as ei:
        await asyncio.wait_for(w.run(), 10)
    assert ei.value.code == "permission_denied"


async def test_refused_worker_sessions_always_get_the_refusal(auth_server: ServerProc) -> None:
    """A ``Work`` stream refused at once (bad token) must end with UNAUTHENTICATED, never with
    grpcio's ``INTERNAL`` for the worker's ``Register`` write failing after the status arrived
    (grpc/grpc#36066; seen under load): the server reads ``Register`` before refusing."""
    raw = Raw(auth_server.grpc)
    try:
        for _ in range(10):
            w = RawWorker(raw, "default")  # (no token; writes Register at once)
            assert await asyncio.wait_for(w.call.code(), 10) == grpc.StatusCode.UNAUTHENTICATED
        written: list[bool] = []

        async def late_register() -> AsyncIterator[pb.WorkerMessage]:
            await asyncio.sleep(0.1)  # the worker is slow to write: the refusal must wait for it
            written.append(True)
            yield pb.WorkerMessage(register=pb.Register(pool="default", slots=1, protocol_version=3))
            await asyncio.Event().wait()  # (cancelled with the call)

        call = raw.workers.Work(late_register())
        assert await asyncio.wait_for(call.code(), 10) == grpc.StatusCode.UNAUTHENTICATED
        assert written, "the refusal was sent before the worker's Register was read"
    finally:
        await raw.close()
    w2 = Worker(auth_server.grpc, "default", lambda lease: None, token="bad-token-123456", reconnect=False)
    for _ in range(10):
        with pytest.raises(ClientError) as ei:
            await asyncio.wait_for(w2.run(), 10)
        assert ei.value.code == "unauthenticated"


# ---------------------------------------------------------------------------------------------
# pools


async def test_token_pools_restrict_everything(auth_server: ServerProc, raw: Raw) -> None:
    async with Client(auth_server.grpc, token=TOKENS["client_a"]) as ca, admin(auth_server) as adm:
        mine = await ca.submit(pool="a")
        other = await adm.submit(pool="b")
        # submit elsewhere (explicitly, or to the default pool)
        # (another token's pool answers as a missing one: no existence oracle)
        for pool in ("b", None):
            with pytest.raises(ClientError) as ei:
                await ca.submit(pool=pool)
            assert ei.value.code == "not_found"
        # tasks of other pools: as if they did not exist (no existence oracle)
        for op in (ca.get, ca.cancel, lambda ref: ca.wait(ref, timeout=0.1)):
            with pytest.raises(ClientError) as ei:
                await op(other.id)
            assert ei.value.code == "not_found"
        assert (await ca.get(mine.id)).pool == "a"
        # listings: only what the token may see; asking for another pool: as for a missing one
        page = await ca.list_tasks(limit=1000)
        assert {t.pool for t in page.tasks} == {"a"}
        with pytest.raises(ClientError) as ei:
            await ca.list_tasks(pools=["b"])
        assert ei.value.code == "not_found"
        code = await _watch_code(raw, TOKENS["client_a"], ["b"])
        assert code == grpc.StatusCode.NOT_FOUND
        # a watch without pools sees only pool a
        async with ca.watch() as events:
            await adm.cancel(other.id)
            await adm.cancel(mine.id)
            ev = await asyncio.wait_for(events.__anext__(), 10)
            assert ev.id == mine.id
        # workers: registering on another pool is refused as on a missing one, in the same words
        # (which say where a server's pools come from)
        for pool in ("b", "nope"):
            w = Worker(auth_server.grpc, pool, lambda lease: None, token=TOKENS["worker_a"], reconnect=False)
            with pytest.raises(ClientError) as ei:
                await asyncio.wait_for(w.run(), 10)
            assert (ei.value.code, ei.value.message) == (
                "not_found",
                f"unknown pool '{pool}' (a server has the pools its configuration declares under "
                "[[pools]]; started without one, only 'default')",
            )
        async with Worker(auth_server.grpc, "a", lambda lease: None, token=TOKENS["worker_a"]) as wa:
            await wa.wait_registered(10)


async def _watch_code(raw: Raw, token: str, pools: list[str]) -> grpc.StatusCode:
    call = raw.tasks.Watch(pb.WatchRequest(pools=pools), metadata=md(token))
    try:
        await asyncio.wait_for(call.initial_metadata(), 10)
        return await asyncio.wait_for(call.code(), 5)
    finally:
        call.cancel()


# ---------------------------------------------------------------------------------------------
# tenants


async def test_token_tenant_is_stamped_and_enforced(auth_server: ServerProc) -> None:
    async with (
        Client(auth_server.grpc, token=TOKENS["client_t1"]) as t1,
        Client(auth_server.grpc, token=TOKENS["client_t2"]) as t2,
    ):
        s = await t1.submit(pool="default")
        assert (await t1.get(s.id)).tenant == "t1"
        s_explicit = await t1.submit(pool="default", tenant="t1")
        with pytest.raises(ClientError) as ei:
            await t1.submit(pool="default", tenant="t2")
        assert ei.value.code == "permission_denied"
        for op in (t2.get, t2.cancel, lambda ref: t2.wait(ref, timeout=0.1)):
            with pytest.raises(ClientError) as ei:
                await op(s.id)
            assert ei.value.code == "not_found"
        ids_t2 = {t.id for t in (await t2.list_tasks(limit=1000)).tasks}
        assert s.id not in ids_t2
        ids_t1 = {t.id for t in (await t1.list_tasks(limit=1000)).tasks}
        assert {s.id, s_explicit.id} <= ids_t1
        assert await t1.cancel(s.id) and await t1.cancel(s_explicit.id)


async def test_submit_many_checks_each_item_against_the_token(auth_server: ServerProc) -> None:
    """A pool-restricted token's coalesced submits: its own pool's items are created, another
    pool's item is refused on its own with what Submit answers (NOT_FOUND: no oracle)."""
    async with Client(auth_server.grpc, token=TOKENS["client_a"]) as ca:
        ok, denied, ok2 = await asyncio.gather(
            ca.submit(1, pool="a"), ca.submit(2, pool="b"), ca.submit(3, pool="a"), return_exceptions=True
        )
        assert isinstance(denied, ClientError) and denied.code == "not_found"
        assert not isinstance(ok, BaseException) and not isinstance(ok2, BaseException)
        assert (await ca.get(ok.id)).pool == "a" and (await ca.get(ok2.id)).pool == "a"
