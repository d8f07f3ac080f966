"""Pause/resume, replay and bulk actions through a real server process, over gRPC and HTTP,
with the auth matrix (docs/how-to/operations.md)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cronoq.client import Client, ClientError

from .procs import AUTH_TOML, TOKENS, Raw, ServerProc, code_of, md, pb, start_server

POOLS_TOML = """
[[pools]]
name = "default"

[[pools]]
name = "a"

[[pools]]
name = "b"
"""

DENIED = grpc.StatusCode.PERMISSION_DENIED

#: an admin token restricted to pool "a" (this module's servers only)
ADMIN_A = "admin-a-token-0123456789"
ADMIN_A_TOML = f'[[auth.tokens]]\ntoken = "{ADMIN_A}"\nrole = "admin"\npools = ["a"]\n'


@pytest.fixture(scope="module")
def server_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ops")


@pytest.fixture(scope="module")
def srv(server_dir: Path) -> Iterator[ServerProc]:
    sp = start_server(server_dir, POOLS_TOML + AUTH_TOML + ADMIN_A_TOML, name="ops")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


@pytest.fixture
async def raw(srv: ServerProc) -> AsyncIterator[Raw]:
    r = Raw(srv.grpc)
    try:
        yield r
    finally:
        await r.close()


def http(sp: ServerProc, method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{sp.http}{path}", data=data, method=method)
    req.add_header("content-type", "application/json")
    if token is not None:
        req.add_header("authorization", f"Bearer {TOKENS.get(token, token)}")  # (a name, or a token)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def metrics(sp: ServerProc) -> str:
    req = urllib.request.Request(f"http://{sp.http}/metrics")
    req.add_header("authorization", f"Bearer {TOKENS['metrics']}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return str(resp.read().decode())


async def test_pause_is_admin_only_over_grpc(raw: Raw) -> None:
    req = pb.PoolRequest(pool="b")
    for role in ("client", "worker", "metrics", "client_a"):
        assert await code_of(raw.admin.PausePool(req, metadata=md(TOKENS[role]))) == DENIED, role
        assert (
            await code_of(
                raw.admin.TriggerRecurring(pb.RecurringNameRequest(name="x"), metadata=md(TOKENS[role]))
            )
            == DENIED
        )
    assert await code_of(raw.admin.PausePool(req, metadata=md(None))) == grpc.StatusCode.UNAUTHENTICATED
    ok = await raw.admin.PausePool(req, metadata=md(TOKENS["admin"]))
    assert ok.changed
    again = await raw.admin.PausePool(req, metadata=md(TOKENS["admin"]))
    assert not again.changed
    assert (await raw.admin.ResumePool(req, metadata=md(TOKENS["admin"]))).changed
    unknown = raw.admin.PausePool(pb.PoolRequest(pool="nope"), metadata=md(TOKENS["admin"]))
    assert await code_of(unknown) == grpc.StatusCode.NOT_FOUND
    rec = raw.admin.PauseRecurring(pb.RecurringNameRequest(name="nope"), metadata=md(TOKENS["admin"]))
    assert await code_of(rec) == grpc.StatusCode.NOT_FOUND


async def test_pause_over_http_shows_in_snapshot_and_metrics(srv: ServerProc) -> None:
    assert http(srv, "POST", "/v1/pools/b/pause", "client")[0] == 403
    assert http(srv, "POST", "/v1/pools/b/pause", "admin") == (200, {"changed": True})
    assert http(srv, "POST", "/v1/pools/nope/pause", "admin")[0] == 404
    assert http(srv, "POST", "/v1/pools/b/frobnicate", "admin")[0] == 404
    async with Client(srv.grpc, token=TOKENS["admin"]) as c:
        snap = await c.snapshot()
        assert snap.pool("b").paused and not snap.pool("a").paused  # type: ignore[union-attr]
    assert 'cronoq_pool_paused{pool="b"} 1.0' in metrics(srv)
    assert 'cronoq_pool_paused{pool="a"} 0.0' in metrics(srv)
    assert http(srv, "POST", "/v1/pools/b/resume", "admin") == (200, {"changed": True})
    assert 'cronoq_pool_paused{pool="b"} 0.0' in metrics(srv)


async def test_recurring_pause_and_run_now(srv: ServerProc) -> None:
    async with Client(srv.grpc, token=TOKENS["admin"]) as c:
        await c.add_recurring("nightly", "0 3 * * *", {"n": 1}, pool="b")
        assert await c.pause_recurring("nightly")
        info = {i.name: i for i in await c.list_recurring()}["nightly"]
        assert info.paused and info.skipped_paused == 0
        sub = await c.trigger_recurring("nightly")
        got = await c.get(sub.id)
        assert got.pool == "b" and got.status == "ready"
        assert await c.resume_recurring("nightly")
        code, body = http(srv, "POST", "/v1/recurring/nightly/run", "admin")
        assert code == 200 and body["duplicate"] is False and int(body["id"]) > sub.id
        assert http(srv, "POST", "/v1/recurring/nightly/pause", "client")[0] == 403
        assert http(srv, "POST", "/v1/recurring/nightly/pause", "admin") == (200, {"changed": True})
        assert http(srv, "POST", "/v1/recurring/nope/resume", "admin")[0] == 404
        # an admin token of pool "a": another pool's schedule is as unknown as a missing one,
        # for "run now" as for pause and resume (no existence oracle)
        unknown = {"error": "unknown recurring schedule 'nightly'", "code": "not_found"}
        for action in ("pause", "resume", "run"):
            assert http(srv, "POST", f"/v1/recurring/nightly/{action}", ADMIN_A) == (404, unknown)
        async with Client(srv.grpc, token=ADMIN_A) as a:
            with pytest.raises(ClientError) as e:
                await a.trigger_recurring("nightly")
            assert (e.value.code, e.value.message) == ("not_found", unknown["error"])
            # nor removed (as a missing one, gRPC as HTTP), nor replaced by one of its pool
            # (the name is taken: 409; it replaced pool b's schedule with one of pool a)
            assert await a.remove_recurring("nightly") is False
            assert http(srv, "DELETE", "/v1/recurring/nightly", ADMIN_A) == (200, {"removed": False})
            body = {"cron": "0 4 * * *", "task": {"pool": "a", "kind": "mine"}}
            code, out = http(srv, "PUT", "/v1/recurring/nightly", ADMIN_A, body)
            assert (code, out["code"]) == (409, "failed_precondition"), out
            with pytest.raises(ClientError) as e:
                await a.add_recurring("nightly", "0 4 * * *", pool="a")
            assert e.value.code == "failed_precondition"
        info = {i.name: i for i in await c.list_recurring()}["nightly"]
        assert (info.pool, info.cron) == ("b", "0 3 * * *")
        await c.remove_recurring("nightly")
        await c.cancel_where(pools=["b"])


async def test_replay_moves_the_key_and_links_both_ways(srv: ServerProc, raw: Raw) -> None:
    async with Client(srv.grpc, token=TOKENS["client"]) as c:
        orig = await c.submit({"x": 1}, pool="a", key="replay-me")
        # not finished yet: refused
        with pytest.raises(ClientError) as ei:
            await c.replay(orig.id)
        assert ei.value.code == "failed_precondition"
        assert await c.cancel(orig.id)
        new = await c.replay("replay-me")
        assert new.id != orig.id
        assert (await c.get("replay-me")).id == new.id  # the key moved
        o, n = await c.get(orig.id), await c.get(new.id)
        assert o.status == "cancelled" and o.replayed_by == new.id
        assert n.replay_of == orig.id and n.status == "ready" and n.pool == "a"
        with pytest.raises(ClientError) as ei:
            await c.replay(999_999)
        assert ei.value.code == "not_found"
        # over HTTP, by id, with an optional body
        code, body = http(srv, "POST", f"/v1/tasks/{orig.id}/replay", "client", {"force": False})
        assert code == 200 and int(body["id"]) > new.id
        assert http(srv, "POST", f"/v1/tasks/{new.id}/replay", "client")[0] == 409  # not finished
        assert http(srv, "POST", f"/v1/tasks/{orig.id}/replay", "client", {"nope": 1})[0] == 400
        await c.cancel_where(pools=["a"])
    # pool- and tenant-restricted tokens: another pool's task is as unknown as a missing one
    async with Client(srv.grpc, token=TOKENS["client"]) as c:
        other = await c.submit(None, pool="b")
        await c.cancel(other.id)
    req = pb.ReplayRequest(task=pb.TaskRef(id=other.id))
    assert await code_of(raw.tasks.Replay(req, metadata=md(TOKENS["client_a"]))) == grpc.StatusCode.NOT_FOUND
    assert await code_of(raw.tasks.Replay(req, metadata=md(TOKENS["client_t1"]))) == grpc.StatusCode.NOT_FOUND
    for role in ("worker", "metrics"):
        assert await code_of(raw.tasks.Replay(req, metadata=md(TOKENS[role]))) == DENIED


async def test_bulk_actions_are_scoped_to_the_token(srv: ServerProc, raw: Raw) -> None:
    async with Client(srv.grpc, token=TOKENS["client"]) as c:
        for _ in range(5):
            await c.submit(None, pool="a", kind="bulk")
            await c.submit(None, pool="b", kind="bulk")
    # a filter naming another pool answers as an unknown one (no oracle); no pool filter means
    # the token's pools
    bad = pb.BulkRequest(filter=pb.TaskFilter(pools=["b"], kinds=["bulk"]))
    code = await code_of(raw.tasks.CancelWhere(bad, metadata=md(TOKENS["client_a"])))
    assert code == grpc.StatusCode.NOT_FOUND
    for role in ("worker", "metrics"):
        assert await code_of(raw.tasks.CancelWhere(bad, metadata=md(TOKENS[role]))) == DENIED
    mine = pb.BulkRequest(filter=pb.TaskFilter(kinds=["bulk"]), request_key="k1")
    res = await raw.tasks.CancelWhere(mine, metadata=md(TOKENS["client_a"]))
    assert (res.matched, res.acted) == (5, 5)
    again = await raw.tasks.CancelWhere(mine, metadata=md(TOKENS["client_a"]))
    assert (again.matched, again.acted) == (5, 5)  # the first call's answer, not acted twice
    # the tenant token sees none of the tenant-less tasks
    t1 = await raw.tasks.CancelWhere(
        pb.BulkRequest(filter=pb.TaskFilter(kinds=["bulk"])), metadata=md(TOKENS["client_t1"])
    )
    assert (t1.matched, t1.acted) == (0, 0)
    # HTTP: bulk replay of the cancelled ones, then bulk cancel of the rest
    body = {"filter": {"pools": ["a"], "kinds": ["bulk"], "statuses": ["cancelled"]}, "request_key": "r1"}
    code, out = http(srv, "POST", "/v1/tasks:replay", "client", body)
    assert code == 200 and out == {"matched": 5, "acted": 5}
    code, out = http(
        srv, "POST", "/v1/tasks:cancel", "client", {"filter": {"kinds": ["bulk"], "statuses": ["ready"]}}
    )
    assert code == 200 and out == {"matched": 10, "acted": 10}
    # bad input
    assert http(srv, "POST", "/v1/tasks:cancel", "client", {"filter": {}})[0] == 400
    assert http(srv, "POST", "/v1/tasks:cancel", "client", {})[0] == 400
    rng = {"filter": {"created_after": "2026-01-02T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}}
    code, out = http(srv, "POST", "/v1/tasks:cancel", "client", rng)
    assert code == 400 and "created_after" in out["error"]
    assert http(srv, "POST", "/v1/tasks:cancel", "client", {"filter": {"statuses": ["succeeded"]}})[0] == 400
    assert http(srv, "POST", "/v1/tasks:cancel", "client", {"filter": {"pools": ["nope"]}})[0] == 404
    assert http(srv, "POST", "/v1/tasks:cancel", "client_a", {"filter": {"pools": ["b"]}})[0] == 404
    assert http(srv, "POST", "/v1/tasks:cancel", "metrics", {"filter": {"pools": ["b"]}})[0] == 403
    code, out = http(srv, "POST", "/v1/tasks:cancel", "client", {"filter": {"kinds": ["no-such-kind"]}})
    assert code == 200 and out == {"matched": 0, "acted": 0}


async def test_an_empty_pool_list_is_refused_not_read_as_every_pool(srv: ServerProc) -> None:
    """``"pools": []`` (a list computed empty) is a 400 like ``"kinds": []``, never "no pool
    filter": a bulk cancel of ``pools=[], statuses=["ready"]`` would cancel every pool's tasks."""
    async with Client(srv.grpc, token=TOKENS["client"]) as c:
        kept = await c.submit(None, pool="b", kind="empty-pools")
    body = {"filter": {"pools": [], "kinds": ["empty-pools"], "statuses": ["ready"]}}
    for action in ("cancel", "replay"):
        code, out = http(srv, "POST", f"/v1/tasks:{action}", "client", body)
        assert code == 400, out
        assert out == {"error": "pools must not be empty (leave it out to match any)", "code": "invalid"}
    async with Client(srv.grpc, token=TOKENS["client"]) as c:
        assert (await c.get(kept.id)).status == "ready"
        with pytest.raises(ValueError, match=r"^pools must not be empty \(leave it out to match any\)$"):
            await c.cancel_where(pools=[], kinds=["empty-pools"])
        for kw in ({"kinds": ()}, {"statuses": []}):
            with pytest.raises(ValueError, match="must not be empty"):
                await c.cancel_where(pools=["b"], **kw)
        for bad in (float("nan"), float("inf")):
            with pytest.raises(ValueError, match=r"^created_after must be finite"):
                await c.cancel_where(pools=["b"], created_after=bad)
        assert (await c.get(kept.id)).status == "ready"


