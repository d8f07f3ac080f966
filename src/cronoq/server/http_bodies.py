"""The request bodies of the HTTP API as pydantic models (docs/reference/http.md).

Theory of operation
-------------------
Every JSON body a route accepts is declared here once, and both the parsing (``http_json``,
``ops.bulk_from_json``) and the OpenAPI request schemas (``openapi_requests``) come from these
declarations, so what is documented is what is accepted.

* :data:`TaskSpec` (a ``TypedDict``, see :func:`_task_body`) is built from the task-field
  table (``spec.fields``): one ``Annotated`` type per value shape (``http_values``)
  and a field per task field, plus the payload fields; :data:`TaskTemplate` (a recurring
  schedule's task) is the same without the fields a fixed start makes meaningless.  The
  fields are declared in the order the API has always checked them, since the first error in
  that order is the one reported.
* Every model refuses unknown fields (``extra="forbid"``); values are strict (no ``"1"`` for a
  number) and come out as wire values (enum numbers, ``Dep``/``TaskRef`` messages, bytes), so a
  validated task body becomes a ``TaskSpec`` with one constructor call.
* The validators are built once, at import (the models' own, and :data:`TASK_SPEC` /
  :data:`TASK_TEMPLATE` for the task bodies); a request only calls them.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, TypeAdapter
from typing_extensions import TypedDict

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb
from cronoq.server import http_values as v
from cronoq.server.body_errors import custom
from cronoq.spec import fields as task_fields

__all__ = [
    "NOT_IN_TEMPLATE",
    "TASK_FIELDS",
    "TASK_SPEC",
    "TASK_TEMPLATE",
    "PAYLOAD_FIELDS",
    "REQUEST_MODELS",
    "SHAPE_TYPES",
    "BulkRequest",
    "RecurringRequest",
    "ReplayRequest",
    "RetryPolicy",
    "SubmitBatchRequest",
    "TaskSpec",
    "TaskFilter",
    "TaskTemplate",
]

_FORBID: Final = ConfigDict(extra="forbid")

#: the JSON names of the payload fields (not task fields: the payload is not in the table)
PAYLOAD_FIELDS: Final = ("payload", "payload_base64", "content_type")
#: task fields that make no sense in a recurring template (each occurrence is a fixed start).
NOT_IN_TEMPLATE: Final = ("start_in_s", "start_unix_ns", "deadline_unix_ns", "deps", "after")


def _retry_wire(r: RetryPolicy) -> pb.RetryPolicy:
    return pb.RetryPolicy(**{k: x for k, x in r.__dict__.items() if x is not None})


class RetryPolicy(BaseModel):
    """absent = the pool's policy; a zero field means its default (3, 1.0, 2.0, 60.0)"""

    model_config = ConfigDict(extra="forbid")
    max_attempts: v.Attempts | None = None
    initial_backoff_s: v.Seconds | None = None
    multiplier: v.Seconds | None = None
    max_backoff_s: v.Seconds | None = None
    jitter: Annotated[bool, Field(strict=True)] | None = None


#: a string field (strict: no number for a string).  A lone surrogate, which protobuf refuses,
#: is refused when the ``TaskSpec`` is built, after every other field (checking it here
#: would cost a Python call per string on the submit path).
String: Final = Annotated[str, Field(strict=True)]

#: the type of a task field's JSON value, by its shape (spec.fields)
SHAPE_TYPES: Final[dict[str, Any]] = {
    "string": String | None,
    "priority": v.Priority,
    "on_miss": v.OnMiss,
    "seconds": v.Seconds | None,
    "unix_ns": v.UnixNs,
    "retry": Annotated[RetryPolicy, AfterValidator(_retry_wire)] | None,
    "deps": v.Deps | None,
    "after": v.After,
    "resources": Annotated[dict[str, v.ResourceUnits], Field(strict=True)] | None,
    "str_map": v.StrMap,
}
#: the order the fields are checked in (and so which error of several is reported)
_SHAPE_ORDER: Final = tuple(SHAPE_TYPES)


