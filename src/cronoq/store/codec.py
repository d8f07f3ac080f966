"""Codecs: how payloads and outputs become bytes for a durable store (docs/reference/behaviour.md#stores).

A codec is any object with ``encode(obj) -> bytes`` and ``decode(bytes) -> obj``.  The default,
:class:`JsonCodec`, writes compact UTF-8 JSON and decodes with :func:`json.loads`, which never
runs code (unlike pickle).  JSON has no tuples, sets or bytes: a tuple comes back as a list,
and anything else it cannot represent is refused at submission, not at recovery.

A codec signals a value it cannot encode (or bytes it cannot decode) with :class:`CodecError`;
the runtime turns an encode failure at submission into ``SubmitError("invalid", ...)`` and a
store turns a decode failure at recovery into a quarantined row.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from cronoq.errors import CronoqError

__all__ = ["Codec", "CodecError", "JsonCodec"]


class CodecError(CronoqError, ValueError):
    """A value could not be encoded, or stored bytes could not be decoded."""


@runtime_checkable
class Codec(Protocol):
    """Turns payloads/outputs into bytes and back. Must be safe to call from a store's thread."""

    def encode(self, obj: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


class JsonCodec:
    """Compact UTF-8 JSON (``separators=(",", ":")``, no NaN/Infinity); decoding never runs code."""

    __slots__ = ("_decoder", "_encoder")

    def __init__(self) -> None:
        self._encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self._decoder = json.JSONDecoder()

    def encode(self, obj: Any) -> bytes:
        try:
            return self._encoder.encode(obj).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            raise CodecError(f"value cannot be encoded as JSON: {e}") from None

    def decode(self, data: bytes) -> Any:
        try:
            text = bytes(data).decode("utf-8")
            return self._decoder.decode(text)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise CodecError(f"stored value is not valid JSON: {e}") from None

    def __repr__(self) -> str:
        return "JsonCodec()"
