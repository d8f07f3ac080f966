"""Signals on the server (docs/how-to/durable.md#signals): the ``Tasks/Signal`` RPC and
``POST /v1/signals/{name}`` share :func:`send_signal`.

Theory of operation
-------------------
A signal's payload arrives as JSON text (the RPC's ``payload_json``, empty is null) or as
the ``payload`` member of the HTTP body (``{"payload": ...}``, an empty body is null) and is
handed to ``Scheduler.signal`` as its JSON value, within the caller's tenant (a token bound
to a tenant signals that tenant's tasks only, as keys are scoped).  A bad name or payload is
``invalid_argument``; a follower answers as for any write.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cronoq.server.app import ApiError
from cronoq.server.ops import _run

if TYPE_CHECKING:
    from cronoq.server.app import ServerApp
    from cronoq.server.auth import Principal

__all__ = ["payload_of", "send_signal"]


def payload_of(payload_json: str) -> object:
    """The payload of JSON text (``""``: null); ``invalid_argument`` when it is not JSON."""
    try:
        return json.loads(payload_json) if payload_json.strip() else None
    except ValueError as e:
        raise ApiError("invalid_argument", f"the signal payload is not JSON: {e}", "invalid") from None


async def send_signal(app: ServerApp, principal: Principal | None, name: str, payload: object) -> bool:
    """Send signal ``name`` with ``payload`` (a JSON value); True when it was a duplicate."""
    sched = app.require_leader()
    tenant = principal.tenant if principal is not None else None
    res = await _run(lambda: sched.signal(name, payload, tenant=tenant))
    return res.duplicate
