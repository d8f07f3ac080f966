"""The request framing of a gRPC-Web call, checked before the call runs (docs/how-to/grpc-web.md).

Theory of operation
-------------------
A gRPC-Web request body (every method served is unary or server-streaming: one request
message) is exactly one *data frame*: a flags byte (0: an uncompressed message), a 4-byte
big-endian length and that many bytes of the serialized request; in ``application/grpc-web-text``
the same bytes are base64, possibly as several padded chunks.  sonora, which runs the calls,
reads what it is given leniently: a truncated frame, an empty body or one with bytes after the
frame became an *empty* request (so ``Submit`` created a task with an empty spec), and other
garbage raised deep inside it (HTTP 500).  :func:`check_request` refuses all of them first,
with a :class:`BadFrame` naming what is wrong (HTTP 400, ``grpc-status`` INVALID_ARGUMENT):
the body decodes (base64 in text mode), holds one frame whose flags are 0 and whose length is
exactly what follows, and that payload parses as the method's request message.  Nothing runs
for a refused body.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from typing import Any, Final

from google.protobuf.message import DecodeError

from cronoq.proto.cronoq.v1 import cronoq_pb2 as pb

__all__ = ["BadFrame", "check_request", "request_type"]

_HEADER: Final = struct.Struct(">BI")
#: one base64 chunk of a text-mode body (a chunk may end with its padding)
_CHUNK: Final = re.compile(rb"[^=]+=*|=+")


class BadFrame(ValueError):
    """A gRPC-Web request body that is not exactly one well-formed request frame."""


def request_type(path: str) -> Any:
    """The request message class of method ``path`` (``/cronoq.v1.Tasks/Submit``)."""
    service, _, method = path.removeprefix("/cronoq.v1.").partition("/")
    desc = pb.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    return getattr(pb, desc.input_type.name)


def _decode_text(body: bytes) -> bytes:
    try:
        return b"".join(base64.b64decode(c, validate=True) for c in _CHUNK.findall(body.strip()))
    except (binascii.Error, ValueError):
        raise BadFrame("malformed gRPC-Web body: not base64") from None


def check_request(body: bytes, text: bool, message_type: Any) -> None:
    """Raise :class:`BadFrame` unless ``body`` is exactly one frame of a ``message_type``."""
    raw = _decode_text(body) if text else body
    if not raw:
        raise BadFrame("malformed gRPC-Web body: empty (expected one message frame)")
    if len(raw) < _HEADER.size:
        raise BadFrame(f"malformed gRPC-Web body: truncated frame header ({len(raw)} of 5 bytes)")
    flags, n = _HEADER.unpack_from(raw)
    if flags != 0:
        raise BadFrame(f"malformed gRPC-Web body: unsupported frame flags 0x{flags:02x} (expected 0x00)")
    have = len(raw) - _HEADER.size
    if have < n:
        raise BadFrame(f"malformed gRPC-Web body: truncated frame ({have} of {n} bytes)")
    if have > n:
        raise BadFrame(f"malformed gRPC-Web body: {have - n} bytes after the message frame")
    try:
        message_type.FromString(raw[_HEADER.size :])
    except (DecodeError, RuntimeWarning) as e:
        raise BadFrame(f"malformed gRPC-Web body: not a {message_type.DESCRIPTOR.name} ({e})") from None
