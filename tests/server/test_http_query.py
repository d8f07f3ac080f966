"""Query parameters of the HTTP API (``cronoq.server.http_query``): the plural aliases
(``?kinds=`` is ``?kind=``) and a 400 with a did-you-mean for an unknown parameter, instead
of a filter silently ignored."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from .test_http_support import serve


async def test_kinds_is_an_alias_of_kind() -> None:
    async with serve() as (_app, c):
        a = (await c.post("/v1/tasks", json={"kind": "thumb"})).json()["id"]
        b = (await c.post("/v1/tasks", json={"kind": "mail"})).json()["id"]
        await c.post("/v1/tasks", json={"kind": "other"})
        for query in (
            "kind=thumb,mail",
            "kinds=thumb,mail",
            "kinds=thumb&kind=mail",
            "kinds=thumb&kinds=mail",
        ):
            r = await c.get(f"/v1/tasks?{query}")
            assert r.status_code == 200, r.text
            assert [t["id"] for t in r.json()["tasks"]] == [a, b], query
        r = await c.get("/v1/tasks?statuses=ready&pools=default&tags=x=1")
        assert r.status_code == 200 and r.json()["tasks"] == [], r.text


async def test_unknown_query_parameters_are_refused_with_a_did_you_mean() -> None:
    async with serve() as (_app, c):
        r = await c.get("/v1/tasks?knd=thumb")
        assert r.status_code == 400, r.text
        body = r.json()
        assert body["code"] == "invalid_argument"
        assert body["error"].startswith(
            "unknown query parameter 'knd' (did you mean 'kind'?); GET /v1/tasks takes: "
        )
        assert "created_after" in body["error"] and "kinds" not in body["error"]
        r = await c.get("/v1/snapshot?verbose=1")
        assert r.json() == {
            "error": "unknown query parameter 'verbose'; GET /v1/snapshot takes no query parameters",
            "code": "invalid_argument",
        }
        tid = (await c.post("/v1/tasks?wiat=true", json={})).json()
        assert "did you mean 'wait'?" in tid["error"]
        # the documented ones still work on every route that reads them
        t = (await c.post("/v1/tasks?wait=false", json={"key": "k1"})).json()["id"]
        assert (await c.get(f"/v1/tasks/{t}?tenant=")).status_code == 200
        assert (await c.get("/v1/tasks/k1?key=k1")).status_code == 200
        assert (await c.get(f"/v1/tasks/{t}/result?timeout=0")).status_code in (200, 504)
        assert (await c.get("/v1/history?seconds=60")).status_code == 200
        r = await c.get(f"/v1/tasks/{t}?keys=k1")
        assert r.status_code == 400 and "did you mean 'key'?" in r.json()["error"], r.text


async def test_metrics_and_probes_keep_their_callers_parameters() -> None:
    async with serve() as (_app, c):
        assert (await c.get("/healthz?from=balancer")).status_code == 200
        assert (await c.get("/metrics?format=prometheus")).status_code == 200
