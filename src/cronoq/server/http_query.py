"""Query parameter names of the HTTP API: an unknown one is refused, not ignored.

Theory of operation
-------------------
``GET /v1/tasks?kinds=...`` used to be silently ignored (the parameter was ``kind``), which
answers a filtered question with unfiltered data.  Every ``/v1/`` route now accepts exactly the
query parameters its OpenAPI operation declares (``openapi_paths.paths``: one source for the
document and the check), plus the plural aliases of the list parameters
(``http_json.QUERY_ALIASES``: ``kinds``, ``pools``, ``statuses``, ``tags``, ``ids``, ``keys``,
the field names of the client and of the bulk filters).  Anything else is 400
``invalid_argument`` naming the parameter, the closest known name (``did you mean 'kind'?``)
and the route's parameters.

:func:`with_query_check` wraps the endpoints of a route table once, when the app is built;
a request without a query string costs one dictionary lookup.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Awaitable, Callable
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cronoq.server.http_json import QUERY_ALIASES, error_response
from cronoq.server.openapi_paths import paths

__all__ = ["allowed_params", "unknown_param_message", "with_query_check"]

Endpoint = Callable[[Request], Awaitable[Response]]

_CONVERTER: Final = re.compile(r"\{(\w+):\w+\}")


def allowed_params() -> dict[tuple[str, str], frozenset[str]]:
    """(OpenAPI path, METHOD) → the query parameters it takes, with the plural aliases of its
    list parameters."""
    out: dict[tuple[str, str], frozenset[str]] = {}
    for path, ops in paths().items():
        for method, op in ops.items():
            query = [p for p in op.get("parameters", ()) if p["in"] == "query"]
            names = {p["name"] for p in query}
            lists = {p["name"] for p in query if p["schema"].get("type") == "array"}
            names |= {alias for alias, name in QUERY_ALIASES.items() if name in lists}
            out[(path, method.upper())] = frozenset(names)
    return out


def unknown_param_message(name: str, allowed: frozenset[str], where: str) -> str:
    """``unknown query parameter 'knd' (did you mean 'kind'?); GET /v1/tasks takes: ...``."""
    close = difflib.get_close_matches(name, sorted(allowed), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    canonical = sorted(n for n in allowed if n not in QUERY_ALIASES)
    takes = f"takes: {', '.join(canonical)}" if canonical else "takes no query parameters"
    return f"unknown query parameter {name!r}{hint}; {where} {takes}"


def _checked(endpoint: Endpoint, allowed: frozenset[str], where: str) -> Endpoint:
    async def run(request: Request) -> Response:
        if request.scope.get("query_string"):
            for name in request.query_params:
                if name not in allowed:
                    message = unknown_param_message(name, allowed, where)
                    return error_response(400, message, "invalid_argument")
        return await endpoint(request)

    run.__name__ = getattr(endpoint, "__name__", "endpoint")
    return run


def with_query_check(routes: list[BaseRoute]) -> list[BaseRoute]:
    """``routes`` with every API route refusing the query parameters it does not declare (the
    others, e.g. the dashboard's files, unchanged)."""
    table = allowed_params()
    out: list[BaseRoute] = []
    for r in routes:
        if isinstance(r, Route):
            path = _CONVERTER.sub(r"{\1}", r.path)
            methods = [m for m in sorted(r.methods or ()) if m != "HEAD"]
            allowed = next((table[(path, m)] for m in methods if (path, m) in table), None)
            # (the API only: /metrics and the probes may get a scraper's or balancer's own)
            if allowed is not None and path.startswith("/v1/"):
                where = f"{'/'.join(methods)} {path}"
                out.append(type(r)(r.path, _checked(r.endpoint, allowed, where), methods=methods))
                continue
        out.append(r)
    return out