async def test_paused_state_and_replay_links_survive_a_restart(server_dir: Path) -> None:
    sp = start_server(server_dir / "restart", POOLS_TOML + AUTH_TOML, name="restart")
    try:
        async with Client(sp.grpc, token=TOKENS["admin"]) as c:
            assert await c.pause("a")
            await c.add_recurring("hourly", "0 * * * *", None, pool="b")
            assert await c.pause_recurring("hourly")
            orig = await c.submit({"v": 2}, pool="b", key="k-restart")
            await c.cancel(orig.id)
            new = await c.replay(orig.id)
            await c.cancel(new.id)
    finally:
        assert sp.terminate() == 0, sp.log()
    sp = start_server(server_dir / "restart", POOLS_TOML + AUTH_TOML, name="restart")
    try:
        async with Client(sp.grpc, token=TOKENS["admin"]) as c:
            snap = await c.snapshot()
            assert snap.pool("a").paused and not snap.pool("b").paused  # type: ignore[union-attr]
            info = {i.name: i for i in await c.list_recurring()}["hourly"]
            assert info.paused
            o, n = await c.get(orig.id), await c.get(new.id)
            assert o.replayed_by == new.id and n.replay_of == orig.id
            assert (await c.get("k-restart")).id == new.id
            # the payload is read back from the store: a replay after the restart works
            again = await c.replay(new.id)
            await asyncio.sleep(0)
            assert (await c.get(again.id)).replay_of == new.id
            assert await c.resume("a")
    finally:
        assert sp.terminate() == 0, sp.log()
