"""Defect: keys crossed tenants and pools; "not yours" answered differently from "unknown".

Tenant t2 submitted key K; tenant t1 submitted key K and got t2's task id with ``duplicate:
true`` (its own payload silently dropped), then 403 on that id.  Now keys are scoped by tenant
(pools share the tenant's namespace), a duplicate only ever returns the caller's own task,
another tenant's (or pool's) task answers exactly like an unknown one (404), and a dependency
on another tenant's task is refused.  Real server, real tokens, loopback.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from server.procs import TOKENS, ServerProc


def _h(role: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[role]}"}


@pytest.fixture
def http(auth_server: ServerProc) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://{auth_server.http}", timeout=30) as c:
        yield c


def _submit(c: httpx.Client, role: str, **body: Any) -> httpx.Response:
    return c.post("/v1/tasks", json=body, headers=_h(role))


def test_same_key_in_two_tenants_never_crosses(http: httpx.Client) -> None:
    r2 = _submit(http, "client_t2", key="K", payload="t2's")
    r1 = _submit(http, "client_t1", key="K", payload="t1's")
    assert r2.status_code == r1.status_code == 200
    assert r1.json()["duplicate"] is False and r1.json()["id"] != r2.json()["id"]
    # each tenant's duplicate is its own task, and its key finds its own task
    assert _submit(http, "client_t1", key="K").json() == {"id": r1.json()["id"], "duplicate": True}
    assert http.get("/v1/tasks/K", headers=_h("client_t1")).json()["id"] == r1.json()["id"]
    assert http.get("/v1/tasks/K", headers=_h("client_t2")).json()["id"] == r2.json()["id"]
    # an untenanted admin names the tenant whose key it means
    assert http.get("/v1/tasks/K?tenant=t2", headers=_h("admin")).json()["id"] == r2.json()["id"]


def unknown_task(ref: str) -> str:
    """The one NOT_FOUND message for a task (never existed, no longer retained, or not yours)."""
    return (
        f"unknown task '{ref}': not live, and not retained if it existed (a finished task is kept "
        "for limits.key_retention_s, 3600 s, and in the store's history for store.keep_finished_s, "
        "604800 s)"
    )


def test_not_yours_and_unknown_answer_the_same(http: httpx.Client) -> None:
    theirs = _submit(http, "client_t2", payload="x").json()["id"]
    unknown = str(int(theirs) + 1_000_000)
    for path in ("/v1/tasks/{}", "/v1/tasks/{}/result?timeout=0"):
        a = http.get(path.format(theirs), headers=_h("client_t1"))
        b = http.get(path.format(unknown), headers=_h("client_t1"))
        assert a.status_code == b.status_code == 404
        assert a.json() == {"error": unknown_task(theirs), "code": "not_found"}
        assert b.json() == {"error": unknown_task(unknown), "code": "not_found"}
    a = http.post(f"/v1/tasks/{theirs}/cancel", headers=_h("client_t1"))
    assert (a.status_code, a.json()["code"]) == (404, "not_found")
    # a pool the token may not use: the same
    other_pool = _submit(http, "admin", pool="b").json()["id"]
    a = http.get(f"/v1/tasks/{other_pool}", headers=_h("client_a"))
    assert a.json() == {"error": unknown_task(other_pool), "code": "not_found"}


def test_dependencies_on_other_tenants_tasks_are_refused(http: httpx.Client) -> None:
    theirs = _submit(http, "client_t2", key="dep-target").json()["id"]
    r = _submit(http, "client_t1", after=[int(theirs)])
    assert (r.status_code, r.json()) == (
        404,
        {"error": f"unknown dependency '{theirs}'", "code": "unknown_dependency"},
    )
    r = _submit(http, "client_t1", after="dep-target")  # t1 has no such key
    assert (r.status_code, r.json()["code"]) == (404, "unknown_dependency")
    r = http.post("/v1/tasks:batch", json={"tasks": [{"after": [int(theirs)]}]}, headers=_h("client_t1"))
    assert (r.status_code, r.json()["code"]) == (404, "unknown_dependency")


def test_pool_restricted_token_never_gets_another_pools_task(http: httpx.Client) -> None:
    """Pools share the tenant's namespace: a key taken in pool b is refused to a pool-a token,
    without the id of the task that holds it."""
    held = _submit(http, "admin", pool="b", key="shared-key").json()["id"]
    r = _submit(http, "client_a", pool="a", key="shared-key")
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")
    assert held not in r.text
    r = http.post(
        "/v1/tasks:batch", json={"tasks": [{"pool": "a", "key": "shared-key"}]}, headers=_h("client_a")
    )
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied") and held not in r.text
