"""Request limits checked before conversion (``cronoq.server.request_limits``), the same on
HTTP and gRPC, and the readiness rule on the leadership lease (``ServerApp.ready``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server import convert, request_limits
from cronoq.server.config import LimitsConfig
from cronoq.server.http_json import HttpError, task_spec_from_json

from .test_http_support import serve

L = LimitsConfig()

#: (JSON task, message) — every limit that a count or a length of one task can exceed
OVER: list[tuple[dict[str, Any], str]] = [
    ({"after": [1] * 1025}, "too many dependencies (max 1024, limits.max_deps)"),
    ({"deps": [1] * 1000, "after": [2] * 25}, "too many dependencies (max 1024, limits.max_deps)"),
    ({"tags": {str(i): "x" for i in range(65)}}, "too many tags (max 64, limits.max_tags)"),
    ({"labels": {str(i): "x" for i in range(65)}}, "too many labels (max 64, limits.max_labels)"),
    ({"resources": {str(i): 1 for i in range(17)}}, "too many resources (max 16, limits.max_resources)"),
    ({"key": "k" * 257}, "key is longer than 256 characters (limits.max_key_len)"),
    ({"kind": "k" * 129}, "kind is longer than 128 characters (limits.max_kind_len)"),
    ({"tenant": "t" * 257}, "tenant is longer than 256 characters (limits.max_tenant_len)"),
    ({"tags": {"k" * 1025: "x"}}, "tag is longer than 1024 characters (limits.max_tag_len)"),
    ({"labels": {"zone": "z" * 1025}}, "label value is longer than 1024 characters (limits.max_label_len)"),
    (
        {"resources": {"customer:" + "k" * 1025: 1}},
        "resource 'customer': key is longer than 1024 characters (limits.max_label_len)",
    ),
]


@pytest.mark.parametrize(("task", "message"), OVER, ids=[m for _, m in OVER])
def test_json_and_protobuf_refuse_the_same_with_the_same_message(task: dict[str, Any], message: str) -> None:
    with pytest.raises(HttpError) as he:
        task_spec_from_json(task, limits=L)
    assert (he.value.status, he.value.code, he.value.message) == (400, "invalid", message)
    spec = task_spec_from_json(task)  # (converted without limits, as a gRPC client would send it)
    with pytest.raises(
        request_limits.InvalidArgument, match=f"^{message.replace('(', '.').replace(')', '.')}$"
    ):
        convert.submission(spec, L)


def test_counts_are_checked_before_anything_is_converted() -> None:
    """An element conversion would refuse is never looked at: the count fails first."""
    with pytest.raises(HttpError, match="too many dependencies"):
        task_spec_from_json({"after": [{"not": "a ref"}] * 1100}, limits=L)
    with pytest.raises(HttpError, match=r"tasks\[3\]: too many tags"):
        task_spec_from_json({"tags": {str(i): [] for i in range(65)}}, "tasks[3]", L)


def test_labels_and_tenant_count_in_max_message_bytes() -> None:
    lim = LimitsConfig(max_message_bytes=4096, max_label_len=10_000, max_tenant_len=10_000)
    for spec in (pb.TaskSpec(labels={"zone": "z" * 4000}), pb.TaskSpec(tenant="t" * 4000)):
        with pytest.raises(request_limits.InvalidArgument, match=r"too large: .* limits\.max_message_bytes"):
            convert.submission(spec, lim)


async def test_http_labels_and_tenant_limits_are_configurable() -> None:
    async with serve("[limits]\nmax_labels = 1\nmax_tenant_len = 3\n") as (_app, c):
        r = await c.post("/v1/tasks", json={"labels": {"a": "1", "b": "2"}})
        refusal = {"error": "too many labels (max 1, limits.max_labels)", "code": "invalid"}
        assert (r.status_code, r.json()) == (400, refusal)
        r = await c.post("/v1/tasks", json={"tenant": "abcd"})
        assert r.json() == {
            "error": "tenant is longer than 3 characters (limits.max_tenant_len)",
            "code": "invalid",
        }
        assert (await c.post("/v1/tasks", json={"tenant": "abc", "labels": {"a": "1"}})).status_code == 200


async def test_readyz_turns_503_before_the_lease_can_lapse(tmp_path: Path) -> None:
    base = f'[store]\nkind = "sqlite"\npath = "{tmp_path / "db"}"\n\n[[pools]]\nname = "default"\n'
    async with serve(base=base) as (app, c):
        assert (await c.get("/readyz")).status_code == 200
        store = app.sched._store
        # as after a freeze: the last renewal started almost lease_ttl ago
        store.lease_until = time.monotonic() + 0.5
        r = await c.get("/readyz")
        assert (r.status_code, r.json()["code"]) == (503, "unavailable")
        assert "lease" in r.json()["error"]
        assert (await c.get("/healthz")).status_code == 200


async def test_a_300_way_chord_needs_no_config_change() -> None:
    async with serve() as (_app, c):
        r = await c.post("/v1/tasks:batch", json={"tasks": [{"kind": "part"}] * 300})
        ids = [t["id"] for t in r.json()["tasks"]]
        r = await c.post("/v1/tasks", json={"kind": "callback", "after": ids})
        assert r.status_code == 200, r.text
        assert len((await c.get(f"/v1/tasks/{r.json()['id']}")).json()["parents"]) == 300
