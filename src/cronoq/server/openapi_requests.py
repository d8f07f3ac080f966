"""The OpenAPI request schemas, generated from the request body declarations (``http_bodies``).

Theory of operation
-------------------
pydantic writes each body's JSON Schema (its validation side: what is accepted) with the
references pointing into ``#/components/schemas``; the schemas of the types it references
(``RetryPolicy``, ``Dep``, ``TaskTemplate``, ...) come with it and are collected under their
names.  pydantic writes JSON Schema 2020-12, the document is OpenAPI 3.0, so :func:`oas30`
rewrites the few constructs 3.0 lacks: ``{"type": "null"}`` in an ``anyOf`` becomes
``nullable``, ``const`` an ``enum``, and the titles and ``null`` defaults pydantic adds go.

The result is computed once (it depends on nothing but the declarations).
"""

from __future__ import annotations

import functools
from typing import Any, Final

from pydantic import TypeAdapter

from cronoq.server import http_bodies as bodies

__all__ = ["REQUEST_BODIES", "oas30", "request_schemas"]

REF_TEMPLATE: Final = "#/components/schemas/{model}"
#: component name → the declaration of the request body
REQUEST_BODIES: Final[dict[str, Any]] = {
    "TaskSpec": bodies.TaskSpec,
    "SubmitBatchRequest": bodies.SubmitBatchRequest,
    "RecurringRequest": bodies.RecurringRequest,
    "ReplayRequest": bodies.ReplayRequest,
    "BulkRequest": bodies.BulkRequest,
    "SignalRequest": bodies.SignalRequest,
}


def _nullable(members: list[Any], rest: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, {"type": "null"}]`` as 3.0 says it: ``X`` with ``nullable`` (a reference
    is left as it is: a nullable ``allOf`` does not admit null in 3.0, and null = absent)."""
    others = [m for m in members if m != {"type": "null"}]
    if len(others) != 1:
        return {**rest, "anyOf": others, "nullable": True}
    (only,) = others
    if "$ref" in only:
        return {**rest, "allOf": [only]} if rest else only
    return {**only, **rest, "nullable": True}


def oas30(schema: Any) -> Any:
    """A pydantic JSON Schema (2020-12) as an OpenAPI 3.0 schema object (see the module doc)."""
    if isinstance(schema, list):
        return [oas30(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k == "title" or (k == "default" and v is None):
            continue
        if k == "properties":
            out[k] = {name: oas30(s) for name, s in v.items()}
        elif k == "const":
            out["enum"] = [v]
        else:
            out[k] = oas30(v)
    members = out.get("anyOf")
    if isinstance(members, list) and {"type": "null"} in members:
        rest = {k: v for k, v in out.items() if k != "anyOf"}
        return _nullable(members, rest)
    return out


@functools.cache
def _generated() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, body in REQUEST_BODIES.items():
        schema = TypeAdapter(body).json_schema(ref_template=REF_TEMPLATE)
        for ref, sub in schema.pop("$defs", {}).items():
            out[ref] = oas30(sub)
        out[name] = oas30(schema)
    return out


def request_schemas() -> dict[str, Any]:
    """Every request body's schema and the schemas they reference, by component name."""
    return {k: dict(v) for k, v in _generated().items()}
