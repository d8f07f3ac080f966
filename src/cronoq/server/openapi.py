"""The OpenAPI 3.0 document of the HTTP/JSON API (``GET /openapi.json``, docs/reference/http.md#conventions).

Theory of operation
-------------------
The document is assembled from two parts that each derive what they can: the paths and their
operations (``openapi_paths``) and the component schemas (``openapi_schemas``): the request
bodies' generated from their pydantic declarations (``http_bodies`` via ``openapi_requests``),
the responses' derived from the protobuf descriptors or written out.  Only the description of
the body limit depends on the server (``app``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cronoq.server.openapi_paths import paths as _paths
from cronoq.server.openapi_schemas import schemas

if TYPE_CHECKING:
    from cronoq.server.app import ServerApp

__all__ = ["openapi_document"]


def openapi_document(app: ServerApp | None = None) -> dict[str, Any]:
    """The OpenAPI 3.0.3 document of the HTTP/JSON API."""
    paths = _paths()
    max_body = app.limits.max_http_body_bytes if app is not None else None
    info_desc = (
        "HTTP/JSON API of `cronoq serve` (its reference: docs/reference/http.md). Ids are decimal "
        'strings; errors are `{"error", "code"}`. Auth: `authorization: Bearer <token>` once any token is '
        "configured. "
        "Request bodies are parsed as JSON whatever their Content-Type. Without auth, state-changing "
        "requests (POST, PUT, DELETE, PATCH) that a browser marks as cross-site are refused (403)."
    )
    if max_body is not None:
        info_desc += f" Bodies are limited to {max_body} bytes."
    return {
        "openapi": "3.0.3",
        "info": {"title": "cronoq", "version": "1", "description": info_desc},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
