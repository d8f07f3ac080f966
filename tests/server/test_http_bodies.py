"""The HTTP request bodies as pydantic declarations (``cronoq.server.http_bodies``).

The messages below are those the hand-written parser gave before the bodies became pydantic
declarations (recorded from it): ``body_errors`` must word pydantic's errors the same way,
including which error of several is reported.  Also pinned: the task body is derived from the
task-field table, and the OpenAPI request schemas are the declarations' own.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("pydantic")
pytest.importorskip("starlette")

from pydantic import TypeAdapter

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server import http_bodies, http_json, ops
from cronoq.server.app import ApiError
from cronoq.server.config import LimitsConfig
from cronoq.server.openapi import openapi_document
from cronoq.server.openapi_requests import REF_TEMPLATE, REQUEST_BODIES, oas30
from cronoq.spec import fields as task_fields

L = LimitsConfig()

#: (task body, where, message)
TASK_ERRORS: list[tuple[dict[str, Any], str, str]] = [
    ({"pool": 5}, "", "pool must be a string (got a number)"),
    ({"pool": "p", "bogus": 1, "zz": 2}, "tasks[2]", "unknown fields in tasks[2]: bogus, zz"),
    ({"priority": 7}, "", "priority must be 0..=3 (0 = critical) or a name (got 7)"),
    ({"priority": "urgent"}, "", 'priority must be one of critical, high, normal, low (got "urgent")'),
    ({"priority": True}, "", "priority must be one of critical, high, normal, low (got true)"),
    ({"on_miss": "later"}, "", 'on_miss must be one of run_late, skip, fail (got "later")'),
    ({"timeout_s": -1}, "", "timeout_s must be a non-negative number of seconds (got -1)"),
    ({"timeout_s": "3"}, "", "timeout_s must be a number (got a string)"),
    ({"timeout_s": True}, "", "timeout_s must be a number (got a boolean)"),
    ({"timeout_s": math.inf}, "", "timeout_s must be finite"),
    ({"start_unix_ns": "12x"}, "", "start_unix_ns must be an integer or a string of digits (got '12x')"),
    (
        {"start_unix_ns": 9223372036854775808},
        "",
        "start_unix_ns must be between -9223372036854775808 and 9223372036854775807 "
        "(got 9223372036854775808)",
    ),
    ({"retry": "x"}, "", "retry must be an object (got a string)"),
    (
        {"retry": {"max_attempts": -1}},
        "task",
        "task.retry.max_attempts must be between 0 and 4294967295 (got -1)",
    ),
    ({"retry": {"max_attempts": "x", "bogus": 1}}, "", "unknown field in retry: bogus"),
    ({"retry": {"jitter": 1}}, "", "retry.jitter must be true or false (got a number)"),
    ({"deps": {}}, "", "deps must be an array (got an object)"),
    ({"deps": [{"cond": "failure"}]}, "", "deps[0] must be an object with a target (and an optional cond)"),
    ({"deps": [{"target": "a", "x": 1}]}, "tasks[0]", "unknown field in tasks[0].deps[0]: x"),
    ({"deps": [{"target": {"id": 1, "key": "a"}}]}, "", "deps[0].target must have exactly one of id, key"),
    (
        {"deps": [{"target": {"id": "x"}}]},
        "",
        "deps[0].target.id must be an integer or a string of digits (got 'x')",
    ),
    ({"deps": [{"target": {"key": ""}}]}, "", "deps[0].target.key must not be empty"),
    (
        {"deps": [{"target": "a", "cond": "maybe"}]},
        "",
        "deps[0].cond must be one of on_success, success, on_complete, complete, on_failure, failure "
        '(got "maybe")',
    ),
    ({"deps": [True]}, "", "deps[0] must be a task id or key (got a boolean)"),
    ({"after": True}, "", "after must be a task id or key or an array of them (got a boolean)"),
    ({"after": ["a", ""]}, "", "after[1] must not be empty"),
    ({"after": [0]}, "", "after[0] must be between 1 and 18446744073709551615 (got 0)"),
    ({"resources": {"gpu": 0}}, "", "resources.gpu must be between 1 and 4294967295 (got 0)"),
    ({"resources": []}, "", "resources must be an object (got an array)"),
    ({"tags": {"a": None}}, "", "tags.a must be a string, number or boolean (got null)"),
    ({"labels": "x"}, "", "labels must be an object (got a string)"),
    (
        {"payload": 1, "payload_base64": "aGk="},
        "tasks[1]",
        "tasks[1].payload and payload_base64 are mutually exclusive",
    ),
    ({"payload_base64": "!!"}, "", "payload_base64 is not valid base64"),
    ({"payload_base64": None}, "", "payload_base64 must be a string (got null)"),
    ({"content_type": None}, "", "content_type must be a string (got null)"),
    ({"pool": 1, "priority": "urgent"}, "", "pool must be a string (got a number)"),
    ({"tags": 1, "pool": 1}, "", "pool must be a string (got a number)"),
    (
        {"key": "\ud800"},
        "",
        "task: 'utf-8' codec can't encode character '\\ud800' in position 0: surrogates not allowed",
    ),
]
#: (recurring body for schedule "nm", message)
RECURRING_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"cron": ""}, "cron must not be empty"),
    ({"cron": " "}, "cron must not be empty"),
    ({}, "cron must be a string (got null)"),
    ({"cron": 5}, "cron must be a string (got a number)"),
    ({"cron": "* * * * *", "tz": 1}, "tz must be a string (got a number)"),
    (
        {"cron": "* * * * *", "overlap": "sometimes"},
        'overlap must be one of skip, allow, queue, queue_on_success (got "sometimes")',
    ),
    ({"cron": "* * * * *", "task": []}, "task must be an object (got an array)"),
    (
        {"cron": "* * * * *", "task": {"after": 1}},
        "task.after is not allowed in a recurring template (each occurrence is a fixed start)",
    ),
    (
        {"cron": "* * * * *", "tolerance_s": 1, "task": {"tolerance_s": 2}},
        "tolerance_s is given both at the top level and in task, with different values",
    ),
    (
        {"cron": "* * * * *", "tolerance_s": -1},
        "task.tolerance_s must be a non-negative number of seconds (got -1)",
    ),
    ({"cron": "* * * * *", "overlap": "x", "task": {"pool": 1}}, "task.pool must be a string (got a number)"),
    ({"cron": "* * * * *", "name": "other"}, "name in the body ('other') differs from the path ('nm')"),
    ({"cron": "* * * * *", "what": 1}, "unknown field: what"),
]
#: (bulk body, message): the first bad criterion in the body's order
BULK_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"filter": {}, "x": 1}, "unknown field 'x' (expected filter, request_key, force)"),
    ({"filter": {}}, "filter must be an object with at least one criterion"),
    ({"filter": {"limit": 0, "pools": 1}}, "filter.limit must be an integer >= 1"),
    ({"filter": {"pools": 1, "limit": 0}}, "filter.pools must be a string or a list of strings"),
    (
        {"filter": {"nope": 1, "limit": 0}},
        "unknown filter field 'nope' (expected pools, statuses, kinds, tags, tenant, created_after, "
        "created_before, finished_after, finished_before, limit)",
    ),
    ({"filter": {"tags": {"a": 1}}}, "filter.tags must be an object of strings"),
    (
        {"filter": {"created_after": "2026-01-01"}},
        "filter.created_after must name its UTC offset (e.g. 'Z'): '2026-01-01'",
    ),
    ({"filter": {"created_after": "soon"}}, "filter.created_after is not an RFC 3339 time: 'soon'"),
    ({"filter": {"tenant": 1}}, "filter.tenant must be a string"),
    ({"filter": {"pools": "a"}, "request_key": 1}, "request_key must be a string"),
    ({"filter": {"pools": "a"}, "force": None}, "force must be true or false"),
]


@pytest.mark.parametrize(("body", "where", "message"), TASK_ERRORS)
def test_a_bad_task_body_is_refused_with_the_same_message(
    body: dict[str, Any], where: str, message: str
) -> None:
    with pytest.raises(http_json.HttpError) as e:
        http_json.task_spec_from_json(body, where, L)
    assert (e.value.status, e.value.code, e.value.message) == (400, "invalid", message)


@pytest.mark.parametrize(("body", "message"), RECURRING_ERRORS)
def test_a_bad_recurring_body_is_refused_with_the_same_message(body: dict[str, Any], message: str) -> None:
    with pytest.raises(http_json.HttpError) as e:
        http_json.recurring_request_from_json("nm", body, L)
    assert (e.value.status, e.value.code, e.value.message) == (400, "invalid", message)


@pytest.mark.parametrize(("body", "message"), BULK_ERRORS)
def test_a_bad_bulk_body_is_refused_with_the_same_message(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as e:
        ops.bulk_from_json(body)
    assert (e.value.code, e.value.message) == ("invalid_argument", message)


@pytest.mark.parametrize("field", ["timeout_s", "tolerance_s", "retry.multiplier"])
def test_an_integer_too_large_for_a_float_is_not_finite(field: str) -> None:
    """(The hand parser answered 500 here: float() overflowed.)"""
    name, _, sub = field.partition(".")
    body: dict[str, Any] = {name: {sub: 10**400}} if sub else {name: 10**400}
    with pytest.raises(http_json.HttpError) as e:
        http_json.task_spec_from_json(body, "", L)
    assert e.value.message == f"{field} must be finite"
    with pytest.raises(ApiError, match=r"filter\.created_after must be finite"):
        ops.bulk_from_json({"filter": {"created_after": 10**400}})


def test_a_string_protobuf_refuses_in_a_schedule_is_a_400() -> None:
    """(It was a 500: the UnicodeEncodeError of the RecurringRequest escaped.)"""
    with pytest.raises(http_json.HttpError, match=r"^schedule: 'utf-8' codec can't encode"):
        http_json.recurring_request_from_json("nm", {"cron": "\ud800"}, L)


def test_a_valid_bulk_body() -> None:
    body = {"filter": {"pools": "a", "tenant": "", "limit": 3, "created_after": 5}, "force": True}
    assert ops.bulk_from_json(body) == (
        {"pools": ["a"], "tenant": None, "limit": 3, "created_after": 5.0},
        "",
        True,
    )


def test_the_task_body_is_derived_from_the_task_field_table() -> None:
    declared = http_bodies.TaskSpec.__annotations__
    assert set(declared) == {f.json for f in task_fields.TASK_FIELDS} | set(http_bodies.PAYLOAD_FIELDS)
    assert set(declared) == http_json.TASK_FIELDS
    for f in task_fields.TASK_FIELDS:  # each field has the type of its shape
        assert declared[f.json] is http_bodies.SHAPE_TYPES[f.shape], f.name
    # the order of the checks: the payload, then the shapes in SHAPE_TYPES' order
    shapes = [task_fields.by_name(n).shape for n in (f.name for f in task_fields.TASK_FIELDS)]
    order = list(declared)[len(http_bodies.PAYLOAD_FIELDS) :]
    assert [
        task_fields.TASK_FIELDS[[f.json for f in task_fields.TASK_FIELDS].index(n)].shape for n in order
    ] == sorted(shapes, key=list(http_bodies.SHAPE_TYPES).index)
    template = set(http_bodies.TaskTemplate.__annotations__)
    assert template == set(declared) - set(http_bodies.NOT_IN_TEMPLATE)


def test_the_openapi_request_schemas_are_the_declarations() -> None:
    schemas = openapi_document()["components"]["schemas"]
    for name, body in REQUEST_BODIES.items():
        generated = TypeAdapter(body).json_schema(ref_template=REF_TEMPLATE)
        for ref, sub in generated.pop("$defs", {}).items():
            assert schemas[ref] == oas30(sub), ref
        assert schemas[name] == oas30(generated), name
    assert set(schemas["TaskSpec"]["properties"]) == http_json.TASK_FIELDS
    assert schemas["TaskSpec"]["additionalProperties"] is False


def test_every_request_body_route_names_a_declared_schema() -> None:
    doc = openapi_document()
    named = {
        op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        for item in doc["paths"].values()
        for op in item.values()
        if "requestBody" in op
    }
    assert named == set(REQUEST_BODIES)


def test_oas30_rewrites_what_openapi_3_0_lacks() -> None:
    s = {
        "title": "T",
        "properties": {
            "title": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Title"},
            "r": {"anyOf": [{"$ref": "#/x"}, {"type": "null"}]},
            "c": {"const": 1},
        },
    }
    assert oas30(s) == {
        "properties": {
            "title": {"type": "string", "nullable": True},
            "r": {"$ref": "#/x"},
            "c": {"enum": [1]},
        }
    }


def test_a_valid_task_body_gives_the_same_spec_as_before() -> None:
    body = {
        "pool": "p",
        "priority": 0,
        "payload_base64": "aGk=",
        "after": ["a", 7],
        "deps": [{"target": {"key": "b"}, "cond": "on_failure"}],
        "retry": {},
        "tags": {"n": 1, "b": True, "f": 1.5},
        "start_unix_ns": " 12 ",
        "resources": {"gpu": 2.0},
    }
    ref = pb.TaskRef
    assert http_json.task_spec_from_json(body, "", L) == pb.TaskSpec(
        pool="p",
        priority=pb.PRIORITY_CRITICAL,
        payload=b"hi",
        content_type="application/octet-stream",
        deps=[  # edge order: `after` first, then `deps` (what {"$output": i} counts on)
            pb.Dep(target=ref(key="a"), cond=pb.EDGE_COND_ON_SUCCESS),
            pb.Dep(target=ref(id=7), cond=pb.EDGE_COND_ON_SUCCESS),
            pb.Dep(target=ref(key="b"), cond=pb.EDGE_COND_ON_FAILURE),
        ],
        retry=pb.RetryPolicy(),
        tags={"n": "1", "b": "True", "f": "1.5"},
        start_unix_ns=12,
        resources={"gpu": 2},
    )
    assert http_json.task_spec_from_json({"content_type": "text/plain"}).content_type == "text/plain"
    assert http_json.task_spec_from_json({"payload": None}) == pb.TaskSpec()