def _task_body(name: str, doc: str, leave_out: tuple[str, ...] = ()) -> Any:
    """A task body: the payload fields and every task field of the table but ``leave_out``.

    A ``TypedDict`` rather than a ``BaseModel``: validating it gives a dict of the fields
    present, already ``TaskSpec`` keyword arguments, at a third of the cost of a model instance
    with twenty defaults (the submit hot path)."""
    fields: dict[str, Any] = {"content_type": String, "payload_base64": v.Base64, "payload": v.Payload}
    for shape in _SHAPE_ORDER:
        for f in task_fields.of_shape(shape):  # type: ignore[arg-type]
            if f.json not in leave_out:
                fields[f.json] = SHAPE_TYPES[shape]
    body: Any = cast(Any, TypedDict)(name, fields, total=False)
    body.__doc__ = doc
    body.__pydantic_config__ = _FORBID
    return body


TaskSpec: Final = _task_body(
    "TaskSpec",
    "Task fields (proto TaskSpec names); `payload` is any JSON value (sent as application/json), "
    "or `payload_base64` with `content_type` (not both).",
)
TaskTemplate: Final = _task_body(
    "TaskTemplate",
    "A recurring schedule's task: the task fields but those of a fixed start "
    f"({', '.join(NOT_IN_TEMPLATE)}).",
    NOT_IN_TEMPLATE,
)
#: their validators, built once
TASK_SPEC: Final = TypeAdapter(TaskSpec)
TASK_TEMPLATE: Final = TypeAdapter(TaskTemplate)
#: the JSON names of a task body's fields (the task fields of the table and the payload's)
TASK_FIELDS: Final = frozenset(TaskSpec.__annotations__)


class SubmitBatchRequest(BaseModel):
    """`POST /v1/tasks:batch`: the tasks, submitted atomically."""

    model_config = ConfigDict(extra="forbid")
    tasks: list[TaskSpec]  # type: ignore[valid-type]


class RecurringRequest(BaseModel):
    """`PUT /v1/recurring/{name}`: a schedule and its task template."""

    model_config = ConfigDict(extra="forbid")
    name: StrictStr | None = Field(None, description="optional; must equal the path's name")
    cron: Annotated[StrictStr, AfterValidator(lambda s: _not_blank(s)), Field(min_length=1)]
    tz: StrictStr | None = Field(None, description="IANA time zone (default UTC)")
    overlap: v.Overlap = None
    tolerance_s: v.Seconds | None = None
    on_miss: v.OnMiss = None
    task: TaskTemplate | None = None  # type: ignore[valid-type]


def _not_blank(s: str) -> str:
    if not s.strip():
        raise custom("must not be empty")
    return s


class ReplayRequest(BaseModel):
    """`POST /v1/tasks/{ref}/replay` (optional body)."""

    model_config = ConfigDict(extra="forbid")
    force: Annotated[bool, Field(strict=True, description="also replay a succeeded task")] = False


class SignalRequest(BaseModel):
    """`POST /v1/signals/{name}` (optional body)."""

    model_config = ConfigDict(extra="forbid")
    payload: Annotated[Any, Field(description="any JSON value (absent: null)")] = None


class TaskFilter(BaseModel):
    """every criterion given must hold; at least one is required"""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})
    pools: v.Names = None
    statuses: v.Statuses = None
    kinds: v.Names = None
    tags: v.StrValues = None
    tenant: v.FilterString = None
    created_after: v.Instant = None
    created_before: v.Instant = None
    finished_after: v.Instant = None
    finished_before: v.Instant = None
    limit: v.Limit = None


class BulkRequest(BaseModel):
    """`POST /v1/tasks:replay` / `POST /v1/tasks:cancel`."""

    model_config = ConfigDict(extra="forbid")
    filter: TaskFilter
    request_key: Annotated[v.RequestKey, Field(description="a retry with it answers the first result")] = ""
    force: Annotated[
        v.Force, Field(description="tasks:replay: also succeeded tasks and tasks that already have a replay")
    ] = False


#: every request body model (their schemas are the OpenAPI request schemas)
REQUEST_MODELS: Final[tuple[type[BaseModel], ...]] = (
    TaskSpec,
    SubmitBatchRequest,
    RecurringRequest,
    ReplayRequest,
    BulkRequest,
)
