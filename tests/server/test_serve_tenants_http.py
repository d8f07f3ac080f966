"""A real ``cronoq serve`` with tokens: tenant-scoped event streams (docs/reference/behaviour.md#auth), the
HTTP error code of a bad cron / time zone (docs/reference/behaviour.md#server-details), and lenient HTTP
inputs (integer priorities, status filters in any case; docs/reference/behaviour.md#task-fields,
docs/reference/http.md#conventions)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from .procs import AUTH_TOML, TOKENS, Raw, ServerProc, code_of, md, pb, start_server  # noqa: E402
from .test_http_real import SSEReader  # noqa: E402

POOLS_TOML = """
[[pools]]
name = "default"

[[pools]]
name = "a"
"""

#: a generous bound on any single wait of these tests (never reached when things work)
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    sp = start_server(tmp_path_factory.mktemp("tenants"), POOLS_TOML + AUTH_TOML, name="tenants")
    try:
        yield sp
    finally:
        assert sp.terminate() == 0, sp.log()


@pytest.fixture
async def raw(server: ServerProc) -> AsyncIterator[Raw]:
    r = Raw(server.grpc)
    try:
        yield r
    finally:
        await r.close()


@pytest.fixture
async def http(server: ServerProc) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(base_url=f"http://{server.http}", timeout=TIMEOUT) as c:
        yield c


def bearer(role: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[role]}"}


# ---------------------------------------------------------------------------------------------
# tenant-scoped watches (SSE and gRPC Watch)


async def _submit_cancel(raw: Raw, tenant: str | None) -> int:
    """A task of ``tenant`` (submitted with the unrestricted admin token), then cancelled."""
    admin = md(TOKENS["admin"])
    spec = pb.TaskSpec(pool="default", tenant=tenant or "")
    sub = await raw.tasks.Submit(pb.SubmitRequest(task=spec), metadata=admin)
    cancelled = await raw.tasks.Cancel(pb.CancelRequest(task=pb.TaskRef(id=sub.id)), metadata=admin)
    assert cancelled.cancelled
    return int(sub.id)


async def _sse_until(sse: SSEReader, last: set[str]) -> set[str]:
    """The ids of the events read until every id in ``last`` was seen cancelled."""
    seen: set[str] = set()
    pending = set(last)
    while pending:
        for _, data in await sse.events(1, TIMEOUT):
            seen.add(data["id"])
            if data["status"] == "cancelled":
                pending.discard(data["id"])
    return seen


async def _watch_until(call: Any, last: set[int]) -> set[int]:
    seen: set[int] = set()
    pending = set(last)
    while pending:
        ev = await asyncio.wait_for(call.read(), TIMEOUT)
        assert ev is not grpc.aio.EOF, await call.code()
        seen.add(ev.id)
        if ev.status == pb.TASK_STATUS_CANCELLED:
            pending.discard(ev.id)
    return seen


async def test_tenant_token_sees_only_its_tenants_events(server: ServerProc, raw: Raw, http: Any) -> None:
    roles = ("client_t1", "client_t2", "client")
    q = {"all_transitions": "true"}  # the same query on every stream: only the token differs
    async with (
        http.stream("GET", "/v1/events", params=q, headers=bearer("client_t1")) as r1,
        http.stream("GET", "/v1/events", params=q, headers=bearer("client_t2")) as r2,
        http.stream("GET", "/v1/events", params=q, headers=bearer("client")) as r_all,
    ):
        sse = {}
        for role, resp in zip(roles, (r1, r2, r_all), strict=True):
            assert resp.status_code == 200, await resp.aread()
            sse[role] = SSEReader(resp)
            await sse[role].events(0, TIMEOUT)  # ": live": subscribed
        calls = {
            role: raw.tasks.Watch(pb.WatchRequest(all_transitions=True), metadata=md(TOKENS[role]))
            for role in roles
        }
        try:
            for call in calls.values():
                await asyncio.wait_for(call.initial_metadata(), TIMEOUT)  # live
            t1 = await _submit_cancel(raw, "t1")
            t2 = await _submit_cancel(raw, "t2")
            none = await _submit_cancel(raw, None)
            # last, one per tenant: events come in publication order, so once a stream has
            # seen its tenant's sentinel it has seen everything before it
            s1 = await _submit_cancel(raw, "t1")
            s2 = await _submit_cancel(raw, "t2")

            assert await _sse_until(sse["client_t1"], {str(s1)}) == {str(t1), str(s1)}
            assert await _sse_until(sse["client_t2"], {str(s2)}) == {str(t2), str(s2)}
            everything = {str(i) for i in (t1, t2, none, s1, s2)}
            assert await _sse_until(sse["client"], {str(s1), str(s2)}) >= everything

            assert await _watch_until(calls["client_t1"], {s1}) == {t1, s1}
            assert await _watch_until(calls["client_t2"], {s2}) == {t2, s2}
            assert await _watch_until(calls["client"], {s1, s2}) >= {t1, t2, none, s1, s2}
        finally:
            for call in calls.values():
                call.cancel()


async def test_tenant_watch_by_key_or_id_still_checks_the_tenant(raw: Raw) -> None:
    """Naming another tenant's task in the Watch filter does not get its events."""
    admin = md(TOKENS["admin"])
    other_spec = pb.TaskSpec(pool="default", tenant="t2", key="t2-secret")
    own_spec = pb.TaskSpec(pool="default", tenant="t1", key="t1-own")
    call = raw.tasks.Watch(pb.WatchRequest(keys=["t2-secret", "t1-own"]), metadata=md(TOKENS["client_t1"]))
    try:
        await asyncio.wait_for(call.initial_metadata(), TIMEOUT)
        other = await raw.tasks.Submit(pb.SubmitRequest(task=other_spec), metadata=admin)
        own = await raw.tasks.Submit(pb.SubmitRequest(task=own_spec), metadata=admin)
        for tid in (other.id, own.id):  # the other tenant's first
            await raw.tasks.Cancel(pb.CancelRequest(task=pb.TaskRef(id=tid)), metadata=admin)
        assert await _watch_until(call, {own.id}) == {own.id}
    finally:
        call.cancel()


