"""Placeholders on the server: a lease's payload gets its parents' outputs before it is sent
(docs/concepts/dependencies.md#outputs-on-edges).

A named task's JSON payload may hold markers ``{"$output": i}`` / ``{"$outcome": i}``
(:mod:`cronoq.tasks.placeholders`); the server replaces them with the outputs (JSON blobs) of
the attempt's parents before the lease leaves, so every worker - the published one too -
receives plain arguments.  A parent output that is not JSON, or a substituted payload over
``limits.max_message_bytes``, fails the child permanently with the reason; nothing else is
affected.  Payloads without a marker are sent as they are (a byte search, no parse).  A marker
naming no edge is refused when the task is submitted (:func:`check_markers`), not when it runs.

A worker of protocol version 6 also gets the parents' outcomes (``Lease.parents``) with their
outputs, as far as they fit in the lease beside the payload (an output that does not is sent
without it, ``has_output`` false). A live task's detail (``TaskInfo.arguments``) says which
argument comes from which parent (:func:`add_arguments`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cronoq.errors import Permanent
from cronoq.outcome import Outcome
from cronoq.server.workers import Blob
from cronoq.spec.payloads import CONTENT_TYPE_BYTES, is_json
from cronoq.tasks.placeholders import no_edge_message, substitute

__all__ = ["add_arguments", "check_markers", "for_lease", "for_replay", "substituted"]

_RAW = ("", CONTENT_TYPE_BYTES)

#: bytes kept free in a lease for its other fields and framing
_MARGIN = 1024


def _plain(o: Outcome) -> Outcome:
    """The outcome with its output blob as the JSON value it holds (else left as the blob).

    A named task's worker returns its JSON result as plain bytes: untyped or
    ``application/octet-stream`` bytes count as JSON when they parse."""
    out = o.output
    if isinstance(out, Blob) and (is_json(out.content_type) or out.content_type in _RAW):
        if not out.data:
            return replace(o, output=None)
        try:
            return replace(o, output=json.loads(out.data))
        except ValueError:
            return o
    return o


#: what :func:`_marked` answers for a payload that holds no marker
_UNMARKED: Any = object()


def _marked(data: bytes, content_type: str) -> Any:
    """The JSON value of payload ``data`` when it may hold a marker, else :data:`_UNMARKED` (a
    byte search first: a payload without a marker is not parsed)."""
    if (b'"$output"' not in data and b'"$outcome"' not in data) or not is_json(content_type):
        return _UNMARKED
    try:
        return json.loads(data)
    except ValueError:
        return _UNMARKED


def substituted(data: bytes, content_type: str, parents: tuple[Outcome, ...], kind: str, limit: int) -> bytes:
    """``data`` with its markers replaced (see the module docstring); Permanent on failure."""
    if not parents or (payload := _marked(data, content_type)) is _UNMARKED:
        return data
    out = substitute(payload, tuple(map(_plain, parents)), kind)
    new = json.dumps(out, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    if len(new) > limit:
        ids = ", ".join(str(o.id) for o in parents)
        raise Permanent(
            f"task '{kind}': its payload with the outputs of parent(s) {ids} substituted is {len(new)} bytes,"
            f" over the server's limits.max_message_bytes ({limit})"
        )
    return new


def for_replay(limit: int) -> Callable[[object, tuple[Outcome, ...], str], object]:
    """How a replay's payload takes its original's parents' outputs on the server (a replay
    carries no edges, so its markers are filled when it is made: ``Operations._payload``)."""

    def fill(payload: object, parents: tuple[Outcome, ...], kind: str) -> object:
        if not isinstance(payload, Blob):
            return payload
        data = substituted(payload.data, payload.content_type, parents, kind, limit)
        return payload if data is payload.data else Blob(data, payload.content_type)

    return fill


def for_lease(
    blob: Blob, parents: tuple[Outcome, ...], kind: str, limit: int
) -> tuple[Blob, tuple[Outcome, ...]]:
    """The payload to send (substituted) and the parents to send with it (outputs that fit)."""
    data = substituted(blob.data, blob.content_type, parents, kind, limit)
    room = limit - len(data) - _MARGIN
    sent = []
    for o in parents:
        out = o.output
        size = len(out.data) + len(out.content_type) if isinstance(out, Blob) else 0
        if size > room:
            o = replace(o, output=None)
        else:
            room -= size
        sent.append(o)
    return (blob if data is blob.data else Blob(data, blob.content_type)), tuple(sent)


def _markers(value: object, path: str, out: list[tuple[str, str, int]], depth: int = 0) -> None:
    tp = type(value)
    if tp is dict:
        d: Any = value
        if len(d) == 1:
            ((k, v),) = d.items()
            if k in ("$output", "$outcome") and type(v) is int:
                out.append((path, k[1:], v))
                return
        if depth < 100:
            for k, v in d.items():
                _markers(v, f"{path}.{k}" if path else str(k), out, depth + 1)
    elif tp is list and depth < 100:
        for i, v in enumerate(value):  # type: ignore[arg-type]
            _markers(v, f"{path}[{i}]", out, depth + 1)


def check_markers(data: bytes, content_type: str, edges: int, kind: str) -> str | None:
    """Why the JSON payload ``data`` of a task with ``edges`` dependency edges cannot be
    substituted when it runs: a marker naming no edge (None: it can).  Checked at submission
    (``convert.submission``), so a bad HTTP or gRPC payload is refused before anything is
    submitted instead of failing the child when it runs; a payload without a marker is not
    parsed, and without edges a marker is data (nothing is substituted)."""
    if not edges or (value := _marked(data, content_type)) is _UNMARKED:
        return None
    found: list[tuple[str, str, int]] = []
    _markers(value, "", found)
    for _path, mode, edge in found:
        if not 0 <= edge < edges:
            return f"{no_edge_message(kind, '$' + mode, edge)} (it has {edges})"
    return None


def add_arguments(info: Any, payload: Blob, parents: list[int]) -> None:
    """``info.arguments``: the placeholders of ``payload``, each with the parent of its edge."""
    data = payload.data
    if not parents or (b'"$output"' not in data and b'"$outcome"' not in data):
        return
    try:
        value = json.loads(data)
    except ValueError:
        return
    found: list[tuple[str, str, int]] = []
    _markers(value, "", found)
    for path, mode, edge in found:
        a = info.arguments.add(path=path, mode=mode, edge=edge)
        if 0 <= edge < len(parents):
            a.task_id = parents[edge]
