"""The HTTP API reference, rendered from the server's own OpenAPI document.

``cronoq.server.openapi.openapi_document()`` is what ``GET /openapi.json`` serves; this module
turns it into Markdown at build time (one section per path and method with its parameters,
request body and responses, then one table per schema), so the page cannot drift from the
server and needs no JavaScript or CDN. :func:`openapi_json` is the same document as the
downloadable ``reference/openapi.json``.
"""

from __future__ import annotations

import json
import re
from typing import Any

_REF = "#/components/schemas/"
METHODS = ("get", "post", "put", "delete", "patch")


def document() -> dict[str, Any]:
    from cronoq.server.openapi import openapi_document

    return openapi_document(None)


def openapi_json() -> str:
    return json.dumps(document(), indent=2, sort_keys=False) + "\n"


def schema_anchor(name: str) -> str:
    return "schema-" + name.lower()


def op_anchor(method: str, path: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
    return f"{method}-{slug}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def type_of(s: dict[str, Any]) -> str:
    """A short, linked, human description of a JSON schema."""
    if "$ref" in s:
        name = s["$ref"].removeprefix(_REF)
        return f"[{name}](#{schema_anchor(name)})"
    for alternatives in ("oneOf", "anyOf"):
        if alternatives in s:
            out = " or ".join(type_of(x) for x in s[alternatives])
            return out + " or null" if s.get("nullable") else out
    if len(s.get("allOf", ())) == 1:
        return type_of(s["allOf"][0])
    t = s.get("type", "any")
    if t == "array":
        items = s.get("items", {})
        several = "oneOf" in items or "anyOf" in items
        out = f"array of ({type_of(items)})" if several else f"array of {type_of(items)}"
    elif t == "object" and "additionalProperties" in s and not s.get("properties"):
        ap = s["additionalProperties"]
        out = "object" if ap is False or ap is True else f"map of string → {type_of(ap)}"
    elif t == "object" and s.get("properties"):
        out = "object {" + ", ".join(f"`{k}`" for k in s["properties"]) + "}"
    else:
        out = f"{t}"
        if "format" in s:
            out += f" ({s['format']})"
    if "enum" in s:
        out += ": " + ", ".join(f"`{v}`" for v in s["enum"])
    bounds = []
    if "minimum" in s:
        bounds.append(f"≥ {s['minimum']}")
    if "maximum" in s:
        bounds.append(f"≤ {s['maximum']}")
    if "minLength" in s:
        bounds.append(f"length ≥ {s['minLength']}")
    if "pattern" in s:
        bounds.append(f"pattern `{s['pattern']}`")
    if bounds:
        out += " (" + ", ".join(bounds) + ")"
    if s.get("nullable"):
        out += " or null"
    return out


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}` {{#{op_anchor(method, path)}}}", "", op.get("summary", ""), ""]
    if op.get("security") == []:
        lines += ["No token needed.", ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            req = "yes" if p.get("required") else "no"
            desc = _cell(p.get("description", ""))
            lines.append(f"| `{p['name']}` | {p['in']} | {_cell(type_of(p['schema']))} | {req} | {desc} |")
        lines.append("")
    body = op.get("requestBody")
    if body:
        for ctype, media in body["content"].items():
            lines += [f"Request body (`{ctype}`): {type_of(media['schema'])}", ""]
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for status, resp in op["responses"].items():
        content = resp.get("content", {})
        shown = "; ".join(f"{type_of(m['schema'])} (`{c}`)" for c, m in content.items()) or "-"
        lines.append(f"| {status} | {_cell(resp.get('description', ''))} | {_cell(shown)} |")
    lines.append("")
    return lines


def _schema(name: str, s: dict[str, Any]) -> list[str]:
    lines = [f"### {name} {{#{schema_anchor(name)}}}", ""]
    if s.get("description"):
        lines += [s["description"], ""]
    props = s.get("properties") or {}
    if not props:
        lines += [f"Type: {type_of(s)}", ""]
        return lines
    required = set(s.get("required", ()))
    lines += ["| field | type | always present | description |", "|---|---|---|---|"]
    for field, fs in props.items():
        req = "yes" if field in required else "no"
        lines.append(f"| `{field}` | {_cell(type_of(fs))} | {req} | {_cell(fs.get('description', ''))} |")
    lines.append("")
    return lines


def render() -> str:
    """The Markdown of the whole reference: the endpoints, then the schemas."""
    doc = document()
    lines = ["## Endpoints", ""]
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                lines += _operation(path, method, item[method])
    lines += [
        "## Schemas",
        "",
        "Response messages are the wire messages of the [gRPC contract](grpc.md) rendered as JSON: "
        "ids as decimal strings, enums as lower-case names, unset optional fields `null`.",
        "",
    ]
    for name, s in doc["components"]["schemas"].items():
        lines += _schema(name, s)
    return "\n".join(lines)