# ---------------------------------------------------------------------------------------------
# recurring: a bad cron / time zone is `invalid_argument` (not a SubmitError)


async def test_bad_cron_or_tz_error_code(raw: Raw, http: Any) -> None:
    h = bearer("admin")
    for body in ({"cron": "not a cron"}, {"cron": "@hourly", "tz": "Mars/Olympus"}):
        r = await http.put("/v1/recurring/bad", json=body, headers=h)
        assert r.status_code == 400, r.text
        assert r.json()["code"] == "invalid_argument", r.text
        assert r.json()["error"]
    # bad task fields of the template stay `invalid`
    r = await http.put("/v1/recurring/bad", json={"cron": "@hourly", "task": {"priority": 7}}, headers=h)
    assert (r.status_code, r.json()["code"]) == (400, "invalid"), r.text
    # unknown pool: the SubmitError code
    r = await http.put("/v1/recurring/bad", json={"cron": "@hourly", "task": {"pool": "zz"}}, headers=h)
    assert (r.status_code, r.json()["code"]) == (404, "unknown_pool"), r.text
    # gRPC: INVALID_ARGUMENT as before
    req = pb.RecurringRequest(name="bad", cron="not a cron", template=pb.TaskSpec(pool="default"))
    assert await code_of(raw.admin.AddRecurring(req, metadata=md(TOKENS["admin"]))) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    assert (await http.get("/v1/recurring/bad", headers=h)).status_code == 404


# ---------------------------------------------------------------------------------------------
# lenient HTTP inputs


async def test_integer_priority_over_http(http: Any) -> None:
    h = bearer("client")
    for value, name in ((0, "critical"), (1, "high"), (2, "normal"), (3, "low"), ("LOW", "low")):
        r = await http.post("/v1/tasks", json={"pool": "a", "priority": value}, headers=h)
        assert r.status_code == 200, r.text
        info = (await http.get(f"/v1/tasks/{r.json()['id']}", headers=h)).json()
        assert info["priority"] == name, (value, info)
        await http.post(f"/v1/tasks/{r.json()['id']}/cancel", headers=h)
    r = await http.post("/v1/tasks:batch", json={"tasks": [{"pool": "a", "priority": 0}]}, headers=h)
    assert r.status_code == 200, r.text
    bid = r.json()["tasks"][0]["id"]
    assert (await http.get(f"/v1/tasks/{bid}", headers=h)).json()["priority"] == "critical"
    await http.post(f"/v1/tasks/{bid}/cancel", headers=h)
    for bad in (4, -1, 100, True, 1.0, "1", "urgent"):
        r = await http.post("/v1/tasks", json={"pool": "a", "priority": bad}, headers=h)
        assert (r.status_code, r.json()["code"]) == (400, "invalid"), (bad, r.text)
        assert "priority" in r.json()["error"]


async def test_status_filter_is_case_insensitive(http: Any) -> None:
    h = bearer("client")
    r = await http.post("/v1/tasks", json={"pool": "a"}, headers=h)
    tid = r.json()["id"]
    assert (await http.post(f"/v1/tasks/{tid}/cancel", headers=h)).json() == {"cancelled": True}
    for q in ("CANCELLED", "Cancelled", "cancelled", "Ready,CANCELLED"):
        r = await http.get("/v1/tasks", params={"pool": "a", "status": q, "limit": "1000"}, headers=h)
        assert r.status_code == 200, r.text
        assert tid in {t["id"] for t in r.json()["tasks"]}, q
    r = await http.get("/v1/tasks", params={"pool": "a", "status": "RUNNING"}, headers=h)
    assert tid not in {t["id"] for t in r.json()["tasks"]}
    r = await http.get("/v1/tasks", params={"status": "Nope"}, headers=h)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_argument"), r.text
