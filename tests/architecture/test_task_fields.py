"""Every surface agrees with the one declaration of the task fields (cronoq.spec.fields).

The surfaces: the in-process options (``make_options``, ``Task``), the behaviour reference's
table, the wire ``TaskSpec``, the client's spec builder, the server's gRPC conversion, the HTTP
JSON parser, the OpenAPI request schema and ``cronoq submit``.  Where a surface derives from the
declaration this pins the derivation; where it still spells fields out by hand (the client's and
the server's converters, the CLI's options) a sample value of every field is sent through it and
must arrive under the declared name.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from tests.docs.conftest import DOCS

from cronoq.engine.model import Dep, RetryPolicy, TaskOptions
from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.runtime.task import Task
from cronoq.spec import fields as task_fields
from cronoq.spec.fields import TASK_FIELDS, TaskField
from cronoq.spec.submission import Submission
from cronoq.spec.validate import PER_TASK_FIELDS, make_options

FIELDS = {f.name: f for f in TASK_FIELDS}
RETRY = RetryPolicy(max_attempts=5, initial_backoff=0.5, multiplier=3.0, max_backoff=9.0, jitter=False)

#: field → (in-process value, the same in an HTTP JSON body)
SAMPLES: dict[str, tuple[Any, Any]] = {
    "pool": ("p", "p"),
    "kind": ("resize", "resize"),
    "priority": ("high", "high"),
    "key": ("k1", "k1"),
    "deadline_in": (5.0, 5.0),
    "deadline_at": (1_700_000_000, "1700000000000000000"),
    "start_in": (3.0, 3.0),
    "start_at": (1_700_000_100, 1_700_000_100_000_000_000),
    "tolerance": (2.0, 2.0),
    "on_miss": ("skip", "skip"),
    "duration_hint": (1.5, 1.5),
    "timeout": (4.0, 4.0),
    "retry": (
        RETRY,
        {
            "max_attempts": 5,
            "initial_backoff_s": 0.5,
            "multiplier": 3.0,
            "max_backoff_s": 9.0,
            "jitter": False,
        },
    ),
    "after": ("parent", "parent"),
    "deps": ([Dep("p2", on="failure")], [{"target": "p2", "cond": "failure"}]),
    "resources": ({"gpu": 2}, {"gpu": 2}),
    "tags": ({"a": "b"}, {"a": "b"}),
    "labels": ({"zone": "x"}, {"zone": "x"}),
    "tenant": ("acme", "acme"),
}
#: what each field becomes after the wire (in-process names): ``after`` arrives as edges
ARRIVES_AS = {"after": "deps"}


def _server() -> Any:
    pytest.importorskip("starlette")
    from cronoq.server import convert, http_json
    from cronoq.server.config import LimitsConfig

    return convert, http_json, LimitsConfig()


def test_the_declaration_is_well_formed() -> None:
    assert len(FIELDS) == len(TASK_FIELDS)
    assert set(SAMPLES) == set(FIELDS)  # (a new field needs a sample here)
    assert task_fields.names() == set(FIELDS)
    assert task_fields.by_name("timeout").wire == "timeout_s"
    with pytest.raises(KeyError):
        task_fields.by_name("payload")


def test_in_process_options_and_per_task_fields() -> None:
    params = inspect.signature(make_options).parameters
    options = [f for f in TASK_FIELDS if f.option]
    assert list(params) == [f.name for f in options]
    for f in options:
        assert params[f.name].annotation == f"{f.type} | None", f.name
        assert params[f.name].default is None, f.name
    assert task_fields.names(option=False) == PER_TASK_FIELDS
    for name, (value, _) in SAMPLES.items():
        Task(None, **{name: value})  # every field is accepted in-process


def _table_rows() -> dict[str, str]:
    """field name → default, from the task-fields table of docs/reference/behaviour.md."""
    text = (DOCS / "reference" / "behaviour.md").read_text(encoding="utf-8")
    section = text[text.index("## Task fields {#task-fields}") :]
    rows: dict[str, str] = {}
    for line in section.splitlines()[4:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        for name in re.findall(r"`([a-z_]+)`", cells[0]):
            rows[name] = cells[1]
    return rows


def test_the_behaviour_reference_lists_every_field_with_its_default() -> None:
    rows = _table_rows()
    assert set(rows) == set(FIELDS) | {"payload"}
    for f in TASK_FIELDS:
        assert rows[f.name] == f.default, f.name


def test_every_wire_field_of_a_task_spec_is_declared() -> None:
    wire = {fd.name for fd in pb.TaskSpec.DESCRIPTOR.fields}
    assert {f.wire for f in TASK_FIELDS} == wire - {"payload", "content_type"}


def _client_spec(name: str) -> pb.TaskSpec:
    from cronoq.client import encoding

    return encoding.build_spec(None, **{name: SAMPLES[name][0]})


@pytest.mark.parametrize("field", TASK_FIELDS, ids=lambda f: f.name)
def test_the_client_sends_each_field_in_its_wire_field(field: TaskField) -> None:
    from cronoq.client import encoding

    assert task_fields.names() | {"content_type"} == encoding.TASK_FIELDS
    spec = _client_spec(field.name)
    assert [fd.name for fd, _ in spec.ListFields()] == [field.wire]


def _normal(name: str, fields: dict[str, Any]) -> Any:
    """What the scheduler makes of ``fields`` for field ``name`` (comparable)."""
    return _normal_of(name, Task(None, **fields).submission)


def _normal_of(name: str, sub: Submission) -> Any:
    if FIELDS[name].option:
        opts = sub.options()
        return tuple(_plain(getattr(opts, s)) for s in TaskOptions.__slots__ if s != "resolver")
    return (sub.key, sub.deadline, sub.start, sub.deps)


def _plain(v: Any) -> Any:
    if isinstance(v, RetryPolicy):
        return tuple(getattr(v, s) for s in RetryPolicy.__slots__)
    return v


@pytest.mark.parametrize("field", TASK_FIELDS, ids=lambda f: f.name)
def test_the_grpc_conversion_gives_back_each_field(field: TaskField) -> None:
    convert, _, limits = _server()
    sub = convert.submission(_client_spec(field.name), limits)
    arrives = ARRIVES_AS.get(field.name, field.name)
    given = {f for f in Submission._fields if f != "payload" and getattr(sub, f) is not None}
    assert given == {_ATTRIBUTE.get(arrives, arrives)}
    assert _normal_of(field.name, sub) == _normal(field.name, {field.name: SAMPLES[field.name][0]})


#: the Submission attribute that holds a field
_ATTRIBUTE = {
    "deadline_in": "deadline",
    "deadline_at": "deadline",
    "start_in": "start",
    "start_at": "start",
}


@pytest.mark.parametrize("field", TASK_FIELDS, ids=lambda f: f.name)
def test_the_http_body_sets_each_field_as_the_client_does(field: TaskField) -> None:
    _, http_json, limits = _server()
    assert {f.json for f in TASK_FIELDS} | set(http_json.PAYLOAD_FIELDS) == http_json.TASK_FIELDS
    spec = http_json.task_spec_from_json({field.json: SAMPLES[field.name][1]}, limits=limits)
    assert spec == _client_spec(field.name)


def test_the_http_body_declaration_has_a_field_of_its_shape_for_each() -> None:
    _server()
    from cronoq.server import http_bodies

    declared = http_bodies.TaskSpec.__annotations__
    for f in TASK_FIELDS:
        assert declared[f.json] is http_bodies.SHAPE_TYPES[f.shape], f.name


def test_the_openapi_task_spec_schema_has_every_field() -> None:
    _, http_json, _ = _server()
    from cronoq.server.openapi import openapi_document

    props = openapi_document()["components"]["schemas"]["TaskSpec"]["properties"]
    assert set(props) == http_json.TASK_FIELDS
    for f in TASK_FIELDS:  # one schema per shape
        for g in task_fields.of_shape(f.shape):
            assert props[f.json] == props[g.json]
    assert props["timeout_s"]["description"] == "seconds"
    assert props["deadline_unix_ns"]["anyOf"][0]["format"] == "int64"


#: ``cronoq submit`` options that are not task fields
NOT_TASK_FIELDS = {
    "--server",
    "--token",
    "--tls",
    "--payload-file",
    "--content-type",
    "--task",
    "--args",
    "--kwargs",
    "--app",
    "--app-dir",
    "--wait",
    "--wait-timeout",
    "--json",
}


def test_cronoq_submit_has_the_declared_options() -> None:
    pytest.importorskip("click")
    from cronoq.cli import cli

    command = cli.commands["submit"]
    opts = {o for p in command.params for o in getattr(p, "opts", ()) if o.startswith("--")}
    declared = {f.cli for f in TASK_FIELDS if f.cli is not None}
    assert declared <= opts, sorted(declared - opts)
    assert opts - declared == NOT_TASK_FIELDS  # a new option for a task field is declared too
