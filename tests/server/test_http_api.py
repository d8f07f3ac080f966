"""HTTP/JSON front end of ``cronoq serve`` (docs/reference/behaviour.md#auth,
docs/reference/http.md#conventions, docs/reference/metrics.md#prometheus,
docs/reference/behaviour.md#server-details), in process.

A ServerApp with a memory store is led in the test's loop and driven through its Starlette
app with ``httpx.ASGITransport``; a fake worker (a session registered on the registry)
answers leases; SSE is read through the ASGI app directly.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from cronoq.engine.model import STATUS_NAMES, StatusEvent  # noqa: E402
from cronoq.server import http_api, http_guard, http_json  # noqa: E402
from cronoq.server.http_api import create_http_app, create_metrics_app  # noqa: E402
from cronoq.server.http_json import event_json  # noqa: E402
from cronoq.server.openapi import openapi_document  # noqa: E402
from cronoq.server.sse import event_frame  # noqa: E402

from .test_http_support import (  # noqa: E402
    ADMIN,
    BASE,
    CLIENT,
    METRICS,
    SCOPED,
    SSE,
    TENANT,
    TOKENS,
    WORKER,
    FakeWorker,
    bearer,
    make_app,
    serve,
)


def err(r: Any) -> tuple[int, str]:
    body = r.json()
    assert set(body) >= {"error", "code"}, body
    assert isinstance(body["error"], str) and body["error"]
    return r.status_code, body["code"]


# ---------------------------------------------------------------------------------------------
# submit / get / result


async def test_submit_get_result_roundtrip() -> None:
    async with serve() as (app, c):
        r = await c.post("/v1/tasks", json={"payload": {"a": [1, 2]}, "key": "k1", "priority": "high"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body == {"id": body["id"], "duplicate": False}
        assert isinstance(body["id"], str) and body["id"].isdigit()
        tid = body["id"]

        info = (await c.get(f"/v1/tasks/{tid}")).json()
        assert info["id"] == tid
        assert info["status"] == "ready"
        assert info["priority"] == "high"
        assert info["kind"] == "default"
        assert info["pool"] == "default"
        assert info["key"] == "k1"
        assert info["attempt"] == 0
        assert info["max_attempts"] == 3
        assert isinstance(info["created_unix_ns"], int)
        assert abs(info["created_unix_ns"] / 1e9 - time.time()) < 60
        assert info["started_unix_ns"] is None and info["finished_unix_ns"] is None
        assert info["output_available"] is False
        assert (await c.get("/v1/tasks/k1")).json() == info

        # duplicate key → same id
        r = await c.post("/v1/tasks", json={"key": "k1"})
        assert r.json() == {"id": tid, "duplicate": True}

        w = FakeWorker(app)
        lease = await w.wait_lease()
        assert json.loads(lease.payload) == {"a": [1, 2]}
        assert lease.content_type == "application/json"
        assert lease.priority == 1  # engine class of "high"

        r = await c.get(f"/v1/tasks/{tid}/result", params={"timeout": 5})
        assert r.status_code == 200, r.text
        assert r.json() == {
            "id": tid,
            "status": "succeeded",
            "output": {"a": [1, 2]},
            "content_type": "application/json",
            "message": "",
            "output_available": True,
        }
        info = (await c.get(f"/v1/tasks/{tid}")).json()
        assert info["status"] == "succeeded" and info["attempt"] == 1 and info["output_available"] is True
        assert info["started_unix_ns"] <= info["finished_unix_ns"]
        await w.close()


async def test_submit_wait_and_wait_timeout() -> None:
    async with serve("[limits]\nmax_wait_s = 0.5\n") as (app, c):
        w = FakeWorker(app)
        r = await c.post("/v1/tasks?wait=true&timeout=5", json={"payload": "hi"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["duplicate"] is False
        assert body["result"]["status"] == "succeeded"
        assert body["result"]["output"] == "hi"
        await w.close()

        # no worker: the wait times out (capped by max_wait_s) → 504 naming the task
        t0 = time.monotonic()
        r = await c.post("/v1/tasks", params={"wait": "1", "timeout": "30"}, json={})
        assert time.monotonic() - t0 < 5
        assert err(r) == (504, "deadline_exceeded")
        tid = r.json()["id"]
        assert (await c.get(f"/v1/tasks/{tid}")).json()["status"] == "ready"

        r = await c.get(f"/v1/tasks/{tid}/result", params={"timeout": "0.05"})
        assert err(r) == (504, "deadline_exceeded")
        # bad query values
        assert err(await c.post("/v1/tasks?wait=maybe", json={})) == (400, "invalid_argument")
        assert err(await c.get(f"/v1/tasks/{tid}/result?timeout=-1")) == (400, "invalid_argument")
        assert err(await c.get(f"/v1/tasks/{tid}/result?timeout=nan")) == (400, "invalid_argument")


async def test_results_non_json_failed_and_empty() -> None:
    def handler(lease: Any) -> Any:
        p = lease.payload
        if p == b'"bin"':
            return ("complete", b"\xff\x00raw", "application/octet-stream")
        if p == b'"none"':
            return ("complete", b"", "")
        if p == b'"text"':
            return ("complete", b"plain words", "text/plain")
        return ("fail", "boom: exact message", True)

    async with serve() as (app, c):
        w = FakeWorker(app, handler=handler)
        ids = {}
        for p in ("bin", "none", "text", "fail"):
            ids[p] = (await c.post("/v1/tasks", json={"payload": p})).json()["id"]
        res = {p: (await c.get(f"/v1/tasks/{i}/result?timeout=5")).json() for p, i in ids.items()}
        assert res["bin"]["output_base64"] == base64.b64encode(b"\xff\x00raw").decode()
        assert "output" not in res["bin"]
        assert res["bin"]["content_type"] == "application/octet-stream"
        assert res["none"]["output_available"] is True and res["none"]["output_base64"] == ""
        assert res["none"]["content_type"] == ""
        assert base64.b64decode(res["text"]["output_base64"]) == b"plain words"
        assert res["fail"] == {
            "id": ids["fail"],
            "status": "failed",
            "content_type": "",
            "message": "boom: exact message",
            "output_available": False,
        }
        info = (await c.get(f"/v1/tasks/{ids['fail']}")).json()
        assert info["message"] == "boom: exact message" and info["finished_unix_ns"] is not None
        await w.close()


async def test_payload_base64_and_all_task_fields() -> None:
    async with serve() as (app, c):
        # (the parent is t1's too: dependencies stay within a tenant)
        parent = (await c.post("/v1/tasks", json={"key": "parent", "tenant": "t1"})).json()["id"]
        start_ns = time.time_ns() + 3600 * 10**9
        body = {
            "payload_base64": base64.b64encode(b"\x00\x01binary").decode(),
            "content_type": "application/x-thing",
            "pool": "other",
            "kind": "report",
            "priority": "critical",
            "key": "all-fields",
            "deadline_in_s": 600,
            "tolerance_s": 5,
            "on_miss": "skip",
            "timeout_s": 30.5,
            "duration_hint_s": 2,
            "retry": {
                "max_attempts": 5,
                "initial_backoff_s": 0.5,
                "multiplier": 3,
                "max_backoff_s": 9,
                "jitter": True,
            },
            "deps": [{"target": parent, "cond": "on_complete"}, {"target": "parent", "cond": "success"}],
            "after": [int(parent)],
            "tags": {"traceparent": "00-abc"},
            "labels": {},
            "tenant": "t1",
        }
        r = await c.post("/v1/tasks", json=body)
        assert r.status_code == 200, r.text
        info = (await c.get("/v1/tasks/all-fields?tenant=t1")).json()
        assert info["pool"] == "other" and info["kind"] == "report" and info["priority"] == "critical"
        assert info["max_attempts"] == 5 and info["tenant"] == "t1"
        assert info["status"] == "blocked"
        # the fixed start as a string of digits
        r = await c.post("/v1/tasks", json={"pool": "other", "start_unix_ns": str(start_ns), "key": "fixed"})
        assert r.status_code == 200, r.text
        assert (await c.get("/v1/tasks/fixed")).json()["status"] == "scheduled"
        r = await c.post("/v1/tasks", json={"pool": "other", "start_in_s": 3600, "start_unix_ns": start_ns})
        assert err(r) == (400, "invalid")

        w = FakeWorker(app, pool="other")
        # release the parent (default pool)
        wd = FakeWorker(app)
        lease = await w.wait_lease(timeout=5)
        assert lease.payload == b"\x00\x01binary"
        assert lease.content_type == "application/x-thing"
        assert lease.kind == "report" and lease.key == "all-fields"
        assert lease.tags == {"traceparent": "00-abc"}
        assert lease.timeout_s == pytest.approx(30.5)
        assert lease.deadline_unix_ns is not None
        await w.close()
        await wd.close()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"bogus": 1}, "bogus"),
        ({"priority": "urgent"}, "priority"),
        ({"priority": 4}, "priority"),  # (integers 0..3 are accepted, as in-process)
        ({"priority": -1}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 1.0}, "priority"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"timeout_s": "5"}, "timeout_s"),
        ({"deadline_in_s": True}, "deadline_in_s"),
        ({"payload": 1, "payload_base64": "AA=="}, "mutually exclusive"),
        ({"payload_base64": "%%%"}, "base64"),
        ({"deadline_in_s": 5, "deadline_unix_ns": 5}, "mutually exclusive"),
        ({"deadline_unix_ns": "soon"}, "deadline_unix_ns"),
        ({"deadline_unix_ns": 2**70}, "deadline_unix_ns"),
        ({"retry": {"max_attempts": -1}}, "max_attempts"),
        ({"retry": {"tries": 3}}, "tries"),
        ({"retry": 3}, "retry"),
        ({"deps": [{"cond": "on_success"}]}, "target"),
        ({"deps": [{"target": 1, "cond": "maybe"}]}, "cond"),
        ({"deps": "x"}, "deps"),
        ({"after": [0]}, "after[0]"),
        ({"after": [""]}, "after[0]"),
        ({"after": [None]}, "after[0]"),
        ({"after": ""}, "after"),
        ({"after": 0}, "after"),
        ({"after": True}, "after"),
        ({"after": {"key": "k"}}, "after"),
        ({"after": 1.5}, "after"),
        ({"resources": {"db": 0}}, "resources.db"),
        ({"tags": {"a": {"b": "c"}}}, "tags.a"),
        ({"tags": {"a": [1]}}, "tags.a"),
        ({"tags": {"a": None}}, "tags.a"),
        ({"labels": {"zone": {}}}, "labels.zone"),
        ({"labels": {"zone": ["a"]}}, "labels.zone"),
        ({"labels": []}, "labels"),
        ({"on_miss": "later"}, "on_miss"),
        ({"key": "k" * 300}, "key"),
        ({"kind": "k" * 200}, "kind"),
        ({"tags": {f"t{i}": "v" for i in range(100)}}, "tags"),
        ({"pool": 5}, "pool"),
        ({"key": "\ud800"}, ""),
    ],
)
async def test_invalid_task_fields(body: dict[str, Any], needle: str) -> None:
    async with serve() as (_app, c):
        r = await c.post("/v1/tasks", content=json.dumps(body), headers={"content-type": "application/json"})
        assert err(r) == (400, "invalid"), r.text
        assert needle in r.json()["error"]


async def test_bad_bodies() -> None:
    async with serve() as (_app, c):
        h = {"content-type": "application/json"}
        for content, needle in [
            (b"{bad", "not valid JSON"),
            (b"[1, 2]", "must be a JSON object"),
            (b'"str"', "must be a JSON object"),
            (b"", "empty"),
            (b"\xff\xfe", "UTF-8"),
            (b'{"timeout_s": NaN}', "NaN"),
            (b"[" * 100000 + b"]" * 100000, ""),
        ]:
            r = await c.post("/v1/tasks", content=content, headers=h)
            assert err(r) == (400, "invalid_argument"), (content[:20], r.text)
            assert needle in r.json()["error"]
        # a body must be declared JSON: a form body is refused before it is read (415)
        r = await c.post(
            "/v1/tasks", content=b"a=1", headers={"content-type": "application/x-www-form-urlencoded"}
        )
        assert err(r) == (415, "invalid_argument")
        assert "content-type: application/json" in r.json()["error"]


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "application/merge-patch+json"]
)
async def test_json_content_types_are_accepted(content_type: str) -> None:
    """docs/reference/http.md#conventions: a body declared JSON is parsed as JSON."""
    async with serve() as (_app, c):
        headers = {} if content_type is None else {"content-type": content_type}
        body = json.dumps({"key": "ct", "payload": {"n": 1}, "tags": {"via": "form"}}).encode()
        r = await c.post("/v1/tasks", content=body, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["duplicate"] is False
        assert (await c.get("/v1/tasks/ct")).json()["key"] == "ct"
        r = await c.post("/v1/tasks:batch", content=b'{"tasks": [{"key": "ct2"}]}', headers=headers)
        assert r.status_code == 200, r.text
        r = await c.put("/v1/recurring/ct-sched", content=b'{"cron": "0 0 1 1 *"}', headers=headers)
        assert r.status_code == 200, r.text
        r = await c.post("/v1/tasks", content=b"not json", headers=headers)
        assert err(r) == (400, "invalid_argument")


@pytest.mark.parametrize(
    "content_type",
    [
        None,  # no header at all (a page's fetch with a raw body sends none)
        "",
        "application/x-www-form-urlencoded",  # urllib's default with data=, curl -d without -H
        "text/plain",
        "text/plain;charset=UTF-8",
        "multipart/form-data; boundary=x",
        "application/octet-stream",
        "nonsense",
        "application/jsonx",
    ],
)
async def test_a_body_not_declared_json_is_415_and_changes_nothing(content_type: str | None) -> None:
    """The types a page sends cross-site without a preflight (text, forms, none) are refused
    on every state-changing route before the body is read; a body-less POST needs no type."""
    async with serve() as (_app, c):
        headers = {} if content_type is None else {"content-type": content_type}
        await c.put("/v1/recurring/keep", json={"cron": "0 0 1 1 *"})
        tid = (await c.post("/v1/tasks", json={"key": "victim", "start_in_s": 3600})).json()["id"]
        for method, path, body in [
            ("POST", "/v1/tasks", b'{"key": "ct"}'),
            ("POST", "/v1/tasks:batch", b'{"tasks": [{"key": "ct2"}]}'),
            ("POST", "/v1/tasks:cancel", b'{"filter": {}}'),
            ("POST", f"/v1/tasks/{tid}/cancel", b"{}"),
            ("PUT", "/v1/recurring/ct-sched", b'{"cron": "0 0 1 1 *"}'),
            ("DELETE", "/v1/recurring/keep", b"{}"),
            ("POST", "/v1/pools/default/pause", b"{}"),
        ]:
            r = await c.request(method, path, content=body, headers=headers)
            assert err(r) == (415, "invalid_argument"), (method, path, r.text)
            assert "a request body must be JSON" in r.json()["error"]
        assert (await c.get("/v1/tasks/ct")).status_code == 404
        assert (await c.get("/v1/tasks/victim")).json()["status"] == "scheduled"
        assert (await c.get("/v1/recurring/keep")).status_code == 200
        assert (await c.get("/v1/recurring/ct-sched")).status_code == 404
        assert (
            "paused" not in (await c.get("/v1/snapshot")).json()["pools"][0]
            or not ((await c.get("/v1/snapshot")).json()["pools"][0]["paused"])
        )
        # no body, no type needed
        r = await c.post(f"/v1/tasks/{tid}/cancel")
        assert r.status_code == 200 and r.json() == {"cancelled": True}


async def test_body_too_large_413_content_length_and_chunked() -> None:
    async with serve("[limits]\nmax_http_body_bytes = 1024\n") as (_app, c):
        r = await c.post("/v1/tasks", json={"payload": "x" * 2000})
        assert err(r) == (413, "resource_exhausted")
        assert r.json()["error"] == "request body larger than limits.max_http_body_bytes (1024)"

        sent = []

        async def chunks() -> Any:
            for _ in range(10):
                sent.append(1)
                yield b'{"payload": "' + b"x" * 200

        r = await c.post("/v1/tasks", content=chunks(), headers={"content-type": "application/json"})
        assert "content-length" not in r.request.headers
        assert err(r) == (413, "resource_exhausted")
        # a body just under the limit is fine
        r = await c.post("/v1/tasks", json={"payload": "x" * 900})
        assert r.status_code == 200


async def test_submit_error_codes() -> None:
    extra = """
[[pools]]
name = "small"
max_pending = 1

[[pools]]
name = "reject"
max_pending = 1
overflow = "reject"

[[pools]]
name = "resv"
max = 1

[[resources]]
name = "db"
kind = "semaphore"
permits = 2
"""
    async with serve(extra) as (_app, c):

        async def post(body: dict[str, Any]) -> tuple[int, str]:
            return err(await c.post("/v1/tasks", json=body))

        assert await post({"pool": "nope"}) == (404, "unknown_pool")
        assert await post({"after": ["missing-key"]}) == (404, "unknown_dependency")
        assert await post({"after": [987654]}) == (404, "unknown_dependency")
        assert await post({"key": "self", "after": ["self"]}) == (400, "cycle")
        assert await post({"resources": {"db": 3}}) == (400, "resource_exceeds_capacity")
        assert await post({"resources": {"gpu": 1}}) == (400, "unknown_resource")
        assert (await c.post("/v1/tasks", json={"pool": "small"})).status_code == 200
        assert await post({"pool": "small"}) == (429, "full")
        assert (await c.post("/v1/tasks", json={"pool": "reject"})).status_code == 200
        assert await post({"pool": "reject"}) == (429, "overloaded")
        assert (
            await c.post("/v1/tasks", json={"pool": "resv", "start_in_s": 100, "duration_hint_s": 10})
        ).status_code == 200
        assert await post({"pool": "resv", "start_in_s": 100, "duration_hint_s": 10}) == (
            409,
            "reservation_conflict",
        )
        r = await c.post("/v1/tasks:batch", json={"tasks": [{"key": "d"}, {"key": "d"}]})
        assert err(r) == (400, "duplicate_key_in_batch")


async def test_overloaded_total() -> None:
    async with serve("[limits]\nmax_pending_total = 1\n") as (_app, c):
        assert (await c.post("/v1/tasks", json={})).status_code == 200
        assert err(await c.post("/v1/tasks", json={})) == (429, "overloaded")


async def test_batch() -> None:
    async with serve("[limits]\nmax_tasks_per_batch = 3\n") as (_app, c):
        r = await c.post("/v1/tasks:batch", json={"tasks": [{"key": "a"}, {"key": "b", "after": ["a"]}, {}]})
        assert r.status_code == 200, r.text
        tasks = r.json()["tasks"]
        assert len(tasks) == 3 and all(isinstance(t["id"], str) for t in tasks)
        assert [t["duplicate"] for t in tasks] == [False, False, False]
        assert (await c.get("/v1/tasks/b")).json()["status"] == "blocked"
        r = await c.post("/v1/tasks:batch", json={"tasks": [{"key": "a"}]})
        assert r.json()["tasks"] == [{"id": tasks[0]["id"], "duplicate": True}]
        r = await c.post("/v1/tasks:batch", json={"tasks": [{}, {"nope": 1}]})
        assert err(r) == (400, "invalid") and "tasks[1]" in r.json()["error"]
        r = await c.post("/v1/tasks:batch", json={"tasks": [{}] * 4})
        assert err(r) == (400, "invalid") and "max_tasks_per_batch" in r.json()["error"]
        assert err(await c.post("/v1/tasks:batch", json={"tasks": {}})) == (400, "invalid_argument")
        assert err(await c.post("/v1/tasks:batch", json={"task": []})) == (400, "invalid")
        assert err(await c.post("/v1/tasks:batch", json={"tasks": [{"pool": "zz"}]})) == (404, "unknown_pool")
        # all or nothing
        before = len((await c.get("/v1/tasks")).json()["tasks"])
        r = await c.post("/v1/tasks:batch", json={"tasks": [{"key": "x1"}, {"after": ["ghost"]}]})
        assert err(r) == (404, "unknown_dependency")
        assert len((await c.get("/v1/tasks")).json()["tasks"]) == before


async def test_list_tasks_paging_and_filters() -> None:
    async with serve() as (_app, c):
        ids = [
            (await c.post("/v1/tasks", json={"pool": "other" if i % 2 else "default"})).json()["id"]
            for i in range(7)
        ]
        r = await c.get("/v1/tasks", params={"limit": 3})
        page = r.json()
        assert [t["id"] for t in page["tasks"]] == ids[:3]
        assert page["next_after"] == ids[2]
        seen = []
        after = "0"
        while True:
            p = (await c.get("/v1/tasks", params={"limit": 2, "after": after})).json()
            seen += [t["id"] for t in p["tasks"]]
            if p["next_after"] == "0":
                break
            after = p["next_after"]
        assert seen == ids
        other = (await c.get("/v1/tasks?pool=other")).json()
        assert [t["id"] for t in other["tasks"]] == ids[1::2] and other["next_after"] == "0"
        both = (await c.get("/v1/tasks?pool=other,default&status=ready&status=blocked")).json()
        assert len(both["tasks"]) == 7
        assert (await c.get("/v1/tasks?status=succeeded")).json() == {"tasks": [], "next_after": "0"}
        assert err(await c.get("/v1/tasks?status=done")) == (400, "invalid_argument")
        assert err(await c.get("/v1/tasks?pool=nope")) == (404, "not_found")
        assert err(await c.get("/v1/tasks?limit=-1")) == (400, "invalid_argument")
        assert err(await c.get("/v1/tasks?after=x")) == (400, "invalid_argument")


async def test_list_tasks_default_limit_capped_by_max_list() -> None:
    # limit 0 (absent) means 100, and that default is capped by limits.max_list too
    # (docs/reference/behaviour.md#server-details)
    async with serve(base="[limits]\nmax_list = 3\n" + BASE) as (_app, c):
        ids = [(await c.post("/v1/tasks", json={})).json()["id"] for _ in range(5)]
        for params in ({}, {"limit": 0}, {"limit": 100}):
            page = (await c.get("/v1/tasks", params=params)).json()
            assert [t["id"] for t in page["tasks"]] == ids[:3], params
            assert page["next_after"] == ids[2]


async def test_task_refs_keys_ids_and_cancel() -> None:
    async with serve() as (_app, c):
        slash = (await c.post("/v1/tasks", json={"key": "a/b c?"})).json()["id"]
        digits = (await c.post("/v1/tasks", json={"key": "0042"})).json()["id"]
        assert (await c.get("/v1/tasks/a%2Fb%20c%3F")).json()["id"] == slash
        assert (await c.get("/v1/tasks/-", params={"key": "0042"})).json()["id"] == digits
        assert (await c.get(f"/v1/tasks/{digits}")).json()["key"] == "0042"
        assert err(await c.get("/v1/tasks/0042")) == (404, "not_found")  # digits = an id
        assert err(await c.get("/v1/tasks/0")) == (404, "not_found")
        assert err(await c.get(f"/v1/tasks/{2**64}")) == (404, "not_found")
        assert err(await c.get("/v1/tasks/no-such-key")) == (404, "not_found")
        assert err(await c.get("/v1/tasks/a/b/c")) == (404, "not_found")
        assert err(await c.get("/v1/tasks/x?key=")) == (400, "invalid_argument")

        r = await c.post("/v1/tasks/a%2Fb%20c%3F/cancel")
        assert r.status_code == 200 and r.json() == {"cancelled": True}
        assert (await c.get(f"/v1/tasks/{slash}")).json()["status"] == "cancelled"
        assert (await c.post(f"/v1/tasks/{slash}/cancel")).json() == {"cancelled": False}
        assert (await c.post("/v1/tasks/-/cancel?key=0042")).json() == {"cancelled": True}
        r = await c.get(f"/v1/tasks/{slash}/result")
        assert r.json()["status"] == "cancelled" and r.json()["output_available"] is False
        assert err(await c.post("/v1/tasks/999999/cancel")) == (404, "not_found")
        r = await c.get(f"/v1/tasks/{slash}/cancel")
        assert err(r) == (405, "unimplemented") and r.headers["allow"] == "POST"
        assert err(await c.post(f"/v1/tasks/{slash}")) == (405, "unimplemented")
        assert err(await c.delete("/v1/tasks")) == (405, "unimplemented")
        assert err(await c.get("/v1/nothing")) == (404, "not_found")


async def test_task_routes_match_the_raw_path() -> None:
    """An encoded ``/`` stays inside the key: ``a%2Fresult`` is the task keyed ``a/result``,
    not the result route of ``a``; an empty segment is a 400, an extra one a 404 with a hint."""
    async with serve() as (_app, c):
        tid = (await c.post("/v1/tasks", json={"key": "a/result"})).json()["id"]
        r = await c.get("/v1/tasks/a%2Fresult")
        assert r.status_code == 200 and r.json()["id"] == tid and r.json()["key"] == "a/result"
        assert (await c.post("/v1/tasks/a%2Fresult/cancel")).json() == {"cancelled": True}
        assert err(await c.get("/v1/tasks/")) == (400, "invalid_argument")
        assert err(await c.get("/v1/tasks//result")) == (400, "invalid_argument")
        assert (await c.get("/v1/tasks//result", params={"key": "a/result"})).json()["id"] == tid
        r = await c.get("/v1/tasks/a/result/x")
        assert err(r) == (404, "not_found") and "%2F" in r.json()["error"]
        r = await c.post(f"/v1/tasks/{tid}")
        assert err(r) == (405, "unimplemented")
        assert sorted(r.headers["allow"].split(", ")) == ["GET", "HEAD"]  # (in set order)
        assert err(await c.post("/v1/pools/default/stop")) == (404, "not_found")
        assert err(await c.get("/v1/pools/default/pause")) == (405, "unimplemented")
        assert err(await c.patch("/v1/recurring/x")) == (405, "unimplemented")


async def test_signal_names_are_matched_on_the_raw_path() -> None:
    """Any signal name ``Client.signal`` and gRPC take can be sent over HTTP: an encoded ``/``
    stays in the name (it was a 404 "no such route"), an empty name is the same 400 as on gRPC,
    an unencoded ``/`` a 404 with a hint."""
    async with serve() as (_app, c):
        r = await c.post("/v1/signals/approve%2F42", json={"payload": 1})
        assert (r.status_code, r.json()) == (200, {"name": "approve/42", "duplicate": False})
        r = await c.post("/v1/signals/approve%2F42")
        assert r.json() == {"name": "approve/42", "duplicate": True}
        r = await c.post("/v1/signals/caf%C3%A9%20ok")
        assert r.json() == {"name": "café ok", "duplicate": False}
        r = await c.post("/v1/signals/")
        empty = {"error": "a signal name must not be empty", "code": "invalid"}
        assert (r.status_code, r.json()) == (400, empty)
        assert err(await c.post("/v1/signals/%FF")) == (400, "invalid_argument")
        r = await c.post("/v1/signals/approve/42")
        assert err(r) == (404, "not_found") and "%2F" in r.json()["error"]


async def test_schedule_names_are_matched_on_the_raw_path() -> None:
    """A schedule name may hold a ``/`` (``add_recurring`` and gRPC take it): sent as ``%2F``
    it stays in the name on every ``/v1/recurring/{name}`` route (it was a 404 "no such
    route")."""
    async with serve() as (_app, c):
        body = {"cron": "0 3 * * *", "task": {"pool": "default", "kind": "report"}}
        r = await c.put("/v1/recurring/reports%2Fdaily", json=body)
        assert (r.status_code, r.json()["name"]) == (200, "reports/daily")
        assert (await c.get("/v1/recurring/reports%2Fdaily")).json()["name"] == "reports/daily"
        assert (await c.post("/v1/recurring/reports%2Fdaily/pause")).json() == {"changed": True}
        assert (await c.post("/v1/recurring/reports%2Fdaily/resume")).json() == {"changed": True}
        assert (await c.post("/v1/recurring/reports%2Fdaily/run")).status_code == 200
        assert err(await c.get("/v1/recurring/reports/daily")) == (404, "not_found")
        assert err(await c.get("/v1/recurring/%FF")) == (400, "invalid_argument")
        r = await c.delete("/v1/recurring/reports%2Fdaily")
        assert r.json() == {"removed": True}


async def test_pool_and_resource_names_are_matched_on_the_raw_path() -> None:
    """A pool or resource name may hold a ``/`` (the config takes it, gRPC's PausePool and
    ListResourceKeys too): sent as ``%2F`` it stays in the name on ``/v1/pools/{name}/pause``,
    ``/resume`` and ``/v1/resources/{name}/keys`` (they were 404 "no such route", the
    dashboard's pause button of such a pool included)."""
    extra = (
        '[[pools]]\nname = "batch/gpu"\nmax = 2\n'
        '[[resources]]\nname = "api/v2"\nkind = "semaphore"\npermits = 2\nper_key = true\n'
    )
    async with serve(extra) as (_app, c):
        assert (await c.post("/v1/pools/batch%2Fgpu/pause")).json() == {"changed": True}
        pools = {p["name"]: p["paused"] for p in (await c.get("/v1/snapshot")).json()["pools"]}
        assert pools["batch/gpu"] is True
        assert (await c.post("/v1/pools/batch%2Fgpu/resume")).json() == {"changed": True}
        r = await c.get("/v1/resources/api%2Fv2/keys")
        assert (r.status_code, r.json()["resource"]) == (200, "api/v2"), r.text
        r = await c.post("/v1/pools/batch/gpu/pause")
        assert err(r) == (404, "not_found") and "%2F" in r.json()["error"]
        assert err(await c.get("/v1/resources/%FF/keys")) == (400, "invalid_argument")


async def test_names_in_the_path_under_a_root_path() -> None:
    """Mounted under a prefix (``root_path``: another ASGI app's ``Mount``, a server's
    ``--root-path``), names in the path read as without it: a ``%2F`` stays in the name (it was
    404) and a ``%25`` is decoded once (``x%2541`` was the signal ``xA``, key ``k%41``
    unreachable); a path matched decoded (a prefix itself encoded) is not decoded again; the
    request guard sees ``/cronoq/healthz`` as ``/healthz`` (a probe, exempt)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = make_app()
    await app.lead()
    outer = Starlette(routes=[Mount("/cronoq", app=create_http_app(app))])
    try:
        transport = httpx.ASGITransport(app=outer)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7071") as c:
            r = await c.post("/cronoq/v1/signals/approve%2F42")
            assert (r.status_code, r.json()["name"]) == (200, "approve/42"), r.text
            assert (await c.post("/cronoq/v1/signals/x%2541")).json()["name"] == "x%41"
            tid = (await c.post("/cronoq/v1/tasks", json={"key": "k%41/1"})).json()["id"]
            assert (await c.get("/cronoq/v1/tasks/k%2541%2F1")).json()["id"] == tid
            tid = (await c.post("/cronoq/v1/tasks", json={"key": "k%41"})).json()["id"]
            assert (await c.get("/cronoq/v1/%74asks/k%2541")).json()["id"] == tid  # (matched decoded)
            body = {"cron": "0 3 * * *", "task": {"pool": "default"}}
            r = await c.put("/cronoq/v1/recurring/r%2F1", json=body)
            assert (r.status_code, r.json()["name"]) == (200, "r/1"), r.text
            assert (await c.post("/cronoq/v1/pools/default/pause")).json() == {"changed": True}
            # the guard takes the path past the prefix too: the probes are exempt (no Host check)
            evil = {"host": "evil.example.com"}
            assert (await c.get("/cronoq/healthz", headers=evil)).status_code == 200
            assert (await c.get("/cronoq/v1/snapshot", headers=evil)).status_code == 403
    finally:
        await app.stop()


def test_one_route_per_path_and_method() -> None:
    """Every API route serves one method (HEAD comes with GET) and no path and method twice."""
    from starlette.routing import Route

    star = create_http_app(make_app())
    seen: set[tuple[str, str]] = set()
    for r in star.routes:
        if not isinstance(r, Route) or not r.path.startswith("/v1/"):
            continue
        methods = sorted((r.methods or set()) - {"HEAD"})
        assert len(methods) == 1, (r.path, methods)
        assert (r.path, methods[0]) not in seen, (r.path, methods)
        seen.add((r.path, methods[0]))
    assert len(seen) == 24


# ---------------------------------------------------------------------------------------------
# events (SSE)


async def test_events_sse() -> None:
    async with serve() as (app, c):
        web = create_http_app(app)
        async with (
            SSE(web, "/v1/events") as terminal,
            SSE(web, "/v1/events", "all_transitions=true&pool=default") as every,
        ):
            assert terminal.status == 200
            assert terminal.headers["content-type"].startswith("text/event-stream")
            await terminal.read_until(b": live")
            await every.read_until(b": live")
            tid = (await c.post("/v1/tasks", json={"key": "ev", "payload": 1})).json()["id"]
            await c.post("/v1/tasks", json={"pool": "other"})  # filtered out of `every`
            w = FakeWorker(app)
            await terminal.read_until(b"succeeded")
            await every.read_until(b"succeeded")
            evs = terminal.events()
            assert [e for e, _ in evs] == ["status"]
            data = evs[0][1]
            assert data["id"] == tid and data["status"] == "succeeded" and data["key"] == "ev"
            assert data["pool"] == "default" and data["attempt"] == 1
            assert abs(data["at"] - time.time()) < 60 and isinstance(data["at_unix_ns"], int)
            statuses = [d["status"] for _, d in every.events()]
            assert "running" in statuses and statuses[-1] == "succeeded" and len(statuses) >= 3
            assert all(d["pool"] == "default" for _, d in every.events())
            await w.close()
        # ids/keys filters; unknown pool; bad id
        async with SSE(web, "/v1/events", "key=only") as only:
            await only.read_until(b": live")
            await c.post("/v1/tasks/ev/cancel")
            t2 = (await c.post("/v1/tasks", json={"key": "only"})).json()["id"]
            await c.post(f"/v1/tasks/{t2}/cancel")
            await only.read_until(b"cancelled")
            assert [d["id"] for _, d in only.events()] == [t2]
        assert err(await c.get("/v1/events?pool=zz")) == (404, "not_found")
        assert err(await c.get("/v1/events?id=abc")) == (400, "invalid_argument")


async def test_events_end_on_shutdown() -> None:
    async with serve() as (app, _c):
        web = create_http_app(app)
        async with SSE(web, "/v1/events") as s:
            await s.read_until(b": live")
            await app.stop()
            await s.read_until(b"event: error", timeout=15)
            assert s.events()[-1] == ("error", {"error": s.events()[-1][1]["error"], "code": "unavailable"})


def test_event_frame_is_event_json() -> None:
    cases = [
        StatusEvent(1, "default", None, "blocked", 0, 1_700_000_000.123456, None),
        StatusEvent((1 << 64) - 1, "p\u00f6ol", 'k"ey\n', "retrying", 3, 0.5, 'Boom: "\u00fcber"\n\t'),
        StatusEvent(2, "default", "", "running", 1, 0.1 + 0.2, ""),
        StatusEvent(3, "default", "k", "succeeded", 1, 1.0, None),
        *(StatusEvent(7, "x", "k", name, 1, 1e9 + 0.1, "m") for name in STATUS_NAMES),
    ]
    for ev in cases:
        frame = event_frame(ev)
        assert frame == b"event: status\ndata: " + http_json.dumps(event_json(ev)) + b"\n\n", ev
        assert frame.count(b"\n") == 3  # one data line


async def test_events_frames_shared_and_batched() -> None:
    async with serve() as (app, c):
        web = create_http_app(app)
        async with (
            SSE(web, "/v1/events", "all_transitions=true") as a,
            SSE(web, "/v1/events", "all_transitions=true") as b,
        ):
            await a.read_until(b": live")
            await b.read_until(b": live")
            r = await c.post("/v1/tasks:batch", json={"tasks": [{"key": f"b{i}"} for i in range(50)]})
            assert r.status_code == 200
            await a.read_until(b'"key":"b49","status":"ready"')
            await b.read_until(b'"key":"b49","status":"ready"')
            assert a.buffer == b.buffer
            # a batch's events in publication order: every task blocked, then every task ready
            assert [(d["key"], d["status"]) for _, d in a.events()] == [
                (f"b{i}", st) for st in ("blocked", "ready") for i in range(50)
            ]
        assert not app.sched._streams  # both subscriptions closed at disconnect


def assert_data_loss(s: SSE) -> None:
    assert s.buffer.startswith(b": live\n\n")
    kind, err = s.events()[-1]
    assert kind == "error" and err["code"] == "data_loss" and "too far behind" in err["error"], err
    assert s.done  # the error is the end of the response


async def test_events_data_loss_when_a_subscriber_falls_behind() -> None:
    async with serve() as (app, c):
        app.sched._event_capacity = 64  # events per subscriber (the server's is 16384)
        web = create_http_app(app)
        slow = SSE(web, "/v1/events", "all_transitions=true")
        slow.messages = asyncio.Queue(maxsize=1)  # its sends block while it does not read
        async with slow, SSE(web, "/v1/events", "all_transitions=true") as fast:
            await fast.read_until(b": live")
            for b in range(5):  # 20 events a batch: the slow one has more than 64 pending at the 4th
                tasks = [{"key": f"t{b}-{i}"} for i in range(10)]
                assert (await c.post("/v1/tasks:batch", json={"tasks": tasks})).status_code == 200
                await fast.read_until(f'"key":"t{b}-9","status":"ready"'.encode())
            await slow.read_until(b"event: error")
            assert_data_loss(slow)
            # the other stream goes on
            assert len(fast.events()) == 100 and not fast.done
        assert not app.sched._streams


async def test_events_data_loss_for_everyone_after_a_burst_beyond_capacity() -> None:
    async with serve() as (app, c):
        app.sched._event_capacity = 8
        web = create_http_app(app)
        async with (
            SSE(web, "/v1/events", "all_transitions=true") as a,
            SSE(web, "/v1/events", "pool=default") as b,
        ):
            await a.read_until(b": live")
            await c.post("/v1/tasks:batch", json={"tasks": [{} for _ in range(20)]})  # 40 events at once
            await a.read_until(b"event: error")
            await b.read_until(b"event: error")
            assert_data_loss(a)
            assert_data_loss(b)
            # a new stream after that is fine
            async with SSE(web, "/v1/events", "all_transitions=true") as later:
                await later.read_until(b": live")
                await c.post("/v1/tasks", json={"key": "after"})
                await later.read_until(b'"key":"after","status":"ready"')
        assert not app.sched._streams


async def test_events_stream_sees_only_events_after_it_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fan-out holds events back for a long while after each delivery, so events published
    # before a stream joins are still buffered when it does
    monkeypatch.setattr(http_api, "SSE_FLUSH_S", 60.0)
    async with serve() as (app, c):
        web = create_http_app(app)
        q = "all_transitions=true"
        async with SSE(web, "/v1/events", q) as a:
            await a.read_until(b": live")
            await c.post("/v1/tasks", json={"key": "t1"})
            await a.read_until(b'"key":"t1","status":"ready"')  # delivered; the fan-out waits now
            await c.post("/v1/tasks", json={"key": "t2"})
            async with SSE(web, "/v1/events", q) as b:  # joining hands t2 to `a` only
                await a.read_until(b'"key":"t2","status":"ready"')
                await c.post("/v1/tasks", json={"key": "t3"})
                async with SSE(web, "/v1/events", q) as third:  # and t3 to `a` and `b`
                    await b.read_until(b'"key":"t3","status":"ready"')
                    await a.read_until(b'"key":"t3","status":"ready"')
                    assert [d["key"] for _, d in a.events()] == ["t1", "t1", "t2", "t2", "t3", "t3"]
                    assert [d["key"] for _, d in b.events()] == ["t3", "t3"]
                    assert await third.read_until(b": live") == b": live\n\n"
                    assert len(app.sched._streams) == 1  # one scheduler subscription for all
        assert not app.sched._streams


async def test_events_keepalive_while_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_api, "SSE_KEEPALIVE_S", 0.01)
    async with serve() as (app, _c):
        web = create_http_app(app)
        async with SSE(web, "/v1/events") as s:
            await s.read_until(b": keepalive\n\n")
            assert s.buffer.startswith(b": live\n\n") and not s.events()
            assert len(app.sched._streams) == 1
        assert not app.sched._streams


async def test_events_standby_503() -> None:
    async with serve(lead=False) as (app, _c):
        web = create_http_app(app)
        async with SSE(web, "/v1/events") as s:
            assert s.status == 503
            await s.read_until(b"}")
            assert json.loads(s.buffer)["code"] == "unavailable"


# ---------------------------------------------------------------------------------------------
# admin: snapshot, workers, recurring, metrics


async def test_snapshot_and_workers() -> None:
    async with serve() as (app, c):
        w = FakeWorker(app, slots=3, labels={"zone": "a"}, handler=lambda lease: None)
        await c.post("/v1/tasks", json={"priority": "low"})
        await w.wait_lease()
        await c.post("/v1/tasks", json={"pool": "other", "priority": "critical"})
        snap = (await c.get("/v1/snapshot")).json()
        assert {
            "pools",
            "live_tasks",
            "running",
            "pending",
            "totals",
            "workers_connected",
            "unavailable_shards",
        } <= set(snap)
        pools = {p["name"]: p for p in snap["pools"]}
        assert pools["default"]["capacity"] == 3 and pools["default"]["busy"] == 1
        assert pools["default"]["workers_connected"] == 1
        assert pools["other"]["pending_by_class"] == [1, 0, 0, 0]
        assert {"labels": {"zone": "a"}, "capacity": 3, "busy": 1} in pools["default"]["groups"]
        assert snap["totals"]["submitted"] == 2 and snap["workers_connected"] == 1
        assert isinstance(pools["default"]["wait_p99_s"], float)
        workers = (await c.get("/v1/workers")).json()["workers"]
        assert workers == [
            {
                "id": str(w.session.id),
                "name": "fake",
                "pool": "default",
                "labels": {"zone": "a"},
                "slots": 3,
                "busy": 1,
                "connected_unix_ns": w.session.connected_unix_ns,
                "kinds": [],  # (a plain handler: any kind)
            }
        ]
        await w.close()
        assert (await c.get("/v1/workers")).json() == {"workers": []}


async def test_recurring_crud() -> None:
    async with serve() as (_app, c):
        body = {
            "cron": "*/5 * * * *",
            "tz": "Europe/Paris",
            "overlap": "allow",
            "tolerance_s": 3,
            "on_miss": "skip",
            "task": {"kind": "rep", "pool": "other", "payload": {"x": 1}},
        }
        r = await c.put("/v1/recurring/nightly", json=body)
        assert r.status_code == 200, r.text
        info = r.json()
        assert info["name"] == "nightly" and info["cron"] == "*/5 * * * *" and info["tz"] == "Europe/Paris"
        assert info["pool"] == "other" and info["kind"] == "rep" and info["overlap"] == "allow"
        assert isinstance(info["next_unix_ns"], int) and info["next_unix_ns"] > time.time_ns()
        assert isinstance(info["last_task_id"], str)
        assert (await c.get("/v1/recurring/nightly")).json() == info
        assert (await c.get("/v1/recurring")).json() == {"schedules": [info]}
        occ = (await c.get(f"/v1/tasks/{info['last_task_id']}")).json()
        assert occ["status"] == "scheduled" and occ["kind"] == "rep"
        # replace
        r = await c.put("/v1/recurring/nightly", json={"cron": "@hourly"})
        assert r.json()["cron"] == "@hourly" and r.json()["overlap"] == "skip" and r.json()["tz"] == ""
        # errors
        # a bad cron or time zone is no SubmitError: the code is the status name
        # (docs/reference/behaviour.md#server-details)
        assert err(await c.put("/v1/recurring/x", json={"cron": "not a cron"})) == (400, "invalid_argument")
        assert err(await c.put("/v1/recurring/x", json={"cron": "@hourly", "tz": "Mars/Base"})) == (
            400,
            "invalid_argument",
        )
        # bad task fields in the template stay `invalid`
        r = await c.put("/v1/recurring/x", json={"cron": "@hourly", "task": {"priority": "urgent"}})
        assert err(r) == (400, "invalid")
        assert err(await c.put("/v1/recurring/x", json={"cron": "@hourly", "task": {"pool": "zz"}})) == (
            404,
            "unknown_pool",
        )
        assert err(await c.put("/v1/recurring/x", json={"cron": ""}))[0] == 400
        assert err(await c.put("/v1/recurring/x", json={"cron": "@hourly", "every": 1}))[0] == 400
        assert err(await c.put("/v1/recurring/x", json={"cron": "@hourly", "task": {"after": [1]}}))[0] == 400
        assert err(await c.put("/v1/recurring/x", json={"name": "y", "cron": "@hourly"}))[0] == 400
        assert err(await c.put("/v1/recurring/x", json={"cron": "@hourly", "overlap": "sometimes"}))[0] == 400
        assert err(await c.get("/v1/recurring/x")) == (404, "not_found")
        assert (await c.delete("/v1/recurring/nightly")).json() == {"removed": True}
        assert (await c.delete("/v1/recurring/nightly")).json() == {"removed": False}
        assert (await c.get("/v1/recurring")).json() == {"schedules": []}


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


async def test_metrics() -> None:
    async with serve() as (app, c):
        w = FakeWorker(app, slots=2)
        await c.post("/v1/tasks?wait=true&timeout=5", json={})
        await c.post("/v1/tasks", json={"pool": "other", "priority": "high"})
        r = await c.get("/metrics")
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
        fam = _families(r.text)
        for name in (
            "cronoq_pool_capacity",
            "cronoq_pool_desired",
            "cronoq_pool_busy",
            "cronoq_pool_held",
            "cronoq_pool_pending",
            "cronoq_pool_utilization",
            "cronoq_pool_wait_seconds",
            "cronoq_workers_connected",
            "cronoq_leader",
            "cronoq_tasks_submitted",
            "cronoq_tasks_succeeded",
        ):
            assert name in fam, name
        assert fam["cronoq_tasks_submitted"].type == "counter"
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for f in fam.values() for s in f.samples
        }
        assert samples[("cronoq_leader", ())] == 1
        assert samples[("cronoq_workers_connected", ())] == 1
        assert samples[("cronoq_pool_capacity", (("pool", "default"),))] == 2
        assert samples[("cronoq_pool_capacity", (("pool", "other"),))] == 0
        assert samples[("cronoq_pool_pending", (("class", "high"), ("pool", "other")))] == 1
        assert samples[("cronoq_pool_pending", (("class", "low"), ("pool", "other")))] == 0
        assert ("cronoq_pool_wait_seconds", (("pool", "default"), ("quantile", "0.99"))) in samples
        assert samples[("cronoq_tasks_submitted_total", ())] == 2
        assert samples[("cronoq_tasks_succeeded_total", ())] == 1
        assert "cronoq_tasks_succeeded_total 1.0" in r.text
        await w.close()

    # a standby exports cronoq_leader 0 (200, not 503)
    async with serve(lead=False) as (_app, c):
        r = await c.get("/metrics")
        assert r.status_code == 200
        fam = _families(r.text)
        assert fam["cronoq_leader"].samples[0].value == 0
        assert "cronoq_pool_capacity" not in fam


# ---------------------------------------------------------------------------------------------
# health, standby, shutdown


async def test_health_ready_standby_and_shutdown() -> None:
    async with serve(TOKENS, lead=False) as (app, c):
        assert (await c.get("/healthz")).status_code == 200
        assert err(await c.get("/readyz")) == (503, "unavailable")
        # a token is never needed, and a bad one is ignored
        assert (await c.get("/healthz", headers=bearer("nonsense-token-xxxxxxxx"))).status_code == 200
        h = bearer(ADMIN)
        for method, path in [
            ("POST", "/v1/tasks"),
            ("POST", "/v1/tasks:batch"),
            ("GET", "/v1/tasks"),
            ("GET", "/v1/tasks/1"),
            ("GET", "/v1/tasks/1/result"),
            ("POST", "/v1/tasks/1/cancel"),
            ("GET", "/v1/snapshot"),
            ("GET", "/v1/workers"),
            ("GET", "/v1/recurring"),
            ("GET", "/v1/recurring/x"),
            ("PUT", "/v1/recurring/x"),
            ("DELETE", "/v1/recurring/x"),
        ]:
            body = (
                {"tasks": []} if path.endswith(":batch") else ({"cron": "@hourly"} if method == "PUT" else {})
            )
            kw: dict[str, Any] = {"json": body} if method in ("POST", "PUT") else {}
            r = await c.request(method, path, headers=h, **kw)
            assert err(r) == (503, "unavailable"), (method, path, r.text)
        await app.lead()
        assert (await c.get("/readyz", headers=bearer("bad-token-xxxxxxxxxxxx"))).status_code == 200
        assert (await c.get("/v1/tasks", headers=h)).status_code == 200
        await app.stop()
        assert (await c.get("/healthz")).status_code == 200
        assert err(await c.get("/readyz")) == (503, "unavailable")
        r = await c.post("/v1/tasks", json={}, headers=h)
        assert err(r) == (503, "unavailable") and "shutting down" in r.json()["error"]


# ---------------------------------------------------------------------------------------------
# auth


# (method, path, json body, roles allowed)
ROUTES: list[tuple[str, str, Any, set[str]]] = [
    ("POST", "/v1/tasks", {}, {"client", "admin"}),
    ("POST", "/v1/tasks:batch", {"tasks": [{}]}, {"client", "admin"}),
    ("GET", "/v1/tasks", None, {"client", "admin"}),
    ("GET", "/v1/tasks/{id}", None, {"client", "admin"}),
    ("GET", "/v1/tasks/{id}/result?timeout=0", None, {"client", "admin"}),
    ("POST", "/v1/tasks/{id}/cancel", None, {"client", "admin"}),
    ("GET", "/v1/snapshot", None, {"metrics", "admin"}),
    ("GET", "/v1/workers", None, {"metrics", "admin"}),
    ("GET", "/v1/recurring", None, {"metrics", "admin"}),
    ("GET", "/v1/recurring/r", None, {"metrics", "admin"}),
    ("PUT", "/v1/recurring/r", {"cron": "@hourly"}, {"admin"}),
    ("DELETE", "/v1/recurring/r", None, {"admin"}),
    ("GET", "/metrics", None, {"metrics", "admin"}),
]
ROLE_TOKENS = {"client": CLIENT, "worker": WORKER, "metrics": METRICS, "admin": ADMIN}


async def test_auth_matrix() -> None:
    async with serve(TOKENS, host="cronoq.example.com") as (_app, c):
        for method, path, body, allowed in ROUTES:
            tid = (await c.post("/v1/tasks", json={}, headers=bearer(ADMIN))).json()["id"]
            await c.put("/v1/recurring/r", json={"cron": "@hourly"}, headers=bearer(ADMIN))
            url = path.format(id=tid)
            kw: dict[str, Any] = {"json": body} if body is not None else {}
            for headers in ({}, bearer("wrong-token-0123456789"), {"authorization": "Basic abc"}):
                r = await c.request(method, url, headers=headers, **kw)
                assert err(r) == (401, "unauthenticated"), (method, url, headers)
                assert r.headers["www-authenticate"].startswith("Bearer")
            for role, token in ROLE_TOKENS.items():
                r = await c.request(method, url, headers=bearer(token), **kw)
                if role in allowed:
                    ok = r.status_code not in (401, 403) and (r.status_code < 500 or r.status_code == 504)
                    assert ok, (method, url, role, r.text)
                else:
                    assert err(r) == (403, "permission_denied"), (method, url, role, r.text)
        # the events stream: checked before streaming starts
        assert err(await c.get("/v1/events")) == (401, "unauthenticated")
        assert err(await c.get("/v1/events", headers=bearer(METRICS))) == (403, "permission_denied")
        # openapi, dashboard, health: no token needed
        assert (await c.get("/openapi.json")).status_code == 200
        assert (await c.get("/")).status_code == 200
        assert (await c.get("/healthz")).status_code == 200


async def test_auth_checked_before_the_body() -> None:
    async with serve(TOKENS + "[limits]\nmax_http_body_bytes = 1024\n") as (_app, c):
        read = []

        async def body() -> Any:
            read.append(1)
            yield b"{not json" + b"x" * 2000

        r = await c.post("/v1/tasks", content=body(), headers={"content-type": "application/json"})
        assert err(r) == (401, "unauthenticated")
        assert read == []  # the body was never read
        r = await c.post(
            "/v1/tasks", content=b"x" * 2000, headers={**bearer(METRICS), "content-type": "application/json"}
        )
        assert err(r) == (403, "permission_denied")
        r = await c.post(
            "/v1/tasks", content=b"x" * 2000, headers={**bearer(CLIENT), "content-type": "application/json"}
        )
        assert err(r) == (413, "resource_exhausted")


async def test_pool_and_tenant_restricted_tokens() -> None:
    async with serve(TOKENS) as (_app, c):
        s, t, a = bearer(SCOPED), bearer(TENANT), bearer(ADMIN)
        # another token's pool answers as a missing one (no existence oracle)
        assert err(await c.post("/v1/tasks", json={}, headers=s)) == (404, "unknown_pool")
        assert err(await c.post("/v1/tasks", json={"pool": "nope"}, headers=s)) == (404, "unknown_pool")
        mine = (await c.post("/v1/tasks", json={"pool": "other"}, headers=s)).json()["id"]
        theirs = (await c.post("/v1/tasks", json={}, headers=a)).json()["id"]
        assert [x["id"] for x in (await c.get("/v1/tasks", headers=s)).json()["tasks"]] == [mine]
        assert err(await c.get("/v1/tasks?pool=default", headers=s)) == (404, "not_found")
        assert err(await c.get("/v1/tasks?pool=nope", headers=s)) == (404, "not_found")
        # another pool's task answers as one that does not exist (no existence oracle)
        assert err(await c.get(f"/v1/tasks/{theirs}", headers=s)) == (404, "not_found")
        assert err(await c.post(f"/v1/tasks/{theirs}/cancel", headers=s)) == (404, "not_found")
        assert err(await c.get(f"/v1/tasks/{theirs}/result", headers=s)) == (404, "not_found")
        assert err(await c.get("/v1/events?pool=default", headers=s)) == (404, "not_found")
        # tenant: stamped, enforced
        tt = (await c.post("/v1/tasks", json={}, headers=t)).json()["id"]
        assert (await c.get(f"/v1/tasks/{tt}", headers=a)).json()["tenant"] == "acme"
        assert err(await c.post("/v1/tasks", json={"tenant": "other"}, headers=t)) == (
            403,
            "permission_denied",
        )
        assert err(await c.get(f"/v1/tasks/{theirs}", headers=t)) == (404, "not_found")
        assert [x["id"] for x in (await c.get("/v1/tasks", headers=t)).json()["tasks"]] == [tt]


async def test_host_check() -> None:
    # no auth on loopback: the Host must be a loopback name
    async with serve(host="evil.example.com") as (_app, c):
        for path in ("/v1/tasks", "/", "/openapi.json", "/metrics", "/v1/snapshot"):
            assert err(await c.get(path)) == (403, "permission_denied"), path
        assert (await c.get("/healthz")).status_code == 200
        assert (await c.get("/readyz")).status_code == 200
        for host in ("localhost", "localhost:7071", "127.0.0.1", "127.0.0.5:80", "[::1]:7071"):
            assert (await c.get("/v1/tasks", headers={"host": host})).status_code == 200, host
        for host in ("", "127.0.0.1.evil.com", "localhost.evil.com:7071", "10.0.0.1"):
            assert err(await c.get("/v1/tasks", headers={"host": host})) == (403, "permission_denied"), host
    # with tokens the Host is not checked
    async with serve(TOKENS, host="cronoq.example.com") as (_app, c):
        assert (await c.get("/v1/tasks", headers=bearer(CLIENT))).status_code == 200
    # a listener beyond loopback (insecure-no-auth) is not checked either
    base = '[server]\nhttp_addr = "0.0.0.0:7071"\ninsecure_no_auth = true\n'
    async with serve(base="".join([base, '[store]\nkind = "memory"\n']), host="cronoq.example.com") as (
        _app,
        c,
    ):
        assert (await c.get("/v1/tasks")).status_code == 200


CROSS_SITE: list[dict[str, str]] = [
    {"origin": "http://evil.example"},
    {"origin": "http://evil.example:7071"},
    {"origin": "http://127.0.0.1:8080"},  # another port of the same host: another origin
    {"origin": "http://localhost:7071"},  # another host name than the one addressed
    {"origin": "https://127.0.0.1"},  # https: default port 443
    {"origin": "null"},  # sandboxed iframes, file: pages, redirects
    {"origin": "NULL"},
    {"origin": "garbage"},
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
    {"sec-fetch-site": "cross-site", "origin": "http://127.0.0.1:7071"},
]
SAME_ORIGIN: list[dict[str, str]] = [
    {},  # no Origin: curl, urllib, httpx, our own client
    {"origin": "http://127.0.0.1:7071"},
    {"origin": "HTTP://127.0.0.1:7071"},
    {"origin": "http://127.0.0.1:7071", "sec-fetch-site": "same-origin"},
    {"sec-fetch-site": "same-origin"},
    {"sec-fetch-site": "none"},  # typed into the address bar / a bookmark
]


async def test_cross_site_state_changes_refused_without_auth() -> None:
    """Without tokens, POST/PUT/DELETE/PATCH that a browser marks as cross-site → 403
    permission_denied (a web page could otherwise drive the loopback API); everything else works."""
    async with serve() as (_app, c):
        tid = (await c.post("/v1/tasks", json={"key": "victim", "pool": "other", "start_in_s": 3600})).json()[
            "id"
        ]
        await c.put("/v1/recurring/keep", json={"cron": "0 0 1 1 *"})
        for headers in CROSS_SITE:
            for method, path, body in [
                ("POST", "/v1/tasks", b'{"key": "x"}'),
                ("POST", "/v1/tasks:batch", b'{"tasks": [{"key": "x"}]}'),
                ("POST", f"/v1/tasks/{tid}/cancel", b""),
                ("POST", "/v1/tasks/victim/cancel", b""),
                ("PUT", "/v1/recurring/evil", b'{"cron": "* * * * *"}'),
                ("DELETE", "/v1/recurring/keep", b""),
                ("PATCH", "/v1/tasks/victim", b"{}"),
            ]:
                r = await c.request(
                    method, path, content=body, headers={**headers, "content-type": "text/plain"}
                )
                assert err(r) == (403, "permission_denied"), (headers, method, path, r.text)
                assert "cross-site" in r.json()["error"]
            # reads are never refused (and SSE is a GET)
            assert (await c.get("/v1/tasks/victim", headers=headers)).status_code == 200, headers
            assert (await c.get("/v1/tasks", headers=headers)).status_code == 200, headers
            assert (await c.get("/healthz", headers=headers)).status_code == 200, headers
            assert (await c.get("/readyz", headers=headers)).status_code == 200, headers
        # nothing happened
        assert (await c.get("/v1/tasks/victim")).json()["status"] == "scheduled"
        assert (await c.get("/v1/tasks/x")).status_code == 404
        assert (await c.get("/v1/recurring/keep")).status_code == 200
        assert (await c.get("/v1/recurring/evil")).status_code == 404
        # no Origin and same-origin requests work (the dashboard posts from its own origin)
        for i, headers in enumerate(SAME_ORIGIN):
            r = await c.post("/v1/tasks", json={"key": f"ok-{i}"}, headers=headers)
            assert r.status_code == 200, (headers, r.text)
            r = await c.put("/v1/recurring/ok", json={"cron": "0 0 1 1 *"}, headers=headers)
            assert r.status_code == 200, (headers, r.text)
            r = await c.delete("/v1/recurring/ok", headers=headers)
            assert r.status_code == 200, (headers, r.text)
        r = await c.post("/v1/tasks/victim/cancel", headers={"origin": "http://127.0.0.1:7071"})
        assert r.json() == {"cancelled": True}
    # the origin is compared with the Host the request was addressed to (default ports filled in)
    for host, origin in [
        ("localhost:7071", "http://localhost:7071"),
        ("localhost", "http://localhost"),
        ("localhost", "http://localhost:80"),
        ("[::1]:7071", "http://[::1]:7071"),
        ("LocalHost:7071", "http://localhost:7071"),
    ]:
        async with serve(host=host) as (_app, c):
            r = await c.post("/v1/tasks", json={}, headers={"origin": origin})
            assert r.status_code == 200, (host, origin, r.text)
            r = await c.post("/v1/tasks", json={}, headers={"origin": "http://evil.example"})
            assert err(r) == (403, "permission_denied"), host


async def test_cross_site_not_checked_with_auth() -> None:
    """With tokens the bearer token (never added by a browser on its own) is the protection."""
    async with serve(TOKENS, host="cronoq.example.com") as (_app, c):
        for headers in CROSS_SITE:
            r = await c.post("/v1/tasks", json={}, headers={**headers, **bearer(CLIENT)})
            assert r.status_code == 200, (headers, r.text)
            assert err(await c.post("/v1/tasks", json={}, headers=headers)) == (401, "unauthenticated")


def test_cross_site_reason_unit() -> None:
    reason = http_guard.cross_site_reason
    h = {"host": "127.0.0.1:7071"}
    assert reason("GET", "http", {**h, "origin": "http://evil.example"}) is None
    assert reason("OPTIONS", "http", {**h, "sec-fetch-site": "cross-site"}) is None
    assert reason("post", "http", {**h, "origin": "http://evil.example"}) is not None
    assert reason("POST", "http", h) is None
    assert reason("POST", "https", {"host": "cronoq.example", "origin": "https://cronoq.example"}) is None
    assert reason("POST", "https", {"host": "cronoq.example:443", "origin": "https://cronoq.example"}) is None
    assert reason("POST", "http", {"host": "cronoq.example", "origin": "https://cronoq.example"}) is not None
    assert reason("POST", "http", {"origin": "http://127.0.0.1:7071"}) is not None  # no Host to compare
    assert reason("POST", "http", {**h, "origin": "http://127.0.0.1:99999"}) is not None
    assert reason("POST", "http", {**h, "origin": "chrome-extension://abc"}) is not None


async def test_after_accepts_one_id_or_key() -> None:
    """``after`` is a list of ids or keys, or one id or key (as in-process ``after=ref``)."""
    async with serve() as (app, c):
        pid = (await c.post("/v1/tasks", json={"key": "parent", "pool": "other"})).json()["id"]
        for i, after in enumerate(["parent", int(pid), pid, [pid], ["parent"]]):
            r = await c.post("/v1/tasks", json={"key": f"child-{i}", "after": after})
            assert r.status_code == 200, (after, r.text)
            assert (await c.get(f"/v1/tasks/child-{i}")).json()["status"] == "blocked", after
        r = await c.post("/v1/tasks", json={"after": "no-such-parent"})
        assert err(r) == (404, "unknown_dependency")
        r = await c.post("/v1/tasks:batch", json={"tasks": [{"key": "b1"}, {"key": "b2", "after": "b1"}]})
        assert r.status_code == 200, r.text
        # the single ref is a success edge like a list member: children run once the parent did
        w = FakeWorker(app, pool="other")
        r = await c.get("/v1/tasks/parent/result", params={"timeout": 5})
        assert r.json()["status"] == "succeeded"
        await w.close()
        for i in range(5):
            assert (await c.get(f"/v1/tasks/child-{i}")).json()["status"] == "ready"


async def test_tags_and_labels_scalars_are_stringified() -> None:
    """Tag and label values: numbers and booleans become their Python ``str()`` (as in-process,
    docs/reference/behaviour.md#task-fields); strings stay as they are."""
    async with serve() as (app, c):
        body = {
            "key": "tagged",
            "tags": {"n": 1, "f": 1.5, "b": True, "no": False, "s": "x", "big": 12345678901234567890},
            "labels": {"gpu": True, "zone": 2},
        }
        r = await c.post("/v1/tasks", json=body)
        assert r.status_code == 200, r.text
        # a worker without those labels gets nothing; one with the stringified labels runs it
        plain = FakeWorker(app, slots=1)
        labelled = FakeWorker(app, labels={"gpu": "True", "zone": "2"})
        lease = await labelled.wait_lease(timeout=5)
        assert lease.tags == {
            "n": "1",
            "f": "1.5",
            "b": "True",
            "no": "False",
            "s": "x",
            "big": "12345678901234567890",
        }
        assert plain.leases == []
        await plain.close()
        await labelled.close()
        # the same task in-process: the same strings
        from cronoq.runtime.task import make_options

        opts = make_options(tags=body["tags"], labels=body["labels"])  # type: ignore[arg-type]
        assert opts.tags == lease.tags and opts.labels == {"gpu": "True", "zone": "2"}


async def test_metrics_only_app() -> None:
    app = make_app(TOKENS + '[server]\nmetrics_addr = "127.0.0.1:7072"\n')
    await app.lead()
    try:
        web = create_metrics_app(app)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=web), base_url="http://127.0.0.1:7072"
        ) as c:
            r = await c.get("/metrics")
            assert r.status_code == 200 and "cronoq_leader 1.0" in r.text
            assert (await c.get("/metrics", headers=bearer("bogus-token-0123456789"))).status_code == 200
            assert (await c.get("/healthz")).status_code == 200
            assert (await c.get("/readyz")).status_code == 200
            for path in ("/v1/tasks", "/v1/snapshot", "/openapi.json", "/"):
                assert err(await c.get(path)) == (404, "not_found"), path
    finally:
        await app.stop()


