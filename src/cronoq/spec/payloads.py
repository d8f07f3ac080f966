"""Payload encoding: a Python value ↔ bytes plus a content type (docs/reference/behaviour.md#client-worker).

Payloads (and handler outputs) travel as bytes plus a content type:

==================  =================================  ===============================
Python value        bytes                              content type
==================  =================================  ===============================
``None``            empty                              ``""``
bytes-like          as is                              ``application/octet-stream``, or
                                                       its ``content_type`` attribute
``str``             UTF-8                              ``text/plain; charset=utf-8``
anything else       compact UTF-8 JSON                 ``application/json``
==================  =================================  ===============================

Used by the client and worker (``cronoq.client.encoding`` re-exports it) and by the server
(argument substitution): pure Python, no protobuf.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "CONTENT_TYPE_BYTES",
    "CONTENT_TYPE_JSON",
    "CONTENT_TYPE_TEXT",
    "decode_payload",
    "encode_payload",
    "is_json",
    "is_text",
    "parse_json",
]

CONTENT_TYPE_BYTES = "application/octet-stream"
CONTENT_TYPE_TEXT = "text/plain; charset=utf-8"
CONTENT_TYPE_JSON = "application/json"


def encode_payload(value: object) -> tuple[bytes, str]:
    """``(bytes, content_type)`` for a payload or handler output (table in the module doc)."""
    if value is None:
        return b"", ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        if type(value) is bytes:
            return value, CONTENT_TYPE_BYTES
        return bytes(value), getattr(value, "content_type", CONTENT_TYPE_BYTES)
    if isinstance(value, str):
        return value.encode("utf-8"), CONTENT_TYPE_TEXT
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload of type {type(value).__name__} cannot be encoded as JSON: {exc}") from None
    return text.encode("utf-8"), CONTENT_TYPE_JSON


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    """``application/json`` or any ``+json`` media type (parameters ignored)."""
    mt = _media_type(content_type)
    return mt == CONTENT_TYPE_JSON or (mt.startswith("application/") and mt.endswith("+json"))


def is_text(content_type: str) -> bool:
    return _media_type(content_type).startswith("text/")


def decode_payload(data: bytes, content_type: str) -> Any:
    """The Python value for ``(data, content_type)``: JSON → object, ``text/*`` → str,
    empty untyped → None, anything else → bytes."""
    if is_json(content_type):
        return json.loads(data) if data else None
    if is_text(content_type):
        return data.decode("utf-8")
    if not data and not content_type:
        return None
    return bytes(data)


def parse_json(data: bytes, what: str, content_type: str | None = None) -> Any:
    """``data`` parsed as JSON, None when empty (``Lease.json()``, ``Result.json()``).

    Data that is not JSON (e.g. ``cronoq submit hello``, sent as text, or bytes that are no
    UTF-8 text, which ``json.loads`` fails with a UnicodeDecodeError) raises
    ``json.JSONDecodeError``, its message naming ``what`` ("payload",
    "output"), the content type when known and how to read it instead, rather than only
    "Expecting value".
    """
    if not data:
        return None
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        why, doc, pos = e.msg, e.doc, e.pos
    except UnicodeDecodeError as e:  # (bytes that are no text: json.loads decodes them first)
        why, doc, pos = "not UTF-8 text", data.decode("utf-8", "replace"), e.start
    typed = "" if content_type is None else f"content type {content_type or 'none'!r}, "
    msg = f"the {what} is not JSON ({typed}{len(data)} bytes; .text() or .value() read it): {why}"
    raise json.JSONDecodeError(msg, doc, pos) from None
