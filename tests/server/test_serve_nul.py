"""A NUL character (U+0000) in a name or key a store keeps as text, sent to a real ``cronoq
serve`` (SQLite, and PostgreSQL, whose text cannot hold one): every gRPC and HTTP entry answers
INVALID_ARGUMENT (an item of a ``SubmitMany`` too; HTTP 400 with code ``invalid``) naming the
field (docs/reference/behaviour.md#task-fields), and the server keeps leading and accepting
the other submissions.  Before, the write failed its whole group commit and the leader stepped
down, again at each such submission."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cronoq.client import Client
from cronoq.errors import InvalidSubmission

from .procs import Raw, ServerProc, http_call, pb, postgres_store, start_server

NUL = "n\x00l"
BODY = '[[pools]]\nname = "default"\n'


def refused(what: str) -> str:
    return f"{what} must not contain a NUL character (U+0000)"


@pytest.fixture(params=["sqlite", "postgres"])
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ServerProc]:
    async with contextlib.AsyncExitStack() as stack:
        store = None
        if request.param == "postgres":
            store = await stack.enter_async_context(postgres_store("cronoq_nul"))
        sp = start_server(tmp_path, BODY, name="nul", store=store)
        try:
            yield sp
        finally:
            code = sp.terminate()
            assert code == 0, sp.log()


async def _refused(call: object) -> str:
    """The details of a raw call that must end INVALID_ARGUMENT."""
    with pytest.raises(grpc.aio.AioRpcError) as ei:
        await call  # type: ignore[misc]
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value.details()
    return ei.value.details() or ""


def _post(sp: ServerProc, path: str, body: object) -> tuple[int, Any]:
    data = json.dumps(body).encode()  # (json escapes the NUL as \u0000)
    return http_call(f"http://{sp.http}{path}", data, {"content-type": "application/json"}, "POST")


async def test_a_nul_is_refused_on_every_entry_and_the_server_keeps_leading(server: ServerProc) -> None:
    raw = Raw(server.grpc)
    try:
        for field in ("key", "kind", "pool", "tenant"):
            spec = pb.TaskSpec(**{field: NUL})  # type: ignore[arg-type]
            assert refused(field) in await _refused(raw.tasks.Submit(pb.SubmitRequest(task=spec)))
        dep = pb.Dep(target=pb.TaskRef(key=NUL))
        details = await _refused(raw.tasks.Submit(pb.SubmitRequest(task=pb.TaskSpec(deps=[dep]))))
        assert refused("dependency key") in details
        # SubmitMany: the NUL item answers ``invalid_argument``, the others are submitted
        many = await raw.tasks.SubmitMany(
            pb.SubmitManyRequest(tasks=[pb.TaskSpec(key="m1"), pb.TaskSpec(kind=NUL), pb.TaskSpec(key="m2")])
        )
        outcomes = [r.WhichOneof("outcome") for r in many.results]
        assert outcomes == ["submitted", "error", "submitted"]
        err = many.results[1].error
        assert (err.code, err.message) == ("invalid_argument", refused("kind"))
        # SubmitBatch: all or nothing
        batch = pb.SubmitBatchRequest(tasks=[pb.TaskSpec(key="b1"), pb.TaskSpec(tenant=NUL)])
        assert refused("tenant") in await _refused(raw.tasks.SubmitBatch(batch))
        # a recurring schedule's name or template, a signal's name, a bulk request key
        rec = pb.RecurringRequest(name=NUL, cron="0 0 * * *", template=pb.TaskSpec())
        assert refused("recurring schedule name") in await _refused(raw.admin.AddRecurring(rec))
        rec = pb.RecurringRequest(name="nightly", cron="0 0 * * *", template=pb.TaskSpec(kind=NUL))
        assert refused("kind") in await _refused(raw.admin.AddRecurring(rec))
        assert refused("a signal name") in await _refused(raw.tasks.Signal(pb.SignalRequest(name=NUL)))
        bulk = pb.BulkRequest(filter=pb.TaskFilter(kinds=["none"]), request_key=NUL)
        assert refused("request_key") in await _refused(raw.tasks.CancelWhere(bulk))
        # a pause names a configured pool: a NUL one is unknown
        with pytest.raises(grpc.aio.AioRpcError) as ei:
            await raw.admin.PausePool(pb.PoolRequest(pool=NUL))
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await raw.close()
    # HTTP: the JSON body's string fields
    status, body = await asyncio.to_thread(_post, server, "/v1/tasks", {"payload": None, "kind": NUL})
    assert (status, body.get("code"), body.get("error")) == (400, "invalid", refused("kind")), body
    # the Client refuses it before sending
    async with Client(server.grpc) as c:
        with pytest.raises(InvalidSubmission, match="key must not contain a NUL"):
            await c.submit(b"x", key=NUL)
        # the server still leads and commits the next submissions
        h = await c.submit(b"after", key="after", kind="k")
        info = await c.get("after")
        assert (info.id, info.kind) == (h.id, "k")
        assert (await c.get("m1")).key == "m1" and (await c.get("m2")).key == "m2"
    log = server.log()
    assert "lost leadership" not in log and "store commit failed" not in log, log