async def test_concurrency_limit() -> None:
    async with serve("[limits]\nmax_concurrent_requests = 1\nmax_concurrent_streams = 1\n") as (app, c):
        tid = (await c.post("/v1/tasks", json={})).json()["id"]
        waiting = asyncio.ensure_future(c.get(f"/v1/tasks/{tid}/result?timeout=30"))
        for _ in range(1000):  # until the long poll holds the one request slot (5 s at most)
            r = await c.get("/v1/tasks")
            if r.status_code != 200 or waiting.done():
                break
            await asyncio.sleep(0.005)
        assert err(r) == (429, "resource_exhausted")
        assert (await c.get("/healthz")).status_code == 200
        # one event stream at a time
        web = create_http_app(app)
        async with SSE(web, "/v1/events") as first, SSE(web, "/v1/events") as second:
            assert first.status == 200
            assert second.status == 429
        w = FakeWorker(app)
        assert (await waiting).status_code == 200
        await w.close()
        assert (await c.get("/v1/tasks")).status_code == 200


# ---------------------------------------------------------------------------------------------
# OpenAPI, dashboard


async def test_openapi_document() -> None:
    async with serve() as (_app, c):
        doc = (await c.get("/openapi.json")).json()
    try:
        from openapi_spec_validator import validate
    except ImportError:  # pragma: no cover - structural checks only
        validate = None
    if validate is not None:
        validate(doc)
    assert doc["openapi"].startswith("3.")
    paths = doc["paths"]
    expected = {
        ("/v1/tasks", "post"),
        ("/v1/tasks", "get"),
        ("/v1/tasks:batch", "post"),
        ("/v1/tasks/{ref}", "get"),
        ("/v1/tasks/{ref}/result", "get"),
        ("/v1/tasks/{ref}/cancel", "post"),
        ("/v1/tasks/{ref}/replay", "post"),
        ("/v1/tasks:replay", "post"),
        ("/v1/tasks:cancel", "post"),
        ("/v1/pools/{name}/pause", "post"),
        ("/v1/pools/{name}/resume", "post"),
        ("/v1/recurring/{name}/pause", "post"),
        ("/v1/recurring/{name}/resume", "post"),
        ("/v1/recurring/{name}/run", "post"),
        ("/v1/signals/{name}", "post"),
        ("/v1/events", "get"),
        ("/v1/snapshot", "get"),
        ("/v1/history", "get"),
        ("/v1/workers", "get"),
        ("/v1/resources/{name}/keys", "get"),
        ("/v1/recurring", "get"),
        ("/v1/recurring/{name}", "get"),
        ("/v1/recurring/{name}", "put"),
        ("/v1/recurring/{name}", "delete"),
        ("/metrics", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/openapi.json", "get"),
    }
    assert {(p, m) for p, item in paths.items() for m in item} == expected
    ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(ids) == len(set(ids))
    schemas = doc["components"]["schemas"]
    for name in (
        "TaskSpec",
        "TaskInfo",
        "TaskResult",
        "SnapshotResponse",
        "PoolSnapshot",
        "StatusEvent",
        "Error",
    ):
        assert name in schemas
    assert schemas["TaskInfo"]["properties"]["id"]["type"] == "string"
    assert (
        "/v1/events" in paths
        and "text/event-stream" in paths["/v1/events"]["get"]["responses"]["200"]["content"]
    )
    assert openapi_document(None)["paths"].keys() == paths.keys()


async def test_responses_match_openapi_schemas() -> None:
    openapi_schema_validator = pytest.importorskip("openapi_schema_validator")
    doc = openapi_document(None)
    comps = doc["components"]["schemas"]

    def check(name: str, data: Any) -> None:
        schema = {**comps[name], "components": {"schemas": comps}}
        schema = json.loads(json.dumps(schema).replace("#/components/schemas/", "#/components/schemas/"))
        openapi_schema_validator.validate(data, schema, cls=openapi_schema_validator.OAS30Validator)

    async with serve() as (app, c):
        w = FakeWorker(app)
        r = await c.post("/v1/tasks?wait=true&timeout=5", json={"payload": [1]})
        check("SubmitResponse", r.json())
        tid = r.json()["id"]
        check("TaskInfo", (await c.get(f"/v1/tasks/{tid}")).json())
        check("TaskResult", (await c.get(f"/v1/tasks/{tid}/result")).json())
        check("TaskList", (await c.get("/v1/tasks")).json())
        check("SubmitBatchResponse", (await c.post("/v1/tasks:batch", json={"tasks": [{}]})).json())
        check("SnapshotResponse", (await c.get("/v1/snapshot")).json())
        app.history.record(app.sched.clock.time_ns() / 1e9, await app.sched.snapshot())
        check("History", (await c.get("/v1/history")).json())
        check("WorkerList", (await c.get("/v1/workers")).json())
        check("RecurringInfo", (await c.put("/v1/recurring/r", json={"cron": "@daily"})).json())
        check("RecurringList", (await c.get("/v1/recurring")).json())
        check("CancelResponse", (await c.post(f"/v1/tasks/{tid}/cancel")).json())
        check("Error", (await c.get("/v1/tasks/99999")).json())
        await w.close()


async def test_dashboard_placeholder() -> None:
    async with serve() as (_app, c):
        r = await c.get("/")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert "/openapi.json" in r.text


async def test_a_failed_commit_of_a_schedule_is_unavailable_not_invalid(tmp_path: Any) -> None:
    """A schedule whose commit failed (or any after a lost one: the leader is stepping down)
    answers 503 ``unavailable``, which a client retries, with no store detail, as every other
    failed commit does; it used to be taken for a bad cron: 400 ``invalid_argument`` carrying
    the store's error (docs/how-to/security.md#store-and-leadership)."""
    extra = f'[store]\nkind = "sqlite"\npath = "{tmp_path / "s.db"}"\n'
    base = BASE.replace('[store]\nkind = "memory"\n', "")
    async with serve(extra, base=base) as (app, c):
        store: Any = app.sched.seam.store

        async def commit(*a: Any) -> None:
            raise RuntimeError("disk /var/lib/cronoq full")

        store.commit = commit
        r = await c.put("/v1/recurring/nightly", json={"cron": "0 3 * * *"})
        assert (r.status_code, r.json()["code"]) == (503, "unavailable"), r.text
        assert "/var/lib" not in r.text
